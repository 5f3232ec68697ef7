//! Where an OTF2 archive's definitions go in the MTF trace: MPI's location groups become
//! processes with world ranks (a trace with no MPI has its process location groups as
//! processes), their locations and those of the accelerators they created become their
//! threads, system tree nodes processors, MPI communicators get their members as world ranks,
//! and regions become MPI calls or user routines. Every location that is not a rank's main
//! thread is also listed as a [`Location`] with its kind. Groups and "communicators" of other
//! paradigms (CUDA, OpenCL, OpenMP, offload, the measurement system) list locations, not
//! ranks: they never take part in rank translation.

use std::collections::{BTreeMap, BTreeSet};

use super::anchor::Anchor;
use super::convert::{CommRanks, Context, RegionInfo};
use super::defs::{self, Definitions};
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::{
    Anomaly, Communicator, Location, LocationKind, OpKind, Process, Processor, Rank, StrId,
    TraceHeader,
};

/// The MTF trace's declarations and how each location maps onto them.
pub(crate) struct Layout {
    pub header: TraceHeader,
    /// Location id -> (rank, thread), for every location whose events become MTF items:
    /// the locations of a process, and of the accelerators a process created.
    pub threads: Threads,
    /// Every location that is not a rank's main (MPI) thread, by location id, as the model
    /// lists it; the reader adds what each one recorded.
    pub others: Vec<(u64, Location)>,
    pub context: Context,
    /// The trace's string table (region names), by string id.
    pub strings: Vec<String>,
    /// What the definitions hold that breaks the textbook (kept, and reported).
    pub anomalies: Vec<Anomaly>,
}

/// World ranks: location group id -> rank, and each rank's MPI location (its thread 0).
struct Ranks {
    of_group: FxHashMap<u32, Rank>,
    mpi_location: FxHashMap<u32, u64>,
    /// Ranks of the MPI locations group whose member gives them no location: kept as
    /// processes without one.
    unplaced: Vec<(Rank, Unplaced)>,
    /// The number of ranks.
    count: usize,
}

/// Why a rank of the MPI locations group has no location.
#[derive(Debug, Clone, Copy)]
enum Unplaced {
    /// The member location is not defined: the rank's data is not in the archive.
    UndefinedLocation(u64),
    /// The member location group (`COMM_LOCATION_GROUPS`) is not defined.
    UndefinedGroup(u64),
    /// The member (`what`: a location or a location group) is an earlier rank's (`first`).
    Repeated {
        what: &'static str,
        member: u64,
        first: Rank,
    },
}

impl Unplaced {
    /// The anomaly that reports rank `rank` so.
    fn anomaly(self, rank: Rank, anchor: &Anchor) -> Anomaly {
        let skipped = |what| Anomaly::SkippedRecord {
            rank: Some(rank),
            time: None,
            what,
        };
        match self {
            Unplaced::UndefinedLocation(location) => Anomaly::MissingRankData {
                rank,
                thread: 0,
                file: anchor.event_path(location).display().to_string(),
                announced: None,
                read: 0,
                cut_at: None,
            },
            Unplaced::UndefinedGroup(group) => skipped(format!(
                "the MPI locations group lists location group {group} as rank {rank}, which is not defined: the rank has no location"
            )),
            Unplaced::Repeated {
                what,
                member,
                first,
            } => skipped(format!(
                "the MPI locations group lists {what} {member} again as rank {rank} (its process is rank {first}'s): the rank has no location"
            )),
        }
    }
}

impl Layout {
    pub fn new(anchor: &Anchor, defs: &Definitions) -> Result<Layout> {
        let file = anchor.global_defs_path().display().to_string();
        let bad =
            |message: String| Error::input(file.clone(), 0, 0, "bad definitions", message, "");
        if defs.clock.is_none() {
            return Err(bad(
                "the global definitions have no ClockProperties record (ticks per second are unknown)".into(),
            ));
        }
        let ranks = world_ranks(defs).map_err(bad)?;
        let (threads, others) = threads(defs, &ranks);
        let (processes, processors) = processes(defs, &ranks);
        let mut context = Context::default();
        let mut anomalies: Vec<Anomaly> = (ranks.unplaced.iter())
            .map(|&(rank, why)| why.anomaly(rank, anchor))
            .collect();
        let communicators =
            communicators(defs, processes.len() as u32, &mut context, &mut anomalies)
                .map_err(bad)?;
        let strings = regions(defs, &mut context);
        let header = TraceHeader {
            scenario: String::new(),
            trace_name: anchor
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            comments: describe(anchor),
            processors,
            processes,
            communicators,
            locations: Vec::new(),
            untimed: false,
        };
        Ok(Layout {
            header,
            threads,
            others,
            context,
            strings,
            anomalies,
        })
    }
}

/// Whether a group is MPI's: only MPI's groups give ranks and communicators (CUDA, OpenCL,
/// OpenMP, offload and the measurement system define groups of locations too).
fn is_mpi(g: &defs::Group) -> bool {
    g.paradigm == defs::PARADIGM_MPI
}

/// Ranks in the order of the MPI `COMM_LOCATIONS` (or `COMM_LOCATION_GROUPS`) group; without
/// one (a trace with no MPI), the process location groups numbered by id. A member that is
/// not defined, or whose process an earlier rank has, leaves its rank without a location.
fn world_ranks(defs: &Definitions) -> std::result::Result<Ranks, String> {
    let group_of: FxHashMap<u64, u32> = defs.locations.iter().map(|l| (l.id, l.group)).collect();
    let mut ranks = Ranks {
        of_group: FxHashMap::default(),
        mpi_location: FxHashMap::default(),
        unplaced: Vec::new(),
        count: 0,
    };
    let world = defs
        .groups
        .iter()
        .filter(|(_, g)| {
            is_mpi(g)
                && !g.members.is_empty()
                && (g.kind == defs::GROUP_COMM_LOCATIONS
                    || g.kind == defs::GROUP_COMM_LOCATION_GROUPS)
        })
        .min_by_key(|(id, _)| **id);
    match world {
        Some((_, g)) => {
            ranks.count = g.members.len();
            let locations = g.kind == defs::GROUP_COMM_LOCATIONS;
            for (rank, &member) in g.members.iter().enumerate() {
                let rank = rank as Rank;
                let group = if locations {
                    group_of.get(&member).copied()
                } else {
                    u32::try_from(member)
                        .ok()
                        .filter(|&id| defs.location_groups.iter().any(|l| l.id == id))
                };
                let Some(group) = group else {
                    let why = if locations {
                        Unplaced::UndefinedLocation(member)
                    } else {
                        Unplaced::UndefinedGroup(member)
                    };
                    ranks.unplaced.push((rank, why));
                    continue;
                };
                if let Some(&first) = ranks.of_group.get(&group) {
                    let what = if locations {
                        "location"
                    } else {
                        "location group"
                    };
                    let why = Unplaced::Repeated {
                        what,
                        member,
                        first,
                    };
                    ranks.unplaced.push((rank, why));
                    continue;
                }
                ranks.of_group.insert(group, rank);
                if locations {
                    ranks.mpi_location.insert(group, member);
                }
            }
        }
        None => {
            let mut ids: Vec<u32> = defs
                .location_groups
                .iter()
                .filter(|g| g.kind == defs::LOCATION_GROUP_PROCESS)
                .map(|g| g.id)
                .collect();
            ids.sort_unstable();
            for (rank, id) in ids.into_iter().enumerate() {
                ranks.of_group.insert(id, rank as Rank);
            }
            ranks.count = ranks.of_group.len();
        }
    }
    if ranks.count == 0 {
        return Err("the archive defines no processes (location groups of type process)".into());
    }
    Ok(ranks)
}

/// Location id -> (rank, thread).
type Threads = BTreeMap<u64, (Rank, u32)>;

/// The model's word for an OTF2 location type.
fn location_kind(kind: u8) -> LocationKind {
    match kind {
        defs::LOCATION_CPU_THREAD => LocationKind::CpuThread,
        defs::LOCATION_ACCELERATOR => LocationKind::Accelerator,
        defs::LOCATION_METRIC => LocationKind::Metric,
        _ => LocationKind::Other,
    }
}

/// Each location's (rank, thread): the rank's MPI location first, then its other CPU
/// threads, its other locations, and the locations of accelerators it created, each by id.
/// Also every location other than a rank's main thread, as the model lists it.
fn threads(defs: &Definitions, ranks: &Ranks) -> (Threads, Vec<(u64, Location)>) {
    let groups: FxHashMap<u32, &defs::LocationGroup> =
        defs.location_groups.iter().map(|g| (g.id, g)).collect();
    // The rank a location group's locations belong to, and whether the group is the
    // process's own (not an accelerator it created).
    let owner = |group: u32| -> Option<(Rank, bool)> {
        if let Some(&rank) = ranks.of_group.get(&group) {
            return Some((rank, true));
        }
        let g = groups.get(&group)?;
        (g.kind == defs::LOCATION_GROUP_ACCELERATOR)
            .then(|| ranks.of_group.get(&g.creator).map(|&r| (r, false)))
            .flatten()
    };
    let mut by_rank: BTreeMap<Rank, Vec<(bool, bool, bool, u64)>> = BTreeMap::new();
    for l in &defs.locations {
        if let Some((rank, own)) = owner(l.group) {
            let mpi = ranks.mpi_location.get(&l.group) == Some(&l.id);
            let key = (!mpi, !own, l.kind != defs::LOCATION_CPU_THREAD, l.id);
            by_rank.entry(rank).or_default().push(key);
        }
    }
    let mut threads = BTreeMap::new();
    for (rank, mut ids) in by_rank {
        ids.sort_unstable();
        for (thread, (_, _, _, id)) in ids.into_iter().enumerate() {
            threads.insert(id, (rank, thread as u32));
        }
    }
    let mut others = Vec::new();
    for l in &defs.locations {
        let place = threads.get(&l.id).copied();
        if matches!(place, Some((_, 0))) {
            continue;
        }
        let group = groups.get(&l.group).map_or_else(
            || format!("location group {}", l.group),
            |g| name_or(defs.string(g.name), || format!("location group {}", g.id)),
        );
        others.push((
            l.id,
            Location {
                name: name_or(defs.string(l.name), || format!("location {}", l.id)),
                kind: location_kind(l.kind),
                group,
                rank: place.map(|p| p.0),
                thread: place.map(|p| p.1),
                regions: 0,
                events: 0,
            },
        ));
    }
    (threads, others)
}

/// The processes in rank order, and the processors they ran on: the system tree node of class
/// `node` above each process (else its direct parent). A rank whose location group is not
/// defined (or that has no location) is a process named by its rank, on no processor.
fn processes(defs: &Definitions, ranks: &Ranks) -> (Vec<Process>, Vec<Processor>) {
    let nodes: FxHashMap<u32, &defs::SystemTreeNode> =
        defs.system_tree.iter().map(|n| (n.id, n)).collect();
    let node_of = |start: u32| -> Option<u32> {
        let mut id = start;
        for _ in 0..64 {
            let n = nodes.get(&id)?;
            if defs.string(n.class).eq_ignore_ascii_case("node") {
                return Some(id);
            }
            if n.parent == defs::UNDEFINED_U32 {
                break;
            }
            id = n.parent;
        }
        nodes.contains_key(&start).then_some(start)
    };
    let mut processes: Vec<Option<Process>> = vec![None; ranks.count];
    let mut used_nodes = BTreeSet::new();
    for g in &defs.location_groups {
        if let Some(&rank) = ranks.of_group.get(&g.id) {
            // A location group defined twice: its first definition.
            if processes[rank as usize].is_some() {
                continue;
            }
            let parent = g.system_tree_parent;
            let node = node_of(parent);
            used_nodes.extend(node);
            // A parent that is not defined is kept, for the import's seam to report
            // (`UnknownProcessor`).
            let processor = node.or((parent != defs::UNDEFINED_U32).then_some(parent));
            processes[rank as usize] = Some(Process {
                rank,
                name: name_or(defs.string(g.name), || format!("P{rank}")),
                processor,
            });
        }
    }
    let processes = (processes.into_iter().enumerate())
        .map(|(rank, p)| {
            p.unwrap_or_else(|| Process {
                rank: rank as Rank,
                name: format!("P{rank}"),
                processor: None,
            })
        })
        .collect();
    let processors = used_nodes
        .into_iter()
        .map(|id| Processor {
            id,
            name: name_or(defs.string(nodes[&id].name), || format!("node {id}")),
        })
        .collect();
    (processes, processors)
}

/// The MPI communicators with their members as world ranks; records in `context` how each
/// one's ranks translate. Communicators of other paradigms (CUDA, OpenMP, the measurement
/// system, …) are not MPI's and are left out. A communicator whose group is of type
/// `COMM_SELF` (`MPI_COMM_SELF`, or a split that left each rank alone) becomes one
/// communicator per process, each of its own. What breaks Table 3.1's rules (an id defined
/// twice, an empty group, a member that is no process, a member listed twice) is kept as
/// defined, for the import's seam to report and repair; ranks translate through the first
/// definition of an id and its group as listed. A communicator whose group is not defined is
/// left out and reported.
fn communicators(
    defs: &Definitions,
    ranks: u32,
    context: &mut Context,
    anomalies: &mut Vec<Anomaly>,
) -> std::result::Result<Vec<Communicator>, String> {
    let mut communicators = Vec::new();
    let mut next_self_id = defs.comms.iter().map(|c| c.id + 1).max().unwrap_or(0);
    for c in &defs.comms {
        let Some(group) = defs.groups.get(&c.group) else {
            anomalies.push(Anomaly::SkippedRecord {
                rank: None,
                time: None,
                what: format!(
                    "communicator {} uses group {}, which is not defined: it is left out (events that name it break the unknown-communicator rule)",
                    c.id, c.group
                ),
            });
            continue;
        };
        if !is_mpi(group) {
            continue;
        }
        let first = context.comms.get(c.id).is_none();
        let name = name_or(defs.string(c.name), || format!("comm {}", c.id));
        let members: Vec<Rank> = match group.kind {
            defs::GROUP_COMM_SELF => {
                let first_id = next_self_id;
                next_self_id = next_self_id.checked_add(ranks).ok_or_else(|| {
                    "the self communicators need more ids than 32 bits hold".to_string()
                })?;
                if first {
                    context.comms.insert(c.id, CommRanks::SelfComm { first_id });
                }
                communicators.extend((0..ranks).map(|rank| Communicator {
                    id: first_id + rank,
                    name: format!("{name} of rank {rank}"),
                    members: vec![rank],
                }));
                continue;
            }
            defs::GROUP_COMM_LOCATIONS | defs::GROUP_COMM_LOCATION_GROUPS => {
                (0..group.members.len() as Rank).collect()
            }
            // COMM_GROUP (type 5) and the rest: indexes into COMM_LOCATIONS, i.e. world ranks.
            _ => group
                .members
                .iter()
                .map(|&m| Rank::try_from(m).unwrap_or(Rank::MAX))
                .collect(),
        };
        // An empty communicator has no translation: events that name it name an unknown one.
        if first && !members.is_empty() {
            let translation = if group.flags & defs::GROUP_FLAG_GLOBAL_MEMBERS != 0 {
                CommRanks::Global { id: c.id }
            } else {
                CommRanks::Members {
                    id: c.id,
                    members: members.clone(),
                }
            };
            context.comms.insert(c.id, translation);
        }
        communicators.push(Communicator {
            id: c.id,
            name,
            members,
        });
    }
    Ok(communicators)
}

/// Regions of the MPI paradigm become MPI calls of the kind their name says, the others user
/// routines; returns the string table of their names.
fn regions(defs: &Definitions, context: &mut Context) -> Vec<String> {
    let mut strings: Vec<String> = Vec::new();
    let mut ids: FxHashMap<String, StrId> = FxHashMap::default();
    let mut region_ids: Vec<_> = defs.regions.keys().copied().collect();
    region_ids.sort_unstable();
    for id in region_ids {
        let r = &defs.regions[&id];
        let name = match (defs.string(r.canonical_name), defs.string(r.name)) {
            ("", "") => format!("region {id}"),
            ("", n) | (n, _) => n.to_string(),
        };
        let name_id = *ids.entry(name.clone()).or_insert_with(|| {
            strings.push(name.clone());
            strings.len() as StrId - 1
        });
        // Tracers that wrap MPI by preloading (EZTrace) give its regions the USER paradigm;
        // older ones leave it UNKNOWN. Either way an `MPI_` name is an MPI call.
        let is_mpi = r.paradigm == defs::PARADIGM_MPI
            || (matches!(r.paradigm, defs::PARADIGM_UNKNOWN | defs::PARADIGM_USER)
                && name.starts_with("MPI_"));
        let mpi = is_mpi.then(|| OpKind::from_mpi_name(&name).unwrap_or(OpKind::Other(name_id)));
        if let Some(kind) = mpi {
            context.kind_names.entry(kind).or_insert(name_id);
        }
        context
            .regions
            .insert(id, RegionInfo { name: name_id, mpi });
    }
    strings
}

fn name_or(name: &str, default: impl FnOnce() -> String) -> String {
    if name.is_empty() {
        default()
    } else {
        name.to_string()
    }
}

/// The trace's comments: what wrote the archive, where.
fn describe(anchor: &Anchor) -> String {
    let (a, b, c) = anchor.version;
    let mut s = format!("OTF2 {a}.{b}.{c} archive");
    if !anchor.creator.is_empty() {
        s.push_str(&format!(" written by {}", anchor.creator));
    }
    if !anchor.machine.is_empty() {
        s.push_str(&format!(" on {}", anchor.machine));
    }
    if !anchor.description.is_empty() {
        s.push_str(&format!(": {}", anchor.description));
    }
    s
}
