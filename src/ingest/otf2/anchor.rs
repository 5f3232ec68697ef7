//! The anchor file (`traces.otf2`, or any name): the archive's version, chunk sizes and
//! number of locations. Its name also names the archive's other files: `<name>.def` holds
//! the global definitions and `<name>/` the per-location event and definition files.

use std::path::{Path, PathBuf};

use super::reader::{ChunkReader, Decoder, BIG_ENDIAN, CHUNK_HEADER, END_OF_FILE, LITTLE_ENDIAN};
use crate::error::{Error, Result};

/// The magic string an anchor file starts with (after its buffer header).
const MAGIC: &str = "OTF2";
/// The oldest archive version read.
pub const OLDEST_VERSION: (u8, u8) = (1, 0);
/// The newest major version read.
pub const NEWEST_MAJOR: u8 = 3;
/// The anchor file format whose layout this reader knows to its end (OTF2 2.x and 3.x).
const KNOWN_ANCHOR_FORMAT: u8 = 3;

/// What the anchor file says about the archive.
#[derive(Debug, Clone)]
pub struct Anchor {
    /// The anchor file's path.
    pub path: PathBuf,
    /// OTF2 version that wrote the archive (major, minor, bugfix).
    pub version: (u8, u8, u8),
    /// Chunk size of event files.
    pub event_chunk_size: u64,
    /// Chunk size of definition files.
    pub def_chunk_size: u64,
    /// Number of global definitions.
    pub global_definitions: u64,
    /// The machine it was recorded on.
    pub machine: String,
    /// The tool that wrote it (`Score-P 7.1`).
    pub creator: String,
    /// Free-form description.
    pub description: String,
}

impl Anchor {
    /// The global definitions file (`<name>.def` beside the anchor).
    pub fn global_defs_path(&self) -> PathBuf {
        self.path.with_extension("def")
    }

    /// The folder of per-location files (`<name>/` beside the anchor).
    pub fn location_dir(&self) -> PathBuf {
        self.path.with_extension("")
    }

    /// The event file of `location`.
    pub fn event_path(&self, location: u64) -> PathBuf {
        self.location_dir().join(format!("{location}.evt"))
    }

    /// The local definitions file of `location` (optional in an archive).
    pub fn local_defs_path(&self, location: u64) -> PathBuf {
        self.location_dir().join(format!("{location}.def"))
    }
}

/// Whether the file at `path` starts like an OTF2 anchor file: a chunk header (its type and
/// endianness bytes), then the magic string with its NUL.
pub fn looks_like_anchor(path: &Path) -> bool {
    let mut head = [0u8; 2 + MAGIC.len() + 1];
    match std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)) {
        Ok(()) => {
            let (header, magic) = head.split_at(2);
            header[0] == CHUNK_HEADER
                && matches!(header[1], LITTLE_ENDIAN | BIG_ENDIAN)
                && magic.strip_suffix(&[0]) == Some(MAGIC.as_bytes())
        }
        Err(_) => false,
    }
}

/// Reads the anchor file at `path`.
pub fn read(path: &Path) -> Result<Anchor> {
    let mut r = ChunkReader::open(path, 0, false)?;
    // The anchor is a buffer without records: read its whole body in one piece.
    let len = r.len();
    let start = r.offset();
    let data = read_rest(&mut r, len)?;
    let mut d = Decoder::new(&data, r.big_endian());
    let fail = |f: super::reader::Fault| {
        r.error(
            start + f.at as u64,
            "bad anchor file",
            f.what.replace("the record", "the anchor file"),
        )
    };
    let magic = d.string("magic").map_err(fail)?;
    if magic != MAGIC {
        return Err(r.error(
            start,
            "not an OTF2 anchor file",
            format!("expected the magic string \"OTF2\", found {magic:?}"),
        ));
    }
    let anchor_format = d.u8("anchor format").map_err(fail)?;
    let _trace_format = d.u8("trace format").map_err(fail)?;
    let version_at = start + d.pos() as u64;
    let version = (
        d.u8("version").map_err(fail)?,
        d.u8("version").map_err(fail)?,
        d.u8("version").map_err(fail)?,
    );
    if (version.0, version.1) < OLDEST_VERSION || version.0 > NEWEST_MAJOR {
        return Err(r.error(
            version_at,
            "unsupported version",
            format!(
                "the archive was written by OTF2 {}.{}.{}; mtfdb reads OTF2 {}.{} to {}.x",
                version.0, version.1, version.2, OLDEST_VERSION.0, OLDEST_VERSION.1, NEWEST_MAJOR
            ),
        ));
    }
    let event_chunk_size = d.u64_full("event chunk size").map_err(fail)?;
    let def_chunk_size = d.u64_full("definition chunk size").map_err(fail)?;
    let substrate_at = start + d.pos() as u64;
    let substrate = d.u8("file substrate").map_err(fail)?;
    let compression = d.u8("compression").map_err(fail)?;
    // Substrates: 1 POSIX (a file per location), 2 SION (containers), 3 none.
    if substrate != 1 {
        return Err(r.error(
            substrate_at,
            "unsupported archive",
            format!(
                "the archive uses file substrate {substrate}{}; mtfdb reads archives with a file per location (POSIX)",
                if substrate == 2 { " (SIONlib containers)" } else { "" }
            ),
        ));
    }
    // Compression: 0 undefined, 1 none, 2 zlib.
    if compression > 1 {
        return Err(r.error(
            substrate_at + 1,
            "unsupported archive",
            "the archive's files are zlib-compressed; mtfdb reads uncompressed archives (record without OTF2 compression)",
        ));
    }
    for (size, what) in [(event_chunk_size, "event"), (def_chunk_size, "definition")] {
        if !(1024..=1 << 30).contains(&size) {
            return Err(r.error(
                start,
                "bad anchor file",
                format!("the {what} chunk size {size} is not plausible"),
            ));
        }
    }
    let _ = d.u64_full("number of locations").map_err(fail)?;
    let global_definitions = d.u64_full("number of global definitions").map_err(fail)?;
    let machine = d.string("machine name").map_err(fail)?;
    let creator = d.string("creator").map_err(fail)?;
    let description = d.string("description").map_err(fail)?;
    // Archive properties (`OTF2::…` name, value) and the trace's identifier (format 2 on), the
    // snapshot and thumbnail counts (format 3 on): not used, but checked to be whole, as
    // OTF2's own reader does, so that a truncated anchor is refused.
    if anchor_format > 1 {
        let n = d.u32_full("number of properties").map_err(fail)?;
        for _ in 0..n {
            let _ = d.string("property name").map_err(fail)?;
            let _ = d.string("property value").map_err(fail)?;
        }
        let _ = d.u64_full("trace identifier").map_err(fail)?;
    }
    if anchor_format > 2 {
        let _ = d.u32_full("number of snapshots").map_err(fail)?;
        let _ = d.u32_full("number of thumbnails").map_err(fail)?;
    }
    // The end-of-file marker closes the anchor of the format this reader knows; later
    // formats may hold more before it.
    if anchor_format == KNOWN_ANCHOR_FORMAT {
        let at = start + d.pos() as u64;
        let marker = d.u8("end-of-file marker").map_err(fail)?;
        if marker != END_OF_FILE {
            return Err(r.error(
                at,
                "bad anchor file",
                format!("expected the end-of-file marker {END_OF_FILE}, found {marker}"),
            ));
        }
    }
    Ok(Anchor {
        path: path.to_path_buf(),
        version,
        event_chunk_size,
        def_chunk_size,
        global_definitions,
        machine,
        creator,
        description,
    })
}

fn read_rest(r: &mut ChunkReader, len: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let at = r.offset();
    let mut f = std::fs::File::open(r.path()).map_err(|e| Error::io(r.path(), e))?;
    let mut data = Vec::with_capacity(len.saturating_sub(at) as usize);
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(at))
        .and_then(|_| f.read_to_end(&mut data))
        .map_err(|e| Error::io(r.path(), e))?;
    Ok(data)
}
