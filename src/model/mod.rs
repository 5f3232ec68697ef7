//! The MTF metamodel as plain data (digest `SEEDS-THESIS.md` §1.2, Appendix A of the MTF paper).
//!
//! The metamodel's classes map onto these types:
//!
//! | metamodel class | here |
//! |---|---|
//! | Scenario, Trace | [`TraceHeader`] (scenario description, trace name, comments) |
//! | ProcessTrace | the operations and routine calls of one [`Process`] |
//! | MsgTrace | the trace's [`Message`]s and [`CollectiveInstance`]s |
//! | Processor, Process, Communicator | [`Processor`], [`Process`], [`Communicator`] |
//! | TraceableUnit, RoutineCall | [`RoutineCall`] (and [`RoutineEvent`] for enter/leave) |
//! | MPOperation and its subclasses | [`Operation`] with an [`OpKind`] |
//! | CollectiveData | the `send_bytes`/`recv_bytes`/`root` fields of a collective [`Operation`] |
//! | Message, MessageLink | [`Message`] (one per matched send/receive pair; the link is its two op ids) |
//! | Wait/Test links | [`RequestLink`] |
//! | TracePattern, CommPattern, RoutinePattern, PatternOccurrence | [`TracePattern`], [`PatternOccurrence`] |
//! | Edge (compaction DAG) | [`Edge`], [`EdgeType`] |
//!
//! Conventions: ranks are world ranks (`MPI_COMM_WORLD`), counted from 0; times are integer
//! nanoseconds; sizes are bytes.

mod kind;
mod metric;

pub use kind::{OpClass, OpKind, OTHER_CODE_BASE};
pub use metric::{Metric, MetricValues};

use serde::{Deserialize, Serialize};

/// A world rank (rank in `MPI_COMM_WORLD`), counted from 0.
pub type Rank = u32;

/// Sorted ranks as compact ranges: `0-3,5,7-8`.
///
/// ```
/// assert_eq!(mtfdb::model::rank_ranges(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
/// ```
pub fn rank_ranges(ranks: &[Rank]) -> String {
    let parts: Vec<String> = rank_runs(ranks).into_iter().map(run_text).collect();
    parts.join(",")
}

/// Sorted ranks as runs of consecutive ranks, `(first, last)`.
///
/// ```
/// assert_eq!(mtfdb::model::rank_runs(&[0, 1, 2, 5, 7, 8]), vec![(0, 2), (5, 5), (7, 8)]);
/// ```
pub fn rank_runs(ranks: &[Rank]) -> Vec<(Rank, Rank)> {
    let mut runs: Vec<(Rank, Rank)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(r) => last.1 = r,
            _ => runs.push((r, r)),
        }
    }
    runs
}

/// One run as [`rank_ranges`] writes it: `5`, or `0-3`.
pub fn run_text((first, last): (Rank, Rank)) -> String {
    if first == last {
        first.to_string()
    } else {
        format!("{first}-{last}")
    }
}
/// A communicator id, as declared by the trace.
pub type CommId = u32;
/// A time in integer nanoseconds.
pub type Time = u64;
/// An id in the trace's string table (datatype names, routine names, other MPI call names).
pub type StrId = u32;
/// A dense operation id within one trace.
pub type OpId = u64;
/// A request handle as recorded by the tracer (unique per rank while in flight).
pub type RequestId = u64;

/// Tag value recorded for a receive posted with `MPI_ANY_TAG` whose actual tag is unknown.
pub const ANY_TAG: i32 = -1;

/// A machine (node) that runs processes: the metamodel's `Processor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Processor {
    /// The processor's id, as declared.
    pub id: u32,
    /// The machine or node name.
    pub name: String,
}

/// An MPI process: the metamodel's `Process`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// The world rank.
    pub rank: Rank,
    /// A human-readable name (`P0`, or the tracer's location name).
    pub name: String,
    /// The processor (node) it ran on, if known.
    pub processor: Option<u32>,
}

/// An MPI communicator with its members as world ranks: the metamodel's `Communicator`.
/// The i-th member is the process with rank i *within this communicator*.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Communicator {
    /// The communicator's id, as declared.
    pub id: CommId,
    /// Its name (`C1`, `MPI_COMM_WORLD`, …).
    pub name: String,
    /// World ranks of its members, in communicator-rank order.
    pub members: Vec<Rank>,
}

impl Communicator {
    /// The world rank of the process whose rank in this communicator is `local`.
    pub fn world_rank(&self, local: u32) -> Option<Rank> {
        self.members.get(local as usize).copied()
    }

    /// Whether a world rank is a member.
    pub fn contains(&self, rank: Rank) -> bool {
        self.members.contains(&rank)
    }
}

/// Everything declared before the events: the metamodel's Scenario and Trace with their
/// processors, processes and communicators.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// The scenario description (program, input data, …).
    pub scenario: String,
    /// The trace's name as recorded in the file.
    pub trace_name: String,
    /// Free-form comments.
    pub comments: String,
    /// Processors (nodes).
    pub processors: Vec<Processor>,
    /// Processes, one per world rank, ordered by rank and numbered 0..n.
    pub processes: Vec<Process>,
    /// Communicators.
    pub communicators: Vec<Communicator>,
    /// Locations that are not an MPI rank's main thread: other threads, accelerator streams,
    /// metric readers, processes outside MPI. Sources report them at the end of the trace
    /// ([`crate::ingest::EventSink::locations`]), with what they recorded.
    pub locations: Vec<Location>,
    /// The source recorded the order of events but not their times (FACT collects traces
    /// so). Each location's events then carry their rank in the location's sequence (0, 1,
    /// 2, …) as their times, which keeps their order for loops, patterns and topology; the
    /// query layer shows every time as null and refuses what needs real times (phases, wait
    /// states, the critical path, replay).
    #[serde(default)]
    pub untimed: bool,
}

impl TraceHeader {
    /// A header of `n` processes `P0`…, on no declared processor, and one communicator of all
    /// of them, id 0, called `world_name`: what code that produces events often starts with.
    ///
    /// ```
    /// let h = mtfdb::model::TraceHeader::world(4, "MPI_COMM_WORLD");
    /// assert_eq!(h.processes[3].name, "P3");
    /// assert_eq!(h.communicators[0].members, vec![0, 1, 2, 3]);
    /// ```
    pub fn world(n: u32, world_name: &str) -> TraceHeader {
        TraceHeader {
            processes: (0..n)
                .map(|rank| Process {
                    rank,
                    name: format!("P{rank}"),
                    processor: None,
                })
                .collect(),
            communicators: vec![Communicator {
                id: 0,
                name: world_name.to_string(),
                members: (0..n).collect(),
            }],
            ..TraceHeader::default()
        }
    }

    /// The communicator with this id.
    pub fn communicator(&self, id: CommId) -> Option<&Communicator> {
        self.communicators.iter().find(|c| c.id == id)
    }
}

/// What a non-MPI [`Location`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LocationKind {
    /// A CPU thread of a process (OpenMP, Pthreads, a second thread of an MPI rank).
    CpuThread,
    /// An accelerator stream or queue (CUDA, HIP, OpenCL, offload devices).
    Accelerator,
    /// A location that only records metrics (hardware counters, uncore readers).
    Metric,
    /// A process that is not an MPI rank (a trace with no MPI, another application).
    Process,
    /// Anything else the source declares.
    Other,
}

impl LocationKind {
    /// Every kind, with the token the exchange formats write for it.
    pub const TOKENS: [(LocationKind, &'static str); 5] = [
        (LocationKind::CpuThread, "cpu-thread"),
        (LocationKind::Accelerator, "accelerator"),
        (LocationKind::Metric, "metric"),
        (LocationKind::Process, "process"),
        (LocationKind::Other, "other"),
    ];

    /// The token the exchange formats write (`cpu-thread`, `accelerator`, …).
    pub fn token(self) -> &'static str {
        Self::TOKENS
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("other", |(_, t)| t)
    }

    /// The kind a token names.
    pub fn from_token(token: &str) -> Option<LocationKind> {
        Self::TOKENS
            .iter()
            .find(|(_, t)| *t == token)
            .map(|(k, _)| *k)
    }

    /// A word a person reads in `info`: `CPU thread`, `accelerator`, ….
    pub fn name(self) -> &'static str {
        match self {
            LocationKind::CpuThread => "CPU thread",
            LocationKind::Accelerator => "accelerator",
            LocationKind::Metric => "metric",
            LocationKind::Process => "non-MPI process",
            LocationKind::Other => "other",
        }
    }
}

/// A location of the source that is not an MPI rank's main thread: kept, listed and counted,
/// never given a rank of its own.
///
/// ```
/// use mtfdb::model::{Location, LocationKind};
/// let stream = Location::new("CUDA[0:13]", LocationKind::Accelerator);
/// assert_eq!(stream.rank, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    /// The source's name for it (`CUDA[0:13]`, `OMP thread 3`, `uncore reader 2`).
    pub name: String,
    /// What it is.
    pub kind: LocationKind,
    /// The source's name of the group it belongs to (a process, a device, an application).
    pub group: String,
    /// The MPI rank whose process it belongs to, if any.
    pub rank: Option<Rank>,
    /// Its thread number within that rank, when its routine calls are kept under the rank.
    pub thread: Option<u32>,
    /// Region (routine or kernel) entries it recorded.
    pub regions: u64,
    /// Event records it recorded, of any kind.
    pub events: u64,
}

impl Location {
    /// A location of `kind` named `name`, in no group, with nothing recorded yet.
    pub fn new(name: &str, kind: LocationKind) -> Location {
        Location {
            name: name.to_string(),
            kind,
            group: String::new(),
            rank: None,
            thread: None,
            regions: 0,
            events: 0,
        }
    }
}

/// Flags of an [`Operation`].
pub mod flags {
    /// The receive (or probe) was posted with `MPI_ANY_SOURCE`; `source` is the actual source.
    pub const ANY_SOURCE: u8 = 1;
    /// The receive (or probe) was posted with `MPI_ANY_TAG`; `recv_tag` is the actual tag.
    pub const ANY_TAG: u8 = 2;
    /// A Test or Probe that found nothing (the metamodel's `Flag` = false).
    pub const NOT_COMPLETED: u8 = 4;
    /// An MPI call the source recorded without the records that say what it did (peer,
    /// communicator, sizes): kept as a call of its name (`OpKind::Other`), outside matching.
    /// Also a send, receive or collective whose communicator, peer or root broke a rule and
    /// was dropped ([`super::Rule`]): it may lack them, and is never matched.
    pub const WITHOUT_RECORDS: u8 = 8;
    /// The receive's `recv_bytes` is the buffer it posted (count × datatype size, as DUMPI
    /// records it), not the length it received: a shorter message is legal, a longer one is
    /// truncation.
    pub const RECV_CAPACITY: u8 = 16;
}

/// One MPI call of one process: the metamodel's `MPOperation` with the fields of all its
/// subclasses. Fields that a kind does not use are `None` / 0.
///
/// Point-to-point fields are split by direction so that `MPI_Sendrecv` fits: a send uses
/// `dest`, `send_tag`, `send_bytes`; a receive uses `source`, `recv_tag`, `recv_bytes`.
/// A collective uses `root`, `send_bytes` and `recv_bytes` (the metamodel's `CollectiveData`).
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// World rank of the process that performed it.
    pub rank: Rank,
    /// The thread (OTF2 location) within the process, 0 for single-threaded sources.
    pub thread: u32,
    /// Start time (ns).
    pub start: Time,
    /// End time (ns), at least `start`.
    pub end: Time,
    /// What the call is.
    pub kind: OpKind,
    /// The communicator it ran on.
    pub comm: Option<CommId>,
    /// Destination world rank of a send.
    pub dest: Option<Rank>,
    /// Source world rank of a receive or probe (the actual source for `MPI_ANY_SOURCE`).
    pub source: Option<Rank>,
    /// Tag of a send.
    pub send_tag: Option<i32>,
    /// Tag of a receive or probe (the actual tag for `MPI_ANY_TAG`).
    pub recv_tag: Option<i32>,
    /// Bytes sent (point-to-point payload, or a collective's send size).
    pub send_bytes: u64,
    /// Bytes received (point-to-point payload, or a collective's receive size).
    pub recv_bytes: u64,
    /// The datatype name, interned.
    pub datatype: Option<StrId>,
    /// World rank of a rooted collective's root.
    pub root: Option<Rank>,
    /// The request a non-blocking call created.
    pub request: Option<RequestId>,
    /// The requests a Wait/Test variant completed.
    pub completes: Vec<RequestId>,
    /// [`flags`] bits.
    pub flags: u8,
    /// Nesting depth in the routine call tree (0 when the call is at top level).
    pub depth: u16,
}

impl Operation {
    /// An operation of `kind` by `rank` over `[start, end]` with every other field empty.
    pub fn new(rank: Rank, kind: OpKind, start: Time, end: Time) -> Operation {
        Operation {
            rank,
            thread: 0,
            start,
            end,
            kind,
            comm: None,
            dest: None,
            source: None,
            send_tag: None,
            recv_tag: None,
            send_bytes: 0,
            recv_bytes: 0,
            datatype: None,
            root: None,
            request: None,
            completes: Vec::new(),
            flags: 0,
            depth: 0,
        }
    }
}

impl Clone for Operation {
    fn clone(&self) -> Operation {
        let mut op = Operation::new(self.rank, self.kind, self.start, self.end);
        op.clone_from(self);
        op
    }

    /// Copies field by field, reusing the allocation of `completes` (sources and the import
    /// pipeline copy millions of operations into reused buffers).
    fn clone_from(&mut self, o: &Operation) {
        self.rank = o.rank;
        self.thread = o.thread;
        self.start = o.start;
        self.end = o.end;
        self.kind = o.kind;
        self.comm = o.comm;
        self.dest = o.dest;
        self.source = o.source;
        self.send_tag = o.send_tag;
        self.recv_tag = o.recv_tag;
        self.send_bytes = o.send_bytes;
        self.recv_bytes = o.recv_bytes;
        self.datatype = o.datatype;
        self.root = o.root;
        self.request = o.request;
        self.completes.clone_from(&o.completes);
        self.flags = o.flags;
        self.depth = o.depth;
    }
}

impl Operation {
    /// Makes this an operation of `kind` by `rank` over `[start, end]` with every other
    /// field empty, keeping the allocation of `completes` (for sources that reuse one buffer).
    pub fn reset(&mut self, rank: Rank, kind: OpKind, start: Time, end: Time) {
        let mut completes = std::mem::take(&mut self.completes);
        completes.clear();
        *self = Operation {
            completes,
            ..Operation::new(rank, kind, start, end)
        };
    }
}

/// Entering or leaving a (user or MPI) routine; the source of routine calls and of the
/// nesting depth of operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineEvent {
    /// World rank.
    pub rank: Rank,
    /// Thread within the process.
    pub thread: u32,
    /// Time (ns).
    pub time: Time,
    /// The routine's interned name.
    pub routine: StrId,
    /// True for enter, false for leave.
    pub enter: bool,
}

/// A completed routine call: the metamodel's `RoutineCall` (routineCallName, nestingLevel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineCall {
    /// World rank.
    pub rank: Rank,
    /// Thread within the process.
    pub thread: u32,
    /// The routine's interned name.
    pub routine: StrId,
    /// Nesting level: 0 for an outermost call.
    pub depth: u16,
    /// Enter time (ns).
    pub start: Time,
    /// Leave time (ns).
    pub end: Time,
}

/// A matched point-to-point message: the metamodel's `Message` merged from a send and the
/// receive that matched it (its `MessageLink` is the pair of op ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Sender world rank.
    pub sender: Rank,
    /// Receiver world rank.
    pub receiver: Rank,
    /// Communicator.
    pub comm: CommId,
    /// Tag.
    pub tag: i32,
    /// Payload in bytes (as sent).
    pub bytes: u64,
    /// Start time of the send operation.
    pub send_time: Time,
    /// End time of the receive operation.
    pub recv_time: Time,
    /// The sending operation.
    pub send_op: OpId,
    /// The receiving operation.
    pub recv_op: OpId,
}

/// A non-blocking operation linked to the Wait/Test that completed its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestLink {
    /// The operation that created the request (Isend, Irecv, Ibcast, …).
    pub request_op: OpId,
    /// The Wait/Test variant that completed it.
    pub completion_op: OpId,
}

/// One instance of a collective: the i-th call of the same operation on the same communicator
/// by each of its members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectiveInstance {
    /// The collective as called (`Ibcast` instances are kept apart from `Bcast` ones).
    pub kind: OpKind,
    /// The communicator.
    pub comm: CommId,
    /// The root's world rank, for rooted collectives.
    pub root: Option<Rank>,
    /// The member operations, in the order they were seen.
    pub ops: Vec<OpId>,
    /// Earliest start among the members.
    pub start: Time,
    /// Latest end among the members.
    pub end: Time,
    /// Total bytes sent by the members (sum of their `send_bytes`).
    pub send_bytes: u64,
    /// Total bytes received by the members.
    pub recv_bytes: u64,
}

/// The kind of a compaction-DAG edge (metamodel class `Edge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EdgeType {
    /// A plain sequence edge.
    Seq,
    /// A collapsed recursion chain.
    Rec,
    /// A repeated sequence of several siblings.
    Fseq,
}

/// An edge of the compacted call tree: the parent's `repeat` instances of `children`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    /// What the edge collapses.
    pub edge_type: EdgeType,
    /// How many callee instances the edge stands for.
    pub repeat: u32,
    /// The children's node ids (more than one only for `Fseq`).
    pub children: Vec<u32>,
}

/// Whether a pattern is made of communication (messages, collectives) or routine calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatternKind {
    /// `CommPattern`: references messages and collective data only.
    Communication,
    /// `RoutinePattern`: references routine calls only.
    Routine,
}

/// A labelled pattern of a trace (metamodel `TracePattern`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracePattern {
    /// Pattern id within its trace.
    pub id: u32,
    /// Communication or routine pattern.
    pub kind: PatternKind,
    /// The label an engineer gave it, or the detector's rendering of its event sequence.
    pub description: String,
    /// Its occurrences.
    pub occurrences: Vec<PatternOccurrence>,
}

/// One occurrence of a pattern: the traceable units (operations) it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternOccurrence {
    /// The operations of the occurrence.
    pub ops: Vec<OpId>,
}

/// Something a real trace does that MPI's rules say should not happen, but that tracers do
/// record (a truncated run, a lost event). Anomalies are imported, counted and listed; they
/// never reject a trace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Anomaly {
    /// A send with no matching receive by the end of the trace.
    UnmatchedSend {
        /// The send operation.
        op: OpId,
        /// Sender.
        rank: Rank,
        /// Intended receiver.
        dest: Rank,
        /// Communicator.
        comm: CommId,
        /// Tag.
        tag: i32,
    },
    /// A receive with no matching send by the end of the trace.
    UnmatchedReceive {
        /// The receive operation.
        op: OpId,
        /// Receiver.
        rank: Rank,
        /// Source it received from (or expected to).
        source: Rank,
        /// Communicator.
        comm: CommId,
        /// Tag.
        tag: i32,
    },
    /// A non-blocking operation whose request no Wait/Test completed.
    RequestNeverCompleted {
        /// The operation that created the request.
        op: OpId,
        /// Its process.
        rank: Rank,
        /// The request id.
        request: RequestId,
    },
    /// A Wait/Test that names a request no earlier operation of its process created.
    UnknownRequest {
        /// The Wait/Test.
        op: OpId,
        /// Its process.
        rank: Rank,
        /// The request id.
        request: RequestId,
    },
    /// A collective instance that not every member of the communicator took part in.
    IncompleteCollective {
        /// The collective.
        kind: OpKind,
        /// The communicator.
        comm: CommId,
        /// Members that called it.
        present: u32,
        /// Members of the communicator.
        expected: u32,
    },
    /// A Wait/Test that started before the operation whose request it completed
    /// (Table 3.1, rule 5).
    WaitBeforeRequest {
        /// The Wait/Test.
        op: OpId,
        /// The operation that created the request.
        request_op: OpId,
        /// Their process.
        rank: Rank,
    },
    /// A wildcard receive whose actual source or tag the tracer did not record: it cannot
    /// be matched to a send.
    UnresolvedWildcard {
        /// The receive.
        op: OpId,
        /// Its process.
        rank: Rank,
    },
    /// A member of a collective instance named a different root than the first member did.
    RootMismatch {
        /// The member's operation.
        op: OpId,
        /// Its process.
        rank: Rank,
        /// The collective.
        kind: OpKind,
        /// The communicator.
        comm: CommId,
    },
    /// A process that never called `MPI_Finalize` (nor `MPI_Abort`).
    MissingFinalize {
        /// The process.
        rank: Rank,
    },
    /// A routine entered but never left by the end of its process; closed at its last time.
    UnclosedRoutine {
        /// The process.
        rank: Rank,
        /// The routine's interned name.
        routine: StrId,
    },
    /// A routine left while another, entered after it, was still open (crossed leaves, or a
    /// tasking runtime's leaves that are not last-in-first-out). The routines entered after
    /// it are closed at this time.
    CrossedLeave {
        /// The process.
        rank: Rank,
        /// Its thread.
        thread: u32,
        /// When the leave happened (ns).
        time: Time,
        /// The routine left.
        routine: StrId,
        /// The innermost routine open at the time, closed early.
        innermost: StrId,
    },
    /// A routine left that was never entered (or whose entry was not recorded).
    LeaveWithoutEnter {
        /// The process.
        rank: Rank,
        /// Its thread.
        thread: u32,
        /// When (ns).
        time: Time,
        /// The routine left.
        routine: StrId,
    },
    /// An MPI call recorded only as a region, without the MPI records that say what it did
    /// (older Score-P's non-blocking collectives, say): kept as a call of its name, with no
    /// communicator, outside message and collective matching.
    CallWithoutRecords {
        /// The call.
        op: OpId,
        /// Its process.
        rank: Rank,
        /// The call's interned name.
        name: StrId,
    },
    /// A receive whose recorded length differs from the length of the send it matched.
    LengthMismatch {
        /// The send.
        send_op: OpId,
        /// The receive.
        recv_op: OpId,
        /// Bytes the send recorded (the message keeps these).
        sent: u64,
        /// Bytes the receive recorded.
        received: u64,
    },
    /// A matched send and receive that recorded different datatypes (metamodel Table 3.1: the
    /// pair's datatypes agree). The message is kept.
    DatatypeMismatch {
        /// The send.
        send_op: OpId,
        /// The receive.
        recv_op: OpId,
        /// The send's datatype (interned name).
        sent: StrId,
        /// The receive's datatype.
        received: StrId,
    },
    /// MPI calls on a location before its `MPI_Init` (Table 3.1: no MPI call before Init;
    /// `MPI_Initialized`, `MPI_Finalized` and `MPI_Get_version` may be). One per location.
    CallBeforeInit {
        /// The first such call.
        op: OpId,
        /// Its process.
        rank: Rank,
        /// How many calls came before Init.
        calls: u64,
    },
    /// MPI calls on a location after its `MPI_Finalize` (Table 3.1: no MPI call after
    /// Finalize; the same exceptions). One per location.
    CallAfterFinalize {
        /// The first such call.
        op: OpId,
        /// Its process.
        rank: Rank,
        /// How many calls came after Finalize.
        calls: u64,
    },
    /// A member of a collective instance that contributed another number of bytes than the
    /// instance's first member, in a collective where every member contributes the same
    /// (Table 3.1: the members' signatures agree). Kind and communicator define the
    /// instance; a differing root is a [`Anomaly::RootMismatch`].
    CollectiveSizeMismatch {
        /// The member's operation.
        op: OpId,
        /// Its process.
        rank: Rank,
        /// The collective.
        kind: OpKind,
        /// The communicator.
        comm: CommId,
        /// Bytes this member sent.
        bytes: u64,
        /// Bytes the first member sent.
        expected: u64,
    },
    /// A barrier instance whose members do not all overlap in time: the last to enter
    /// entered after the first left (Table 3.1: no member leaves a barrier before every
    /// member has entered it).
    BarrierWithoutOverlap {
        /// The member that entered last.
        op: OpId,
        /// The member that left first.
        leave_op: OpId,
        /// The communicator.
        comm: CommId,
        /// How long after the first leave the last entry came (ns).
        gap: Time,
    },
    /// A value that does not fit where it must go (a sum past 2^64 - 1, a time past the
    /// clock's range): kept saturated and reported here, never wrapped.
    ValueOverflow {
        /// The process, when one is concerned.
        rank: Option<Rank>,
        /// What overflowed.
        what: String,
    },
    /// A record the source format allows but this reader cannot place (a location with no
    /// process, a message to a location that is not a rank, …): skipped and counted.
    SkippedRecord {
        /// The process, when one is concerned.
        rank: Option<Rank>,
        /// When (ns), if known.
        time: Option<Time>,
        /// What was skipped and why.
        what: String,
    },
    /// A location (an MPI rank's thread) whose event data is missing or cut short, in a
    /// partial copy of a trace: its file is absent, or ends inside a record. What it
    /// recorded before the cut is kept; the other locations import whole. Messages to or from
    /// the rank that are left without their other side are [`Anomaly::PeerDataMissing`].
    MissingRankData {
        /// The rank whose data is missing.
        rank: Rank,
        /// Its thread (location within the process).
        thread: u32,
        /// The file that should hold its events, as the trace names it.
        file: String,
        /// The records the trace's definitions announced for it (events in OTF2, calls in a
        /// DUMPI footer), when the format says.
        announced: Option<u64>,
        /// Records read before the cut (0 for a missing file).
        read: u64,
        /// Where the file was cut (its length, in bytes, or the byte offset in the
        /// decompressed stream), or none when the file is missing.
        cut_at: Option<u64>,
    },
    /// A send or receive left without its other side, or a collective instance left without
    /// a member, because that peer's event data is missing ([`Anomaly::MissingRankData`]):
    /// not an error of this rank.
    PeerDataMissing {
        /// The send or receive (its destination or source is `peer`), or the first member of
        /// the collective instance that lacks `peer`.
        op: OpId,
        /// Its process.
        rank: Rank,
        /// The rank whose data is missing.
        peer: Rank,
        /// The communicator.
        comm: CommId,
    },
    /// An item of a foreign trace that broke one of the metamodel's structural rules
    /// ([`crate::ingest::validate`], Table 3.1): kept, repaired as [`Rule`] says, and reported
    /// under the rule's own class ([`Rule::class`]). MTF text and the library refuse it.
    BrokenRule {
        /// The rule broken.
        rule: Rule,
        /// The process (`None` for a rule of the header about no process).
        rank: Option<Rank>,
        /// Its thread (0 for a rule of the header).
        thread: u32,
        /// When (ns): the kept operation's start, or the item's time; `None` in the header.
        time: Option<Time>,
        /// The operation kept (`None` when the item was dropped or was no operation).
        op: Option<OpId>,
        /// The communicator concerned, as the item named it.
        comm: Option<CommId>,
        /// The offending value as recorded (bytes, a rank, a communicator id, a time).
        value: Option<u64>,
    },
    /// Messages from one rank to another whose receive ended before the send started: a
    /// violated clock condition (happened-before), as tracers without clock offsets or with
    /// per-node clocks record it. One per (sender, receiver) pair, never per message.
    ClockConditionViolated {
        /// Sender world rank.
        sender: Rank,
        /// Receiver world rank.
        receiver: Rank,
        /// How many matched messages of the pair violate the clock condition.
        messages: u64,
        /// The largest violation (ns): the send's start minus the receive's end.
        worst: Time,
        /// The send start (ns) of the first violating message, in matching order.
        time: Time,
    },
    /// A send left without a receive, to a rank that made receives whose communicator, source
    /// or tag the trace does not record (EZTrace records no completion of an `MPI_Irecv`; a
    /// receive may name a communicator the trace never defines): one of them may have
    /// received it, so it is not counted as never received. Not an error of the program.
    ReceiveNotRecorded {
        /// The send operation.
        op: OpId,
        /// Sender.
        rank: Rank,
        /// Intended receiver.
        dest: Rank,
        /// Communicator.
        comm: CommId,
        /// Tag.
        tag: i32,
    },
}

/// A structural rule of the metamodel a foreign trace broke ([`Anomaly::BrokenRule`]), with
/// how the lenient import repairs the item so that matching, the store and every query stay
/// right. Each rule is an anomaly class of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Rule {
    /// A processor or communicator id declared twice: the first declaration is kept, the
    /// later one dropped (`value`: the id).
    DuplicateDeclaration,
    /// A process on an undeclared processor: kept on no processor (`value`: the processor id).
    UnknownProcessor,
    /// A communicator with no members: dropped; operations that name it then break
    /// [`Rule::UnknownCommunicator`] (`comm`).
    EmptyCommunicator,
    /// A communicator member that is no declared process: dropped from the group (`comm`,
    /// `value`: the rank).
    UnknownMember,
    /// A communicator member listed twice: listed once (`comm`, `value`: the rank).
    DuplicateMember,
    /// An operation or routine event of an undeclared process: dropped, the only item a
    /// broken rule drops, since it has no process to belong to (`value`: the rank).
    UnknownRank,
    /// An operation that ends before it starts: kept, ending at its start (`value`: the end
    /// recorded).
    EndBeforeStart,
    /// An operation that starts before the previous event of its rank and thread: kept,
    /// starting at that event's time, so its location stays in time order (`value`: the
    /// start recorded).
    TimeGoesBackwards,
    /// A routine enter or leave before the previous event of its rank and thread: kept at
    /// that event's time (`value`: the time recorded).
    RoutineTimeGoesBackwards,
    /// An operation on an undeclared communicator: kept on no communicator, so it is never
    /// matched (`comm`, `value`: the id).
    UnknownCommunicator,
    /// An operation on a communicator its rank is not a member of (`MPI_ERR_COMM`): kept on
    /// no communicator, never matched (`comm`, `value`: the id).
    RankOutsideCommunicator,
    /// A send, receive or collective that names no communicator: kept, never matched.
    MissingCommunicator,
    /// A send without a destination: kept, never matched.
    MissingDestination,
    /// A receive without a source (and not posted with `MPI_ANY_SOURCE`): kept, never matched.
    MissingSource,
    /// A destination or source that is not a member of the communicator (or no declared
    /// process; `MPI_ERR_RANK`): kept without that peer, so it is never matched to a wrong
    /// partner (`comm`, `value`: the peer's rank).
    PeerOutsideCommunicator,
    /// A root on an operation that has none (Table 3.1, rules 11-12): kept without it
    /// (`value`: the root).
    UnexpectedRoot,
    /// A rooted collective without a root: kept as it is.
    MissingRoot,
    /// A root that is not a member of the communicator (or no declared process;
    /// `MPI_ERR_ROOT`): kept without a root (`comm`, `value`: the root).
    RootOutsideCommunicator,
    /// A Barrier or Ibarrier that carries bytes (Table 3.1, rule 8): kept as a barrier with
    /// no bytes, everywhere (`value`: the larger of the bytes it recorded sent and received).
    BytesOnBarrier,
}

impl Rule {
    /// Every rule, in the order of the docs.
    pub const ALL: [Rule; 19] = [
        Rule::DuplicateDeclaration,
        Rule::UnknownProcessor,
        Rule::EmptyCommunicator,
        Rule::UnknownMember,
        Rule::DuplicateMember,
        Rule::UnknownRank,
        Rule::EndBeforeStart,
        Rule::TimeGoesBackwards,
        Rule::RoutineTimeGoesBackwards,
        Rule::UnknownCommunicator,
        Rule::RankOutsideCommunicator,
        Rule::MissingCommunicator,
        Rule::MissingDestination,
        Rule::MissingSource,
        Rule::PeerOutsideCommunicator,
        Rule::UnexpectedRoot,
        Rule::MissingRoot,
        Rule::RootOutsideCommunicator,
        Rule::BytesOnBarrier,
    ];

    /// The anomaly class the rule is reported under (`SELECT ... FROM ANOMALIES`, MTF text,
    /// Parquet): the variant's name.
    pub fn class(self) -> &'static str {
        match self {
            Rule::DuplicateDeclaration => "DuplicateDeclaration",
            Rule::UnknownProcessor => "UnknownProcessor",
            Rule::EmptyCommunicator => "EmptyCommunicator",
            Rule::UnknownMember => "UnknownMember",
            Rule::DuplicateMember => "DuplicateMember",
            Rule::UnknownRank => "UnknownRank",
            Rule::EndBeforeStart => "EndBeforeStart",
            Rule::TimeGoesBackwards => "TimeGoesBackwards",
            Rule::RoutineTimeGoesBackwards => "RoutineTimeGoesBackwards",
            Rule::UnknownCommunicator => "UnknownCommunicator",
            Rule::RankOutsideCommunicator => "RankOutsideCommunicator",
            Rule::MissingCommunicator => "MissingCommunicator",
            Rule::MissingDestination => "MissingDestination",
            Rule::MissingSource => "MissingSource",
            Rule::PeerOutsideCommunicator => "PeerOutsideCommunicator",
            Rule::UnexpectedRoot => "UnexpectedRoot",
            Rule::MissingRoot => "MissingRoot",
            Rule::RootOutsideCommunicator => "RootOutsideCommunicator",
            Rule::BytesOnBarrier => "BytesOnBarrier",
        }
    }

    /// The rule of class `class`.
    pub fn from_class(class: &[u8]) -> Option<Rule> {
        Rule::ALL
            .into_iter()
            .find(|r| r.class().as_bytes() == class)
    }

    /// The count's name in `mtfdb info` and the import's summary (the rule's short name in
    /// [`crate::ingest::validate`]).
    pub fn kind_name(self) -> &'static str {
        match self {
            Rule::DuplicateDeclaration => "duplicate declaration",
            Rule::UnknownProcessor => "unknown processor",
            Rule::EmptyCommunicator => "empty communicator",
            Rule::UnknownMember => "member not a process",
            Rule::DuplicateMember => "duplicate member",
            Rule::UnknownRank => "unknown rank",
            Rule::EndBeforeStart => "end before start",
            Rule::TimeGoesBackwards => "time goes backwards",
            Rule::RoutineTimeGoesBackwards => "routine time goes backwards",
            Rule::UnknownCommunicator => "unknown communicator",
            Rule::RankOutsideCommunicator => "not a member",
            Rule::MissingCommunicator => "missing communicator",
            Rule::MissingDestination => "missing destination",
            Rule::MissingSource => "missing source",
            Rule::PeerOutsideCommunicator => "peer not in communicator",
            Rule::UnexpectedRoot => "unexpected root",
            Rule::MissingRoot => "missing root",
            Rule::RootOutsideCommunicator => "root not in communicator",
            Rule::BytesOnBarrier => "bytes on a barrier",
        }
    }

    /// Whether the anomaly names the operation kept (every rule about an operation but
    /// [`Rule::UnknownRank`], whose item is dropped).
    pub fn names_op(self) -> bool {
        !matches!(
            self,
            Rule::DuplicateDeclaration
                | Rule::UnknownProcessor
                | Rule::EmptyCommunicator
                | Rule::UnknownMember
                | Rule::DuplicateMember
                | Rule::UnknownRank
                | Rule::RoutineTimeGoesBackwards
        )
    }
}

/// Where an operation stands in its source: the `index`-th operation (from 0) of location
/// (`rank`, `thread`), in the order the source delivered them. A source that reports an
/// anomaly about an operation names it this way, since only the import knows the id it gives
/// the operation ([`crate::ingest::EventSink::anomaly_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpPosition {
    /// World rank.
    pub rank: Rank,
    /// Thread within the process.
    pub thread: u32,
    /// The operation's index among its location's operations, from 0.
    pub index: u64,
}

impl Anomaly {
    /// The same anomaly with each operation id it names replaced by `f(id)`, in field order
    /// (`op` then `request_op`; `send_op` then `recv_op`).
    ///
    /// ```
    /// use mtfdb::model::Anomaly;
    /// let a = Anomaly::WaitBeforeRequest { op: 7, request_op: 3, rank: 0 };
    /// let b = a.map_ops(|id| Ok::<_, ()>(id * 10)).unwrap();
    /// assert_eq!(b, Anomaly::WaitBeforeRequest { op: 70, request_op: 30, rank: 0 });
    /// assert_eq!(a.ops(), vec![7, 3]);
    /// ```
    pub fn map_ops<E>(&self, mut f: impl FnMut(OpId) -> Result<OpId, E>) -> Result<Anomaly, E> {
        let mut a = self.clone();
        match &mut a {
            Anomaly::UnmatchedSend { op, .. }
            | Anomaly::UnmatchedReceive { op, .. }
            | Anomaly::RequestNeverCompleted { op, .. }
            | Anomaly::UnknownRequest { op, .. }
            | Anomaly::UnresolvedWildcard { op, .. }
            | Anomaly::RootMismatch { op, .. }
            | Anomaly::CallBeforeInit { op, .. }
            | Anomaly::CallAfterFinalize { op, .. }
            | Anomaly::CollectiveSizeMismatch { op, .. }
            | Anomaly::CallWithoutRecords { op, .. }
            | Anomaly::PeerDataMissing { op, .. }
            | Anomaly::ReceiveNotRecorded { op, .. } => *op = f(*op)?,
            Anomaly::BrokenRule { op, .. } => {
                if let Some(op) = op {
                    *op = f(*op)?;
                }
            }
            Anomaly::BarrierWithoutOverlap { op, leave_op, .. } => {
                *op = f(*op)?;
                *leave_op = f(*leave_op)?;
            }
            Anomaly::WaitBeforeRequest { op, request_op, .. } => {
                *op = f(*op)?;
                *request_op = f(*request_op)?;
            }
            Anomaly::LengthMismatch {
                send_op, recv_op, ..
            }
            | Anomaly::DatatypeMismatch {
                send_op, recv_op, ..
            } => {
                *send_op = f(*send_op)?;
                *recv_op = f(*recv_op)?;
            }
            Anomaly::IncompleteCollective { .. }
            | Anomaly::MissingFinalize { .. }
            | Anomaly::UnclosedRoutine { .. }
            | Anomaly::CrossedLeave { .. }
            | Anomaly::LeaveWithoutEnter { .. }
            | Anomaly::ValueOverflow { .. }
            | Anomaly::SkippedRecord { .. }
            | Anomaly::MissingRankData { .. } => {}
            Anomaly::ClockConditionViolated { .. } => {}
        }
        Ok(a)
    }

    /// The operation ids the anomaly names, in the field order of [`Anomaly::map_ops`].
    pub fn ops(&self) -> Vec<OpId> {
        let mut ids = Vec::new();
        let _ = self.map_ops(|id| {
            ids.push(id);
            Ok::<_, ()>(id)
        });
        ids
    }

    /// A short, stable name of the anomaly's kind, for counting.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Anomaly::UnmatchedSend { .. } => "send never received",
            Anomaly::UnmatchedReceive { .. } => "receive never matched",
            Anomaly::RequestNeverCompleted { .. } => "request never completed",
            Anomaly::UnknownRequest { .. } => "completion of an unknown request",
            Anomaly::IncompleteCollective { .. } => "incomplete collective",
            Anomaly::WaitBeforeRequest { .. } => "wait started before its request",
            Anomaly::UnresolvedWildcard { .. } => "wildcard receive never resolved",
            Anomaly::RootMismatch { .. } => "collective root mismatch",
            Anomaly::MissingFinalize { .. } => "missing MPI_Finalize",
            Anomaly::UnclosedRoutine { .. } => "routine never left",
            Anomaly::CrossedLeave { .. } => "crossed routine leave",
            Anomaly::LeaveWithoutEnter { .. } => "routine left but never entered",
            Anomaly::CallWithoutRecords { .. } => "MPI call without its records",
            Anomaly::LengthMismatch { .. } => "receive length differs from send",
            Anomaly::DatatypeMismatch { .. } => "receive datatype differs from send",
            Anomaly::CallBeforeInit { .. } => "MPI call before MPI_Init",
            Anomaly::CallAfterFinalize { .. } => "MPI call after MPI_Finalize",
            Anomaly::CollectiveSizeMismatch { .. } => "collective size mismatch",
            Anomaly::BarrierWithoutOverlap { .. } => "barrier members do not overlap",
            Anomaly::ValueOverflow { .. } => "value overflow",
            Anomaly::SkippedRecord { .. } => "record skipped",
            Anomaly::MissingRankData { .. } => "rank's event data missing",
            Anomaly::PeerDataMissing { .. } => "peer's event data missing",
            Anomaly::BrokenRule { rule, .. } => rule.kind_name(),
            Anomaly::ClockConditionViolated { .. } => "receive before send (clock condition)",
            Anomaly::ReceiveNotRecorded { .. } => "send to a receive not recorded",
        }
    }
}
