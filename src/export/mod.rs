//! Export: write a stored trace in an exchange format that mtfdb (and others) read back.
//!
//! - [`Format::MtfText`]: the MTF text format (`grammar/mtf.ebnf`).
//! - [`Format::Gxl`]: the MTF paper's GXL graph of MTF entities ([`gxl`]).
//! - [`Format::Chrome`]: the Chrome Trace Event format (JSON) that ui.perfetto.dev and
//!   chrome://tracing open, a timeline for people rather than an exchange format ([`chrome`],
//!   which may also restrict it to a time window and some ranks). Nothing reads it back.
//! - [`Format::Parquet`]: Hive-partitioned Parquet tables for DuckDB, Spark or Trino
//!   ([`parquet`]); a folder, written by [`parquet::export_parquet`], not a stream.
//!
//! An export reads the trace through the library and never writes to the store. It streams:
//! the events come in time order from `order` (operations read chunk by chunk, routine
//! calls sorted with a bounded memory), and the anomalies chunk by chunk, so memory follows a
//! chunk, not the trace. Importing what an export wrote gives the same trace: the same
//! header, operations, routine calls, messages, request links, collective instances and
//! anomalies (operation and message ids aside, which are the import's to give); exporting
//! that again gives the same bytes.
//!
//! What the import derives from the operations (messages, request links, collective
//! instances, the anomalies matching finds, calls without their records, sums past 2^64 - 1)
//! is found again along the export by the same [`Matcher`] and `Tally` the import uses,
//! fed the operations in the export's own order. The anomalies
//! the trace holds beyond those (what its source recorded: a region never left, crossed
//! leaves, skipped records, …) are written as such, so that the import keeps them.
//!
//! ```no_run
//! let db = mtfdb::Database::open("traces.mtfdb")?;
//! let trace = db.trace("wrf16")?;
//! mtfdb::export::export_file(&trace, mtfdb::export::Format::Gxl, "wrf16.gxl".as_ref())?;
//! # Ok::<(), mtfdb::Error>(())
//! ```

pub mod arrow;
mod calls;
pub mod chrome;
pub mod gxl;
pub mod mtf_text;
mod order;
pub mod output;
pub mod parquet;
pub mod report;
pub mod svg;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::hash::FxHashMap as HashMap;
use crate::import::Tally;
use crate::ingest::matcher::{MatchSink, Matcher};
use crate::model::{
    Anomaly, CollectiveInstance, Message, OpId, OpPosition, Operation, RequestLink, RoutineCall,
    RoutineEvent, TraceHeader,
};
use crate::store::ids::chunk_and_row;
use crate::store::OpChunkInfo;
use crate::Trace;

use order::{Event, Events};

/// The formats mtfdb exports to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Format {
    /// The MTF text format, version 1.
    MtfText,
    /// GXL, the graph exchange language the MTF paper carries traces in.
    Gxl,
    /// The Chrome Trace Event format (JSON) of Perfetto and chrome://tracing (see [`chrome`]).
    Chrome,
    /// Parquet tables in a folder ([`parquet`]).
    Parquet,
}

impl Format {
    /// The short name used on the command line (`--format gxl`).
    pub fn name(self) -> &'static str {
        match self {
            Format::MtfText => "mtf",
            Format::Gxl => "gxl",
            Format::Chrome => "chrome",
            Format::Parquet => "parquet",
        }
    }

    /// Parses a `--format` argument of `export`.
    pub fn from_name(name: &str) -> Result<Format> {
        match name.to_ascii_lowercase().as_str() {
            "mtf" | "mtf-text" => Ok(Format::MtfText),
            "gxl" => Ok(Format::Gxl),
            "chrome" | "perfetto" => Ok(Format::Chrome),
            "parquet" => Ok(Format::Parquet),
            other => Err(Error::Usage(format!(
                "unknown export format {other:?}; mtfdb exports to: mtf (MTF text), gxl (GXL \
                 graph), chrome (Chrome trace JSON for Perfetto), parquet (a folder of Parquet \
                 tables)"
            ))),
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExportStats {
    /// Operations written.
    pub operations: u64,
    /// Routine calls written.
    pub routine_calls: u64,
    /// Messages, request links and collective instances found again along the export.
    pub messages: u64,
    /// Request links.
    pub request_links: u64,
    /// Collective instances.
    pub collective_instances: u64,
    /// Anomalies written as the source's (the import keeps them as they are).
    pub source_anomalies: u64,
    /// Anomalies the import derives again from the operations.
    pub derived_anomalies: u64,
    /// Chrome only: messages drawn as no flow because their receive ended before their send
    /// began in the clocks written (the ranks' clocks disagree; see
    /// [`chrome::Restriction::clock`]).
    pub backward_messages: u64,
}

/// Writes `trace` in `format` to `out`; `name` names the output in errors. A Chrome export
/// writes the whole trace ([`chrome::export`] takes a restriction) and counts what it wrote.
/// Parquet is a folder, not a stream: write it with [`export_file`] or
/// [`parquet::export_parquet`].
pub fn export(trace: &Trace, format: Format, out: impl Write, name: &Path) -> Result<ExportStats> {
    match format {
        Format::MtfText => walk(trace, &mut mtf_text::TextWriter::new(out, name)),
        Format::Gxl => {
            let s = trace.summary();
            let times = s.first_time.zip(s.last_time);
            walk(trace, &mut gxl::GxlWriter::new(out, name, times))
        }
        Format::Chrome => chrome::export(trace, &chrome::Restriction::all(), out, name),
        Format::Parquet => Err(Error::Usage(format!(
            "{}: a Parquet export is a folder of tables, not a stream",
            name.display()
        ))),
    }
}

/// Writes `trace` in `format` to the file at `path` through an [`output::Output`]: a
/// regular file is replaced only once the export is complete (a failed or killed export
/// leaves it as it was), a device or FIFO is written in place. For [`Format::Parquet`],
/// `path` is the folder the tables go in ([`parquet::export_parquet`]).
pub fn export_file(trace: &Trace, format: Format, path: &Path) -> Result<ExportStats> {
    if format == Format::Parquet {
        let s = parquet::export_parquet(trace, path)?;
        return Ok(ExportStats {
            operations: s.operations,
            routine_calls: s.routine_calls,
            messages: s.messages,
            request_links: s.requests,
            collective_instances: s.collectives,
            source_anomalies: s.anomalies,
            derived_anomalies: 0,
            backward_messages: 0,
        });
    }
    output::write_with(path, |out| export(trace, format, out, path))
}

/// Writes `bytes` to `path` whole or not at all ([`output::Output`]): a failure never
/// leaves a half-written file, nor truncates an earlier one.
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    output::write_with(path, |out| {
        out.write_all(bytes).map_err(|e| Error::io(path, e))
    })
}

/// [`write_whole`] of what `write` writes to the file: `path` becomes the file only when
/// `write` succeeds, and is left as it was (or absent) otherwise. A device or FIFO at
/// `path` is written in place ([`output::Output`]).
pub fn write_whole_with(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> Result<()>,
) -> Result<()> {
    output::write_with(path, |out| write(out.file_mut()))
}

/// Bytes gathered before they are handed to an export's output.
const SPOOL_FLUSH_AT: usize = 1 << 20;

/// A text export's output: the writer appends to `buf`, which goes to `out` a mebibyte at a
/// time; errors name the output as `name`. Shared by the GXL and Chrome writers.
pub(crate) struct Spool<W: Write> {
    /// What is written next.
    pub(crate) buf: Vec<u8>,
    out: W,
    name: PathBuf,
}

impl<W: Write> Spool<W> {
    /// A spool to `out`, named `name` in errors.
    pub(crate) fn new(out: W, name: &Path) -> Spool<W> {
        Spool {
            buf: Vec::with_capacity(SPOOL_FLUSH_AT + 4096),
            out,
            name: name.to_path_buf(),
        }
    }

    /// The output's name, for errors.
    pub(crate) fn name(&self) -> &Path {
        &self.name
    }

    /// Hands the gathered bytes to the output once there is a mebibyte of them.
    pub(crate) fn maybe_flush(&mut self) -> Result<()> {
        if self.buf.len() >= SPOOL_FLUSH_AT {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Hands the gathered bytes to the output.
    pub(crate) fn flush_buf(&mut self) -> Result<()> {
        self.out
            .write_all(&self.buf)
            .map_err(|e| Error::io(&self.name, e))?;
        self.buf.clear();
        Ok(())
    }

    /// Hands over the rest and flushes the output.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.flush_buf()?;
        self.out.flush().map_err(|e| Error::io(&self.name, e))
    }
}

/// What a format writer receives from [`walk`], in this order: the header once, then the
/// events in export order interleaved with what matching derives from them, then the
/// source's anomalies, then `finish`. Operations are named by their positions.
pub(crate) trait Writer {
    /// The declarations, and the trace's string table (names by id).
    fn header(&mut self, header: &TraceHeader, strings: &[String]) -> Result<()>;
    /// An operation at its position.
    fn operation(&mut self, op: &Operation, at: OpPosition) -> Result<()>;
    /// A routine call begins (`enter`) or ends.
    fn routine(&mut self, call: &RoutineCall, enter: bool) -> Result<()>;
    /// A message matching found, between the operations at `send` and `recv`.
    fn message(&mut self, m: &Message, send: OpPosition, recv: OpPosition) -> Result<()>;
    /// A request link matching found.
    fn request_link(&mut self, request: OpPosition, completion: OpPosition) -> Result<()>;
    /// A collective instance matching found, with its members' positions.
    fn collective(&mut self, c: &CollectiveInstance, members: &[OpPosition]) -> Result<()>;
    /// An anomaly, with the positions of the operations it names; `derived` when matching
    /// finds it again on import, else the source recorded it.
    fn anomaly(&mut self, a: &Anomaly, at: &[OpPosition], derived: bool) -> Result<()>;
    /// The end.
    fn finish(&mut self) -> Result<()>;
}

/// Operation ids to positions, through the chunk directory.
struct Positions<'t> {
    chunks: &'t [OpChunkInfo],
}

impl Positions<'_> {
    fn of(&self, id: OpId) -> Result<OpPosition> {
        let (chunk, row) = chunk_and_row(id);
        let info = self
            .chunks
            .binary_search_by_key(&chunk, |c| c.chunk)
            .map(|i| self.chunks[i])
            .map_err(|_| Error::Corrupt(format!("operation id {id} names no stored chunk")))?;
        Ok(OpPosition {
            rank: info.rank,
            thread: info.thread,
            index: info.first_row + row as u64,
        })
    }

    fn all(&self, ids: &[OpId]) -> Result<Vec<OpPosition>> {
        ids.iter().map(|&id| self.of(id)).collect()
    }
}

/// Receives what the matcher and the import's tally find along the export and hands it to
/// the writer.
struct Derived<'w, 't> {
    writer: &'w mut dyn Writer,
    positions: Positions<'t>,
    /// The anomalies found, by count: what the import will find again.
    anomalies: HashMap<Anomaly, u64>,
    tally: Tally,
    /// What the tally just found.
    found: Vec<Anomaly>,
    stats: ExportStats,
}

impl Derived<'_, '_> {
    /// An anomaly any import of the operations finds again.
    fn derive(&mut self, a: &Anomaly) -> Result<()> {
        self.stats.derived_anomalies += 1;
        *self.anomalies.entry(a.clone()).or_default() += 1;
        let at = self.positions.all(&a.ops())?;
        self.writer.anomaly(a, &at, true)
    }

    fn derive_found(&mut self) -> Result<()> {
        let mut found = std::mem::take(&mut self.found);
        for a in found.drain(..) {
            self.derive(&a)?;
        }
        self.found = found;
        Ok(())
    }
}

impl MatchSink for Derived<'_, '_> {
    fn message(&mut self, m: &Message) -> Result<()> {
        self.stats.messages += 1;
        let (send, recv) = (self.positions.of(m.send_op)?, self.positions.of(m.recv_op)?);
        self.writer.message(m, send, recv)?;
        self.tally.message(m, &mut self.found);
        self.derive_found()
    }

    fn request_link(&mut self, l: &RequestLink) -> Result<()> {
        self.stats.request_links += 1;
        let request = self.positions.of(l.request_op)?;
        let completion = self.positions.of(l.completion_op)?;
        self.writer.request_link(request, completion)
    }

    fn collective(&mut self, c: &CollectiveInstance) -> Result<()> {
        self.stats.collective_instances += 1;
        let members = self.positions.all(&c.ops)?;
        self.writer.collective(c, &members)
    }

    fn anomaly(&mut self, a: &Anomaly) -> Result<()> {
        self.derive(a)
    }
}

/// Feeds `trace` to `writer`: header, events in export order with what matching derives,
/// the source's anomalies, the end.
fn walk(trace: &Trace, writer: &mut dyn Writer) -> Result<ExportStats> {
    let strings: Vec<String> = (0..)
        .map_while(|id| trace.string(id).map(str::to_string))
        .collect();
    writer.header(trace.header(), &strings)?;
    let mut matcher = Matcher::new(trace.header());
    let mut derived = Derived {
        writer,
        positions: Positions {
            chunks: trace.op_chunks(),
        },
        anomalies: HashMap::default(),
        tally: Tally::new(trace.header().processes.len()),
        found: Vec::new(),
        stats: ExportStats::default(),
    };
    let mut events = Events::new(trace)?;
    while let Some(event) = events.next_event()? {
        match event {
            Event::Op { id, op, at } => {
                derived.stats.operations += 1;
                derived.writer.operation(&op, at)?;
                derived.tally.operation(id, &op, &mut derived.found);
                derived.derive_found()?;
                matcher.operation(id, &op, &mut derived)?;
            }
            Event::Enter(call) => {
                derived.stats.routine_calls += 1;
                derived.writer.routine(&call, true)?;
            }
            Event::Leave(call) => derived.writer.routine(&call, false)?,
        }
    }
    matcher.finish(&mut derived)?;
    derived.tally.finish(&mut derived.found);
    derived.derive_found()?;
    // What the trace holds beyond what matching finds again is the source's.
    for chunk in 0..trace.anomaly_chunk_count() {
        for a in trace.anomaly_chunk(chunk)? {
            match derived.anomalies.get_mut(&a) {
                Some(n) if *n > 0 => *n -= 1,
                _ => {
                    derived.stats.source_anomalies += 1;
                    let at = derived.positions.all(&a.ops())?;
                    derived.writer.anomaly(&a, &at, false)?;
                }
            }
        }
    }
    derived.writer.finish()?;
    Ok(derived.stats)
}

/// A routine call's enter or leave as the event a source delivers.
pub(crate) fn routine_event(call: &RoutineCall, enter: bool) -> RoutineEvent {
    RoutineEvent {
        rank: call.rank,
        thread: call.thread,
        time: if enter { call.start } else { call.end },
        routine: call.routine,
        enter,
    }
}
