//! OTF2 archives (Score-P's format), read by mtfdb's own code: no OTF2 library is needed.
//!
//! An archive is an anchor file (`traces.otf2`, or any name), a global definitions file
//! beside it (`traces.def`) and a folder (`traces/`) with an event file and an optional local
//! definitions file per location (thread). The reader
//!
//! 1. reads the anchor (`anchor`) and the global definitions (`defs`);
//! 2. lays out the MTF trace: location groups become processes with world ranks (the order of
//!    the MPI `COMM_LOCATIONS` group), locations become their threads, system tree nodes
//!    become processors, communicators get their members as world ranks;
//! 3. streams every location's events (`events`), converting them to operations and routine
//!    events (`convert`) and merging the locations by time, so that memory stays bounded by
//!    the number of locations rather than the trace's size;
//! 4. hands every item to the [`EventSink`] (the import's seam checks it against the
//!    metamodel's rules and places a broken one at the record it came from).
//!
//! OTF2 records the receiver of a send, the sender of a receive and the root of a collective
//! as ranks within the communicator; they are translated to world ranks here.

mod anchor;
pub(crate) mod convert;
mod defs;
pub(crate) mod events;
mod layout;
mod metrics;
mod reader;

pub use anchor::looks_like_anchor;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::ingest::merge::{TimeMerge, TimeOrderedStreams};
use crate::ingest::EventSink;
use crate::model::{Anomaly, Rank, StrId};

use anchor::Anchor;
use convert::LocationConverter;
use defs::Definitions;
use events::EventStream;
use layout::Layout;
use reader::ReadPlan;

/// How far an OTF2 import has come (the readers of OTF v1 and DUMPI report the same).
pub use crate::ingest::Progress;

/// What a read found.
#[derive(Debug, Clone, Default)]
pub struct ReadStats {
    /// Event records read, in all.
    pub events: u64,
}

/// Finds the anchor file of the archive at `path`: the file itself, or the one anchor file
/// in a folder (whatever its name).
pub fn find_anchor(path: &Path) -> Result<PathBuf> {
    if !path.is_dir() {
        return if looks_like_anchor(path) {
            Ok(path.to_path_buf())
        } else {
            Err(Error::input(
                path.display().to_string(),
                0,
                0,
                "not an OTF2 anchor file",
                "the file does not start like an OTF2 anchor file (give the archive's .otf2 file or its folder)",
                "",
            ))
        };
    }
    let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
    let mut anchors: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && looks_like_anchor(p))
        .collect();
    anchors.sort();
    match anchors.len() {
        1 => Ok(anchors.remove(0)),
        0 => Err(Error::Usage(format!(
            "{}: no OTF2 anchor file in this folder (an archive has one, such as traces.otf2)",
            path.display()
        ))),
        _ => Err(Error::Usage(format!(
            "{}: the folder holds several OTF2 archives ({}); give the anchor file of the one to import",
            path.display(),
            anchors
                .iter()
                .map(|p| p.file_name().unwrap_or_default().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Reads the OTF2 archive at `path` (its anchor file or folder) into `sink`, calling
/// `progress` now and then.
pub fn read_archive(
    path: &Path,
    sink: &mut dyn EventSink,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ReadStats> {
    let anchor_path = find_anchor(path)?;
    let anchor = anchor::read(&anchor_path)?;
    let defs_path = anchor.global_defs_path();
    if !defs_path.exists() {
        return Err(Error::io(
            &defs_path,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the archive's global definitions file is missing",
            ),
        ));
    }
    let defs = defs::read_global(&defs_path, anchor.def_chunk_size, anchor.global_definitions)?;
    let layout = Layout::new(&anchor, &defs)?;
    let mut archive = Archive::open(&anchor, defs, layout)?;
    archive.run(sink, progress)
}

/// One location being read.
struct Location {
    /// Its OTF2 location id.
    id: u64,
    stream: EventStream,
    convert: LocationConverter,
    /// Event records read from it.
    events: u64,
    done: bool,
    /// Its rank and thread.
    place: (Rank, u32),
    /// Its event file.
    file: PathBuf,
    /// The events its definition announces.
    announced: u64,
}

/// Open event files kept open at once; beyond this many locations, each file is opened for
/// each read of its window and closed again, so that 16,384 locations never hold 16,384
/// descriptors.
const OPEN_FILES: usize = 256;
/// Memory for the read windows of all locations together.
const WINDOW_BUDGET: usize = 256 << 20;

/// How each location's event file is read, for `n` locations read at once: small windows and
/// no descriptor kept when there are many.
fn read_plan(n: usize) -> ReadPlan {
    ReadPlan {
        window: (WINDOW_BUDGET / n.max(1)).clamp(4 << 10, 64 << 10),
        keep_open: n <= OPEN_FILES,
    }
}

/// The archive being read: its locations and the merge across them.
struct Archive {
    layout: Layout,
    locations: Vec<Location>,
    /// Ranks' locations whose event file is missing (`Anomaly::MissingRankData`).
    missing: Vec<Anomaly>,
    /// How far the read has come (the events the definitions announce included).
    state: Progress,
    /// The definitions' strings, for the program name of a ProgramBegin record.
    program_names: FxHashMap<u32, String>,
    /// Locations of no process, to be counted: id, event file, local definitions.
    unplaced: Vec<(u64, PathBuf, defs::LocalDefinitions)>,
    chunk_size: u64,
    clock: defs::ClockProperties,
    /// The trace's counters (none when it recorded none).
    metrics: Vec<crate::model::Metric>,
}

/// Where a location's events are.
enum EventFile {
    /// In this file.
    At(PathBuf),
    /// Nowhere, and the definitions announce none.
    None,
    /// Nowhere, although the definitions announce events: a partial copy of the archive.
    Missing(PathBuf),
}

/// The event file of location `l`.
fn event_file(anchor: &Anchor, l: &defs::Location) -> EventFile {
    let evt = anchor.event_path(l.id);
    if evt.exists() {
        EventFile::At(evt)
    } else if l.events == 0 {
        EventFile::None
    } else {
        EventFile::Missing(evt)
    }
}

/// A rank's location whose event data is missing or cut short, as the anomaly that reports it
/// (the matcher then counts what was left waiting for that rank apart).
fn missing_data(
    (rank, thread): (Rank, u32),
    file: &Path,
    announced: u64,
    read: u64,
    cut_at: Option<u64>,
) -> Anomaly {
    Anomaly::MissingRankData {
        rank,
        thread,
        file: file.display().to_string(),
        announced: Some(announced),
        read,
        cut_at,
    }
}

impl Archive {
    fn open(anchor: &Anchor, defs: Definitions, layout: Layout) -> Result<Archive> {
        // `Layout::of` refuses definitions without clock properties.
        #[allow(clippy::expect_used)]
        let clock = defs.clock.expect("checked by the layout");
        let mut locations = Vec::with_capacity(layout.threads.len());
        let mut events_expected = 0u64;
        let mut missing = Vec::new();
        let plan = read_plan(layout.threads.len());
        let metrics = metrics::MetricTable::new(&defs);
        for l in &defs.locations {
            let Some(&(rank, thread)) = layout.threads.get(&l.id) else {
                continue;
            };
            let evt = match event_file(anchor, l) {
                EventFile::At(evt) => evt,
                EventFile::None => continue,
                EventFile::Missing(evt) => {
                    missing.push(missing_data((rank, thread), &evt, l.events, 0, None));
                    continue;
                }
            };
            events_expected = events_expected.saturating_add(l.events);
            let local = defs::read_local(&anchor.local_defs_path(l.id), anchor.def_chunk_size)?;
            let stream = EventStream::open(&evt, anchor.event_chunk_size, clock, local, plan)?;
            locations.push(Location {
                id: l.id,
                stream,
                convert: LocationConverter::new(rank, thread)
                    .with_metrics(metrics.clone().map(metrics::LocationMetrics::new)),
                events: 0,
                done: false,
                place: (rank, thread),
                file: evt,
                announced: l.events,
            });
        }
        let mut archive = Archive {
            layout,
            state: Progress {
                locations: locations.len() as u64,
                events_expected,
                ..Progress::default()
            },
            locations,
            missing,
            metrics: metrics.map_or_else(Vec::new, |m| m.metrics.clone()),
            program_names: defs.strings,
            unplaced: Vec::new(),
            chunk_size: anchor.event_chunk_size,
            clock,
        };
        // Locations that belong to no process (an accelerator without its creator) give no
        // items; their regions are only counted.
        for l in &defs.locations {
            let listed = archive
                .layout
                .others
                .iter()
                .any(|(id, o)| *id == l.id && o.rank.is_none());
            if listed {
                if let EventFile::At(evt) = event_file(anchor, l) {
                    let local =
                        defs::read_local(&anchor.local_defs_path(l.id), anchor.def_chunk_size)?;
                    archive.unplaced.push((l.id, evt, local));
                }
            }
        }
        Ok(archive)
    }

    /// What every location that is not a rank's main thread recorded (reads the event files
    /// of the locations that belong to no process, to count their regions).
    fn other_locations(
        &mut self,
        chunk_size: u64,
        clock: defs::ClockProperties,
    ) -> Result<Vec<crate::model::Location>> {
        let mut counts: FxHashMap<u64, (u64, u64)> = self
            .locations
            .iter()
            .map(|l| (l.id, (l.events, l.convert.enters)))
            .collect();
        for (id, evt, local) in std::mem::take(&mut self.unplaced) {
            let mut stream = EventStream::open(&evt, chunk_size, clock, local, read_plan(1))?;
            let (mut events, mut enters) = (0u64, 0u64);
            while let Some(event) = stream.next()? {
                events += 1;
                if matches!(event, events::Event::Enter(_)) {
                    enters += 1;
                }
            }
            counts.insert(id, (events, enters));
        }
        Ok(self
            .layout
            .others
            .iter()
            .map(|(id, l)| {
                let (events, regions) = counts.get(id).copied().unwrap_or((0, 0));
                crate::model::Location {
                    events,
                    regions,
                    ..l.clone()
                }
            })
            .collect())
    }

    /// Reads location `i` until it has an item ready or ends. Returns the events read.
    fn fill(&mut self, i: usize) -> Result<u64> {
        let ctx = &self.layout.context;
        let loc = &mut self.locations[i];
        let mut read = 0;
        while loc.convert.ready().is_none() && !loc.done {
            let next = match loc.stream.next() {
                Ok(next) => next,
                Err(e) if e.is_truncated() => {
                    // A partial copy: what was read stands, the cut is reported, and the
                    // location ends here like a complete one.
                    let end = loc.stream.reader().len();
                    let anomaly =
                        missing_data(loc.place, &loc.file, loc.announced, loc.events, Some(end));
                    loc.convert.report(anomaly, end);
                    None
                }
                Err(e) => return Err(e),
            };
            match next {
                Some(event) => {
                    read += 1;
                    loc.events += 1;
                    let (time, offset) = (loc.stream.time, loc.stream.offset);
                    if let events::Event::Metric(metric) = event {
                        loc.convert.sample(metric, &loc.stream.metric_values, time);
                    }
                    loc.convert
                        .event(ctx, event, time, offset)
                        .map_err(|e| loc.stream.reader().error(offset, e.rule, e.message))?;
                }
                None => {
                    loc.done = true;
                    let end = loc.stream.reader().len();
                    loc.convert.finish(ctx, end);
                }
            }
        }
        Ok(read)
    }

    fn run(
        &mut self,
        sink: &mut dyn EventSink,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<ReadStats> {
        // Prime every location (this also finds the program name of ProgramBegin records).
        let locations = self.locations.len();
        let merge = TimeMerge::prime(self, locations)?;
        let mut header = self.layout.header.clone();
        if let Some(name) = self.locations.iter().find_map(|l| l.convert.program) {
            header.scenario = self.program_names.get(&name).cloned().unwrap_or_default();
        }
        sink.header(&header).map_err(|e| match e {
            Error::Rule(v) => Error::input(
                self.layout.header.trace_name.clone(),
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
        for a in self.layout.anomalies.iter().chain(&self.missing) {
            sink.anomaly(a)?;
        }
        if !self.metrics.is_empty() {
            sink.metrics(&self.metrics)?;
        }

        merge.run(self, sink, progress)?;
        let others = self.other_locations(self.chunk_size, self.clock)?;
        if !others.is_empty() {
            sink.locations(&others)?;
        }
        sink.finish()?;
        Ok(ReadStats {
            events: self.state.events,
        })
    }
}

impl TimeOrderedStreams for Archive {
    /// The time of location `i`'s next item, reading more of it if needed; `None` once it
    /// has nothing more.
    fn next_time(&mut self, i: usize) -> Result<Option<u64>> {
        if self.locations[i].convert.ready().is_none() {
            self.state.events += self.fill(i)?;
        }
        let next = self.locations[i].convert.ready().map(|s| s.item.time());
        if next.is_none() {
            self.state.locations_done += 1;
        }
        Ok(next)
    }

    /// Checks location `i`'s next item (which is ready) and hands it to the sink.
    fn deliver(&mut self, i: usize, sink: &mut dyn EventSink) -> Result<()> {
        let loc = &mut self.locations[i];
        let reader = loc.stream.reader();
        // The seam checked the item; a broken rule is placed at the record it came from.
        loc.convert.deliver(sink, |offset, e| match e {
            Error::Rule(v) => reader.error(offset, v.rule, v.message),
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
