//! Writes the MTF text format: an [`EventSink`] whose output the parser reads back exactly.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::names::{can_be_bare, names_a_kind};
use crate::error::{Error, Result};
use crate::ingest::anomaly_fields::{self as anomaly, Val};
use crate::ingest::EventSink;
use crate::model::{
    flags, Anomaly, Location, OpKind, OpPosition, Operation, Rank, RoutineEvent, StrId, TraceHeader,
};

/// Bytes gathered before they are handed to the underlying writer.
const FLUSH_AT: usize = 1 << 20;

/// An [`EventSink`] that writes MTF text version 1 to `W`.
///
/// Names are written inline: the writer resolves the string ids defined with
/// [`EventSink::string`]. Parsing the output gives back the same header, operations and
/// routine events, provided the source defined its strings in first-use order (as the
/// parser itself does). An operation's `depth` is not written: the parser derives it from
/// the routine enter/leave lines.
pub struct MtfWriter<W: Write> {
    out: W,
    name: PathBuf,
    buf: Vec<u8>,
    /// Each string as a name token (bare or quoted).
    names: Vec<Option<Box<[u8]>>>,
    /// Each string as the call name of an `Other` operation (quoted when it would otherwise
    /// read back as a fixed kind).
    call_names: Vec<Option<Box<[u8]>>>,
    /// The trace is untimed: times are written `-`.
    untimed: bool,
}

/// A time, or `-` in an untimed trace (whose times are only the events' order).
fn push_time(b: &mut Vec<u8>, untimed: bool, t: u64) {
    if untimed {
        b.push(b'-');
    } else {
        push_u64(b, t);
    }
}

impl MtfWriter<File> {
    /// Creates (or truncates) the file at `path` and writes to it.
    pub fn create(path: &Path) -> Result<MtfWriter<File>> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        Ok(MtfWriter::with_name(file, path))
    }
}

impl<W: Write> MtfWriter<W> {
    /// A writer to `out`; errors name the output `<output>`.
    pub fn new(out: W) -> MtfWriter<W> {
        MtfWriter::with_name(out, "<output>")
    }

    /// A writer to `out`; errors name the output `name`.
    pub fn with_name(out: W, name: impl Into<PathBuf>) -> MtfWriter<W> {
        MtfWriter {
            out,
            name: name.into(),
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            names: Vec::new(),
            call_names: Vec::new(),
            untimed: false,
        }
    }

    /// Declares a whole string table, right after [`EventSink::header`]: `string` lines in
    /// id order, so that a parse gives every name the id it has here (and keeps names no
    /// event uses), instead of ids in first-use order.
    pub fn strings(&mut self, table: &[String]) -> Result<()> {
        for (id, text) in table.iter().enumerate() {
            self.string(id as StrId, text)?;
            self.buf.extend_from_slice(b"string ");
            push_name(&mut self.buf, text);
            self.buf.push(b'\n');
            self.maybe_flush()?;
        }
        Ok(())
    }

    /// Writes what is buffered and returns the underlying writer.
    pub fn into_inner(mut self) -> Result<W> {
        self.flush_buf()?;
        Ok(self.out)
    }

    fn flush_buf(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.out
                .write_all(&self.buf)
                .map_err(|e| Error::io(&self.name, e))?;
            self.buf.clear();
        }
        Ok(())
    }

    #[inline]
    fn maybe_flush(&mut self) -> Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush_buf()?;
        }
        Ok(())
    }

    fn undefined(id: StrId) -> Error {
        Error::Usage(format!(
            "MTF writer: string {id} is used before it is defined"
        ))
    }

    fn who(&mut self, rank: Rank, thread: u32) {
        push_who(&mut self.buf, rank, thread);
    }

    /// Writes a `location` line.
    fn location(&mut self, l: &Location) {
        let b = &mut self.buf;
        b.extend_from_slice(b"location ");
        push_name(b, &l.name);
        b.push(b' ');
        b.extend_from_slice(l.kind.token().as_bytes());
        if !l.group.is_empty() {
            b.extend_from_slice(b" group=");
            push_name(b, &l.group);
        }
        for (key, value) in [
            (&b" rank="[..], l.rank.map(u64::from)),
            (b" thread=", l.thread.map(u64::from)),
            (b" regions=", Some(l.regions).filter(|&n| n != 0)),
            (b" events=", Some(l.events).filter(|&n| n != 0)),
        ] {
            if let Some(v) = value {
                b.extend_from_slice(key);
                push_u64(b, v);
            }
        }
        b.push(b'\n');
    }

    /// Writes an `anomaly` line; `at` gives the positions of the operations it names.
    fn anomaly_line(&mut self, a: &Anomaly, at: &[OpPosition]) -> Result<()> {
        let (class, fields) = anomaly::fields(a);
        let b = &mut self.buf;
        b.extend_from_slice(b"anomaly ");
        b.extend_from_slice(class.as_bytes());
        for (key, value) in fields {
            b.push(b' ');
            b.extend_from_slice(key.as_bytes());
            b.push(b'=');
            match value {
                Val::Num(v) => push_u64(b, v),
                Val::Int(v) => {
                    if v < 0 {
                        b.push(b'-');
                    }
                    push_u64(b, v.unsigned_abs());
                }
                Val::Str(id) => b.extend_from_slice(
                    self.names
                        .get(id as usize)
                        .and_then(Option::as_ref)
                        .ok_or_else(|| Self::undefined(id))?,
                ),
                Val::Kind(kind) => push_call(b, &self.call_names, kind)?,
                Val::Op(i) => {
                    let p = at.get(i).ok_or_else(|| {
                        Error::Usage(format!(
                            "MTF writer: the anomaly {class} names {} operations but {} positions were given",
                            a.ops().len(),
                            at.len()
                        ))
                    })?;
                    push_who(b, p.rank, p.thread);
                    b.push(b':');
                    push_u64(b, p.index);
                }
                Val::Text(t) => push_name(b, &t),
            }
        }
        b.push(b'\n');
        self.maybe_flush()
    }
}

fn push_who(buf: &mut Vec<u8>, rank: Rank, thread: u32) {
    push_u64(buf, rank.into());
    if thread != 0 {
        buf.push(b'.');
        push_u64(buf, thread.into());
    }
}

/// Appends the call name of `kind`: its MPI name without `MPI_`, or its `Other` name.
// Only `Other` lacks an MPI name, and it has its own arm.
#[allow(clippy::expect_used)]
fn push_call(buf: &mut Vec<u8>, call_names: &[Option<Box<[u8]>>], kind: OpKind) -> Result<()> {
    match kind {
        OpKind::Other(id) => {
            let name = call_names
                .get(id as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| MtfWriter::<Vec<u8>>::undefined(id))?;
            buf.extend_from_slice(name);
        }
        k => buf.extend_from_slice(&k.mpi_name().expect("fixed kinds have names").as_bytes()[4..]),
    }
    Ok(())
}

/// Appends `s` as a name token: bare when it can be, else quoted with escapes.
fn push_name(buf: &mut Vec<u8>, s: &str) {
    if can_be_bare(s) {
        buf.extend_from_slice(s.as_bytes());
    } else {
        push_quoted(buf, s);
    }
}

fn push_quoted(buf: &mut Vec<u8>, s: &str) {
    buf.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            b => buf.push(b),
        }
    }
    buf.push(b'"');
}

/// "00" to "99", for writing two digits at a time.
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Appends the decimal digits of `v`.
#[inline]
pub(crate) fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        tmp[i] = b'0' + v as u8;
    }
    buf.extend_from_slice(&tmp[i..]);
}

#[inline]
fn push_i32(buf: &mut Vec<u8>, v: i32) {
    if v < 0 {
        buf.push(b'-');
    }
    push_u64(buf, v.unsigned_abs().into());
}

/// Appends a member list: runs of three or more consecutive ranks as `a-b`.
fn push_members(buf: &mut Vec<u8>, members: &[Rank]) {
    let mut i = 0;
    while i < members.len() {
        if i > 0 {
            buf.push(b',');
        }
        let a = members[i];
        let run = |step: i64| {
            let mut j = i;
            while j + 1 < members.len() && i64::from(members[j + 1]) == i64::from(members[j]) + step
            {
                j += 1;
            }
            j
        };
        let up = run(1);
        let j = if up - i >= 2 { up } else { run(-1) };
        push_u64(buf, a.into());
        if j - i >= 2 {
            buf.push(b'-');
            push_u64(buf, members[j].into());
            i = j + 1;
        } else {
            i += 1;
        }
    }
}

impl<W: Write> EventSink for MtfWriter<W> {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        let b = &mut self.buf;
        b.extend_from_slice(b"MTF ");
        push_u64(b, super::VERSION.into());
        b.push(b'\n');
        self.untimed = header.untimed;
        let b = &mut self.buf;
        if header.untimed {
            b.extend_from_slice(b"untimed\n");
        }
        for (key, text) in [
            ("scenario ", &header.scenario),
            ("trace ", &header.trace_name),
            ("comment ", &header.comments),
        ] {
            if !text.is_empty() {
                b.extend_from_slice(key.as_bytes());
                push_name(b, text);
                b.push(b'\n');
            }
        }
        for p in &header.processors {
            b.extend_from_slice(b"processor ");
            push_u64(b, p.id.into());
            b.push(b' ');
            push_name(b, &p.name);
            b.push(b'\n');
        }
        for p in &header.processes {
            b.extend_from_slice(b"process ");
            push_u64(b, p.rank.into());
            b.push(b' ');
            push_name(b, &p.name);
            if let Some(id) = p.processor {
                b.extend_from_slice(b" on ");
                push_u64(b, id.into());
            }
            b.push(b'\n');
        }
        for c in &header.communicators {
            b.extend_from_slice(b"communicator ");
            push_u64(b, c.id.into());
            b.push(b' ');
            push_name(b, &c.name);
            b.push(b' ');
            push_members(b, &c.members);
            b.push(b'\n');
        }
        for l in &header.locations {
            self.location(l);
        }
        self.maybe_flush()
    }

    fn string(&mut self, id: StrId, text: &str) -> Result<()> {
        let i = id as usize;
        if self.names.len() <= i {
            self.names.resize(i + 1, None);
            self.call_names.resize(i + 1, None);
        }
        let mut token = Vec::with_capacity(text.len() + 2);
        push_name(&mut token, text);
        let call = if names_a_kind(text) || !can_be_bare(text) {
            let mut quoted = Vec::with_capacity(text.len() + 2);
            push_quoted(&mut quoted, text);
            quoted
        } else {
            token.clone()
        };
        self.names[i] = Some(token.into_boxed_slice());
        self.call_names[i] = Some(call.into_boxed_slice());
        Ok(())
    }

    fn operation(&mut self, op: &Operation) -> Result<()> {
        self.who(op.rank, op.thread);
        let b = &mut self.buf;
        b.push(b' ');
        push_time(b, self.untimed, op.start);
        b.push(b' ');
        push_time(b, self.untimed, op.end);
        b.push(b' ');
        push_call(b, &self.call_names, op.kind)?;
        if let Some(c) = op.comm {
            b.extend_from_slice(b" c=");
            push_u64(b, c.into());
        }
        if let Some(d) = op.dest {
            b.extend_from_slice(b" to=");
            push_u64(b, d.into());
        }
        if op.flags & flags::ANY_SOURCE != 0 {
            b.extend_from_slice(b" from=*");
            if let Some(s) = op.source {
                push_u64(b, s.into());
            }
        } else if let Some(s) = op.source {
            b.extend_from_slice(b" from=");
            push_u64(b, s.into());
        }
        if let Some(t) = op.send_tag {
            b.extend_from_slice(b" tag=");
            push_i32(b, t);
        }
        if op.flags & flags::ANY_TAG != 0 {
            b.extend_from_slice(b" rtag=*");
            if let Some(t) = op.recv_tag {
                push_i32(b, t);
            }
        } else if let Some(t) = op.recv_tag {
            b.extend_from_slice(b" rtag=");
            push_i32(b, t);
        }
        if op.send_bytes != 0 {
            b.extend_from_slice(b" b=");
            push_u64(b, op.send_bytes);
        }
        if op.recv_bytes != 0 {
            b.extend_from_slice(b" rb=");
            push_u64(b, op.recv_bytes);
        }
        if let Some(id) = op.datatype {
            let name = self
                .names
                .get(id as usize)
                .and_then(Option::as_ref)
                .ok_or_else(|| Self::undefined(id))?;
            b.extend_from_slice(b" dt=");
            b.extend_from_slice(name);
        }
        if let Some(r) = op.root {
            b.extend_from_slice(b" root=");
            push_u64(b, r.into());
        }
        if let Some(r) = op.request {
            b.extend_from_slice(b" req=");
            push_u64(b, r);
        }
        if let Some((first, rest)) = op.completes.split_first() {
            b.extend_from_slice(b" done=");
            push_u64(b, *first);
            for &r in rest {
                b.push(b',');
                push_u64(b, r);
            }
        }
        if op.flags & flags::NOT_COMPLETED != 0 {
            b.extend_from_slice(b" flag=0");
        }
        if op.flags & flags::WITHOUT_RECORDS != 0 {
            b.extend_from_slice(b" rec=0");
        }
        if op.flags & flags::RECV_CAPACITY != 0 {
            b.extend_from_slice(b" cap=1");
        }
        b.push(b'\n');
        self.maybe_flush()
    }

    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        self.who(event.rank, event.thread);
        let b = &mut self.buf;
        b.push(b' ');
        push_time(b, self.untimed, event.time);
        b.extend_from_slice(if event.enter { b" enter " } else { b" leave " });
        let id = event.routine;
        let name = self
            .names
            .get(id as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Self::undefined(id))?;
        b.extend_from_slice(name);
        b.push(b'\n');
        self.maybe_flush()
    }

    /// Writes an anomaly that names no operation; one that does needs
    /// [`EventSink::anomaly_at`], since MTF text names operations by position.
    fn anomaly(&mut self, anomaly: &Anomaly) -> Result<()> {
        if !anomaly.ops().is_empty() {
            return Err(Error::Usage(format!(
                "MTF writer: the anomaly {:?} names operations by id; MTF text names them by position (anomaly_at)",
                anomaly.kind_name()
            )));
        }
        self.anomaly_line(anomaly, &[])
    }

    fn anomaly_at(&mut self, anomaly: &Anomaly, at: &[OpPosition]) -> Result<()> {
        self.anomaly_line(anomaly, at)
    }

    /// Writes the locations as `location` lines after the events (where a source that
    /// learns them at the end reports them).
    fn locations(&mut self, locations: &[Location]) -> Result<()> {
        for l in locations {
            self.location(l);
        }
        self.maybe_flush()
    }

    fn finish(&mut self) -> Result<()> {
        self.flush_buf()?;
        self.out.flush().map_err(|e| Error::io(&self.name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut b = Vec::new();
        f(&mut b);
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn integers() {
        for v in [0, 7, 10, 99, 100, 101, 12345, 1_000_000_007, u64::MAX] {
            assert_eq!(text(|b| push_u64(b, v)), v.to_string());
        }
        for v in [0, -1, 42, i32::MIN, i32::MAX] {
            assert_eq!(text(|b| push_i32(b, v)), v.to_string());
        }
    }

    #[test]
    fn member_runs() {
        assert_eq!(text(|b| push_members(b, &[0, 1, 2, 3])), "0-3");
        assert_eq!(text(|b| push_members(b, &[0, 1, 5, 4, 3, 9])), "0,1,5-3,9");
        assert_eq!(text(|b| push_members(b, &[2, 4, 6, 7, 8])), "2,4,6-8");
        assert_eq!(text(|b| push_members(b, &[7])), "7");
        assert_eq!(text(|b| push_members(b, &[])), "");
    }

    #[test]
    fn names_are_quoted_only_when_needed() {
        assert_eq!(text(|b| push_name(b, "MPI_INT")), "MPI_INT");
        assert_eq!(text(|b| push_name(b, "")), "\"\"");
        assert_eq!(text(|b| push_name(b, "a b\"c\\\n")), r#""a b\"c\\\n""#);
    }
}
