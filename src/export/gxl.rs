//! Export to GXL (Holt et al.'s Graph eXchange Language, DTD gxl-1.0), the carrier the MTF
//! paper writes traces in: one `<graph>` of typed nodes with typed attributes (the
//! metamodel's Scenario, Trace, Processor, Process, ProcessTrace, Communicator, the
//! MPOperation subclasses, RoutineCall, Message, …) and edges for containment and for
//! message, request and collective links. The reader's `schema` module lists every node
//! type and attribute; [`crate::ingest::gxl`] reads the graph back.
//!
//! Text is escaped for XML 1.0: tab, line feed and carriage return as character references,
//! the characters XML cannot carry at all (the other C0 controls, U+0000 among them, U+FFFE
//! and U+FFFF) as a private escape (the reader's `schema::ESCAPE`), so that any XML
//! parser reads the file and names come back exactly.

use std::io::Write;
use std::path::Path;

use super::{Spool, Writer};
use crate::error::{Error, Result};
use crate::hash::FxHashMap as HashMap;
use crate::ingest::anomaly_fields::{self, Val};
use crate::ingest::gxl::schema::{needs_escape, operation_class, other_key, ESCAPE, TYPE_PREFIX};
use crate::model::{
    flags, Anomaly, CollectiveInstance, Location, Message, OpKind, OpPosition, Operation, Rank,
    RoutineCall, StrId, Time, TraceHeader,
};

/// Appends `s` escaped for XML text and attribute values: the markup characters as
/// entities, tab, line feed and carriage return as character references, and what XML 1.0
/// cannot carry at all as [`ESCAPE`] sequences, which the reader decodes
/// ([`crate::ingest::gxl::schema::unescape_name`]).
fn push_escaped(buf: &mut Vec<u8>, s: &str) {
    // Runs of characters that stay as they are are copied whole.
    let mut plain = 0;
    for (i, c) in s.char_indices() {
        let entity: &[u8] = match c {
            '&' => b"&amp;",
            '<' => b"&lt;",
            '>' => b"&gt;",
            '"' => b"&quot;",
            '\t' => b"&#x9;",
            '\n' => b"&#xA;",
            '\r' => b"&#xD;",
            c if needs_escape(c) => b"",
            _ => continue,
        };
        buf.extend_from_slice(&s.as_bytes()[plain..i]);
        plain = i + c.len_utf8();
        if entity.is_empty() {
            buf.extend_from_slice(ESCAPE.encode_utf8(&mut [0; 4]).as_bytes());
            buf.extend_from_slice(format!("{:04X}", u32::from(c)).as_bytes());
        } else {
            buf.extend_from_slice(entity);
        }
    }
    buf.extend_from_slice(&s.as_bytes()[plain..]);
}

/// A location's routine calls as the writer tracks them: how many it has written, and the
/// open ones' indexes, innermost last.
#[derive(Default)]
struct CallStack {
    written: u64,
    open: Vec<u64>,
}

/// The GXL [`Writer`].
pub(crate) struct GxlWriter<W: Write> {
    out: Spool<W>,
    strings: Vec<String>,
    times: Option<(Time, Time)>,
    calls: HashMap<(Rank, u32), CallStack>,
    messages: u64,
    collectives: u64,
    anomalies: u64,
}

impl<W: Write> GxlWriter<W> {
    /// A writer to `out`, named `name` in errors; `times` are the trace's first and last
    /// event times, for the Trace node.
    pub(crate) fn new(out: W, name: &Path, times: Option<(Time, Time)>) -> GxlWriter<W> {
        GxlWriter {
            out: Spool::new(out, name),
            strings: Vec::new(),
            times,
            calls: HashMap::default(),
            messages: 0,
            collectives: 0,
            anomalies: 0,
        }
    }

    fn string(&self, id: StrId) -> Result<&str> {
        self.strings
            .get(id as usize)
            .map(String::as_str)
            .ok_or_else(|| {
                Error::Corrupt(format!("string {id} is not in the trace's string table"))
            })
    }

    fn open_node(&mut self, id: &str, class: &str) {
        let b = &mut self.out.buf;
        b.extend_from_slice(b"<node id=\"");
        b.extend_from_slice(id.as_bytes());
        b.extend_from_slice(b"\"><type xlink:href=\"");
        b.extend_from_slice(TYPE_PREFIX.as_bytes());
        b.extend_from_slice(class.as_bytes());
        b.extend_from_slice(b"\"/>");
    }

    fn close_node(&mut self) {
        self.out.buf.extend_from_slice(b"</node>\n");
    }

    fn edge(&mut self, from: &str, to: &str, class: &str) {
        let b = &mut self.out.buf;
        for (text, part) in [
            ("<edge from=\"", from),
            ("\" to=\"", to),
            ("\"><type xlink:href=\"", TYPE_PREFIX),
            ("", class),
        ] {
            b.extend_from_slice(text.as_bytes());
            b.extend_from_slice(part.as_bytes());
        }
        b.extend_from_slice(b"\"/></edge>\n");
    }

    fn attr_open(&mut self, name: &str) {
        self.out.buf.extend_from_slice(b"<attr name=\"");
        self.out.buf.extend_from_slice(name.as_bytes());
        self.out.buf.extend_from_slice(b"\">");
    }

    fn int(&mut self, name: &str, v: impl std::fmt::Display) {
        self.attr_open(name);
        self.out
            .buf
            .extend_from_slice(format!("<int>{v}</int></attr>").as_bytes());
    }

    fn opt_int(&mut self, name: &str, v: Option<impl std::fmt::Display>) {
        if let Some(v) = v {
            self.int(name, v);
        }
    }

    fn text(&mut self, name: &str, s: &str) -> Result<()> {
        self.attr_open(name);
        self.out.buf.extend_from_slice(b"<string>");
        push_escaped(&mut self.out.buf, s);
        self.out.buf.extend_from_slice(b"</string></attr>");
        Ok(())
    }

    fn flag(&mut self, name: &str) {
        self.attr_open(name);
        self.out.buf.extend_from_slice(b"<bool>true</bool></attr>");
    }

    fn ints(&mut self, name: &str, values: impl Iterator<Item = u64>) {
        self.attr_open(name);
        self.out.buf.extend_from_slice(b"<seq>");
        for v in values {
            self.out
                .buf
                .extend_from_slice(format!("<int>{v}</int>").as_bytes());
        }
        self.out.buf.extend_from_slice(b"</seq></attr>");
    }

    /// An MPI call as `key` (a fixed kind, by its MPI name) or as `other<Key>` (a call of
    /// no fixed kind, by its name).
    fn call(&mut self, key: &str, kind: OpKind) -> Result<()> {
        match kind {
            OpKind::Other(id) => {
                let name = self.string(id)?.to_string();
                self.text(&other_key(key), &name)
            }
            k => self.text(key, k.mpi_name().expect("fixed kinds have names")),
        }
    }

    fn location(&mut self, i: usize, l: &Location) -> Result<()> {
        let id = format!("LOC{i}");
        self.open_node(&id, "Location");
        self.text("locationName", &l.name)?;
        self.text("kind", l.kind.token())?;
        self.text("group", &l.group)?;
        self.opt_int("rank", l.rank);
        self.opt_int("thread", l.thread);
        self.int("regions", l.regions);
        self.int("events", l.events);
        self.close_node();
        if let Some(rank) = l.rank {
            self.edge(&id, &format!("PRC{rank}"), "ofProcess");
        }
        Ok(())
    }

    /// The node id of the innermost open routine call of a location, or of its process
    /// trace: what directly contains the next item there.
    fn parent(&self, rank: Rank, thread: u32) -> String {
        match self.calls.get(&(rank, thread)).and_then(|s| s.open.last()) {
            Some(k) => format!("r{rank}.{thread}.{k}"),
            None => format!("PT{rank}"),
        }
    }
}

/// The node id of the operation at `p`.
fn op_id(p: OpPosition) -> String {
    format!("o{}.{}.{}", p.rank, p.thread, p.index)
}

impl<W: Write> Writer for GxlWriter<W> {
    fn header(&mut self, header: &TraceHeader, strings: &[String]) -> Result<()> {
        self.strings = strings.to_vec();
        self.out.buf.extend_from_slice(
            b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
              <!DOCTYPE gxl SYSTEM \"http://www.gupro.de/GXL/gxl-1.0.dtd\">\n\
              <gxl xmlns:xlink=\"http://www.w3.org/1999/xlink\">\n\
              <graph id=\"mtf\" edgeids=\"false\" edgemode=\"directed\" hypergraph=\"false\">\n",
        );
        self.open_node("scen", "Scenario");
        self.text("description", &header.scenario)?;
        self.close_node();
        self.open_node("trace", "Trace");
        self.text("traceName", &header.trace_name)?;
        self.text("comments", &header.comments)?;
        if header.untimed {
            // Its times are only its events' order: a reader must not take them for times.
            self.flag("untimed");
        }
        if let Some((first, last)) = self.times {
            self.int("startTime", first);
            self.int("endTime", last);
        }
        self.close_node();
        self.edge("scen", "trace", "hasTrace");
        self.open_node("strings", "StringTable");
        self.attr_open("strings");
        self.out.buf.extend_from_slice(b"<seq>");
        for text in strings {
            self.out.buf.extend_from_slice(b"<string>");
            push_escaped(&mut self.out.buf, text);
            self.out.buf.extend_from_slice(b"</string>");
        }
        self.out.buf.extend_from_slice(b"</seq></attr>");
        self.close_node();
        for p in &header.processors {
            self.open_node(&format!("PRCR{}", p.id), "Processor");
            self.int("processorId", p.id);
            self.text("processorName", &p.name)?;
            self.close_node();
        }
        for p in &header.processes {
            let id = format!("PRC{}", p.rank);
            self.open_node(&id, "Process");
            self.int("rank", p.rank);
            self.text("processName", &p.name)?;
            self.opt_int("processorId", p.processor);
            self.close_node();
            if let Some(processor) = p.processor {
                self.edge(&id, &format!("PRCR{processor}"), "runsOn");
            }
            let trace_id = format!("PT{}", p.rank);
            self.open_node(&trace_id, "ProcessTrace");
            self.int("rank", p.rank);
            self.close_node();
            self.edge("trace", &trace_id, "hasProcessTrace");
            self.edge(&trace_id, &id, "ofProcess");
        }
        for c in &header.communicators {
            self.open_node(&format!("COMM{}", c.id), "Communicator");
            self.int("commId", c.id);
            self.text("commName", &c.name)?;
            self.ints("members", c.members.iter().map(|&m| u64::from(m)));
            self.close_node();
        }
        for (i, l) in header.locations.iter().enumerate() {
            self.location(i, l)?;
        }
        self.out.maybe_flush()
    }

    fn operation(&mut self, op: &Operation, at: OpPosition) -> Result<()> {
        let id = op_id(at);
        self.open_node(&id, operation_class(op.kind));
        self.call("call", op.kind)?;
        self.int("rank", op.rank);
        self.int("thread", op.thread);
        self.int("startTime", op.start);
        self.int("endTime", op.end);
        self.int("nestingLevel", op.depth);
        self.opt_int("comm", op.comm);
        self.opt_int("dest", op.dest);
        self.opt_int("source", op.source);
        self.opt_int("sendTag", op.send_tag);
        self.opt_int("recvTag", op.recv_tag);
        self.opt_int("sendBytes", Some(op.send_bytes).filter(|&b| b != 0));
        self.opt_int("recvBytes", Some(op.recv_bytes).filter(|&b| b != 0));
        if let Some(dt) = op.datatype {
            let name = self.string(dt)?.to_string();
            self.text("dataType", &name)?;
        }
        self.opt_int("root", op.root);
        self.opt_int("request", op.request);
        if !op.completes.is_empty() {
            self.ints("completes", op.completes.iter().copied());
        }
        for (bit, name) in [
            (flags::ANY_SOURCE, "anySource"),
            (flags::ANY_TAG, "anyTag"),
            (flags::NOT_COMPLETED, "notCompleted"),
            (flags::WITHOUT_RECORDS, "withoutRecords"),
            (flags::RECV_CAPACITY, "recvCapacity"),
        ] {
            if op.flags & bit != 0 {
                self.flag(name);
            }
        }
        let known = flags::ANY_SOURCE
            | flags::ANY_TAG
            | flags::NOT_COMPLETED
            | flags::WITHOUT_RECORDS
            | flags::RECV_CAPACITY;
        let other = op.flags & !known;
        self.opt_int("otherFlags", Some(other).filter(|&f| f != 0));
        self.close_node();
        let parent = self.parent(op.rank, op.thread);
        self.edge(&parent, &id, "contains");
        self.out.maybe_flush()
    }

    fn routine(&mut self, call: &RoutineCall, enter: bool) -> Result<()> {
        let key = (call.rank, call.thread);
        if !enter {
            if let Some(s) = self.calls.get_mut(&key) {
                s.open.pop();
            }
            return Ok(());
        }
        let parent = self.parent(call.rank, call.thread);
        let stack = self.calls.entry(key).or_default();
        let k = stack.written;
        stack.written += 1;
        stack.open.push(k);
        let id = format!("r{}.{}.{k}", call.rank, call.thread);
        self.open_node(&id, "RoutineCall");
        let name = self.string(call.routine)?.to_string();
        self.text("routineCallName", &name)?;
        self.int("rank", call.rank);
        self.int("thread", call.thread);
        self.int("nestingLevel", call.depth);
        self.int("startTime", call.start);
        self.int("endTime", call.end);
        self.close_node();
        self.edge(&parent, &id, "contains");
        self.out.maybe_flush()
    }

    fn message(&mut self, m: &Message, send: OpPosition, recv: OpPosition) -> Result<()> {
        let id = format!("m{}", self.messages);
        self.messages += 1;
        self.open_node(&id, "Message");
        self.int("sender", m.sender);
        self.int("receiver", m.receiver);
        self.int("comm", m.comm);
        self.int("tag", m.tag);
        self.int("dataSize", m.bytes);
        self.int("sendTime", m.send_time);
        self.int("recvTime", m.recv_time);
        self.close_node();
        self.edge(&id, &op_id(send), "sendOf");
        self.edge(&id, &op_id(recv), "receiveOf");
        self.out.maybe_flush()
    }

    fn request_link(&mut self, request: OpPosition, completion: OpPosition) -> Result<()> {
        self.edge(&op_id(completion), &op_id(request), "completes");
        self.out.maybe_flush()
    }

    fn collective(&mut self, c: &CollectiveInstance, members: &[OpPosition]) -> Result<()> {
        let id = format!("ci{}", self.collectives);
        self.collectives += 1;
        self.open_node(&id, "CollectiveInstance");
        self.call("call", c.kind)?;
        self.int("comm", c.comm);
        self.opt_int("root", c.root);
        self.int("startTime", c.start);
        self.int("endTime", c.end);
        self.int("sendBytes", c.send_bytes);
        self.int("recvBytes", c.recv_bytes);
        self.close_node();
        for &p in members {
            self.edge(&id, &op_id(p), "member");
        }
        self.out.maybe_flush()
    }

    fn anomaly(&mut self, a: &Anomaly, at: &[OpPosition], derived: bool) -> Result<()> {
        let id = format!("a{}", self.anomalies);
        self.anomalies += 1;
        let (class, fields) = anomaly_fields::fields(a);
        self.open_node(&id, "Anomaly");
        self.text("class", class)?;
        self.attr_open("derived");
        self.out
            .buf
            .extend_from_slice(format!("<bool>{derived}</bool></attr>").as_bytes());
        let mut edges = Vec::new();
        for (key, value) in fields {
            match value {
                Val::Num(v) => self.int(key, v),
                Val::Int(v) => self.int(key, v),
                Val::Str(s) => {
                    let name = self.string(s)?.to_string();
                    self.text(key, &name)?;
                }
                Val::Kind(kind) => self.call(key, kind)?,
                Val::Op(i) => {
                    let p = *at.get(i).ok_or_else(|| {
                        Error::Corrupt(format!("the anomaly {class} names an operation not given"))
                    })?;
                    self.attr_open(key);
                    self.out.buf.extend_from_slice(
                        format!(
                            "<tup><int>{}</int><int>{}</int><int>{}</int></tup></attr>",
                            p.rank, p.thread, p.index
                        )
                        .as_bytes(),
                    );
                    edges.push((key, p));
                }
                Val::Text(t) => self.text(key, &t)?,
            }
        }
        self.close_node();
        for (key, p) in edges {
            self.edge(&id, &op_id(p), key);
        }
        self.out.maybe_flush()
    }

    fn finish(&mut self) -> Result<()> {
        self.out.buf.extend_from_slice(b"</graph>\n</gxl>\n");
        self.out.finish()
    }
}
