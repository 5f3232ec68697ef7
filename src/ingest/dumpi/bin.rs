//! One rank's `.bin` file: its index, header and tables, and the windowed stream of its call
//! records.
//!
//! Every integer is big-endian. The file starts with the 8-byte magic `ff aa dd 44 55 4d 50 49`
//! and ends with an index: the magic again, then the byte offsets of the datatype sizes table,
//! the function address labels, the performance counter labels, the header, the call stream
//! (the "body"), the footer and the key/value record (8 bytes each; files written before
//! DUMPI 0.6.6 lack the first three, each older one lacking one more, and a missing entry is
//! told apart by the magic starting earlier). The header holds the version (3 bytes), the
//! start time (8), the host and user names (a 16-bit length and the bytes) and the mesh
//! description. The footer holds the footer magic `f007fee7` (8 bytes) and, per MPI
//! function, how often it was called and how often the tracer ignored it (4 bytes each).
//! The sizes table is a count and one 4-byte size per datatype index; the address labels a
//! count and per function its address (8) and name; the counter labels a count and names.
//!
//! The call stream starts with the CPU and wall-clock second offsets (4 bytes each) that
//! every record's 16-bit seconds are relative to, then holds the records back to back (no
//! lengths: a record is known only by decoding its fields) up to an end-of-stream label.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The magic at the start of every `.bin` file and of its index.
pub(crate) const MAGIC: u64 = 0xffaa_dd44_554d_5049;
/// The magic that starts the footer.
const FOOTER_MAGIC: u64 = 0xf007_fee7;
/// Index entries after the index magic in a current file.
const INDEX_ENTRIES: u64 = 7;
/// Bytes of file windows read at a time when few ranks are read at once.
const MAX_WINDOW: usize = 256 * 1024;
/// Bytes of all ranks' windows together, when many ranks are read at once.
const WINDOWS_BUDGET: usize = 64 * 1024 * 1024;
/// Ranks up to which every rank's file stays open while it is read; with more, a file is
/// opened for each window it fills (systems limit open files to about a thousand).
const KEEP_OPEN_RANKS: usize = 256;

/// The version of DUMPI that wrote a file (major, minor, patch).
pub(crate) type Version = [u8; 3];

/// Whether `v` is at least `at`.
pub(crate) fn version_at_least(v: Version, at: Version) -> bool {
    v >= at
}

/// The rule of the error a cut file's stream gives where its data ends ([`RankFile::cut`]).
pub(crate) const CUT_SHORT: &str = "file cut short";

/// Whether `e` is the end of a cut file's data rather than damage.
pub(crate) fn is_cut_short(e: &Error) -> bool {
    matches!(e, Error::Input(i) if i.rule == CUT_SHORT)
}

/// An input error about `path` at byte `offset`.
pub(crate) fn error_at(path: &Path, offset: u64, rule: &str, message: impl Into<String>) -> Error {
    Error::input(path.display().to_string(), 0, offset, rule, message, "")
}

/// The index, header and tables of one rank's file.
#[derive(Debug, Clone)]
pub(crate) struct RankFile {
    /// The file.
    pub path: PathBuf,
    /// The DUMPI version that wrote it.
    pub version: Version,
    /// The start time the header records (seconds since the Unix epoch).
    pub start_time: u64,
    /// The host the rank ran on.
    pub hostname: String,
    /// The user who ran it.
    pub username: String,
    /// Offset of the call stream.
    pub body: u64,
    /// Offset where the call stream must end at the latest (the first table after it).
    pub stream_end: u64,
    /// Calls per MPI function (by function label), from the footer; `None` without a footer.
    pub call_counts: Option<Vec<u32>>,
    /// Datatype sizes in bytes, by datatype index (empty without a sizes table).
    pub type_sizes: Vec<i32>,
    /// Performance counters recorded with each call (the counter labels' count).
    pub perf_counters: u32,
    /// Profiled user functions: (address, name).
    pub functions: Vec<(u64, String)>,
    /// The file is cut short: its calls are read up to its end, where the last one may be cut.
    pub cut: bool,
}

/// Random-access reads of a file's tables, with errors that name the offset.
struct Tables<'a> {
    path: &'a Path,
    file: File,
    len: u64,
    pos: u64,
}

impl Tables<'_> {
    fn seek(&mut self, offset: u64) -> Result<()> {
        self.file
            .seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(self.path, e))?;
        self.pos = offset;
        Ok(())
    }

    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        if self.len.saturating_sub(self.pos) < n {
            return Err(error_at(
                self.path,
                self.pos,
                "truncated file",
                format!(
                    "the {what} ({n} bytes from byte {}) runs past the end of the file (byte {})",
                    self.pos, self.len
                ),
            ));
        }
        let mut buf = vec![0u8; n as usize];
        self.file
            .read_exact(&mut buf)
            .map_err(|e| Error::io(self.path, e))?;
        self.pos += n;
        Ok(buf)
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.bytes(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.bytes(8, what)?;
        #[allow(clippy::expect_used)] // bytes(8) returned exactly 8 bytes
        Ok(u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u16(what)?;
        let b = self.bytes(u64::from(n), what)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// A count of `size`-byte entries that must fit in the file.
    fn count(&mut self, size: u64, what: &str) -> Result<u32> {
        let at = self.pos;
        let n = self.u32(what)?;
        if u64::from(n) * size > self.len.saturating_sub(self.pos) {
            return Err(error_at(
                self.path,
                at,
                "bad table",
                format!(
                    "the {what} announces {n} entries, more than the {} bytes left in the file hold",
                    self.len.saturating_sub(self.pos)
                ),
            ));
        }
        Ok(n)
    }
}

impl RankFile {
    /// Reads the magic, index, header, footer and tables of the file at `path`.
    pub fn open(path: &Path) -> Result<RankFile> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut t = Tables {
            path,
            file,
            len,
            pos: 0,
        };
        if len < 8 || t.u64("magic")? != MAGIC {
            return Err(error_at(
                path,
                0,
                "bad magic",
                "the file does not start with DUMPI's magic ff aa dd 44 55 4d 50 49 (not a DUMPI .bin file)",
            ));
        }
        let [sizes, addresses, counters, header, body, footer, keyval] = read_index(&mut t)?;
        let index_start = len - 8 * (INDEX_ENTRIES + 1);
        for (what, at) in [
            ("header", header),
            ("call stream", body),
            ("footer", footer),
            ("datatype sizes table", sizes),
            ("function address table", addresses),
            ("counter label table", counters),
            ("key/value record", keyval),
        ] {
            if at >= len {
                return Err(error_at(
                    path,
                    index_start,
                    "bad index",
                    format!("the index puts the {what} at byte {at}, past the end of the file (byte {len})"),
                ));
            }
        }
        if body == 0 || header == 0 {
            return Err(error_at(
                path,
                index_start,
                "bad index",
                "the index names no call stream or no header (the tracer did not finish the file)",
            ));
        }
        // The stream ends where the first of the other parts begins.
        let stream_end = [sizes, addresses, counters, header, footer, keyval]
            .into_iter()
            .filter(|&at| at > body)
            .fold(index_start, u64::min);

        t.seek(header)?;
        let mut version = [0u8; 3];
        for v in &mut version {
            *v = t.u8("header's version")?;
        }
        let start_time = t.u64("header's start time")?;
        let hostname = t.string("header's host name")?;
        let username = t.string("header's user name")?;

        let call_counts = if footer > 0 {
            t.seek(footer)?;
            let magic = t.u64("footer magic")?;
            if magic != FOOTER_MAGIC {
                return Err(error_at(
                    path,
                    footer,
                    "bad magic",
                    format!(
                        "the footer starts with {magic:#x}, not DUMPI's footer magic 0xf007fee7"
                    ),
                ));
            }
            let n = u64::from(super::funcs::ALL_FUNCTIONS) + 1;
            let raw = t.bytes(4 * n, "footer's call counts")?;
            Some(
                raw.chunks_exact(4)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            )
        } else {
            None
        };

        let mut type_sizes = Vec::new();
        if sizes > 0 {
            t.seek(sizes)?;
            let n = t.count(4, "datatype sizes table")?;
            let raw = t.bytes(4 * u64::from(n), "datatype sizes table")?;
            type_sizes = raw
                .chunks_exact(4)
                .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
        }
        let mut perf_counters = 0;
        if counters > 0 {
            t.seek(counters)?;
            perf_counters = t.count(2, "counter label table")?;
        }
        let mut functions = Vec::new();
        if addresses > 0 {
            t.seek(addresses)?;
            let n = t.count(10, "function address table")?;
            for _ in 0..n {
                let address = t.u64("function address")?;
                let name = t.string("function name")?;
                functions.push((address, name));
            }
        }
        Ok(RankFile {
            path: path.to_path_buf(),
            version,
            start_time,
            hostname,
            username,
            body,
            stream_end,
            call_counts,
            type_sizes,
            perf_counters,
            functions,
            cut: false,
        })
    }

    /// A rank file of `len` bytes cut short (it ends before its index): libdumpi writes the
    /// call stream right after the magic and the header, tables and index only when the rank
    /// finishes, so the calls before the cut are read as a complete rank `like` of the same
    /// trace lays them out (version, counters per record). The file's own tables are lost:
    /// no datatype sizes (bytes are counted as 0 and reported), no names of profiled
    /// functions, no host.
    pub fn cut(path: &Path, len: u64, like: &RankFile) -> RankFile {
        RankFile {
            path: path.to_path_buf(),
            version: like.version,
            start_time: like.start_time,
            hostname: String::new(),
            username: String::new(),
            body: 8,
            stream_end: len,
            call_counts: None,
            type_sizes: Vec::new(),
            perf_counters: like.perf_counters,
            functions: Vec::new(),
            cut: true,
        }
    }

    /// How often the footer says `func` was called (`None` without a footer).
    pub fn calls(&self, func: u16) -> Option<u32> {
        self.call_counts
            .as_ref()
            .map(|c| c.get(usize::from(func)).copied().unwrap_or(0))
    }
}

/// Reads the index at the end of the file: the offsets of (sizes, addresses, counters,
/// header, body, footer, key/values), 0 for the entries an older file lacks.
fn read_index(t: &mut Tables<'_>) -> Result<[u64; 7]> {
    let size = 8 * (INDEX_ENTRIES + 1);
    let start = t.len.checked_sub(size).filter(|&s| s >= 8).ok_or_else(|| {
        error_at(
            t.path,
            t.len,
            "truncated file",
            format!(
                "the file has {} bytes, too few for DUMPI's magic and index",
                t.len
            ),
        )
    })?;
    t.seek(start)?;
    let mut entries = [0u64; 7];
    // An older file's index is shorter: its magic comes one, two or three entries later.
    let mut first = 0;
    while t.u64("index")? != MAGIC {
        first += 1;
        if first > 3 {
            return Err(error_at(
                t.path,
                start,
                "truncated file",
                "the file does not end with DUMPI's index (its last 64 bytes hold no index magic): \
                 it is truncated, or the tracer never closed it",
            ));
        }
    }
    for e in entries.iter_mut().skip(first) {
        *e = t.u64("index")?;
    }
    Ok(entries)
}

/// The call stream of one rank's file, read through a window so that memory stays bounded
/// whatever the file's size. Every read names the byte offset of the record it is in when it
/// fails.
pub(crate) struct Stream {
    path: PathBuf,
    file: Option<File>,
    keep_open: bool,
    window: usize,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_off: u64,
    pos: usize,
    end: u64,
    /// Offset of the record being decoded, for error messages.
    pub record: u64,
    /// Name of the record being decoded, for error messages.
    pub record_name: &'static str,
    /// The file is cut short ([`RankFile::cut`]): running past its end is [`CUT_SHORT`].
    cut: bool,
}

impl Stream {
    /// A stream over `file`'s calls; `ranks` is how many ranks are read at once (it sizes the
    /// window and says whether the file stays open).
    pub fn open(file: &RankFile, ranks: usize) -> Result<Stream> {
        let window = (WINDOWS_BUDGET / ranks.max(1)).clamp(8 * 1024, MAX_WINDOW);
        let mut s = Stream {
            path: file.path.clone(),
            file: None,
            keep_open: ranks <= KEEP_OPEN_RANKS,
            window,
            buf: Vec::new(),
            buf_off: file.body,
            pos: 0,
            end: file.stream_end,
            record: file.body,
            record_name: "call stream",
            cut: file.cut,
        };
        if s.keep_open {
            s.file = Some(File::open(&s.path).map_err(|e| Error::io(&s.path, e))?);
        }
        Ok(s)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.buf_off + self.pos as u64
    }

    /// Bytes left before the end of the call stream.
    pub fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.offset())
    }

    /// An input error about the current record.
    pub fn error(&self, rule: &str, message: impl Into<String>) -> Error {
        error_at(&self.path, self.record, rule, message)
    }

    /// The error of a record that runs past the end of the stream: damage, or, in a cut
    /// file, where its data ends.
    fn past_end(&self, message: String) -> Error {
        self.error(if self.cut { CUT_SHORT } else { "bad record" }, message)
    }

    /// Makes `n` bytes available in the window.
    #[inline]
    fn need(&mut self, n: usize) -> Result<()> {
        if self.buf.len() - self.pos >= n {
            return Ok(());
        }
        self.refill(n)
    }

    #[cold]
    fn refill(&mut self, n: usize) -> Result<()> {
        if self.remaining() < n as u64 {
            return Err(self.past_end(
                format!(
                    "the {} record starting at byte {} runs past the end of the call stream (byte {}, where the file's tables begin)",
                    self.record_name, self.record, self.end
                ),
            ));
        }
        self.buf_off += self.pos as u64;
        self.buf.drain(..self.pos);
        self.pos = 0;
        let want = (self.remaining() as usize).min(self.window.max(n));
        let have = self.buf.len();
        self.buf.resize(want, 0);
        let at = self.buf_off + have as u64;
        let result = match self.file.as_mut() {
            Some(f) => read_window(f, at, &mut self.buf[have..]),
            None => File::open(&self.path)
                .and_then(|mut f| read_window(&mut f, at, &mut self.buf[have..])),
        };
        result.map_err(|e| Error::io(&self.path, e))?;
        if !self.keep_open {
            self.file = None;
        }
        Ok(())
    }

    #[inline]
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.need(N)?;
        #[allow(clippy::expect_used)] // the slice is exactly N bytes long
        let b: [u8; N] = self.buf[self.pos..self.pos + N]
            .try_into()
            .expect("N bytes");
        self.pos += N;
        Ok(b)
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }

    /// A big-endian 16-bit integer.
    #[inline]
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.take()?))
    }

    /// A big-endian 32-bit integer.
    #[inline]
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.take()?))
    }

    /// A big-endian 64-bit integer.
    #[inline]
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.take()?))
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: u64) -> Result<()> {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.need(n)?;
        self.pos += n;
        Ok(())
    }

    /// `n` bytes as text (invalid UTF-8 replaced).
    pub fn text(&mut self, n: u64) -> Result<String> {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.need(n)?;
        let s = String::from_utf8_lossy(&self.buf[self.pos..self.pos + n]).into_owned();
        self.pos += n;
        Ok(s)
    }

    /// A count of entries of `size` bytes each that must fit in what is left of the stream.
    pub fn count(&mut self, size: u64, what: &str) -> Result<u32> {
        let n = self.u32()?;
        if u64::from(n).saturating_mul(size.max(1)) > self.remaining() {
            return Err(self.past_end(
                format!(
                    "the {} record starting at byte {} announces {n} {what}, more than the {} bytes left in the call stream hold",
                    self.record_name,
                    self.record,
                    self.remaining()
                ),
            ));
        }
        Ok(n)
    }

    /// Whether the file is cut short ([`RankFile::cut`]).
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// The [`CUT_SHORT`] error of a cut file whose data ends between two records.
    pub fn cut_at_end(&self) -> Error {
        self.error(
            CUT_SHORT,
            format!(
                "the file ends at byte {} without DUMPI's end-of-stream label",
                self.end
            ),
        )
    }

    /// Whether the stream has no byte left.
    pub fn at_end(&self) -> bool {
        self.remaining() == 0
    }
}

fn read_window(f: &mut File, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(buf)
}
