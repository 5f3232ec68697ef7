//! The store: every file format of mtfdb lives here, behind [`Store`], [`TraceWriter`] and
//! [`TraceReader`], so that nothing above `store/` knows how bytes sit on disk. Values leave
//! the store only through the typed readers of [`columns`] ([`OperationColumns`],
//! [`MessageColumns`]) and the whole-row reads of [`TraceReader`]: column numbers and value
//! encodings are private to [`tables`].
//!
//! Layout of a database folder:
//!
//! | path | what |
//! |---|---|
//! | `MANIFEST` | the catalog: the ready traces with their segments' and stored files' sizes and checksums ([`manifest`], [`catalog`]) |
//! | `LOCK` | the write lock: one writer at a time ([`lock`]) |
//! | `segments/<id>.seg` | one immutable [`segment`] per trace: its metadata, every column chunk, index bitmap and anomaly chunk |
//! | `segments/import-<pid>-<n>.partial` | an import in progress (locked by it), or one that died (unlocked) |
//! | `stored/<id>-<generation>-<n>.bin` | one immutable file per view or stored analysis result ([`stored`]) |
//!
//! Blob keys inside a segment:
//!
//! | key | value |
//! |---|---|
//! | `M` | [`TraceMeta`]: declarations, strings, chunk directory, summary |
//! | `o` pack | operation pack: operation chunks (each one location's rows) back to back, placed by [`OpChunkInfo`] |
//! | `m` chunk, `l` chunk, `c` chunk, `r` chunk | messages, request links, collective instances, routine calls |
//! | `a` chunk | anomalies |
//! | `K`, `k` table chunk piece | counter definitions and values of calls, only in traces with hardware counters ([`counters`]) |
//! | `i` dim chunk | posting lists of one dimension in one operation pack or message chunk: per value, the roaring bitmap of the ids with it |
//!
//! Chunk numbers and values are big-endian so that keys sort numerically. Every file is
//! written completely and made durable before the manifest names it, and the manifest is
//! replaced atomically, so a reader that reads it once has a consistent snapshot and a
//! writer killed at any moment leaves the last committed state. An import writes only its
//! partial segment, then, holding the write lock, renames it `<id>.seg` and publishes a new
//! manifest; a drop publishes a manifest without the trace, then removes its files. What a
//! dead writer left (an unlocked partial segment, a file a committed change made obsolete)
//! is removed by the next writer; nothing that might be a trace is removed without a
//! catalog that says so ([`check`]). Damage is an [`Error::Corrupt`] naming the trace and
//! the file.

// No stored byte reaches a panic: `unwrap` and `expect` are denied here outside tests. The
// calls that remain are allowed where they stand, each with why it cannot fail:
// - codec.rs: creating the per-thread zstd contexts (fails only without memory, where
//   allocation aborts anyway), and the dictionary code of a value the dictionary was built from;
// - mod.rs: bincode encoding of plain metadata types, and serializing and compressing a bitmap
//   into a Vec (neither fails but for memory).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod catalog;
pub mod check;
mod codec;
pub mod columns;
pub mod counters;
pub mod ids;
mod legacy;
pub mod lock;
pub mod manifest;
pub mod scan;
pub mod segment;
pub mod stored;
pub mod tables;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roaring::RoaringTreemap;

pub use catalog::{
    Catalog, CatalogEntry, OpChunkInfo, PairTraffic, RankTraffic, StoredRef, TraceMeta,
    TraceSummary, FORMAT_VERSION,
};
use codec::{seal, unseal};
pub use columns::{
    ChunkColumns, MessageColumns, MessageField, Messages, OperationColumns, OperationField,
    OperationStream, Operations,
};
use segment::{blob_key, sync_dir, BlobKey, Segment, SegmentRef, SegmentWriter};
use stored::STORED_DIR;
use tables::Columns;

use crate::error::{Error, Result};
use crate::model::{
    Anomaly, CollectiveInstance, Message, Operation, Rank, RequestLink, RoutineCall,
};

/// The blob holding a trace's [`TraceMeta`] in its segment.
const KEY_META: u8 = b'M';
/// The folder of segment files inside the database folder.
pub(crate) const SEGMENTS_DIR: &str = "segments";
/// How long storing an analysis result waits for another writer before it answers without
/// storing (the result only saves computing it again).
const RESULT_WAIT: Duration = Duration::from_millis(200);

/// How many times one chunk was read ([`Store::decodes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeCount {
    /// The trace's name.
    pub trace: String,
    /// The chunk's table.
    pub table: Table,
    /// The chunk number.
    pub chunk: u32,
    /// Reads (each decoding what it read) since counting began.
    pub reads: u32,
}

/// Which table a chunk belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// Operations.
    Operations,
    /// Matched messages.
    Messages,
    /// Request links.
    Links,
    /// Collective instances.
    Collectives,
    /// Routine calls.
    Routines,
}

impl Table {
    fn prefix(self) -> u8 {
        match self {
            Table::Operations => b'o',
            Table::Messages => b'm',
            Table::Links => b'l',
            Table::Collectives => b'c',
            Table::Routines => b'r',
        }
    }

    /// Number of fixed columns of this table's chunks.
    pub fn columns(self) -> usize {
        match self {
            Table::Operations => tables::op_col::COUNT,
            Table::Messages => tables::msg_col::COUNT,
            Table::Links => tables::link_col::COUNT,
            Table::Collectives => tables::coll_col::COUNT,
            Table::Routines => tables::routine_col::COUNT,
        }
    }

    /// The table's name in messages (`operation`, `request-link`).
    pub fn name(self) -> &'static str {
        match self {
            Table::Operations => "operation",
            Table::Messages => "message",
            Table::Links => "request-link",
            Table::Collectives => "collective",
            Table::Routines => "routine-call",
        }
    }
}

/// A dimension the store keeps a bitmap index on. Operation indexes hold operation ids,
/// message indexes hold message ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum IndexDim {
    /// Operations by world rank.
    Process = 0,
    /// Operations by communicator id.
    Comm = 1,
    /// Operations by kind code ([`crate::model::OpKind::code`]).
    Kind = 2,
    /// Operations by peer world rank (destination, source or root).
    Peer = 3,
    /// Messages by sender.
    MessageSender = 4,
    /// Messages by receiver.
    MessageReceiver = 5,
    /// Messages by communicator.
    MessageComm = 6,
}

impl IndexDim {
    /// Whether the dimension indexes operations (its postings are stored per operation pack)
    /// rather than messages (per message chunk).
    pub fn of_operations(self) -> bool {
        matches!(
            self,
            IndexDim::Process | IndexDim::Comm | IndexDim::Kind | IndexDim::Peer
        )
    }
}

fn chunk_key(prefix: u8, chunk: u32) -> [u8; 5] {
    let mut k = [prefix, 0, 0, 0, 0];
    k[1..].copy_from_slice(&chunk.to_be_bytes());
    k
}

/// The key of the posting lists of `dim` in one chunk (an operation pack or a message chunk).
fn postings_key(dim: IndexDim, chunk: u32) -> BlobKey {
    let mut k = [b'i', dim as u8, 0, 0, 0, 0];
    k[2..].copy_from_slice(&chunk.to_be_bytes());
    blob_key(&k)
}

/// Compresses `raw` and seals it: the framing of index bitmaps and posting lists.
fn frame(raw: &[u8]) -> Vec<u8> {
    // Compressing in memory fails only when memory is exhausted.
    #[allow(clippy::expect_used)]
    let mut out = zstd::bulk::compress(raw, 1).expect("zstd compresses in memory");
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    seal(&mut out);
    out
}

/// The bytes [`frame`] sealed, checked and decompressed.
/// A chunk as error messages name it: `operations chunk 7 of trace "wrf"`.
struct ChunkName<'a> {
    table: Table,
    chunk: u32,
    trace: &'a str,
}

impl std::fmt::Display for ChunkName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} chunk {} of trace {:?}",
            self.table.name(),
            self.chunk,
            self.trace
        )
    }
}

/// A chunk's stored bytes: its own value, or a range of the operation pack that holds it
/// (shared with the pack cache, not copied).
enum ChunkBytes {
    Owned(Vec<u8>),
    InPack(Arc<Vec<u8>>, std::ops::Range<usize>),
}

impl ChunkBytes {
    /// The chunk's body, its own checksum removed unchecked: every blob the segment reads is
    /// checked against the CRC its directory holds for it ([`Segment::get`]), and the
    /// chunk's own CRC over the same bytes would check nothing more (checking it at every
    /// read of a small chunk in a pack was a fifth of the read, `perf`, 16,384 ranks).
    fn body<W: std::fmt::Display + ?Sized>(&self, what: &W) -> Result<&[u8]> {
        let bytes = match self {
            ChunkBytes::Owned(bytes) => bytes,
            ChunkBytes::InPack(pack, range) => &pack[range.clone()],
        };
        codec::strip_seal(bytes, what)
    }
}

fn unframe(bytes: &[u8], what: &str) -> Result<Vec<u8>> {
    decompress(unseal(bytes, what)?, what)
}

/// The bytes compressed in `body` (a sealed frame's body: [`unframe`]).
fn decompress(body: &[u8], what: &str) -> Result<Vec<u8>> {
    if body.len() < 4 {
        return Err(Error::Corrupt(format!("{what} is truncated")));
    }
    let (packed, len) = body.split_at(body.len() - 4);
    let raw_len = u32::from_le_bytes(
        len.try_into()
            .map_err(|_| Error::Corrupt(format!("{what} is truncated")))?,
    ) as usize;
    zstd::bulk::decompress(packed, raw_len)
        .map_err(|e| Error::Corrupt(format!("{what} does not decompress: {e}")))
}

/// Encodes the posting lists of one dimension in one chunk: for each value, the bitmap of the
/// ids that have it. One blob per chunk and dimension, however many values (ranks, peers) the
/// chunk holds: a blob per value would cost a directory entry and a frame per rank.
pub fn encode_postings(postings: &mut [(u32, RoaringTreemap)]) -> Vec<u8> {
    postings.sort_unstable_by_key(|(v, _)| *v);
    let mut raw = Vec::new();
    codec::put_varint(&mut raw, postings.len() as u64);
    let mut previous = 0u32;
    let mut bitmap = Vec::new();
    for (value, ids) in postings.iter_mut() {
        codec::put_varint(&mut raw, u64::from(*value - previous));
        previous = *value;
        bitmap.clear();
        put_bitmap(ids, &mut bitmap);
        codec::put_varint(&mut raw, bitmap.len() as u64);
        raw.extend_from_slice(&bitmap);
    }
    frame(&raw)
}

/// Appends `bitmap` to `out` as every stored bitmap is written: roaring's portable form, its
/// runs of consecutive ids kept as runs (format 7; a process's operations have consecutive
/// ids, so that a posting list or a phase's operations is a few runs).
pub(crate) fn put_bitmap(bitmap: &mut RoaringTreemap, out: &mut Vec<u8>) {
    bitmap.optimize();
    out.reserve(bitmap.serialized_size());
    // Writing to a Vec fails only when memory is exhausted.
    #[allow(clippy::expect_used)]
    bitmap
        .serialize_into(out)
        .expect("writing to a Vec cannot fail");
}

/// The bitmap of `value` in posting lists written by [`encode_postings`], if it has one.
fn decode_posting(bytes: &[u8], value: u32, what: &str) -> Result<Option<RoaringTreemap>> {
    let raw = unframe(bytes, what)?;
    let mut pos = 0;
    let count = codec::get_varint(&raw, &mut pos)?;
    let mut current = 0u64;
    for _ in 0..count {
        current += codec::get_varint(&raw, &mut pos)?;
        let len = codec::get_varint(&raw, &mut pos)? as usize;
        let end = pos
            .checked_add(len)
            .filter(|&e| e <= raw.len())
            .ok_or_else(|| Error::Corrupt(format!("{what}: a posting list runs past its end")))?;
        if current == u64::from(value) {
            return RoaringTreemap::deserialize_from(&raw[pos..end])
                .map(Some)
                .map_err(|e| Error::Corrupt(format!("{what} does not decode: {e}")));
        }
        if current > u64::from(value) {
            break;
        }
        pos = end;
    }
    Ok(None)
}

fn encode_meta<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // bincode fails only on types serde cannot describe; the metadata types are plain data.
    #[allow(clippy::expect_used)]
    let mut out = bincode::serde::encode_to_vec(value, bincode::config::standard())
        .expect("metadata always serializes");
    seal(&mut out);
    out
}

fn decode_meta<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T> {
    let body = unseal(bytes, what)?;
    bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map(|(v, _)| v)
        .map_err(|e| Error::Corrupt(format!("{what} does not decode: {e}")))
}

/// Compresses a serialized bitmap (a view's operations).
fn encode_bitmap(bitmap: &RoaringTreemap) -> Vec<u8> {
    let mut raw = Vec::new();
    put_bitmap(&mut bitmap.clone(), &mut raw);
    frame(&raw)
}

fn decode_bitmap(bytes: &[u8], what: &str) -> Result<RoaringTreemap> {
    let raw = unframe(bytes, what)?;
    RoaringTreemap::deserialize_from(&raw[..])
        .map_err(|e| Error::Corrupt(format!("{what} does not decode: {e}")))
}

/// The key of a view in a trace's stored files.
fn view_key(name: &str) -> String {
    format!("v:{name}")
}

/// The key of a stored analysis result in a trace's stored files.
fn result_key(key: &str) -> String {
    format!("r:{key}")
}

/// The longest name, in characters, a trace may be given (names are shown in tables).
pub const MAX_TRACE_NAME_CHARS: usize = 255;

/// The error for a path that holds no database, when none may be created there.
fn no_database(path: &Path, why: &str) -> Error {
    Error::unknown(
        crate::NameKind::Database,
        path.display().to_string(),
        format!(
            "no database at {} ({why}; `mtfdb --db {} import FILE` creates one)",
            path.display(),
            path.display()
        ),
    )
}

fn database_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Database {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn version_error(path: &Path, version: u32) -> Error {
    database_error(
        path,
        format!(
            "was written with storage format version {version}, but this mtfdb reads version {FORMAT_VERSION}; \
             re-import its traces with a matching mtfdb"
        ),
    )
}

/// What one change of the catalog did to files: those it created (removed again if the
/// change fails) and those it made obsolete (removed once it is committed).
#[derive(Default)]
struct Change {
    created: Vec<PathBuf>,
    obsolete: Vec<PathBuf>,
    /// False when there was nothing to change: no manifest is written.
    changed: bool,
}

/// What a [`Store`] and its [`TraceReader`]s share: where the files are, whether they may
/// be written, and how a change of the catalog is made.
struct Shared {
    path: PathBuf,
    segments_dir: PathBuf,
    stored_dir: PathBuf,
    /// False on read-only media or in a folder the user may not write: every statement
    /// that stores nothing still answers.
    writable: bool,
    /// How long a writer waits for another's write lock, in milliseconds.
    busy_timeout_ms: AtomicU64,
    /// Serializes this process's changes (the write lock serializes processes).
    changing: Mutex<()>,
    /// Set once this store's first change removed what dead writers left.
    cleaned: AtomicBool,
    /// While counting ([`Store::count_decodes`]): how many times each chunk was read and
    /// decoded, by trace name, table and chunk.
    decodes: Mutex<Option<DecodeCounts>>,
}

/// Chunk reads by trace name, table and chunk.
type DecodeCounts = HashMap<(String, Table, u32), u32>;

impl Shared {
    /// The catalog as last committed.
    fn catalog(&self) -> Result<Catalog> {
        manifest::read(&self.path)?.ok_or_else(|| missing_manifest(&self.path))
    }

    /// Fails unless the database may be written; `what` says what needed it.
    fn require_writable(&self, what: &str) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(database_error(
                &self.path,
                format!(
                    "is read-only (its folder cannot be written): {what} needs write access; \
                     statements that store nothing still answer"
                ),
            ))
        }
    }

    fn busy_timeout(&self) -> Duration {
        Duration::from_millis(self.busy_timeout_ms.load(Ordering::Relaxed))
    }

    /// Makes one change of the catalog as its one writer: takes the write lock (waiting up
    /// to `wait`), reads the committed catalog, lets `edit` change it (it is given the new
    /// generation, and records the files it creates and obsoletes), and publishes it with a
    /// new manifest. On any error nothing changes and the files `edit` created are removed;
    /// once committed, the obsolete files are removed.
    fn change<T>(
        &self,
        what: &str,
        wait: Duration,
        edit: impl FnOnce(&mut Catalog, u64, &mut Change) -> Result<T>,
    ) -> Result<T> {
        self.require_writable(what)?;
        let _in_process = self.changing.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = lock::acquire(&self.path, wait, what)?;
        let mut catalog = self.catalog()?;
        if !self.cleaned.swap(true, Ordering::Relaxed) {
            // The writer cleans up after writers that died (readers write nothing); what
            // cannot be removed now costs only room, and is tried again by the next writer.
            let _ = check::remove_leftovers(&self.path, &catalog);
        }
        let generation = catalog.generation + 1;
        let mut change = Change::default();
        let outcome = edit(&mut catalog, generation, &mut change).and_then(|value| {
            if change.changed {
                catalog.generation = generation;
                catalog.format_version = FORMAT_VERSION;
                if !change.created.is_empty() {
                    sync_dir(&self.stored_dir)?;
                }
                manifest::write(&self.path, &catalog)?;
            }
            Ok(value)
        });
        match outcome {
            Ok(value) => {
                remove_files(&change.obsolete);
                Ok(value)
            }
            Err(e) => {
                remove_files(&change.created);
                Err(e)
            }
        }
    }

    /// Opens every stored file of `entry`: its views and results as the catalog that named
    /// them had them, readable through these files whatever writers do after.
    fn open_stored(&self, entry: &CatalogEntry) -> Result<HashMap<String, Arc<File>>> {
        entry
            .stored
            .iter()
            .map(|(key, r)| {
                let path = self.stored_path(r);
                match File::open(&path) {
                    Ok(f) => Ok((key.clone(), Arc::new(f))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        Err(Error::Corrupt(format!(
                            "{} of trace {:?} ({}) is missing; `mtfdb check` lists what else is",
                            stored_key_words(key),
                            entry.name,
                            path.display()
                        )))
                    }
                    Err(e) => Err(Error::io(&path, e)),
                }
            })
            .collect()
    }

    fn stored_path(&self, r: &StoredRef) -> PathBuf {
        self.stored_dir.join(&r.file)
    }

    fn segment_path(&self, entry: &CatalogEntry) -> PathBuf {
        self.segments_dir.join(&entry.segment.file)
    }
}

/// Removes files a committed change made obsolete, or a failed one created. Best effort:
/// what stays is removed by the next writer that opens the database.
fn remove_files(files: &[PathBuf]) {
    let mut dirs: Vec<&Path> = Vec::new();
    for f in files {
        if std::fs::remove_file(f).is_ok() {
            if let Some(d) = f.parent().filter(|d| !dirs.contains(d)) {
                dirs.push(d);
            }
        }
    }
    for d in dirs {
        let _ = sync_dir(d);
    }
}

fn missing_manifest(path: &Path) -> Error {
    Error::Corrupt(format!(
        "the manifest {} is missing; the traces' own files are intact if `mtfdb --db {} check` \
         says so, and `mtfdb --db {} check --repair` rebuilds the manifest from them",
        path.join(manifest::MANIFEST).display(),
        path.display(),
        path.display()
    ))
}

/// Whether the folder `path` can be written (false on read-only media, or for a user
/// without the permission).
fn folder_writable(path: &Path) -> bool {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}

/// A database: a folder holding many traces (see the module documentation for its layout).
pub struct Store {
    shared: Arc<Shared>,
    /// Names of the imports in progress in this process, so that two cannot take the same
    /// name (across processes, the commit's check under the write lock decides).
    importing: Mutex<HashSet<String>>,
    /// Counts this process's imports, for their partial files' names.
    imports_begun: AtomicU64,
    /// Traces whose segment failed the check at open, with why.
    damaged: Mutex<Vec<(u64, String)>>,
}

impl Store {
    /// Opens (or creates) the database at `path`: checks its format version and that every
    /// segment the catalog names has its size and checksum; removes what dead writers left
    /// behind.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, true)
    }

    /// Opens the database at `path`; when `create` is false, a path that holds no database is
    /// an error and nothing is created. Either way, a folder that holds other files is never
    /// made a database, and missing parent folders are not created. A database in a folder
    /// that cannot be written opens read-only: everything that stores nothing answers.
    pub fn open_with(path: impl AsRef<Path>, create: bool) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        if path.is_file() {
            return Err(database_error(
                &path,
                "is a file, not an mtfdb database (a database is a directory)",
            ));
        }
        let mut catalog = if path.exists() {
            manifest::read(&path)?
        } else {
            None
        };
        if catalog.is_none() {
            if path.join("db").exists() || path.join("conf").exists() {
                return Err(legacy::layout_error(&path));
            }
            if [SEGMENTS_DIR, STORED_DIR, legacy::CATALOG_DIR]
                .iter()
                .any(|d| path.join(d).exists())
            {
                return Err(missing_manifest(&path));
            }
            if path.exists() {
                let empty = std::fs::read_dir(&path).map_or(true, |mut d| d.next().is_none());
                if !empty {
                    return Err(database_error(
                        &path,
                        "is a folder that holds other files, not an mtfdb database (give a new \
                         path, or an existing database)",
                    ));
                }
                if !create {
                    return Err(no_database(&path, "the directory is empty"));
                }
            } else {
                if !create {
                    return Err(no_database(&path, "no such directory"));
                }
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
                if let Some(parent) = parent.filter(|p| !p.is_dir()) {
                    return Err(database_error(
                        &path,
                        format!(
                            "cannot be created: the folder {} does not exist",
                            parent.display()
                        ),
                    ));
                }
                std::fs::create_dir(&path).map_err(|e| Error::io(&path, e))?;
            }
            let fresh = Catalog::new();
            manifest::write(&path, &fresh)?;
            catalog = Some(fresh);
        }
        let Some(mut catalog) = catalog else {
            return Err(missing_manifest(&path));
        };
        let writable = folder_writable(&path);
        if catalog.format_version != FORMAT_VERSION {
            if !catalog::UPGRADABLE_OLDER_VERSIONS.contains(&catalog.format_version) {
                return Err(version_error(&path, catalog.format_version));
            }
            if !writable {
                return Err(database_error(
                    &path,
                    format!(
                        "is of storage format version {}, which this mtfdb upgrades to {FORMAT_VERSION} \
                         when it first opens it with write access; its folder cannot be written",
                        catalog.format_version
                    ),
                ));
            }
            catalog = legacy::upgrade(&path, catalog)?;
        }
        let segments_dir = path.join(SEGMENTS_DIR);
        let stored_dir = path.join(STORED_DIR);
        if writable {
            for dir in [&segments_dir, &stored_dir] {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            }
        }
        let store = Store {
            shared: Arc::new(Shared {
                path,
                segments_dir,
                stored_dir,
                writable,
                busy_timeout_ms: AtomicU64::new(lock::DEFAULT_BUSY_TIMEOUT.as_millis() as u64),
                changing: Mutex::new(()),
                cleaned: AtomicBool::new(false),
                decodes: Mutex::new(None),
            }),
            importing: Mutex::new(HashSet::new()),
            imports_begun: AtomicU64::new(0),
            damaged: Mutex::new(Vec::new()),
        };
        let damaged = store.check_segments(&catalog)?;
        *store.damaged.lock().unwrap_or_else(|p| p.into_inner()) = damaged;
        Ok(store)
    }

    /// The traces of `catalog` whose segment fails the cheap check (size and trailer), with
    /// why; a segment missing because another process dropped its trace meanwhile is not.
    fn check_segments(&self, catalog: &Catalog) -> Result<Vec<(u64, String)>> {
        let mut damaged = Vec::new();
        let mut current: Option<Catalog> = None;
        for e in &catalog.traces {
            let Err(err) = segment::check(&self.shared.segment_path(e), &e.segment, &e.name) else {
                continue;
            };
            if current.is_none() {
                current = Some(self.shared.catalog()?);
            }
            if current
                .as_ref()
                .is_some_and(|c| c.trace_by_id(e.id) != Some(e))
            {
                continue;
            }
            damaged.push(match err {
                Error::Corrupt(m) => (e.id, m),
                other => (e.id, other.to_string()),
            });
        }
        Ok(damaged)
    }

    /// Starts counting chunk reads anew, in every trace this store's readers read (every
    /// read of a chunk decodes it): for tests and benchmarks that hold a statement to
    /// decoding each chunk at most once.
    pub fn count_decodes(&self) {
        *self
            .shared
            .decodes
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(HashMap::new());
    }

    /// How many times each chunk was read since [`Store::count_decodes`]: (trace, table,
    /// chunk, reads), sorted (empty when not counting).
    pub fn decodes(&self) -> Vec<DecodeCount> {
        let counts = self
            .shared
            .decodes
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<DecodeCount> = counts
            .iter()
            .flatten()
            .map(|((trace, table, chunk), &reads)| DecodeCount {
                trace: trace.clone(),
                table: *table,
                chunk: *chunk,
                reads,
            })
            .collect();
        out.sort_unstable_by(|a, b| {
            (&a.trace, a.table as u8, a.chunk).cmp(&(&b.trace, b.table as u8, b.chunk))
        });
        out
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// False when the database's folder cannot be written: it answers every statement that
    /// stores nothing, and refuses the others saying why.
    pub fn writable(&self) -> bool {
        self.shared.writable
    }

    /// How long a write waits for another process's write to finish before it gives up
    /// (saying who writes): 10 s unless set.
    pub fn set_busy_timeout(&self, timeout: Duration) {
        self.shared
            .busy_timeout_ms
            .store(timeout.as_millis() as u64, Ordering::Relaxed);
    }

    /// The catalog as last committed.
    pub fn catalog(&self) -> Result<Catalog> {
        self.shared.catalog()
    }

    /// The traces the database holds, by name. Fails, naming them, if any trace's segment
    /// failed its check when the database opened: a listing never silently shows fewer.
    pub fn ready_traces(&self) -> Result<Vec<CatalogEntry>> {
        let catalog = self.catalog()?;
        let damaged = self.damaged.lock().unwrap_or_else(|p| p.into_inner());
        let why: Vec<&str> = damaged
            .iter()
            .filter(|(id, _)| catalog.trace_by_id(*id).is_some())
            .map(|(_, m)| m.as_str())
            .collect();
        if !why.is_empty() {
            return Err(Error::Corrupt(format!(
                "{} (drop the damaged trace, or restore its file)",
                why.join("; ")
            )));
        }
        drop(damaged);
        let mut v = catalog.traces;
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(v)
    }

    fn entry_in(catalog: &Catalog, name: &str) -> Result<CatalogEntry> {
        catalog
            .trace(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchTrace {
                name: name.to_string(),
                available: catalog.names(),
            })
    }

    /// Opens a ready trace for reading: checks its segment's size, trailer, header and
    /// directory, and reads its metadata. The open segment stays readable whatever other
    /// processes do meanwhile (a drop removes the file, not the open file).
    pub fn reader(&self, name: &str) -> Result<TraceReader> {
        // A writer may drop or replace the trace between reading the catalog and opening
        // its files: then the catalog is read again (a few times; a writer that changes
        // the same trace faster than this is not waited for).
        let mut tries = 0;
        let (entry, segment, stored) = loop {
            let entry = Self::entry_in(&self.catalog()?, name)?;
            let opened = Segment::open(self.shared.segment_path(&entry), &entry.segment, name)
                .and_then(|segment| {
                    let stored = self.shared.open_stored(&entry)?;
                    Ok((segment, stored))
                });
            match opened {
                Ok((segment, stored)) => break (entry, segment, stored),
                Err(e) => {
                    tries += 1;
                    let now = self.catalog()?;
                    if tries < 5 && now.trace_by_id(entry.id) != Some(&entry) {
                        continue;
                    }
                    return Err(e);
                }
            }
        };
        let meta_bytes = segment.get(&blob_key(&[KEY_META]))?.ok_or_else(|| {
            Error::Corrupt(format!("trace {name:?}: its segment has no metadata"))
        })?;
        let meta: TraceMeta = decode_meta(&meta_bytes, &format!("the metadata of trace {name:?}"))?;
        Ok(TraceReader {
            segment,
            meta,
            cancel: None,
            packs: Mutex::new(Vec::new()),
            id: entry.id,
            snapshot: Mutex::new(Snapshot { entry, stored }),
            shared: self.shared.clone(),
        })
    }

    /// Starts importing a trace called `name`: it writes only its partial segment file,
    /// invisible until [`TraceWriter::commit`].
    pub fn begin_import(&self, name: &str) -> Result<TraceWriter<'_>> {
        self.shared.require_writable("importing a trace")?;
        if name.is_empty() {
            return Err(Error::Usage("a trace name cannot be empty".into()));
        }
        let chars = name.chars().count();
        if chars > MAX_TRACE_NAME_CHARS {
            return Err(Error::limit(
                crate::Limit::NameLength,
                format!(
                    "a trace name has at most {MAX_TRACE_NAME_CHARS} characters, this one {chars}"
                ),
            ));
        }
        if self.catalog()?.trace(name).is_some()
            || !self
                .importing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name.to_string())
        {
            return Err(Error::TraceExists(name.to_string()));
        }
        let claim = ImportClaim {
            store: self,
            name: name.to_string(),
        };
        let segment = loop {
            let n = self.imports_begun.fetch_add(1, Ordering::Relaxed);
            let file = format!("import-{}-{n}.{PARTIAL}", std::process::id());
            match SegmentWriter::create(self.shared.segments_dir.join(file)) {
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                other => break other?,
            }
        };
        Ok(TraceWriter {
            claim,
            segment,
            spill: None,
        })
    }

    /// Removes a trace: the catalog forgets it (with its views and stored results) in one
    /// commit, then its files are deleted and the space is back (at once for this process;
    /// for a reader in another process that has the trace open, when it closes it).
    pub fn drop_trace(&self, name: &str) -> Result<()> {
        let shared = &self.shared;
        let dropped = shared.change(
            &format!("drop trace {name:?}"),
            shared.busy_timeout(),
            |catalog, _, change| {
                let entry = Self::entry_in(catalog, name)?;
                catalog.traces.retain(|e| e.id != entry.id);
                change.obsolete.push(shared.segment_path(&entry));
                change
                    .obsolete
                    .extend(entry.stored.values().map(|r| shared.stored_path(r)));
                change.changed = true;
                Ok(entry.id)
            },
        )?;
        self.damaged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(id, _)| *id != dropped);
        Ok(())
    }

    /// Bytes the database occupies on disk: the segments, the stored files and the manifest.
    pub fn size_on_disk(&self) -> Result<u64> {
        let mut total = 0;
        for dir in [&self.shared.segments_dir, &self.shared.stored_dir] {
            let files = match std::fs::read_dir(dir) {
                Ok(files) => files,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(dir, e)),
            };
            for file in files {
                let file = file.map_err(|e| Error::io(dir, e))?;
                // A file another process removed meanwhile takes no room.
                total += file.metadata().map_or(0, |m| m.len());
            }
        }
        let manifest = self.shared.path.join(manifest::MANIFEST);
        total += std::fs::metadata(&manifest)
            .map_err(|e| Error::io(&manifest, e))?
            .len();
        Ok(total)
    }
}

/// The extension of an import's segment file until its commit names it `<id>.seg`.
pub(crate) const PARTIAL: &str = "partial";

/// An import's hold on its trace name; lets go when the import commits or fails.
struct ImportClaim<'a> {
    store: &'a Store,
    name: String,
}

impl Drop for ImportClaim<'_> {
    fn drop(&mut self) {
        self.store
            .importing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.name);
    }
}

/// Writes one trace's segment during an import. Dropped without [`TraceWriter::commit`], it
/// deletes the file; if the process dies instead, the next writer does.
pub struct TraceWriter<'a> {
    claim: ImportClaim<'a>,
    segment: SegmentWriter,
    /// Rows the import parked on disk (see [`TraceWriter::spill_file`]).
    spill: Option<segment::SpillFile>,
}

impl TraceWriter<'_> {
    /// The name the trace will have.
    pub fn name(&self) -> &str {
        &self.claim.name
    }

    /// Stores chunk `chunk` of `table`.
    pub fn put_chunk(&mut self, table: Table, chunk: u32, columns: &Columns) -> Result<()> {
        self.put_encoded_chunk(table, chunk, columns.encode())
    }

    /// Stores a piece of the counter values of chunk `chunk` of `table` (operations or
    /// routine calls); `piece` orders a chunk's pieces (see [`counters`]).
    pub fn put_counters(
        &mut self,
        table: Table,
        chunk: u32,
        piece: u32,
        rows: &counters::CounterRows,
    ) -> Result<()> {
        let mut k = [
            counters::KEY_COUNTERS,
            table.prefix(),
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        k[2..6].copy_from_slice(&chunk.to_be_bytes());
        k[6..].copy_from_slice(&piece.to_be_bytes());
        self.segment.put(k, &rows.encode())
    }

    /// Stores the trace's counter definitions (only for a trace that recorded counters).
    pub fn put_metrics(&mut self, metrics: &[crate::model::Metric]) -> Result<()> {
        self.segment.put(
            blob_key(&[counters::KEY_METRICS]),
            &counters::encode_metrics(metrics),
        )
    }

    /// Stores an already encoded chunk (see [`Columns::encode`]).
    pub fn put_encoded_chunk(&mut self, table: Table, chunk: u32, bytes: Vec<u8>) -> Result<()> {
        self.segment
            .put(blob_key(&chunk_key(table.prefix(), chunk)), &bytes)
    }

    /// Stores the posting lists of `dim` for one chunk (an operation pack or a message
    /// chunk): per value, the ids that have it.
    pub fn put_postings(
        &mut self,
        dim: IndexDim,
        chunk: u32,
        postings: &mut [(u32, RoaringTreemap)],
    ) -> Result<()> {
        self.put_encoded_postings(dim, chunk, encode_postings(postings))
    }

    /// Stores posting lists already encoded with [`encode_postings`].
    pub fn put_encoded_postings(
        &mut self,
        dim: IndexDim,
        chunk: u32,
        bytes: Vec<u8>,
    ) -> Result<()> {
        self.segment.put(postings_key(dim, chunk), &bytes)
    }

    /// Stores operation pack `pack`: encoded operation chunks back to back, each placed by
    /// its [`OpChunkInfo`]'s `pack`, `offset` and `len` in these bytes; `compress` compresses
    /// the pack whole (for chunks encoded without compression of their own).
    pub fn put_op_pack(&mut self, pack: u32, bytes: &[u8], compress: bool) -> Result<()> {
        // The layout byte, then the pack framed, or as it is and sealed in place (an
        // uncompressed pack is megabytes, copied once here).
        let mut blob = vec![u8::from(compress)];
        if compress {
            blob.extend_from_slice(&frame(bytes));
        } else {
            blob.reserve_exact(bytes.len() + 4);
            blob.extend_from_slice(bytes);
            codec::seal_from(&mut blob, 1);
        }
        self.segment.put(
            blob_key(&chunk_key(Table::Operations.prefix(), pack)),
            &blob,
        )
    }

    /// The import's scratch file, if anything was parked in it.
    pub fn spill(&self) -> Option<&segment::SpillFile> {
        self.spill.as_ref()
    }

    /// The import's scratch file, created on first use beside the segment.
    pub fn spill_file(&mut self) -> Result<&mut segment::SpillFile> {
        if self.spill.is_none() {
            let path = self.segment.path().with_extension("spill");
            self.spill = Some(segment::SpillFile::create(path)?);
        }
        self.spill
            .as_mut()
            .ok_or_else(|| Error::Storage("the import's scratch file could not be opened".into()))
    }

    /// Stores a chunk of anomalies.
    pub fn put_anomalies(&mut self, chunk: u32, anomalies: &[Anomaly]) -> Result<()> {
        self.segment
            .put(blob_key(&chunk_key(b'a', chunk)), &encode_meta(&anomalies))
    }

    /// Makes the trace visible: writes its metadata and the segment's directory, makes the
    /// segment durable, then, as the database's one writer, names it `<id>.seg` and
    /// publishes it in a new manifest: one atomic step, after which every reader sees it.
    pub fn commit(mut self, meta: &TraceMeta) -> Result<u64> {
        self.segment
            .put(blob_key(&[KEY_META]), &encode_meta(meta))?;
        let written = self.segment.finish()?;
        let store = self.claim.store;
        let shared = &store.shared;
        let name = self.claim.name.clone();
        let partial = self.segment.path().to_path_buf();
        let segment = &mut self.segment;
        shared
            .change(
                &format!("commit the import of {name:?}"),
                shared.busy_timeout(),
                |catalog, _, change| {
                    if catalog.trace(&name).is_some() {
                        return Err(Error::TraceExists(name.clone()));
                    }
                    // The writer alone makes `.seg` files: one that exists with a new id is a
                    // trace a damaged catalog lost (`mtfdb check --repair` adds it): skipped.
                    let mut id = catalog
                        .traces
                        .iter()
                        .map(|e| e.id + 1)
                        .fold(catalog.next_id, u64::max);
                    while shared.segments_dir.join(format!("{id}.seg")).exists() {
                        id += 1;
                    }
                    let file = format!("{id}.seg");
                    let path = shared.segments_dir.join(&file);
                    std::fs::rename(&partial, &path).map_err(|e| Error::io(&path, e))?;
                    segment.moved_to(path.clone());
                    // Renamed back if the commit fails after this (a full disk for the manifest):
                    // then the writer's drop removes it as an abandoned import's.
                    change.created.push(path);
                    sync_dir(&shared.segments_dir)?;
                    catalog.traces.push(CatalogEntry {
                        id,
                        name: name.clone(),
                        segment: SegmentRef {
                            file,
                            ..written.clone()
                        },
                        stored: Default::default(),
                    });
                    catalog.next_id = id + 1;
                    change.changed = true;
                    Ok(id)
                },
            )
            .inspect(|_| self.segment.keep())
    }
}

/// An analysis result that can be stored with a trace ([`TraceReader::put_result`]). Its
/// schema version is stored with it: a result stored under another version (by an older or
/// newer build, with other fields) reads as absent and is recomputed, never misread.
pub trait StoredResult: serde::Serialize + serde::de::DeserializeOwned {
    /// Bump whenever the type's serialized shape or meaning changes.
    const SCHEMA_VERSION: u32;
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ResultRecord {
    schema: u32,
    // Written as one run of bytes, not a sequence of numbers: read back at memcpy speed.
    #[serde(with = "serde_bytes")]
    value: Vec<u8>,
}

/// A named selection kept with its trace: the ids it selected and what it was.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredView {
    /// True when the ids are message ids, false for operation ids.
    pub messages: bool,
    /// The statement that defined it, as canonical query text.
    pub definition: String,
    /// The selected ids.
    pub ids: RoaringTreemap,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ViewRecord {
    messages: bool,
    definition: String,
    // Written as one run of bytes, not a sequence of numbers: read back at memcpy speed.
    #[serde(with = "serde_bytes")]
    bitmap: Vec<u8>,
}

impl From<&StoredView> for ViewRecord {
    fn from(v: &StoredView) -> ViewRecord {
        ViewRecord {
            messages: v.messages,
            definition: v.definition.clone(),
            bitmap: encode_bitmap(&v.ids),
        }
    }
}

impl ViewRecord {
    fn into_view(self, what: &str) -> Result<StoredView> {
        Ok(StoredView {
            messages: self.messages,
            definition: self.definition,
            ids: decode_bitmap(&self.bitmap, what)?,
        })
    }
}

/// Decompressed operation packs a trace keeps for its readers (a pack holds at most 65,536
/// rows: under a MiB compressed as imports make them, about 10 MiB at the very most).
const PACK_CACHE_BYTES: usize = 64 << 20;

/// Reads one ready trace: its segment, and its views and stored results.
pub struct TraceReader {
    segment: Segment,
    meta: TraceMeta,
    /// Set (by Ctrl-C) to stop whatever reads this trace: every chunk read checks it.
    cancel: Option<Arc<AtomicBool>>,
    /// The operation packs read last, most recent last, at most [`PACK_CACHE_BYTES`] of
    /// them: chunk ids follow the order locations began, packs the order their chunks were
    /// finished, so a scan in chunk order moves back and forth among many packs.
    packs: Mutex<Vec<(u32, Arc<Vec<u8>>)>>,
    id: u64,
    /// The trace as the catalog had it when the reader opened it, and its stored files,
    /// open: a statement reads one committed state (see [`TraceReader::is_current`]).
    snapshot: Mutex<Snapshot>,
    shared: Arc<Shared>,
}

/// What a [`TraceReader`] reads its views and stored results from.
struct Snapshot {
    entry: CatalogEntry,
    stored: HashMap<String, Arc<File>>,
}

/// A stored file's key in words: `view "busy"`, `stored result "patterns…"`.
pub(crate) fn stored_key_words(key: &str) -> String {
    match key.split_once(':') {
        Some(("v", name)) => format!("view {name:?}"),
        Some(("r", name)) => format!("stored result {name:?}"),
        _ => format!("stored value {key:?}"),
    }
}

impl TraceReader {
    /// True while the trace is as this reader opened it: the catalog names the same name,
    /// segment and views. A session opens the trace again when it is not, so that
    /// every statement reads the state committed when it began.
    pub fn is_current(&self) -> Result<bool> {
        let catalog = self.shared.catalog()?;
        let snapshot = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        // Stored results are read as committed now (see `stored_value`): only the rows
        // and the views make a snapshot.
        let views = |e: &CatalogEntry| -> Vec<(String, StoredRef)> {
            e.stored
                .iter()
                .filter(|(k, _)| k.starts_with(&view_key("")))
                .map(|(k, r)| (k.clone(), r.clone()))
                .collect()
        };
        Ok(catalog.trace_by_id(self.id).is_some_and(|now| {
            now.name == snapshot.entry.name
                && now.segment == snapshot.entry.segment
                && views(now) == views(&snapshot.entry)
        }))
    }

    /// Makes every later chunk read fail with [`Error::Cancelled`] while `flag` is set.
    pub fn set_cancel(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// [`Error::Cancelled`] when the cancellation flag is set.
    pub fn check_cancel(&self) -> Result<()> {
        match &self.cancel {
            Some(f) if f.load(Ordering::Relaxed) => Err(Error::Cancelled),
            _ => Ok(()),
        }
    }

    /// The trace's metadata.
    pub fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// Reads chunk `chunk` of `table`, verifying its checksum.
    pub fn chunk(&self, table: Table, chunk: u32) -> Result<Columns> {
        let (what, bytes) = self.chunk_bytes(table, chunk)?;
        Columns::decode(bytes.body(&what)?, table.columns(), &what)
    }

    /// A chunk's stored bytes, and its name for error messages (written out only when one
    /// is made: reading a trace of many ranks reads thousands of small chunks).
    fn chunk_bytes(&self, table: Table, chunk: u32) -> Result<(ChunkName<'_>, ChunkBytes)> {
        self.check_cancel()?;
        if let Some(counts) = self
            .shared
            .decodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            let key = (self.meta.name.clone(), table, chunk);
            *counts.entry(key).or_default() += 1;
        }
        let what = ChunkName {
            table,
            chunk,
            trace: &self.meta.name,
        };
        let bytes = if table == Table::Operations {
            self.op_chunk_bytes(chunk, &what)?
        } else {
            ChunkBytes::Owned(
                self.segment
                    .get(&blob_key(&chunk_key(table.prefix(), chunk)))?
                    .ok_or_else(|| Error::Corrupt(format!("{what} is missing")))?,
            )
        };
        Ok((what, bytes))
    }

    /// The directory entry of operation chunk `chunk`.
    fn op_chunk_info(&self, chunk: u32) -> Option<&OpChunkInfo> {
        let chunks = &self.meta.op_chunks;
        // Chunks are numbered densely from 0 as imports write them: the entry is at its number
        // (a search of thousands of entries per chunk read, otherwise).
        if let Some(info) = chunks.get(chunk as usize).filter(|c| c.chunk == chunk) {
            return Some(info);
        }
        chunks
            .binary_search_by_key(&chunk, |c| c.chunk)
            .ok()
            .and_then(|i| chunks.get(i))
    }

    /// Operation chunk `chunk`'s bytes, where they lie in its pack.
    fn op_chunk_bytes(&self, chunk: u32, what: &ChunkName) -> Result<ChunkBytes> {
        let info = self
            .op_chunk_info(chunk)
            .ok_or_else(|| Error::Corrupt(format!("{what} is missing")))?;
        let pack = self.op_pack(info.pack)?;
        let start = info.offset as usize;
        start
            .checked_add(info.len as usize)
            .filter(|&end| pack.get(start..end).is_some())
            .map(|end| ChunkBytes::InPack(pack.clone(), start..end))
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "{what} lies outside operation pack {} of trace {:?}",
                    info.pack, self.meta.name
                ))
            })
    }

    /// Operation pack `pack`, from the few read last or from the segment.
    fn op_pack(&self, pack: u32) -> Result<Arc<Vec<u8>>> {
        let mut cache = self.packs.lock().unwrap_or_else(|p| p.into_inner());
        // Chunks are mostly read in order, many from the pack read last.
        if let Some((_, bytes)) = cache.last().filter(|(p, _)| *p == pack) {
            return Ok(bytes.clone());
        }
        if let Some(pos) = cache.iter().position(|(p, _)| *p == pack) {
            let hit = cache.remove(pos);
            let bytes = hit.1.clone();
            cache.push(hit);
            return Ok(bytes);
        }
        let what = format!("operation pack {pack} of trace {:?}", self.meta.name);
        let blob = self
            .segment
            .get(&blob_key(&chunk_key(Table::Operations.prefix(), pack)))?
            .ok_or_else(|| Error::Corrupt(format!("{what} is missing")))?;
        // Checked by the segment as it read it (see `ChunkBytes::body`).
        let bytes = match blob.split_first() {
            Some((1, framed)) => decompress(codec::strip_seal(framed, &what)?, &what)?,
            Some((0, sealed)) => codec::strip_seal(sealed, &what)?.to_vec(),
            _ => return Err(Error::Corrupt(format!("{what} has an unknown layout"))),
        };
        let bytes = Arc::new(bytes);
        cache.push((pack, bytes.clone()));
        // The least recent go first; the pack just read always stays.
        let mut held: usize = cache.iter().map(|(_, b)| b.len()).sum();
        while held > PACK_CACHE_BYTES && cache.len() > 1 {
            held -= cache.remove(0).1.len();
        }
        Ok(bytes)
    }

    /// The chunks that hold the index postings of `dim` for the given table chunks: operation
    /// chunks map to their packs, message chunks are their own.
    fn posting_chunks(&self, dim: IndexDim, chunks: &[u32]) -> Vec<u32> {
        let mut out: Vec<u32> = if dim.of_operations() {
            chunks
                .iter()
                .filter_map(|&c| self.op_chunk_info(c).map(|i| i.pack))
                .collect()
        } else {
            chunks.to_vec()
        };
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The ids with `value` on `dim` (the union of its per-chunk bitmaps).
    pub fn index(&self, dim: IndexDim, value: u32) -> Result<RoaringTreemap> {
        let mut out = RoaringTreemap::new();
        let prefix = [b'i', dim as u8];
        for blob in self.segment.scan_prefix(&prefix) {
            self.check_cancel()?;
            let (key, bytes) = blob?;
            let chunk = key
                .get(6..10)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map_or(u32::MAX, u32::from_be_bytes);
            let what = format!("index {dim:?} chunk {chunk} of trace {:?}", self.meta.name);
            if let Some(ids) = decode_posting(&bytes, value, &what)? {
                out |= ids;
            }
        }
        Ok(out)
    }

    /// The value stored under `key` for this trace, if any: a view as the reader's snapshot
    /// has it; a stored analysis result as the catalog has it now (a result is computed
    /// from the trace's rows, which never change, so the latest one stored is the
    /// snapshot's too, and one dropped for recomputing is gone for every reader).
    fn stored_value(&self, key: &str, what: &str) -> Result<Option<Vec<u8>>> {
        if key.starts_with(&result_key("")) {
            return self.latest_stored_value(key, what);
        }
        let held = {
            let snapshot = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
            match (snapshot.entry.stored.get(key), snapshot.stored.get(key)) {
                (Some(r), Some(f)) => Some((r.clone(), f.clone())),
                _ => None,
            }
        };
        let Some((r, file)) = held else {
            return Ok(None);
        };
        let path = self.shared.stored_path(&r);
        stored::read_open(&file, &path, &r, what)?
            .value_of(self.id, key, what, &path)
            .map(Some)
    }

    /// The value stored under `key` for this trace in the catalog as committed now.
    fn latest_stored_value(&self, key: &str, what: &str) -> Result<Option<Vec<u8>>> {
        // A writer may replace the file between reading the catalog and reading the file:
        // then the catalog is read again.
        for _ in 0..5 {
            let catalog = self.shared.catalog()?;
            let Some(r) = catalog.trace_by_id(self.id).and_then(|e| e.stored.get(key)) else {
                return Ok(None);
            };
            if let Some(file) = stored::read(&self.shared.stored_dir, r, what)? {
                let path = self.shared.stored_path(r);
                return file.value_of(self.id, key, what, &path).map(Some);
            }
            let now = self.shared.catalog()?;
            if now.trace_by_id(self.id).and_then(|e| e.stored.get(key)) == Some(r) {
                return Err(Error::Corrupt(format!(
                    "{what} ({}) is missing; `mtfdb check` lists what else is",
                    self.shared.stored_path(r).display()
                )));
            }
        }
        Err(Error::Storage(format!(
            "{what} kept changing while it was read; try again"
        )))
    }

    fn dropped(&self) -> Error {
        Error::Storage(format!(
            "trace {:?} was dropped by another process while it was open",
            self.meta.name
        ))
    }

    /// Writes (or with `None` removes) the values of `keys` for this trace, in one commit;
    /// returns how many of them there were before. `wait` is how long to wait for another
    /// writer.
    fn put_stored(
        &self,
        what: &str,
        wait: Duration,
        entries: Vec<(String, Option<Vec<u8>>)>,
    ) -> Result<usize> {
        let shared = &self.shared;
        let keys: Vec<String> = entries.iter().map(|(k, _)| k.clone()).collect();
        let mut committed: Option<CatalogEntry> = None;
        let before = shared.change(what, wait, |catalog, generation, change| {
            let Some(entry) = catalog.traces.iter_mut().find(|e| e.id == self.id) else {
                return Err(self.dropped());
            };
            let mut before = 0;
            for (n, (key, value)) in entries.into_iter().enumerate() {
                let old = match value {
                    Some(value) => {
                        let r = stored::write(
                            &shared.stored_dir,
                            (self.id, generation, n),
                            &key,
                            &value,
                        )?;
                        change.created.push(shared.stored_path(&r));
                        change.changed = true;
                        entry.stored.insert(key, r)
                    }
                    None => entry.stored.remove(&key),
                };
                if let Some(old) = old {
                    before += 1;
                    change.obsolete.push(shared.stored_path(&old));
                    change.changed = true;
                }
            }
            committed = Some(entry.clone());
            Ok(before)
        })?;
        // The reader's own writes join its snapshot: the statements after see them.
        if let Some(now) = committed {
            let mut snapshot = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
            for key in keys {
                match now.stored.get(&key) {
                    Some(r) => {
                        let path = shared.stored_path(r);
                        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
                        snapshot.entry.stored.insert(key.clone(), r.clone());
                        snapshot.stored.insert(key, Arc::new(file));
                    }
                    None => {
                        snapshot.entry.stored.remove(&key);
                        snapshot.stored.remove(&key);
                    }
                }
            }
        }
        Ok(before)
    }

    /// Stores (or replaces) the view `name`: a selection's ids and the statement that made it.
    pub fn put_view(&self, name: &str, view: &StoredView) -> Result<()> {
        let bytes = encode_meta(&ViewRecord::from(view));
        self.put_stored(
            &format!("storing view {name:?}"),
            self.shared.busy_timeout(),
            vec![(view_key(name), Some(bytes))],
        )
        .map(|_| ())
    }

    /// The view `name`, if there is one.
    pub fn view(&self, name: &str) -> Result<Option<StoredView>> {
        let what = format!("view {name:?} of trace {:?}", self.meta.name);
        match self.stored_value(&view_key(name), &what)? {
            Some(bytes) => Ok(Some(
                decode_meta::<ViewRecord>(&bytes, &what)?.into_view(&what)?,
            )),
            None => Ok(None),
        }
    }

    /// Removes the view `name`; false if there was none.
    pub fn drop_view(&self, name: &str) -> Result<bool> {
        self.put_stored(
            &format!("dropping view {name:?}"),
            self.shared.busy_timeout(),
            vec![(view_key(name), None)],
        )
        .map(|n| n > 0)
    }

    /// The keys this trace has stored that start with `prefix`, in order, in the reader's
    /// snapshot.
    fn stored_keys(&self, prefix: &str) -> Result<Vec<String>> {
        let snapshot = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        Ok(snapshot
            .entry
            .stored
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect())
    }

    /// Every view of the trace, by name.
    pub fn views(&self) -> Result<Vec<(String, StoredView)>> {
        let mut out = Vec::new();
        for key in self.stored_keys(&view_key(""))? {
            let name = key[view_key("").len()..].to_string();
            if let Some(view) = self.view(&name)? {
                out.push((name, view));
            }
        }
        Ok(out)
    }

    /// Stores (or replaces) an analysis result (patterns, phases) under `key`: a small table
    /// serialized with its parameters and its schema version, sealed with a checksum. A
    /// stored result only saves computing it again: on a read-only database, or while
    /// another process writes the database, it is not stored and nothing fails.
    pub fn put_result<T: StoredResult>(&self, key: &str, value: &T) -> Result<()> {
        self.put_result_as(key, T::SCHEMA_VERSION, value)
    }

    /// [`TraceReader::put_result`] under an explicit schema version.
    fn put_result_as<T: serde::Serialize>(&self, key: &str, schema: u32, value: &T) -> Result<()> {
        if !self.shared.writable {
            return Ok(());
        }
        let value = bincode::serde::encode_to_vec(value, bincode::config::standard())
            .map_err(|e| Error::Storage(format!("result {key:?} does not serialize: {e}")))?;
        let bytes = encode_meta(&ResultRecord { schema, value });
        match self.put_stored(
            &format!("storing result {key:?}"),
            RESULT_WAIT.min(self.shared.busy_timeout()),
            vec![(result_key(key), Some(bytes))],
        ) {
            Err(Error::Database { message, .. }) if message.starts_with("is being written") => {
                Ok(())
            }
            other => other.map(|_| ()),
        }
    }

    /// The analysis result stored under `key`, if any stored under `T`'s schema version.
    pub fn result<T: StoredResult>(&self, key: &str) -> Result<Option<T>> {
        let what = format!("stored result {key:?} of trace {:?}", self.meta.name);
        let Some(bytes) = self.stored_value(&result_key(key), &what)? else {
            return Ok(None);
        };
        let record: ResultRecord = decode_meta(&bytes, &what)?;
        if record.schema != T::SCHEMA_VERSION {
            return Ok(None);
        }
        bincode::serde::decode_from_slice(&record.value, bincode::config::standard())
            .map(|(v, _)| Some(v))
            .map_err(|e| Error::Corrupt(format!("{what} does not decode: {e}")))
    }

    /// Removes every stored analysis result whose key starts with `prefix`; returns how many.
    pub fn drop_results(&self, prefix: &str) -> Result<usize> {
        let keys = self.stored_keys(&result_key(prefix))?;
        if keys.is_empty() {
            return Ok(0);
        }
        self.put_stored(
            &format!("dropping stored results {prefix:?}"),
            self.shared.busy_timeout(),
            keys.into_iter().map(|k| (k, None)).collect(),
        )
    }
    /// Only the columns of chunk `chunk` of `table` in `wanted`, and of each only rows
    /// `0..take` (see [`tables::decode_column_prefixes`]).
    fn chunk_column_prefixes(
        &self,
        table: Table,
        chunk: u32,
        wanted: &[usize],
        take: usize,
    ) -> Result<Columns> {
        let (what, bytes) = self.chunk_bytes(table, chunk)?;
        tables::decode_column_prefixes(bytes.body(&what)?, table.columns(), wanted, take, &what)
    }

    /// The given fields of operation chunk `chunk`, decoded once for reading row by row: a
    /// scan that needs two fields decodes two columns.
    pub fn operation_columns(
        &self,
        chunk: u32,
        fields: &[OperationField],
    ) -> Result<OperationColumns> {
        let wanted = columns::columns_of(fields, OperationField::columns);
        let columns = self.chunk_column_prefixes(Table::Operations, chunk, &wanted, usize::MAX)?;
        Ok(OperationColumns::new(chunk, columns))
    }

    /// The start times of operation chunk `chunk`'s rows, into `out` (its former contents
    /// replaced): one buffer for a reader of many small chunks' starts.
    pub fn operation_starts_into(
        &self,
        chunk: u32,
        out: &mut Vec<crate::model::Time>,
    ) -> Result<()> {
        let (what, bytes) = self.chunk_bytes(Table::Operations, chunk)?;
        let ncols = Table::Operations.columns();
        tables::decode_column_into(bytes.body(&what)?, ncols, tables::op_col::START, out, &what)
    }

    /// The given fields of operation chunk `chunk`, to be read a window of rows at a time
    /// ([`OperationStream::next_window`]): for readers that keep many chunks open at once.
    pub fn operation_stream(
        &self,
        chunk: u32,
        fields: &[OperationField],
    ) -> Result<OperationStream> {
        let wanted = columns::columns_of(fields, OperationField::columns);
        let (what, bytes) = self.chunk_bytes(Table::Operations, chunk)?;
        let ncols = Table::Operations.columns();
        let body = bytes.body(&what)?;
        let stream =
            tables::ChunkStream::open(body, ncols, &wanted, tables::op_col::COMPLETES, &what)?;
        Ok(OperationStream::new(chunk, stream))
    }

    /// The given fields of message chunk `chunk`, decoded once for reading row by row.
    pub fn message_columns(&self, chunk: u32, fields: &[MessageField]) -> Result<MessageColumns> {
        self.message_column_prefixes(chunk, fields, usize::MAX)
    }

    /// [`TraceReader::message_columns`] decoding only the first `rows` rows (the reader's row
    /// count is still the chunk's): for reading a few messages near a chunk's start.
    pub fn message_column_prefixes(
        &self,
        chunk: u32,
        fields: &[MessageField],
        rows: usize,
    ) -> Result<MessageColumns> {
        let wanted = columns::columns_of(fields, MessageField::columns);
        let columns = self.chunk_column_prefixes(Table::Messages, chunk, &wanted, rows)?;
        Ok(MessageColumns::new(chunk, columns))
    }

    /// Every operation of operation chunk `chunk`, whose location is (`rank`, `thread`).
    pub fn operations(&self, chunk: u32, rank: Rank, thread: u32) -> Result<Vec<Operation>> {
        let columns = self.chunk(Table::Operations, chunk)?;
        OperationColumns::new(chunk, columns).operations(rank, thread)
    }

    /// Every message of message chunk `chunk`, in matching order.
    pub fn messages(&self, chunk: u32) -> Result<Vec<Message>> {
        let read = MessageColumns::new(chunk, self.chunk(Table::Messages, chunk)?);
        Ok((0..read.rows()).map(|row| read.message(row)).collect())
    }

    /// Every request link of request-link chunk `chunk`.
    pub fn request_links(&self, chunk: u32) -> Result<Vec<RequestLink>> {
        Ok(tables::read_links(&self.chunk(Table::Links, chunk)?))
    }

    /// Every collective instance of collective chunk `chunk`.
    pub fn collective_instances(&self, chunk: u32) -> Result<Vec<CollectiveInstance>> {
        tables::read_collectives(&self.chunk(Table::Collectives, chunk)?)
    }

    /// Every routine call of routine-call chunk `chunk`, in the order they ended.
    pub fn routine_calls(&self, chunk: u32) -> Result<Vec<RoutineCall>> {
        Ok(tables::read_routines(&self.chunk(Table::Routines, chunk)?))
    }

    /// The ids with `value` on `dim` within the given chunks only (point reads, for queries
    /// that already know which chunks they can touch).
    pub fn index_in_chunks(
        &self,
        dim: IndexDim,
        value: u32,
        chunks: &[u32],
    ) -> Result<RoaringTreemap> {
        let mut out = RoaringTreemap::new();
        for chunk in self.posting_chunks(dim, chunks) {
            if let Some(bytes) = self.segment.get(&postings_key(dim, chunk))? {
                let what = format!("index {dim:?} chunk {chunk} of trace {:?}", self.meta.name);
                if let Some(ids) = decode_posting(&bytes, value, &what)? {
                    out |= ids;
                }
            }
        }
        if dim.of_operations() {
            // A pack holds other chunks too: keep only the ids of the chunks asked for.
            let mut wanted = RoaringTreemap::new();
            for &chunk in chunks {
                wanted.insert_range(ids::chunk_id_space(chunk));
            }
            out &= wanted;
        }
        Ok(out)
    }

    /// Every anomaly recorded at import.
    pub fn anomalies(&self) -> Result<Vec<Anomaly>> {
        let mut out = Vec::new();
        for chunk in 0..self.meta.anomaly_chunks {
            out.extend(self.anomaly_chunk(chunk)?);
        }
        Ok(out)
    }

    /// The anomalies of one anomaly chunk, in the order they were recorded.
    pub fn anomaly_chunk(&self, chunk: u32) -> Result<Vec<Anomaly>> {
        let what = format!("anomaly chunk {chunk} of trace {:?}", self.meta.name);
        let bytes = self
            .segment
            .get(&blob_key(&chunk_key(b'a', chunk)))?
            .ok_or_else(|| Error::Corrupt(format!("{what} is missing")))?;
        decode_meta::<Vec<Anomaly>>(&bytes, &what)
    }

    /// The counters the trace recorded (hardware counters), in the order of their values;
    /// empty for a trace without counters.
    pub fn metrics(&self) -> Result<Vec<crate::model::Metric>> {
        let what = format!("counter definitions of trace {:?}", self.meta.name);
        match self.segment.get(&blob_key(&[counters::KEY_METRICS]))? {
            Some(bytes) => counters::decode_metrics(&bytes, &what),
            None => Ok(Vec::new()),
        }
    }

    /// The counter values of the rows of chunk `chunk` of `table` (operations, by operation
    /// id; routine calls, by position) in a trace with `metrics` counters.
    pub fn counters(
        &self,
        table: Table,
        chunk: u32,
        metrics: usize,
    ) -> Result<counters::ChunkCounters> {
        counters::ChunkCounters::decode(&self.counter_pieces(table, chunk)?, metrics)
    }

    /// The counter values of the rows of chunk `chunk` of `table` (see
    /// [`TraceReader::counters`]), to be read forward a window at a time.
    pub fn counter_stream(
        &self,
        table: Table,
        chunk: u32,
        metrics: usize,
    ) -> Result<counters::CounterStream> {
        counters::CounterStream::open(&self.counter_pieces(table, chunk)?, metrics)
    }

    /// The checked bodies of the counter pieces of chunk `chunk` of `table`, in row order, each
    /// with what names it in errors.
    fn counter_pieces(&self, table: Table, chunk: u32) -> Result<Vec<(Vec<u8>, String)>> {
        self.check_cancel()?;
        let mut prefix = [counters::KEY_COUNTERS, table.prefix(), 0, 0, 0, 0];
        prefix[2..].copy_from_slice(&chunk.to_be_bytes());
        let mut pieces = Vec::new();
        for piece in self.segment.scan_prefix(&prefix) {
            let (_, bytes) = piece?;
            let what = format!(
                "counters of {} chunk {chunk} of trace {:?}",
                table.name(),
                self.meta.name
            );
            let body = unseal(&bytes, &what)?.to_vec();
            pieces.push((body, what));
        }
        Ok(pieces)
    }

    /// Bytes this trace occupies: its segment file.
    pub fn stored_bytes(&self) -> Result<u64> {
        self.segment.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Results stored before their byte fields were written as bytes decode unchanged: the
    /// two encodings are the same bytes.
    #[test]
    fn byte_fields_encode_as_they_did_as_sequences() {
        #[derive(serde::Serialize)]
        struct AsSequence {
            schema: u32,
            value: Vec<u8>,
        }
        let value: Vec<u8> = (0..=255u8).chain([7, 0, 255]).collect();
        let config = bincode::config::standard();
        let now = bincode::serde::encode_to_vec(
            ResultRecord {
                schema: 3,
                value: value.clone(),
            },
            config,
        )
        .unwrap();
        let before =
            bincode::serde::encode_to_vec(AsSequence { schema: 3, value }, config).unwrap();
        assert_eq!(now, before);
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Counts {
        calls: u64,
    }

    impl StoredResult for Counts {
        const SCHEMA_VERSION: u32 = 2;
    }

    #[test]
    fn a_result_of_another_schema_version_reads_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db")).unwrap();
        let writer = store.begin_import("t").unwrap();
        writer
            .commit(&TraceMeta {
                name: "t".into(),
                ..TraceMeta::default()
            })
            .unwrap();
        let reader = store.reader("t").unwrap();
        reader.put_result_as("k", 1, &Counts { calls: 7 }).unwrap();
        assert_eq!(reader.result::<Counts>("k").unwrap(), None);
        reader.put_result("k", &Counts { calls: 9 }).unwrap();
        assert_eq!(
            reader.result::<Counts>("k").unwrap(),
            Some(Counts { calls: 9 })
        );
    }
}
