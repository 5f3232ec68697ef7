//! Message, request and collective matching, streaming.
//!
//! The importer numbers operations densely and feeds them to a [`Matcher`] one by one in file
//! order: the events of different ranks interleave arbitrarily, each rank's own events come in
//! time order. The matcher emits to a [`MatchSink`], as soon as they are known:
//!
//! - a [`Message`] per matched send/receive pair, by MPI's non-overtaking rule: per
//!   (communicator, source, destination, tag) the k-th send matches the k-th receive. A
//!   wildcard receive (`ANY_SOURCE`/`ANY_TAG`) is matched by the actual source and tag its
//!   `source`/`recv_tag` hold. `Sendrecv` is a send (first) and a receive. The message's
//!   `bytes` are the send's, `send_time` the send's start, `recv_time` the receive's end.
//! - a [`RequestLink`] per request a Wait/Test variant completes. A non-blocking call opens
//!   request `(rank, request)`; a completion closes each request in `completes`, unless it
//!   carries the `NOT_COMPLETED` flag (a Test that found nothing). `MPI_Request_free` closes
//!   the requests it lists without a link.
//! - a [`CollectiveInstance`] per collective instance, when its last member calls: the i-th
//!   call of a collective kind on a communicator by each member forms instance i. Blocking
//!   and non-blocking forms are separate (`Bcast` and `Ibcast` never share an instance), and
//!   the instance's `kind` is the kind the members called. Instances of one (communicator,
//!   kind) are emitted in index order; across series, in completion order.
//! - an [`Anomaly`] for what MPI's rules say cannot happen (see [`Matcher::finish`]).
//!
//! A rank whose event data is missing or cut short (a partial copy of a trace) is declared
//! with [`Matcher::rank_missing`]; what is left waiting for it at the end is reported as
//! [`Anomaly::PeerDataMissing`], not as an error of the ranks that are present.
//!
//! Memory follows the number of items in flight (waiting sends and receives, open requests,
//! partial collective instances), not the length of the trace; see [`Matcher::in_flight`].
//! Per-operation work is O(1) amortized (a hash lookup or two, no allocation in the steady
//! state).

mod collective;
mod p2p;

use crate::error::Result;
use crate::model::{
    flags, Anomaly, CollectiveInstance, Message, OpId, OpKind, Operation, Rank, RequestId,
    RequestLink, Time, TraceHeader, ANY_TAG,
};

use crate::by_rank::ByRank;
use collective::{Collectives, Placed, Refused};
use p2p::{Channel, P2p, Waiting};

pub use crate::hash::{FxHashMap, FxHasher};

/// The receiver of what the [`Matcher`] finds.
pub trait MatchSink {
    /// A matched send/receive pair.
    fn message(&mut self, m: &Message) -> Result<()>;
    /// A matched pair whose non-blocking receive no Wait or Test completed: its `recv_time`
    /// is the receive call's own end, which says nothing of when the data arrived (so it
    /// proves nothing about the clocks). By default, a message like any other.
    fn uncompleted_message(&mut self, m: &Message) -> Result<()> {
        self.message(m)
    }
    /// A non-blocking operation and the Wait/Test that completed it.
    fn request_link(&mut self, l: &RequestLink) -> Result<()>;
    /// A collective instance, complete or (at the end) partial.
    fn collective(&mut self, c: &CollectiveInstance) -> Result<()>;
    /// Something MPI's rules say should not happen.
    fn anomaly(&mut self, a: &Anomaly) -> Result<()>;
}

/// A [`MatchSink`] that keeps everything in memory, in emission order (for tests and small
/// traces).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchLog {
    /// Messages.
    pub messages: Vec<Message>,
    /// Request links.
    pub links: Vec<RequestLink>,
    /// Collective instances.
    pub collectives: Vec<CollectiveInstance>,
    /// Anomalies.
    pub anomalies: Vec<Anomaly>,
}

impl MatchSink for MatchLog {
    fn message(&mut self, m: &Message) -> Result<()> {
        self.messages.push(*m);
        Ok(())
    }

    fn request_link(&mut self, l: &RequestLink) -> Result<()> {
        self.links.push(*l);
        Ok(())
    }

    fn collective(&mut self, c: &CollectiveInstance) -> Result<()> {
        self.collectives.push(c.clone());
        Ok(())
    }

    fn anomaly(&mut self, a: &Anomaly) -> Result<()> {
        self.anomalies.push(a.clone());
        Ok(())
    }
}

/// What the matcher did, returned by [`Matcher::finish`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchStats {
    /// Operations fed in.
    pub operations: u64,
    /// Messages emitted.
    pub messages: u64,
    /// Total payload of the messages (send side), in bytes.
    pub message_bytes: u64,
    /// Request links emitted.
    pub request_links: u64,
    /// Collective instances that every member took part in.
    pub collectives_complete: u64,
    /// Collective instances left partial at the end (each also an `IncompleteCollective`).
    pub collectives_partial: u64,
    /// Sends, receives and partial collective instances left without their other side
    /// because that peer's data is missing (`PeerDataMissing`); counted in neither
    /// `unmatched_sends`, `unmatched_receives` nor `collectives_partial`'s anomalies.
    pub peer_data_missing: u64,
    /// Sends never received (`UnmatchedSend`).
    pub unmatched_sends: u64,
    /// Sends left without a receive to a rank with receives whose envelope the trace does
    /// not record (`ReceiveNotRecorded`); not counted in `unmatched_sends`.
    pub sends_to_unrecorded_receives: u64,
    /// Receives never matched (`UnmatchedReceive`).
    pub unmatched_receives: u64,
    /// Requests no Wait/Test completed (`RequestNeverCompleted`), including a request whose
    /// handle a later call of the same rank reused while it was still open.
    pub requests_never_completed: u64,
    /// Completions of requests that were not open (`UnknownRequest`).
    pub unknown_requests: u64,
    /// Collective calls whose root differed from the instance's first root (the first is kept).
    pub root_mismatches: u64,
    /// Wait/Test operations that started before the operation whose request they completed
    /// (metamodel constraint 5). Counted only: the model has no anomaly variant for it yet.
    pub wait_before_start: u64,
    /// Processes that called neither `MPI_Finalize` nor `MPI_Abort` (`MissingFinalize`).
    pub missing_finalize: u64,
    /// Point-to-point operations that could not be matched because a field is missing: no
    /// communicator, no peer (e.g. `MPI_PROC_NULL`), no tag, or a wildcard the tracer did
    /// not resolve (`ANY_SOURCE` without a source, `ANY_TAG` with tag `ANY_TAG`). A `Sendrecv`
    /// counts once per unusable side. No anomaly is emitted for them.
    pub unmatchable_p2p: u64,
    /// Collective calls on no communicator, an undeclared one, or one the caller is not a
    /// member of. They join no instance.
    pub unmatchable_collectives: u64,
    /// The most items ever in flight at once (see [`Matcher::in_flight`]).
    pub peak_in_flight: u64,
}

/// An open request.
#[derive(Debug, Clone, Copy)]
struct Open {
    op: OpId,
    start: Time,
}

/// Where a location stands between `MPI_Init` and `MPI_Finalize`, with the calls it made
/// outside them (Table 3.1).
#[derive(Debug, Default)]
struct Lifecycle {
    initialized: bool,
    finalized: bool,
    /// Calls before Init: the first, and how many.
    before: Option<(OpId, u64)>,
    /// Calls after Finalize: the first, and how many.
    after: Option<(OpId, u64)>,
}

/// Counts one more call outside Init and Finalize, remembering the first.
fn count_call(outside: &mut Option<(OpId, u64)>, id: OpId) {
    match outside {
        Some((_, calls)) => *calls += 1,
        None => *outside = Some((id, 1)),
    }
}

/// The streaming matcher. See the [module documentation](self).
#[derive(Debug)]
pub struct Matcher {
    p2p: P2p,
    /// Non-blocking receives not yet matched and completed: the end of the Wait/Test that
    /// completed each, once known. A message's receive time is when its data arrived, which for
    /// an `MPI_Irecv` is the end of the call that completed it, not of the `MPI_Irecv` itself.
    /// By the receiving rank.
    irecvs: ByRank<OpId, Option<Time>>,
    /// Messages whose non-blocking receive is matched but not yet completed, by receiving
    /// rank and receive op.
    deferred: ByRank<OpId, Message>,
    requests: ByRank<RequestId, Open>,
    collectives: Collectives,
    /// Per world rank: declared in the header, and finalized (or aborted).
    declared: Vec<bool>,
    finalized: Vec<bool>,
    /// Per world rank: whether it made a receive whose envelope the trace does not record
    /// (no communicator, source or tag), which any send to it may have matched.
    unrecorded_receives: Vec<bool>,
    /// Per location (rank, thread): its calls around Init and Finalize.
    lifecycle: ByRank<u32, Lifecycle>,
    /// Ranks whose event data is missing or cut short ([`Matcher::rank_missing`]).
    missing: Vec<Rank>,
    stats: MatchStats,
}

impl Matcher {
    /// A matcher for a trace with this header (its communicators define collective
    /// membership, its processes who must finalize).
    pub fn new(header: &TraceHeader) -> Matcher {
        let n = header
            .processes
            .iter()
            .map(|p| p.rank as usize + 1)
            .max()
            .unwrap_or(0);
        let mut declared = vec![false; n];
        for p in &header.processes {
            declared[p.rank as usize] = true;
        }
        Matcher {
            p2p: P2p::default(),
            irecvs: ByRank::default(),
            deferred: ByRank::default(),
            requests: ByRank::default(),
            collectives: Collectives::new(&header.communicators),
            declared,
            finalized: vec![false; n],
            unrecorded_receives: vec![false; n],
            lifecycle: ByRank::default(),
            missing: Vec::new(),
            stats: MatchStats::default(),
        }
    }

    /// Declares that `rank`'s event data is missing or cut short (the source reported an
    /// [`Anomaly::MissingRankData`] for it), at any time before [`Matcher::finish`]: sends
    /// to it and receives from it that are left unmatched, and collective instances it is
    /// the only absentee of (with other such ranks), become [`Anomaly::PeerDataMissing`];
    /// its own requests left open and its missing `MPI_Finalize` are not reported (what
    /// completed them lies in the missing data).
    pub fn rank_missing(&mut self, rank: Rank) {
        if let Err(at) = self.missing.binary_search(&rank) {
            self.missing.insert(at, rank);
        }
    }

    fn is_missing(&self, rank: Rank) -> bool {
        self.missing.binary_search(&rank).is_ok()
    }

    fn has_unrecorded_receives(&self, rank: Rank) -> bool {
        self.unrecorded_receives
            .get(rank as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Items currently held: sends and receives waiting for their other side, open
    /// requests and partial collective instances.
    pub fn in_flight(&self) -> usize {
        self.p2p.waiting()
            + self.requests.len()
            + self.collectives.open()
            + self.irecvs.len()
            + self.deferred.len()
    }

    /// The counters so far (final ones come from [`Matcher::finish`]).
    pub fn stats(&self) -> &MatchStats {
        &self.stats
    }

    /// Feeds one operation; `id` is its dense operation id.
    pub fn operation(&mut self, id: OpId, op: &Operation, out: &mut impl MatchSink) -> Result<()> {
        self.stats.operations += 1;
        self.lifecycle(id, op, out)?;
        let kind = op.kind;
        if kind.is_send() {
            self.send(id, op, out)?;
        }
        if kind.is_receive() {
            self.receive(id, op, out)?;
        }
        if kind.is_completion() {
            self.complete(id, op, out)?;
        } else if kind == OpKind::RequestFree {
            for r in &op.completes {
                self.requests.remove(op.rank, r);
            }
        }
        if kind.is_collective() {
            self.collective(id, op, out)?;
        }
        if let Some(r) = op.request {
            let open = Open {
                op: id,
                start: op.start,
            };
            if let Some(old) = self.requests.insert(op.rank, r, open) {
                self.stats.requests_never_completed += 1;
                out.anomaly(&Anomaly::RequestNeverCompleted {
                    op: old.op,
                    rank: op.rank,
                    request: r,
                })?;
            }
        }
        if matches!(kind, OpKind::Finalize | OpKind::Abort) {
            if let Some(f) = self.finalized.get_mut(op.rank as usize) {
                *f = true;
            }
        }
        let now = self.in_flight() as u64;
        if now > self.stats.peak_in_flight {
            self.stats.peak_in_flight = now;
        }
        Ok(())
    }

    /// Calls before `MPI_Init` are reported when the Init comes (a location whose Init was
    /// not recorded is not judged), calls after `MPI_Finalize` at the end, one anomaly per
    /// location each. Within a location calls come in time order, so arrival order is call
    /// order (and needs no times). Calls kept as `Other(name)` are not judged: among them
    /// are `MPI_Initialized`, `MPI_Finalized` and `MPI_Get_version`, which may come outside.
    fn lifecycle(&mut self, id: OpId, op: &Operation, out: &mut impl MatchSink) -> Result<()> {
        if matches!(op.kind, OpKind::Other(_)) {
            return Ok(());
        }
        let state = self.lifecycle.get_or_default(op.rank, op.thread);
        match op.kind {
            OpKind::Init | OpKind::InitThread => {
                state.initialized = true;
                if let Some((first, calls)) = state.before.take() {
                    out.anomaly(&Anomaly::CallBeforeInit {
                        op: first,
                        rank: op.rank,
                        calls,
                    })?;
                }
            }
            _ if state.finalized => count_call(&mut state.after, id),
            OpKind::Finalize => state.finalized = true,
            _ if !state.initialized => count_call(&mut state.before, id),
            _ => {}
        }
        Ok(())
    }

    fn send(&mut self, id: OpId, op: &Operation, out: &mut impl MatchSink) -> Result<()> {
        let (Some(comm), Some(dest), Some(tag)) = (op.comm, op.dest, op.send_tag) else {
            self.stats.unmatchable_p2p += 1;
            return Ok(());
        };
        let channel = Channel {
            comm,
            source: op.rank,
            dest,
            tag,
        };
        let me = Waiting {
            op: id,
            time: op.start,
            bytes: op.send_bytes,
            capacity: false,
            datatype: one_sided_datatype(op),
            timed: true,
        };
        if let Some((m, send, recv)) = self.p2p.arrive(channel, true, me) {
            self.check_pair(&m, &send, &recv, out)?;
            self.emit_message(&m, recv.timed, out)?;
        }
        Ok(())
    }

    fn receive(&mut self, id: OpId, op: &Operation, out: &mut impl MatchSink) -> Result<()> {
        let (Some(comm), Some(source), Some(tag)) = (op.comm, op.source, op.recv_tag) else {
            self.stats.unmatchable_p2p += 1;
            if let Some(r) = self.unrecorded_receives.get_mut(op.rank as usize) {
                *r = true;
            }
            if op.flags & (flags::ANY_SOURCE | flags::ANY_TAG) != 0 {
                return out.anomaly(&Anomaly::UnresolvedWildcard {
                    op: id,
                    rank: op.rank,
                });
            }
            return Ok(());
        };
        if tag == ANY_TAG && op.flags & flags::ANY_TAG != 0 {
            self.stats.unmatchable_p2p += 1;
            return out.anomaly(&Anomaly::UnresolvedWildcard {
                op: id,
                rank: op.rank,
            });
        }
        let channel = Channel {
            comm,
            source,
            dest: op.rank,
            tag,
        };
        let me = Waiting {
            op: id,
            time: op.end,
            bytes: op.recv_bytes,
            capacity: op.flags & flags::RECV_CAPACITY != 0,
            datatype: one_sided_datatype(op),
            timed: op.request.is_some() || !op.kind.is_nonblocking(),
        };
        if op.request.is_some() && !op.kind.is_send() {
            self.irecvs.insert(op.rank, id, None);
        }
        if let Some((m, send, recv)) = self.p2p.arrive(channel, false, me) {
            self.check_pair(&m, &send, &recv, out)?;
            self.emit_message(&m, recv.timed, out)?;
        }
        Ok(())
    }

    /// Hands `m` on once its receive's completion time is known; `timed` is whether the
    /// receive's time can ever say when the data arrived.
    fn emit_message(&mut self, m: &Message, timed: bool, out: &mut impl MatchSink) -> Result<()> {
        let mut m = *m;
        match self.irecvs.get_mut(m.receiver, &m.recv_op) {
            Some(Some(completed)) => {
                m.recv_time = *completed;
                self.irecvs.remove(m.receiver, &m.recv_op);
            }
            Some(None) => {
                // The receive is not complete yet: the message waits for its Wait.
                self.deferred.insert(m.receiver, m.recv_op, m);
                return Ok(());
            }
            None if !timed => return self.emit_uncompleted(&m, out),
            None => {}
        }
        self.emit_now(&m, out)
    }

    fn emit_now(&mut self, m: &Message, out: &mut impl MatchSink) -> Result<()> {
        self.count(m);
        out.message(m)
    }

    /// A message whose receive no recorded completion ends ([`MatchSink::uncompleted_message`]).
    fn emit_uncompleted(&mut self, m: &Message, out: &mut impl MatchSink) -> Result<()> {
        self.count(m);
        out.uncompleted_message(m)
    }

    fn count(&mut self, m: &Message) {
        self.stats.messages += 1;
        self.stats.message_bytes = self.stats.message_bytes.saturating_add(m.bytes);
    }

    /// A matched pair's two sides agree: their datatypes, when both recorded one (Table
    /// 3.1), and their lengths ([`Matcher::check_length`]).
    fn check_pair(
        &mut self,
        m: &Message,
        send: &Waiting,
        recv: &Waiting,
        out: &mut impl MatchSink,
    ) -> Result<()> {
        if let (Some(sent), Some(received)) = (send.datatype, recv.datatype) {
            if sent != received {
                out.anomaly(&Anomaly::DatatypeMismatch {
                    send_op: m.send_op,
                    recv_op: m.recv_op,
                    sent,
                    received,
                })?;
            }
        }
        self.check_length(m, recv, out)
    }

    /// A message whose receive recorded another length than its send: the message keeps
    /// the send's, the difference is reported. A length of 0 on either side means the source
    /// did not record it (several tracers write 0 for an unknown length); a receive that
    /// recorded its buffer's capacity may be longer than the message, not shorter.
    fn check_length(
        &mut self,
        m: &Message,
        recv: &Waiting,
        out: &mut impl MatchSink,
    ) -> Result<()> {
        let received = recv.bytes;
        if received == m.bytes || received == 0 || m.bytes == 0 {
            return Ok(());
        }
        if recv.capacity && received > m.bytes {
            return Ok(());
        }
        out.anomaly(&Anomaly::LengthMismatch {
            send_op: m.send_op,
            recv_op: m.recv_op,
            sent: m.bytes,
            received,
        })
    }

    fn complete(&mut self, id: OpId, op: &Operation, out: &mut impl MatchSink) -> Result<()> {
        if op.flags & flags::NOT_COMPLETED != 0 {
            return Ok(());
        }
        for &r in &op.completes {
            match self.requests.remove(op.rank, &r) {
                Some(open) => {
                    if self.irecvs.contains(op.rank, &open.op) {
                        match self.deferred.remove(op.rank, &open.op) {
                            Some(mut m) => {
                                self.irecvs.remove(op.rank, &open.op);
                                m.recv_time = op.end;
                                self.emit_now(&m, out)?;
                            }
                            None => {
                                self.irecvs.insert(op.rank, open.op, Some(op.end));
                            }
                        }
                    }
                    if op.start < open.start {
                        self.stats.wait_before_start += 1;
                        out.anomaly(&Anomaly::WaitBeforeRequest {
                            op: id,
                            request_op: open.op,
                            rank: op.rank,
                        })?;
                    }
                    self.stats.request_links += 1;
                    out.request_link(&RequestLink {
                        request_op: open.op,
                        completion_op: id,
                    })?;
                }
                None => {
                    self.stats.unknown_requests += 1;
                    out.anomaly(&Anomaly::UnknownRequest {
                        op: id,
                        rank: op.rank,
                        request: r,
                    })?;
                }
            }
        }
        Ok(())
    }

    fn collective(&mut self, id: OpId, op: &Operation, out: &mut impl MatchSink) -> Result<()> {
        match self.collectives.call(id, op) {
            Err(Refused::UnknownComm | Refused::NotMember) => {
                self.stats.unmatchable_collectives += 1;
            }
            Ok(Placed::Partial {
                root_mismatch,
                anomaly,
            }) => {
                self.root_mismatch(id, op, root_mismatch, out)?;
                if let Some(a) = anomaly {
                    out.anomaly(&a)?;
                }
            }
            Ok(Placed::Complete {
                instance,
                root_mismatch,
                anomaly,
                no_overlap,
            }) => {
                self.root_mismatch(id, op, root_mismatch, out)?;
                if let Some(a) = anomaly {
                    out.anomaly(&a)?;
                }
                self.stats.collectives_complete += 1;
                let r = out.collective(&instance);
                self.collectives.recycle(instance);
                r?;
                // After the instance, whose members it names.
                if let Some(a) = no_overlap {
                    out.anomaly(&a)?;
                }
            }
        }
        Ok(())
    }

    fn root_mismatch(
        &mut self,
        id: OpId,
        op: &Operation,
        mismatch: bool,
        out: &mut impl MatchSink,
    ) -> Result<()> {
        if !mismatch {
            return Ok(());
        }
        self.stats.root_mismatches += 1;
        out.anomaly(&Anomaly::RootMismatch {
            op: id,
            rank: op.rank,
            kind: op.kind,
            comm: op.comm.unwrap_or_default(),
        })
    }

    /// Ends the trace: emits what is left, as anomalies, in this order —
    /// `UnmatchedSend` / `UnmatchedReceive` for every waiting send and receive (by op id);
    /// `RequestNeverCompleted` for every open request (by op id); every partial collective
    /// instance, each followed by its `IncompleteCollective` (by communicator id, kind code,
    /// instance index); `CallAfterFinalize` for every location that called MPI after its
    /// Finalize (by rank, thread); `MissingFinalize` for every declared process that called neither
    /// `MPI_Finalize` nor `MPI_Abort` (by rank). Returns the counters.
    pub fn finish(mut self, out: &mut impl MatchSink) -> Result<MatchStats> {
        // Messages whose receive was never completed keep the receive call's own end time.
        let mut deferred: Vec<Message> =
            self.deferred.drain().into_iter().map(|(.., m)| m).collect();
        deferred.sort_unstable_by_key(|m| m.recv_op);
        for m in &deferred {
            self.emit_uncompleted(m, out)?;
        }
        self.irecvs.drain();
        for left in self.p2p.drain() {
            let c = left.channel;
            let op = left.waiting.op;
            let (rank, peer) = if left.is_send {
                (c.source, c.dest)
            } else {
                (c.dest, c.source)
            };
            if self.is_missing(peer) {
                self.stats.peer_data_missing += 1;
                out.anomaly(&Anomaly::PeerDataMissing {
                    op,
                    rank,
                    peer,
                    comm: c.comm,
                })?;
            } else if left.is_send && self.has_unrecorded_receives(c.dest) {
                self.stats.sends_to_unrecorded_receives += 1;
                out.anomaly(&Anomaly::ReceiveNotRecorded {
                    op,
                    rank: c.source,
                    dest: c.dest,
                    comm: c.comm,
                    tag: c.tag,
                })?;
            } else if left.is_send {
                self.stats.unmatched_sends += 1;
                out.anomaly(&Anomaly::UnmatchedSend {
                    op,
                    rank: c.source,
                    dest: c.dest,
                    comm: c.comm,
                    tag: c.tag,
                })?;
            } else {
                self.stats.unmatched_receives += 1;
                out.anomaly(&Anomaly::UnmatchedReceive {
                    op,
                    rank: c.dest,
                    source: c.source,
                    comm: c.comm,
                    tag: c.tag,
                })?;
            }
        }

        let mut open: Vec<(OpId, Rank, RequestId)> = self
            .requests
            .drain()
            .into_iter()
            .map(|(rank, request, o)| (o.op, rank, request))
            .collect();
        open.sort_unstable();
        for (op, rank, request) in open {
            if self.is_missing(rank) {
                // Its Wait or Test lies in the data that is missing.
                continue;
            }
            self.stats.requests_never_completed += 1;
            out.anomaly(&Anomaly::RequestNeverCompleted { op, rank, request })?;
        }

        for partial in self.collectives.drain() {
            self.stats.collectives_partial += 1;
            let i = &partial.instance;
            out.collective(i)?;
            let explained =
                !partial.absent.is_empty() && partial.absent.iter().all(|&r| self.is_missing(r));
            if let (true, Some(&op)) = (explained, i.ops.first()) {
                self.stats.peer_data_missing += 1;
                out.anomaly(&Anomaly::PeerDataMissing {
                    op,
                    rank: partial.first_rank,
                    peer: partial.absent[0],
                    comm: i.comm,
                })?;
                continue;
            }
            out.anomaly(&Anomaly::IncompleteCollective {
                kind: i.kind,
                comm: i.comm,
                present: i.ops.len() as u32,
                expected: partial.expected,
            })?;
        }

        let mut after: Vec<(Rank, u32, OpId, u64)> = self
            .lifecycle
            .drain()
            .into_iter()
            .filter_map(|(rank, thread, l)| l.after.map(|(op, calls)| (rank, thread, op, calls)))
            .collect();
        after.sort_unstable();
        for (rank, _, op, calls) in after {
            out.anomaly(&Anomaly::CallAfterFinalize { op, rank, calls })?;
        }

        // A trace with no MPI call at all (an OpenMP or OpenCL run) misses no MPI_Finalize.
        let has_mpi = self.stats.operations > 0;
        for (rank, (&declared, &done)) in self.declared.iter().zip(&self.finalized).enumerate() {
            if has_mpi && declared && !done && !self.is_missing(rank as Rank) {
                self.stats.missing_finalize += 1;
                out.anomaly(&Anomaly::MissingFinalize { rank: rank as Rank })?;
            }
        }
        Ok(self.stats)
    }
}

/// The datatype of a send or a receive; none for a `Sendrecv`, whose one recorded datatype
/// may be either side's.
fn one_sided_datatype(op: &Operation) -> Option<crate::model::StrId> {
    if op.kind.is_send() && op.kind.is_receive() {
        None
    } else {
        op.datatype
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(n: u32) -> TraceHeader {
        TraceHeader::world(n, "MPI_COMM_WORLD")
    }

    fn send(rank: Rank, dest: Rank, tag: i32, t: Time) -> Operation {
        let mut op = Operation::new(rank, OpKind::Send, t, t + 1);
        op.comm = Some(0);
        op.dest = Some(dest);
        op.send_tag = Some(tag);
        op.send_bytes = 8;
        op
    }

    fn recv(rank: Rank, source: Rank, tag: i32, t: Time) -> Operation {
        let mut op = Operation::new(rank, OpKind::Recv, t, t + 1);
        op.comm = Some(0);
        op.source = Some(source);
        op.recv_tag = Some(tag);
        op.recv_bytes = 8;
        op
    }

    #[test]
    fn in_flight_counts_every_kind_of_item() {
        let mut m = Matcher::new(&header(2));
        let mut log = MatchLog::default();
        m.operation(0, &send(0, 1, 1, 0), &mut log).unwrap();
        let mut irecv = recv(1, 0, 9, 1);
        irecv.kind = OpKind::Irecv;
        irecv.request = Some(7);
        m.operation(1, &irecv, &mut log).unwrap();
        let mut barrier = Operation::new(0, OpKind::Barrier, 2, 3);
        barrier.comm = Some(0);
        m.operation(2, &barrier, &mut log).unwrap();
        // send 0 and irecv 1 wait, request 7 is open (and its receive awaits completion),
        // the barrier instance is partial.
        assert_eq!(m.in_flight(), 5);
        assert_eq!(m.stats().peak_in_flight, 5);
    }

    #[test]
    fn a_nonblocking_receive_is_received_when_its_wait_ends() {
        // The Irecv is matched first and completed later; then completed before its send shows up.
        for completed_first in [false, true] {
            let mut m = Matcher::new(&header(2));
            let mut log = MatchLog::default();
            let mut irecv = recv(1, 0, 9, 100);
            irecv.kind = OpKind::Irecv;
            irecv.end = 105;
            irecv.request = Some(3);
            let mut wait = Operation::new(1, OpKind::Wait, 400, 450);
            wait.completes = vec![3];
            m.operation(0, &irecv, &mut log).unwrap();
            if completed_first {
                m.operation(1, &wait, &mut log).unwrap();
                m.operation(2, &send(0, 1, 9, 200), &mut log).unwrap();
            } else {
                m.operation(2, &send(0, 1, 9, 200), &mut log).unwrap();
                assert!(
                    log.messages.is_empty(),
                    "the message waits for the receive's completion"
                );
                m.operation(1, &wait, &mut log).unwrap();
            }
            assert_eq!(log.messages.len(), 1);
            assert_eq!(
                (log.messages[0].send_time, log.messages[0].recv_time),
                (200, 450)
            );
            assert_eq!(m.in_flight(), 0, "completed_first={completed_first}");
        }
    }

    #[test]
    fn missing_fields_are_counted_not_matched() {
        let mut m = Matcher::new(&header(2));
        let mut log = MatchLog::default();
        let mut proc_null = send(0, 1, 1, 0);
        proc_null.dest = None;
        m.operation(0, &proc_null, &mut log).unwrap();
        let mut unresolved = recv(1, 0, ANY_TAG, 0);
        unresolved.flags = flags::ANY_TAG;
        m.operation(1, &unresolved, &mut log).unwrap();
        let mut no_comm = Operation::new(1, OpKind::Barrier, 0, 1);
        no_comm.comm = None;
        m.operation(2, &no_comm, &mut log).unwrap();
        assert_eq!(m.in_flight(), 0);
        let stats = m.finish(&mut log).unwrap();
        assert_eq!(stats.unmatchable_p2p, 2);
        assert_eq!(stats.unmatchable_collectives, 1);
        // The unresolved wildcard, then the two missing finalizes.
        assert_eq!(log.anomalies.len(), 3);
        assert_eq!(
            log.anomalies[0],
            Anomaly::UnresolvedWildcard { op: 1, rank: 1 }
        );
    }

    #[test]
    fn a_send_to_a_rank_with_receives_recorded_without_envelope_is_no_unmatched_send() {
        let mut m = Matcher::new(&header(3));
        let mut log = MatchLog::default();
        // Rank 1's MPI_Irecv was recorded with its request only (EZTrace).
        let mut irecv = Operation::new(1, OpKind::Irecv, 0, 1);
        irecv.request = Some(4);
        irecv.flags = flags::WITHOUT_RECORDS;
        m.operation(0, &irecv, &mut log).unwrap();
        m.operation(1, &send(0, 1, 3, 2), &mut log).unwrap();
        m.operation(2, &send(0, 2, 3, 3), &mut log).unwrap();
        let stats = m.finish(&mut log).unwrap();
        assert_eq!(
            (stats.sends_to_unrecorded_receives, stats.unmatched_sends),
            (1, 1)
        );
        assert_eq!(
            log.anomalies[..2],
            [
                Anomaly::ReceiveNotRecorded {
                    op: 1,
                    rank: 0,
                    dest: 1,
                    comm: 0,
                    tag: 3
                },
                Anomaly::UnmatchedSend {
                    op: 2,
                    rank: 0,
                    dest: 2,
                    comm: 0,
                    tag: 3
                },
            ]
        );
    }

    #[test]
    fn reused_open_request_reports_the_lost_one() {
        let mut m = Matcher::new(&header(1));
        let mut log = MatchLog::default();
        let mut a = send(0, 0, 1, 0);
        a.kind = OpKind::Isend;
        a.request = Some(5);
        m.operation(0, &a, &mut log).unwrap();
        m.operation(1, &a, &mut log).unwrap();
        assert_eq!(
            log.anomalies,
            vec![Anomaly::RequestNeverCompleted {
                op: 0,
                rank: 0,
                request: 5
            }]
        );
        assert_eq!(m.in_flight(), 3); // two waiting sends, one open request
    }

    #[test]
    fn request_free_closes_without_link() {
        let mut m = Matcher::new(&header(1));
        let mut log = MatchLog::default();
        let mut a = send(0, 0, 1, 0);
        a.kind = OpKind::Isend;
        a.request = Some(5);
        m.operation(0, &a, &mut log).unwrap();
        let mut free = Operation::new(0, OpKind::RequestFree, 1, 2);
        free.completes = vec![5];
        m.operation(1, &free, &mut log).unwrap();
        assert_eq!(m.in_flight(), 1);
        assert!(log.links.is_empty());
    }

    #[test]
    fn wait_before_request_start_is_counted() {
        let mut m = Matcher::new(&header(1));
        let mut log = MatchLog::default();
        let mut a = recv(0, 0, 1, 10);
        a.kind = OpKind::Irecv;
        a.request = Some(1);
        m.operation(0, &a, &mut log).unwrap();
        let mut w = Operation::new(0, OpKind::Wait, 5, 20);
        w.completes = vec![1];
        m.operation(1, &w, &mut log).unwrap();
        assert_eq!(m.stats().wait_before_start, 1);
        assert_eq!(
            log.anomalies,
            vec![Anomaly::WaitBeforeRequest {
                op: 1,
                request_op: 0,
                rank: 0
            }]
        );
        assert_eq!(
            log.links,
            vec![RequestLink {
                request_op: 0,
                completion_op: 1
            }]
        );
    }

    #[test]
    fn self_sendrecv_matches_itself() {
        let mut m = Matcher::new(&header(1));
        let mut log = MatchLog::default();
        let mut op = send(0, 0, 3, 4);
        op.kind = OpKind::Sendrecv;
        op.source = Some(0);
        op.recv_tag = Some(3);
        m.operation(0, &op, &mut log).unwrap();
        assert_eq!(log.messages.len(), 1);
        assert_eq!((log.messages[0].send_op, log.messages[0].recv_op), (0, 0));
        assert_eq!(m.in_flight(), 0);
    }
}
