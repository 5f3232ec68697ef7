//! Ingest: turn a source file into a stream of MTF model items.
//!
//! Every reader (MTF text, OTF2, …) only decodes its format and hands what it read to an
//! [`EventSink`]; the import wraps the store's sink in a [`ValidatingSink`], the one seam
//! where the metamodel's structural rules ([`validate`]) are checked and what foreign formats
//! break is repaired and recorded as anomalies, the same for every source.
//! Nothing here knows the store or the query language.

// No input reaches a panic: `unwrap` and `expect` are denied here outside tests. The calls
// that remain are allowed where they stand, each with why it cannot fail:
// - otf2/reader.rs: six conversions of an 8- or 4-byte range to an array (the range's length
//   is fixed and checked to be inside the buffer just before);
// - otf2/mod.rs: the clock properties, which `Layout::of` requires before an archive opens;
// - otf2/convert.rs: `pop` after `ready` saw a complete item at the front;
// - matcher/p2p.rs: a channel queue is removed as soon as it empties, so it is never empty;
// - matcher/collective.rs: removing the instance whose position was found just before;
// - mtf_text/parser.rs: the process permutation (each index taken once), and the validator,
//   set by `end_header` before any event is parsed (two calls);
// - mtf_text/writer.rs, mtf_text/names.rs: the MPI name of a kind other than `Other`, and
//   `chunks_exact(8)`'s 8-byte slices.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub(crate) mod anomaly_fields;
pub mod dumpi;
pub(crate) mod excerpt;
pub mod gxl;
pub mod hint;
pub mod matcher;
mod merge;
pub mod mtf_text;
pub mod otf1;
pub mod otf2;
pub mod paraver;
pub mod parquet;
mod seam;
pub mod validate;

pub use seam::{Policy, ValidatingSink};

/// How far the read of a trace of one file per location (OTF2, OTF v1, DUMPI) has come, for
/// a progress display.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Locations (threads) in the trace.
    pub locations: u64,
    /// Locations read to their end.
    pub locations_done: u64,
    /// Event records read so far.
    pub events: u64,
    /// Event records the trace's definitions announce (0 when unknown).
    pub events_expected: u64,
}

use crate::error::Result;
use crate::model::{
    Anomaly, Location, Metric, OpPosition, Operation, RoutineEvent, StrId, TraceHeader,
};

/// The receiver of a parsed trace. A source calls, in this order: [`EventSink::header`] once,
/// then [`EventSink::string`], [`EventSink::operation`] and [`EventSink::routine`] in any
/// interleaving (a string is defined before the first item that uses its id; each rank's own
/// items come in time order), then [`EventSink::finish`] once.
pub trait EventSink {
    /// The declarations: scenario, trace, processors, processes, communicators.
    fn header(&mut self, header: &TraceHeader) -> Result<()>;
    /// Defines string `id` (a datatype, routine or MPI call name); ids are dense from 0.
    fn string(&mut self, id: StrId, text: &str) -> Result<()>;
    /// One MPI operation.
    fn operation(&mut self, op: &Operation) -> Result<()>;
    /// A routine enter or leave.
    fn routine(&mut self, event: &RoutineEvent) -> Result<()>;
    /// Something wrong with the trace that the source found itself (an OTF2 region never
    /// left, say); the import records it with the anomalies matching finds.
    fn anomaly(&mut self, anomaly: &Anomaly) -> Result<()> {
        let _ = anomaly;
        Ok(())
    }
    /// Like [`EventSink::anomaly`], for an anomaly about operations the source names by their
    /// position (`at`, one per operation id of the anomaly, in [`Anomaly::map_ops`] order)
    /// rather than by id, which only the import knows: the import puts the ids in. Each
    /// operation named was passed to [`EventSink::operation`] before.
    fn anomaly_at(&mut self, anomaly: &Anomaly, at: &[OpPosition]) -> Result<()> {
        let _ = (anomaly, at);
        Ok(())
    }
    /// The locations that are not an MPI rank's main thread (threads, accelerator streams,
    /// metric readers, non-MPI processes), with what each recorded; called once, before
    /// [`EventSink::finish`], by sources that have such locations. They replace the header's.
    fn locations(&mut self, locations: &[Location]) -> Result<()> {
        let _ = locations;
        Ok(())
    }
    /// The counters the trace recorded (hardware counters), once, after the header and before
    /// the first [`EventSink::counters`]. Sources without counters never call it.
    fn metrics(&mut self, metrics: &[Metric]) -> Result<()> {
        let _ = metrics;
        Ok(())
    }
    /// The counter values of the item just given (an operation, or the leave of a routine
    /// call): one per metric of [`EventSink::metrics`], in that order, `None` where the call
    /// has no value of it (see [`crate::model::MetricValues`] for what a value is).
    fn counters(&mut self, values: &[Option<i64>]) -> Result<()> {
        let _ = values;
        Ok(())
    }
    /// The end of the trace.
    fn finish(&mut self) -> Result<()>;
}
