//! Reads a Parquet export ([`crate::export::parquet`]) back into an [`EventSink`]: the
//! header and string table from the `trace` table, then every location's operations and
//! routine enters and leaves in time order (merged across `rank_block` files), then the
//! anomalies the source had recorded. What the import derives itself (messages, request
//! links, collective instances, and the anomalies matching finds) is found again from the
//! operations, as for every other source.
//!
//! Files are read one record batch at a time: memory follows a batch per file and what the
//! locations hold at the current time, not the trace.
//!
//! The path given is the export's folder (holding `operations/` and `trace/`), or one of its
//! `TABLE/trace=NAME` folders; a folder that holds several traces' exports needs the name.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{
    Array, AsArray, BooleanArray, Int32Array, ListArray, RecordBatch, StringArray, UInt16Array,
    UInt32Array, UInt64Array, UInt8Array,
};
use arrow::datatypes::{DataType, UInt64Type};
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;

use super::anomaly_fields::{build, Fields};
use super::EventSink;
use crate::error::{Error, Result};
use crate::export::parquet::{schema, table_dir, HeaderJson};
use crate::ingest::excerpt::{clipped, clipped_message, quoted};
use std::collections::HashSet;

use crate::hash::FxHashMap as HashMap;
use crate::import::Tally;
use crate::ingest::matcher::{MatchSink, Matcher};
use crate::model::{
    Anomaly, CollectiveInstance, Message, OpKind, OpPosition, Operation, Rank, RequestLink,
    RoutineCall, RoutineEvent, StrId, Time,
};

/// Rows read from a file at a time.
const BATCH: usize = 8192;

/// One trace's export: the folder that holds the tables, and the trace's name in the paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The folder holding `operations/`, `trace/`, ….
    pub root: PathBuf,
    /// The `NAME` of `trace=NAME`.
    pub name: String,
}

/// The `trace` table's row.
#[derive(Debug, Clone)]
pub struct TraceRow {
    /// The trace's name when it was exported.
    pub name: String,
    /// The format it was first imported from.
    pub format: String,
    /// The file it was first imported from.
    pub source: String,
    /// The header and string table, as JSON.
    pub header: String,
}

/// Whether `path` is a Parquet export's folder, or a `trace=NAME` folder inside one.
pub fn looks_like_export(path: &Path) -> bool {
    if !path.is_dir() {
        return false;
    }
    if path.join("operations").is_dir() && path.join("trace").is_dir() {
        return true;
    }
    partition_of(path).is_some()
}

/// For `ROOT/TABLE/trace=NAME`: (ROOT, NAME), when ROOT looks like an export.
fn partition_of(path: &Path) -> Option<(PathBuf, String)> {
    let file = path.file_name()?.to_str()?;
    let name = file.strip_prefix("trace=")?;
    let root = path.parent()?.parent()?;
    let root = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    (root.join("operations").is_dir() && root.join("trace").is_dir())
        .then(|| (root.to_path_buf(), name.to_string()))
}

/// The export at `path`, of the trace `wanted` when the folder holds several.
pub fn locate(path: &Path, wanted: Option<&str>) -> Result<Export> {
    if !path.exists() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such folder"),
        ));
    }
    if let Some((root, name)) = partition_of(path) {
        return Ok(Export { root, name });
    }
    if !(path.join("operations").is_dir() && path.join("trace").is_dir()) {
        return Err(bad(
            path,
            "not a Parquet export (a folder with operations/ and trace/ tables, or one of its TABLE/trace=NAME folders)",
        ));
    }
    let trace_dir = path.join("trace");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&trace_dir).map_err(|e| Error::io(&trace_dir, e))? {
        let entry = entry.map_err(|e| Error::io(&trace_dir, e))?;
        if let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(|f| f.strip_prefix("trace="))
        {
            if entry.path().is_dir() {
                names.push(n.to_string());
            }
        }
    }
    names.sort();
    let name = match (names.as_slice(), wanted) {
        ([], _) => {
            return Err(bad(
                &trace_dir,
                "holds no trace=NAME folder: the export has no trace",
            ))
        }
        ([one], _) => one.clone(),
        (_, Some(w)) if names.iter().any(|n| n == w) => w.to_string(),
        (_, _) => {
            return Err(Error::Usage(format!(
                "{}: holds the exports of several traces ({}); import one by its folder, {}",
                path.display(),
                names.join(", "),
                path.join("trace")
                    .join(format!("trace={}", names[0]))
                    .display()
            )))
        }
    };
    Ok(Export {
        root: path.to_path_buf(),
        name,
    })
}

/// A file's column names for a message: the first 20, each cut to a sane length.
fn column_list(schema: &arrow::datatypes::Schema) -> String {
    let fields = schema.fields();
    let mut names: Vec<String> = fields.iter().take(20).map(|f| clipped(f.name())).collect();
    if fields.len() > 20 {
        names.push(format!("… ({} in all)", fields.len()));
    }
    names.join(", ")
}

/// `e` placed in the export: a rule the import's checks find broken names the table folder
/// its item came from.
fn placed(e: Error, dir: &Path) -> Error {
    match e {
        Error::Rule(v) => Error::input(dir.display().to_string(), 0, 0, v.rule, v.message, ""),
        other => other,
    }
}

fn bad(path: &Path, why: impl Into<String>) -> Error {
    Error::input(
        path.display().to_string(),
        0,
        0,
        "Parquet export",
        why.into(),
        "",
    )
}

/// The table's files, in `rank_block` order, then part order.
fn table_files(export: &Export, table: &str) -> Result<Vec<PathBuf>> {
    let dir = table_dir(&export.root, table, &export.name);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files: Vec<(u64, u64, PathBuf)> = Vec::new();
    let mut visit = |d: &Path, block: u64| -> Result<Vec<(u64, PathBuf)>> {
        let mut subdirs = Vec::new();
        for entry in std::fs::read_dir(d).map_err(|e| Error::io(d, e))? {
            let entry = entry.map_err(|e| Error::io(d, e))?;
            let path = entry.path();
            let file = entry.file_name().to_string_lossy().to_string();
            if path.is_dir() {
                if let Some(k) = file.strip_prefix("rank_block=") {
                    let k = k.parse::<u64>().map_err(|_| {
                        bad(&path, "a rank_block= folder whose value is not a number")
                    })?;
                    subdirs.push((k, path));
                }
            } else if file.ends_with(".parquet") && !file.starts_with(['.', '_']) {
                let n = file
                    .strip_prefix("part-")
                    .and_then(|r| r.strip_suffix(".parquet"))
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(u64::MAX);
                files.push((block, n, path));
            }
        }
        Ok(subdirs)
    };
    let subdirs = visit(&dir, 0)?;
    for (k, sub) in subdirs {
        visit(&sub, k)?;
    }
    files.sort();
    Ok(files.into_iter().map(|(_, _, p)| p).collect())
}

/// A table file being read batch by batch, its schema checked against the contract.
struct Reader {
    path: PathBuf,
    inner: ParquetRecordBatchReader,
}

impl Reader {
    fn open(path: &Path, table: &str) -> Result<Reader> {
        guarded(path, || Reader::open_unguarded(path, table))
    }

    fn open_unguarded(path: &Path, table: &str) -> Result<Reader> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        // The column types come from the Parquet schema alone: the `ARROW:schema` value
        // beside it is only a hint (the contract's types are all plain Parquet types), and
        // arrow-ipc panics on some damaged ones instead of failing.
        let unreadable = |e: parquet::errors::ParquetError| {
            bad(
                path,
                format!(
                    "not a readable Parquet file: {}",
                    clipped_message(&e.to_string())
                ),
            )
        };
        let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
        let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
            .map_err(unreadable)?;
        let want = schema(table).ok_or_else(|| bad(path, format!("no table {table:?}")))?;
        let have = builder.schema().clone();
        let mut indices = Vec::new();
        for field in want.fields() {
            let Ok(i) = have.index_of(field.name()) else {
                return Err(bad(
                    path,
                    format!(
                        "not a file of the {table} table: it has no column {:?} (its columns: {})",
                        field.name(),
                        column_list(&have)
                    ),
                ));
            };
            let found = have.field(i).data_type();
            let same = match (found, field.data_type()) {
                (DataType::List(a), DataType::List(b)) => a.data_type() == b.data_type(),
                (a, b) => a == b,
            };
            if !same {
                return Err(bad(
                    path,
                    format!(
                        "column {:?} of the {table} table is {found}, not {}",
                        field.name(),
                        field.data_type()
                    ),
                ));
            }
            indices.push(i);
        }
        // Read the contract's columns only (a file may carry more).
        let mask = ProjectionMask::roots(builder.parquet_schema(), indices);
        let inner = builder
            .with_projection(mask)
            .with_batch_size(BATCH)
            .build()
            .map_err(unreadable)?;
        Ok(Reader {
            path: path.to_path_buf(),
            inner,
        })
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        let inner = &mut self.inner;
        match guarded(&self.path, || Ok(inner.next()))? {
            None => Ok(None),
            Some(Ok(b)) => Ok(Some(b)),
            Some(Err(e)) => Err(bad(
                &self.path,
                format!("damaged Parquet data: {}", clipped_message(&e.to_string())),
            )),
        }
    }
}

thread_local! {
    /// What the Parquet library said when it panicked inside [`guarded`] on this thread.
    static PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `read`, a call into the Parquet library on the file at `path`, turning a panic of
/// the library into an error naming the file. The parquet crate panics on some damaged
/// files (its footer decoding unwraps what a damaged footer lacks) where it should fail;
/// the panic is caught here and kept quiet (the panic hook is wrapped once, so that it stays
/// silent for panics inside this call only), and the import fails as for any damaged file.
fn guarded<T>(path: &Path, read: impl FnOnce() -> Result<T>) -> Result<T> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let inside = PANIC.with(|p| {
                let mut p = p.borrow_mut();
                if p.is_some() {
                    // Inside `guarded`: keep the library's words for the error.
                    let said = info
                        .payload()
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| info.payload().downcast_ref::<String>().cloned());
                    *p = Some(said.unwrap_or_default());
                    true
                } else {
                    false
                }
            });
            if !inside {
                previous(info);
            }
        }));
    });
    // `Some` marks this thread as inside a guarded call.
    PANIC.with(|p| *p.borrow_mut() = Some(String::new()));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
    let said = PANIC.with(|p| p.borrow_mut().take()).unwrap_or_default();
    result.unwrap_or_else(|_| {
        Err(bad(
            path,
            format!(
                "a damaged Parquet file: the Parquet library failed on it ({})",
                clipped(&said)
            ),
        ))
    })
}

/// Typed access to a batch's columns by name, with nulls refused where the contract has none.
struct Cols<'b> {
    path: &'b Path,
    batch: &'b RecordBatch,
}

impl<'b> Cols<'b> {
    fn col(&self, name: &str) -> Result<&'b dyn Array> {
        self.batch
            .column_by_name(name)
            .map(|a| a.as_ref())
            .ok_or_else(|| bad(self.path, format!("no column {name:?}")))
    }

    fn typed<T: Array + 'static>(&self, name: &str, nullable: bool) -> Result<&'b T> {
        let a = self.col(name)?;
        if !nullable && a.null_count() > 0 {
            return Err(bad(
                self.path,
                format!("column {name:?} holds nulls, which the export never writes there"),
            ));
        }
        a.as_any()
            .downcast_ref::<T>()
            .ok_or_else(|| bad(self.path, format!("column {name:?} has another type")))
    }

    fn u64(&self, name: &str) -> Result<&'b UInt64Array> {
        self.typed(name, false)
    }
    fn u32(&self, name: &str) -> Result<&'b UInt32Array> {
        self.typed(name, false)
    }
    fn str(&self, name: &str) -> Result<&'b StringArray> {
        self.typed(name, false)
    }
}

fn opt<T: Array, V>(a: &T, i: usize, v: impl Fn(usize) -> V) -> Option<V> {
    (!a.is_null(i)).then(|| v(i))
}

/// Names to string ids: the exported string table first, then any name it lacks.
struct Names {
    ids: HashMap<String, StrId>,
    next: StrId,
    kinds: HashMap<&'static str, OpKind>,
    /// Names of other calls spelled like an MPI call: whether the trace also holds that
    /// MPI call (see `HeaderJson::other_calls`).
    other_calls: HashMap<String, bool>,
}

impl Names {
    fn new(strings: &[String], sink: &mut dyn EventSink) -> Result<Names> {
        let mut ids = HashMap::default();
        for (i, s) in strings.iter().enumerate() {
            let id = StrId::try_from(i)
                .map_err(|_| Error::Usage("a string table past 2^32 names".into()))?;
            sink.string(id, s)?;
            ids.entry(s.clone()).or_insert(id);
        }
        let kinds = OpKind::ALL
            .iter()
            .filter_map(|&k| k.mpi_name().map(|n| (n, k)))
            .collect();
        Ok(Names {
            ids,
            next: strings.len() as StrId,
            kinds,
            other_calls: HashMap::default(),
        })
    }

    fn id(&mut self, name: &str, sink: &mut dyn EventSink) -> Result<StrId> {
        if let Some(&id) = self.ids.get(name) {
            return Ok(id);
        }
        let id = self.next;
        self.next += 1;
        sink.string(id, name)?;
        self.ids.insert(name.to_string(), id);
        Ok(id)
    }

    /// The kind a call's name stands for; a call kept without its records is `Other`, and
    /// so is one the trace kept as another call although it is spelled like an MPI call
    /// (unless the trace holds that MPI call too and this one has its communicator).
    fn kind(
        &mut self,
        name: &str,
        without_records: bool,
        has_comm: bool,
        sink: &mut dyn EventSink,
    ) -> Result<OpKind> {
        let other = match self.other_calls.get(name) {
            Some(&also_mpi) => !(also_mpi && has_comm),
            None => false,
        };
        match self.kinds.get(name) {
            Some(&k) if !without_records && !other => Ok(k),
            _ => Ok(OpKind::Other(self.id(name, sink)?)),
        }
    }
}

/// Reads the `trace` table's one row.
pub fn trace_row(export: &Export) -> Result<TraceRow> {
    let files = table_files(export, "trace")?;
    let dir = table_dir(&export.root, "trace", &export.name);
    let Some(path) = files.first() else {
        return Err(bad(
            &dir,
            "holds no Parquet file: the export's trace table is missing",
        ));
    };
    let mut reader = Reader::open(path, "trace")?;
    while let Some(batch) = reader.next_batch()? {
        if batch.num_rows() == 0 {
            continue;
        }
        let c = Cols {
            path,
            batch: &batch,
        };
        return Ok(TraceRow {
            name: c.str("name")?.value(0).to_string(),
            format: c.str("format")?.value(0).to_string(),
            source: c.str("source")?.value(0).to_string(),
            header: c.str("header")?.value(0).to_string(),
        });
    }
    Err(bad(path, "the trace table has no row"))
}

/// One file's rows as a stream, a batch at a time.
struct Rows<T> {
    reader: Reader,
    rows: VecDeque<T>,
}

/// Where a row stands in time: (time, rank, thread).
type TimeKey = (Time, Rank, u32);

/// What [`read_anomalies`] calls with every anomaly and the exported ids of its operations.
type EachAnomaly<'f> = dyn FnMut(Anomaly, Vec<u64>, &mut dyn EventSink) -> Result<()> + 'f;

/// A table's rows across its files, merged by a time key (each file is in time order).
struct Merged<T> {
    files: Vec<Rows<T>>,
    heap: BinaryHeap<Reverse<(TimeKey, usize)>>,
    decode: fn(&Cols<'_>, &mut Names, &mut dyn EventSink, &mut VecDeque<T>) -> Result<()>,
    key: fn(&T) -> (Time, Rank, u32),
}

impl<T> Merged<T> {
    fn open(
        export: &Export,
        table: &str,
        decode: fn(&Cols<'_>, &mut Names, &mut dyn EventSink, &mut VecDeque<T>) -> Result<()>,
        key: fn(&T) -> (Time, Rank, u32),
        names: &mut Names,
        sink: &mut dyn EventSink,
    ) -> Result<Merged<T>> {
        let mut m = Merged {
            files: Vec::new(),
            heap: BinaryHeap::new(),
            decode,
            key,
        };
        for path in table_files(export, table)? {
            let reader = Reader::open(&path, table)?;
            m.files.push(Rows {
                reader,
                rows: VecDeque::new(),
            });
            let i = m.files.len() - 1;
            m.refill(i, names, sink)?;
        }
        Ok(m)
    }

    /// Makes sure file `i` has a row in hand (unless it is done), and queues it.
    fn refill(&mut self, i: usize, names: &mut Names, sink: &mut dyn EventSink) -> Result<()> {
        let f = &mut self.files[i];
        while f.rows.is_empty() {
            let Some(batch) = f.reader.next_batch()? else {
                return Ok(());
            };
            let c = Cols {
                path: &f.reader.path,
                batch: &batch,
            };
            (self.decode)(&c, names, sink, &mut f.rows)?;
        }
        if let Some(row) = f.rows.front() {
            self.heap.push(Reverse(((self.key)(row), i)));
        }
        Ok(())
    }

    fn peek_key(&self) -> Option<(Time, Rank, u32)> {
        self.heap.peek().map(|Reverse((k, _))| *k)
    }

    fn next(&mut self, names: &mut Names, sink: &mut dyn EventSink) -> Result<Option<T>> {
        let Some(Reverse((_, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let row = self.files[i].rows.pop_front();
        self.refill(i, names, sink)?;
        Ok(row)
    }
}

/// An operation with the id the export gave it.
struct OpRow {
    id: u64,
    op: Operation,
}

fn decode_ops(
    c: &Cols<'_>,
    names: &mut Names,
    sink: &mut dyn EventSink,
    out: &mut VecDeque<OpRow>,
) -> Result<()> {
    let id = c.u64("id")?;
    let rank = c.u32("rank")?;
    let thread = c.u32("thread")?;
    let operation = c.str("operation")?;
    let start = c.u64("start_ns")?;
    let end = c.u64("end_ns")?;
    let comm: &UInt32Array = c.typed("comm", true)?;
    let dest: &UInt32Array = c.typed("dest", true)?;
    let source: &UInt32Array = c.typed("source", true)?;
    let send_tag: &Int32Array = c.typed("send_tag", true)?;
    let recv_tag: &Int32Array = c.typed("recv_tag", true)?;
    let sent = c.u64("bytes_sent")?;
    let received = c.u64("bytes_received")?;
    let root: &UInt32Array = c.typed("root", true)?;
    let datatype: &StringArray = c.typed("datatype", true)?;
    let request: &UInt64Array = c.typed("request", true)?;
    let completes: &ListArray = c.typed("completes", false)?;
    let flags: &UInt8Array = c.typed("flags", false)?;
    let depth: &UInt16Array = c.typed("depth", false)?;
    let _: &BooleanArray = c.typed("is_send", false)?;
    for i in 0..c.batch.num_rows() {
        let f = flags.value(i);
        let kind = names.kind(
            operation.value(i),
            f & crate::model::flags::WITHOUT_RECORDS != 0,
            !comm.is_null(i),
            sink,
        )?;
        let mut op = Operation::new(rank.value(i), kind, start.value(i), end.value(i));
        op.thread = thread.value(i);
        op.comm = opt(comm, i, |i| comm.value(i));
        op.dest = opt(dest, i, |i| dest.value(i));
        op.source = opt(source, i, |i| source.value(i));
        op.send_tag = opt(send_tag, i, |i| send_tag.value(i));
        op.recv_tag = opt(recv_tag, i, |i| recv_tag.value(i));
        op.send_bytes = sent.value(i);
        op.recv_bytes = received.value(i);
        op.root = opt(root, i, |i| root.value(i));
        op.datatype = match opt(datatype, i, |i| datatype.value(i)) {
            Some(name) => Some(names.id(name, sink)?),
            None => None,
        };
        op.request = opt(request, i, |i| request.value(i));
        let list = completes.value(i);
        op.completes = list.as_primitive::<UInt64Type>().values().to_vec();
        op.flags = f;
        op.depth = depth.value(i);
        out.push_back(OpRow {
            id: id.value(i),
            op,
        });
    }
    Ok(())
}

fn decode_calls(
    c: &Cols<'_>,
    names: &mut Names,
    sink: &mut dyn EventSink,
    out: &mut VecDeque<RoutineCall>,
) -> Result<()> {
    let rank = c.u32("rank")?;
    let thread = c.u32("thread")?;
    let routine = c.str("routine")?;
    let depth: &UInt16Array = c.typed("depth", false)?;
    let start = c.u64("start_ns")?;
    let end = c.u64("end_ns")?;
    for i in 0..c.batch.num_rows() {
        out.push_back(RoutineCall {
            rank: rank.value(i),
            thread: thread.value(i),
            routine: names.id(routine.value(i), sink)?,
            depth: depth.value(i),
            start: start.value(i),
            end: end.value(i),
        });
    }
    Ok(())
}

/// One location (rank, thread) being replayed: as [`crate::export`]'s order, from the
/// other side.
struct Location {
    rank: Rank,
    thread: u32,
    ops: VecDeque<OpRow>,
    next_index: u64,
    pending: VecDeque<RoutineCall>,
    open: Vec<RoutineCall>,
    queued: Option<Time>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Op,
    Enter,
    Leave,
}

impl Location {
    /// Its next event: the earliest of its next operation, its next call to enter and the
    /// leave of its innermost open call, among those the nesting allows; at equal times an
    /// operation, then an enter, then a leave.
    fn next_step(&self) -> Option<(Time, Step)> {
        let depth = self.open.len();
        let op = self
            .ops
            .front()
            .map(|r| (r.op.start, usize::from(r.op.depth)));
        let enter = self
            .pending
            .front()
            .map(|c| (c.start, usize::from(c.depth)));
        let leave = self.open.last().map(|c| c.end);
        let mut best: Option<(Time, Step)> = None;
        let mut consider = |t: Time, s: Step| {
            if best.is_none_or(|b| (t, s) < b) {
                best = Some((t, s));
            }
        };
        if let Some((t, _)) = op.filter(|&(_, d)| d == depth) {
            consider(t, Step::Op);
        }
        if let Some((t, _)) = enter.filter(|&(_, d)| d == depth) {
            consider(t, Step::Enter);
        }
        if let Some(t) = leave {
            consider(t, Step::Leave);
        }
        best.or_else(|| {
            [
                op.map(|(t, _)| (t, Step::Op)),
                enter.map(|(t, _)| (t, Step::Enter)),
            ]
            .into_iter()
            .flatten()
            .min()
        })
    }
}

/// The replay of every location's operations and routine calls, merged by time.
struct Replay {
    locations: Vec<Location>,
    by_location: HashMap<(Rank, u32), usize>,
    heap: BinaryHeap<Reverse<(Time, Rank, u32, usize)>>,
}

impl Replay {
    fn location(&mut self, rank: Rank, thread: u32) -> usize {
        let next = self.locations.len();
        let i = *self.by_location.entry((rank, thread)).or_insert(next);
        if i == next {
            self.locations.push(Location {
                rank,
                thread,
                ops: VecDeque::new(),
                next_index: 0,
                pending: VecDeque::new(),
                open: Vec::new(),
                queued: None,
            });
        }
        i
    }

    fn requeue(&mut self, i: usize) {
        let loc = &mut self.locations[i];
        let next = loc.next_step().map(|(t, _)| t);
        if next != loc.queued {
            loc.queued = next;
            if let Some(t) = next {
                self.heap.push(Reverse((t, loc.rank, loc.thread, i)));
            }
        }
    }

    fn earliest(&mut self) -> Option<(Time, usize)> {
        while let Some(&Reverse((t, _, _, i))) = self.heap.peek() {
            if self.locations[i].queued == Some(t) {
                return Some((t, i));
            }
            self.heap.pop();
        }
        None
    }
}

/// The anomalies the import will derive again from the operations, found along the read
/// by the same [`Matcher`] and [`Tally`] the import uses, under the exported operation ids:
/// the anomalies table's rows beyond these are the source's, handed to the sink as such.
struct Derived {
    tally: Tally,
    found: Vec<Anomaly>,
    counts: HashMap<Anomaly, u64>,
}

impl Derived {
    fn take_found(&mut self) {
        for a in self.found.drain(..) {
            *self.counts.entry(a).or_default() += 1;
        }
    }

    /// Whether `a` is one the import derives (each derived anomaly answers one row).
    fn claims(&mut self, a: &Anomaly) -> bool {
        match self.counts.get_mut(a) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }
}

impl MatchSink for Derived {
    fn message(&mut self, m: &Message) -> Result<()> {
        self.tally.message(m, &mut self.found);
        self.take_found();
        Ok(())
    }
    fn request_link(&mut self, _: &RequestLink) -> Result<()> {
        Ok(())
    }
    fn collective(&mut self, _: &CollectiveInstance) -> Result<()> {
        Ok(())
    }
    fn anomaly(&mut self, a: &Anomaly) -> Result<()> {
        *self.counts.entry(a.clone()).or_default() += 1;
        Ok(())
    }
}

/// An anomaly's JSON fields, read through [`Fields`].
struct JsonFields<'a> {
    path: &'a Path,
    object: &'a serde_json::Map<String, serde_json::Value>,
    names: &'a mut Names,
    sink: &'a mut dyn EventSink,
    /// The exported ids of the operations read through `op`, in order.
    ops: Vec<u64>,
}

impl JsonFields<'_> {
    fn value(&self, key: &str) -> Result<&serde_json::Value> {
        self.object
            .get(key)
            .ok_or_else(|| bad(self.path, format!("an anomaly without its field {key:?}")))
    }
    fn wrong(&self, key: &str, what: &str) -> Error {
        bad(self.path, format!("anomaly field {key:?} is not {what}"))
    }
}

impl Fields<Error> for JsonFields<'_> {
    fn num(&mut self, key: &str) -> Result<u64> {
        self.value(key)?
            .as_u64()
            .ok_or_else(|| self.wrong(key, "a whole number"))
    }
    fn opt_num(&mut self, key: &str) -> Result<Option<u64>> {
        match self.object.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(_) => self.num(key).map(Some),
        }
    }
    fn u32(&mut self, key: &str) -> Result<u32> {
        u32::try_from(self.num(key)?).map_err(|_| self.wrong(key, "a 32-bit number"))
    }
    fn opt_u32(&mut self, key: &str) -> Result<Option<u32>> {
        match self.opt_num(key)? {
            None => Ok(None),
            Some(n) => u32::try_from(n)
                .map(Some)
                .map_err(|_| self.wrong(key, "a 32-bit number")),
        }
    }
    fn i32(&mut self, key: &str) -> Result<i32> {
        self.value(key)?
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| self.wrong(key, "a 32-bit signed number"))
    }
    fn name(&mut self, key: &str) -> Result<StrId> {
        let text = self.text(key)?;
        self.names.id(&text, self.sink)
    }
    fn kind(&mut self, key: &str) -> Result<OpKind> {
        let text = self.text(key)?;
        self.names.kind(&text, false, true, self.sink)
    }
    fn op(&mut self, key: &str) -> Result<OpPosition> {
        let id = self.num(key)?;
        self.ops.push(id);
        Ok(OpPosition {
            rank: 0,
            thread: 0,
            index: 0,
        })
    }
    fn text(&mut self, key: &str) -> Result<String> {
        self.value(key)?
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.wrong(key, "text"))
    }
}

/// Reads the `anomalies` table, calling `each` with every anomaly and the exported ids of
/// the operations it names.
fn read_anomalies(
    export: &Export,
    names: &mut Names,
    sink: &mut dyn EventSink,
    each: &mut EachAnomaly<'_>,
) -> Result<()> {
    for path in table_files(export, "anomalies")? {
        let mut reader = Reader::open(&path, "anomalies")?;
        while let Some(batch) = reader.next_batch()? {
            let c = Cols {
                path: &path,
                batch: &batch,
            };
            let kind = c.str("kind")?;
            let detail = c.str("detail")?;
            for i in 0..batch.num_rows() {
                let value: serde_json::Value = serde_json::from_str(detail.value(i))
                    .map_err(|e| bad(&path, format!("an anomaly's detail is not JSON: {e}")))?;
                let Some(object) = value.as_object() else {
                    return Err(bad(&path, "an anomaly's detail is not a JSON object"));
                };
                let mut f = JsonFields {
                    path: &path,
                    object,
                    names: &mut *names,
                    sink: &mut *sink,
                    ops: Vec::new(),
                };
                let Some(a) = build(kind.value(i).as_bytes(), &mut f)? else {
                    return Err(bad(
                        &path,
                        format!("an anomaly of unknown kind {}", quoted(kind.value(i))),
                    ));
                };
                let ops = std::mem::take(&mut f.ops);
                // The exported ids back in place of the placeholders.
                let mut ids = ops.iter().copied();
                let a = a
                    .map_ops(|_| ids.next().ok_or(()))
                    .map_err(|_| bad(&path, "an anomaly names fewer operations than its kind"))?;
                each(a, ops, sink)?;
            }
        }
    }
    Ok(())
}

/// Reads the export `export` into `sink` (see the module documentation).
pub fn read_export(export: &Export, sink: &mut dyn EventSink) -> Result<()> {
    for table in ["operations", "trace"] {
        let dir = table_dir(&export.root, table, &export.name);
        if !dir.is_dir() {
            return Err(bad(
                &dir,
                format!(
                    "missing: the export has no {table} table for trace {:?}",
                    export.name
                ),
            ));
        }
    }
    let row = trace_row(export)?;
    let trace_path = table_dir(&export.root, "trace", &export.name);
    let parsed: HeaderJson = serde_json::from_str(&row.header).map_err(|e| {
        bad(
            &trace_path,
            format!("the header column is not a trace header: {e}"),
        )
    })?;
    let mut header = parsed.header;
    let locations = std::mem::take(&mut header.locations);
    sink.header(&header).map_err(|e| placed(e, &trace_path))?;
    let mut names = Names::new(&parsed.strings, sink)?;
    names.other_calls = parsed
        .other_calls
        .into_iter()
        .map(|c| (c.name, c.also_mpi))
        .collect();

    // The operations the anomalies name: note where they land.
    let mut wanted: HashSet<u64> = HashSet::new();
    read_anomalies(export, &mut names, sink, &mut |_, ops, _| {
        wanted.extend(ops);
        Ok(())
    })?;
    let mut matcher = Matcher::new(&header);
    let mut derived = Derived {
        tally: Tally::new(header.processes.len()),
        found: Vec::new(),
        counts: HashMap::default(),
    };
    let mut positions: HashMap<u64, OpPosition> = HashMap::default();

    let mut ops = Merged::open(
        export,
        "operations",
        decode_ops,
        |r: &OpRow| (r.op.start, r.op.rank, r.op.thread),
        &mut names,
        sink,
    )?;
    let mut calls = Merged::open(
        export,
        "routine_calls",
        decode_calls,
        |c: &RoutineCall| (c.start, c.rank, c.thread),
        &mut names,
        sink,
    )?;
    let operations_dir = table_dir(&export.root, "operations", &export.name);
    let calls_dir = table_dir(&export.root, "routine_calls", &export.name);
    let mut replay = Replay {
        locations: Vec::new(),
        by_location: HashMap::default(),
        heap: BinaryHeap::new(),
    };
    loop {
        let earliest = replay.earliest();
        // What begins no later than the earliest event joins its location first.
        if let Some((t, _, _)) = ops.peek_key() {
            if earliest.is_none_or(|(e, _)| t <= e) {
                if let Some(row) = ops.next(&mut names, sink)? {
                    let i = replay.location(row.op.rank, row.op.thread);
                    replay.locations[i].ops.push_back(row);
                    replay.requeue(i);
                }
                continue;
            }
        }
        if let Some((t, _, _)) = calls.peek_key() {
            if earliest.is_none_or(|(e, _)| t <= e) {
                if let Some(call) = calls.next(&mut names, sink)? {
                    let i = replay.location(call.rank, call.thread);
                    replay.locations[i].pending.push_back(call);
                    replay.requeue(i);
                }
                continue;
            }
        }
        let Some((_, i)) = earliest else {
            break;
        };
        replay.heap.pop();
        let loc = &mut replay.locations[i];
        loc.queued = None;
        let Some((_, step)) = loc.next_step() else {
            continue;
        };
        match step {
            Step::Op => {
                if let Some(row) = loc.ops.pop_front() {
                    if wanted.contains(&row.id) {
                        positions.insert(
                            row.id,
                            OpPosition {
                                rank: loc.rank,
                                thread: loc.thread,
                                index: loc.next_index,
                            },
                        );
                    }
                    loc.next_index += 1;
                    sink.operation(&row.op)
                        .map_err(|e| placed(e, &operations_dir))?;
                    derived.tally.operation(row.id, &row.op, &mut derived.found);
                    derived.take_found();
                    matcher.operation(row.id, &row.op, &mut derived)?;
                }
            }
            Step::Enter => {
                if let Some(call) = loc.pending.pop_front() {
                    loc.open.push(call);
                    sink.routine(&routine_event(&call, true))
                        .map_err(|e| placed(e, &calls_dir))?;
                }
            }
            Step::Leave => {
                if let Some(call) = loc.open.pop() {
                    sink.routine(&routine_event(&call, false))
                        .map_err(|e| placed(e, &calls_dir))?;
                }
            }
        }
        replay.requeue(i);
    }

    // The anomalies the source recorded (those the import derives come again by themselves).
    let anomalies_path = table_dir(&export.root, "anomalies", &export.name);
    matcher.finish(&mut derived)?;
    derived.tally.finish(&mut derived.found);
    derived.take_found();
    read_anomalies(export, &mut names, sink, &mut |a, ops, sink| {
        if derived.claims(&a) {
            return Ok(());
        }
        if ops.is_empty() {
            return sink.anomaly(&a);
        }
        let at = ops
            .iter()
            .map(|id| {
                positions.get(id).copied().ok_or_else(|| {
                    bad(
                        &anomalies_path,
                        format!(
                            "an anomaly names operation {id}, which the operations table lacks"
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        sink.anomaly_at(&a, &at)
    })?;
    if !locations.is_empty() {
        sink.locations(&locations)?;
    }
    sink.finish()
}

fn routine_event(call: &RoutineCall, enter: bool) -> RoutineEvent {
    RoutineEvent {
        rank: call.rank,
        thread: call.thread,
        time: if enter { call.start } else { call.end },
        routine: call.routine,
        enter,
    }
}
