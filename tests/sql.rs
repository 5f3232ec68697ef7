//! `EXPLAIN SQL` against DuckDB: random statements of the query oracle (selections with every
//! kind of scope, window and condition, then aggregates, orders, limits and the statistics)
//! over random generated traces; each statement's SQL, run by DuckDB (the `duckdb` Python
//! package, installed by `.ci/run`) over the trace's Parquet export, must return exactly the
//! rows mtfdb returns, in mtfdb's order. Skipped, saying so, without python3's duckdb.

mod common;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

use common::duckdb;
use common::oracle::{
    config_strategy, record_selection_strategy, scope_valid, selection_strategy, window_of,
};
use mtfdb::gen::generate;
use mtfdb::query::ast::{
    Aggregate, GroupKey, Measure, OrderColumn, OrderKey, Select, SelectBody, Statistic, Target,
    Within, MAX_NESTING,
};
use mtfdb::{Session, Value};

/// Whether mtfdb's value and DuckDB's are the same (floats within a relative 1e-9).
fn same(ours: &Value, theirs: &serde_json::Value) -> bool {
    match (ours, theirs) {
        (Value::Null, serde_json::Value::Null) => true,
        (Value::Int(i), serde_json::Value::String(s)) => s == &i.to_string(),
        (Value::Int(i), serde_json::Value::Number(n)) => n.as_f64() == Some(*i as f64),
        (Value::Float(f), serde_json::Value::Number(n)) => {
            let g = n.as_f64().unwrap();
            (f - g).abs() <= 1e-9 * f.abs().max(g.abs()).max(1.0)
        }
        (Value::Float(f), serde_json::Value::String(s)) => s.parse::<f64>().ok() == Some(*f),
        (Value::Text(t), serde_json::Value::String(s)) => t == s,
        _ => false,
    }
}

/// The statements asked of one trace: `n` random selections (scopes kept inside the trace),
/// each also as an aggregate, ordered and limited, and the statistics.
fn statements(runner: &mut TestRunner, ranks: u32, span: u64, n: usize) -> Vec<Select> {
    let mut out = Vec::new();
    let selections = selection_strategy();
    while out.len() < n * 3 {
        let (mut sel, window) = selections.new_tree(runner).unwrap().current();
        if !runnable(&sel, ranks) {
            continue;
        }
        // The oracle's views hold every row of their kind: without them, the same rows.
        sel.filter.within.retain(|w| !matches!(w, Within::View(_)));
        if let Some((a, b)) = window {
            sel.filter.time = Some(window_of(span, a, b));
        }
        let k = out.len();
        out.push(Select {
            body: SelectBody::Rows(sel.clone()),
            order_by: Vec::new(),
            limit: None,
        });
        // The same rows ordered by a column with ties (ties keep mtfdb's order), limited.
        let column = if sel.target == Target::Messages {
            ["size", "sender", "tag"][k % 3]
        } else {
            ["duration_ns", "peer", "operation"][k % 3]
        };
        out.push(Select {
            body: SelectBody::Rows(sel.clone()),
            order_by: vec![OrderKey {
                column: OrderColumn::Name(column.into()),
                descending: k % 2 == 0,
            }],
            limit: Some(1 + (k as u64 % 7)),
        });
        if sel.target == Target::Messages {
            // The matrix and the histogram of the same messages.
            for statistic in [
                Statistic::Matrix(mtfdb::query::MatrixMeasure::Bytes),
                Statistic::Histogram {
                    of: Measure::Size,
                    bins: mtfdb::query::Bins::Log2,
                },
            ] {
                out.push(Select {
                    body: SelectBody::Statistic {
                        statistic,
                        target: Some(Target::Messages),
                        filter: sel.filter.clone(),
                    },
                    order_by: Vec::new(),
                    limit: None,
                });
            }
        }
        let keys: &[GroupKey] = if sel.target == Target::Messages {
            &[
                GroupKey::Process,
                GroupKey::Peer,
                GroupKey::Tag,
                GroupKey::Comm,
                GroupKey::Operation,
            ]
        } else {
            &[
                GroupKey::Process,
                GroupKey::Peer,
                GroupKey::Operation,
                GroupKey::Tag,
                GroupKey::Comm,
            ]
        };
        let group_by = match k % 4 {
            0 => Vec::new(),
            1 => vec![keys[k % keys.len()]],
            _ => vec![keys[k % keys.len()], keys[(k + 1) % keys.len()]],
        };
        let measure = if k % 2 == 0 {
            Measure::Size
        } else {
            Measure::Duration
        };
        out.push(Select {
            body: SelectBody::Aggregate {
                aggregates: every_aggregate(measure),
                selection: sel,
                group_by,
            },
            order_by: if k % 3 == 0 {
                vec![OrderKey {
                    column: OrderColumn::Aggregate(Aggregate::Count),
                    descending: true,
                }]
            } else {
                Vec::new()
            },
            limit: None,
        });
    }
    for statistic in [
        Statistic::FanIn,
        Statistic::FanOut,
        Statistic::MpiTime,
        Statistic::Statistics,
        Statistic::Matrix(mtfdb::query::MatrixMeasure::Count),
        Statistic::Matrix(mtfdb::query::MatrixMeasure::Bytes),
        Statistic::Histogram {
            of: Measure::Size,
            bins: mtfdb::query::Bins::Log2,
        },
        Statistic::Histogram {
            of: Measure::Duration,
            bins: mtfdb::query::Bins::Log2,
        },
    ] {
        let target = match statistic {
            Statistic::Histogram {
                of: Measure::Duration,
                ..
            } => Some(Target::Operations),
            _ => None,
        };
        out.push(Select {
            body: SelectBody::Statistic {
                statistic,
                target,
                filter: Default::default(),
            },
            order_by: Vec::new(),
            limit: None,
        });
    }
    out
}

/// Statements over the record targets: random selections of each (their clauses and fields),
/// as rows where the export can give their ids (collective instances), and as aggregates
/// with each group key and measure. ANOMALIES, and the rows of REQUESTS and ROUTINE CALLS,
/// are refused by EXPLAIN SQL (checked by the caller, as for any statement it refuses).
fn record_statements(runner: &mut TestRunner, ranks: u32, span: u64, n: usize) -> Vec<Select> {
    let mut out = Vec::new();
    let selections = record_selection_strategy();
    let keys = GroupKey::ALL;
    let measures = Measure::ALL;
    for k in 0..n * 4 {
        let (mut sel, window) = selections.new_tree(runner).unwrap().current();
        if !runnable(&sel, ranks) {
            continue;
        }
        if let Some((a, b)) = window {
            sel.filter.time = Some(window_of(span, a, b));
        }
        out.push(Select {
            body: SelectBody::Rows(sel.clone()),
            order_by: if k % 3 == 0 {
                vec![OrderKey {
                    column: OrderColumn::Name("skew_ns".into()),
                    descending: true,
                }]
            } else {
                Vec::new()
            },
            limit: (k % 2 == 0).then_some(1 + k as u64 % 5),
        });
        let measure = measures[k % measures.len()];
        out.push(Select {
            body: SelectBody::Aggregate {
                aggregates: every_aggregate(measure),
                selection: sel,
                group_by: match k % 3 {
                    0 => Vec::new(),
                    1 => vec![keys[k % keys.len()]],
                    _ => vec![keys[k % keys.len()], keys[(k + 2) % keys.len()]],
                },
            },
            order_by: Vec::new(),
            limit: None,
        });
    }
    out
}

/// Selections whose windows start or end exactly at an operation's or a message's times, where
/// an off-by-one in the overlap test shows.
fn windows_at_row_times(session: &mut Session) -> Vec<Select> {
    let mut out = Vec::new();
    for (target, text, (a, b)) in [
        (
            Target::Operations,
            "SELECT OPERATIONS",
            ("start_ns", "end_ns"),
        ),
        (
            Target::Messages,
            "SELECT MESSAGES",
            ("send_time_ns", "recv_time_ns"),
        ),
    ] {
        let rows = session.run(text).unwrap();
        let (a, b) = (rows.column(a).unwrap(), rows.column(b).unwrap());
        let time = |v: &Value| match v {
            Value::Int(t) => *t as u64,
            other => panic!("{other:?}"),
        };
        for k in [1usize, 7, 19] {
            let Some(row) = rows.rows.get(rows.len() * k / 23) else {
                continue;
            };
            let (start, end) = (time(&row[a]), time(&row[b]));
            for (from, to) in [
                (start, start),
                (end, end),
                (end, end + 1),
                (start.saturating_sub(1), start),
            ] {
                let filter = mtfdb::query::Filter {
                    time: Some(mtfdb::query::TimeWindow {
                        start: from,
                        end: to,
                    }),
                    ..Default::default()
                };
                out.push(Select {
                    body: SelectBody::Rows(mtfdb::query::Selection { target, filter }),
                    order_by: Vec::new(),
                    limit: None,
                });
            }
        }
    }
    out
}

/// Whether mtfdb runs `sel` on a trace of `ranks` ranks: its scope names ranks of the trace
/// and its condition nests no deeper than the language allows.
fn runnable(sel: &mtfdb::query::Selection, ranks: u32) -> bool {
    scope_valid(sel.filter.scope.as_ref(), ranks)
        && sel
            .filter
            .predicate
            .as_ref()
            .is_none_or(|p| p.depth() <= MAX_NESTING)
}

/// `COUNT(*)` and every aggregate of `measure`.
fn every_aggregate(measure: Measure) -> Vec<Aggregate> {
    vec![
        Aggregate::Count,
        Aggregate::Sum(measure),
        Aggregate::Avg(measure),
        Aggregate::Min(measure),
        Aggregate::Max(measure),
    ]
}

/// Whether EXPLAIN SQL refuses `select` because the export lacks what it needs: anomalies'
/// rank, call and time, and the ids of requests and routine calls.
fn refused_by_explain_sql(select: &Select) -> bool {
    match &select.body {
        SelectBody::Rows(sel) => matches!(
            sel.target,
            Target::Anomalies | Target::Requests | Target::RoutineCalls
        ),
        SelectBody::Aggregate { selection, .. } => selection.target == Target::Anomalies,
        SelectBody::Statistic { .. } => false,
    }
}

/// mtfdb's rows of `select`; the matrix in the SQL's shape, a row per pair with traffic.
fn mtfdb_rows(session: &mut Session, select: &Select) -> mtfdb::Result<Vec<Vec<Value>>> {
    if let SelectBody::Statistic {
        statistic: Statistic::Matrix(_),
        ..
    } = select.body
    {
        let m = session.matrix_cells(&format!("{select}"))?;
        return Ok(m
            .cells
            .iter()
            .map(|&(s, r, v)| vec![Value::from(s), Value::from(r), Value::from(v)])
            .collect());
    }
    Ok(session.run(&format!("{select}"))?.rows)
}

#[test]
fn explain_sql_run_by_duckdb_over_the_parquet_export_returns_mtfdbs_rows() {
    let (dir, db) = common::temp_db();
    let exports = dir.path().join("exports");
    std::fs::create_dir_all(&exports).unwrap();
    let mut runner = TestRunner::deterministic();
    let mut session = Session::new(db);
    let mut asked: Vec<(String, Select, Vec<Vec<Value>>)> = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    let mut refused = 0;
    while names.len() < 8 {
        let config = config_strategy().new_tree(&mut runner).unwrap().current();
        let name = format!(
            "{}-{}-{}-{}-{}",
            config.scenario, config.ranks, config.iterations, config.seed, config.shuffle_ranks
        );
        if !names.insert(name.clone()) {
            continue;
        }
        session
            .database()
            .import_events(&name, |sink| generate(&config, sink).map(|_| ()))
            .unwrap();
        let trace = session.database().trace(&name).unwrap();
        let span = trace.summary().last_time.unwrap_or(0);
        let trace_dir = exports.join(&name);
        mtfdb::export::parquet::export_parquet(&trace, &trace_dir).unwrap();
        session.use_trace(&name).unwrap();
        let mut selects = statements(&mut runner, config.ranks, span, 14);
        selects.extend(windows_at_row_times(&mut session));
        selects.extend(record_statements(&mut runner, config.ranks, span, 6));
        for select in selects {
            if refused_by_explain_sql(&select) {
                let refusal = session.run(&format!("EXPLAIN SQL {select}"));
                let message = refusal.expect_err(&select.to_string()).to_string();
                assert!(
                    message.contains("the exported table"),
                    "{select}: {message}"
                );
                refused += 1;
                continue;
            }
            let Ok(rows) = mtfdb_rows(&mut session, &select) else {
                // A statement mtfdb refuses (ORDER BY a column the rows do not have) has no
                // SQL either; EXPLAIN SQL must refuse it too.
                assert!(
                    session.run(&format!("EXPLAIN SQL {select}")).is_err(),
                    "{select}"
                );
                continue;
            };
            let sql = session
                .run(&format!("EXPLAIN SQL {select}"))
                .unwrap_or_else(|e| panic!("{select}: {e}"));
            let text: Vec<String> = sql.rows.iter().map(|r| r[0].render()).collect();
            asked.push((text.join("\n"), select, rows));
        }
    }
    assert!(asked.len() >= 300, "{} statements", asked.len());
    assert!(refused > 0, "no record statement was refused");
    for target in [
        Target::RoutineCalls,
        Target::Requests,
        Target::CollectiveInstances,
    ] {
        let n = asked
            .iter()
            .filter(|(_, s, _)| match &s.body {
                SelectBody::Rows(sel) | SelectBody::Aggregate { selection: sel, .. } => {
                    sel.target == target
                }
                _ => false,
            })
            .count();
        assert!(n >= 5, "{n} statements over {target}");
    }
    let queries: Vec<String> = asked.iter().map(|(sql, ..)| sql.clone()).collect();
    let Some(answers) = duckdb(&exports, &queries) else {
        return;
    };
    let mut checked = 0;
    for ((sql, select, ours), theirs) in asked.iter().zip(answers) {
        let theirs = theirs.unwrap_or_else(|e| panic!("{select}\n{sql}\nDuckDB: {e}"));
        assert_eq!(
            ours.len(),
            theirs.len(),
            "{select}\n{sql}\nmtfdb {ours:?}\nDuckDB {theirs:?}"
        );
        for (a, b) in ours.iter().zip(&theirs) {
            assert!(
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y)),
                "{select}\n{sql}\nmtfdb  {a:?}\nDuckDB {b:?}"
            );
        }
        checked += 1;
    }
    eprintln!("{checked} statements agree");
}
