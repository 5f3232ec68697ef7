//! The seam every source writes into: the metamodel's structural rules
//! ([`crate::ingest::validate`]) and the repair of what foreign formats habitually break,
//! applied once for every reader and for the library's [`crate::Database::import_events`].
//!
//! A reader only decodes. It hands its items to a [`ValidatingSink`], which checks each one
//! before passing it on. A broken rule comes back to the reader as [`Error::Rule`] carrying
//! the [`Violation`] (rule, field, message); a reader that knows where the item came from
//! (a line and column, a byte offset) places it with [`Violation`]'s field, a source without
//! positions (the library) passes it on as it is.
//!
//! Two policies ([`Policy`]):
//! - **strict** (MTF text, mtfdb's own carrier, and the library): every broken rule rejects
//!   the import;
//! - **lenient** (OTF2, OTF v1, DUMPI, Paraver: traces as real tracers write them): routine
//!   nesting that a tracer broke is repaired and recorded as an anomaly instead: a leave of a
//!   routine that is not the innermost one closes the routines entered after it at that time
//!   ([`Anomaly::CrossedLeave`]); a leave of a routine that is not open at all is dropped
//!   ([`Anomaly::LeaveWithoutEnter`]). Routines never left are closed by the import at their
//!   location's last time ([`Anomaly::UnclosedRoutine`]). Everything else is checked as
//!   strictly as in MTF text: a reader that cannot place an item maps it to an anomaly itself.

use crate::error::{Error, Result};
use crate::ingest::validate::{Validator, Violation};
use crate::ingest::EventSink;
use crate::model::{Anomaly, Location, OpPosition, Operation, RoutineEvent, StrId, TraceHeader};

/// How a [`ValidatingSink`] treats what breaks the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Every broken rule is an error (MTF text, the library).
    Strict,
    /// Broken routine nesting is repaired and reported as an anomaly (foreign formats).
    Lenient,
}

/// Checks every item against the metamodel's rules before handing it to `inner`, and gives
/// every operation its nesting depth in the routine calls (the source need not know it).
///
/// ```
/// use mtfdb::ingest::{EventSink, Policy, ValidatingSink};
/// use mtfdb::model::{OpKind, Operation, TraceHeader};
/// # struct Null;
/// # impl EventSink for Null {
/// #     fn header(&mut self, _: &TraceHeader) -> mtfdb::Result<()> { Ok(()) }
/// #     fn string(&mut self, _: u32, _: &str) -> mtfdb::Result<()> { Ok(()) }
/// #     fn operation(&mut self, _: &Operation) -> mtfdb::Result<()> { Ok(()) }
/// #     fn routine(&mut self, _: &mtfdb::model::RoutineEvent) -> mtfdb::Result<()> { Ok(()) }
/// #     fn finish(&mut self) -> mtfdb::Result<()> { Ok(()) }
/// # }
/// let mut null = Null;
/// let mut sink = ValidatingSink::new(&mut null, Policy::Strict);
/// sink.header(&TraceHeader::world(2, "C1")).unwrap();
/// // A send to rank 7 in a 2-rank trace is refused, whoever produced it.
/// let mut send = Operation::new(0, OpKind::Send, 10, 20);
/// (send.comm, send.dest, send.send_tag) = (Some(0), Some(7), Some(1));
/// let err = sink.operation(&send).unwrap_err();
/// assert!(err.to_string().starts_with("unknown rank"), "{err}");
/// ```
pub struct ValidatingSink<'a> {
    inner: &'a mut dyn EventSink,
    policy: Policy,
    validator: Option<Validator>,
    /// A copy of an operation whose depth the seam had to fill in (reused, not reallocated).
    scratch: Operation,
}

impl<'a> ValidatingSink<'a> {
    /// A sink that checks items with `policy` and passes them on to `inner`.
    pub fn new(inner: &'a mut dyn EventSink, policy: Policy) -> ValidatingSink<'a> {
        ValidatingSink {
            inner,
            policy,
            validator: None,
            scratch: Operation::new(0, crate::model::OpKind::Barrier, 0, 0),
        }
    }

    fn validator(&mut self) -> Result<&mut Validator> {
        self.validator
            .as_mut()
            .ok_or_else(|| Error::Usage("a trace item came before the trace's header".to_string()))
    }

    /// A leave that does not match the innermost routine, under the lenient policy: close
    /// what was entered after the routine left (or drop a leave of a routine not open).
    fn repair_leave(&mut self, event: &RoutineEvent) -> Result<()> {
        let open = self
            .validator()?
            .open_routines(event.rank, event.thread)
            .to_vec();
        match open.iter().rposition(|&r| r == event.routine) {
            Some(at) => {
                let innermost = *open.last().unwrap_or(&event.routine);
                self.inner.anomaly(&Anomaly::CrossedLeave {
                    rank: event.rank,
                    thread: event.thread,
                    time: event.time,
                    routine: event.routine,
                    innermost,
                })?;
                for &routine in open[at..].iter().rev() {
                    let leave = RoutineEvent { routine, ..*event };
                    self.validator()?.check_routine(&leave).map_err(rule)?;
                    self.inner.routine(&leave)?;
                }
                Ok(())
            }
            None => self.inner.anomaly(&Anomaly::LeaveWithoutEnter {
                rank: event.rank,
                thread: event.thread,
                time: event.time,
                routine: event.routine,
            }),
        }
    }
}

/// A violation as the error a reader gets back.
fn rule(v: Violation) -> Error {
    Error::Rule(Box::new(v))
}

impl EventSink for ValidatingSink<'_> {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        self.validator = Some(Validator::new(header).map_err(rule)?);
        self.inner.header(header)
    }

    fn string(&mut self, id: StrId, text: &str) -> Result<()> {
        if let Some(v) = self.validator.as_mut() {
            v.string(id, text);
        }
        self.inner.string(id, text)
    }

    fn operation(&mut self, op: &Operation) -> Result<()> {
        let v = self.validator()?;
        v.check_operation(op).map_err(rule)?;
        // Every operation leaves the seam with its nesting depth, whatever the source knew.
        let depth = v.depth(op.rank, op.thread);
        if op.depth == depth {
            return self.inner.operation(op);
        }
        self.scratch.clone_from(op);
        self.scratch.depth = depth;
        self.inner.operation(&self.scratch)
    }

    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        let policy = self.policy;
        let v = self.validator()?;
        match v.check_routine(event) {
            Ok(()) => self.inner.routine(event),
            Err(violation) if policy == Policy::Lenient && violation.rule == "unbalanced leave" => {
                self.repair_leave(event)
            }
            Err(violation) => Err(rule(violation)),
        }
    }

    fn anomaly(&mut self, anomaly: &Anomaly) -> Result<()> {
        self.inner.anomaly(anomaly)
    }

    fn anomaly_at(&mut self, anomaly: &Anomaly, at: &[OpPosition]) -> Result<()> {
        self.inner.anomaly_at(anomaly, at)
    }

    fn locations(&mut self, locations: &[Location]) -> Result<()> {
        self.inner.locations(locations)
    }

    fn metrics(&mut self, metrics: &[crate::model::Metric]) -> Result<()> {
        self.inner.metrics(metrics)
    }

    fn counters(&mut self, values: &[Option<i64>]) -> Result<()> {
        self.inner.counters(values)
    }

    fn finish(&mut self) -> Result<()> {
        if self.validator.is_none() {
            return Err(Error::Usage(
                "the trace ended before its header: nothing was declared".to_string(),
            ));
        }
        self.inner.finish()
    }
}
