//! Reading an OTF v1 trace's event streams into the sink.
//!
//! Each events stream is read line by line (decompressed on the fly), its records handed to
//! the process they belong to. An MPI rank's records go through the same conversion as
//! OTF2's ([`LocationConverter`]): an MPI function's Enter and Leave span an operation, the
//! message and collective records inside it fill in its peer, tag, bytes, communicator and
//! root; other functions become routine enters and leaves. The ranks' items are merged by
//! time across streams with a heap, so memory is bounded by the number of processes and the
//! items in flight, not by the trace's size. Processes kept only as locations (CUDA streams,
//! processes outside MPI) have their records counted.
//!
//! OTF v1 records no request handles. VampirTrace writes the receive record of an
//! `MPI_Irecv` when a Wait or Test completes it; such a record is given to the oldest
//! `MPI_Irecv` of the process still waiting for one, and the completing call is linked to it.

use std::collections::{BTreeMap, VecDeque};

use super::layout::{Layout, Place};
use super::master::Master;
use super::records::{self, Record};
use super::stream::{self, LineReader};
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::ingest::excerpt::quoted;
use crate::ingest::merge::{TimeMerge, TimeOrderedStreams};
use crate::ingest::otf2::convert::{ConvertError, LocationConverter};
use crate::ingest::otf2::events::Event;
use crate::ingest::EventSink;
use crate::ingest::Progress;
use crate::model::{Anomaly, OpKind, Rank, Rule, StrId, Time};

type Converted<T> = std::result::Result<T, ConvertError>;

fn fail<T>(rule: &'static str, message: String) -> Converted<T> {
    Err(ConvertError { rule, message })
}

/// One events stream being read.
struct Stream {
    lines: LineReader,
    /// Event records read from it.
    events: u64,
    /// The current time, in ticks and in ns from the trace's first event.
    time: Option<(u64, Time)>,
    process: Option<u32>,
    done: bool,
    /// The rank locations whose records this stream holds.
    ranks: Vec<usize>,
}

/// An MPI rank's thread being converted.
struct RankLoc {
    stream: usize,
    rank: Rank,
    thread: u32,
    /// Its entry in the location list (threads other than the main one).
    location: Option<usize>,
    convert: LocationConverter,
    /// The functions entered and not left, innermost last.
    stack: Vec<u32>,
    /// Requests given to `MPI_Irecv` calls still waiting for their receive record.
    irecvs: VecDeque<u64>,
    next_request: u64,
    /// Collectives begun outside any MPI call, by matching id: the region standing for them.
    open_collectives: FxHashMap<u64, u32>,
    done: bool,
}

/// Where a process's records go.
#[derive(Clone, Copy)]
enum Target {
    Rank(usize),
    Counted(usize),
}

/// What a read found.
#[derive(Debug, Clone, Default)]
pub struct ReadStats {
    /// Event records read, in all.
    pub events: u64,
}

pub(crate) struct Reader {
    layout: Layout,
    streams: Vec<Stream>,
    ranks: Vec<RankLoc>,
    targets: FxHashMap<u32, Target>,
    /// The first timestamp of the trace, in ticks.
    first: u64,
    /// Anomalies found while reading, not yet handed to the sink.
    anomalies: Vec<Anomaly>,
    /// Times before the trace's first time (kept as 0), by rank.
    before_first: BTreeMap<Option<Rank>, u64>,
    events: u64,
}

/// The first timestamp of the events stream at `path` (errors are left to the full read).
fn first_time(path: &std::path::Path) -> Option<u64> {
    let mut lines = LineReader::open(path).ok()?;
    while let Ok(true) = lines.advance() {
        if let Ok(Record::Time(t)) = records::parse(lines.line()) {
            return Some(t);
        }
    }
    None
}

impl Reader {
    /// Opens every events stream of the trace.
    pub fn open(master: &Master, mut layout: Layout) -> Result<Reader> {
        let mut streams = Vec::with_capacity(master.streams.len());
        let mut ranks = Vec::new();
        let mut targets = FxHashMap::default();
        let mut first: Option<u64> = None;
        let mut anomalies = std::mem::take(&mut layout.anomalies);
        for (id, processes) in &master.streams {
            let base = master.file(*id, "events");
            let Some(path) = stream::find(&base) else {
                // A missing stream: its ranks have no events, its other processes nothing.
                for &p in processes {
                    if let Place::Rank { rank, thread } = layout.places[&p].place {
                        anomalies.push(Anomaly::MissingRankData {
                            rank,
                            thread,
                            file: format!("{}[.z]", base.display()),
                            announced: None,
                            read: 0,
                            cut_at: None,
                        });
                    }
                }
                continue;
            };
            if let Some(t) = first_time(&path) {
                first = Some(first.map_or(t, |f| f.min(t)));
            }
            let index = streams.len();
            let mut stream_ranks = Vec::new();
            for &p in processes {
                let place = layout.places[&p];
                let target = match place.place {
                    Place::Rank { rank, thread } => {
                        stream_ranks.push(ranks.len());
                        ranks.push(RankLoc {
                            stream: index,
                            rank,
                            thread,
                            location: place.location,
                            convert: LocationConverter::new(rank, thread),
                            stack: Vec::new(),
                            irecvs: VecDeque::new(),
                            next_request: 0,
                            open_collectives: FxHashMap::default(),
                            done: false,
                        });
                        Target::Rank(ranks.len() - 1)
                    }
                    Place::Counted => Target::Counted(place.location.unwrap_or_default()),
                };
                targets.insert(p, target);
            }
            streams.push(Stream {
                lines: LineReader::open(&path)?,
                events: 0,
                time: None,
                process: None,
                done: false,
                ranks: stream_ranks,
            });
        }
        Ok(Reader {
            layout,
            streams,
            ranks,
            targets,
            first: first.unwrap_or(0),
            anomalies,
            before_first: BTreeMap::new(),
            events: 0,
        })
    }

    /// `ticks` as ns from the trace's first timestamp. A time before it (a stream whose time
    /// goes back below every stream's first time) is kept as 0 and counted, for `process`'s
    /// rank; the import's checks report the time going back on the records' locations.
    fn ns(&mut self, ticks: u64, process: Option<u32>) -> Time {
        let rank = || process.and_then(|p| self.layout.rank_of(p));
        let Some(delta) = ticks.checked_sub(self.first) else {
            *self.before_first.entry(rank()).or_default() += 1;
            return 0;
        };
        let ns = u128::from(delta) * 1_000_000_000 / u128::from(self.layout.ticks_per_second);
        u64::try_from(ns).unwrap_or_else(|_| {
            self.anomalies.push(Anomaly::ValueOverflow {
                rank: rank(),
                what: format!("time {ticks:x} is more than 2^64 ns after the trace's start"),
            });
            u64::MAX
        })
    }

    /// Reads one line of stream `s`; `false` at its end. A stream cut short (its last line
    /// has no end, or its zlib data stops inside a block) ends where its last whole record
    /// does, and its ranks' data is reported missing from there.
    fn step(&mut self, s: usize) -> Result<bool> {
        match self.streams[s].lines.advance() {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(Error::Input(e))
                if matches!(
                    e.rule.as_str(),
                    "truncated record" | "truncated zlib stream"
                ) =>
            {
                self.cut_short(s, e.file.clone());
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
        let stream = &mut self.streams[s];
        let line = stream.lines.line();
        let record = records::parse(line)
            .map_err(|e| stream.lines.error(e.column, "bad event record", e.message))?;
        let unknown =
            (record == Record::Unknown).then(|| String::from_utf8_lossy(line).into_owned());
        let at =
            |reader: &Reader, e: ConvertError| reader.streams[s].lines.error(1, e.rule, e.message);
        match record {
            Record::Empty => {}
            // A time going back is kept: the import's checks report it on the items it moves.
            Record::Time(t) => {
                let process = stream.process;
                let ns = self.ns(t, process);
                self.streams[s].time = Some((t, ns));
            }
            Record::Process(p) => stream.process = Some(p),
            _ => {
                let line_number = stream.lines.number;
                let (Some((_, time)), Some(process)) = (stream.time, stream.process) else {
                    let what = format!(
                        "an event record before the first time and process lines of {} (line {line_number})",
                        stream.lines.path().display()
                    );
                    self.anomalies.push(Anomaly::SkippedRecord {
                        rank: None,
                        time: None,
                        what,
                    });
                    return Ok(true);
                };
                self.events += 1;
                stream.events += 1;
                if !self.targets.contains_key(&process) {
                    self.unplaced(process, time, s);
                    return Ok(true);
                }
                self.dispatch(process, record, time, line_number, unknown)
                    .map_err(|e| at(self, e))?;
            }
        }
        Ok(true)
    }

    /// A record of `process`, which no stream read holds: a process the trace never names
    /// (its records belong to no rank: [`Rule::UnknownRank`], the process token as the value)
    /// or one the master file maps to no stream read here; the record is skipped, reported.
    fn unplaced(&mut self, process: u32, time: Time, s: usize) {
        let anomaly = if self.layout.places.contains_key(&process) {
            Anomaly::SkippedRecord {
                rank: self.layout.rank_of(process),
                time: Some(time),
                what: format!(
                    "a record of process {process:x} in {}, which the master file maps to no stream read",
                    self.streams[s].lines.path().display()
                ),
            }
        } else {
            Anomaly::BrokenRule {
                rule: Rule::UnknownRank,
                rank: None,
                thread: 0,
                time: Some(time),
                op: None,
                comm: None,
                value: Some(process.into()),
            }
        };
        self.anomalies.push(anomaly);
    }

    /// Stream `s` ends early, cut short: every rank location it holds has its data reported
    /// missing from the end of its last whole record on.
    fn cut_short(&mut self, s: usize, file: String) {
        let stream = &self.streams[s];
        for &j in &stream.ranks {
            let loc = &self.ranks[j];
            self.anomalies.push(Anomaly::MissingRankData {
                rank: loc.rank,
                thread: loc.thread,
                file: file.clone(),
                announced: None,
                read: stream.events,
                cut_at: Some(stream.lines.offset),
            });
        }
    }

    fn skipped(&mut self, rank: Option<Rank>, time: Time, what: String) {
        self.anomalies.push(Anomaly::SkippedRecord {
            rank,
            time: Some(time),
            what,
        });
    }

    /// Hands one record of `process` at `time` (ns) to its location.
    fn dispatch(
        &mut self,
        process: u32,
        record: Record,
        time: Time,
        line: u64,
        unknown: Option<String>,
    ) -> Converted<()> {
        let (rank, counted) = match self.targets[&process] {
            Target::Rank(i) => (Some(self.ranks[i].rank), self.ranks[i].location),
            Target::Counted(l) => (self.layout.locations[l].rank, Some(l)),
        };
        if let Some(l) = counted {
            let loc = &mut self.layout.locations[l];
            loc.events += 1;
            loc.regions += u64::from(matches!(record, Record::Enter { .. }));
        }
        if let Some(text) = unknown {
            self.skipped(
                rank,
                time,
                format!("record of an unknown kind {}", quoted(&text)),
            );
            return Ok(());
        }
        match self.targets[&process] {
            Target::Rank(i) => self.rank_record(i, record, time, line),
            Target::Counted(_) => Ok(()),
        }
    }

    /// An OTF message type as an MPI tag (tags above 2^31 - 1 are reported and kept as the
    /// largest tag).
    fn tag(&mut self, tag: u32, me: Rank) -> u32 {
        if tag > i32::MAX as u32 {
            self.anomalies.push(Anomaly::ValueOverflow {
                rank: Some(me),
                what: format!("message tag {tag:#x} is beyond MPI's tag range"),
            });
            return i32::MAX as u32;
        }
        tag
    }

    /// The kind of the innermost MPI call of rank location `i`.
    fn innermost_call(&self, i: usize) -> Option<OpKind> {
        let ctx = &self.layout.context;
        self.ranks[i]
            .stack
            .iter()
            .rev()
            .find_map(|&f| ctx.regions.get(f).and_then(|r| r.mpi))
    }

    fn convert(&mut self, i: usize, event: Event, time: Time, line: u64) -> Converted<()> {
        self.ranks[i]
            .convert
            .event(&self.layout.context, event, time, line)
    }

    fn rank_record(&mut self, i: usize, record: Record, time: Time, line: u64) -> Converted<()> {
        let me = self.ranks[i].rank;
        match record {
            Record::Enter { function } => {
                let Some(region) = self.layout.context.regions.get(function).copied() else {
                    self.skipped(
                        Some(me),
                        time,
                        format!("an entry of function {function:x}, which is not defined"),
                    );
                    return Ok(());
                };
                self.ranks[i].stack.push(function);
                self.convert(i, Event::Enter(function), time, line)?;
                if region.mpi == Some(OpKind::Irecv) {
                    let loc = &mut self.ranks[i];
                    loc.next_request += 1;
                    let request = loc.next_request;
                    loc.irecvs.push_back(request);
                    self.convert(i, Event::IrecvRequest(request), time, line)?;
                }
            }
            Record::Leave { function }
                if function != 0 && self.layout.context.regions.get(function).is_none() =>
            {
                self.skipped(
                    Some(me),
                    time,
                    format!("a leave of function {function:x}, which is not defined"),
                );
            }
            Record::Leave { function } => self.leave(i, function, time, line)?,
            // Peers, roots and communicators go to the conversion as the record names them:
            // a process that is no MPI rank, or a group that is no communicator, is reported
            // there as the rule it breaks, and the call kept without it.
            Record::Send {
                receiver,
                group,
                tag,
                bytes,
            } => {
                let tag = self.tag(tag, me);
                let send = Event::Send {
                    peer: receiver,
                    comm: group,
                    tag,
                    bytes: bytes.into(),
                };
                self.convert(i, send, time, line)?;
            }
            Record::Receive {
                sender,
                group,
                tag,
                bytes,
            } => {
                let tag = self.tag(tag, me);
                let (peer, comm, bytes) = (sender, group, u64::from(bytes));
                let call = self.innermost_call(i);
                let waiting = match call {
                    // Completed by a Wait or Test: the oldest waiting MPI_Irecv's.
                    Some(k) if k.is_completion() => self.ranks[i].irecvs.pop_front(),
                    // Recorded inside MPI_Irecv itself.
                    Some(OpKind::Irecv) => self.ranks[i].irecvs.pop_back(),
                    _ => None,
                };
                match (waiting, call) {
                    (Some(request), _) => {
                        let event = Event::Irecv {
                            peer,
                            comm,
                            tag,
                            bytes,
                            request,
                        };
                        self.convert(i, event, time, line)?;
                    }
                    (None, Some(k)) if k.is_completion() => self.skipped(
                        Some(me),
                        time,
                        format!(
                            "a receive record from process {sender:x} inside a completion call, with no MPI_Irecv of this process waiting for one"
                        ),
                    ),
                    _ => {
                        let event = Event::Recv {
                            peer,
                            comm,
                            tag,
                            bytes,
                        };
                        self.convert(i, event, time, line)?;
                    }
                }
            }
            Record::Collective {
                collective,
                group,
                root,
                sent,
                received,
                duration,
                matching,
            } => {
                // Process 0 is no process: OTF2's "no root" value.
                let root = if root == 0 { u32::MAX } else { root };
                let end = Event::CollectiveEnd {
                    comm: group,
                    root,
                    sent,
                    received,
                };
                if self.innermost_call(i).is_some() {
                    return self.convert(i, end, time, line);
                }
                // A collective record outside any MPI call: an operation of its own.
                let Some(&region) = self.layout.collective_regions.get(&collective) else {
                    self.skipped(
                        Some(me),
                        time,
                        format!("a collective of operation {collective:x}, which is not defined"),
                    );
                    return Ok(());
                };
                self.convert(i, Event::Enter(region), time, line)?;
                self.convert(i, end, time, line)?;
                match (duration, matching) {
                    (Some(ticks), _) => {
                        let span = u128::from(ticks) * 1_000_000_000
                            / u128::from(self.layout.ticks_per_second);
                        let Some(until) = u64::try_from(span)
                            .ok()
                            .and_then(|span| time.checked_add(span))
                        else {
                            return fail(
                                "value overflow",
                                format!("collective duration {ticks:x} runs past 2^64 ns"),
                            );
                        };
                        self.convert(i, Event::Leave(region), until, line)?;
                    }
                    (None, Some(id)) => {
                        let loc = &mut self.ranks[i];
                        loc.stack.push(region);
                        loc.open_collectives.insert(id, region);
                    }
                    (None, None) => {}
                }
            }
            Record::CollectiveEnd { matching } => {
                if let Some(region) = self.ranks[i].open_collectives.remove(&matching) {
                    self.leave(i, region, time, line)?;
                }
            }
            Record::Rma(name) => self.skipped(
                Some(me),
                time,
                format!("{name} record (mtfdb keeps no one-sided transfers)"),
            ),
            Record::Unused
            | Record::Unknown
            | Record::Empty
            | Record::Time(_)
            | Record::Process(_) => {}
        }
        Ok(())
    }

    /// Leaves `function` (0: the innermost one). A leave of a function entered before the
    /// innermost one closes those entered after it (a crossed leave); a leave of a function
    /// not entered is skipped. Both are reported.
    fn leave(&mut self, i: usize, function: u32, time: Time, line: u64) -> Converted<()> {
        let (rank, thread) = (self.ranks[i].rank, self.ranks[i].thread);
        let stack = &self.ranks[i].stack;
        let innermost = stack.last().copied();
        let Some(target) = (if function == 0 {
            innermost
        } else {
            Some(function)
        }) else {
            self.skipped(
                Some(rank),
                time,
                "a leave record with no function entered".into(),
            );
            return Ok(());
        };
        let name = |f: u32| -> StrId { self.layout.region_name(f) };
        let (Some(at), Some(innermost)) = (stack.iter().rposition(|&f| f == target), innermost)
        else {
            let routine = name(target);
            self.anomalies.push(Anomaly::LeaveWithoutEnter {
                rank,
                thread,
                time,
                routine,
            });
            return Ok(());
        };
        if target != innermost {
            let crossed = Anomaly::CrossedLeave {
                rank,
                thread,
                time,
                routine: name(target),
                innermost: name(innermost),
            };
            self.anomalies.push(crossed);
        }
        while self.ranks[i].stack.len() > at {
            let Some(f) = self.ranks[i].stack.pop() else {
                break;
            };
            self.convert(i, Event::Leave(f), time, line)?;
        }
        Ok(())
    }

    /// Reads rank location `i`'s stream until `i` has an item ready or its stream ends.
    fn fill(&mut self, i: usize) -> Result<()> {
        while self.ranks[i].convert.ready().is_none() && !self.ranks[i].done {
            let s = self.ranks[i].stream;
            if !self.step(s)? {
                self.end_stream(s);
            }
        }
        Ok(())
    }

    /// Closes what the ranks of stream `s` left open.
    fn end_stream(&mut self, s: usize) {
        let stream = &mut self.streams[s];
        stream.done = true;
        let line = stream.lines.number;
        for j in stream.ranks.clone() {
            let loc = &mut self.ranks[j];
            loc.convert.finish(&self.layout.context, line);
            loc.done = true;
        }
    }

    fn flush_anomalies(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        for a in self.anomalies.drain(..) {
            sink.anomaly(&a)?;
        }
        Ok(())
    }

    /// Reads every stream into `sink`: the header and strings, the ranks' items merged by
    /// time, the anomalies, the locations that are not a rank's main thread.
    pub fn run(
        mut self,
        definitions: &std::path::Path,
        skipped: Vec<Anomaly>,
        sink: &mut dyn EventSink,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<ReadStats> {
        // A header the seam refuses was declared by the definitions.
        sink.header(&self.layout.header).map_err(|e| match e {
            Error::Rule(v) => Error::input(
                definitions.display().to_string(),
                0,
                0,
                v.rule,
                v.message,
                "",
            ),
            other => other,
        })?;
        for (id, s) in self.layout.strings.iter().enumerate() {
            sink.string(id as StrId, s)?;
        }
        self.anomalies.extend(skipped);
        let ranks = self.ranks.len();
        TimeMerge::prime(&mut self, ranks)?.run(&mut self, sink, progress)?;
        // Streams of processes that are not ranks: their records are only counted (what
        // they break is reported as it is read, so that memory does not follow them).
        for s in 0..self.streams.len() {
            while !self.streams[s].done {
                if !self.step(s)? {
                    self.end_stream(s);
                }
                self.flush_anomalies(sink)?;
            }
        }
        for (rank, n) in std::mem::take(&mut self.before_first) {
            self.anomalies.push(Anomaly::ValueOverflow {
                rank,
                what: format!(
                    "{n} time{} before the trace's first time {:x}, kept as its first time",
                    if n == 1 { "" } else { "s" },
                    self.first
                ),
            });
        }
        self.flush_anomalies(sink)?;
        let mut state = self.progress();
        state.locations_done = state.locations;
        progress(&state);
        if !self.layout.locations.is_empty() {
            sink.locations(&self.layout.locations)?;
        }
        sink.finish()?;
        Ok(ReadStats {
            events: self.events,
        })
    }
}

impl TimeOrderedStreams for Reader {
    fn next_time(&mut self, i: usize) -> Result<Option<Time>> {
        self.fill(i)?;
        Ok(self.ranks[i].convert.ready().map(|slot| slot.item.time()))
    }

    /// Hands rank `i`'s ready item to the sink, then the anomalies reading it found.
    fn deliver(&mut self, i: usize, sink: &mut dyn EventSink) -> Result<()> {
        let lines = &self.streams[self.ranks[i].stream].lines;
        // The seam checked the item; a broken rule is placed at the record it came from.
        self.ranks[i].convert.deliver(sink, |line, e| match e {
            Error::Rule(v) => lines.error_at_line(line, v.rule, v.message),
            other => other,
        })?;
        self.flush_anomalies(sink)
    }

    fn events(&self) -> u64 {
        self.events
    }

    fn progress(&self) -> Progress {
        Progress {
            locations: (self.ranks.len() + self.layout.locations.len()) as u64,
            locations_done: self.ranks.iter().filter(|l| l.done).count() as u64,
            events: self.events,
            events_expected: 0,
        }
    }
}
