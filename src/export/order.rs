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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::calls::CallsByStart;
use crate::error::Result;
use crate::hash::FxHashMap as HashMap;
use crate::model::{OpId, OpPosition, Operation, Rank, RoutineCall, Time};
use crate::store::OpChunkInfo;
use crate::Trace;

/// Operations decoded and held at once across all locations (524,288: as many as an import
/// buffers).
const HELD_ROWS: usize = 1 << 19;
/// The smallest window a location reads its operations through.
const MIN_WINDOW: usize = 1024;

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

/// A location's operations, read chunk by chunk through a window.
struct OpCursor {
    /// The location's chunks, in row order.
    chunks: Vec<OpChunkInfo>,
    next_chunk: usize,
    /// Rows of `chunks[next_chunk]` already taken into a window.
    taken: usize,
    window: VecDeque<(OpId, Operation)>,
}

impl OpCursor {
    fn peek(&mut self, trace: &Trace, window: usize) -> Result<Option<&(OpId, Operation)>> {
        if self.window.is_empty() {
            while let Some(info) = self.chunks.get(self.next_chunk) {
                let rows = info.rows as usize;
                if self.taken < rows {
                    let ops = trace.chunk_operations(info)?;
                    let end = (self.taken + window).min(rows);
                    self.window
                        .extend(ops.into_iter().skip(self.taken).take(end - self.taken));
                    self.taken = end;
                    break;
                }
                self.next_chunk += 1;
                self.taken = 0;
            }
        }
        Ok(self.window.front())
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
                .map(|(_, op)| (op.start, usize::from(op.depth))),
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
    fn take(&mut self, step: Step) -> Event {
        match step {
            Step::Op => {
                let (id, op) = self
                    .ops
                    .as_mut()
                    .and_then(|c| c.window.pop_front())
                    .expect("peeked before");
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
        }
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
        let mut chunks: HashMap<(Rank, u32), Vec<OpChunkInfo>> = HashMap::default();
        for info in trace.op_chunks() {
            chunks
                .entry((info.rank, info.thread))
                .or_default()
                .push(*info);
        }
        let mut keys: Vec<(Rank, u32)> = chunks.keys().copied().collect();
        keys.sort_unstable();
        // A window never holds more than the rest of one chunk (see `OpCursor::peek`).
        let window = (HELD_ROWS / keys.len().max(1)).max(MIN_WINDOW);
        let mut events = Events {
            trace,
            calls: CallsByStart::new(trace)?,
            locations: Vec::with_capacity(keys.len()),
            by_location: HashMap::default(),
            heap: BinaryHeap::new(),
            window,
        };
        for key in keys {
            let mut list = chunks.remove(&key).unwrap_or_default();
            list.sort_unstable_by_key(|c| c.first_row);
            let i = events.location(key.0, key.1);
            events.locations[i].ops = Some(OpCursor {
                chunks: list,
                next_chunk: 0,
                taken: 0,
                window: VecDeque::new(),
            });
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
            let event = loc.take(step);
            self.requeue(i)?;
            return Ok(Some(event));
        }
    }
}
