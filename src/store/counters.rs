//! Counter values of calls (hardware counters such as PAPI's), stored only for traces that
//! recorded counters, in blobs of their own, so that a trace without counters stores nothing
//! more and segments written before them read unchanged:
//!
//! | key | value |
//! |---|---|
//! | `K` | the trace's [`Metric`] definitions, in column order |
//! | `k` table chunk piece | counter values of some rows of one operation or routine-call chunk |
//!
//! A piece is a [`Columns`] chunk: column 0 the rows' ids (an operation's id, a routine call's
//! position), then one column per metric holding `zigzag(value) + 1`, 0 where the row has no
//! value. The import writes a chunk's pieces in row order as its buffer fills, so that its
//! memory stays bounded whatever the number of locations; a chunk's pieces are read back
//! together ([`super::TraceReader::counters`]), or a window of rows at a time
//! ([`super::TraceReader::counter_stream`]) by readers that hold many chunks open at once.

use super::codec::{unzigzag, zigzag};
use super::tables::{ChunkStream, Columns};
use crate::error::{Error, Result};
use crate::model::Metric;

/// The key byte of the metric definitions.
pub(super) const KEY_METRICS: u8 = b'K';
/// The key byte of the counter pieces.
pub(super) const KEY_COUNTERS: u8 = b'k';

/// A call's values, one per counter of its trace (`None`: no sample of it).
pub type CallValues = Box<[Option<i64>]>;

/// A stored value as the call's (0 is none).
fn value_of(stored: u64) -> Option<i64> {
    (stored != 0).then(|| unzigzag(stored - 1))
}

/// Counter values of rows, as the import collects them for one chunk.
#[derive(Debug, Clone)]
pub struct CounterRows {
    cols: Columns,
}

impl CounterRows {
    /// No rows, for `metrics` counters.
    pub fn new(metrics: usize) -> CounterRows {
        CounterRows {
            cols: Columns::new(metrics + 1),
        }
    }

    /// Appends the values of row `id`, one per counter (extra values are ignored, missing
    /// ones have none).
    pub fn push(&mut self, id: u64, values: &[Option<i64>]) {
        self.cols.cols[0].push(id);
        for (i, col) in self.cols.cols[1..].iter_mut().enumerate() {
            let v = values.get(i).copied().flatten();
            col.push(v.map_or(0, |v| zigzag(v).wrapping_add(1)));
        }
        self.cols.rows += 1;
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.cols.rows
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.cols.rows == 0
    }

    /// The piece's stored bytes.
    pub(super) fn encode(&self) -> Vec<u8> {
        self.cols.encode()
    }
}

/// The counter values of one chunk's rows.
#[derive(Debug, Clone, Default)]
pub struct ChunkCounters {
    /// The rows' ids, ascending.
    ids: Vec<u64>,
    /// Per counter, per row: the stored value (0 for none).
    values: Vec<Vec<u64>>,
}

impl ChunkCounters {
    /// Joins the pieces of a chunk (their bodies, checked) of a trace with `metrics` counters.
    pub(super) fn decode(pieces: &[(Vec<u8>, String)], metrics: usize) -> Result<ChunkCounters> {
        let mut out = ChunkCounters {
            ids: Vec::new(),
            values: vec![Vec::new(); metrics],
        };
        for (body, what) in pieces {
            let c = Columns::decode(body, metrics + 1, what)?;
            out.ids.extend_from_slice(&c.cols[0]);
            for (to, from) in out.values.iter_mut().zip(&c.cols[1..]) {
                to.extend_from_slice(from);
            }
        }
        if out.ids.windows(2).any(|w| w[0] >= w[1]) {
            let what = pieces.first().map_or("", |p| p.1.as_str());
            return Err(Error::Corrupt(format!("{what}: counter rows out of order")));
        }
        Ok(out)
    }

    /// The value of counter `metric` of row `id`, if it has one.
    pub fn get(&self, id: u64, metric: usize) -> Option<i64> {
        let row = self.ids.binary_search(&id).ok()?;
        value_of(*self.values.get(metric)?.get(row)?)
    }

    /// The values of row `id`, one per counter (all `None` when it has none).
    pub fn values(&self, id: u64) -> CallValues {
        let row = self.ids.binary_search(&id).ok();
        self.values
            .iter()
            .map(|col| row.and_then(|r| col.get(r)).and_then(|&v| value_of(v)))
            .collect()
    }

    /// The number of rows with values.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no row has values.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// The counter values of one chunk's rows, read forward a window of rows at a time: its
/// pieces are kept as stored (a few bytes per value) and each window decodes only its rows,
/// so that a reader holding many chunks open (a merge of every location by time) holds a
/// window of values per chunk, not the chunk's.
#[derive(Debug)]
pub struct CounterStream {
    metrics: usize,
    /// The pieces not read yet, in row order.
    pieces: std::vec::IntoIter<ChunkStream>,
    /// The piece being read.
    piece: Option<ChunkStream>,
    /// Its decoded window (ids, then a column per counter), and the next row of it to look at.
    window: Columns,
    at: usize,
}

impl CounterStream {
    /// The stream over a chunk's pieces (their bodies, checked) of a trace with `metrics`
    /// counters.
    pub(super) fn open(pieces: &[(Vec<u8>, String)], metrics: usize) -> Result<CounterStream> {
        let ncols = metrics + 1;
        let wanted: Vec<usize> = (0..ncols).collect();
        let pieces = pieces
            .iter()
            .map(|(body, what)| ChunkStream::open(body, ncols, &wanted, 0, what))
            .collect::<Result<Vec<_>>>()?;
        Ok(CounterStream {
            metrics,
            pieces: pieces.into_iter(),
            piece: None,
            window: Columns::new(ncols),
            at: 0,
        })
    }

    /// The values of row `id`, one per counter (all `None` when it has none), reading
    /// `window` rows at a time. Rows must be asked for in ascending order of id.
    pub fn values(&mut self, id: u64, window: usize) -> Result<CallValues> {
        loop {
            let ids = &self.window.cols[0];
            while self.at < ids.len() && ids[self.at] < id {
                self.at += 1;
            }
            if let Some(&found) = ids.get(self.at) {
                let row = self.at;
                return Ok((1..=self.metrics)
                    .map(|c| {
                        (found == id)
                            .then(|| value_of(self.window.cols[c][row]))
                            .flatten()
                    })
                    .collect());
            }
            // The window is used up: the next one, from this piece or the next.
            let piece = match &mut self.piece {
                Some(p) if p.rows_left() > 0 => p,
                _ => match self.pieces.next() {
                    Some(p) => self.piece.insert(p),
                    None => return Ok(vec![None; self.metrics].into()),
                },
            };
            let last = self.window.cols[0].last().copied();
            self.window = piece.next(window.max(1))?;
            self.at = 0;
            if let (Some(last), Some(&first)) = (last, self.window.cols[0].first()) {
                if first <= last {
                    return Err(Error::Corrupt("counter rows out of order".into()));
                }
            }
        }
    }
}

/// The definitions' stored bytes.
pub(super) fn encode_metrics(metrics: &[Metric]) -> Vec<u8> {
    super::encode_meta(&metrics)
}

/// The definitions from their stored bytes.
pub(super) fn decode_metrics(bytes: &[u8], what: &str) -> Result<Vec<Metric>> {
    super::decode_meta(bytes, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::unseal;

    /// Two pieces of a chunk's counter rows (every third id, some values missing, some
    /// negative), as the store holds them.
    fn pieces(metrics: usize) -> Vec<(Vec<u8>, String)> {
        [0u64..100, 100..200]
            .into_iter()
            .map(|ids| {
                let mut rows = CounterRows::new(metrics);
                for id in ids.step_by(3) {
                    let v = id as i64;
                    rows.push(id, &[Some(v * 7 - 300), (id % 2 == 0).then_some(-v)]);
                }
                let body = unseal(&rows.encode(), "piece").unwrap().to_vec();
                (body, "piece".to_string())
            })
            .collect()
    }

    #[test]
    fn a_stream_read_a_few_rows_at_a_time_gives_the_values_of_the_whole_chunk() {
        let pieces = pieces(2);
        let whole = ChunkCounters::decode(&pieces, 2).unwrap();
        assert_eq!(whole.len(), 68);
        for window in [1, 2, 5, 1000] {
            let mut stream = CounterStream::open(&pieces, 2).unwrap();
            // Ascending ids, rows with values and without, and past the last row.
            for id in (0..210).filter(|id| id % 4 != 1) {
                assert_eq!(
                    stream.values(id, window).unwrap(),
                    whole.values(id),
                    "id {id}, window {window}"
                );
            }
        }
        assert_eq!(whole.values(3).as_ref(), [Some(-279), None]);
        assert_eq!(whole.values(4).as_ref(), [None, None]);
    }
}
