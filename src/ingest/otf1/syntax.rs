//! The OTF v1 ASCII record syntax: a record is one line of upper-case keywords, each followed
//! by its value; numbers are lower-case hexadecimal, strings are in double quotes, arrays are
//! hexadecimal numbers each followed by a comma. Every keyword has a short and a long form
//! (`E` / `ENTER`, `L` / `LEN`); the long form may put spaces between keywords and values.
//!
//! As in the OTF library's reader, a keyword matches only if the next character is not an
//! upper-case letter (so `COP` does not match `COPB`), and what follows the last field of a
//! record is ignored.

/// A malformed field: where (1-based column) and what was expected.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub column: u64,
    pub message: String,
}

pub(crate) type Parsed<T> = std::result::Result<T, SyntaxError>;

/// A position within one record.
pub(crate) struct Cursor<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `line`.
    pub fn new(line: &'a [u8]) -> Cursor<'a> {
        Cursor { line, pos: 0 }
    }

    fn skip_spaces(&mut self) {
        while matches!(self.line.get(self.pos), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// The next character after spaces, without taking it.
    pub fn peek(&mut self) -> Option<u8> {
        self.skip_spaces();
        self.line.get(self.pos).copied()
    }

    /// Whether nothing but spaces is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Takes `prefix` if the record continues with it (whatever follows).
    pub fn prefix(&mut self, prefix: &[u8]) -> bool {
        self.skip_spaces();
        if self.line[self.pos..].starts_with(prefix) {
            self.pos += prefix.len();
            true
        } else {
            false
        }
    }

    /// Takes one of `keywords` if the record continues with it and the keyword ends there
    /// (the next character is not an upper-case letter).
    pub fn keyword(&mut self, keywords: &[&[u8]]) -> bool {
        self.skip_spaces();
        let rest = &self.line[self.pos..];
        for k in keywords {
            if rest.starts_with(k) && !rest.get(k.len()).is_some_and(u8::is_ascii_uppercase) {
                self.pos += k.len();
                return true;
            }
        }
        false
    }

    /// An error at the cursor.
    pub fn error<T>(&self, message: impl Into<String>) -> Parsed<T> {
        Err(SyntaxError {
            column: self.pos as u64 + 1,
            message: message.into(),
        })
    }

    /// Requires one of `keywords` (short form first), naming the field in the error.
    pub fn expect(&mut self, keywords: &[&[u8]], field: &str) -> Parsed<()> {
        if self.keyword(keywords) {
            return Ok(());
        }
        let names: Vec<String> = keywords
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        self.error(format!("expected {} ({field})", names.join(" or ")))
    }

    /// A hexadecimal number of at most 64 bits.
    pub fn hex(&mut self, field: &str) -> Parsed<u64> {
        self.skip_spaces();
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(&c) = self.line.get(self.pos) {
            let digit = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => break,
            };
            if value >> 60 != 0 {
                self.pos = start;
                return self.error(format!("{field}: the number has more than 64 bits"));
            }
            value = value << 4 | u64::from(digit);
            self.pos += 1;
        }
        if self.pos == start {
            return self.error(format!("expected a hexadecimal number ({field})"));
        }
        Ok(value)
    }

    /// A hexadecimal number of at most 32 bits (a token, a tag, a length).
    pub fn hex32(&mut self, field: &str) -> Parsed<u32> {
        let start = self.pos;
        let value = self.hex(field)?;
        u32::try_from(value).or_else(|_| {
            self.pos = start;
            self.error(format!("{field}: {value:#x} does not fit in 32 bits"))
        })
    }

    /// `keywords` then a 32-bit number.
    pub fn field32(&mut self, keywords: &[&[u8]], field: &str) -> Parsed<u32> {
        self.expect(keywords, field)?;
        self.hex32(field)
    }

    /// `keywords` then a 64-bit number.
    pub fn field64(&mut self, keywords: &[&[u8]], field: &str) -> Parsed<u64> {
        self.expect(keywords, field)?;
        self.hex(field)
    }

    /// A string in double quotes (OTF writes none with a quote or a newline inside).
    pub fn string(&mut self, field: &str) -> Parsed<String> {
        self.skip_spaces();
        if self.line.get(self.pos) != Some(&b'"') {
            return self.error(format!("expected a string in double quotes ({field})"));
        }
        let start = self.pos + 1;
        match self.line[start..].iter().position(|&c| c == b'"') {
            Some(len) => {
                self.pos = start + len + 1;
                Ok(String::from_utf8_lossy(&self.line[start..start + len]).into_owned())
            }
            None => self.error(format!("{field}: the string has no closing quote")),
        }
    }

    /// An array: hexadecimal numbers, each followed by a comma (`1,2,a,`).
    pub fn array(&mut self, field: &str) -> Parsed<Vec<u32>> {
        let mut values = Vec::new();
        loop {
            match self.peek() {
                Some(b'0'..=b'9' | b'a'..=b'f') => {
                    values.push(self.hex32(field)?);
                    self.skip_spaces();
                    if self.line.get(self.pos) == Some(&b',') {
                        self.pos += 1;
                    }
                }
                _ => return Ok(values),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_end_where_upper_case_letters_end() {
        let mut c = Cursor::new(b"COPB6H1C3b9aca05RT0S0R0");
        assert!(!c.keyword(&[b"COP", b"COLLOP"]));
        assert!(c.keyword(&[b"COPB", b"COLLOPBEGIN"]));
        assert_eq!(c.hex32("collective").unwrap(), 6);
        assert_eq!(c.field64(&[b"H", b"HANDLEID"], "matching id").unwrap(), 1);
        assert_eq!(c.field32(&[b"C", b"COMM"], "group").unwrap(), 0x3b9aca05);
        let e = c.field32(&[b"S", b"SENT"], "sent").unwrap_err();
        assert_eq!(e.column, 17);
        assert_eq!(e.message, "expected S or SENT (sent)");
    }

    #[test]
    fn long_form_with_spaces_strings_and_arrays() {
        let mut c = Cursor::new(b"DEFPROCESSGROUP 5 MEMBERS 1,2, NAME \"MPI_COMM_WORLD\"");
        assert!(c.prefix(b"DEF"));
        assert!(c.keyword(&[b"PG", b"PROCESSGROUP"]));
        assert_eq!(c.hex32("group").unwrap(), 5);
        assert!(c.keyword(&[b"M", b"MEMBERS"]));
        assert_eq!(c.array("members").unwrap(), vec![1, 2]);
        assert!(c.keyword(&[b"NM", b"NAME"]));
        assert_eq!(c.string("name").unwrap(), "MPI_COMM_WORLD");
        assert!(c.at_end());
    }

    #[test]
    fn numbers_too_wide_are_refused() {
        let mut c = Cursor::new(b"E1ffffffff");
        assert!(c.keyword(&[b"E", b"ENTER"]));
        let e = c.hex32("function").unwrap_err();
        assert_eq!(e.column, 2);
        assert!(
            e.message.contains("does not fit in 32 bits"),
            "{}",
            e.message
        );
        let mut c = Cursor::new(b"11112222333344445");
        assert!(c
            .hex("time")
            .unwrap_err()
            .message
            .contains("more than 64 bits"));
    }
}
