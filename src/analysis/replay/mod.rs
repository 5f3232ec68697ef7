//! What if: replay a stored trace on a model network and predict its run time.
//!
//! - [`network`]: the LogGP model with an eager limit and the collective algorithms, every
//!   formula in one place;
//! - [`schedule`]: the discrete-event replay of every rank's bursts and calls.

pub mod fit;
pub mod matching;
pub mod network;
pub mod schedule;

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use serde::{Deserialize, Serialize};

use self::matching::{CommRanks, Envelope, Envelopes, Instances};
use self::network::NetworkModel;
use self::schedule::{Call, ReplayStats, Step};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::ingest::EventSink;
use crate::model::{CommId, OpId, OpKind, Operation, Rank, RequestId, Time};
use crate::store::ids::row_id;
use crate::store::{OpChunkInfo, OperationColumns, OperationField, OperationStream};
use crate::Trace;

/// One operation replayed: its measured and simulated times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// The operation.
    pub op: OpId,
    /// Its process.
    pub rank: Rank,
    /// Measured `(start, end)`.
    pub measured: (Time, Time),
    /// Simulated `(start, end)`.
    pub simulated: (Time, Time),
    /// It waited for a partner the trace does not have, and kept its measured duration.
    pub unresolved: bool,
}

/// The links between calls, made as the replay issues them (see [`matching`]): messages by
/// envelope, collective instances by call count, and the communicators' sizes.
struct Links<'t> {
    trace: &'t Trace,
    envelopes: Envelopes,
    instances: Instances,
    /// Members' ranks in their communicators (who sends to whom in a pairwise exchange).
    comm_ranks: CommRanks,
}

/// One location's operations, read a window at a time as the replay asks for them.
struct Cursor {
    /// The location (rank, thread).
    location: (Rank, u32),
    /// Where the location's operations are read from, positioned after `current`; with
    /// `ahead` while the next window is prepared. (Boxed, as every part of a cursor the
    /// replay does not touch on every call: with many ranks each cursor's lines miss the
    /// cache, and fewer of them miss less.)
    source: Option<Box<Source>>,
    /// The current window, prepared for the replay.
    current: Option<Prepared>,
    row: usize,
    /// The measured end of the previous operation.
    previous_end: Option<Time>,
    /// By request slot (see [`RequestSlots`]), the request's call: (a send?, its message).
    requests: Vec<(bool, u64)>,
    /// The operation handed to the replay and not ended yet, with its measured times.
    /// (The replay asks for a location's next call only once its previous one ended; that
    /// operation whole, when asked for, is the first of the current window's.)
    pending: Option<(OpId, Time, Time)>,
    /// The next window, being prepared on another core meanwhile (by `source`, which comes
    /// back with it).
    ahead: Option<Arc<Ahead>>,
}

/// A location's next window, prepared on another core ahead of its turn by the location's
/// source, which comes back with it.
struct Ahead {
    state: Mutex<AheadState>,
    done: Condvar,
}

/// Where a window prepared ahead is.
enum AheadState {
    /// Not begun: the replay may take the source back.
    Queued(Box<Source>),
    /// Being prepared; `awaited` once the replay waits for it (only then is it woken: a
    /// wake-up is a system call even when nobody waits).
    Running {
        awaited: bool,
    },
    Done(Box<Source>, Result<Option<Prepared>>),
    /// Taken back by the replay before it began, or lost (a panic while preparing).
    Dropped,
}

/// What the replay gets back of a window asked for ahead.
enum Taken {
    /// The window, prepared, and the source that read it.
    Ready(Box<Source>, Result<Option<Prepared>>),
    /// The source: the window had not begun (it will not now: the replay prepares it itself,
    /// rather than wait for a core to come free).
    Back(Box<Source>),
    /// Nothing: preparing it panicked.
    Lost,
}

impl Ahead {
    fn new(source: Box<Source>) -> Ahead {
        Ahead {
            state: Mutex::new(AheadState::Queued(source)),
            done: Condvar::new(),
        }
    }

    /// Prepares the window on this core, unless the replay took it back.
    fn run(&self, trace: &Trace) {
        let mut source = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            match std::mem::replace(&mut *state, AheadState::Running { awaited: false }) {
                AheadState::Queued(source) => source,
                other => {
                    *state = other;
                    return;
                }
            }
        };
        // Should preparing panic, the replay must not wait for it forever: it is told the
        // work was lost, and says so.
        struct Abandoned<'a>(&'a Ahead);
        impl Drop for Abandoned<'_> {
            fn drop(&mut self) {
                let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
                if let AheadState::Running { awaited } = *state {
                    *state = AheadState::Dropped;
                    if awaited {
                        self.0.done.notify_one();
                    }
                }
            }
        }
        let _abandoned = Abandoned(self);
        let prepared = source.next_window(trace);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let before = std::mem::replace(&mut *state, AheadState::Done(source, prepared));
        if matches!(before, AheadState::Running { awaited: true }) {
            self.done.notify_one();
        }
    }

    /// The window and the source that read it, waiting for them if they are being prepared;
    /// the source alone if the work had not begun.
    fn take(&self) -> Taken {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match std::mem::replace(&mut *state, AheadState::Dropped) {
                AheadState::Done(source, prepared) => return Taken::Ready(source, prepared),
                AheadState::Queued(source) => return Taken::Back(source),
                AheadState::Running { .. } => {
                    *state = AheadState::Running { awaited: true };
                    state = self.done.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                AheadState::Dropped => return Taken::Lost,
            }
        }
    }
}

/// A location's stored operations: its chunks in order, the one being read kept as stored
/// and decoded a window of rows at a time; moved to another core to read the next window
/// while the replay goes on, and back.
struct Source {
    /// The location's chunks, in order.
    chunks: Arc<[u32]>,
    next_chunk: usize,
    /// The chunk being read.
    stream: Option<OperationStream>,
    /// The location (rank, thread).
    location: (Rank, u32),
    /// Whether the caller wants each operation whole (then every window is prepared with its
    /// operations whole, [`Prepared::whole`]).
    whole: bool,
    /// Rows per window.
    window: usize,
    /// Rows read so far, plus the location's offset (see [`window_offset`]): its windows end
    /// where this is a multiple of `window`, whatever its chunks' lengths.
    at: usize,
    /// The location's requests created and not completed at the end of the rows read.
    requests: RequestSlots,
}

/// Rows prepared at a time for all locations together: each location's window is its share,
/// within [`WINDOW_ROWS`]. A prepared row takes 64 bytes, and a location holds its current
/// window and the next: about 32 MiB, where whole chunks (65,536 rows each) took 64 bytes
/// for every operation of a trace whose locations have a chunk each.
const PREPARED_ROWS: usize = 1 << 18;

/// The least and most rows of one location's window: a window amortises the reading of a
/// chunk's columns and the hand-over to another core over its rows.
const WINDOW_ROWS: std::ops::RangeInclusive<usize> = 32..=8192;

/// Rows per window when `locations` locations are replayed together.
fn window_rows(locations: usize) -> usize {
    (PREPARED_ROWS / locations.max(1)).clamp(*WINDOW_ROWS.start(), *WINDOW_ROWS.end())
}

/// Rows of a location's next window of `window` rows, `at` rows past one of its window
/// boundaries, `left` rows being left in its chunk: to the next boundary, but neither a short
/// window at a chunk's end (its rows join the window before) nor after one (it goes on to
/// the boundary after).
fn next_window_rows(window: usize, at: usize, left: usize) -> usize {
    let short = window / 4;
    let mut rows = window - at % window;
    if rows < short {
        rows += window;
    }
    if left.saturating_sub(rows) < short {
        rows = left;
    }
    rows.max(1)
}

/// Where the windows of location `at` of `locations` end, as an offset into its windows
/// of `window` rows: locations spread evenly over a window, so that locations that advance
/// together (the ranks of a stencil do) finish their windows one after the other, and their
/// next ones are asked of the other core one at a time rather than all at once (then the
/// last ones asked had not begun when their turn came, and the replay read them itself).
fn window_offset(at: usize, locations: usize, window: usize) -> usize {
    window * at / locations.max(1)
}

impl Source {
    /// The next window of the location's operations, prepared; `None` at the location's end.
    fn next_window(&mut self, trace: &Trace) -> Result<Option<Prepared>> {
        loop {
            if let Some(stream) = self.stream.as_mut() {
                let rows = next_window_rows(self.window, self.at, stream.rows_left());
                if let Some(columns) = stream.next_window(rows)? {
                    self.at += columns.rows();
                    return Prepared::new(
                        trace,
                        &columns,
                        self.location,
                        self.whole,
                        &mut self.requests,
                    )
                    .map(Some);
                }
            }
            let Some(&chunk) = self.chunks.get(self.next_chunk) else {
                return Ok(None);
            };
            self.next_chunk += 1;
            let fields = if self.whole {
                &OperationField::ALL[..]
            } else {
                FIELDS
            };
            self.stream = Some(trace.operation_stream(chunk, fields)?);
        }
    }

    /// Whether a window is left to read.
    fn has_more(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.rows_left() > 0)
            || self.next_chunk < self.chunks.len()
    }
}

/// What the replay reads of every operation: its times and sizes, and what matching needs.
const FIELDS: &[OperationField] = &[
    OperationField::Start,
    OperationField::End,
    OperationField::Kind,
    OperationField::SendBytes,
    OperationField::RecvBytes,
    OperationField::Comm,
    OperationField::Dest,
    OperationField::Source,
    OperationField::SendTag,
    OperationField::RecvTag,
    OperationField::Request,
    OperationField::Flags,
    OperationField::Completes,
];

/// A window of a location's operations as the replay needs them: one record per operation,
/// gathered from the chunk's columns ahead of its turn (on another core), so that the replay
/// reads one record per call instead of a value from each of thirteen columns (with many
/// ranks those reads missed the cache on every call).
struct Prepared {
    chunk: u32,
    /// The chunk's row that the window's first row is.
    first_row: usize,
    rows: Vec<Row>,
    /// Every row's completed requests (their slots), one after the other in row order.
    completed: Vec<u32>,
    /// The rows' operations whole, in row order, when asked for (from the same decoded
    /// columns: storing a simulated run no longer decodes each chunk a second time).
    whole: Option<VecDeque<Operation>>,
}

/// One operation: its measured times and what it does, short of matching.
#[derive(Clone, Copy)]
struct Row {
    start: Time,
    end: Time,
    action: Action,
}

/// What an operation does, as far as its own columns say: [`Step`] but for the links to
/// other calls (messages, instances, requests), which the replay makes as it issues them.
#[derive(Clone, Copy)]
enum Action {
    Local,
    Send {
        envelope: Envelope,
        bytes: u64,
        blocking: bool,
        /// The slot of the request a non-blocking send creates.
        request: Option<u32>,
    },
    Recv {
        envelope: Envelope,
        blocking: bool,
        /// The slot of the request a non-blocking receive creates.
        request: Option<u32>,
    },
    SendRecv {
        send: Envelope,
        bytes: u64,
        recv: Envelope,
    },
    /// Completes `count` requests from `at` in [`Prepared::completed`]; `free` only forgets
    /// them (`MPI_Request_free`).
    Complete {
        at: u32,
        count: u32,
        free: bool,
    },
    Collective {
        comm: CommId,
        kind: OpKind,
        members: u32,
        send_bytes: u64,
        recv_bytes: u64,
    },
}

impl Prepared {
    /// Prepares the operations of location (`rank`, `thread`) in `columns` (a window of one
    /// of its chunks), each whole too when `whole`.
    fn new(
        trace: &Trace,
        columns: &OperationColumns,
        (rank, thread): (Rank, u32),
        whole: bool,
        slots: &mut RequestSlots,
    ) -> Result<Prepared> {
        let mut rows = Vec::with_capacity(columns.rows());
        let mut ops = whole.then(|| VecDeque::with_capacity(columns.rows()));
        let mut requests = Requests {
            slots,
            listed: columns.completes_list(),
            completed: Vec::new(),
        };
        // Where each row's completed requests start in the window's list.
        let mut at = 0usize;
        for row in 0..columns.rows() {
            let count = columns.completes_count(row);
            rows.push(Row {
                start: columns.start(row),
                end: columns.end(row),
                // A call the model knows nothing of keeps its duration.
                action: columns.kind(row).map_or(Action::Local, |kind| {
                    action(trace, rank, kind, columns, row, (at, count), &mut requests)
                }),
            });
            if let Some(ops) = ops.as_mut() {
                ops.push_back(columns.operation(row, rank, thread, at)?);
            }
            at += count;
        }
        Ok(Prepared {
            chunk: columns.chunk(),
            first_row: columns.first_row(),
            rows,
            completed: requests.completed,
            whole: ops,
        })
    }
}

/// A location's requests created and not completed, each in a slot of its own: the replay
/// finds a request's call by its slot (an index) instead of looking the request up, and
/// slots are reused once their request completes, so that their number stays that of the
/// requests open at once. Kept while the location's windows are prepared, in order.
#[derive(Default)]
struct RequestSlots {
    open: FxHashMap<RequestId, u32>,
    /// Slots of no open request (every slot is open or free: there are `open` and `free`
    /// slots in all).
    free: Vec<u32>,
}

impl RequestSlots {
    /// The slot of request `request`, created now (a request reused before it completed
    /// leaves its old slot).
    fn create(&mut self, request: RequestId) -> u32 {
        let slots = self.open.len() + self.free.len();
        let slot = self.free.pop().unwrap_or(slots as u32);
        if let Some(old) = self.open.insert(request, slot) {
            self.free.push(old);
        }
        slot
    }

    /// The slot of request `request`, completed now (`None` if it is not open).
    fn complete(&mut self, request: RequestId) -> Option<u32> {
        let slot = self.open.remove(&request)?;
        self.free.push(slot);
        Some(slot)
    }
}

/// A window's requests while it is prepared.
struct Requests<'a> {
    slots: &'a mut RequestSlots,
    /// The requests the window's rows complete, as stored, in row order.
    listed: &'a [RequestId],
    /// The slots of those that were open, in row order.
    completed: Vec<u32>,
}

/// What row `row` of `columns`, an operation of `rank` that completes the `completes`
/// (offset, count) of the window's list, does; the import's rules decide what is a message.
fn action(
    trace: &Trace,
    rank: Rank,
    kind: OpKind,
    columns: &OperationColumns,
    row: usize,
    (at, count): (usize, usize),
    requests: &mut Requests<'_>,
) -> Action {
    use crate::model::{flags, ANY_TAG};
    let blocking = !kind.is_nonblocking();
    let comm = columns.comm(row);
    let flag_bits = columns.flags(row);
    // The import's rules: a send needs a communicator, a destination and a tag; a receive a
    // communicator, a source and a tag that is not an unresolved wildcard.
    let sent = match (
        kind.is_send(),
        comm,
        columns.dest(row),
        columns.send_tag(row),
    ) {
        (true, Some(c), Some(dest), Some(tag)) => Some((c, rank, dest, tag)),
        _ => None,
    };
    let received = match (
        kind.is_receive(),
        comm,
        columns.source(row),
        columns.recv_tag(row),
    ) {
        (true, Some(c), Some(source), Some(tag))
            if !(tag == ANY_TAG && flag_bits & flags::ANY_TAG != 0) =>
        {
            Some((c, source, rank, tag))
        }
        _ => None,
    };
    let bytes = columns.send_bytes(row);
    let mut request = || {
        columns
            .request(row)
            .filter(|_| !blocking)
            .map(|r| requests.slots.create(r))
    };
    match (sent, received) {
        (Some(send), Some(recv)) => Action::SendRecv { send, bytes, recv },
        (Some(envelope), None) => Action::Send {
            envelope,
            bytes,
            blocking,
            request: request(),
        },
        (None, Some(envelope)) => Action::Recv {
            envelope,
            blocking,
            request: request(),
        },
        _ if kind.is_completion() || kind == OpKind::RequestFree => {
            if flag_bits & flags::NOT_COMPLETED != 0 {
                Action::Local
            } else {
                let first = requests.completed.len();
                for &r in requests.listed.get(at..at + count).unwrap_or(&[]) {
                    if let Some(slot) = requests.slots.complete(r) {
                        requests.completed.push(slot);
                    }
                }
                Action::Complete {
                    at: first as u32,
                    count: (requests.completed.len() - first) as u32,
                    free: kind == OpKind::RequestFree,
                }
            }
        }
        _ if kind.blocking_collective() == Some(kind) => {
            let members = comm.and_then(|c| {
                trace
                    .header()
                    .communicator(c)
                    .map(|found| (c, found.members.len() as u32))
            });
            match members {
                Some((comm, members)) if members > 0 => Action::Collective {
                    comm,
                    kind,
                    members,
                    send_bytes: bytes,
                    recv_bytes: columns.recv_bytes(row),
                },
                _ => Action::Local,
            }
        }
        _ => Action::Local,
    }
}

impl Cursor {
    /// Makes sure a window with a row left is prepared (taking the one prepared ahead, or
    /// preparing it here if that is not ready, and starting the one after it on another
    /// core); false at the location's end.
    fn advance<'t: 's, 's>(&mut self, trace: &'t Trace, scope: &rayon::Scope<'s>) -> Result<bool> {
        loop {
            if self
                .current
                .as_ref()
                .is_some_and(|current| self.row < current.rows.len())
            {
                return Ok(true);
            }
            // Prepared ahead, waited for if another core is at it; prepared here if none
            // began it.
            let taken = match (self.ahead.take(), self.source.take()) {
                (Some(ahead), _) => ahead.take(),
                (None, Some(source)) => Taken::Back(source),
                (None, None) => return Ok(false),
            };
            let (source, next) = match taken {
                Taken::Ready(source, prepared) => (source, prepared),
                Taken::Back(mut source) => {
                    let prepared = source.next_window(trace);
                    (source, prepared)
                }
                Taken::Lost => {
                    return Err(crate::Error::Corrupt(format!(
                        "the replay's reading thread stopped on the operations of rank {} \
                         (thread {}): a damaged chunk?",
                        self.location.0, self.location.1
                    )))
                }
            };
            let Some(next) = next? else {
                return Ok(false);
            };
            self.source = Some(source);
            self.current = Some(next);
            self.row = 0;
            self.prepare_ahead(trace, scope);
        }
    }

    /// Starts preparing the location's next window (if it has one) on another core.
    fn prepare_ahead<'t: 's, 's>(&mut self, trace: &'t Trace, scope: &rayon::Scope<'s>) {
        let Some(source) = self.source.take_if(|source| source.has_more()) else {
            return;
        };
        let ahead = Arc::new(Ahead::new(source));
        let task = ahead.clone();
        scope.spawn(move |_| task.run(trace));
        self.ahead = Some(ahead);
    }

    /// The next call of this location for the replay.
    fn next<'t: 's, 's>(
        &mut self,
        links: &mut Links<'t>,
        scope: &rayon::Scope<'s>,
    ) -> Result<Option<Call>> {
        if !self.advance(links.trace, scope)? {
            return Ok(None);
        }
        let row = self.row;
        self.row += 1;
        let Some(current) = self.current.as_mut() else {
            return Ok(None);
        };
        let Row { start, end, action } = current.rows[row];
        let burst = self.previous_end.map_or(0, |e| start.saturating_sub(e));
        self.previous_end = Some(end);
        let step = link(
            self.location.0,
            action,
            &current.completed,
            links,
            &mut self.requests,
        );
        self.pending = Some((row_id(current.chunk, current.first_row + row), start, end));
        Ok(Some(Call {
            burst,
            duration: end.saturating_sub(start),
            step,
        }))
    }
}

/// The replay's step of an operation of `rank` doing `action`: its messages and collective
/// instance matched as MPI (and the import) match them, its requests remembered until the
/// call that completes them.
fn link(
    rank: Rank,
    action: Action,
    completed: &[u32],
    links: &mut Links<'_>,
    requests: &mut Vec<(bool, u64)>,
) -> Step {
    // A request's call, kept in its slot.
    let mut keep = |slot: u32, call: (bool, u64)| {
        let slot = slot as usize;
        if slot >= requests.len() {
            requests.resize(slot + 1, (false, 0));
        }
        requests[slot] = call;
    };
    match action {
        Action::Local => Step::Local,
        Action::SendRecv { send, bytes, recv } => Step::SendRecv {
            send: links.envelopes.message(send, true),
            bytes,
            recv: links.envelopes.message(recv, false),
        },
        Action::Send {
            envelope,
            bytes,
            blocking,
            request,
        } => {
            let message = links.envelopes.message(envelope, true);
            if let Some(slot) = request {
                keep(slot, (true, message));
            }
            Step::Send {
                message,
                bytes,
                blocking,
            }
        }
        Action::Recv {
            envelope,
            blocking,
            request,
        } => {
            let message = links.envelopes.message(envelope, false);
            if let Some(slot) = request {
                keep(slot, (false, message));
            }
            Step::Recv { message, blocking }
        }
        Action::Complete { at, count, free } => {
            let (at, count) = (at as usize, count as usize);
            let (mut sends, mut recvs) = (Vec::new(), Vec::new());
            for &slot in completed.get(at..at + count).unwrap_or(&[]) {
                match requests.get(slot as usize) {
                    Some(&(true, m)) => sends.push(m),
                    Some(&(false, m)) => recvs.push(m),
                    None => {}
                }
            }
            if free || (sends.is_empty() && recvs.is_empty()) {
                Step::Local
            } else {
                Step::Wait { sends, recvs }
            }
        }
        Action::Collective {
            comm,
            kind,
            members,
            send_bytes,
            recv_bytes,
        } => Step::Collective {
            instance: links.instances.instance(rank, comm, kind, members),
            kind,
            members,
            position: links.comm_ranks.rank_in(links.trace.header(), comm, rank),
            send_bytes,
            recv_bytes,
        },
    }
}

/// Replays every operation of `trace` on `net`; `each` receives every operation with its
/// measured and simulated times, in each location's order. Locations (a rank's threads) are
/// replayed as ranks of their own.
pub fn replay_trace(
    trace: &Trace,
    net: &NetworkModel,
    each: &mut dyn FnMut(Replayed) -> Result<()>,
) -> Result<ReplayStats> {
    replay_with(trace, net, false, None, &mut |r, _| each(r))
}

/// [`replay_trace`], handing each operation whole too (with its simulated times) when
/// `whole`, reading `window` rows of a location at a time (by default its share of
/// [`PREPARED_ROWS`]).
fn replay_with(
    trace: &Trace,
    net: &NetworkModel,
    whole: bool,
    window: Option<usize>,
    each: &mut dyn FnMut(Replayed, Option<Operation>) -> Result<()>,
) -> Result<ReplayStats> {
    let mut by_location: FxHashMap<(Rank, u32), usize> = FxHashMap::default();
    let mut locations: Vec<((Rank, u32), Vec<&OpChunkInfo>)> = Vec::new();
    for info in trace.op_chunks().iter().filter(|c| c.rows > 0) {
        let location = (info.rank, info.thread);
        let at = *by_location.entry(location).or_insert_with(|| {
            locations.push((location, Vec::new()));
            locations.len() - 1
        });
        locations[at].1.push(info);
    }
    let window = window.unwrap_or_else(|| window_rows(locations.len()));
    let mut origin = Vec::with_capacity(locations.len());
    let mut cursors: Vec<Cursor> = Vec::with_capacity(locations.len());
    let count = locations.len();
    for (at, (location, mut chunks)) in locations.into_iter().enumerate() {
        chunks.sort_by_key(|info| info.first_row);
        origin.push(chunks.first().map_or(0, |info| info.first_start));
        cursors.push(Cursor {
            location,
            source: Some(Box::new(Source {
                chunks: chunks.iter().map(|info| info.chunk).collect(),
                next_chunk: 0,
                stream: None,
                location,
                whole,
                window,
                at: window_offset(at, count, window),
                requests: RequestSlots::default(),
            })),
            current: None,
            row: 0,
            previous_end: None,
            requests: Vec::new(),
            pending: None,
            ahead: None,
        });
    }
    prepare_first_windows(trace, &mut cursors)?;
    // The next window of each location is prepared on the other cores while this one
    // replays, by a thread per other core: with a thread per core (rayon's pool), a preparing
    // thread took turns with the replay on its core.
    let helpers =
        std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1));
    let readers = rayon::ThreadPoolBuilder::new()
        .num_threads(helpers)
        .thread_name(|i| format!("replay-reader-{i}"))
        .build()
        .map_err(|e| {
            crate::Error::Usage(format!("could not start the replay's reading threads: {e}"))
        })?;
    readers.in_place_scope(|scope| {
        // In the order their turns come: the locations whose first window is shortest first.
        let mut order: Vec<usize> = (0..cursors.len()).collect();
        order.sort_by_key(|&at| cursors[at].current.as_ref().map_or(0, |c| c.rows.len()));
        for at in order {
            cursors[at].prepare_ahead(trace, scope);
        }
        schedule::replay(
            net,
            &origin,
            &mut Locations {
                links: Links {
                    trace,
                    envelopes: Envelopes::default(),
                    instances: Instances::default(),
                    comm_ranks: CommRanks::default(),
                },
                cursors,
                each,
                scope,
            },
        )
    })
}

/// Prepares every location's first window, on every core, before the replay begins: its
/// first round of calls visits every location, and with many ranks preparing them one by
/// one as it comes to them would leave the other core idle.
fn prepare_first_windows(trace: &Trace, cursors: &mut [Cursor]) -> Result<()> {
    use rayon::prelude::*;
    cursors.par_iter_mut().try_for_each(|c| {
        if let Some(source) = c.source.as_mut() {
            c.current = source.next_window(trace)?;
        }
        Ok(())
    })
}

/// The trace's locations as the replay's program.
struct Locations<'t, 'e, 's, 'x> {
    links: Links<'t>,
    cursors: Vec<Cursor>,
    scope: &'x rayon::Scope<'s>,
    each: &'e mut dyn FnMut(Replayed, Option<Operation>) -> Result<()>,
}

impl<'t: 's, 's> schedule::Program for Locations<'t, '_, 's, '_> {
    fn next(&mut self, rank: usize) -> Result<Option<Call>> {
        self.cursors[rank].next(&mut self.links, self.scope)
    }

    fn forget(&mut self, message: u64) {
        self.links.envelopes.forget(message);
    }

    fn ended(&mut self, rank: usize, start: Time, end: Time, unresolved: bool) -> Result<()> {
        let cursor = &mut self.cursors[rank];
        let Some((op, s, e)) = cursor.pending.take() else {
            return Ok(());
        };
        let whole = cursor.current.as_mut().and_then(|c| c.whole.as_mut());
        let operation = whole.and_then(VecDeque::pop_front).map(|mut o| {
            (o.start, o.end) = (start, end);
            o
        });
        (self.each)(
            Replayed {
                op,
                rank: cursor.location.0,
                measured: (s, e),
                simulated: (start, end),
                unresolved,
            },
            operation,
        )
    }
}

/// One rank's measured and predicted times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankPrediction {
    /// The rank.
    pub rank: Rank,
    /// When its last operation ended, measured and predicted (ns since the trace's start).
    pub end: (Time, Time),
    /// Its time inside MPI calls, measured and predicted.
    pub mpi: (Time, Time),
    /// Its calls that waited for a partner the trace does not have (kept their measured
    /// duration).
    pub unresolved: u64,
}

/// What [`simulate`] predicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The model replayed.
    pub model: NetworkModel,
    /// Per rank, in rank order.
    pub ranks: Vec<RankPrediction>,
    /// The run time (first start to last end), measured and predicted.
    pub run: (Time, Time),
    /// Time in MPI over all ranks, measured and predicted.
    pub mpi: (Time, Time),
    /// Calls whose partner never came (replayed with their measured duration).
    pub unresolved: u64,
}

impl Prediction {
    /// `(measured - predicted) / measured` of the run time.
    pub fn error(&self) -> f64 {
        relative_error(self.run.0, self.run.1)
    }
}

/// `(measured - predicted) / measured` (0 when nothing was measured).
pub fn relative_error(measured: Time, predicted: Time) -> f64 {
    if measured == 0 {
        0.0
    } else {
        (measured as f64 - predicted as f64) / measured as f64
    }
}

/// Replays `trace` on `net` and sums each rank's end and time in MPI, measured and predicted.
pub fn simulate(trace: &Trace, net: &NetworkModel) -> Result<Prediction> {
    predict(trace, net, None)
}

/// [`simulate`], storing the simulated run in `db` as a trace called `name`: the same
/// operations (messages, requests and collectives matched again by the import) at their
/// simulated times. Routine calls are not kept (the replay does not time them).
pub fn simulate_as_trace(
    db: &crate::Database,
    trace: &Trace,
    net: &NetworkModel,
    name: &str,
) -> Result<Prediction> {
    if db.trace_names()?.iter().any(|n| n == name) {
        return Err(crate::Error::Usage(format!(
            "a trace named {name:?} already exists: store the simulation under another name \
             (AS TRACE other), or drop it first (mtfdb drop {name})"
        )));
    }
    let mut prediction = None;
    let source = format!("SIMULATE WITH {net} of trace {:?}", trace.name());
    db.import_events_from(name, &source, "simulated", |sink| {
        sink.header(trace.header())?;
        for (id, text) in trace.strings().iter().enumerate() {
            sink.string(id as u32, text)?;
        }
        prediction = Some(predict(trace, net, Some(&mut *sink))?);
        sink.finish()
    })?;
    prediction.ok_or_else(|| crate::Error::Usage("the simulation stored nothing".into()))
}

fn predict(
    trace: &Trace,
    net: &NetworkModel,
    mut sink: Option<&mut dyn EventSink>,
) -> Result<Prediction> {
    let first = trace.summary().first_time.unwrap_or(0);
    let mut ranks: Vec<RankPrediction> = Vec::new();
    let mut at: FxHashMap<Rank, usize> = FxHashMap::default();
    // A location's calls come in runs: its rank's place is looked up when the rank changes.
    let mut last: Option<(Rank, usize)> = None;
    let unresolved = replay_with(trace, net, sink.is_some(), None, &mut |r, operation| {
        let i = match last {
            Some((rank, i)) if rank == r.rank => i,
            _ => {
                let i = *at.entry(r.rank).or_insert_with(|| {
                    ranks.push(RankPrediction {
                        rank: r.rank,
                        end: (0, 0),
                        mpi: (0, 0),
                        unresolved: 0,
                    });
                    ranks.len() - 1
                });
                last = Some((r.rank, i));
                i
            }
        };
        let p = &mut ranks[i];
        p.unresolved += u64::from(r.unresolved);
        p.end.0 = p.end.0.max(r.measured.1.saturating_sub(first));
        p.end.1 = p.end.1.max(r.simulated.1.saturating_sub(first));
        p.mpi.0 = p
            .mpi
            .0
            .saturating_add(r.measured.1.saturating_sub(r.measured.0));
        p.mpi.1 = p
            .mpi
            .1
            .saturating_add(r.simulated.1.saturating_sub(r.simulated.0));
        match (&mut sink, operation) {
            (Some(sink), Some(op)) => sink.operation(&op),
            _ => Ok(()),
        }
    })?;
    ranks.sort_by_key(|p| p.rank);
    let total = |f: fn(&RankPrediction) -> Time| {
        ranks
            .iter()
            .try_fold(0 as Time, |sum, r| sum.checked_add(f(r)))
    };
    let mpi = total(|r| r.mpi.0).zip(total(|r| r.mpi.1));
    if mpi.is_none_or(|(_, predicted)| predicted == Time::MAX)
        || ranks.iter().any(|p| p.end.1 == Time::MAX)
    {
        return Err(crate::Error::Usage(format!(
            "the simulated run on {net} lasts past 2^64 ns (584 years): no time to report; \
             check the parameters' units (a plain number is seconds)"
        )));
    }
    let run = ranks
        .iter()
        .fold((0, 0), |(m, p), r| (m.max(r.end.0), p.max(r.end.1)));
    Ok(Prediction {
        model: *net,
        ranks,
        run,
        mpi: mpi.unwrap_or_default(),
        unresolved: unresolved.calls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, GenConfig, Scenario};
    use crate::store::ids::CHUNK_ROWS;
    use crate::Database;

    /// Everything the replay hands out, in the order it does.
    fn replayed(
        trace: &Trace,
        whole: bool,
        window: Option<usize>,
    ) -> Vec<(Replayed, Option<Operation>)> {
        let mut out = Vec::new();
        replay_with(
            trace,
            &NetworkModel::default(),
            whole,
            window,
            &mut |r, op| {
                out.push((r, op));
                Ok(())
            },
        )
        .unwrap();
        out
    }

    /// The windows a location of `chunks` (rows per chunk) is read in, `offset` rows past its
    /// window boundaries.
    fn windows(window: usize, offset: usize, chunks: &[usize]) -> Vec<usize> {
        let (mut read, mut out) = (0, Vec::new());
        for &chunk in chunks {
            let mut left = chunk;
            while left > 0 {
                let rows = next_window_rows(window, read + offset, left).min(left);
                out.push(rows);
                (read, left) = (read + rows, left - rows);
            }
        }
        out
    }

    #[test]
    fn windows_end_at_their_locations_boundaries_and_none_is_short() {
        // Boundaries 30 rows into each window of 100: the first window is the 70 rows to the
        // first; the chunk's last 20 rows (under a quarter of a window) join the window
        // before, 30 rows do not.
        assert_eq!(windows(100, 30, &[490]), vec![70, 100, 100, 100, 120]);
        assert_eq!(windows(100, 30, &[500]), vec![70, 100, 100, 100, 100, 30]);
        // A chunk ending 10 rows past a boundary: they join the window before, and the next
        // chunk's windows end at the location's boundaries again.
        assert_eq!(windows(100, 0, &[210, 290]), vec![100, 110, 90, 100, 100]);
        // A chunk ending 10 rows before a boundary: the next chunk's first window goes on to
        // the boundary after it.
        assert_eq!(windows(100, 0, &[190, 310]), vec![100, 90, 110, 100, 100]);
        assert_eq!(windows(100, 90, &[300]), vec![110, 100, 90]);
        // Locations spread their boundaries over a window.
        assert_eq!(
            (0..4)
                .map(|at| window_offset(at, 4, 100))
                .collect::<Vec<_>>(),
            vec![0, 25, 50, 75]
        );
        // Windows of one row stay one row.
        assert_eq!(windows(1, 0, &[3]), vec![1, 1, 1]);
    }

    #[test]
    fn windows_of_any_size_replay_the_same_run() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("db")).unwrap();
        // Over a chunk's rows per location (65,536), so that windows cross chunks too.
        let config = GenConfig::new(Scenario::Stencil2d, 4, 8_000);
        db.import_events("s", |sink| generate(&config, sink).map(|_| ()))
            .unwrap();
        let trace = db.trace("s").unwrap();
        assert!(
            trace.op_chunks().len() > 4,
            "{} chunks",
            trace.op_chunks().len()
        );
        for whole in [false, true] {
            let truth = replayed(&trace, whole, Some(CHUNK_ROWS));
            assert_eq!(truth.len() as u64, trace.summary().operations);
            assert!(truth
                .iter()
                .all(|(r, op)| op.is_some() == whole && !r.unresolved));
            for window in [1, 7, 256] {
                assert!(
                    replayed(&trace, whole, Some(window)) == truth,
                    "window {window}, whole {whole}"
                );
            }
        }
    }
}
