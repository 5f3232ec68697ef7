//! The public face of the library: [`Database`] (many traces in one directory) and
//! [`Trace`] (one imported trace, read through its column chunks and indexes).

use std::path::{Path, PathBuf};

use roaring::RoaringTreemap;
use serde::Serialize;

use crate::analysis::clock;
use crate::error::{Error, Result};
use crate::import::run_import;
use crate::ingest::EventSink;
use crate::ingest::{dumpi, gxl, hint, mtf_text, otf1, otf2, paraver, parquet};
use crate::ingest::{Policy, ValidatingSink};
use crate::model::{
    Anomaly, CollectiveInstance, Message, OpId, Operation, Rank, RequestLink, RoutineCall,
    TraceHeader,
};
use crate::store::ids::{chunk_and_row, chunk_ids};
use crate::store::scan::{Scan, ScanRequest};
use crate::store::{
    DecodeCount, IndexDim, MessageColumns, MessageField, OpChunkInfo, OperationColumns,
    OperationField, OperationStream, PairTraffic, RankTraffic, Store, StoredResult, StoredView,
    TraceMeta, TraceReader, TraceSummary,
};

/// The source formats mtfdb reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SourceFormat {
    /// The MTF text format, version 1 (`grammar/mtf.ebnf`).
    MtfText,
    /// An OTF2 archive (Score-P), versions 2.0 to 3.x: its anchor file or its folder.
    Otf2,
    /// An OTF v1 trace (VampirTrace): its master file `NAME.otf` or its folder.
    Otf1,
    /// A Paraver trace (Extrae, Dimemas): its `.prv`, with the `.pcf` and `.row` beside it.
    Paraver,
    /// A GXL graph of MTF entities, as `mtfdb export --format gxl` writes it.
    Gxl,
    /// An SST DUMPI trace: its `.meta` file or its folder.
    Dumpi,
    /// A Parquet export of mtfdb (`mtfdb export --format parquet`): its folder, holding
    /// `operations/` and `trace/`, or one of its `TABLE/trace=NAME` folders.
    Parquet,
}

impl SourceFormat {
    /// The short name used on the command line (`--format mtf`).
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::MtfText => "mtf",
            SourceFormat::Otf2 => "otf2",
            SourceFormat::Otf1 => "otf1",
            SourceFormat::Paraver => "paraver",
            SourceFormat::Gxl => "gxl",
            SourceFormat::Dumpi => "dumpi",
            SourceFormat::Parquet => "parquet",
        }
    }

    /// How the import seam treats what breaks the metamodel's rules: what mtfdb itself writes
    /// (MTF text, its GXL and Parquet exports) strictly, since a broken rule there is damage;
    /// foreign formats as real tracers write them.
    pub fn policy(self) -> Policy {
        match self {
            SourceFormat::MtfText | SourceFormat::Gxl | SourceFormat::Parquet => Policy::Strict,
            _ => Policy::Lenient,
        }
    }

    /// Parses a `--format` argument.
    pub fn from_name(name: &str) -> Result<SourceFormat> {
        match name.to_ascii_lowercase().as_str() {
            "mtf" | "mtf-text" => Ok(SourceFormat::MtfText),
            "otf2" => Ok(SourceFormat::Otf2),
            "otf1" | "otf" => Ok(SourceFormat::Otf1),
            "paraver" | "prv" => Ok(SourceFormat::Paraver),
            "gxl" => Ok(SourceFormat::Gxl),
            "dumpi" => Ok(SourceFormat::Dumpi),
            "parquet" => Ok(SourceFormat::Parquet),
            other => Err(Error::Unsupported(format!(
                "unknown trace format {other:?}; this mtfdb reads: mtf (MTF text), otf2 (OTF2 archives), otf1 (OTF v1 traces), paraver (Paraver .prv traces), gxl (GXL graphs), dumpi (SST DUMPI traces), parquet (mtfdb's Parquet exports)"
            ))),
        }
    }

    /// Recognizes a source by its content.
    pub fn detect(path: &Path) -> Result<SourceFormat> {
        require_exists(path)?;
        if path.is_dir() {
            if parquet::looks_like_export(path) {
                return Ok(SourceFormat::Parquet);
            }
            if dumpi::find_meta(path).is_ok() {
                return Ok(SourceFormat::Dumpi);
            }
            return match otf2::find_anchor(path) {
                Ok(_) => Ok(SourceFormat::Otf2),
                Err(_) if otf1::find_master(path).is_ok() => Ok(SourceFormat::Otf1),
                Err(e) => match hint::instead(path) {
                    Some(instead) => Err(part_of_a_trace(path, &instead)),
                    None => Err(e),
                },
            };
        }
        if otf2::looks_like_anchor(path) {
            return Ok(SourceFormat::Otf2);
        }
        if otf1::looks_like_master(path) {
            return Ok(SourceFormat::Otf1);
        }
        if paraver::looks_like_prv(path) {
            return Ok(SourceFormat::Paraver);
        }
        if dumpi::looks_like_meta(path) || dumpi::looks_like_rank_file(path) {
            return Ok(SourceFormat::Dumpi);
        }
        let mut head = [0u8; 4096];
        let n = {
            use std::io::Read;
            let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
            f.read(&mut head).map_err(|e| Error::io(path, e))?
        };
        let text = String::from_utf8_lossy(&head[..n]);
        // A UTF-8 byte order mark, as some editors write, before the first line.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'));
        if gxl::looks_like_gxl(&head[..n]) {
            return Ok(SourceFormat::Gxl);
        }
        if first.is_some_and(|l| l.starts_with("MTF")) {
            return Ok(SourceFormat::MtfText);
        }
        if let Some(instead) = hint::instead(path) {
            return Err(part_of_a_trace(path, &instead));
        }
        Err(Error::Unsupported(format!(
                "{}: not a trace format mtfdb recognizes (an MTF text file starts with a line `MTF 1`, \
                 an OTF2 archive is given by its anchor file or folder, an OTF v1 trace by its \
                 NAME.otf master file or folder, a Paraver trace by its .prv starting with \
                 #Paraver, a GXL graph is XML with a <gxl> root, a DUMPI trace by its .meta file \
                 or folder); use --format to force one (mtf, otf2, otf1, paraver, gxl, dumpi)",
                path.display()
            )))
    }
}

/// The error for a path that is a part of a trace: what it is and what to give instead.
fn part_of_a_trace(path: &Path, instead: &str) -> Error {
    Error::Unsupported(format!("{}: {instead}", path.display()))
}

/// A trace as listed by [`Database::traces`].
#[derive(Debug, Clone, Serialize)]
pub struct TraceInfo {
    /// Its name.
    pub name: String,
    /// The file it was imported from.
    pub source: String,
    /// The source format.
    pub format: String,
    /// Number of processes.
    pub processes: usize,
    /// The counts.
    pub summary: TraceSummary,
}

/// An mtfdb database: a directory holding any number of imported traces.
///
/// ```no_run
/// let db = mtfdb::Database::open("traces.mtfdb")?;
/// let info = db.import("wrf16.mtf", Some("wrf16"))?;
/// println!("{} messages", info.summary.messages);
/// # Ok::<(), mtfdb::Error>(())
/// ```
pub struct Database {
    store: Store,
}

impl Database {
    /// Opens the database at `path`, creating it if absent (in an existing folder; never in a
    /// folder that holds other files). Refuses a database of another storage format version,
    /// and removes what interrupted imports left behind.
    pub fn open(path: impl AsRef<Path>) -> Result<Database> {
        Ok(Database {
            store: Store::open(path)?,
        })
    }

    /// Opens the database at `path`, which must exist: nothing is created (for commands that
    /// only read, so that a mistyped path is an error, not a new empty database).
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Database> {
        Ok(Database {
            store: Store::open_with(path, false)?,
        })
    }

    /// Checks the whole database at `path` without opening it (as SQLite's `PRAGMA
    /// integrity_check` does): the manifest, every blob of every trace's segment and every
    /// view and stored result against their checksums, and what dead writers left. With
    /// `repair`, rebuilds the catalog from the files (the segments and stored files describe
    /// themselves) and removes the leftovers. See [`crate::store::check`].
    pub fn check(path: impl AsRef<Path>, repair: bool) -> Result<crate::store::check::Report> {
        crate::store::check::check(path.as_ref(), repair)
    }

    /// False when the database's folder cannot be written (read-only media, or a folder
    /// the user may not write): every statement that stores nothing still answers; imports,
    /// drops and views fail saying that they need write access, and analyses answer
    /// without storing their results.
    pub fn writable(&self) -> bool {
        self.store.writable()
    }

    /// How long a write (an import's commit, a drop, a view) waits for another process's
    /// write to finish before it fails, saying who writes and since when: 10 s unless set.
    pub fn set_busy_timeout(&self, timeout: std::time::Duration) {
        self.store.set_busy_timeout(timeout);
    }

    /// The database's directory.
    pub fn path(&self) -> &Path {
        self.store.path()
    }

    /// Starts counting the chunk reads of every trace of this database anew
    /// ([`Database::decodes`]).
    pub fn count_decodes(&self) {
        self.store.count_decodes();
    }

    /// How many times each chunk was read (and decoded) since [`Database::count_decodes`]:
    /// a statement that decodes each chunk once shows only ones.
    pub fn decodes(&self) -> Vec<DecodeCount> {
        self.store.decodes()
    }

    /// Imports the trace at `path` (format detected from its content) under `name`, or under
    /// the file's stem when `name` is `None`. The trace becomes visible only when the whole
    /// import succeeded; on any error nothing of it remains.
    pub fn import(&self, path: impl AsRef<Path>, name: Option<&str>) -> Result<TraceInfo> {
        let path = path.as_ref();
        require_exists(path)?;
        let format = SourceFormat::detect(path)?;
        self.import_as(path, name, format)
    }

    /// Imports the trace at `path`, read as `format`.
    pub fn import_as(
        &self,
        path: impl AsRef<Path>,
        name: Option<&str>,
        format: SourceFormat,
    ) -> Result<TraceInfo> {
        self.import_with_progress(path, name, format, &mut |_| {})
    }

    /// Imports the trace at `path`, read as `format`, calling `progress` now and then while an
    /// OTF2 archive is read (locations and events read so far).
    pub fn import_with_progress(
        &self,
        path: impl AsRef<Path>,
        name: Option<&str>,
        format: SourceFormat,
        progress: &mut dyn FnMut(&otf2::Progress),
    ) -> Result<TraceInfo> {
        let path = path.as_ref();
        require_exists(path)?;
        if format == SourceFormat::Parquet {
            return self.import_parquet(path, name);
        }
        let name = match name {
            Some(n) => n.to_string(),
            None => default_trace_name(path, format),
        };
        let writer = self.store.begin_import(&name)?;
        let source = path.display().to_string();
        let meta = run_import(writer, &source, format.name(), format.policy(), |sink| {
            read_source(path, format, sink, progress)
        })?;
        Ok(info_of(&meta))
    }

    /// Imports the trace at `path`, read as `format`, with its times corrected by
    /// `correction` ([`crate::analysis::clock`]); `None` is [`Database::import_with_progress`].
    ///
    /// The source is read twice: first into a scratch trace (named `NAME~clock`, dropped at
    /// the end) whose matched messages give the clock map, then through the map into the
    /// trace. The map is stored with the trace ([`clock::APPLIED_KEY`], shown by `mtfdb
    /// clock`): each rank's offset and drift tell a corrected time's original, and the
    /// controlled logical clock's jumps what it moved. A Parquet export is re-imported as it
    /// was exported, never corrected again.
    pub fn import_corrected(
        &self,
        path: impl AsRef<Path>,
        name: Option<&str>,
        format: SourceFormat,
        correction: clock::ClockCorrection,
        progress: &mut dyn FnMut(&otf2::Progress),
    ) -> Result<TraceInfo> {
        let path = path.as_ref();
        if correction == clock::ClockCorrection::None {
            return self.import_with_progress(path, name, format, progress);
        }
        require_exists(path)?;
        if format == SourceFormat::Parquet {
            return Err(Error::Usage(
                "a Parquet export is imported as it was exported: --clock-correction applies \
                 to the trace formats"
                    .into(),
            ));
        }
        let name = match name {
            Some(n) => n.to_string(),
            None => default_trace_name(path, format),
        };
        if self.trace_names()?.contains(&name) {
            return Err(Error::TraceExists(name));
        }
        let scratch = format!("{name}~clock");
        self.import_with_progress(path, Some(&scratch), format, progress)?;
        let map = self
            .trace(&scratch)
            .and_then(|raw| clock::ClockMap::estimate(&raw, correction));
        self.drop_trace(&scratch)?;
        let map = map?;
        let writer = self.store.begin_import(&name)?;
        let source = path.display().to_string();
        let meta = run_import(writer, &source, format.name(), format.policy(), |sink| {
            let mut corrected = crate::import::clock::ClockSink::new(sink, &map);
            read_source(path, format, &mut corrected, progress)
        })?;
        self.trace(&name)?.put_result(clock::APPLIED_KEY, &map)?;
        Ok(info_of(&meta))
    }

    /// Imports a Parquet export: under `name`, else the name it was exported under; the
    /// trace keeps the source and format it was first imported from.
    fn import_parquet(&self, path: &Path, name: Option<&str>) -> Result<TraceInfo> {
        let export = parquet::locate(path, name)?;
        let row = parquet::trace_row(&export)?;
        let name = name.unwrap_or(&row.name);
        let writer = self.store.begin_import(name)?;
        let meta = run_import(writer, &row.source, &row.format, Policy::Lenient, |sink| {
            parquet::read_export(&export, sink)
        })?;
        Ok(info_of(&meta))
    }

    /// Imports a trace produced by code rather than read from a file: `produce` feeds the
    /// [`ImportSink`](crate::import::ImportSink) (an [`EventSink`](crate::ingest::EventSink)) a header, operations and
    /// routine events. Atomic like [`Database::import`]: an error from `produce` leaves nothing.
    ///
    /// ```no_run
    /// use mtfdb::ingest::EventSink;
    /// use mtfdb::model::{Communicator, OpKind, Operation, Process, TraceHeader};
    /// let db = mtfdb::Database::open("traces.mtfdb")?;
    /// db.import_events("tiny", |sink| {
    ///     let header = TraceHeader {
    ///         processes: (0..2).map(|rank| Process { rank, name: format!("P{rank}"), processor: None }).collect(),
    ///         communicators: vec![Communicator { id: 0, name: "C1".into(), members: vec![0, 1] }],
    ///         ..TraceHeader::default()
    ///     };
    ///     sink.header(&header)?;
    ///     let mut send = Operation::new(0, OpKind::Send, 10, 20);
    ///     (send.comm, send.dest, send.send_tag, send.send_bytes) = (Some(0), Some(1), Some(7), 64);
    ///     sink.operation(&send)?;
    ///     let mut recv = Operation::new(1, OpKind::Recv, 12, 30);
    ///     (recv.comm, recv.source, recv.recv_tag, recv.recv_bytes) = (Some(0), Some(0), Some(7), 64);
    ///     sink.operation(&recv)?;
    ///     sink.finish()
    /// })?;
    /// # Ok::<(), mtfdb::Error>(())
    /// ```
    pub fn import_events(
        &self,
        name: &str,
        produce: impl FnOnce(&mut ValidatingSink<'_>) -> Result<()>,
    ) -> Result<TraceInfo> {
        self.import_events_from(name, "(generated in memory)", "events", produce)
    }

    /// [`Database::import_events`] for items of a foreign source (a reader of another
    /// tracer's format written outside this crate): under the lenient policy of the foreign
    /// formats, every item that breaks a rule of the metamodel is kept, repaired and reported
    /// as an anomaly of the rule's class ([`crate::model::Rule`]) instead of refusing the import.
    pub fn import_foreign_events(
        &self,
        name: &str,
        produce: impl FnOnce(&mut ValidatingSink<'_>) -> Result<()>,
    ) -> Result<TraceInfo> {
        let writer = self.store.begin_import(name)?;
        let source = "(generated in memory)";
        let meta = run_import(writer, source, "events", Policy::Lenient, produce)?;
        Ok(info_of(&meta))
    }

    /// [`Database::import_events`], recording `source` and `format` as where the trace came
    /// from (what `traces` shows).
    pub(crate) fn import_events_from(
        &self,
        name: &str,
        source: &str,
        format: &str,
        produce: impl FnOnce(&mut ValidatingSink<'_>) -> Result<()>,
    ) -> Result<TraceInfo> {
        let writer = self.store.begin_import(name)?;
        let meta = run_import(writer, source, format, Policy::Strict, produce)?;
        Ok(info_of(&meta))
    }

    /// The names of the traces the database holds, sorted (without reading their metadata).
    pub fn trace_names(&self) -> Result<Vec<String>> {
        Ok(self
            .store
            .ready_traces()?
            .into_iter()
            .map(|e| e.name)
            .collect())
    }

    /// The traces the database holds, by name (a trace another process drops while they are
    /// listed is left out: the list is the traces as that drop left them).
    pub fn traces(&self) -> Result<Vec<TraceInfo>> {
        let mut out = Vec::new();
        for e in self.store.ready_traces()? {
            match self.store.reader(&e.name) {
                Ok(reader) => out.push(info_of(reader.meta())),
                Err(Error::NoSuchTrace { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(out)
    }

    /// Opens the trace called `name`.
    pub fn trace(&self, name: &str) -> Result<Trace> {
        Ok(Trace {
            reader: self.store.reader(name)?,
            chunks_by_rank: std::sync::OnceLock::new(),
        })
    }

    /// Removes the trace called `name`.
    pub fn drop_trace(&self, name: &str) -> Result<()> {
        self.store.drop_trace(name)
    }

    /// Bytes the whole database occupies on disk.
    pub fn size_on_disk(&self) -> Result<u64> {
        self.store.size_on_disk()
    }
}

fn require_exists(path: &Path) -> Result<()> {
    if path.exists() {
        Ok(())
    } else {
        Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        ))
    }
}

/// The name a trace gets without `--name`: the file's stem; for an OTF2 archive given by its
/// folder, or by an anchor called `traces.otf2` (Score-P's default), the folder's name; for a
/// DUMPI trace, its `.meta` file's stem.
fn default_trace_name(path: &Path, format: SourceFormat) -> String {
    let stem = |p: &Path| {
        p.file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .filter(|s| !s.is_empty())
    };
    let folder_name = |p: &Path| {
        std::fs::canonicalize(p)
            .ok()
            .and_then(|p| p.file_name().map(|s| s.to_string_lossy().to_string()))
    };
    let name = match format {
        SourceFormat::Otf2 | SourceFormat::Otf1 if path.is_dir() => folder_name(path),
        SourceFormat::Otf2 if stem(path).as_deref() == Some("traces") => path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .and_then(folder_name)
            .or_else(|| stem(path)),
        SourceFormat::Dumpi => dumpi::find_meta(path).ok().and_then(|m| stem(&m)),
        _ => stem(path),
    };
    name.unwrap_or_else(|| "trace".to_string())
}

fn info_of(meta: &TraceMeta) -> TraceInfo {
    TraceInfo {
        name: meta.name.clone(),
        source: meta.source.clone(),
        format: meta.format.clone(),
        processes: meta.header.processes.len(),
        summary: meta.summary.clone(),
    }
}

/// One imported trace.
pub struct Trace {
    reader: TraceReader,
    /// Per rank, the places in `op_chunks` of its chunks: built on first use, so that finding
    /// one rank's chunks costs its chunks, not a scan of every rank's.
    chunks_by_rank: std::sync::OnceLock<ChunksByRank>,
}

/// The places in a trace's chunk directory of each rank's operation chunks, ranks one after
/// another in one vector (a vector per rank was 16,384 allocations at the first per-rank
/// analysis of a 16,384-rank trace).
#[derive(Debug)]
struct ChunksByRank {
    /// Where each rank's places begin in `places`, and where the last one's end.
    starts: Vec<u32>,
    places: Vec<u32>,
}

impl ChunksByRank {
    fn new(chunks: &[OpChunkInfo]) -> ChunksByRank {
        let ranks = chunks
            .iter()
            .map(|c| c.rank as usize + 1)
            .max()
            .unwrap_or(0);
        let places = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| (c.rank as usize, i as u32));
        let (starts, places) = crate::grouping::by_key(ranks, places);
        ChunksByRank { starts, places }
    }

    /// `rank`'s places, in directory order.
    fn of(&self, rank: Rank) -> &[u32] {
        let r = rank as usize;
        match (self.starts.get(r), self.starts.get(r + 1)) {
            (Some(&from), Some(&to)) => &self.places[from as usize..to as usize],
            _ => &[],
        }
    }
}

impl Trace {
    fn meta(&self) -> &TraceMeta {
        self.reader.meta()
    }

    /// Makes every later read of this trace (and the analyses over it) stop with
    /// [`Error::Cancelled`] once `flag` is set; Ctrl-C sets it in the shell and the CLI.
    pub fn set_cancel(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.reader.set_cancel(flag);
    }

    /// [`Error::Cancelled`] when the flag given to [`Trace::set_cancel`] is set: long
    /// computations call it between steps.
    pub fn check_cancel(&self) -> Result<()> {
        self.reader.check_cancel()
    }

    /// The trace's name.
    pub fn name(&self) -> &str {
        &self.meta().name
    }

    /// Its listing: name, source and counts.
    pub fn info(&self) -> TraceInfo {
        info_of(self.meta())
    }

    /// The counts computed at import.
    pub fn summary(&self) -> &TraceSummary {
        &self.meta().summary
    }

    /// Declarations: scenario, processors, processes, communicators.
    pub fn header(&self) -> &TraceHeader {
        &self.meta().header
    }

    /// The string table: datatype, routine and MPI call names, by id.
    pub fn strings(&self) -> &[String] {
        &self.meta().strings
    }

    /// The string table entry `id` (a datatype, routine or MPI call name).
    pub fn string(&self, id: u32) -> Option<&str> {
        self.meta().strings.get(id as usize).map(String::as_str)
    }

    /// The display name of an operation kind (its MPI name, or its `Other` name).
    pub fn kind_name(&self, kind: crate::model::OpKind) -> String {
        match kind {
            crate::model::OpKind::Other(id) => self.string(id).unwrap_or("?").to_string(),
            k => k.mpi_name().unwrap_or("?").to_string(),
        }
    }

    /// Bytes and message counts per process (by rank), computed at import.
    pub fn traffic(&self) -> &[RankTraffic] {
        &self.meta().traffic
    }

    /// Messages and bytes per communicating (sender, receiver) pair, computed at import.
    pub fn pairs(&self) -> &[PairTraffic] {
        &self.meta().pairs
    }

    /// Per message chunk: earliest send time and latest receive time.
    pub fn message_chunk_times(&self) -> &[(u64, u64)] {
        &self.meta().message_chunk_times
    }

    /// The number of operations of each process, by rank (from the chunk directory).
    pub fn operations_per_rank(&self) -> Vec<u64> {
        let mut counts = vec![0u64; self.header().processes.len()];
        for c in self.op_chunks() {
            if let Some(n) = counts.get_mut(c.rank as usize) {
                *n += u64::from(c.rows);
            }
        }
        counts
    }

    /// The operation chunks, in chunk order.
    pub fn op_chunks(&self) -> &[OpChunkInfo] {
        &self.meta().op_chunks
    }

    /// Bytes of the trace's stored keys and values (chunks, indexes and metadata).
    pub fn stored_bytes(&self) -> Result<u64> {
        self.reader.stored_bytes()
    }

    /// The operations of one chunk, with their ids.
    pub fn chunk_operations(&self, info: &OpChunkInfo) -> Result<Vec<(OpId, Operation)>> {
        let ops = self.chunk_operation_rows(info)?;
        Ok(chunk_ids(info.chunk, ops.len()).zip(ops).collect())
    }

    /// The operations of one chunk in row order, without their ids: row `i`'s id is
    /// `chunk_ids(info.chunk, ..)`'s `i`-th (saves a copy of every row where the ids are
    /// counted instead).
    pub(crate) fn chunk_operation_rows(&self, info: &OpChunkInfo) -> Result<Vec<Operation>> {
        self.reader.operations(info.chunk, info.rank, info.thread)
    }

    /// The operation chunks of `rank` (all its threads), in chunk order.
    ///
    /// ```no_run
    /// # let db = mtfdb::Database::open("traces.mtfdb")?;
    /// let trace = db.trace("wrf16")?;
    /// let rows: u64 = trace.op_chunks_of(3).map(|c| u64::from(c.rows)).sum();
    /// # Ok::<(), mtfdb::Error>(())
    /// ```
    pub fn op_chunks_of(&self, rank: Rank) -> impl DoubleEndedIterator<Item = &OpChunkInfo> {
        let chunks = self.op_chunks();
        let by_rank = self
            .chunks_by_rank
            .get_or_init(|| ChunksByRank::new(chunks));
        by_rank.of(rank).iter().map(move |&i| &chunks[i as usize])
    }

    /// Every operation of `rank` (all its threads), in time order per thread.
    pub fn process_operations(&self, rank: Rank) -> Result<Vec<(OpId, Operation)>> {
        let mut out = Vec::new();
        for info in self.op_chunks_of(rank) {
            out.extend(self.chunk_operations(info)?);
        }
        Ok(out)
    }

    /// The operations whose ids are in `ids` (from an index or a view), in id order.
    pub fn operations(&self, ids: &RoaringTreemap) -> Result<Vec<(OpId, Operation)>> {
        let missing = |id: OpId| {
            Error::Usage(format!(
                "operation id {id} is not in trace {:?}",
                self.name()
            ))
        };
        let mut out = Vec::with_capacity(ids.len() as usize);
        // The chunk being read, its operations handed out in row order (ids ascend), each
        // moved out rather than copied.
        let mut current: Option<(u32, std::iter::Enumerate<std::vec::IntoIter<Operation>>)> = None;
        for id in ids {
            let (chunk, row) = chunk_and_row(id);
            if current.as_ref().map(|c| c.0) != Some(chunk) {
                let info = self
                    .op_chunks()
                    .binary_search_by_key(&chunk, |c| c.chunk)
                    .map(|i| self.op_chunks()[i])
                    .map_err(|_| missing(id))?;
                let ops = self.reader.operations(chunk, info.rank, info.thread)?;
                current = Some((chunk, ops.into_iter().enumerate()));
            }
            let rows = &mut current.as_mut().expect("loaded").1;
            let op = rows
                .find(|(r, _)| *r == row)
                .map(|(_, op)| op)
                .ok_or_else(|| missing(id))?;
            out.push((id, op));
        }
        Ok(out)
    }

    /// Only the given fields of message chunk `chunk`, read row by row through the returned
    /// reader: a scan that needs two fields decodes two columns.
    pub fn message_columns(&self, chunk: u32, fields: &[MessageField]) -> Result<MessageColumns> {
        self.reader.message_columns(chunk, fields)
    }

    /// Only the given fields of operation chunk `chunk`, read row by row through the returned
    /// reader.
    pub fn operation_columns(
        &self,
        chunk: u32,
        fields: &[OperationField],
    ) -> Result<OperationColumns> {
        self.reader.operation_columns(chunk, fields)
    }

    /// The start times of operation chunk `chunk`'s rows, in row order, into `out` (what it
    /// held is replaced): for a reader of many small chunks, one buffer for all of them.
    pub fn operation_starts_into(
        &self,
        chunk: u32,
        out: &mut Vec<crate::model::Time>,
    ) -> Result<()> {
        self.reader.operation_starts_into(chunk, out)
    }

    /// Only the given fields of operation chunk `chunk`, read a window of rows at a time
    /// through the returned stream, which keeps the columns as stored (a few bytes per value)
    /// and decodes only each window: for a reader that holds many chunks open at once.
    pub fn operation_stream(
        &self,
        chunk: u32,
        fields: &[OperationField],
    ) -> Result<OperationStream> {
        self.reader.operation_stream(chunk, fields)
    }

    /// Plans a scan of the operation or message table through the scan seam
    /// ([`crate::store::scan`]): chunks pruned by `req`'s filters, each surviving chunk's
    /// projected columns decoded once when the scan runs.
    pub fn scan<'t>(&'t self, req: &ScanRequest<'t>) -> Result<Scan<'t>> {
        self.reader.scan(req)
    }

    /// Every message's (sending operation, receiving operation), by message id, read from two
    /// columns of the message chunks.
    pub fn message_ops(&self) -> Result<Vec<(OpId, OpId)>> {
        let mut out = Vec::with_capacity(self.summary().messages as usize);
        for chunk in 0..self.message_chunk_count() {
            let m = self.message_columns(chunk, &[MessageField::SendOp, MessageField::RecvOp])?;
            out.extend((0..m.rows()).map(|row| (m.send_op(row), m.recv_op(row))));
        }
        Ok(out)
    }

    /// Like [`Trace::index`], but reading only the given chunks' bitmaps.
    pub fn index_in_chunks(
        &self,
        dim: IndexDim,
        value: u32,
        chunks: &[u32],
    ) -> Result<RoaringTreemap> {
        self.reader.index_in_chunks(dim, value, chunks)
    }

    /// The operation ids indexed under `value` on `dim` (also message ids for the message
    /// dimensions).
    pub fn index(&self, dim: IndexDim, value: u32) -> Result<RoaringTreemap> {
        self.reader.index(dim, value)
    }

    /// The rows of chunks `0..chunks` of a table, each chunk's read by `read`.
    fn table_rows<T>(
        &self,
        chunks: u32,
        read: impl Fn(&TraceReader, u32) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for chunk in 0..chunks {
            out.extend(read(&self.reader, chunk)?);
        }
        Ok(out)
    }

    /// The number of message chunks (a message id names its chunk and row, see
    /// [`crate::store::ids`]).
    pub fn message_chunk_count(&self) -> u32 {
        self.meta().message_chunks
    }

    /// The messages of one chunk, in matching order: read a large trace chunk by chunk
    /// rather than whole.
    pub fn message_chunk(&self, chunk: u32) -> Result<Vec<Message>> {
        self.reader.messages(chunk)
    }

    /// The messages whose ids are in `ids`, with their ids, in id order.
    pub fn messages_by_id(&self, ids: &RoaringTreemap) -> Result<Vec<(u64, Message)>> {
        self.read_messages(ids, true)
    }

    /// Like [`Trace::messages_by_id`] but without reading the two operation-id columns, the
    /// costliest to decode: `send_op` and `recv_op` are 0 in what it returns. For queries, which
    /// show messages without their operations.
    pub fn messages_by_id_without_ops(&self, ids: &RoaringTreemap) -> Result<Vec<(u64, Message)>> {
        self.read_messages(ids, false)
    }

    fn read_messages(&self, ids: &RoaringTreemap, with_ops: bool) -> Result<Vec<(u64, Message)>> {
        let fields: Vec<MessageField> = MessageField::ALL
            .into_iter()
            .filter(|f| with_ops || !matches!(f, MessageField::SendOp | MessageField::RecvOp))
            .collect();
        let ids: Vec<u64> = ids.iter().collect();
        let mut out = Vec::with_capacity(ids.len());
        let mut current: Option<MessageColumns> = None;
        for (i, &id) in ids.iter().enumerate() {
            let (chunk, row) = chunk_and_row(id);
            if current.as_ref().map(MessageColumns::chunk) != Some(chunk) {
                if chunk >= self.meta().message_chunks {
                    return Err(Error::Usage(format!(
                        "message id {id} is not in trace {:?}",
                        self.name()
                    )));
                }
                // Columns are read from their start, but only as far as the last row wanted.
                let last = ids[i..]
                    .iter()
                    .take_while(|&&x| chunk_and_row(x).0 == chunk)
                    .last()
                    .map_or(0, |&x| chunk_and_row(x).1);
                current = Some(
                    self.reader
                        .message_column_prefixes(chunk, &fields, last + 1)?,
                );
            }
            let messages = current.as_ref().expect("loaded");
            if row >= messages.rows() {
                return Err(Error::Usage(format!(
                    "message id {id} is not in trace {:?}",
                    self.name()
                )));
            }
            out.push((id, messages.message(row)));
        }
        Ok(out)
    }

    /// The ids of every operation.
    pub fn all_operation_ids(&self) -> RoaringTreemap {
        let mut ids = RoaringTreemap::new();
        for c in self.op_chunks() {
            ids.insert_range(chunk_ids(c.chunk, c.rows as usize));
        }
        ids
    }

    /// The ids of every message (`0..messages`, chunk-addressed like operations).
    pub fn all_message_ids(&self) -> RoaringTreemap {
        let mut ids = RoaringTreemap::new();
        if self.summary().messages > 0 {
            ids.insert_range(0..self.summary().messages);
        }
        ids
    }

    /// True while the trace is as it was when opened (the same data, views and stored
    /// results): a program that keeps a trace open across statements opens it again when it
    /// is not, to see what other processes committed since.
    pub fn is_current(&self) -> Result<bool> {
        self.reader.is_current()
    }

    /// Stores (or replaces) a view of this trace.
    pub fn put_view(&self, name: &str, view: &StoredView) -> Result<()> {
        self.reader.put_view(name, view)
    }

    /// The view `name` of this trace, if any.
    pub fn view(&self, name: &str) -> Result<Option<StoredView>> {
        self.reader.view(name)
    }

    /// Removes a view; false if there was none.
    pub fn drop_view(&self, name: &str) -> Result<bool> {
        self.reader.drop_view(name)
    }

    /// Every view of this trace, by name.
    pub fn views(&self) -> Result<Vec<(String, StoredView)>> {
        self.reader.views()
    }

    /// Stores an analysis result (see [`crate::analysis::detection`]) under `key`.
    pub fn put_result<T: StoredResult>(&self, key: &str, value: &T) -> Result<()> {
        self.reader.put_result(key, value)
    }

    /// The analysis result stored under `key`, if any stored under `T`'s schema version.
    pub fn result<T: StoredResult>(&self, key: &str) -> Result<Option<T>> {
        self.reader.result(key)
    }

    /// The analysis result stored under `key`; when there is none (or only one of another
    /// schema version), or with `refresh`, the one `compute` makes, stored under `key` first.
    pub fn stored_result<T: StoredResult>(
        &self,
        key: &str,
        refresh: bool,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        if !refresh {
            if let Some(stored) = self.result(key)? {
                return Ok(stored);
            }
        }
        let result = compute()?;
        self.put_result(key, &result)?;
        Ok(result)
    }

    /// Removes the stored analysis results whose keys start with `prefix`.
    pub fn drop_results(&self, prefix: &str) -> Result<usize> {
        self.reader.drop_results(prefix)
    }

    /// Every matched message, in matching order (message id = position).
    pub fn messages(&self) -> Result<Vec<Message>> {
        self.table_rows(self.meta().message_chunks, TraceReader::messages)
    }

    /// Every request link (non-blocking operation → the Wait/Test that completed it).
    pub fn request_links(&self) -> Result<Vec<RequestLink>> {
        self.table_rows(self.meta().link_chunks, TraceReader::request_links)
    }

    /// Every collective instance.
    pub fn collective_instances(&self) -> Result<Vec<CollectiveInstance>> {
        self.table_rows(
            self.meta().collective_chunks,
            TraceReader::collective_instances,
        )
    }

    /// Every routine call.
    pub fn routine_calls(&self) -> Result<Vec<RoutineCall>> {
        self.table_rows(self.meta().routine_chunks, TraceReader::routine_calls)
    }

    /// Every anomaly recorded at import.
    pub fn anomalies(&self) -> Result<Vec<Anomaly>> {
        self.reader.anomalies()
    }

    /// The number of anomaly chunks: read a trace with many anomalies chunk by chunk.
    pub fn anomaly_chunk_count(&self) -> u32 {
        self.meta().anomaly_chunks
    }

    /// The anomalies of one chunk, in the order the import recorded them.
    pub fn anomaly_chunk(&self, chunk: u32) -> Result<Vec<Anomaly>> {
        self.reader.anomaly_chunk(chunk)
    }

    /// The number of request-link chunks: read the links chunk by chunk.
    pub fn request_link_chunk_count(&self) -> u32 {
        self.meta().link_chunks
    }

    /// The request links of one chunk.
    pub fn request_link_chunk(&self, chunk: u32) -> Result<Vec<RequestLink>> {
        self.reader.request_links(chunk)
    }

    /// The number of collective-instance chunks: read the instances chunk by chunk.
    pub fn collective_chunk_count(&self) -> u32 {
        self.meta().collective_chunks
    }

    /// The collective instances of one chunk.
    pub fn collective_chunk(&self, chunk: u32) -> Result<Vec<CollectiveInstance>> {
        self.reader.collective_instances(chunk)
    }

    /// The counters the trace recorded (hardware counters such as PAPI's), in the order of
    /// their values; empty for a trace that recorded none.
    pub fn metrics(&self) -> Result<Vec<crate::model::Metric>> {
        self.reader.metrics()
    }

    /// The counter values of the operations of operation chunk `chunk`, by operation id, in
    /// a trace with `metrics` counters (see [`crate::model::MetricValues`]).
    pub fn operation_counters(
        &self,
        chunk: u32,
        metrics: usize,
    ) -> Result<crate::store::counters::ChunkCounters> {
        self.reader
            .counters(crate::store::Table::Operations, chunk, metrics)
    }

    /// The counter values of the routine calls of routine-call chunk `chunk`, by position
    /// (the `id` of `ROUTINE CALLS`: chunk * 65,536 + row), in a trace with `metrics` counters.
    pub fn routine_counters(
        &self,
        chunk: u32,
        metrics: usize,
    ) -> Result<crate::store::counters::ChunkCounters> {
        self.reader
            .counters(crate::store::Table::Routines, chunk, metrics)
    }

    /// [`Trace::operation_counters`] read forward a window of rows at a time, for readers
    /// that hold many chunks open at once.
    pub fn operation_counter_stream(
        &self,
        chunk: u32,
        metrics: usize,
    ) -> Result<crate::store::counters::CounterStream> {
        self.reader
            .counter_stream(crate::store::Table::Operations, chunk, metrics)
    }

    /// The number of routine-call chunks.
    pub fn routine_chunk_count(&self) -> u32 {
        self.meta().routine_chunks
    }

    /// The routine calls of one chunk, in the order they ended (calls of different locations
    /// interleave).
    pub fn routine_chunk(&self, chunk: u32) -> Result<Vec<RoutineCall>> {
        self.reader.routine_calls(chunk)
    }
}

/// The default database path: `MTFDB_DB`, else `./mtfdb.db`.
pub fn default_database_path() -> PathBuf {
    std::env::var_os("MTFDB_DB")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("mtfdb.db"))
}

/// Reads the trace at `path` as `format` into `sink`.
fn read_source(
    path: &Path,
    format: SourceFormat,
    sink: &mut dyn EventSink,
    progress: &mut dyn FnMut(&otf2::Progress),
) -> Result<()> {
    match format {
        SourceFormat::MtfText => mtf_text::parse_file(path, sink).map(|_| ()),
        SourceFormat::Otf2 => otf2::read_archive(path, sink, progress).map(|_| ()),
        SourceFormat::Otf1 => otf1::read_trace(path, sink, progress).map(|_| ()),
        SourceFormat::Paraver => paraver::read_trace(path, sink).map(|_| ()),
        SourceFormat::Gxl => gxl::parse_file(path, sink),
        SourceFormat::Dumpi => dumpi::read_trace(path, sink, progress).map(|_| ()),
        SourceFormat::Parquet => parquet::read_export(&parquet::locate(path, None)?, sink),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ranks_chunks_are_its_own_in_directory_order() {
        let chunks: Vec<OpChunkInfo> = [2, 0, 2, 5, 0]
            .into_iter()
            .enumerate()
            .map(|(i, rank)| OpChunkInfo {
                chunk: i as u32,
                rank,
                rows: 1,
                ..OpChunkInfo::default()
            })
            .collect();
        let by_rank = ChunksByRank::new(&chunks);
        assert_eq!(by_rank.of(0), &[1, 4]);
        assert_eq!(by_rank.of(1), &[] as &[u32]);
        assert_eq!(by_rank.of(2), &[0, 2]);
        assert_eq!(by_rank.of(5), &[3]);
        assert_eq!(by_rank.of(6), &[] as &[u32]);
        assert_eq!(ChunksByRank::new(&[]).of(0), &[] as &[u32]);
    }
}
