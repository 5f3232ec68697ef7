//! The import's clock correction (`mtfdb import --clock-correction`): an [`EventSink`] between
//! the reader and the validation seam that rewrites every time of a rank by a [`ClockMap`].
//!
//! The map needs the matched messages, which only exist once a trace is imported, so a
//! corrected import reads its source twice: first into a scratch trace whose messages the
//! map is estimated from (then dropped), then through this sink into the trace itself
//! ([`crate::Database::import_corrected`]). The map is monotone per rank, so each rank's
//! items stay in time order as the seam requires.

use crate::analysis::clock::ClockMap;
use crate::error::Result;
use crate::ingest::EventSink;
use crate::model::{Anomaly, Location, OpPosition, Operation, RoutineEvent, StrId, TraceHeader};

/// Passes every item on to `inner` with its times corrected by `map`.
pub(crate) struct ClockSink<'s, 'm> {
    inner: &'s mut dyn EventSink,
    map: &'m ClockMap,
    /// A copy of the operation being passed on (reused, not reallocated).
    scratch: Operation,
}

impl<'s, 'm> ClockSink<'s, 'm> {
    /// A sink correcting by `map` into `inner`.
    pub(crate) fn new(inner: &'s mut dyn EventSink, map: &'m ClockMap) -> ClockSink<'s, 'm> {
        ClockSink {
            inner,
            map,
            scratch: Operation::new(0, crate::model::OpKind::Send, 0, 0),
        }
    }

    /// The anomaly with the time it names (if any) corrected.
    fn anomaly_time(&self, a: &Anomaly) -> Anomaly {
        let mut a = a.clone();
        match &mut a {
            Anomaly::CrossedLeave { rank, time, .. }
            | Anomaly::LeaveWithoutEnter { rank, time, .. } => *time = self.map.time(*rank, *time),
            Anomaly::SkippedRecord {
                rank: Some(rank),
                time: Some(time),
                ..
            } => *time = self.map.time(*rank, *time),
            _ => {}
        }
        a
    }
}

impl EventSink for ClockSink<'_, '_> {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        self.inner.header(header)
    }

    fn string(&mut self, id: StrId, text: &str) -> Result<()> {
        self.inner.string(id, text)
    }

    fn operation(&mut self, op: &Operation) -> Result<()> {
        self.scratch.clone_from(op);
        self.scratch.start = self.map.time(op.rank, op.start);
        self.scratch.end = self.map.time(op.rank, op.end);
        self.inner.operation(&self.scratch)
    }

    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        let mut event = *event;
        event.time = self.map.time(event.rank, event.time);
        self.inner.routine(&event)
    }

    fn anomaly(&mut self, anomaly: &Anomaly) -> Result<()> {
        let a = self.anomaly_time(anomaly);
        self.inner.anomaly(&a)
    }

    fn anomaly_at(&mut self, anomaly: &Anomaly, at: &[OpPosition]) -> Result<()> {
        let a = self.anomaly_time(anomaly);
        self.inner.anomaly_at(&a, at)
    }

    fn locations(&mut self, locations: &[Location]) -> Result<()> {
        self.inner.locations(locations)
    }

    fn finish(&mut self) -> Result<()> {
        self.inner.finish()
    }
}
