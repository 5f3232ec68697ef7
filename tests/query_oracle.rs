//! A differential oracle for the query engine: random selections over random generated traces,
//! printed as query text, parsed and run by the engine (bitmap algebra, chunk pruning, row
//! reads), must select exactly the rows a naive evaluator finds by scanning the in-memory model.

mod common;

use std::collections::HashMap;
use std::sync::Mutex;

use proptest::prelude::*;

use common::oracle::{
    config_strategy, ids_of, naive, prepare, scope_valid, selection_strategy, window_of, Model,
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
