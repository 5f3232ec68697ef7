//! Segment files: the immutable bulk of one trace (column chunks, index bitmaps, anomaly
//! chunks, the trace's metadata), written by mtfdb itself, never by sled.
//!
//! Layout of `<db>/segments/<id>.seg`:
//!
//! | bytes | what |
//! |---|---|
//! | 12 | header: magic `mtfdbseg`, segment format version (u32 LE) |
//! | … | the blobs, back to back |
//! | n × 26 | the directory: per blob, its key (10 bytes), offset (u64), length (u32), CRC-32 (u32), sorted by key |
//! | 36 | the trailer: directory offset (u64), directory length (u64), directory CRC-32, segment version, trailer CRC-32 (of the 24 bytes before it), magic |
//!
//! Checks: the catalog records the segment's size and its trailer CRC (checked when the
//! database opens: one `stat` and one 36-byte read per trace); the trailer holds the
//! directory's CRC (checked when a reader opens the trace); the directory holds every blob's
//! CRC (checked on every read). A segment becomes visible only after it was written
//! completely and fsync'd, with its folder.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"mtfdbseg";
/// The layout version of segment files (the whole database's is [`super::FORMAT_VERSION`]).
const SEGMENT_VERSION: u32 = 1;
const HEADER_LEN: u64 = 12;
const TRAILER_LEN: u64 = 36;
const ENTRY_LEN: usize = 26;
/// The write buffer: large enough that the disk sees few, long writes.
const WRITE_BUFFER: usize = 1 << 20;

/// A blob's name inside a segment: a table prefix byte and up to 9 bytes of chunk number,
/// index dimension and value, zero-padded so that keys sort as their byte strings.
pub type BlobKey = [u8; 10];

/// Pads a key of at most 10 bytes to a [`BlobKey`].
pub fn blob_key(bytes: &[u8]) -> BlobKey {
    let mut k = [0u8; 10];
    k[..bytes.len()].copy_from_slice(bytes);
    k
}

/// What the catalog records of a segment: enough to check it cheaply when the database opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRef {
    /// The file's name inside `<db>/segments/`.
    pub file: String,
    /// Its size in bytes.
    pub size: u64,
    /// The CRC-32 of its trailer (which holds the directory's CRC, which holds every blob's).
    pub checksum: u32,
}

#[derive(Debug, Clone, Copy)]
struct BlobLoc {
    offset: u64,
    len: u32,
    crc: u32,
}

fn corrupt(trace: &str, path: &Path, message: impl std::fmt::Display) -> Error {
    Error::Corrupt(format!(
        "trace {trace:?}: segment file {}: {message}",
        path.display()
    ))
}

fn read_at(file: &File, path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| Error::io(path, e))?;
    Ok(buf)
}

// The callers read fixed-size records (header, trailer, directory entries) whose lengths
// were checked, so the slices are always in bounds.
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(v)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(v)
}

/// The error of a writer used after [`SegmentWriter::finish`].
fn finished(path: &Path) -> Error {
    Error::Storage(format!(
        "segment {} was written after it was finished",
        path.display()
    ))
}

/// What a segment file's name ends with while it is created and not yet locked: such a
/// file older than a minute was left by a process that died in that instant.
pub const CREATING_SUFFIX: &str = ".creating";

/// Flushes a folder's entries (a new, renamed or removed file) to disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Writes one segment; removed again unless [`SegmentWriter::finish`] succeeds and the caller
/// [`SegmentWriter::keep`]s it.
pub struct SegmentWriter {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    /// The file once more, holding its lock ([`super::lock`]) until the writer goes: it
    /// tells the next writer of the database that this import is alive.
    lock: Option<File>,
    written: u64,
    directory: Vec<(BlobKey, BlobLoc)>,
    kept: bool,
}

impl SegmentWriter {
    /// Creates the segment file at `path` (which must not exist) and locks it.
    pub fn create(path: PathBuf) -> Result<SegmentWriter> {
        // Made under a name no writer cleans up, locked, and only then given its name: a
        // writer that cleans up never sees it unlocked while its import is alive.
        let mut creating = path.clone().into_os_string();
        creating.push(CREATING_SUFFIX);
        let creating = PathBuf::from(creating);
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&creating)
            .map_err(|e| Error::io(&path, e))?;
        let lock = file.try_clone().map_err(|e| Error::io(&path, e))?;
        let locked = super::lock::try_lock_file(&lock)
            .and_then(|_| {
                if path.exists() {
                    Err(std::io::ErrorKind::AlreadyExists.into())
                } else {
                    std::fs::rename(&creating, &path)
                }
            })
            .map_err(|e| Error::io(&path, e));
        if let Err(e) = locked {
            let _ = std::fs::remove_file(&creating);
            return Err(e);
        }
        let mut w = SegmentWriter {
            lock: Some(lock),
            out: Some(BufWriter::with_capacity(WRITE_BUFFER, file)),
            path,
            written: 0,
            directory: Vec::new(),
            kept: false,
        };
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
        w.write(&header)?;
        Ok(w)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A failed write (a full disk, above all) as a storage error naming the file, so that
    /// the import reports it as abandoned.
    fn write_failed(&self, e: std::io::Error) -> Error {
        Error::Storage(format!("writing {} failed: {e}", self.path.display()))
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Err(finished(&self.path));
        };
        if let Err(e) = out.write_all(bytes) {
            return Err(self.write_failed(e));
        }
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Appends a blob under `key`; a later blob of the same key replaces it.
    pub fn put(&mut self, key: BlobKey, bytes: &[u8]) -> Result<()> {
        let len = u32::try_from(bytes.len()).map_err(|_| {
            Error::Storage(format!(
                "a stored chunk of {} bytes exceeds the 4 GiB a segment entry can hold",
                bytes.len()
            ))
        })?;
        let loc = BlobLoc {
            offset: self.written,
            len,
            crc: crc32fast::hash(bytes),
        };
        self.write(bytes)?;
        self.directory.push((key, loc));
        Ok(())
    }

    /// Writes the directory and the trailer and makes the file durable (the file, then its
    /// folder); returns what the catalog records of it.
    pub fn finish(&mut self) -> Result<SegmentRef> {
        // A stable sort keeps the last of equal keys last: dedup keeps the first, so reverse.
        self.directory.sort_by_key(|(k, _)| *k);
        let mut last_wins: Vec<(BlobKey, BlobLoc)> = Vec::with_capacity(self.directory.len());
        for (k, loc) in self.directory.drain(..) {
            match last_wins.last_mut() {
                Some(prev) if prev.0 == k => *prev = (k, loc),
                _ => last_wins.push((k, loc)),
            }
        }
        let mut dir = Vec::with_capacity(last_wins.len() * ENTRY_LEN);
        for (k, loc) in &last_wins {
            dir.extend_from_slice(k);
            dir.extend_from_slice(&loc.offset.to_le_bytes());
            dir.extend_from_slice(&loc.len.to_le_bytes());
            dir.extend_from_slice(&loc.crc.to_le_bytes());
        }
        self.directory = last_wins;
        let dir_offset = self.written;
        self.write(&dir)?;
        let mut trailer = Vec::with_capacity(TRAILER_LEN as usize);
        trailer.extend_from_slice(&dir_offset.to_le_bytes());
        trailer.extend_from_slice(&(dir.len() as u64).to_le_bytes());
        trailer.extend_from_slice(&crc32fast::hash(&dir).to_le_bytes());
        trailer.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
        let checksum = crc32fast::hash(&trailer);
        trailer.extend_from_slice(&checksum.to_le_bytes());
        trailer.extend_from_slice(MAGIC);
        self.write(&trailer)?;
        let out = self.out.take().ok_or_else(|| finished(&self.path))?;
        let file = out
            .into_inner()
            .map_err(|e| self.write_failed(e.into_error()))?;
        file.sync_all().map_err(|e| self.write_failed(e))?;
        drop(file);
        if let Some(dir) = self.path.parent() {
            sync_dir(dir)?;
        }
        Ok(SegmentRef {
            file: self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            size: self.written,
            checksum,
        })
    }

    /// Keeps the file when the writer goes (the catalog now names it).
    pub fn keep(&mut self) {
        self.kept = true;
    }

    /// The file was renamed to `path` (see [`super::TraceWriter::commit`]).
    pub fn moved_to(&mut self, path: PathBuf) {
        self.path = path;
    }
}

impl Drop for SegmentWriter {
    fn drop(&mut self) {
        if !self.kept {
            // Close first; then the space is back at once. If removing fails too, the next
            // writer removes the file (unlocked, and no catalog entry names it).
            self.out.take();
            let _ = std::fs::remove_file(&self.path);
        }
        self.lock.take();
    }
}

/// What the catalog would record of the complete segment at `path`, read from the segment
/// itself (its size and its trailer's checksum): for a segment no catalog names, which
/// `mtfdb check` then opens with [`Segment::open`] to verify.
pub fn own_ref(path: &Path) -> Result<SegmentRef> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if size < HEADER_LEN + TRAILER_LEN {
        return Err(Error::Corrupt(format!(
            "{} is too short to be a complete segment",
            path.display()
        )));
    }
    let t = read_at(&file, path, size - TRAILER_LEN, TRAILER_LEN as usize)?;
    Ok(SegmentRef {
        file: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        size,
        checksum: u32_at(&t, 24),
    })
}

/// Checks a segment against what the catalog recorded: its size and its trailer's CRC.
/// Cheap: one `stat` and one 36-byte read.
pub fn check(path: &Path, expected: &SegmentRef, trace: &str) -> Result<()> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(corrupt(trace, path, "is missing"));
        }
        Err(e) => return Err(Error::io(path, e)),
    };
    read_trailer(&file, path, expected, trace).map(|_| ())
}

struct Trailer {
    dir_offset: u64,
    dir_len: u64,
    dir_crc: u32,
}

fn read_trailer(file: &File, path: &Path, expected: &SegmentRef, trace: &str) -> Result<Trailer> {
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if size != expected.size {
        return Err(corrupt(
            trace,
            path,
            format!(
                "is {size} bytes long, but the catalog recorded {} (truncated or overwritten)",
                expected.size
            ),
        ));
    }
    if size < HEADER_LEN + TRAILER_LEN {
        return Err(corrupt(trace, path, "is too short to be a segment"));
    }
    let at = size - TRAILER_LEN;
    let t = read_at(file, path, at, TRAILER_LEN as usize)?;
    if &t[28..36] != MAGIC {
        return Err(corrupt(
            trace,
            path,
            format!("has no segment trailer at byte {}", at + 28),
        ));
    }
    let checksum = u32_at(&t, 24);
    if crc32fast::hash(&t[..24]) != checksum || checksum != expected.checksum {
        return Err(corrupt(
            trace,
            path,
            format!("its trailer at byte {at} fails its checksum"),
        ));
    }
    let version = u32_at(&t, 20);
    if version != SEGMENT_VERSION {
        return Err(corrupt(
            trace,
            path,
            format!("has segment format version {version}, this mtfdb reads {SEGMENT_VERSION}"),
        ));
    }
    let trailer = Trailer {
        dir_offset: u64_at(&t, 0),
        dir_len: u64_at(&t, 8),
        dir_crc: u32_at(&t, 16),
    };
    let dir_end = trailer.dir_offset.checked_add(trailer.dir_len);
    if trailer.dir_offset < HEADER_LEN
        || dir_end != Some(at)
        || !trailer.dir_len.is_multiple_of(ENTRY_LEN as u64)
    {
        return Err(corrupt(
            trace,
            path,
            format!("its trailer at byte {at} places the directory outside the file"),
        ));
    }
    Ok(trailer)
}

/// An open segment: its directory in memory, blobs read on demand and checked.
pub struct Segment {
    file: File,
    path: PathBuf,
    trace: String,
    directory: Vec<(BlobKey, BlobLoc)>,
}

impl Segment {
    /// Opens the segment at `path` of trace `trace`, checking it against `expected`, its
    /// header and its directory's CRC.
    pub fn open(path: PathBuf, expected: &SegmentRef, trace: &str) -> Result<Segment> {
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(corrupt(trace, &path, "is missing"));
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        let trailer = read_trailer(&file, &path, expected, trace)?;
        let header = read_at(&file, &path, 0, HEADER_LEN as usize)?;
        if &header[..8] != MAGIC || u32_at(&header, 8) != SEGMENT_VERSION {
            return Err(corrupt(trace, &path, "its header at byte 0 is damaged"));
        }
        let dir_len = usize::try_from(trailer.dir_len)
            .map_err(|_| corrupt(trace, &path, "its directory is too large"))?;
        let dir = read_at(&file, &path, trailer.dir_offset, dir_len)?;
        if crc32fast::hash(&dir) != trailer.dir_crc {
            return Err(corrupt(
                trace,
                &path,
                format!(
                    "its directory at byte {} fails its checksum",
                    trailer.dir_offset
                ),
            ));
        }
        let mut directory = Vec::with_capacity(dir_len / ENTRY_LEN);
        for (i, e) in dir.chunks_exact(ENTRY_LEN).enumerate() {
            let key = blob_key(&e[..10]);
            let loc = BlobLoc {
                offset: u64_at(e, 10),
                len: u32_at(e, 18),
                crc: u32_at(e, 22),
            };
            let inside = loc.offset >= HEADER_LEN
                && loc
                    .offset
                    .checked_add(u64::from(loc.len))
                    .is_some_and(|end| end <= trailer.dir_offset);
            let sorted = directory
                .last()
                .is_none_or(|(prev, _): &(BlobKey, BlobLoc)| *prev < key);
            if !inside || !sorted {
                return Err(corrupt(
                    trace,
                    &path,
                    format!(
                        "directory entry {i} at byte {} is invalid",
                        trailer.dir_offset + (i * ENTRY_LEN) as u64
                    ),
                ));
            }
            directory.push((key, loc));
        }
        Ok(Segment {
            file,
            path,
            trace: trace.to_string(),
            directory,
        })
    }

    fn read(&self, loc: &BlobLoc) -> Result<Vec<u8>> {
        let bytes = read_at(&self.file, &self.path, loc.offset, loc.len as usize)?;
        if crc32fast::hash(&bytes) != loc.crc {
            return Err(corrupt(
                &self.trace,
                &self.path,
                format!(
                    "the {} bytes at byte {} fail their checksum",
                    loc.len, loc.offset
                ),
            ));
        }
        Ok(bytes)
    }

    /// The blob stored under `key`, checked, if there is one.
    pub fn get(&self, key: &BlobKey) -> Result<Option<Vec<u8>>> {
        match self.directory.binary_search_by(|(k, _)| k.cmp(key)) {
            Ok(i) => self.read(&self.directory[i].1).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Every blob whose key starts with `prefix`, in key order, each checked.
    pub fn scan_prefix<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = Result<(BlobKey, Vec<u8>)>> + 'a {
        let start = self
            .directory
            .partition_point(|(k, _)| &k[..prefix.len()] < prefix);
        self.directory[start..]
            .iter()
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(move |(k, loc)| Ok((*k, self.read(loc)?)))
    }

    /// Reads every blob, each checked against its CRC; returns how many there are (for
    /// `mtfdb check`).
    pub fn verify_all(&self) -> Result<usize> {
        for (_, loc) in &self.directory {
            self.read(loc)?;
        }
        Ok(self.directory.len())
    }

    /// The file's size in bytes.
    pub fn size(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| Error::io(&self.path, e))?
            .len())
    }
}

/// A scratch file beside a segment being written: an import parks there the rows it cannot
/// keep in memory (many locations, each with a few rows so far) and reads them back when it
/// stores their chunk. Removed when dropped; if the process dies, the next open removes it
/// (no catalog entry names it).
pub struct SpillFile {
    path: PathBuf,
    out: BufWriter<File>,
    reader: File,
    written: u64,
}

impl SpillFile {
    /// Creates the scratch file at `path` (which must not exist).
    pub fn create(path: PathBuf) -> Result<SpillFile> {
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let reader = file.try_clone().map_err(|e| Error::io(&path, e))?;
        Ok(SpillFile {
            out: BufWriter::with_capacity(WRITE_BUFFER, file),
            reader,
            path,
            written: 0,
        })
    }

    /// Appends `bytes`; returns where they start and their length.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(u64, u32)> {
        let len = u32::try_from(bytes.len())
            .map_err(|_| Error::Storage("a spilled piece exceeds 4 GiB".into()))?;
        self.out
            .write_all(bytes)
            .map_err(|e| Error::Storage(format!("writing {} failed: {e}", self.path.display())))?;
        let at = self.written;
        self.written += u64::from(len);
        Ok((at, len))
    }

    /// Makes everything appended so far readable with [`SpillFile::read`].
    pub fn flush(&mut self) -> Result<()> {
        self.out
            .flush()
            .map_err(|e| Error::Storage(format!("writing {} failed: {e}", self.path.display())))
    }

    /// The `len` bytes at `offset` (appended and flushed before).
    pub fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>> {
        read_at(&self.reader, &self.path, offset, len as usize)
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
