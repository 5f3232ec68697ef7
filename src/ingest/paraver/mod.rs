//! Paraver traces (BSC's Extrae and its predecessor MPItrace, Dimemas, the Paraver cutter):
//! a `.prv` text file, with the optional `.pcf` (names of event types and values) and `.row`
//! (names of nodes, tasks and threads) beside it under the same stem.
//!
//! What is read, and what it becomes:
//!
//! - The header (`header`): applications, their tasks and threads, nodes, the time unit
//!   (times become integer nanoseconds), and the communicator lines. One application is the
//!   MPI one: the application the communicator lines name, or the only one, or else the first
//!   whose records hold MPI calls or messages. Its tasks become the ranks (world rank = task
//!   index within the application), their threads the ranks' threads; every thread of another
//!   application (hardware-counter or uncore readers, …) is kept as a non-MPI location with
//!   its event counts, never a rank. Nodes become processors.
//! - Event records (`record`): Extrae's MPI call types (50000001 to 50000005) open a call
//!   with a non-zero value and close it with 0; the call is the `.pcf`'s name for the value
//!   (`MPI_Isend`), else Extrae's fixed numbering, and becomes an operation of that kind. The
//!   collective arguments Extrae writes with a call (types 50100001 to 50100004: send and
//!   receive size, root, communicator) fill in the innermost open collective. User functions
//!   (type 60000019) become routine calls. Other event types are counted.
//! - Communication records: Paraver names no communicator for them, so messages travel on the
//!   world communicator. A record's sender part fills in the send call of the sending thread
//!   whose interval holds the logical send time, its receiver part the receive call whose
//!   interval holds the logical receive time; a non-blocking receive whose physical receive
//!   time falls in a later Wait/Test gets a request that call completes (see `thread`).
//!   Records of traces without MPI call events become `MPI_Send` and `MPI_Recv` operations.
//! - Old-style global-operation records (`4:`): fill in the open collective call, or are a
//!   collective call of their own.
//! - State records are counted; comments are skipped.
//!
//! Refused, with the file, line and column: a damaged header, a record that does not parse,
//! a time that overflows nanoseconds. Kept and reported as anomalies: calls open at the end or
//! closed without an opening (a cut trace); sends and receives whose message record is missing
//! (messages crossing the cut) and collectives without a communicator, kept as calls without
//! records; messages with a task of another application; records of a thread the header does
//! not declare (a task beyond the MPI application's is Table 3.1's unknown rank). What breaks a
//! rule of Table 3.1 (records out of time order, a communicator line that lists a task twice or
//! beyond the application's, a root on a collective that has none, …) is handed to the import's
//! seam as recorded, which reports it as the rule.
//!
//! The file is streamed: memory holds only the items each thread is still completing.

mod calls;
mod context;
mod header;
mod layout;
mod names;
mod record;
mod roots;
mod text;
mod thread;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::ingest::EventSink;
use crate::model::{Anomaly, LocationKind, Rank, Rule, Time};

use calls::{is_collective_argument, is_mpi_call_type, USER_FUNCTION};
use context::Context;
use layout::{Layout, Role};
use record::{Object, Pair, Stamp};
use roots::Roots;
use text::{Fault, Lines};
use thread::{Dir, GlobalOp, RankThread, Side};

/// Whether the file at `path` starts like a Paraver trace (a `#Paraver` header line).
pub fn looks_like_prv(path: &Path) -> bool {
    let mut head = [0u8; 24];
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    header::looks_like_prv(&head[..n])
}

/// What a read found.
#[derive(Debug, Clone, Default)]
pub struct ReadStats {
    /// Lines of the `.prv`.
    pub lines: u64,
    /// Bytes of the `.prv`.
    pub bytes: u64,
    /// Anomalies the reader reported itself (matching reports more).
    pub anomalies: u64,
}

/// The `.pcf` and `.row` beside a `.prv`: the same path with the other extension.
fn companion(path: &Path, extension: &str) -> PathBuf {
    path.with_extension(extension)
}

/// Reads the Paraver trace whose `.prv` is `path` (with its `.pcf` and `.row`, if present)
/// into `sink`.
pub fn read_trace(path: &Path, sink: &mut dyn EventSink) -> Result<ReadStats> {
    let file_name = path.display().to_string();
    let open = || -> Result<Lines<BufReader<File>>> {
        let f = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(Lines::new(BufReader::with_capacity(1 << 20, f), &file_name))
    };
    let mut lines = open()?;
    let header = header::read(&mut lines, &file_name)?;
    let pcf = names::read_pcf(&companion(path, "pcf"))?.unwrap_or_default();
    let row = names::read_row(&companion(path, "row"))?;
    let mpi_app = match mpi_application(&header) {
        Some(app) => app,
        None => find_mpi_application(open()?, header.apps.len())?,
    };
    let trace_name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let layout = Layout::new(&header, row.as_ref(), mpi_app, &trace_name);
    let mut cx = Context::new(sink, pcf, &file_name);
    let declared = cx.sink.header(&layout.header);
    declared.map_err(|e| cx.placed(e, 1))?;
    for a in &layout.anomalies {
        cx.anomaly(a.clone())?;
    }
    for line in &header.intercomm_lines {
        cx.anomaly(Anomaly::SkippedRecord {
            rank: None,
            time: None,
            what: format!(
                "inter-communicator line {line}: mtfdb does not read inter-communicators"
            ),
        })?;
    }
    let mut body = Body::new(&file_name, layout, header.ns_per_unit);
    while let Some((line_no, line)) = lines.next_line()? {
        body.record(&mut cx, line_no, line)?;
    }
    body.finish(&mut cx)?;
    Ok(ReadStats {
        lines: lines.line_no,
        bytes: lines.bytes,
        anomalies: cx.anomalies,
    })
}

/// The MPI application (from 0) as the header tells: the one its first communicator line of
/// a declared application names, or the only one. `None` when several applications and no
/// communicator line leave it open. (A line of an application the header does not declare is
/// reported with the communicators, and left out.)
fn mpi_application(header: &header::Header) -> Option<usize> {
    let apps = header.apps.len();
    let named = header
        .comms
        .iter()
        .filter_map(|c| usize::try_from(c.app).ok())
        .find(|app| (1..=apps).contains(app));
    match named {
        Some(app) => Some(app - 1),
        None => (apps == 1).then_some(0),
    }
}

/// The first application whose records hold MPI calls, messages or global operations
/// (found by reading the body once more); the first application if none does.
fn find_mpi_application<R: BufRead>(mut lines: Lines<R>, apps: usize) -> Result<usize> {
    let mpi_record = |line: &[u8]| -> Option<u64> {
        let mut fields = line.split(|&b| b == b':');
        let kind = fields.next()?;
        let app = text::parse_unsigned(fields.nth(1)?)?;
        match kind {
            b"3" | b"4" => Some(app),
            b"2" => fields
                .skip(3)
                .step_by(2)
                .filter_map(text::parse_unsigned)
                .any(is_mpi_call_type)
                .then_some(app),
            _ => None,
        }
    };
    while let Some((_, line)) = lines.next_line()? {
        if let Some(app) = mpi_record(line) {
            if (1..=apps as u64).contains(&app) {
                return Ok(app as usize - 1);
            }
        }
    }
    Ok(0)
}

/// One end of a communication record: a thread the header declares (its global index), or
/// one it does not (the record's object, the end's logical time, and which end it is).
#[derive(Debug, Clone, Copy)]
enum End {
    Thread(usize),
    Undeclared(Object, Time, &'static str),
}

/// What a thread of another application recorded.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    events: u64,
    regions: u64,
    states: u64,
    messages: u64,
    mpi_calls: u64,
}

/// The body being read.
struct Body {
    file: String,
    layout: Layout,
    ns_per_unit: u64,
    /// Per global thread index: its index in `threads` (MPI rank threads).
    rank_thread: Vec<Option<u32>>,
    threads: Vec<RankThread>,
    /// Per global thread index: what it recorded (threads of other applications).
    counts: Vec<Counts>,
    /// Rank threads touched since they were last drained.
    dirty: Vec<u32>,
    pairs: Vec<Pair>,
    roots: Roots,
}

impl Body {
    fn new(file: &str, layout: Layout, ns_per_unit: u64) -> Body {
        let mut threads = Vec::new();
        let world = layout.world;
        let rank_thread = layout
            .roles
            .iter()
            .map(|role| match *role {
                Role::Rank { rank, thread } => {
                    let index = threads.len() as u32;
                    threads.push(RankThread::new(index, rank, thread, world));
                    Some(index)
                }
                Role::Outside => None,
            })
            .collect();
        Body {
            file: file.to_string(),
            counts: vec![Counts::default(); layout.roles.len()],
            layout,
            ns_per_unit,
            rank_thread,
            threads,
            dirty: Vec::new(),
            pairs: Vec::new(),
            roots: Roots::default(),
        }
    }

    fn record(&mut self, cx: &mut Context, line_no: u64, line: &[u8]) -> Result<()> {
        cx.line = line_no;
        let fault = |f: Fault| f.at_line(&self.file, line_no, line);
        let kind = match line {
            [] => return Ok(()),
            [b'#', ..] => return Ok(()),
            [k, b':', ..] => *k,
            _ => {
                return Err(fault(Fault::new(
                    0,
                    "unknown record",
                    "a Paraver record starts with its type (1, 2, 3 or 4) and ':'",
                )))
            }
        };
        match kind {
            b'1' => {
                let s = record::state(line).map_err(fault)?;
                let time = self.time(s.begin).map_err(fault)?;
                self.advance(cx, time)?;
                let Some(index) = self.locate(&s.object) else {
                    return self.undeclared(cx, &s.object, time, line_no, "a state record");
                };
                if self.rank_thread[index].is_none() {
                    self.counts[index].states += 1;
                }
            }
            b'2' => {
                let mut pairs = std::mem::take(&mut self.pairs);
                let parsed = record::event(line, &mut pairs)
                    .and_then(|e| Ok((e.object, self.time(e.time)?)));
                let (object, time) = match parsed {
                    Ok(v) => v,
                    Err(f) => return Err(fault(f)),
                };
                self.advance(cx, time)?;
                let r = match self.locate(&object) {
                    Some(index) => self.event(cx, index, time, &pairs),
                    None => self.undeclared(cx, &object, time, line_no, "an event record"),
                };
                self.pairs = pairs;
                r?;
            }
            b'3' => {
                let c = record::communication(line).map_err(fault)?;
                let times = [c.logical_send, c.physical_send, c.logical_recv, c.physical_recv]
                    .map(|t| self.time(t));
                let [ls, ps, lr, pr] = match times {
                    [Ok(a), Ok(b), Ok(c), Ok(d)] => [a, b, c, d],
                    other => {
                        #[allow(clippy::expect_used)] // this arm is reached only when some stage failed
                        let f = other.into_iter().find_map(|t| t.err()).expect("one failed");
                        return Err(fault(f));
                    }
                };
                let ends = [(&c.sender, ls, "sender"), (&c.receiver, lr, "receiver")].map(
                    |(object, time, what)| match self.locate(object) {
                        Some(index) => End::Thread(index),
                        None => End::Undeclared(*object, time, what),
                    },
                );
                let [sender, receiver] = ends;
                self.message(cx, line_no, [sender, receiver], [ls, ps, lr, pr], c.size, c.tag)?;
            }
            b'4' => {
                let g = record::global_op(line).map_err(fault)?;
                let time = self.time(g.time).map_err(fault)?;
                self.advance(cx, time)?;
                let Some(index) = self.locate(&g.object) else {
                    return self.undeclared(cx, &g.object, time, line_no, "a global operation");
                };
                match self.rank_thread[index] {
                    Some(t) => {
                        self.threads[t as usize].saw(time);
                        let op = GlobalOp {
                            time,
                            comm: g.comm,
                            send: g.send,
                            recv: g.recv,
                            op: g.op,
                            root: g.root,
                        };
                        self.threads[t as usize].global_op(cx, &self.layout, &op)?;
                        self.touch(t);
                    }
                    None => self.counts[index].mpi_calls += 1,
                }
            }
            _ => {
                return Err(fault(Fault::new(
                    0,
                    "unknown record",
                    format!(
                        "record type {:?}: Paraver records are 1 (state), 2 (event), 3 (communication) or 4 (global operation)",
                        kind as char
                    ),
                )))
            }
        }
        self.settle_roots(cx)?;
        self.drain(cx)
    }

    /// Gives the rooted collectives closed meanwhile the roots their instances name.
    fn settle_roots(&mut self, cx: &mut Context) -> Result<()> {
        for (t, seq) in std::mem::take(&mut cx.rooted) {
            let Some((comm, kind, rank, root)) = self.threads[t as usize].collective(seq) else {
                continue;
            };
            let Some(member) = self.layout.member_index(comm, rank) else {
                continue;
            };
            let size = self.layout.size(comm);
            for ((who, item), root) in self.roots.call(comm, kind, size, member, root, (t, seq)) {
                self.threads[who as usize].resolve_root(item, root);
                self.touch(who);
            }
        }
        Ok(())
    }

    /// The global index of the thread a record names, if the header declares it.
    fn locate(&self, o: &Object) -> Option<usize> {
        self.layout.thread_index(o.app, o.task, o.thread)
    }

    /// The world rank of a task of the MPI application that `o` names, declared or not.
    fn mpi_rank(&self, o: &Object) -> Option<Rank> {
        let task = Rank::try_from(o.task).ok()?.checked_sub(1)?;
        (o.app == self.layout.mpi_app as u64 + 1).then_some(task)
    }

    /// Reports `what` at line `line_no`, naming a thread the header does not declare, and
    /// drops it: a task beyond the MPI application's is a process that is not declared
    /// (`UnknownRank`, Table 3.1); another thread is a skipped record.
    fn undeclared(
        &self,
        cx: &mut Context,
        o: &Object,
        time: Time,
        line_no: u64,
        what: &str,
    ) -> Result<()> {
        let rank = self.mpi_rank(o);
        if let Some(rank) = rank.filter(|&r| r as usize >= self.layout.header.processes.len()) {
            return cx.anomaly(Anomaly::BrokenRule {
                rule: Rule::UnknownRank,
                rank: None,
                thread: u32::try_from(o.thread.saturating_sub(1)).unwrap_or(u32::MAX),
                time: Some(time),
                op: None,
                comm: None,
                value: Some(rank.into()),
            });
        }
        let what = format!(
            "{what} at line {line_no} names thread {}.{}.{}, which the header does not declare ({}); it is not kept",
            o.app,
            o.task,
            o.thread,
            self.layout.describe()
        );
        cx.anomaly(Anomaly::SkippedRecord {
            rank,
            time: Some(time),
            what,
        })
    }

    /// A time of the trace in nanoseconds.
    fn time(&self, (t, at): Stamp) -> std::result::Result<Time, Fault> {
        t.checked_mul(self.ns_per_unit).ok_or_else(|| {
            Fault::new(
                at,
                "time overflow",
                format!(
                    "the time {t} × {} ns does not fit 64 bits of nanoseconds",
                    self.ns_per_unit
                ),
            )
        })
    }

    /// Moves the file's time to `time` and re-examines what waited until then.
    fn advance(&mut self, cx: &mut Context, time: Time) -> Result<()> {
        if time <= cx.now {
            return Ok(());
        }
        cx.now = time;
        while let Some((t, seq)) = cx.next_expired() {
            self.threads[t as usize].expire(cx, seq)?;
            self.touch(t);
        }
        Ok(())
    }

    fn touch(&mut self, t: u32) {
        if !self.dirty.contains(&t) {
            self.dirty.push(t);
        }
    }

    fn drain(&mut self, cx: &mut Context) -> Result<()> {
        while let Some(t) = self.dirty.pop() {
            self.threads[t as usize].drain(cx)?;
        }
        Ok(())
    }

    /// An event record of thread `index` at `time`. One that goes back in time is read as
    /// it stands: the import's seam reports the call or routine it gives (Table 3.1's time
    /// rules) and moves it to its thread's time.
    fn event(&mut self, cx: &mut Context, index: usize, time: Time, pairs: &[Pair]) -> Result<()> {
        let Some(t) = self.rank_thread[index] else {
            let c = &mut self.counts[index];
            for p in pairs {
                c.events += 1;
                c.regions += u64::from(p.ty == USER_FUNCTION && p.value != 0);
                c.mpi_calls += u64::from(is_mpi_call_type(p.ty) && p.value != 0);
            }
            return Ok(());
        };
        let th = &mut self.threads[t as usize];
        th.saw(time);
        th.events += pairs.len() as u64;
        for p in pairs {
            if is_mpi_call_type(p.ty) {
                th.mpi_call(cx, p.ty, p.value, time)?;
            } else if p.ty == USER_FUNCTION {
                th.user_function(cx, p.value, time)?;
            }
        }
        // A collective's arguments come in the line that opens it.
        for p in pairs.iter().filter(|p| is_collective_argument(p.ty)) {
            th.collective_argument(cx, &self.layout, p.ty, p.value)?;
        }
        self.touch(t);
        Ok(())
    }

    /// The name of a communication record's end, for an anomaly.
    fn end_name(&self, end: &End) -> String {
        match end {
            End::Thread(index) => self.layout.names[*index].0.clone(),
            End::Undeclared(o, _, _) => format!("thread {}.{}.{}", o.app, o.task, o.thread),
        }
    }

    /// A communication record between `ends`. A message with an end of another application
    /// is skipped; an end the header does not declare is reported and dropped, and the other
    /// end kept, its peer that end's rank when it is a task of the MPI application (the
    /// import's seam then reports a peer that is no declared process).
    fn message(
        &mut self,
        cx: &mut Context,
        line_no: u64,
        ends: [End; 2],
        [ls, ps, lr, pr]: [Time; 4],
        bytes: u64,
        tag: i32,
    ) -> Result<()> {
        let outside = |end: &End| matches!(end, End::Thread(i) if self.rank_thread[*i].is_none());
        if ends.iter().any(outside) {
            for end in &ends {
                if let End::Thread(i) = *end {
                    if self.rank_thread[i].is_none() {
                        self.counts[i].messages += 1;
                    }
                }
            }
            let what = format!(
                "communication record at line {line_no} from {} to {}: only messages between tasks of the MPI application (application {}) are read",
                self.end_name(&ends[0]),
                self.end_name(&ends[1]),
                self.layout.mpi_app + 1
            );
            return cx.anomaly(Anomaly::SkippedRecord {
                rank: None,
                time: Some(ls),
                what,
            });
        }
        // Each end's rank thread (if declared) and world rank (if a task of the MPI application).
        let mut threads = [None; 2];
        let mut ranks = [None; 2];
        for (i, end) in ends.iter().enumerate() {
            match *end {
                End::Thread(index) => {
                    threads[i] = self.rank_thread[index];
                    ranks[i] = threads[i].map(|t| self.threads[t as usize].rank);
                }
                End::Undeclared(o, time, which) => {
                    let what = format!("the {which} of a communication record");
                    self.undeclared(cx, &o, time, line_no, &what)?;
                    ranks[i] = self.mpi_rank(&o);
                }
            }
        }
        if ps < ls || pr < lr {
            let what = format!(
                "communication record at line {line_no}: a physical time is before its logical time (send {ls}/{ps} ns, receive {lr}/{pr} ns); the message is not kept"
            );
            return cx.anomaly(Anomaly::SkippedRecord {
                rank: ranks[0],
                time: Some(ls),
                what,
            });
        }
        let sides = [(Dir::Send, ls, ps, ranks[1]), (Dir::Recv, lr, pr, ranks[0])];
        for (t, (dir, logical, physical, peer)) in threads.into_iter().zip(sides) {
            let (Some(t), Some(peer)) = (t, peer) else {
                continue;
            };
            let side = Side {
                logical,
                physical,
                peer,
                tag,
                bytes,
            };
            self.threads[t as usize].attach(cx, dir, &side)?;
            self.touch(t);
        }
        Ok(())
    }

    fn finish(mut self, cx: &mut Context) -> Result<()> {
        cx.now = Time::MAX;
        for th in &mut self.threads {
            th.close_open(cx)?;
        }
        self.settle_roots(cx)?;
        for (t, seq) in self.roots.finish() {
            self.threads[t as usize].resolve_root(seq, None);
        }
        for th in &mut self.threads {
            th.finish(cx)?;
        }
        let mut locations = Vec::new();
        for (index, role) in self.layout.roles.iter().enumerate() {
            match (*role, self.rank_thread[index]) {
                (Role::Rank { thread: 0, .. }, _) => {}
                (Role::Rank { .. }, Some(t)) => {
                    let th = &self.threads[t as usize];
                    let mut l = self.layout.location(index, LocationKind::CpuThread);
                    (l.regions, l.events) = (th.regions, th.events);
                    locations.push(l);
                }
                _ => {
                    let c = self.counts[index];
                    let kind = if c.states == 0 && c.messages == 0 && c.mpi_calls == 0 {
                        LocationKind::Metric
                    } else {
                        LocationKind::Process
                    };
                    let mut l = self.layout.location(index, kind);
                    (l.regions, l.events) = (c.regions, c.events);
                    if c.mpi_calls > 0 {
                        let what = format!(
                            "{} (application {}) recorded {} MPI calls or global operations, but only application {} is read as MPI; they are counted as its events",
                            l.name,
                            self.layout.ids[index].0,
                            c.mpi_calls,
                            self.layout.mpi_app + 1
                        );
                        cx.anomaly(Anomaly::SkippedRecord {
                            rank: None,
                            time: None,
                            what,
                        })?;
                    }
                    locations.push(l);
                }
            }
        }
        if !locations.is_empty() {
            cx.sink.locations(&locations)?;
        }
        cx.sink.finish()
    }
}
