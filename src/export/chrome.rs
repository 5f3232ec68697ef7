//! Export to the Chrome Trace Event format (JSON), which ui.perfetto.dev and chrome://tracing
//! open: a timeline of the trace with one process per rank.
//!
//! The file is one JSON object, `{"traceEvents": [...], "displayTimeUnit": "ns"}`, one event
//! a line, the events holding:
//!
//! - per rank kept, metadata events (`"ph": "M"`): `process_name` "rank N" and
//!   `process_sort_index` N (pid = rank), and a `thread_name` for each thread that has an
//!   event (tid = the thread number; named after the source's location when it declared one);
//! - per MPI call, a complete event (`"ph": "X"`, category `mpi`) named after the call, with
//!   `args` where they apply: `bytes`, `peer`, `tag` (a send's, or a receive's when the call
//!   only receives; a `Sendrecv` adds `recv_bytes`, `source`, `recv_tag`; a collective has
//!   `bytes` sent and `recv_bytes` when not zero), `root`, `communicator` (by name);
//! - per routine call, a complete event (category `routine`) named after the routine;
//! - per message, a flow (category and name `message`): an `"s"` event on the send's slice
//!   and an `"f"` event with `"bp": "e"` on the receive's slice, with one `id` per message.
//!   The receive is the call that completed it: the blocking receive, or for an `MPI_Irecv`
//!   the Wait or Test that completed its request (the data arrived then, not when the Irecv
//!   was posted, often before the send); an `MPI_Irecv` that nothing completed keeps it;
//! - per collective instance with at least two members written, a flow (category
//!   `collective`, named after the call) joining its members in order of their start: `"s"` on
//!   the first, `"t"` on each middle one, `"f"` (`"bp": "e"`) on the last.
//!
//! Times (`ts`, `dur`) are microseconds written with three decimals, so the trace's
//! nanoseconds come through exactly. A flow event sits at the middle of its slice: inside the
//! slice, and (for slices longer than a nanosecond) never at a time another slice of the same
//! thread starts or ends, so that Perfetto, which binds a flow event to the innermost slice
//! open at its time, binds it to this one. A message's flow never ends before it starts:
//! when the receive's middle is earlier than the send's, both sit in the part of the two
//! slices that overlaps; a receive that ended before its send began (the clocks of the two
//! ranks disagree: a violated clock condition) draws no flow, and is counted
//! ([`ExportStats::backward_messages`]) for the caller to report. [`Restriction::clock`]
//! corrects the clocks first, as the wait analyses' `WITH CLOCK CORRECTION` does
//! ([`ClockMap`]): every time written is the corrected one.
//!
//! Names are demangled: a routine or call named with an Itanium C++ mangled name (`_Z…`, as
//! compilers emit and Score-P or EZTrace record) is written as its C++ signature.
//!
//! The Perfetto UI runs in the browser, whose memory a page may use is limited (about 2 GB,
//! its documentation says; the trace takes several times its file's size once loaded):
//! [`PERFETTO_UI_BYTES`] is the largest file said to open, and the caller warns above it.
//!
//! A [`Restriction`] may keep a time window and some ranks: an MPI call or routine call is
//! written when its rank is kept and it overlaps the window (starts no later than its end and
//! ends no earlier than its start: the operations `SELECT OPERATIONS FOR PROCESSES(..)
//! BETWEEN TIME a AND b` selects; routine calls are written whole, not clipped). A message is
//! drawn only when both its send and its receive are written; a collective joins only its
//! members that are written.
//!
//! The anomalies and request links are not written. Memory follows what is in flight: the
//! times of the written sends, receives and collective calls whose message or instance has
//! not been found yet, as the matcher holds them; the JSON is streamed out.

use std::io::Write;
use std::path::Path;

use super::{output, walk, ExportStats, Spool, Writer};
use crate::analysis::clock::{ClockCorrection, ClockMap};
use crate::error::{Error, Result};
use crate::hash::{FxHashMap as HashMap, FxHasher};
use crate::model::{
    flags, Anomaly, CollectiveInstance, CommId, Message, OpKind, OpPosition, Operation, Rank,
    RoutineCall, Time, TraceHeader, ANY_TAG,
};
use crate::query::ast::TimeText;
use crate::Trace;

/// The largest Chrome JSON file the Perfetto UI is expected to open in a browser: 512 MiB.
/// The UI's documentation ("Visualising large traces", perfetto.dev) gives a browser's
/// memory limit as typically 2 GB, and the loaded trace as larger than its file (2 to 4
/// times for protobuf traces; JSON's text is larger than what it holds); 2 GB over the
/// factor 4. Larger files open through a native `trace_processor --httpd`.
pub const PERFETTO_UI_BYTES: u64 = 512 << 20;

type HashSet<T> = std::collections::HashSet<T, std::hash::BuildHasherDefault<FxHasher>>;

/// What part of the trace a Chrome export writes: a time window and a set of ranks, each
/// optional (everything by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restriction {
    /// Write what ends no earlier than this time (ns, as the trace's times are).
    pub from: Option<Time>,
    /// Write what starts no later than this time (ns).
    pub to: Option<Time>,
    /// Write only these ranks (sorted or not, repeats allowed); `None` for all.
    pub ranks: Option<Vec<Rank>>,
    /// The clocks written: the stored times (`None`, the default) or corrected ones. The
    /// window is in the stored times.
    pub clock: ClockCorrection,
}

impl Restriction {
    /// The whole trace.
    pub fn all() -> Restriction {
        Restriction::default()
    }

    /// Parses a time of `--from` or `--to` (named `option` in errors): seconds (`1.5`), or a
    /// number with a unit ns, us, ms or s (`1.5ms`), as the query language's `BETWEEN TIME`
    /// takes it.
    ///
    /// ```
    /// use mtfdb::export::chrome::Restriction;
    /// assert_eq!(Restriction::parse_time("1.5ms", "--from").unwrap(), 1_500_000);
    /// assert_eq!(Restriction::parse_time("2", "--to").unwrap(), 2_000_000_000);
    /// assert!(Restriction::parse_time("1.5 parsecs", "--to").is_err());
    /// ```
    pub fn parse_time(text: &str, option: &str) -> Result<Time> {
        crate::query::parser::time_in_ns(text).map_err(|e| Error::Usage(format!("{option}: {e}")))
    }

    /// Parses a list of ranks and rank ranges, as `--processes 0-15,32` takes it.
    ///
    /// ```
    /// use mtfdb::export::chrome::Restriction;
    /// assert_eq!(Restriction::parse_ranks("0-2,7").unwrap(), vec![0, 1, 2, 7]);
    /// assert!(Restriction::parse_ranks("3-1").is_err());
    /// ```
    pub fn parse_ranks(text: &str) -> Result<Vec<Rank>> {
        let usage = |why: String| {
            Error::Usage(format!(
                "--processes {text:?}: {why}; write ranks and ranges like 0-15,32"
            ))
        };
        let rank = |t: &str| {
            t.trim()
                .parse::<Rank>()
                .map_err(|_| usage(format!("{:?} is not a rank", t.trim())))
        };
        let mut ranks = Vec::new();
        for part in text.split(',') {
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (rank(a)?, rank(b)?);
                    if b < a {
                        return Err(usage(format!("the range {a}-{b} goes backwards")));
                    }
                    ranks.extend(a..=b);
                }
                None => ranks.push(rank(part)?),
            }
        }
        ranks.sort_unstable();
        ranks.dedup();
        Ok(ranks)
    }

    /// Refuses a window that goes backwards or a rank the trace does not have.
    fn check(&self, header: &TraceHeader) -> Result<()> {
        if let (Some(from), Some(to)) = (self.from, self.to) {
            if to < from {
                return Err(Error::Usage(format!(
                    "the time window must go forward: --from {} is after --to {}",
                    TimeText(from),
                    TimeText(to)
                )));
            }
        }
        if let Some(ranks) = &self.ranks {
            let known: HashSet<Rank> = header.processes.iter().map(|p| p.rank).collect();
            if let Some(r) = ranks.iter().find(|r| !known.contains(r)) {
                return Err(Error::Usage(format!(
                    "--processes: the trace has no rank {r} (its ranks are 0-{})",
                    header.processes.len().saturating_sub(1)
                )));
            }
        }
        Ok(())
    }

    fn keeps_rank(&self, rank: Rank) -> bool {
        self.ranks
            .as_ref()
            .is_none_or(|r| r.binary_search(&rank).is_ok())
    }

    fn keeps(&self, rank: Rank, start: Time, end: Time) -> bool {
        self.keeps_rank(rank)
            && self.to.is_none_or(|to| start <= to)
            && self.from.is_none_or(|from| end >= from)
    }
}

/// Writes the part of `trace` that `restriction` keeps as Chrome trace JSON to `out`; `name`
/// names the output in errors. The statistics count what the file holds: the MPI calls
/// (`operations`) and routine calls written, the messages drawn as flows (`messages`) and the
/// collective instances drawn (`collective_instances`).
pub fn export(
    trace: &Trace,
    restriction: &Restriction,
    out: impl Write,
    name: &Path,
) -> Result<ExportStats> {
    crate::query::needs_times(trace, "a Chrome (Perfetto) timeline")?;
    let mut restriction = restriction.clone();
    if let Some(r) = restriction.ranks.as_mut() {
        r.sort_unstable();
        r.dedup();
    }
    restriction.check(trace.header())?;
    let clock = match restriction.clock {
        ClockCorrection::None => None,
        c => Some(ClockMap::estimate(trace, c)?),
    };
    let mut writer = ChromeWriter::new(out, name, restriction);
    writer.clock = clock;
    // The walk counts what the trace holds; the file holds what the writer counted.
    walk(trace, &mut writer)?;
    Ok(writer.stats)
}

/// Writes the part of `trace` that `restriction` keeps as Chrome trace JSON to the file at
/// `path` through an [`output::Output`]: a regular file is replaced only once the export is
/// complete and left as it was on an error; a device or FIFO is written in place.
pub fn export_file(trace: &Trace, restriction: &Restriction, path: &Path) -> Result<ExportStats> {
    output::write_with(path, |out| export(trace, restriction, out, path))
}

/// A written operation still waiting for its message(s) or its collective instance.
#[derive(Debug, Clone, Copy)]
struct Pending {
    start: Time,
    end: Time,
    /// Messages and instances it still takes part in.
    uses: u8,
    /// A non-blocking receive: its message's flow ends on the call that completes it.
    posted_receive: bool,
}

/// A message to a posted receive (`MPI_Irecv`) whose completion is not known yet: its
/// flow's id and send slice, written once the completion is.
#[derive(Debug, Clone, Copy)]
struct OpenFlow {
    id: u64,
    send: (OpPosition, Pending),
    /// The Irecv itself, where the flow ends if nothing completes it.
    recv: Pending,
}

/// The Chrome trace [`Writer`].
pub(crate) struct ChromeWriter<W: Write> {
    out: Spool<W>,
    restriction: Restriction,
    strings: Vec<String>,
    comm_names: HashMap<CommId, String>,
    /// (communicator, world rank) of every member: who a collective call can match with.
    members: HashSet<(CommId, Rank)>,
    /// Names of threads: the source's locations, and the processes' own names for thread 0.
    thread_names: HashMap<(Rank, u32), String>,
    named: HashSet<(Rank, u32)>,
    pending: HashMap<OpPosition, Pending>,
    /// Posted receives whose completion came before their message: the completion's slice.
    completed: HashMap<OpPosition, (OpPosition, Pending)>,
    /// Messages to posted receives waiting for the receive's completion.
    open_flows: HashMap<OpPosition, OpenFlow>,
    /// The last operation written (the completions the matcher links next are it).
    last: Option<(OpPosition, Pending)>,
    /// The clocks' correction, when one was asked for.
    clock: Option<ClockMap>,
    /// Events written so far (a comma goes before each but the first).
    events: u64,
    next_flow: u64,
    stats: ExportStats,
}

/// Appends `ns` nanoseconds as microseconds with three decimals (exact).
fn push_micros(buf: &mut Vec<u8>, ns: Time) {
    let _ = write!(buf, "{}.{:03}", ns / 1000, ns % 1000);
}

/// The time a flow event of the slice `[start, end]` sits at: its middle.
fn flow_time(p: &Pending) -> Time {
    p.start + (p.end.saturating_sub(p.start)) / 2
}

/// The times of a message's flow events on the send's slice and the receive's, the start no
/// later than the end: the slices' middles, or when the receive's middle is the earlier, the
/// middle of the time the two slices share; `None` when the receive ended before the send
/// began (no time of the receive is after the send: the clocks disagree).
fn message_flow_times(send: &Pending, recv: &Pending) -> Option<(Time, Time)> {
    let (s, f) = (flow_time(send), flow_time(recv));
    if s <= f {
        return Some((s, f));
    }
    let (lo, hi) = (send.start.max(recv.start), send.end.min(recv.end));
    (lo <= hi).then(|| {
        let t = lo + (hi - lo) / 2;
        (t, t)
    })
}

/// `name` demangled when it is an Itanium C++ mangled name (`_Z…`), else as it is.
pub fn demangled(name: &str) -> std::borrow::Cow<'_, str> {
    if name.starts_with("_Z") {
        if let Ok(symbol) = cpp_demangle::Symbol::new(name.as_bytes()) {
            if let Ok(text) = symbol.demangle() {
                return text.into();
            }
        }
    }
    name.into()
}

impl<W: Write> ChromeWriter<W> {
    fn new(out: W, name: &Path, restriction: Restriction) -> ChromeWriter<W> {
        ChromeWriter {
            out: Spool::new(out, name),
            restriction,
            strings: Vec::new(),
            comm_names: HashMap::default(),
            members: HashSet::default(),
            thread_names: HashMap::default(),
            named: HashSet::default(),
            pending: HashMap::default(),
            completed: HashMap::default(),
            open_flows: HashMap::default(),
            last: None,
            clock: None,
            events: 0,
            next_flow: 0,
            stats: ExportStats::default(),
        }
    }

    /// Appends `s` as a JSON string.
    fn string(&mut self, s: &str) -> Result<()> {
        serde_json::to_writer(&mut self.out.buf, s)
            .map_err(|e| Error::io(self.out.name(), e.into()))
    }

    fn string_of(&self, id: u32) -> Result<&str> {
        self.strings
            .get(id as usize)
            .map(String::as_str)
            .ok_or_else(|| {
                Error::Corrupt(format!("string {id} is not in the trace's string table"))
            })
    }

    /// Opens an event: the separator, then `{"name":…,"cat":…,"ph":…,"pid":…,"tid":…`.
    fn open_event(&mut self, name: &str, cat: &str, ph: &str, pid: Rank, tid: u32) -> Result<()> {
        self.out
            .buf
            .extend_from_slice(if self.events == 0 { b"\n" } else { b",\n" });
        self.events += 1;
        self.out.buf.extend_from_slice(b"{\"name\":");
        self.string(name)?;
        let _ = write!(
            self.out.buf,
            ",\"cat\":\"{cat}\",\"ph\":\"{ph}\",\"pid\":{pid},\"tid\":{tid}"
        );
        Ok(())
    }

    /// A metadata event naming a process or thread.
    fn metadata(&mut self, what: &str, pid: Rank, tid: u32, key: &str, value: &str) -> Result<()> {
        self.open_event(what, "__metadata", "M", pid, tid)?;
        let _ = write!(self.out.buf, ",\"args\":{{\"{key}\":");
        self.string(value)?;
        self.out.buf.extend_from_slice(b"}}");
        Ok(())
    }

    /// Names the thread (`rank`, `thread`) before its first event.
    fn name_thread(&mut self, rank: Rank, thread: u32) -> Result<()> {
        if self.named.insert((rank, thread)) {
            let name = self
                .thread_names
                .get(&(rank, thread))
                .cloned()
                .unwrap_or_else(|| format!("thread {thread}"));
            self.metadata("thread_name", rank, thread, "name", &name)?;
        }
        Ok(())
    }

    /// A complete event over `[start, end]`; `args` writes the body of its `args` object (if
    /// it writes nothing, the event has none).
    fn slice(
        &mut self,
        name: &str,
        cat: &str,
        rank: Rank,
        thread: u32,
        (start, end): (Time, Time),
    ) -> Result<()> {
        self.name_thread(rank, thread)?;
        self.open_event(name, cat, "X", rank, thread)?;
        self.out.buf.extend_from_slice(b",\"ts\":");
        push_micros(&mut self.out.buf, start);
        self.out.buf.extend_from_slice(b",\"dur\":");
        push_micros(&mut self.out.buf, end.saturating_sub(start));
        Ok(())
    }

    /// A flow event of flow `id` at `time` on (`rank`, `thread`).
    fn flow(
        &mut self,
        name: &str,
        cat: &str,
        ph: &str,
        id: u64,
        (at, time): (OpPosition, Time),
    ) -> Result<()> {
        self.open_event(name, cat, ph, at.rank, at.thread)?;
        let _ = write!(self.out.buf, ",\"id\":{id},\"ts\":");
        push_micros(&mut self.out.buf, time);
        if ph == "f" {
            self.out.buf.extend_from_slice(b",\"bp\":\"e\"");
        }
        self.out.buf.push(b'}');
        Ok(())
    }

    /// `t` on `rank`'s clock as written (corrected when a correction was asked for).
    fn time(&self, rank: Rank, t: Time) -> Time {
        self.clock.as_ref().map_or(t, |m| m.time(rank, t))
    }

    /// Writes the flow of message `id` from the send's slice to the receive's, or counts it
    /// as received before it was sent.
    fn message_flow(
        &mut self,
        id: u64,
        (send, s): (OpPosition, Pending),
        (recv, r): (OpPosition, Pending),
    ) -> Result<()> {
        match message_flow_times(&s, &r) {
            Some((ts, tf)) => {
                self.stats.messages += 1;
                self.flow("message", "message", "s", id, (send, ts))?;
                self.flow("message", "message", "f", id, (recv, tf))
            }
            None => {
                self.stats.backward_messages += 1;
                Ok(())
            }
        }
    }

    /// Takes one use of the pending operation at `at`: its times, if it was written.
    fn take(&mut self, at: OpPosition) -> Option<Pending> {
        let p = self.pending.get_mut(&at)?;
        let taken = *p;
        p.uses = p.uses.saturating_sub(1);
        if p.uses == 0 {
            self.pending.remove(&at);
        }
        Some(taken)
    }

    /// How many messages and collective instances the matcher can give `op`: as it matches
    /// (a send or receive with every field it matches by; a collective on a communicator the
    /// caller belongs to).
    fn uses(&self, op: &Operation) -> u8 {
        let k = op.kind;
        let sends = k.is_send() && op.comm.is_some() && op.dest.is_some() && op.send_tag.is_some();
        let receives = k.is_receive()
            && op.comm.is_some()
            && op.source.is_some()
            && op
                .recv_tag
                .is_some_and(|t| !(t == ANY_TAG && op.flags & flags::ANY_TAG != 0));
        let collective = k.is_collective()
            && op
                .comm
                .is_some_and(|c| self.members.contains(&(c, op.rank)));
        u8::from(sends) + u8::from(receives) + u8::from(collective)
    }

    fn comm_name(&self, id: CommId) -> String {
        self.comm_names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("communicator {id}"))
    }
}

/// Appends `,"key":value` for a number.
fn num_arg(buf: &mut Vec<u8>, first: &mut bool, key: &str, value: impl std::fmt::Display) {
    let _ = write!(buf, "{}\"{key}\":{value}", if *first { "" } else { "," });
    *first = false;
}

impl<W: Write> Writer for ChromeWriter<W> {
    fn header(&mut self, header: &TraceHeader, strings: &[String]) -> Result<()> {
        self.strings = strings.to_vec();
        for c in &header.communicators {
            self.comm_names.insert(c.id, c.name.clone());
            self.members.extend(c.members.iter().map(|&m| (c.id, m)));
        }
        for p in &header.processes {
            if p.name != format!("P{}", p.rank) && !p.name.is_empty() {
                self.thread_names.insert((p.rank, 0), p.name.clone());
            }
        }
        for l in &header.locations {
            if let (Some(rank), Some(thread)) = (l.rank, l.thread) {
                self.thread_names.insert((rank, thread), l.name.clone());
            }
        }
        self.out.buf.extend_from_slice(b"{\"traceEvents\":[");
        for p in &header.processes {
            if !self.restriction.keeps_rank(p.rank) {
                continue;
            }
            self.metadata(
                "process_name",
                p.rank,
                0,
                "name",
                &format!("rank {}", p.rank),
            )?;
            self.open_event("process_sort_index", "__metadata", "M", p.rank, 0)?;
            let _ = write!(self.out.buf, ",\"args\":{{\"sort_index\":{}}}}}", p.rank);
            self.out.maybe_flush()?;
        }
        Ok(())
    }

    fn operation(&mut self, op: &Operation, at: OpPosition) -> Result<()> {
        if !self.restriction.keeps(op.rank, op.start, op.end) {
            return Ok(());
        }
        self.stats.operations += 1;
        let name = match op.kind {
            OpKind::Other(id) => demangled(self.string_of(id)?).into_owned(),
            k => k.mpi_name().unwrap_or("MPI call").to_string(),
        };
        let (start, end) = (self.time(op.rank, op.start), self.time(op.rank, op.end));
        self.slice(&name, "mpi", op.rank, op.thread, (start, end))?;
        let args_at = self.out.buf.len();
        let (k, buf) = (op.kind, &mut self.out.buf);
        buf.extend_from_slice(b",\"args\":{");
        let mut first = true;
        if k.is_send() {
            num_arg(buf, &mut first, "bytes", op.send_bytes);
            if let Some(d) = op.dest {
                num_arg(buf, &mut first, "peer", d);
            }
            if let Some(t) = op.send_tag {
                num_arg(buf, &mut first, "tag", t);
            }
            if k.is_receive() {
                num_arg(buf, &mut first, "recv_bytes", op.recv_bytes);
                if let Some(s) = op.source {
                    num_arg(buf, &mut first, "source", s);
                }
                if let Some(t) = op.recv_tag {
                    num_arg(buf, &mut first, "recv_tag", t);
                }
            }
        } else if k.is_receive() {
            num_arg(buf, &mut first, "bytes", op.recv_bytes);
            if let Some(s) = op.source {
                num_arg(buf, &mut first, "peer", s);
            }
            if let Some(t) = op.recv_tag {
                num_arg(buf, &mut first, "tag", t);
            }
        } else {
            // Collectives, probes, completions, …: what they carry.
            if op.send_bytes != 0 {
                num_arg(buf, &mut first, "bytes", op.send_bytes);
            }
            if op.recv_bytes != 0 {
                num_arg(buf, &mut first, "recv_bytes", op.recv_bytes);
            }
            if let Some(p) = op.dest.or(op.source) {
                num_arg(buf, &mut first, "peer", p);
            }
            if let Some(t) = op.send_tag.or(op.recv_tag) {
                num_arg(buf, &mut first, "tag", t);
            }
        }
        if let Some(r) = op.root {
            num_arg(buf, &mut first, "root", r);
        }
        if let Some(c) = op.comm {
            let name = self.comm_name(c);
            self.out
                .buf
                .extend_from_slice(if first { b"\"" } else { b",\"" });
            self.out.buf.extend_from_slice(b"communicator\":");
            self.string(&name)?;
            first = false;
        }
        if first {
            // Nothing to say: no args object.
            self.out.buf.truncate(args_at);
            self.out.buf.push(b'}');
        } else {
            self.out.buf.extend_from_slice(b"}}");
        }
        let written = Pending {
            start,
            end,
            uses: self.uses(op),
            posted_receive: op.kind.is_receive() && op.kind.is_nonblocking(),
        };
        if written.uses > 0 {
            self.pending.insert(at, written);
        }
        self.last = Some((at, written));
        self.out.maybe_flush()
    }

    fn routine(&mut self, call: &RoutineCall, enter: bool) -> Result<()> {
        if !enter || !self.restriction.keeps(call.rank, call.start, call.end) {
            return Ok(());
        }
        self.stats.routine_calls += 1;
        let name = demangled(self.string_of(call.routine)?).into_owned();
        let times = (
            self.time(call.rank, call.start),
            self.time(call.rank, call.end),
        );
        self.slice(&name, "routine", call.rank, call.thread, times)?;
        self.out.buf.push(b'}');
        self.out.maybe_flush()
    }

    fn message(&mut self, _: &Message, send: OpPosition, recv: OpPosition) -> Result<()> {
        let (s, r) = (self.take(send), self.take(recv));
        let (Some(s), Some(r)) = (s, r) else {
            // A posted receive not written, or a send not written: no flow either way.
            self.completed.remove(&recv);
            return Ok(());
        };
        let id = self.next_flow;
        self.next_flow += 1;
        if r.posted_receive {
            // The flow ends where the receive completed: known already, or later.
            match self.completed.remove(&recv) {
                Some(completion) => self.message_flow(id, (send, s), completion)?,
                None => {
                    let open = OpenFlow {
                        id,
                        send: (send, s),
                        recv: r,
                    };
                    self.open_flows.insert(recv, open);
                }
            }
        } else {
            self.message_flow(id, (send, s), (recv, r))?;
        }
        self.out.maybe_flush()
    }

    fn request_link(&mut self, request: OpPosition, completion: OpPosition) -> Result<()> {
        // The matcher links a request when it meets its completion, the last call written.
        let Some((at, done)) = self.last.filter(|(at, _)| *at == completion) else {
            return Ok(());
        };
        if let Some(open) = self.open_flows.remove(&request) {
            self.message_flow(open.id, open.send, (at, done))?;
            return self.out.maybe_flush();
        }
        if self.pending.get(&request).is_some_and(|p| p.posted_receive) {
            self.completed.insert(request, (at, done));
        }
        Ok(())
    }

    fn collective(&mut self, c: &CollectiveInstance, members: &[OpPosition]) -> Result<()> {
        let mut written: Vec<(Time, OpPosition)> = members
            .iter()
            .filter_map(|&at| self.take(at).map(|p| (flow_time(&p), at)))
            .collect();
        if written.len() < 2 {
            return Ok(());
        }
        written.sort_unstable_by_key(|&(t, at)| (t, at.rank, at.thread, at.index));
        let name = match c.kind {
            OpKind::Other(id) => self.string_of(id)?.to_string(),
            k => k.mpi_name().unwrap_or("collective").to_string(),
        };
        let id = self.next_flow;
        self.next_flow += 1;
        self.stats.collective_instances += 1;
        let last = written.len() - 1;
        for (i, &(t, at)) in written.iter().enumerate() {
            let ph = match i {
                0 => "s",
                i if i == last => "f",
                _ => "t",
            };
            self.flow(&name, "collective", ph, id, (at, t))?;
        }
        self.out.maybe_flush()
    }

    fn anomaly(&mut self, _: &Anomaly, _: &[OpPosition], _: bool) -> Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        // Posted receives that nothing completed: their flows end on the Irecv itself.
        let mut open: Vec<(OpPosition, OpenFlow)> = self.open_flows.drain().collect();
        open.sort_unstable_by_key(|(_, o)| o.id);
        for (recv, o) in open {
            self.message_flow(o.id, o.send, (recv, o.recv))?;
        }
        self.out
            .buf
            .extend_from_slice(b"\n],\n\"displayTimeUnit\":\"ns\"}\n");
        self.out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, GenConfig, Scenario};
    use crate::Database;

    /// A [`ChromeWriter`] that records how many operations it ever held at once.
    struct Watched {
        inner: ChromeWriter<std::io::Sink>,
        peak: usize,
    }

    impl Watched {
        fn watch(&mut self, r: Result<()>) -> Result<()> {
            self.peak = self.peak.max(self.inner.pending.len());
            r
        }
    }

    impl Writer for Watched {
        fn header(&mut self, h: &TraceHeader, s: &[String]) -> Result<()> {
            let r = self.inner.header(h, s);
            self.watch(r)
        }
        fn operation(&mut self, op: &Operation, at: OpPosition) -> Result<()> {
            let r = self.inner.operation(op, at);
            self.watch(r)
        }
        fn routine(&mut self, call: &RoutineCall, enter: bool) -> Result<()> {
            let r = self.inner.routine(call, enter);
            self.watch(r)
        }
        fn message(&mut self, m: &Message, s: OpPosition, r: OpPosition) -> Result<()> {
            let r = self.inner.message(m, s, r);
            self.watch(r)
        }
        fn request_link(&mut self, a: OpPosition, b: OpPosition) -> Result<()> {
            self.inner.request_link(a, b)
        }
        fn collective(&mut self, c: &CollectiveInstance, m: &[OpPosition]) -> Result<()> {
            let r = self.inner.collective(c, m);
            self.watch(r)
        }
        fn anomaly(&mut self, a: &Anomaly, at: &[OpPosition], d: bool) -> Result<()> {
            self.inner.anomaly(a, at, d)
        }
        fn finish(&mut self) -> Result<()> {
            self.inner.finish()
        }
    }

    #[test]
    fn operations_are_held_only_while_their_message_or_instance_is_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("db")).unwrap();
        for scenario in Scenario::ALL {
            let name = scenario.to_string();
            let config = GenConfig::new(scenario, 16, 40);
            db.import_events(&name, |sink| generate(&config, sink).map(|_| ()))
                .unwrap();
            let trace = db.trace(&name).unwrap();
            let mut w = Watched {
                inner: ChromeWriter::new(std::io::sink(), Path::new("-"), Restriction::all()),
                peak: 0,
            };
            walk(&trace, &mut w).unwrap();
            let ops = trace.summary().operations as usize;
            // A trace with every message and instance matched leaves nothing behind, and
            // never held more than a small part of the trace (a few iterations' worth).
            assert!(
                w.inner.pending.is_empty(),
                "{name}: {}",
                w.inner.pending.len()
            );
            assert!(
                w.peak > 0 && w.peak * 20 < ops,
                "{name}: peak {} of {ops}",
                w.peak
            );
            assert_eq!(w.inner.stats.messages, trace.summary().messages, "{name}");
        }
    }
}
