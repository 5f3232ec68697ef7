//! How an OTF v1 trace's definitions become an MTF trace: which processes are MPI ranks (the
//! members of the `MPI_COMM_WORLD` group, in its order), which are threads of a rank, which
//! are kept only as locations (CUDA streams, processes outside MPI); which process groups are
//! communicators; which functions are MPI calls (those of the `MPI` function group).
//!
//! OTF v1 event records name processes by their global process token, so peers and roots
//! are world ranks once translated through [`Context::process_ranks`], whatever communicator
//! a record names.

use std::collections::{BTreeMap, BTreeSet};

use super::defs::{Definitions, GroupDef, ATTR_IS_COMMUNICATOR, ATTR_IS_CUDA_THREAD};
use super::master::Master;
use crate::hash::FxHashMap;
use crate::ingest::otf2::convert::{CommRanks, Context, RegionInfo};
use crate::model::{
    Anomaly, CommId, Communicator, Location, LocationKind, OpKind, Process, Processor, Rank, Rule,
    StrId, TraceHeader,
};

/// OTF's timer resolution when the trace declares none: microseconds.
const DEFAULT_TICKS_PER_SECOND: u64 = 1_000_000;

/// What a process token is in the MTF trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// An MPI rank's main thread (`thread` 0) or another of its threads.
    Rank { rank: Rank, thread: u32 },
    /// A process kept only as a location, with what it recorded counted.
    Counted,
}

/// A process token's place, and its entry in the trace's location list, if any.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcessPlace {
    pub place: Place,
    pub location: Option<usize>,
}

/// The MTF trace laid out from the definitions.
pub(crate) struct Layout {
    pub header: TraceHeader,
    /// The string table: function and collective operation names.
    pub strings: Vec<String>,
    /// What the event conversion looks up: regions and communicators.
    pub context: Context,
    pub places: FxHashMap<u32, ProcessPlace>,
    /// The locations that are not a rank's main thread, reported at the end.
    pub locations: Vec<Location>,
    /// What the definitions declare against the rules that the header cannot carry to the
    /// import's checks (a communicator member that is no MPI rank).
    pub anomalies: Vec<Anomaly>,
    pub ticks_per_second: u64,
    /// For each collective operation definition, a region standing for a collective record
    /// found outside any MPI call.
    pub collective_regions: FxHashMap<u32, u32>,
}

impl Layout {
    /// The world rank of the process with token `process`, if it is (a thread of) a rank.
    pub fn rank_of(&self, process: u32) -> Option<Rank> {
        match self.places.get(&process)?.place {
            Place::Rank { rank, .. } => Some(rank),
            Place::Counted => None,
        }
    }

    /// The name of region `id` in the string table (0 if there is none).
    pub fn region_name(&self, id: u32) -> StrId {
        self.context.regions.get(id).map_or(0, |r| r.name)
    }

    /// Lays the trace out from its definitions and master file.
    pub fn new(defs: &Definitions, master: &Master) -> Layout {
        // Every process: defined, or only named by the master file or the world group.
        let mut names: BTreeMap<u32, (String, u32)> = defs
            .processes
            .iter()
            .map(|(&id, p)| (id, (p.name.clone(), p.parent)))
            .collect();
        let world_group = defs.groups.iter().find(|g| g.name == "MPI_COMM_WORLD");
        let named = master.streams.iter().flat_map(|(_, ps)| ps.iter());
        for &p in named.chain(world_group.iter().flat_map(|g| g.members.iter())) {
            names
                .entry(p)
                .or_insert_with(|| (format!("process {p:x}"), 0));
        }
        let accelerators: BTreeSet<u32> = names
            .iter()
            .filter(|(&p, (name, _))| {
                name.starts_with("CUDA[")
                    || defs.has_attribute(p, ATTR_IS_CUDA_THREAD)
                    || defs.groups.iter().any(|g| {
                        g.members.contains(&p) && defs.has_attribute(g.id, ATTR_IS_CUDA_THREAD)
                    })
            })
            .map(|(&p, _)| p)
            .collect();

        // World ranks: MPI_COMM_WORLD's members in order, else every top-level process.
        let mut world: Vec<u32> = match world_group {
            Some(g) => g.members.clone(),
            None => names
                .iter()
                .filter(|(p, (_, parent))| *parent == 0 && !accelerators.contains(p))
                .map(|(&p, _)| p)
                .collect(),
        };
        // A process MPI_COMM_WORLD lists twice is one rank (the seam reports the duplicate).
        let mut seen = BTreeSet::new();
        world.retain(|&p| seen.insert(p));
        let mut places: FxHashMap<u32, ProcessPlace> = FxHashMap::default();
        for (rank, &p) in world.iter().enumerate() {
            let place = ProcessPlace {
                place: Place::Rank {
                    rank: rank as Rank,
                    thread: 0,
                },
                location: None,
            };
            places.insert(p, place);
        }

        // The other processes: threads of a rank, or locations of their own.
        let mut locations = Vec::new();
        let mut threads: Vec<u32> = vec![0; world.len()];
        for (&p, (name, parent)) in &names {
            if places.contains_key(&p) {
                continue;
            }
            let owner = owning_rank(p, &names, &places);
            let (place, kind) = match owner {
                Some(rank) if !accelerators.contains(&p) => {
                    let t = &mut threads[rank as usize];
                    *t += 1;
                    (Place::Rank { rank, thread: *t }, LocationKind::CpuThread)
                }
                _ if accelerators.contains(&p) => (Place::Counted, LocationKind::Accelerator),
                _ => (Place::Counted, LocationKind::Process),
            };
            let mut loc = Location::new(name, kind);
            loc.rank = owner;
            if let Place::Rank { thread, .. } = place {
                loc.thread = Some(thread);
            }
            loc.group = names
                .get(parent)
                .map(|(n, _)| n.clone())
                .unwrap_or_default();
            places.insert(
                p,
                ProcessPlace {
                    place,
                    location: Some(locations.len()),
                },
            );
            locations.push(loc);
        }

        let mut context = Context::default();
        let (processors, runs_on) = nodes(defs, &world);
        let mut header = TraceHeader {
            trace_name: master
                .stub
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            comments: describe(defs),
            processes: world
                .iter()
                .enumerate()
                .map(|(rank, p)| Process {
                    rank: rank as Rank,
                    name: names[p].0.clone(),
                    processor: runs_on.get(p).copied(),
                })
                .collect(),
            processors,
            ..TraceHeader::default()
        };
        let mut anomalies = Vec::new();
        header.communicators =
            communicators(defs, world_group, &places, &mut context, &mut anomalies);
        let (strings, collective_regions) = regions(defs, &mut context);
        Layout {
            header,
            strings,
            context,
            places,
            locations,
            anomalies,
            ticks_per_second: defs.ticks_per_second.unwrap_or(DEFAULT_TICKS_PER_SECOND),
            collective_regions,
        }
    }
}

/// The rank whose process `p` descends from, following parents (a bounded walk: a cycle of
/// parents reaches no rank).
fn owning_rank(
    p: u32,
    names: &BTreeMap<u32, (String, u32)>,
    places: &FxHashMap<u32, ProcessPlace>,
) -> Option<Rank> {
    let mut current = p;
    for _ in 0..names.len() {
        let parent = names.get(&current)?.1;
        if parent == 0 {
            return None;
        }
        if let Some(ProcessPlace {
            place: Place::Rank { rank, thread: 0 },
            ..
        }) = places.get(&parent)
        {
            return Some(*rank);
        }
        current = parent;
    }
    None
}

/// Whether process group `g` is one of the measurement system's groups of a host (node):
/// VampirTrace writes the group of all processes (`All`), one group named after each node
/// with the processes that ran there, and groups of its GPU support (`GPU_…`, with CUDA
/// attributes), none of them marked as communicators. A node group is an unmarked group that
/// is none of the others.
fn is_node_group(defs: &Definitions, g: &GroupDef) -> bool {
    !defs.attributes_of.contains_key(&g.id)
        && g.name != "All"
        && !["MPI", "GPU_", "CUDA", "OMP"]
            .iter()
            .any(|p| g.name.starts_with(p))
}

/// The trace's nodes (its node groups, [`is_node_group`]) as processors, and the processor
/// each world rank's process runs on (the first node group that lists it).
fn nodes(defs: &Definitions, world: &[u32]) -> (Vec<Processor>, FxHashMap<u32, u32>) {
    let mut processors = Vec::new();
    let mut runs_on: FxHashMap<u32, u32> = FxHashMap::default();
    for g in defs.groups.iter().filter(|g| is_node_group(defs, g)) {
        let id = processors.len() as u32;
        let mut any = false;
        for p in g.members.iter().filter(|p| world.contains(p)) {
            if !runs_on.contains_key(p) {
                runs_on.insert(*p, id);
                any = true;
            }
        }
        if any {
            processors.push(Processor {
                id,
                name: g.name.clone(),
            });
        }
    }
    (processors, runs_on)
}

/// The world communicator, then every process group that is a communicator (marked so by
/// its attributes, or, in traces without such attributes, any group but the node groups and
/// `All` whose members are all MPI ranks). Records name communicators by group token; group 0
/// ("no group") is the world. Groups of other processes (nodes, CUDA streams) are not
/// communicators.
///
/// A communicator is declared as the definitions list it, so that the import's checks see
/// and report what breaks the rules (an id declared twice, a member listed twice, no
/// members); only a member of a marked communicator that is no process at all, which the
/// header cannot name, is dropped here and reported in `anomalies` ([`Rule::UnknownMember`],
/// with the process token as its value).
fn communicators(
    defs: &Definitions,
    world_group: Option<&GroupDef>,
    places: &FxHashMap<u32, ProcessPlace>,
    context: &mut Context,
    anomalies: &mut Vec<Anomaly>,
) -> Vec<Communicator> {
    let main_rank = |p: &u32| match places.get(p).map(|pp| pp.place) {
        Some(Place::Rank { rank, thread: 0 }) => Some(rank),
        _ => None,
    };
    for (&p, place) in places {
        if let Place::Rank { rank, .. } = place.place {
            context.process_ranks.insert(p, rank);
        }
    }
    let world_id: CommId = world_group.map_or(0, |g| g.id);
    let ranks = places
        .values()
        .filter(|pp| matches!(pp.place, Place::Rank { thread: 0, .. }))
        .count() as Rank;
    let world_members = match world_group {
        Some(g) => g.members.iter().filter_map(main_rank).collect(),
        None => (0..ranks).collect(),
    };
    let mut comms = vec![Communicator {
        id: world_id,
        name: "MPI_COMM_WORLD".into(),
        members: world_members,
    }];
    context
        .comms
        .insert(world_id, CommRanks::Processes { id: world_id });
    context
        .comms
        .insert(0, CommRanks::Processes { id: world_id });
    let marked = defs
        .groups
        .iter()
        .any(|g| defs.has_attribute(g.id, ATTR_IS_COMMUNICATOR));
    for g in &defs.groups {
        let is_world = world_group.is_some_and(|w| std::ptr::eq(w, g));
        let is_comm = defs.has_attribute(g.id, ATTR_IS_COMMUNICATOR);
        if is_world
            || g.id == 0
            || (marked && !is_comm)
            || (!marked && (g.members.is_empty() || g.name == "All" || is_node_group(defs, g)))
        {
            continue;
        }
        // A group with processes that are not MPI ranks (CUDA streams, threads) is another
        // paradigm's: no communicator, even marked as one (VampirTrace's GPU_COMM_GLOBAL).
        let other_paradigm = g
            .members
            .iter()
            .any(|p| places.contains_key(p) && main_rank(p).is_none());
        if other_paradigm || (!is_comm && g.members.iter().any(|p| main_rank(p).is_none())) {
            continue;
        }
        // A member of a marked communicator that is no process at all is dropped, reported.
        let mut members = Vec::with_capacity(g.members.len());
        for p in &g.members {
            match main_rank(p) {
                Some(rank) => members.push(rank),
                None => anomalies.push(Anomaly::BrokenRule {
                    rule: Rule::UnknownMember,
                    rank: None,
                    thread: 0,
                    time: None,
                    op: None,
                    comm: Some(g.id),
                    value: Some(u64::from(*p)),
                }),
            }
        }
        context
            .comms
            .insert(g.id, CommRanks::Processes { id: g.id });
        comms.push(Communicator {
            id: g.id,
            name: g.name.clone(),
            members,
        });
    }
    comms
}

/// Functions become regions: those of the `MPI` function group (or, outside any defined
/// group, named `MPI_…`) are MPI calls of the kind their name says, the others user
/// routines. Each collective operation definition gets a region too, numbered after the
/// functions. Returns the string table and those collective regions.
fn regions(defs: &Definitions, context: &mut Context) -> (Vec<String>, FxHashMap<u32, u32>) {
    let mut strings: Vec<String> = Vec::new();
    let mut ids: FxHashMap<String, StrId> = FxHashMap::default();
    let mut intern = |name: &str| -> StrId {
        *ids.entry(name.to_string()).or_insert_with(|| {
            strings.push(name.to_string());
            strings.len() as StrId - 1
        })
    };
    for (&id, f) in &defs.functions {
        let name_id = intern(&f.name);
        let is_mpi = match defs.function_groups.get(&f.group) {
            Some(group) => group.eq_ignore_ascii_case("MPI"),
            None => f.name.starts_with("MPI_"),
        };
        let mpi = is_mpi.then(|| OpKind::from_mpi_name(&f.name).unwrap_or(OpKind::Other(name_id)));
        if let Some(kind) = mpi {
            context.kind_names.entry(kind).or_insert(name_id);
        }
        context
            .regions
            .insert(id, RegionInfo { name: name_id, mpi });
    }
    let mut next = defs
        .functions
        .keys()
        .next_back()
        .map_or(Some(1), |&last| last.checked_add(1));
    let mut collective_regions = FxHashMap::default();
    for (&id, name) in &defs.collectives {
        let Some(region) = next else {
            break;
        };
        let name_id = intern(name);
        let kind = OpKind::from_mpi_name(name)
            .filter(|k| k.is_collective())
            .unwrap_or(OpKind::Other(name_id));
        context.kind_names.entry(kind).or_insert(name_id);
        context.regions.insert(
            region,
            RegionInfo {
                name: name_id,
                mpi: Some(kind),
            },
        );
        collective_regions.insert(id, region);
        next = region.checked_add(1);
    }
    (strings, collective_regions)
}

/// The trace's comments: what wrote it.
fn describe(defs: &Definitions) -> String {
    let mut s = String::from("OTF v1 trace");
    if !defs.version.is_empty() {
        s = format!("OTF {} trace", defs.version);
    }
    if !defs.creator.is_empty() {
        s.push_str(&format!(" written by {}", defs.creator));
    }
    s
}
