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
//! 4. checks every item with the metamodel's rules ([`crate::ingest::validate`]) and hands it
//!    to the [`EventSink`].
//!
//! OTF2 records the receiver of a send, the sender of a receive and the root of a collective
//! as ranks within the communicator; they are translated to world ranks here.

mod anchor;
mod convert;
mod defs;
mod events;
mod layout;
mod reader;

pub use anchor::looks_like_anchor;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::ingest::validate::Validator;
use crate::ingest::EventSink;
use crate::model::StrId;

use anchor::Anchor;
use convert::{Item, LocationConverter};
use defs::Definitions;
use events::EventStream;
use layout::Layout;

/// How far an OTF2 import has come, for a progress display.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Locations (threads) in the archive.
    pub locations: u64,
    /// Locations read to their end.
    pub locations_done: u64,
    /// Event records read so far.
    pub events: u64,
    /// Event records the archive's definitions announce (0 when unknown).
    pub events_expected: u64,
}

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
    stream: EventStream,
    convert: LocationConverter,
    done: bool,
}

/// The archive being read: its locations and the merge across them.
struct Archive {
    layout: Layout,
    locations: Vec<Location>,
    events_expected: u64,
    /// The definitions' strings, for the program name of a ProgramBegin record.
    program_names: FxHashMap<u32, String>,
}

impl Archive {
    fn open(anchor: &Anchor, defs: Definitions, layout: Layout) -> Result<Archive> {
        // `Layout::of` refuses definitions without clock properties.
        #[allow(clippy::expect_used)]
        let clock = defs.clock.expect("checked by the layout");
        let mut locations = Vec::with_capacity(layout.threads.len());
        let mut events_expected = 0u64;
        for l in &defs.locations {
            let Some(&(rank, thread)) = layout.threads.get(&l.id) else {
                continue;
            };
            let evt = anchor.event_path(l.id);
            if !evt.exists() {
                if l.events == 0 {
                    continue;
                }
                return Err(Error::io(
                    &evt,
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!(
                            "the event file of location {} (rank {rank}, thread {thread}) is missing; its definition at byte {} of {} announces {} events",
                            l.id,
                            l.offset,
                            anchor.global_defs_path().display(),
                            l.events
                        ),
                    ),
                ));
            }
            events_expected = events_expected.saturating_add(l.events);
            let local = defs::read_local(&anchor.local_defs_path(l.id), anchor.def_chunk_size)?;
            let stream = EventStream::open(&evt, anchor.event_chunk_size, clock, local)?;
            locations.push(Location {
                stream,
                convert: LocationConverter::new(rank, thread),
                done: false,
            });
        }
        Ok(Archive {
            layout,
            locations,
            events_expected,
            program_names: defs.strings,
        })
    }

    /// Reads location `i` until it has an item ready or ends. Returns the events read.
    fn fill(&mut self, i: usize) -> Result<u64> {
        let ctx = &self.layout.context;
        let loc = &mut self.locations[i];
        let mut read = 0;
        while loc.convert.ready().is_none() && !loc.done {
            match loc.stream.next()? {
                Some(event) => {
                    read += 1;
                    let (time, offset) = (loc.stream.time, loc.stream.offset);
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

    /// The time of location `i`'s next item, reading more of it if needed; `None` once it
    /// has nothing more.
    fn next_time(&mut self, i: usize, events: &mut u64) -> Result<Option<u64>> {
        if self.locations[i].convert.ready().is_none() {
            *events += self.fill(i)?;
        }
        Ok(self.locations[i].convert.ready().map(|s| s.item.time()))
    }

    fn run(
        &mut self,
        sink: &mut dyn EventSink,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<ReadStats> {
        let mut state = Progress {
            locations: self.locations.len() as u64,
            events_expected: self.events_expected,
            ..Progress::default()
        };
        // Prime every location (this also finds the program name of ProgramBegin records).
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        for i in 0..self.locations.len() {
            match self.next_time(i, &mut state.events)? {
                Some(t) => heap.push(Reverse((t, i))),
                None => state.locations_done += 1,
            }
        }
        let mut header = self.layout.header.clone();
        if let Some(name) = self.locations.iter().find_map(|l| l.convert.program) {
            header.scenario = self.program_names.get(&name).cloned().unwrap_or_default();
        }
        let mut validator = Validator::new(&header).map_err(|v| {
            Error::input(
                self.layout.header.trace_name.clone(),
                0,
                0,
                v.rule,
                v.message,
                "",
            )
        })?;
        sink.header(&header)?;
        for (id, s) in self.layout.strings.iter().enumerate() {
            validator.string(id as StrId, s);
            sink.string(id as StrId, s)?;
        }

        let mut next_report = 1u64 << 16;
        while let Some(Reverse((_, i))) = heap.pop() {
            // Take this location's items while it stays the earliest.
            let bound = heap.peek().map_or(u64::MAX, |Reverse((t, _))| *t);
            loop {
                self.deliver(i, &mut validator, sink)?;
                match self.next_time(i, &mut state.events)? {
                    Some(t) if t <= bound => continue,
                    Some(t) => {
                        heap.push(Reverse((t, i)));
                        break;
                    }
                    None => {
                        state.locations_done += 1;
                        break;
                    }
                }
            }
            if state.events >= next_report {
                progress(&state);
                next_report = state.events + (1 << 16);
            }
        }
        progress(&state);
        sink.finish()?;
        Ok(ReadStats {
            events: state.events,
        })
    }

    /// Checks location `i`'s next item (which is ready) and hands it to the sink.
    fn deliver(
        &mut self,
        i: usize,
        validator: &mut Validator,
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        let loc = &mut self.locations[i];
        let mut slot = loc.convert.pop();
        let offset = slot.offset;
        let reader = loc.stream.reader();
        match &mut slot.item {
            Item::Op(op) => {
                validator
                    .check_operation(op)
                    .map_err(|v| reader.error(offset, v.rule, v.message))?;
                // The converter leaves the depth at 0: the validator's stack knows it.
                op.depth = validator.depth(op.rank, op.thread);
                sink.operation(op)?;
            }
            Item::Routine(r) => {
                validator
                    .check_routine(r)
                    .map_err(|v| reader.error(offset, v.rule, v.message))?;
                sink.routine(r)?;
            }
            Item::Anomaly(a) => sink.anomaly(a)?,
        }
        Ok(())
    }
}
