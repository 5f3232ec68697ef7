//! The byte level of OTF2: chunked buffers, compressed integers, record framing.
//!
//! Every OTF2 file (anchor, definitions, events) is a buffer of records. Definition and
//! event files are cut into fixed-size chunks (the sizes are in the anchor file); each chunk
//! starts with a header (`3`, an endianness byte, and for chunked files the numbers of its
//! first and last event) and ends with an end-of-chunk byte (`0`); the last one ends with an
//! end-of-file byte (`2`) instead. Records are a type byte followed by a length (one byte,
//! or `0xff` and eight bytes) and the fields. In event files a timestamp record (`5` and eight
//! bytes) precedes an event whenever the time changed, an attribute list (`6`, with a length)
//! may precede an event, and ten event types of OTF2 1.1 are "singletons" without a length:
//! their body is one compressed integer.
//!
//! Integers are stored compressed: a size byte (0 means zero, `0xff` means all ones, 1 to 8
//! the number of significant bytes that follow, in the file's byte order).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Record type: end of a chunk.
pub(crate) const END_OF_CHUNK: u8 = 0;
/// Record type: end of the file.
pub(crate) const END_OF_FILE: u8 = 2;
/// Record type: chunk header.
pub(crate) const CHUNK_HEADER: u8 = 3;
/// Record type: the time of the following events.
pub(crate) const TIMESTAMP: u8 = 5;
/// Record type: the attribute list of the following event.
pub(crate) const ATTRIBUTE_LIST: u8 = 6;

/// Chunk header byte: the file is big-endian.
pub(crate) const BIG_ENDIAN: u8 = 0x23;
/// Chunk header byte: the file is little-endian.
pub(crate) const LITTLE_ENDIAN: u8 = 0x42;
/// Bytes read from a file at a time.
const WINDOW: usize = 64 * 1024;

/// Windows of a file the kernel is asked to read ahead of the one just read.
const READ_AHEAD_WINDOWS: u64 = 2;

/// Asks the kernel to start reading `len` bytes of `file` from `offset` into its page cache
/// now, without waiting for them. The merge reads every location's file a window at a time,
/// in turns: where some of a file's pages had left the cache, each window read waited for
/// the disk (`perf sched`: the reading thread asleep in `read` 224 times in one 64-rank
/// import; by hand, runs that met 4% of the archive's pages evicted took about twice as
/// long), while the next window is not needed before every other location has had its turn.
/// Advice only: a kernel that ignores it costs nothing but the call.
fn read_ahead(file: &File, offset: u64, len: u64) {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    {
        let _ = rustix::fs::fadvise(
            file,
            offset,
            std::num::NonZeroU64::new(len),
            rustix::fs::Advice::WillNeed,
        );
    }
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let _ = (file, offset, len);
}

/// How a file is read: the size of the window read at a time, and whether the file stays
/// open between reads (an archive of many locations reopens each file when its window runs
/// out, so that open descriptors stay bounded).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadPlan {
    pub window: usize,
    pub keep_open: bool,
}

impl Default for ReadPlan {
    fn default() -> ReadPlan {
        ReadPlan {
            window: WINDOW,
            keep_open: true,
        }
    }
}

/// A decoding fault inside a record: what was wrong, at which byte of the slice decoded.
#[derive(Debug)]
pub(crate) struct Fault {
    pub at: usize,
    pub what: String,
}

/// Decodes the fields of one record (or any slice) of an OTF2 buffer.
pub(crate) struct Decoder<'a> {
    /// The record, possibly followed by more bytes of the buffer (never decoded, but they let
    /// a compressed integer be read with one 8-byte load).
    data: &'a [u8],
    /// The end of the record in `data`.
    end: usize,
    pos: usize,
    big: bool,
}

impl<'a> Decoder<'a> {
    pub fn new(data: &'a [u8], big_endian: bool) -> Decoder<'a> {
        Decoder::within(data, data.len(), big_endian)
    }

    /// A decoder of the record `data[..end]`.
    pub fn within(data: &'a [u8], end: usize, big_endian: bool) -> Decoder<'a> {
        Decoder {
            data,
            end,
            pos: 0,
            big: big_endian,
        }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether fields remain (records of later OTF2 versions append fields at the end).
    pub fn has_more(&self) -> bool {
        self.pos < self.end
    }

    fn fault(&self, what: impl Into<String>) -> Fault {
        Fault {
            at: self.pos,
            what: what.into(),
        }
    }

    #[inline]
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], Fault> {
        if self.end - self.pos < n {
            return Err(self.short(n, what));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[cold]
    fn short(&self, n: usize, what: &str) -> Fault {
        self.fault(format!(
            "the record ends inside its {what} ({} bytes needed, {} left)",
            n,
            self.end - self.pos
        ))
    }

    #[inline]
    pub fn u8(&mut self, what: &str) -> std::result::Result<u8, Fault> {
        Ok(self.take(1, what)?[0])
    }

    /// A full-width (uncompressed) 64-bit integer.
    pub fn u64_full(&mut self, what: &str) -> std::result::Result<u64, Fault> {
        // `take(8)` returns exactly 8 bytes.
        #[allow(clippy::expect_used)]
        let b: [u8; 8] = self.take(8, what)?.try_into().expect("8 bytes");
        Ok(if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    /// A full-width 32-bit integer.
    pub fn u32_full(&mut self, what: &str) -> std::result::Result<u32, Fault> {
        // `take(4)` returns exactly 4 bytes.
        #[allow(clippy::expect_used)]
        let b: [u8; 4] = self.take(4, what)?.try_into().expect("4 bytes");
        Ok(if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    /// A compressed integer of at most `max` bytes.
    #[inline]
    fn compressed(&mut self, max: u8, what: &str) -> std::result::Result<u64, Fault> {
        // Fast path: a little-endian value inside the record, with 8 bytes readable after its
        // size byte.
        if !self.big && self.pos < self.end {
            let size = self.data[self.pos];
            if size == 0 {
                self.pos += 1;
                return Ok(0);
            }
            if size <= max && self.end - self.pos > size as usize && self.data.len() - self.pos > 8
            {
                // A range of 8 bytes, checked to be inside the data just above.
                #[allow(clippy::expect_used)]
                let b: [u8; 8] = self.data[self.pos + 1..self.pos + 9]
                    .try_into()
                    .expect("8 bytes");
                let v = u64::from_le_bytes(b);
                self.pos += 1 + size as usize;
                return Ok(if size == 8 {
                    v
                } else {
                    v & ((1u64 << (8 * size)) - 1)
                });
            }
        }
        self.compressed_slow(max, what)
    }

    #[cold]
    fn compressed_slow(&mut self, max: u8, what: &str) -> std::result::Result<u64, Fault> {
        let size = self.u8(what)?;
        match size {
            0 => Ok(0),
            0xff => Ok(if max == 4 { u32::MAX as u64 } else { u64::MAX }),
            n if n > max => Err(Fault {
                at: self.pos - 1,
                what: format!("the {what} has an invalid compressed size {n} (at most {max})"),
            }),
            n => {
                let bytes = self.take(n as usize, what)?;
                let mut v = 0u64;
                if self.big {
                    for &b in bytes {
                        v = (v << 8) | b as u64;
                    }
                } else {
                    for &b in bytes.iter().rev() {
                        v = (v << 8) | b as u64;
                    }
                }
                Ok(v)
            }
        }
    }

    /// A compressed 32-bit integer (`0xff` is `u32::MAX`, OTF2's "undefined").
    #[inline]
    pub fn u32(&mut self, what: &str) -> std::result::Result<u32, Fault> {
        self.compressed(4, what).map(|v| v as u32)
    }

    /// A compressed 64-bit integer (`0xff` is `u64::MAX`).
    #[inline]
    pub fn u64(&mut self, what: &str) -> std::result::Result<u64, Fault> {
        self.compressed(8, what)
    }

    /// A NUL-terminated string (invalid UTF-8 is replaced, not refused).
    pub fn string(&mut self, what: &str) -> std::result::Result<String, Fault> {
        let rest = &self.data[self.pos..self.end];
        match memchr::memchr(0, rest) {
            Some(n) => {
                let s = String::from_utf8_lossy(&rest[..n]).into_owned();
                self.pos += n + 1;
                Ok(s)
            }
            None => Err(self.fault(format!("the {what} has no terminating NUL byte"))),
        }
    }
}

/// What [`ChunkReader::next`] found.
pub(crate) enum Next {
    /// A record: its type, the file offset of its type byte, and its body in the window
    /// ([`ChunkReader::body`]).
    Record { kind: u8, offset: u64 },
    /// The end-of-file marker.
    End,
}

/// Reads the records of one OTF2 file in order, holding only a window of it in memory.
pub(crate) struct ChunkReader {
    path: PathBuf,
    /// The open file, between reads only when the plan keeps it open.
    file: Option<File>,
    plan: ReadPlan,
    len: u64,
    /// 0 for an unchunked buffer (the anchor file).
    chunk_size: u64,
    events: bool,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_off: u64,
    pos: usize,
    chunk_start: u64,
    chunk_end: u64,
    big: bool,
    body: (usize, usize),
    /// The current time of an event file (raw ticks).
    pub time: u64,
}

impl ChunkReader {
    /// Opens `path` and reads its first chunk header. `events` selects event-file framing
    /// (timestamps and singleton records).
    pub fn open(path: &Path, chunk_size: u64, events: bool) -> Result<ChunkReader> {
        ChunkReader::open_with(path, chunk_size, events, ReadPlan::default())
    }

    /// Opens `path` to be read as `plan` says.
    pub fn open_with(
        path: &Path,
        chunk_size: u64,
        events: bool,
        plan: ReadPlan,
    ) -> Result<ChunkReader> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut r = ChunkReader {
            path: path.to_path_buf(),
            file: Some(file),
            plan,
            len,
            chunk_size,
            events,
            buf: Vec::with_capacity(plan.window),
            buf_off: 0,
            pos: 0,
            chunk_start: 0,
            chunk_end: 0,
            big: false,
            body: (0, 0),
            time: 0,
        };
        r.start_chunk(0)?;
        Ok(r)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The file offset of the next byte to read.
    pub fn offset(&self) -> u64 {
        self.buf_off + self.pos as u64
    }

    /// An input error about this file at byte `offset`.
    pub fn error(&self, offset: u64, rule: &str, message: impl Into<String>) -> Error {
        Error::input(
            self.path.display().to_string(),
            0,
            offset,
            rule,
            message,
            "",
        )
    }

    /// A file that ends at byte `offset` inside its data ([`Error::is_truncated`]).
    fn cut_at(&self, offset: u64, message: String) -> Error {
        Error::truncated(self.path.display().to_string(), offset, message)
    }

    fn truncated(&self, record_start: u64) -> Error {
        if record_start >= self.len {
            self.cut_at(
                self.len,
                format!(
                    "the file ends at byte {} without OTF2's end-of-file marker",
                    self.len
                ),
            )
        } else {
            self.cut_at(
                record_start,
                format!(
                    "the record starting at byte {record_start} runs past the end of the file (byte {})",
                    self.len
                ),
            )
        }
    }

    /// Makes `n` bytes from the current position available in the window.
    #[inline]
    fn ensure(&mut self, n: usize, record_start: u64) -> Result<()> {
        if self.buf.len() - self.pos >= n {
            return Ok(());
        }
        self.refill(n, record_start)
    }

    #[cold]
    fn refill(&mut self, n: usize, record_start: u64) -> Result<()> {
        // Slide the window: drop what was read, then read at least a window's worth.
        self.buf.drain(..self.pos);
        self.buf_off += self.pos as u64;
        self.pos = 0;
        let file_pos = self.buf_off + self.buf.len() as u64;
        let want = (n - self.buf.len()).max(self.plan.window) as u64;
        let available = self.len.saturating_sub(file_pos).min(want) as usize;
        if self.buf.len() + available < n {
            return Err(self.truncated(record_start));
        }
        let old = self.buf.len();
        self.buf.resize(old + available, 0);
        let mut file = match self.file.take() {
            Some(f) => f,
            None => File::open(&self.path).map_err(|e| Error::io(&self.path, e))?,
        };
        file.seek(SeekFrom::Start(file_pos))
            .and_then(|_| file.read_exact(&mut self.buf[old..]))
            .map_err(|e| Error::io(&self.path, e))?;
        read_ahead(
            &file,
            file_pos + available as u64,
            READ_AHEAD_WINDOWS * self.plan.window as u64,
        );
        if self.plan.keep_open {
            self.file = Some(file);
        }
        Ok(())
    }

    /// Moves to the chunk starting at file offset `at` and reads its header.
    fn start_chunk(&mut self, at: u64) -> Result<()> {
        if at < self.buf_off || at > self.buf_off + self.buf.len() as u64 {
            self.buf.clear();
            self.buf_off = at;
            self.pos = 0;
        } else {
            self.pos = (at - self.buf_off) as usize;
        }
        let header = if self.chunk_size > 0 { 18 } else { 2 };
        self.ensure(header, at)?;
        let kind = self.buf[self.pos];
        if kind != CHUNK_HEADER {
            return Err(self.error(
                at,
                "not an OTF2 buffer",
                format!("expected a chunk header (byte 3) at byte {at}, found byte {kind}"),
            ));
        }
        self.big = match self.buf[self.pos + 1] {
            BIG_ENDIAN => true,
            LITTLE_ENDIAN => false,
            other => {
                return Err(self.error(
                    at + 1,
                    "not an OTF2 buffer",
                    format!("invalid endianness byte {other:#04x} in the chunk header"),
                ))
            }
        };
        self.pos += header;
        self.chunk_start = at;
        self.chunk_end = if self.chunk_size > 0 {
            (at + self.chunk_size).min(self.len)
        } else {
            self.len
        };
        Ok(())
    }

    /// Whether the file is big-endian.
    pub fn big_endian(&self) -> bool {
        self.big
    }

    /// A decoder over the body of the last record.
    #[inline]
    pub fn decoder(&self) -> Decoder<'_> {
        Decoder::within(
            &self.buf[self.body.0..],
            self.body.1 - self.body.0,
            self.big,
        )
    }

    /// The file offset of the body of the last record.
    pub fn body_offset(&self) -> u64 {
        self.buf_off + self.body.0 as u64
    }

    /// Reads a record length at the current position (after the type byte).
    fn record_length(&mut self, start: u64) -> Result<usize> {
        self.ensure(1, start)?;
        let small = self.buf[self.pos];
        self.pos += 1;
        if small != 0xff {
            return Ok(small as usize);
        }
        self.ensure(8, start)?;
        // A range of 8 bytes, ensured to be in the window just above.
        #[allow(clippy::expect_used)]
        let b: [u8; 8] = self.buf[self.pos..self.pos + 8]
            .try_into()
            .expect("8 bytes");
        self.pos += 8;
        let n = if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        };
        if n > self.len {
            return Err(self.error(
                start,
                "corrupt record",
                format!("the record claims a length of {n} bytes, more than the file holds"),
            ));
        }
        Ok(n as usize)
    }

    /// The next record, skipping timestamps (which update [`ChunkReader::time`]), attribute
    /// lists and chunk boundaries.
    #[inline]
    pub fn next(&mut self) -> Result<Next> {
        // Fast path: an event record (with its timestamp) whose bytes are all in the window and
        // in the chunk. Anything else takes the general path below.
        if self.events && !self.big {
            let mut p = self.pos;
            let window = &self.buf[..];
            let chunk_left = self.chunk_end.saturating_sub(self.buf_off) as usize;
            let limit = window.len().min(chunk_left);
            if p + 9 < limit && window[p] == TIMESTAMP {
                // A range of 8 bytes, inside the window by the test above.
                #[allow(clippy::expect_used)]
                let b: [u8; 8] = window[p + 1..p + 9].try_into().expect("8 bytes");
                self.time = u64::from_le_bytes(b);
                p += 9;
                self.pos = p;
            }
            if p + 2 < limit {
                let kind = window[p];
                if kind > ATTRIBUTE_LIST {
                    let (header, n) = if is_singleton(kind) {
                        match window[p + 1] {
                            0xff => (1, 1),
                            s => (1, 1 + s as usize),
                        }
                    } else {
                        (2, window[p + 1] as usize)
                    };
                    if !(header == 2 && n == 0xff) && p + header + n <= limit {
                        self.body = (p + header, p + header + n);
                        self.pos = p + header + n;
                        return Ok(Next::Record {
                            kind,
                            offset: self.buf_off + p as u64,
                        });
                    }
                }
            }
        }
        self.next_slow()
    }

    fn next_slow(&mut self) -> Result<Next> {
        loop {
            let start = self.offset();
            if start >= self.chunk_end && self.chunk_end < self.len {
                return Err(self.error(
                    start,
                    "corrupt chunk",
                    format!(
                        "the chunk starting at byte {} has no end-of-chunk marker",
                        self.chunk_start
                    ),
                ));
            }
            self.ensure(1, start)?;
            let kind = self.buf[self.pos];
            self.pos += 1;
            match kind {
                END_OF_CHUNK if self.chunk_size > 0 => {
                    let next = self.chunk_start + self.chunk_size;
                    if next >= self.len {
                        return Err(self.cut_at(
                            self.len,
                            format!(
                                "the file ends at byte {} after a complete chunk, without OTF2's end-of-file marker",
                                self.len
                            ),
                        ));
                    }
                    self.start_chunk(next)?;
                }
                END_OF_FILE => return Ok(Next::End),
                TIMESTAMP if self.events => {
                    self.ensure(8, start)?;
                    // A range of 8 bytes, ensured to be in the window just above.
                    #[allow(clippy::expect_used)]
                    let b: [u8; 8] = self.buf[self.pos..self.pos + 8]
                        .try_into()
                        .expect("8 bytes");
                    self.pos += 8;
                    self.time = if self.big {
                        u64::from_be_bytes(b)
                    } else {
                        u64::from_le_bytes(b)
                    };
                }
                // Definition files have no attribute lists (type 6 is a Paradigm there).
                ATTRIBUTE_LIST if self.events => {
                    let n = self.record_length(start)?;
                    self.ensure(n, start)?;
                    self.pos += n;
                }
                _ => {
                    let n = if self.events && is_singleton(kind) {
                        // One compressed integer: its size byte says how long it is.
                        self.ensure(1, start)?;
                        match self.buf[self.pos] {
                            0xff => 1,
                            s => 1 + s as usize,
                        }
                    } else {
                        self.record_length(start)?
                    };
                    self.ensure(n, start)?;
                    let end = self.offset() + n as u64;
                    if end > self.chunk_end {
                        return Err(self.error(
                            start,
                            "corrupt record",
                            format!(
                                "the record of type {kind} starting at byte {start} runs past the end of its chunk (byte {})",
                                self.chunk_end
                            ),
                        ));
                    }
                    self.body = (self.pos, self.pos + n);
                    self.pos += n;
                    return Ok(Next::Record {
                        kind,
                        offset: start,
                    });
                }
            }
        }
    }
}

/// The event records of OTF2 1.1 that have no length field (one compressed value).
fn is_singleton(kind: u8) -> bool {
    // Enter, Leave, MpiIsendComplete, MpiIrecvRequest, MpiRequestTest, MpiRequestCancelled,
    // OmpFork, OmpTaskCreate, OmpTaskSwitch, OmpTaskComplete.
    matches!(kind, 12 | 13 | 16 | 17 | 20 | 21 | 24 | 28 | 29 | 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_integers_decode_in_both_byte_orders() {
        let le = [0u8, 2, 0x34, 0x12, 0xff, 3, 1, 0, 0];
        let mut d = Decoder::new(&le, false);
        assert_eq!(d.u32("a").unwrap(), 0);
        assert_eq!(d.u32("b").unwrap(), 0x1234);
        assert_eq!(d.u32("c").unwrap(), u32::MAX);
        assert_eq!(d.u64("d").unwrap(), 1);
        let be = [2u8, 0x12, 0x34, 0xff];
        let mut d = Decoder::new(&be, true);
        assert_eq!(d.u64("a").unwrap(), 0x1234);
        assert_eq!(d.u64("b").unwrap(), u64::MAX);
    }

    #[test]
    fn a_bad_compressed_size_or_a_short_record_is_a_fault() {
        let mut d = Decoder::new(&[5, 1, 2, 3, 4, 5], false);
        let f = d.u32("receiver").unwrap_err();
        assert_eq!(f.at, 0);
        assert!(f.what.contains("invalid compressed size 5"), "{}", f.what);
        let mut d = Decoder::new(&[4, 1, 2], false);
        let f = d.u32("tag").unwrap_err();
        assert!(f.what.contains("ends inside its tag"), "{}", f.what);
    }
}
