//! One thread of an MPI rank: its MPI call events become operations, its user-function
//! events routine enters and leaves, and the communication and global-operation records
//! that fall within its calls fill those operations in.
//!
//! Items leave in start order. An operation takes its place in the thread's output when its
//! call opens, and leaves once nothing more can be learnt about it:
//!
//! - a send (or the send side of `MPI_Sendrecv`) waits for the communication record whose
//!   logical send time falls within it, until the file's time passes the call's end (Paraver
//!   sorts records by time, and a record stands at its logical send time or, as Extrae writes
//!   it, at its physical send time, both within the send call);
//! - a blocking receive waits the same way for the record whose logical receive time falls
//!   within it (the record stands at or before the physical receive, which is within it);
//! - a non-blocking receive waits for its record until the end of the trace (the record comes
//!   with the send, which may happen much later), and then, if the record's physical receive
//!   time falls in a later Wait or Test call, for that call: the receive gets a request and
//!   the call completes it;
//! - a Wait or Test waits until the file's time passes its end, when every record whose
//!   physical receive falls within it has been read.
//!
//! - a rooted collective whose call does not name its root (Extrae flags the root on the
//!   root's own call only) waits until the root's call of the same instance is read (see
//!   `roots`).
//!
//! A record may also come before the call it describes: old-style traces place a record at
//! its logical send time, before the receiver has even posted its receive. A record side that
//! no call read so far holds waits until the file's time passes its logical time, for a call
//! read later to hold it.
//!
//! What never comes is given up: a send or receive without a record (its message crosses the
//! cut of a cut trace), or a collective without a communicator or root, is kept as a call of
//! its name without records (`OpKind::Other`, `flags::WITHOUT_RECORDS`), which the import
//! reports. Items held behind a waiting one are bounded: past [`MAX_HELD`], the oldest is
//! given up. A record side that falls within no call of its kind (traces without MPI call
//! events, or calls the tracer did not mark) becomes an operation of its own: `MPI_Send` over
//! its logical and physical send times, `MPI_Recv` at its physical receive time.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use super::calls::{
    global_op_kind, GLOBAL_OP_COMM, GLOBAL_OP_IS_ROOT, GLOBAL_OP_RECV_SIZE, GLOBAL_OP_SEND_SIZE,
    USER_FUNCTION,
};
use super::context::Context;
use super::layout::Layout;
use crate::error::Result;
use crate::model::{
    flags, Anomaly, CommId, OpKind, OpPosition, Operation, Rank, RoutineEvent, Rule, StrId, Time,
};

/// Items a thread holds behind one still waiting before that one is given up.
pub(crate) const MAX_HELD: usize = 1 << 16;

/// The send side waits for its communication record.
const SEND: u8 = 1;
/// The receive side waits for its communication record.
const RECV: u8 = 2;
/// A non-blocking receive waits for the Wait/Test that completes it.
const CLAIM: u8 = 4;
/// A Wait/Test waits until no more records can name it.
const SETTLE: u8 = 8;
/// A rooted collective waits for its root, which only the root's own call records.
const ROOT: u8 = 16;

/// Marks a deadline that belongs to a waiting record side rather than to an item.
const FUTURE: u64 = 1 << 63;

/// The side of a message a record's part describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Send,
    Recv,
}

#[derive(Debug)]
enum Item {
    Op(Operation),
    Routine(RoutineEvent),
}

impl Item {
    fn start(&self) -> Time {
        match self {
            Item::Op(op) => op.start,
            Item::Routine(r) => r.time,
        }
    }
}

#[derive(Debug)]
struct Slot {
    item: Item,
    open: bool,
    /// What it waits for ([`SEND`], [`RECV`], [`CLAIM`], [`SETTLE`]).
    needs: u8,
    /// The physical receive time of a non-blocking receive's message, learnt while the
    /// receive was still open (whether it needs a completion is decided when it closes).
    pending_pr: Option<Time>,
    /// The `.prv` line it came from (for an error the import seam finds in it).
    line: u64,
    /// The rules its records broke, reported (with its position) once it left.
    broken: Vec<Anomaly>,
}

impl Slot {
    fn ready(&self) -> bool {
        !self.open && self.needs == 0
    }
}

/// An operation made from a record alone, waiting for its place in start order.
#[derive(Debug)]
struct Made {
    order: u64,
    op: Operation,
    line: u64,
}

impl PartialEq for Made {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Made {}
impl PartialOrd for Made {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Made {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.op.start, self.order).cmp(&(other.op.start, other.order))
    }
}

/// An open MPI call.
#[derive(Debug, Clone, Copy)]
struct Frame {
    seq: u64,
    ty: u64,
    value: i64,
}

/// A non-blocking receive whose message arrived (physical receive) at `pr`, in a
/// completion call not read yet.
#[derive(Debug, Clone, Copy)]
struct Expected {
    pr: Time,
    request: u64,
    seq: u64,
}

/// What a communication record says about one side of its message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side {
    /// The logical time (send, or receive), ns.
    pub logical: Time,
    /// The physical time, ns.
    pub physical: Time,
    /// The other side's world rank.
    pub peer: Rank,
    pub tag: i32,
    pub bytes: u64,
}

/// An old-style global-operation record (`4:`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GlobalOp {
    pub time: Time,
    pub comm: u64,
    pub send: u64,
    pub recv: u64,
    pub op: u64,
    pub root: u64,
}

/// The conversion state of one thread of an MPI rank.
pub(crate) struct RankThread {
    /// Its index among the rank threads (for deadlines).
    index: u32,
    pub rank: Rank,
    pub thread: u32,
    out: VecDeque<Slot>,
    /// Sequence number of `out[0]`.
    base: u64,
    made: BinaryHeap<Reverse<Made>>,
    made_count: u64,
    stack: Vec<Frame>,
    functions: Vec<StrId>,
    awaiting_send: Vec<u64>,
    awaiting_recv: Vec<u64>,
    completions: Vec<u64>,
    expected: Vec<Expected>,
    /// Record sides waiting for a call read later: (id, side, what it says).
    future: Vec<(u64, Dir, Side)>,
    future_count: u64,
    /// The world communicator, on which messages travel.
    world: CommId,
    /// The time of its last state or event record.
    pub last_time: Time,
    /// Event type:value pairs it recorded.
    pub events: u64,
    /// User-function entries it recorded.
    pub regions: u64,
    /// Operations handed to the sink so far (the next one's position on its rank and thread).
    ops_out: u64,
}

impl RankThread {
    pub fn new(index: u32, rank: Rank, thread: u32, world: CommId) -> RankThread {
        RankThread {
            index,
            rank,
            thread,
            out: VecDeque::new(),
            base: 0,
            made: BinaryHeap::new(),
            made_count: 0,
            stack: Vec::new(),
            functions: Vec::new(),
            awaiting_send: Vec::new(),
            awaiting_recv: Vec::new(),
            completions: Vec::new(),
            expected: Vec::new(),
            future: Vec::new(),
            future_count: 0,
            world,
            last_time: 0,
            events: 0,
            regions: 0,
            ops_out: 0,
        }
    }

    /// A record of this thread at `time` was read (records that go back in time are read as
    /// they stand; the thread's time stays the latest).
    pub fn saw(&mut self, time: Time) {
        self.last_time = self.last_time.max(time);
    }

    fn push(&mut self, item: Item, open: bool, needs: u8, line: u64) -> u64 {
        self.out.push_back(Slot {
            item,
            open,
            needs,
            pending_pr: None,
            line,
            broken: Vec::new(),
        });
        self.base + self.out.len() as u64 - 1
    }

    /// The slot of item `seq`, unless it has left.
    fn slot(&mut self, seq: u64) -> Option<&mut Slot> {
        let i = seq.checked_sub(self.base)?;
        self.out.get_mut(i as usize)
    }

    fn op(&mut self, seq: u64) -> &mut Operation {
        match self.slot(seq).map(|s| &mut s.item) {
            Some(Item::Op(op)) => op,
            other => unreachable!("item {seq} is an operation, found {other:?}"),
        }
    }

    fn new_op(&self, kind: OpKind, start: Time, end: Time) -> Operation {
        let mut op = Operation::new(self.rank, kind, start, end);
        op.thread = self.thread;
        op
    }

    fn skipped(&self, time: Time, what: String) -> Anomaly {
        Anomaly::SkippedRecord {
            rank: Some(self.rank),
            time: Some(time),
            what,
        }
    }

    /// The time until which this thread's open calls are known to be open: its last
    /// record's time, or just before the file's time (records are sorted by time, so a call
    /// not closed by a record before the file's time was still open then).
    fn known_until(&self, now: Time) -> Time {
        self.last_time.max(now.saturating_sub(1))
    }

    /// Reports an end (value 0) of event type `ty` with nothing of that type open: what
    /// was entered before a cut trace begins.
    fn leave_without_enter(&self, cx: &mut Context, ty: u64, time: Time) -> Result<()> {
        let routine = cx.type_name(ty)?;
        cx.anomaly(Anomaly::LeaveWithoutEnter {
            rank: self.rank,
            thread: self.thread,
            time,
            routine,
        })
    }

    /// An MPI call event: a non-zero `value` of type `ty` opens the call it names (or, if
    /// the innermost open call has the same type and value, closes it: MPItrace marked the
    /// end of some calls so); 0 closes the innermost open call of that type.
    pub fn mpi_call(&mut self, cx: &mut Context, ty: u64, value: i64, time: Time) -> Result<()> {
        if value == 0 {
            let Some(i) = self.stack.iter().rposition(|f| f.ty == ty) else {
                return self.leave_without_enter(cx, ty, time);
            };
            if i + 1 < self.stack.len() {
                let innermost = self.stack[self.stack.len() - 1].seq;
                let (closed, inner) = (self.op(self.stack[i].seq).kind, self.op(innermost).kind);
                let routine = cx.kind_name(closed)?;
                let innermost = cx.kind_name(inner)?;
                cx.anomaly(Anomaly::CrossedLeave {
                    rank: self.rank,
                    thread: self.thread,
                    time,
                    routine,
                    innermost,
                })?;
            }
            while self.stack.len() > i {
                #[allow(clippy::expect_used)]
                // the frames above index i exist: i was found in the stack
                let frame = self.stack.pop().expect("frames above i");
                self.close(cx, frame, time)?;
            }
            return Ok(());
        }
        if let Some(&top) = self.stack.last() {
            if top.ty == ty && top.value == value {
                self.stack.pop();
                return self.close(cx, top, time);
            }
        }
        let kind = cx.call_kind(ty, value)?;
        let mut needs = 0;
        if kind.is_send() {
            needs |= SEND;
        }
        if kind.is_receive() {
            needs |= RECV;
        }
        let op = self.new_op(kind, time, time);
        let seq = self.push(Item::Op(op), true, needs, cx.line);
        if needs & SEND != 0 {
            self.awaiting_send.push(seq);
        }
        if needs & RECV != 0 {
            self.awaiting_recv.push(seq);
        }
        if kind.is_completion() {
            self.completions.push(seq);
        }
        self.stack.push(Frame { seq, ty, value });
        Ok(())
    }

    /// Ends the call of `frame` at `time`.
    fn close(&mut self, cx: &mut Context, frame: Frame, time: Time) -> Result<()> {
        let seq = frame.seq;
        #[allow(clippy::expect_used)] // an open call's slot leaves only once the call is closed
        let slot = self.slot(seq).expect("an open call has not left");
        slot.open = false;
        let pending_pr = slot.pending_pr.take();
        let Item::Op(op) = &mut slot.item else {
            unreachable!("a frame holds an operation")
        };
        op.end = time;
        let (kind, start, has_comm) = (op.kind, op.start, op.comm.is_some());
        let mut wake = slot.needs & SEND != 0 || (slot.needs & RECV != 0 && !kind.is_nonblocking());
        let sides = slot.needs & (SEND | RECV) != 0;
        if kind.is_completion() {
            slot.needs |= SETTLE;
            wake = true;
            self.claim(seq, start, time);
        }
        if sides && !self.future.is_empty() {
            self.adopt(cx, seq, start, time);
        }
        if wake {
            cx.wake_after(time, self.index, seq);
        }
        if let Some(pr) = pending_pr {
            self.decide_completion(cx, seq, pr);
        }
        if kind.is_collective() && !has_comm {
            // No global-operation record or communicator event says where it ran.
            return self.without_records(cx, seq);
        }
        if kind.is_rooted() {
            if self.op(seq).root.is_none() {
                if let Some(s) = self.slot(seq) {
                    s.needs |= ROOT;
                }
            }
            cx.rooted.push((self.index, seq));
        }
        Ok(())
    }

    /// Keeps call `seq`, whose records are missing or unusable, as a call of its name
    /// outside matching (the import reports it as a call without records).
    fn without_records(&mut self, cx: &mut Context, seq: u64) -> Result<()> {
        let kind = self.op(seq).kind;
        let name = cx.kind_name(kind)?;
        self.awaiting_send.retain(|&x| x != seq);
        self.awaiting_recv.retain(|&x| x != seq);
        self.expected.retain(|e| e.seq != seq);
        let Some(slot) = self.slot(seq) else {
            return Ok(());
        };
        slot.needs &= !(SEND | RECV | CLAIM | ROOT);
        let Item::Op(op) = &mut slot.item else {
            return Ok(());
        };
        op.kind = OpKind::Other(name);
        op.flags |= flags::WITHOUT_RECORDS;
        (op.comm, op.dest, op.source, op.root) = (None, None, None, None);
        (op.send_tag, op.recv_tag, op.request) = (None, None, None);
        Ok(())
    }

    /// The communicator, kind, rank and root of collective `seq`, if it has not left.
    pub fn collective(&mut self, seq: u64) -> Option<(CommId, OpKind, Rank, Option<Rank>)> {
        match &self.slot(seq)?.item {
            Item::Op(op) => Some((op.comm?, op.kind, op.rank, op.root)),
            Item::Routine(_) => None,
        }
    }

    /// Collective `seq` learnt its root from its instance (`Some`), or never will (`None`:
    /// the root's call is not in the trace).
    pub fn resolve_root(&mut self, seq: u64, root: Option<Rank>) {
        let Some(slot) = self.slot(seq) else {
            return;
        };
        if slot.needs & ROOT == 0 {
            return;
        }
        slot.needs &= !ROOT;
        // A call whose own record named a root outside its communicator stays without one;
        // one that never learns its root is kept as it is (the import's seam reports the
        // missing root).
        if let (Some(r), Item::Op(op)) = (root, &mut slot.item) {
            if op.flags & flags::WITHOUT_RECORDS == 0 {
                op.root = Some(r);
            }
        }
    }

    /// Completion call `seq` over [start, end] completes the non-blocking receives whose
    /// messages arrived within it.
    fn claim(&mut self, seq: u64, start: Time, end: Time) {
        let mut i = 0;
        while i < self.expected.len() {
            let e = self.expected[i];
            if start <= e.pr && e.pr <= end {
                self.expected.swap_remove(i);
                self.op(seq).completes.push(e.request);
                if let Some(s) = self.slot(e.seq) {
                    s.needs &= !CLAIM;
                }
            } else {
                i += 1;
            }
        }
    }

    /// A user-function event: a non-zero value enters the function it names, 0 leaves the
    /// innermost one.
    pub fn user_function(&mut self, cx: &mut Context, value: i64, time: Time) -> Result<()> {
        let enter = value != 0;
        let routine = if enter {
            let name = cx.function(value)?;
            self.functions.push(name);
            self.regions += 1;
            name
        } else {
            match self.functions.pop() {
                Some(name) => name,
                None => return self.leave_without_enter(cx, USER_FUNCTION, time),
            }
        };
        let event = RoutineEvent {
            rank: self.rank,
            thread: self.thread,
            time,
            routine,
            enter,
        };
        self.push(Item::Routine(event), false, 0, cx.line);
        Ok(())
    }

    /// The innermost open collective call.
    fn open_collective(&mut self) -> Option<u64> {
        let frames = std::mem::take(&mut self.stack);
        let found = frames
            .iter()
            .rev()
            .map(|f| f.seq)
            .find(|&seq| self.op(seq).kind.is_collective());
        self.stack = frames;
        found
    }

    /// Sets the communicator of collective `seq` from Paraver communicator `id`, reporting
    /// an id the header does not declare for the MPI application.
    fn set_comm(&mut self, cx: &mut Context, layout: &Layout, seq: u64, id: u64) -> Result<()> {
        let rank = self.rank;
        let member = layout
            .comm(id)
            .filter(|&c| layout.member_index(c, rank).is_some());
        // An id the header does not declare, kept as recorded for the import's seam to report
        // (`UnknownCommunicator`), unless it is no 32-bit id or names the world made for a
        // trace that declares none.
        let undeclared = CommId::try_from(id)
            .ok()
            .filter(|&c| layout.comm(id).is_none() && !layout.declares(c));
        match member {
            Some(comm) => self.op(seq).comm = Some(comm),
            // A declared communicator the rank is no member of: kept as recorded, for the
            // import's seam to report and repair (`RankOutsideCommunicator`).
            None if layout.comm(id).is_some() => self.op(seq).comm = layout.comm(id),
            None if undeclared.is_some() => self.op(seq).comm = undeclared,
            None => {
                let (kind, start) = {
                    let op = self.op(seq);
                    op.comm = None;
                    (op.kind, op.start)
                };
                let what = format!(
                    "{} (thread {}) on communicator {id}, which is no communicator id of the MPI application; it is kept as a call without records",
                    cx.kind_text(kind),
                    self.thread
                );
                cx.anomaly(self.skipped(start, what))?;
            }
        }
        Ok(())
    }

    /// A collective's argument (Extrae writes them with the call's opening): applies to the
    /// innermost open collective call.
    pub fn collective_argument(
        &mut self,
        cx: &mut Context,
        layout: &Layout,
        ty: u64,
        value: i64,
    ) -> Result<()> {
        let Some(seq) = self.open_collective() else {
            return Ok(());
        };
        let rank = self.rank;
        let bytes = u64::try_from(value);
        match ty {
            GLOBAL_OP_SEND_SIZE | GLOBAL_OP_RECV_SIZE => {
                let Ok(bytes) = bytes else {
                    let start = self.op(seq).start;
                    let what = format!("a collective's size {value} (event type {ty}) is negative; the size is left 0");
                    return cx.anomaly(self.skipped(start, what));
                };
                let op = self.op(seq);
                let (send, recv) = if ty == GLOBAL_OP_SEND_SIZE {
                    (bytes, op.recv_bytes)
                } else {
                    (op.send_bytes, bytes)
                };
                self.set_sizes(seq, send, recv);
            }
            // On a collective that has no root, the flag is kept for the import's seam to
            // report (`UnexpectedRoot`).
            GLOBAL_OP_IS_ROOT if value != 0 => self.op(seq).root = Some(rank),
            GLOBAL_OP_COMM => match bytes {
                Ok(id) => self.set_comm(cx, layout, seq, id)?,
                Err(_) => self.set_comm(cx, layout, seq, u64::MAX)?,
            },
            _ => {}
        }
        Ok(())
    }

    /// An old-style global-operation record: fills in the innermost open collective call,
    /// or, with none open, is a collective call of its own at its time.
    pub fn global_op(&mut self, cx: &mut Context, layout: &Layout, g: &GlobalOp) -> Result<()> {
        let seq = match self.open_collective() {
            Some(seq) => seq,
            None => {
                let kind = match global_op_kind(g.op) {
                    Some(k) => k,
                    None => OpKind::Other(cx.intern(&format!("global operation {}", g.op))?),
                };
                // A call of its own, over at once; it is filled in below, before the thread
                // is drained.
                let op = self.new_op(kind, g.time, g.time);
                let seq = self.push(Item::Op(op), true, 0, cx.line);
                self.fill_global(cx, layout, seq, g)?;
                return self.close(
                    cx,
                    Frame {
                        seq,
                        ty: 0,
                        value: 0,
                    },
                    g.time,
                );
            }
        };
        self.fill_global(cx, layout, seq, g)
    }

    /// Fills collective `seq` in from global-operation record `g`.
    fn fill_global(
        &mut self,
        cx: &mut Context,
        layout: &Layout,
        seq: u64,
        g: &GlobalOp,
    ) -> Result<()> {
        self.set_comm(cx, layout, seq, g.comm)?;
        self.set_sizes(seq, g.send, g.recv);
        let (rank, thread) = (self.rank, self.thread);
        let op = self.op(seq);
        let Some(comm) = op.comm.filter(|_| op.kind.is_rooted()) else {
            return Ok(());
        };
        op.root = layout.member(comm, g.root);
        if op.root.is_none() && layout.member_index(comm, rank).is_some() {
            // The root is a communicator rank: one the communicator lacks has no world rank.
            // The call is kept without it, outside matching, and reported once it leaves.
            op.flags |= flags::WITHOUT_RECORDS;
            let anomaly = Anomaly::BrokenRule {
                rule: Rule::RootOutsideCommunicator,
                rank: Some(rank),
                thread,
                time: Some(op.start),
                op: Some(0),
                comm: Some(comm),
                value: Some(g.root),
            };
            if let Some(slot) = self.slot(seq) {
                slot.broken.push(anomaly);
            }
        }
        Ok(())
    }

    /// Sets a collective's sizes as recorded (sizes on a Barrier break Table 3.1's rule 8: the
    /// import's seam reports and repairs them as `BytesOnBarrier`).
    fn set_sizes(&mut self, seq: u64, send: u64, recv: u64) {
        let op = self.op(seq);
        op.send_bytes = send;
        op.recv_bytes = recv;
    }

    /// One side of a communication record: fills in the call of its kind whose interval
    /// holds the side's logical time. When no call read so far does and the thread has not
    /// passed that time, a call read later may: the side waits until the file's time passes
    /// it. Otherwise the side becomes an operation of its own.
    pub fn attach(&mut self, cx: &mut Context, dir: Dir, side: &Side) -> Result<()> {
        let candidates = match dir {
            Dir::Send => &self.awaiting_send,
            Dir::Recv => &self.awaiting_recv,
        };
        let known = self.known_until(cx.now);
        if let Some(seq) = find(&self.out, self.base, candidates, side.logical, known) {
            self.fill(cx, seq, dir, side);
            return Ok(());
        }
        if side.logical > known {
            self.future_count += 1;
            let id = self.future_count;
            self.future.push((id, dir, *side));
            cx.wake_after(side.logical, self.index, FUTURE | id);
            return Ok(());
        }
        self.make(cx, dir, side)
    }

    /// Fills in call `seq`'s `dir` side from a record's `side`.
    fn fill(&mut self, cx: &mut Context, seq: u64, dir: Dir, side: &Side) {
        let world = self.world;
        #[allow(clippy::expect_used)] // an awaiting item's slot leaves only once it is complete
        let slot = self.slot(seq).expect("awaiting items have not left");
        let Item::Op(op) = &mut slot.item else {
            unreachable!("only operations await records")
        };
        op.comm = Some(world);
        match dir {
            Dir::Send => {
                slot.needs &= !SEND;
                op.dest = Some(side.peer);
                op.send_tag = Some(side.tag);
                op.send_bytes = side.bytes;
                self.awaiting_send.retain(|&x| x != seq);
            }
            Dir::Recv => {
                slot.needs &= !RECV;
                op.source = Some(side.peer);
                op.recv_tag = Some(side.tag);
                op.recv_bytes = side.bytes;
                if op.kind.is_nonblocking() {
                    if slot.open {
                        slot.pending_pr = Some(side.physical);
                    } else {
                        self.decide_completion(cx, seq, side.physical);
                    }
                }
                self.awaiting_recv.retain(|&x| x != seq);
            }
        }
    }

    /// A record's side that falls within no call of its kind: `MPI_Send` over its logical
    /// and physical send times, or `MPI_Recv` at its physical receive time.
    fn make(&mut self, cx: &mut Context, dir: Dir, side: &Side) -> Result<()> {
        let (kind, start, end) = match dir {
            Dir::Send => (OpKind::Send, side.logical, side.physical),
            Dir::Recv => (OpKind::Recv, side.physical, side.physical),
        };
        let mut op = self.new_op(kind, start, end);
        op.comm = Some(self.world);
        match dir {
            Dir::Send => {
                op.dest = Some(side.peer);
                op.send_tag = Some(side.tag);
                op.send_bytes = side.bytes;
            }
            Dir::Recv => {
                op.source = Some(side.peer);
                op.recv_tag = Some(side.tag);
                op.recv_bytes = side.bytes;
            }
        }
        self.place_made(cx, op)
    }

    /// Call `seq` (just closed) takes the waiting record sides that fall within it.
    fn adopt(&mut self, cx: &mut Context, seq: u64, start: Time, end: Time) {
        let mut i = 0;
        while i < self.future.len() {
            let (_, dir, side) = self.future[i];
            let flag = match dir {
                Dir::Send => SEND,
                Dir::Recv => RECV,
            };
            let wants = self.slot(seq).is_some_and(|s| s.needs & flag != 0);
            if wants && start <= side.logical && side.logical <= end {
                self.future.swap_remove(i);
                self.fill(cx, seq, dir, &side);
            } else {
                i += 1;
            }
        }
    }

    /// The file's time passed waiting record side `id`: it fills in the call that holds its
    /// time, if one was read meanwhile, or becomes an operation of its own.
    fn expire_future(&mut self, cx: &mut Context, id: u64) -> Result<()> {
        let Some(i) = self.future.iter().position(|f| f.0 == id) else {
            return Ok(());
        };
        let (_, dir, side) = self.future.swap_remove(i);
        self.attach_now(cx, dir, &side)
    }

    /// [`RankThread::attach`] without waiting.
    fn attach_now(&mut self, cx: &mut Context, dir: Dir, side: &Side) -> Result<()> {
        let candidates = match dir {
            Dir::Send => &self.awaiting_send,
            Dir::Recv => &self.awaiting_recv,
        };
        let known = self.known_until(cx.now);
        match find(&self.out, self.base, candidates, side.logical, known) {
            Some(seq) => {
                self.fill(cx, seq, dir, side);
                Ok(())
            }
            None => self.make(cx, dir, side),
        }
    }

    /// Non-blocking receive `seq` (closed) got a message that arrived at `pr`: unless that
    /// is within the receive itself, it gets a request, completed by the Wait/Test that
    /// contains `pr`, now or when that call is read.
    fn decide_completion(&mut self, cx: &mut Context, seq: u64, pr: Time) {
        let (start, end) = {
            let op = self.op(seq);
            (op.start, op.end)
        };
        if start <= pr && pr <= end {
            return;
        }
        let request = cx.new_request();
        self.op(seq).request = Some(request);
        if self.complete_in_call(seq, request, pr, cx.now) {
            return;
        }
        if pr < cx.now {
            // No Wait/Test read contains it: the receive completed where the trace shows no
            // call, and is kept without a request.
            self.op(seq).request = None;
            return;
        }
        if let Some(s) = self.slot(seq) {
            s.needs |= CLAIM;
        }
        self.expected.push(Expected { pr, request, seq });
        cx.wake_after(pr, self.index, seq);
    }

    /// Lets the Wait/Test call read so far that contains `pr` complete `request` of
    /// receive `seq`; whether there was one.
    fn complete_in_call(&mut self, seq: u64, request: u64, pr: Time, now: Time) -> bool {
        let known = self.known_until(now);
        let Some(call) = find(&self.out, self.base, &self.completions, pr, known) else {
            return false;
        };
        self.op(call).completes.push(request);
        if let Some(s) = self.slot(seq) {
            s.needs &= !CLAIM;
        }
        true
    }

    /// An operation made from a record alone, placed in start order (one whose start is
    /// before items of its thread that have left, from records far out of time order, leaves
    /// next: the import's seam reports its time going backwards).
    fn place_made(&mut self, cx: &mut Context, op: Operation) -> Result<()> {
        self.made_count += 1;
        self.made.push(Reverse(Made {
            order: self.made_count,
            op,
            line: cx.line,
        }));
        Ok(())
    }

    /// Re-examines item `seq` once the file's time has passed a deadline of it.
    pub fn expire(&mut self, cx: &mut Context, seq: u64) -> Result<()> {
        if seq & FUTURE != 0 {
            return self.expire_future(cx, seq & !FUTURE);
        }
        let now = cx.now;
        let Some(slot) = self.slot(seq) else {
            return Ok(());
        };
        if slot.open {
            return Ok(());
        }
        let Item::Op(op) = &slot.item else {
            return Ok(());
        };
        let (end, blocking) = (op.end, !op.kind.is_nonblocking());
        if end < now {
            slot.needs &= !SETTLE;
            let mut give_up = slot.needs & SEND;
            if blocking {
                give_up |= slot.needs & RECV;
            }
            self.give_up(cx, seq, give_up)?;
        }
        if let Some(i) = self
            .expected
            .iter()
            .position(|e| e.seq == seq && e.pr < now)
        {
            let e = self.expected.swap_remove(i);
            if !self.complete_in_call(seq, e.request, e.pr, now) {
                self.give_up(cx, seq, CLAIM)?;
            }
        }
        Ok(())
    }

    /// Stops waiting for `what` of item `seq`, reporting a missing record.
    fn give_up(&mut self, cx: &mut Context, seq: u64, what: u8) -> Result<()> {
        if what == 0 {
            return Ok(());
        }
        #[allow(clippy::expect_used)] // a waiting item's slot leaves only once it is complete
        let slot = self.slot(seq).expect("a waiting item has not left");
        slot.needs &= !(what & !ROOT);
        if let Item::Op(op) = &mut slot.item {
            if what & CLAIM != 0 {
                // The message arrived outside every Wait/Test read: the receive completes
                // alone.
                op.request = None;
                self.expected.retain(|e| e.seq != seq);
            }
        }
        if what & (SEND | RECV) != 0 {
            // No communication record names this side (its message crosses the cut of a
            // cut trace, or was not recorded): its peer, tag and size are unknown.
            self.without_records(cx, seq)?;
        }
        if what & ROOT != 0 {
            self.resolve_root(seq, None);
        }
        Ok(())
    }

    /// Stops waiting for anything of the oldest item (a bound on what a thread holds).
    fn force_front(&mut self, cx: &mut Context) -> Result<bool> {
        let seq = self.base;
        let Some(slot) = self.out.front() else {
            return Ok(false);
        };
        if slot.open {
            return Ok(false);
        }
        let needs = slot.needs & (SEND | RECV | CLAIM | ROOT);
        if let Some(s) = self.out.front_mut() {
            s.needs &= !SETTLE;
        }
        self.give_up(cx, seq, needs)?;
        Ok(true)
    }

    /// Hands the items that are ready, in start order, to the sink.
    pub fn drain(&mut self, cx: &mut Context) -> Result<()> {
        loop {
            if self.out.len() > MAX_HELD && !self.out.front().is_some_and(Slot::ready) {
                self.force_front(cx)?;
            }
            let made = self
                .made
                .peek()
                .map(|Reverse(m)| m.op.start)
                .filter(|&s| s <= cx.now);
            let front = self.out.front().map(|s| (s.item.start(), s.ready()));
            let take_made = match (made, front) {
                (Some(m), Some((f, _))) => m < f,
                (Some(_), None) => true,
                _ => false,
            };
            if take_made {
                #[allow(clippy::expect_used)] // peek just returned an item
                let Reverse(m) = self.made.pop().expect("peeked");
                let r = cx.sink.operation(&m.op);
                r.map_err(|e| cx.placed(e, m.line))?;
                self.ops_out += 1;
                continue;
            }
            match front {
                Some((_, true)) => {
                    #[allow(clippy::expect_used)] // the caller saw a complete item at the front
                    let slot = self.out.pop_front().expect("a front item");
                    let seq = self.base;
                    self.base += 1;
                    let r = match &slot.item {
                        Item::Op(op) => {
                            if op.kind.is_completion() {
                                self.completions.retain(|&c| c != seq);
                            }
                            cx.sink.operation(op)
                        }
                        Item::Routine(r) => cx.sink.routine(r),
                    };
                    r.map_err(|e| cx.placed(e, slot.line))?;
                    if let Item::Op(_) = slot.item {
                        // What its records broke names it by its position.
                        let at = OpPosition {
                            rank: self.rank,
                            thread: self.thread,
                            index: self.ops_out,
                        };
                        self.ops_out += 1;
                        for anomaly in &slot.broken {
                            cx.anomaly_at(anomaly, at)?;
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// The end of the trace, first step: calls still open end at the thread's last time
    /// and are reported.
    pub fn close_open(&mut self, cx: &mut Context) -> Result<()> {
        let last = self.last_time;
        while let Some(frame) = self.stack.pop() {
            let kind = self.op(frame.seq).kind;
            let routine = cx.kind_name(kind)?;
            cx.anomaly(Anomaly::UnclosedRoutine {
                rank: self.rank,
                routine,
            })?;
            self.close(cx, frame, last)?;
        }
        Ok(())
    }

    /// The end of the trace, last step: nothing is waited for any more; every item leaves.
    pub fn finish(&mut self, cx: &mut Context) -> Result<()> {
        for (_, dir, side) in std::mem::take(&mut self.future) {
            self.attach_now(cx, dir, &side)?;
        }
        for seq in self.base..self.base + self.out.len() as u64 {
            let needs = self
                .slot(seq)
                .map_or(0, |s| s.needs & (SEND | RECV | CLAIM | ROOT));
            if let Some(s) = self.slot(seq) {
                s.needs &= !SETTLE;
            }
            self.give_up(cx, seq, needs)?;
        }
        self.drain(cx)
    }
}

/// The most recent of `candidates` (items of `out`, whose first is item `base`) whose call
/// contains `time`; calls still open are known to run until `known`.
fn find(
    out: &VecDeque<Slot>,
    base: u64,
    candidates: &[u64],
    time: Time,
    known: Time,
) -> Option<u64> {
    candidates.iter().rev().copied().find(|&seq| {
        let Some(slot) = seq.checked_sub(base).and_then(|i| out.get(i as usize)) else {
            return false;
        };
        let Item::Op(op) = &slot.item else {
            return false;
        };
        op.start <= time && time <= if slot.open { known } else { op.end }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::paraver::names::Pcf;
    use crate::ingest::EventSink;
    use crate::model::{Location, TraceHeader};

    /// Keeps what reaches it.
    #[derive(Default)]
    struct Log {
        ops: Vec<Operation>,
        routines: usize,
    }

    impl EventSink for Log {
        fn header(&mut self, _: &TraceHeader) -> Result<()> {
            Ok(())
        }
        fn string(&mut self, _: StrId, _: &str) -> Result<()> {
            Ok(())
        }
        fn operation(&mut self, op: &Operation) -> Result<()> {
            self.ops.push(op.clone());
            Ok(())
        }
        fn routine(&mut self, _: &RoutineEvent) -> Result<()> {
            self.routines += 1;
            Ok(())
        }
        fn locations(&mut self, _: &[Location]) -> Result<()> {
            Ok(())
        }
        fn finish(&mut self) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_receive_whose_record_never_comes_holds_its_thread_only_so_long() {
        let mut log = Log::default();
        let mut cx = Context::new(&mut log, Pcf::default(), "t.prv");
        let mut th = RankThread::new(0, 0, 0, 0);
        // MPI_Irecv (Extrae value 4) over [1, 2]: no record will ever name it.
        th.mpi_call(&mut cx, 50_000_001, 4, 1).unwrap();
        th.mpi_call(&mut cx, 50_000_001, 0, 2).unwrap();
        let calls = MAX_HELD as u64;
        for i in 0..calls {
            let t = 10 + 2 * i;
            cx.now = t;
            th.last_time = t;
            th.user_function(&mut cx, 1, t).unwrap();
            th.user_function(&mut cx, 0, t + 1).unwrap();
            th.drain(&mut cx).unwrap();
        }
        // Past MAX_HELD items, the receive was given up and the items behind it left.
        assert!(th.out.len() <= MAX_HELD, "{} held", th.out.len());
        drop(cx);
        assert_eq!(log.ops.len(), 1);
        let irecv = &log.ops[0];
        assert!(irecv.flags & flags::WITHOUT_RECORDS != 0);
        assert!(matches!(irecv.kind, OpKind::Other(_)));
        assert!(log.routines as u64 >= 2 * calls - MAX_HELD as u64);
    }
}
