//! SST DUMPI traces (versions 1.0 and 1.1, and the 0.6 files before them), read by mtfdb's own
//! code: no DUMPI library is needed.
//!
//! A trace is a text `.meta` file (the number of ranks and the rank files' common name) and
//! one binary `.bin` file per rank (`bin` describes its layout): a header (version, start
//! time, host and user), the stream of call records, a footer (calls per MPI function), the
//! sizes of the datatypes the rank used, the names of its profiled user functions, and an
//! index of where each part starts. Each call record (`record`) holds the function, the
//! thread, the wall-clock and CPU times and the call's arguments in the function's layout
//! (`funcs`).
//!
//! The reader makes two passes over the rank files, so that the header, which must come
//! before the operations, can declare every communicator the trace creates:
//!
//! 1. The first pass reads each rank's file alone, one after the other, and keeps only its
//!    first time and its communicator and group calls (`MPI_Comm_split`, `MPI_Comm_create`,
//!    `MPI_Group_incl`, …). A rank whose footer counts no such call is not read past its
//!    first record. `comms` resolves the calls across ranks into communicators with world
//!    ranks. Memory follows the number of those calls, not the trace's length.
//! 2. The header declares the processes (one per rank, with the host its file names as
//!    processor), `MPI_COMM_WORLD` (id 0), each rank's `MPI_COMM_SELF` (ids 1 to n) and the
//!    created communicators (from n + 1 on). The second pass then streams every rank's file
//!    through a bounded window, converts its records (`convert`) and merges the ranks by
//!    time (the merge every reader of one file per location shares, `ingest/merge.rs`).
//!
//! Times are wall-clock nanoseconds from the trace's first event (the earliest first record
//! of any rank). CPU times are decoded but not kept (the model has no place for them).
//! A partial copy of a trace imports: a rank whose `.bin` file is missing is an
//! [`Anomaly::MissingRankData`] and has no events; one cut short has its calls read up to the
//! cut (`RankFile::cut`: DUMPI writes a file's header, tables and index at its end, so they
//! are lost), and the anomaly says where it was cut. The other ranks import.
//! Damaged files (a bad magic, a record that does not decode) are refused with the file and
//! byte offset; everything that decodes imports, and what mtfdb cannot place becomes an
//! anomaly. The reader only decodes: the import's seam ([`crate::ingest::ValidatingSink`])
//! checks every item and reports each broken rule as an anomaly of its class, and
//! `convert` reports the rules whose items the seam cannot see (a communicator handle, a
//! peer or a root with no world translation).

mod bin;
mod comms;
mod convert;
mod funcs;
mod meta;
mod record;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::ingest::merge::{TimeMerge, TimeOrderedStreams};
use crate::ingest::EventSink;
use crate::ingest::Progress;
use crate::model::{
    Anomaly, Communicator, Location, LocationKind, Process, Processor, Rank, TraceHeader,
};

use bin::{error_at, is_cut_short, RankFile, Stream};
use comms::MgmtTable;
use convert::{Context, Names, RankConverter};
use record::{Decoder, Record};

/// Whether `path` is a DUMPI `.meta` file (text with `numprocs=` and `fileprefix=` lines).
pub fn looks_like_meta(path: &Path) -> bool {
    meta::looks_like_meta(path)
}

/// Whether `path` is one rank's `.bin` file of a DUMPI trace (it starts with DUMPI's magic).
pub fn looks_like_rank_file(path: &Path) -> bool {
    meta::looks_like_bin(path)
}

/// The `.meta` file of the DUMPI trace at `path`: the file itself, the one `.meta` file of a
/// folder, or the `.meta` file beside one of the trace's `.bin` files.
pub fn find_meta(path: &Path) -> Result<PathBuf> {
    meta::find_meta(path)
}

/// What a read found.
#[derive(Debug, Clone, Default)]
pub struct ReadStats {
    /// Ranks read.
    pub ranks: u32,
    /// Call records converted (the second pass).
    pub records: u64,
}

/// One rank being read in the second pass.
struct RankReader {
    rank: Rank,
    stream: Stream,
    decoder: Decoder,
    convert: RankConverter,
    done: bool,
}

/// Reads the DUMPI trace at `path` (its `.meta` file or folder) into `sink`, calling
/// `progress` now and then (ranks as locations, call records as events).
pub fn read_trace(
    path: &Path,
    sink: &mut dyn EventSink,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ReadStats> {
    let meta_path = find_meta(path)?;
    let meta = meta::read(&meta_path)?;
    let mut files = Vec::new();
    let mut missing = Vec::new();
    let mut cut = Vec::new();
    for (rank, p) in meta.rank_files().iter().enumerate() {
        match open_rank_file(p, rank as Rank)? {
            Opened::Whole(f) => files.push(Some(f)),
            Opened::Cut(len) => {
                files.push(None);
                cut.push((rank, p.clone(), len));
            }
            Opened::Missing(gap) => {
                files.push(None);
                missing.push(gap);
            }
        }
    }
    // Cut files are read as a complete rank lays its calls out; with none, they are missing.
    let like = files.iter().flatten().next().cloned();
    for (rank, p, len) in cut {
        match &like {
            Some(like) => files[rank] = Some(RankFile::cut(&p, len, like)),
            None => missing.push(Anomaly::MissingRankData {
                rank: rank as Rank,
                thread: 0,
                file: p.display().to_string(),
                announced: None,
                read: 0,
                cut_at: Some(len),
            }),
        }
    }
    if !files.iter().any(Option::is_some) {
        let first = meta.rank_files().into_iter().next().unwrap_or_default();
        return Err(Error::io(
            &first,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "none of the {} rank files of the DUMPI trace {} can be read",
                    meta.numprocs,
                    meta_path.display()
                ),
            ),
        ));
    }
    let ranks = files.len();
    let mgmt = MgmtTable::new();

    // Pass 1: first times and communicator calls (none for a missing rank).
    let mut calls = Vec::with_capacity(ranks);
    let mut t0: Option<u64> = None;
    let mut argv = Vec::new();
    for f in &files {
        let Some(f) = f else {
            calls.push(Vec::new());
            continue;
        };
        let mut stream = Stream::open(f, 1)?;
        let Some(mut decoder) = start(&mut stream, f)? else {
            calls.push(Vec::new());
            continue;
        };
        let all = mgmt.any_called(f.call_counts.as_deref());
        let found = comms::collect(&mut stream, &mut decoder, &mgmt, all)?;
        if let Some(t) = found.first_time {
            t0 = Some(t0.map_or(t, |m| m.min(t)));
        }
        if argv.is_empty() {
            argv = found.argv;
        }
        calls.push(found.calls);
    }
    let resolved = comms::resolve(&calls);
    drop(calls);

    let header = header(&meta, &files, &argv, &resolved.created);
    sink.header(&header).map_err(|e| match e {
        Error::Rule(v) => error_at(&meta_path, 0, v.rule, v.message),
        other => other,
    })?;
    for a in missing.iter().chain(&resolved.anomalies) {
        sink.anomaly(a)?;
    }
    let mut members: Vec<Vec<Rank>> = Vec::new();
    for c in &header.communicators {
        let i = c.id as usize;
        if members.len() <= i {
            members.resize(i + 1, Vec::new());
        }
        // A rank a group call listed twice is a member once, at its first place, as the
        // import's checks keep the communicator (they report the duplicate).
        let mut seen = std::collections::HashSet::new();
        members[i] = c
            .members
            .iter()
            .copied()
            .filter(|&m| seen.insert(m))
            .collect();
    }
    let ctx = Context {
        members,
        kinds: Context::kinds(),
        mgmt,
        t0: t0.unwrap_or(0),
    };

    // Pass 2: every rank's records, merged by time.
    let mut readers = Vec::with_capacity(ranks);
    let mut cut_early = Vec::new();
    let mut expected = 0u64;
    for ((rank, f), bindings) in files.iter().enumerate().zip(resolved.bindings) {
        let Some(f) = f else { continue };
        let mut stream = Stream::open(f, ranks)?;
        let Some(decoder) = start(&mut stream, f)? else {
            cut_early.push(Anomaly::MissingRankData {
                rank: rank as Rank,
                thread: 0,
                file: f.path.display().to_string(),
                announced: None,
                read: 0,
                cut_at: Some(f.stream_end),
            });
            continue;
        };
        expected += u64::from(f.calls(funcs::ALL_FUNCTIONS).unwrap_or(0));
        readers.push(RankReader {
            rank: rank as Rank,
            stream,
            decoder,
            convert: RankConverter::new(rank as Rank, bindings, f.type_sizes.clone(), &f.functions),
            done: false,
        });
    }
    for a in &cut_early {
        sink.anomaly(a)?;
    }
    let mut merge = Merge {
        readers,
        cut: Vec::new(),
        ctx,
        names: Names::default(),
        record: Record::default(),
        state: Progress {
            locations: ranks as u64,
            events_expected: expected,
            ..Progress::default()
        },
    };
    merge.run(sink, progress)?;
    merge.report_cuts(sink)?;
    let locations = merge.locations();
    let ranks = merge.readers.len();
    if !locations.is_empty() {
        sink.locations(&locations)?;
    }
    sink.finish()?;
    Ok(ReadStats {
        ranks: ranks as u32,
        records: merge.state.events,
    })
}

/// A rank's file as found.
enum Opened {
    /// Whole: its index, header and tables read.
    Whole(RankFile),
    /// Cut short, `len` bytes long: it does not end with DUMPI's index (which the tracer
    /// writes last), but starts with DUMPI's magic.
    Cut(u64),
    /// Not there, or cut before its first call: no data at all.
    Missing(Anomaly),
}

/// Opens rank `rank`'s file at `path`; other damage than a missing file or a cut is an
/// error.
fn open_rank_file(path: &Path, rank: Rank) -> Result<Opened> {
    let gap = |cut_at: Option<u64>| {
        Opened::Missing(Anomaly::MissingRankData {
            rank,
            thread: 0,
            file: path.display().to_string(),
            announced: None,
            read: 0,
            cut_at,
        })
    };
    let len = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => return Ok(gap(None)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(gap(None)),
        Err(e) => return Err(Error::io(path, e)),
    };
    // The magic and the call stream's two time offsets come before the first call.
    if len < 16 {
        return Ok(gap(Some(len)));
    }
    match RankFile::open(path) {
        Ok(f) => Ok(Opened::Whole(f)),
        Err(Error::Input(e)) if e.rule == "truncated file" => Ok(Opened::Cut(len)),
        Err(e) => Err(e),
    }
}

/// Starts decoding a rank's call stream; `None` when the file is cut before its first call.
fn start(stream: &mut Stream, f: &RankFile) -> Result<Option<Decoder>> {
    match Decoder::start(stream, f.version, f.perf_counters) {
        Ok(d) => Ok(Some(d)),
        Err(e) if is_cut_short(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The trace's declarations; a rank whose file is missing is declared, on no processor.
fn header(
    meta: &meta::Meta,
    files: &[Option<RankFile>],
    argv: &[String],
    created: &[Communicator],
) -> TraceHeader {
    let mut processors: Vec<Processor> = Vec::new();
    let mut processes = Vec::with_capacity(files.len());
    for (rank, f) in files.iter().enumerate() {
        let processor = f.as_ref().filter(|f| !f.hostname.is_empty()).map(|f| {
            match processors.iter().find(|p| p.name == f.hostname) {
                Some(p) => p.id,
                None => {
                    let id = processors.len() as u32;
                    processors.push(Processor {
                        id,
                        name: f.hostname.clone(),
                    });
                    id
                }
            }
        });
        processes.push(Process {
            rank: rank as Rank,
            name: format!("P{rank}"),
            processor,
        });
    }
    let n = files.len() as Rank;
    let mut communicators = vec![Communicator {
        id: comms::WORLD,
        name: "MPI_COMM_WORLD".into(),
        members: (0..n).collect(),
    }];
    communicators.extend((0..n).map(|rank| Communicator {
        id: comms::self_comm(rank),
        name: format!("MPI_COMM_SELF of rank {rank}"),
        members: vec![rank],
    }));
    communicators.extend(created.iter().cloned());
    let first = files.iter().flatten().find(|f| !f.cut);
    let version = first
        .map(|f| format!("{}.{}.{}", f.version[0], f.version[1], f.version[2]))
        .or_else(|| meta.version.clone())
        .unwrap_or_default();
    let comments = match first {
        Some(f) => format!(
            "SST DUMPI {version} trace of {n} ranks, recorded by {} on {} from {} (Unix time)",
            f.username, f.hostname, f.start_time
        ),
        None => format!("SST DUMPI {version} trace"),
    };
    TraceHeader {
        scenario: argv.join(" "),
        trace_name: meta.prefix.clone(),
        comments,
        processors,
        processes,
        communicators,
        locations: Vec::new(),
        untimed: false,
    }
}

/// The second pass: the ranks' items, merged by time.
struct Merge {
    readers: Vec<RankReader>,
    /// Ranks whose file ended cut short, not yet reported.
    cut: Vec<Anomaly>,
    ctx: Context,
    names: Names,
    record: Record,
    state: Progress,
}

impl Merge {
    /// Reads rank `i` until it has an item ready or ends.
    fn fill(&mut self, i: usize) -> Result<()> {
        let r = &mut self.readers[i];
        while r.convert.ready().is_none() && !r.done {
            let more = match r.decoder.next(&mut r.stream, &mut self.record) {
                Ok(more) => more,
                Err(e) if is_cut_short(&e) => {
                    self.cut.push(Anomaly::MissingRankData {
                        rank: r.rank,
                        thread: 0,
                        file: r.stream.path().display().to_string(),
                        announced: None,
                        read: r.decoder.records,
                        cut_at: Some(r.stream.record),
                    });
                    false
                }
                Err(e) => return Err(e),
            };
            if more {
                self.state.events += 1;
                r.convert.record(&self.record, &self.ctx, &mut self.names);
            } else {
                r.done = true;
                r.convert.finish();
                self.state.locations_done += 1;
            }
        }
        Ok(())
    }

    /// Hands the sink the ranks found cut short so far.
    fn report_cuts(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        for a in self.cut.drain(..) {
            sink.anomaly(&a)?;
        }
        Ok(())
    }

    fn run(&mut self, sink: &mut dyn EventSink, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
        let locations = self.readers.len();
        TimeMerge::prime(self, locations)?.run(self, sink, progress)
    }
}

impl TimeOrderedStreams for Merge {
    fn next_time(&mut self, i: usize) -> Result<Option<u64>> {
        self.fill(i)?;
        Ok(self.readers[i].convert.ready().map(|h| h.time))
    }

    /// Hands rank `i`'s next item (which is ready) to the sink, after any new strings.
    fn deliver(&mut self, i: usize, sink: &mut dyn EventSink) -> Result<()> {
        self.report_cuts(sink)?;
        for (id, s) in self.names.take_fresh() {
            sink.string(id, &s)?;
        }
        let r = &mut self.readers[i];
        let Some(held) = r.convert.pop() else {
            return Ok(());
        };
        // The seam checked the item; a broken rule is placed at the record it came from.
        held.item.send_to(sink).map_err(|e| match e {
            Error::Rule(v) => error_at(r.stream.path(), held.offset, v.rule, v.message),
            other => other,
        })
    }

    fn events(&self) -> u64 {
        self.state.events
    }

    fn progress(&self) -> Progress {
        self.state
    }
}

impl Merge {
    /// The threads other than each rank's main thread, with what they recorded.
    fn locations(&self) -> Vec<Location> {
        let mut out = Vec::new();
        for r in &self.readers {
            let rank = r.rank;
            for (&thread, counts) in &r.convert.threads {
                if thread == 0 {
                    continue;
                }
                out.push(Location {
                    name: format!("rank {rank} thread {thread}"),
                    kind: LocationKind::CpuThread,
                    group: format!("P{rank}"),
                    rank: Some(rank),
                    thread: Some(u32::from(thread)),
                    regions: counts.regions,
                    events: counts.records,
                });
            }
        }
        out
    }
}
