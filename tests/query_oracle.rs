//! A differential oracle for the query engine: random selections over random generated traces,
//! printed as query text, parsed and run by the engine (bitmap algebra, chunk pruning, row
//! reads), must select exactly the rows a naive evaluator finds by scanning the in-memory model.

mod common;

use std::collections::HashMap;
use std::sync::Mutex;

use proptest::prelude::*;

use common::oracle::{ids_of, model_of, naive, scope_valid, Model, EXTREMES};
use mtfdb::gen::{generate, GenConfig, Scenario};
use mtfdb::model::OpKind;
use mtfdb::query::ast::{Value as Operand, MAX_NESTING};
use mtfdb::query::{
    CmpOp, CommRef, Comparison, Expr, Field, Filter, ProcessSelector, RankRange, Scope, Selection,
    Session, Target, TimeWindow, Within,
};
use mtfdb::{Database, Error, Limit};

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

/// The longest view names the language allows (255 characters), one holding every message
/// and one every operation of each trace: `IN VIEW` of them keeps every row.
fn long_view_name(messages: bool) -> String {
    let stem = if messages {
        "all_messages_"
    } else {
        "all_operations_"
    };
    format!("{stem}{}", "v".repeat(255 - stem.len()))
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
        w.session.use_trace(&name).unwrap();
        for (messages, target) in [(true, "ALL MESSAGES"), (false, "OPERATIONS")] {
            w.session
                .run(&format!(
                    "CREATE VIEW {} AS SELECT {target}",
                    long_view_name(messages)
                ))
                .unwrap();
        }
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
    let extreme = prop::sample::select(EXTREMES);
    (field, op, 0u32..8, 0u64..100_000, extreme, 0u8..4).prop_map(
        |(field, op, small, big, extreme, pick)| {
            // One comparison in four against a constant at or past a column's range.
            let value = match (pick, field) {
                (0, _) => extreme,
                (_, Field::Size) => i128::from(big * 2),
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

fn expr_strategy() -> impl Strategy<Value = Expr> {
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
fn nest_to(mut e: Expr, depth: usize) -> Expr {
    while e.depth() < depth {
        e = Expr::negate(e);
    }
    e
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
            let mut within = Vec::new();
            if in_world {
                within.push(Within::Comm(CommRef::Id(0)));
            }
            // The longest view names, now and then (their views hold every row).
            if window.is_some_and(|(a, _)| a % 3 == 0) {
                within.push(Within::View(long_view_name(target == Target::Messages)));
            }
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Hundreds of random queries over random generated traces select the same rows as a scan.
    #[test]
    fn the_engine_selects_what_a_naive_scan_selects(config in config_strategy(), (mut sel, window) in selection_strategy()) {
        let mut w = world().lock().unwrap_or_else(|p| p.into_inner());
        let name = ensure_trace(&mut w, &config);
        let model = &w.models[&name];
        // Ranks beyond the trace are a user error the engine reports; keep the scopes valid.
        prop_assume!(scope_valid(sel.filter.scope.as_ref(), model.ranks));
        if let Some((a, b)) = window {
            let span = model.span.max(1);
            sel.filter.time = Some(TimeWindow { start: span * u64::from(a) / 100, end: span * u64::from(b) / 100 });
        }
        let expected = naive(model, &sel);
        let text = format!("SELECT {sel}");
        w.session.use_trace(&name).unwrap();
        let outcome = w.session.run(&text);
        let depth = sel.filter.predicate.as_ref().map_or(0, Expr::depth);
        if depth > MAX_NESTING {
            // One level past the limit: refused, by kind.
            prop_assert!(
                matches!(outcome, Err(Error::LimitExceeded { limit: Limit::NestingDepth, .. })),
                "{}: {:?}", text, outcome.map(|r| r.len())
            );
            return Ok(());
        }
        let result = outcome.map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(ids_of(&result), expected, "{}", text);
    }
}
