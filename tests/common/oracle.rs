//! The naive evaluator: what a selection must select, found by scanning a trace's rows in
//! memory with the language's documented meaning, independently of the engine's bitmaps,
//! chunk pruning and row reads. Shared by the differential oracle (`tests/query_oracle.rs`)
//! and the fuzz harness (`tests/fuzz.rs`).

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;

use mtfdb::gen::{GenConfig, Scenario};
use mtfdb::model::{
    Anomaly, CollectiveInstance, Message, OpKind, Operation, Rank, RequestLink, RoutineCall,
};
use mtfdb::query::ast::{Value as Operand, MAX_NESTING};
use mtfdb::query::{
    CmpOp, CommRef, Comparison, Expr, Field, Filter, ProcessSelector, RankRange, Scope, Selection,
    Target, Within,
};
use mtfdb::Trace;

/// A trace's rows, read once.
pub struct Model {
    /// Every operation with its id.
    pub ops: Vec<(u64, Operation)>,
    /// Every message with its id.
    pub messages: Vec<(u32, Message)>,
    /// Number of ranks.
    pub ranks: u32,
    /// The last time of the trace.
    pub span: u64,
    /// The store's record tables, each in its stored order (a row's id is its position).
    pub calls: Vec<RoutineCall>,
    pub requests: Vec<RequestLink>,
    pub instances: Vec<CollectiveInstance>,
    pub anomalies: Vec<Anomaly>,
}

/// Reads every row of `trace`.
pub fn model_of(trace: &Trace) -> Model {
    let ranks = trace.header().processes.len() as u32;
    let mut ops = Vec::new();
    for r in 0..ranks {
        ops.extend(trace.process_operations(r).unwrap());
    }
    let messages: Vec<(u32, Message)> = trace
        .messages()
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, m)| (i as u32, m))
        .collect();
    let span = trace.summary().last_time.unwrap_or(0);
    Model {
        ops,
        messages,
        ranks,
        span,
        calls: trace.routine_calls().unwrap(),
        requests: trace.request_links().unwrap(),
        instances: trace.collective_instances().unwrap(),
        anomalies: trace.anomalies().unwrap(),
    }
}

/// Makes `name` the session's trace, gives it the two longest views of [`long_view_name`]
/// (every message, every operation), and reads its rows for the naive evaluator.
pub fn prepare(session: &mut mtfdb::query::Session, name: &str) -> Model {
    session.use_trace(name).unwrap();
    for (messages, target) in [(true, "ALL MESSAGES"), (false, "OPERATIONS")] {
        session
            .run(&format!(
                "CREATE VIEW {} AS SELECT {target}",
                long_view_name(messages)
            ))
            .unwrap();
    }
    model_of(&session.database().trace(name).unwrap())
}

/// The ranks a selector names (communicator members: every rank, in the generated traces'
/// world communicator).
pub fn ranks_of(s: &ProcessSelector, n: u32) -> BTreeSet<Rank> {
    match s {
        ProcessSelector::Process(r) => [*r].into(),
        ProcessSelector::List(v) => v.iter().flat_map(|r| r.first..=r.last).collect(),
        ProcessSelector::All | ProcessSelector::InComm(_) => (0..n).collect(),
    }
}

/// True when every rank `s` names is below `n` (the engine refuses the others).
pub fn selector_valid(s: &ProcessSelector, n: u32) -> bool {
    match s {
        ProcessSelector::Process(r) => *r < n,
        ProcessSelector::List(v) => v.iter().all(|r| r.first.max(r.last) < n),
        ProcessSelector::All | ProcessSelector::InComm(_) => true,
    }
}

/// The scope with every rank taken modulo `n` (ranges kept going up), so that it names ranks
/// of a trace of `n` ranks.
pub fn fit_scope(scope: &mut Option<Scope>, n: u32) {
    let n = n.max(1);
    let fit = |s: &mut ProcessSelector| match s {
        ProcessSelector::Process(r) => *r %= n,
        ProcessSelector::List(ranges) => {
            for r in ranges {
                let (a, b) = (r.first % n, r.last % n);
                (r.first, r.last) = (a.min(b), a.max(b));
            }
        }
        ProcessSelector::All | ProcessSelector::InComm(_) => {}
    };
    match scope {
        None => {}
        Some(Scope::Between(a, b)) => {
            *a %= n;
            *b %= n;
        }
        Some(Scope::Among(s)) | Some(Scope::For(s)) => fit(s),
    }
}

/// True when the scope names only ranks of the trace.
pub fn scope_valid(scope: Option<&Scope>, n: u32) -> bool {
    match scope {
        None => true,
        Some(Scope::Between(a, b)) => *a < n && *b < n,
        Some(Scope::Among(s)) | Some(Scope::For(s)) => selector_valid(s, n),
    }
}

fn kind_matches(t: Target, k: OpKind) -> bool {
    match t {
        Target::Messages | Target::Operations | Target::CpuBursts => true,
        Target::RoutineCalls
        | Target::Requests
        | Target::CollectiveInstances
        | Target::Anomalies
        | Target::Metrics => false,
        Target::PointToPoint => k.is_send() || k.is_receive(),
        Target::Sends => k.is_send(),
        Target::Receives => k.is_receive(),
        Target::Collectives => k.is_collective(),
        Target::Operation(want) => k == want,
    }
}

/// A field on an operation, as the language documents it, exactly (128 bits hold every
/// 64-bit size and time and every 32-bit rank and tag).
pub fn op_field(o: &Operation, f: Field) -> Option<i128> {
    match f {
        Field::Size => Some(i128::from(o.send_bytes.max(o.recv_bytes))),
        Field::Tag => o.send_tag.or(o.recv_tag).map(i128::from),
        Field::Sender => if o.kind.is_send() {
            Some(o.rank)
        } else {
            o.source
        }
        .map(i128::from),
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
        // The strategies below never generate WAIT: an operation's wait comes from the wait
        // state analysis (checked on its own in tests/waits.rs and tests/query.rs), which a
        // naive row-by-row oracle has no independent way to compute.
        Field::Wait => None,
        Field::Sent => Some(i128::from(o.send_bytes)),
        Field::Received => Some(i128::from(o.recv_bytes)),
        Field::Depth | Field::Members | Field::Skew => None,
        // Generated traces record no hardware counters, and the strategies never name one
        // (tests/counters.rs checks them against otf2-print).
        Field::Counter(_) => None,
    }
}

/// A field on a message.
pub fn msg_field(m: &Message, f: Field) -> Option<i128> {
    match f {
        Field::Size | Field::Sent | Field::Received => Some(i128::from(m.bytes)),
        Field::Tag => Some(i128::from(m.tag)),
        Field::Sender => Some(i128::from(m.sender)),
        Field::Receiver | Field::Peer => Some(i128::from(m.receiver)),
        Field::Duration => Some(i128::from(m.recv_time.saturating_sub(m.send_time))),
        // Messages have no WAIT (the engine refuses it on them), nor counters.
        Field::Root
        | Field::Wait
        | Field::Depth
        | Field::Members
        | Field::Skew
        | Field::Counter(_) => None,
        Field::Comm => Some(i128::from(m.comm)),
    }
}

/// Whether `e` holds for a row whose fields `value` gives (numbers only).
pub fn holds(e: &Expr, value: &dyn Fn(Field) -> Option<i128>) -> bool {
    match e {
        Expr::And(items) => items.iter().all(|x| holds(x, value)),
        Expr::Or(items) => items.iter().any(|x| holds(x, value)),
        Expr::Not(a) => !holds(a, value),
        Expr::Compare(c) => {
            let Operand::Number(n) = c.value else {
                panic!("numbers only here")
            };
            match value(c.field) {
                Some(v) => match c.op {
                    CmpOp::Lt => v < n,
                    CmpOp::Le => v <= n,
                    CmpOp::Eq => v == n,
                    CmpOp::Ne => v != n,
                    CmpOp::Ge => v >= n,
                    CmpOp::Gt => v > n,
                },
                None => c.op == CmpOp::Ne,
            }
        }
    }
}

/// The ids a selection selects, by a full scan of `model`. Its `IN` clauses may only be
/// `IN COMM(0)` and views that hold every row of their kind.
pub fn naive(model: &Model, sel: &Selection) -> BTreeSet<u64> {
    let f = &sel.filter;
    let n = model.ranks;
    let in_comm0 = f
        .within
        .iter()
        .any(|w| matches!(w, mtfdb::query::Within::Comm(_)));
    let in_window = |start: u64, end: u64| f.time.is_none_or(|w| start <= w.end && end >= w.start);
    if sel.target == Target::Messages {
        model
            .messages
            .iter()
            .filter(|(_, m)| {
                let scope_ok = match &f.scope {
                    None => true,
                    Some(Scope::Between(a, b)) => {
                        (m.sender, m.receiver) == (*a, *b) || (m.sender, m.receiver) == (*b, *a)
                    }
                    Some(Scope::Among(s)) => {
                        let set = ranks_of(s, n);
                        set.contains(&m.sender) && set.contains(&m.receiver)
                    }
                    Some(Scope::For(s)) => {
                        let set = ranks_of(s, n);
                        set.contains(&m.sender) || set.contains(&m.receiver)
                    }
                };
                scope_ok
                    && (!in_comm0 || m.comm == 0)
                    && in_window(m.send_time, m.recv_time.max(m.send_time))
                    && f.predicate
                        .as_ref()
                        .is_none_or(|p| holds(p, &|fl| msg_field(m, fl)))
            })
            .map(|(id, _)| u64::from(*id))
            .collect()
    } else {
        model
            .ops
            .iter()
            .filter(|(_, o)| {
                let peers: Vec<Rank> = [o.dest, o.source, o.root].into_iter().flatten().collect();
                let scope_ok = match &f.scope {
                    None => true,
                    Some(Scope::Between(a, b)) => {
                        (o.rank == *a && peers.contains(b)) || (o.rank == *b && peers.contains(a))
                    }
                    Some(Scope::Among(s)) => {
                        let set = ranks_of(s, n);
                        set.contains(&o.rank)
                            && [o.dest, o.source]
                                .into_iter()
                                .flatten()
                                .all(|p| set.contains(&p))
                    }
                    Some(Scope::For(s)) => ranks_of(s, n).contains(&o.rank),
                };
                kind_matches(sel.target, o.kind)
                    && scope_ok
                    && (!in_comm0 || o.comm == Some(0))
                    && in_window(o.start, o.end)
                    && f.predicate
                        .as_ref()
                        .is_none_or(|p| holds(p, &|fl| op_field(o, fl)))
            })
            .map(|(id, _)| *id)
            .collect()
    }
}

/// The time window from `a`% to `b`% of a trace's span (in 128 bits: spans reach 2^64 - 1).
pub fn window_of(span: u64, a: u32, b: u32) -> mtfdb::query::TimeWindow {
    let at = |pct: u32| (u128::from(span.max(1)) * u128::from(pct) / 100) as u64;
    mtfdb::query::TimeWindow {
        start: at(a),
        end: at(b),
    }
}

/// The `id` column of a result, as a set; panics on a repeated id.
pub fn ids_of(result: &mtfdb::results::ResultSet) -> BTreeSet<u64> {
    let id = result.column("id").expect("an id column");
    let got: BTreeSet<u64> = result
        .rows
        .iter()
        .map(|r| match &r[id] {
            mtfdb::results::Value::Int(i) => u64::try_from(*i).expect("ids are unsigned"),
            v => panic!("{v:?}"),
        })
        .collect();
    assert_eq!(got.len(), result.len(), "no row twice");
    got
}

/// The longest view names the language allows (255 characters), one holding every message
/// and one every operation of each trace (the caller creates them): `IN VIEW` of them keeps
/// every row.
pub fn long_view_name(messages: bool) -> String {
    let stem = if messages {
        "all_messages_"
    } else {
        "all_operations_"
    };
    format!("{stem}{}", "v".repeat(255 - stem.len()))
}

// ---- random statements from the grammar ------------------------------------------------------

pub fn config_strategy() -> impl Strategy<Value = GenConfig> {
    (0usize..7, 1u32..4, 0u64..4, any::<bool>()).prop_map(|(s, iterations, seed, shuffle_ranks)| {
        let scenario = Scenario::ALL[s];
        let ranks = match scenario {
            Scenario::Bt => 9,
            Scenario::Cg => 8,
            _ => 6,
        };
        GenConfig {
            scenario,
            ranks,
            iterations,
            seed,
            shuffle_ranks,
            delays: Vec::new(),
            network: None,
        }
    })
}

pub fn target_strategy() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::Messages),
        Just(Target::PointToPoint),
        Just(Target::Sends),
        Just(Target::Receives),
        Just(Target::Collectives),
        Just(Target::Operations),
        Just(Target::Operation(OpKind::Isend)),
        Just(Target::Operation(OpKind::Allreduce)),
        Just(Target::Operation(OpKind::Bcast)),
        Just(Target::Operation(OpKind::Wait)),
    ]
}

pub fn selector_strategy() -> impl Strategy<Value = ProcessSelector> {
    prop_oneof![
        (0u32..6).prop_map(ProcessSelector::Process),
        proptest::collection::vec((0u32..6, 0u32..3), 1..3).prop_map(|v| ProcessSelector::List(
            v.into_iter()
                .map(|(a, len)| RankRange {
                    first: a,
                    last: a + len
                })
                .collect()
        )),
        Just(ProcessSelector::All),
        Just(ProcessSelector::InComm(CommRef::World)),
    ]
}

pub fn scope_strategy() -> impl Strategy<Value = Option<Scope>> {
    prop_oneof![
        Just(None),
        (0u32..6, 0u32..6).prop_map(|(a, b)| Some(Scope::Between(a, b))),
        selector_strategy().prop_map(|s| Some(Scope::Among(s))),
        selector_strategy().prop_map(|s| Some(Scope::For(s))),
    ]
}

pub fn comparison_strategy() -> impl Strategy<Value = Expr> {
    let field = prop_oneof![
        Just(Field::Size),
        Just(Field::Tag),
        Just(Field::Sender),
        Just(Field::Receiver),
        Just(Field::Duration),
        Just(Field::Peer),
        Just(Field::Root),
        Just(Field::Sent),
        Just(Field::Received),
    ];
    let op = prop_oneof![
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Eq),
        Just(CmpOp::Ne),
        Just(CmpOp::Ge),
        Just(CmpOp::Gt)
    ];
    let extreme = prop::sample::select(EXTREMES);
    (field, op, 0u32..8, 0u64..100_000, extreme, 0u8..4).prop_map(
        |(field, op, small, big, extreme, pick)| {
            // One comparison in four against a constant at or past a column's range.
            let value = match (pick, field) {
                (0, _) => extreme,
                (_, Field::Size | Field::Sent | Field::Received) => i128::from(big * 2),
                (_, Field::Duration) => i128::from(big),
                _ => i128::from(small),
            };
            Expr::Compare(Comparison {
                field,
                op,
                value: Operand::Number(value),
            })
        },
    )
}

pub fn expr_strategy() -> impl Strategy<Value = Expr> {
    let tree = comparison_strategy().prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::and(a, b)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::or(a, b)),
            inner.prop_map(Expr::negate),
        ]
    });
    // Some conditions are nested to the limit exactly, some one level past it.
    (tree, 0u8..8).prop_map(|(e, deepen)| match deepen {
        0 => nest_to(e, MAX_NESTING),
        1 => nest_to(e, MAX_NESTING + 1),
        _ => e,
    })
}

/// `e` under as many `NOT`s as bring its nesting to `depth` (or `e` if it is deeper already).
pub fn nest_to(mut e: Expr, depth: usize) -> Expr {
    while e.depth() < depth {
        e = Expr::negate(e);
    }
    e
}

/// A selection of `target` with those clauses, and its window (fractions of the trace's
/// span) going forward.
fn selection_of(
    target: Target,
    scope: Option<Scope>,
    within: Vec<Within>,
    window: Option<(u32, u32)>,
    predicate: Option<Expr>,
) -> (Selection, Option<(u32, u32)>) {
    let filter = Filter {
        scope,
        within,
        time: None,
        predicate,
        clock: Default::default(),
    };
    (
        Selection { target, filter },
        window.map(|(a, b)| (a.min(b), a.max(b))),
    )
}

/// A selection with the time window as fractions of the trace's span (scaled per trace).
pub fn selection_strategy() -> impl Strategy<Value = (Selection, Option<(u32, u32)>)> {
    (
        target_strategy(),
        scope_strategy(),
        any::<bool>(),
        proptest::option::of((0u32..100, 0u32..100)),
        proptest::option::of(expr_strategy()),
    )
        .prop_map(|(target, scope, in_world, window, predicate)| {
            let mut within = Vec::new();
            if in_world {
                within.push(Within::Comm(CommRef::Id(0)));
            }
            // The longest view names, now and then (their views hold every row).
            if window.is_some_and(|(a, _)| a % 3 == 0) {
                within.push(Within::View(long_view_name(target == Target::Messages)));
            }
            selection_of(target, scope, within, window, predicate)
        })
}

/// The constants at the edges of the columns' ranges, and past them, that every random
/// statement draws from: 0, 2^31, 2^63, 2^64 - 1, 2^64 and far beyond, and their negatives.
pub const EXTREMES: &[i128] = &[
    0,
    1,
    -1,
    1 << 31,
    (1 << 31) - 1,
    -(1 << 31),
    (1 << 32) - 1,
    1 << 63,
    (1 << 63) - 1,
    -(1 << 63),
    u64::MAX as i128,
    1 << 64,
    (1 << 64) + 1,
    -(1 << 64),
    i128::MAX,
    -i128::MAX,
];

// ---- the record targets ----------------------------------------------------------------------

/// A row of a record target as the language documents it: its processes (a call's, a
/// request's or an anomaly's rank; an instance's members), communicator, time span and fields.
struct RecordRow {
    ranks: BTreeSet<Rank>,
    comm: Option<u32>,
    span: Option<(u64, u64)>,
    fields: HashMap<Field, i128>,
}

/// The rows of a record target, by id (their position in the store's table), computed from
/// the store's tables and operations, not by the engine.
fn record_rows(model: &Model, target: Target) -> Vec<RecordRow> {
    let ops: HashMap<u64, &Operation> = model.ops.iter().map(|(id, o)| (*id, o)).collect();
    let int = |v: u64| i128::from(v);
    match target {
        Target::RoutineCalls => model
            .calls
            .iter()
            .map(|c| RecordRow {
                ranks: [c.rank].into(),
                comm: None,
                span: Some((c.start, c.end)),
                fields: [
                    (Field::Duration, int(c.end) - int(c.start)),
                    (Field::Depth, i128::from(c.depth)),
                ]
                .into(),
            })
            .collect(),
        Target::Requests => model
            .requests
            .iter()
            .map(|l| {
                let (a, b) = (ops[&l.request_op], ops[&l.completion_op]);
                let end = b.end.max(a.start);
                let mut fields: HashMap<Field, i128> = [
                    (Field::Size, int(a.send_bytes.max(a.recv_bytes))),
                    (Field::Sent, int(a.send_bytes)),
                    (Field::Received, int(a.recv_bytes)),
                    (Field::Duration, int(end) - int(a.start)),
                ]
                .into();
                let optional = [
                    (Field::Peer, a.dest.or(a.source).map(i128::from)),
                    (Field::Tag, a.send_tag.or(a.recv_tag).map(i128::from)),
                    (Field::Root, a.root.map(i128::from)),
                    (Field::Comm, a.comm.map(i128::from)),
                ];
                fields.extend(optional.into_iter().filter_map(|(f, v)| Some((f, v?))));
                RecordRow {
                    ranks: [a.rank].into(),
                    comm: a.comm,
                    span: Some((a.start, end)),
                    fields,
                }
            })
            .collect(),
        Target::CollectiveInstances => model
            .instances
            .iter()
            .map(|i| {
                let starts: Vec<u64> = i.ops.iter().map(|id| ops[id].start).collect();
                let skew = starts.iter().max().unwrap_or(&0) - starts.iter().min().unwrap_or(&0);
                let mut fields: HashMap<Field, i128> = [
                    (Field::Size, int(i.send_bytes.max(i.recv_bytes))),
                    (Field::Sent, int(i.send_bytes)),
                    (Field::Received, int(i.recv_bytes)),
                    (Field::Duration, int(i.end) - int(i.start)),
                    (Field::Members, i.ops.len() as i128),
                    (Field::Skew, int(skew)),
                    (Field::Comm, i128::from(i.comm)),
                ]
                .into();
                if let Some(r) = i.root {
                    fields.insert(Field::Root, i128::from(r));
                }
                RecordRow {
                    ranks: i.ops.iter().map(|id| ops[id].rank).collect(),
                    comm: Some(i.comm),
                    span: Some((i.start, i.end)),
                    fields,
                }
            })
            .collect(),
        _ => model
            .anomalies
            .iter()
            .map(|a| {
                let op = a.ops().first().map(|id| ops[id]);
                let (rank, time, comm) = anomaly_facts(a);
                let rank = rank.or(op.map(|o| o.rank));
                let time = time.or(op.map(|o| o.start));
                RecordRow {
                    ranks: rank.into_iter().collect(),
                    comm,
                    span: time.map(|t| (t, t)),
                    fields: time.map(|_| (Field::Duration, 0)).into_iter().collect(),
                }
            })
            .collect(),
    }
}

/// The rank, time and communicator an anomaly names itself (its operation gives the others).
fn anomaly_facts(a: &Anomaly) -> (Option<Rank>, Option<u64>, Option<u32>) {
    match a {
        Anomaly::UnmatchedSend { rank, comm, .. }
        | Anomaly::UnmatchedReceive { rank, comm, .. }
        | Anomaly::RootMismatch { rank, comm, .. }
        | Anomaly::CollectiveSizeMismatch { rank, comm, .. }
        | Anomaly::PeerDataMissing { rank, comm, .. }
        | Anomaly::ReceiveNotRecorded { rank, comm, .. } => (Some(*rank), None, Some(*comm)),
        Anomaly::IncompleteCollective { comm, .. }
        | Anomaly::BarrierWithoutOverlap { comm, .. } => (None, None, Some(*comm)),
        Anomaly::RequestNeverCompleted { rank, .. }
        | Anomaly::UnknownRequest { rank, .. }
        | Anomaly::WaitBeforeRequest { rank, .. }
        | Anomaly::UnresolvedWildcard { rank, .. }
        | Anomaly::MissingFinalize { rank }
        | Anomaly::UnclosedRoutine { rank, .. }
        | Anomaly::CallWithoutRecords { rank, .. }
        | Anomaly::CallBeforeInit { rank, .. }
        | Anomaly::CallAfterFinalize { rank, .. }
        | Anomaly::MissingRankData { rank, .. } => (Some(*rank), None, None),
        Anomaly::CrossedLeave { rank, time, .. }
        | Anomaly::LeaveWithoutEnter { rank, time, .. } => (Some(*rank), Some(*time), None),
        Anomaly::LengthMismatch { .. } | Anomaly::DatatypeMismatch { .. } => (None, None, None),
        Anomaly::ValueOverflow { rank, .. } => (*rank, None, None),
        Anomaly::SkippedRecord { rank, time, .. } => (*rank, *time, None),
        Anomaly::BrokenRule {
            rank, time, comm, ..
        } => (*rank, *time, *comm),
        Anomaly::ClockConditionViolated { sender, time, .. } => (Some(*sender), Some(*time), None),
    }
}

/// The ids a selection of a record target selects, by a full scan of its table: `FOR` keeps a
/// row with one of its processes in the set, `AMONG` one with all of them in it (and at least
/// one), `BETWEEN PROCESS(a,b)` an instance with both as members; `IN COMM(0)` a row on
/// communicator 0; a window the rows whose span overlaps it.
pub fn naive_records(model: &Model, sel: &Selection) -> BTreeSet<u64> {
    let f = &sel.filter;
    let n = model.ranks;
    let in_comm0 = f.within.iter().any(|w| matches!(w, Within::Comm(_)));
    record_rows(model, sel.target)
        .into_iter()
        .zip(0u64..)
        .filter(|(r, _)| {
            let scope_ok = match &f.scope {
                None => true,
                Some(Scope::For(s)) => !r.ranks.is_disjoint(&ranks_of(s, n)),
                Some(Scope::Among(s)) => !r.ranks.is_empty() && r.ranks.is_subset(&ranks_of(s, n)),
                Some(Scope::Between(a, b)) => r.ranks.contains(a) && r.ranks.contains(b),
            };
            let in_window = match (f.time, r.span) {
                (None, _) => true,
                (Some(w), Some((start, end))) => start <= w.end && end >= w.start,
                (Some(_), None) => false,
            };
            scope_ok
                && (!in_comm0 || r.comm == Some(0))
                && in_window
                && f.predicate
                    .as_ref()
                    .is_none_or(|p| holds(p, &|fl| r.fields.get(&fl).copied()))
        })
        .map(|(_, id)| id)
        .collect()
}

/// A comparison on a field of the record targets.
fn record_comparison_strategy() -> impl Strategy<Value = Expr> {
    let field = prop::sample::select(vec![
        Field::Size,
        Field::Sent,
        Field::Received,
        Field::Duration,
        Field::Depth,
        Field::Members,
        Field::Skew,
        Field::Root,
        Field::Peer,
        Field::Tag,
    ]);
    let op = prop::sample::select(vec![
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Ge,
        CmpOp::Gt,
    ]);
    let extreme = prop::sample::select(EXTREMES);
    (field, op, 0u32..8, 0u64..200_000, extreme, 0u8..5).prop_map(
        |(field, op, small, big, extreme, pick)| {
            let value = match (pick, field) {
                (0, _) => extreme,
                (_, Field::Size | Field::Sent | Field::Received) => i128::from(big * 2),
                (_, Field::Duration | Field::Skew) => i128::from(big),
                _ => i128::from(small),
            };
            Expr::Compare(Comparison {
                field,
                op,
                value: Operand::Number(value),
            })
        },
    )
}

/// A selection of a record target (`ROUTINE CALLS`, `REQUESTS`, `COLLECTIVE INSTANCES`,
/// `ANOMALIES`) with the clauses they take, and the window as fractions of the span.
pub fn record_selection_strategy() -> impl Strategy<Value = (Selection, Option<(u32, u32)>)> {
    let target = prop::sample::select(vec![
        Target::RoutineCalls,
        Target::Requests,
        Target::CollectiveInstances,
        Target::Anomalies,
    ]);
    let predicate = record_comparison_strategy().prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::and(a, b)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::or(a, b)),
            inner.prop_map(Expr::negate),
        ]
    });
    (
        target,
        scope_strategy(),
        any::<bool>(),
        proptest::option::of((0u32..100, 0u32..100)),
        proptest::option::of(predicate),
    )
        .prop_map(|(target, mut scope, in_world, window, predicate)| {
            // BETWEEN is two processes' business: collective instances only (the others
            // refuse it, as tests/statements/targets.test checks).
            if target != Target::CollectiveInstances {
                if let Some(Scope::Between(a, b)) = scope {
                    scope = Some(Scope::For(ProcessSelector::List(vec![
                        RankRange::single(a.min(b)),
                        RankRange::single(a.max(b)),
                    ])));
                }
            }
            let mut within = Vec::new();
            // Routine calls have no communicator (refused, checked there too).
            if in_world && target != Target::RoutineCalls {
                within.push(Within::Comm(CommRef::Id(0)));
            }
            selection_of(target, scope, within, window, predicate)
        })
}
