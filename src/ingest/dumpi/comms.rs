//! The communicators a DUMPI trace creates, resolved across ranks.
//!
//! DUMPI records communicators and groups as per-rank handles (16-bit numbers the tracer gave
//! them: `MPI_COMM_NULL` is 1, `MPI_COMM_WORLD` 2, `MPI_COMM_SELF` 3, `MPI_GROUP_EMPTY` 2),
//! and a call's peers and root as ranks within its communicator. To give every rank a
//! world rank, the members of each communicator must be known, and they depend on what
//! every member passed: the colors and keys of `MPI_Comm_split`, the groups of
//! `MPI_Comm_create`. So the reader first collects, per rank, only the calls that create or
//! free communicators and build groups ([`collect`]; a rank whose footer counts none of them
//! is not read), then [`resolve`]s them: creation calls are collective over their parent, so
//! the k-th creation call on a communicator by each of its members makes one new
//! communicator (or several, for a split or a `MPI_Comm_create` with disjoint groups).
//! Memory follows the number of these calls, not the trace's length.
//!
//! The result is the list of communicators (declared in the header) and, per rank, the
//! communicator each creation call made there, in call order: the second pass over the calls
//! takes them in the same order.
//!
//! What cannot be resolved is kept and reported: inter-communicators (`MPI_Intercomm_create`,
//! `MPI_Comm_spawn`, `MPI_Comm_accept`, …) are not modelled, a creation that not every member
//! recorded is resolved from the members that did, a group built from a handle the trace
//! never defined is unknown; each is a [`Anomaly::SkippedRecord`], and the calls on such a
//! communicator are kept as plain calls.

use std::collections::BTreeMap;

use super::bin::{is_cut_short, Stream};
use super::funcs;
use super::record::{Decoder, List, Record, Slot};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{Anomaly, CommId, Communicator, Rank};

/// `MPI_COMM_NULL`'s handle (and `MPI_GROUP_NULL`'s).
pub(crate) const NULL_HANDLE: u16 = 1;
/// `MPI_COMM_WORLD`'s handle.
pub(crate) const WORLD_HANDLE: u16 = 2;
/// `MPI_COMM_SELF`'s handle.
pub(crate) const SELF_HANDLE: u16 = 3;
/// `MPI_GROUP_EMPTY`'s handle.
const EMPTY_GROUP_HANDLE: u16 = 2;
/// The world communicator's id.
pub(crate) const WORLD: CommId = 0;

/// The id of rank `rank`'s `MPI_COMM_SELF`.
pub(crate) fn self_comm(rank: Rank) -> CommId {
    1 + rank
}

/// How a communicator-creating call makes its communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Creation {
    Dup,
    Create,
    Split,
    Cart,
    Graph,
    CartSub,
    /// An inter-communicator or a connection to other processes: not modelled.
    Inter,
}

/// What a communicator or group call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mgmt {
    /// Creates a communicator.
    New(Creation),
    /// `MPI_Comm_free`.
    Free,
    CommGroup,
    Incl,
    Excl,
    RangeIncl,
    RangeExcl,
    Union,
    Intersection,
    Difference,
    GroupFree,
    /// A group of something that is not a modelled communicator (a window, a file, the
    /// remote side of an inter-communicator).
    ForeignGroup,
}

impl Mgmt {
    fn of(name: &str) -> Option<Mgmt> {
        use Creation::*;
        Some(match name {
            "MPI_Comm_dup" => Mgmt::New(Dup),
            "MPI_Comm_create" => Mgmt::New(Create),
            "MPI_Comm_split" => Mgmt::New(Split),
            "MPI_Cart_create" => Mgmt::New(Cart),
            "MPI_Graph_create" => Mgmt::New(Graph),
            "MPI_Cart_sub" => Mgmt::New(CartSub),
            "MPI_Intercomm_create"
            | "MPI_Intercomm_merge"
            | "MPI_Comm_spawn"
            | "MPI_Comm_spawn_multiple"
            | "MPI_Comm_accept"
            | "MPI_Comm_connect" => Mgmt::New(Inter),
            "MPI_Comm_free" => Mgmt::Free,
            "MPI_Comm_group" => Mgmt::CommGroup,
            "MPI_Group_incl" => Mgmt::Incl,
            "MPI_Group_excl" => Mgmt::Excl,
            "MPI_Group_range_incl" => Mgmt::RangeIncl,
            "MPI_Group_range_excl" => Mgmt::RangeExcl,
            "MPI_Group_union" => Mgmt::Union,
            "MPI_Group_intersection" => Mgmt::Intersection,
            "MPI_Group_difference" => Mgmt::Difference,
            "MPI_Group_free" => Mgmt::GroupFree,
            "MPI_Comm_remote_group" | "MPI_Win_get_group" | "MPI_File_get_group" => {
                Mgmt::ForeignGroup
            }
            _ => return None,
        })
    }
}

/// [`Mgmt`] by function label.
pub(crate) struct MgmtTable(Vec<Option<Mgmt>>);

impl MgmtTable {
    /// The table for every label.
    pub fn new() -> MgmtTable {
        MgmtTable(
            (0..funcs::END_OF_STREAM)
                .map(|f| funcs::name(f).and_then(Mgmt::of))
                .collect(),
        )
    }

    /// What label `func` does to communicators and groups.
    #[inline]
    pub fn get(&self, func: u16) -> Option<Mgmt> {
        self.0.get(usize::from(func)).copied().flatten()
    }

    /// Whether a rank whose footer has these call counts made any such call (without a
    /// footer, it may have).
    pub fn any_called(&self, counts: Option<&[u32]>) -> bool {
        let Some(counts) = counts else { return true };
        self.0
            .iter()
            .zip(counts)
            .any(|(m, &n)| m.is_some() && n > 0)
    }
}

/// One communicator or group call of one rank, as the first pass keeps it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    func: u16,
    offset: u64,
    mgmt: Mgmt,
    /// The communicator (parent, freed or grouped) or the first group.
    a: u16,
    /// The second group (union, intersection, difference) or the group of `MPI_Comm_create`.
    b: u16,
    /// The new communicator or group.
    new: u16,
    /// Color of a split, node count of a graph.
    color: i32,
    key: i32,
    /// Ranks (incl, excl), range rows (length-prefixed), dims (cart), remaining dims (sub).
    list: Vec<i32>,
}

impl Call {
    /// The call `rec` makes, if `mgmt` says it is one.
    pub fn of(rec: &Record, mgmt: Mgmt) -> Call {
        let h = |s: Slot| rec.get(s).map_or(0, |v| v as u16);
        let i = |s: Slot| rec.get(s).map_or(0, |v| v as i32);
        let (a, b, new, list) = match mgmt {
            Mgmt::New(Creation::Create) => (
                h(Slot::OldComm),
                h(Slot::Group),
                h(Slot::NewComm),
                List::Ignored,
            ),
            Mgmt::New(Creation::Cart) => (h(Slot::OldComm), 0, h(Slot::NewComm), List::Dims),
            Mgmt::New(Creation::CartSub) => {
                (h(Slot::OldComm), 0, h(Slot::NewComm), List::RemainDims)
            }
            Mgmt::New(Creation::Inter) => (h(Slot::OldComm), 0, h(Slot::NewComm), List::Ignored),
            Mgmt::New(_) => (h(Slot::OldComm), 0, h(Slot::NewComm), List::Ignored),
            Mgmt::Free => (h(Slot::Comm), 0, 0, List::Ignored),
            Mgmt::CommGroup | Mgmt::ForeignGroup => {
                (h(Slot::Comm), 0, h(Slot::Group), List::Ignored)
            }
            Mgmt::Incl | Mgmt::Excl => (h(Slot::Group), 0, h(Slot::NewGroup), List::Ranks),
            Mgmt::RangeIncl | Mgmt::RangeExcl => {
                (h(Slot::Group), 0, h(Slot::NewGroup), List::Ranges)
            }
            Mgmt::Union | Mgmt::Intersection | Mgmt::Difference => (
                h(Slot::Group),
                h(Slot::Group2),
                h(Slot::NewGroup),
                List::Ignored,
            ),
            Mgmt::GroupFree => (h(Slot::Group), 0, 0, List::Ignored),
        };
        let color = match mgmt {
            Mgmt::New(Creation::Graph) => i(Slot::Count),
            _ => i(Slot::Color),
        };
        Call {
            func: rec.func,
            offset: rec.offset,
            mgmt,
            a,
            b,
            new,
            color,
            key: i(Slot::Key),
            list: rec.list(list).to_vec(),
        }
    }
}

/// What the first pass learns of one rank.
#[derive(Debug, Default)]
pub(crate) struct RankCalls {
    /// Its communicator and group calls, in order.
    pub calls: Vec<Call>,
    /// Wall-clock start of its first record (ns since the epoch), if any has one.
    pub first_time: Option<u64>,
    /// `MPI_Init`'s argument vector, if its first record is `MPI_Init` or `MPI_Init_thread`.
    pub argv: Vec<String>,
}

/// First pass over one rank's stream: its first time and `MPI_Init`'s arguments, and, if
/// `all` is set, every communicator and group call (otherwise only the first records are
/// read).
pub(crate) fn collect(
    stream: &mut Stream,
    decoder: &mut Decoder,
    table: &MgmtTable,
    all: bool,
) -> Result<RankCalls> {
    let mut out = RankCalls::default();
    let mut rec = Record::default();
    let mut first = true;
    // A cut file's calls end where it was cut.
    while decoder.next(stream, &mut rec).or_else(|e| {
        if is_cut_short(&e) {
            Ok(false)
        } else {
            Err(e)
        }
    })? {
        if first {
            first = false;
            out.argv = std::mem::take(&mut rec.argv);
        }
        if out.first_time.is_none() {
            out.first_time = rec.wall.map(|w| w.0);
        }
        if !all {
            if out.first_time.is_some() {
                break;
            }
            continue;
        }
        if let Some(m) = table.get(rec.func) {
            out.calls.push(Call::of(&rec, m));
        }
    }
    Ok(out)
}

/// What [`resolve`] found.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    /// The communicators the trace created, with ids from [`first_created`] on.
    pub created: Vec<Communicator>,
    /// Per rank, the communicator each of its creation calls made there (`None`: it got
    /// `MPI_COMM_NULL`, or the call could not be resolved), in call order.
    pub bindings: Vec<Vec<Option<CommId>>>,
    /// What could not be resolved.
    pub anomalies: Vec<Anomaly>,
}

/// A rank's communicator handle during resolution.
#[derive(Debug, Clone, Copy)]
enum Handle {
    /// Made by pending creation `usize`.
    Pending(usize),
    /// `MPI_COMM_NULL`, or a communicator that could not be resolved.
    Unknown,
}

/// What one member passed to a creation call.
#[derive(Debug, Clone)]
struct Contribution {
    rank: Rank,
    creation: Creation,
    /// The group of `MPI_Comm_create` (world ranks; `None` if unknown).
    group: Option<Vec<Rank>>,
    color: i32,
    key: i32,
    list: Vec<i32>,
}

/// A creation call being collected from the members of its parent.
#[derive(Debug)]
struct Pending {
    parent: CommId,
    seq: u32,
    func: u16,
    contributions: Vec<Contribution>,
    /// Per contributing rank, the communicator it got; set once resolved.
    result: Option<FxHashMap<Rank, Option<CommId>>>,
}

#[derive(Debug, Default)]
struct RankState {
    cursor: usize,
    comms: FxHashMap<u16, Handle>,
    groups: FxHashMap<u16, Option<Vec<Rank>>>,
    seq: FxHashMap<CommId, u32>,
    bindings: Vec<Binding>,
}

#[derive(Debug, Clone, Copy)]
enum Binding {
    Fixed(Option<CommId>),
    Pending(usize),
}

/// The global state of the resolution.
struct Resolver {
    first_id: CommId,
    /// Members (world ranks, communicator order) and Cartesian dimensions of every
    /// communicator by id: the world, the ranks' selves, then the created ones.
    members: Vec<Vec<Rank>>,
    dims: FxHashMap<CommId, Vec<i32>>,
    created: Vec<Communicator>,
    pending: Vec<Pending>,
    by_key: FxHashMap<(CommId, u32), usize>,
    anomalies: Vec<Anomaly>,
}

enum Step {
    Done,
    Blocked,
}

/// The id of the first communicator a trace of `ranks` ranks creates (after the world and
/// every rank's `MPI_COMM_SELF`).
pub(crate) fn first_created(ranks: Rank) -> CommId {
    1 + ranks
}

/// Resolves the communicator calls of every rank (`calls[r]` for rank `r`); created
/// communicators get ids from [`first_created`] on.
pub(crate) fn resolve(calls: &[Vec<Call>]) -> Resolved {
    let ranks = calls.len() as Rank;
    let mut r = Resolver {
        first_id: first_created(ranks),
        members: std::iter::once((0..ranks).collect())
            .chain((0..ranks).map(|rank| vec![rank]))
            .collect(),
        dims: FxHashMap::default(),
        created: Vec::new(),
        pending: Vec::new(),
        by_key: FxHashMap::default(),
        anomalies: Vec::new(),
    };
    let mut states: Vec<RankState> = (0..ranks).map(|_| RankState::default()).collect();
    loop {
        let mut progress = false;
        let mut unfinished = false;
        for (rank, state) in states.iter_mut().enumerate() {
            let rank = rank as Rank;
            while let Some(call) = calls[rank as usize].get(state.cursor) {
                match r.step(rank, state, call) {
                    Step::Done => {
                        state.cursor += 1;
                        progress = true;
                    }
                    Step::Blocked => {
                        unfinished = true;
                        break;
                    }
                }
            }
        }
        if !unfinished {
            break;
        }
        if !progress {
            // Some members never recorded a call the others wait on: resolve what was
            // collected so far, so that every rank moves on.
            let open: Vec<usize> = (0..r.pending.len())
                .filter(|&p| r.pending[p].result.is_none())
                .collect();
            for p in open {
                r.complete(p, true);
            }
        }
    }
    // Any creation still collecting (its last members never reached it) is resolved too.
    for p in 0..r.pending.len() {
        if r.pending[p].result.is_none() {
            r.complete(p, true);
        }
    }
    let bindings = states
        .iter()
        .enumerate()
        .map(|(rank, s)| {
            s.bindings
                .iter()
                .map(|b| match *b {
                    Binding::Fixed(c) => c,
                    Binding::Pending(p) => r.pending[p]
                        .result
                        .as_ref()
                        .and_then(|m| m.get(&(rank as Rank)).copied().flatten()),
                })
                .collect()
        })
        .collect();
    Resolved {
        created: r.created,
        bindings,
        anomalies: r.anomalies,
    }
}

impl Resolver {
    fn skipped(&mut self, rank: Rank, what: String) {
        self.anomalies.push(Anomaly::SkippedRecord {
            rank: Some(rank),
            time: None,
            what,
        });
    }

    /// The communicator a handle names, once known: `Err(())` while its creation is still
    /// collecting.
    fn comm(
        &self,
        state: &RankState,
        rank: Rank,
        handle: u16,
    ) -> std::result::Result<Option<CommId>, ()> {
        match handle {
            WORLD_HANDLE => return Ok(Some(WORLD)),
            SELF_HANDLE => return Ok(Some(self_comm(rank))),
            _ => {}
        }
        match state.comms.get(&handle) {
            Some(Handle::Pending(p)) => match &self.pending[*p].result {
                Some(m) => Ok(m.get(&rank).copied().flatten()),
                None => Err(()),
            },
            Some(Handle::Unknown) | None => Ok(None),
        }
    }

    fn group(state: &RankState, handle: u16) -> Option<Vec<Rank>> {
        if handle == EMPTY_GROUP_HANDLE {
            return Some(Vec::new());
        }
        state.groups.get(&handle).cloned().flatten()
    }

    fn step(&mut self, rank: Rank, state: &mut RankState, call: &Call) -> Step {
        let name = funcs::name(call.func).unwrap_or("call");
        let at = call.offset;
        match call.mgmt {
            Mgmt::New(creation) => {
                let Ok(parent) = self.comm(state, rank, call.a) else {
                    return Step::Blocked;
                };
                let Some(parent) = parent else {
                    self.skipped(
                        rank,
                        format!(
                            "the communicator made by {name} at byte {at}: it was called on communicator handle {}, which the trace never defined",
                            call.a
                        ),
                    );
                    state.bindings.push(Binding::Fixed(None));
                    state.comms.insert(call.new, Handle::Unknown);
                    return Step::Done;
                };
                if creation == Creation::Inter {
                    self.skipped(
                        rank,
                        format!("the communicator made by {name} at byte {at}: inter-communicators and connections to other programs are not modelled"),
                    );
                    state.bindings.push(Binding::Fixed(None));
                    state.comms.insert(call.new, Handle::Unknown);
                    return Step::Done;
                }
                let group = if creation == Creation::Create {
                    match Self::group(state, call.b) {
                        Some(g) => Some(g),
                        None => {
                            self.skipped(
                                rank,
                                format!("the group passed to {name} at byte {at} (handle {}): the trace never defined it", call.b),
                            );
                            None
                        }
                    }
                } else {
                    None
                };
                let seq = state.seq.entry(parent).or_insert(0);
                let key = (parent, *seq);
                *seq += 1;
                let p = *self.by_key.entry(key).or_insert_with(|| {
                    self.pending.push(Pending {
                        parent,
                        seq: key.1,
                        func: call.func,
                        contributions: Vec::new(),
                        result: None,
                    });
                    self.pending.len() - 1
                });
                if self.pending[p].result.is_some() {
                    // The creation was resolved without this rank (forced): it gets nothing.
                    state.bindings.push(Binding::Fixed(None));
                    state.comms.insert(call.new, Handle::Unknown);
                    return Step::Done;
                }
                self.pending[p].contributions.push(Contribution {
                    rank,
                    creation,
                    group,
                    color: call.color,
                    key: call.key,
                    list: call.list.clone(),
                });
                state.bindings.push(Binding::Pending(p));
                state.comms.insert(call.new, Handle::Pending(p));
                if self.pending[p].contributions.len() >= self.members[parent as usize].len() {
                    self.complete(p, false);
                }
                Step::Done
            }
            Mgmt::Free => {
                if call.a != WORLD_HANDLE && call.a != SELF_HANDLE {
                    state.comms.remove(&call.a);
                }
                Step::Done
            }
            Mgmt::CommGroup => {
                let Ok(comm) = self.comm(state, rank, call.a) else {
                    return Step::Blocked;
                };
                let g = comm.map(|c| self.members[c as usize].clone());
                state.groups.insert(call.new, g);
                Step::Done
            }
            Mgmt::ForeignGroup => {
                state.groups.insert(call.new, None);
                Step::Done
            }
            Mgmt::GroupFree => {
                state.groups.remove(&call.a);
                Step::Done
            }
            Mgmt::Incl | Mgmt::Excl | Mgmt::RangeIncl | Mgmt::RangeExcl => {
                let g = Self::group(state, call.a).and_then(|g| {
                    let positions = match call.mgmt {
                        Mgmt::Incl | Mgmt::Excl => Some(call.list.clone()),
                        _ => expand_ranges(&call.list, g.len()),
                    }?;
                    let include = matches!(call.mgmt, Mgmt::Incl | Mgmt::RangeIncl);
                    subgroup(&g, &positions, include)
                });
                if g.is_none() {
                    self.skipped(
                        rank,
                        format!("the group made by {name} at byte {at}: its base group is unknown or it names ranks outside it"),
                    );
                }
                state.groups.insert(call.new, g);
                Step::Done
            }
            Mgmt::Union | Mgmt::Intersection | Mgmt::Difference => {
                let g = match (Self::group(state, call.a), Self::group(state, call.b)) {
                    (Some(a), Some(b)) => Some(match call.mgmt {
                        Mgmt::Union => {
                            let mut u = a.clone();
                            u.extend(b.iter().filter(|m| !a.contains(m)));
                            u
                        }
                        Mgmt::Intersection => a.into_iter().filter(|m| b.contains(m)).collect(),
                        _ => a.into_iter().filter(|m| !b.contains(m)).collect(),
                    }),
                    _ => {
                        self.skipped(rank, format!("the group made by {name} at byte {at}: one of its groups is unknown"));
                        None
                    }
                };
                state.groups.insert(call.new, g);
                Step::Done
            }
        }
    }

    fn parent_name(&self, id: CommId) -> String {
        if id == WORLD {
            "MPI_COMM_WORLD".to_string()
        } else if id < self.first_id {
            format!("MPI_COMM_SELF of rank {}", id - 1)
        } else {
            format!("communicator {id}")
        }
    }

    /// A new communicator with these members; its id.
    fn declare(&mut self, name: String, members: Vec<Rank>) -> CommId {
        let id = self.first_id + self.created.len() as CommId;
        self.members.push(members.clone());
        self.created.push(Communicator { id, name, members });
        id
    }

    /// Resolves pending creation `p` from its contributions (`forced`: not every member of
    /// the parent contributed).
    fn complete(&mut self, p: usize, forced: bool) {
        let pend = &self.pending[p];
        let (parent, seq, func) = (pend.parent, pend.seq, pend.func);
        let contributions = std::mem::take(&mut self.pending[p].contributions);
        let name = funcs::name(func).unwrap_or("call");
        let parent_members = self.members[parent as usize].clone();
        let base = format!("{name} #{seq} of {}", self.parent_name(parent));
        let mut result: FxHashMap<Rank, Option<CommId>> = FxHashMap::default();
        if forced {
            let missing: Vec<Rank> = parent_members
                .iter()
                .copied()
                .filter(|m| !contributions.iter().any(|c| c.rank == *m))
                .collect();
            if let Some(&first) = contributions.first().map(|c| &c.rank) {
                self.skipped(
                    first,
                    format!(
                        "part of {base}: {} of its {} members never recorded the call (ranks {}); it was resolved from the others",
                        missing.len(),
                        parent_members.len(),
                        crate::model::rank_ranges(&missing)
                    ),
                );
            }
        }
        let Some(creation) = contributions.first().map(|c| c.creation) else {
            self.pending[p].result = Some(result);
            return;
        };
        // Members whose k-th creation call on the parent was another kind of call.
        let (same, other): (Vec<Contribution>, Vec<Contribution>) = contributions
            .into_iter()
            .partition(|c| c.creation == creation);
        for c in &other {
            result.insert(c.rank, None);
            self.skipped(
                c.rank,
                format!("the communicator of its call {seq} on {}: the other members made another kind of call there", self.parent_name(parent)),
            );
        }
        let local = |rank: Rank| parent_members.iter().position(|&m| m == rank);
        match creation {
            Creation::Dup | Creation::Cart | Creation::Graph => {
                // A Cartesian or graph topology may use fewer processes than its parent has.
                let used = match creation {
                    Creation::Cart => same.first().map(|c| dims_product(&c.list)),
                    Creation::Graph => same.first().map(|c| usize::try_from(c.color).ok()),
                    _ => None,
                }
                .flatten()
                .unwrap_or(parent_members.len())
                .min(parent_members.len());
                let members = parent_members[..used].to_vec();
                let id = self.declare(base, members);
                if creation == Creation::Cart {
                    if let Some(c) = same.first() {
                        self.dims.insert(id, c.list.clone());
                    }
                }
                for c in &same {
                    let inside = local(c.rank).is_some_and(|i| i < used);
                    result.insert(c.rank, inside.then_some(id));
                }
            }
            Creation::Create => {
                // Each distinct group makes its own communicator (MPI 2.2 allows disjoint
                // groups in one call); a member outside its own group gets MPI_COMM_NULL.
                let mut groups: Vec<Vec<Rank>> = Vec::new();
                for c in &same {
                    if let Some(g) = &c.group {
                        if !g.is_empty() && !groups.contains(g) {
                            groups.push(g.clone());
                        }
                    }
                }
                let several = groups.len() > 1;
                let ids: Vec<CommId> = groups
                    .iter()
                    .enumerate()
                    .map(|(i, g)| {
                        let n = if several {
                            format!("{base}, group {i}")
                        } else {
                            base.clone()
                        };
                        self.declare(n, g.clone())
                    })
                    .collect();
                for c in &same {
                    let id = c.group.as_ref().and_then(|g| {
                        let i = groups.iter().position(|x| x == g)?;
                        g.contains(&c.rank).then_some(ids[i])
                    });
                    result.insert(c.rank, id);
                }
            }
            Creation::Split | Creation::CartSub => {
                let dims = self.dims.get(&parent).cloned();
                let mut colors: BTreeMap<Vec<i64>, Vec<(i64, usize, Rank)>> = BTreeMap::new();
                let mut sub_dims: BTreeMap<Vec<i64>, Vec<i32>> = BTreeMap::new();
                for c in &same {
                    let Some(i) = local(c.rank) else {
                        result.insert(c.rank, None);
                        continue;
                    };
                    let color_key = if creation == Creation::Split {
                        (c.color >= 0).then(|| (vec![i64::from(c.color)], i64::from(c.key)))
                    } else {
                        dims.as_ref()
                            .and_then(|d| cart_sub_color(d, &c.list, i))
                            .map(|(color, kept)| {
                                sub_dims.insert(color.clone(), kept);
                                (color, i as i64)
                            })
                    };
                    match color_key {
                        Some((color, key)) => {
                            colors.entry(color).or_default().push((key, i, c.rank))
                        }
                        None => {
                            if creation == Creation::CartSub {
                                self.skipped(
                                    c.rank,
                                    format!("the communicator made by {name} #{seq}: its parent has no Cartesian dimensions the trace recorded, or the remaining dimensions do not fit them"),
                                );
                            }
                            result.insert(c.rank, None);
                        }
                    }
                }
                for (color, mut entries) in colors {
                    entries.sort();
                    let members: Vec<Rank> = entries.iter().map(|e| e.2).collect();
                    let label = if creation == Creation::Split {
                        format!("{base}, color {}", color[0])
                    } else {
                        format!("{base}, coordinates {color:?}")
                    };
                    let id = self.declare(label, members);
                    if let Some(kept) = sub_dims.remove(&color) {
                        self.dims.insert(id, kept);
                    }
                    for e in entries {
                        result.insert(e.2, Some(id));
                    }
                }
            }
            Creation::Inter => {}
        }
        self.pending[p].result = Some(result);
    }
}

/// The number of processes a Cartesian topology of these dimensions uses.
fn dims_product(dims: &[i32]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    })
}

/// The color of the process with Cartesian rank `i` in `MPI_Cart_sub(remain)` of a topology
/// of `dims` (its coordinates in the dropped dimensions), and the kept dimensions.
fn cart_sub_color(dims: &[i32], remain: &[i32], i: usize) -> Option<(Vec<i64>, Vec<i32>)> {
    if dims.len() != remain.len() || i >= dims_product(dims)? {
        return None;
    }
    let mut coords = vec![0i64; dims.len()];
    let mut rest = i;
    for d in (0..dims.len()).rev() {
        let size = usize::try_from(dims[d]).ok()?.max(1);
        coords[d] = (rest % size) as i64;
        rest /= size;
    }
    let color = (0..dims.len())
        .filter(|&d| remain[d] == 0)
        .map(|d| coords[d])
        .collect();
    let kept = (0..dims.len())
        .filter(|&d| remain[d] != 0)
        .map(|d| dims[d])
        .collect();
    Some((color, kept))
}

/// The positions that `MPI_Group_range_incl`'s (first, last, stride) rows name, in a group of
/// `size` (`None` if a row is malformed or leaves the group).
fn expand_ranges(rows: &[i32], size: usize) -> Option<Vec<i32>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let len = usize::try_from(rows[i]).ok()?;
        let row = rows.get(i + 1..i + 1 + len)?;
        i += 1 + len;
        let [first, last, stride] = <[i32; 3]>::try_from(row).ok()?;
        if stride == 0 {
            return None;
        }
        let mut r = first;
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            if r < 0 || r as usize >= size || out.len() >= size {
                return None;
            }
            out.push(r);
            r = r.checked_add(stride)?;
        }
    }
    Some(out)
}

/// The members of `group` at `positions` (`include`), or all but those.
fn subgroup(group: &[Rank], positions: &[i32], include: bool) -> Option<Vec<Rank>> {
    let mut chosen = Vec::with_capacity(positions.len());
    for &p in positions {
        let p = usize::try_from(p).ok().filter(|&p| p < group.len())?;
        chosen.push(p);
    }
    Some(if include {
        chosen.iter().map(|&p| group[p]).collect()
    } else {
        group
            .iter()
            .enumerate()
            .filter(|(i, _)| !chosen.contains(i))
            .map(|(_, &m)| m)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_subgroups() {
        assert_eq!(
            expand_ranges(&[3, 0, 6, 2, 3, 7, 5, -1], 8),
            Some(vec![0, 2, 4, 6, 7, 6, 5])
        );
        assert_eq!(expand_ranges(&[3, 0, 9, 1], 8), None);
        assert_eq!(expand_ranges(&[3, 0, 4, 0], 8), None);
        assert_eq!(
            subgroup(&[10, 11, 12, 13], &[3, 1], true),
            Some(vec![13, 11])
        );
        assert_eq!(
            subgroup(&[10, 11, 12, 13], &[3, 1], false),
            Some(vec![10, 12])
        );
        assert_eq!(subgroup(&[10, 11], &[2], true), None);
    }

    #[test]
    fn cart_sub_groups_rows_and_columns() {
        // A 2 x 3 grid: keeping dimension 1 groups each row, keeping 0 each column.
        let rows: Vec<Vec<i64>> = (0..6)
            .map(|i| cart_sub_color(&[2, 3], &[0, 1], i).unwrap().0)
            .collect();
        assert_eq!(
            rows,
            vec![vec![0], vec![0], vec![0], vec![1], vec![1], vec![1]]
        );
        let cols: Vec<Vec<i64>> = (0..6)
            .map(|i| cart_sub_color(&[2, 3], &[1, 0], i).unwrap().0)
            .collect();
        assert_eq!(
            cols,
            vec![vec![0], vec![1], vec![2], vec![0], vec![1], vec![2]]
        );
        assert_eq!(cart_sub_color(&[2, 3], &[1, 0], 1).unwrap().1, vec![2]);
    }

    fn call(mgmt: Mgmt, a: u16, new: u16, color: i32, key: i32) -> Call {
        Call {
            func: funcs::label("MPI_Comm_split").unwrap(),
            offset: 0,
            mgmt,
            a,
            b: 0,
            new,
            color,
            key,
            list: Vec::new(),
        }
    }

    #[test]
    fn split_orders_members_by_key_then_parent_rank() {
        // Four ranks split world into even and odd ranks, keys reversing the order.
        let calls: Vec<Vec<Call>> = (0..4)
            .map(|r| {
                vec![call(
                    Mgmt::New(Creation::Split),
                    WORLD_HANDLE,
                    5,
                    r % 2,
                    10 - r,
                )]
            })
            .collect();
        let res = resolve(&calls);
        assert_eq!(res.created.len(), 2);
        assert_eq!(res.created[0].members, vec![2, 0]);
        assert_eq!(res.created[1].members, vec![3, 1]);
        assert_eq!(res.bindings[0], vec![Some(5)]);
        assert_eq!(res.bindings[3], vec![Some(6)]);
        assert!(res.anomalies.is_empty());
    }

    #[test]
    fn a_missing_member_is_reported_and_the_others_resolved() {
        let mut calls: Vec<Vec<Call>> = (0..3)
            .map(|_| vec![call(Mgmt::New(Creation::Dup), WORLD_HANDLE, 4, 0, 0)])
            .collect();
        calls[2].clear();
        let res = resolve(&calls);
        assert_eq!(res.created[0].members, vec![0, 1, 2]);
        assert_eq!(res.bindings[1], vec![Some(4)]);
        assert_eq!(res.anomalies.len(), 1);
    }
}
