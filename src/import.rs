//! The import pipeline: a source's [`EventSink`] stream → routine nesting, matching → column
//! chunks and bitmap indexes in the store, committed in one atomic step.
//!
//! Memory is bounded: each location (rank, thread) buffers at most one open chunk, the total
//! of buffered rows is capped (the largest buffer is flushed early when the cap is reached),
//! and the matcher holds only in-flight items. Encoding and writing chunks happens on a
//! second thread, fed through a bounded channel.

use crate::hash::FxHashMap as HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use roaring::RoaringTreemap;

pub(crate) mod clock;
mod counters;
mod pack;
mod tally;

pub(crate) use tally::Tally;

use crate::analysis::clock::{ClockCheck, PairViolation};
use crate::error::{Error, Result};
use crate::ingest::matcher::{MatchSink, Matcher};
use crate::ingest::{EventSink, Policy, ValidatingSink};
use crate::model::OTHER_CODE_BASE;
use crate::model::{
    Anomaly, CollectiveInstance, Message, OpId, OpKind, OpPosition, Operation, Rank, RequestLink,
    RoutineCall, RoutineEvent, StrId, Time, TraceHeader,
};
use crate::store::tables::{self, row_id, Columns, OperationRows, CHUNK_ROWS};
use crate::store::{
    encode_postings, IndexDim, MessageColumns, OpChunkInfo, OperationColumns, Table, TraceMeta,
    TraceSummary, TraceWriter,
};

/// Rows buffered across all open operation chunks before the largest is flushed early
/// (about 70 MiB of columns; more buys no compression and costs memory).
const MAX_BUFFERED_ROWS: usize = CHUNK_ROWS * 8;
/// Rows a location must have buffered to be stored as a chunk of its own when the buffers
/// are relieved (chunks this long compress as well as full ones); shorter buffers are parked.
const OWN_CHUNK_ROWS: usize = pack::SHORT_CHUNK_ROWS;
/// Anomalies per stored anomaly chunk.
const ANOMALY_CHUNK: usize = 65_536;

/// A unit of work for the writer thread.
enum Job {
    /// Rows of operation chunks that stay open, to park in the scratch file: their pieces
    /// one after another ([`OperationRows::encode_piece`]), and per piece its chunk, offset
    /// and length in `bytes`.
    OpPieces {
        bytes: Vec<u8>,
        pieces: Vec<(u32, u64, u32)>,
    },
    /// The last rows of an operation chunk: joined with its parked pieces and packed.
    Ops {
        chunk: u32,
        rank: Rank,
        cols: OperationRows,
        /// The chunk's rows, parked ones included.
        rows: usize,
    },
    Messages {
        chunk: u32,
        cols: Columns,
    },
    Table {
        table: Table,
        chunk: u32,
        cols: Columns,
    },
    Anomalies {
        chunk: u32,
        anomalies: Vec<Anomaly>,
    },
    /// Operation jobs of many locations at once, in order: one hand-over instead of one per
    /// location (thousands of locations made the two threads take turns per job).
    Batch(Vec<Job>),
    /// A piece of the counter values of a chunk of operations or routine calls.
    Counters {
        table: Table,
        chunk: u32,
        piece: u32,
        rows: crate::store::counters::CounterRows,
    },
    /// The trace's counter definitions.
    Metrics(Vec<crate::model::Metric>),
}

/// Encodes chunks and their index postings and writes them; runs on its own thread. Returns
/// where each operation chunk was packed.
fn write_jobs(writer: &mut TraceWriter<'_>, jobs: Receiver<Job>) -> Result<Vec<pack::Placement>> {
    use rayon::prelude::*;
    let mut batch: Vec<Job> = Vec::new();
    let mut pieces: HashMap<u32, Vec<pack::Piece>> = HashMap::default();
    let mut packer = pack::OpPacker::default();
    let mut encoding: Option<Receiver<Vec<Result<Encoded>>>> = None;
    while let Ok(job) = jobs.recv() {
        // Chunks that queued up meanwhile are encoded together on every core (at the end of
        // an import, when the other stages are done, that is where the time goes).
        batch.push(job);
        while batch.len() < 4 {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // Parking comes first, in order: a chunk's pieces are in the scratch file before
        // its last rows are joined to them.
        let mut work = Vec::with_capacity(batch.len());
        let flat = batch.drain(..).flat_map(|job| match job {
            Job::Batch(jobs) => jobs,
            job => vec![job],
        });
        for job in flat {
            match job {
                Job::OpPieces {
                    bytes,
                    pieces: parked,
                } => {
                    let (at, _) = writer.spill_file()?.append(&bytes)?;
                    for (chunk, offset, len) in parked {
                        pieces.entry(chunk).or_default().push((at + offset, len));
                    }
                }
                job @ Job::Ops { chunk, .. } => {
                    let parked = pieces.remove(&chunk).unwrap_or_default();
                    work.push((job, parked));
                }
                job => work.push((job, Vec::new())),
            }
        }
        if work.iter().any(|(_, parked)| !parked.is_empty()) {
            writer.spill_file()?.flush()?;
        }
        let bytes = pack::ParkedBytes::read(writer.spill(), work.iter().flat_map(|(_, p)| p))?;
        // Encoded on the pool while this thread stores the batch before: storing (packing,
        // compressing packs, writing) is serial, and waiting for it left the cores idle at
        // the end of many-rank imports.
        let (done, encoded) = std::sync::mpsc::channel();
        rayon::spawn(move || {
            // A panic must not abort the process from the pool: it drops `done`, and the
            // store below reports the pipeline stopped.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let jobs: Vec<Result<Encoded>> = work
                    .into_par_iter()
                    .map(|(job, parked)| encode_job(job, &bytes, &parked))
                    .collect();
                let _ = done.send(jobs);
            }));
        });
        if let Some(before) = encoding.replace(encoded) {
            store_encoded(writer, &mut packer, before)?;
        }
    }
    if let Some(last) = encoding {
        store_encoded(writer, &mut packer, last)?;
    }
    packer.finish(writer)
}

/// Stores a batch of encoded jobs, in order, once the pool has encoded them.
fn store_encoded(
    writer: &mut TraceWriter<'_>,
    packer: &mut pack::OpPacker,
    encoded: Receiver<Vec<Result<Encoded>>>,
) -> Result<()> {
    let encoded = encoded.recv().map_err(|_| pipeline_stopped())?;
    for job in encoded {
        match job? {
            Encoded::Ops {
                chunk,
                rank,
                rows,
                postings,
                bytes,
            } => packer.add(writer, chunk, rank, rows, bytes, postings)?,
            Encoded::Chunk {
                table,
                chunk,
                postings,
                bytes,
            } => {
                for (dim, index) in postings {
                    writer.put_encoded_postings(dim, chunk, index)?;
                }
                writer.put_encoded_chunk(table, chunk, bytes)?;
            }
            Encoded::Plain(Job::Table { table, chunk, cols }) => {
                writer.put_chunk(table, chunk, &cols)?
            }
            Encoded::Plain(Job::Anomalies { chunk, anomalies }) => {
                writer.put_anomalies(chunk, &anomalies)?
            }
            Encoded::Plain(Job::Counters {
                table,
                chunk,
                piece,
                rows,
            }) => writer.put_counters(table, chunk, piece, &rows)?,
            Encoded::Plain(Job::Metrics(metrics)) => writer.put_metrics(&metrics)?,
            Encoded::Plain(_) => {}
        }
    }
    Ok(())
}

/// A job with its column chunk and indexes encoded, ready for the segment.
enum Encoded {
    /// An operation chunk, joined and encoded, for the packer.
    Ops {
        chunk: u32,
        rank: Rank,
        rows: usize,
        postings: pack::Postings,
        bytes: Vec<u8>,
    },
    /// A message chunk with its posting lists, per dimension.
    Chunk {
        table: Table,
        chunk: u32,
        postings: Vec<(IndexDim, Vec<u8>)>,
        bytes: Vec<u8>,
    },
    /// A table chunk or anomalies, encoded as they are written.
    Plain(Job),
}

fn encode_job(job: Job, bytes: &pack::ParkedBytes, parked: &[pack::Piece]) -> Result<Encoded> {
    Ok(match job {
        Job::Ops {
            chunk,
            rank,
            cols,
            rows,
        } => {
            let cols = pack::join_pieces(bytes, parked, cols, chunk, rows)?;
            Encoded::Ops {
                chunk,
                rank,
                rows: cols.rows,
                postings: op_chunk_indexes(chunk, &cols),
                bytes: pack::encode_chunk(&cols),
            }
        }
        Job::Messages { chunk, cols } => {
            let mut by_dim: Vec<(IndexDim, Vec<(u32, RoaringTreemap)>)> = Vec::new();
            for (dim, value, ids) in message_chunk_indexes(chunk, &cols) {
                match by_dim.last_mut() {
                    Some((d, list)) if *d == dim => list.push((value, ids)),
                    _ => by_dim.push((dim, vec![(value, ids)])),
                }
            }
            Encoded::Chunk {
                table: Table::Messages,
                chunk,
                postings: by_dim
                    .into_iter()
                    .map(|(dim, mut list)| (dim, encode_postings(&mut list)))
                    .collect(),
                bytes: cols.encode(),
            }
        }
        job => Encoded::Plain(job),
    })
}

/// Groups a chunk's rows by the value `value_of` gives each (None: not indexed): per value,
/// the rows' ids in ascending order, values in no particular order.
fn group_ids(
    chunk: u32,
    rows: usize,
    mut value_of: impl FnMut(usize) -> Option<u32>,
) -> Vec<(u32, Vec<u64>)> {
    let mut slots: HashMap<u32, usize> = HashMap::default();
    let mut last: Option<(u32, usize)> = None;
    let mut groups: Vec<(u32, Vec<u64>)> = Vec::new();
    for r in 0..rows {
        let Some(v) = value_of(r) else { continue };
        let slot = match last {
            Some((lv, slot)) if lv == v => slot,
            _ => {
                let next = groups.len();
                let slot = *slots.entry(v).or_insert(next);
                if slot == next {
                    groups.push((v, Vec::new()));
                }
                last = Some((v, slot));
                slot
            }
        };
        groups[slot].1.push(row_id(chunk, r));
    }
    groups
}

/// The index groups of one operation chunk: communicator, kind and peer, as lists of ids (the
/// packer makes the bitmaps once per pack: per chunk, thousands of short chunks made thousands
/// of small bitmaps only to merge them; it adds the process index, the chunk's id range).
fn op_chunk_indexes(chunk: u32, cols: &Columns) -> pack::Postings {
    let ops = OperationColumns::new(chunk, cols);
    let mut out = Vec::new();
    let mut by = |dim: IndexDim, f: &dyn Fn(usize) -> Option<u32>| {
        out.extend(
            group_ids(chunk, cols.rows, f)
                .into_iter()
                .map(|(v, ids)| (dim, v, ids)),
        );
    };
    by(IndexDim::Comm, &|r| ops.comm(r));
    by(IndexDim::Kind, &|r| ops.kind(r).map(OpKind::code));
    // A row's peers: destination, source, root (a Sendrecv has two; the packer drops an id
    // listed twice).
    by(IndexDim::Peer, &|r| ops.dest(r));
    by(IndexDim::Peer, &|r| ops.source(r));
    by(IndexDim::Peer, &|r| ops.root(r));
    out
}

/// The index bitmaps of one message chunk: sender, receiver, communicator.
fn message_chunk_indexes(chunk: u32, cols: &Columns) -> Vec<(IndexDim, u32, RoaringTreemap)> {
    let messages = MessageColumns::new(chunk, cols);
    let mut out = Vec::new();
    for (dim, value) in [
        (
            IndexDim::MessageSender,
            MessageColumns::sender as fn(&_, _) -> _,
        ),
        (IndexDim::MessageReceiver, MessageColumns::receiver),
        (IndexDim::MessageComm, MessageColumns::comm),
    ] {
        let mut groups = group_ids(chunk, cols.rows, |r| Some(value(&messages, r)));
        groups.sort_unstable_by_key(|(v, _)| *v);
        out.extend(groups.into_iter().map(|(v, ids)| {
            let bitmap = RoaringTreemap::from_sorted_iter(ids).expect("row ids ascend");
            (dim, v, bitmap)
        }));
    }
    out
}

/// A chunk being filled for one location.
struct OpenChunk {
    chunk: u32,
    /// Its rows not parked yet.
    cols: OperationRows,
    /// All its rows, parked or not.
    rows: usize,
    first_row: u64,
    first_start: Time,
    last_start: Time,
    max_end: Time,
}

/// The rows to make room for in a location's buffer when its chunk holds `rows` rows already:
/// the rest of the chunk, up to twice the process's share of the row cap, since growing the
/// buffer row by row copies it many times over. Twice, because the buffers are relieved when
/// their total reaches the cap, and by then the processes ahead in time hold more than their
/// share: with room for the share only, the buffers of those ahead were copied into ones twice
/// as large before every relief (3-4% of a 64-rank OTF2 import's wall time, by hand over
/// alternating imports, not a bench). Room is address space: only the rows written take
/// memory, and the cap, not the room, bounds them.
fn chunk_room(processes: usize, rows: usize) -> usize {
    (2 * MAX_BUFFERED_ROWS / processes.max(1)).min(CHUNK_ROWS - rows.min(CHUNK_ROWS))
}

/// One (rank, thread) stream: its open chunk and its routine stack.
struct Location {
    rank: Rank,
    thread: u32,
    rows: u64,
    open: Option<OpenChunk>,
    /// The location's chunks so far: (index of the first row, chunk number), ascending.
    chunks: Vec<(u64, u32)>,
    stack: Vec<(StrId, Time)>,
    last_time: Time,
}

impl Location {
    /// The id of the location's `index`-th operation, if it has one.
    fn op_id(&self, index: u64) -> Option<OpId> {
        if index >= self.rows {
            return None;
        }
        let i = self.chunks.partition_point(|&(first, _)| first <= index);
        let (first, chunk) = *self.chunks.get(i.checked_sub(1)?)?;
        Some(row_id(chunk, (index - first) as usize))
    }
}

/// The index of `(rank, thread)` among `locations[rank]`, creating the location if new.
fn locate(locations: &mut [Vec<Location>], rank: Rank, thread: u32) -> Result<usize> {
    let by_rank = locations
        .get_mut(rank as usize)
        .ok_or_else(|| Error::Usage(format!("rank {rank} is not a declared process")))?;
    Ok(match by_rank.iter().position(|l| l.thread == thread) {
        Some(p) => p,
        None => {
            by_rank.push(Location {
                rank,
                thread,
                rows: 0,
                open: None,
                chunks: Vec::new(),
                stack: Vec::new(),
                last_time: 0,
            });
            by_rank.len() - 1
        }
    })
}

/// A table of derived rows (messages, links, …) filled in order and cut into chunks.
struct ChunkedTable {
    table: Table,
    cols: Columns,
    next_chunk: u32,
}

impl ChunkedTable {
    fn new(table: Table) -> ChunkedTable {
        ChunkedTable {
            table,
            cols: Self::room(table),
            next_chunk: 0,
        }
    }

    /// An empty chunk of `table` with room for a whole chunk up front: grown row by row,
    /// every column was copied at each doubling, into new memory the kernel faulted in anew
    /// (`perf`: a tenth of an OTF2 import's page faults). Room not written to costs no memory.
    fn room(table: Table) -> Columns {
        Columns::with_capacity(table.columns(), CHUNK_ROWS)
    }

    /// Hands the filled chunk to the writer when full (or when `force`d and non-empty).
    fn flush_if(&mut self, force: bool, jobs: &SyncSender<Job>) -> Result<()> {
        if self.cols.rows == 0 || (!force && self.cols.rows < CHUNK_ROWS) {
            return Ok(());
        }
        let cols = std::mem::replace(&mut self.cols, Self::room(self.table));
        let chunk = self.next_chunk;
        self.next_chunk += 1;
        let job = match self.table {
            Table::Messages => Job::Messages { chunk, cols },
            table => Job::Table { table, chunk, cols },
        };
        jobs.send(job).map_err(|_| writer_gone())
    }
}

fn writer_gone() -> Error {
    pipeline_stopped()
}

/// What the matcher produces, turned into stored rows.
struct Derived {
    jobs: SyncSender<Job>,
    messages: ChunkedTable,
    links: ChunkedTable,
    collectives: ChunkedTable,
    link_count: u64,
    collective_count: u64,
    anomalies: Vec<Anomaly>,
    anomaly_chunks: u32,
    anomaly_counts: HashMap<&'static str, u64>,
    /// Traffic per process and per pair, and the anomalies counting finds.
    tally: Tally,
    /// Anomalies the tally just found, on their way to the record.
    found: Vec<Anomaly>,
    /// Messages received before they were sent, per pair (one anomaly per pair at the end).
    clock: ClockCheck,
    /// Earliest send and latest receive of the message chunk being filled, and of those done.
    chunk_times: Option<(Time, Time)>,
    message_chunk_times: Vec<(Time, Time)>,
}

impl Derived {
    /// Records the time range of the message chunk about to be written.
    fn close_message_chunk(&mut self) {
        if let Some(range) = self.chunk_times.take() {
            self.message_chunk_times.push(range);
        }
    }

    /// Records what the tally found.
    fn record_found(&mut self) -> Result<()> {
        // Called for every operation and message; almost always with nothing found.
        if self.found.is_empty() {
            return Ok(());
        }
        let mut found = std::mem::take(&mut self.found);
        for a in found.drain(..) {
            self.record_anomaly(a)?;
        }
        self.found = found;
        Ok(())
    }

    fn record_anomaly(&mut self, a: Anomaly) -> Result<()> {
        *self.anomaly_counts.entry(a.kind_name()).or_default() += 1;
        self.anomalies.push(a);
        if self.anomalies.len() >= ANOMALY_CHUNK {
            self.flush_anomalies()?;
        }
        Ok(())
    }

    fn flush_anomalies(&mut self) -> Result<()> {
        if self.anomalies.is_empty() {
            return Ok(());
        }
        let anomalies = std::mem::take(&mut self.anomalies);
        let chunk = self.anomaly_chunks;
        self.anomaly_chunks += 1;
        self.jobs
            .send(Job::Anomalies { chunk, anomalies })
            .map_err(|_| writer_gone())
    }
}

impl Derived {
    /// Counts a matched message and adds it to the messages table.
    fn store_message(&mut self, m: &Message) -> Result<()> {
        self.tally.message(m, &mut self.found);
        self.record_found()?;
        let end = m.recv_time.max(m.send_time);
        self.chunk_times = Some(match self.chunk_times {
            Some((lo, hi)) => (lo.min(m.send_time), hi.max(end)),
            None => (m.send_time, end),
        });
        tables::push_message(&mut self.messages.cols, m);
        if self.messages.cols.rows == CHUNK_ROWS {
            self.close_message_chunk();
        }
        self.messages.flush_if(false, &self.jobs)
    }
}

impl MatchSink for Derived {
    fn message(&mut self, m: &Message) -> Result<()> {
        self.clock
            .message(m.sender, m.receiver, m.send_time, m.recv_time);
        self.store_message(m)
    }

    fn uncompleted_message(&mut self, m: &Message) -> Result<()> {
        self.store_message(m)
    }

    fn request_link(&mut self, l: &RequestLink) -> Result<()> {
        self.link_count += 1;
        tables::push_link(&mut self.links.cols, l);
        self.links.flush_if(false, &self.jobs)
    }

    fn collective(&mut self, c: &CollectiveInstance) -> Result<()> {
        self.collective_count += 1;
        tables::push_collective(&mut self.collectives.cols, c);
        self.collectives.flush_if(false, &self.jobs)
    }

    fn anomaly(&mut self, a: &Anomaly) -> Result<()> {
        self.record_anomaly(a.clone())
    }
}

/// Turns the event stream into stored rows: nesting depth, matching, chunking.
struct Importer {
    meta: TraceMeta,
    matcher: Option<Matcher>,
    derived: Derived,
    /// Locations by rank, then by thread (usually one).
    locations: Vec<Vec<Location>>,
    op_chunks: Vec<OpChunkInfo>,
    next_chunk: u32,
    buffered_rows: usize,
    /// Operation jobs waiting to be handed to the writer together, and their rows.
    outbox: Vec<Job>,
    outbox_rows: usize,
    /// Operations per kind: MPI's kinds by code, in a vector (a hash lookup per operation
    /// showed in profiles), the others by name.
    kind_counts: Vec<u64>,
    other_kind_counts: HashMap<OpKind, u64>,
    routines: ChunkedTable,
    routine_count: u64,
    operations: u64,
    first_time: Option<Time>,
    last_time: Option<Time>,
    /// The counters of a trace that recorded some.
    counters: Option<counters::CounterBuffer>,
    /// The row the next counter values belong to: the last operation or routine call stored.
    last_row: Option<(Table, u64)>,
}

impl Importer {
    fn new(name: &str, source: &str, format: &str, jobs: SyncSender<Job>) -> Importer {
        Importer {
            meta: TraceMeta {
                name: name.to_string(),
                source: source.to_string(),
                format: format.to_string(),
                ..TraceMeta::default()
            },
            matcher: None,
            derived: Derived {
                jobs,
                messages: ChunkedTable::new(Table::Messages),
                links: ChunkedTable::new(Table::Links),
                collectives: ChunkedTable::new(Table::Collectives),
                link_count: 0,
                collective_count: 0,
                anomalies: Vec::new(),
                anomaly_chunks: 0,
                anomaly_counts: HashMap::default(),
                tally: Tally::default(),
                found: Vec::new(),
                clock: ClockCheck::default(),
                chunk_times: None,
                message_chunk_times: Vec::new(),
            },
            locations: Vec::new(),
            op_chunks: Vec::new(),
            next_chunk: 0,
            buffered_rows: 0,
            outbox: Vec::new(),
            outbox_rows: 0,
            kind_counts: vec![0; OTHER_CODE_BASE as usize],
            other_kind_counts: HashMap::default(),
            routines: ChunkedTable::new(Table::Routines),
            routine_count: 0,
            operations: 0,
            first_time: None,
            last_time: None,
            counters: None,
            last_row: None,
        }
    }

    fn note_time(&mut self, start: Time, end: Time) {
        self.first_time = Some(self.first_time.map_or(start, |t| t.min(start)));
        self.last_time = Some(self.last_time.map_or(end, |t| t.max(end)));
    }

    /// Sends a location's open chunk to the writer, complete.
    fn flush_location(&mut self, rank: Rank, idx: usize) -> Result<()> {
        let loc = &mut self.locations[rank as usize][idx];
        let Some(open) = loc.open.take() else {
            return Ok(());
        };
        self.buffered_rows -= open.cols.len();
        self.op_chunks.push(OpChunkInfo {
            chunk: open.chunk,
            rank: loc.rank,
            thread: loc.thread,
            first_row: open.first_row,
            rows: open.rows as u32,
            first_start: open.first_start,
            last_start: open.last_start,
            max_end: open.max_end,
            // Placed by the writer.
            pack: 0,
            offset: 0,
            len: 0,
        });
        // The writer joins the chunk's parked pieces to these rows: what it holds is the
        // whole chunk (counting only the rows not parked let a batch at the end of a
        // many-rank import hold millions of rows).
        let rows = open.rows;
        let job = Job::Ops {
            chunk: open.chunk,
            rank: loc.rank,
            cols: open.cols,
            rows,
        };
        self.post(job, rows)
    }

    /// Queues an operation job for the writer; sends the queue once its jobs hand the writer a
    /// chunk's worth of rows.
    fn post(&mut self, job: Job, rows: usize) -> Result<()> {
        self.outbox.push(job);
        self.outbox_rows += rows;
        if self.outbox_rows >= CHUNK_ROWS {
            self.send_outbox()?;
        }
        Ok(())
    }

    /// Sends the queued operation jobs.
    fn send_outbox(&mut self) -> Result<()> {
        self.outbox_rows = 0;
        let job = match self.outbox.len() {
            0 => return Ok(()),
            1 => self.outbox.pop(),
            _ => Some(Job::Batch(std::mem::take(&mut self.outbox))),
        };
        match job {
            Some(job) => self.derived.jobs.send(job).map_err(|_| writer_gone()),
            None => Ok(()),
        }
    }

    /// Empties every buffer when the cap on buffered rows is reached: a location with a
    /// large buffer stores it as a chunk of its own; the others park their rows in the
    /// scratch file and keep their chunk open, so that many locations with few rows each
    /// still make full chunks. One pass over the locations per cap's worth of rows.
    fn relieve_buffers(&mut self) -> Result<()> {
        let processes = self.locations.len();
        // The pieces are encoded here, into one buffer: one job and one write for all of
        // them, and no buffer handed to the writer thread to free per location.
        let (mut bytes, mut pieces, mut parked_rows) = (Vec::new(), Vec::new(), 0);
        for rank in 0..processes {
            for i in 0..self.locations[rank].len() {
                let Some(open) = self.locations[rank][i].open.as_mut() else {
                    continue;
                };
                if open.cols.len() >= OWN_CHUNK_ROWS {
                    self.flush_location(rank as Rank, i)?;
                } else if !open.cols.is_empty() {
                    let at = bytes.len();
                    open.cols.encode_piece(&mut bytes);
                    pieces.push((open.chunk, at as u64, (bytes.len() - at) as u32));
                    parked_rows += open.cols.len();
                    // A location that had many rows keeps room for its share of the cap
                    // only, not its largest buffer forever.
                    open.cols.clear_keeping(chunk_room(processes, open.rows));
                }
            }
        }
        self.buffered_rows -= parked_rows;
        if !pieces.is_empty() {
            self.post(Job::OpPieces { bytes, pieces }, parked_rows)?;
        }
        self.send_outbox()
    }

    fn finish_import(mut self) -> Result<TraceMeta> {
        // Routines never left are closed at their location's last time.
        for rank in 0..self.locations.len() {
            for i in 0..self.locations[rank].len() {
                let loc = &mut self.locations[rank][i];
                let (r, t, last) = (loc.rank, loc.thread, loc.last_time);
                let open: Vec<_> = loc.stack.drain(..).collect();
                for (depth, (routine, start)) in open.into_iter().enumerate().rev() {
                    let call = RoutineCall {
                        rank: r,
                        thread: t,
                        routine,
                        depth: depth as u16,
                        start,
                        end: last,
                    };
                    self.push_routine(&call)?;
                    self.derived
                        .record_anomaly(Anomaly::UnclosedRoutine { rank: r, routine })?;
                }
                self.flush_location(rank as Rank, i)?;
            }
        }
        self.send_outbox()?;
        if let Some(matcher) = self.matcher.take() {
            matcher.finish(&mut self.derived)?;
        }
        let d = &mut self.derived;
        d.close_message_chunk();
        for table in [
            &mut d.messages,
            &mut d.links,
            &mut d.collectives,
            &mut self.routines,
        ] {
            table.flush_if(true, &d.jobs)?;
        }
        if let Some(mut counters) = self.counters.take() {
            counters.flush(&d.jobs)?;
            let metrics = std::mem::take(&mut counters.metrics);
            d.jobs
                .send(Job::Metrics(metrics))
                .map_err(|_| writer_gone())?;
        }
        let (pairs, message_bytes) = d.tally.finish(&mut d.found);
        d.found
            .extend(d.clock.violations().iter().map(PairViolation::anomaly));
        d.record_found()?;
        d.flush_anomalies()?;
        self.op_chunks.sort_by_key(|c| c.chunk);
        let mut by_kind: Vec<(OpKind, u64)> = self.other_kind_counts.into_iter().collect();
        by_kind.extend(
            (0..OTHER_CODE_BASE)
                .zip(self.kind_counts)
                .filter(|&(_, n)| n > 0)
                .filter_map(|(code, n)| Some((OpKind::from_code(code)?, n))),
        );
        by_kind.sort();
        let mut anomalies: Vec<(String, u64)> = d
            .anomaly_counts
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect();
        anomalies.sort();
        let mut meta = self.meta;
        meta.op_chunks = self.op_chunks;
        meta.message_chunks = d.messages.next_chunk;
        meta.message_chunk_times = std::mem::take(&mut d.message_chunk_times);
        meta.traffic = std::mem::take(&mut d.tally.traffic);
        meta.pairs = pairs;
        meta.link_chunks = d.links.next_chunk;
        meta.collective_chunks = d.collectives.next_chunk;
        meta.routine_chunks = self.routines.next_chunk;
        meta.anomaly_chunks = d.anomaly_chunks;
        meta.summary = TraceSummary {
            operations: self.operations,
            by_kind,
            messages: meta.pairs.iter().map(|p| p.messages).sum(),
            message_bytes,
            collective_instances: d.collective_count,
            request_links: d.link_count,
            routine_calls: self.routine_count,
            anomalies,
            first_time: self.first_time,
            last_time: self.last_time,
        };
        Ok(meta)
    }

    fn push_routine(&mut self, call: &RoutineCall) -> Result<()> {
        self.last_row = Some((Table::Routines, self.routine_count));
        self.routine_count += 1;
        tables::push_routine(&mut self.routines.cols, call);
        self.routines.flush_if(false, &self.derived.jobs)
    }
}

impl EventSink for Importer {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        self.meta.header = header.clone();
        self.locations = (0..header.processes.len()).map(|_| Vec::new()).collect();
        self.derived.tally = Tally::new(header.processes.len());
        self.matcher = Some(Matcher::new(header));
        Ok(())
    }

    fn string(&mut self, id: StrId, text: &str) -> Result<()> {
        let id = id as usize;
        if self.meta.strings.len() <= id {
            self.meta.strings.resize(id + 1, String::new());
        }
        self.meta.strings[id] = text.to_string();
        Ok(())
    }

    fn operation(&mut self, op: &Operation) -> Result<()> {
        self.note_time(op.start, op.end);
        match self.kind_counts.get_mut(op.kind.code() as usize) {
            Some(n) => *n += 1,
            None => *self.other_kind_counts.entry(op.kind).or_default() += 1,
        }
        self.operations += 1;
        let idx = locate(&mut self.locations, op.rank, op.thread)?;
        let processes = self.locations.len();
        let next_chunk = &mut self.next_chunk;
        let loc = &mut self.locations[op.rank as usize][idx];
        let depth = loc.stack.len() as u16;
        loc.last_time = loc.last_time.max(op.end);
        if loc.open.is_none() {
            if *next_chunk == u32::MAX {
                return Err(Error::limit(
                    crate::Limit::ValueRange,
                    "the trace needs more than 2^32 operation chunks (a chunk holds up to \
                     65,536 operations of one thread of one rank), more than one trace can hold",
                ));
            }
            loc.open = Some(OpenChunk {
                chunk: *next_chunk,
                cols: OperationRows::with_capacity(chunk_room(processes, 0)),
                rows: 0,
                first_row: loc.rows,
                first_start: op.start,
                last_start: op.start,
                max_end: op.end,
            });
            loc.chunks.push((loc.rows, *next_chunk));
            *next_chunk += 1;
        }
        let open = loc.open.as_mut().expect("just opened");
        let id = row_id(open.chunk, open.rows);
        self.last_row = Some((Table::Operations, id));
        open.cols.push(op, depth);
        open.rows += 1;
        open.last_start = op.start;
        open.max_end = open.max_end.max(op.end);
        loc.rows += 1;
        let full = open.rows == CHUNK_ROWS;
        let rank = loc.rank;
        self.buffered_rows += 1;
        self.derived
            .tally
            .operation(id, op, &mut self.derived.found);
        self.derived.record_found()?;
        if let Some(m) = self.matcher.as_mut() {
            m.operation(id, op, &mut self.derived)?;
        }
        if full {
            self.flush_location(rank, idx)?;
        } else if self.buffered_rows >= MAX_BUFFERED_ROWS {
            self.relieve_buffers()?;
        }
        Ok(())
    }

    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        let idx = locate(&mut self.locations, event.rank, event.thread)?;
        let loc = &mut self.locations[event.rank as usize][idx];
        loc.last_time = loc.last_time.max(event.time);
        if event.enter {
            loc.stack.push((event.routine, event.time));
            self.last_row = None;
            return Ok(());
        }
        let (rank, thread) = (loc.rank, loc.thread);
        // Validation guarantees a leave matches the innermost enter.
        if let Some((routine, start)) = loc.stack.pop() {
            let depth = loc.stack.len() as u16;
            self.note_time(start, event.time);
            let call = RoutineCall {
                rank,
                thread,
                routine,
                depth,
                start,
                end: event.time,
            };
            self.push_routine(&call)?;
        }
        Ok(())
    }

    fn anomaly(&mut self, anomaly: &Anomaly) -> Result<()> {
        if let (Anomaly::MissingRankData { rank, .. }, Some(m)) = (anomaly, self.matcher.as_mut()) {
            m.rank_missing(*rank);
        }
        self.derived.record_anomaly(anomaly.clone())
    }

    fn metrics(&mut self, metrics: &[crate::model::Metric]) -> Result<()> {
        if !metrics.is_empty() {
            self.counters = Some(counters::CounterBuffer::new(metrics));
        }
        Ok(())
    }

    fn counters(&mut self, values: &[Option<i64>]) -> Result<()> {
        match (self.counters.as_mut(), self.last_row.take()) {
            (Some(buffer), Some((table, id))) => buffer.push(table, id, values, &self.derived.jobs),
            _ => Ok(()),
        }
    }

    fn anomaly_at(&mut self, anomaly: &Anomaly, at: &[OpPosition]) -> Result<()> {
        let mut positions = at.iter();
        let resolved = anomaly.map_ops(|_| {
            let p = positions.next().ok_or_else(|| {
                Error::Usage(format!(
                    "an anomaly ({}) names more operations than positions were given",
                    anomaly.kind_name()
                ))
            })?;
            self.locations
                .get(p.rank as usize)
                .and_then(|threads| threads.iter().find(|l| l.thread == p.thread))
                .and_then(|l| l.op_id(p.index))
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "an anomaly ({}) names operation {} of rank {} thread {}, which the source did not deliver",
                        anomaly.kind_name(),
                        p.index,
                        p.rank,
                        p.thread
                    ))
                })
        })?;
        self.derived.record_anomaly(resolved)
    }

    fn locations(&mut self, locations: &[crate::model::Location]) -> Result<()> {
        self.meta.header.locations = locations.to_vec();
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Chunks waiting for the writer (each up to a few MiB): a small queue keeps memory flat
/// while the writer pauses to reopen the database.
const JOBS_IN_FLIGHT: usize = 2;
/// Items per batch handed from the parsing thread to the importing thread.
const BATCH_ITEMS: usize = 4096;
/// Batches in flight between the two (bounds memory: a batch holds at most a few hundred KiB).
/// With four, the parsing thread stalled whenever the chunk encoders took the cores for a
/// while and the importing thread fell behind; sixteen (about 64,000 items) ride those out
/// (runs by hand, not a bench: docs/benchmarks.md, "OTF2 import").
const BATCHES_IN_FLIGHT: usize = 16;

/// One item of a batch, in stream order. Operations live in the batch's reusable slots and
/// the rare items in a list of their own, so that an entry is small and plain data and
/// clearing a batch drops nothing per entry (in perf, a tenth of a percent of the import
/// each, at millions of entries).
#[derive(Clone, Copy)]
enum Entry {
    Operation(usize),
    Routine(RoutineEvent),
    Rare(usize),
    /// Counter values of the item before: `counters[start..start + len]` of the batch.
    Counters(usize, usize),
}

/// An item that comes a few times per trace, not once per event.
enum Rare {
    Header(Box<TraceHeader>),
    String(StrId, String),
    Anomaly(Anomaly),
    AnomalyAt(Anomaly, Vec<OpPosition>),
    Locations(Vec<crate::model::Location>),
    Metrics(Vec<crate::model::Metric>),
}

/// A run of items from the source. Operation slots are reused from batch to batch, so that
/// copying an operation (and its `completes` list) into a slot does not allocate.
#[derive(Default)]
struct Batch {
    entries: Vec<Entry>,
    ops: Vec<Operation>,
    used_ops: usize,
    rare: Vec<Rare>,
    counters: Vec<Option<i64>>,
}

impl Batch {
    fn clear(&mut self) {
        self.entries.clear();
        self.used_ops = 0;
        self.rare.clear();
        self.counters.clear();
    }
}

/// Says that a storage failure (disk full, I/O error) ended the import without harm.
fn abandoned(e: Error) -> Error {
    match e {
        Error::Storage(m) => Error::Storage(format!(
            "{m}; the import was abandoned and nothing of it was kept (the other traces are untouched)"
        )),
        other => other,
    }
}

/// Marks a stage that stopped only because another stage failed; the other's error wins.
fn pipeline_stopped() -> Error {
    Error::PipelineStopped
}

fn is_pipeline_stopped(e: &Error) -> bool {
    matches!(e, Error::PipelineStopped)
}

/// The [`EventSink`] a source writes into during an import. It batches what it receives and
/// hands it to the importing thread, so that parsing and importing run on two cores.
pub struct ImportSink {
    batch: Batch,
    full: SyncSender<Batch>,
    empty: Receiver<Batch>,
}

impl ImportSink {
    fn push(&mut self, entry: Entry) -> Result<()> {
        self.batch.entries.push(entry);
        if self.batch.entries.len() >= BATCH_ITEMS {
            self.send()?;
        }
        Ok(())
    }

    fn push_rare(&mut self, item: Rare) -> Result<()> {
        self.batch.rare.push(item);
        self.push(Entry::Rare(self.batch.rare.len() - 1))
    }

    fn send(&mut self) -> Result<()> {
        let next = match self.empty.try_recv() {
            Ok(mut b) => {
                b.clear();
                b
            }
            Err(_) => Batch::default(),
        };
        let full = std::mem::replace(&mut self.batch, next);
        self.full.send(full).map_err(|_| pipeline_stopped())
    }
}

impl EventSink for ImportSink {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        self.push_rare(Rare::Header(Box::new(header.clone())))
    }

    fn string(&mut self, id: StrId, text: &str) -> Result<()> {
        self.push_rare(Rare::String(id, text.to_string()))
    }

    fn operation(&mut self, op: &Operation) -> Result<()> {
        let b = &mut self.batch;
        if b.used_ops < b.ops.len() {
            b.ops[b.used_ops].clone_from(op);
        } else {
            b.ops.push(op.clone());
        }
        b.used_ops += 1;
        let slot = b.used_ops - 1;
        self.push(Entry::Operation(slot))
    }

    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        self.push(Entry::Routine(*event))
    }

    fn anomaly(&mut self, anomaly: &Anomaly) -> Result<()> {
        self.push_rare(Rare::Anomaly(anomaly.clone()))
    }

    fn anomaly_at(&mut self, anomaly: &Anomaly, at: &[OpPosition]) -> Result<()> {
        self.push_rare(Rare::AnomalyAt(anomaly.clone(), at.to_vec()))
    }

    fn locations(&mut self, locations: &[crate::model::Location]) -> Result<()> {
        self.push_rare(Rare::Locations(locations.to_vec()))
    }

    fn metrics(&mut self, metrics: &[crate::model::Metric]) -> Result<()> {
        self.push_rare(Rare::Metrics(metrics.to_vec()))
    }

    fn counters(&mut self, values: &[Option<i64>]) -> Result<()> {
        let start = self.batch.counters.len();
        self.batch.counters.extend_from_slice(values);
        self.push(Entry::Counters(start, values.len()))
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Applies batches to the importer until the parsing side hangs up.
fn import_batches(
    mut importer: Importer,
    batches: Receiver<Batch>,
    recycle: SyncSender<Batch>,
) -> Result<TraceMeta> {
    for batch in batches {
        for &entry in &batch.entries {
            match entry {
                Entry::Operation(slot) => importer.operation(&batch.ops[slot])?,
                Entry::Routine(ev) => importer.routine(&ev)?,
                Entry::Rare(at) => match &batch.rare[at] {
                    Rare::Header(h) => importer.header(h)?,
                    Rare::String(id, text) => importer.string(*id, text)?,
                    Rare::Anomaly(a) => importer.anomaly(a)?,
                    Rare::AnomalyAt(a, at) => importer.anomaly_at(a, at)?,
                    Rare::Locations(l) => importer.locations(l)?,
                    Rare::Metrics(m) => importer.metrics(m)?,
                },
                Entry::Counters(start, len) => {
                    importer.counters(&batch.counters[start..start + len])?
                }
            }
        }
        // The parser may have gone already; then the batch is simply dropped.
        let _ = recycle.try_send(batch);
    }
    importer.finish_import()
}

/// Records in the chunk directory where the writer packed each operation chunk.
fn place_op_chunks(mut meta: TraceMeta, placed: Vec<pack::Placement>) -> Result<TraceMeta> {
    let chunks = &mut meta.op_chunks;
    for (chunk, pack, offset, len) in placed {
        let info = chunks
            .binary_search_by_key(&chunk, |c| c.chunk)
            .ok()
            .and_then(|i| chunks.get_mut(i))
            .ok_or_else(|| {
                Error::Storage(format!("operation chunk {chunk} was stored but not listed"))
            })?;
        (info.pack, info.offset, info.len) = (pack, offset, len);
    }
    Ok(meta)
}

/// Runs `parse`, which feeds an [`ImportSink`], and stores what it produced through `writer`:
/// parsing, importing (nesting, matching, chunking) and writing (encoding, indexing, sled) run
/// on three threads joined by bounded channels. Commits only if every stage succeeded, and
/// returns the committed metadata. The first real error wins over the stages it stopped.
pub fn run_import(
    writer: TraceWriter<'_>,
    source: &str,
    format: &str,
    policy: Policy,
    parse: impl FnOnce(&mut ValidatingSink<'_>) -> Result<()>,
) -> Result<TraceMeta> {
    let name = writer.name().to_string();
    let (job_tx, job_rx) = sync_channel::<Job>(JOBS_IN_FLIGHT);
    let (full_tx, full_rx) = sync_channel::<Batch>(BATCHES_IN_FLIGHT);
    let (empty_tx, empty_rx) = sync_channel::<Batch>(BATCHES_IN_FLIGHT + 2);
    let mut writer = writer;
    let meta = std::thread::scope(|s| {
        let writer_ref = &mut writer;
        let write_stage = s.spawn(move || write_jobs(writer_ref, job_rx));
        let importer = Importer::new(&name, source, format, job_tx);
        let import_stage = s.spawn(move || import_batches(importer, full_rx, empty_tx));
        let parsed = {
            let mut sink = ImportSink {
                batch: Batch::default(),
                full: full_tx,
                empty: empty_rx,
            };
            parse(&mut ValidatingSink::new(&mut sink, policy)).and_then(|_| sink.send())
            // The sink, and with it the channel, is dropped here: the importer drains and ends.
        };
        let imported = import_stage
            .join()
            .unwrap_or_else(|_| Err(Error::Storage("the import stage panicked".into())));
        let written = write_stage
            .join()
            .unwrap_or_else(|_| Err(Error::Storage("the chunk writer panicked".into())));
        match (parsed, imported, written) {
            (Ok(()), Ok(meta), Ok(placed)) => place_op_chunks(meta, placed),
            (p, i, w) => {
                let errors = [p.err(), i.err(), w.err()];
                let mut errors = errors.into_iter().flatten();
                let first = errors.next().expect("some stage failed");
                Err(if is_pipeline_stopped(&first) {
                    errors.find(|e| !is_pipeline_stopped(e)).unwrap_or(first)
                } else {
                    first
                })
            }
        }
    })
    .map_err(abandoned)?;
    writer.commit(&meta).map_err(abandoned)?;
    Ok(meta)
}
