//! A trace's routine calls in the order they were entered.
//!
//! The store keeps routine calls in the order they ended, all locations mixed; an export
//! needs them in the order they began (a call's enter comes before everything inside it).
//! The calls are sorted by (start, rank, thread, depth, position in the store): within one
//! location that is the call tree in preorder, an outer call before the calls it holds.
//! Calls that fit in memory are sorted there; more are sorted in runs spilled to a temporary
//! file and merged, so that memory stays bounded whatever the number of calls. A call may
//! carry its counter values through the sort ([`CallsByStart::with_counters`]), read with its
//! chunk as the calls are.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};

use crate::error::{Error, Result};
use crate::model::{RoutineCall, Time};
use crate::store::counters::CallValues;
use crate::Trace;

/// Calls sorted in memory at once (262,144, about 12 MiB): one run (fewer, in proportion,
/// when they carry counter values).
const RUN: usize = 1 << 18;
/// Bytes of one spilled call without counters; each counter adds [`VALUE`].
const RECORD: usize = 40;
/// Bytes of one spilled counter value: whether there is one, and its 64 bits.
const VALUE: usize = 9;
/// Read buffers of all runs together, while they are merged.
const MERGE_BUFFERS: usize = 16 << 20;

/// A call with its place in the sort order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Keyed {
    call: RoutineCall,
    /// The call's position in the store's routine table (ties of equal calls keep it).
    seq: u64,
    /// Its counter values, when they are sorted along (empty otherwise).
    counters: CallValues,
}

impl Keyed {
    fn key(&self) -> (Time, u32, u32, u16, u64) {
        let c = &self.call;
        (c.start, c.rank, c.thread, c.depth, self.seq)
    }

    /// Writes the call into `out`, [`RECORD`] bytes and [`VALUE`] per counter.
    fn encode(&self, out: &mut [u8]) {
        let c = &self.call;
        out[0..8].copy_from_slice(&c.start.to_le_bytes());
        out[8..16].copy_from_slice(&c.end.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..28].copy_from_slice(&c.rank.to_le_bytes());
        out[28..32].copy_from_slice(&c.thread.to_le_bytes());
        out[32..36].copy_from_slice(&c.routine.to_le_bytes());
        out[36..38].copy_from_slice(&c.depth.to_le_bytes());
        for (i, v) in self.counters.iter().enumerate() {
            let at = RECORD + i * VALUE;
            out[at] = u8::from(v.is_some());
            out[at + 1..at + VALUE].copy_from_slice(&v.unwrap_or(0).to_le_bytes());
        }
    }

    /// The call [`Keyed::encode`] wrote, with `metrics` counter values.
    fn decode(b: &[u8], metrics: usize) -> Keyed {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Keyed {
            call: RoutineCall {
                start: u64_at(0),
                end: u64_at(8),
                rank: u32_at(24),
                thread: u32_at(28),
                routine: u32_at(32),
                depth: u16::from_le_bytes([b[36], b[37]]),
            },
            seq: u64_at(16),
            counters: (0..metrics)
                .map(|i| {
                    let at = RECORD + i * VALUE;
                    (b[at] != 0).then(|| u64_at(at + 1) as i64)
                })
                .collect(),
        }
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Keyed) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Keyed) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One sorted run in the spill file, read through a small buffer.
struct Run {
    /// Byte offset of the next record not yet buffered, and of the run's end.
    next: u64,
    end: u64,
    buf: Vec<u8>,
    pos: usize,
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

impl Run {
    /// The run's next call (of `metrics` counters), refilling its buffer of `records` calls
    /// from `file` when it is used up.
    fn next(&mut self, file: &File, records: usize, metrics: usize) -> Result<Option<Keyed>> {
        let len = record_len(metrics);
        if self.pos == self.buf.len() {
            let left = self.end - self.next;
            if left == 0 {
                return Ok(None);
            }
            let take = left.min((records * len) as u64) as usize;
            self.buf.resize(take, 0);
            read_at(file, &mut self.buf, self.next).map_err(spill_error)?;
            self.next += take as u64;
            self.pos = 0;
        }
        let k = Keyed::decode(&self.buf[self.pos..self.pos + len], metrics);
        self.pos += len;
        Ok(Some(k))
    }
}

/// Bytes of one spilled call with `metrics` counter values.
fn record_len(metrics: usize) -> usize {
    RECORD + VALUE * metrics
}

fn spill_error(e: std::io::Error) -> Error {
    Error::Storage(format!(
        "the export's temporary file of routine calls failed: {e}"
    ))
}

/// The spill file being written, and the byte range of each run in it.
type Spill = (BufWriter<File>, Vec<(u64, u64)>);

/// Where the sorted calls come from.
enum Source {
    /// All calls, sorted in memory, consumed from the back.
    Memory(Vec<Keyed>),
    /// Runs in a temporary file, merged through a heap of each run's next call.
    Spilled {
        file: File,
        runs: Vec<Run>,
        heap: BinaryHeap<Reverse<(Keyed, usize)>>,
        records: usize,
    },
}

/// The routine calls of a trace in enter order (see the module documentation).
pub(crate) struct CallsByStart {
    source: Source,
    /// The number of counter values each call carries.
    metrics: usize,
    peeked: Option<Keyed>,
}

impl CallsByStart {
    /// Reads the trace's routine calls chunk by chunk and sorts them.
    pub(crate) fn new(trace: &Trace) -> Result<CallsByStart> {
        CallsByStart::with_counters(trace, 0)
    }

    /// [`CallsByStart::new`], each call with its values of the trace's `metrics` counters
    /// (read with its chunk), which [`CallsByStart::next_counted`] hands out.
    pub(crate) fn with_counters(trace: &Trace, metrics: usize) -> Result<CallsByStart> {
        let chunks = (0..trace.routine_chunk_count()).map(|c| {
            let calls = trace.routine_chunk(c)?;
            if metrics == 0 {
                return Ok(calls.into_iter().map(|call| (call, None)).collect());
            }
            let counters = trace.routine_counters(c, metrics)?;
            // A call's position is chunk * 2^16 + row, as the store numbers it.
            Ok(calls
                .into_iter()
                .enumerate()
                .map(|(row, call)| {
                    let position = crate::store::ids::row_id(c, row);
                    (call, Some(counters.values(position)))
                })
                .collect())
        });
        let run = (RUN * RECORD / record_len(metrics)).max(1);
        CallsByStart::sort(chunks, metrics, run)
    }

    /// Sorts the calls (with their counter values when they have some, `metrics` of them)
    /// `chunks` give, in memory when they are at most `run`, else in runs of `run` calls
    /// spilled to a temporary file.
    fn sort(
        chunks: impl Iterator<Item = Result<Vec<(RoutineCall, Option<CallValues>)>>>,
        metrics: usize,
        run_len: usize,
    ) -> Result<CallsByStart> {
        let mut run: Vec<Keyed> = Vec::new();
        let mut spill: Option<Spill> = None;
        let mut seq = 0u64;
        let mut written = 0u64;
        for chunk in chunks {
            for (call, counters) in chunk? {
                let counters = counters.unwrap_or_else(|| vec![None; metrics].into());
                run.push(Keyed {
                    call,
                    seq,
                    counters,
                });
                seq += 1;
                if run.len() == run_len {
                    let (out, runs) = match spill.as_mut() {
                        Some(s) => s,
                        None => spill.insert((
                            BufWriter::new(tempfile::tempfile().map_err(spill_error)?),
                            Vec::new(),
                        )),
                    };
                    runs.push(write_run(out, &mut run, &mut written)?);
                }
            }
        }
        let source = match spill {
            None => {
                run.sort_unstable_by(|a, b| b.cmp(a));
                Source::Memory(run)
            }
            Some((mut out, mut runs)) => {
                if !run.is_empty() {
                    runs.push(write_run(&mut out, &mut run, &mut written)?);
                }
                let file = out.into_inner().map_err(|e| spill_error(e.into_error()))?;
                let records = (MERGE_BUFFERS / record_len(metrics) / runs.len()).clamp(64, 4096);
                let mut runs: Vec<Run> = runs
                    .into_iter()
                    .map(|(next, end)| Run {
                        next,
                        end,
                        buf: Vec::new(),
                        pos: 0,
                    })
                    .collect();
                let mut heap = BinaryHeap::with_capacity(runs.len());
                for (i, r) in runs.iter_mut().enumerate() {
                    if let Some(k) = r.next(&file, records, metrics)? {
                        heap.push(Reverse((k, i)));
                    }
                }
                Source::Spilled {
                    file,
                    runs,
                    heap,
                    records,
                }
            }
        };
        let mut calls = CallsByStart {
            source,
            metrics,
            peeked: None,
        };
        calls.peeked = calls.pull()?;
        Ok(calls)
    }

    fn pull(&mut self) -> Result<Option<Keyed>> {
        let metrics = self.metrics;
        match &mut self.source {
            Source::Memory(v) => Ok(v.pop()),
            Source::Spilled {
                file,
                runs,
                heap,
                records,
            } => {
                let Some(Reverse((k, i))) = heap.pop() else {
                    return Ok(None);
                };
                if let Some(next) = runs[i].next(file, *records, metrics)? {
                    heap.push(Reverse((next, i)));
                }
                Ok(Some(k))
            }
        }
    }

    /// The next call, without taking it.
    pub(crate) fn peek(&self) -> Option<&RoutineCall> {
        self.peeked.as_ref().map(|k| &k.call)
    }

    /// Takes the next call.
    pub(crate) fn next_call(&mut self) -> Result<Option<RoutineCall>> {
        Ok(self.next_counted()?.map(|(call, _)| call))
    }

    /// Takes the next call, with its counter values (see [`CallsByStart::with_counters`]).
    pub(crate) fn next_counted(&mut self) -> Result<Option<(RoutineCall, CallValues)>> {
        let next = self.pull()?;
        Ok(std::mem::replace(&mut self.peeked, next).map(|k| (k.call, k.counters)))
    }
}

/// Sorts `run`, appends it to the spill file and empties it; returns its byte range.
fn write_run(
    out: &mut BufWriter<File>,
    run: &mut Vec<Keyed>,
    written: &mut u64,
) -> Result<(u64, u64)> {
    run.sort_unstable();
    let start = *written;
    let mut rec = Vec::new();
    for k in run.drain(..) {
        rec.resize(record_len(k.counters.len()), 0);
        k.encode(&mut rec);
        out.write_all(&rec).map_err(spill_error)?;
        *written += rec.len() as u64;
    }
    Ok((start, *written))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(n: u64) -> Vec<RoutineCall> {
        // A deterministic jumble: starts repeat, ranks and depths vary.
        (0..n)
            .map(|i| RoutineCall {
                rank: (i * 7 % 5) as u32,
                thread: (i % 3 == 0) as u32,
                routine: (i % 11) as u32,
                depth: (i * 13 % 4) as u16,
                start: i * 7919 % 97,
                end: i * 7919 % 97 + i,
            })
            .collect()
    }

    fn drain(mut c: CallsByStart) -> Vec<(RoutineCall, CallValues)> {
        let mut out = Vec::new();
        while let Some(call) = c.next_counted().unwrap() {
            out.push(call);
        }
        out
    }

    /// Call i's counters: two, the first missing on every third call, both on some negative.
    fn values(i: u64) -> CallValues {
        let i = i as i64;
        vec![(i % 3 != 0).then_some(i * 1_000_003), Some(7 - i * i)].into()
    }

    #[test]
    fn spilled_runs_merge_into_the_order_of_an_in_memory_sort() {
        let all = calls(1000);
        for metrics in [0, 2] {
            let chunks = || {
                all.chunks(64)
                    .enumerate()
                    .map(|(c, calls)| {
                        Ok(calls
                            .iter()
                            .enumerate()
                            .map(|(r, call)| {
                                let i = (c * 64 + r) as u64;
                                (*call, (metrics > 0).then(|| values(i)))
                            })
                            .collect())
                    })
                    .collect::<Vec<_>>()
            };
            let sort = |run| drain(CallsByStart::sort(chunks().into_iter(), metrics, run).unwrap());
            let in_memory = sort(usize::MAX);
            for run in [1, 7, 64, 999, 1000] {
                assert_eq!(sort(run), in_memory, "runs of {run}, {metrics} counters");
            }
            let mut expected: Vec<(u64, RoutineCall)> = all
                .iter()
                .copied()
                .enumerate()
                .map(|(i, c)| (i as u64, c))
                .collect();
            expected.sort_by_key(|(i, c)| (c.start, c.rank, c.thread, c.depth, *i));
            let expected: Vec<(RoutineCall, CallValues)> = expected
                .into_iter()
                .map(|(i, c)| {
                    let v = if metrics > 0 {
                        values(i)
                    } else {
                        CallValues::default()
                    };
                    (c, v)
                })
                .collect();
            assert_eq!(in_memory, expected, "{metrics} counters");
        }
    }

    #[test]
    fn no_calls() {
        assert!(drain(CallsByStart::sort(std::iter::empty(), 0, 4).unwrap()).is_empty());
    }
}
