//! A stored trace's events in the order an export writes them: operations with the enters
//! and leaves of the routine calls around them, merged by time across locations.
//!
//! Each location's events are rebuilt from what the store keeps: its operations in their
//! stored order (with the nesting depth the import gave each), and its routine calls (start,
//! end, depth). A location's next event is the earliest of its next operation, its next call
//! to enter and the leave of its innermost open call, among those its nesting allows (an
//! operation or a call of depth d comes only when exactly d calls are open); at equal times
//! an operation comes before an enter, and an enter before a leave, which is the order that
//! gives every operation and call back the depth it was stored with. Locations are merged by
//! (time, rank, thread), so the order depends on the trace's content only, never on how the
//! import happened to cut it into chunks.
//!
//! Memory: each location reads its operations through a window of one chunk at most (smaller
//! when there are many locations), routine calls come sorted from [`CallsByStart`], and a
//! location holds only its open calls and the enters due at the current time.
//!
//! [`OperationsByTime`] is the same merge for operations alone (a Parquet table of
//! operations has no calls to interleave): a heap adjustment per operation, rows read in
//! place from their window.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

use super::calls::CallsByStart;
use crate::error::Result;
use crate::hash::FxHashMap as HashMap;
use crate::model::{OpId, OpPosition, Operation, Rank, RequestId, RoutineCall, Time};
use crate::store::counters::{CallValues, CounterStream};
use crate::store::{OpChunkInfo, OperationColumns, OperationField, OperationStream};
use crate::Trace;

/// Operations decoded and held at once across all locations (262,144, about 36 MB of
/// columns); each location also keeps its current chunk as stored, a few bytes per operation,
/// and decodes it a window at a time, so that a small window costs no chunk a second decoding.
const HELD_ROWS: usize = 1 << 18;
/// The smallest window a location reads its operations through (a window costs a few
/// allocations, which a few dozen rows amortise).
const MIN_WINDOW: usize = 64;

/// One event of the export's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// An operation, with its stored id and its position in its location.
    Op {
        /// The operation's id in the stored trace.
        id: OpId,
        /// The operation (with its stored depth).
        op: Operation,
        /// Its position among its location's operations.
        at: OpPosition,
    },
    /// A routine call begins.
    Enter(RoutineCall),
    /// A routine call ends.
    Leave(RoutineCall),
}

/// A location's operations, read chunk by chunk through a window of typed columns.
struct OpCursor {
    /// The location's chunks, in row order.
    chunks: Vec<OpChunkInfo>,
    next_chunk: usize,
    /// The chunk being read, kept as stored and decoded a window at a time.
    stream: Option<OperationStream>,
    /// The window: rows of a chunk, of which rows `at..` are still to come.
    rows: Option<OperationColumns>,
    at: usize,
    /// Where row `at`'s completed requests start in the window's list.
    list_at: usize,
    /// The number of counters to read with the operations (0: none).
    metrics: usize,
    /// The counter values of the chunk being read, read forward with its rows.
    counters: Option<CounterStream>,
    /// The current operation's counter values.
    values: CallValues,
}

/// An operation as the merges hand it out: a row of its location's window, read in place.
pub(crate) struct OpRow<'a> {
    /// Its id in the stored trace.
    pub id: OpId,
    /// Its location.
    pub rank: Rank,
    /// Its thread.
    pub thread: u32,
    /// The window holding it.
    pub columns: &'a OperationColumns,
    /// Its row in `columns`.
    pub row: usize,
    /// Where its completed requests start in `columns`' list.
    pub list_at: usize,
    /// Its counter values (one per counter of the trace; none when the merge reads no
    /// counters).
    pub counters: &'a [Option<i64>],
}

impl OpRow<'_> {
    /// The requests it completes.
    pub fn completes(&self) -> Result<&[RequestId]> {
        self.columns.completes(self.row, self.list_at)
    }

    /// It as a whole [`Operation`].
    pub fn operation(&self) -> Result<Operation> {
        self.columns
            .operation(self.row, self.rank, self.thread, self.list_at)
    }
}

impl OpCursor {
    fn new(mut chunks: Vec<OpChunkInfo>, metrics: usize) -> OpCursor {
        chunks.sort_unstable_by_key(|c| c.first_row);
        OpCursor {
            chunks,
            next_chunk: 0,
            stream: None,
            rows: None,
            at: 0,
            list_at: 0,
            metrics,
            counters: None,
            values: CallValues::default(),
        }
    }

    /// Makes the next operation current, reading the next window when this one is used
    /// up; its (start, depth), or `None` at the location's end.
    fn peek(&mut self, trace: &Trace, window: usize) -> Result<Option<(Time, u16)>> {
        if self.rows.as_ref().is_none_or(|r| self.at == r.rows()) {
            self.rows = None;
            self.at = 0;
            self.list_at = 0;
            loop {
                // A window of many locations reads its chunk as it goes rather than hold
                // it decoded whole.
                if let Some(stream) = self.stream.as_mut() {
                    if let Some(read) = stream.next_window(window)? {
                        self.rows = Some(read);
                        break;
                    }
                }
                let Some(info) = self.chunks.get(self.next_chunk) else {
                    self.stream = None;
                    break;
                };
                self.stream = Some(trace.operation_stream(info.chunk, &OperationField::ALL)?);
                if self.metrics > 0 {
                    self.counters = Some(trace.operation_counter_stream(info.chunk, self.metrics)?);
                }
                self.next_chunk += 1;
            }
        }
        Ok(self
            .rows
            .as_ref()
            .map(|r| (r.start(self.at), r.depth(self.at))))
    }

    /// Reads the counter values of the operation [`OpCursor::peek`] made current, `window`
    /// rows of its chunk's counters at a time (nothing when the cursor reads no counters).
    fn read_counters(&mut self, window: usize) -> Result<()> {
        let (Some(counters), Some(columns)) = (self.counters.as_mut(), self.rows.as_ref()) else {
            return Ok(());
        };
        if self.at < columns.rows() {
            self.values = counters.values(columns.id(self.at), window)?;
        }
        Ok(())
    }

    /// The operation [`OpCursor::peek`] made current, if any, of location (`rank`, `thread`).
    fn current(&self, (rank, thread): (Rank, u32)) -> Option<OpRow<'_>> {
        let columns = self.rows.as_ref().filter(|r| self.at < r.rows())?;
        Some(OpRow {
            id: columns.id(self.at),
            rank,
            thread,
            columns,
            row: self.at,
            list_at: self.list_at,
            counters: &self.values,
        })
    }

    fn advance(&mut self) {
        if let Some(r) = self.rows.as_ref().filter(|r| self.at < r.rows()) {
            self.list_at += r.completes_count(self.at);
            self.at += 1;
        }
    }
}

/// The window each of `locations` reads its operations through: together they hold about
/// [`HELD_ROWS`] decoded operations, however many locations there are (never more than the
/// rest of one chunk each, see [`OpCursor::peek`]).
fn window_for(locations: usize) -> usize {
    (HELD_ROWS / locations.max(1)).max(MIN_WINDOW)
}

/// The operation chunks of `chunks` by location, in (rank, thread) order, each location read
/// with `metrics` counters (0: none).
fn by_location(
    chunks: impl IntoIterator<Item = OpChunkInfo>,
    metrics: usize,
) -> Vec<((Rank, u32), OpCursor)> {
    let mut grouped: HashMap<(Rank, u32), Vec<OpChunkInfo>> = HashMap::default();
    for info in chunks {
        grouped
            .entry((info.rank, info.thread))
            .or_default()
            .push(info);
    }
    let mut locations: Vec<((Rank, u32), OpCursor)> = grouped
        .into_iter()
        .map(|(key, list)| (key, OpCursor::new(list, metrics)))
        .collect();
    locations.sort_unstable_by_key(|(key, _)| *key);
    locations
}

/// Operations alone (no routine calls), merged by (start, rank, thread) across locations,
/// each location's in stored order: what a table of operations sorted by time needs, at a
/// fraction of [`Events`]' cost (no nesting to follow, one heap adjustment per operation).
pub(crate) struct OperationsByTime<'t> {
    trace: &'t Trace,
    cursors: Vec<OpCursor>,
    /// Each cursor's location (rank, thread).
    locations: Vec<(Rank, u32)>,
    /// Locations by their next operation's start, then index (the (rank, thread) order).
    heap: BinaryHeap<Reverse<(Time, usize)>>,
    window: usize,
    /// Whether the operation at the heap's top was handed out and is to be stepped over.
    handed_out: bool,
}

impl<'t> OperationsByTime<'t> {
    /// The operations of the locations `chunks` belong to (all of their chunks must be
    /// there: pass a trace's [`Trace::op_chunks`], or all those of some ranks), each with its
    /// values of the trace's `metrics` counters (0: none are read).
    pub(crate) fn new(
        trace: &'t Trace,
        chunks: impl IntoIterator<Item = OpChunkInfo>,
        metrics: usize,
    ) -> Result<OperationsByTime<'t>> {
        let locations = by_location(chunks, metrics);
        let window = window_for(locations.len());
        OperationsByTime::with_window(trace, locations, window)
    }

    fn with_window(
        trace: &'t Trace,
        locations: Vec<((Rank, u32), OpCursor)>,
        window: usize,
    ) -> Result<OperationsByTime<'t>> {
        let mut merge = OperationsByTime {
            trace,
            cursors: Vec::with_capacity(locations.len()),
            locations: Vec::with_capacity(locations.len()),
            heap: BinaryHeap::with_capacity(locations.len()),
            window,
            handed_out: false,
        };
        for (i, (location, mut cursor)) in locations.into_iter().enumerate() {
            if let Some((start, _)) = cursor.peek(trace, window)? {
                merge.heap.push(Reverse((start, i)));
            }
            merge.cursors.push(cursor);
            merge.locations.push(location);
        }
        Ok(merge)
    }

    /// The next operation, or `None` after the last.
    pub(crate) fn next_operation(&mut self) -> Result<Option<OpRow<'_>>> {
        if std::mem::take(&mut self.handed_out) {
            if let Some(mut top) = self.heap.peek_mut() {
                let cursor = &mut self.cursors[top.0 .1];
                cursor.advance();
                match cursor.peek(self.trace, self.window)? {
                    Some((start, _)) => top.0 .0 = start,
                    None => {
                        PeekMut::pop(top);
                    }
                }
            }
        }
        let Some(&Reverse((_, i))) = self.heap.peek() else {
            return Ok(None);
        };
        self.handed_out = true;
        self.cursors[i].read_counters(self.window)?;
        Ok(self.cursors[i].current(self.locations[i]))
    }
}

/// One location (rank, thread) being replayed.
struct Location {
    rank: Rank,
    thread: u32,
    ops: Option<OpCursor>,
    /// Operations given out so far: the next one's position.
    next_index: u64,
    /// Calls due to be entered, in enter order.
    pending: VecDeque<RoutineCall>,
    /// Open calls, innermost last.
    open: Vec<RoutineCall>,
    /// The time of this location's entry in the heap, if it has one that is current.
    queued: Option<Time>,
}

/// What a location can do next.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Op,
    Enter,
    Leave,
}

impl Location {
    /// Its next event's kind and time, if it has any event left.
    fn next_step(&mut self, trace: &Trace, window: usize) -> Result<Option<(Time, Step)>> {
        let depth = self.open.len();
        let op = match self.ops.as_mut() {
            Some(c) => c
                .peek(trace, window)?
                .map(|(start, depth)| (start, usize::from(depth))),
            None => None,
        };
        let enter = self
            .pending
            .front()
            .map(|c| (c.start, usize::from(c.depth)));
        let leave = self.open.last().map(|c| c.end);
        let mut best: Option<(Time, Step)> = None;
        let mut consider = |t: Time, s: Step| {
            if best.is_none_or(|b| (t, s) < b) {
                best = Some((t, s));
            }
        };
        if let Some((t, d)) = op.filter(|&(_, d)| d == depth) {
            let _ = d;
            consider(t, Step::Op);
        }
        if let Some((t, _)) = enter.filter(|&(_, d)| d == depth) {
            consider(t, Step::Enter);
        }
        if let Some(t) = leave {
            consider(t, Step::Leave);
        }
        // Nothing fits the nesting (a store whose depths disagree with its calls): go on
        // in time order rather than stop.
        Ok(best.or_else(|| {
            [
                op.map(|(t, _)| (t, Step::Op)),
                enter.map(|(t, _)| (t, Step::Enter)),
            ]
            .into_iter()
            .flatten()
            .min()
        }))
    }

    /// Takes the event `step` says.
    fn take(&mut self, step: Step) -> Result<Event> {
        Ok(match step {
            Step::Op => {
                let cursor = self.ops.as_mut().expect("peeked before");
                let (id, op) = {
                    let row = cursor
                        .current((self.rank, self.thread))
                        .expect("peeked before");
                    (row.id, row.operation()?)
                };
                cursor.advance();
                let at = OpPosition {
                    rank: self.rank,
                    thread: self.thread,
                    index: self.next_index,
                };
                self.next_index += 1;
                Event::Op { id, op, at }
            }
            Step::Enter => {
                let call = self.pending.pop_front().expect("peeked before");
                self.open.push(call);
                Event::Enter(call)
            }
            Step::Leave => Event::Leave(self.open.pop().expect("peeked before")),
        })
    }
}

/// The trace's events in export order (see the module documentation).
pub(crate) struct Events<'t> {
    trace: &'t Trace,
    calls: CallsByStart,
    locations: Vec<Location>,
    by_location: HashMap<(Rank, u32), usize>,
    /// Locations by their next event's time, then rank and thread; stale entries are skipped.
    heap: BinaryHeap<Reverse<(Time, Rank, u32, usize)>>,
    window: usize,
}

impl<'t> Events<'t> {
    /// Prepares the stream: sorts the routine calls and opens a cursor per location.
    pub(crate) fn new(trace: &'t Trace) -> Result<Events<'t>> {
        let locations = by_location(trace.op_chunks().iter().copied(), 0);
        let window = window_for(locations.len());
        let mut events = Events {
            trace,
            calls: CallsByStart::new(trace)?,
            locations: Vec::with_capacity(locations.len()),
            by_location: HashMap::default(),
            heap: BinaryHeap::new(),
            window,
        };
        for ((rank, thread), cursor) in locations {
            let i = events.location(rank, thread);
            events.locations[i].ops = Some(cursor);
            events.requeue(i)?;
        }
        Ok(events)
    }

    /// The index of location (`rank`, `thread`), created empty if new.
    fn location(&mut self, rank: Rank, thread: u32) -> usize {
        let next = self.locations.len();
        let i = *self.by_location.entry((rank, thread)).or_insert(next);
        if i == next {
            self.locations.push(Location {
                rank,
                thread,
                ops: None,
                next_index: 0,
                pending: VecDeque::new(),
                open: Vec::new(),
                queued: None,
            });
        }
        i
    }

    /// Puts location `i` back in the heap under its next event's time.
    fn requeue(&mut self, i: usize) -> Result<()> {
        let loc = &mut self.locations[i];
        let next = loc.next_step(self.trace, self.window)?.map(|(t, _)| t);
        if next != loc.queued {
            loc.queued = next;
            if let Some(t) = next {
                self.heap.push(Reverse((t, loc.rank, loc.thread, i)));
            }
        }
        Ok(())
    }

    /// The time of the earliest location in the heap, dropping stale entries.
    fn earliest(&mut self) -> Option<(Time, usize)> {
        while let Some(&Reverse((t, _, _, i))) = self.heap.peek() {
            if self.locations[i].queued == Some(t) {
                return Some((t, i));
            }
            self.heap.pop();
        }
        None
    }

    /// The next event, or `None` at the end.
    pub(crate) fn next_event(&mut self) -> Result<Option<Event>> {
        loop {
            let earliest = self.earliest();
            // Calls that begin no later than the earliest event join their location first,
            // so that it can tell whether they come before its next operation.
            if let Some(call) = self.calls.peek() {
                if earliest.is_none_or(|(t, _)| call.start <= t) {
                    let call = self.calls.next_call()?.expect("peeked");
                    let i = self.location(call.rank, call.thread);
                    self.locations[i].pending.push_back(call);
                    self.requeue(i)?;
                    continue;
                }
            }
            let Some((_, i)) = earliest else {
                return Ok(None);
            };
            self.heap.pop();
            let loc = &mut self.locations[i];
            loc.queued = None;
            let Some((_, step)) = loc.next_step(self.trace, self.window)? else {
                continue;
            };
            let event = loc.take(step)?;
            self.requeue(i)?;
            return Ok(Some(event));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, GenConfig, Scenario};
    use crate::Database;

    /// Every location's operations with their ids, in stored order, read chunk by chunk.
    fn stored(trace: &Trace) -> HashMap<(Rank, u32), Vec<(OpId, Operation)>> {
        let mut out: HashMap<(Rank, u32), Vec<(OpId, Operation)>> = HashMap::default();
        let mut chunks = trace.op_chunks().to_vec();
        chunks.sort_by_key(|c| (c.rank, c.thread, c.first_row));
        for info in chunks {
            let rows = trace.chunk_operations(&info).unwrap();
            out.entry((info.rank, info.thread))
                .or_default()
                .extend(rows);
        }
        out
    }

    #[test]
    fn operations_by_time_give_every_operation_once_in_time_order_through_any_window() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("db")).unwrap();
        let config = GenConfig::new(Scenario::Stencil2d, 16, 120);
        db.import_events("s", |sink| generate(&config, sink).map(|_| ()))
            .unwrap();
        let trace = db.trace("s").unwrap();
        let truth = stored(&trace);
        // Windows of one row, smaller than a chunk (read on for their next rows), and whole.
        for window in [1, 97, 1000, HELD_ROWS] {
            let locations = by_location(trace.op_chunks().iter().copied(), 0);
            let mut merge = OperationsByTime::with_window(&trace, locations, window).unwrap();
            let mut seen: HashMap<(Rank, u32), Vec<(OpId, Operation)>> = HashMap::default();
            let mut last: Option<(Time, Rank, u32)> = None;
            while let Some(row) = merge.next_operation().unwrap() {
                let (id, op) = (row.id, row.operation().unwrap());
                let key = (op.start, op.rank, op.thread);
                assert!(
                    last.is_none_or(|l| l <= key),
                    "window {window}: {l:?} then {key:?}",
                    l = last
                );
                last = Some(key);
                seen.entry((op.rank, op.thread))
                    .or_default()
                    .push((id, op.clone()));
            }
            assert_eq!(seen.len(), 16, "window {window}");
            assert!(seen == truth, "window {window}: other operations or order");
        }
    }
}
