//! The store: every sled call and every file format of mtfdb lives here, behind [`Store`],
//! [`TraceWriter`] and [`TraceReader`], so that nothing above `store/` knows how bytes sit
//! on disk. Values leave the store only through the typed readers of [`columns`]
//! ([`OperationColumns`], [`MessageColumns`]) and the whole-row reads of [`TraceReader`]:
//! column numbers and value encodings are private to [`tables`].
//!
//! Layout of a database folder:
//!
//! | path | what |
//! |---|---|
//! | `MANIFEST` | the ready traces with their segments' sizes and checksums ([`manifest`]) |
//! | `catalog/` | sled: `format_version`, `catalog` (the ready traces), and the tree `per_trace` of views and stored analysis results |
//! | `segments/<id>.seg` | one immutable [`segment`] per trace: its metadata, every column chunk, index bitmap and anomaly chunk |
//!
//! Blob keys inside a segment:
//!
//! | key | value |
//! |---|---|
//! | `M` | [`TraceMeta`]: declarations, strings, chunk directory, summary |
//! | `o` pack | operation pack: operation chunks (each one location's rows) back to back, placed by [`OpChunkInfo`] |
//! | `m` chunk, `l` chunk, `c` chunk, `r` chunk | messages, request links, collective instances, routine calls |
//! | `a` chunk | anomalies |
//! | `i` dim chunk | posting lists of one dimension in one operation pack or message chunk: per value, the roaring bitmap of the ids with it |
//!
//! Chunk numbers and values are big-endian so that keys sort numerically. An import writes
//! only its segment file (sled is not touched until it is complete and durable), then adds
//! its catalog entry in one atomic sled write, then rewrites the manifest. A segment no
//! catalog entry names (an import that died) is removed on the next open; dropping a trace
//! deletes its segment. Damage is an [`Error::Corrupt`] naming the trace and the file; a
//! panic inside sled is caught here and reported as a damaged database.

// No stored byte reaches a panic: `unwrap` and `expect` are denied here outside tests. The
// calls that remain are allowed where they stand, each with why it cannot fail:
// - codec.rs: creating the per-thread zstd contexts (fails only without memory, where
//   allocation aborts anyway), and the dictionary code of a value the dictionary was built from;
// - mod.rs: bincode encoding of plain metadata types, and serializing and compressing a bitmap
//   into a Vec (neither fails but for memory).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod catalog;
mod codec;
pub mod columns;
pub mod ids;
pub mod manifest;
pub mod segment;
pub mod tables;

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roaring::RoaringTreemap;

pub use catalog::{
    Catalog, CatalogEntry, OpChunkInfo, PairTraffic, RankTraffic, TraceMeta, TraceSummary,
    FORMAT_VERSION,
};
use codec::{seal, unseal};
pub use columns::{
    ChunkColumns, MessageColumns, MessageField, Messages, OperationColumns, OperationField,
    OperationStream, Operations,
};
use manifest::Manifest;
use segment::{blob_key, BlobKey, Segment, SegmentWriter};
use tables::Columns;

use crate::error::{Error, Result};
use crate::model::{
    Anomaly, CollectiveInstance, Message, Operation, Rank, RequestLink, RoutineCall,
};

/// sled's page cache: sled now holds only the catalog, views and stored results.
const CACHE_BYTES: u64 = 16 * 1024 * 1024;
const KEY_VERSION: &[u8] = b"format_version";
const KEY_CATALOG: &[u8] = b"catalog";
/// The blob holding a trace's [`TraceMeta`] in its segment.
const KEY_META: u8 = b'M';
/// The sled folder inside the database folder.
const CATALOG_DIR: &str = "catalog";
/// The folder of segment files inside the database folder.
const SEGMENTS_DIR: &str = "segments";
/// sled's tree of views and stored results, keyed by trace id.
const PER_TRACE_TREE: &str = "per_trace";

/// Which table a chunk belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

    fn name(self) -> &'static str {
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

/// Runs a sled call, turning a panic inside sled (it panics on some damaged files) into an
/// error that names the database's catalog as damaged. The last line of defence: checksums
/// and the manifest catch damage first.
fn guarded<T>(
    catalog_dir: &Path,
    call: impl FnOnce() -> std::result::Result<T, sled::Error>,
) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e @ sled::Error::Corruption { .. })) => Err(Error::Corrupt(format!(
            "the catalog {} is damaged: {e}",
            catalog_dir.display()
        ))),
        Ok(Err(e)) => Err(match Error::from(e) {
            Error::Storage(m) => {
                Error::Storage(format!("the catalog {}: {m}", catalog_dir.display()))
            }
            other => other,
        }),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("no message");
            Err(Error::Corrupt(format!(
                "the catalog {} is damaged: sled failed reading it ({why})",
                catalog_dir.display()
            )))
        }
    }
}

/// Opens sled without its background flusher: every write mtfdb makes to sled is followed by
/// its own `flush`, and the flusher's fsync every 200 ms, on ext4, committed the journal and
/// with it forced out the segment an import was writing meanwhile (`strace` of a 64-rank OTF2
/// import: 15 such fsyncs, 0.2 ms to 0.29 s each on this machine's disk, 1.19 s in all in one
/// run, while the import read and wrote).
fn open_sled(path: &Path) -> std::result::Result<sled::Db, sled::Error> {
    sled::Config::new()
        .path(path)
        .cache_capacity(CACHE_BYTES)
        .flush_every_ms(None)
        .open()
}

fn is_lock_error(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Io(io)
        if io.kind() == std::io::ErrorKind::WouldBlock || io.to_string().contains("could not acquire lock"))
}

/// Opens sled; if the directory is locked, waits up to a second for the lock: a handle closed
/// a moment ago in this process (by another thread) lets go of it only when that handle is
/// dropped.
fn open_sled_waiting(path: &Path) -> Result<std::result::Result<sled::Db, sled::Error>> {
    let mut tries = 0;
    loop {
        match guarded(path, || Ok(open_sled(path)))? {
            Err(e) if is_lock_error(&e) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return Ok(other),
        }
    }
}

/// The key of a trace's view or stored result in the `per_trace` tree: its id, a kind byte
/// (`v` views, `r` results) and the name.
fn per_trace_key(id: u64, kind: u8, name: &str) -> Vec<u8> {
    let mut k = id.to_be_bytes().to_vec();
    k.push(kind);
    k.extend_from_slice(name.as_bytes());
    k
}

const VIEW: u8 = b'v';
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
const RESULT: u8 = b'r';

/// A database: a folder holding many traces (see the module documentation for its layout).
pub struct Store {
    db: sled::Db,
    per_trace: sled::Tree,
    path: PathBuf,
    catalog_dir: PathBuf,
    segments_dir: PathBuf,
    /// Serializes catalog changes (and the manifest written with them).
    catalog_lock: Mutex<()>,
    /// The next trace id to hand out (imports in progress are not in the catalog).
    next_id: Mutex<u64>,
    /// Names of the imports in progress, so that two cannot take the same name.
    importing: Mutex<HashSet<String>>,
    /// Traces whose segment failed the check at open, with why.
    damaged: Mutex<Vec<(u64, String)>>,
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

/// Explains a folder laid out as mtfdb before format 4 (everything in sled, at the top).
fn legacy_layout_error(path: &Path) -> Error {
    let legacy = match open_sled_waiting(path) {
        Ok(Ok(db)) => guarded(path, || db.get(KEY_VERSION)).ok().flatten(),
        _ => None,
    };
    match legacy.and_then(|v| <[u8; 4]>::try_from(v.as_ref()).ok()) {
        Some(v) => version_error(path, u32::from_le_bytes(v)),
        None => database_error(
            path,
            "is a sled database but not an mtfdb one (no format version)",
        ),
    }
}

/// Whether this build reads a database of format `version`: its own, or an older one it
/// relabels on opening.
fn readable_version(version: u32) -> bool {
    version == FORMAT_VERSION || catalog::READABLE_OLDER_VERSIONS.contains(&version)
}

fn read_version(db: &sled::Db, catalog_dir: &Path, path: &Path) -> Result<Option<u32>> {
    match guarded(catalog_dir, || db.get(KEY_VERSION))? {
        Some(v) => <[u8; 4]>::try_from(v.as_ref())
            .map(|b| Some(u32::from_le_bytes(b)))
            .map_err(|_| database_error(path, "has a damaged format version")),
        None => Ok(None),
    }
}

fn names(entries: &[CatalogEntry]) -> String {
    entries
        .iter()
        .map(|e| format!("{:?}", e.name))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Store {
    /// Opens (or creates) the database at `path`: checks its format version, that sled's
    /// catalog holds every trace the manifest names, and that every segment the catalog names
    /// has its size and checksum; removes what interrupted imports left behind.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, true)
    }

    /// Opens the database at `path`; when `create` is false, a path that holds no database is
    /// an error and nothing is created. Either way, a folder that holds other files is never
    /// made a database, and missing parent folders are not created.
    pub fn open_with(path: impl AsRef<Path>, create: bool) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        if path.is_file() {
            return Err(database_error(
                &path,
                "is a file, not an mtfdb database (a database is a directory)",
            ));
        }
        let catalog_dir = path.join(CATALOG_DIR);
        let segments_dir = path.join(SEGMENTS_DIR);
        let mut manifest = if path.exists() {
            Manifest::read(&path)?
        } else {
            None
        };
        if manifest.is_none() && !catalog_dir.exists() {
            if path.join("db").exists() || path.join("conf").exists() {
                return Err(legacy_layout_error(&path));
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
            // A new database: the manifest first, so that a catalog never exists without one.
            let fresh = Manifest::of(&Catalog::default(), FORMAT_VERSION);
            fresh.write(&path)?;
            manifest = Some(fresh);
        }
        let Some(manifest) = manifest else {
            return Err(Error::Corrupt(format!(
                "the manifest {} is missing (the catalog alone cannot be trusted); restore it, \
                 or re-import the traces into a new database",
                path.join(manifest::MANIFEST).display()
            )));
        };
        if !readable_version(manifest.format_version) {
            return Err(version_error(&path, manifest.format_version));
        }
        std::fs::create_dir_all(&segments_dir).map_err(|e| Error::io(&segments_dir, e))?;
        let db = open_sled_waiting(&catalog_dir)?.map_err(|e| match e {
            e if is_lock_error(&e) => database_error(
                &path,
                "is in use by another process (only one may open a database at a time)",
            ),
            sled::Error::Io(io) => database_error(&path, format!("cannot be opened: {io}")),
            other => Error::Corrupt(format!(
                "the catalog {} is damaged: {other}",
                catalog_dir.display()
            )),
        })?;
        let catalog_version = read_version(&db, &catalog_dir, &path)?;
        match catalog_version {
            Some(version) if !readable_version(version) => {
                return Err(version_error(&path, version))
            }
            Some(_) => {}
            None if manifest.traces.is_empty() => {
                let empty = encode_meta(&Catalog::default());
                guarded(&catalog_dir, || {
                    db.insert(KEY_VERSION, &FORMAT_VERSION.to_le_bytes())?;
                    db.insert(KEY_CATALOG, empty)?;
                    db.flush()
                })?;
            }
            None => {
                return Err(Error::Corrupt(format!(
                    "the catalog {} has lost its content, but the manifest names the traces {}; \
                     restore the database folder, or re-import them into a new database",
                    catalog_dir.display(),
                    names(&manifest.traces)
                )))
            }
        }
        let per_trace = guarded(&catalog_dir, || db.open_tree(PER_TRACE_TREE))?;
        let store = Store {
            db,
            per_trace,
            path,
            catalog_dir,
            segments_dir,
            catalog_lock: Mutex::new(()),
            next_id: Mutex::new(0),
            importing: Mutex::new(HashSet::new()),
            damaged: Mutex::new(Vec::new()),
        };
        let catalog = store.catalog()?;
        let shortfalls = manifest.shortfalls(&catalog);
        if !shortfalls.is_empty() {
            return Err(Error::Corrupt(format!(
                "the catalog {} disagrees with the manifest (sled returned an older or damaged \
                 catalog): {}; restore the database folder, or re-import those traces into a new database",
                store.catalog_dir.display(),
                shortfalls.join("; ")
            )));
        }
        if catalog_version.is_some_and(|v| v != FORMAT_VERSION) {
            // An older version this build reads: relabelled, the catalog first (a database
            // left with one of the two relabelled opens here as well, and is finished then).
            guarded(&store.catalog_dir, || {
                store
                    .db
                    .insert(KEY_VERSION, &FORMAT_VERSION.to_le_bytes())?;
                store.db.flush()
            })?;
        }
        if manifest.traces != catalog.traces || manifest.format_version != FORMAT_VERSION {
            // A commit or a drop was interrupted between its two steps (the catalog has it),
            // or the database was of an older version.
            Manifest::of(&catalog, FORMAT_VERSION).write(&store.path)?;
        }
        *store.next_id.lock().unwrap_or_else(|p| p.into_inner()) = catalog
            .traces
            .iter()
            .map(|e| e.id + 1)
            .fold(catalog.next_id, u64::max);
        store.remove_orphan_segments(&catalog)?;
        let damaged = catalog
            .traces
            .iter()
            .filter_map(|e| {
                segment::check(&store.segment_path(e), &e.segment, &e.name)
                    .err()
                    .map(|err| match err {
                        Error::Corrupt(m) => (e.id, m),
                        other => (e.id, other.to_string()),
                    })
            })
            .collect();
        *store.damaged.lock().unwrap_or_else(|p| p.into_inner()) = damaged;
        Ok(store)
    }

    fn segment_path(&self, entry: &CatalogEntry) -> PathBuf {
        self.segments_dir.join(&entry.segment.file)
    }

    /// Removes segment files no catalog entry names: imports that died.
    fn remove_orphan_segments(&self, catalog: &Catalog) -> Result<()> {
        let named: HashSet<&str> = catalog
            .traces
            .iter()
            .map(|e| e.segment.file.as_str())
            .collect();
        let dir =
            std::fs::read_dir(&self.segments_dir).map_err(|e| Error::io(&self.segments_dir, e))?;
        let mut removed = false;
        for file in dir {
            let file = file.map_err(|e| Error::io(&self.segments_dir, e))?;
            let name = file.file_name();
            if !named.contains(name.to_string_lossy().as_ref()) {
                std::fs::remove_file(file.path()).map_err(|e| Error::io(file.path(), e))?;
                removed = true;
            }
        }
        if removed {
            segment::sync_dir(&self.segments_dir)?;
        }
        Ok(())
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the catalog.
    pub fn catalog(&self) -> Result<Catalog> {
        let bytes = guarded(&self.catalog_dir, || self.db.get(KEY_CATALOG))?.ok_or_else(|| {
            Error::Corrupt(format!(
                "the catalog {} has no list of traces",
                self.catalog_dir.display()
            ))
        })?;
        decode_meta(
            &bytes,
            &format!("the catalog {}", self.catalog_dir.display()),
        )
    }

    /// Replaces the catalog in one atomic, durable sled write.
    fn write_catalog(&self, catalog: &Catalog) -> Result<()> {
        let bytes = encode_meta(catalog);
        guarded(&self.catalog_dir, || {
            self.db.insert(KEY_CATALOG, bytes)?;
            self.db.flush()
        })?;
        Ok(())
    }

    fn write_manifest(&self, catalog: &Catalog) -> Result<()> {
        Manifest::of(catalog, FORMAT_VERSION).write(&self.path)
    }

    /// The traces the database holds, by name. Fails, naming them, if any trace's segment
    /// failed its check when the database opened: a listing never silently shows fewer.
    pub fn ready_traces(&self) -> Result<Vec<CatalogEntry>> {
        let damaged = self.damaged.lock().unwrap_or_else(|p| p.into_inner());
        if !damaged.is_empty() {
            let why: Vec<&str> = damaged.iter().map(|(_, m)| m.as_str()).collect();
            return Err(Error::Corrupt(format!(
                "{} (drop the damaged trace, or restore its file)",
                why.join("; ")
            )));
        }
        drop(damaged);
        let mut v = self.catalog()?.traces;
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(v)
    }

    fn entry(&self, name: &str) -> Result<CatalogEntry> {
        let traces = self.catalog()?.traces;
        traces
            .iter()
            .find(|e| e.name == name)
            .cloned()
            .ok_or_else(|| {
                let mut available: Vec<String> = traces.into_iter().map(|e| e.name).collect();
                available.sort();
                Error::NoSuchTrace {
                    name: name.to_string(),
                    available,
                }
            })
    }

    /// Opens a ready trace for reading: checks its segment's size, trailer, header and
    /// directory, and reads its metadata.
    pub fn reader(&self, name: &str) -> Result<TraceReader> {
        let entry = self.entry(name)?;
        let segment = Segment::open(self.segment_path(&entry), &entry.segment, name)?;
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
            per_trace: self.per_trace.clone(),
            catalog_dir: self.catalog_dir.clone(),
        })
    }

    /// Starts importing a trace called `name`: it writes only its segment file, invisible
    /// until [`TraceWriter::commit`].
    pub fn begin_import(&self, name: &str) -> Result<TraceWriter<'_>> {
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
        if self.catalog()?.traces.iter().any(|e| e.name == name)
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
        let (id, segment) = loop {
            let id = {
                let mut next = self.next_id.lock().unwrap_or_else(|p| p.into_inner());
                let id = *next;
                *next += 1;
                id
            };
            match SegmentWriter::create(self.segments_dir.join(format!("{id}.seg"))) {
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                other => break (id, other?),
            }
        };
        Ok(TraceWriter {
            claim,
            segment,
            id,
            spill: None,
        })
    }

    /// Removes a trace: the manifest forgets it, then the catalog (with its views and stored
    /// results), then its segment file is deleted and the space is back.
    pub fn drop_trace(&self, name: &str) -> Result<()> {
        let _guard = self.catalog_lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut catalog = self.catalog()?;
        let entry = self.entry(name)?;
        catalog.traces.retain(|e| e.id != entry.id);
        self.write_manifest(&catalog)?;
        let own = entry.id.to_be_bytes();
        let encoded = encode_meta(&catalog);
        guarded(&self.catalog_dir, || {
            let keys: Vec<sled::IVec> = self
                .per_trace
                .scan_prefix(own)
                .keys()
                .collect::<std::result::Result<_, _>>()?;
            let mut batch = sled::Batch::default();
            for k in keys {
                batch.remove(k);
            }
            self.per_trace.apply_batch(batch)?;
            self.db.insert(KEY_CATALOG, encoded)?;
            self.db.flush()
        })?;
        let path = self.segment_path(&entry);
        match std::fs::remove_file(&path) {
            Ok(()) => segment::sync_dir(&self.segments_dir)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
        self.damaged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(id, _)| *id != entry.id);
        Ok(())
    }

    /// Bytes the database occupies on disk: sled, the segments and the manifest.
    pub fn size_on_disk(&self) -> Result<u64> {
        let mut total = guarded(&self.catalog_dir, || self.db.size_on_disk())?;
        let dir =
            std::fs::read_dir(&self.segments_dir).map_err(|e| Error::io(&self.segments_dir, e))?;
        for file in dir {
            let file = file.map_err(|e| Error::io(&self.segments_dir, e))?;
            total += file
                .metadata()
                .map_err(|e| Error::io(file.path(), e))?
                .len();
        }
        let manifest = self.path.join(manifest::MANIFEST);
        total += std::fs::metadata(&manifest)
            .map_err(|e| Error::io(&manifest, e))?
            .len();
        Ok(total)
    }
}

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
/// deletes the file; if the process dies instead, the next open does.
pub struct TraceWriter<'a> {
    claim: ImportClaim<'a>,
    segment: SegmentWriter,
    id: u64,
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
    /// segment durable, then adds the catalog entry in one atomic sled write, then records it
    /// in the manifest.
    pub fn commit(mut self, meta: &TraceMeta) -> Result<u64> {
        self.segment
            .put(blob_key(&[KEY_META]), &encode_meta(meta))?;
        let segment = self.segment.finish()?;
        let store = self.claim.store;
        let _guard = store.catalog_lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut catalog = store.catalog()?;
        if catalog.traces.iter().any(|e| e.name == self.claim.name) {
            return Err(Error::TraceExists(self.claim.name.clone()));
        }
        catalog.traces.push(CatalogEntry {
            id: self.id,
            name: self.claim.name.clone(),
            segment,
        });
        catalog.next_id = catalog.next_id.max(self.id + 1);
        store.write_catalog(&catalog)?;
        self.segment.keep();
        store.write_manifest(&catalog).map_err(|e| {
            Error::Storage(format!(
                "trace {:?} was stored, but the manifest could not be updated ({e}); \
                 the next open updates it",
                self.claim.name
            ))
        })?;
        Ok(self.id)
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

/// Reads one ready trace: its segment, and its views and stored results in sled.
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
    per_trace: sled::Tree,
    catalog_dir: PathBuf,
}

impl TraceReader {
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

    fn sled<T>(&self, call: impl FnOnce() -> std::result::Result<T, sled::Error>) -> Result<T> {
        guarded(&self.catalog_dir, call)
    }

    /// Writes (or with `None` removes) a value of the `per_trace` tree, durably; returns
    /// whether there was one before.
    fn put_per_trace(&self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<bool> {
        self.sled(|| {
            let old = match value {
                Some(v) => self.per_trace.insert(key, v)?,
                None => self.per_trace.remove(key)?,
            };
            self.per_trace.flush()?;
            Ok(old.is_some())
        })
    }

    /// Stores (or replaces) the view `name`: a selection's ids and the statement that made it.
    pub fn put_view(&self, name: &str, view: &StoredView) -> Result<()> {
        let bytes = encode_meta(&ViewRecord::from(view));
        self.put_per_trace(per_trace_key(self.id, VIEW, name), Some(bytes))
            .map(|_| ())
    }

    /// The view `name`, if there is one.
    pub fn view(&self, name: &str) -> Result<Option<StoredView>> {
        let what = format!("view {name:?} of trace {:?}", self.meta.name);
        match self.sled(|| self.per_trace.get(per_trace_key(self.id, VIEW, name)))? {
            Some(bytes) => Ok(Some(
                decode_meta::<ViewRecord>(&bytes, &what)?.into_view(&what)?,
            )),
            None => Ok(None),
        }
    }

    /// Removes the view `name`; false if there was none.
    pub fn drop_view(&self, name: &str) -> Result<bool> {
        self.put_per_trace(per_trace_key(self.id, VIEW, name), None)
    }

    /// The `per_trace` entries of this trace of one kind whose names start with `prefix`.
    fn scan_per_trace(&self, kind: u8, prefix: &str) -> Result<Vec<(String, sled::IVec)>> {
        let key = per_trace_key(self.id, kind, prefix);
        let at = key.len() - prefix.len();
        self.sled(|| {
            self.per_trace
                .scan_prefix(&key)
                .map(|kv| kv.map(|(k, v)| (String::from_utf8_lossy(&k[at..]).into_owned(), v)))
                .collect()
        })
    }

    /// Every view of the trace, by name.
    pub fn views(&self) -> Result<Vec<(String, StoredView)>> {
        self.scan_per_trace(VIEW, "")?
            .into_iter()
            .map(|(name, v)| {
                let what = format!("view {name:?} of trace {:?}", self.meta.name);
                let view = decode_meta::<ViewRecord>(&v, &what)?.into_view(&what)?;
                Ok((name, view))
            })
            .collect()
    }

    /// Stores (or replaces) an analysis result (patterns, phases) under `key`: a small table
    /// serialized with its parameters and its schema version, sealed with a checksum.
    pub fn put_result<T: StoredResult>(&self, key: &str, value: &T) -> Result<()> {
        self.put_result_as(key, T::SCHEMA_VERSION, value)
    }

    /// [`TraceReader::put_result`] under an explicit schema version.
    fn put_result_as<T: serde::Serialize>(&self, key: &str, schema: u32, value: &T) -> Result<()> {
        let value = bincode::serde::encode_to_vec(value, bincode::config::standard())
            .map_err(|e| Error::Storage(format!("result {key:?} does not serialize: {e}")))?;
        let bytes = encode_meta(&ResultRecord { schema, value });
        self.put_per_trace(per_trace_key(self.id, RESULT, key), Some(bytes))
            .map(|_| ())
    }

    /// The analysis result stored under `key`, if any stored under `T`'s schema version.
    pub fn result<T: StoredResult>(&self, key: &str) -> Result<Option<T>> {
        let what = format!("stored result {key:?} of trace {:?}", self.meta.name);
        let Some(bytes) = self.sled(|| self.per_trace.get(per_trace_key(self.id, RESULT, key)))?
        else {
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
        let found = self.scan_per_trace(RESULT, prefix)?;
        for (key, _) in &found {
            self.put_per_trace(per_trace_key(self.id, RESULT, key), None)?;
        }
        Ok(found.len())
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
