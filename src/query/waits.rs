//! Wait states as statements: `SELECT WAIT STATES [GROUP BY …]` totals the waits of the
//! selected operations, and `SELECT LATE SENDERS` lists the messages a receive waited for.
//! Both read the wait states stored with the trace ([`stored_wait_states_with`]: computed the
//! first time), on its stored times or, `WITH CLOCK CORRECTION c`, on the clocks `c`
//! corrects them to (then every time they compare, the selection's time in MPI included, is
//! corrected). Their clauses select the waiting operations as `SELECT OPERATIONS …` would (its
//! rank, phase, time overlap in stored times, `WHERE`).
//!
//! [`stored_wait_states_with`]: crate::analysis::waits::stored_wait_states_with

use std::collections::BTreeMap;

use roaring::RoaringTreemap;

use super::ast::{Filter, Select, Selection, Target, WaitGroup};
use super::exec::{order_keys, Row, TopK};
use super::names::phase_of;
use super::plan::{Engine, PlanStep, Selected};
use super::usage;
use crate::analysis::clock::ClockMap;
use crate::analysis::detection::{self, PhaseParams};
use crate::analysis::waits::{receive_wait, Completions, WaitKind, WaitStates};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{OpId, Operation, Rank, RoutineCall, Time};
use crate::results::{ResultSet, Value};

/// A kind's name as a column: `late_sender_ns`, `wait_at_nxn_ns`.
fn kind_column(kind: WaitKind) -> String {
    format!("{}_ns", kind.name().replace(' ', "_").to_lowercase())
}

/// `part / whole`, 0 when there is no whole.
fn share(part: Time, whole: Time) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// What one group of operations waited, by kind, and its time in MPI.
#[derive(Default)]
struct Tally {
    /// Waiting operations per kind.
    count: [u64; 6],
    /// Waiting time (ns) per kind.
    time: [Time; 6],
    /// The operations' durations (ns).
    mpi: Time,
}

impl Tally {
    fn total(&self) -> Time {
        self.time.iter().sum()
    }
}

/// A group's key; operations outside any routine or phase sort last.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Number(u64),
    Name(String),
    Missing,
}

impl Key {
    fn into_value(self) -> Value {
        match self {
            Key::Number(n) => n.into(),
            Key::Name(s) => s.into(),
            Key::Missing => Value::Null,
        }
    }
}

/// A routine call and the index of the call enclosing it.
type Nested = (RoutineCall, Option<usize>);

/// The routine calls of each location, to find the innermost call enclosing an operation.
struct Routines {
    /// Per (rank, thread): calls by start (outer before inner on ties), each with the index
    /// of the call enclosing it.
    calls: FxHashMap<(Rank, u32), Vec<Nested>>,
}

impl Routines {
    fn read(engine: &Engine<'_>) -> Result<Routines> {
        let mut by_location: FxHashMap<(Rank, u32), Vec<RoutineCall>> = FxHashMap::default();
        for c in engine.trace.routine_calls()? {
            by_location.entry((c.rank, c.thread)).or_default().push(c);
        }
        let mut calls = FxHashMap::default();
        for (location, mut list) in by_location {
            engine.check_cancel()?;
            list.sort_unstable_by_key(|c| (c.start, c.depth));
            let mut open: Vec<usize> = Vec::new();
            let mut linked: Vec<Nested> = Vec::with_capacity(list.len());
            for (i, c) in list.into_iter().enumerate() {
                while open
                    .last()
                    .is_some_and(|&j| !encloses(&linked[j].0, c.start, c.end))
                {
                    open.pop();
                }
                linked.push((c, open.last().copied()));
                open.push(i);
            }
            calls.insert(location, linked);
        }
        Ok(Routines { calls })
    }

    /// The innermost call enclosing `op`, if any.
    fn innermost(&self, op: &Operation) -> Option<&RoutineCall> {
        let calls = self.calls.get(&(op.rank, op.thread))?;
        // The last call that started by the operation's start, then out through its parents.
        let mut at = calls
            .partition_point(|(c, _)| c.start <= op.start)
            .checked_sub(1);
        while let Some(i) = at {
            let (call, parent) = &calls[i];
            if encloses(call, op.start, op.end) {
                return Some(call);
            }
            at = *parent;
        }
        None
    }
}

fn encloses(call: &RoutineCall, start: Time, end: Time) -> bool {
    call.start <= start && end <= call.end
}

/// How `WAIT STATES GROUP BY …` finds an operation's group.
enum Grouper {
    Process,
    Operation,
    Routine(Routines),
    /// Each phase's number and operations.
    Phase(Vec<(u32, RoaringTreemap)>),
}

impl Grouper {
    fn key(&self, engine: &Engine<'_>, id: OpId, op: &Operation) -> Key {
        match self {
            Grouper::Process => Key::Number(op.rank.into()),
            Grouper::Operation => Key::Name(engine.trace.kind_name(op.kind)),
            Grouper::Routine(routines) => match routines.innermost(op) {
                Some(call) => Key::Name(match engine.trace.string(call.routine) {
                    Some(name) => name.to_string(),
                    None => format!("routine{}", call.routine),
                }),
                None => Key::Missing,
            },
            Grouper::Phase(phases) => phases
                .iter()
                .find(|(_, ops)| ops.contains(id))
                .map_or(Key::Missing, |(n, _)| Key::Number((*n).into())),
        }
    }
}

impl<'a> Engine<'a> {
    /// The waiting operations: `OPERATIONS` with the statement's clauses, their ids selected
    /// and the wait states loaded.
    fn waiting_operations(
        &self,
        what: &str,
        target: Option<Target>,
        filter: &Filter,
    ) -> Result<(Selection, Selected)> {
        if let Some(t) = target {
            return Err(usage(format!(
                "{what} is computed over the operations its clauses select; it takes no FROM {t}"
            )));
        }
        let sel = Selection {
            target: Target::Operations,
            filter: filter.clone(),
        };
        let mut selected = self.select_ids(&sel)?;
        self.load_waits(&mut selected, filter.clock)?;
        Ok((sel, selected))
    }

    /// How to group by `by`, reading what that needs; `None` under `EXPLAIN`, which names the
    /// step instead.
    fn grouper(&self, by: WaitGroup, plan: &mut Vec<PlanStep>) -> Result<Option<Grouper>> {
        let params = PhaseParams::default();
        let step = |step: String| PlanStep {
            step,
            estimated: 0,
            actual: None,
        };
        if self.plan_only {
            match by {
                WaitGroup::Routine => plan.push(step(
                    "group by the innermost routine call around each operation".into(),
                )),
                WaitGroup::Phase => plan.push(step(
                    if detection::stored_phases(self.trace, &params)?.is_some() {
                        "group by phase (stored)".into()
                    } else {
                        "group by phase: phase detection runs first (nothing stored yet)".into()
                    },
                )),
                WaitGroup::Process | WaitGroup::Operation => {}
            }
            return Ok(None);
        }
        Ok(Some(match by {
            WaitGroup::Process => Grouper::Process,
            WaitGroup::Operation => Grouper::Operation,
            WaitGroup::Routine => Grouper::Routine(Routines::read(self)?),
            WaitGroup::Phase => {
                let found = detection::phases(self.trace, &params, false)?;
                let mut phases = Vec::with_capacity(found.phases.len());
                for p in &found.phases {
                    phases.push((p.number, phase_of(&found, p.number)?.1));
                }
                Grouper::Phase(phases)
            }
        }))
    }

    /// `SELECT WAIT STATES [clauses] [GROUP BY by]`: without a group, a row per wait kind
    /// (`kind`, `waits`, `total_ns`, `share` of the selection's time in MPI) and a total row;
    /// with one, a row per group with a column per kind, `total_ns` and the `share` of the
    /// group's time in MPI.
    pub(crate) fn wait_states_table(
        &self,
        by: Option<WaitGroup>,
        target: Option<Target>,
        filter: &Filter,
    ) -> Result<(ResultSet, Vec<PlanStep>)> {
        super::needs_times(self.trace, "SELECT WAIT STATES")?;
        let (sel, mut selected) = self.waiting_operations("WAIT STATES", target, filter)?;
        let grouper = match by {
            Some(by) => self.grouper(by, &mut selected.plan)?,
            None => None,
        };
        let waits = selected.waits.clone();
        let clock = selected.clock.clone();
        let mut groups: BTreeMap<Key, Tally> = BTreeMap::new();
        self.each_row(&sel, &mut selected, |row| {
            let Row::Op(id, op, _) = row else {
                return Ok(true);
            };
            let key = match &grouper {
                Some(g) => g.key(self, id, &op),
                None => Key::Missing,
            };
            let tally = groups.entry(key).or_default();
            let (start, end) = corrected(clock.as_deref(), &op);
            tally.mpi += end - start;
            if let Some(w) = waits.as_deref().and_then(|w| w.of(id)) {
                tally.count[w.kind.index()] += 1;
                tally.time[w.kind.index()] += w.time;
            }
            Ok(true)
        })?;
        if self.plan_only {
            return Ok((ResultSet::new(Vec::<String>::new()), selected.plan));
        }
        let r = match by {
            None => {
                let all = groups.remove(&Key::Missing).unwrap_or_default();
                let mut r = ResultSet::new(["kind", "waits", "total_ns", "share"]);
                for kind in WaitKind::ALL {
                    let (n, t) = (all.count[kind.index()], all.time[kind.index()]);
                    r.push(vec![
                        kind.name().into(),
                        n.into(),
                        t.into(),
                        share(t, all.mpi).into(),
                    ]);
                }
                let total = all.total();
                r.push_total(vec![
                    "total".into(),
                    all.count.iter().sum::<u64>().into(),
                    total.into(),
                    share(total, all.mpi).into(),
                ]);
                r
            }
            Some(by) => {
                let mut columns = vec![by.to_string().to_lowercase()];
                columns.extend(WaitKind::ALL.into_iter().map(kind_column));
                columns.extend(["total_ns".to_string(), "share".to_string()]);
                let mut r = ResultSet::new(columns);
                for (key, tally) in groups {
                    let mut row = vec![key.into_value()];
                    row.extend(tally.time.iter().map(|t| Value::from(*t)));
                    row.push(tally.total().into());
                    row.push(share(tally.total(), tally.mpi).into());
                    r.push(row);
                }
                r
            }
        };
        Ok((r, selected.plan))
    }

    /// `SELECT LATE SENDERS [clauses]`: a row per message whose receive (or the Wait
    /// completing it) waited for its late send, among the waiting operations the clauses
    /// select: the message (`id`, `sender`, `receiver`, `tag`, `size`), the operation that
    /// waited (`waiting_op`, `operation`) and how long it waited for this message
    /// (`wait_ns`). With `ORDER BY … LIMIT k`, only the k first rows are held.
    pub(crate) fn late_senders(
        &self,
        s: &Select,
        target: Option<Target>,
        filter: &Filter,
    ) -> Result<(ResultSet, Vec<PlanStep>)> {
        let (sel, mut selected) = self.waiting_operations("LATE SENDERS", target, filter)?;
        if let Some(waits) = selected.waits.clone() {
            selected.ids &= late_sender_ops(&waits);
            selected.plan.push(PlanStep {
                step: "AND the operations that waited for a late sender".into(),
                estimated: selected.ids.len(),
                actual: None,
            });
        }
        // The waiting operations: where they started and ended (on the statement's clocks),
        // and what they are.
        let clock = selected.clock.clone();
        let clock = clock.as_deref();
        let mut waiting: FxHashMap<OpId, (Time, Time, String)> = FxHashMap::default();
        self.each_row(&sel, &mut selected, |row| {
            if let Row::Op(id, op, _) = row {
                let (start, end) = corrected(clock, &op);
                waiting.insert(id, (start, end, self.trace.kind_name(op.kind)));
            }
            Ok(true)
        })?;
        let messages = self.trace.summary().messages;
        selected.plan.push(PlanStep {
            step: "scan messages for those received by the waiting operations".into(),
            estimated: messages,
            actual: None,
        });
        if self.plan_only {
            return Ok((ResultSet::new(Vec::<String>::new()), selected.plan));
        }
        // Each receive's waiting operation: itself (a blocking receive), or the Wait that
        // completed it (an Irecv).
        let completions = Completions::read(self.trace)?;
        let waiting_op = |recv_op: OpId| -> Option<OpId> {
            if waiting.contains_key(&recv_op) {
                return Some(recv_op);
            }
            completions.of(recv_op).filter(|w| waiting.contains_key(w))
        };
        let columns: Vec<String> = [
            "id",
            "sender",
            "receiver",
            "tag",
            "size",
            "waiting_op",
            "operation",
            "wait_ns",
        ]
        .map(String::from)
        .into();
        let limit = s.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let mut top = match limit {
            Some(k) if !s.order_by.is_empty() => Some(TopK::new(order_keys(&columns, s)?, k)),
            _ => None,
        };
        let mut r = ResultSet::new(columns);
        let mut id = 0u64;
        let mut kept = 0u64;
        for chunk in 0..self.trace.message_chunk_count() {
            self.check_cancel()?;
            for m in self.trace.message_chunk(chunk)? {
                let found = waiting_op(m.recv_op).and_then(|op| Some((op, waiting.get(&op)?)));
                if let Some((op, (start, end, name))) = found {
                    let send = clock.map_or(m.send_time, |c| c.time(m.sender, m.send_time));
                    let wait = receive_wait(*start, *end, send).unwrap_or(0);
                    if wait > 0 {
                        kept += 1;
                        let row = vec![
                            id.into(),
                            m.sender.into(),
                            m.receiver.into(),
                            m.tag.into(),
                            m.bytes.into(),
                            op.into(),
                            name.clone().into(),
                            wait.into(),
                        ];
                        match &mut top {
                            Some(top) => top.push(row, self.cancel)?,
                            None => r.push(row),
                        }
                    }
                }
                id += 1;
            }
        }
        if let Some(top) = top {
            r.rows = top.into_rows(self.cancel)?;
        }
        if let Some(last) = selected.plan.last_mut() {
            last.actual = Some(kept);
        }
        Ok((r, selected.plan))
    }
}

/// `op`'s start and end on the clocks of `clock` (as stored without one).
fn corrected(clock: Option<&ClockMap>, op: &Operation) -> (Time, Time) {
    match clock {
        Some(c) => (c.time(op.rank, op.start), c.time(op.rank, op.end)),
        None => (op.start, op.end),
    }
}

/// The operations that waited for a late sender.
fn late_sender_ops(waits: &WaitStates) -> RoaringTreemap {
    waits
        .waits
        .iter()
        .filter(|w| w.kind == WaitKind::LateSender)
        .map(|w| w.op)
        .collect()
}
