//! The lines that report what a source found rather than what the program did: `location`
//! (a location that is not an MPI rank's main thread, with what it recorded) and `anomaly`
//! (an anomaly the source recorded, see [`crate::ingest::anomaly_fields`]). Both are a keyword, then
//! words, then `key=value` fields in any order, each at most once.

use nom::character::complete::{u32 as nom_u32, u64 as nom_u64};

use super::{
    at_sep, is_bare, kind_from_name, name, skip_space, spaces1, DeclPos, In, LineParser,
    SLOT_OTHER, SLOT_ROUTINE,
};
use crate::error::{Error, Result};
use crate::ingest::anomaly_fields::{self as anomaly, Fields, CLASSES};
use crate::ingest::excerpt::{quoted, quoted_bytes, shown_line};
use crate::ingest::EventSink;
use crate::model::{Location, LocationKind, OpKind, OpPosition, Rank, StrId};

/// A field's value as written: a bare word (a slice of the line) or a decoded quoted string.
enum Raw<'l> {
    Bare(&'l [u8]),
    Quoted(Vec<u8>),
}

/// One `key=value` field of a line, with the byte offsets of its key and value.
struct RawField<'l> {
    key: &'l [u8],
    key_off: usize,
    value: Raw<'l>,
    value_off: usize,
    used: bool,
}

/// The whole of `word` as an unsigned integer.
fn whole_u64(word: &[u8]) -> Option<u64> {
    match nom_u64::<_, nom::error::Error<In>>(word) {
        Ok((b"", v)) => Some(v),
        _ => None,
    }
}

/// An operation position `rank[.thread]:index`.
fn position(word: &[u8]) -> Option<OpPosition> {
    let (rest, rank) = nom_u32::<_, nom::error::Error<In>>(word).ok()?;
    let (rest, thread) = match rest.strip_prefix(b".") {
        Some(t) => nom_u32::<_, nom::error::Error<In>>(t).ok()?,
        None => (rest, 0),
    };
    let index = whole_u64(rest.strip_prefix(b":")?)?;
    Some(OpPosition {
        rank,
        thread,
        index,
    })
}

impl LineParser {
    /// The `key=value` fields from `s` to the end of `line`.
    fn raw_fields<'l>(&mut self, line: &'l [u8], mut s: In<'l>) -> Result<Vec<RawField<'l>>> {
        let mut fields: Vec<RawField> = Vec::new();
        loop {
            let t = skip_space(s);
            if t.is_empty() || t[0] == b'#' {
                return Ok(fields);
            }
            if t.len() == s.len() {
                return Err(self.ctx.expected(line, t, "a space before the next field"));
            }
            let key_off = line.len() - t.len();
            let eq = t.iter().take_while(|&&b| is_bare(b)).count();
            if eq == 0 || t.get(eq) != Some(&b'=') {
                return Err(self.ctx.expected(line, t, "a field such as key=value"));
            }
            let key = &t[..eq];
            if fields.iter().any(|f| f.key == key) {
                let message = format!("the field {}= appears twice", String::from_utf8_lossy(key));
                return Err(self.ctx.error(line, key_off, "syntax", message));
            }
            let v = &t[eq + 1..];
            let (rest, bare) =
                name(v, &mut self.scratch).map_err(|(at, e)| self.ctx.expected(line, at, e))?;
            fields.push(RawField {
                key,
                key_off,
                value: match bare {
                    Some(word) => Raw::Bare(word),
                    None => Raw::Quoted(self.scratch.clone()),
                },
                value_off: line.len() - v.len(),
                used: false,
            });
            s = rest;
        }
    }

    /// An error for the first field no one read.
    fn unknown_field(&self, line: &[u8], fields: &[RawField], known: &str) -> Result<()> {
        match fields.iter().find(|f| !f.used) {
            None => Ok(()),
            Some(f) => {
                let message = format!(
                    "unknown field {} (the fields here are {known})",
                    quoted_bytes(f.key)
                );
                Err(self.ctx.error(line, f.key_off, "syntax", message))
            }
        }
    }

    /// A `location` line (`rest` starts at its keyword): the location and the offset of its
    /// rank, if it names one.
    pub(super) fn location_line(
        &mut self,
        line: &[u8],
        rest: In,
    ) -> Result<(Location, Option<usize>)> {
        let s = &rest[b"location".len()..];
        let (s, name) = self.decl_name(line, s, "a location name")?;
        let kinds = || {
            LocationKind::TOKENS
                .iter()
                .map(|(_, w)| *w)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let s = spaces1(s).ok_or_else(|| {
            self.ctx.expected(
                line,
                s,
                &format!("a space and a location kind ({})", kinds()),
            )
        })?;
        let len = s.iter().take_while(|&&b| is_bare(b)).count();
        let kind = std::str::from_utf8(&s[..len])
            .ok()
            .and_then(LocationKind::from_token)
            .filter(|_| at_sep(&s[len..]))
            .ok_or_else(|| {
                self.ctx
                    .expected(line, s, &format!("a location kind ({})", kinds()))
            })?;
        let mut fields = self.raw_fields(line, &s[len..])?;
        let mut location = Location::new(&name, kind);
        let mut rank_off = None;
        for f in fields.iter_mut() {
            f.used = true;
            let number = || match &f.value {
                Raw::Bare(w) => whole_u64(w),
                Raw::Quoted(_) => None,
            };
            let bad = |what: &str| self.ctx.expected(line, &line[f.value_off..], what);
            match f.key {
                b"group" => {
                    location.group = match &f.value {
                        Raw::Bare(w) => String::from_utf8(w.to_vec()),
                        Raw::Quoted(q) => String::from_utf8(q.clone()),
                    }
                    .map_err(|_| bad("a group name in UTF-8"))?
                }
                b"rank" | b"thread" => {
                    let v = number()
                        .and_then(|v| u32::try_from(v).ok())
                        .ok_or_else(|| bad("a number below 2^32"))?;
                    if f.key == b"rank" {
                        location.rank = Some(v);
                        rank_off = Some(f.value_off);
                    } else {
                        location.thread = Some(v);
                    }
                }
                b"regions" => location.regions = number().ok_or_else(|| bad("a count"))?,
                b"events" => location.events = number().ok_or_else(|| bad("a count"))?,
                _ => f.used = false,
            }
        }
        self.unknown_field(line, &fields, "group, rank, thread, regions, events")?;
        Ok((location, rank_off))
    }

    /// Checks that a location's rank, if any, is a declared process; `decl` is where a header
    /// declaration was (a late location is on the current line, `line`).
    pub(super) fn check_location_rank(
        &self,
        line: &[u8],
        location: &Location,
        decl: Option<&DeclPos>,
    ) -> Result<()> {
        let processes = self.hb.header.processes.len();
        match location.rank {
            Some(rank) if rank as usize >= processes => {
                let message = format!(
                    "location {} belongs to rank {rank}, but the trace declares {processes} processes",
                    quoted(&location.name)
                );
                match decl {
                    Some(d) => {
                        let column = super::char_column(&d.text, d.offs[0]);
                        Err(Error::input(
                            &self.ctx.file,
                            d.line_no,
                            column,
                            "unknown rank",
                            message,
                            shown_line(&String::from_utf8_lossy(&d.text), column),
                        ))
                    }
                    None => {
                        let off = line
                            .windows(5)
                            .position(|w| w == b"rank=")
                            .map_or(0, |p| p + 5);
                        Err(self.ctx.error(line, off, "unknown rank", message))
                    }
                }
            }
            _ => Ok(()),
        }
    }

    /// Counts one more operation of (`rank`, `thread`).
    #[inline]
    pub(super) fn count_operation(&mut self, rank: Rank, thread: u32) {
        if thread == 0 {
            let i = rank as usize;
            // Only declared ranks are counted: an undeclared one is refused by the seam, and
            // must not make this table grow to its number first.
            if i >= self.hb.header.processes.len() {
                return;
            }
            if self.op_counts.len() <= i {
                self.op_counts.resize(i + 1, 0);
            }
            self.op_counts[i] += 1;
        } else {
            *self.thread_op_counts.entry((rank, thread)).or_default() += 1;
        }
    }

    /// The operations of (`rank`, `thread`) read so far.
    fn operations_of(&self, rank: Rank, thread: u32) -> u64 {
        if thread == 0 {
            self.op_counts.get(rank as usize).copied().unwrap_or(0)
        } else {
            self.thread_op_counts
                .get(&(rank, thread))
                .copied()
                .unwrap_or(0)
        }
    }

    /// An `anomaly` line (`rest` starts at its keyword): hands the anomaly to the sink, with
    /// the positions of the operations it names.
    pub(super) fn anomaly_line<S: EventSink + ?Sized>(
        &mut self,
        line: &[u8],
        rest: In,
        sink: &mut S,
    ) -> Result<()> {
        let s = &rest[b"anomaly".len()..];
        let s =
            spaces1(s).ok_or_else(|| self.ctx.expected(line, s, "a space and an anomaly class"))?;
        let class_off = line.len() - s.len();
        let len = s.iter().take_while(|&&b| is_bare(b)).count();
        let class = &s[..len];
        if len == 0 || !at_sep(&s[len..]) {
            return Err(self.ctx.expected(line, s, "an anomaly class"));
        }
        let fields = self.raw_fields(line, &s[len..])?;
        let mut reader = LineFields {
            parser: self,
            sink,
            line,
            class,
            class_off,
            fields,
            positions: Vec::new(),
        };
        let Some(anomaly) = anomaly::build(class, &mut reader)? else {
            let message = format!(
                "unknown anomaly class {} (the classes are {CLASSES})",
                quoted_bytes(class)
            );
            return Err(self.ctx.error(line, class_off, "syntax", message));
        };
        let LineFields {
            fields, positions, ..
        } = reader;
        self.unknown_field(
            line,
            &fields,
            "those of the class's variant in model::Anomaly",
        )?;
        if positions.is_empty() {
            sink.anomaly(&anomaly)
        } else {
            sink.anomaly_at(&anomaly, &positions)
        }
    }
}

/// The fields of one `anomaly` line, read by [`anomaly::build`].
struct LineFields<'p, 'l, S: ?Sized> {
    parser: &'p mut LineParser,
    sink: &'p mut S,
    line: &'l [u8],
    class: &'l [u8],
    class_off: usize,
    fields: Vec<RawField<'l>>,
    positions: Vec<OpPosition>,
}

impl<S: EventSink + ?Sized> LineFields<'_, '_, S> {
    /// The field `key`, marked as read; `None` when absent.
    fn find(&mut self, key: &str) -> Option<usize> {
        let i = self.fields.iter().position(|f| f.key == key.as_bytes())?;
        self.fields[i].used = true;
        Some(i)
    }

    /// The field `key`, which must be there.
    fn require(&mut self, key: &str) -> Result<usize> {
        self.find(key).ok_or_else(|| {
            let message = format!(
                "the anomaly {} needs the field {key}=",
                String::from_utf8_lossy(self.class)
            );
            self.parser
                .ctx
                .error(self.line, self.class_off, "syntax", message)
        })
    }

    fn bad(&self, i: usize, what: &str) -> Error {
        let at = &self.line[self.fields[i].value_off..];
        self.parser.ctx.expected(self.line, at, what)
    }

    /// The bare word of field `i`.
    fn bare(&self, i: usize, what: &str) -> Result<&[u8]> {
        match &self.fields[i].value {
            Raw::Bare(w) => Ok(w),
            Raw::Quoted(_) => Err(self.bad(i, what)),
        }
    }

    fn number(&self, i: usize) -> Result<u64> {
        self.bare(i, "an unsigned integer")
            .and_then(|w| whole_u64(w).ok_or_else(|| self.bad(i, "an unsigned integer")))
    }

    fn small(&self, i: usize) -> Result<u32> {
        self.number(i)
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| self.bad(i, "an unsigned integer below 2^32"))
    }

    /// Interns field `i` as a name.
    fn intern(&mut self, i: usize, slot: usize) -> Result<StrId> {
        let at = &self.line[self.fields[i].value_off..];
        match &self.fields[i].value {
            Raw::Bare(w) => self.parser.intern(self.line, at, Some(w), slot, self.sink),
            Raw::Quoted(q) => {
                self.parser.scratch.clone_from(q);
                self.parser.intern(self.line, at, None, slot, self.sink)
            }
        }
    }
}

impl<S: EventSink + ?Sized> Fields<Error> for LineFields<'_, '_, S> {
    fn num(&mut self, key: &str) -> Result<u64> {
        let i = self.require(key)?;
        self.number(i)
    }

    fn opt_num(&mut self, key: &str) -> Result<Option<u64>> {
        match self.find(key) {
            Some(i) => self.number(i).map(Some),
            None => Ok(None),
        }
    }

    fn u32(&mut self, key: &str) -> Result<u32> {
        let i = self.require(key)?;
        self.small(i)
    }

    fn opt_u32(&mut self, key: &str) -> Result<Option<u32>> {
        match self.find(key) {
            Some(i) => self.small(i).map(Some),
            None => Ok(None),
        }
    }

    fn i32(&mut self, key: &str) -> Result<i32> {
        let i = self.require(key)?;
        let word = self.bare(i, "an integer")?;
        std::str::from_utf8(word)
            .ok()
            .and_then(|w| w.parse::<i32>().ok())
            .ok_or_else(|| self.bad(i, "an integer of 32 bits"))
    }

    fn name(&mut self, key: &str) -> Result<StrId> {
        let i = self.require(key)?;
        self.intern(i, SLOT_ROUTINE)
    }

    fn kind(&mut self, key: &str) -> Result<OpKind> {
        let i = self.require(key)?;
        if let Raw::Bare(w) = &self.fields[i].value {
            if let Some(k) = kind_from_name(w) {
                return Ok(k);
            }
        }
        self.intern(i, SLOT_OTHER).map(OpKind::Other)
    }

    fn op(&mut self, key: &str) -> Result<OpPosition> {
        let i = self.require(key)?;
        let what = "an operation position rank[.thread]:index";
        let p = position(self.bare(i, what)?).ok_or_else(|| self.bad(i, what))?;
        let read = self.parser.operations_of(p.rank, p.thread);
        if p.index >= read {
            let message = format!(
                "names operation {} of rank {} thread {}, but {read} operations of it precede this line",
                p.index, p.rank, p.thread
            );
            let off = self.fields[i].value_off;
            return Err(self
                .parser
                .ctx
                .error(self.line, off, "unknown operation", message));
        }
        self.positions.push(p);
        Ok(p)
    }

    fn text(&mut self, key: &str) -> Result<String> {
        let i = self.require(key)?;
        let bytes = match &self.fields[i].value {
            Raw::Bare(w) => w.to_vec(),
            Raw::Quoted(q) => q.clone(),
        };
        String::from_utf8(bytes).map_err(|_| self.bad(i, "text in UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_read_rank_thread_and_index() {
        let p = |rank, thread, index| {
            Some(OpPosition {
                rank,
                thread,
                index,
            })
        };
        assert_eq!(position(b"3:17"), p(3, 0, 17));
        assert_eq!(position(b"3.2:0"), p(3, 2, 0));
        assert_eq!(position(b"3.2"), None);
        assert_eq!(position(b"3:"), None);
        assert_eq!(position(b"3:1x"), None);
        assert_eq!(position(b"x:1"), None);
    }
}
