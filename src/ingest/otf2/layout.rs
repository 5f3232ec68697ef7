//! Where an OTF2 archive's definitions go in the MTF trace: location groups become processes
//! with world ranks, locations their threads, system tree nodes processors, communicators get
//! their members as world ranks, and regions become MPI calls or user routines.

use std::collections::{BTreeMap, BTreeSet};

use super::anchor::Anchor;
use super::convert::{CommRanks, Context, RegionInfo};
use super::defs::{self, Definitions};
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::{Communicator, OpKind, Process, Processor, Rank, StrId, TraceHeader};

/// The MTF trace's declarations and how each location maps onto them.
pub(crate) struct Layout {
    pub header: TraceHeader,
    /// Location id -> (rank, thread).
    pub threads: BTreeMap<u64, (Rank, u32)>,
    pub context: Context,
    /// The trace's string table (region names), by string id.
    pub strings: Vec<String>,
}

/// World ranks: location group id -> rank, and each rank's MPI location (its thread 0).
struct Ranks {
    of_group: FxHashMap<u32, Rank>,
    mpi_location: FxHashMap<u32, u64>,
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
        let threads = threads(defs, &ranks);
        let (processes, processors) = processes(defs, &ranks).map_err(bad)?;
        let mut context = Context::default();
        let communicators =
            communicators(defs, processes.len() as u32, &mut context).map_err(bad)?;
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
        };
        Ok(Layout {
            header,
            threads,
            context,
            strings,
        })
    }
}

/// Ranks in the order of the MPI `COMM_LOCATIONS` (or `COMM_LOCATION_GROUPS`) group; without
/// one, the process location groups numbered by id.
fn world_ranks(defs: &Definitions) -> std::result::Result<Ranks, String> {
    let group_of: FxHashMap<u64, u32> = defs.locations.iter().map(|l| (l.id, l.group)).collect();
    let mut ranks = Ranks {
        of_group: FxHashMap::default(),
        mpi_location: FxHashMap::default(),
    };
    let world = defs
        .groups
        .iter()
        .filter(|(_, g)| {
            g.paradigm == defs::PARADIGM_MPI
                && (g.kind == defs::GROUP_COMM_LOCATIONS
                    || g.kind == defs::GROUP_COMM_LOCATION_GROUPS)
        })
        .min_by_key(|(id, _)| **id);
    match world {
        Some((_, g)) => {
            for (rank, &member) in g.members.iter().enumerate() {
                let group = if g.kind == defs::GROUP_COMM_LOCATIONS {
                    let group = *group_of.get(&member).ok_or_else(|| {
                        format!(
                            "the MPI locations group lists location {member}, which is not defined"
                        )
                    })?;
                    ranks.mpi_location.insert(group, member);
                    group
                } else {
                    member as u32
                };
                if ranks.of_group.insert(group, rank as Rank).is_some() {
                    return Err(format!(
                        "location group {group} appears twice in the MPI locations group"
                    ));
                }
            }
        }
        None => {
            let mut ids: Vec<u32> = defs
                .location_groups
                .iter()
                .filter(|g| g.kind == 1)
                .map(|g| g.id)
                .collect();
            ids.sort_unstable();
            for (rank, id) in ids.into_iter().enumerate() {
                ranks.of_group.insert(id, rank as Rank);
            }
        }
    }
    if ranks.of_group.is_empty() {
        return Err("the archive defines no MPI processes (location groups)".into());
    }
    Ok(ranks)
}

/// Each location's (rank, thread): the rank's MPI location first, then the others by id.
fn threads(defs: &Definitions, ranks: &Ranks) -> BTreeMap<u64, (Rank, u32)> {
    let mut by_group: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for l in &defs.locations {
        if ranks.of_group.contains_key(&l.group) {
            by_group.entry(l.group).or_default().push(l.id);
        }
    }
    let mut threads = BTreeMap::new();
    for (group, mut ids) in by_group {
        let mpi = ranks.mpi_location.get(&group);
        ids.sort_by_key(|id| (Some(id) != mpi, *id));
        for (thread, id) in ids.into_iter().enumerate() {
            threads.insert(id, (ranks.of_group[&group], thread as u32));
        }
    }
    threads
}

/// The processes in rank order, and the processors they ran on: the system tree node of class
/// `node` above each process (else its direct parent).
fn processes(
    defs: &Definitions,
    ranks: &Ranks,
) -> std::result::Result<(Vec<Process>, Vec<Processor>), String> {
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
    let mut processes = Vec::with_capacity(ranks.of_group.len());
    let mut used_nodes = BTreeSet::new();
    for g in &defs.location_groups {
        if let Some(&rank) = ranks.of_group.get(&g.id) {
            let processor = node_of(g.system_tree_parent);
            used_nodes.extend(processor);
            processes.push(Process {
                rank,
                name: name_or(defs.string(g.name), || format!("P{rank}")),
                processor,
            });
        }
    }
    processes.sort_by_key(|p| p.rank);
    if processes.len() != ranks.of_group.len() {
        return Err(format!(
            "the MPI locations group names {} processes but {} of them are defined",
            ranks.of_group.len(),
            processes.len()
        ));
    }
    let processors = used_nodes
        .into_iter()
        .map(|id| Processor {
            id,
            name: name_or(defs.string(nodes[&id].name), || format!("node {id}")),
        })
        .collect();
    Ok((processes, processors))
}

/// The communicators with their members as world ranks; records in `context` how each one's
/// ranks translate. `MPI_COMM_SELF` becomes one communicator per process.
fn communicators(
    defs: &Definitions,
    ranks: u32,
    context: &mut Context,
) -> std::result::Result<Vec<Communicator>, String> {
    let mut communicators = Vec::new();
    let first_self_id = defs.comms.iter().map(|c| c.id + 1).max().unwrap_or(0);
    let mut self_declared = false;
    for c in &defs.comms {
        let group = defs.groups.get(&c.group).ok_or_else(|| {
            format!(
                "communicator {} uses group {}, which is not defined",
                c.id, c.group
            )
        })?;
        let name = name_or(defs.string(c.name), || format!("comm {}", c.id));
        let members: Vec<Rank> = match group.kind {
            defs::GROUP_COMM_SELF => {
                let first_id = first_self_id;
                context.comms.insert(c.id, CommRanks::SelfComm { first_id });
                if !self_declared {
                    self_declared = true;
                    communicators.extend((0..ranks).map(|rank| Communicator {
                        id: first_id + rank,
                        name: format!("{name} of rank {rank}"),
                        members: vec![rank],
                    }));
                }
                continue;
            }
            defs::GROUP_COMM_LOCATIONS | defs::GROUP_COMM_LOCATION_GROUPS => {
                (0..group.members.len() as Rank).collect()
            }
            // COMM_GROUP (type 5) and the rest: indexes into COMM_LOCATIONS, i.e. world ranks.
            _ => group.members.iter().map(|&m| m as Rank).collect(),
        };
        if let Some(&bad) = members.iter().find(|&&m| m >= ranks) {
            return Err(format!(
                "communicator {} ({name}) lists rank {bad}, but the trace has {ranks} processes",
                c.id
            ));
        }
        let translation = if group.flags & defs::GROUP_FLAG_GLOBAL_MEMBERS != 0 {
            CommRanks::Global { id: c.id }
        } else {
            CommRanks::Members {
                id: c.id,
                members: members.clone(),
            }
        };
        context.comms.insert(c.id, translation);
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
        let is_mpi =
            r.paradigm == defs::PARADIGM_MPI || (r.paradigm == 0 && name.starts_with("MPI_"));
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
