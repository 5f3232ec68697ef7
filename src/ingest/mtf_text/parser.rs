//! The streaming parser of the MTF text format.
//!
//! The input is read in big blocks and split into lines with `memchr`; each line is parsed
//! with nom complete-input parsers over bytes. Nothing is allocated per event line: one
//! [`Operation`] is reused, and names (datatypes, routines, other calls) are hashed only
//! when they differ from the last name seen in the same position.

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;

use memchr::memchr;
use nom::bytes::complete::{take_while, take_while1};
use nom::character::complete::{i32 as nom_i32, u32 as nom_u32, u64 as nom_u64};
use nom::IResult;

mod reports;

use super::names::{is_bare, kind_from_name, QuickBuild};
use crate::error::{Error, Result};
use crate::ingest::excerpt::{quoted_bytes, shown_line};
use crate::ingest::validate::{Field, Violation};
use crate::ingest::EventSink;
use crate::model::{
    flags, Communicator, Location, OpKind, Operation, Process, Processor, Rank, RoutineEvent,
    StrId, TraceHeader,
};

type In<'a> = &'a [u8];
type NomResult<'a, O> = IResult<In<'a>, O, nom::error::Error<In<'a>>>;

/// How the parser reads its input.
#[derive(Debug, Clone)]
pub struct ParseOptions {
    /// The size of the read buffer in bytes (it grows when one line is longer).
    pub buffer_size: usize,
}

impl Default for ParseOptions {
    fn default() -> ParseOptions {
        ParseOptions {
            buffer_size: 1 << 20,
        }
    }
}

/// What a parse read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParseStats {
    /// Lines read (including blank and comment lines).
    pub lines: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Operations handed to the sink.
    pub operations: u64,
    /// Routine enter/leave events handed to the sink.
    pub routine_events: u64,
    /// Strings defined (datatype, routine and other call names).
    pub strings: u64,
}

/// Parses the MTF text file at `path` into `sink`.
pub fn parse_file<S: EventSink + ?Sized>(path: &Path, sink: &mut S) -> Result<ParseStats> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    parse_reader(file, &path.display().to_string(), sink)
}

/// Parses MTF text from `reader` into `sink`; `file_name` names the input in errors.
pub fn parse_reader<R: Read, S: EventSink + ?Sized>(
    reader: R,
    file_name: &str,
    sink: &mut S,
) -> Result<ParseStats> {
    parse_reader_with(reader, file_name, sink, &ParseOptions::default())
}

/// [`parse_reader`] with explicit [`ParseOptions`].
pub fn parse_reader_with<R: Read, S: EventSink + ?Sized>(
    mut reader: R,
    file_name: &str,
    sink: &mut S,
    options: &ParseOptions,
) -> Result<ParseStats> {
    let mut buf = vec![0u8; options.buffer_size.max(16)];
    let mut parser = LineParser::new(file_name);
    let (mut start, mut end, mut scanned) = (0usize, 0usize, 0usize);
    let mut eof = false;
    loop {
        while let Some(i) = memchr(b'\n', &buf[scanned..end]) {
            let line_end = scanned + i;
            parser.line(&buf[start..line_end], sink)?;
            start = line_end + 1;
            scanned = start;
        }
        scanned = end;
        if eof {
            if start < end {
                parser.line(&buf[start..end], sink)?;
            }
            break;
        }
        if start > 0 {
            buf.copy_within(start..end, 0);
            end -= start;
            scanned -= start;
            start = 0;
        }
        if end == buf.len() {
            let bigger = buf.len() * 2;
            buf.resize(bigger, 0);
        }
        match reader.read(&mut buf[end..]) {
            Ok(0) => eof = true,
            Ok(n) => {
                end += n;
                parser.stats.bytes += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(file_name, e)),
        }
    }
    parser.finish(sink)
}

// ---------------------------------------------------------------------------------------
// Errors

/// Where the parser is, for error messages.
struct Ctx {
    file: String,
    line_no: u64,
}

impl Ctx {
    /// An input error at byte `offset` of `line`.
    fn error(&self, line: &[u8], offset: usize, rule: &str, message: String) -> Error {
        let col = char_column(line, offset);
        Error::input(
            &self.file,
            self.line_no,
            col,
            rule,
            message,
            shown_line(&String::from_utf8_lossy(line), col),
        )
    }

    /// A syntax error: `expected …, found …` at `at` (a suffix of `line`).
    fn expected(&self, line: &[u8], at: &[u8], what: &str) -> Error {
        let message = format!("expected {what}, found {}", found(at));
        self.error(line, line.len() - at.len(), "syntax", message)
    }
}

/// The 1-based character column of byte `offset` of `line`.
fn char_column(line: &[u8], offset: usize) -> u64 {
    let before = &line[..offset.min(line.len())];
    before.iter().filter(|&&b| b & 0xC0 != 0x80).count() as u64 + 1
}

/// A description of the token at `at`, for "found …".
fn found(at: &[u8]) -> String {
    if at.is_empty() {
        return "end of line".to_string();
    }
    let len = at
        .iter()
        .position(|&b| b == b' ' || b == b'\t')
        .unwrap_or(at.len());
    if len == 0 {
        return "a space".to_string();
    }
    quoted_bytes(&at[..len])
}

// ---------------------------------------------------------------------------------------
// Small parsers

#[inline]
fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

#[inline]
fn skip_space(s: In) -> In {
    let r: NomResult<In> = take_while(is_space)(s);
    match r {
        Ok((rest, _)) => rest,
        Err(_) => s,
    }
}

/// At a token boundary: end of line, a space or a comment.
#[inline]
fn at_sep(s: In) -> bool {
    matches!(s.first(), None | Some(b' ' | b'\t' | b'#'))
}

/// An unsigned integer that ends at a token boundary.
#[inline]
fn uint_u64(s: In) -> Option<(In, u64)> {
    match nom_u64::<_, nom::error::Error<In>>(s) {
        Ok((rest, v)) if at_sep(rest) => Some((rest, v)),
        _ => None,
    }
}

#[inline]
fn uint_u32(s: In) -> Option<(In, u32)> {
    match nom_u32::<_, nom::error::Error<In>>(s) {
        Ok((rest, v)) if at_sep(rest) => Some((rest, v)),
        _ => None,
    }
}

#[inline]
fn int_i32(s: In) -> Option<(In, i32)> {
    match nom_i32::<_, nom::error::Error<In>>(s) {
        Ok((rest, v)) if at_sep(rest) => Some((rest, v)),
        _ => None,
    }
}

/// One or more spaces, required between tokens.
#[inline]
fn spaces1(s: In) -> Option<In> {
    let r: NomResult<In> = take_while1(is_space)(s);
    r.ok().map(|(rest, _)| rest)
}

/// A name: a bare word (returned as a slice of the line) or a quoted string (decoded into
/// `scratch`, returned as `None`). The error is the offset and expectation.
fn name<'a>(
    s: In<'a>,
    scratch: &mut Vec<u8>,
) -> std::result::Result<(In<'a>, Option<In<'a>>), (In<'a>, &'static str)> {
    if s.first() == Some(&b'"') {
        scratch.clear();
        let mut i = 1;
        while i < s.len() {
            match s[i] {
                b'"' => {
                    let rest = &s[i + 1..];
                    if !at_sep(rest) {
                        return Err((rest, "a space after the closing quote"));
                    }
                    return Ok((rest, None));
                }
                b'\\' => {
                    let decoded = match s.get(i + 1) {
                        Some(b'"') => b'"',
                        Some(b'\\') => b'\\',
                        Some(b'n') => b'\n',
                        Some(b'r') => b'\r',
                        Some(b't') => b'\t',
                        _ => return Err((&s[i..], "an escape (\\\" \\\\ \\n \\r \\t)")),
                    };
                    scratch.push(decoded);
                    i += 2;
                }
                b => {
                    scratch.push(b);
                    i += 1;
                }
            }
        }
        return Err((s, "a closing '\"' for this string"));
    }
    let r: NomResult<In> = take_while1(is_bare)(s);
    match r {
        Ok((rest, word)) if at_sep(rest) => Ok((rest, Some(word))),
        _ => Err((s, "a name")),
    }
}

// ---------------------------------------------------------------------------------------
// String interning

/// Name positions with their own one-entry cache.
const SLOT_DATATYPE: usize = 0;
const SLOT_ROUTINE: usize = 1;
const SLOT_OTHER: usize = 2;

struct Interner {
    map: HashMap<Box<[u8]>, StrId, QuickBuild>,
    cache: [(Vec<u8>, StrId); 3],
    /// The id the next new name gets (declared names may repeat, so not `map.len()`).
    next: StrId,
}

impl Interner {
    fn new() -> Interner {
        Interner {
            map: HashMap::default(),
            cache: [(Vec::new(), 0), (Vec::new(), 0), (Vec::new(), 0)],
            next: 0,
        }
    }

    /// Gives a declared name the next id, even if the name is known already (a string
    /// table may hold a text twice); later uses of the name get its first id.
    fn declare(&mut self, name: &[u8]) -> StrId {
        let id = self.next;
        self.next += 1;
        self.map.entry(name.into()).or_insert(id);
        id
    }

    /// The id of `name`, and its text when it is new (so the caller defines it).
    /// `Err` when a new name is not UTF-8.
    #[inline]
    fn intern<'n>(
        &mut self,
        name: &'n [u8],
        slot: usize,
    ) -> std::result::Result<(StrId, Option<&'n str>), ()> {
        let cached = &self.cache[slot];
        if !cached.0.is_empty() && cached.0 == name {
            return Ok((cached.1, None));
        }
        let (id, new) = match self.map.get(name) {
            Some(&id) => (id, None),
            None => {
                let text = std::str::from_utf8(name).map_err(|_| ())?;
                let id = self.next;
                self.next += 1;
                self.map.insert(name.into(), id);
                (id, Some(text))
            }
        };
        let cached = &mut self.cache[slot];
        cached.0.clear();
        cached.0.extend_from_slice(name);
        cached.1 = id;
        Ok((id, new))
    }
}

// ---------------------------------------------------------------------------------------
// Header

/// Where a declaration was: its line, text and the byte offsets of its fields.
struct DeclPos {
    line_no: u64,
    text: Vec<u8>,
    /// Offsets of the id/rank and of the processor (process) fields.
    offs: [usize; 2],
    /// For communicators: (index of the first member of an item, offset of the item).
    items: Vec<(usize, usize)>,
}

#[derive(Default)]
struct HeaderBuilder {
    header: TraceHeader,
    scenario_line: Option<u64>,
    trace_line: Option<u64>,
    comment_seen: bool,
    processors: Vec<DeclPos>,
    processes: Vec<DeclPos>,
    comms: Vec<DeclPos>,
    /// The `string` declarations, in order: the string table's first entries.
    strings: Vec<String>,
    /// The `location` declarations: where each one's rank is, if it names one.
    locations: Vec<DeclPos>,
}

/// Largest member range accepted in one `a-b` item.
const MAX_RANGE: u64 = 1 << 24;

// ---------------------------------------------------------------------------------------
// Event lines

/// Positions of the fields of the current event line: byte offset + 1, or 0 when absent.
const N_SLOTS: usize = 19;

fn slot_of(field: Field) -> Option<usize> {
    Some(match field {
        Field::Rank | Field::Item => 0,
        Field::Thread => 1,
        Field::Start | Field::Time => 2,
        Field::End => 3,
        Field::Kind | Field::Routine => 4,
        Field::Comm => 5,
        Field::Dest => 6,
        Field::Source => 7,
        Field::SendTag => 8,
        Field::RecvTag => 9,
        Field::SendBytes => 10,
        Field::RecvBytes => 11,
        Field::Datatype => 12,
        Field::Root => 13,
        Field::Request => 14,
        Field::Completes => 15,
        Field::Flags => 16,
        _ => return None,
    })
}

/// `Some(true)` for `enter`, `Some(false)` for `leave` (as whole words).
fn routine_keyword(s: In) -> Option<bool> {
    let enter = if s.starts_with(b"enter") {
        true
    } else if s.starts_with(b"leave") {
        false
    } else {
        return None;
    };
    if s[5..].first().is_some_and(|&b| is_bare(b)) {
        None
    } else {
        Some(enter)
    }
}

/// The word of letters a line starts with (`anomaly`, `process`, …).
fn keyword<'a>(rest: In<'a>) -> &'a [u8] {
    let end = rest
        .iter()
        .position(|&b| !b.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    &rest[..end]
}

const FIELD_KEYS: &str = "c, to, from, tag, rtag, b, rb, dt, root, req, done, flag, rec, cap";

#[derive(PartialEq, Eq)]
enum Phase {
    Version,
    Header,
    Events,
}

struct LineParser {
    ctx: Ctx,
    phase: Phase,
    hb: HeaderBuilder,
    interner: Interner,
    op: Operation,
    cols: [u32; N_SLOTS],
    scratch: Vec<u8>,
    first_event_line: u64,
    stats: ParseStats,
    /// Operations read so far per rank on thread 0, and per (rank, thread) on other threads:
    /// what `anomaly` lines may name.
    op_counts: Vec<u64>,
    thread_op_counts: HashMap<(Rank, u32), u64, QuickBuild>,
    /// `location` lines after the first event, handed to the sink at the end.
    late_locations: Vec<Location>,
    /// In an untimed trace: the events read so far per (rank, thread), which is the time
    /// the next one gets.
    ticks: HashMap<(Rank, u32), u64, QuickBuild>,
}

impl LineParser {
    fn new(file: &str) -> LineParser {
        LineParser {
            ctx: Ctx {
                file: file.to_string(),
                line_no: 0,
            },
            phase: Phase::Version,
            hb: HeaderBuilder::default(),
            interner: Interner::new(),
            op: Operation::new(0, OpKind::Init, 0, 0),
            cols: [0; N_SLOTS],
            scratch: Vec::new(),
            first_event_line: 0,
            stats: ParseStats::default(),
            op_counts: Vec::new(),
            thread_op_counts: HashMap::default(),
            late_locations: Vec::new(),
            ticks: HashMap::default(),
        }
    }

    /// An untimed event's time: `-` where the time would be, read as the event's rank in
    /// its location's sequence.
    fn tick<'a>(
        &mut self,
        line: &[u8],
        s: In<'a>,
        rank: Rank,
        thread: u32,
    ) -> Result<(In<'a>, u64)> {
        if s.first() != Some(&b'-') || !at_sep(&s[1..]) {
            return Err(self
                .ctx
                .expected(line, s, "- for the time (the trace is untimed)"));
        }
        let next = self.ticks.entry((rank, thread)).or_insert(0);
        let t = *next;
        *next += 1;
        Ok((&s[1..], t))
    }

    #[inline]
    fn line<S: EventSink + ?Sized>(&mut self, raw: &[u8], sink: &mut S) -> Result<()> {
        self.ctx.line_no += 1;
        self.stats.lines += 1;
        let mut line = match raw.last() {
            Some(b'\r') => &raw[..raw.len() - 1],
            _ => raw,
        };
        if self.ctx.line_no == 1 {
            // A UTF-8 byte order mark, as some editors write.
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if self.phase == Phase::Events {
            if let Some(b) = line.first() {
                if b.is_ascii_digit() {
                    return self.event(line, sink);
                }
            }
        }
        let rest = skip_space(line);
        if rest.is_empty() || rest[0] == b'#' {
            return Ok(());
        }
        match self.phase {
            Phase::Version => self.version(line, rest),
            Phase::Header if rest[0].is_ascii_digit() || keyword(rest) == b"anomaly" => {
                self.end_header(sink)?;
                self.phase = Phase::Events;
                self.first_event_line = self.ctx.line_no;
                self.line_in_events(line, rest, sink)
            }
            Phase::Header => self.declaration(line, rest),
            Phase::Events => self.line_in_events(line, rest, sink),
        }
    }

    /// A line after the header that does not start with a digit where it begins: an event
    /// after spaces, an `anomaly` line, a late `location` line, or a misplaced declaration.
    fn line_in_events<S: EventSink + ?Sized>(
        &mut self,
        line: &[u8],
        rest: &[u8],
        sink: &mut S,
    ) -> Result<()> {
        match rest[0] {
            b'0'..=b'9' => self.event(line, sink),
            _ => {
                if keyword(rest) == b"anomaly" {
                    return self.anomaly_line(line, rest, sink);
                }
                if keyword(rest) == b"location" {
                    let (location, _) = self.location_line(line, rest)?;
                    self.check_location_rank(line, &location, None)?;
                    self.late_locations.push(location);
                    return Ok(());
                }
                let word = keyword(rest);
                if matches!(
                    word,
                    b"scenario"
                        | b"trace"
                        | b"comment"
                        | b"untimed"
                        | b"processor"
                        | b"process"
                        | b"communicator"
                        | b"string"
                        | b"MTF"
                ) {
                    let message = format!(
                        "a {} declaration after the first event (line {}); declarations come before the events",
                        String::from_utf8_lossy(word),
                        self.first_event_line
                    );
                    return Err(self.ctx.error(
                        line,
                        line.len() - rest.len(),
                        "declaration after events",
                        message,
                    ));
                }
                Err(self.ctx.expected(
                    line,
                    rest,
                    "an event (rank start end call … or rank time enter|leave name)",
                ))
            }
        }
    }

    fn version(&mut self, line: &[u8], rest: In) -> Result<()> {
        let Some(after) = rest.strip_prefix(b"MTF").and_then(spaces1) else {
            let message = format!(
                "expected the version line `MTF 1` first, found {}",
                found(rest)
            );
            return Err(self
                .ctx
                .error(line, line.len() - rest.len(), "missing version", message));
        };
        let Some((tail, version)) = uint_u32(after) else {
            return Err(self.ctx.expected(line, after, "a version number"));
        };
        if version != super::VERSION {
            let message = format!(
                "unsupported MTF version {version} (this mtfdb reads version {})",
                super::VERSION
            );
            return Err(self.ctx.error(
                line,
                line.len() - after.len(),
                "unsupported version",
                message,
            ));
        }
        self.expect_end(line, tail)?;
        self.phase = Phase::Header;
        Ok(())
    }

    fn expect_end(&self, line: &[u8], s: In) -> Result<()> {
        let s = skip_space(s);
        if s.is_empty() || s[0] == b'#' {
            Ok(())
        } else {
            Err(self.ctx.expected(line, s, "the end of the line"))
        }
    }

    /// A name in a declaration, as a `String`.
    fn decl_name<'a>(&mut self, line: &[u8], s: In<'a>, what: &str) -> Result<(In<'a>, String)> {
        let Some(s) = spaces1(s) else {
            return Err(self
                .ctx
                .expected(line, s, &format!("a space before {what}")));
        };
        let (rest, bare) =
            name(s, &mut self.scratch).map_err(|(at, e)| self.ctx.expected(line, at, e))?;
        let bytes = bare.unwrap_or(&self.scratch);
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok((rest, text.to_string())),
            Err(_) => Err(self.ctx.expected(line, s, &format!("{what} in UTF-8"))),
        }
    }

    fn decl_u32<'a>(&self, line: &[u8], s: In<'a>, what: &str) -> Result<(In<'a>, u32, usize)> {
        let Some(s) = spaces1(s) else {
            return Err(self
                .ctx
                .expected(line, s, &format!("a space before {what}")));
        };
        let off = line.len() - s.len();
        let (rest, v) = uint_u32(s).ok_or_else(|| self.ctx.expected(line, s, what))?;
        Ok((rest, v, off))
    }

    fn declaration(&mut self, line: &[u8], rest: In) -> Result<()> {
        let r: NomResult<In> = take_while1(|b: u8| b.is_ascii_alphabetic())(rest);
        let (s, keyword) =
            r.map_err(|_| self.ctx.expected(line, rest, "a declaration or an event"))?;
        let pos = |offs: [usize; 2], items: Vec<(usize, usize)>, line_no: u64| DeclPos {
            line_no,
            text: line.to_vec(),
            offs,
            items,
        };
        let kw_off = line.len() - rest.len();
        match keyword {
            b"scenario" | b"trace" => {
                let (s, text) = self.decl_name(line, s, "a name")?;
                self.expect_end(line, s)?;
                let is_scenario = keyword == b"scenario";
                let first = if is_scenario { &mut self.hb.scenario_line } else { &mut self.hb.trace_line };
                if let Some(first_line) = *first {
                    let message = format!(
                        "the {} is declared twice (first on line {first_line})",
                        String::from_utf8_lossy(keyword)
                    );
                    return Err(self.ctx.error(line, kw_off, "duplicate declaration", message));
                }
                *first = Some(self.ctx.line_no);
                if is_scenario {
                    self.hb.header.scenario = text;
                } else {
                    self.hb.header.trace_name = text;
                }
            }
            b"untimed" => {
                self.expect_end(line, s)?;
                self.hb.header.untimed = true;
            }
            b"comment" => {
                let (s, text) = self.decl_name(line, s, "a comment string")?;
                self.expect_end(line, s)?;
                let comments = &mut self.hb.header.comments;
                if self.hb.comment_seen {
                    comments.push('\n');
                    comments.push_str(&text);
                } else {
                    *comments = text;
                }
                self.hb.comment_seen = true;
            }
            b"processor" => {
                let (s, id, id_off) = self.decl_u32(line, s, "a processor id")?;
                let (s, text) = self.decl_name(line, s, "a processor name")?;
                self.expect_end(line, s)?;
                self.hb.header.processors.push(Processor { id, name: text });
                self.hb.processors.push(pos([id_off, id_off], Vec::new(), self.ctx.line_no));
            }
            b"process" => {
                let (s, rank, rank_off) = self.decl_u32(line, s, "a rank")?;
                let (s, text) = self.decl_name(line, s, "a process name")?;
                let t = skip_space(s);
                let (s, processor, proc_off) = if t.starts_with(b"on") && at_sep(&t[2..]) && t.len() < s.len() {
                    let (s, p, off) = self.decl_u32(line, &t[2..], "a processor id after `on`")?;
                    (s, Some(p), off)
                } else {
                    (s, None, rank_off)
                };
                self.expect_end(line, s)?;
                self.hb.header.processes.push(Process { rank, name: text, processor });
                self.hb.processes.push(pos([rank_off, proc_off], Vec::new(), self.ctx.line_no));
            }
            b"communicator" => {
                let (s, id, id_off) = self.decl_u32(line, s, "a communicator id")?;
                let (s, text) = self.decl_name(line, s, "a communicator name")?;
                let Some(mut s) = spaces1(s) else {
                    return Err(self.ctx.expected(line, s, "a space before the member list"));
                };
                let mut members: Vec<Rank> = Vec::new();
                let mut items = Vec::new();
                loop {
                    let item_off = line.len() - s.len();
                    items.push((members.len(), item_off));
                    let first: NomResult<u32> = nom_u32(s);
                    let (t, a) = first.map_err(|_| self.ctx.expected(line, s, "a member rank"))?;
                    let mut t = t;
                    if t.first() == Some(&b'-') {
                        let second: NomResult<u32> = nom_u32(&t[1..]);
                        let (u, b) = second.map_err(|_| self.ctx.expected(line, &t[1..], "the last rank of a range"))?;
                        if u64::from(a.abs_diff(b)) >= MAX_RANGE {
                            let message = format!("the range {a}-{b} is too large (at most {MAX_RANGE} members)");
                            return Err(self.ctx.error(line, item_off, "syntax", message));
                        }
                        if a <= b {
                            members.extend(a..=b);
                        } else {
                            members.extend((b..=a).rev());
                        }
                        t = u;
                    } else {
                        members.push(a);
                    }
                    if t.first() == Some(&b',') {
                        s = &t[1..];
                    } else if at_sep(t) {
                        s = t;
                        break;
                    } else {
                        return Err(self.ctx.expected(line, t, "',', '-' or the end of the member list"));
                    }
                }
                self.expect_end(line, s)?;
                self.hb.header.communicators.push(Communicator { id, name: text, members });
                self.hb.comms.push(pos([id_off, id_off], items, self.ctx.line_no));
            }
            b"string" => {
                let (s, text) = self.decl_name(line, s, "a string")?;
                self.expect_end(line, s)?;
                self.interner.declare(text.as_bytes());
                self.hb.strings.push(text);
            }
            b"location" => {
                let (location, rank_off) = self.location_line(line, rest)?;
                self.hb.header.locations.push(location);
                self.hb.locations.push(pos([rank_off.unwrap_or(kw_off), kw_off], Vec::new(), self.ctx.line_no));
            }
            b"MTF" => {
                let message = "the version line appears twice".to_string();
                return Err(self.ctx.error(line, kw_off, "duplicate declaration", message));
            }
            _ => {
                return Err(self.ctx.expected(
                    line,
                    rest,
                    "a declaration (scenario, trace, comment, untimed, processor, process, communicator, string, location) or an event",
                ))
            }
        }
        Ok(())
    }

    /// Completes the header: orders the processes by rank, checks it, hands it to the sink.
    fn end_header<S: EventSink + ?Sized>(&mut self, sink: &mut S) -> Result<()> {
        let hb = &mut self.hb;
        let mut order: Vec<usize> = (0..hb.header.processes.len()).collect();
        order.sort_by_key(|&i| hb.header.processes[i].rank);
        if order.iter().enumerate().any(|(i, &j)| i != j) {
            let mut procs: Vec<Option<Process>> = hb.header.processes.drain(..).map(Some).collect();
            let mut poss: Vec<Option<DeclPos>> = hb.processes.drain(..).map(Some).collect();
            // `order` is a permutation: each index is taken once.
            #[allow(clippy::expect_used)]
            for &j in &order {
                hb.header
                    .processes
                    .push(procs[j].take().expect("each index once"));
                hb.processes.push(poss[j].take().expect("each index once"));
            }
        }
        for (location, decl) in self.hb.header.locations.iter().zip(&self.hb.locations) {
            self.check_location_rank(&decl.text, location, Some(decl))?;
        }
        match sink.header(&self.hb.header) {
            Err(Error::Rule(violation)) => return Err(self.header_error(*violation)),
            other => other?,
        }
        for (id, text) in self.hb.strings.iter().enumerate() {
            self.stats.strings += 1;
            sink.string(id as StrId, text)?;
        }
        Ok(())
    }

    fn header_error(&self, v: Violation) -> Error {
        let hb = &self.hb;
        let (decl, off) = match v.field {
            Field::Processor(i) => (&hb.processors[i], hb.processors[i].offs[0]),
            Field::ProcessRank(i) => (&hb.processes[i], hb.processes[i].offs[0]),
            Field::ProcessProcessor(i) => (&hb.processes[i], hb.processes[i].offs[1]),
            Field::CommId(i) => (&hb.comms[i], hb.comms[i].offs[0]),
            Field::Member { comm, member } => {
                let d = &hb.comms[comm];
                let item = d
                    .items
                    .iter()
                    .rev()
                    .find(|(first, _)| *first <= member)
                    .map_or(d.offs[0], |it| it.1);
                (d, item)
            }
            _ => {
                return Error::input(
                    &self.ctx.file,
                    self.ctx.line_no,
                    1,
                    v.rule,
                    v.message,
                    String::new(),
                );
            }
        };
        let col = char_column(&decl.text, off);
        Error::input(
            &self.ctx.file,
            decl.line_no,
            col,
            v.rule,
            v.message,
            shown_line(&String::from_utf8_lossy(&decl.text), col),
        )
    }

    fn violation(&self, line: &[u8], v: Violation) -> Error {
        let col = slot_of(v.field).map_or(0, |s| self.cols[s]);
        let col = if col == 0 { self.cols[4] } else { col };
        self.ctx
            .error(line, col.saturating_sub(1) as usize, v.rule, v.message)
    }

    /// Interns a name at `slot`, defining it to the sink when new.
    #[inline]
    fn intern<S: EventSink + ?Sized>(
        &mut self,
        line: &[u8],
        at: In,
        bare: Option<In>,
        slot: usize,
        sink: &mut S,
    ) -> Result<StrId> {
        let bytes = bare.unwrap_or(&self.scratch);
        match self.interner.intern(bytes, slot) {
            Ok((id, None)) => Ok(id),
            Ok((id, Some(text))) => {
                self.stats.strings += 1;
                sink.string(id, text)?;
                Ok(id)
            }
            Err(()) => Err(self.ctx.expected(line, at, "a name in UTF-8")),
        }
    }

    fn event<S: EventSink + ?Sized>(&mut self, line: &[u8], sink: &mut S) -> Result<()> {
        self.cols = [0; N_SLOTS];
        let off = |rest: In| (line.len() - rest.len() + 1) as u32;
        let s = skip_space(line);
        self.cols[0] = off(s);
        let (s, rank) = match nom_u32::<_, nom::error::Error<In>>(s) {
            Ok((rest, r)) if rest.first() == Some(&b'.') || at_sep(rest) => (rest, r),
            _ => return Err(self.ctx.expected(line, s, "a rank")),
        };
        let (s, thread) = if s.first() == Some(&b'.') {
            let t = &s[1..];
            self.cols[1] = off(t);
            uint_u32(t).ok_or_else(|| {
                self.ctx
                    .expected(line, t, "a thread number after the rank's '.'")
            })?
        } else {
            (s, 0)
        };
        let s = spaces1(s).ok_or_else(|| self.ctx.expected(line, s, "a space after the rank"))?;
        self.cols[2] = off(s);
        let untimed = self.hb.header.untimed;
        let (s, start) = if untimed {
            self.tick(line, s, rank, thread)?
        } else {
            uint_u64(s).ok_or_else(|| self.ctx.expected(line, s, "an integer start time"))?
        };
        let s = spaces1(s).ok_or_else(|| self.ctx.expected(line, s, "an integer end time"))?;
        let time_next = if untimed {
            s.first() == Some(&b'-')
        } else {
            s.first().is_some_and(u8::is_ascii_digit)
        };
        if !time_next {
            if let Some(enter) = routine_keyword(s) {
                return self.routine(line, &s[5..], rank, thread, start, enter, sink);
            }
            let what = if untimed {
                "- for the end time (the trace is untimed)"
            } else {
                "an integer end time"
            };
            return Err(self.ctx.expected(line, s, what));
        }
        self.cols[3] = off(s);
        let (s, end) = if untimed {
            // One tick per event: the end is the start.
            (&s[1..], start)
        } else {
            uint_u64(s).ok_or_else(|| self.ctx.expected(line, s, "an integer end time"))?
        };
        let s = spaces1(s).ok_or_else(|| self.ctx.expected(line, s, "an MPI call name"))?;
        self.cols[4] = off(s);
        let (mut s, bare) = name(s, &mut self.scratch)
            .map_err(|(at, _)| self.ctx.expected(line, at, "an MPI call name"))?;
        let kind = match bare.and_then(kind_from_name) {
            Some(k) => k,
            None => OpKind::Other(self.intern(line, s, bare, SLOT_OTHER, sink)?),
        };
        self.op.reset(rank, kind, start, end);
        self.op.thread = thread;
        loop {
            let t = skip_space(s);
            if t.is_empty() || t[0] == b'#' {
                break;
            }
            let key_at = t;
            let eq = t.iter().take(6).position(|&b| b == b'=');
            let Some(eq) = eq else {
                return Err(self
                    .ctx
                    .expected(line, t, "a field such as c=0 (key=value)"));
            };
            let key = &t[..eq];
            let v = &t[eq + 1..];
            let slot = match key {
                b"c" => 5,
                b"to" => 6,
                b"from" => 7,
                b"tag" => 8,
                b"rtag" => 9,
                b"b" => 10,
                b"rb" => 11,
                b"dt" => 12,
                b"root" => 13,
                b"req" => 14,
                b"done" => 15,
                b"flag" => 16,
                b"rec" => 17,
                b"cap" => 18,
                _ => {
                    let message = format!(
                        "unknown field {} (the fields are {FIELD_KEYS})",
                        quoted_bytes(key)
                    );
                    return Err(self
                        .ctx
                        .error(line, line.len() - key_at.len(), "syntax", message));
                }
            };
            if self.cols[slot] != 0 {
                let message = format!("the field {}= appears twice", String::from_utf8_lossy(key));
                return Err(self
                    .ctx
                    .error(line, line.len() - key_at.len(), "syntax", message));
            }
            self.cols[slot] = off(key_at);
            let ctx = &self.ctx;
            let bad = |what: &str| ctx.expected(line, v, what);
            s = match slot {
                5 => {
                    let (r, x) = uint_u32(v).ok_or_else(|| bad("a communicator id after c="))?;
                    self.op.comm = Some(x);
                    r
                }
                6 => {
                    let (r, x) = uint_u32(v).ok_or_else(|| bad("a destination rank after to="))?;
                    self.op.dest = Some(x);
                    r
                }
                7 => {
                    let mut w = v;
                    if w.first() == Some(&b'*') {
                        self.op.flags |= flags::ANY_SOURCE;
                        w = &w[1..];
                    }
                    if w.first().is_some_and(u8::is_ascii_digit) || w.len() == v.len() {
                        let (r, x) = uint_u32(w)
                            .ok_or_else(|| bad("a source rank, '*' or '*rank' after from="))?;
                        self.op.source = Some(x);
                        r
                    } else if at_sep(w) {
                        w
                    } else {
                        return Err(bad("a source rank, '*' or '*rank' after from="));
                    }
                }
                8 => {
                    let (r, x) = int_i32(v).ok_or_else(|| bad("an integer tag after tag="))?;
                    self.op.send_tag = Some(x);
                    r
                }
                9 => {
                    let mut w = v;
                    if w.first() == Some(&b'*') {
                        self.op.flags |= flags::ANY_TAG;
                        w = &w[1..];
                    }
                    if w.len() == v.len() || !at_sep(w) {
                        let (r, x) = int_i32(w)
                            .ok_or_else(|| bad("an integer tag, '*' or '*tag' after rtag="))?;
                        self.op.recv_tag = Some(x);
                        r
                    } else {
                        w
                    }
                }
                10 => {
                    let (r, x) = uint_u64(v).ok_or_else(|| bad("a byte count after b="))?;
                    self.op.send_bytes = x;
                    r
                }
                11 => {
                    let (r, x) = uint_u64(v).ok_or_else(|| bad("a byte count after rb="))?;
                    self.op.recv_bytes = x;
                    r
                }
                12 => {
                    let (r, bare) = name(v, &mut self.scratch).map_err(|(at, e)| {
                        let what = if e == "a name" {
                            "a datatype name after dt="
                        } else {
                            e
                        };
                        self.ctx.expected(line, at, what)
                    })?;
                    let id = self.intern(line, v, bare, SLOT_DATATYPE, sink)?;
                    self.op.datatype = Some(id);
                    r
                }
                13 => {
                    let (r, x) = uint_u32(v).ok_or_else(|| bad("a root rank after root="))?;
                    self.op.root = Some(x);
                    r
                }
                14 => {
                    let (r, x) = uint_u64(v).ok_or_else(|| bad("a request id after req="))?;
                    self.op.request = Some(x);
                    r
                }
                15 => {
                    let mut w = v;
                    loop {
                        let item: NomResult<u64> = nom_u64(w);
                        let (r, x) =
                            item.map_err(|_| ctx.expected(line, w, "a request id in done="))?;
                        self.op.completes.push(x);
                        if r.first() == Some(&b',') {
                            w = &r[1..];
                        } else if at_sep(r) {
                            break r;
                        } else {
                            return Err(ctx.expected(
                                line,
                                r,
                                "',' or the end of the request list",
                            ));
                        }
                    }
                }
                16 => match v.first() {
                    Some(b'0') if at_sep(&v[1..]) => {
                        self.op.flags |= flags::NOT_COMPLETED;
                        &v[1..]
                    }
                    Some(b'1') if at_sep(&v[1..]) => &v[1..],
                    _ => return Err(bad("0 or 1 after flag=")),
                },
                17 => match v.first() {
                    Some(b'0') if at_sep(&v[1..]) => {
                        self.op.flags |= flags::WITHOUT_RECORDS;
                        &v[1..]
                    }
                    _ => return Err(bad("0 after rec= (a call recorded without its records)")),
                },
                _ => match v.first() {
                    Some(b'1') if at_sep(&v[1..]) => {
                        self.op.flags |= flags::RECV_CAPACITY;
                        &v[1..]
                    }
                    _ => return Err(bad("1 after cap= (rb= is the receive buffer's capacity)")),
                },
            };
        }
        self.stats.operations += 1;
        self.count_operation(rank, thread);
        match sink.operation(&self.op) {
            Err(Error::Rule(v)) => Err(self.violation(line, *v)),
            other => other,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn routine<S: EventSink + ?Sized>(
        &mut self,
        line: &[u8],
        t: In,
        rank: Rank,
        thread: u32,
        time: u64,
        enter: bool,
        sink: &mut S,
    ) -> Result<()> {
        let t =
            spaces1(t).ok_or_else(|| self.ctx.expected(line, t, "a space and a routine name"))?;
        self.cols[4] = (line.len() - t.len() + 1) as u32;
        let (rest, bare) =
            name(t, &mut self.scratch).map_err(|(at, e)| self.ctx.expected(line, at, e))?;
        let routine = self.intern(line, t, bare, SLOT_ROUTINE, sink)?;
        self.expect_end(line, rest)?;
        let event = RoutineEvent {
            rank,
            thread,
            time,
            routine,
            enter,
        };
        self.stats.routine_events += 1;
        match sink.routine(&event) {
            Err(Error::Rule(v)) => Err(self.violation(line, *v)),
            other => other,
        }
    }

    fn finish<S: EventSink + ?Sized>(mut self, sink: &mut S) -> Result<ParseStats> {
        match self.phase {
            Phase::Version => {
                let message = if self.stats.bytes == 0 {
                    "the file is empty: expected the version line `MTF 1`"
                } else {
                    "the file holds only blank lines and comments: expected the version line `MTF 1`"
                };
                return Err(Error::input(
                    &self.ctx.file,
                    1,
                    1,
                    "missing version",
                    message,
                    "",
                ));
            }
            Phase::Header => self.end_header(sink)?,
            Phase::Events => {}
        }
        if !self.late_locations.is_empty() {
            let mut all = std::mem::take(&mut self.hb.header.locations);
            all.append(&mut self.late_locations);
            sink.locations(&all)?;
        }
        sink.finish()?;
        Ok(self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_describes_the_token() {
        assert_eq!(found(b""), "end of line");
        assert_eq!(found(b" x"), "a space");
        assert_eq!(found(b"abc def"), "\"abc\"");
        assert_eq!(
            found(&[b'z'; 100]),
            format!("\"{}\"… (100 characters)", "z".repeat(60))
        );
    }

    #[test]
    fn columns_count_characters() {
        let line = "process 0 \"naïve\" on x".as_bytes();
        let offset = line.len() - 1;
        assert_eq!(char_column(line, offset), 22);
        assert_eq!(char_column(line, 0), 1);
    }

    #[test]
    fn names_bare_and_quoted() {
        let mut scratch = Vec::new();
        let (rest, bare) = name(b"MPI_INT b=1", &mut scratch).unwrap();
        assert_eq!((rest, bare), (&b" b=1"[..], Some(&b"MPI_INT"[..])));
        let (rest, bare) = name(br#""a \"q\" \\ \n\r\t#=," x"#, &mut scratch).unwrap();
        assert_eq!((rest, bare), (&b" x"[..], None));
        assert_eq!(scratch, b"a \"q\" \\ \n\r\t#=,");
        assert_eq!(
            name(b"\"open", &mut scratch).unwrap_err().1,
            "a closing '\"' for this string"
        );
        assert_eq!(
            name(br#""\x""#, &mut scratch).unwrap_err().1,
            "an escape (\\\" \\\\ \\n \\r \\t)"
        );
        assert_eq!(
            name(b"\"a\"b", &mut scratch).unwrap_err().1,
            "a space after the closing quote"
        );
        assert_eq!(name(b"a=b", &mut scratch).unwrap_err().1, "a name");
    }

    #[test]
    fn interner_assigns_dense_ids_and_reports_new_names_once() {
        let mut i = Interner::new();
        assert_eq!(
            i.intern(b"MPI_INT", SLOT_DATATYPE),
            Ok((0, Some("MPI_INT")))
        );
        assert_eq!(i.intern(b"MPI_INT", SLOT_DATATYPE), Ok((0, None)));
        assert_eq!(i.intern(b"main", SLOT_ROUTINE), Ok((1, Some("main"))));
        assert_eq!(i.intern(b"MPI_INT", SLOT_ROUTINE), Ok((0, None)));
        assert_eq!(i.intern(b"", SLOT_OTHER), Ok((2, Some(""))));
        assert_eq!(i.intern(b"", SLOT_OTHER), Ok((2, None)));
        assert_eq!(i.intern(b"\xff", SLOT_OTHER), Err(()));
    }

    #[test]
    fn numbers_end_at_token_boundaries() {
        assert_eq!(uint_u64(b"12 x"), Some((&b" x"[..], 12)));
        assert_eq!(uint_u64(b"12#c"), Some((&b"#c"[..], 12)));
        assert_eq!(uint_u64(b"12x"), None);
        assert_eq!(uint_u64(b"18446744073709551616"), None);
        assert_eq!(uint_u32(b"4294967296"), None);
        assert_eq!(int_i32(b"-2147483648"), Some((&b""[..], i32::MIN)));
        assert_eq!(routine_keyword(b"enter x"), Some(true));
        assert_eq!(routine_keyword(b"leave"), Some(false));
        assert_eq!(routine_keyword(b"entering x"), None);
    }
}
