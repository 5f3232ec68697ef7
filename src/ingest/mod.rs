//! Ingest: turn a source file into a stream of MTF model items.
//!
//! Every reader (MTF text, OTF2, …) only decodes its format and hands what it read to an
//! [`EventSink`]; the import wraps the store's sink in a [`ValidatingSink`], the one seam
//! where the metamodel's structural rules ([`validate`]) are checked and what foreign formats
//! break is repaired and recorded as anomalies, the same for every source.
//! Nothing here knows the store or the query language.

pub mod dumpi;
pub mod matcher;
pub mod mtf_text;
pub mod otf2;
mod seam;
pub mod validate;

pub use seam::{Policy, ValidatingSink};

use crate::error::Result;
use crate::model::{Anomaly, Location, Operation, RoutineEvent, StrId, TraceHeader};

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
    /// The locations that are not an MPI rank's main thread (threads, accelerator streams,
    /// metric readers, non-MPI processes), with what each recorded; called once, before
    /// [`EventSink::finish`], by sources that have such locations. They replace the header's.
    fn locations(&mut self, locations: &[Location]) -> Result<()> {
        let _ = locations;
        Ok(())
    }
    /// The end of the trace.
    fn finish(&mut self) -> Result<()>;
}
