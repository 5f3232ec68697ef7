//! One OTF v1 stream file (master, definitions, events), plain text or zlib-compressed as
//! VampirTrace writes it (`NAME.1.events.z`), read line by line with its line numbers.
//!
//! OTF compresses a stream as one zlib stream that is flushed (`Z_FULL_FLUSH`) at every
//! buffer and never finished: a complete file ends on the empty stored block of a flush
//! (`00 00 ff ff`), or on the zlib stream's own end. A file that ends anywhere else was cut
//! short and is refused with the byte offset reached. (A file cut exactly at one of the
//! writer's flush points cannot be told from a shorter trace; its records are all whole.)

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::{Decompress, FlushDecompress, Status};

use crate::error::{Error, Result};
use crate::ingest::excerpt::shown_line;

/// The last bytes of a zlib stream flushed with `Z_SYNC_FLUSH` or `Z_FULL_FLUSH`.
const FLUSH_MARKER: [u8; 4] = [0, 0, 0xff, 0xff];

/// Bytes read from the file at a time, and the line buffer's capacity.
const CHUNK: usize = 1 << 16;

/// Why a compressed file cannot be read, and where (a compressed byte offset).
#[derive(Debug)]
struct Damage {
    offset: u64,
    rule: &'static str,
    message: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.message)
    }
}

impl std::error::Error for Damage {}

/// A zlib-compressed file, decompressed as it is read.
struct Inflate {
    file: File,
    input: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// The last four bytes read from the file (the whole file has been read once `eof`).
    tail: [u8; 4],
    z: Decompress,
    done: bool,
}

impl Inflate {
    fn new(file: File) -> Inflate {
        Inflate {
            file,
            input: vec![0; CHUNK],
            start: 0,
            end: 0,
            eof: false,
            tail: [0xaa; 4],
            z: Decompress::new(true),
            done: false,
        }
    }

    /// Reads more compressed bytes, keeping those not consumed yet.
    fn refill(&mut self) -> io::Result<()> {
        self.input.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        let n = self.file.read(&mut self.input[self.end..])?;
        if n == 0 {
            self.eof = true;
            return Ok(());
        }
        let read = &self.input[self.end..self.end + n];
        for &b in read.iter().rev().take(4).rev() {
            self.tail.rotate_left(1);
            self.tail[3] = b;
        }
        self.end += n;
        Ok(())
    }

    fn damage(&self, rule: &'static str, message: String) -> io::Error {
        io::Error::other(Damage {
            offset: self.z.total_in(),
            rule,
            message,
        })
    }
}

impl Read for Inflate {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.done || out.is_empty() {
            return Ok(0);
        }
        loop {
            if self.start == self.end && !self.eof {
                self.refill()?;
            }
            let (in_before, out_before) = (self.z.total_in(), self.z.total_out());
            let status = self
                .z
                .decompress(
                    &self.input[self.start..self.end],
                    out,
                    FlushDecompress::None,
                )
                .map_err(|e| self.damage("damaged zlib stream", e.to_string()))?;
            let used = (self.z.total_in() - in_before) as usize;
            let produced = (self.z.total_out() - out_before) as usize;
            self.start += used;
            if status == Status::StreamEnd {
                self.done = true;
                return Ok(produced);
            }
            if produced > 0 {
                return Ok(produced);
            }
            if self.start == self.end && self.eof {
                self.done = true;
                if self.z.total_in() > 0 && self.tail == FLUSH_MARKER {
                    return Ok(0);
                }
                return Err(self.damage(
                    "truncated zlib stream",
                    "the file ends inside a compressed block (a complete OTF stream ends at a flush point)"
                        .into(),
                ));
            }
            if used == 0 {
                if self.eof {
                    return Err(self.damage(
                        "truncated zlib stream",
                        "the file ends inside a compressed block".into(),
                    ));
                }
                self.refill()?;
            }
        }
    }
}

/// Whether `path` names a compressed stream (`.z`).
fn is_compressed(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "z")
}

/// The stream file `base` (`NAME.1.events`) or, if that does not exist, `base.z`; `None`
/// when neither does.
pub(crate) fn find(base: &Path) -> Option<PathBuf> {
    if base.is_file() {
        return Some(base.to_path_buf());
    }
    let mut z = base.as_os_str().to_owned();
    z.push(".z");
    let z = PathBuf::from(z);
    z.is_file().then_some(z)
}

/// A stream file read line by line.
pub(crate) struct LineReader {
    path: PathBuf,
    input: Box<dyn BufRead>,
    line: Vec<u8>,
    /// The 1-based number of the line last read (0 before the first).
    pub number: u64,
    /// Bytes (of the decompressed stream) in the complete lines read so far.
    pub offset: u64,
}

impl LineReader {
    /// Opens the stream file at `path` (decompressing it if its name ends in `.z`).
    pub fn open(path: &Path) -> Result<LineReader> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let input: Box<dyn BufRead> = if is_compressed(path) {
            Box::new(BufReader::with_capacity(CHUNK, Inflate::new(file)))
        } else {
            Box::new(BufReader::with_capacity(CHUNK, file))
        };
        Ok(LineReader {
            path: path.to_path_buf(),
            input,
            line: Vec::with_capacity(256),
            number: 0,
            offset: 0,
        })
    }

    /// Reads the next line ([`LineReader::line`]); `false` at the end of the file. A last
    /// line without an end of line is a record cut short: an error.
    pub fn advance(&mut self) -> Result<bool> {
        self.line.clear();
        let n = match self.input.read_until(b'\n', &mut self.line) {
            Ok(n) => n,
            Err(e) => return Err(self.read_error(e)),
        };
        if n == 0 {
            return Ok(false);
        }
        self.number += 1;
        if self.line.last() != Some(&b'\n') {
            let column = self.line.len() as u64 + 1;
            return Err(self.error(
                column,
                "truncated record",
                "the file ends inside a record (its last line has no end of line)",
            ));
        }
        self.offset += n as u64;
        self.line.pop();
        Ok(true)
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The line last read, without its end of line.
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// An error at `column` of the line last read, showing the line.
    pub fn error(&self, column: u64, rule: &str, message: impl Into<String>) -> Error {
        Error::input(
            self.path.display().to_string(),
            self.number,
            column,
            rule,
            message,
            shown_line(&String::from_utf8_lossy(&self.line), column),
        )
    }

    /// An error at line `line` of this stream, read earlier: a record whose item the
    /// import's checks refused when it was handed over.
    pub fn error_at_line(&self, line: u64, rule: &str, message: impl Into<String>) -> Error {
        Error::input(self.path.display().to_string(), line, 1, rule, message, "")
    }

    fn read_error(&self, e: io::Error) -> Error {
        match e.get_ref().and_then(|inner| inner.downcast_ref::<Damage>()) {
            Some(d) => Error::input(
                self.path.display().to_string(),
                0,
                d.offset,
                d.rule,
                format!(
                    "{} (after line {} of the decompressed text)",
                    d.message, self.number
                ),
                "",
            ),
            None => Error::io(&self.path, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compress, Compression, FlushCompress};
    use std::io::Write;

    /// Compresses `text` as OTF does: one zlib stream, flushed and never finished.
    fn otf_compress(text: &[u8]) -> Vec<u8> {
        let mut z = Compress::new(Compression::default(), true);
        let mut out = Vec::with_capacity(text.len() + 64);
        z.compress_vec(text, &mut out, FlushCompress::Full).unwrap();
        out
    }

    fn lines_of(path: &Path) -> Result<Vec<String>> {
        let mut r = LineReader::open(path)?;
        let mut lines = Vec::new();
        while r.advance()? {
            lines.push(String::from_utf8_lossy(r.line()).into_owned());
        }
        Ok(lines)
    }

    #[test]
    fn a_flushed_stream_reads_whole_and_a_cut_one_is_refused_with_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..5000).map(|i| format!("{i:x}\n*1\nE{i:x}\n")).collect();
        let data = otf_compress(text.as_bytes());
        assert_eq!(data[data.len() - 4..], FLUSH_MARKER);
        let path = dir.path().join("t.1.events.z");
        std::fs::write(&path, &data).unwrap();
        assert_eq!(lines_of(&path).unwrap().len(), 15000);

        let cut = data.len() - 100;
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data[..cut])
            .unwrap();
        let e = lines_of(&path).unwrap_err().to_string();
        assert!(e.contains("t.1.events.z: byte "), "{e}");
        assert!(e.contains("truncated zlib stream"), "{e}");
        let offset: u64 = e
            .split("byte ")
            .nth(1)
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(offset <= cut as u64, "{e}");
    }

    #[test]
    fn a_plain_file_whose_last_line_has_no_end_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.0.def");
        std::fs::write(&path, "DTR3e8\nDP1NM\"Pro").unwrap();
        let e = lines_of(&path).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2:", path.display())), "{e}");
        assert!(e.contains("truncated record"), "{e}");
    }
}
