//! One rank's records turned into MTF items: operations with world ranks and bytes, routine
//! enters and leaves of profiled user functions, and the anomalies the rank's calls carry.
//!
//! - Peers and roots are ranks in the call's communicator; they become world ranks through
//!   the communicator's members ([`super::comms`]). A peer that is `MPI_PROC_NULL` (any
//!   negative rank but `MPI_ANY_SOURCE`, which DUMPI writes as -1) moves no data: the call
//!   is kept as a plain call of its name (`OpKind::Other`), outside matching.
//! - Bytes are counts times the size of the datatype in the rank's datatype table. For
//!   collectives they follow Score-P's convention, so that DUMPI and OTF2 traces of one
//!   program give the same fan-in and fan-out ([`collective_bytes`]).
//! - A non-blocking receive posted with `MPI_ANY_SOURCE` or `MPI_ANY_TAG` learns its source
//!   and tag from the status of the Wait or Test that completes it: it is held back (with the
//!   rank's later items, to keep them in time order) until then, at most [`MAX_HELD`] items.
//! - Requests of persistent calls (`MPI_Send_init`, `MPI_Recv_init`, …) and generalized
//!   requests are not modelled: their calls are plain calls and their completions are left
//!   out of the Wait's `completes`.
//! - A record that breaks a rule of the metamodel is kept and reported as the rule's
//!   [`Anomaly::BrokenRule`], with the rank and the call's start: the import's checks see
//!   most (an end before the start, a time going back, a communicator the rank is not a
//!   member of, a communicator listing a rank twice); this converter reports what they
//!   cannot, because it has no world rank or communicator id to give them: a communicator
//!   handle the trace never defined (or whose communicator could not be resolved) is
//!   [`Rule::UnknownCommunicator`] with the handle, `MPI_COMM_NULL` on a call that moves
//!   data [`Rule::MissingCommunicator`], a peer or root that is no rank of the communicator
//!   [`Rule::PeerOutsideCommunicator`] or [`Rule::RootOutsideCommunicator`] with the rank
//!   recorded. The call keeps its kind, without what was wrong, flagged as recorded without
//!   its records (`flags::WITHOUT_RECORDS`), so that it is never matched.
//! - What the records do not let mtfdb place but breaks no rule (an inter-communicator, a
//!   datatype without a size) is counted per rank and reported once per kind of problem as
//!   an [`Anomaly::SkippedRecord`].

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::hash::BuildHasherDefault;

use super::comms::{self, Creation, Mgmt, MgmtTable};
use super::funcs;
use super::record::{List, Record, Slot, Status};
use crate::hash::{FxHashMap, FxHasher};
use crate::model::{
    flags, Anomaly, CommId, OpKind, Operation, Rank, RequestId, RoutineEvent, Rule, StrId, Time,
};

/// Items a rank may hold back behind a receive waiting for its status; beyond, the receive
/// is released with its wildcard unresolved.
pub(crate) const MAX_HELD: usize = 1 << 16;
/// `MPI_ANY_SOURCE` and `MPI_ANY_TAG` as DUMPI writes them.
const ANY: i64 = -1;
/// `MPI_REQUEST_NULL`'s handle (0 is DUMPI's "error" request).
const REQUEST_NULL: i64 = 1;

/// The names of DUMPI's predefined datatypes, by datatype index.
const DATATYPES: [&str; 28] = [
    "MPI_DATATYPE_ERROR",
    "MPI_DATATYPE_NULL",
    "MPI_CHAR",
    "MPI_SIGNED_CHAR",
    "MPI_UNSIGNED_CHAR",
    "MPI_BYTE",
    "MPI_WCHAR",
    "MPI_SHORT",
    "MPI_UNSIGNED_SHORT",
    "MPI_INT",
    "MPI_UNSIGNED",
    "MPI_LONG",
    "MPI_UNSIGNED_LONG",
    "MPI_FLOAT",
    "MPI_DOUBLE",
    "MPI_LONG_DOUBLE",
    "MPI_LONG_LONG_INT",
    "MPI_UNSIGNED_LONG_LONG",
    "MPI_LONG_LONG",
    "MPI_PACKED",
    "MPI_LB",
    "MPI_UB",
    "MPI_FLOAT_INT",
    "MPI_DOUBLE_INT",
    "MPI_LONG_INT",
    "MPI_SHORT_INT",
    "MPI_2INT",
    "MPI_LONG_DOUBLE_INT",
];

/// The trace's string table, shared by every rank: MPI call names of `Other` kinds,
/// datatype names, routine names. New strings wait in a list until the sink has them.
#[derive(Debug, Default)]
pub(crate) struct Names {
    ids: FxHashMap<String, StrId>,
    fresh: Vec<(StrId, String)>,
    by_label: FxHashMap<u16, StrId>,
    by_type: FxHashMap<i64, StrId>,
}

impl Names {
    /// The id of `text`, defining it if new.
    pub fn intern(&mut self, text: &str) -> StrId {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = self.ids.len() as StrId;
        self.ids.insert(text.to_string(), id);
        self.fresh.push((id, text.to_string()));
        id
    }

    /// The strings defined since the last call.
    pub fn take_fresh(&mut self) -> Vec<(StrId, String)> {
        std::mem::take(&mut self.fresh)
    }

    /// The name of function label `func`.
    fn call(&mut self, func: u16) -> StrId {
        if let Some(&id) = self.by_label.get(&func) {
            return id;
        }
        let id = self.intern(funcs::name(func).unwrap_or("MPI call"));
        self.by_label.insert(func, id);
        id
    }

    fn datatype(&mut self, dt: i64) -> StrId {
        if let Some(&id) = self.by_type.get(&dt) {
            return id;
        }
        let id = match usize::try_from(dt).ok().and_then(|i| DATATYPES.get(i)) {
            Some(name) => self.intern(name),
            None => self.intern(&format!("user datatype {dt}")),
        };
        self.by_type.insert(dt, id);
        id
    }
}

/// What every rank's conversion reads.
pub(crate) struct Context {
    /// Members (world ranks, communicator order) by communicator id.
    pub members: Vec<Vec<Rank>>,
    /// The operation kind of each function label (`None`: a plain call).
    pub kinds: Vec<Option<OpKind>>,
    /// What each label does to communicators and groups.
    pub mgmt: MgmtTable,
    /// The trace's first time (ns since the epoch); times are counted from it.
    pub t0: u64,
}

impl Context {
    /// The kinds of every label.
    pub fn kinds() -> Vec<Option<OpKind>> {
        (0..funcs::END_OF_STREAM)
            .map(|f| {
                (f < funcs::ALL_FUNCTIONS)
                    .then(|| funcs::name(f).and_then(OpKind::from_mpi_name))
                    .flatten()
            })
            .collect()
    }
}

/// An item of the rank's output: the OTF2 converter's.
pub(crate) use crate::ingest::otf2::convert::Item;

/// An item waiting to leave, with its time and the record it came from.
#[derive(Debug)]
pub(crate) struct Held {
    pub item: Item,
    pub time: Time,
    /// File offset of its record (0 for what the rank reports at its end).
    pub offset: u64,
    /// Waiting for the status that resolves its wildcard.
    blocked: bool,
}

/// What a communicator handle names on this rank.
#[derive(Debug, Clone, Copy)]
enum CommRef {
    Known(CommId),
    /// `MPI_COMM_NULL`.
    Null,
    /// A communicator whose creation could not be resolved (see [`super::comms`]).
    Unresolved,
    /// An inter-communicator or a connection to other programs (not modelled).
    Inter,
}

/// What a record's communicator argument gives.
enum Comm {
    /// The record has none.
    Absent,
    Placed(CommId),
    /// It breaks a rule, reported: the call is kept without it.
    Broken,
    /// It is not modelled (an inter-communicator, `MPI_COMM_NULL` on a call that moves no
    /// data), counted as skipped: the call is kept as a plain call.
    Skipped,
}

/// A non-blocking receive waiting for its status: its place in the output.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    seq: u64,
    func: u16,
    any_source: bool,
    any_tag: bool,
}

/// What happened to a peer rank.
enum Peer {
    World(Rank),
    ProcNull,
    Outside,
}

/// Problems counted per rank and reported once each.
#[derive(Debug, Default)]
struct Issues {
    skipped: BTreeMap<String, (u64, Option<Time>)>,
    overflow: BTreeMap<String, u64>,
}

/// Records, routine entries, per thread of the rank.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ThreadCounts {
    pub records: u64,
    pub regions: u64,
}

/// Converts one rank's records.
pub(crate) struct RankConverter {
    rank: Rank,
    handles: FxHashMap<u16, CommRef>,
    bindings: std::vec::IntoIter<Option<CommId>>,
    local: FxHashMap<CommId, Option<u32>>,
    persistent: HashSet<i64, BuildHasherDefault<FxHasher>>,
    type_sizes: Vec<i32>,
    functions: FxHashMap<u64, String>,
    out: VecDeque<Held>,
    /// Sequence number of `out[0]`.
    base: u64,
    waiting: FxHashMap<i64, Waiting>,
    blocked: usize,
    last_time: Time,
    issues: Issues,
    /// Rules the record being converted breaks, reported after its call.
    broken: Vec<Anomaly>,
    /// Per thread (by number): records and routine entries.
    pub threads: BTreeMap<u16, ThreadCounts>,
}

impl RankConverter {
    /// A converter for `rank`, with the communicators its creation calls made (in call
    /// order), its datatype sizes and its profiled functions' names.
    pub fn new(
        rank: Rank,
        bindings: Vec<Option<CommId>>,
        type_sizes: Vec<i32>,
        functions: &[(u64, String)],
    ) -> RankConverter {
        let mut handles = FxHashMap::default();
        handles.insert(comms::WORLD_HANDLE, CommRef::Known(comms::WORLD));
        handles.insert(comms::SELF_HANDLE, CommRef::Known(comms::self_comm(rank)));
        handles.insert(comms::NULL_HANDLE, CommRef::Null);
        RankConverter {
            rank,
            handles,
            bindings: bindings.into_iter(),
            local: FxHashMap::default(),
            persistent: HashSet::default(),
            type_sizes,
            functions: functions.iter().cloned().collect(),
            out: VecDeque::new(),
            base: 0,
            waiting: FxHashMap::default(),
            blocked: 0,
            last_time: 0,
            issues: Issues::default(),
            broken: Vec::new(),
            threads: BTreeMap::new(),
        }
    }

    /// The next item, if it may leave.
    pub fn ready(&self) -> Option<&Held> {
        self.out.front().filter(|h| !h.blocked)
    }

    /// Removes the next item ([`RankConverter::ready`] said it may leave).
    pub fn pop(&mut self) -> Option<Held> {
        let h = self.out.pop_front()?;
        self.base += 1;
        Some(h)
    }

    fn push(&mut self, item: Item, time: Time, offset: u64, blocked: bool) -> u64 {
        let seq = self.base + self.out.len() as u64;
        if blocked {
            self.blocked += 1;
        }
        self.out.push_back(Held {
            item,
            time,
            offset,
            blocked,
        });
        seq
    }

    fn skipped(&mut self, what: String, time: Time) {
        let e = self.issues.skipped.entry(what).or_insert((0, Some(time)));
        e.0 += 1;
    }

    fn overflow(&mut self, what: String) {
        *self.issues.overflow.entry(what).or_insert(0) += 1;
    }

    /// The trace's time of a wall-clock value.
    fn time(&mut self, t: u64, t0: u64) -> Time {
        match t.checked_sub(t0) {
            Some(t) => t,
            None => {
                self.overflow("a time before the trace's first event, kept as 0".into());
                0
            }
        }
    }

    /// Converts one record.
    pub fn record(&mut self, rec: &Record, ctx: &Context, names: &mut Names) {
        let (start, end) = match rec.wall {
            Some((s, e)) => {
                // An end before the start is kept: the import's checks report it.
                (self.time(s, ctx.t0), self.time(e, ctx.t0))
            }
            None => {
                self.skipped(
                    "the wall-clock time of calls recorded without one (placed at the time of the call before)".into(),
                    self.last_time,
                );
                (self.last_time, self.last_time)
            }
        };
        self.last_time = start;
        let counts = self.threads.entry(rec.thread).or_default();
        counts.records += 1;
        if rec.func == funcs::FUNCTION_ENTER || rec.func == funcs::FUNCTION_EXIT {
            let enter = rec.func == funcs::FUNCTION_ENTER;
            if enter {
                counts.regions += 1;
            }
            let address = rec.get(Slot::Address).unwrap_or(0) as u64;
            let routine = match self.functions.get(&address) {
                Some(name) => names.intern(name),
                None => names.intern(&format!("function {address:#x}")),
            };
            let ev = RoutineEvent {
                rank: self.rank,
                thread: u32::from(rec.thread),
                time: start,
                routine,
                enter,
            };
            self.push(Item::Routine(ev), start, rec.offset, false);
            return;
        }
        let kind = ctx.kinds.get(usize::from(rec.func)).copied().flatten();
        let mut op = Operation::new(
            self.rank,
            kind.unwrap_or_else(|| OpKind::Other(names.call(rec.func))),
            start,
            end,
        );
        op.thread = u32::from(rec.thread);
        let mut blocked = false;
        match kind {
            Some(k) if k.is_send() || k.is_receive() => {
                blocked = self.point_to_point(&mut op, rec, ctx, names);
            }
            Some(k) if k.is_completion() || matches!(k, OpKind::RequestFree | OpKind::Cancel) => {
                self.completion(&mut op, rec, ctx, names);
            }
            Some(OpKind::Probe | OpKind::Iprobe) => self.probe(&mut op, rec, ctx, names),
            Some(k) if k.is_collective() => self.collective(&mut op, rec, ctx, names),
            _ => self.plain(&mut op, rec, ctx, names),
        }
        if let Some(m) = ctx.mgmt.get(rec.func) {
            self.manage(rec, m);
        }
        let waiting = blocked.then(|| {
            (
                rec.get(Slot::Request),
                op.flags & flags::ANY_SOURCE != 0,
                op.flags & flags::ANY_TAG != 0,
            )
        });
        let seq = self.push(Item::Op(op), start, rec.offset, blocked);
        for a in std::mem::take(&mut self.broken) {
            self.push(Item::Anomaly(a), start, rec.offset, false);
        }
        if let Some((request, any_source, any_tag)) = waiting {
            match request {
                Some(r) => {
                    self.waiting.insert(
                        r,
                        Waiting {
                            seq,
                            func: rec.func,
                            any_source,
                            any_tag,
                        },
                    );
                }
                None => self.unblock(seq),
            }
        }
        if self.blocked > 0 && self.out.len() > MAX_HELD {
            self.release_front();
        }
    }

    /// Lets the oldest held receive go with its wildcard unresolved.
    fn release_front(&mut self) {
        let front = self.base;
        if let Some((&r, _)) = self.waiting.iter().find(|(_, w)| w.seq == front) {
            self.waiting.remove(&r);
            self.unblock(front);
        }
    }

    fn unblock(&mut self, seq: u64) {
        if let Some(h) = seq
            .checked_sub(self.base)
            .and_then(|i| self.out.get_mut(i as usize))
        {
            if h.blocked {
                h.blocked = false;
                self.blocked -= 1;
            }
        }
    }

    /// The communicator named by `op`'s record in `slot`. A handle the trace never defined,
    /// or whose communicator could not be resolved, breaks [`Rule::UnknownCommunicator`];
    /// `MPI_COMM_NULL` on a call that moves data breaks [`Rule::MissingCommunicator`]. A
    /// communicator the rank is not a member of is placed: the import's checks report it.
    fn comm_of(&mut self, op: &Operation, rec: &Record, slot: Slot) -> Comm {
        let Some(h) = rec.get(slot) else {
            return Comm::Absent;
        };
        let h = h as u16;
        let name = funcs::name(rec.func).unwrap_or("MPI");
        let moves_data = op.kind.is_send() || op.kind.is_receive() || op.kind.is_collective();
        match self.handles.get(&h).copied() {
            Some(CommRef::Known(id)) => Comm::Placed(id),
            Some(CommRef::Null) if moves_data => {
                self.broken(op, Rule::MissingCommunicator, None, None);
                Comm::Broken
            }
            Some(CommRef::Null) => {
                let what = format!(
                    "the communicator of {name} calls on MPI_COMM_NULL (kept as plain calls)"
                );
                self.skipped(what, op.start);
                Comm::Skipped
            }
            Some(CommRef::Inter) => {
                let what = format!(
                    "the communicator of {name} calls on an inter-communicator, which mtfdb does not model (kept as plain calls)"
                );
                self.skipped(what, op.start);
                Comm::Skipped
            }
            Some(CommRef::Unresolved) | None => {
                self.broken(op, Rule::UnknownCommunicator, None, Some(h.into()));
                Comm::Broken
            }
        }
    }

    /// Reports that `op`'s record breaks `rule` where the import's checks cannot see it (it
    /// names what has no world rank or communicator id), with the value recorded; the
    /// anomaly follows the call.
    fn broken(&mut self, op: &Operation, rule: Rule, comm: Option<CommId>, value: Option<u64>) {
        self.broken.push(Anomaly::BrokenRule {
            rule,
            rank: Some(self.rank),
            thread: op.thread,
            time: Some(op.start),
            op: None,
            comm,
            value,
        });
    }

    /// This rank's rank in communicator `c`.
    fn local_rank(&mut self, ctx: &Context, c: CommId) -> Option<u32> {
        let rank = self.rank;
        *self.local.entry(c).or_insert_with(|| {
            ctx.members
                .get(c as usize)
                .and_then(|m| m.iter().position(|&x| x == rank))
                .map(|i| i as u32)
        })
    }

    fn peer(ctx: &Context, c: CommId, local: i64) -> Peer {
        if local < 0 {
            return Peer::ProcNull;
        }
        match ctx
            .members
            .get(c as usize)
            .and_then(|m| usize::try_from(local).ok().and_then(|i| m.get(i)))
        {
            Some(&w) => Peer::World(w),
            None => Peer::Outside,
        }
    }

    /// `count` elements of datatype `dt` in bytes (0, counted, when the size is unknown).
    fn bytes(&mut self, count: Option<i64>, dt: Option<i64>, time: Time) -> u64 {
        let (Some(count), Some(dt)) = (count, dt) else {
            return 0;
        };
        let size = usize::try_from(dt)
            .ok()
            .and_then(|i| self.type_sizes.get(i))
            .copied()
            .filter(|&s| s >= 0);
        match (u64::try_from(count), size) {
            (Ok(n), Some(s)) => n * s as u64,
            (Err(_), _) => {
                self.skipped(
                    "the bytes of calls with a negative count (counted as 0)".into(),
                    time,
                );
                0
            }
            (_, None) => {
                self.skipped(
                    format!("the bytes of calls on datatype {dt}, which has no size in the rank's datatype table (counted as 0)"),
                    time,
                );
                0
            }
        }
    }

    /// Makes `op` a plain call of its name, outside matching (its request stays).
    fn demote(op: &mut Operation, rec: &Record, names: &mut Names) {
        op.kind = OpKind::Other(names.call(rec.func));
        op.dest = None;
        op.source = None;
        op.root = None;
        op.send_bytes = 0;
        op.recv_bytes = 0;
        op.completes.clear();
        op.flags &= !(flags::ANY_SOURCE | flags::ANY_TAG);
    }

    /// A send, a receive or both; returns whether the call waits for a later status.
    fn point_to_point(
        &mut self,
        op: &mut Operation,
        rec: &Record,
        ctx: &Context,
        names: &mut Names,
    ) -> bool {
        let k = op.kind;
        let t = op.start;
        match self.comm_of(op, rec, Slot::Comm) {
            Comm::Placed(c) => op.comm = Some(c),
            // Kept with its tag and bytes, without peers (it has no communicator to place them).
            Comm::Broken => op.flags |= flags::WITHOUT_RECORDS,
            Comm::Absent => {}
            Comm::Skipped => {
                Self::demote(op, rec, names);
                return false;
            }
        }
        op.request = rec.get(Slot::Request).map(|r| r as RequestId);
        let both = matches!(k, OpKind::Sendrecv | OpKind::SendrecvReplace);
        if k.is_send() {
            let (count, dt, tag) = if k == OpKind::Sendrecv {
                (Slot::SendCount, Slot::SendType, Slot::SendTag)
            } else if both {
                (Slot::Count, Slot::Datatype, Slot::SendTag)
            } else {
                (Slot::Count, Slot::Datatype, Slot::Tag)
            };
            op.send_tag = rec.get(tag).map(|t| t as i32);
            op.send_bytes = self.bytes(rec.get(count), rec.get(dt), t);
            op.datatype = rec.get(dt).map(|d| names.datatype(d));
            op.dest = self.place(op, rec, ctx, names, rec.get(Slot::Dest).unwrap_or(-1));
            if op.dest.is_none() {
                return false;
            }
        }
        if !k.is_receive() {
            return false;
        }
        let (count, dt, tag) = if k == OpKind::Sendrecv {
            (Slot::RecvCount, Slot::RecvType, Slot::RecvTag)
        } else if both {
            (Slot::Count, Slot::Datatype, Slot::RecvTag)
        } else {
            (Slot::Count, Slot::Datatype, Slot::Tag)
        };
        // DUMPI records the buffer the receive posted, not the length it got.
        op.recv_bytes = self.bytes(rec.get(count), rec.get(dt), t);
        op.flags |= flags::RECV_CAPACITY;
        if op.datatype.is_none() {
            op.datatype = rec.get(dt).map(|d| names.datatype(d));
        }
        let source = rec.get(Slot::Source).unwrap_or(ANY);
        let tag = rec.get(tag).unwrap_or(ANY);
        if source == ANY {
            op.flags |= flags::ANY_SOURCE;
        }
        op.recv_tag = Some(tag as i32);
        if tag == ANY {
            op.flags |= flags::ANY_TAG;
        }
        if source != ANY {
            op.source = self.place(op, rec, ctx, names, source);
            if op.source.is_none() {
                return false;
            }
        }
        if source != ANY && tag != ANY {
            return false;
        }
        if k == OpKind::Irecv {
            // The status comes with the completion.
            return rec.statuses_recorded;
        }
        if let Some(st) = rec.statuses.first().copied() {
            self.resolve_wildcards(op, &st, source == ANY, tag == ANY, ctx, rec.func, names);
        }
        false
    }

    /// The world rank of peer `local` of `op` (on its communicator, if it has one). A peer
    /// that is `MPI_PROC_NULL` makes the call a plain one; one that is no rank of the
    /// communicator breaks [`Rule::PeerOutsideCommunicator`]: the call is kept without it.
    fn place(
        &mut self,
        op: &mut Operation,
        rec: &Record,
        ctx: &Context,
        names: &mut Names,
        local: i64,
    ) -> Option<Rank> {
        let c = op.comm?;
        match Self::peer(ctx, c, local) {
            Peer::World(w) => Some(w),
            Peer::ProcNull => {
                Self::demote(op, rec, names);
                None
            }
            Peer::Outside => {
                let value = u64::try_from(local).ok();
                self.broken(op, Rule::PeerOutsideCommunicator, Some(c), value);
                op.flags |= flags::WITHOUT_RECORDS;
                None
            }
        }
    }

    /// Fills in the actual source and tag of a wildcard receive from its status.
    #[allow(clippy::too_many_arguments)]
    fn resolve_wildcards(
        &mut self,
        op: &mut Operation,
        st: &Status,
        any_source: bool,
        any_tag: bool,
        ctx: &Context,
        func: u16,
        names: &mut Names,
    ) {
        let Some(c) = op.comm else { return };
        if any_source {
            match Self::peer(ctx, c, i64::from(st.source)) {
                Peer::World(w) => op.source = Some(w),
                Peer::ProcNull => {
                    // A receive from MPI_PROC_NULL (MPICH's is -1, like MPI_ANY_SOURCE).
                    op.kind = OpKind::Other(names.call(func));
                    op.recv_bytes = 0;
                    op.flags &= !(flags::ANY_SOURCE | flags::ANY_TAG);
                    return;
                }
                Peer::Outside => {
                    self.skipped(
                        format!("the actual source of wildcard receives whose status names a rank outside communicator {c} (left unresolved)"),
                        op.start,
                    );
                }
            }
        }
        if any_tag {
            op.recv_tag = Some(st.tag);
        }
    }

    /// A Wait or Test variant, `MPI_Request_free` or `MPI_Cancel`.
    fn completion(&mut self, op: &mut Operation, rec: &Record, ctx: &Context, names: &mut Names) {
        let k = op.kind;
        let single = rec.get(Slot::Request);
        let requests: Vec<i64> = match single {
            Some(r) => vec![r],
            None => rec
                .list(List::Requests)
                .iter()
                .map(|&r| i64::from(r))
                .collect(),
        };
        let flag = rec.get(Slot::Flag).is_none_or(|f| f != 0);
        // Which requests completed, with the index of their status.
        let done: Vec<(usize, Option<usize>)> = match k {
            OpKind::Cancel => Vec::new(),
            OpKind::Wait | OpKind::Test | OpKind::RequestFree => vec![(0, Some(0))],
            OpKind::Waitany | OpKind::Testany => rec
                .get(Slot::Index)
                .and_then(|i| usize::try_from(i).ok())
                .filter(|&i| i < requests.len())
                .map(|i| vec![(i, Some(0))])
                .unwrap_or_default(),
            OpKind::Waitall | OpKind::Testall => {
                (0..requests.len()).map(|i| (i, Some(i))).collect()
            }
            _ => rec
                .list(List::Indices)
                .iter()
                .enumerate()
                .filter_map(|(j, &i)| {
                    usize::try_from(i)
                        .ok()
                        .filter(|&i| i < requests.len())
                        .map(|i| (i, Some(j)))
                })
                .collect(),
        };
        let completed = flag && !done.is_empty();
        if matches!(
            k,
            OpKind::Test | OpKind::Testany | OpKind::Testall | OpKind::Testsome
        ) && !completed
        {
            // A Test that found nothing completed nothing.
            op.flags |= flags::NOT_COMPLETED;
            return;
        }
        for (i, status) in done {
            let r = requests[i];
            if r == REQUEST_NULL || r == 0 {
                continue;
            }
            if self.persistent.contains(&r) {
                if k == OpKind::RequestFree {
                    self.persistent.remove(&r);
                }
                continue;
            }
            op.completes.push(r as RequestId);
            if let Some(w) = self.waiting.remove(&r) {
                if let Some(st) = status.and_then(|s| rec.statuses.get(s)).copied() {
                    self.resolve_held(w, &st, ctx, names);
                }
                self.unblock(w.seq);
            }
        }
    }

    /// Resolves the wildcards of held receive `w` from the status that completed it.
    fn resolve_held(&mut self, w: Waiting, st: &Status, ctx: &Context, names: &mut Names) {
        let Some(i) = w.seq.checked_sub(self.base) else {
            return;
        };
        let Some(Held {
            item: Item::Op(held),
            ..
        }) = self.out.get_mut(i as usize)
        else {
            return;
        };
        let mut op = std::mem::replace(held, Operation::new(self.rank, OpKind::Irecv, 0, 0));
        self.resolve_wildcards(&mut op, st, w.any_source, w.any_tag, ctx, w.func, names);
        if let Some(Held {
            item: Item::Op(held),
            ..
        }) = self.out.get_mut(i as usize)
        {
            *held = op;
        }
    }

    fn probe(&mut self, op: &mut Operation, rec: &Record, ctx: &Context, names: &mut Names) {
        let Comm::Placed(c) = self.comm_of(op, rec, Slot::Comm) else {
            Self::demote(op, rec, names);
            return;
        };
        op.comm = Some(c);
        if rec.get(Slot::Flag) == Some(0) {
            op.flags |= flags::NOT_COMPLETED;
        }
        let source = rec.get(Slot::Source).unwrap_or(ANY);
        let tag = rec.get(Slot::Tag).unwrap_or(ANY);
        op.recv_tag = Some(tag as i32);
        if source == ANY {
            op.flags |= flags::ANY_SOURCE;
        } else {
            op.source = self.place(op, rec, ctx, names, source);
            if op.source.is_none() {
                return;
            }
        }
        if tag == ANY {
            op.flags |= flags::ANY_TAG;
        }
        if op.flags & flags::NOT_COMPLETED == 0 && (source == ANY || tag == ANY) {
            if let Some(st) = rec.statuses.first().copied() {
                self.resolve_wildcards(op, &st, source == ANY, tag == ANY, ctx, rec.func, names);
            }
        }
    }

    fn collective(&mut self, op: &mut Operation, rec: &Record, ctx: &Context, names: &mut Names) {
        let t = op.start;
        let c = match self.comm_of(op, rec, Slot::Comm) {
            Comm::Placed(c) => c,
            // Its bytes depend on the communicator's size: none are kept.
            Comm::Broken => {
                op.flags |= flags::WITHOUT_RECORDS;
                return;
            }
            Comm::Absent => return,
            Comm::Skipped => {
                Self::demote(op, rec, names);
                return;
            }
        };
        op.comm = Some(c);
        let Some(me) = self.local_rank(ctx, c) else {
            return;
        };
        let n = ctx.members.get(c as usize).map_or(0, Vec::len) as u64;
        if let (true, Some(r)) = (op.kind.is_rooted(), rec.get(Slot::Root)) {
            match Self::peer(ctx, c, r) {
                Peer::World(w) => op.root = Some(w),
                _ => {
                    let value = u64::try_from(r).ok();
                    self.broken(op, Rule::RootOutsideCommunicator, Some(c), value);
                    op.flags |= flags::WITHOUT_RECORDS;
                }
            }
        }
        let root = rec.get(Slot::Root) == Some(i64::from(me));
        let dt = rec
            .get(Slot::Datatype)
            .or(rec.get(Slot::SendType))
            .or(rec.get(Slot::RecvType));
        op.datatype = dt.map(|d| names.datatype(d));
        let mut sizes = Sizes {
            conv: self,
            time: t,
            overflow: false,
        };
        let (s, r) = collective_bytes(op.kind, rec, u64::from(me), n, root, &mut sizes);
        if sizes.overflow {
            self.overflow(format!(
                "the bytes of {} calls (more than 2^64), kept as the largest value",
                funcs::name(rec.func).unwrap_or("MPI")
            ));
        }
        op.send_bytes = s;
        op.recv_bytes = r;
    }

    /// Any other call: its name, and its communicator if it names one.
    fn plain(&mut self, op: &mut Operation, rec: &Record, ctx: &Context, names: &mut Names) {
        let slot = match ctx.mgmt.get(rec.func) {
            Some(Mgmt::New(_)) => Slot::OldComm,
            _ => Slot::Comm,
        };
        match self.comm_of(op, rec, slot) {
            Comm::Placed(c) => op.comm = Some(c),
            Comm::Absent => {}
            Comm::Broken | Comm::Skipped => {
                if op.kind.class() == crate::model::OpClass::Communicator {
                    op.kind = OpKind::Other(names.call(rec.func));
                }
            }
        }
        if is_persistent(rec.func) {
            if let Some(r) = rec.get(Slot::Request) {
                self.persistent.insert(r);
            }
        }
    }

    /// Applies a communicator creation or release to the rank's handles.
    fn manage(&mut self, rec: &Record, mgmt: Mgmt) {
        match mgmt {
            Mgmt::New(creation) => {
                let made = self.bindings.next().flatten();
                let Some(new) = rec.get(Slot::NewComm).map(|h| h as u16) else {
                    return;
                };
                if new == comms::NULL_HANDLE
                    || new == comms::WORLD_HANDLE
                    || new == comms::SELF_HANDLE
                {
                    return;
                }
                match made {
                    Some(id) => {
                        self.handles.insert(new, CommRef::Known(id));
                    }
                    None if creation == Creation::Inter => {
                        self.handles.insert(new, CommRef::Inter);
                    }
                    // The trace gave the rank a communicator mtfdb could not resolve.
                    None => {
                        self.handles.insert(new, CommRef::Unresolved);
                    }
                }
            }
            Mgmt::Free => {
                if let Some(h) = rec.get(Slot::Comm).map(|h| h as u16) {
                    if h != comms::WORLD_HANDLE && h != comms::SELF_HANDLE {
                        self.handles.remove(&h);
                    }
                }
            }
            _ => {}
        }
    }

    /// Ends the rank: releases what still waits and reports its problems.
    pub fn finish(&mut self) {
        for (_, w) in std::mem::take(&mut self.waiting) {
            self.unblock(w.seq);
        }
        let time = self.last_time;
        let rank = Some(self.rank);
        let issues = std::mem::take(&mut self.issues);
        for (what, (n, first)) in issues.skipped {
            let a = Anomaly::SkippedRecord {
                rank,
                time: first,
                what: format!("{what}: {n} call{}", if n == 1 { "" } else { "s" }),
            };
            self.push(Item::Anomaly(a), time, 0, false);
        }
        for (what, n) in issues.overflow {
            let a = Anomaly::ValueOverflow {
                rank,
                what: format!("{what}: {n} call{}", if n == 1 { "" } else { "s" }),
            };
            self.push(Item::Anomaly(a), time, 0, false);
        }
    }
}

/// Whether label `func` creates a persistent or generalized request.
fn is_persistent(func: u16) -> bool {
    matches!(
        funcs::name(func),
        Some(
            "MPI_Send_init"
                | "MPI_Bsend_init"
                | "MPI_Ssend_init"
                | "MPI_Rsend_init"
                | "MPI_Recv_init"
                | "MPI_Grequest_start"
        )
    )
}

/// Byte arithmetic for a collective: sizes from the rank's table, sums that never wrap.
struct Sizes<'a> {
    conv: &'a mut RankConverter,
    time: Time,
    overflow: bool,
}

impl Sizes<'_> {
    fn of(&mut self, count: Option<i64>, dt: Option<i64>) -> u64 {
        self.conv.bytes(count, dt, self.time)
    }

    fn times(&mut self, n: u64, b: u64) -> u64 {
        n.checked_mul(b).unwrap_or_else(|| {
            self.overflow = true;
            u64::MAX
        })
    }

    fn sum(&mut self, counts: &[i32], dt: Option<i64>) -> u64 {
        let mut total = 0u64;
        for &c in counts {
            let b = self.of(Some(i64::from(c)), dt);
            total = total.checked_add(b).unwrap_or_else(|| {
                self.overflow = true;
                u64::MAX
            });
        }
        total
    }
}

/// The `(sent, received)` bytes of a collective for the member with rank `me` of `n` in its
/// communicator (`root`: it is the root), as Score-P counts them (without `MPI_IN_PLACE`,
/// which DUMPI does not record):
///
/// | call | root | others |
/// |---|---|---|
/// | Barrier | 0, 0 | 0, 0 |
/// | Bcast of b bytes | n·b, b | 0, b |
/// | Gather, blocks of b | b, n·b | b, 0 |
/// | Gatherv | its block, all blocks | its block, 0 |
/// | Scatter, blocks of b | n·b, b | 0, b |
/// | Scatterv | all blocks, its block | 0, its block |
/// | Reduce of b | b, n·b | b, 0 |
/// | Allreduce of b | n·b, n·b | |
/// | Allgather, Alltoall | n·send block, n·receive block | |
/// | Allgatherv | n·send block, all receive blocks | |
/// | Alltoallv, Alltoallw | all send blocks, all receive blocks | |
/// | Reduce_scatter | all blocks, n·its block | |
/// | Scan of b | (n−me)·b, (me+1)·b | |
/// | Exscan of b | (n−me−1)·b, me·b | |
fn collective_bytes(
    kind: OpKind,
    rec: &Record,
    me: u64,
    n: u64,
    root: bool,
    z: &mut Sizes<'_>,
) -> (u64, u64) {
    let g = |s: Slot| rec.get(s);
    let count_dt = |z: &mut Sizes<'_>| z.of(g(Slot::Count), g(Slot::Datatype));
    match kind {
        OpKind::Bcast => {
            let b = count_dt(z);
            if root {
                (z.times(n, b), b)
            } else {
                (0, b)
            }
        }
        OpKind::Gather => {
            if root {
                let b = z.of(g(Slot::RecvCount), g(Slot::RecvType));
                (b, z.times(n, b))
            } else {
                (z.of(g(Slot::SendCount), g(Slot::SendType)), 0)
            }
        }
        OpKind::Gatherv => {
            if root {
                let counts = rec.list(List::RecvCounts);
                let mine = counts.get(me as usize).map(|&c| i64::from(c));
                (
                    z.of(mine, g(Slot::RecvType)),
                    z.sum(counts, g(Slot::RecvType)),
                )
            } else {
                (z.of(g(Slot::SendCount), g(Slot::SendType)), 0)
            }
        }
        OpKind::Scatter => {
            if root {
                let b = z.of(g(Slot::SendCount), g(Slot::SendType));
                (z.times(n, b), b)
            } else {
                (0, z.of(g(Slot::RecvCount), g(Slot::RecvType)))
            }
        }
        OpKind::Scatterv => {
            if root {
                let counts = rec.list(List::SendCounts);
                let mine = counts.get(me as usize).map(|&c| i64::from(c));
                (
                    z.sum(counts, g(Slot::SendType)),
                    z.of(mine, g(Slot::SendType)),
                )
            } else {
                (0, z.of(g(Slot::RecvCount), g(Slot::RecvType)))
            }
        }
        OpKind::Reduce => {
            let b = count_dt(z);
            if root {
                (b, z.times(n, b))
            } else {
                (b, 0)
            }
        }
        OpKind::Allreduce => {
            let b = count_dt(z);
            let nb = z.times(n, b);
            (nb, nb)
        }
        OpKind::Allgather | OpKind::Alltoall => {
            let s = z.of(g(Slot::SendCount), g(Slot::SendType));
            let r = z.of(g(Slot::RecvCount), g(Slot::RecvType));
            (z.times(n, s), z.times(n, r))
        }
        OpKind::Allgatherv => {
            let s = z.of(g(Slot::SendCount), g(Slot::SendType));
            (
                z.times(n, s),
                z.sum(rec.list(List::RecvCounts), g(Slot::RecvType)),
            )
        }
        OpKind::Alltoallv => (
            z.sum(rec.list(List::SendCounts), g(Slot::SendType)),
            z.sum(rec.list(List::RecvCounts), g(Slot::RecvType)),
        ),
        OpKind::Alltoallw => {
            let mut pairs = |counts: List, types: List| {
                let types = rec.list(types);
                let mut total = 0u64;
                for (i, &c) in rec.list(counts).iter().enumerate() {
                    let b = z.of(Some(i64::from(c)), types.get(i).map(|&t| i64::from(t)));
                    total = total.checked_add(b).unwrap_or_else(|| {
                        z.overflow = true;
                        u64::MAX
                    });
                }
                total
            };
            let s = pairs(List::SendCounts, List::SendTypes);
            let r = pairs(List::RecvCounts, List::RecvTypes);
            (s, r)
        }
        OpKind::ReduceScatter => {
            let counts = rec.list(List::RecvCounts);
            let mine = counts.get(me as usize).map(|&c| i64::from(c));
            let b = z.of(mine, g(Slot::Datatype));
            (z.sum(counts, g(Slot::Datatype)), z.times(n, b))
        }
        OpKind::Scan => {
            let b = count_dt(z);
            // `me` is a member's index, below `n`.
            (z.times(n - me, b), z.times(me + 1, b))
        }
        OpKind::Exscan => {
            let b = count_dt(z);
            (z.times(n - me - 1, b), z.times(me, b))
        }
        _ => (0, 0),
    }
}
