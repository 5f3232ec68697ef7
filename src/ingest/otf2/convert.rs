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
use crate::hash::FxHashMap;
use crate::model::{flags, Anomaly, CommId, OpKind, Operation, Rank, RoutineEvent, StrId, Time};

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
}

/// Definitions every location's conversion reads.
#[derive(Debug, Default)]
pub(crate) struct Context {
    pub regions: FxHashMap<u32, RegionInfo>,
    pub comms: FxHashMap<u32, CommRanks>,
    /// The name of each MPI call kind the trace's regions use.
    pub kind_names: FxHashMap<OpKind, StrId>,
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

impl Context {
    fn region(&self, id: u32) -> Converted<RegionInfo> {
        match self.regions.get(&id) {
            Some(r) => Ok(*r),
            None => fail("unknown region", format!("region {id} is not defined")),
        }
    }

    /// The model communicator and the world rank of `local` on OTF2 communicator `comm`, seen
    /// from world rank `me`.
    fn world(&self, comm: u32, local: u32, me: Rank) -> Converted<(CommId, Rank)> {
        match self.comms.get(&comm) {
            Some(CommRanks::Members { id, members }) => match members.get(local as usize) {
                Some(&r) => Ok((*id, r)),
                None => fail(
                    "rank not in communicator",
                    format!(
                        "rank {local} is not a rank of communicator {comm}, which has {} members",
                        members.len()
                    ),
                ),
            },
            Some(CommRanks::Global { id }) => Ok((*id, local)),
            Some(CommRanks::SelfComm { first_id }) => {
                if local == 0 {
                    Ok((first_id + me, me))
                } else {
                    fail(
                        "rank not in communicator",
                        format!("rank {local} on a self communicator, which has only rank 0"),
                    )
                }
            }
            None => fail(
                "unknown communicator",
                format!("communicator {comm} is not defined (or is an inter-communicator, which mtfdb does not translate)"),
            ),
        }
    }

    fn comm_id(&self, comm: u32, me: Rank) -> Converted<CommId> {
        match self.comms.get(&comm) {
            Some(CommRanks::Members { id, .. }) | Some(CommRanks::Global { id }) => Ok(*id),
            Some(CommRanks::SelfComm { first_id }) => Ok(first_id + me),
            None => fail(
                "unknown communicator",
                format!("communicator {comm} is not defined (or is an inter-communicator, which mtfdb does not translate)"),
            ),
        }
    }
}

/// An item ready for the sink, with the file offset of the record it started at.
#[derive(Debug)]
pub(crate) enum Item {
    Op(Operation),
    Routine(RoutineEvent),
    Anomaly(Anomaly),
}

impl Item {
    /// The time the item is ordered by.
    pub fn time(&self) -> Time {
        match self {
            Item::Op(op) => op.start,
            Item::Routine(r) => r.time,
            Item::Anomaly(_) => 0,
        }
    }
}

struct Frame {
    region: u32,
    /// For an MPI region: the output place reserved for its operation, and the operation.
    op: Option<(u64, Operation)>,
}

/// The conversion state of one location.
pub(crate) struct LocationConverter {
    rank: Rank,
    thread: u32,
    stack: Vec<Frame>,
    /// Items in start order; `None` is a place reserved for an operation not yet complete.
    held: VecDeque<Option<(Item, u64)>>,
    /// Sequence number of `held[0]`.
    held_base: u64,
    /// Operations waiting for their completion event, by request id.
    deferred: FxHashMap<u64, (u64, Operation)>,
    /// Items ready to leave, with the record offset each started at.
    pub ready: VecDeque<(Item, u64)>,
    /// The program name of a `ProgramBegin` record.
    pub program: Option<u32>,
    last_time: Time,
}

impl LocationConverter {
    pub fn new(rank: Rank, thread: u32) -> LocationConverter {
        LocationConverter {
            rank,
            thread,
            stack: Vec::new(),
            held: VecDeque::new(),
            held_base: 0,
            deferred: FxHashMap::default(),
            ready: VecDeque::new(),
            program: None,
            last_time: 0,
        }
    }

    /// The request id as the model keeps it: unique per process, so threads' ids are kept apart.
    fn request(&self, id: u64) -> u64 {
        if self.thread == 0 {
            id
        } else {
            id ^ ((self.thread as u64) << 56)
        }
    }

    fn reserve(&mut self) -> u64 {
        self.held.push_back(None);
        self.held_base + self.held.len() as u64 - 1
    }

    fn fill(&mut self, seq: u64, item: Item, offset: u64) {
        self.held[(seq - self.held_base) as usize] = Some((item, offset));
        while let Some(Some(_)) = self.held.front() {
            let done = self.held.pop_front().flatten().expect("checked");
            self.ready.push_back(done);
            self.held_base += 1;
        }
    }

    fn emit(&mut self, item: Item, offset: u64) {
        let seq = self.reserve();
        self.fill(seq, item, offset);
    }

    /// The innermost open MPI operation, or a new one of `kind` made for an MPI event found
    /// outside any MPI region (returned with `true`, to be placed right away).
    fn current_op(&mut self, kind: OpKind, time: Time) -> (&mut Operation, bool) {
        let open = self.stack.iter().rposition(|f| f.op.is_some());
        match open {
            Some(i) => (&mut self.stack[i].op.as_mut().expect("MPI frame").1, false),
            None => {
                let mut op = Operation::new(self.rank, kind, time, time);
                op.thread = self.thread;
                self.stack.push(Frame {
                    region: u32::MAX,
                    op: Some((u64::MAX, op)),
                });
                let f = self.stack.last_mut().expect("just pushed");
                (&mut f.op.as_mut().expect("MPI frame").1, true)
            }
        }
    }

    /// Places a standalone operation made by [`LocationConverter::current_op`].
    fn place_standalone(&mut self, offset: u64) {
        if let Some(Frame {
            op: Some((_, op)), ..
        }) = self.stack.pop()
        {
            self.emit(Item::Op(op), offset);
        }
    }

    /// Converts one event at `time` (ns) read at file `offset`.
    pub fn event(&mut self, ctx: &Context, event: Event, time: Time, offset: u64) -> Converted<()> {
        self.last_time = time;
        let me = self.rank;
        match event {
            Event::Enter(region) => {
                let info = ctx.region(region)?;
                match info.mpi {
                    Some(kind) => {
                        let seq = self.reserve();
                        let mut op = Operation::new(self.rank, kind, time, time);
                        op.thread = self.thread;
                        self.stack.push(Frame {
                            region,
                            op: Some((seq, op)),
                        });
                    }
                    None => {
                        self.stack.push(Frame { region, op: None });
                        self.emit(self.routine(info.name, time, true), offset);
                    }
                }
            }
            Event::Leave(region) => {
                let frame = match self.stack.pop() {
                    Some(f) if f.region == region => f,
                    Some(f) => return fail(
                        "unbalanced leave",
                        format!(
                            "Leave of region {region} while region {} is the innermost one entered",
                            f.region
                        ),
                    ),
                    None => {
                        return fail(
                            "unbalanced leave",
                            format!("Leave of region {region} with no region entered"),
                        )
                    }
                };
                match frame.op {
                    Some((seq, mut op)) => {
                        op.end = time;
                        let awaiting = op.request.filter(|_| awaits_completion(&op));
                        match awaiting {
                            Some(request) => {
                                self.deferred.insert(request, (seq, op));
                            }
                            None => self.fill(seq, Item::Op(op), offset),
                        }
                    }
                    None => {
                        let info = ctx.region(region)?;
                        self.emit(self.routine(info.name, time, false), offset);
                    }
                }
            }
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
                let (comm, dest) = ctx.world(comm, peer, me)?;
                let request = match event {
                    Event::Isend { request, .. } => Some(self.request(request)),
                    _ => None,
                };
                let kind = if request.is_some() {
                    OpKind::Isend
                } else {
                    OpKind::Send
                };
                let (op, standalone) = self.current_op(kind, time);
                op.comm = Some(comm);
                op.dest = Some(dest);
                op.send_tag = Some(tag as i32);
                op.send_bytes = bytes;
                if request.is_some() {
                    op.request = request;
                }
                if standalone {
                    self.place_standalone(offset);
                }
            }
            Event::Recv {
                peer,
                comm,
                tag,
                bytes,
            } => {
                let (op, standalone) = self.current_op(OpKind::Recv, time);
                set_receive(op, ctx, comm, peer, tag, bytes, me)?;
                if standalone {
                    self.place_standalone(offset);
                }
            }
            Event::IrecvRequest(request) => {
                let request = self.request(request);
                let (op, standalone) = self.current_op(OpKind::Irecv, time);
                op.request = Some(request);
                if standalone {
                    // A request outside MPI_Irecv: keep the operation until its completion.
                    if let Some(Frame {
                        op: Some((_, op)), ..
                    }) = self.stack.pop()
                    {
                        let seq = self.reserve();
                        self.deferred.insert(request, (seq, op));
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
                if let Some((seq, mut irecv)) = self.deferred.remove(&request) {
                    set_receive(&mut irecv, ctx, comm, peer, tag, bytes, me)?;
                    self.fill(seq, Item::Op(irecv), offset);
                    self.complete(request, time, offset);
                } else if let Some(op) = self.open_op_with_request(request) {
                    // Completed inside the MPI_Irecv region itself.
                    set_receive(op, ctx, comm, peer, tag, bytes, me)?;
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
            Event::RequestTest(_) => {
                let (op, standalone) = self.current_op(OpKind::Test, time);
                op.flags |= flags::NOT_COMPLETED;
                if standalone {
                    self.place_standalone(offset);
                }
            }
            Event::RequestCancelled(request) => {
                let request = self.request(request);
                if let Some((seq, irecv)) = self.deferred.remove(&request) {
                    self.fill(seq, Item::Op(unresolved(ctx, irecv)), offset);
                }
                self.complete(request, time, offset);
            }
            Event::CollectiveBegin => {}
            Event::CollectiveEnd {
                comm,
                root,
                sent,
                received,
                ..
            } => {
                let (op, standalone) = self.current_op(OpKind::Barrier, time);
                set_collective(op, ctx, comm, root, sent, received, me)?;
                if standalone {
                    self.place_standalone(offset);
                }
            }
            Event::CollectiveRequest(request) => {
                let request = self.request(request);
                let (op, standalone) = self.current_op(OpKind::Ibarrier, time);
                op.request = Some(request);
                if standalone {
                    self.place_standalone(offset);
                }
            }
            Event::CollectiveComplete {
                comm,
                root,
                sent,
                received,
                request,
                ..
            } => {
                let request = self.request(request);
                if let Some((seq, mut coll)) = self.deferred.remove(&request) {
                    set_collective(&mut coll, ctx, comm, root, sent, received, me)?;
                    self.fill(seq, Item::Op(coll), offset);
                } else if let Some(op) = self.open_op_with_request(request) {
                    set_collective(op, ctx, comm, root, sent, received, me)?;
                }
                self.complete(request, time, offset);
            }
            Event::ProgramBegin { name } => self.program = Some(name),
            Event::ProgramEnd | Event::Measurement { .. } | Event::Other => {}
        }
        Ok(())
    }

    fn open_op_with_request(&mut self, request: u64) -> Option<&mut Operation> {
        self.stack
            .iter_mut()
            .rev()
            .filter_map(|f| f.op.as_mut().map(|o| &mut o.1))
            .find(|op| op.request == Some(request))
    }

    /// Records that the innermost MPI call completed `request` (a Wait or Test variant).
    fn complete(&mut self, request: u64, time: Time, offset: u64) {
        let (op, standalone) = self.current_op(OpKind::Wait, time);
        op.completes.push(request);
        if standalone {
            self.place_standalone(offset);
        }
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

    /// Closes what the location left open at its end: MPI calls never left end at the last
    /// timestamp (and are reported), operations never completed are placed as they are.
    /// Routines never left are closed by the importer, which reports them too.
    pub fn finish(&mut self, ctx: &Context, offset: u64) {
        let last = self.last_time;
        while let Some(frame) = self.stack.pop() {
            if let Some((seq, mut op)) = frame.op {
                op.end = last;
                let routine = ctx.regions.get(&frame.region).map_or(0, |r| r.name);
                self.ready.push_back((
                    Item::Anomaly(Anomaly::UnclosedRoutine {
                        rank: self.rank,
                        routine,
                    }),
                    offset,
                ));
                if seq == u64::MAX {
                    self.emit(Item::Op(op), offset);
                } else if let Some(request) = op.request.filter(|_| awaits_completion(&op)) {
                    self.deferred.insert(request, (seq, op));
                } else {
                    self.fill(seq, Item::Op(op), offset);
                }
            }
        }
        let mut left: Vec<_> = self.deferred.drain().collect();
        left.sort_by_key(|(_, (seq, _))| *seq);
        for (_, (seq, op)) in left {
            self.fill(seq, Item::Op(unresolved(ctx, op)), offset);
        }
    }
}

/// Whether `op` still waits for the completion record that carries its envelope.
fn awaits_completion(op: &Operation) -> bool {
    (op.kind.is_receive() && op.source.is_none() && op.flags & flags::ANY_SOURCE == 0)
        || (op.kind.is_collective() && op.comm.is_none())
}

/// An operation whose completion never came: a receive of unknown source (an unresolved
/// wildcard to the matcher); a collective without a communicator is kept as a plain call of
/// the same name.
fn unresolved(ctx: &Context, mut op: Operation) -> Operation {
    if op.kind.is_receive() && op.source.is_none() {
        op.flags |= flags::ANY_SOURCE;
    }
    if op.kind.is_collective() && op.comm.is_none() {
        if let Some(&name) = ctx.kind_names.get(&op.kind) {
            op.kind = OpKind::Other(name);
            op.root = None;
        }
    }
    op
}

fn set_receive(
    op: &mut Operation,
    ctx: &Context,
    comm: u32,
    peer: u32,
    tag: u32,
    bytes: u64,
    me: Rank,
) -> Converted<()> {
    op.comm = Some(ctx.comm_id(comm, me)?);
    if peer == u32::MAX {
        op.flags |= flags::ANY_SOURCE;
    } else {
        op.source = Some(ctx.world(comm, peer, me)?.1);
    }
    op.recv_tag = Some(tag as i32);
    op.recv_bytes = bytes;
    Ok(())
}

/// OTF2's root values that name no process: none, self, this group (inter-communicators).
const FIRST_SPECIAL_ROOT: u32 = u32::MAX - 2;

fn set_collective(
    op: &mut Operation,
    ctx: &Context,
    comm: u32,
    root: u32,
    sent: u64,
    received: u64,
    me: Rank,
) -> Converted<()> {
    op.comm = Some(ctx.comm_id(comm, me)?);
    if op.kind.is_rooted() && root < FIRST_SPECIAL_ROOT {
        op.root = Some(ctx.world(comm, root, me)?.1);
    }
    op.send_bytes = sent;
    op.recv_bytes = received;
    Ok(())
}
