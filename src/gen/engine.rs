//! The emitting engine shared by every scenario: per-rank clocks, the timing model, one
//! reusable [`Operation`] buffer, and the ground-truth tallies kept as events go out.
//!
//! Scenarios address processes by *logical position* (their place in the topology); the
//! engine maps a position to its world rank through the permutation when it emits.
//!
//! Timing model (integer ns): a call costs [`CALL`] plus up to 100 ns of jitter; a message
//! arrives [`LATENCY`] plus `bytes / BYTES_PER_NS` after its send started; a receive (or the
//! Wait of an Irecv) ends no earlier than 100 ns after the arrival; a blocking collective ends
//! after its last member entered, plus `LATENCY * ceil(log2 members)` plus the largest
//! member buffer over the bandwidth; computation advances a clock by its base plus up to 1/16
//! of it in jitter. Every clock only moves forward, so each rank's events go out in time order.

use std::collections::{BTreeMap, VecDeque};

use super::rng::SplitMix64;
use super::truth::{GroundTruth, PairTruth, PatternTruth, RankTruth};
use crate::analysis::replay::matching::Envelopes;
use crate::analysis::replay::network::NetworkModel;
use crate::analysis::replay::schedule::{replay, Call, Calls, Step};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::ingest::EventSink;
use crate::model::{
    CommId, OpKind, Operation, Rank, RequestId, RoutineEvent, StrId, Time, TraceHeader,
};

/// One-way latency of a message (ns).
pub(crate) const LATENCY: Time = 1_500;
/// Bandwidth in bytes per ns (5 GB/s).
pub(crate) const BYTES_PER_NS: u64 = 5;
/// Base cost of any MPI call (ns).
pub(crate) const CALL: Time = 250;
/// Time between a routine event and the next event of the same rank (ns).
const ROUTINE_STEP: Time = 15;

/// The operation kinds the generators emit; tallies are kept per kind in this order.
pub(crate) const KINDS: [OpKind; 13] = [
    OpKind::Init,
    OpKind::Finalize,
    OpKind::Send,
    OpKind::Recv,
    OpKind::Isend,
    OpKind::Irecv,
    OpKind::Wait,
    OpKind::Waitall,
    OpKind::Bcast,
    OpKind::Gather,
    OpKind::Scatterv,
    OpKind::Allreduce,
    OpKind::Alltoall,
];
const NKINDS: usize = KINDS.len() + 1;

fn slot(kind: OpKind) -> usize {
    match kind {
        OpKind::Init => 0,
        OpKind::Finalize => 1,
        OpKind::Send => 2,
        OpKind::Recv => 3,
        OpKind::Isend => 4,
        OpKind::Irecv => 5,
        OpKind::Wait => 6,
        OpKind::Waitall => 7,
        OpKind::Bcast => 8,
        OpKind::Gather => 9,
        OpKind::Scatterv => 10,
        OpKind::Allreduce => 11,
        OpKind::Alltoall => 12,
        _ => KINDS.len(),
    }
}

fn kind_name(i: usize) -> String {
    KINDS
        .get(i)
        .and_then(|k| k.mpi_name())
        .unwrap_or("other")
        .to_string()
}

/// Tallies of one world rank.
#[derive(Debug, Clone)]
struct RankAcc {
    kinds: [u64; NKINDS],
    routine_calls: u64,
    sent_messages: u64,
    sent_bytes: u64,
    recv_messages: u64,
    recv_bytes: u64,
    coll_send_bytes: u64,
    coll_recv_bytes: u64,
    first: Time,
    last: Time,
}

impl Default for RankAcc {
    fn default() -> RankAcc {
        RankAcc {
            kinds: [0; NKINDS],
            routine_calls: 0,
            sent_messages: 0,
            sent_bytes: 0,
            recv_messages: 0,
            recv_bytes: 0,
            coll_send_bytes: 0,
            coll_recv_bytes: 0,
            first: Time::MAX,
            last: 0,
        }
    }
}

/// A blocking collective to emit: every member enters at its own clock and leaves after the
/// last one entered.
pub(crate) struct Collective<'a> {
    /// The collective.
    pub kind: OpKind,
    /// Its communicator.
    pub comm: CommId,
    /// Logical positions of the members, in communicator-rank order.
    pub members: &'a [u32],
    /// The root's communicator rank, for rooted collectives.
    pub root: Option<u32>,
    /// The datatype's string id.
    pub datatype: StrId,
    /// `(send_bytes, recv_bytes)` of the member with this communicator rank.
    pub sizes: &'a dyn Fn(u32) -> (u64, u64),
}

/// `(send, receive)` bytes of a Bcast of `bytes` for the member with communicator rank `local`,
/// counted as Score-P records them: the root sends the buffer to all `members` (itself
/// included) and, like everyone, receives it, so a Bcast's bytes sent and received balance.
pub(crate) fn bcast_sizes(local: u32, root: u32, members: usize, bytes: u64) -> (u64, u64) {
    if local == root {
        (members as u64 * bytes, bytes)
    } else {
        (0, bytes)
    }
}

/// The engine. See the module documentation.
pub(crate) struct Gen<'s> {
    sink: &'s mut dyn EventSink,
    n: u32,
    perm: Vec<Rank>,
    world_members: Vec<u32>,
    clock: Vec<Time>,
    next_request: Vec<RequestId>,
    rng: SplitMix64,
    op: Operation,
    strings: Vec<String>,
    acc: Vec<RankAcc>,
    pairs: Vec<Vec<PairTruth>>,
    instances: [u64; NKINDS],
    routine_events: u64,
    patterns: std::collections::BTreeMap<String, PatternTruth>,
    /// Per logical position, the extra computation still due in the current iteration.
    delay_due: Vec<Time>,
    /// The injected delays.
    delays: Vec<super::Delay>,
    /// With a network model: the program being recorded, timed by the model at the end.
    recorder: Option<Recorder>,
}

/// One event of a rank's recorded program.
enum Item {
    /// A routine event, `offset` ns after the rank's previous call ended.
    Routine { offset: Time, event: RoutineEvent },
    /// An MPI call after `burst` ns of computation (and routine steps), with what the
    /// replay makes of it.
    Call {
        op: Operation,
        burst: Time,
        step: Step,
    },
}

/// A trace recorded as a program (per rank: computation, routine events and calls, with
/// messages matched by envelope in order, as MPI matches them) and timed by the network
/// model when it ends, with the replay's own scheduler: its times follow the model exactly.
struct Recorder {
    net: NetworkModel,
    /// Per world rank.
    items: Vec<Vec<Item>>,
    /// Per world rank: computation since its last call.
    since_call: Vec<Time>,
    /// Messages matched by envelope, as MPI (and the replay) match them.
    envelopes: Envelopes,
    /// Per world rank: open requests → (a send?, message).
    requests: Vec<FxHashMap<RequestId, (bool, u64)>>,
    /// The collective instance whose members are being emitted, its member count and the
    /// communicator rank of the member being emitted.
    instance: Option<(u64, u32, u32)>,
    instances: u64,
}

impl Recorder {
    /// What the replay makes of `op`.
    fn step(&mut self, op: &Operation) -> Step {
        let world = op.rank as usize;
        let comm = op.comm.unwrap_or(0);
        let blocking = !op.kind.is_nonblocking();
        if op.kind.is_collective() {
            if let Some((instance, members, position)) = self.instance {
                return Step::Collective {
                    instance,
                    kind: op.kind,
                    members,
                    position: Some(position),
                    send_bytes: op.send_bytes,
                    recv_bytes: op.recv_bytes,
                };
            }
        }
        if let (true, Some(dest)) = (op.kind.is_send(), op.dest) {
            let message = self
                .envelopes
                .message((comm, op.rank, dest, op.send_tag.unwrap_or(0)), true);
            if let Some(r) = op.request.filter(|_| !blocking) {
                self.requests[world].insert(r, (true, message));
            }
            return Step::Send {
                message,
                bytes: op.send_bytes,
                blocking,
            };
        }
        if let (true, Some(source)) = (op.kind.is_receive(), op.source) {
            let message = self
                .envelopes
                .message((comm, source, op.rank, op.recv_tag.unwrap_or(0)), false);
            if let Some(r) = op.request.filter(|_| !blocking) {
                self.requests[world].insert(r, (false, message));
            }
            return Step::Recv { message, blocking };
        }
        if op.kind.is_completion() {
            let (mut sends, mut recvs) = (Vec::new(), Vec::new());
            for r in &op.completes {
                match self.requests[world].remove(r) {
                    Some((true, m)) => sends.push(m),
                    Some((false, m)) => recvs.push(m),
                    None => {}
                }
            }
            return Step::Wait { sends, recvs };
        }
        Step::Local
    }
}

impl<'s> Gen<'s> {
    /// An engine over `perm.len()` ranks; `perm[position]` is the position's world rank.
    pub(crate) fn new(sink: &'s mut dyn EventSink, perm: Vec<Rank>, seed: u64) -> Gen<'s> {
        let n = perm.len() as u32;
        let mut world_members = vec![0u32; perm.len()];
        for (pos, &w) in perm.iter().enumerate() {
            world_members[w as usize] = pos as u32;
        }
        Gen {
            sink,
            n,
            perm,
            world_members,
            clock: vec![0; n as usize],
            next_request: vec![1; n as usize],
            rng: SplitMix64::new(seed),
            op: Operation::new(0, OpKind::Init, 0, 0),
            strings: Vec::new(),
            acc: vec![RankAcc::default(); n as usize],
            pairs: vec![Vec::new(); n as usize],
            instances: [0; NKINDS],
            routine_events: 0,
            patterns: std::collections::BTreeMap::new(),
            delay_due: vec![0; n as usize],
            delays: Vec::new(),
            recorder: None,
        }
    }

    /// Times every MPI call by `net` instead of the default timing (see [`Recorder`]).
    pub(crate) fn set_network(&mut self, net: NetworkModel) {
        let n = self.n as usize;
        self.recorder = Some(Recorder {
            net: NetworkModel { cpu: 1.0, ..net },
            items: (0..n).map(|_| Vec::new()).collect(),
            since_call: vec![0; n],
            envelopes: Envelopes::default(),
            requests: vec![FxHashMap::default(); n],
            instance: None,
            instances: 0,
        });
    }

    /// The delays to inject (see [`super::Delay`]).
    pub(crate) fn set_delays(&mut self, delays: &[super::Delay]) {
        self.delays = delays.to_vec();
    }

    /// Iteration `i` of the main loop begins: the delays of that iteration fall due, each
    /// added to its rank's first computation of the iteration.
    pub(crate) fn start_iteration(&mut self, i: u32) {
        self.delay_due.iter_mut().for_each(|d| *d = 0);
        for d in self.delays.iter().filter(|d| d.iteration == i) {
            let p = self.world_members[d.rank as usize] as usize;
            self.delay_due[p] = self.delay_due[p].saturating_add(d.duration);
        }
    }

    /// Records one emission of the communication structure `name` across `processes`
    /// processes, each with at least `min_events` events in it.
    pub(crate) fn pattern(&mut self, name: &str, processes: u32, min_events: u32) {
        let p = self.patterns.entry(name.to_string()).or_default();
        p.processes = processes;
        p.min_events = min_events;
        p.occurrences += 1;
    }

    /// Number of ranks.
    pub(crate) fn ranks(&self) -> u32 {
        self.n
    }

    /// Sends the header.
    pub(crate) fn header(&mut self, header: &TraceHeader) -> Result<()> {
        self.sink.header(header)
    }

    /// The id of `text` in the string table, defining it first if it is new.
    pub(crate) fn intern(&mut self, text: &str) -> Result<StrId> {
        if let Some(i) = self.strings.iter().position(|s| s == text) {
            return Ok(i as StrId);
        }
        let id = self.strings.len() as StrId;
        self.sink.string(id, text)?;
        self.strings.push(text.to_string());
        Ok(id)
    }

    fn jitter(&mut self, max: u64) -> u64 {
        self.rng.below(max + 1)
    }

    /// Staggers the start clocks over `0..=spread` ns, the earliest at 0 (times count from
    /// the trace's first event).
    pub(crate) fn start_clocks(&mut self, spread: Time) {
        for p in 0..self.n as usize {
            self.clock[p] = self.jitter(spread);
        }
        let earliest = self.clock.iter().copied().min().unwrap_or(0);
        for c in &mut self.clock {
            *c -= earliest;
        }
        if let Some(rec) = &mut self.recorder {
            for (p, &clock) in self.clock.iter().enumerate() {
                rec.since_call[self.perm[p] as usize] = clock;
            }
        }
    }

    /// Position `p` computes for `base` ns plus up to `base / 16` of jitter.
    pub(crate) fn compute(&mut self, p: u32, base: Time) {
        let j = self.jitter(base / 16);
        // A delay is drawn after the jitter, so that a delayed run has the same jitter as
        // the run without it.
        let delay = std::mem::take(&mut self.delay_due[p as usize]);
        self.clock[p as usize] += base + j + delay;
        if let Some(rec) = &mut self.recorder {
            rec.since_call[self.perm[p as usize] as usize] += base + j + delay;
        }
    }

    fn routine(&mut self, p: u32, routine: StrId, enter: bool) -> Result<()> {
        let world = self.perm[p as usize];
        let time = self.clock[p as usize];
        self.clock[p as usize] = time + ROUTINE_STEP;
        let event = RoutineEvent {
            rank: world,
            thread: 0,
            time,
            routine,
            enter,
        };
        if let Some(rec) = &mut self.recorder {
            let w = world as usize;
            rec.items[w].push(Item::Routine {
                offset: rec.since_call[w],
                event,
            });
            rec.since_call[w] += ROUTINE_STEP;
            return Ok(());
        }
        self.send_routine(&event)
    }

    /// Tallies a routine event and hands it to the sink.
    fn send_routine(&mut self, event: &RoutineEvent) -> Result<()> {
        let acc = &mut self.acc[event.rank as usize];
        acc.first = acc.first.min(event.time);
        acc.last = acc.last.max(event.time);
        if event.enter {
            acc.routine_calls += 1;
        }
        self.routine_events += 1;
        self.sink.routine(event)
    }

    /// Position `p` enters `routine`.
    pub(crate) fn enter(&mut self, p: u32, routine: StrId) -> Result<()> {
        self.routine(p, routine, true)
    }

    /// Position `p` leaves `routine`.
    pub(crate) fn leave(&mut self, p: u32, routine: StrId) -> Result<()> {
        self.routine(p, routine, false)
    }

    /// Every position enters `routine`.
    pub(crate) fn enter_all(&mut self, routine: StrId) -> Result<()> {
        for p in 0..self.n {
            self.enter(p, routine)?;
        }
        Ok(())
    }

    /// Every position leaves `routine`.
    pub(crate) fn leave_all(&mut self, routine: StrId) -> Result<()> {
        for p in 0..self.n {
            self.leave(p, routine)?;
        }
        Ok(())
    }

    fn cost(&mut self) -> Time {
        CALL + self.jitter(100)
    }

    /// When a message of `bytes` sent at `sent_at` has arrived.
    pub(crate) fn arrival(sent_at: Time, bytes: u64) -> Time {
        sent_at + LATENCY + bytes / BYTES_PER_NS
    }

    /// Resets the operation buffer for an operation of position `p`.
    fn begin(&mut self, p: u32, kind: OpKind, start: Time, end: Time) {
        self.op.reset(self.perm[p as usize], kind, start, end);
        self.clock[p as usize] = end;
    }

    /// Tallies the operation buffer and hands it to the sink (or records it, with a network
    /// model).
    fn emit(&mut self) -> Result<()> {
        if let Some(rec) = &mut self.recorder {
            let step = rec.step(&self.op);
            let w = self.op.rank as usize;
            let burst = std::mem::take(&mut rec.since_call[w]);
            rec.items[w].push(Item::Call {
                op: self.op.clone(),
                burst,
                step,
            });
            return Ok(());
        }
        let op = std::mem::replace(&mut self.op, Operation::new(0, OpKind::Init, 0, 0));
        let sent = self.send_op(&op);
        self.op = op;
        sent
    }

    /// Tallies an operation and hands it to the sink.
    fn send_op(&mut self, op: &Operation) -> Result<()> {
        let acc = &mut self.acc[op.rank as usize];
        acc.kinds[slot(op.kind)] += 1;
        acc.first = acc.first.min(op.start);
        acc.last = acc.last.max(op.end);
        if op.kind.is_send() {
            acc.sent_messages += 1;
            acc.sent_bytes += op.send_bytes;
            if let Some(dest) = op.dest {
                let pairs = &mut self.pairs[op.rank as usize];
                match pairs.iter_mut().find(|pt| pt.receiver == dest) {
                    Some(pt) => {
                        pt.messages += 1;
                        pt.bytes += op.send_bytes;
                    }
                    None => pairs.push(PairTruth {
                        sender: op.rank,
                        receiver: dest,
                        messages: 1,
                        bytes: op.send_bytes,
                    }),
                }
            }
        }
        if op.kind.is_receive() {
            acc.recv_messages += 1;
            acc.recv_bytes += op.recv_bytes;
        }
        if op.kind.is_collective() {
            acc.coll_send_bytes += op.send_bytes;
            acc.coll_recv_bytes += op.recv_bytes;
        }
        self.sink.operation(op)
    }

    #[allow(clippy::too_many_arguments)]
    fn point_to_point(
        &mut self,
        p: u32,
        kind: OpKind,
        end: Time,
        peer: u32,
        tag: i32,
        bytes: u64,
        datatype: StrId,
    ) {
        let start = self.clock[p as usize];
        self.begin(p, kind, start, end);
        let peer = self.perm[peer as usize];
        let op = &mut self.op;
        op.comm = Some(0);
        op.datatype = Some(datatype);
        if kind.is_send() {
            op.dest = Some(peer);
            op.send_tag = Some(tag);
            op.send_bytes = bytes;
        } else {
            op.source = Some(peer);
            op.recv_tag = Some(tag);
            op.recv_bytes = bytes;
        }
    }

    /// A blocking (eager) `MPI_Send` on `C1` from `p` to `to`; returns its start time.
    pub(crate) fn send(
        &mut self,
        p: u32,
        to: u32,
        tag: i32,
        bytes: u64,
        datatype: StrId,
    ) -> Result<Time> {
        let start = self.clock[p as usize];
        let end = start + self.cost() + bytes / (4 * BYTES_PER_NS);
        self.point_to_point(p, OpKind::Send, end, to, tag, bytes, datatype);
        self.emit()?;
        Ok(start)
    }

    /// A blocking `MPI_Recv` on `C1` by `p` of the message `from` sent at `sent_at`.
    pub(crate) fn recv(
        &mut self,
        p: u32,
        from: u32,
        tag: i32,
        bytes: u64,
        datatype: StrId,
        sent_at: Time,
    ) -> Result<()> {
        let start = self.clock[p as usize];
        let end = (start + self.cost()).max(Self::arrival(sent_at, bytes) + 100);
        self.point_to_point(p, OpKind::Recv, end, from, tag, bytes, datatype);
        self.emit()
    }

    fn next_request(&mut self, p: u32) -> RequestId {
        let r = self.next_request[p as usize];
        self.next_request[p as usize] = r + 1;
        r
    }

    /// An `MPI_Isend` on `C1`; returns its request and start time.
    pub(crate) fn isend(
        &mut self,
        p: u32,
        to: u32,
        tag: i32,
        bytes: u64,
        datatype: StrId,
    ) -> Result<(RequestId, Time)> {
        let start = self.clock[p as usize];
        let end = start + self.cost();
        let request = self.next_request(p);
        self.point_to_point(p, OpKind::Isend, end, to, tag, bytes, datatype);
        self.op.request = Some(request);
        self.emit()?;
        Ok((request, start))
    }

    /// An `MPI_Irecv` on `C1`; returns its request.
    pub(crate) fn irecv(
        &mut self,
        p: u32,
        from: u32,
        tag: i32,
        bytes: u64,
        datatype: StrId,
    ) -> Result<RequestId> {
        let start = self.clock[p as usize];
        let end = start + self.cost();
        let request = self.next_request(p);
        self.point_to_point(p, OpKind::Irecv, end, from, tag, bytes, datatype);
        self.op.request = Some(request);
        self.emit()?;
        Ok(request)
    }

    /// An `MPI_Wait` (one request) or `MPI_Waitall` (several) by `p` that cannot end before
    /// `ready` (the arrival of the awaited messages).
    pub(crate) fn wait(&mut self, p: u32, requests: &[RequestId], ready: Time) -> Result<()> {
        let kind = if requests.len() == 1 {
            OpKind::Wait
        } else {
            OpKind::Waitall
        };
        let start = self.clock[p as usize];
        let end = (start + self.cost()).max(ready + 100);
        self.begin(p, kind, start, end);
        self.op.completes.extend_from_slice(requests);
        self.emit()
    }

    /// A synchronizing environment call of every rank (`MPI_Init`, `MPI_Finalize`).
    pub(crate) fn environment(&mut self, kind: OpKind) -> Result<()> {
        let last = self.clock.iter().copied().max().unwrap_or(0);
        let cost = 20 * CALL;
        for p in 0..self.n {
            let start = self.clock[p as usize];
            let end = last + cost + self.jitter(200);
            self.begin(p, kind, start, end);
            self.emit()?;
        }
        Ok(())
    }

    /// A blocking collective; counts one instance.
    /// A collective over the world communicator (id 0, every process).
    pub(crate) fn world_collective(
        &mut self,
        kind: OpKind,
        root: Option<u32>,
        datatype: StrId,
        sizes: &dyn Fn(u32) -> (u64, u64),
    ) -> Result<()> {
        // The member list is lent out for the call, which borrows the generator mutably.
        let world = std::mem::take(&mut self.world_members);
        let result = self.collective(&Collective {
            kind,
            comm: 0,
            members: &world,
            root,
            datatype,
            sizes,
        });
        self.world_members = world;
        result
    }

    /// `routine { MPI_Allreduce of bytes on the world communicator }` on every process.
    pub(crate) fn world_allreduce(
        &mut self,
        routine: StrId,
        datatype: StrId,
        bytes: u64,
    ) -> Result<()> {
        self.enter_all(routine)?;
        self.world_collective(OpKind::Allreduce, None, datatype, &|_| (bytes, bytes))?;
        self.leave_all(routine)
    }

    pub(crate) fn collective(&mut self, c: &Collective<'_>) -> Result<()> {
        let mut last = 0;
        let mut biggest = 0;
        for (local, &p) in c.members.iter().enumerate() {
            last = last.max(self.clock[p as usize]);
            let (s, r) = (c.sizes)(local as u32);
            biggest = biggest.max(s).max(r);
        }
        let steps = u64::from(usize::BITS - c.members.len().saturating_sub(1).leading_zeros());
        let cost = CALL + LATENCY * steps + biggest / BYTES_PER_NS;
        let root = c
            .root
            .map(|local| self.perm[c.members[local as usize] as usize]);
        if let Some(rec) = &mut self.recorder {
            rec.instances += 1;
        }
        for (local, &p) in c.members.iter().enumerate() {
            if let Some(rec) = &mut self.recorder {
                // `c.members` is in communicator-rank order (the world's by world rank).
                rec.instance = Some((rec.instances, c.members.len() as u32, local as u32));
            }
            let start = self.clock[p as usize];
            let end = last + cost + self.jitter(200);
            let (send_bytes, recv_bytes) = (c.sizes)(local as u32);
            self.begin(p, c.kind, start, end);
            let op = &mut self.op;
            op.comm = Some(c.comm);
            op.datatype = Some(c.datatype);
            op.root = root;
            op.send_bytes = send_bytes;
            op.recv_bytes = recv_bytes;
            self.emit()?;
        }
        if let Some(rec) = &mut self.recorder {
            rec.instance = None;
        }
        self.instances[slot(c.kind)] += 1;
        Ok(())
    }

    /// With a network model: times the recorded program and sends its events, in time order.
    fn play_recorded(&mut self) -> Result<()> {
        let Some(rec) = self.recorder.take() else {
            return Ok(());
        };
        let n = rec.items.len();
        let mut calls: Vec<VecDeque<Call>> = rec
            .items
            .iter()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| match item {
                        Item::Call { op, burst, step } => Some(Call {
                            burst: *burst,
                            duration: op.end.saturating_sub(op.start),
                            step: step.clone(),
                        }),
                        Item::Routine { .. } => None,
                    })
                    .collect()
            })
            .collect();
        let mut times: Vec<Vec<(Time, Time)>> = vec![Vec::new(); n];
        let unresolved = replay(
            &rec.net,
            &vec![0; n],
            &mut Calls(
                |r: usize| Ok(calls[r].pop_front()),
                |r: usize, start, end| {
                    times[r].push((start, end));
                    Ok(())
                },
            ),
        )?;
        if times.iter().flatten().any(|&(_, end)| end == Time::MAX) {
            return Err(crate::Error::Usage(format!(
                "on the network {} the trace would last past 2^64 ns (584 years): check the \
                 parameters' units (L, o and g in ns or with a unit, G in ns per byte)",
                rec.net
            )));
        }
        if unresolved.calls > 0 {
            return Err(crate::Error::Usage(format!(
                "this scenario cannot run on the network {}: {} calls would wait forever \
                 (blocking sends above the eager limit that no receive is posted for)",
                rec.net, unresolved.calls
            )));
        }
        // Every event with its time, sent in time order (a rank's own in its order).
        let mut events: Vec<(Time, usize, usize, Item)> = Vec::new();
        for (w, items) in rec.items.into_iter().enumerate() {
            let mut previous_end: Time = 0;
            let mut timed = times[w].iter();
            for (seq, item) in items.into_iter().enumerate() {
                match item {
                    Item::Routine { offset, mut event } => {
                        event.time = previous_end.saturating_add(offset);
                        events.push((event.time, w, seq, Item::Routine { offset, event }));
                    }
                    Item::Call {
                        mut op,
                        burst,
                        step,
                    } => {
                        let &(start, end) = timed
                            .next()
                            .ok_or_else(|| crate::Error::Usage("the replay lost a call".into()))?;
                        (op.start, op.end) = (start, end);
                        previous_end = end;
                        events.push((start, w, seq, Item::Call { op, burst, step }));
                    }
                }
            }
        }
        events.sort_by_key(|(time, w, seq, _)| (*time, *w, *seq));
        for (_, _, _, item) in events {
            match item {
                Item::Routine { event, .. } => self.send_routine(&event)?,
                Item::Call { op, .. } => self.send_op(&op)?,
            }
        }
        Ok(())
    }

    /// Ends the trace and returns the ground truth tallied on the way.
    pub(crate) fn finish(mut self, mut truth: GroundTruth) -> Result<GroundTruth> {
        self.play_recorded()?;
        self.sink.finish()?;
        let mut ops_by_kind = BTreeMap::new();
        let mut per_rank = Vec::with_capacity(self.acc.len());
        for (rank, a) in self.acc.iter().enumerate() {
            let mut kinds = BTreeMap::new();
            for (i, &count) in a.kinds.iter().enumerate() {
                if count > 0 {
                    kinds.insert(kind_name(i), count);
                    *ops_by_kind.entry(kind_name(i)).or_insert(0) += count;
                }
            }
            per_rank.push(RankTruth {
                rank: rank as Rank,
                operations: a.kinds.iter().sum(),
                ops_by_kind: kinds,
                routine_calls: a.routine_calls,
                p2p_sent_messages: a.sent_messages,
                p2p_sent_bytes: a.sent_bytes,
                p2p_recv_messages: a.recv_messages,
                p2p_recv_bytes: a.recv_bytes,
                coll_send_bytes: a.coll_send_bytes,
                coll_recv_bytes: a.coll_recv_bytes,
                first_time: if a.first == Time::MAX { 0 } else { a.first },
                last_time: a.last,
            });
        }
        let mut pairs: Vec<PairTruth> = self.pairs.into_iter().flatten().collect();
        pairs.sort_by_key(|pt| (pt.sender, pt.receiver));
        truth.operations = per_rank.iter().map(|r| r.operations).sum();
        truth.routine_events = self.routine_events;
        truth.routine_calls = per_rank.iter().map(|r| r.routine_calls).sum();
        truth.events = truth.operations + truth.routine_events;
        truth.strings = self.strings.len() as u32;
        truth.ops_by_kind = ops_by_kind;
        truth.messages = pairs.iter().map(|pt| pt.messages).sum();
        truth.message_bytes = pairs.iter().map(|pt| pt.bytes).sum();
        truth.pairs = pairs;
        truth.collectives = self
            .instances
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (kind_name(i), c))
            .collect();
        truth.first_time = per_rank.iter().map(|r| r.first_time).min().unwrap_or(0);
        truth.last_time = per_rank.iter().map(|r| r.last_time).max().unwrap_or(0);
        truth.per_rank = per_rank;
        truth.permutation = self.perm;
        truth.patterns = self.patterns;
        Ok(truth)
    }
}
