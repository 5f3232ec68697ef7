//! A differential oracle for the query engine: random selections over random generated traces,
//! printed as query text, parsed and run by the engine (bitmap algebra, chunk pruning, row
//! reads), must select exactly the rows a naive evaluator finds by scanning the in-memory model.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use proptest::prelude::*;

use mtfdb::gen::{generate, GenConfig, Scenario};
use mtfdb::model::{Message, OpKind, Operation, Rank};
use mtfdb::query::ast::Value as Operand;
use mtfdb::query::{
    CmpOp, CommRef, Comparison, Expr, Field, Filter, ProcessSelector, RankRange, Scope, Selection,
    Session, Target, TimeWindow, Within,
};
use mtfdb::{Database, Trace};

/// A trace's rows, read once, for the naive evaluator.
struct Model {
    ops: Vec<(u64, Operation)>,
    messages: Vec<(u32, Message)>,
    ranks: u32,
    span: u64,
}

struct World {
    _dir: tempfile::TempDir,
    session: Session,
    models: HashMap<String, Model>,
}

fn world() -> &'static Mutex<World> {
    static WORLD: std::sync::OnceLock<Mutex<World>> = std::sync::OnceLock::new();
    WORLD.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("db")).unwrap();
        Mutex::new(World {
            session: Session::new(db),
            _dir: dir,
            models: HashMap::new(),
        })
    })
}

fn model_of(trace: &Trace) -> Model {
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
    }
}

/// Imports (once) the trace of `config` and returns its name.
fn ensure_trace(w: &mut World, config: &GenConfig) -> String {
    let name = format!(
        "{}-{}-{}-{}-{}",
        config.scenario, config.ranks, config.iterations, config.seed, config.shuffle_ranks
    );
    if !w.models.contains_key(&name) {
        w.session
            .database()
            .import_events(&name, |sink| generate(config, sink).map(|_| ()))
            .unwrap();
        let model = model_of(&w.session.database().trace(&name).unwrap());
        w.models.insert(name.clone(), model);
    }
    name
}

fn config_strategy() -> impl Strategy<Value = GenConfig> {
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
        }
    })
}

fn target_strategy() -> impl Strategy<Value = Target> {
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

fn selector_strategy() -> impl Strategy<Value = ProcessSelector> {
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

fn scope_strategy() -> impl Strategy<Value = Option<Scope>> {
    prop_oneof![
        Just(None),
        (0u32..6, 0u32..6).prop_map(|(a, b)| Some(Scope::Between(a, b))),
        selector_strategy().prop_map(|s| Some(Scope::Among(s))),
        selector_strategy().prop_map(|s| Some(Scope::For(s))),
    ]
}

fn comparison_strategy() -> impl Strategy<Value = Expr> {
    let field = prop_oneof![
        Just(Field::Size),
        Just(Field::Tag),
        Just(Field::Sender),
        Just(Field::Receiver),
        Just(Field::Duration),
        Just(Field::Peer),
        Just(Field::Root),
    ];
    let op = prop_oneof![
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Eq),
        Just(CmpOp::Ne),
        Just(CmpOp::Ge),
        Just(CmpOp::Gt)
    ];
    (field, op, 0u32..8, 0u64..100_000).prop_map(|(field, op, small, big)| {
        let value = match field {
            Field::Size => big * 2,
            Field::Duration => big,
            _ => u64::from(small),
        };
        Expr::Compare(Comparison {
            field,
            op,
            value: Operand::Number(value),
        })
    })
}

fn expr_strategy() -> impl Strategy<Value = Expr> {
    comparison_strategy().prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Expr::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|a| Expr::Not(Box::new(a))),
        ]
    })
}

/// A selection with the time window as fractions of the trace's span (scaled per trace).
fn selection_strategy() -> impl Strategy<Value = (Selection, Option<(u32, u32)>)> {
    (
        target_strategy(),
        scope_strategy(),
        any::<bool>(),
        proptest::option::of((0u32..100, 0u32..100)),
        proptest::option::of(expr_strategy()),
    )
        .prop_map(|(target, scope, in_world, window, predicate)| {
            let within = if in_world {
                vec![Within::Comm(CommRef::Id(0))]
            } else {
                Vec::new()
            };
            let filter = Filter {
                scope,
                within,
                time: None,
                predicate,
            };
            (
                Selection { target, filter },
                window.map(|(a, b)| (a.min(b), a.max(b))),
            )
        })
}

fn ranks_of(s: &ProcessSelector, n: u32) -> BTreeSet<Rank> {
    match s {
        ProcessSelector::Process(r) => [*r].into(),
        ProcessSelector::List(v) => v.iter().flat_map(|r| r.first..=r.last).collect(),
        ProcessSelector::All | ProcessSelector::InComm(_) => (0..n).collect(),
    }
}

fn kind_matches(t: Target, k: OpKind) -> bool {
    match t {
        Target::Messages | Target::Operations => true,
        Target::PointToPoint => k.is_send() || k.is_receive(),
        Target::Sends => k.is_send(),
        Target::Receives => k.is_receive(),
        Target::Collectives => k.is_collective(),
        Target::Operation(want) => k == want,
    }
}

/// A field on an operation, as the language documents it.
fn op_field(o: &Operation, f: Field) -> Option<i64> {
    match f {
        Field::Size => Some(o.send_bytes.max(o.recv_bytes) as i64),
        Field::Tag => o.send_tag.or(o.recv_tag).map(i64::from),
        Field::Sender => if o.kind.is_send() {
            Some(o.rank)
        } else {
            o.source
        }
        .map(i64::from),
        Field::Receiver => {
            if o.kind.is_send() {
                o.dest.map(i64::from)
            } else if o.kind.is_receive() {
                Some(i64::from(o.rank))
            } else {
                None
            }
        }
        Field::Duration => Some((o.end - o.start) as i64),
        Field::Peer => o.dest.or(o.source).map(i64::from),
        Field::Root => o.root.map(i64::from),
        Field::Comm => o.comm.map(i64::from),
    }
}

fn msg_field(m: &Message, f: Field) -> Option<i64> {
    match f {
        Field::Size => Some(m.bytes as i64),
        Field::Tag => Some(i64::from(m.tag)),
        Field::Sender => Some(i64::from(m.sender)),
        Field::Receiver | Field::Peer => Some(i64::from(m.receiver)),
        Field::Duration => Some(m.recv_time.saturating_sub(m.send_time) as i64),
        Field::Root => None,
        Field::Comm => Some(i64::from(m.comm)),
    }
}

fn holds(e: &Expr, value: &dyn Fn(Field) -> Option<i64>) -> bool {
    match e {
        Expr::And(a, b) => holds(a, value) && holds(b, value),
        Expr::Or(a, b) => holds(a, value) || holds(b, value),
        Expr::Not(a) => !holds(a, value),
        Expr::Compare(c) => {
            let Operand::Number(n) = c.value else {
                panic!("numbers only here")
            };
            match value(c.field) {
                Some(v) => c.op.holds(v, n as i64),
                None => c.op == CmpOp::Ne,
            }
        }
    }
}

/// The naive evaluator: a full scan of the model.
fn naive(model: &Model, sel: &Selection) -> BTreeSet<u64> {
    let f = &sel.filter;
    let n = model.ranks;
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
                    && (f.within.is_empty() || m.comm == 0)
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
                    && (f.within.is_empty() || o.comm == Some(0))
                    && in_window(o.start, o.end)
                    && f.predicate
                        .as_ref()
                        .is_none_or(|p| holds(p, &|fl| op_field(o, fl)))
            })
            .map(|(id, _)| *id)
            .collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Hundreds of random queries over random generated traces select the same rows as a scan.
    #[test]
    fn the_engine_selects_what_a_naive_scan_selects(config in config_strategy(), (mut sel, window) in selection_strategy()) {
        let mut w = world().lock().unwrap_or_else(|p| p.into_inner());
        let name = ensure_trace(&mut w, &config);
        let model = &w.models[&name];
        // Ranks beyond the trace are a user error the engine reports; keep the scopes valid.
        let n = model.ranks;
        let valid = |s: &ProcessSelector| ranks_of(s, n).iter().all(|r| *r < n);
        let scope_valid = match &sel.filter.scope {
            None => true,
            Some(Scope::Between(a, b)) => *a < n && *b < n,
            Some(Scope::Among(s)) | Some(Scope::For(s)) => valid(s),
        };
        prop_assume!(scope_valid);
        if let Some((a, b)) = window {
            let span = model.span.max(1);
            sel.filter.time = Some(TimeWindow { start: span * u64::from(a) / 100, end: span * u64::from(b) / 100 });
        }
        let expected = naive(model, &sel);
        let text = format!("SELECT {sel}");
        w.session.use_trace(&name).unwrap();
        let result = w.session.run(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let id = result.column("id").unwrap();
        let got: BTreeSet<u64> = result
            .rows
            .iter()
            .map(|r| match &r[id] { mtfdb::query::Value::Int(i) => *i as u64, v => panic!("{v:?}") })
            .collect();
        prop_assert_eq!(got.len(), result.len(), "no row twice: {}", text);
        prop_assert_eq!(got, expected, "{}", text);
    }
}
