//! The scan seam (first cut of `docs/SCAN-SEAM.md` §3): one way to read many chunks of the
//! operation or message table. A [`ScanRequest`] names the table and the fields to decode
//! (the projection), filters (ranks, a time window, ids) and an order; [`TraceReader::scan`]
//! prunes chunks by the chunk directory's statistics and the ids before anything is read,
//! then each surviving chunk's projected columns are decoded exactly once, handed out as a
//! [`Batch`] either to a [`Scan::par_fold`] over every core (rayon) or in order by
//! [`Scan::iter`].
//!
//! A consumer that needs rows of one chunk again keeps what it took from the batch (the
//! analyses keep dense arrays of a few columns): the seam never decodes a chunk twice in one
//! scan, and [`ScanStats`] counts what it decoded so that tests can hold it to that.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use rayon::prelude::*;
use roaring::{RoaringBitmap, RoaringTreemap};

use super::columns::{self, MessageColumns, MessageField, OperationColumns, OperationField};
use super::ids::chunk_and_row;
use super::{tables, Table, TraceReader};
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::{Rank, Time};

/// Where a long read tells how far it got: the stage a long analysis named
/// ([`progress_stage`]), and the chunks of the running scan decoded out of those planned.
#[derive(Debug, Clone, Copy)]
pub struct ScanProgress<'a> {
    /// What runs (`wait states`), or "" when no analysis named itself.
    pub stage: &'a str,
    /// The table read.
    pub table: Table,
    /// Chunks decoded so far.
    pub decoded: u64,
    /// Chunks the scan reads in all.
    pub planned: u64,
}

/// A receiver of [`ScanProgress`] (called from every worker thread).
pub type ProgressSink = Box<dyn Fn(&ScanProgress<'_>) + Send + Sync>;

/// The process's progress display (the command line's line on a terminal): one per process,
/// since a scan cannot know which of a program's displays it runs under.
static PROGRESS: OnceLock<ProgressSink> = OnceLock::new();
/// The stage [`ScanProgress`] names.
static STAGE: Mutex<&str> = Mutex::new("");

/// Makes `sink` the process's progress display; false (and `sink` dropped) when one was set.
pub fn show_progress_with(sink: ProgressSink) -> bool {
    PROGRESS.set(sink).is_ok()
}

/// Names what the process does next for the progress display (`wait states`).
pub fn progress_stage(stage: &'static str) {
    *STAGE.lock().unwrap_or_else(|p| p.into_inner()) = stage;
}

/// Tells the progress display, if any, that a scan decoded its `decoded`-th chunk.
fn tell_progress(table: Table, decoded: u64, planned: u64) {
    if let Some(sink) = PROGRESS.get() {
        let stage = *STAGE.lock().unwrap_or_else(|p| p.into_inner());
        sink(&ScanProgress {
            stage,
            table,
            decoded,
            planned,
        });
    }
}

/// What a scan reads: the table and the fields decoded from each chunk.
#[derive(Debug, Clone, Copy)]
pub enum Projection<'a> {
    /// Operations, these fields (a chunk's rank and thread come with its batch).
    Operations(&'a [OperationField]),
    /// Messages, these fields.
    Messages(&'a [MessageField]),
}

impl Projection<'_> {
    fn table(&self) -> Table {
        match self {
            Projection::Operations(_) => Table::Operations,
            Projection::Messages(_) => Table::Messages,
        }
    }
}

/// The rows a scan keeps, all filters ANDed. Chunks that cannot hold a kept row are never
/// read; the rows of a read chunk are checked against the window (the columns the check
/// needs are decoded with the projection).
#[derive(Debug, Clone, Copy, Default)]
pub struct ScanFilter<'a> {
    /// Operations of these ranks only (chunks of other ranks are not read); messages sent or
    /// received by one of them. Sorted.
    pub ranks: Option<&'a [Rank]>,
    /// Rows overlapping `[from, to]` (ns): an operation's `[start, end]`, a message's
    /// `[send time, receive time]`.
    pub window: Option<(Time, Time)>,
    /// Only these ids (a view, the members a record names, the keys of a join).
    pub ids: Option<&'a RoaringTreemap>,
}

/// The order [`Scan::iter`] hands batches out in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Chunk order, which is id order.
    #[default]
    Id,
    /// Operations location by location (rank, then thread), each location's chunks in row
    /// order, so each location's rows come in start order; messages in chunk order.
    Location,
}

/// A scan: the table, what to decode, which rows, in which order.
#[derive(Debug, Clone, Copy)]
pub struct ScanRequest<'a> {
    /// The table and fields.
    pub projection: Projection<'a>,
    /// Which rows.
    pub filter: ScanFilter<'a>,
    /// The order of [`Scan::iter`] ([`Scan::par_fold`] folds in any order).
    pub order: Order,
}

/// One chunk to read: what pruning left of it.
#[derive(Debug, Clone)]
struct Task {
    chunk: u32,
    /// The operation chunk's location (rank, thread).
    location: Option<(Rank, u32)>,
    /// The rows the ids filter keeps (`None`: every row).
    rows: Option<RoaringBitmap>,
}

/// What a scan read, for tests, `EXPLAIN` and benchmarks.
#[derive(Debug, Default)]
pub struct ScanStats {
    /// Chunks of the table.
    pub chunks: u64,
    /// Chunks left after pruning (each read at most once).
    pub planned: u64,
    decoded: AtomicU64,
    rows: AtomicU64,
}

impl ScanStats {
    /// Chunks decoded so far.
    pub fn decoded(&self) -> u64 {
        self.decoded.load(Ordering::Relaxed)
    }

    /// Rows handed out so far (after every filter).
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }
}

/// The decoded columns of a batch.
#[derive(Debug)]
enum BatchColumns {
    Operations(OperationColumns),
    Messages(MessageColumns),
}

/// One chunk's projected columns and the rows of it the filters keep.
#[derive(Debug)]
pub struct Batch {
    location: Option<(Rank, u32)>,
    columns: BatchColumns,
    /// The kept rows, ascending (`None`: rows `0..len`).
    selected: Option<Vec<u32>>,
    len: usize,
}

impl Batch {
    /// The chunk number.
    pub fn chunk(&self) -> u32 {
        match &self.columns {
            BatchColumns::Operations(c) => c.chunk(),
            BatchColumns::Messages(c) => c.chunk(),
        }
    }

    /// Number of rows of the chunk (kept or not): row numbers run `0..rows()`.
    pub fn rows_in_chunk(&self) -> usize {
        self.len
    }

    /// An operation chunk's location: (rank, thread).
    pub fn location(&self) -> Option<(Rank, u32)> {
        self.location
    }

    /// The operation columns (`None` in a message scan).
    pub fn operations(&self) -> Option<&OperationColumns> {
        match &self.columns {
            BatchColumns::Operations(c) => Some(c),
            BatchColumns::Messages(_) => None,
        }
    }

    /// The message columns (`None` in an operation scan).
    pub fn messages(&self) -> Option<&MessageColumns> {
        match &self.columns {
            BatchColumns::Messages(c) => Some(c),
            BatchColumns::Operations(_) => None,
        }
    }

    /// The kept rows, ascending.
    pub fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        let (all, some) = match &self.selected {
            None => (Some(0..self.len), None),
            Some(rows) => (None, Some(rows.iter().map(|&r| r as usize))),
        };
        all.into_iter().flatten().chain(some.into_iter().flatten())
    }

    /// How many rows are kept.
    pub fn kept(&self) -> usize {
        self.selected.as_ref().map_or(self.len, Vec::len)
    }
}

/// A planned scan: chunks pruned, none read yet.
pub struct Scan<'r> {
    reader: &'r TraceReader,
    projection: Projection<'r>,
    ranks: Option<Vec<Rank>>,
    window: Option<(Time, Time)>,
    tasks: Vec<Task>,
    stats: ScanStats,
}

impl TraceReader {
    /// Plans `req`: the chunks that may hold a kept row, from the chunk directory (ranks,
    /// window) and the ids; nothing is decoded until the scan runs.
    pub fn scan<'r>(&'r self, req: &ScanRequest<'r>) -> Result<Scan<'r>> {
        let filter = req.filter;
        let overlaps =
            |from: Time, to: Time| filter.window.is_none_or(|(wf, wt)| from <= wt && to >= wf);
        let mut tasks: Vec<Task> = Vec::new();
        let chunks = match req.projection {
            Projection::Operations(_) => {
                let dir = &self.meta.op_chunks;
                for c in dir {
                    let in_ranks = filter
                        .ranks
                        .is_none_or(|r| r.binary_search(&c.rank).is_ok());
                    if in_ranks && overlaps(c.first_start, c.max_end) {
                        tasks.push(Task {
                            chunk: c.chunk,
                            location: Some((c.rank, c.thread)),
                            rows: None,
                        });
                    }
                }
                if req.order == Order::Location {
                    let place = |chunk: u32| {
                        self.op_chunk_info(chunk)
                            .map(|c| (c.rank, c.thread, c.first_row))
                    };
                    tasks.sort_by_key(|t| place(t.chunk));
                }
                dir.len() as u64
            }
            Projection::Messages(_) => {
                let times = &self.meta.message_chunk_times;
                for chunk in 0..self.meta.message_chunks {
                    let keep = times
                        .get(chunk as usize)
                        .is_none_or(|&(first, last)| overlaps(first, last));
                    if keep {
                        tasks.push(Task {
                            chunk,
                            location: None,
                            rows: None,
                        });
                    }
                }
                u64::from(self.meta.message_chunks)
            }
        };
        if let Some(ids) = filter.ids {
            let mut by_chunk = rows_by_chunk(ids);
            tasks.retain_mut(|t| {
                t.rows = by_chunk.remove(&t.chunk);
                t.rows.is_some()
            });
        }
        Ok(Scan {
            reader: self,
            projection: req.projection,
            ranks: filter.ranks.map(<[Rank]>::to_vec),
            window: filter.window,
            stats: ScanStats {
                chunks,
                planned: tasks.len() as u64,
                ..ScanStats::default()
            },
            tasks,
        })
    }
}

/// The rows of `ids` by chunk (one pass over the ids, which ascend).
fn rows_by_chunk(ids: &RoaringTreemap) -> FxHashMap<u32, RoaringBitmap> {
    let mut out: FxHashMap<u32, RoaringBitmap> = FxHashMap::default();
    let mut current: Option<(u32, RoaringBitmap)> = None;
    for id in ids {
        let (chunk, row) = chunk_and_row(id);
        match &mut current {
            Some((c, rows)) if *c == chunk => {
                rows.insert(row as u32);
            }
            _ => {
                if let Some((c, rows)) = current.take() {
                    out.insert(c, rows);
                }
                let mut rows = RoaringBitmap::new();
                rows.insert(row as u32);
                current = Some((chunk, rows));
            }
        }
    }
    if let Some((c, rows)) = current {
        out.insert(c, rows);
    }
    out
}

impl<'r> Scan<'r> {
    /// What the scan read so far, and what pruning left.
    pub fn stats(&self) -> &ScanStats {
        &self.stats
    }

    /// Folds every batch into an accumulator per worker (`init`, `fold`), then merges the
    /// workers' accumulators (`merge`); batches come in no particular order, each chunk
    /// decoded once, on every core.
    pub fn par_fold<A: Send>(
        &self,
        init: impl Fn() -> A + Sync + Send,
        fold: impl Fn(A, Batch) -> Result<A> + Sync + Send,
        merge: impl Fn(A, A) -> A + Sync + Send,
    ) -> Result<A> {
        self.tasks
            .par_iter()
            .try_fold(&init, |acc, task| fold(acc, self.read(task)?))
            .try_reduce(&init, |a, b| Ok(merge(a, b)))
    }

    /// The batches in the request's order, a few chunks decoded ahead on every core (at most
    /// two per worker thread are held).
    pub fn iter(self) -> ScanIter<'r> {
        let ahead = 2 * rayon::current_num_threads().max(1);
        ScanIter {
            scan: self,
            next: 0,
            ready: VecDeque::new(),
            ahead,
        }
    }

    /// Reads and decodes one task's chunk, its rows filtered.
    fn read(&self, task: &Task) -> Result<Batch> {
        let reader = self.reader;
        let table = self.projection.table();
        let mut wanted = match self.projection {
            Projection::Operations(f) => columns::columns_of(f, OperationField::columns),
            Projection::Messages(f) => columns::columns_of(f, MessageField::columns),
        };
        // The columns the row filters need are decoded too.
        use tables::{msg_col, op_col};
        match (table, self.window.is_some(), self.ranks.is_some()) {
            (Table::Operations, true, _) => wanted.extend([op_col::START, op_col::DURATION]),
            (Table::Messages, window, ranks) => {
                if window {
                    wanted.extend([msg_col::SEND_TIME, msg_col::RECV_DELAY]);
                }
                if ranks {
                    wanted.extend([msg_col::SENDER, msg_col::RECEIVER]);
                }
            }
            _ => {}
        }
        // With an ids filter, columns are decoded only as far as the last row kept.
        let take = task
            .rows
            .as_ref()
            .and_then(RoaringBitmap::max)
            .map_or(usize::MAX, |last| last as usize + 1);
        let columns = reader.chunk_column_prefixes(table, task.chunk, &wanted, take)?;
        let decoded = self.stats.decoded.fetch_add(1, Ordering::Relaxed) + 1;
        tell_progress(table, decoded, self.stats.planned);
        let len = columns.rows.min(take);
        let columns = match table {
            Table::Operations => {
                BatchColumns::Operations(OperationColumns::new(task.chunk, columns))
            }
            _ => BatchColumns::Messages(MessageColumns::new(task.chunk, columns)),
        };
        let mut batch = Batch {
            location: task.location,
            columns,
            selected: task.rows.as_ref().map(|r| r.iter().collect()),
            len,
        };
        if let Some(rows) = &batch.selected {
            if rows.last().is_some_and(|&r| r as usize >= len) {
                return Err(Error::Usage(format!(
                    "an id of {} chunk {} is beyond its {len} rows",
                    table.name(),
                    task.chunk
                )));
            }
        }
        self.filter_rows(&mut batch);
        self.stats
            .rows
            .fetch_add(batch.kept() as u64, Ordering::Relaxed);
        Ok(batch)
    }

    /// Drops the rows of `batch` outside the window or the ranks (what the chunk statistics
    /// could not decide).
    fn filter_rows(&self, batch: &mut Batch) {
        let window = self.window;
        let ranks = self.ranks.as_deref();
        let keep: Box<dyn Fn(usize) -> bool + '_> = match &batch.columns {
            BatchColumns::Operations(c) => match window {
                None => return,
                Some((from, to)) => Box::new(move |r| c.start(r) <= to && c.end(r) >= from),
            },
            BatchColumns::Messages(c) => {
                if window.is_none() && ranks.is_none() {
                    return;
                }
                Box::new(move |r| {
                    window.is_none_or(|(from, to)| c.send_time(r) <= to && c.recv_time(r) >= from)
                        && ranks.is_none_or(|set| {
                            set.binary_search(&c.sender(r)).is_ok()
                                || set.binary_search(&c.receiver(r)).is_ok()
                        })
                })
            }
        };
        let kept: Vec<u32> = batch
            .rows()
            .filter(|&r| keep(r))
            .map(|r| r as u32)
            .collect();
        drop(keep);
        batch.selected = Some(kept);
    }
}

/// The batches of a scan in its order ([`Scan::iter`]).
pub struct ScanIter<'r> {
    scan: Scan<'r>,
    next: usize,
    ready: VecDeque<Result<Batch>>,
    ahead: usize,
}

impl ScanIter<'_> {
    /// What the scan read so far.
    pub fn stats(&self) -> &ScanStats {
        &self.scan.stats
    }
}

impl Iterator for ScanIter<'_> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.ready.is_empty() && self.next < self.scan.tasks.len() {
            let end = (self.next + self.ahead).min(self.scan.tasks.len());
            let scan = &self.scan;
            let read: Vec<Result<Batch>> = scan.tasks[self.next..end]
                .par_iter()
                .map(|t| scan.read(t))
                .collect();
            self.next = end;
            self.ready.extend(read);
        }
        self.ready.pop_front()
    }
}
