//! Parquet export: a stored trace as Hive-partitioned Parquet tables that DuckDB, Spark or
//! Trino query directly, and that `mtfdb import` reads back ([`crate::ingest::parquet`]).
//!
//! `export_parquet(trace, DIR)` writes, for a trace called NAME:
//!
//! ```text
//! DIR/operations/trace=NAME/rank_block=K/part-0.parquet     (K = rank / 1024)
//! DIR/messages/trace=NAME/rank_block=K/part-0.parquet       (by sender)
//! DIR/collectives/trace=NAME/rank_block=K/part-0.parquet    (by smallest member rank)
//! DIR/routine_calls/trace=NAME/rank_block=K/part-0.parquet
//! DIR/requests/trace=NAME/part-0.parquet
//! DIR/communicators/trace=NAME/part-0.parquet
//! DIR/processes/trace=NAME/part-0.parquet
//! DIR/anomalies/trace=NAME/part-0.parquet
//! DIR/trace/trace=NAME/part-0.parquet
//! ```
//!
//! The partition columns (`trace`, `rank_block`) live in the paths only. The schema of every
//! table is [`schema`] (documented in `docs/parquet.md`); in the export of a trace that
//! recorded hardware counters, `operations` and `routine_calls` have one more column per
//! counter ([`schema_with_counters`]). Operations and routine calls are
//! written in time order within each file (the export's merge of all locations by time);
//! messages and collective instances are sorted by time within each row group.
//!
//! Everything is written to a temporary folder inside DIR, synced, and renamed into place at
//! the end, so a failed export leaves nothing behind (a killed one at most its hidden
//! `.mtfdb-export-*` folder, never a partial table); an export of the same trace already in
//! DIR is refused, never overwritten. Memory follows a chunk per location and a row group per
//! open file, not the trace.
//!
//! ```no_run
//! let db = mtfdb::Database::open("traces.mtfdb")?;
//! let trace = db.trace("wrf16")?;
//! let stats = mtfdb::export::parquet::export_parquet(&trace, "wrf16-parquet".as_ref())?;
//! println!("{} operations in {} files", stats.operations, stats.files);
//! # Ok::<(), mtfdb::Error>(())
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, ListBuilder, PrimitiveArray, StringBuilder, UInt32Builder,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;
use serde::{Deserialize, Serialize};

use super::calls::CallsByStart;
use super::order::OperationsByTime;
use crate::error::{Error, Result};
use crate::hash::FxHashMap as HashMap;
use crate::ingest::anomaly_fields::{fields, Val};
use crate::model::{Anomaly, CollectiveInstance, Message, OpKind, TraceHeader};
use crate::store::ids::{chunk_and_row, row_id};
use crate::store::OpChunkInfo;
use crate::Trace;

/// Ranks per `rank_block` partition: a row of rank `r` is in `rank_block = r / 1024`.
pub const RANK_BLOCK: u32 = 1024;

/// The tables an export writes, in the order it writes them.
pub const TABLES: [&str; 9] = [
    "operations",
    "messages",
    "collectives",
    "requests",
    "routine_calls",
    "communicators",
    "processes",
    "anomalies",
    "trace",
];

/// The tables of mtfdb's analyses, written when the trace holds their stored results
/// (computed with the default parameters: `SELECT WAIT STATES`, `SELECT COMMUNICATION
/// PATTERNS`, `SELECT PHASES`), so that a SQL engine reads what `EXPLAIN SQL` cannot compute.
pub const ANALYSIS_TABLES: [&str; 4] = ["wait_states", "patterns", "pattern_occurrences", "phases"];

/// Whether `table` is partitioned by `rank_block` as well as by `trace`.
pub fn is_rank_partitioned(table: &str) -> bool {
    matches!(
        table,
        "operations" | "messages" | "collectives" | "routine_calls" | "wait_states"
    )
}

/// Rows gathered before they are handed to the Parquet writer as one record batch.
const BATCH_ROWS: usize = 8192;
/// Rows of one row group (messages and collectives are sorted by time within it).
const ROW_GROUP_ROWS: usize = 1 << 17;
/// Columns written delta-encoded but not compressed: times that are not their table's order
/// (ends, durations, receive times) delta-encode to bits that look random, and zstd won
/// 0-5% on them (0.0% on a 5.7M-operation stencil2d's `end_ns` and `duration_ns`, 13.7 and
/// 12.9 MB) for a tenth of the export's compression time.
const UNCOMPRESSED_COLUMNS: &[&str] = &["end_ns", "duration_ns", "recv_time_ns"];

fn list(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, true)))
}

/// The Arrow schema of an exported table (the contract `docs/parquet.md` describes), or
/// `None` for a name that is not one of [`TABLES`].
///
/// ```
/// let s = mtfdb::export::parquet::schema("requests").unwrap();
/// let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
/// assert_eq!(names, ["request_op", "completion_op"]);
/// ```
pub fn schema(table: &str) -> Option<SchemaRef> {
    use DataType::{Boolean, Int32, UInt16, UInt32, UInt64, UInt8, Utf8};
    let f = |name: &str, t: DataType| Field::new(name, t, false);
    let null = |name: &str, t: DataType| Field::new(name, t, true);
    let fields = match table {
        "operations" => vec![
            f("id", UInt64),
            f("rank", UInt32),
            f("thread", UInt32),
            f("operation", Utf8),
            f("is_send", Boolean),
            f("is_receive", Boolean),
            f("is_collective", Boolean),
            f("start_ns", UInt64),
            f("end_ns", UInt64),
            f("duration_ns", UInt64),
            null("comm", UInt32),
            null("dest", UInt32),
            null("source", UInt32),
            null("send_tag", Int32),
            null("recv_tag", Int32),
            f("bytes_sent", UInt64),
            f("bytes_received", UInt64),
            null("root", UInt32),
            null("datatype", Utf8),
            null("request", UInt64),
            f("completes", list(UInt64)),
            f("flags", UInt8),
            f("depth", UInt16),
        ],
        "messages" => vec![
            f("id", UInt64),
            f("sender", UInt32),
            f("receiver", UInt32),
            f("comm", UInt32),
            f("tag", Int32),
            f("size", UInt64),
            f("send_time_ns", UInt64),
            f("recv_time_ns", UInt64),
            f("send_op", UInt64),
            f("recv_op", UInt64),
        ],
        "collectives" => vec![
            f("instance", UInt64),
            f("operation", Utf8),
            f("comm", UInt32),
            null("root", UInt32),
            f("start_ns", UInt64),
            f("end_ns", UInt64),
            f("send_bytes", UInt64),
            f("recv_bytes", UInt64),
            f("members", list(UInt64)),
        ],
        "requests" => vec![f("request_op", UInt64), f("completion_op", UInt64)],
        "routine_calls" => vec![
            f("rank", UInt32),
            f("thread", UInt32),
            f("routine", Utf8),
            f("depth", UInt16),
            f("start_ns", UInt64),
            f("end_ns", UInt64),
        ],
        "communicators" => vec![f("id", UInt32), f("name", Utf8), f("members", list(UInt32))],
        "processes" => vec![f("rank", UInt32), f("name", Utf8), null("processor", Utf8)],
        "anomalies" => vec![f("kind", Utf8), f("detail", Utf8)],
        "trace" => vec![
            f("name", Utf8),
            f("format", Utf8),
            f("source", Utf8),
            f("header", Utf8),
        ],
        "wait_states" => vec![
            f("op", UInt64),
            f("rank", UInt32),
            f("kind", Utf8),
            f("start_ns", UInt64),
            f("wait_ns", UInt64),
            f("partner", UInt32),
        ],
        "patterns" => vec![
            f("pattern", UInt32),
            f("processes", list(UInt32)),
            f("events", UInt32),
            f("occurrences", UInt64),
            f("shape", Utf8),
        ],
        "pattern_occurrences" => vec![
            f("pattern", UInt32),
            f("occurrence", UInt32),
            f("start_ns", UInt64),
            f("end_ns", UInt64),
            f("first_rank", UInt32),
        ],
        "phases" => vec![
            f("phase", UInt32),
            f("node", UInt32),
            f("first_instance", UInt32),
            f("last_instance", UInt32),
            f("start_ns", UInt64),
            f("end_ns", UInt64),
            f("patterns", list(UInt32)),
            f("routine", Utf8),
        ],
        _ => return None,
    };
    Some(Arc::new(Schema::new(fields)))
}

/// The Arrow schema of `table` in the export of a trace whose calls carry counters, their
/// columns named `counters` ([`crate::query::catalog::counter_columns`]): [`schema`], and for
/// `operations` and `routine_calls` after its columns one nullable `Int64` per counter (a
/// call's delta of an accumulated counter, or its value at the call's end; null where the
/// call has no sample of it).
///
/// ```
/// use arrow::datatypes::DataType;
/// let s = mtfdb::export::parquet::schema_with_counters("routine_calls", &["papi_tot_cyc".into()]).unwrap();
/// let last = s.fields().last().unwrap();
/// assert_eq!((last.name().as_str(), last.data_type(), last.is_nullable()), ("papi_tot_cyc", &DataType::Int64, true));
/// ```
pub fn schema_with_counters(table: &str, counters: &[String]) -> Option<SchemaRef> {
    let base = schema(table)?;
    if counters.is_empty() || !matches!(table, "operations" | "routine_calls") {
        return Some(base);
    }
    let mut fields: Vec<Field> = base.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(
        counters
            .iter()
            .map(|name| Field::new(name, DataType::Int64, true)),
    );
    Some(Arc::new(Schema::new(fields)))
}

/// What the `header` column of the `trace` table holds: the [`TraceHeader`] as JSON, with
/// the trace's string table (names by id) beside its fields, so that an import gives every
/// name its id back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HeaderJson {
    /// The declarations.
    #[serde(flatten)]
    pub(crate) header: TraceHeader,
    /// The string table, by id.
    #[serde(default)]
    pub(crate) strings: Vec<String>,
    /// Names of calls kept as other calls (`OpKind::Other`) although they are spelled like
    /// an MPI call mtfdb knows (`MPI_Send` recorded without what it did, say): with the
    /// names the trace also uses for that MPI call, which the import tells apart by their
    /// communicator (the MPI call always has one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) other_calls: Vec<OtherCall>,
}

/// A call name both an `OpKind::Other` and, perhaps, a fixed kind of the trace answer to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct OtherCall {
    /// The name.
    pub(crate) name: String,
    /// Whether the trace also holds the MPI call of that name.
    pub(crate) also_mpi: bool,
}

/// The other calls of `trace` named like an MPI call (see [`HeaderJson::other_calls`]).
fn other_calls(trace: &Trace) -> Vec<OtherCall> {
    let kinds = &trace.summary().by_kind;
    let mut out: Vec<OtherCall> = kinds
        .iter()
        .filter_map(|(k, _)| match k {
            OpKind::Other(id) => trace.string(*id),
            _ => None,
        })
        .filter(|name| OpKind::ALL.iter().any(|k| k.mpi_name() == Some(name)))
        .map(|name| OtherCall {
            name: name.to_string(),
            also_mpi: kinds.iter().any(|(k, _)| k.mpi_name() == Some(name)),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// What [`export_parquet`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ParquetStats {
    /// Rows of `operations`.
    pub operations: u64,
    /// Rows of `messages`.
    pub messages: u64,
    /// Rows of `collectives`.
    pub collectives: u64,
    /// Rows of `requests`.
    pub requests: u64,
    /// Rows of `routine_calls`.
    pub routine_calls: u64,
    /// Rows of `anomalies`.
    pub anomalies: u64,
    /// Parquet files written.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// One column being filled.
enum Col {
    U64(Values<u64>),
    I64(Values<i64>),
    U32(Values<u32>),
    I32(Values<i32>),
    U16(Values<u16>),
    U8(Values<u8>),
    Bool(Vec<bool>),
    Str(StringBuilder),
    ListU64(ListBuilder<UInt64Builder>),
    ListU32(ListBuilder<UInt32Builder>),
}

/// A batch's values of a numeric column, pushed into a plain vector (an Arrow builder's
/// append, with its null buffer, was a tenth of the export's reading thread), and which of
/// them are null, kept only from the first null on.
struct Values<T> {
    values: Vec<T>,
    valid: Option<Vec<bool>>,
}

impl<T: arrow::datatypes::ArrowNativeType> Values<T> {
    fn with_capacity(n: usize) -> Values<T> {
        Values {
            values: Vec::with_capacity(n),
            valid: None,
        }
    }

    fn push(&mut self, v: T) {
        self.values.push(v);
        if let Some(valid) = &mut self.valid {
            valid.push(true);
        }
    }

    fn push_option(&mut self, v: Option<T>) {
        match v {
            Some(v) => self.push(v),
            None => {
                let valid = self
                    .valid
                    .get_or_insert_with(|| vec![true; self.values.len()]);
                valid.push(false);
                self.values.push(T::default());
            }
        }
    }

    fn finish<P>(self) -> ArrayRef
    where
        P: arrow::datatypes::ArrowPrimitiveType<Native = T>,
    {
        let nulls = self.valid.map(arrow::buffer::NullBuffer::from);
        Arc::new(PrimitiveArray::<P>::new(self.values.into(), nulls))
    }
}

impl Col {
    /// An empty column of type `t`, with room for a batch.
    fn of(t: &DataType) -> Col {
        let n = BATCH_ROWS;
        match t {
            DataType::UInt64 => Col::U64(Values::with_capacity(n)),
            DataType::Int64 => Col::I64(Values::with_capacity(n)),
            DataType::UInt32 => Col::U32(Values::with_capacity(n)),
            DataType::Int32 => Col::I32(Values::with_capacity(n)),
            DataType::UInt16 => Col::U16(Values::with_capacity(n)),
            DataType::UInt8 => Col::U8(Values::with_capacity(n)),
            DataType::Boolean => Col::Bool(Vec::with_capacity(n)),
            DataType::List(f) if f.data_type() == &DataType::UInt32 => {
                Col::ListU32(ListBuilder::new(UInt32Builder::new()))
            }
            DataType::List(_) => Col::ListU64(ListBuilder::new(UInt64Builder::new())),
            _ => Col::Str(StringBuilder::with_capacity(n, n * 16)),
        }
    }

    /// The column's rows as an array; the column is left empty, with room for the next
    /// batch (a builder's `finish` leaves it with none, and growing it again copies).
    fn finish(&mut self, t: &DataType) -> ArrayRef {
        use arrow::datatypes::{
            Int32Type, Int64Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
        };
        match std::mem::replace(self, Col::of(t)) {
            Col::U64(v) => v.finish::<UInt64Type>(),
            Col::I64(v) => v.finish::<Int64Type>(),
            Col::U32(v) => v.finish::<UInt32Type>(),
            Col::I32(v) => v.finish::<Int32Type>(),
            Col::U16(v) => v.finish::<UInt16Type>(),
            Col::U8(v) => v.finish::<UInt8Type>(),
            Col::Bool(v) => Arc::new(BooleanArray::from(v)),
            Col::Str(mut b) => Arc::new(b.finish()),
            Col::ListU64(mut b) => Arc::new(b.finish()),
            Col::ListU32(mut b) => Arc::new(b.finish()),
        }
    }

    // A value of the wrong type for the column is a bug of this module; the batch's columns
    // then differ in length and `RecordBatch::try_new` reports it as an error.
    fn u64(&mut self, v: u64) {
        if let Col::U64(b) = self {
            b.push(v)
        }
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        if let Col::U64(b) = self {
            b.push_option(v)
        }
    }
    fn opt_i64(&mut self, v: Option<i64>) {
        if let Col::I64(b) = self {
            b.push_option(v)
        }
    }
    fn u32(&mut self, v: u32) {
        if let Col::U32(b) = self {
            b.push(v)
        }
    }
    fn opt_u32(&mut self, v: Option<u32>) {
        if let Col::U32(b) = self {
            b.push_option(v)
        }
    }
    fn i32(&mut self, v: i32) {
        if let Col::I32(b) = self {
            b.push(v)
        }
    }
    fn opt_i32(&mut self, v: Option<i32>) {
        if let Col::I32(b) = self {
            b.push_option(v)
        }
    }
    fn u16(&mut self, v: u16) {
        if let Col::U16(b) = self {
            b.push(v)
        }
    }
    fn u8(&mut self, v: u8) {
        if let Col::U8(b) = self {
            b.push(v)
        }
    }
    fn bool(&mut self, v: bool) {
        if let Col::Bool(b) = self {
            b.push(v)
        }
    }
    fn str(&mut self, v: &str) {
        if let Col::Str(b) = self {
            b.append_value(v)
        }
    }
    fn opt_str(&mut self, v: Option<&str>) {
        if let Col::Str(b) = self {
            b.append_option(v)
        }
    }
    fn list_u64(&mut self, v: &[u64]) {
        if let Col::ListU64(b) = self {
            b.values().append_slice(v);
            b.append(true);
        }
    }
    fn list_u32(&mut self, v: &[u32]) {
        if let Col::ListU32(b) = self {
            b.values().append_slice(v);
            b.append(true);
        }
    }
}

/// What the reading thread hands the writing thread (the encoding and compression of
/// Parquet take a core of their own, beside the reading of the store).
enum Job {
    /// A file opened, under a number.
    Open(usize, Box<FileWriter>),
    /// A batch of rows for file `n`.
    Write(usize, RecordBatch),
    /// The end of a row group of file `n`.
    EndRowGroup(usize),
    /// The end of file `n`.
    Close(usize),
}

/// The writing thread: runs the jobs in order; after an error it only drains the channel.
/// Returns the files and bytes written.
fn write_jobs(jobs: Receiver<Job>) -> Result<(u64, u64)> {
    // Should the threads not start, the channel closes, and the reading side stops too.
    let encoders = Encoders::new(GROUPS_IN_FLIGHT)?;
    let mut open: HashMap<usize, Box<FileWriter>> = HashMap::default();
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut failed: Option<Error> = None;
    for job in jobs {
        if failed.is_some() {
            continue;
        }
        let done: Result<()> = match job {
            Job::Open(n, writer) => {
                open.insert(n, writer);
                Ok(())
            }
            Job::Write(n, batch) => match open.get_mut(&n) {
                Some(w) => w.write(batch, &encoders),
                None => Ok(()),
            },
            Job::EndRowGroup(n) => match open.get_mut(&n) {
                Some(w) => w.end_row_group(&encoders),
                None => Ok(()),
            },
            Job::Close(n) => match open.remove(&n) {
                Some(w) => w
                    .close(&encoders)
                    .and_then(|path| std::fs::metadata(&path).map_err(|e| Error::io(&path, e)))
                    .map(|m| {
                        files += 1;
                        bytes += m.len();
                    }),
                None => Ok(()),
            },
        };
        if let Err(e) = done {
            failed = Some(e);
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok((files, bytes)),
    }
}

/// The threads that encode row groups, kept for a writing thread's whole export (a rayon
/// pool): a thread started per row group began with an empty heap each time and first
/// touched every page it allocated (kernel time, most of it page faults, was a tenth of the
/// encoding threads' samples, `perf`).
struct Encoders(rayon::ThreadPool);

impl Encoders {
    /// `n` threads, waiting for row groups.
    fn new(n: usize) -> Result<Encoders> {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("parquet-encoder-{i}"))
            // A job that panics drops its result's sender, which its receiver reports; the
            // thread goes on with the next job.
            .panic_handler(|_| {})
            .build()
            .map(Encoders)
            .map_err(|e| Error::Usage(format!("could not start the Parquet encoding threads: {e}")))
    }

    /// Runs `work` on one of the threads; its result comes through the receiver, which is
    /// closed without one if `work` panicked.
    fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Receiver<T> {
        let (result, received) = sync_channel(1);
        self.0.spawn(move || {
            let _ = result.send(work());
        });
        received
    }
}

/// One Parquet file being encoded. Each row group is encoded on an encoding thread while
/// the next one gathers, and appended to the file in order: once the other tables are
/// written, the operations' writing thread alone was the export's last second, at one core
/// of two (`perf`). At most [`GROUPS_IN_FLIGHT`] groups are encoded at once. A row group ends
/// when the reading side says so, or at [`ROW_GROUP_ROWS`] rows.
struct FileWriter {
    path: PathBuf,
    file: SerializedFileWriter<File>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// The current row group's batches.
    batches: Vec<RecordBatch>,
    /// Rows in the current row group.
    rows: usize,
    row_groups: usize,
    /// Row groups being encoded, oldest first.
    encoding: VecDeque<Receiver<Result<Vec<ArrowColumnChunk>>>>,
}

/// Row groups of one file encoded at once (each holds its batches and its encoded columns).
const GROUPS_IN_FLIGHT: usize = 2;

impl FileWriter {
    /// A writer of `schema` to `path` with `props`: `ArrowWriter`'s file (its schema and
    /// the Arrow schema in its metadata), taken apart to encode its row groups apart.
    fn create(path: PathBuf, schema: SchemaRef, props: WriterProperties) -> Result<FileWriter> {
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let (file, factory) = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .and_then(ArrowWriter::into_serialized_writer)
            .map_err(|e| parquet_error(&path, e))?;
        Ok(FileWriter {
            path,
            file,
            factory,
            schema,
            batches: Vec::new(),
            rows: 0,
            row_groups: 0,
            encoding: VecDeque::new(),
        })
    }

    fn write(&mut self, mut batch: RecordBatch, encoders: &Encoders) -> Result<()> {
        while batch.num_rows() > 0 {
            // A row group holds at most ROW_GROUP_ROWS rows, cut as ArrowWriter cuts them.
            let take = batch.num_rows().min(ROW_GROUP_ROWS - self.rows);
            self.batches.push(batch.slice(0, take));
            self.rows += take;
            batch = batch.slice(take, batch.num_rows() - take);
            if self.rows >= ROW_GROUP_ROWS {
                self.end_row_group(encoders)?;
            }
        }
        Ok(())
    }

    /// Hands the current row group to a thread that encodes it.
    fn end_row_group(&mut self, encoders: &Encoders) -> Result<()> {
        if self.batches.is_empty() {
            return Ok(());
        }
        while self.encoding.len() >= GROUPS_IN_FLIGHT {
            self.append_oldest()?;
        }
        let columns = self
            .factory
            .create_column_writers(self.row_groups)
            .map_err(|e| parquet_error(&self.path, e))?;
        let (batches, schema) = (std::mem::take(&mut self.batches), self.schema.clone());
        let path = self.path.clone();
        self.encoding
            .push_back(encoders.run(move || encode_row_group(&path, columns, &schema, &batches)));
        self.rows = 0;
        self.row_groups += 1;
        Ok(())
    }

    /// Waits for the oldest row group being encoded and appends it to the file.
    fn append_oldest(&mut self) -> Result<()> {
        let Some(encoding) = self.encoding.pop_front() else {
            return Ok(());
        };
        let path = &self.path;
        let err = |e: parquet::errors::ParquetError| parquet_error(path, e);
        let chunks = encoding
            .recv()
            .map_err(|_| parquet_error(path, "a row group's encoding thread failed"))??;
        let mut group = self.file.next_row_group().map_err(err)?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut group).map_err(err)?;
        }
        group.close().map_err(err)?;
        Ok(())
    }

    /// Ends the last row group and the file; its path.
    fn close(mut self, encoders: &Encoders) -> Result<PathBuf> {
        self.end_row_group(encoders)?;
        while !self.encoding.is_empty() {
            self.append_oldest()?;
        }
        self.file
            .close()
            .map_err(|e| parquet_error(&self.path, e))?;
        Ok(self.path)
    }
}

/// Encodes one row group's `batches` with its column writers.
fn encode_row_group(
    path: &Path,
    mut columns: Vec<ArrowColumnWriter>,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<ArrowColumnChunk>> {
    let err = |e: parquet::errors::ParquetError| parquet_error(path, e);
    for batch in batches {
        let mut leaves = columns.iter_mut();
        for (field, array) in schema.fields().iter().zip(batch.columns()) {
            for leaf in compute_leaves(field, array).map_err(err)? {
                if let Some(column) = leaves.next() {
                    column.write(&leaf).map_err(err)?;
                }
            }
        }
    }
    columns
        .into_iter()
        .map(|c| c.close().map_err(err))
        .collect()
}

/// One Parquet file being written: the rows not yet handed to the writing thread.
struct Part {
    n: usize,
    path: PathBuf,
    schema: SchemaRef,
    jobs: SyncSender<Job>,
    cols: Vec<Col>,
    rows: usize,
}

impl Part {
    /// A file of `table` (whose calls carry the columns `counters`) at `path`, file `n` of the
    /// writing thread.
    fn create(
        path: PathBuf,
        table: &str,
        counters: &[String],
        n: usize,
        jobs: SyncSender<Job>,
    ) -> Result<Part> {
        let schema = schema_with_counters(table, counters)
            .ok_or_else(|| Error::Usage(format!("no exported table is called {table:?}")))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let level = ZstdLevel::try_new(1).map_err(|e| parquet_error(&path, e))?;
        // Dictionaries for names only: ids and times are nearly all distinct, and a
        // dictionary of them cost more time than it saved bytes; times sorted within a file
        // and ids counted per location delta-encode to a few bits each. zstd level 1 (timed
        // by hand on 14M events: 3.80 s against 4.05 s at level 3, for 3% more bytes), pages
        // cut by size (not every 20,000 rows), statistics per column chunk: row groups still
        // prune by time.
        let mut props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_size(ROW_GROUP_ROWS)
            .set_data_page_row_count_limit(usize::MAX)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_dictionary_enabled(false);
        for field in schema.fields() {
            let column = ColumnPath::from(field.name().as_str());
            if UNCOMPRESSED_COLUMNS.contains(&field.name().as_str()) {
                props = props.set_column_compression(column.clone(), Compression::UNCOMPRESSED);
            }
            props = match field.data_type() {
                // Names: a dictionary, and no minimum and maximum (every row group holds
                // about every name, and comparing each string was 2% of the export).
                DataType::Utf8 => props
                    .set_column_dictionary_enabled(column.clone(), true)
                    .set_column_statistics_enabled(column, EnabledStatistics::None),
                DataType::UInt64
                | DataType::Int64
                | DataType::UInt32
                | DataType::Int32
                | DataType::UInt16
                | DataType::UInt8 => {
                    props.set_column_encoding(column, Encoding::DELTA_BINARY_PACKED)
                }
                _ => props,
            };
        }
        let props = props.build();
        let writer = FileWriter::create(path.clone(), schema.clone(), props)?;
        let cols = schema
            .fields()
            .iter()
            .map(|f| Col::of(f.data_type()))
            .collect();
        let part = Part {
            n,
            path,
            schema,
            jobs,
            cols,
            rows: 0,
        };
        part.send(Job::Open(n, Box::new(writer)))?;
        Ok(part)
    }

    /// Hands `job` to the writing thread; it is gone only when it failed, and then its
    /// error is the one the export reports.
    fn send(&self, job: Job) -> Result<()> {
        self.jobs
            .send(job)
            .map_err(|_| parquet_error(&self.path, "the writing thread stopped"))
    }

    /// Counts a row pushed into `cols`, and hands a full batch to the writer.
    fn row_done(&mut self) -> Result<()> {
        self.rows += 1;
        if self.rows >= BATCH_ROWS {
            self.write_batch()?;
        }
        Ok(())
    }

    fn write_batch(&mut self) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = (self.cols.iter_mut())
            .zip(self.schema.fields())
            .map(|(c, f)| c.finish(f.data_type()))
            .collect();
        self.rows = 0;
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| parquet_error(&self.path, e))?;
        self.send(Job::Write(self.n, batch))
    }

    /// Ends the current row group (after rows sorted together).
    fn end_row_group(&mut self) -> Result<()> {
        self.write_batch()?;
        self.send(Job::EndRowGroup(self.n))
    }

    fn close(mut self) -> Result<()> {
        self.write_batch()?;
        self.send(Job::Close(self.n))
    }
}

fn parquet_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::io(path, std::io::Error::other(e.to_string()))
}

/// The files of one table, one per `rank_block` (or a single one).
struct Table {
    name: &'static str,
    /// The counter columns its rows have after the others (operations and routine calls of a
    /// trace with counters).
    counters: Vec<String>,
    dir: PathBuf,
    parts: BTreeMap<u32, Part>,
    jobs: SyncSender<Job>,
    /// The number the next file opened gets (shared by all tables).
    next: Arc<AtomicUsize>,
}

impl Table {
    fn new(tmp: &Path, name: &'static str, jobs: &Jobs) -> Table {
        Table::with_counters(tmp, name, Vec::new(), jobs)
    }

    /// The table, its rows with the counter columns `counters` after the others.
    fn with_counters(tmp: &Path, name: &'static str, counters: Vec<String>, jobs: &Jobs) -> Table {
        Table {
            name,
            counters,
            dir: tmp.join(name),
            parts: BTreeMap::new(),
            jobs: jobs.0.clone(),
            next: jobs.1.clone(),
        }
    }

    /// The file of rank block `block` (of the table, when it is not partitioned).
    fn part(&mut self, block: u32) -> Result<&mut Part> {
        if !self.parts.contains_key(&block) {
            let path = if is_rank_partitioned(self.name) {
                self.dir
                    .join(format!("rank_block={block}"))
                    .join("part-0.parquet")
            } else {
                self.dir.join("part-0.parquet")
            };
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let part = Part::create(path, self.name, &self.counters, n, self.jobs.clone())?;
            self.parts.insert(block, part);
        }
        self.parts
            .get_mut(&block)
            .ok_or_else(|| Error::Usage("a Parquet part vanished".into()))
    }

    /// Closes every file; a table with no row still gets its (empty) file, so that every
    /// table of an export is there for an import to find.
    fn close(mut self) -> Result<()> {
        if self.parts.is_empty() {
            self.part(0)?;
        }
        for (_, part) in std::mem::take(&mut self.parts) {
            part.close()?;
        }
        Ok(())
    }
}

/// Where a table of trace `name` goes in `dir`.
pub fn table_dir(dir: &Path, table: &str, name: &str) -> PathBuf {
    dir.join(table).join(format!("trace={name}"))
}

/// Writes `trace` as Parquet tables under `dir` (created if absent); see the module
/// documentation for the layout. Refuses a `dir` that already holds an export of this
/// trace, and leaves nothing behind on failure.
pub fn export_parquet(trace: &Trace, dir: &Path) -> Result<ParquetStats> {
    let name = trace.name();
    if name.contains(['/', '\\']) || name == "." || name == ".." {
        return Err(Error::Usage(format!(
            "trace name {name:?} cannot name a Hive partition folder (trace={name})"
        )));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(Error::io(
            dir,
            std::io::Error::other("not a directory: a Parquet export is a folder of tables"),
        ));
    }
    for table in TABLES.iter().chain(&ANALYSIS_TABLES) {
        let target = table_dir(dir, table, name);
        if target.exists() {
            return Err(Error::Usage(format!(
                "{}: an export of trace {name:?} is already there; remove it or export to another folder (mtfdb never overwrites an export)",
                target.display()
            )));
        }
    }
    // A folder this export makes is removed again if it fails: it removes only what it made.
    let created = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let outcome = place_tables(trace, dir, name);
    if outcome.is_err() && created {
        for table in TABLES.iter().chain(&ANALYSIS_TABLES) {
            let _ = std::fs::remove_dir(dir.join(table));
        }
        let _ = std::fs::remove_dir(dir);
    }
    outcome
}

/// Writes the tables of `trace` in a temporary folder inside `dir`, then moves them into
/// place as its Hive partition `trace=name`.
fn place_tables(trace: &Trace, dir: &Path, name: &str) -> Result<ParquetStats> {
    let tmp = tempfile::Builder::new()
        .prefix(".mtfdb-export-")
        .tempdir_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    let stats = write_tables(trace, tmp.path())?;
    // On the disk before in place: a crash after the renames finds whole files.
    super::output::sync_tree(tmp.path()).map_err(|e| Error::io(dir, e))?;
    // Into place, table by table; a failure takes back what was moved already.
    let mut moved: Vec<PathBuf> = Vec::new();
    // The analysis tables are there when the trace holds their results.
    let written = ANALYSIS_TABLES
        .iter()
        .filter(|t| tmp.path().join(t).exists());
    for table in TABLES.iter().chain(written) {
        let target = table_dir(dir, table, name);
        let placed = std::fs::create_dir_all(dir.join(table))
            .and_then(|_| std::fs::rename(tmp.path().join(table), &target));
        if let Err(e) = placed {
            for done in moved {
                let _ = std::fs::remove_dir_all(done);
            }
            return Err(Error::io(&target, e));
        }
        moved.push(target);
    }
    // The renames themselves, as Output::commit does for a file; a folder that cannot be
    // synced costs only durability against a crash.
    for table in &moved {
        if let Some(Ok(d)) = table.parent().map(File::open) {
            let _ = d.sync_all();
        }
    }
    Ok(stats)
}

/// Operation ids to ranks, through the chunk directory.
struct Ranks<'t> {
    chunks: &'t [OpChunkInfo],
}

impl Ranks<'_> {
    fn of(&self, id: u64) -> Option<u32> {
        let (chunk, _) = chunk_and_row(id);
        self.chunks
            .binary_search_by_key(&chunk, |c| c.chunk)
            .ok()
            .map(|i| self.chunks[i].rank)
    }
}

/// The channel to the writing thread, and the file counter.
type Jobs = (SyncSender<Job>, Arc<AtomicUsize>);

/// Reads the trace and writes the files in two pipelines at once, each a reading and a
/// writing thread: the operations, and every other table. Encoding and compressing Parquet
/// takes more than the reading of the store, so one pipeline kept its writing thread busy and
/// the other core partly idle (`perf`); two keep both cores busy.
fn write_tables(trace: &Trace, tmp: &Path) -> Result<ParquetStats> {
    let files = Arc::new(AtomicUsize::new(0));
    let (ops_tx, ops_rx) = sync_channel::<Job>(16);
    let (rest_tx, rest_rx) = sync_channel::<Job>(16);
    std::thread::scope(|scope| {
        let ops_writer = scope.spawn(move || write_jobs(ops_rx));
        let rest_writer = scope.spawn(move || write_jobs(rest_rx));
        let rest_files = files.clone();
        let rest = scope.spawn(move || read_other_tables(trace, tmp, (rest_tx, rest_files)));
        let ops = read_operations(trace, tmp, (ops_tx, files));
        let failed = || Error::Usage("a Parquet export thread failed".into());
        let ops_written = ops_writer.join().unwrap_or_else(|_| Err(failed()));
        let rest_written = rest_writer.join().unwrap_or_else(|_| Err(failed()));
        let rest = rest.join().unwrap_or_else(|_| Err(failed()));
        // A writing thread's error is the cause when both sides of a pipeline failed.
        let (ops_files, ops_bytes) = ops_written?;
        let (rest_files, rest_bytes) = rest_written?;
        let mut stats = ops?;
        let rest = rest?;
        stats.routine_calls = rest.routine_calls;
        stats.messages = rest.messages;
        stats.collectives = rest.collectives;
        stats.requests = rest.requests;
        stats.anomalies = rest.anomalies;
        stats.files = ops_files + rest_files;
        stats.bytes = ops_bytes + rest_bytes;
        Ok(stats)
    })
}

/// MPI call names as the rows spell them, each made once ([`Trace::kind_name`] makes a string
/// each time it is asked).
#[derive(Default)]
struct KindNames(HashMap<OpKind, String>);

impl KindNames {
    fn of(&mut self, trace: &Trace, kind: OpKind) -> &str {
        self.0.entry(kind).or_insert_with(|| trace.kind_name(kind))
    }
}

/// The `operations` table, rank block by rank block, each block's merged by time across its
/// locations.
fn read_operations(trace: &Trace, tmp: &Path, jobs: Jobs) -> Result<ParquetStats> {
    let mut stats = ParquetStats::default();
    let mut kind_names = KindNames::default();
    let metrics = trace.metrics()?;
    let counters = crate::query::catalog::counter_columns(&metrics);
    let mut ops = Table::with_counters(tmp, "operations", counters, &jobs);
    let mut blocks: BTreeMap<u32, Vec<OpChunkInfo>> = BTreeMap::new();
    for info in trace.op_chunks() {
        blocks
            .entry(info.rank / RANK_BLOCK)
            .or_default()
            .push(*info);
    }
    for (block, chunks) in blocks {
        let mut merge = OperationsByTime::new(trace, chunks, metrics.len())?;
        let p = ops.part(block)?;
        while let Some(op) = merge.next_operation()? {
            if stats.operations % 65_536 == 0 {
                trace.check_cancel()?;
            }
            // Read in place from the decoded columns: no operation is built per row.
            let (cols, row) = (op.columns, op.row);
            let op_kind = cols.known_kind(row)?;
            let kind = kind_names.of(trace, op_kind);
            let (start, end) = (cols.start(row), cols.end(row));
            let c = &mut p.cols;
            c[0].u64(op.id);
            c[1].u32(op.rank);
            c[2].u32(op.thread);
            c[3].str(kind);
            c[4].bool(op_kind.is_send());
            c[5].bool(op_kind.is_receive());
            c[6].bool(op_kind.is_collective());
            c[7].u64(start);
            c[8].u64(end);
            c[9].u64(end.saturating_sub(start));
            c[10].opt_u32(cols.comm(row));
            c[11].opt_u32(cols.dest(row));
            c[12].opt_u32(cols.source(row));
            c[13].opt_i32(cols.send_tag(row));
            c[14].opt_i32(cols.recv_tag(row));
            c[15].u64(cols.send_bytes(row));
            c[16].u64(cols.recv_bytes(row));
            c[17].opt_u32(cols.root(row));
            c[18].opt_str(cols.datatype(row).and_then(|id| trace.string(id)));
            c[19].opt_u64(cols.request(row));
            c[20].list_u64(op.completes()?);
            c[21].u8(cols.flags(row));
            c[22].u16(cols.depth(row));
            for (col, v) in c[23..].iter_mut().zip(op.counters) {
                col.opt_i64(*v);
            }
            p.row_done()?;
            stats.operations += 1;
        }
    }
    ops.close()?;
    Ok(stats)
}

/// Every table but `operations`.
fn read_other_tables(trace: &Trace, tmp: &Path, jobs: Jobs) -> Result<ParquetStats> {
    let mut stats = ParquetStats::default();
    let mut kind_names = KindNames::default();

    // Routine calls in the order they began (by start, rank, thread, then depth), with their
    // counters.
    let metrics = trace.metrics()?;
    let counters = crate::query::catalog::counter_columns(&metrics);
    let mut calls = Table::with_counters(tmp, "routine_calls", counters, &jobs);
    let mut by_start = CallsByStart::with_counters(trace, metrics.len())?;
    while let Some((call, values)) = by_start.next_counted()? {
        if stats.routine_calls % 65_536 == 0 {
            trace.check_cancel()?;
        }
        let p = calls.part(call.rank / RANK_BLOCK)?;
        let c = &mut p.cols;
        c[0].u32(call.rank);
        c[1].u32(call.thread);
        c[2].str(trace.string(call.routine).unwrap_or("?"));
        c[3].u16(call.depth);
        c[4].u64(call.start);
        c[5].u64(call.end);
        for (col, v) in c[6..].iter_mut().zip(values.iter()) {
            col.opt_i64(*v);
        }
        p.row_done()?;
        stats.routine_calls += 1;
    }
    calls.close()?;

    // Messages, by sender's block, sorted by send time within each row group.
    let mut messages = Table::new(tmp, "messages", &jobs);
    let mut pending: BTreeMap<u32, Vec<(u64, Message)>> = BTreeMap::new();
    let flush_messages = |table: &mut Table, block: u32, rows: &mut Vec<(u64, Message)>| {
        rows.sort_by_key(|(id, m)| (m.send_time, *id));
        let p = table.part(block)?;
        for (id, m) in rows.drain(..) {
            let c = &mut p.cols;
            c[0].u64(id);
            c[1].u32(m.sender);
            c[2].u32(m.receiver);
            c[3].u32(m.comm);
            c[4].i32(m.tag);
            c[5].u64(m.bytes);
            c[6].u64(m.send_time);
            c[7].u64(m.recv_time);
            c[8].u64(m.send_op);
            c[9].u64(m.recv_op);
            p.row_done()?;
        }
        p.end_row_group()
    };
    for chunk in 0..trace.message_chunk_count() {
        trace.check_cancel()?;
        for (row, m) in trace.message_chunk(chunk)?.into_iter().enumerate() {
            stats.messages += 1;
            let block = m.sender / RANK_BLOCK;
            let rows = pending.entry(block).or_default();
            rows.push((row_id(chunk, row), m));
            if rows.len() >= ROW_GROUP_ROWS {
                flush_messages(&mut messages, block, rows)?;
            }
        }
    }
    for (block, mut rows) in std::mem::take(&mut pending) {
        if !rows.is_empty() {
            flush_messages(&mut messages, block, &mut rows)?;
        }
    }
    messages.close()?;

    // Collective instances, by their smallest member's block, sorted by start within each
    // row group.
    let ranks = Ranks {
        chunks: trace.op_chunks(),
    };
    let mut collectives = Table::new(tmp, "collectives", &jobs);
    let mut pending: BTreeMap<u32, Vec<(u64, CollectiveInstance)>> = BTreeMap::new();
    let mut flush_collectives =
        |table: &mut Table, block: u32, rows: &mut Vec<(u64, CollectiveInstance)>| {
            rows.sort_by_key(|(n, c)| (c.start, *n));
            let p = table.part(block)?;
            for (n, ci) in rows.drain(..) {
                let kind = kind_names.of(trace, ci.kind);
                let c = &mut p.cols;
                c[0].u64(n);
                c[1].str(kind);
                c[2].u32(ci.comm);
                c[3].opt_u32(ci.root);
                c[4].u64(ci.start);
                c[5].u64(ci.end);
                c[6].u64(ci.send_bytes);
                c[7].u64(ci.recv_bytes);
                c[8].list_u64(&ci.ops);
                p.row_done()?;
            }
            p.end_row_group()
        };
    let mut instance = 0u64;
    for chunk in 0..trace.collective_chunk_count() {
        trace.check_cancel()?;
        for ci in trace.collective_chunk(chunk)? {
            let lowest = ci.ops.iter().filter_map(|&id| ranks.of(id)).min();
            let block = lowest.unwrap_or(0) / RANK_BLOCK;
            let rows = pending.entry(block).or_default();
            rows.push((instance, ci));
            instance += 1;
            if rows.len() >= ROW_GROUP_ROWS {
                flush_collectives(&mut collectives, block, rows)?;
            }
        }
    }
    for (block, mut rows) in std::mem::take(&mut pending) {
        if !rows.is_empty() {
            flush_collectives(&mut collectives, block, &mut rows)?;
        }
    }
    stats.collectives = instance;
    collectives.close()?;

    // Request links.
    let mut requests = Table::new(tmp, "requests", &jobs);
    for chunk in 0..trace.request_link_chunk_count() {
        for link in trace.request_link_chunk(chunk)? {
            let p = requests.part(0)?;
            p.cols[0].u64(link.request_op);
            p.cols[1].u64(link.completion_op);
            p.row_done()?;
            stats.requests += 1;
        }
    }
    requests.close()?;

    // The declarations.
    let header = trace.header();
    let mut comms = Table::new(tmp, "communicators", &jobs);
    for comm in &header.communicators {
        let p = comms.part(0)?;
        p.cols[0].u32(comm.id);
        p.cols[1].str(&comm.name);
        p.cols[2].list_u32(&comm.members);
        p.row_done()?;
    }
    comms.close()?;
    let mut processes = Table::new(tmp, "processes", &jobs);
    for process in &header.processes {
        let processor = process
            .processor
            .and_then(|id| header.processors.iter().find(|p| p.id == id))
            .map(|p| p.name.as_str());
        let p = processes.part(0)?;
        p.cols[0].u32(process.rank);
        p.cols[1].str(&process.name);
        p.cols[2].opt_str(processor);
        p.row_done()?;
    }
    processes.close()?;

    // Anomalies: the class and its fields as JSON (operations by id, names as text).
    let mut anomalies = Table::new(tmp, "anomalies", &jobs);
    for chunk in 0..trace.anomaly_chunk_count() {
        for a in trace.anomaly_chunk(chunk)? {
            let (class, detail) = anomaly_json(trace, &a);
            let p = anomalies.part(0)?;
            p.cols[0].str(class);
            p.cols[1].str(&detail);
            p.row_done()?;
            stats.anomalies += 1;
        }
    }
    anomalies.close()?;

    write_analyses(trace, tmp, &jobs)?;

    // The trace itself: where it came from and everything an import needs to rebuild it.
    let info = trace.info();
    let header_json = serde_json::to_string(&HeaderJson {
        header: header.clone(),
        strings: trace.strings().to_vec(),
        other_calls: other_calls(trace),
    })
    .map_err(|e| Error::Usage(format!("the trace's header as JSON: {e}")))?;
    let mut table = Table::new(tmp, "trace", &jobs);
    let p = table.part(0)?;
    p.cols[0].str(&info.name);
    p.cols[1].str(&info.format);
    p.cols[2].str(&info.source);
    p.cols[3].str(&header_json);
    p.row_done()?;
    table.close()?;
    Ok(stats)
}

/// The [`ANALYSIS_TABLES`] of the results `trace` holds (nothing is computed here).
fn write_analyses(trace: &Trace, tmp: &Path, jobs: &Jobs) -> Result<()> {
    use crate::analysis::detection::{PatternParams, PatternResult, PhaseParams, PhaseResult};
    use crate::analysis::waits::{WaitStates, WAITS_KEY};
    if let Some(found) = trace.result::<WaitStates>(WAITS_KEY)? {
        let mut table = Table::new(tmp, "wait_states", jobs);
        for w in &found.waits {
            let p = table.part(w.rank / RANK_BLOCK)?;
            let c = &mut p.cols;
            c[0].u64(w.op);
            c[1].u32(w.rank);
            c[2].str(w.kind.name());
            c[3].u64(w.start);
            c[4].u64(w.time);
            c[5].u32(w.partner);
            p.row_done()?;
        }
        table.close()?;
    }
    if let Some(found) = trace.result::<PatternResult>(&PatternParams::default().key())? {
        let mut patterns = Table::new(tmp, "patterns", jobs);
        let mut occurrences = Table::new(tmp, "pattern_occurrences", jobs);
        for pattern in &found.patterns {
            let p = patterns.part(0)?;
            p.cols[0].u32(pattern.id);
            p.cols[1].list_u32(&pattern.processes);
            p.cols[2].u32(pattern.events);
            p.cols[3].u64(pattern.occurrences.len() as u64);
            p.cols[4].str(&pattern.shape);
            p.row_done()?;
            for (k, &(start, end)) in pattern.occurrences.iter().enumerate() {
                let p = occurrences.part(0)?;
                p.cols[0].u32(pattern.id);
                p.cols[1].u32(k as u32);
                p.cols[2].u64(start);
                p.cols[3].u64(end);
                p.cols[4].u32(pattern.first_ranks.get(k).copied().unwrap_or(0));
                p.row_done()?;
            }
        }
        patterns.close()?;
        occurrences.close()?;
    }
    if let Some(found) = trace.result::<PhaseResult>(&PhaseParams::default().key())? {
        let mut table = Table::new(tmp, "phases", jobs);
        for phase in &found.phases {
            let p = table.part(0)?;
            let c = &mut p.cols;
            c[0].u32(phase.number);
            c[1].u32(phase.node);
            c[2].u32(phase.first);
            c[3].u32(phase.last);
            c[4].u64(phase.start);
            c[5].u64(phase.end);
            c[6].list_u32(&phase.patterns);
            c[7].str(&phase.routine);
            p.row_done()?;
        }
        table.close()?;
    }
    Ok(())
}

/// An anomaly's class and its fields as a JSON object (operations by their ids, names and
/// calls as text), as the `anomalies` table holds them.
fn anomaly_json(trace: &Trace, a: &Anomaly) -> (&'static str, String) {
    let (class, values) = anomaly_fields(trace, a);
    let object: serde_json::Map<String, serde_json::Value> = values
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    (class, serde_json::Value::Object(object).to_string())
}

/// An anomaly's class and its fields in order, resolved against `trace`: operations by their
/// ids, names and calls as text (what the `anomalies` table's `detail` holds, and what
/// `SELECT ANOMALIES` shows).
pub(crate) fn anomaly_fields(
    trace: &Trace,
    a: &Anomaly,
) -> (&'static str, Vec<(&'static str, serde_json::Value)>) {
    let (class, values) = fields(a);
    let ops = a.ops();
    let resolved = values
        .into_iter()
        .map(|(key, value)| {
            let v = match value {
                Val::Num(n) => serde_json::Value::from(n),
                Val::Int(i) => serde_json::Value::from(i),
                Val::Str(id) => serde_json::Value::from(trace.string(id).unwrap_or("?")),
                Val::Kind(k) => serde_json::Value::from(trace.kind_name(k)),
                Val::Op(i) => ops
                    .get(i)
                    .map_or(serde_json::Value::Null, |&id| serde_json::Value::from(id)),
                Val::Text(t) => serde_json::Value::from(t),
            };
            (key, v)
        })
        .collect();
    (class, resolved)
}
