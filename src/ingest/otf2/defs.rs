//! Definitions: the global definitions file (strings, system tree, location groups,
//! locations, regions, groups, communicators, clock properties) and each location's local
//! definitions (mapping tables from local to global ids, clock offsets).
//!
//! Records of later OTF2 versions append fields at their end; a field missing because the
//! record is shorter (an older archive) takes OTF2's documented default. Record types not
//! needed here are skipped by their length.

use std::path::Path;

use super::reader::{ChunkReader, Decoder, Fault, Next};
use crate::error::Result;
use crate::hash::FxHashMap;

/// OTF2's "undefined" reference.
pub const UNDEFINED_U32: u32 = u32::MAX;

/// `OTF2_PARADIGM_UNKNOWN`: what older tracers leave in a region's paradigm.
pub const PARADIGM_UNKNOWN: u8 = 0;
/// `OTF2_PARADIGM_USER`: user code, and MPI calls as preloading tracers (EZTrace) mark them.
pub const PARADIGM_USER: u8 = 1;
/// `OTF2_PARADIGM_MPI`.
pub const PARADIGM_MPI: u8 = 4;
/// Group type: the locations of a paradigm in rank order (MPI_COMM_WORLD's locations).
pub const GROUP_COMM_LOCATIONS: u8 = 4;
/// Group type: MPI_COMM_SELF and friends.
pub const GROUP_COMM_SELF: u8 = 6;
/// Group type: like COMM_LOCATIONS, with location groups as members (OTF2 3.2).
pub const GROUP_COMM_LOCATION_GROUPS: u8 = 7;
/// Location group type: a process.
pub const LOCATION_GROUP_PROCESS: u8 = 1;
/// Location group type: an accelerator (OTF2 3.0), created by a process.
pub const LOCATION_GROUP_ACCELERATOR: u8 = 2;
/// Location type: a CPU thread.
pub const LOCATION_CPU_THREAD: u8 = 1;
/// Location type: an accelerator stream (CUDA stream, HIP queue, OpenCL queue, offload).
pub const LOCATION_ACCELERATOR: u8 = 2;
/// Location type: a location that only records metrics.
pub const LOCATION_METRIC: u8 = 3;
/// Group flag: members are already world ranks.
pub const GROUP_FLAG_GLOBAL_MEMBERS: u32 = 1;

/// Timer properties: the tick rate and the time the trace starts at.
#[derive(Debug, Clone, Copy)]
pub struct ClockProperties {
    /// Ticks per second.
    pub resolution: u64,
    /// Tick value of the trace's start.
    pub global_offset: u64,
}

/// A node of the system tree (machine, node, …).
#[derive(Debug, Clone)]
pub struct SystemTreeNode {
    pub id: u32,
    /// String id of its name (strings may be defined after their first use).
    pub name: u32,
    /// String id of its class (`machine`, `node`, …).
    pub class: u32,
    pub parent: u32,
}

/// A location group: an MPI process.
#[derive(Debug, Clone)]
pub struct LocationGroup {
    pub id: u32,
    /// String id.
    pub name: u32,
    /// 1 for a process, 2 for an accelerator.
    pub kind: u8,
    pub system_tree_parent: u32,
    /// The location group that created it (OTF2 3.0: an accelerator's process), or undefined.
    pub creator: u32,
}

/// A location: a thread of a process, with its own event file.
#[derive(Debug, Clone)]
pub struct Location {
    pub id: u64,
    /// String id.
    pub name: u32,
    /// Location type: CPU thread, accelerator stream, metric.
    pub kind: u8,
    pub events: u64,
    pub group: u32,
    /// Byte offset of its definition record in the global definitions file.
    pub offset: u64,
}

/// A code region (function); MPI calls are regions of paradigm MPI.
#[derive(Debug, Clone)]
pub struct Region {
    /// String id.
    pub name: u32,
    /// String id.
    pub canonical_name: u32,
    pub paradigm: u8,
}

/// A group of members (locations, ranks, …).
#[derive(Debug, Clone)]
pub struct Group {
    pub kind: u8,
    pub paradigm: u8,
    pub flags: u32,
    pub members: Vec<u64>,
}

/// A communicator.
#[derive(Debug, Clone)]
pub struct Comm {
    pub id: u32,
    /// String id.
    pub name: u32,
    pub group: u32,
}

/// A metric member: one counter (`PAPI_TOT_CYC`).
#[derive(Debug, Clone)]
pub struct MetricMember {
    /// String ids of its name, description and unit.
    pub name: u32,
    pub description: u32,
    pub unit: u32,
    /// OTF2_MetricType: other, PAPI, rusage, user.
    pub source: u8,
    /// OTF2_MetricMode: value property (low 4 bits) and timing (high 4 bits).
    pub mode: u8,
    /// OTF2_Type of its values.
    pub value_type: u8,
    /// OTF2_Base: 0 binary, 1 decimal.
    pub base: u8,
    pub exponent: i64,
}

/// A metric class: the members a Metric event of it carries values of, in order.
#[derive(Debug, Clone)]
pub struct MetricClass {
    pub members: Vec<u32>,
}

/// Everything the global definitions file declares that mtfdb uses.
#[derive(Debug, Default)]
pub struct Definitions {
    pub clock: Option<ClockProperties>,
    pub strings: FxHashMap<u32, String>,
    pub system_tree: Vec<SystemTreeNode>,
    pub location_groups: Vec<LocationGroup>,
    pub locations: Vec<Location>,
    pub regions: FxHashMap<u32, Region>,
    pub groups: FxHashMap<u32, Group>,
    pub comms: Vec<Comm>,
    /// Inter-communicators (not translated: their peers are in the remote group).
    pub inter_comms: Vec<u32>,
    /// Metric members (counters), by id.
    pub metric_members: FxHashMap<u32, MetricMember>,
    /// Metric classes by id; a metric instance's id maps to its class's members too.
    pub metric_classes: FxHashMap<u32, MetricClass>,
}

impl Definitions {
    /// The string with id `id` (empty when undefined).
    pub fn string(&self, id: u32) -> &str {
        self.strings.get(&id).map_or("", String::as_str)
    }
}

/// A decoding fault with the file offset of the record's body, turned into an input error.
pub(crate) fn fault_error(r: &ChunkReader, what: &str, f: Fault) -> crate::error::Error {
    r.error(
        r.body_offset() + f.at as u64,
        "corrupt record",
        format!("{what}: {}", f.what),
    )
}

/// Reads the global definitions file, which the anchor says holds `announced` records.
///
/// A damaged record length makes the reader resume in the middle of other records; the
/// record count and the string references that would then be off are checked.
pub fn read_global(path: &Path, chunk_size: u64, announced: u64) -> Result<Definitions> {
    let mut r = ChunkReader::open(path, chunk_size, false)?;
    let mut defs = Definitions::default();
    let mut records = 0u64;
    // (record offset, string id, what names it): checked once every string is known.
    let mut names: Vec<(u64, u32, &'static str)> = Vec::new();
    loop {
        let (kind, offset) = match r.next()? {
            Next::End => break,
            Next::Record { kind, offset } => (kind, offset),
        };
        records += 1;
        let mut d = r.decoder();
        let result = match kind {
            5 => read_clock(&mut d, &mut defs),
            10 => read_string(&mut d, &mut defs),
            12 => read_system_tree_node(&mut d, &mut defs),
            13 => read_location_group(&mut d, &mut defs),
            14 => read_location(&mut d, &mut defs),
            15 => read_region(&mut d, &mut defs),
            18 => read_group(&mut d, &mut defs),
            22 => read_comm(&mut d, &mut defs),
            19 => read_metric_member(&mut d, &mut defs),
            20 => read_metric_class(&mut d, &mut defs),
            21 => read_metric_instance(&mut d, &mut defs),
            43 => d
                .u32("inter-communicator")
                .map(|id| defs.inter_comms.push(id)),
            _ => Ok(()),
        };
        result.map_err(|f| fault_error(&r, &global_record_name(kind), f))?;
        if kind == 14 {
            if let Some(l) = defs.locations.last_mut() {
                l.offset = offset;
            }
        }
        let named = match kind {
            12 => defs.system_tree.last().map(|n| n.name),
            13 => defs.location_groups.last().map(|g| g.name),
            14 => defs.locations.last().map(|l| l.name),
            22 => defs.comms.last().map(|c| c.name),
            15 => r
                .decoder()
                .u32("region id")
                .ok()
                .and_then(|id| defs.regions.get(&id))
                .map(|region| region.name),
            _ => None,
        };
        if let Some(id) = named {
            names.push((offset, id, "its name"));
        }
    }
    if announced != 0 && records != announced {
        return Err(r.error(
            r.offset(),
            "corrupt definitions",
            format!(
                "the file holds {records} definition records where the anchor file announces {announced} (a damaged record length?)"
            ),
        ));
    }
    for (offset, id, what) in names {
        if id != UNDEFINED_U32 && !defs.strings.contains_key(&id) {
            return Err(r.error(
                offset,
                "corrupt definitions",
                format!("the definition record at byte {offset} gives as {what} string {id}, which is not defined"),
            ));
        }
    }
    Ok(defs)
}

fn global_record_name(kind: u8) -> String {
    let name = match kind {
        5 => "ClockProperties",
        10 => "String",
        12 => "SystemTreeNode",
        13 => "LocationGroup",
        14 => "Location",
        15 => "Region",
        18 => "Group",
        19 => "MetricMember",
        20 => "MetricClass",
        21 => "MetricInstance",
        22 => "Comm",
        43 => "InterComm",
        _ => return format!("definition record of type {kind}"),
    };
    format!("{name} definition")
}

type Step = std::result::Result<(), Fault>;

fn read_clock(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let resolution = d.u64("timer resolution")?;
    let global_offset = d.u64("global offset")?;
    let _ = d.u64("trace length")?;
    if resolution == 0 {
        return Err(Fault {
            at: 0,
            what: "the timer resolution is 0 ticks per second".into(),
        });
    }
    defs.clock = Some(ClockProperties {
        resolution,
        global_offset,
    });
    Ok(())
}

fn read_string(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("string id")?;
    let text = d.string("string")?;
    defs.strings.insert(id, text);
    Ok(())
}

fn read_system_tree_node(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("node id")?;
    let name = d.u32("name")?;
    let class = d.u32("class name")?;
    let parent = d.u32("parent")?;
    defs.system_tree.push(SystemTreeNode {
        id,
        name,
        class,
        parent,
    });
    Ok(())
}

fn read_location_group(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("location group id")?;
    let name = d.u32("name")?;
    let kind = d.u8("location group type")?;
    let system_tree_parent = d.u32("system tree parent")?;
    // Since OTF2 3.0: the creating location group.
    let creator = if d.has_more() {
        d.u32("creating location group")?
    } else {
        UNDEFINED_U32
    };
    defs.location_groups.push(LocationGroup {
        id,
        name,
        kind,
        system_tree_parent,
        creator,
    });
    Ok(())
}

fn read_location(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u64("location id")?;
    let name = d.u32("name")?;
    let kind = d.u8("location type")?;
    let events = d.u64("number of events")?;
    let group = d.u32("location group")?;
    defs.locations.push(Location {
        id,
        name,
        kind,
        events,
        group,
        offset: 0,
    });
    Ok(())
}

fn read_region(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("region id")?;
    let name = d.u32("name")?;
    let _description = d.u32("description")?;
    let _region_type = d.u8("region type")?;
    let _source_file = d.u32("source file")?;
    let _begin = d.u32("begin line")?;
    let _end = d.u32("end line")?;
    // Since OTF2 1.1: canonical name, role, paradigm, flags.
    let (canonical, paradigm) = if d.has_more() {
        let canonical = d.u32("canonical name")?;
        let _ = d.u8("region role")?;
        let paradigm = d.u8("paradigm")?;
        (canonical, paradigm)
    } else {
        (name, 0)
    };
    let region = Region {
        name,
        canonical_name: canonical,
        paradigm,
    };
    defs.regions.insert(id, region);
    Ok(())
}

fn read_group(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("group id")?;
    let _name = d.u32("name")?;
    let old_kind = d.u8("group type")?;
    let n = d.u32("number of members")?;
    let mut members = Vec::with_capacity((n as usize).min(1 << 20));
    for _ in 0..n {
        members.push(d.u64("member")?);
    }
    // Since OTF2 1.2: the type, paradigm and flags.
    let (kind, paradigm, flags) = if d.has_more() {
        (
            d.u8("group type")?,
            d.u8("paradigm")?,
            d.u32("group flags")?,
        )
    } else {
        (old_kind, 0, 0)
    };
    defs.groups.insert(
        id,
        Group {
            kind,
            paradigm,
            flags,
            members,
        },
    );
    Ok(())
}

fn read_comm(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("communicator id")?;
    let name = d.u32("name")?;
    let group = d.u32("group")?;
    let _ = d.u32("parent")?;
    defs.comms.push(Comm { id, name, group });
    Ok(())
}

fn read_metric_member(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("metric member id")?;
    let name = d.u32("name")?;
    let description = d.u32("description")?;
    let source = d.u8("metric type")?;
    let mode = d.u8("metric mode")?;
    let value_type = d.u8("value type")?;
    let base = d.u8("base")?;
    // OTF2 writes a signed integer as the compressed bits of its two's complement.
    let exponent = d.u64("exponent")? as i64;
    let unit = d.u32("unit")?;
    let member = MetricMember {
        name,
        description,
        unit,
        source,
        mode,
        value_type,
        base,
        exponent,
    };
    defs.metric_members.insert(id, member);
    Ok(())
}

fn read_metric_class(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("metric class id")?;
    let n = d.u8("number of metrics")?;
    let mut members = Vec::with_capacity(n as usize);
    for _ in 0..n {
        members.push(d.u32("metric member")?);
    }
    defs.metric_classes.insert(id, MetricClass { members });
    Ok(())
}

/// A metric instance (its values recorded by one location for another scope) shares the
/// metric id space with classes: its Metric events carry its class's members.
fn read_metric_instance(d: &mut Decoder, defs: &mut Definitions) -> Step {
    let id = d.u32("metric instance id")?;
    let class = d.u32("metric class")?;
    if let Some(c) = defs.metric_classes.get(&class).cloned() {
        defs.metric_classes.insert(id, c);
    }
    Ok(())
}

/// The mapping types of local definitions this reader applies.
pub const MAPPING_STRING: u8 = 0;
/// Regions.
pub const MAPPING_REGION: u8 = 3;
/// Metric classes and instances.
pub const MAPPING_METRIC: u8 = 5;
/// Communicators.
pub const MAPPING_COMM: u8 = 6;

/// One location's local definitions: mapping tables and clock offsets.
#[derive(Debug, Default)]
pub struct LocalDefinitions {
    /// Local to global id, per mapping type (string, region, communicator).
    pub mappings: FxHashMap<u8, IdMap>,
    /// `(time, offset)` clock synchronisation points, in ticks.
    pub clock_offsets: Vec<(u64, i64)>,
}

/// A mapping from local to global ids.
#[derive(Debug, Clone)]
pub enum IdMap {
    /// `global[local]`.
    Dense(Vec<u64>),
    /// `local -> global`.
    Sparse(FxHashMap<u64, u64>),
}

impl IdMap {
    /// The global id of `local` (unmapped ids stay as they are, as OTF2 does).
    pub fn map(&self, local: u64) -> u64 {
        match self {
            IdMap::Dense(v) => v.get(local as usize).copied().unwrap_or(local),
            IdMap::Sparse(m) => m.get(&local).copied().unwrap_or(local),
        }
    }
}

/// Reads a location's local definitions file (a missing file means no local definitions).
pub fn read_local(path: &Path, chunk_size: u64) -> Result<LocalDefinitions> {
    let mut local = LocalDefinitions::default();
    if !path.exists() {
        return Ok(local);
    }
    let mut r = ChunkReader::open(path, chunk_size, false)?;
    loop {
        let kind = match r.next()? {
            Next::End => break,
            Next::Record { kind, .. } => kind,
        };
        let mut d = r.decoder();
        let result = match kind {
            5 => read_mapping(&mut d, &mut local),
            6 => read_clock_offset(&mut d, &mut local),
            _ => Ok(()),
        };
        let what = if kind == 5 {
            "MappingTable definition"
        } else {
            "ClockOffset definition"
        };
        result.map_err(|f| fault_error(&r, what, f))?;
    }
    Ok(local)
}

fn read_mapping(d: &mut Decoder, local: &mut LocalDefinitions) -> Step {
    let kind = d.u8("mapping type")?;
    let n = d.u64("map size")?;
    let mode = d.u8("map mode")?;
    let map = match mode {
        0 => {
            let mut v = Vec::with_capacity((n as usize).min(1 << 20));
            for _ in 0..n {
                v.push(d.u64("global id")?);
            }
            IdMap::Dense(v)
        }
        1 => {
            let mut m = FxHashMap::default();
            for _ in 0..n {
                let l = d.u64("local id")?;
                m.insert(l, d.u64("global id")?);
            }
            IdMap::Sparse(m)
        }
        other => {
            return Err(Fault {
                at: d.pos() - 1,
                what: format!("unknown id map mode {other}"),
            })
        }
    };
    local.mappings.insert(kind, map);
    Ok(())
}

fn read_clock_offset(d: &mut Decoder, local: &mut LocalDefinitions) -> Step {
    let time = d.u64_full("time")?;
    let offset = d.u64("offset")? as i64;
    local.clock_offsets.push((time, offset));
    Ok(())
}
