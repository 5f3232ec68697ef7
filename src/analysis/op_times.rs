//! The start, end and MPI call of every operation, read by one scan of three columns
//! ([`crate::store::scan`]: each chunk decoded once, on every core) into dense arrays by chunk
//! number and row. The wait states, the critical path, the clock estimate and the network fit
//! look operations up by id in message order, which visits every rank in every iteration:
//! any cache of chunks smaller than the trace thrashes there (a chunk spans a location's whole
//! run when it has fewer than 65,536 operations), so the whole trace's times are kept.
//!
//! Cost: 8 + 8 bytes of start and end and 1 byte of call per operation (a chunk's calls coded
//! against its own short list of distinct calls): about 17 bytes an operation, 850 MB for 50
//! million operations, held while the analysis runs.
//!
//! Read through a [`ClockMap`], every time is the rank's corrected one: the wait states and
//! the critical path then run on corrected clocks without knowing it. A map is monotonic per
//! rank, so each chunk stays sorted by start and a chunk directory's first start and last end
//! stay its rows' bounds once corrected ([`OpTimes::time`]).

use super::clock::ClockMap;
use crate::error::Result;
use crate::model::{OpId, OpKind, Rank, Time};
use crate::store::ids::{chunk_and_row, row_id};
use crate::store::scan::{Batch, Order, Projection, ScanFilter, ScanRequest};
use crate::store::OperationColumns;
use crate::store::OperationField::{self, End, Kind, Start};
use crate::Trace;

/// The calls of one chunk's rows: codes into the chunk's distinct calls while there are at
/// most 256 of them, else the calls themselves.
enum Calls {
    Coded {
        distinct: Vec<Option<OpKind>>,
        codes: Vec<u8>,
    },
    Plain(Vec<Option<OpKind>>),
}

impl Calls {
    fn of(kinds: impl Iterator<Item = Option<OpKind>>) -> Calls {
        let mut distinct: Vec<Option<OpKind>> = Vec::new();
        let mut codes = Vec::new();
        let mut kinds = kinds.peekable();
        while let Some(&kind) = kinds.peek() {
            let code = match distinct.iter().position(|&k| k == kind) {
                Some(i) => i,
                None if distinct.len() < 256 => {
                    distinct.push(kind);
                    distinct.len() - 1
                }
                None => {
                    // Too many distinct calls for a byte: the rest kept as they are.
                    let mut plain: Vec<Option<OpKind>> =
                        codes.iter().map(|&c| distinct[c as usize]).collect();
                    plain.extend(kinds);
                    return Calls::Plain(plain);
                }
            };
            codes.push(code as u8);
            kinds.next();
        }
        Calls::Coded { distinct, codes }
    }

    fn get(&self, row: usize) -> Option<OpKind> {
        match self {
            Calls::Coded { distinct, codes } => distinct[codes[row] as usize],
            Calls::Plain(kinds) => kinds[row],
        }
    }
}

/// One operation chunk's start, end and call columns; a location's operations are in start
/// order, so each chunk is sorted by start.
pub(crate) struct ChunkTimes {
    /// The chunk number.
    pub chunk: u32,
    /// The location's rank.
    pub rank: Rank,
    /// Start of each row (ns).
    pub start: Vec<Time>,
    /// End of each row (ns).
    pub end: Vec<Time>,
    calls: Calls,
}

impl ChunkTimes {
    /// The id of row `row`.
    pub fn id(&self, row: usize) -> OpId {
        row_id(self.chunk, row)
    }

    /// The MPI call of row `row` (`None`: a code this version does not know).
    pub fn kind(&self, row: usize) -> Option<OpKind> {
        self.calls.get(row)
    }
}

/// One operation's times and call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpTime {
    pub rank: Rank,
    pub start: Time,
    pub end: Time,
    pub kind: Option<OpKind>,
}

/// Every operation's times, by chunk number and row.
pub(crate) struct OpTimes<'t> {
    /// The correction every time is read through, if any.
    map: Option<&'t ClockMap>,
    /// By chunk number (`None`: no such chunk).
    chunks: Vec<Option<ChunkTimes>>,
}

impl<'t> OpTimes<'t> {
    /// Every operation's stored times.
    pub fn new(trace: &Trace) -> Result<OpTimes<'t>> {
        Ok(OpTimes::read_with(trace, None, &[], |_| ())?.0)
    }

    /// Every operation's times corrected by `map`.
    pub fn corrected(trace: &Trace, map: &'t ClockMap) -> Result<OpTimes<'t>> {
        Ok(OpTimes::read_with(trace, Some(map), &[], |_| ())?.0)
    }

    /// Every operation's times (corrected by `map` if given), and what `per_chunk` makes of
    /// each chunk's columns (the three and `extra`) in the same scan, in chunk order: one
    /// decode of each chunk for both.
    pub fn read_with<X: Send>(
        trace: &Trace,
        map: Option<&'t ClockMap>,
        extra: &[OperationField],
        per_chunk: impl Fn(&OperationColumns) -> X + Sync + Send,
    ) -> Result<(OpTimes<'t>, Vec<X>)> {
        let mut fields = vec![Start, End, Kind];
        fields.extend_from_slice(extra);
        let scan = trace.scan(&ScanRequest {
            projection: Projection::Operations(&fields),
            filter: ScanFilter::default(),
            order: Order::Id,
        })?;
        let time = |rank: Rank, t: Time| map.map_or(t, |m| m.time(rank, t));
        let read = |batch: Batch| -> Result<(ChunkTimes, X)> {
            trace.check_cancel()?;
            let cols = batch.operations().expect("an operation scan");
            let rank = batch.location().map_or(0, |l| l.0);
            let rows = batch.rows_in_chunk();
            let times = ChunkTimes {
                chunk: batch.chunk(),
                rank,
                start: (0..rows).map(|r| time(rank, cols.start(r))).collect(),
                end: (0..rows).map(|r| time(rank, cols.end(r))).collect(),
                calls: Calls::of((0..rows).map(|r| cols.kind(r))),
            };
            Ok((times, per_chunk(cols)))
        };
        let mut read: Vec<(ChunkTimes, X)> = scan.par_fold(
            Vec::new,
            |mut acc, batch| {
                acc.push(read(batch)?);
                Ok(acc)
            },
            |mut a, b| {
                a.extend(b);
                a
            },
        )?;
        read.sort_unstable_by_key(|(c, _)| c.chunk);
        let slots = read.last().map_or(0, |(c, _)| c.chunk as usize + 1);
        let mut chunks: Vec<Option<ChunkTimes>> = Vec::with_capacity(slots);
        chunks.resize_with(slots, || None);
        let mut made = Vec::with_capacity(read.len());
        for (times, x) in read {
            let at = times.chunk as usize;
            chunks[at] = Some(times);
            made.push(x);
        }
        Ok((OpTimes { map, chunks }, made))
    }

    /// Time `t` of `rank` as this reads it: corrected when there is a map (for the times the
    /// chunk directory holds).
    pub fn time(&self, rank: Rank, t: Time) -> Time {
        match self.map {
            Some(m) => m.time(rank, t),
            None => t,
        }
    }

    /// Chunk `chunk`'s times; `None` for a chunk the trace does not have.
    pub fn chunk(&self, chunk: u32) -> Option<&ChunkTimes> {
        self.chunks.get(chunk as usize).and_then(Option::as_ref)
    }

    /// Operation `op`'s times; `None` for an id the trace does not have.
    pub fn get(&self, op: OpId) -> Option<OpTime> {
        let (chunk, row) = chunk_and_row(op);
        let c = self.chunk(chunk)?;
        (row < c.start.len()).then(|| OpTime {
            rank: c.rank,
            start: c.start[row],
            end: c.end[row],
            kind: c.kind(row),
        })
    }
}
