//! A differential oracle for the query engine: random selections over random generated traces,
//! printed as query text, parsed and run by the engine (bitmap algebra, chunk pruning, row
//! reads), must select exactly the rows a naive evaluator finds by scanning the in-memory model.

mod common;

use std::collections::HashMap;
use std::sync::Mutex;

use proptest::prelude::*;

use common::oracle::{
    config_strategy, ids_of, naive, naive_records, prepare, record_selection_strategy, scope_valid,
    selection_strategy, window_of, Model,
};
use mtfdb::gen::{generate, GenConfig};
use mtfdb::query::ast::MAX_NESTING;
use mtfdb::query::{Expr, Session};
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
        let model = prepare(&mut w.session, &name);
        w.models.insert(name.clone(), model);
    }
    name
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
            sel.filter.time = Some(window_of(model.span, a, b));
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Random selections of the record targets (ROUTINE CALLS, REQUESTS, COLLECTIVE
    /// INSTANCES, ANOMALIES) with scopes, IN COMM, windows and conditions on their fields
    /// select exactly the rows a scan of the store's tables finds, by id (a row's position in
    /// its table); their row count is the table's when nothing narrows them.
    #[test]
    fn record_targets_select_what_a_scan_of_their_tables_selects(
        config in config_strategy(),
        (mut sel, window) in record_selection_strategy(),
    ) {
        let mut w = world().lock().unwrap_or_else(|p| p.into_inner());
        let name = ensure_trace(&mut w, &config);
        let model = &w.models[&name];
        prop_assume!(scope_valid(sel.filter.scope.as_ref(), model.ranks));
        prop_assume!(sel.filter.predicate.as_ref().map_or(0, Expr::depth) <= MAX_NESTING);
        if let Some((a, b)) = window {
            sel.filter.time = Some(window_of(model.span, a, b));
        }
        let expected = naive_records(model, &sel);
        let text = format!("SELECT {sel}");
        w.session.use_trace(&name).unwrap();
        let result = w
            .session
            .run(&text)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(ids_of(&result), expected, "{}", text);
    }
}

/// A column `ORDER BY` can name, with the value the naive side computes for it.
fn order_value(model: &Model, messages: bool, id: u64, column: &str) -> u64 {
    if messages {
        let m = &model
            .messages
            .iter()
            .find(|(i, _)| u64::from(*i) == id)
            .expect("a selected message")
            .1;
        match column {
            "size" => m.bytes,
            "sender" => u64::from(m.sender),
            _ => m.send_time,
        }
    } else {
        let o = &model
            .ops
            .iter()
            .find(|(i, _)| *i == id)
            .expect("a selected operation")
            .1;
        match column {
            "duration_ns" => o.end - o.start,
            "bytes_sent" => o.send_bytes,
            "rank" => u64::from(o.rank),
            _ => o.start,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// `LIMIT k` and `ORDER BY … LIMIT k` (read until the limit, top-k) give exactly the rows,
    /// in the order, that a full stable sort of the naive scan's rows gives cut to k: ties
    /// keep id order.
    #[test]
    fn limit_and_top_k_equal_a_full_sort(
        config in config_strategy(),
        (sel, _) in selection_strategy(),
        key in 0usize..4,
        descending in any::<bool>(),
        ordered in any::<bool>(),
        k in 0u64..40,
    ) {
        let mut w = world().lock().unwrap_or_else(|p| p.into_inner());
        let name = ensure_trace(&mut w, &config);
        let model = &w.models[&name];
        prop_assume!(scope_valid(sel.filter.scope.as_ref(), model.ranks));
        prop_assume!(sel.filter.predicate.as_ref().map_or(0, Expr::depth) <= MAX_NESTING);
        let messages = sel.target == mtfdb::query::Target::Messages;
        let columns: [&str; 4] = if messages {
            ["size", "sender", "send_time_ns", "size"]
        } else {
            ["duration_ns", "bytes_sent", "rank", "start_ns"]
        };
        let column = columns[key];
        let mut expected: Vec<u64> = naive(model, &sel).into_iter().collect();
        let text = if ordered {
            // A stable sort of rows in id order: ties stay in id order.
            expected.sort_by(|a, b| {
                let o = order_value(model, messages, *a, column)
                    .cmp(&order_value(model, messages, *b, column));
                if descending { o.reverse() } else { o }
            });
            let dir = if descending { " DESC" } else { "" };
            format!("SELECT {sel} ORDER BY {column}{dir} LIMIT {k}")
        } else {
            format!("SELECT {sel} LIMIT {k}")
        };
        expected.truncate(k as usize);
        w.session.use_trace(&name).unwrap();
        let result = w
            .session
            .run(&text)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let id = result.column("id").expect("an id column");
        let got: Vec<u64> = result
            .rows
            .iter()
            .map(|r| match &r[id] {
                mtfdb::results::Value::Int(i) => *i as u64,
                v => panic!("{v:?}"),
            })
            .collect();
        prop_assert_eq!(got, expected, "{}", text);
    }
}
