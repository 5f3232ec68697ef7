//! The store: every sled call of mtfdb lives here, behind [`Store`], [`TraceWriter`] and
//! [`TraceReader`], so another engine could replace sled without touching ingest or query.
//!
//! Layout. The default tree holds `format_version` and `catalog` (the list of traces). Each
//! trace lives in its own tree `trace/<id>`:
//!
//! | key | value |
//! |---|---|
//! | `meta` | [`TraceMeta`]: declarations, strings, chunk directory, summary |
//! | `o` chunk | operation chunk (one location's rows) |
//! | `m` chunk, `l` chunk, `c` chunk, `r` chunk | messages, request links, collective instances, routine calls |
//! | `a` chunk | anomalies |
//! | `i` dim value chunk | roaring bitmap of the ids in that chunk with that value |
//!
//! Chunk numbers and values are big-endian so that keys sort numerically. An import writes
//! into a new tree and becomes visible in one step: the catalog entry turning `Ready`.
//! Trees of imports that never finished are dropped on the next open.

// No stored byte reaches a panic: `unwrap` and `expect` are denied here outside tests. The
// calls that remain are allowed where they stand, each with why it cannot fail:
// - codec.rs: creating the per-thread zstd contexts (fails only without memory, where
//   allocation aborts anyway), and the dictionary code of a value the dictionary was built from;
// - mod.rs: bincode encoding of plain metadata types, and serializing and compressing a bitmap
//   into a Vec (neither fails but for memory).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod catalog;
pub mod codec;
pub mod tables;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use roaring::RoaringBitmap;

pub use catalog::{
    Catalog, CatalogEntry, OpChunkInfo, PairTraffic, RankTraffic, TraceMeta, TraceState,
    TraceSummary, FORMAT_VERSION,
};
use codec::{seal, unseal};
use tables::Columns;

use crate::error::{Error, Result};
use crate::model::Anomaly;

/// sled's log segment size (its default).
const SEGMENT: usize = 512 << 10;
/// sled's page cache, counted the way sled counts (by on-disk size, which understates memory
/// two to three times); queries decode whole chunks, so a large cache buys little.
const CACHE_BYTES: u64 = 16 * 1024 * 1024;
const KEY_VERSION: &[u8] = b"format_version";
const KEY_CATALOG: &[u8] = b"catalog";
const KEY_META: &[u8] = b"meta";

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

fn chunk_key(prefix: u8, chunk: u32) -> [u8; 5] {
    let mut k = [prefix, 0, 0, 0, 0];
    k[1..].copy_from_slice(&chunk.to_be_bytes());
    k
}

fn index_prefix(dim: IndexDim, value: u32) -> [u8; 6] {
    let mut k = [b'i', dim as u8, 0, 0, 0, 0];
    k[2..].copy_from_slice(&value.to_be_bytes());
    k
}

fn index_key(dim: IndexDim, value: u32, chunk: u32) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..6].copy_from_slice(&index_prefix(dim, value));
    k[6..].copy_from_slice(&chunk.to_be_bytes());
    k
}

fn tree_name(id: u64) -> String {
    format!("trace/{id}")
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

/// Compresses a serialized bitmap; indexes of regular traces shrink many times.
fn encode_bitmap(bitmap: &RoaringBitmap) -> Vec<u8> {
    let mut raw = Vec::with_capacity(bitmap.serialized_size());
    // Writing to a Vec and compressing in memory fail only when memory is exhausted.
    #[allow(clippy::expect_used)]
    bitmap
        .serialize_into(&mut raw)
        .expect("writing to a Vec cannot fail");
    #[allow(clippy::expect_used)]
    let mut out = zstd::bulk::compress(&raw, 1).expect("zstd compresses in memory");
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    seal(&mut out);
    out
}

fn decode_bitmap(bytes: &[u8], what: &str) -> Result<RoaringBitmap> {
    let body = unseal(bytes, what)?;
    if body.len() < 4 {
        return Err(Error::Corrupt(format!("{what} is truncated")));
    }
    let (packed, len) = body.split_at(body.len() - 4);
    let raw_len = u32::from_le_bytes(
        len.try_into()
            .map_err(|_| Error::Corrupt(format!("{what} is truncated")))?,
    ) as usize;
    let raw = zstd::bulk::decompress(packed, raw_len)
        .map_err(|e| Error::Corrupt(format!("{what} does not decompress: {e}")))?;
    RoaringBitmap::deserialize_from(&raw[..])
        .map_err(|e| Error::Corrupt(format!("{what} does not decode: {e}")))
}

/// A database: a sled directory holding many traces.
pub struct Store {
    /// The open sled database. Replaced (closed and reopened) by
    /// [`TraceWriter::relieve_memory`]; everyone else takes a handle per call.
    db: RwLock<Option<sled::Db>>,
    path: PathBuf,
    catalog_lock: Mutex<()>,
    /// Live [`TraceReader`]s: while any exists, the database is never reopened under it.
    readers: Arc<AtomicUsize>,
}

/// sled keeps every page it wrote in memory when the page is stored as a blob (its cache
/// counts a blob by the size of its pointer), so a long import would grow without bound.
/// Closing and reopening the database releases them.
fn open_sled(path: &Path) -> std::result::Result<sled::Db, sled::Error> {
    sled::Config::new()
        .path(path)
        .cache_capacity(CACHE_BYTES)
        .segment_size(SEGMENT)
        .mode(sled::Mode::HighThroughput)
        .flush_every_ms(Some(200))
        .open()
}

/// Hands memory freed by the closed database back to the operating system. glibc keeps freed
/// heap pages otherwise, and the process's resident size would still grow with the trace.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_freed_memory() {
    extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    // SAFETY: malloc_trim only returns free heap memory to the system; it has no
    // preconditions and does not touch live allocations.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_freed_memory() {}

/// Fills the rest of sled's active log segment with small records in a scratch tree, so
/// that the segment is sealed before the database closes: sled deletes the blob files that
/// newer writes replaced only when the segment holding the replacement is sealed, and
/// forgets them if the database closes first.
fn seal_active_segment(db: &sled::Db) -> Result<()> {
    const FILLER_TREE: &str = "~filler";
    let filler = db.open_tree(FILLER_TREE)?;
    let record = vec![0u8; 1024];
    for i in 0..(SEGMENT / 1024 + 64) as u32 {
        filler.insert(i.to_be_bytes(), record.clone())?;
    }
    filler.flush()?;
    drop(filler);
    db.drop_tree(FILLER_TREE)?;
    Ok(())
}

fn is_lock_error(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Io(io)
        if io.kind() == std::io::ErrorKind::WouldBlock || io.to_string().contains("could not acquire lock"))
}

/// Opens sled; if the directory is locked, waits up to a second for the lock: a handle closed
/// a moment ago in this process lets go of it only when its background flusher stops.
/// Whether `path` may be opened as a database: an existing sled directory always; an absent
/// path or an empty folder only when `create`; a folder holding anything else never.
/// The longest name, in characters, a trace may be given (names are shown in tables).
pub const MAX_TRACE_NAME_CHARS: usize = 255;

fn closed_by_failed_reopen() -> Error {
    Error::Storage("the database was closed when reopening it failed; open it again".to_string())
}

fn check_location(path: &Path, create: bool) -> Result<()> {
    let db_error = |message: String| Error::Database {
        path: path.to_path_buf(),
        message,
    };
    let absent = |why: &str| {
        Error::unknown(
            crate::NameKind::Database,
            path.display().to_string(),
            format!(
                "no database at {} ({why}; `mtfdb --db {} import FILE` creates one)",
                path.display(),
                path.display()
            ),
        )
    };
    if !path.exists() {
        if !create {
            return Err(absent("no such directory"));
        }
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent.filter(|p| !p.is_dir()) {
            return Err(db_error(format!(
                "cannot be created: the folder {} does not exist",
                parent.display()
            )));
        }
        return Ok(());
    }
    // sled keeps its configuration in `conf` and its log in `db`.
    if path.join("conf").is_file() && path.join("db").is_file() {
        return Ok(());
    }
    let mut entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
    match entries.next() {
        None if create => Ok(()),
        None => Err(absent("the directory is empty")),
        Some(_) => Err(db_error(
            "is a folder that holds other files, not an mtfdb database (give a new path, or an existing database)"
                .into(),
        )),
    }
}

fn open_sled_waiting(path: &Path) -> std::result::Result<sled::Db, sled::Error> {
    let mut tries = 0;
    loop {
        match open_sled(path) {
            Err(e) if is_lock_error(&e) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Opens sled, retrying briefly while a just-closed handle's background flusher lets go of
/// the directory's lock.
fn reopen_sled(path: &Path) -> Result<sled::Db> {
    let mut last = None;
    for _ in 0..100 {
        match open_sled(path) {
            Ok(db) => return Ok(db),
            Err(e) => {
                last = Some(e);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    Err(Error::Storage(format!(
        "could not reopen the database during an import: {}",
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

impl Store {
    /// Opens (or creates) the database at `path`, checks its format version and removes what
    /// interrupted imports left behind.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, true)
    }

    /// Opens the database at `path`; when `create` is false, a path that holds no database is
    /// an error and nothing is created. Either way, a folder that holds other files is never
    /// made a database, and missing parent folders are not created.
    pub fn open_with(path: impl AsRef<Path>, create: bool) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        let db_error = |message: String| Error::Database {
            path: path.clone(),
            message,
        };
        if path.is_file() {
            return Err(db_error(
                "is a file, not an mtfdb database (a database is a directory)".into(),
            ));
        }
        check_location(&path, create)?;
        let db = open_sled_waiting(&path).map_err(|e| match e {
            e if is_lock_error(&e) => db_error(
                "is in use by another process (only one may open a database at a time)".into(),
            ),
            sled::Error::Io(io) => db_error(format!("cannot be opened: {io}")),
            other => db_error(format!("is not a readable mtfdb database: {other}")),
        })?;
        match db.get(KEY_VERSION)? {
            Some(v) => {
                let version = <[u8; 4]>::try_from(v.as_ref())
                    .map(u32::from_le_bytes)
                    .map_err(|_| db_error("has a damaged format version".into()))?;
                if version != FORMAT_VERSION {
                    return Err(db_error(format!(
                        "was written with storage format version {version}, but this mtfdb reads version {FORMAT_VERSION}; \
                         re-import its traces with a matching mtfdb"
                    )));
                }
            }
            None => {
                if !db.is_empty() || db.tree_names().len() > 1 {
                    return Err(db_error(
                        "is a sled database but not an mtfdb one (no format version)".into(),
                    ));
                }
                db.insert(KEY_VERSION, &FORMAT_VERSION.to_le_bytes())?;
                db.insert(KEY_CATALOG, encode_meta(&Catalog::default()))?;
                db.flush()?;
            }
        }
        let store = Store {
            db: RwLock::new(Some(db)),
            path,
            catalog_lock: Mutex::new(()),
            readers: Arc::new(AtomicUsize::new(0)),
        };
        store.clean_up_interrupted_imports()?;
        Ok(store)
    }

    /// A handle on the open sled database.
    /// A handle on the open sled database; `None` only if a reopen (`relieve_memory`) failed
    /// half-way, after which the database must be opened again.
    fn db(&self) -> Result<sled::Db> {
        self.db
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(closed_by_failed_reopen)
    }

    /// The database's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the catalog.
    pub fn catalog(&self) -> Result<Catalog> {
        let bytes = self
            .db()?
            .get(KEY_CATALOG)?
            .ok_or_else(|| Error::Corrupt("the catalog is missing".into()))?;
        decode_meta(&bytes, "the catalog")
    }

    fn write_catalog(&self, catalog: &Catalog) -> Result<()> {
        let db = self.db()?;
        db.insert(KEY_CATALOG, encode_meta(catalog))?;
        db.flush()?;
        Ok(())
    }

    fn update_catalog<T>(&self, f: impl FnOnce(&mut Catalog) -> Result<T>) -> Result<T> {
        let _guard = self.catalog_lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut catalog = self.catalog()?;
        let out = f(&mut catalog)?;
        self.write_catalog(&catalog)?;
        Ok(out)
    }

    /// Drops the trees of imports that did not finish, and trees no catalog entry names.
    fn clean_up_interrupted_imports(&self) -> Result<()> {
        let catalog = self.catalog()?;
        let ready: Vec<String> = catalog
            .traces
            .iter()
            .filter(|e| e.state == TraceState::Ready)
            .map(|e| tree_name(e.id))
            .collect();
        let db = self.db()?;
        for name in db.tree_names() {
            let name_str = String::from_utf8_lossy(&name).to_string();
            if name_str.starts_with("trace/") && !ready.contains(&name_str) {
                db.drop_tree(&name)?;
            }
        }
        if catalog.traces.iter().any(|e| e.state != TraceState::Ready) {
            self.update_catalog(|c| {
                c.traces.retain(|e| e.state == TraceState::Ready);
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The ready traces' entries, by name.
    pub fn ready_traces(&self) -> Result<Vec<CatalogEntry>> {
        let mut v: Vec<CatalogEntry> = self
            .catalog()?
            .traces
            .into_iter()
            .filter(|e| e.state == TraceState::Ready)
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(v)
    }

    /// Opens a ready trace for reading.
    pub fn reader(&self, name: &str) -> Result<TraceReader> {
        let traces = self.ready_traces()?;
        let entry = traces
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| Error::NoSuchTrace {
                name: name.to_string(),
                available: traces.iter().map(|e| e.name.clone()).collect(),
            })?;
        let tree = self.db()?.open_tree(tree_name(entry.id))?;
        let what = format!("the metadata of trace {name:?}");
        let meta_bytes = tree
            .get(KEY_META)?
            .ok_or_else(|| Error::Corrupt(format!("{what} is missing")))?;
        let meta: TraceMeta = decode_meta(&meta_bytes, &what)?;
        self.readers.fetch_add(1, Ordering::SeqCst);
        Ok(TraceReader {
            tree,
            meta,
            cancel: None,
            _live: ReaderCount(self.readers.clone()),
        })
    }

    /// Starts importing a trace called `name`: invisible until [`TraceWriter::commit`].
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
        let id = self.update_catalog(|c| {
            if c.traces
                .iter()
                .any(|e| e.name == name && e.state == TraceState::Ready)
            {
                return Err(Error::TraceExists(name.to_string()));
            }
            let id = c.next_id;
            c.next_id += 1;
            c.traces.push(CatalogEntry {
                id,
                name: name.to_string(),
                state: TraceState::Importing,
            });
            Ok(id)
        })?;
        let tree = self.db()?.open_tree(tree_name(id))?;
        Ok(TraceWriter {
            store: self,
            tree: Some(tree),
            id,
            name: name.to_string(),
            done: false,
            written: 0,
        })
    }

    /// Removes a trace: it disappears in one step, then its data is dropped.
    pub fn drop_trace(&self, name: &str) -> Result<()> {
        let id = self.update_catalog(|c| {
            let pos = c
                .traces
                .iter()
                .position(|e| e.name == name && e.state == TraceState::Ready)
                .ok_or_else(|| Error::NoSuchTrace {
                    name: name.to_string(),
                    available: c
                        .traces
                        .iter()
                        .filter(|e| e.state == TraceState::Ready)
                        .map(|e| e.name.clone())
                        .collect(),
                })?;
            Ok(c.traces.remove(pos).id)
        })?;
        let db = self.db()?;
        db.drop_tree(tree_name(id))?;
        db.flush()?;
        Ok(())
    }

    /// Bytes the database occupies on disk.
    pub fn size_on_disk(&self) -> Result<u64> {
        Ok(self.db()?.size_on_disk()?)
    }
}

/// Writes one trace's data during an import. Dropped without [`TraceWriter::commit`], it
/// removes what it wrote; if the process dies instead, the next open does.
pub struct TraceWriter<'a> {
    store: &'a Store,
    /// `None` only inside [`TraceWriter::relieve_memory`].
    tree: Option<sled::Tree>,
    id: u64,
    name: String,
    done: bool,
    /// Bytes written since the database was last reopened.
    written: u64,
}

/// Bytes an import writes before it reopens the database to release sled's memory.
const REOPEN_EVERY: u64 = 32 * 1024 * 1024;

impl TraceWriter<'_> {
    /// The name the trace will have.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The trace's tree; `None` only if a reopen failed half-way.
    fn tree(&self) -> Result<&sled::Tree> {
        self.tree.as_ref().ok_or_else(closed_by_failed_reopen)
    }

    fn insert(&mut self, key: &[u8], value: Vec<u8>) -> Result<()> {
        self.written += value.len() as u64;
        self.tree()?.insert(key, value)?;
        if self.written >= REOPEN_EVERY {
            self.relieve_memory()?;
        }
        Ok(())
    }

    /// Closes and reopens the database so that sled lets go of the pages this import wrote
    /// (it would otherwise keep them all in memory). Skipped while a [`TraceReader`] is alive
    /// in this process, since its handle would keep the database open. Returns whether it
    /// reopened.
    pub fn relieve_memory(&mut self) -> Result<bool> {
        self.written = 0;
        if self.store.readers.load(Ordering::SeqCst) > 0 {
            return Ok(false);
        }
        let mut slot = self.store.db.write().unwrap_or_else(|p| p.into_inner());
        if let Some(tree) = self.tree.take() {
            tree.flush()?;
        }
        if let Some(db) = slot.take() {
            seal_active_segment(&db)?;
            db.flush()?;
        }
        let db = reopen_sled(&self.store.path)?;
        release_freed_memory();
        self.tree = Some(db.open_tree(tree_name(self.id))?);
        *slot = Some(db);
        Ok(true)
    }

    /// Stores chunk `chunk` of `table`.
    pub fn put_chunk(&mut self, table: Table, chunk: u32, columns: &Columns) -> Result<()> {
        self.put_encoded_chunk(table, chunk, columns.encode())
    }

    /// Stores an already encoded chunk (see [`Columns::encode`]).
    pub fn put_encoded_chunk(&mut self, table: Table, chunk: u32, bytes: Vec<u8>) -> Result<()> {
        self.insert(&chunk_key(table.prefix(), chunk), bytes)
    }

    /// Stores the index bitmap of `value` on `dim` for one chunk.
    pub fn put_index(
        &mut self,
        dim: IndexDim,
        value: u32,
        chunk: u32,
        ids: &RoaringBitmap,
    ) -> Result<()> {
        self.put_encoded_index(dim, value, chunk, encode_bitmap(ids))
    }

    /// Stores an index bitmap already encoded with [`encode_index_bitmap`].
    pub fn put_encoded_index(
        &mut self,
        dim: IndexDim,
        value: u32,
        chunk: u32,
        bytes: Vec<u8>,
    ) -> Result<()> {
        self.insert(&index_key(dim, value, chunk), bytes)
    }

    /// Stores a chunk of anomalies.
    pub fn put_anomalies(&mut self, chunk: u32, anomalies: &[Anomaly]) -> Result<()> {
        self.insert(&chunk_key(b'a', chunk), encode_meta(&anomalies))
    }

    /// Makes the trace visible: writes its metadata, flushes everything to disk, then flips
    /// its catalog entry to ready in one atomic write.
    pub fn commit(mut self, meta: &TraceMeta) -> Result<u64> {
        self.tree()?.insert(KEY_META, encode_meta(meta))?;
        self.tree()?.flush()?;
        let id = self.id;
        self.store.update_catalog(|c| {
            let entry = c
                .traces
                .iter_mut()
                .find(|e| e.id == id)
                .ok_or_else(|| Error::Corrupt("an import's catalog entry vanished".into()))?;
            entry.state = TraceState::Ready;
            Ok(())
        })?;
        self.done = true;
        Ok(id)
    }
}

impl Drop for TraceWriter<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Best effort: if this fails too (disk full), the next open cleans up.
        let id = self.id;
        if let Ok(db) = self.store.db() {
            let _ = db.drop_tree(tree_name(id));
        }
        let _ = self.store.update_catalog(|c| {
            c.traces.retain(|e| e.id != id);
            Ok(())
        });
    }
}

/// Encodes an index bitmap for [`TraceWriter::put_encoded_index`] (lets callers encode in
/// parallel).
pub fn encode_index_bitmap(ids: &RoaringBitmap) -> Vec<u8> {
    encode_bitmap(ids)
}

const VIEW_PREFIX: &[u8] = b"v/";

const RESULT_PREFIX: &[u8] = b"r/";

fn result_key(key: &str) -> Vec<u8> {
    let mut k = RESULT_PREFIX.to_vec();
    k.extend_from_slice(key.as_bytes());
    k
}

fn view_key(name: &str) -> Vec<u8> {
    let mut k = VIEW_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// A named selection kept with its trace: the ids it selected and what it was.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredView {
    /// True when the ids are message ids, false for operation ids.
    pub messages: bool,
    /// The statement that defined it, as canonical query text.
    pub definition: String,
    /// The selected ids.
    pub ids: RoaringBitmap,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ViewRecord {
    messages: bool,
    definition: String,
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

/// Decrements the store's count of live readers when a reader goes.
struct ReaderCount(Arc<AtomicUsize>);

impl Drop for ReaderCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Reads one ready trace.
pub struct TraceReader {
    tree: sled::Tree,
    meta: TraceMeta,
    /// Set (by Ctrl-C) to stop whatever reads this trace: every chunk read checks it.
    cancel: Option<Arc<AtomicBool>>,
    _live: ReaderCount,
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
        Columns::decode(&bytes, table.columns(), &what)
    }

    /// A chunk's stored bytes, and its name for error messages.
    fn chunk_bytes(&self, table: Table, chunk: u32) -> Result<(String, sled::IVec)> {
        self.check_cancel()?;
        let what = format!(
            "{} chunk {chunk} of trace {:?}",
            table.name(),
            self.meta.name
        );
        let bytes = self
            .tree
            .get(chunk_key(table.prefix(), chunk))?
            .ok_or_else(|| Error::Corrupt(format!("{what} is missing")))?;
        Ok((what, bytes))
    }

    /// The ids with `value` on `dim` (the union of its per-chunk bitmaps).
    pub fn index(&self, dim: IndexDim, value: u32) -> Result<RoaringBitmap> {
        let mut out = RoaringBitmap::new();
        for kv in self.tree.scan_prefix(index_prefix(dim, value)) {
            let (key, bytes) = kv?;
            let what = format!(
                "index {dim:?}={value} ({} bytes key) of trace {:?}",
                key.len(),
                self.meta.name
            );
            out |= decode_bitmap(&bytes, &what)?;
        }
        Ok(out)
    }

    /// Stores (or replaces) the view `name`: a selection's ids and the statement that made it.
    pub fn put_view(&self, name: &str, view: &StoredView) -> Result<()> {
        self.tree
            .insert(view_key(name), encode_meta(&ViewRecord::from(view)))?;
        self.tree.flush()?;
        Ok(())
    }

    /// The view `name`, if there is one.
    pub fn view(&self, name: &str) -> Result<Option<StoredView>> {
        let what = format!("view {name:?} of trace {:?}", self.meta.name);
        match self.tree.get(view_key(name))? {
            Some(bytes) => Ok(Some(
                decode_meta::<ViewRecord>(&bytes, &what)?.into_view(&what)?,
            )),
            None => Ok(None),
        }
    }

    /// Removes the view `name`; false if there was none.
    pub fn drop_view(&self, name: &str) -> Result<bool> {
        let existed = self.tree.remove(view_key(name))?.is_some();
        self.tree.flush()?;
        Ok(existed)
    }

    /// Every view of the trace, by name.
    pub fn views(&self) -> Result<Vec<(String, StoredView)>> {
        let mut out = Vec::new();
        for kv in self.tree.scan_prefix(VIEW_PREFIX) {
            let (k, v) = kv?;
            let name = String::from_utf8_lossy(&k[VIEW_PREFIX.len()..]).to_string();
            let what = format!("view {name:?} of trace {:?}", self.meta.name);
            out.push((
                name,
                decode_meta::<ViewRecord>(&v, &what)?.into_view(&what)?,
            ));
        }
        Ok(out)
    }

    /// Stores (or replaces) an analysis result (patterns, phases) under `key`: a small table
    /// serialized with its parameters, sealed with a checksum like the catalog.
    pub fn put_result<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<()> {
        self.tree.insert(result_key(key), encode_meta(value))?;
        self.tree.flush()?;
        Ok(())
    }

    /// The analysis result stored under `key`, if any.
    pub fn result<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let what = format!("stored result {key:?} of trace {:?}", self.meta.name);
        match self.tree.get(result_key(key))? {
            Some(bytes) => Ok(Some(decode_meta(&bytes, &what)?)),
            None => Ok(None),
        }
    }

    /// Removes every stored analysis result whose key starts with `prefix`; returns how many.
    pub fn drop_results(&self, prefix: &str) -> Result<usize> {
        let mut n = 0;
        for kv in self.tree.scan_prefix(result_key(prefix)) {
            let (k, _) = kv?;
            self.tree.remove(k)?;
            n += 1;
        }
        self.tree.flush()?;
        Ok(n)
    }

    /// Only the `wanted` columns of chunk `chunk` of `table` (see [`tables::decode_columns`]).
    pub fn chunk_columns(
        &self,
        table: Table,
        chunk: u32,
        wanted: &[usize],
    ) -> Result<tables::DecodedColumns> {
        self.chunk_column_prefixes(table, chunk, wanted, usize::MAX)
    }

    /// [`TraceReader::chunk_columns`] decoding only rows `0..take`; the row count returned is
    /// the chunk's, the columns hold `min(take, rows)` values.
    pub fn chunk_column_prefixes(
        &self,
        table: Table,
        chunk: u32,
        wanted: &[usize],
        take: usize,
    ) -> Result<tables::DecodedColumns> {
        let (what, bytes) = self.chunk_bytes(table, chunk)?;
        tables::decode_column_prefixes(&bytes, table.columns(), wanted, take, &what)
    }

    /// The ids with `value` on `dim` within the given chunks only (point reads, for queries
    /// that already know which chunks they can touch).
    pub fn index_in_chunks(
        &self,
        dim: IndexDim,
        value: u32,
        chunks: &[u32],
    ) -> Result<RoaringBitmap> {
        let mut out = RoaringBitmap::new();
        for &chunk in chunks {
            if let Some(bytes) = self.tree.get(index_key(dim, value, chunk))? {
                let what = format!(
                    "index {dim:?}={value} chunk {chunk} of trace {:?}",
                    self.meta.name
                );
                out |= decode_bitmap(&bytes, &what)?;
            }
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
            .tree
            .get(chunk_key(b'a', chunk))?
            .ok_or_else(|| Error::Corrupt(format!("{what} is missing")))?;
        decode_meta::<Vec<Anomaly>>(&bytes, &what)
    }

    /// Bytes of this trace's keys and values (its share of the database, before sled's own
    /// overhead).
    pub fn stored_bytes(&self) -> Result<u64> {
        let mut total = 0u64;
        for kv in self.tree.iter() {
            let (k, v) = kv?;
            total += (k.len() + v.len()) as u64;
        }
        Ok(total)
    }
}
