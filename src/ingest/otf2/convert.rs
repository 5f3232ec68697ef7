//! One location's OTF2 events turned into MTF items: MPI regions become operations (the
//! event records inside a region fill in its peer, tag, bytes, root, requests), other regions
//! become routine enters and leaves.
//!
//! Items leave in the order of their start times. An operation is known only when its region
//! is left, and a non-blocking receive or collective only when a later Wait completes it (OTF2
//! records the sender, tag and size of an `MPI_Irecv`, and the communicator and sizes of an
//! `MPI_Iallreduce`, at completion). So each operation reserves its place in the location's
//! output when it starts, and items behind a place not yet filled wait for it.

use std::collections::VecDeque;

use super::events::Event;
use super::metrics::{CallValues, LocationMetrics};
use crate::error::Error;
use crate::hash::FxHashMap;
use crate::ingest::EventSink;
use crate::model::{
    flags, Anomaly, CommId, OpKind, OpPosition, Operation, Rank, RoutineEvent, Rule, StrId, Time,
};

/// What a region is to mtfdb.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RegionInfo {
    /// The region's name in the trace's string table.
    pub name: StrId,
    /// The operation kind of an MPI region; `None` for a user routine.
    pub mpi: Option<OpKind>,
}

/// How a communicator's ranks become world ranks.
#[derive(Debug, Clone)]
pub(crate) enum CommRanks {
    /// Rank `i` within the communicator is world rank `members[i]`.
    Members { id: CommId, members: Vec<Rank> },
    /// Event records already carry world ranks (OTF2's GLOBAL_MEMBERS groups).
    Global { id: CommId },
    /// `MPI_COMM_SELF`: each process has its own, with id `first_id + rank`.
    SelfComm { first_id: CommId },
    /// Event records name processes (OTF v1's process tokens), translated to world ranks by
    /// [`Context::process_ranks`]; a process that is no rank is no peer or root.
    Processes { id: CommId },
}

/// Definitions every location's conversion reads.
#[derive(Debug, Default)]
pub(crate) struct Context {
    pub regions: IdTable<RegionInfo>,
    pub comms: IdTable<CommRanks>,
    /// The name of each MPI call kind the trace's regions use.
    pub kind_names: FxHashMap<OpKind, StrId>,
    /// The world rank of each process a [`CommRanks::Processes`] communicator's records name.
    pub process_ranks: FxHashMap<u32, Rank>,
}

/// Definitions by id: a vector for the small dense ids tracers use, a map beyond (looked up
/// for every Enter, Leave and message, so the common case is an index).
#[derive(Debug)]
pub(crate) struct IdTable<T> {
    dense: Vec<Option<T>>,
    sparse: FxHashMap<u32, T>,
}

impl<T> Default for IdTable<T> {
    fn default() -> Self {
        IdTable {
            dense: Vec::new(),
            sparse: FxHashMap::default(),
        }
    }
}

const DENSE_IDS: u32 = 1 << 16;

impl<T> IdTable<T> {
    pub fn insert(&mut self, id: u32, value: T) {
        if id < DENSE_IDS {
            if self.dense.len() <= id as usize {
                self.dense.resize_with(id as usize + 1, || None);
            }
            self.dense[id as usize] = Some(value);
        } else {
            self.sparse.insert(id, value);
        }
    }

    #[inline]
    pub fn get(&self, id: u32) -> Option<&T> {
        if id < DENSE_IDS {
            self.dense.get(id as usize).and_then(Option::as_ref)
        } else {
            self.sparse.get(&id)
        }
    }
}

/// Why an event could not be converted.
#[derive(Debug)]
pub(crate) struct ConvertError {
    pub rule: &'static str,
    pub message: String,
}

type Converted<T> = std::result::Result<T, ConvertError>;

fn fail<T>(rule: &'static str, message: String) -> Converted<T> {
    Err(ConvertError { rule, message })
}

/// Why a communicator or rank a record names has no translation to the model's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Untranslatable {
    /// The record names no communicator (`OTF2_UNDEFINED_COMM`).
    NoCommunicator,
    /// The communicator is not defined (or is an inter-communicator, which mtfdb does not
    /// translate).
    UnknownCommunicator,
    /// The record names no rank (`OTF2_UNDEFINED_UINT32`).
    NoRank,
    /// The rank is not a rank of the communicator.
    RankOutside,
}

type Translated<T> = std::result::Result<T, Untranslatable>;

/// OTF2's undefined communicator and rank.
const UNDEFINED: u32 = u32::MAX;

impl Context {
    fn region(&self, id: u32) -> Converted<RegionInfo> {
        match self.regions.get(id) {
            Some(r) => Ok(*r),
            None => fail("unknown region", format!("region {id} is not defined")),
        }
    }

    /// The model communicator and the world rank of `local` on OTF2 communicator `comm`, seen
    /// from world rank `me`.
    fn world(&self, comm: u32, local: u32, me: Rank) -> Translated<(CommId, Rank)> {
        let id = self.comm_id(comm, me)?;
        if local == UNDEFINED {
            return Err(Untranslatable::NoRank);
        }
        let world = match self.comms.get(comm) {
            Some(CommRanks::Members { members, .. }) => members.get(local as usize).copied(),
            Some(CommRanks::Global { .. }) => Some(local),
            Some(CommRanks::Processes { .. }) => self.process_ranks.get(&local).copied(),
            Some(CommRanks::SelfComm { .. }) => (local == 0).then_some(me),
            None => None,
        };
        world.map(|r| (id, r)).ok_or(Untranslatable::RankOutside)
    }

    fn comm_id(&self, comm: u32, me: Rank) -> Translated<CommId> {
        match self.comms.get(comm) {
            Some(CommRanks::Members { id, .. })
            | Some(CommRanks::Global { id })
            | Some(CommRanks::Processes { id }) => Ok(*id),
            Some(CommRanks::SelfComm { first_id }) => Ok(first_id + me),
            None if comm == UNDEFINED => Err(Untranslatable::NoCommunicator),
            None => Err(Untranslatable::UnknownCommunicator),
        }
    }
}

/// An item for the sink (of the OTF2, OTF v1 and DUMPI converters).
#[derive(Debug)]
pub(crate) enum Item {
    Op(Operation),
    Routine(RoutineEvent),
    Anomaly(Anomaly),
}

impl Item {
    /// Hands the item to `sink`.
    pub fn send_to(&self, sink: &mut dyn EventSink) -> crate::Result<()> {
        match self {
            Item::Op(op) => sink.operation(op),
            Item::Routine(r) => sink.routine(r),
            Item::Anomaly(a) => sink.anomaly(a),
        }
    }

    /// The time the item is ordered by.
    pub fn time(&self) -> Time {
        match self {
            Item::Op(op) => op.start,
            Item::Routine(r) => r.time,
            Item::Anomaly(_) => 0,
        }
    }
}

/// A place in a location's output: an item, and whether it is complete. An operation is
/// built in its place from the Enter of its region on (no copies of it are made).
#[derive(Debug)]
pub(crate) struct Slot {
    pub item: Item,
    /// File offset of the record it started at (for error messages).
    pub offset: u64,
    complete: bool,
    /// The hardware counters of an operation or of a routine's leave (see `metrics`).
    counters: Option<CallValues>,
    /// The rules an operation's records broke, reported (with its position) once it left.
    broken: Vec<Anomaly>,
}

struct Frame {
    region: u32,
    /// For an MPI region: the output place of its operation.
    seq: Option<u64>,
    /// The counters sampled at its Enter.
    counters: Option<CallValues>,
}

/// The conversion state of one location.
pub(crate) struct LocationConverter {
    rank: Rank,
    thread: u32,
    stack: Vec<Frame>,
    /// Items in start order; the complete ones at the front are ready to leave.
    out: VecDeque<Slot>,
    /// Sequence number of `out[0]`.
    out_base: u64,
    /// Operations (by output place) waiting for their completion event, by request id.
    deferred: FxHashMap<u64, u64>,
    /// The program name of a `ProgramBegin` record.
    pub program: Option<u32>,
    /// Region entries (routines, MPI calls, kernels) seen.
    pub enters: u64,
    last_time: Time,
    /// At most this many items wait behind an operation whose completion has not come.
    max_held: usize,
    /// Emptied lists of completed requests, for the next completion calls.
    spare_lists: Vec<Vec<u64>>,
    /// The location's counter samples, when the trace has counters.
    metrics: Option<LocationMetrics>,
    /// Operations handed to the sink so far (the next one's position on its rank and thread).
    ops_out: u64,
}

/// Emptied request lists a location keeps (a few are in use at once: the calls between a
/// Wait and the items ahead of it).
const SPARE_LISTS: usize = 8;

/// Items a location may hold behind one incomplete operation before that operation is given
/// up on (a request never completed would otherwise hold back the rest of its location).
const MAX_HELD: usize = 1 << 20;

impl LocationConverter {
    pub fn new(rank: Rank, thread: u32) -> LocationConverter {
        LocationConverter {
            rank,
            thread,
            stack: Vec::new(),
            out: VecDeque::new(),
            out_base: 0,
            deferred: FxHashMap::default(),
            program: None,
            enters: 0,
            last_time: 0,
            max_held: MAX_HELD,
            spare_lists: Vec::new(),
            metrics: None,
            ops_out: 0,
        }
    }

    /// Keeps the counters of the trace's calls, from the samples given to
    /// [`LocationConverter::sample`].
    pub fn with_metrics(mut self, metrics: Option<LocationMetrics>) -> LocationConverter {
        self.metrics = metrics;
        self
    }

    /// A `Metric` record of class or instance `metric` at `time`.
    pub fn sample(&mut self, metric: u32, values: &[(u8, u64)], time: Time) {
        if let Some(m) = self.metrics.as_mut() {
            m.sample(metric, values, time);
        }
    }

    /// The next item, if it is complete.
    #[inline]
    pub fn ready(&self) -> Option<&Slot> {
        self.out.front().filter(|s| s.complete)
    }

    /// Drops the item [`LocationConverter::ready`] returned, keeping an operation's list of
    /// completed requests for the next operation (a Wait's list was an allocation and a free
    /// per call).
    #[inline]
    pub fn pop(&mut self) {
        debug_assert!(self.ready().is_some(), "only a complete item leaves");
        if let Some(Slot {
            item: Item::Op(op), ..
        }) = self.out.pop_front()
        {
            if op.completes.capacity() > 0 && self.spare_lists.len() < SPARE_LISTS {
                let mut list = op.completes;
                list.clear();
                self.spare_lists.push(list);
            }
        }
        self.out_base += 1;
    }

    /// Hands the ready item at the front to `sink` and drops it; nothing if none is ready.
    /// The rules an operation's records broke follow it, naming it by its position. An error
    /// is passed to `place` with the file offset of the record the item came from. The item
    /// goes by reference: moving an operation out of the queue would copy it once more per
    /// event.
    #[inline]
    pub fn deliver(
        &mut self,
        sink: &mut dyn EventSink,
        place: impl FnOnce(u64, Error) -> Error,
    ) -> crate::Result<()> {
        let at = OpPosition {
            rank: self.rank,
            thread: self.thread,
            index: self.ops_out,
        };
        let Some(slot) = self.ready() else {
            return Ok(());
        };
        let is_op = matches!(slot.item, Item::Op(_));
        let sent = slot.item.send_to(sink).and_then(|()| {
            if let Some(values) = &slot.counters {
                sink.counters(values)?;
            }
            slot.broken
                .iter()
                .try_for_each(|anomaly| sink.anomaly_at(anomaly, &[at]))
        });
        sent.map_err(|e| place(slot.offset, e))?;
        self.ops_out += u64::from(is_op);
        self.pop();
        Ok(())
    }

    /// A record that cannot be placed (it names a region the definitions lack): skipped and
    /// reported, the rest of the location goes on.
    fn skip(&mut self, what: String, time: Time, offset: u64) {
        let anomaly = Anomaly::SkippedRecord {
            rank: Some(self.rank),
            time: Some(time),
            what,
        };
        self.report(anomaly, offset);
    }

    /// The MPI call at `seq` named a communicator or a rank (`rank`: a peer or root) that
    /// cannot be translated to the model's (`why`). It is kept without it, outside matching
    /// (but for a root on a collective that has none: it only loses the root), and reported
    /// as the rule it broke once it leaves: [`Rule::MissingCommunicator`],
    /// [`Rule::UnknownCommunicator`], or the rule of `rules` (the rank is missing, or is no
    /// rank of the communicator).
    fn broken(
        &mut self,
        ctx: &Context,
        seq: u64,
        why: Untranslatable,
        (comm, rank, rules): (u32, u32, RankRules),
    ) {
        let (me, thread) = (self.rank, self.thread);
        let op = self.op(seq);
        let (rule, value) = match why {
            Untranslatable::NoCommunicator => (Rule::MissingCommunicator, None),
            Untranslatable::UnknownCommunicator => (Rule::UnknownCommunicator, Some(comm)),
            Untranslatable::NoRank => (rules.missing, None),
            Untranslatable::RankOutside => (rules.outside, Some(rank)),
        };
        op.comm = ctx.comm_id(comm, me).ok();
        if rule != Rule::UnexpectedRoot {
            op.flags |= flags::WITHOUT_RECORDS;
        }
        let anomaly = Anomaly::BrokenRule {
            rule,
            rank: Some(me),
            thread,
            time: Some(op.start),
            op: Some(0),
            comm: op.comm.or((comm != UNDEFINED).then_some(comm)),
            value: value.map(u64::from),
        };
        self.slot(seq).broken.push(anomaly);
    }

    /// Fills in the receive at `seq` from a receive record's (communicator, sender, tag,
    /// bytes); what cannot be translated is reported (see [`LocationConverter::broken`]).
    fn receive(&mut self, seq: u64, ctx: &Context, (comm, peer, tag, bytes): (u32, u32, u32, u64)) {
        let me = self.rank;
        if let Err(why) = set_receive(self.op(seq), ctx, comm, peer, tag, bytes, me) {
            self.broken(ctx, seq, why, (comm, peer, PEER_RULES));
        }
    }

    /// Fills in the collective at `seq` from a collective record's (communicator, root,
    /// bytes sent, bytes received); what cannot be translated is reported.
    fn collective(
        &mut self,
        seq: u64,
        ctx: &Context,
        (comm, root, sent, received): (u32, u32, u64, u64),
    ) {
        let me = self.rank;
        let op = self.op(seq);
        let rules = if op.kind.is_rooted() {
            ROOT_RULES
        } else {
            UNEXPECTED_ROOT
        };
        if let Err(why) = set_collective(op, ctx, comm, root, sent, received, me) {
            self.broken(ctx, seq, why, (comm, root, rules));
        }
    }

    /// Reports `anomaly` in its place among the location's items (after what came before).
    pub fn report(&mut self, anomaly: Anomaly, offset: u64) {
        self.push(Item::Anomaly(anomaly), offset, true);
    }

    /// The request id as the model keeps it: unique per process, so threads' ids are kept apart.
    fn request(&self, id: u64) -> u64 {
        if self.thread == 0 {
            id
        } else {
            id ^ ((self.thread as u64) << 56)
        }
    }

    fn push(&mut self, item: Item, offset: u64, complete: bool) -> u64 {
        self.out.push_back(Slot {
            item,
            offset,
            complete,
            counters: None,
            broken: Vec::new(),
        });
        self.out_base + self.out.len() as u64 - 1
    }

    fn slot(&mut self, seq: u64) -> &mut Slot {
        &mut self.out[(seq - self.out_base) as usize]
    }

    fn op(&mut self, seq: u64) -> &mut Operation {
        match &mut self.slot(seq).item {
            Item::Op(op) => op,
            _ => unreachable!("an operation's place holds an operation"),
        }
    }

    /// The place of the innermost open MPI operation.
    fn innermost_op(&self) -> Option<u64> {
        self.stack.iter().rev().find_map(|f| f.seq)
    }

    /// The place of the innermost open MPI operation, or of a new one of `kind` made for an
    /// MPI event found outside any MPI region (complete at once).
    fn current(&mut self, kind: OpKind, time: Time, offset: u64) -> u64 {
        match self.innermost_op() {
            Some(seq) => seq,
            None => self.new_op(kind, time, offset, true),
        }
    }

    /// Whether the operation at `seq` is the call a record of `kind` describes: a call of
    /// the same direction whose envelope no record has filled yet.
    fn takes(&mut self, seq: u64, kind: OpKind) -> bool {
        let op = self.op(seq);
        if kind.is_send() {
            op.kind.is_send() && op.dest.is_none()
        } else {
            op.kind.is_receive() && op.request.is_none() && op.source.is_none()
        }
    }

    /// The place a send record of `kind` fills: the innermost MPI call if it is that send,
    /// else an operation of its own at the record's time (a persistent request started by
    /// `MPI_Start`/`MPI_Startall`, a second send in one call, a send outside any call), so
    /// that no message is lost or written over the call that started it.
    fn record_op(&mut self, kind: OpKind, time: Time, offset: u64) -> u64 {
        match self.innermost_op().filter(|&seq| self.takes(seq, kind)) {
            Some(seq) => seq,
            None => self.new_op(kind, time, offset, true),
        }
    }

    fn new_op(&mut self, kind: OpKind, time: Time, offset: u64, complete: bool) -> u64 {
        let mut op = Operation::new(self.rank, kind, time, time);
        op.thread = self.thread;
        if kind.is_completion() {
            op.completes = self.spare_lists.pop().unwrap_or_default();
        }
        self.push(Item::Op(op), offset, complete)
    }

    /// Converts one event at `time` (ns) read at file `offset`.
    pub fn event(&mut self, ctx: &Context, event: Event, time: Time, offset: u64) -> Converted<()> {
        self.last_time = time;
        let me = self.rank;
        match event {
            Event::Enter(region) => {
                self.enters += 1;
                let Ok(info) = ctx.region(region) else {
                    self.skip(
                        format!("an entry of region {region}, which is not defined"),
                        time,
                        offset,
                    );
                    return Ok(());
                };
                let counters = self.metrics.as_ref().and_then(|m| m.at(time));
                match info.mpi {
                    Some(kind) => {
                        let seq = self.new_op(kind, time, offset, false);
                        self.stack.push(Frame {
                            region,
                            seq: Some(seq),
                            counters,
                        });
                    }
                    None => {
                        self.stack.push(Frame {
                            region,
                            seq: None,
                            counters,
                        });
                        self.push(self.routine(info.name, time, true), offset, true);
                    }
                }
            }
            Event::Leave(region) => self.leave(ctx, region, time, offset)?,
            Event::Send {
                peer,
                comm,
                tag,
                bytes,
            }
            | Event::Isend {
                peer,
                comm,
                tag,
                bytes,
                ..
            } => {
                let target = ctx.world(comm, peer, me);
                let request = match event {
                    Event::Isend { request, .. } => Some(self.request(request)),
                    _ => None,
                };
                let kind = if request.is_some() {
                    OpKind::Isend
                } else {
                    OpKind::Send
                };
                let seq = self.record_op(kind, time, offset);
                let op = self.op(seq);
                op.send_tag = Some(tag as i32);
                op.send_bytes = bytes;
                if request.is_some() {
                    op.request = request;
                }
                match target {
                    Ok((comm, dest)) => (op.comm, op.dest) = (Some(comm), Some(dest)),
                    Err(why) => self.broken(ctx, seq, why, (comm, peer, DEST_RULES)),
                }
            }
            Event::Recv {
                peer,
                comm,
                tag,
                bytes,
            } => {
                let seq = self.current(OpKind::Recv, time, offset);
                self.receive(seq, ctx, (comm, peer, tag, bytes));
            }
            Event::IrecvRequest(request) => {
                let request = self.request(request);
                match self
                    .innermost_op()
                    .filter(|&seq| self.takes(seq, OpKind::Irecv))
                {
                    Some(seq) => self.op(seq).request = Some(request),
                    None => {
                        // A request outside MPI_Irecv (started by MPI_Start, or bare): an
                        // operation of its own that waits for its completion.
                        let seq = self.new_op(OpKind::Irecv, time, offset, false);
                        self.op(seq).request = Some(request);
                        self.defer(ctx, request, seq);
                    }
                }
            }
            Event::Irecv {
                peer,
                comm,
                tag,
                bytes,
                request,
            } => {
                let request = self.request(request);
                if let Some(seq) = self.deferred.remove(&request) {
                    self.receive(seq, ctx, (comm, peer, tag, bytes));
                    self.slot(seq).complete = true;
                    self.complete(request, time, offset);
                } else if let Some(seq) = self.open_op_with_request(request) {
                    // Completed inside the MPI_Irecv region itself.
                    self.receive(seq, ctx, (comm, peer, tag, bytes));
                    let op = self.op(seq);
                    op.request = None;
                    op.kind = OpKind::Recv;
                } else {
                    self.complete(request, time, offset);
                }
            }
            Event::IsendComplete(request) => {
                let request = self.request(request);
                self.complete(request, time, offset);
            }
            Event::RequestTest => {
                let seq = self.current(OpKind::Test, time, offset);
                self.op(seq).flags |= flags::NOT_COMPLETED;
            }
            Event::RequestCancelled(request) => {
                let request = self.request(request);
                if let Some(seq) = self.deferred.remove(&request) {
                    unresolved(ctx, self.op(seq));
                    self.slot(seq).complete = true;
                }
                self.complete(request, time, offset);
            }
            Event::CollectiveBegin => {}
            Event::CollectiveEnd {
                comm,
                root,
                sent,
                received,
            } => {
                let seq = self.current(OpKind::Barrier, time, offset);
                self.collective(seq, ctx, (comm, root, sent, received));
            }
            Event::CollectiveRequest(request) => {
                let request = self.request(request);
                let seq = self.current(OpKind::Ibarrier, time, offset);
                self.op(seq).request = Some(request);
            }
            Event::CollectiveComplete {
                comm,
                root,
                sent,
                received,
                request,
            } => {
                let request = self.request(request);
                if let Some(seq) = self.deferred.remove(&request) {
                    self.collective(seq, ctx, (comm, root, sent, received));
                    self.slot(seq).complete = true;
                } else if let Some(seq) = self.open_op_with_request(request) {
                    self.collective(seq, ctx, (comm, root, sent, received));
                }
                self.complete(request, time, offset);
            }
            Event::ProgramBegin { name } => self.program = Some(name),
            // Samples reach the location through `sample`, with their values.
            Event::ProgramEnd | Event::Measurement | Event::Metric(_) | Event::Other => {}
        }
        if self.out.len() > self.max_held {
            self.release_front(ctx);
        }
        Ok(())
    }

    /// A Leave of `region`. Tracers do not always nest: a Leave of a region that is not the
    /// innermost one (crossed leaves, tasking runtimes) closes the regions entered after it
    /// at this time; a Leave of a region that is not open at all is dropped. Both are kept
    /// as anomalies with the location and time.
    fn leave(&mut self, ctx: &Context, region: u32, time: Time, offset: u64) -> Converted<()> {
        let Ok(RegionInfo { name, .. }) = ctx.region(region) else {
            self.skip(
                format!("a leave of region {region}, which is not defined"),
                time,
                offset,
            );
            return Ok(());
        };
        let Some(at) = self.stack.iter().rposition(|f| f.region == region) else {
            let anomaly = Anomaly::LeaveWithoutEnter {
                rank: self.rank,
                thread: self.thread,
                time,
                routine: name,
            };
            self.push(Item::Anomaly(anomaly), offset, true);
            return Ok(());
        };
        if at + 1 < self.stack.len() {
            let innermost = self.stack.last().map_or(region, |f| f.region);
            let anomaly = Anomaly::CrossedLeave {
                rank: self.rank,
                thread: self.thread,
                time,
                routine: name,
                innermost: ctx.region(innermost)?.name,
            };
            self.push(Item::Anomaly(anomaly), offset, true);
        }
        while self.stack.len() > at {
            let Some(frame) = self.stack.pop() else {
                break;
            };
            self.close_frame(ctx, frame, time, offset)?;
        }
        Ok(())
    }

    /// Ends a region at `time`: its operation, or its routine call.
    fn close_frame(
        &mut self,
        ctx: &Context,
        frame: Frame,
        time: Time,
        offset: u64,
    ) -> Converted<()> {
        let counters = (self.metrics.as_ref()).and_then(|m| m.call(frame.counters.as_ref(), time));
        let seq = match frame.seq {
            Some(seq) => {
                self.close_op(ctx, seq, time);
                seq
            }
            None => {
                let info = ctx.region(frame.region)?;
                self.push(self.routine(info.name, time, false), offset, true)
            }
        };
        self.slot(seq).counters = counters;
        Ok(())
    }

    /// Ends the operation at `seq` (its region was left, or the location ended): it is
    /// complete, unless it still waits for the completion record of its request. An MPI
    /// call whose records never came (older Score-P writes non-blocking collectives as bare
    /// regions) is kept as a call of its name, flagged as such.
    fn close_op(&mut self, ctx: &Context, seq: u64, end: Time) {
        let op = self.op(seq);
        op.end = end;
        match op.request.filter(|_| awaits_completion(op)) {
            Some(request) => self.defer(ctx, request, seq),
            None => {
                if lacks_records(op) {
                    without_records(ctx, op);
                }
                self.slot(seq).complete = true
            }
        }
    }

    /// The operation at `seq` waits for the completion record of `request`. MPI reuses a
    /// request handle once its request completed, so an earlier operation still waiting on
    /// the same handle was completed without a record (EZTrace records none for receives):
    /// it is placed as never completed, or it would hold back its location forever.
    fn defer(&mut self, ctx: &Context, request: u64, seq: u64) {
        if let Some(earlier) = self.deferred.insert(request, seq) {
            unresolved(ctx, self.op(earlier));
            self.slot(earlier).complete = true;
        }
    }

    /// Keeps memory bounded: the operation at the front, if it waits for a completion, is
    /// placed as never completed, so that the items behind it can leave.
    fn release_front(&mut self, ctx: &Context) {
        let front = self.out_base;
        let waiting = self
            .deferred
            .iter()
            .find(|(_, &seq)| seq == front)
            .map(|(&request, _)| request);
        if let Some(request) = waiting {
            self.deferred.remove(&request);
            unresolved(ctx, self.op(front));
            self.slot(front).complete = true;
        }
    }

    /// The place of the innermost open MPI operation that made `request`.
    fn open_op_with_request(&self, request: u64) -> Option<u64> {
        self.stack.iter().rev().filter_map(|f| f.seq).find(|&seq| {
            let slot = &self.out[(seq - self.out_base) as usize];
            matches!(&slot.item, Item::Op(op) if op.request == Some(request))
        })
    }

    /// Records that the innermost MPI call completed `request` (a Wait or Test variant).
    fn complete(&mut self, request: u64, time: Time, offset: u64) {
        let seq = self.current(OpKind::Wait, time, offset);
        self.op(seq).completes.push(request);
    }

    fn routine(&self, name: StrId, time: Time, enter: bool) -> Item {
        Item::Routine(RoutineEvent {
            rank: self.rank,
            thread: self.thread,
            time,
            routine: name,
            enter,
        })
    }

    /// Closes what the location left open at its end: regions never left end at the
    /// location's last timestamp and are reported; operations never completed are placed as
    /// they are (see [`unresolved`]).
    pub fn finish(&mut self, ctx: &Context, offset: u64) {
        let last = self.last_time;
        while let Some(frame) = self.stack.pop() {
            let routine = ctx.regions.get(frame.region).map_or(0, |r| r.name);
            let anomaly = Item::Anomaly(Anomaly::UnclosedRoutine {
                rank: self.rank,
                routine,
            });
            self.push(anomaly, offset, true);
            match frame.seq {
                Some(seq) => self.close_op(ctx, seq, last),
                None => {
                    self.push(self.routine(routine, last, false), offset, true);
                }
            }
        }
        for (_, seq) in std::mem::take(&mut self.deferred) {
            unresolved(ctx, self.op(seq));
            self.slot(seq).complete = true;
        }
        // Every place is filled now: what is still open could only wait for a record that
        // will not come, and an item left behind it would be lost without a word.
        for slot in self.out.iter_mut().filter(|s| !s.complete) {
            if let Item::Op(op) = &mut slot.item {
                unresolved(ctx, op);
            }
            slot.complete = true;
        }
    }
}

/// Whether `op` still waits for the completion record that carries its envelope.
fn awaits_completion(op: &Operation) -> bool {
    (op.kind.is_receive() && op.source.is_none() && op.flags & flags::ANY_SOURCE == 0)
        || (op.kind.is_collective() && op.comm.is_none())
}

/// Whether `op` is a send, receive or collective that no MPI record described (it has no
/// communicator): a bare region of an MPI call. A call whose record named what cannot be
/// translated was reported as the rule it broke, and stays a call of its kind.
fn lacks_records(op: &Operation) -> bool {
    op.comm.is_none()
        && op.flags & flags::WITHOUT_RECORDS == 0
        && (op.kind.is_send() || op.kind.is_receive() || op.kind.is_collective())
}

/// Keeps an MPI call whose records are missing as a call of its name, with no communicator,
/// outside message and collective matching, flagged so that the import reports it.
fn without_records(ctx: &Context, op: &mut Operation) {
    if let Some(&name) = ctx.kind_names.get(&op.kind) {
        op.kind = OpKind::Other(name);
        op.root = None;
        op.dest = None;
        op.source = None;
        op.send_tag = None;
        op.recv_tag = None;
        op.flags |= flags::WITHOUT_RECORDS;
    }
}

/// An operation whose completion never came (cancelled, never waited for, or not recorded:
/// EZTrace records none for `MPI_Irecv`). OTF2 records the envelope of a non-blocking
/// receive or collective only at completion. Without one a receive stays a receive, with its
/// request but no communicator, source or tag, flagged as recorded without its records: it
/// is listed with its kind, and the matcher reports the sends it may have received
/// ([`Anomaly::ReceiveNotRecorded`]). A collective is kept as a plain call of its name. A
/// receive whose communicator is known but whose source is not is an unresolved wildcard.
fn unresolved(ctx: &Context, op: &mut Operation) {
    if lacks_records(op) {
        if op.kind.is_receive() {
            op.flags |= flags::WITHOUT_RECORDS;
        } else if let Some(&name) = ctx.kind_names.get(&op.kind) {
            // Reported as a request never completed, not as a call without records.
            op.kind = OpKind::Other(name);
            op.root = None;
        }
    } else if op.kind.is_receive() && op.source.is_none() {
        op.flags |= flags::ANY_SOURCE;
    }
}

/// The rules a peer or root that cannot be translated breaks: when it is missing, and when it
/// is no rank of its communicator.
#[derive(Debug, Clone, Copy)]
struct RankRules {
    missing: Rule,
    outside: Rule,
}

const DEST_RULES: RankRules = RankRules {
    missing: Rule::MissingDestination,
    outside: Rule::PeerOutsideCommunicator,
};
const PEER_RULES: RankRules = RankRules {
    missing: Rule::MissingSource,
    outside: Rule::PeerOutsideCommunicator,
};
const ROOT_RULES: RankRules = RankRules {
    missing: Rule::MissingRoot,
    outside: Rule::RootOutsideCommunicator,
};
/// A root on a collective that has none, which cannot even be translated.
const UNEXPECTED_ROOT: RankRules = RankRules {
    missing: Rule::UnexpectedRoot,
    outside: Rule::UnexpectedRoot,
};

fn set_receive(
    op: &mut Operation,
    ctx: &Context,
    comm: u32,
    peer: u32,
    tag: u32,
    bytes: u64,
    me: Rank,
) -> Translated<()> {
    op.recv_tag = Some(tag as i32);
    op.recv_bytes = bytes;
    op.comm = Some(ctx.comm_id(comm, me)?);
    // A receive record without its sender: posted with MPI_ANY_SOURCE, as tracers that
    // record the posted envelope write it.
    if peer == UNDEFINED {
        op.flags |= flags::ANY_SOURCE;
    } else {
        op.source = Some(ctx.world(comm, peer, me)?.1);
    }
    Ok(())
}

/// OTF2's root values that name no process: none, self, this group (inter-communicators).
const FIRST_SPECIAL_ROOT: u32 = u32::MAX - 2;

/// Fills in a collective from its record. A root on a collective that has none is kept, for
/// the import's seam to report ([`Rule::UnexpectedRoot`]); a rooted one without a root stays
/// without (the seam reports [`Rule::MissingRoot`]).
fn set_collective(
    op: &mut Operation,
    ctx: &Context,
    comm: u32,
    root: u32,
    sent: u64,
    received: u64,
    me: Rank,
) -> Translated<()> {
    op.send_bytes = sent;
    op.recv_bytes = received;
    op.comm = Some(ctx.comm_id(comm, me)?);
    // A root on a collective that has none is kept too: the import's checks report it
    // (`Rule::UnexpectedRoot`) and drop it.
    if op.kind.is_collective() && root < FIRST_SPECIAL_ROOT {
        op.root = Some(ctx.world(comm, root, me)?.1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: u32 = 0;
    const SEND: u32 = 1;
    const IRECV: u32 = 2;
    const WAIT: u32 = 3;
    const WORLD: u32 = 0;
    const ODD: u32 = 1;

    /// Regions `f`, MPI_Send, MPI_Irecv, MPI_Wait; communicators world (4 ranks) and "odd"
    /// (world ranks 3 and 1, in that order).
    fn context() -> Context {
        let mut ctx = Context::default();
        for (id, name, mpi) in [
            (USER, 0, None),
            (SEND, 1, Some(OpKind::Send)),
            (IRECV, 2, Some(OpKind::Irecv)),
            (WAIT, 3, Some(OpKind::Wait)),
        ] {
            ctx.regions.insert(id, RegionInfo { name, mpi });
            if let Some(kind) = mpi {
                ctx.kind_names.insert(kind, name);
            }
        }
        ctx.comms.insert(
            WORLD,
            CommRanks::Members {
                id: 0,
                members: vec![0, 1, 2, 3],
            },
        );
        ctx.comms.insert(
            ODD,
            CommRanks::Members {
                id: 1,
                members: vec![3, 1],
            },
        );
        ctx
    }

    fn drain(c: &mut LocationConverter) -> Vec<Item> {
        let mut items = Vec::new();
        while c.ready().is_some() {
            items.extend(c.out.pop_front().map(|slot| slot.item));
            c.out_base += 1;
        }
        items
    }

    fn run(c: &mut LocationConverter, ctx: &Context, events: &[(Event, Time)]) {
        for (i, &(e, t)) in events.iter().enumerate() {
            c.event(ctx, e, t, i as u64).unwrap();
        }
    }

    #[test]
    fn a_nonblocking_receive_gets_its_envelope_at_completion_and_leaves_in_start_order() {
        let ctx = context();
        let mut c = LocationConverter::new(1, 0);
        run(
            &mut c,
            &ctx,
            &[
                (Event::Enter(IRECV), 10),
                (Event::IrecvRequest(7), 11),
                (Event::Leave(IRECV), 12),
                (Event::Enter(USER), 20),
                (Event::Leave(USER), 30),
            ],
        );
        // The routine waits behind the receive, whose sender is not known yet.
        assert!(drain(&mut c).is_empty());
        run(
            &mut c,
            &ctx,
            &[
                (Event::Enter(WAIT), 40),
                (
                    Event::Irecv {
                        peer: 0,
                        comm: ODD,
                        tag: 5,
                        bytes: 64,
                        request: 7,
                    },
                    41,
                ),
                (Event::Leave(WAIT), 42),
            ],
        );
        let items = drain(&mut c);
        let starts: Vec<Time> = items.iter().map(Item::time).collect();
        assert_eq!(starts, vec![10, 20, 30, 40]);
        let Item::Op(irecv) = &items[0] else {
            panic!("{:?}", items[0])
        };
        assert_eq!(irecv.kind, OpKind::Irecv);
        assert_eq!((irecv.start, irecv.end), (10, 12));
        // Rank 0 of "odd" is world rank 3.
        assert_eq!((irecv.comm, irecv.source), (Some(1), Some(3)));
        assert_eq!(
            (irecv.recv_tag, irecv.recv_bytes, irecv.request),
            (Some(5), 64, Some(7))
        );
        let Item::Op(wait) = &items[3] else {
            panic!("{:?}", items[3])
        };
        assert_eq!(wait.completes, vec![7]);
    }

    #[test]
    fn a_request_handle_reused_before_any_completion_record_releases_the_earlier_receive() {
        // EZTrace records no completion of an MPI_Irecv, and MPI hands the freed handle to
        // the next MPI_Irecv: the first receive must not hold its location back forever.
        let ctx = context();
        let mut c = LocationConverter::new(1, 0);
        let mut events = Vec::new();
        for i in 0..3u64 {
            let t = i * 100;
            events.extend([
                (Event::Enter(IRECV), t),
                (Event::IrecvRequest(7), t + 1),
                (Event::Leave(IRECV), t + 2),
                (Event::Enter(WAIT), t + 10),
                (Event::Leave(WAIT), t + 20),
            ]);
        }
        run(&mut c, &ctx, &events);
        // The first two receives gave way to the next one with their handle.
        let starts: Vec<Time> = drain(&mut c).iter().map(Item::time).collect();
        assert_eq!(starts, vec![0, 10, 100, 110]);
        c.finish(&ctx, 99);
        let rest = drain(&mut c);
        assert_eq!(
            rest.iter().map(Item::time).collect::<Vec<_>>(),
            vec![200, 210]
        );
        // Each is kept as a receive with its request and no envelope, never completed.
        let Item::Op(irecv) = &rest[0] else {
            panic!("{:?}", rest[0])
        };
        assert_eq!(
            (irecv.kind, irecv.comm, irecv.source),
            (OpKind::Irecv, None, None)
        );
        assert_eq!(irecv.request, Some(7));
        assert_eq!(irecv.flags & flags::WITHOUT_RECORDS, flags::WITHOUT_RECORDS);
    }

    #[test]
    fn a_rank_outside_the_communicator_is_kept_as_the_rule_it_breaks() {
        let ctx = context();
        let mut c = LocationConverter::new(0, 0);
        c.event(&ctx, Event::Enter(SEND), 1, 0).unwrap();
        let send = Event::Send {
            peer: 2,
            comm: ODD,
            tag: 0,
            bytes: 8,
        };
        c.event(&ctx, send, 2, 1).unwrap();
        c.event(&ctx, Event::Leave(SEND), 3, 2).unwrap();
        // The rule leaves with the send, which it names.
        let broken = c.out[0].broken.clone();
        assert!(
            matches!(
                broken[..],
                [Anomaly::BrokenRule {
                    rule: Rule::PeerOutsideCommunicator,
                    rank: Some(0),
                    time: Some(1),
                    op: Some(0),
                    comm: Some(1),
                    value: Some(2),
                    ..
                }]
            ),
            "{broken:?}"
        );
        let items = drain(&mut c);
        // The send stays a send of its bytes on its communicator, without the peer, outside
        // matching.
        let [Item::Op(op)] = &items[..] else {
            panic!("{items:?}")
        };
        assert_eq!(
            (op.kind, op.comm, op.dest, op.send_bytes),
            (OpKind::Send, Some(1), None, 8)
        );
        assert_eq!(op.flags & flags::WITHOUT_RECORDS, flags::WITHOUT_RECORDS);
    }

    #[test]
    fn a_leave_of_a_region_not_open_is_dropped_and_reported() {
        let ctx = context();
        let mut c = LocationConverter::new(1, 0);
        c.event(&ctx, Event::Leave(USER), 3, 2).unwrap();
        let items = drain(&mut c);
        assert!(
            matches!(
                items[..],
                [Item::Anomaly(Anomaly::LeaveWithoutEnter {
                    rank: 1,
                    thread: 0,
                    time: 3,
                    routine: 0
                })]
            ),
            "{items:?}"
        );
    }

    #[test]
    fn a_crossed_leave_closes_what_was_entered_after_it_at_that_time() {
        let ctx = context();
        let mut c = LocationConverter::new(0, 0);
        let send = Event::Send {
            peer: 1,
            comm: WORLD,
            tag: 4,
            bytes: 16,
        };
        // f is entered, then MPI_Send; f is left while the send is still open.
        run(
            &mut c,
            &ctx,
            &[
                (Event::Enter(USER), 1),
                (Event::Enter(SEND), 2),
                (send, 3),
                (Event::Leave(USER), 7),
                (Event::Leave(SEND), 8),
            ],
        );
        let items = drain(&mut c);
        assert_eq!(items.len(), 5, "{items:?}");
        assert!(matches!(
            items[0],
            Item::Routine(RoutineEvent {
                time: 1,
                enter: true,
                ..
            })
        ));
        let Item::Op(op) = &items[1] else {
            panic!("{:?}", items[1])
        };
        assert_eq!(
            (op.kind, op.start, op.end, op.dest),
            (OpKind::Send, 2, 7, Some(1))
        );
        assert!(
            matches!(
                items[2],
                Item::Anomaly(Anomaly::CrossedLeave {
                    rank: 0,
                    thread: 0,
                    time: 7,
                    routine: 0,
                    innermost: 1
                })
            ),
            "{items:?}"
        );
        assert!(matches!(
            items[3],
            Item::Routine(RoutineEvent {
                time: 7,
                enter: false,
                routine: 0,
                ..
            })
        ));
        // The send's own Leave, now of a region no longer open.
        assert!(matches!(
            items[4],
            Item::Anomaly(Anomaly::LeaveWithoutEnter {
                time: 8,
                routine: 1,
                ..
            })
        ));
    }

    #[test]
    fn an_mpi_region_without_its_records_is_kept_as_a_call_of_its_name() {
        let ctx = context();
        let mut c = LocationConverter::new(0, 0);
        run(
            &mut c,
            &ctx,
            &[(Event::Enter(SEND), 2), (Event::Leave(SEND), 5)],
        );
        let items = drain(&mut c);
        let [Item::Op(op)] = &items[..] else {
            panic!("{items:?}")
        };
        assert_eq!(
            (op.kind, op.comm, op.start, op.end),
            (OpKind::Other(1), None, 2, 5)
        );
        assert_eq!(op.flags & flags::WITHOUT_RECORDS, flags::WITHOUT_RECORDS);
    }

    #[test]
    fn a_call_never_left_is_closed_at_the_last_event_and_reported() {
        let ctx = context();
        let mut c = LocationConverter::new(2, 1);
        let send = Event::Send {
            peer: 3,
            comm: WORLD,
            tag: 1,
            bytes: 8,
        };
        run(
            &mut c,
            &ctx,
            &[
                (Event::Enter(USER), 4),
                (Event::Enter(SEND), 5),
                (send, 6),
                (Event::ProgramEnd, 9),
            ],
        );
        c.finish(&ctx, 99);
        let items = drain(&mut c);
        assert_eq!(items.len(), 5, "{items:?}");
        assert!(matches!(
            items[0],
            Item::Routine(RoutineEvent {
                time: 4,
                enter: true,
                ..
            })
        ));
        // Both end at the location's last timestamp (its ProgramEnd), and both are reported.
        let Item::Op(send) = &items[1] else {
            panic!("{:?}", items[1])
        };
        assert_eq!(
            (send.start, send.end, send.dest, send.thread),
            (5, 9, Some(3), 1)
        );
        for (item, routine) in [(&items[2], 1), (&items[3], 0)] {
            assert!(
                matches!(item, Item::Anomaly(Anomaly::UnclosedRoutine { rank: 2, routine: r }) if *r == routine),
                "{item:?}"
            );
        }
        assert!(matches!(
            items[4],
            Item::Routine(RoutineEvent {
                time: 9,
                enter: false,
                routine: 0,
                ..
            })
        ));
    }

    #[test]
    fn a_request_never_completed_does_not_hold_back_its_location_forever() {
        let ctx = context();
        let mut c = LocationConverter::new(0, 0);
        c.max_held = 8;
        run(
            &mut c,
            &ctx,
            &[
                (Event::Enter(IRECV), 1),
                (Event::IrecvRequest(3), 2),
                (Event::Leave(IRECV), 3),
            ],
        );
        for t in 0..10 {
            c.event(&ctx, Event::Enter(USER), 10 + 2 * t, 0).unwrap();
            c.event(&ctx, Event::Leave(USER), 11 + 2 * t, 0).unwrap();
        }
        let items = drain(&mut c);
        assert!(items.len() > 10, "{} items left", items.len());
        let Item::Op(irecv) = &items[0] else {
            panic!("{:?}", items[0])
        };
        // Without its completion there is no envelope: a receive with its request, no source.
        assert_eq!(
            (irecv.kind, irecv.request, irecv.source),
            (OpKind::Irecv, Some(3), None)
        );
    }
}
