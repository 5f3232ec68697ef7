//! What every thread's conversion shares: the sink, the string table, the names of the MPI
//! calls, the file's current time and the deadlines at which threads give up waiting.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::calls::{extrae_call_name, USER_FUNCTION};
use super::names::Pcf;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::ingest::EventSink;
use crate::model::{Anomaly, OpKind, OpPosition, StrId, Time};

/// A point in time at which a thread's waiting item must be looked at again: (time, thread,
/// item). The item is re-examined once the file's time has passed `time`.
pub(crate) type Deadline = Reverse<(Time, u32, u64)>;

/// The conversion state shared by all threads.
pub(crate) struct Context<'s> {
    pub sink: &'s mut dyn EventSink,
    /// The file's time: the latest time of a state, event or global-operation record read
    /// (Paraver writes them sorted by time; communication records may trail a little).
    pub now: Time,
    /// When waiting items must be re-examined, earliest first.
    pub deadlines: BinaryHeap<Deadline>,
    pcf: Pcf,
    strings: FxHashMap<String, StrId>,
    texts: Vec<String>,
    kinds: FxHashMap<(u64, i64), OpKind>,
    /// Anomalies reported, for the read's statistics.
    pub anomalies: u64,
    /// The `.prv` and the line being read (items remember it, to place the seam's errors).
    file: String,
    pub line: u64,
    /// Rooted collectives closed since the driver last looked: (thread, item).
    pub rooted: Vec<(u32, u64)>,
    /// Requests given to non-blocking receives so far (ids unique across the trace).
    requests: u64,
}

impl<'s> Context<'s> {
    pub fn new(sink: &'s mut dyn EventSink, pcf: Pcf, file: &str) -> Context<'s> {
        Context {
            sink,
            now: 0,
            deadlines: BinaryHeap::new(),
            pcf,
            strings: FxHashMap::default(),
            texts: Vec::new(),
            kinds: FxHashMap::default(),
            anomalies: 0,
            file: file.to_string(),
            line: 0,
            rooted: Vec::new(),
            requests: 0,
        }
    }

    /// An error of the import seam about an item read at `line`, placed there.
    pub fn placed(&self, e: Error, line: u64) -> Error {
        match e {
            Error::Rule(v) => Error::input(&self.file, line, 1, v.rule, v.message, ""),
            other => other,
        }
    }

    /// The id of string `text`, defining it in the sink the first time.
    pub fn intern(&mut self, text: &str) -> Result<StrId> {
        if let Some(&id) = self.strings.get(text) {
            return Ok(id);
        }
        let id = self.texts.len() as StrId;
        self.sink.string(id, text)?;
        self.strings.insert(text.to_string(), id);
        self.texts.push(text.to_string());
        Ok(id)
    }

    /// The kind of the MPI call that value `value` of event type `ty` opens: the `.pcf`'s
    /// name for it, else Extrae's, else `MPI call <value> (event type <ty>)`.
    pub fn call_kind(&mut self, ty: u64, value: i64) -> Result<OpKind> {
        if let Some(&kind) = self.kinds.get(&(ty, value)) {
            return Ok(kind);
        }
        let name = match self
            .pcf
            .value(ty, value)
            .or_else(|| extrae_call_name(value))
        {
            Some(n) => n.to_string(),
            None => format!("MPI call {value} (event type {ty})"),
        };
        let kind = match OpKind::from_mpi_name(&name) {
            Some(k) => k,
            None => OpKind::Other(self.intern(&name)?),
        };
        self.kinds.insert((ty, value), kind);
        Ok(kind)
    }

    /// The display name of an operation kind (`MPI_Isend`).
    pub fn kind_text(&self, kind: OpKind) -> &str {
        match kind {
            OpKind::Other(id) => self.texts.get(id as usize).map_or("?", String::as_str),
            k => k.mpi_name().unwrap_or("?"),
        }
    }

    /// The string id of an operation kind's name (for anomalies that name a call).
    pub fn kind_name(&mut self, kind: OpKind) -> Result<StrId> {
        match kind {
            OpKind::Other(id) => Ok(id),
            k => self.intern(k.mpi_name().unwrap_or("?")),
        }
    }

    /// The string id of the name of event type `ty` (its `.pcf` label, else the number).
    pub fn type_name(&mut self, ty: u64) -> Result<StrId> {
        let name = match self.pcf.types.get(&ty) {
            Some(label) if !label.is_empty() => label.clone(),
            _ => format!("event type {ty}"),
        };
        self.intern(&name)
    }

    /// The string id of user function `value`'s name.
    pub fn function(&mut self, value: i64) -> Result<StrId> {
        let name = match self.pcf.value(USER_FUNCTION, value) {
            Some(n) => n.to_string(),
            None => format!("function {value}"),
        };
        self.intern(&name)
    }

    /// A request id for a non-blocking receive (Paraver records none; unique in the trace,
    /// so unique per process as the model asks).
    pub fn new_request(&mut self) -> u64 {
        self.requests += 1;
        self.requests
    }

    /// Reports an anomaly.
    pub fn anomaly(&mut self, anomaly: Anomaly) -> Result<()> {
        self.anomalies += 1;
        self.sink.anomaly(&anomaly)
    }

    /// Reports an anomaly about the operation at `at`, handed to the sink before.
    pub fn anomaly_at(&mut self, anomaly: &Anomaly, at: OpPosition) -> Result<()> {
        self.anomalies += 1;
        self.sink.anomaly_at(anomaly, &[at])
    }

    /// Asks for thread `thread`'s item `seq` to be re-examined once the file passes `time`.
    pub fn wake_after(&mut self, time: Time, thread: u32, seq: u64) {
        self.deadlines.push(Reverse((time, thread, seq)));
    }

    /// The next deadline the file's time has passed, taken off the list.
    pub fn next_expired(&mut self) -> Option<(u32, u64)> {
        match self.deadlines.peek() {
            Some(Reverse((time, _, _))) if *time < self.now => self
                .deadlines
                .pop()
                .map(|Reverse((_, thread, seq))| (thread, seq)),
            _ => None,
        }
    }
}
