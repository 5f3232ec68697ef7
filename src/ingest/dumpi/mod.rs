//! SST DUMPI traces (versions 1.0 and 1.1, and the 0.6 files before them), read by mtfdb's own
//! code: no DUMPI library is needed.
//!
//! A trace is a text `.meta` file (the number of ranks and the rank files' common name) and
//! one binary `.bin` file per rank ([`bin`] describes its layout): a header (version, start
//! time, host and user), the stream of call records, a footer (calls per MPI function), the
//! sizes of the datatypes the rank used, the names of its profiled user functions, and an
//! index of where each part starts. Each call record ([`record`]) holds the function, the
//! thread, the wall-clock and CPU times and the call's arguments in the function's layout
//! ([`funcs`]).
//!
//! The reader makes two passes over the rank files, so that the header, which must come
//! before the operations, can declare every communicator the trace creates:
//!
//! 1. The first pass reads each rank's file alone, one after the other, and keeps only its
//!    first time and its communicator and group calls (`MPI_Comm_split`, `MPI_Comm_create`,
//!    `MPI_Group_incl`, …). A rank whose footer counts no such call is not read past its
//!    first record. [`comms`] resolves the calls across ranks into communicators with world
//!    ranks. Memory follows the number of those calls, not the trace's length.
//! 2. The header declares the processes (one per rank, with the host its file names as
//!    processor), `MPI_COMM_WORLD` (id 0), each rank's `MPI_COMM_SELF` (ids 1 to n) and the
//!    created communicators (from n + 1 on). The second pass then streams every rank's file
//!    through a bounded window, converts its records ([`convert`]) and merges the ranks by
//!    time (the merge every reader of one file per location shares, `ingest/merge.rs`).
//!
//! Times are wall-clock nanoseconds from the trace's first event (the earliest first record
//! of any rank). CPU times are decoded but not kept (the model has no place for them).
//! Damaged files (a bad magic, a truncated file, a record that does not decode) are refused
//! with the file and byte offset; everything legal that mtfdb cannot place becomes an
//! anomaly. The reader only decodes: the import's seam ([`crate::ingest::ValidatingSink`])
//! checks every item, and a broken rule is reported at the record it came from.

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
use crate::model::{Communicator, Location, LocationKind, Process, Processor, Rank, TraceHeader};

use bin::{error_at, RankFile, Stream};
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
    let files = meta
        .rank_files()?
        .iter()
        .map(|p| RankFile::open(p))
        .collect::<Result<Vec<RankFile>>>()?;
    let ranks = files.len();
    let mgmt = MgmtTable::new();

    // Pass 1: first times and communicator calls.
    let mut calls = Vec::with_capacity(ranks);
    let mut t0: Option<u64> = None;
    let mut argv = Vec::new();
    for (rank, f) in files.iter().enumerate() {
        let mut stream = Stream::open(f, 1)?;
        let mut decoder = Decoder::start(&mut stream, f.version, f.perf_counters)?;
        let all = mgmt.any_called(f.call_counts.as_deref());
        let found = comms::collect(&mut stream, &mut decoder, &mgmt, all)?;
        if let Some(t) = found.first_time {
            t0 = Some(t0.map_or(t, |m| m.min(t)));
        }
        if rank == 0 {
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
    for a in &resolved.anomalies {
        sink.anomaly(a)?;
    }
    let mut members: Vec<Vec<Rank>> = Vec::new();
    for c in &header.communicators {
        let i = c.id as usize;
        if members.len() <= i {
            members.resize(i + 1, Vec::new());
        }
        members[i] = c.members.clone();
    }
    let ctx = Context {
        members,
        kinds: Context::kinds(),
        mgmt,
        t0: t0.unwrap_or(0),
    };

    // Pass 2: every rank's records, merged by time.
    let mut readers = Vec::with_capacity(ranks);
    let mut expected = 0u64;
    for ((rank, f), bindings) in files.iter().enumerate().zip(resolved.bindings) {
        let mut stream = Stream::open(f, ranks)?;
        let decoder = Decoder::start(&mut stream, f.version, f.perf_counters)?;
        expected += u64::from(f.calls(funcs::ALL_FUNCTIONS).unwrap_or(0));
        readers.push(RankReader {
            stream,
            decoder,
            convert: RankConverter::new(rank as Rank, bindings, f.type_sizes.clone(), &f.functions),
            done: false,
        });
    }
    let mut merge = Merge {
        readers,
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
    let locations = merge.locations();
    if !locations.is_empty() {
        sink.locations(&locations)?;
    }
    sink.finish()?;
    Ok(ReadStats {
        ranks: ranks as u32,
        records: merge.state.events,
    })
}

/// The trace's declarations.
fn header(
    meta: &meta::Meta,
    files: &[RankFile],
    argv: &[String],
    created: &[Communicator],
) -> TraceHeader {
    let mut processors: Vec<Processor> = Vec::new();
    let mut processes = Vec::with_capacity(files.len());
    for (rank, f) in files.iter().enumerate() {
        let processor = (!f.hostname.is_empty()).then(|| {
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
    let first = files.first();
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
            if r.decoder.next(&mut r.stream, &mut self.record)? {
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
        for (rank, r) in self.readers.iter().enumerate() {
            for (&thread, counts) in &r.convert.threads {
                if thread == 0 {
                    continue;
                }
                out.push(Location {
                    name: format!("rank {rank} thread {thread}"),
                    kind: LocationKind::CpuThread,
                    group: format!("P{rank}"),
                    rank: Some(rank as Rank),
                    thread: Some(u32::from(thread)),
                    regions: counts.regions,
                    events: counts.records,
                });
            }
        }
        out
    }
}
