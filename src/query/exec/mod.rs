//! Execution: the operators over a plan's ids. The scan reads the selected rows chunk by
//! chunk and filters them by what no index answers (time overlap, peers, `WHERE`); rows then
//! stream out ([`Engine::select_into`]), fold into groups ([`aggregate`]), or are ordered and
//! cut to their `LIMIT` ([`order`]).

mod aggregate;
mod counters;
mod order;
mod records;

use std::collections::BTreeMap;
use std::sync::Arc;

use roaring::RoaringTreemap;

use super::ast::{
    Aggregate, CmpOp, Comparison, CounterName, Expr, Field, Measure, Scope, Select, SelectBody,
    Selection, Statistic, TimeWindow,
};
use super::names::describe_comm;
use super::plan::{Engine, PlanStep, Selected};
use super::usage;
use crate::analysis::waits::WaitStates;
use crate::error::{Error, Limit, Result};
use crate::hash::FxHashMap;
use crate::model::{CommId, Message, OpKind, Operation, Rank, Time};
use crate::query::catalog;
use crate::results::{ResultSet, RowSink, Value};
use crate::store::ids::chunk_and_row;
use crate::store::StoredView;

use counters::counter_of;
pub(crate) use counters::{reads_counters, CallCounters, Counters};
pub(crate) use order::{
    compare_values, order_and_limit, order_keys, orders_by_wait, resolve_order, sort_rows, TopK,
};
use records::Record;
pub(crate) use records::RecordScan;

/// Whether a condition reads `WAIT`.
pub(crate) fn uses_wait(p: Option<&Expr>) -> bool {
    let mut stack: Vec<&Expr> = p.into_iter().collect();
    while let Some(e) = stack.pop() {
        match e {
            Expr::Compare(c) if c.field == Field::Wait => return true,
            Expr::Compare(_) => {}
            Expr::And(items) | Expr::Or(items) => stack.extend(items),
            Expr::Not(a) => stack.push(a),
        }
    }
    false
}

/// The columns of a selection's rows of operations, messages or CPU bursts, as the
/// [`catalog`] describes them (without the counters and the wait that
/// [`selected_catalog_columns`] adds).
///
/// [`catalog`]: crate::query::catalog
fn row_columns(messages: bool, bursts: bool) -> &'static [catalog::Column] {
    use crate::query::catalog::{BURST_COLUMNS, MESSAGE_COLUMNS, OPERATION_COLUMNS};
    if bursts {
        BURST_COLUMNS
    } else if messages {
        MESSAGE_COLUMNS
    } else {
        OPERATION_COLUMNS
    }
}

/// The columns of what `selected` holds, with their types: its target's, then a column per
/// counter when its rows carry counters, then `wait_ns` when they carry waits.
pub(crate) fn selected_catalog_columns(selected: &Selected) -> Vec<(String, catalog::ColumnType)> {
    let base = match selected.records {
        Some(target) => catalog::columns(target),
        None => row_columns(selected.messages, selected.bursts),
    };
    let waits = selected.records.is_none() && selected.waits.is_some();
    let mut columns: Vec<(String, catalog::ColumnType)> =
        base.iter().map(|c| (c.name.to_string(), c.kind)).collect();
    if let Some(c) = &selected.counters {
        columns.extend(
            c.columns
                .iter()
                .map(|n| (n.clone(), catalog::ColumnType::Integer)),
        );
    }
    if waits && !selected.messages && !selected.bursts {
        columns.push((WAIT_COLUMN.to_string(), catalog::WAIT_COLUMN.kind));
    }
    columns
}

/// The names of the columns of what `selected` holds.
pub(crate) fn selected_columns(selected: &Selected) -> Vec<String> {
    selected_catalog_columns(selected)
        .into_iter()
        .map(|c| c.0)
        .collect()
}

/// The column of an operation's wait (ns).
pub(crate) const WAIT_COLUMN: &str = crate::query::catalog::WAIT_COLUMN.name;

/// An operation's wait in ns (0 when it did not wait).
pub(crate) fn wait_of(waits: &WaitStates, op: u64) -> u64 {
    waits.of(op).map_or(0, |w| w.time)
}

/// A row of a selection, read from the store.
pub(crate) enum Row {
    /// An operation, with its counter values when the statement reads them.
    Op(u64, Operation, CallCounters),
    Msg(u64, Message),
    /// The computation before the operation with this id.
    Burst(u64, Burst),
    /// A row of a record target, by its position in its table.
    Record(u64, Record),
}

/// A CPU burst: the time a location computed between two MPI calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Burst {
    pub(crate) rank: Rank,
    pub(crate) thread: u32,
    /// When the previous call ended.
    pub(crate) start: Time,
    /// When the next call (the row's operation) started.
    pub(crate) end: Time,
    /// That next call.
    pub(crate) before: OpKind,
}

impl<'a> Engine<'a> {
    /// Reads the selected rows chunk by chunk through a [`Scan`] and hands each row it keeps
    /// to `visit`, which returns whether it wants more: `LIMIT n` stops reading after n rows.
    /// Memory holds one chunk's rows, never the selection's. The ids are the scan's
    /// afterwards: `selected` keeps its plan, with this step added.
    pub(crate) fn each_row(
        &self,
        sel: &Selection,
        selected: &mut Selected,
        mut visit: impl FnMut(Row) -> Result<bool>,
    ) -> Result<()> {
        // A record target has no ids: its table's size is the estimate.
        let estimated = match selected.records {
            Some(_) => selected.plan.last().map_or(0, |p| p.estimated),
            None => selected.ids.len(),
        };
        let bursts = selected.bursts;
        let mut scan = self.scan(sel, selected)?;
        if bursts {
            // The rows are the computation before the operations selected so far.
            selected.plan.push(PlanStep {
                step: "each operation's CPU burst: from its location's previous call's end".into(),
                estimated,
                actual: None,
            });
        }
        if self.plan_only {
            selected.plan.push(PlanStep {
                step: "read rows; keep those overlapping the window, with peers in the set and matching WHERE".into(),
                estimated,
                actual: None,
            });
            return Ok(());
        }
        let mut stopped = false;
        while let Some(row) = scan.next_row()? {
            if !visit(row)? {
                stopped = true;
                break;
            }
        }
        selected.plan.push(PlanStep {
            step: if stopped {
                "read rows until the limit; keep those overlapping the window, with peers in the set and matching WHERE".into()
            } else {
                "read rows; keep those overlapping the window, with peers in the set and matching WHERE".into()
            },
            estimated,
            actual: Some(scan.kept),
        });
        Ok(())
    }

    /// The scan of a selection's ids (taken out of `selected`): names in the filter are
    /// resolved and its nesting checked now, before any row is read.
    pub(crate) fn scan(&self, sel: &Selection, selected: &mut Selected) -> Result<Scan<'a>> {
        let records = selected
            .records
            .map(|_| self.record_scan(sel))
            .transpose()?;
        let among: Option<Vec<Rank>> = match &sel.filter.scope {
            Some(Scope::Among(s)) if !selected.messages && records.is_none() => {
                Some(self.ranks(s)?)
            }
            _ => None,
        };
        if let Some(p) = &sel.filter.predicate {
            check_nesting(p)?;
        }
        let comm_ids = self.predicate_comms(sel.filter.predicate.as_ref())?;
        let predicate_counters = self.predicate_counters(
            sel.target,
            selected.counters.as_deref(),
            sel.filter.predicate.as_ref(),
        )?;
        Ok(Scan {
            engine: *self,
            messages: selected.messages,
            bursts: selected.bursts,
            ids: std::mem::take(&mut selected.ids).into_iter().peekable(),
            chunk: Vec::new().into_iter(),
            time: sel.filter.time,
            among,
            predicate: sel.filter.predicate.clone(),
            comm_ids,
            predicate_counters,
            counters: selected.counters.clone(),
            waits: selected.waits.clone(),
            records,
            kept: 0,
        })
    }

    /// What `pick` takes from each row [`Engine::each_row`] keeps: only that is held, never
    /// the rows.
    pub(crate) fn collect_rows<T>(
        &self,
        sel: &Selection,
        selected: &mut Selected,
        pick: impl Fn(Row) -> Option<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each_row(sel, selected, |row| {
            out.extend(pick(row));
            Ok(true)
        })?;
        Ok(out)
    }

    /// The rows of `ids`, all in one chunk.
    pub(crate) fn read_rows(&self, messages: bool, ids: &RoaringTreemap) -> Result<Vec<Row>> {
        self.check_cancel()?;
        Ok(if messages {
            self.trace
                .messages_by_id_without_ops(ids)?
                .into_iter()
                .map(|(id, m)| Row::Msg(id, m))
                .collect()
        } else {
            self.trace
                .operations(ids)?
                .into_iter()
                .map(|(id, o)| Row::Op(id, o, CallCounters::default()))
                .collect()
        })
    }

    /// The CPU bursts before the operations `rows` (all of one chunk, in row order): each
    /// from the end of its location's previous call to its start. A location's first call
    /// has none.
    fn bursts_before(&self, rows: Vec<Row>) -> Result<Vec<Row>> {
        let Some(Row::Op(first, ..)) = rows.first() else {
            return Ok(Vec::new());
        };
        let (chunk, _) = chunk_and_row(*first);
        let ends = self
            .trace
            .operation_columns(chunk, &[crate::store::OperationField::End])?;
        // The previous chunk of the location: the end of its last call.
        let previous_end = || -> Result<Option<Time>> {
            let chunks = self.trace.op_chunks();
            let Some(info) = chunks
                .binary_search_by_key(&chunk, |c| c.chunk)
                .ok()
                .and_then(|i| chunks.get(i))
            else {
                return Ok(None);
            };
            let before = self
                .trace
                .op_chunks_of(info.rank)
                .filter(|c| c.thread == info.thread && c.first_row < info.first_row && c.rows > 0)
                .max_by_key(|c| c.first_row);
            Ok(match before {
                Some(c) => {
                    let ends = self
                        .trace
                        .operation_columns(c.chunk, &[crate::store::OperationField::End])?;
                    Some(ends.end(ends.rows() - 1))
                }
                None => None,
            })
        };
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let Row::Op(id, op, _) = row else { continue };
            let (_, r) = chunk_and_row(id);
            let previous = if r > 0 {
                Some(ends.end(r - 1))
            } else {
                previous_end()?
            };
            if let Some(start) = previous {
                out.push(Row::Burst(
                    id,
                    Burst {
                        rank: op.rank,
                        thread: op.thread,
                        start,
                        end: op.start.max(start),
                        before: op.kind,
                    },
                ));
            }
        }
        Ok(out)
    }

    /// Communicator names in a predicate, resolved once.
    pub(crate) fn predicate_comms(&self, p: Option<&Expr>) -> Result<BTreeMap<String, CommId>> {
        let mut out = BTreeMap::new();
        let mut stack: Vec<&Expr> = p.into_iter().collect();
        while let Some(e) = stack.pop() {
            match e {
                Expr::Compare(Comparison {
                    value: super::ast::Value::Comm(c),
                    ..
                }) => {
                    if let std::collections::btree_map::Entry::Vacant(slot) =
                        out.entry(describe_comm(c))
                    {
                        slot.insert(self.comm(c)?);
                    }
                }
                Expr::Compare(_) => {}
                Expr::And(items) | Expr::Or(items) => stack.extend(items),
                Expr::Not(a) => stack.push(a),
            }
        }
        Ok(out)
    }

    /// A row's values, in the order of [`selected_catalog_columns`]: its target's, its
    /// counters (when the statement reads them), and the wait of an operation when `waits`
    /// are given.
    pub(crate) fn row_values(&self, row: &Row, waits: Option<&WaitStates>) -> Vec<Value> {
        let time = |t: Time| self.time_value(t);
        let mut values = match row {
            Row::Msg(id, m) => vec![
                (*id).into(),
                m.sender.into(),
                m.receiver.into(),
                self.comm_name(m.comm).into(),
                m.tag.into(),
                m.bytes.into(),
                time(m.send_time),
                time(m.recv_time),
            ],
            Row::Burst(id, b) => vec![
                (*id).into(),
                b.rank.into(),
                b.thread.into(),
                time(b.start),
                time(b.end),
                time(b.end - b.start),
                self.trace.kind_name(b.before).into(),
            ],
            Row::Op(id, o, _) => vec![
                (*id).into(),
                o.rank.into(),
                o.thread.into(),
                self.trace.kind_name(o.kind).into(),
                time(o.start),
                time(o.end),
                time(o.end - o.start),
                o.comm.map(|c| self.comm_name(c)).into(),
                o.dest.or(o.source).into(),
                o.send_tag.or(o.recv_tag).into(),
                o.send_bytes.into(),
                o.recv_bytes.into(),
                o.root.into(),
                o.datatype.and_then(|d| self.trace.string(d)).into(),
            ],
            Row::Record(_, r) => r.values.clone(),
        };
        // The counters the statement reads (empty otherwise), then the wait.
        if let Row::Op(_, _, c) | Row::Record(_, Record { counters: c, .. }) = row {
            values.extend(c.iter().map(|v| Value::from(*v)));
        }
        if let (Row::Op(id, ..), Some(w)) = (row, waits) {
            values.push(wait_of(w, *id).into());
        }
        values
    }

    pub(crate) fn comm_name(&self, id: CommId) -> String {
        self.trace
            .header()
            .communicator(id)
            .map_or_else(|| id.to_string(), |c| c.name.clone())
    }

    /// Runs a SELECT (or plans it, for EXPLAIN).
    pub fn select(&self, s: &Select, explain: bool) -> Result<ResultSet> {
        if let Some(what) = measures_time(&s.body) {
            super::needs_times(self.trace, what)?;
        }
        if !explain && matches!(s.body, SelectBody::Rows(_)) {
            let mut r = ResultSet::new(Vec::<String>::new());
            self.select_into(s, &mut r)?;
            return Ok(r);
        }
        let (result, plan) = match &s.body {
            // Only EXPLAIN comes here (rows are streamed by `select_into`): it shows the plan
            // with each step's row count, so the rows are read and counted, not kept.
            SelectBody::Rows(sel) => {
                let mut selected = self.select_ids(sel)?;
                self.each_row(sel, &mut selected, |_| Ok(true))?;
                (ResultSet::new(Vec::<String>::new()), selected.plan)
            }
            SelectBody::Aggregate {
                aggregates,
                selection,
                group_by,
            } if self.is_message_scan(aggregates, selection, group_by) => {
                let n = self.trace.summary().messages;
                let (r, actual) = if self.plan_only {
                    (ResultSet::new(Vec::<String>::new()), None)
                } else {
                    (self.message_scan_aggregate(aggregates, group_by)?, Some(n))
                };
                let plan = vec![PlanStep {
                    step: format!(
                        "scan only the needed columns of the message chunks ({}), in parallel",
                        self.trace.message_chunk_count()
                    ),
                    estimated: n,
                    actual,
                }];
                (r, plan)
            }
            SelectBody::Aggregate {
                aggregates,
                selection,
                group_by,
            } => {
                let mut selected = self.select_ids(selection)?;
                let r = self.aggregate(selection, &mut selected, aggregates, group_by)?;
                (r, selected.plan)
            }
            SelectBody::Statistic {
                statistic,
                target,
                filter,
            } => self.statistic(s, *statistic, *target, filter)?,
        };
        if explain {
            return Ok(plan_table(&plan));
        }
        order_and_limit(result, s, self.cancel)
    }

    /// Runs a `SELECT` and hands its rows to `sink` as they come: a selection of rows
    /// without `ORDER BY` is written while it is read and stops reading at its `LIMIT`; with
    /// `ORDER BY … LIMIT k` only the k first rows are held (top-k). Other statements are
    /// computed whole (an aggregate holds its groups, not its rows) and then handed over.
    pub fn select_into(&self, s: &Select, sink: &mut dyn RowSink) -> Result<()> {
        let SelectBody::Rows(sel) = &s.body else {
            return sink.result(self.select(s, false)?);
        };
        let mut selected = self.select_ids(sel)?;
        if !selected.messages && selected.records.is_none() && orders_by_wait(s) {
            self.load_waits(&mut selected, sel.filter.clock)?;
        }
        self.read_counters(sel, &mut selected)?;
        let waits = selected.waits.clone();
        let waits = waits.as_deref();
        let columns = selected_columns(&selected);
        let limit = s.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        if s.order_by.is_empty() {
            sink.columns(&columns)?;
            if limit == Some(0) {
                return Ok(());
            }
            let mut written = 0usize;
            return self.each_row(sel, &mut selected, |row| {
                sink.row(self.row_values(&row, waits))?;
                written += 1;
                Ok(limit.is_none_or(|l| written < l))
            });
        }
        let keys = order_keys(&columns, s)?;
        let mut all = ResultSet::new(columns);
        match limit {
            Some(k) => {
                let mut top = TopK::new(keys, k);
                self.each_row(sel, &mut selected, |row| {
                    top.push(self.row_values(&row, waits), self.cancel)?;
                    Ok(true)
                })?;
                all.rows = top.into_rows(self.cancel)?;
            }
            None => {
                self.each_row(sel, &mut selected, |row| {
                    all.push(self.row_values(&row, waits));
                    Ok(true)
                })?;
                all = order_and_limit(all, s, self.cancel)?;
            }
        }
        sink.result(all)
    }

    /// Evaluates a selection to the ids a view stores.
    pub fn view_ids(&self, sel: &Selection) -> Result<StoredView> {
        let mut selected = self.select_ids(sel)?;
        let mut ids = RoaringTreemap::new();
        if selected.bursts || selected.records.is_some() {
            return Err(usage(format!(
                "a view keeps operations or messages: {} cannot be stored as a view",
                sel.target
            )));
        }
        self.each_row(sel, &mut selected, |row| {
            match row {
                Row::Op(id, ..) | Row::Msg(id, _) | Row::Burst(id, _) | Row::Record(id, _) => {
                    ids.insert(id)
                }
            };
            Ok(true)
        })?;
        Ok(StoredView {
            messages: selected.messages,
            definition: format!("SELECT {sel}"),
            ids,
        })
    }
}

/// A plan as `EXPLAIN` prints it: one row per step, with the rows it expects and (under
/// `EXPLAIN ANALYZE`) those it kept.
pub(crate) fn plan_table(plan: &[PlanStep]) -> ResultSet {
    let mut r = ResultSet::new(["step", "plan", "estimated_rows", "actual_rows"]);
    for (i, p) in plan.iter().enumerate() {
        r.push(vec![
            ((i + 1) as u64).into(),
            p.step.clone().into(),
            p.estimated.into(),
            p.actual.into(),
        ]);
    }
    r
}

/// The rows of a selection that overlap its time window, have their peers in its `AMONG`
/// set and match its `WHERE`, read one chunk at a time as they are asked for (a roaring
/// container is a chunk), with a look at Ctrl-C before each chunk. Memory holds one chunk's
/// rows, never the selection's; dropping the scan stops the reading.
pub(crate) struct Scan<'a> {
    engine: Engine<'a>,
    messages: bool,
    /// Rows are the CPU bursts before the operations read.
    bursts: bool,
    ids: std::iter::Peekable<roaring::treemap::IntoIter>,
    /// The rest of the chunk being read.
    chunk: std::vec::IntoIter<Row>,
    time: Option<TimeWindow>,
    among: Option<Vec<Rank>>,
    predicate: Option<Expr>,
    comm_ids: BTreeMap<String, CommId>,
    /// The counters the condition names, by their index among the trace's.
    predicate_counters: FxHashMap<CounterName, usize>,
    /// The counters the rows carry, when the statement reads them: read with each chunk.
    counters: Option<Arc<Counters>>,
    /// The wait states, when the statement reads `WAIT`.
    waits: Option<Arc<WaitStates>>,
    /// The table read instead of the ids, for a record target.
    records: Option<RecordScan>,
    /// Rows kept so far.
    pub(crate) kept: u64,
}

impl Scan<'_> {
    /// The next row kept, or `None` after the last.
    pub(crate) fn next_row(&mut self) -> Result<Option<Row>> {
        loop {
            while let Some(row) = self.chunk.next() {
                if self.keeps(&row) {
                    self.kept += 1;
                    return Ok(Some(row));
                }
            }
            if let Some(records) = &mut self.records {
                match records.next_chunk(&self.engine)? {
                    Some(mut rows) => {
                        if let Some(c) = &self.counters {
                            c.attach(&self.engine, &mut rows)?;
                        }
                        self.chunk = rows.into_iter();
                        continue;
                    }
                    None => return Ok(None),
                }
            }
            let Some(first) = self.ids.next() else {
                return Ok(None);
            };
            let mut one_chunk = RoaringTreemap::new();
            one_chunk.insert(first);
            while let Some(id) = self
                .ids
                .next_if(|next| chunk_and_row(*next).0 == chunk_and_row(first).0)
            {
                one_chunk.insert(id);
            }
            let mut rows = self.engine.read_rows(self.messages, &one_chunk)?;
            self.chunk = if self.bursts {
                self.engine.bursts_before(rows)?.into_iter()
            } else {
                if let Some(c) = &self.counters {
                    c.attach(&self.engine, &mut rows)?;
                }
                rows.into_iter()
            };
        }
    }

    /// The next row kept, as its values in the order of [`selected_catalog_columns`].
    pub(crate) fn next_values(&mut self) -> Result<Option<Vec<Value>>> {
        Ok(self
            .next_row()?
            .map(|row| self.engine.row_values(&row, self.waits.as_deref())))
    }

    fn keeps(&self, row: &Row) -> bool {
        self.records.as_ref().is_none_or(|r| r.keeps(row))
            && self.time.is_none_or(|w| overlaps(row, w))
            && self.among.as_ref().is_none_or(|set| peers_within(row, set))
            && self.predicate.as_ref().is_none_or(|p| {
                let known = Known {
                    comms: &self.comm_ids,
                    counters: &self.predicate_counters,
                    waits: self.waits.as_deref(),
                };
                eval(p, row, &known) == Some(true)
            })
    }
}

/// Refuses a condition nested deeper than the language allows (a tree a library caller built
/// can be any depth; the parser stops at the same limit).
fn check_nesting(p: &Expr) -> Result<()> {
    if p.depth() > super::ast::MAX_NESTING {
        return Err(Error::limit(
            Limit::NestingDepth,
            format!(
                "a condition nests at most {} levels of parentheses and NOT; this one {}",
                super::ast::MAX_NESTING,
                p.depth()
            ),
        ));
    }
    Ok(())
}

fn overlaps(row: &Row, w: TimeWindow) -> bool {
    let (start, end) = match row {
        Row::Op(_, o, _) => (o.start, o.end),
        Row::Msg(_, m) => (m.send_time, m.recv_time.max(m.send_time)),
        Row::Burst(_, b) => (b.start, b.end),
        Row::Record(_, r) => match r.span {
            Some(span) => span,
            None => return false,
        },
    };
    start <= w.end && end >= w.start
}

/// For AMONG on operations: a point-to-point operation's peers must be in the set too.
fn peers_within(row: &Row, set: &[Rank]) -> bool {
    match row {
        Row::Op(_, o, _) => [o.dest, o.source]
            .iter()
            .flatten()
            .all(|p| set.binary_search(p).is_ok()),
        Row::Msg(..) | Row::Burst(..) | Row::Record(..) => true,
    }
}

/// A row's value of measure `m`. A counter, which may be negative or missing, is folded by
/// [`aggregate`] from the row's counters (see `aggregate.rs`), and the parser takes it
/// nowhere else, so a counter measures 0 here.
pub(crate) fn measure(row: &Row, m: Measure) -> u64 {
    match (row, m) {
        (_, Measure::Counter(_)) => 0,
        (Row::Record(_, r), m) => {
            let f = match m {
                Measure::Size => Field::Size,
                Measure::Duration => Field::Duration,
                Measure::Sent => Field::Sent,
                Measure::Received | Measure::Counter(_) => Field::Received,
            };
            r.field(f).and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
        }
        (Row::Op(_, o, _), Measure::Size) => o.send_bytes.max(o.recv_bytes),
        (Row::Op(_, o, _), Measure::Sent) => o.send_bytes,
        (Row::Op(_, o, _), Measure::Received) => o.recv_bytes,
        (Row::Msg(_, msg), Measure::Sent | Measure::Received) => msg.bytes,
        (Row::Burst(..), Measure::Sent | Measure::Received) => 0,
        (Row::Op(_, o, _), Measure::Duration) => o.end - o.start,
        (Row::Msg(_, msg), Measure::Size) => msg.bytes,
        (Row::Msg(_, msg), Measure::Duration) => msg.recv_time.saturating_sub(msg.send_time),
        (Row::Burst(..), Measure::Size) => 0,
        (Row::Burst(_, b), Measure::Duration) => b.end - b.start,
    }
}

/// A field's value on a row, exactly (sizes and times are 64-bit unsigned, tags and ranks 32
/// bits: all fit 128 bits with their sign); `None` when the row has no such field (then a
/// comparison fails, except `!=`, which holds). `WAIT` is read from `waits`, which the
/// planner loads for any statement that reads it.
fn field(row: &Row, f: Field, waits: Option<&WaitStates>) -> Option<i128> {
    match row {
        Row::Op(id, o, _) => match f {
            Field::Size => Some(i128::from(o.send_bytes.max(o.recv_bytes))),
            Field::Tag => o.send_tag.or(o.recv_tag).map(i128::from),
            Field::Sender => {
                if o.kind.is_send() {
                    Some(i128::from(o.rank))
                } else {
                    o.source.map(i128::from)
                }
            }
            Field::Receiver => {
                if o.kind.is_send() {
                    o.dest.map(i128::from)
                } else if o.kind.is_receive() {
                    Some(i128::from(o.rank))
                } else {
                    None
                }
            }
            Field::Duration => Some(i128::from(o.end) - i128::from(o.start)),
            Field::Peer => o.dest.or(o.source).map(i128::from),
            Field::Root => o.root.map(i128::from),
            Field::Comm => o.comm.map(i128::from),
            Field::Wait => waits.map(|w| i128::from(wait_of(w, *id))),
            Field::Sent => Some(i128::from(o.send_bytes)),
            Field::Received => Some(i128::from(o.recv_bytes)),
            Field::Depth | Field::Members | Field::Skew | Field::Counter(_) => None,
        },
        Row::Msg(_, m) => match f {
            Field::Tag => Some(i128::from(m.tag)),
            Field::Sender => Some(i128::from(m.sender)),
            Field::Receiver | Field::Peer => Some(i128::from(m.receiver)),
            Field::Duration => Some(i128::from(m.recv_time.saturating_sub(m.send_time))),
            Field::Size | Field::Sent | Field::Received => Some(i128::from(m.bytes)),
            Field::Root
            | Field::Wait
            | Field::Depth
            | Field::Members
            | Field::Skew
            | Field::Counter(_) => None,
            Field::Comm => Some(i128::from(m.comm)),
        },
        Row::Record(_, r) => r.field(f),
        Row::Burst(_, b) => match f {
            Field::Duration => Some(i128::from(b.end) - i128::from(b.start)),
            _ => None,
        },
    }
}

/// What a condition's names stand for, resolved before the rows are read.
struct Known<'k> {
    comms: &'k BTreeMap<String, CommId>,
    /// Counters by their index among the trace's.
    counters: &'k FxHashMap<CounterName, usize>,
    waits: Option<&'k WaitStates>,
}

/// Whether `e` holds on `row`: `Some(true)` or `Some(false)`, or `None` (unknown) where it
/// compares a counter the call has no sample of, which is SQL's NULL: a comparison with it is
/// unknown, `NOT` of unknown is unknown, `AND` is false if any term is false (else unknown if
/// any is), `OR` true if any term is true (else unknown if any is). Only a `true` keeps the
/// row. The other fields keep their two values (a field a row lacks compares false, `!=`
/// true). Chains are flat lists and nesting is bounded ([`check_nesting`]), so the recursion
/// is shallow.
fn eval(e: &Expr, row: &Row, known: &Known) -> Option<bool> {
    match e {
        Expr::And(items) => {
            let mut unknown = false;
            for x in items {
                match eval(x, row, known) {
                    Some(false) => return Some(false),
                    None => unknown = true,
                    Some(true) => {}
                }
            }
            (!unknown).then_some(true)
        }
        Expr::Or(items) => {
            let mut unknown = false;
            for x in items {
                match eval(x, row, known) {
                    Some(true) => return Some(true),
                    None => unknown = true,
                    Some(false) => {}
                }
            }
            (!unknown).then_some(false)
        }
        Expr::Not(a) => eval(a, row, known).map(|b| !b),
        Expr::Compare(c) => {
            let right = match &c.value {
                super::ast::Value::Number(n) => *n,
                super::ast::Value::Comm(cr) => match known.comms.get(&describe_comm(cr)) {
                    Some(id) => i128::from(*id),
                    None => return Some(c.op == CmpOp::Ne),
                },
            };
            if let Field::Counter(name) = c.field {
                let value = known
                    .counters
                    .get(&name)
                    .and_then(|&i| counter_of(row, i))?;
                return Some(c.op.holds(i128::from(value), right));
            }
            Some(match field(row, c.field, known.waits) {
                Some(left) => c.op.holds(left, right),
                None => c.op == CmpOp::Ne,
            })
        }
    }
}

/// What of a statement's body sums, bins or compares durations (which an untimed trace does
/// not have: its times are only its events' order), if anything.
fn measures_time(body: &SelectBody) -> Option<&'static str> {
    let duration = |m: &Measure| *m == Measure::Duration;
    match body {
        SelectBody::Rows(_) => None,
        SelectBody::Aggregate { aggregates, .. } => aggregates
            .iter()
            .any(|a| match a {
                Aggregate::Count => false,
                Aggregate::Sum(m) | Aggregate::Avg(m) | Aggregate::Min(m) | Aggregate::Max(m) => {
                    duration(m)
                }
            })
            .then_some("an aggregate of DURATION"),
        SelectBody::Statistic { statistic, .. } => match statistic {
            Statistic::Histogram { of, .. } if duration(of) => Some("HISTOGRAM OF DURATION"),
            Statistic::MpiTime => Some("MPI TIME"),
            _ => None,
        },
    }
}

/// Whether a `WHERE` condition compares a duration (`DURATION`, `SKEW`).
pub(crate) fn compares_time(e: &Expr) -> bool {
    match e {
        Expr::Compare(c) => matches!(c.field, Field::Duration | Field::Skew),
        Expr::And(items) | Expr::Or(items) => items.iter().any(compares_time),
        Expr::Not(a) => compares_time(a),
    }
}
