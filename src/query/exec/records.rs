//! The record targets (`ROUTINE CALLS`, `REQUESTS`, `COLLECTIVE INSTANCES`, `ANOMALIES`):
//! rows read from the store's record tables a chunk at a time, in the order the store keeps
//! them (a row's id is its position there), with the operations they name read alongside.
//! No index covers these tables, so every clause (scope, `IN COMM`, time window, `WHERE`) is
//! checked on each row as it is read.

use std::collections::VecDeque;

use roaring::RoaringTreemap;

use super::{CallCounters, Row};
use crate::error::Result;
use crate::export::parquet::anomaly_fields;
use crate::hash::FxHashMap;
use crate::model::{
    Anomaly, CollectiveInstance, CommId, MetricValues, OpId, OpKind, Rank, RequestLink, Time,
};
use crate::query::ast::{Field, Scope, Selection, Target, Within};
use crate::query::plan::{Engine, PlanStep, Selected};
use crate::query::usage;
use crate::results::Value;
use crate::store::scan::{Order, Projection, ScanFilter, ScanRequest};

/// A row of a record target: what the clauses test, and the values it shows (in the order of
/// its [`catalog`] columns).
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// The process of a call, a request or an anomaly (`None` for a collective instance and
    /// an anomaly of no process).
    pub(crate) rank: Option<Rank>,
    /// The processes `FOR` and `AMONG` test: the rank, or an instance's members.
    pub(crate) ranks: Vec<Rank>,
    pub(crate) comm: Option<CommId>,
    pub(crate) root: Option<Rank>,
    pub(crate) peer: Option<Rank>,
    pub(crate) tag: Option<i32>,
    /// Where the row lies in time (`None` for an anomaly with no time).
    pub(crate) span: Option<(Time, Time)>,
    pub(crate) sent: Option<u64>,
    pub(crate) received: Option<u64>,
    pub(crate) depth: Option<u16>,
    pub(crate) members: Option<u64>,
    pub(crate) skew: Option<u64>,
    /// The MPI call (`GROUP BY OPERATION`).
    pub(crate) operation: Option<String>,
    /// The routine (`GROUP BY ROUTINE`).
    pub(crate) routine: Option<String>,
    /// The anomaly's class (`GROUP BY CLASS`).
    pub(crate) class: Option<&'static str>,
    pub(crate) values: Vec<Value>,
    /// A routine call's counter values, when the statement reads them (shown after
    /// `values`).
    pub(crate) counters: CallCounters,
}

impl Record {
    fn empty() -> Record {
        Record {
            rank: None,
            ranks: Vec::new(),
            comm: None,
            root: None,
            peer: None,
            tag: None,
            span: None,
            sent: None,
            received: None,
            depth: None,
            members: None,
            skew: None,
            operation: None,
            routine: None,
            class: None,
            values: Vec::new(),
            counters: CallCounters::default(),
        }
    }

    /// A field's value, `None` when the row has no such field (then a comparison fails,
    /// except `!=`).
    pub(crate) fn field(&self, f: Field) -> Option<i128> {
        match f {
            Field::Size => match (self.sent, self.received) {
                (None, None) => None,
                (s, r) => Some(i128::from(s.unwrap_or(0).max(r.unwrap_or(0)))),
            },
            Field::Sent => self.sent.map(i128::from),
            Field::Received => self.received.map(i128::from),
            Field::Duration => self.span.map(|(s, e)| i128::from(e) - i128::from(s)),
            Field::Peer => self.peer.map(i128::from),
            Field::Tag => self.tag.map(i128::from),
            Field::Root => self.root.map(i128::from),
            Field::Comm => self.comm.map(i128::from),
            Field::Depth => self.depth.map(i128::from),
            Field::Members => self.members.map(i128::from),
            Field::Skew => self.skew.map(i128::from),
            // Counters are the scan's to read (`exec::eval`).
            Field::Sender | Field::Receiver | Field::Wait | Field::Counter(_) => None,
        }
    }

    /// Whether the row is in the selection's process scope and on every communicator of its
    /// `IN COMM` clauses.
    fn in_scope(&self, scope: Option<&RecordScope>, comms: &[CommId]) -> bool {
        let in_comm = comms.iter().all(|c| self.comm == Some(*c));
        in_comm
            && match scope {
                None => true,
                Some(RecordScope::For(set)) => {
                    self.ranks.iter().any(|r| set.binary_search(r).is_ok())
                }
                Some(RecordScope::Among(set)) => {
                    !self.ranks.is_empty()
                        && self.ranks.iter().all(|r| set.binary_search(r).is_ok())
                }
                Some(RecordScope::Between(a, b)) => {
                    self.ranks.binary_search(a).is_ok() && self.ranks.binary_search(b).is_ok()
                }
            }
    }
}

/// What a record row shows of an operation it names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Member {
    rank: Rank,
    kind: OpKind,
    comm: Option<CommId>,
    root: Option<Rank>,
    /// Destination, else source.
    peer: Option<Rank>,
    /// Send tag, else receive tag.
    tag: Option<i32>,
    start: Time,
    end: Time,
    sent: u64,
    received: u64,
}

/// The operations a record table names, by id.
pub(crate) type Members = FxHashMap<OpId, Member>;

/// One chunk of a record table whose rows name operations, read and held.
pub(crate) enum Held {
    Links(Vec<RequestLink>),
    Instances(Vec<CollectiveInstance>),
    Anomalies(Vec<Anomaly>),
}

/// Whether the rows of `target` name operations (read with them, [`RecordScan`]).
fn names_operations(target: Target) -> bool {
    !matches!(target, Target::RoutineCalls | Target::Metrics)
}

/// A scope as a record row tests it: ranks sorted.
#[derive(Debug, Clone)]
pub(crate) enum RecordScope {
    /// One of the row's processes is in the set.
    For(Vec<Rank>),
    /// All of them are (and it has one).
    Among(Vec<Rank>),
    /// Both are among its processes (collective instances only).
    Between(Rank, Rank),
}

/// The reading of a record target: the next chunk of its table, and the clauses that no
/// index answers.
pub(crate) struct RecordScan {
    pub(crate) target: Target,
    next_chunk: u32,
    chunks: u32,
    next_id: u64,
    /// For a target whose rows name operations: the table's chunks not yet handed out and
    /// the operations they name, read at the first chunk (each chunk read once).
    held: Option<(VecDeque<Held>, Members)>,
    scope: Option<RecordScope>,
    /// The communicators of the `IN COMM` clauses (all must hold).
    comms: Vec<CommId>,
}

impl RecordScan {
    /// Whether `row` passes the scope and `IN COMM`.
    pub(crate) fn keeps(&self, row: &Row) -> bool {
        match row {
            Row::Record(_, r) => r.in_scope(self.scope.as_ref(), &self.comms),
            _ => true,
        }
    }

    /// The next chunk's rows, or `None` after the last chunk.
    pub(crate) fn next_chunk(&mut self, engine: &Engine) -> Result<Option<Vec<Row>>> {
        if self.next_chunk >= self.chunks {
            return Ok(None);
        }
        engine.check_cancel()?;
        let records = if names_operations(self.target) {
            if self.held.is_none() {
                self.held = Some(engine.hold_records(self.target, self.chunks)?);
            }
            let Some((held, members)) = self.held.as_mut() else {
                return Ok(None);
            };
            match held.pop_front() {
                Some(chunk) => engine.member_records(chunk, members),
                None => Vec::new(),
            }
        } else {
            engine.read_records(self.target, self.next_chunk)?
        };
        self.next_chunk += 1;
        let first = self.next_id;
        self.next_id += records.len() as u64;
        Ok(Some(
            records
                .into_iter()
                .zip(first..)
                .map(|(mut r, id)| {
                    r.values.insert(0, id.into());
                    Row::Record(id, r)
                })
                .collect(),
        ))
    }
}

impl<'a> Engine<'a> {
    /// How many chunks the table of a record target has.
    fn record_chunks(&self, target: Target) -> u32 {
        match target {
            Target::RoutineCalls => self.trace.routine_chunk_count(),
            Target::Requests => self.trace.request_link_chunk_count(),
            Target::CollectiveInstances => self.trace.collective_chunk_count(),
            // The definitions are one small table, read whole (none without counters).
            Target::Metrics => u32::from(self.metric_count() > 0),
            _ => self.trace.anomaly_chunk_count(),
        }
    }

    /// The selection of a record target: no ids (the whole table is read), the clauses
    /// checked now so that a wrong one fails before any row is read.
    pub(crate) fn select_records(&self, sel: &Selection) -> Result<Selected> {
        let target = sel.target;
        for w in &sel.filter.within {
            match w {
                Within::Comm(_) if target == Target::RoutineCalls => {
                    return Err(usage(
                        "ROUTINE CALLS have no communicator: IN COMM selects operations, \
                         messages, requests, collective instances and anomalies",
                    ))
                }
                Within::Comm(_) => {}
                other => {
                    return Err(usage(format!(
                        "{other} selects operations or messages; {target} are read from their \
                         own table: narrow them with FOR, BETWEEN TIME and WHERE"
                    )))
                }
            }
        }
        if super::uses_wait(sel.filter.predicate.as_ref()) {
            return Err(usage(format!(
                "WAIT is the waiting time of an operation; {target} have none"
            )));
        }
        if let Some(Scope::Between(..)) = &sel.filter.scope {
            if target != Target::CollectiveInstances {
                return Err(usage(format!(
                    "BETWEEN PROCESS(a,b) selects what two processes share; {target} belong \
                     to one process each: use FOR PROCESSES(a,b)"
                )));
            }
        }
        let chunks = self.record_chunks(target);
        let summary = self.trace.summary();
        let rows = match target {
            Target::RoutineCalls => summary.routine_calls,
            Target::Requests => summary.request_links,
            Target::CollectiveInstances => summary.collective_instances,
            Target::Metrics => self.metric_count() as u64,
            _ => summary.anomalies.iter().map(|(_, n)| n).sum(),
        };
        Ok(Selected {
            messages: false,
            bursts: false,
            records: Some(target),
            ids: RoaringTreemap::new(),
            plan: vec![PlanStep {
                step: format!(
                    "read the {} table ({chunks} chunk{}), no index: scope, IN COMM, window and WHERE are checked on each row",
                    catalog_table(target),
                    if chunks == 1 { "" } else { "s" }
                ),
                estimated: rows,
                actual: None,
            }],
            waits: None,
            counters: None,
            clock: None,
        })
    }

    /// The reading of a record target's table, its scope resolved.
    pub(crate) fn record_scan(&self, sel: &Selection) -> Result<RecordScan> {
        let scope = match &sel.filter.scope {
            None => None,
            Some(Scope::For(s)) => Some(RecordScope::For(sorted(self.ranks(s)?))),
            Some(Scope::Among(s)) => Some(RecordScope::Among(sorted(self.ranks(s)?))),
            Some(scope @ Scope::Between(a, b)) => {
                // Ranks beyond the trace are refused as for any target.
                self.scope_ranks(scope)?;
                Some(RecordScope::Between(*a, *b))
            }
        };
        // Every IN COMM must hold, as on any target.
        let comms = sel
            .filter
            .within
            .iter()
            .filter_map(|w| match w {
                Within::Comm(c) => Some(self.comm(c)),
                _ => None,
            })
            .collect::<Result<Vec<CommId>>>()?;
        Ok(RecordScan {
            target: sel.target,
            next_chunk: 0,
            chunks: self.record_chunks(sel.target),
            next_id: 0,
            held: None,
            scope,
            comms,
        })
    }

    /// Every chunk of the table of `target` (a target whose rows name operations), and the
    /// operations they name, read by one scan of their ids: each operation chunk is decoded
    /// once per statement, however many record chunks name its rows (a request-link chunk
    /// names operations of every rank).
    fn hold_records(&self, target: Target, chunks: u32) -> Result<(VecDeque<Held>, Members)> {
        crate::store::scan::progress_stage("operations of the records");
        let mut held = VecDeque::with_capacity(chunks as usize);
        let mut ids = RoaringTreemap::new();
        for chunk in 0..chunks {
            self.check_cancel()?;
            let rows = match target {
                Target::Requests => {
                    let links = self.trace.request_link_chunk(chunk)?;
                    ids.extend(links.iter().flat_map(|l| [l.request_op, l.completion_op]));
                    Held::Links(links)
                }
                Target::CollectiveInstances => {
                    let instances = self.trace.collective_chunk(chunk)?;
                    ids.extend(instances.iter().flat_map(|i| i.ops.iter().copied()));
                    Held::Instances(instances)
                }
                _ => {
                    let anomalies = self.trace.anomaly_chunk(chunk)?;
                    ids.extend(anomalies.iter().flat_map(Anomaly::ops));
                    Held::Anomalies(anomalies)
                }
            };
            held.push_back(rows);
        }
        Ok((held, self.member_operations(&ids)?))
    }

    /// What the record targets show of the operations `ids`, by id: one scan of their
    /// columns, each operation chunk that holds one of them decoded once, on every core.
    fn member_operations(&self, ids: &RoaringTreemap) -> Result<Members> {
        use crate::store::OperationField::*;
        let scan = self.trace.scan(&ScanRequest {
            projection: Projection::Operations(&[
                Start, End, Kind, Comm, Dest, Source, SendTag, RecvTag, SendBytes, RecvBytes, Root,
            ]),
            filter: ScanFilter {
                ids: Some(ids),
                ..ScanFilter::default()
            },
            order: Order::Id,
        })?;
        let trace = self.trace;
        let found = scan.par_fold(
            Vec::new,
            |mut out: Vec<(OpId, Member)>, batch| {
                trace.check_cancel()?;
                // An operation scan hands out operation batches only.
                let Some(ops) = batch.operations() else {
                    return Ok(out);
                };
                let rank = batch.location().map_or(0, |l| l.0);
                for row in batch.rows() {
                    let member = Member {
                        rank,
                        kind: ops.known_kind(row)?,
                        comm: ops.comm(row),
                        root: ops.root(row),
                        peer: ops.dest(row).or(ops.source(row)),
                        tag: ops.send_tag(row).or(ops.recv_tag(row)),
                        start: ops.start(row),
                        end: ops.end(row),
                        sent: ops.send_bytes(row),
                        received: ops.recv_bytes(row),
                    };
                    out.push((ops.id(row), member));
                }
                Ok(out)
            },
            |mut a, b| {
                a.extend(b);
                a
            },
        )?;
        let members: Members = found.into_iter().collect();
        if let Some(missing) = ids.iter().find(|id| !members.contains_key(id)) {
            return Err(usage(format!(
                "operation id {missing} is not in trace {:?}",
                self.trace.name()
            )));
        }
        Ok(members)
    }

    /// One held chunk of a record table as records without their id.
    fn member_records(&self, chunk: Held, ops: &Members) -> Vec<Record> {
        let time = |t: Time| self.time_value(t);
        match chunk {
            Held::Links(links) => {
                let mut out = Vec::with_capacity(links.len());
                for l in links {
                    let (Some(r), Some(c)) = (ops.get(&l.request_op), ops.get(&l.completion_op))
                    else {
                        continue;
                    };
                    let operation = self.trace.kind_name(r.kind);
                    out.push(Record {
                        rank: Some(r.rank),
                        ranks: vec![r.rank],
                        comm: r.comm,
                        root: r.root,
                        peer: r.peer,
                        tag: r.tag,
                        span: Some((r.start, c.end.max(r.start))),
                        sent: Some(r.sent),
                        received: Some(r.received),
                        values: vec![
                            r.rank.into(),
                            operation.clone().into(),
                            l.request_op.into(),
                            time(r.start),
                            time(r.end),
                            self.trace.kind_name(c.kind).into(),
                            l.completion_op.into(),
                            time(c.start),
                            time(c.end),
                            time(c.start.saturating_sub(r.end)),
                            time(c.end.saturating_sub(r.start)),
                        ],
                        operation: Some(operation),
                        ..Record::empty()
                    });
                }
                out
            }
            Held::Instances(instances) => instances
                .into_iter()
                .map(|i| {
                    let members: Vec<&Member> = i.ops.iter().filter_map(|id| ops.get(id)).collect();
                    let first = members.iter().map(|o| o.start).min().unwrap_or(i.start);
                    let last = members.iter().map(|o| o.start).max().unwrap_or(i.start);
                    let operation = self.trace.kind_name(i.kind);
                    Record {
                        ranks: sorted(members.iter().map(|o| o.rank).collect()),
                        comm: Some(i.comm),
                        root: i.root,
                        span: Some((i.start, i.end)),
                        sent: Some(i.send_bytes),
                        received: Some(i.recv_bytes),
                        members: Some(i.ops.len() as u64),
                        skew: Some(last - first),
                        values: vec![
                            operation.clone().into(),
                            self.comm_name(i.comm).into(),
                            i.root.into(),
                            (i.ops.len() as u64).into(),
                            time(i.start),
                            time(i.end),
                            time(i.end.saturating_sub(i.start)),
                            time(last - first),
                            i.send_bytes.into(),
                            i.recv_bytes.into(),
                        ],
                        operation: Some(operation),
                        ..Record::empty()
                    }
                })
                .collect(),
            Held::Anomalies(anomalies) => anomalies
                .iter()
                .map(|a| self.anomaly_record(a, ops))
                .collect(),
        }
    }

    /// One chunk of the table of a target whose rows name no operation (routine calls,
    /// counter definitions), as records without their id.
    fn read_records(&self, target: Target, chunk: u32) -> Result<Vec<Record>> {
        let time = |t: Time| self.time_value(t);
        match target {
            Target::RoutineCalls => Ok(self
                .trace
                .routine_chunk(chunk)?
                .into_iter()
                .map(|c| {
                    let routine = self.trace.string(c.routine).unwrap_or("?").to_string();
                    Record {
                        rank: Some(c.rank),
                        ranks: vec![c.rank],
                        span: Some((c.start, c.end)),
                        depth: Some(c.depth),
                        values: vec![
                            c.rank.into(),
                            c.thread.into(),
                            routine.clone().into(),
                            u64::from(c.depth).into(),
                            time(c.start),
                            time(c.end),
                            time(c.end.saturating_sub(c.start)),
                        ],
                        routine: Some(routine),
                        ..Record::empty()
                    }
                })
                .collect()),
            Target::Metrics => Ok(self
                .trace
                .metrics()?
                .into_iter()
                .map(|m| Record {
                    values: vec![
                        m.name.into(),
                        m.description.into(),
                        m.unit.into(),
                        m.source.into(),
                        m.mode.into(),
                        match m.values {
                            MetricValues::Accumulated => "delta",
                            MetricValues::Absolute | MetricValues::Relative => "value at end",
                        }
                        .into(),
                        m.value_type.into(),
                        u64::from(m.base).into(),
                        Value::Int(i128::from(m.exponent)),
                    ],
                    ..Record::empty()
                })
                .collect()),
            // The targets whose rows name operations are read by `hold_records`.
            _ => Ok(Vec::new()),
        }
    }

    /// The number of counters the trace recorded (0 when its definitions cannot be read:
    /// reading them then reports the damage).
    fn metric_count(&self) -> usize {
        self.trace.metrics().map_or(0, |m| m.len())
    }

    /// A time or a duration as shown: null in an untimed trace, whose times are only its
    /// events' order.
    pub(crate) fn time_value(&self, t: Time) -> Value {
        if self.trace.header().untimed {
            Value::Null
        } else {
            t.into()
        }
    }

    /// An anomaly as a row: its process, call and time from its fields, else from the first
    /// operation it names.
    fn anomaly_record(&self, a: &Anomaly, ops: &Members) -> Record {
        let (class, fields) = anomaly_fields(self.trace, a);
        let number = |key: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.as_u64())
        };
        let op_id = a.ops().first().copied();
        let op = op_id.and_then(|id| ops.get(&id));
        // A pair's anomaly (clock condition) stands at its sender.
        let rank = number("rank")
            .or_else(|| number("sender"))
            .and_then(|r| Rank::try_from(r).ok())
            .or(op.map(|o| o.rank));
        let time = number("time").or(op.map(|o| o.start));
        let operation = op.map(|o| self.trace.kind_name(o.kind)).or_else(|| {
            fields
                .iter()
                .find(|(k, _)| *k == "kind")
                .and_then(|(_, v)| v.as_str().map(str::to_string))
        });
        let comm = number("comm").and_then(|c| CommId::try_from(c).ok());
        let message = self.trace.anomaly_text(a);
        Record {
            rank,
            ranks: rank.into_iter().collect(),
            comm,
            span: time.map(|t| (t, t)),
            values: vec![
                class.into(),
                rank.into(),
                operation.clone().into(),
                op_id.into(),
                time.map_or(Value::Null, |t| self.time_value(t)),
                message.into(),
            ],
            operation,
            class: Some(class),
            ..Record::empty()
        }
    }
}

/// The store's table a record target reads, as `EXPLAIN` names it.
fn catalog_table(target: Target) -> &'static str {
    match target {
        Target::RoutineCalls => "routine-call",
        Target::Requests => "request-link",
        Target::CollectiveInstances => "collective-instance",
        Target::Metrics => "counter-definition",
        _ => "anomaly",
    }
}

fn sorted(mut ranks: Vec<Rank>) -> Vec<Rank> {
    ranks.sort_unstable();
    ranks.dedup();
    ranks
}
