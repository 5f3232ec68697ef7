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
//! - **lenient** (OTF2, OTF v1, DUMPI, Paraver: traces as real tracers write them): no rule
//!   stops the import. Routine nesting that a tracer broke is repaired: a leave of a routine
//!   that is not the innermost one closes the routines entered after it at that time
//!   ([`Anomaly::CrossedLeave`]); a leave of a routine that is not open at all is dropped
//!   ([`Anomaly::LeaveWithoutEnter`]). Routines never left are closed by the import at their
//!   location's last time ([`Anomaly::UnclosedRoutine`]). Every other broken rule is kept as
//!   an [`Anomaly::BrokenRule`] of the rule's class, and the item repaired as [`Rule`]
//!   describes so that nothing after the seam is wrong: an operation that cannot be matched
//!   (its communicator, peer or root is not one MPI allows) loses what would match it, so
//!   the matcher counts it unmatchable instead of pairing it with a wrong partner; times
//!   are moved forward so that each location stays in time order; a barrier keeps no bytes.
//!   Only an item of an undeclared rank is dropped (it belongs to no process). The header's
//!   faults that a reader can meet (an id or member listed twice, an empty communicator, an
//!   undeclared processor or member) are repaired the same way; processes that are missing,
//!   out of range or out of order remain errors: every item names its process by rank, so a
//!   header without ranks 0..n-1 in order cannot be read.

use crate::error::{Error, Result};
use crate::ingest::validate::Field;
use crate::ingest::validate::{Validator, Violation};
use crate::ingest::EventSink;
use crate::model::{
    flags, Anomaly, Location, OpPosition, Operation, RoutineEvent, Rule, StrId, TraceHeader,
};

/// How a [`ValidatingSink`] treats what breaks the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Every broken rule is an error (MTF text, the library).
    Strict,
    /// What breaks a rule is repaired and reported as an anomaly (foreign formats).
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
    /// The rules the current operation broke (lenient policy; reused).
    broken: Vec<Violation>,
}

impl<'a> ValidatingSink<'a> {
    /// A sink that checks items with `policy` and passes them on to `inner`.
    pub fn new(inner: &'a mut dyn EventSink, policy: Policy) -> ValidatingSink<'a> {
        ValidatingSink {
            inner,
            policy,
            validator: None,
            scratch: Operation::new(0, crate::model::OpKind::Barrier, 0, 0),
            broken: Vec::new(),
        }
    }

    /// Hands `op` on with its nesting depth.
    fn deliver(&mut self, op: &Operation) -> Result<()> {
        let depth = self.validator()?.depth(op.rank, op.thread);
        if op.depth == depth {
            return self.inner.operation(op);
        }
        self.scratch.clone_from(op);
        self.scratch.depth = depth;
        self.inner.operation(&self.scratch)
    }

    /// An operation that broke the rules in `self.broken`, under the lenient policy: repaired
    /// as [`Rule`] says, handed on, and each broken rule reported about it.
    fn repair_operation(&mut self, op: &Operation) -> Result<()> {
        let broken = std::mem::take(&mut self.broken);
        let mut fixed = op.clone();
        let mut found = Vec::with_capacity(broken.len());
        for v in &broken {
            let (rule, value) = match (v.rule, v.field) {
                ("unknown rank", Field::Rank) => {
                    self.broken = broken;
                    return self.inner.anomaly(&Anomaly::BrokenRule {
                        rule: Rule::UnknownRank,
                        rank: None,
                        thread: op.thread,
                        time: Some(op.start),
                        op: None,
                        comm: op.comm,
                        value: Some(op.rank.into()),
                    });
                }
                ("end before start", _) => (Rule::EndBeforeStart, Some(op.end)),
                ("time goes backwards", _) => {
                    fixed.start = self.validator()?.last_time(op.rank, op.thread);
                    (Rule::TimeGoesBackwards, Some(op.start))
                }
                ("unknown communicator", _) => {
                    fixed.comm = None;
                    (Rule::UnknownCommunicator, op.comm.map(u64::from))
                }
                ("not a member", _) => {
                    fixed.comm = None;
                    (Rule::RankOutsideCommunicator, op.comm.map(u64::from))
                }
                ("missing communicator", _) => (Rule::MissingCommunicator, None),
                ("missing destination", _) => (Rule::MissingDestination, None),
                ("missing source", _) => (Rule::MissingSource, None),
                ("unknown rank" | "peer not in communicator", Field::Dest) => {
                    fixed.dest = None;
                    (Rule::PeerOutsideCommunicator, op.dest.map(u64::from))
                }
                ("unknown rank" | "peer not in communicator", Field::Source) => {
                    fixed.source = None;
                    (Rule::PeerOutsideCommunicator, op.source.map(u64::from))
                }
                ("unexpected root", _) => {
                    fixed.root = None;
                    (Rule::UnexpectedRoot, op.root.map(u64::from))
                }
                ("unknown rank" | "root not in communicator", Field::Root) => {
                    fixed.root = None;
                    (Rule::RootOutsideCommunicator, op.root.map(u64::from))
                }
                ("missing root", _) => (Rule::MissingRoot, None),
                ("bytes on a barrier", _) => {
                    (fixed.send_bytes, fixed.recv_bytes) = (0, 0);
                    (Rule::BytesOnBarrier, Some(op.send_bytes.max(op.recv_bytes)))
                }
                _ => return Err(rule(v.clone())),
            };
            if matches!(
                rule,
                Rule::UnknownCommunicator
                    | Rule::RankOutsideCommunicator
                    | Rule::MissingCommunicator
                    | Rule::MissingDestination
                    | Rule::MissingSource
                    | Rule::PeerOutsideCommunicator
                    | Rule::MissingRoot
                    | Rule::RootOutsideCommunicator
            ) {
                // A field the call needs is missing or was dropped: the call is kept as one
                // whose records are incomplete, which MTF text and GXL carry (`rec=0`).
                fixed.flags |= flags::WITHOUT_RECORDS;
            }
            found.push((rule, value));
        }
        self.broken = broken;
        // A start moved forward, or an end before the start, ends at the start at the earliest.
        fixed.end = fixed.end.max(fixed.start);
        self.deliver(&fixed)?;
        let at = OpPosition {
            rank: op.rank,
            thread: op.thread,
            index: self.validator()?.operations(op.rank, op.thread) - 1,
        };
        for (rule, value) in found {
            let anomaly = Anomaly::BrokenRule {
                rule,
                rank: Some(op.rank),
                thread: op.thread,
                time: Some(fixed.start),
                op: Some(0),
                comm: op.comm,
                value,
            };
            self.inner.anomaly_at(&anomaly, &[at])?;
        }
        Ok(())
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

/// Repairs the header fault `v` in `h` (lenient policy) and says what was repaired, or
/// gives `v` back as the error when the header cannot be read without it.
fn repair_header(h: &mut TraceHeader, v: Violation) -> Result<Anomaly> {
    let header_rule = |rule, comm, value| Anomaly::BrokenRule {
        rule,
        rank: None,
        thread: 0,
        time: None,
        op: None,
        comm,
        value,
    };
    Ok(match (v.rule, v.field) {
        ("duplicate declaration", Field::Processor(i)) => {
            let p = h.processors.remove(i);
            header_rule(Rule::DuplicateDeclaration, None, Some(p.id.into()))
        }
        ("duplicate declaration", Field::CommId(i)) => {
            let c = h.communicators.remove(i);
            header_rule(Rule::DuplicateDeclaration, Some(c.id), Some(c.id.into()))
        }
        ("empty communicator", Field::CommId(i)) => {
            let c = h.communicators.remove(i);
            header_rule(Rule::EmptyCommunicator, Some(c.id), None)
        }
        ("unknown processor", Field::ProcessProcessor(i)) => {
            let p = &mut h.processes[i];
            let id = p.processor.take();
            Anomaly::BrokenRule {
                rule: Rule::UnknownProcessor,
                rank: Some(p.rank),
                thread: 0,
                time: None,
                op: None,
                comm: None,
                value: id.map(u64::from),
            }
        }
        (which @ ("unknown rank" | "duplicate member"), Field::Member { comm, member }) => {
            let c = &mut h.communicators[comm];
            let rank = c.members.remove(member);
            let rule = if which == "unknown rank" {
                Rule::UnknownMember
            } else {
                Rule::DuplicateMember
            };
            header_rule(rule, Some(c.id), Some(rank.into()))
        }
        _ => return Err(rule(v)),
    })
}

/// A violation as the error a reader gets back.
fn rule(v: Violation) -> Error {
    Error::Rule(Box::new(v))
}

impl EventSink for ValidatingSink<'_> {
    fn header(&mut self, header: &TraceHeader) -> Result<()> {
        match Validator::new(header) {
            Ok(v) => {
                self.validator = Some(v);
                self.inner.header(header)
            }
            Err(v) if self.policy == Policy::Strict => Err(rule(v)),
            Err(_) => {
                let mut repaired = header.clone();
                let mut found = Vec::new();
                // Each repair removes an item or a processor reference: this ends.
                while let Err(v) = Validator::check_header(&repaired) {
                    found.push(repair_header(&mut repaired, v)?);
                }
                self.validator = Some(Validator::new(&repaired).map_err(rule)?);
                self.inner.header(&repaired)?;
                for anomaly in &found {
                    self.inner.anomaly(anomaly)?;
                }
                Ok(())
            }
        }
    }

    fn string(&mut self, id: StrId, text: &str) -> Result<()> {
        if let Some(v) = self.validator.as_mut() {
            v.string(id, text);
        }
        self.inner.string(id, text)
    }

    fn operation(&mut self, op: &Operation) -> Result<()> {
        if self.policy == Policy::Strict {
            self.validator()?.check_operation(op).map_err(rule)?;
            return self.deliver(op);
        }
        let Some(v) = self.validator.as_mut() else {
            return Err(Error::Usage(
                "a trace item came before the trace's header".to_string(),
            ));
        };
        let broken = &mut self.broken;
        broken.clear();
        v.visit_operation(op, |violation| {
            broken.push(violation);
            Ok(())
        })
        .map_err(rule)?;
        if self.broken.is_empty() {
            self.deliver(op)
        } else {
            self.repair_operation(op)
        }
    }

    fn routine(&mut self, event: &RoutineEvent) -> Result<()> {
        let policy = self.policy;
        let v = self.validator()?;
        match v.check_routine(event) {
            Ok(()) => self.inner.routine(event),
            Err(violation) if policy == Policy::Strict => Err(rule(violation)),
            Err(violation) => match violation.rule {
                "unbalanced leave" => self.repair_leave(event),
                "unknown rank" => self.inner.anomaly(&Anomaly::BrokenRule {
                    rule: Rule::UnknownRank,
                    rank: None,
                    thread: event.thread,
                    time: Some(event.time),
                    op: None,
                    comm: None,
                    value: Some(event.rank.into()),
                }),
                "time goes backwards" => {
                    let last = self.validator()?.last_time(event.rank, event.thread);
                    self.inner.anomaly(&Anomaly::BrokenRule {
                        rule: Rule::RoutineTimeGoesBackwards,
                        rank: Some(event.rank),
                        thread: event.thread,
                        time: Some(last),
                        op: None,
                        comm: None,
                        value: Some(event.time),
                    })?;
                    // At the location's last time, the event passes the time rule.
                    self.routine(&RoutineEvent {
                        time: last,
                        ..*event
                    })
                }
                _ => Err(rule(violation)),
            },
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
