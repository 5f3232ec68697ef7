//! OTF v1 traces (VampirTrace's Open Trace Format), read by mtfdb's own code: no OTF
//! library is needed.
//!
//! A trace is a master file `NAME.otf` (which stream holds which processes), the
//! definitions stream `NAME.0.def` (plus optional local `NAME.<stream>.def`) and one events
//! stream `NAME.<stream>.events` per stream, each plain text or zlib-compressed (`.z`) as
//! VampirTrace writes them. Statistics, snapshot and marker streams are not read (their
//! content is derived from the events); the trace's comments say how many there were.
//!
//! The reader
//!
//! 1. reads the master file (`master`) and the definitions (`defs`);
//! 2. lays out the MTF trace (`layout`): the members of the `MPI_COMM_WORLD` process group
//!    become the ranks, child processes their threads or (CUDA streams) locations of their
//!    own, process groups marked as communicators become communicators, functions of the
//!    `MPI` group become MPI calls;
//! 3. streams every events file (`reader`), converting records (`records`, in the ASCII
//!    syntax of `syntax`) to operations and routine events, merged by time.
//!
//! A partial copy imports: a missing events stream, or one cut short (a last line without
//! its end, zlib data ending inside a block), makes its ranks' data missing from where it
//! ends ([`crate::model::Anomaly::MissingRankData`]); the other streams import whole.
//! Damaged input (a corrupt zlib stream, a malformed record of a known kind) is refused with
//! the file and line (or compressed byte offset). Everything that decodes imports: records
//! of unknown kinds, and records naming a function the definitions lack, are skipped and
//! reported as anomalies, as OTF's own readers skip unknown records; what breaks a rule of
//! the metamodel (a time going backwards, a peer or root that is no MPI rank, a group that
//! is no communicator, records of a process the trace never defines, a communicator member
//! listed twice or no process at all) is kept and reported as the rule's anomaly
//! ([`crate::model::Anomaly::BrokenRule`]), by the import's checks or, where the header
//! cannot carry it, by this reader.

mod defs;
mod layout;
mod master;
mod reader;
mod records;
mod stream;
mod syntax;

pub use master::{find_master, looks_like_master};
pub use reader::ReadStats;

use std::path::Path;

use crate::error::{Error, Result};
use crate::ingest::EventSink;
use crate::ingest::Progress;

/// Reads the OTF v1 trace at `path` (its master file `NAME.otf` or its folder) into `sink`,
/// calling `progress` now and then.
pub fn read_trace(
    path: &Path,
    sink: &mut dyn EventSink,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ReadStats> {
    let master = master::read(&find_master(path)?)?;
    let global = master.file(0, "def");
    let Some(global) = stream::find(&global) else {
        return Err(Error::io(
            &global,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the trace's definitions stream is missing (nor is there a .z file)",
            ),
        ));
    };
    let mut defs = defs::Definitions::default();
    defs.read(&global)?;
    for (id, _) in &master.streams {
        if let Some(local) = stream::find(&master.file(*id, "def")) {
            defs.read(&local)?;
        }
    }
    let mut layout = layout::Layout::new(&defs, &master);
    layout.header.comments.push_str(&unread_streams(&master));
    let reader = reader::Reader::open(&master, layout)?;
    reader.run(&global, defs.skipped, sink, progress)
}

/// The streams a read leaves out, for the trace's comments (empty when there are none).
fn unread_streams(master: &master::Master) -> String {
    let mut found = Vec::new();
    for (suffix, what) in [
        ("stats", "statistics"),
        ("snaps", "snapshot"),
        ("marker", "marker"),
    ] {
        let n = std::iter::once(0)
            .chain(master.streams.iter().map(|(id, _)| *id))
            .filter(|&id| stream::find(&master.file(id, suffix)).is_some())
            .count();
        if n > 0 {
            found.push(format!(
                "{n} {what} stream{}",
                if n == 1 { "" } else { "s" }
            ));
        }
    }
    if found.is_empty() {
        String::new()
    } else {
        format!("; not read (derived from the events): {}", found.join(", "))
    }
}
