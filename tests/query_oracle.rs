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

// ---- the relational tail on computed results ----------------------------------------------

/// The statements whose results the tail narrows, with the clause that filters their result:
/// `WHERE` on an analysis, `HAVING` on a statistic or an aggregate (whose `WHERE` selects the
/// rows it is computed over).
const COMPUTED: &[(&str, &str)] = &[
    ("SELECT CRITICAL PATH", "WHERE"),
    ("SELECT CRITICAL PATH SUMMARY", "WHERE"),
    ("SIMULATE", "WHERE"),
    ("SELECT PHASES", "WHERE"),
    ("SELECT PATTERNS FOR PROCESS(0)", "WHERE"),
    ("SELECT NETWORK MODEL", "WHERE"),
    ("SELECT STATISTICS FOR ALL PROCESSES", "HAVING"),
    ("SELECT WAIT STATES", "HAVING"),
    ("SELECT WAIT STATES GROUP BY PROCESS", "HAVING"),
    ("SELECT LATE SENDERS", "HAVING"),
    ("SELECT MPI TIME", "HAVING"),
    ("SELECT FAN_OUT FOR ALL PROCESSES", "HAVING"),
    ("SELECT COMMUNICATION MATRIX OF COUNT", "HAVING"),
    (
        "SELECT COUNT(*), SUM(DURATION) FROM OPERATIONS GROUP BY PROCESS",
        "HAVING",
    ),
];

use mtfdb::results::{ColumnUnit, ResultSet, Value};

/// A comparison the test builds, with the text it writes and the value it means.
#[derive(Debug, Clone)]
enum Constant {
    Int(i128),
    Float(f64),
    Text(String),
}

/// One condition of the tail: `column op constant`, or `column IS [NOT] NULL`.
#[derive(Debug, Clone)]
struct Condition {
    column: usize,
    op: usize,
    constant: Option<Constant>,
    negated: bool,
}

const OPS: [&str; 6] = ["<", "<=", "=", "!=", ">=", ">"];

/// A condition on column `c` of `base`, its constant one of the column's own values (picked
/// by `pick`), written in the column's unit.
fn condition(base: &ResultSet, body: &[Vec<Value>], c: usize, pick: usize, op: usize) -> Condition {
    let values: Vec<&Value> = body
        .iter()
        .map(|r| &r[c])
        .filter(|v| !matches!(v, Value::Null))
        .collect();
    let constant = values.get(pick % values.len().max(1)).map(|v| match v {
        Value::Int(i) => Constant::Int(*i),
        Value::Float(f) => Constant::Float(*f),
        Value::Text(t) => Constant::Text(t.clone()),
        Value::Null => unreachable!(),
    });
    let _ = base;
    Condition {
        column: c,
        op: op % OPS.len(),
        constant,
        negated: pick.is_multiple_of(2),
    }
}

/// The condition's text, as a user writes it.
fn condition_text(base: &ResultSet, cond: &Condition) -> Option<String> {
    let name = &base.columns[cond.column];
    let column = if name
        .chars()
        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        && name.starts_with(|ch: char| ch.is_ascii_alphabetic())
    {
        name.clone()
    } else {
        format!("'{name}'")
    };
    let unit = ColumnUnit::of(name);
    let op = OPS[cond.op];
    Some(match &cond.constant {
        None => format!("{column} IS {}NULL", if cond.negated { "NOT " } else { "" }),
        Some(Constant::Int(i)) => match unit {
            ColumnUnit::Nanoseconds => format!("{column} {op} {i} ns"),
            ColumnUnit::Seconds => format!("{column} {op} {i} s"),
            ColumnUnit::Bytes if cond.negated && *i >= 0 => format!("{column} {op} {i} B"),
            _ => format!("{column} {op} {i}"),
        },
        Some(Constant::Float(f)) => match unit {
            // Seconds, written as the nanoseconds nearest them.
            ColumnUnit::Seconds => format!("{column} {op} {} ns", (f * 1e9).round() as i128),
            ColumnUnit::Nanoseconds => return None,
            _ if !f.is_finite() => return None,
            _ => format!("{column} {op} {f}"),
        },
        Some(Constant::Text(t)) if t.contains('\'') => return None,
        Some(Constant::Text(t)) => format!("{column} {op} '{t}'"),
    })
}

/// SQL's three values, computed here without the engine: `None` is unknown.
fn holds(base: &ResultSet, cond: &Condition, row: &[Value]) -> Option<bool> {
    use std::cmp::Ordering;
    let cell = &row[cond.column];
    let Some(constant) = &cond.constant else {
        return Some(matches!(cell, Value::Null) != cond.negated);
    };
    let unit = ColumnUnit::of(&base.columns[cond.column]);
    let ord: Option<Ordering> = match (cell, constant) {
        (Value::Null, _) => None,
        (Value::Text(a), Constant::Text(b)) => Some(a.as_str().cmp(b.as_str())),
        (Value::Int(a), Constant::Int(b)) => Some(a.cmp(b)),
        (Value::Float(a), Constant::Float(b)) => a.partial_cmp(b),
        (Value::Float(a), Constant::Int(b)) => a.partial_cmp(&(*b as f64)),
        // Whole numbers of a column that holds floats too (`SELECT NETWORK MODEL`'s value).
        (Value::Int(a), Constant::Float(b)) => (*a as f64).partial_cmp(b),
        _ => None,
    };
    // A float of seconds against its nanoseconds: compare the nanoseconds as seconds.
    let ord = match (cell, constant, unit) {
        (Value::Float(a), Constant::Float(b), ColumnUnit::Seconds) => {
            let ns = (b * 1e9).round() as i128;
            a.partial_cmp(&format!("{ns}e-9").parse::<f64>().unwrap())
        }
        _ => ord,
    };
    let ord = ord?;
    Some(match OPS[cond.op] {
        "<" => ord.is_lt(),
        "<=" => ord.is_le(),
        "=" => ord.is_eq(),
        "!=" => ord.is_ne(),
        ">=" => ord.is_ge(),
        _ => ord.is_gt(),
    })
}

/// NULL below everything, then numbers, then names: the order the records sort in.
fn order_of(a: &Value, b: &Value) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    let rank = |v: &Value| match v {
        Value::Null => 0,
        Value::Int(_) | Value::Float(_) => 1,
        Value::Text(_) => 2,
    };
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y).unwrap_or(Equal),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y).unwrap_or(Equal),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)).unwrap_or(Equal),
        (Value::Text(x), Value::Text(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    /// `WHERE`/`HAVING`, `ORDER BY` and `LIMIT` on an analysis's, a statistic's or an
    /// aggregate's result keep exactly the rows, in the order, that the result computed
    /// without them gives when this test filters (SQL's three values), stably sorts and cuts
    /// it itself; the summary rows (`total`, `run`) stay last, unchanged.
    #[test]
    fn the_tail_narrows_a_computed_result_as_sql_would(
        config in config_strategy(),
        source in 0usize..COMPUTED.len(),
        conditions in proptest::collection::vec((any::<usize>(), any::<usize>(), 0usize..6, 0u8..4), 0..3),
        or in any::<bool>(),
        order in proptest::option::of((any::<usize>(), any::<bool>())),
        limit in proptest::option::of(0u64..12),
    ) {
        let mut w = world().lock().unwrap_or_else(|p| p.into_inner());
        let name = ensure_trace(&mut w, &config);
        w.session.use_trace(&name).unwrap();
        let (statement, clause) = COMPUTED[source];
        let base = w
            .session
            .run(statement)
            .map_err(|e| TestCaseError::fail(format!("{statement}: {e}")))?;
        prop_assume!(!base.columns.is_empty());
        let body_len = base.rows.len() - base.totals;
        let (body, footer) = base.rows.split_at(body_len);
        // The conditions, each on a column the result has, joined by AND or OR.
        let mut conds = Vec::new();
        let mut texts = Vec::new();
        for (col, pick, op, shape) in conditions {
            let c = col % base.columns.len();
            let mut cond = condition(&base, body, c, pick, op);
            if shape == 0 {
                cond.constant = None;
            }
            let Some(text) = condition_text(&base, &cond) else { continue };
            texts.push(if shape == 1 { format!("NOT ({text})") } else { text });
            conds.push((cond, shape == 1));
        }
        let joiner = if or { " OR " } else { " AND " };
        let mut text = statement.to_string();
        if !texts.is_empty() {
            text.push_str(&format!(" {clause} {}", texts.join(joiner)));
        }
        let key = order.map(|(c, desc)| (c % base.columns.len(), desc));
        if let Some((c, desc)) = key {
            text.push_str(&format!(" ORDER BY {}{}", c + 1, if desc { " DESC" } else { "" }));
        }
        if let Some(n) = limit {
            text.push_str(&format!(" LIMIT {n}"));
        }
        // What SQL keeps: a row whose condition is true, not false nor unknown.
        let keep = |row: &Vec<Value>| -> bool {
            if conds.is_empty() {
                return true;
            }
            let values: Vec<Option<bool>> = conds
                .iter()
                .map(|(c, not)| holds(&base, c, row).map(|b| b != *not))
                .collect();
            let joined = if or {
                if values.contains(&Some(true)) { Some(true) }
                else if values.contains(&None) { None } else { Some(false) }
            } else if values.contains(&Some(false)) { Some(false) }
            else if values.contains(&None) { None } else { Some(true) };
            joined == Some(true)
        };
        let mut expected: Vec<Vec<Value>> = body.iter().filter(|r| keep(r)).cloned().collect();
        if let Some((c, desc)) = key {
            expected.sort_by(|a, b| {
                let o = order_of(&a[c], &b[c]);
                if desc { o.reverse() } else { o }
            });
        }
        if let Some(n) = limit {
            expected.truncate(n as usize);
        }
        expected.extend(footer.iter().cloned());
        let got = w
            .session
            .run(&text)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&got.columns, &base.columns, "{}", text);
        prop_assert_eq!(got.rows, expected, "{}", text);
    }

    /// `SELECT COUNT(*), SUM(col) FROM <analysis> GROUP BY key` gives one row per distinct key
    /// with the count and the exact sum this test finds over the analysis's own rows.
    #[test]
    fn group_by_over_an_analysis_counts_and_sums_its_rows(
        config in config_strategy(),
        source in 0usize..3,
        key in any::<usize>(),
        measure in any::<usize>(),
    ) {
        let mut w = world().lock().unwrap_or_else(|p| p.into_inner());
        let name = ensure_trace(&mut w, &config);
        w.session.use_trace(&name).unwrap();
        let (statement, _) = COMPUTED[source];
        let base = w.session.run(statement).unwrap();
        let body = &base.rows[..base.rows.len() - base.totals];
        let k = key % base.columns.len();
        // A column of whole numbers to sum.
        let ints: Vec<usize> = (0..base.columns.len())
            .filter(|&c| body.iter().all(|r| matches!(r[c], Value::Int(_) | Value::Null))
                && body.iter().any(|r| matches!(r[c], Value::Int(_))))
            .collect();
        prop_assume!(!ints.is_empty());
        let m = ints[measure % ints.len()];
        let head = statement.strip_prefix("SELECT ").unwrap_or(statement);
        let text = format!(
            "SELECT COUNT(*), SUM('{}') FROM {head} GROUP BY '{}'",
            base.columns[m], base.columns[k]
        );
        let got = w
            .session
            .run(&text)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let mut want: std::collections::BTreeMap<String, (u64, Option<i128>)> = Default::default();
        for r in body {
            let e = want.entry(format!("{:?}", r[k])).or_default();
            e.0 += 1;
            if let Value::Int(v) = r[m] {
                e.1 = Some(e.1.unwrap_or(0) + v);
            }
        }
        let mut have: std::collections::BTreeMap<String, (u64, Option<i128>)> = Default::default();
        for r in &got.rows {
            let count = match r[1] { Value::Int(n) => n as u64, ref v => panic!("{v:?}") };
            let sum = match r[2] { Value::Int(n) => Some(n), Value::Null => None, ref v => panic!("{v:?}") };
            prop_assert!(have.insert(format!("{:?}", r[0]), (count, sum)).is_none(), "{}: a key twice", text);
        }
        prop_assert_eq!(have, want, "{}", text);
        // The groups come in key order.
        prop_assert!(got.rows.windows(2).all(|p| order_of(&p[0][0], &p[1][0]).is_lt()), "{}", text);
    }
}
