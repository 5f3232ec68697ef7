//! The catalog: which traces a database holds and in what state, and each trace's metadata
//! (declarations, string table, chunk directory, summary counts).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::segment::SegmentRef;
use crate::model::{OpKind, Rank, Time, TraceHeader};

/// The on-disk format version this build reads and writes. Bump it whenever a stored layout
/// changes; a database of another version is refused on open with a clear message.
/// Version 4: the bulk of every trace in segment files, a manifest beside sled.
/// Version 5: operation chunks packed, index bitmaps stored as one posting list per chunk.
/// Version 7: bitmaps (posting lists, stored patterns and phases) may hold runs of
/// consecutive ids as roaring run containers, which builds reading version 6 cannot decode.
/// Version 8: no sled; the manifest is the catalog, and views and stored results are files
/// it names (`stored/`).
pub const FORMAT_VERSION: u32 = 8;

/// Older versions this build upgrades when it opens them with write access: their segments
/// are read as they are; their sled catalog's views and stored results are moved into files
/// and the catalog folder removed (so that a build of the older version then refuses the
/// database instead of misreading it). Version 6 differs from 7 only in never holding runs.
pub(crate) const UPGRADABLE_OLDER_VERSIONS: &[u32] = &[6, 7];

/// One ready trace in the catalog (imports in progress are not in it: only their partial
/// segment file exists, removed by the next writer if the import died).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// The trace's id: names its segment file and its stored files.
    pub id: u64,
    /// The name users refer to it by.
    pub name: String,
    /// Its segment file, with the size and checksum it was written with.
    pub segment: SegmentRef,
    /// Its views (keys `v:<name>`) and stored analysis results (`r:<key>`), each a file of
    /// `stored/`.
    #[serde(default)]
    pub stored: BTreeMap<String, StoredRef>,
}

/// A file of `stored/` as the catalog records it: a view or a stored analysis result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRef {
    /// The file's name inside `<db>/stored/`: `<trace id>-<generation>.bin`.
    pub file: String,
    /// Its size in bytes.
    pub size: u64,
    /// The CRC-32 sealed at its end.
    pub checksum: u32,
}

/// What a database holds: the list of traces with their views and stored results, published
/// whole by the manifest ([`super::manifest`]), so that every change is one atomic step and
/// every reader sees one committed state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// The storage format version.
    pub format_version: u32,
    /// Counts the committed changes: each writes generation + 1. A stored file is named
    /// with the generation that published it, so that the next writer can tell a file that
    /// a committed change replaced (at most this generation) from one newer than the catalog.
    #[serde(default)]
    pub generation: u64,
    /// Every ready trace.
    pub traces: Vec<CatalogEntry>,
    /// The next trace id to hand out: every segment file with a smaller id that the catalog
    /// does not name belongs to a dropped trace.
    #[serde(default)]
    pub next_id: u64,
}

impl Catalog {
    /// An empty catalog of this build's format.
    pub fn new() -> Catalog {
        Catalog {
            format_version: FORMAT_VERSION,
            ..Catalog::default()
        }
    }

    /// The trace called `name`.
    pub fn trace(&self, name: &str) -> Option<&CatalogEntry> {
        self.traces.iter().find(|e| e.name == name)
    }

    /// The trace with id `id`.
    pub fn trace_by_id(&self, id: u64) -> Option<&CatalogEntry> {
        self.traces.iter().find(|e| e.id == id)
    }

    /// The trace names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.traces.iter().map(|e| e.name.clone()).collect();
        names.sort();
        names
    }
}

/// One chunk of operations: rows `first_row..first_row + rows` of one location
/// (rank, thread), in time order. Chunks are stored packed: bytes `offset..offset + len` of
/// the stored operation pack `pack` hold this chunk (a pack holds whole chunks of one or many
/// locations, up to [`super::ids::CHUNK_ROWS`] rows in all, so that a trace of many small
/// locations does not pay a stored blob and its indexes per location).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpChunkInfo {
    /// Chunk number: the high 16 bits of its operations' ids.
    pub chunk: u32,
    /// The process.
    pub rank: Rank,
    /// The thread within the process.
    pub thread: u32,
    /// Index of the chunk's first row among its location's operations.
    pub first_row: u64,
    /// Number of rows.
    pub rows: u32,
    /// Start time of the first row.
    pub first_start: Time,
    /// Start time of the last row.
    pub last_start: Time,
    /// Latest end time of any row.
    pub max_end: Time,
    /// The stored pack that holds the chunk.
    pub pack: u32,
    /// Where the chunk's encoded bytes start in its pack.
    pub offset: u32,
    /// Their length.
    pub len: u32,
}

impl OpChunkInfo {
    /// The ids of the chunk's operations, in row (and so time) order.
    pub fn ids(&self) -> std::ops::Range<u64> {
        super::ids::chunk_ids(self.chunk, self.rows as usize)
    }
}

/// Counts a user wants to see first; computed during import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// Operations stored.
    pub operations: u64,
    /// Operations by kind, in kind order.
    pub by_kind: Vec<(OpKind, u64)>,
    /// Matched point-to-point messages.
    pub messages: u64,
    /// Their total payload in bytes.
    pub message_bytes: u64,
    /// Collective instances (complete and partial).
    pub collective_instances: u64,
    /// Non-blocking operations linked to the Wait/Test that completed them.
    pub request_links: u64,
    /// Routine calls (enter/leave pairs).
    pub routine_calls: u64,
    /// Anomalies by kind (send never received, …).
    pub anomalies: Vec<(String, u64)>,
    /// Earliest start time, if any event.
    pub first_time: Option<Time>,
    /// Latest end time, if any event.
    pub last_time: Option<Time>,
}

impl TraceSummary {
    /// The number of anomalies of a kind ([`crate::model::Anomaly::kind_name`]).
    pub fn anomaly_count(&self, kind: &str) -> u64 {
        self.anomalies
            .iter()
            .find(|(k, _)| k == kind)
            .map_or(0, |(_, n)| *n)
    }

    /// The number of operations of a kind.
    pub fn kind_count(&self, kind: OpKind) -> u64 {
        self.by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }
}

/// What one process sent and received, computed at import (fan-in and fan-out without a scan).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankTraffic {
    /// Bytes of the messages it sent.
    pub p2p_sent_bytes: u64,
    /// Bytes of the messages it received.
    pub p2p_recv_bytes: u64,
    /// Send sizes of its collective calls.
    pub coll_send_bytes: u64,
    /// Receive sizes of its collective calls.
    pub coll_recv_bytes: u64,
    /// Messages it sent.
    pub messages_sent: u64,
    /// Messages it received.
    pub messages_received: u64,
}

impl RankTraffic {
    /// Bytes sent (fan-out, as the MTF paper defines it): messages plus collective send sizes,
    /// in 128 bits (each part may be up to 2^64 - 1).
    pub fn fan_out(&self) -> u128 {
        u128::from(self.p2p_sent_bytes) + u128::from(self.coll_send_bytes)
    }

    /// Bytes received (fan-in): messages plus collective receive sizes, in 128 bits.
    pub fn fan_in(&self) -> u128 {
        u128::from(self.p2p_recv_bytes) + u128::from(self.coll_recv_bytes)
    }
}

/// Messages and bytes from one process to another, computed at import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairTraffic {
    /// Sender.
    pub sender: Rank,
    /// Receiver.
    pub receiver: Rank,
    /// Messages.
    pub messages: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Everything about a trace except its rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceMeta {
    /// The name users refer to it by.
    pub name: String,
    /// The file it was imported from.
    pub source: String,
    /// The source's format (`mtf`, …).
    pub format: String,
    /// Declarations: scenario, processors, processes, communicators.
    pub header: TraceHeader,
    /// The string table (datatype, routine and other MPI call names), by id.
    pub strings: Vec<String>,
    /// The operation chunks, in chunk-number order.
    pub op_chunks: Vec<OpChunkInfo>,
    /// Number of message chunks (message `i` is in chunk `i >> 16`).
    pub message_chunks: u32,
    /// Per message chunk: the earliest send time and the latest receive time of its messages,
    /// so that a time window skips the chunks it cannot touch.
    pub message_chunk_times: Vec<(Time, Time)>,
    /// Per process (by rank): message and collective bytes and message counts.
    pub traffic: Vec<RankTraffic>,
    /// Messages and bytes per communicating pair, sorted by sender then receiver.
    pub pairs: Vec<PairTraffic>,
    /// Number of request-link chunks.
    pub link_chunks: u32,
    /// Number of collective-instance chunks.
    pub collective_chunks: u32,
    /// Number of routine-call chunks.
    pub routine_chunks: u32,
    /// Number of anomaly chunks.
    pub anomaly_chunks: u32,
    /// The counts.
    pub summary: TraceSummary,
}
