//! The text level of Paraver's files: lines, and the colon-separated integer fields of the
//! `.prv` records, with the position of whatever cannot be read.

use std::io::{BufRead, ErrorKind};

use crate::error::{Error, Result};
use crate::ingest::excerpt::{quoted_bytes, shown_line};

/// The longest line read (Extrae's longest event lines, with every counter, are a few KiB).
pub(crate) const MAX_LINE: usize = 16 << 20;

/// Reads a file line by line into one reused buffer, counting lines from 1.
pub(crate) struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    /// The number of the line last returned.
    pub line_no: u64,
    /// The bytes read so far.
    pub bytes: u64,
    file: String,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R, file: &str) -> Lines<R> {
        Lines {
            reader,
            buf: Vec::with_capacity(256),
            line_no: 0,
            bytes: 0,
            file: file.to_string(),
        }
    }

    /// The next line without its end (`\n` or `\r\n`), with its number, or `None` at the
    /// end of the file. A line longer than [`MAX_LINE`] is refused (a damaged file, not a
    /// trace: Paraver's lines are short).
    pub fn next_line(&mut self) -> Result<Option<(u64, &[u8])>> {
        self.buf.clear();
        loop {
            let available = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.file, e)),
            };
            if available.is_empty() {
                break;
            }
            let (take, done) = match memchr::memchr(b'\n', available) {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if self.buf.len() + take > MAX_LINE {
                return Err(Error::input(
                    &self.file,
                    self.line_no + 1,
                    1,
                    "line too long",
                    format!("the line is longer than {MAX_LINE} bytes; the file is not a Paraver trace or is damaged"),
                    "",
                ));
            }
            self.buf.extend_from_slice(&available[..take]);
            self.reader.consume(take);
            if done {
                break;
            }
        }
        if self.buf.is_empty() {
            return Ok(None);
        }
        self.bytes += self.buf.len() as u64;
        self.line_no += 1;
        let mut end = self.buf.len();
        if self.buf[end - 1] == b'\n' {
            end -= 1;
        }
        if end > 0 && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        Ok(Some((self.line_no, &self.buf[..end])))
    }
}

/// Something unreadable at byte `at` of a line.
#[derive(Debug)]
pub(crate) struct Fault {
    pub at: usize,
    pub rule: &'static str,
    pub message: String,
}

impl Fault {
    pub fn new(at: usize, rule: &'static str, message: impl Into<String>) -> Fault {
        Fault {
            at,
            rule,
            message: message.into(),
        }
    }

    /// The error for this fault in line `line_no` of `file`, whose text is `line`.
    pub fn at_line(self, file: &str, line_no: u64, line: &[u8]) -> Error {
        // The column counts characters, as the caret under the shown line does.
        let column = String::from_utf8_lossy(&line[..self.at.min(line.len())])
            .chars()
            .count() as u64
            + 1;
        let text = shown_line(&String::from_utf8_lossy(line), column);
        Error::input(file, line_no, column, self.rule, self.message, text)
    }
}

/// The fields of a record, split at `:`, each with its byte offset in the line.
pub(crate) struct Fields<'a> {
    line: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Fields<'a> {
    /// The fields of `line` from byte `from` on.
    pub fn new(line: &'a [u8], from: usize) -> Fields<'a> {
        Fields {
            line,
            pos: from,
            done: from > line.len(),
        }
    }

    /// Whether every field was taken.
    pub fn is_empty(&self) -> bool {
        self.done
    }

    /// Where the next field starts (the line's end when none is left).
    pub fn position(&self) -> usize {
        self.pos.min(self.line.len())
    }

    /// The next field and its offset.
    #[inline]
    pub fn next_field(&mut self) -> Option<(usize, &'a [u8])> {
        if self.done {
            return None;
        }
        let start = self.pos;
        match memchr::memchr(b':', &self.line[start..]) {
            Some(i) => {
                self.pos = start + i + 1;
                Some((start, &self.line[start..start + i]))
            }
            None => {
                self.done = true;
                self.pos = self.line.len();
                Some((start, &self.line[start..]))
            }
        }
    }

    /// The next field, or why there is none: the line ends before it (also when it ends
    /// with the `:` before it, as a line cut short does).
    #[inline]
    pub fn present(&mut self, what: &str) -> std::result::Result<(usize, &'a [u8]), Fault> {
        let end = self.position();
        match self.next_field() {
            Some((at, field)) if !(field.is_empty() && self.done) => Ok((at, field)),
            Some((at, _)) => Err(missing(at, what)),
            None => Err(missing(end, what)),
        }
    }

    /// The digits of the next field, scanned up to its `:` or the line's end, as an
    /// unsigned integer; `None` (nothing consumed) unless the field is a non-empty run of
    /// digits that fits 64 bits.
    #[inline]
    fn scan_digits(&mut self, from: usize) -> Option<u64> {
        let line = self.line;
        let mut i = from;
        let mut v: u64 = 0;
        while let Some(&b) = line.get(i) {
            if b == b':' {
                break;
            }
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v.checked_mul(10)?.checked_add(u64::from(d))?;
            i += 1;
        }
        if i == from {
            return None;
        }
        if i >= line.len() {
            self.done = true;
            self.pos = line.len();
        } else {
            self.pos = i + 1;
        }
        Some(v)
    }

    /// The next field as an unsigned integer; `what` names it in the error.
    #[inline]
    pub fn unsigned(&mut self, what: &str) -> std::result::Result<u64, Fault> {
        if !self.done {
            if let Some(v) = self.scan_digits(self.pos) {
                return Ok(v);
            }
        }
        let (at, field) = self.present(what)?;
        parse_unsigned(field).ok_or_else(|| bad_number(at, field, what))
    }

    /// The next field as a signed integer.
    #[inline]
    pub fn signed(&mut self, what: &str) -> std::result::Result<i64, Fault> {
        if !self.done {
            let negative = self.line.get(self.pos) == Some(&b'-');
            let (start, saved) = (self.pos, (self.pos, self.done));
            if let Some(v) = self.scan_digits(start + usize::from(negative)) {
                let v = if negative {
                    0i64.checked_sub_unsigned(v)
                } else {
                    i64::try_from(v).ok()
                };
                if let Some(v) = v {
                    return Ok(v);
                }
                (self.pos, self.done) = saved;
            }
        }
        let (at, field) = self.present(what)?;
        parse_signed(field).ok_or_else(|| bad_number(at, field, what))
    }

    /// Skips the next field if it is an integer of any size (values of event types mtfdb
    /// does not interpret are checked, not converted).
    #[inline]
    pub fn integer(&mut self, what: &str) -> std::result::Result<(), Fault> {
        let (at, field) = self.present(what)?;
        if is_integer(field) {
            Ok(())
        } else {
            Err(Fault::new(
                at,
                "bad number",
                format!("the {what} {} is not a number", quoted_bytes(field)),
            ))
        }
    }

    /// Fails unless every field was taken: `record` names the record for the message.
    pub fn end(&self, record: &str, expected: usize) -> std::result::Result<(), Fault> {
        if self.done {
            Ok(())
        } else {
            Err(Fault::new(
                self.pos,
                "bad record",
                format!("{record} has more than its {expected} fields"),
            ))
        }
    }
}

fn missing(at: usize, what: &str) -> Fault {
    Fault::new(
        at,
        "truncated record",
        format!("the record ends before its {what}"),
    )
}

fn bad_number(at: usize, field: &[u8], what: &str) -> Fault {
    let shown = quoted_bytes(field);
    let why = if field.is_empty() {
        "is empty".to_string()
    } else if field.iter().all(u8::is_ascii_digit) || field.first() == Some(&b'-') {
        format!("{shown} is out of range")
    } else {
        format!("{shown} is not a number")
    };
    Fault::new(at, "bad number", format!("the {what} {why}"))
}

/// A decimal unsigned integer, or `None` (empty, another character, or too large).
#[inline]
pub(crate) fn parse_unsigned(field: &[u8]) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in field {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// A decimal integer with an optional `-`.
#[inline]
pub(crate) fn parse_signed(field: &[u8]) -> Option<i64> {
    match field.split_first() {
        Some((b'-', digits)) => {
            let v = parse_unsigned(digits)?;
            if v == 1 << 63 {
                Some(i64::MIN)
            } else {
                i64::try_from(v).ok().map(|v| -v)
            }
        }
        _ => i64::try_from(parse_unsigned(field)?).ok(),
    }
}

/// Whether a field is a decimal integer of any size (values of event types mtfdb does not
/// interpret are checked, not converted).
#[inline]
pub(crate) fn is_integer(field: &[u8]) -> bool {
    let digits = field.strip_prefix(b"-").unwrap_or(field);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_lose_their_ends_and_an_endless_one_is_refused() {
        let text = b"a\r\nb\n\nlast";
        let mut lines = Lines::new(&text[..], "t.prv");
        let mut seen = Vec::new();
        while let Some((n, l)) = lines.next_line().unwrap() {
            seen.push((n, l.to_vec()));
        }
        let want: Vec<(u64, Vec<u8>)> = vec![
            (1, b"a".to_vec()),
            (2, b"b".to_vec()),
            (3, vec![]),
            (4, b"last".to_vec()),
        ];
        assert_eq!(seen, want);
        let long = vec![b'7'; MAX_LINE + 1];
        let mut lines = Lines::new(std::io::BufReader::new(&long[..]), "t.prv");
        let e = lines.next_line().unwrap_err().to_string();
        assert!(e.starts_with("t.prv:1:1: line too long"), "{e}");
    }

    #[test]
    fn fields_carry_their_offsets_and_numbers_their_range() {
        let line = b"2:1:1:1:1:100:50000001:3";
        let mut f = Fields::new(line, 2);
        assert_eq!(f.unsigned("CPU").unwrap(), 1);
        for _ in 0..3 {
            f.unsigned("x").unwrap();
        }
        assert_eq!(f.unsigned("time").unwrap(), 100);
        assert_eq!(f.next_field(), Some((14, &b"50000001"[..])));
        assert_eq!(f.signed("value").unwrap(), 3);
        assert!(f.is_empty());
        let e = f.unsigned("size").unwrap_err();
        assert_eq!((e.at, e.rule), (line.len(), "truncated record"));

        assert_eq!(parse_signed(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_signed(b"9223372036854775808"), None);
        assert_eq!(parse_unsigned(b"18446744073709551616"), None);
        assert!(is_integer(b"-18446744073709551616123"));
        assert!(!is_integer(b"12a"));
        let mut f = Fields::new(b"3:x", 2);
        let e = f.unsigned("CPU").unwrap_err();
        assert_eq!(
            (e.at, e.message.as_str()),
            (2, "the CPU \"x\" is not a number")
        );
    }
}
