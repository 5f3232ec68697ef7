//! OTF v1 definition records (`NAME.0.def` and any local `NAME.<stream>.def`): the timer
//! resolution, processes and process groups (communicators among them), attribute lists,
//! functions and function groups, collective operations, the creator and version.
//!
//! Every definition record starts with `D` (short form) or `DEF` (long form). Definitions
//! mtfdb has no use for (counters, source locations, files, key names, comments) are read
//! past; a definition record of a kind the format does not know is skipped and reported.

use std::collections::BTreeMap;
use std::path::Path;

use super::stream::LineReader;
use super::syntax::{Cursor, Parsed};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::ingest::excerpt::quoted_bytes;
use crate::model::Anomaly;

/// `OTF_ATTR_IsCommunicator`: the group is an MPI communicator.
pub(crate) const ATTR_IS_COMMUNICATOR: u32 = 7;
/// `OTF_ATTR_IsCUDAThread`: the group's processes are CUDA streams.
pub(crate) const ATTR_IS_CUDA_THREAD: u32 = 8;

/// A `DEFPROCESS`.
#[derive(Debug, Clone)]
pub(crate) struct ProcessDef {
    pub name: String,
    /// The parent process (0 for none): a thread's or a CUDA stream's process.
    pub parent: u32,
}

/// A `DEFPROCESSGROUP`.
#[derive(Debug, Clone)]
pub(crate) struct GroupDef {
    pub id: u32,
    pub name: String,
    pub members: Vec<u32>,
}

/// A `DEFFUNCTION`.
#[derive(Debug, Clone)]
pub(crate) struct FunctionDef {
    pub name: String,
    /// Its function group (0 for none).
    pub group: u32,
}

/// Everything the definition streams declare that mtfdb uses.
#[derive(Debug, Default)]
pub(crate) struct Definitions {
    /// Clock ticks per second (`DEFTIMERRESOLUTION`); OTF's default is 1,000,000.
    pub ticks_per_second: Option<u64>,
    pub processes: BTreeMap<u32, ProcessDef>,
    /// Process groups in definition order.
    pub groups: Vec<GroupDef>,
    /// Attribute lists (`DEFATTRLIST`) by id.
    pub attribute_lists: FxHashMap<u32, Vec<u32>>,
    /// The attribute list of a process or group (`DEFPROCESSORGROUPATTR`).
    pub attributes_of: FxHashMap<u32, u32>,
    pub functions: BTreeMap<u32, FunctionDef>,
    pub function_groups: FxHashMap<u32, String>,
    /// Collective operations (`DEFCOLLOP`) by id: their names.
    pub collectives: BTreeMap<u32, String>,
    pub creator: String,
    pub version: String,
    /// Definition records of unknown kinds, skipped.
    pub skipped: Vec<Anomaly>,
}

impl Definitions {
    /// Whether the process or group `id` carries attribute `attribute`.
    pub fn has_attribute(&self, id: u32, attribute: u32) -> bool {
        self.attributes_of
            .get(&id)
            .and_then(|list| self.attribute_lists.get(list))
            .is_some_and(|attrs| attrs.contains(&attribute))
    }

    /// Reads the definition stream at `path` into these definitions.
    pub fn read(&mut self, path: &Path) -> Result<()> {
        let mut reader = LineReader::open(path)?;
        while reader.advance()? {
            let line = reader.line();
            match self.record(line) {
                Ok(true) => {}
                Ok(false) => self.skipped.push(Anomaly::SkippedRecord {
                    rank: None,
                    time: None,
                    what: format!(
                        "unknown definition record {} ({}:{})",
                        quoted_bytes(line),
                        path.display(),
                        reader.number
                    ),
                }),
                Err(e) => {
                    return Err(reader.error(e.column, "bad definition record", e.message));
                }
            }
        }
        Ok(())
    }

    /// Reads one definition record; `false` for a record of an unknown kind.
    fn record(&mut self, line: &[u8]) -> Parsed<bool> {
        let mut c = Cursor::new(line);
        if c.at_end() || c.keyword(&[b"K", b"KEY"]) {
            // Empty lines, and key-value pairs attached to the next record.
            return Ok(true);
        }
        if !(c.prefix(b"DEF") || c.prefix(b"D")) {
            return Ok(false);
        }
        if c.keyword(&[b"TR", b"TIMERRESOLUTION"]) {
            let ticks = c.hex("ticks per second")?;
            if ticks == 0 {
                return c.error("a timer resolution of 0 ticks per second");
            }
            self.ticks_per_second = Some(ticks);
        } else if c.keyword(&[b"P", b"PROCESS"]) {
            let id = c.hex32("process")?;
            let mut def = ProcessDef {
                name: format!("process {id:x}"),
                parent: 0,
            };
            if c.keyword(&[b"NM", b"NAME", b"N"]) {
                def.name = c.string("process name")?;
            }
            if c.keyword(&[b"PT", b"PARENT", b"P"]) {
                def.parent = c.hex32("parent process")?;
            }
            self.processes.insert(id, def);
        } else if c.keyword(&[b"PG", b"PROCESSGROUP"]) {
            let id = c.hex32("process group")?;
            let members = if c.keyword(&[b"M", b"MEMBERS"]) {
                let members = c.array("members")?;
                c.expect(&[b"NM", b"NAME", b"N"], "group name")?;
                members
            } else {
                // An empty array leaves the two keywords side by side.
                c.expect(&[b"MNM", b"MEMBERSNAME"], "members")?;
                Vec::new()
            };
            let name = c.string("group name")?;
            self.groups.push(GroupDef { id, name, members });
        } else if c.keyword(&[b"PGA", b"PROCESSORGROUPATTR"]) {
            let id = c.hex32("process or group")?;
            let list = c.field32(&[b"V", b"VALUE"], "attribute list")?;
            self.attributes_of.insert(id, list);
        } else if c.keyword(&[b"A", b"ATTRIBUTELIST"]) {
            let id = c.hex32("attribute list")?;
            c.expect(&[b"M", b"MEMBERS"], "attributes")?;
            let attributes = c.array("attributes")?;
            self.attribute_lists.insert(id, attributes);
        } else if c.keyword(&[b"F", b"FUNCTION"]) {
            let id = c.hex32("function")?;
            let group = c.field32(&[b"G", b"GROUP"], "function group")?;
            c.expect(&[b"NM", b"NAME", b"N"], "function name")?;
            let name = c.string("function name")?;
            self.functions.insert(id, FunctionDef { name, group });
        } else if c.keyword(&[b"FG", b"FUNCTIONGROUP"]) {
            let id = c.hex32("function group")?;
            c.expect(&[b"NM", b"NAME", b"N"], "function group name")?;
            let name = c.string("function group name")?;
            self.function_groups.insert(id, name);
        } else if c.keyword(&[b"CO", b"COLLOP"]) {
            let id = c.hex32("collective operation")?;
            c.expect(&[b"NM", b"NAME", b"N"], "collective operation name")?;
            let name = c.string("collective operation name")?;
            self.collectives.insert(id, name);
        } else if c.keyword(&[b"CR", b"CREATOR"]) {
            self.creator = c.string("creator")?;
        } else if c.keyword(&[b"V", b"VERSION"]) {
            let major = c.hex32("major version")?;
            let mut version = major.to_string();
            for part in ["minor version", "sub version"] {
                if !c.prefix(b".") {
                    return c.error(format!("expected '.' and the {part}"));
                }
                version.push_str(&format!(".{}", c.hex32(part)?));
            }
            self.version = version;
        } else {
            // Known definitions mtfdb does not use; anything else is unknown.
            return Ok(c.keyword(&[
                b"CMT",
                b"COMMENT",
                b"CNT",
                b"COUNTER",
                b"CG",
                b"COUNTERGROUP",
                b"CA",
                b"COUNTERASSIGNMENTS",
                b"S",
                b"SCL",
                b"SF",
                b"SCLFILE",
                b"FL",
                b"FILE",
                b"FLG",
                b"FILEGROUP",
                b"K",
                b"KEYVALUE",
                b"TRG",
                b"TIMERANGE",
                b"PS",
                b"PROCESSSUBSTITUTES",
                b"UI",
                b"UNIQUEID",
                b"AUX",
                b"AUXSAMPLEPOINT",
            ]));
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs(text: &str) -> Result<Definitions> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.0.def");
        std::fs::write(&path, text).unwrap();
        let mut d = Definitions::default();
        d.read(&path)?;
        Ok(d)
    }

    #[test]
    fn short_and_long_forms_read_alike() {
        let short = "DTR3e8\nDP1NM\"Process 0\"\nDP100001NM\"CUDA[0:2] 0:1\"PT1\n\
                     DPG5M1,2,NM\"MPI_COMM_WORLD\"\nDPG6MNM\"empty\"\nDA1M7,\nDPGA5V1\n\
                     DFG3NM\"MPI\"\nDF6fG3NM\"MPI_Send\"X2\nDCO7NM\"MPI_Bcast\"Y2\n\
                     DV1.d.0\"alpha\"\nDCR\"VampirTrace 5.15b\"\nDS2F2LN8\nDXYZ1\n";
        let d = defs(short).unwrap();
        assert_eq!(d.ticks_per_second, Some(1000));
        assert_eq!(d.processes[&0x100001].name, "CUDA[0:2] 0:1");
        assert_eq!(d.processes[&0x100001].parent, 1);
        assert_eq!(d.groups[0].members, vec![1, 2]);
        assert!(d.groups[1].members.is_empty());
        assert!(d.has_attribute(5, ATTR_IS_COMMUNICATOR));
        assert_eq!(d.functions[&0x6f].name, "MPI_Send");
        assert_eq!(d.function_groups[&3], "MPI");
        assert_eq!(d.collectives[&7], "MPI_Bcast");
        assert_eq!(
            (d.version.as_str(), d.creator.as_str()),
            ("1.13.0", "VampirTrace 5.15b")
        );
        assert_eq!(d.skipped.len(), 1, "DXYZ1 is unknown");

        let long = "DEFTIMERRESOLUTION 3e8\nDEFPROCESS 1 NAME \"Process 0\"\n\
                    DEFPROCESSGROUP 5 MEMBERS 1, NAME \"MPI_COMM_WORLD\"\n\
                    DEFFUNCTION 6f GROUP 3 NAME \"MPI_Send\"\n";
        let d = defs(long).unwrap();
        assert_eq!(d.ticks_per_second, Some(1000));
        assert_eq!(d.groups[0].members, vec![1]);
        assert_eq!(d.functions[&0x6f].name, "MPI_Send");
    }

    #[test]
    fn a_malformed_definition_names_its_line_and_column() {
        let e = defs("DTR3e8\nDF6fNM\"MPI_Send\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.0.def:2:5: bad definition record: expected G or GROUP"),
            "{e}"
        );
    }
}
