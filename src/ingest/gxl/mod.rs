//! GXL: reads the MTF graphs that [`crate::export::gxl`] writes (the vocabulary is in
//! `schema`) into an [`EventSink`], streaming with quick-xml: one node is held at a time.
//!
//! The graph's nodes carry everything: the declarations (Scenario, Trace, Processor,
//! Process, Communicator, Location) come first, then the operations and routine calls in
//! time order, each call before what it holds. A routine call node gives its enter; its leave
//! is delivered when the next item of its location lies outside it (by nesting level), or at
//! the end. Messages, collective instances and the anomalies marked `derived` are what the
//! import's matching finds again from the operations: they are read and passed over. Edges
//! repeat what the attributes say, for other graph tools; they are passed over too. A node
//! of a type this reader does not know is skipped and reported as an anomaly.
//!
//! Errors name the file and the byte offset: XML that does not parse, a node without a
//! required attribute, a value of the wrong type, a declaration after the events.

pub(crate) mod schema;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::error::{Error, Result};
use crate::hash::FxHashMap as HashMap;
use crate::ingest::anomaly_fields::{self, Fields, CLASSES};
use crate::ingest::excerpt::{clipped, clipped_message, quoted};
use crate::ingest::EventSink;
use crate::model::{
    flags, Anomaly, Communicator, Location, LocationKind, OpKind, OpPosition, Operation, Process,
    Processor, Rank, RoutineEvent, StrId, Time, TraceHeader,
};
use schema::{is_operation_class, other_key, unescape_name, TYPE_PREFIX};

/// Whether the start of a file (`head`) is a GXL document: XML whose root is `<gxl`.
pub fn looks_like_gxl(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let mut rest = text.trim_start_matches('\u{feff}').trim_start();
    // Skip the XML declaration, comments and the document type before the root.
    loop {
        if let Some(r) = rest.strip_prefix("<?") {
            match r.find("?>") {
                Some(i) => rest = r[i + 2..].trim_start(),
                None => return false,
            }
        } else if let Some(r) = rest.strip_prefix("<!--") {
            match r.find("-->") {
                Some(i) => rest = r[i + 3..].trim_start(),
                None => return false,
            }
        } else if let Some(r) = rest.strip_prefix("<!") {
            match r.find('>') {
                Some(i) => rest = r[i + 1..].trim_start(),
                None => return false,
            }
        } else {
            return rest.starts_with("<gxl")
                && rest[4..].starts_with(|c: char| c.is_whitespace() || c == '>' || c == '/');
        }
    }
}

/// Reads the GXL file at `path` into `sink`.
pub fn parse_file<S: EventSink + ?Sized>(path: &Path, sink: &mut S) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    parse_reader(
        BufReader::with_capacity(1 << 20, file),
        &path.display().to_string(),
        sink,
    )
}

/// Reads GXL from `input` into `sink`; `file_name` names the input in errors.
pub fn parse_reader<R: BufRead, S: EventSink + ?Sized>(
    input: R,
    file_name: &str,
    sink: &mut S,
) -> Result<()> {
    let mut reader = Reader::from_reader(input);
    reader.config_mut().trim_text(false);
    let mut g = GraphReader::new(file_name);
    let mut buf = Vec::new();
    loop {
        let offset = reader.buffer_position();
        let event = reader.read_event_into(&mut buf).map_err(|e| {
            g.error(
                reader.error_position(),
                "bad XML",
                format!(
                    "the XML does not parse: {}",
                    clipped_message(&e.to_string())
                ),
            )
        })?;
        g.offset = offset;
        let done = match event {
            Event::Start(e) => g.start(&e, false, sink),
            Event::Empty(e) => g.start(&e, true, sink),
            Event::End(e) => g.end(e.local_name().as_ref(), sink),
            Event::Text(t) => match t.unescape() {
                Ok(text) => g.text(&text),
                Err(e) => Err(g.error(
                    offset,
                    "bad XML",
                    format!(
                        "bad character reference: {}",
                        clipped_message(&e.to_string())
                    ),
                )),
            },
            Event::CData(c) => match String::from_utf8(c.into_inner().into_owned()) {
                Ok(text) => g.text(&text),
                Err(_) => Err(g.error(offset, "bad XML", "text that is not UTF-8".into())),
            },
            Event::Eof => break,
            _ => Ok(()),
        };
        done.map_err(|e| g.placed(e))?;
        buf.clear();
    }
    g.offset = reader.buffer_position();
    g.finish(sink)
}

/// A GXL value as read (`<string>`, `<int>`, …, `<seq>`/`<tup>` of values).
#[derive(Debug, Clone)]
enum Value {
    Str(String),
    Int(String),
    Bool(String),
    List(Vec<Value>),
    /// A value type this reader does not use (`float`, `locator`, `enum`).
    Unused,
}

/// An element whose content is being read.
enum Frame {
    /// A scalar value: its kind and its text so far.
    Scalar(&'static str, String),
    /// A `seq`, `set`, `bag` or `tup`: its values so far.
    List(Vec<Value>),
}

/// The node being read.
#[derive(Default)]
struct Node {
    id: String,
    class: String,
    offset: u64,
    attrs: Vec<(String, Value)>,
    /// The attribute being read, and its value once read.
    attr: Option<(String, Option<Value>)>,
}

/// A location's open routine calls (routine id, leave time), innermost last, and the
/// operations read so far.
#[derive(Default)]
struct Open {
    calls: Vec<(StrId, Time)>,
    operations: u64,
}

struct GraphReader {
    file: String,
    offset: u64,
    header: TraceHeader,
    header_done: bool,
    node: Option<Node>,
    frames: Vec<Frame>,
    /// Depth inside an element that is passed over (an edge, a nested graph), 0 outside.
    skipping: u32,
    strings: HashMap<String, StrId>,
    /// The id the next new name gets (a string table may hold a text twice).
    next_string: StrId,
    /// The declared string table, handed to the sink after the header.
    declared: Vec<String>,
    open: HashMap<(Rank, u32), Open>,
    op: Operation,
}

impl GraphReader {
    fn new(file: &str) -> GraphReader {
        GraphReader {
            file: file.to_string(),
            offset: 0,
            header: TraceHeader::default(),
            header_done: false,
            node: None,
            frames: Vec::new(),
            skipping: 0,
            strings: HashMap::default(),
            next_string: 0,
            declared: Vec::new(),
            open: HashMap::default(),
            op: Operation::new(0, OpKind::Init, 0, 0),
        }
    }

    fn error(&self, offset: u64, rule: &str, message: String) -> Error {
        Error::input(self.file.clone(), 0, offset, rule, message, "")
    }

    /// `e` placed in the file: a rule the import's checks found broken is at the node
    /// being handed over (or at the end, for what the end of the file closes).
    fn placed(&self, e: Error) -> Error {
        match e {
            Error::Rule(v) => self.error(self.offset, v.rule, v.message),
            other => other,
        }
    }

    fn start<S: EventSink + ?Sized>(
        &mut self,
        e: &BytesStart,
        empty: bool,
        sink: &mut S,
    ) -> Result<()> {
        let local = e.local_name();
        let name = local.as_ref();
        if self.skipping > 0 {
            self.skipping += u32::from(!empty);
            return Ok(());
        }
        match (name, self.node.is_some()) {
            (b"gxl" | b"graph", false) => Ok(()),
            (b"edge" | b"rel", false) => {
                self.skipping = u32::from(!empty);
                Ok(())
            }
            (b"node", false) => {
                let id = self.attribute(e, b"id")?.ok_or_else(|| {
                    self.error(self.offset, "bad node", "a node without an id".into())
                })?;
                self.node = Some(Node {
                    id,
                    offset: self.offset,
                    ..Node::default()
                });
                if empty {
                    self.end_node(sink)?;
                }
                Ok(())
            }
            (b"type", true) => {
                let href = self.attribute(e, b"href")?.unwrap_or_default();
                let class = href
                    .strip_prefix(TYPE_PREFIX)
                    .or_else(|| href.rsplit_once('#').map(|(_, c)| c))
                    .unwrap_or(&href)
                    .to_string();
                if self.frames.is_empty() {
                    if let Some(n) = self.node.as_mut().filter(|n| n.attr.is_none()) {
                        n.class = class;
                    }
                }
                Ok(())
            }
            (b"attr", true) => {
                let attr = self.attribute(e, b"name")?.ok_or_else(|| {
                    self.error(self.offset, "bad node", "an attr without a name".into())
                })?;
                #[allow(clippy::expect_used)]
                // an attribute is read only between a node's start and end tags
                let n = self.node.as_mut().expect("inside a node");
                if n.attr.is_some() || !self.frames.is_empty() {
                    // An attribute of an attribute: passed over.
                    self.skipping = u32::from(!empty);
                } else if empty {
                    n.attrs.push((attr, Value::Unused));
                } else {
                    n.attr = Some((attr, None));
                }
                Ok(())
            }
            (b"string" | b"int" | b"bool" | b"float" | b"enum" | b"locator", true) => {
                let kind = scalar_kind(name);
                if empty {
                    self.value(scalar(kind, String::new()))
                } else {
                    self.frames.push(Frame::Scalar(kind, String::new()));
                    Ok(())
                }
            }
            (b"seq" | b"set" | b"bag" | b"tup", true) => {
                if empty {
                    self.value(Value::List(Vec::new()))
                } else {
                    self.frames.push(Frame::List(Vec::new()));
                    Ok(())
                }
            }
            (b"graph", true) => {
                // A graph inside a node (GXL's hierarchy): passed over.
                self.skipping = u32::from(!empty);
                Ok(())
            }
            (other, _) => Err(self.error(
                self.offset,
                "bad GXL",
                format!(
                    "unexpected element <{}> here",
                    clipped(&String::from_utf8_lossy(other))
                ),
            )),
        }
    }

    fn attribute(&self, e: &BytesStart, key: &[u8]) -> Result<Option<String>> {
        for a in e.attributes() {
            let a = a.map_err(|err| {
                self.error(
                    self.offset,
                    "bad XML",
                    format!("a bad attribute: {}", clipped_message(&err.to_string())),
                )
            })?;
            if a.key.local_name().as_ref() == key {
                let v = a.unescape_value().map_err(|err| {
                    self.error(
                        self.offset,
                        "bad XML",
                        format!(
                            "a bad attribute value: {}",
                            clipped_message(&err.to_string())
                        ),
                    )
                })?;
                return Ok(Some(v.into_owned()));
            }
        }
        Ok(None)
    }

    /// A complete value: into the list being read, or as the attribute's value.
    fn value(&mut self, v: Value) -> Result<()> {
        if let Some(Frame::List(items)) = self.frames.last_mut() {
            items.push(v);
            return Ok(());
        }
        match self.node.as_mut().and_then(|n| n.attr.as_mut()) {
            Some((_, slot @ None)) => {
                *slot = Some(v);
                Ok(())
            }
            _ => Err(self.error(
                self.offset,
                "bad GXL",
                "a value outside an attr, or a second value in one".into(),
            )),
        }
    }

    fn text(&mut self, text: &str) -> Result<()> {
        match self.frames.last_mut() {
            Some(Frame::Scalar(_, s)) => {
                s.push_str(text);
                Ok(())
            }
            _ if self.skipping > 0 || text.trim().is_empty() => Ok(()),
            _ => Err(self.error(
                self.offset,
                "bad GXL",
                format!("text outside a value: {}", quoted(text)),
            )),
        }
    }

    fn end<S: EventSink + ?Sized>(&mut self, name: &[u8], sink: &mut S) -> Result<()> {
        if self.skipping > 0 {
            self.skipping -= 1;
            return Ok(());
        }
        match name {
            b"string" | b"int" | b"bool" | b"float" | b"enum" | b"locator" => {
                match self.frames.pop() {
                    Some(Frame::Scalar("string", text)) => {
                        // A name's escapes, whole (CDATA or references may split the text).
                        let text = unescape_name(&text)
                            .map_err(|why| self.error(self.offset, "bad GXL", why))?;
                        self.value(Value::Str(text))
                    }
                    Some(Frame::Scalar(kind, text)) => self.value(scalar(kind, text)),
                    _ => Err(self.error(self.offset, "bad GXL", "a misplaced value end".into())),
                }
            }
            b"seq" | b"set" | b"bag" | b"tup" => match self.frames.pop() {
                Some(Frame::List(items)) => self.value(Value::List(items)),
                _ => Err(self.error(self.offset, "bad GXL", "a misplaced list end".into())),
            },
            b"attr" => {
                if let Some(n) = self.node.as_mut() {
                    if let Some((key, value)) = n.attr.take() {
                        n.attrs.push((key, value.unwrap_or(Value::Unused)));
                    }
                }
                Ok(())
            }
            b"node" => self.end_node(sink),
            _ => Ok(()),
        }
    }

    /// Hands the header to the sink if it has not been yet.
    fn end_header<S: EventSink + ?Sized>(&mut self, sink: &mut S) -> Result<()> {
        if !self.header_done {
            self.header_done = true;
            self.header.processes.sort_by_key(|p| p.rank);
            sink.header(&self.header)?;
            for (id, text) in self.declared.iter().enumerate() {
                sink.string(id as StrId, text)?;
            }
        }
        Ok(())
    }

    fn end_node<S: EventSink + ?Sized>(&mut self, sink: &mut S) -> Result<()> {
        let Some(node) = self.node.take() else {
            return Err(self.error(self.offset, "bad GXL", "a node end outside a node".into()));
        };
        // What this node brings is placed at its start.
        self.offset = node.offset;
        let a = Attrs {
            node: &node,
            reader: self,
        };
        let class = node.class.as_str();
        let declaration = matches!(
            class,
            "Scenario"
                | "Trace"
                | "StringTable"
                | "Processor"
                | "Process"
                | "Communicator"
                | "Location"
        );
        if declaration && self.header_done {
            return Err(self.error(
                node.offset,
                "declaration after events",
                format!(
                    "a {class} node ({}) after the operations began; declarations come first",
                    clipped(&node.id)
                ),
            ));
        }
        match class {
            "Scenario" => self.header.scenario = a.text("description")?,
            "Trace" => {
                let (name, comments) = (a.text("traceName")?, a.text("comments")?);
                let untimed = a.flag("untimed")?;
                self.header.trace_name = name;
                self.header.comments = comments;
                self.header.untimed = untimed;
            }
            "Processor" => {
                let p = Processor {
                    id: a.u32("processorId")?,
                    name: a.text("processorName")?,
                };
                self.header.processors.push(p);
            }
            "Process" => {
                let p = Process {
                    rank: a.u32("rank")?,
                    name: a.text("processName")?,
                    processor: a.opt_u32("processorId")?,
                };
                self.header.processes.push(p);
            }
            "Communicator" => {
                let c = Communicator {
                    id: a.u32("commId")?,
                    name: a.text("commName")?,
                    members: a.u32_list("members")?,
                };
                self.header.communicators.push(c);
            }
            "Location" => {
                let kind_word = a.text("kind")?;
                let kind = LocationKind::from_token(&kind_word).ok_or_else(|| {
                    a.bad(
                        "kind",
                        "a location kind (cpu-thread, accelerator, metric, process, other)",
                    )
                })?;
                let l = Location {
                    name: a.text("locationName")?,
                    kind,
                    group: a.text("group")?,
                    rank: a.opt_u32("rank")?,
                    thread: a.opt_u32("thread")?,
                    regions: a.u64("regions")?,
                    events: a.u64("events")?,
                };
                self.header.locations.push(l);
            }
            "StringTable" => {
                let table = a.strings("strings")?;
                for text in table {
                    self.strings.entry(text.clone()).or_insert(self.next_string);
                    self.next_string += 1;
                    self.declared.push(text);
                }
            }
            "ProcessTrace" => {}
            "Message" | "CollectiveInstance" => self.end_header(sink)?,
            "RoutineCall" => {
                self.end_header(sink)?;
                self.routine_call(&node, sink)?;
            }
            "Anomaly" => {
                self.end_header(sink)?;
                self.anomaly(&node, sink)?;
            }
            c if is_operation_class(c) => {
                self.end_header(sink)?;
                self.operation(&node, sink)?;
            }
            other => {
                if self.header_done {
                    sink.anomaly(&Anomaly::SkippedRecord {
                        rank: None,
                        time: None,
                        what: format!("a GXL node {} of type {}", quoted(&node.id), quoted(other)),
                    })?;
                }
            }
        }
        Ok(())
    }

    /// The id of a name, defined to the sink when new.
    fn intern<S: EventSink + ?Sized>(&mut self, text: &str, sink: &mut S) -> Result<StrId> {
        if let Some(&id) = self.strings.get(text) {
            return Ok(id);
        }
        let id = self.next_string;
        self.next_string += 1;
        self.strings.insert(text.to_string(), id);
        sink.string(id, text)?;
        Ok(id)
    }

    /// An MPI call from the attribute `key` (a fixed kind) or `other<Key>`.
    fn call<S: EventSink + ?Sized>(
        &mut self,
        node: &Node,
        key: &str,
        sink: &mut S,
    ) -> Result<OpKind> {
        let a = Attrs { node, reader: self };
        if let Some(name) = a.opt_text(key)? {
            return OpKind::from_mpi_name(&name)
                .filter(|k| k.mpi_name() == Some(name.as_str()))
                .ok_or_else(|| a.bad(key, "the name of an MPI call (MPI_Send, …)"));
        }
        let other = other_key(key);
        match a.opt_text(&other)? {
            Some(name) => self.intern(&name, sink).map(OpKind::Other),
            None => Err(a.missing(&format!("{key} (or {other})"))),
        }
    }

    /// Leaves the calls of location (`rank`, `thread`) that are open deeper than `depth`.
    fn leave_to<S: EventSink + ?Sized>(
        &mut self,
        rank: Rank,
        thread: u32,
        depth: usize,
        sink: &mut S,
    ) -> Result<&mut Open> {
        let open = self.open.entry((rank, thread)).or_default();
        while open.calls.len() > depth {
            #[allow(clippy::expect_used)]
            // the loop runs only while more calls are open than the depth
            let (routine, time) = open.calls.pop().expect("deeper than depth");
            sink.routine(&RoutineEvent {
                rank,
                thread,
                time,
                routine,
                enter: false,
            })?;
        }
        Ok(open)
    }

    fn operation<S: EventSink + ?Sized>(&mut self, node: &Node, sink: &mut S) -> Result<()> {
        let kind = self.call(node, "call", sink)?;
        let mut op = std::mem::replace(&mut self.op, Operation::new(0, OpKind::Init, 0, 0));
        let a = Attrs { node, reader: self };
        let (rank, thread) = (a.u32("rank")?, a.u32("thread")?);
        op.reset(rank, kind, a.u64("startTime")?, a.u64("endTime")?);
        op.thread = thread;
        op.depth = a.u16("nestingLevel")?;
        op.comm = a.opt_u32("comm")?;
        op.dest = a.opt_u32("dest")?;
        op.source = a.opt_u32("source")?;
        op.send_tag = a.opt_i32("sendTag")?;
        op.recv_tag = a.opt_i32("recvTag")?;
        op.send_bytes = a.opt_u64("sendBytes")?.unwrap_or(0);
        op.recv_bytes = a.opt_u64("recvBytes")?.unwrap_or(0);
        op.root = a.opt_u32("root")?;
        op.request = a.opt_u64("request")?;
        op.completes = a.u64_list("completes")?;
        for (bit, name) in [
            (flags::ANY_SOURCE, "anySource"),
            (flags::ANY_TAG, "anyTag"),
            (flags::NOT_COMPLETED, "notCompleted"),
            (flags::WITHOUT_RECORDS, "withoutRecords"),
            (flags::RECV_CAPACITY, "recvCapacity"),
        ] {
            if a.flag(name)? {
                op.flags |= bit;
            }
        }
        op.flags |= a
            .opt_u64("otherFlags")?
            .map(|f| u8::try_from(f).map_err(|_| a.bad("otherFlags", "flag bits below 256")))
            .transpose()?
            .unwrap_or(0);
        let datatype = a.opt_text("dataType")?;
        op.datatype = match datatype {
            Some(name) => Some(self.intern(&name, sink)?),
            None => None,
        };
        let open = self.leave_to(rank, thread, usize::from(op.depth), sink)?;
        open.operations += 1;
        let result = sink.operation(&op);
        self.op = op;
        result
    }

    fn routine_call<S: EventSink + ?Sized>(&mut self, node: &Node, sink: &mut S) -> Result<()> {
        let a = Attrs { node, reader: self };
        let (rank, thread) = (a.u32("rank")?, a.u32("thread")?);
        let depth = usize::from(a.u16("nestingLevel")?);
        let (start, end) = (a.u64("startTime")?, a.u64("endTime")?);
        let name = a.text("routineCallName")?;
        let routine = self.intern(&name, sink)?;
        let open = self.leave_to(rank, thread, depth, sink)?;
        open.calls.push((routine, end));
        sink.routine(&RoutineEvent {
            rank,
            thread,
            time: start,
            routine,
            enter: true,
        })
    }

    fn anomaly<S: EventSink + ?Sized>(&mut self, node: &Node, sink: &mut S) -> Result<()> {
        let a = Attrs { node, reader: self };
        if a.flag("derived")? {
            return Ok(());
        }
        let class = a.text("class")?;
        let mut fields = AnomalyAttrs {
            node,
            reader: self,
            sink,
            positions: Vec::new(),
        };
        let Some(anomaly) = anomaly_fields::build(class.as_bytes(), &mut fields)? else {
            return Err(self.error(
                node.offset,
                "bad node",
                format!(
                    "unknown anomaly class {} (the classes are {CLASSES})",
                    quoted(&class)
                ),
            ));
        };
        let positions = fields.positions;
        if positions.is_empty() {
            sink.anomaly(&anomaly)
        } else {
            sink.anomaly_at(&anomaly, &positions)
        }
    }

    fn finish<S: EventSink + ?Sized>(mut self, sink: &mut S) -> Result<()> {
        let result = self.close(sink);
        result.map_err(|e| self.placed(e))
    }

    /// Ends the read: the header if no event came, the calls left open, the sink's end.
    fn close<S: EventSink + ?Sized>(&mut self, sink: &mut S) -> Result<()> {
        if self.node.is_some() {
            return Err(self.error(
                self.offset,
                "truncated",
                "the file ends inside a node".into(),
            ));
        }
        self.end_header(sink)?;
        let mut locations: Vec<(Rank, u32)> = self.open.keys().copied().collect();
        locations.sort_unstable();
        for (rank, thread) in locations {
            self.leave_to(rank, thread, 0, sink)?;
        }
        sink.finish()
    }
}

fn scalar_kind(name: &[u8]) -> &'static str {
    match name {
        b"string" => "string",
        b"int" => "int",
        b"bool" => "bool",
        _ => "unused",
    }
}

fn scalar(kind: &'static str, text: String) -> Value {
    match kind {
        "string" => Value::Str(text),
        "int" => Value::Int(text),
        "bool" => Value::Bool(text),
        _ => Value::Unused,
    }
}

/// Typed access to a node's attributes, with errors at the node.
struct Attrs<'n, 'r> {
    node: &'n Node,
    reader: &'r GraphReader,
}

impl Attrs<'_, '_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.node
            .attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    fn missing(&self, key: &str) -> Error {
        self.reader.error(
            self.node.offset,
            "bad node",
            format!(
                "the {} node {} has no attribute {key}",
                self.node.class,
                quoted(&self.node.id)
            ),
        )
    }

    fn bad(&self, key: &str, what: &str) -> Error {
        self.reader.error(
            self.node.offset,
            "bad node",
            format!(
                "the attribute {key} of the {} node {} is not {what}",
                self.node.class,
                quoted(&self.node.id)
            ),
        )
    }

    fn opt_text(&self, key: &str) -> Result<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.bad(key, "a string")),
        }
    }

    fn text(&self, key: &str) -> Result<String> {
        self.opt_text(key)?.ok_or_else(|| self.missing(key))
    }

    fn number<T: std::str::FromStr>(&self, key: &str, v: &Value, what: &str) -> Result<T> {
        match v {
            Value::Int(s) => s.trim().parse().map_err(|_| self.bad(key, what)),
            _ => Err(self.bad(key, what)),
        }
    }

    fn opt<T: std::str::FromStr>(&self, key: &str, what: &str) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => self.number(key, v, what).map(Some),
        }
    }

    fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        self.opt(key, "an int of 0 to 2^32-1")
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        self.opt(key, "an int of 0 to 2^64-1")
    }

    fn opt_i32(&self, key: &str) -> Result<Option<i32>> {
        self.opt(key, "an int of 32 bits")
    }

    fn u32(&self, key: &str) -> Result<u32> {
        self.opt_u32(key)?.ok_or_else(|| self.missing(key))
    }

    fn u64(&self, key: &str) -> Result<u64> {
        self.opt_u64(key)?.ok_or_else(|| self.missing(key))
    }

    fn u16(&self, key: &str) -> Result<u16> {
        self.opt(key, "an int of 0 to 65535")?
            .ok_or_else(|| self.missing(key))
    }

    fn flag(&self, key: &str) -> Result<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(Value::Bool(s)) if s.trim() == "true" => Ok(true),
            Some(Value::Bool(s)) if s.trim() == "false" => Ok(false),
            Some(_) => Err(self.bad(key, "a bool")),
        }
    }

    fn list(&self, key: &str) -> Result<&[Value]> {
        match self.get(key) {
            None => Ok(&[]),
            Some(Value::List(items)) => Ok(items),
            Some(_) => Err(self.bad(key, "a seq of ints")),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<String>> {
        self.list(key)?
            .iter()
            .map(|v| match v {
                Value::Str(s) => Ok(s.clone()),
                _ => Err(self.bad(key, "a seq of strings")),
            })
            .collect()
    }

    fn u32_list(&self, key: &str) -> Result<Vec<u32>> {
        let what = "a seq of ints of 0 to 2^32-1";
        self.list(key)?
            .iter()
            .map(|v| self.number(key, v, what))
            .collect()
    }

    fn u64_list(&self, key: &str) -> Result<Vec<u64>> {
        let what = "a seq of ints of 0 to 2^64-1";
        self.list(key)?
            .iter()
            .map(|v| self.number(key, v, what))
            .collect()
    }
}

/// An `Anomaly` node's attributes, read by [`anomaly_fields::build`].
struct AnomalyAttrs<'a, S: ?Sized> {
    node: &'a Node,
    reader: &'a mut GraphReader,
    sink: &'a mut S,
    positions: Vec<OpPosition>,
}

impl<S: ?Sized> AnomalyAttrs<'_, S> {
    fn attrs(&self) -> Attrs<'_, '_> {
        Attrs {
            node: self.node,
            reader: self.reader,
        }
    }
}

impl<S: EventSink + ?Sized> Fields<Error> for AnomalyAttrs<'_, S> {
    fn num(&mut self, key: &str) -> Result<u64> {
        self.attrs().u64(key)
    }

    fn opt_num(&mut self, key: &str) -> Result<Option<u64>> {
        self.attrs().opt_u64(key)
    }

    fn u32(&mut self, key: &str) -> Result<u32> {
        self.attrs().u32(key)
    }

    fn opt_u32(&mut self, key: &str) -> Result<Option<u32>> {
        self.attrs().opt_u32(key)
    }

    fn i32(&mut self, key: &str) -> Result<i32> {
        let a = self.attrs();
        a.opt_i32(key)?.ok_or_else(|| a.missing(key))
    }

    fn name(&mut self, key: &str) -> Result<StrId> {
        let text = self.attrs().text(key)?;
        self.reader.intern(&text, self.sink)
    }

    fn kind(&mut self, key: &str) -> Result<OpKind> {
        self.reader.call(self.node, key, self.sink)
    }

    fn op(&mut self, key: &str) -> Result<OpPosition> {
        let a = self.attrs();
        let what = "a tup of rank, thread and index";
        let parts = match a.get(key) {
            None => return Err(a.missing(key)),
            Some(Value::List(items)) if items.len() == 3 => items,
            Some(_) => return Err(a.bad(key, what)),
        };
        let p = OpPosition {
            rank: a.number(key, &parts[0], what)?,
            thread: a.number(key, &parts[1], what)?,
            index: a.number(key, &parts[2], what)?,
        };
        let read = self
            .reader
            .open
            .get(&(p.rank, p.thread))
            .map_or(0, |o| o.operations);
        if p.index >= read {
            return Err(self.reader.error(
                self.node.offset,
                "unknown operation",
                format!(
                    "the anomaly {} names operation {} of rank {} thread {}, but {read} operations of it come before",
                    quoted(&self.node.id), p.index, p.rank, p.thread
                ),
            ));
        }
        self.positions.push(p);
        Ok(p)
    }

    fn text(&mut self, key: &str) -> Result<String> {
        self.attrs().text(key)
    }
}
