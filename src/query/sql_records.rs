//! `EXPLAIN SQL` of the record targets, over the Parquet export's tables: `COLLECTIVE
//! INSTANCES` over `collectives` (its members' ranks and starts from `operations`, through
//! `UNNEST` of the member list), `REQUESTS` over `requests` joined with `operations` twice,
//! `ROUTINE CALLS` over `routine_calls`. Each is a derived table `r` holding the target's
//! columns, filtered and grouped as [`sql`](super::sql) does the others.
//!
//! What the export cannot give is refused, naming the table: a request's or a routine call's
//! id is its position in mtfdb's store, which `requests` and `routine_calls` do not hold (their
//! aggregates translate, their rows do not); an anomaly's rank, call and time are inside the
//! JSON `detail` of `anomalies`.

use super::ast::{Aggregate, Field, GroupKey, Measure, Scope, Selection, Target, Within};
use super::catalog;
use super::plan::Engine;
use super::sql::{
    counter_columns, counter_sql, grouped, predicate, predicate_counter_sql, rank_set, unsupported,
    COUNTER_RANGE,
};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::Rank;

/// The rows of a record target's selection.
pub(super) fn rows_sql(engine: &Engine, selection: &Selection, trace: &str) -> Result<String> {
    let target = selection.target;
    if matches!(target, Target::Requests | Target::RoutineCalls) {
        let table = exported_table(target);
        return Err(unsupported(&format!(
            "the id of a row of {target} is its position in mtfdb's store, which the exported \
             table {table} does not hold: aggregates over {target} translate, its rows do not"
        )));
    }
    let list: Vec<String> = catalog::columns(target)
        .iter()
        .map(|c| match c.name {
            "comm" => "COALESCE(c.name, CAST(r.comm_id AS VARCHAR)) AS comm".to_string(),
            name => format!("r.{name}"),
        })
        .collect();
    Ok(format!(
        "SELECT {}\n{}",
        list.join(", "),
        from_where(engine, selection, trace)?
    ))
}

/// An aggregate over a record target, and the order of its groups.
pub(super) fn aggregate_sql(
    engine: &Engine,
    aggregates: &[Aggregate],
    selection: &Selection,
    group_by: &[GroupKey],
    trace: &str,
) -> Result<(String, String)> {
    let target = selection.target;
    let mut list = Vec::new();
    let mut keys = Vec::new();
    for k in group_by {
        let name = k.to_string().to_lowercase();
        match group_sql(target, *k) {
            Some(sql) => {
                list.push(format!("{sql} AS {name}"));
                keys.push(sql);
            }
            // A key the rows do not have: one group of nulls.
            None => list.push(format!("NULL AS {name}")),
        }
    }
    // Counters resolved before any SQL is written, as the engine resolves them.
    let mut counters = FxHashMap::default();
    for a in aggregates {
        if let Some(name) = a.counter() {
            let sql = counter_sql(engine, target, "r", name, &a.to_string())?;
            counters.insert(name, sql);
        }
    }
    let measure = |m: Measure| {
        let f = match m {
            Measure::Size => Field::Size,
            Measure::Duration => Field::Duration,
            Measure::Sent => Field::Sent,
            Measure::Received => Field::Received,
            // NULL where the call has no sample: the aggregate skips it.
            Measure::Counter(name) => return counters.get(&name).cloned().unwrap_or_default(),
        };
        field_sql(target, f).map_or("0".to_string(), |(sql, ..)| format!("COALESCE({sql}, 0)"))
    };
    Ok(grouped(
        list,
        aggregates,
        &measure,
        &from_where(engine, selection, trace)?,
        &keys,
        group_by,
    ))
}

/// The export's table a record target is read from.
fn exported_table(target: Target) -> &'static str {
    match target {
        Target::RoutineCalls => "routine_calls",
        Target::Requests => "requests",
        Target::CollectiveInstances => "collectives",
        _ => "anomalies",
    }
}

/// The derived table `r`, the communicators' names, and every clause.
fn from_where(engine: &Engine, selection: &Selection, trace: &str) -> Result<String> {
    let target = selection.target;
    if target == Target::Metrics {
        return Err(unsupported(
            "the trace's counters are not in the Parquet export: list them with SELECT METRICS",
        ));
    }
    if target == Target::Anomalies {
        return Err(unsupported(
            "an anomaly's rank, operation and time are not columns of the exported table \
             anomalies (it holds kind and detail, the anomaly's fields as a JSON object): read \
             them from detail with your engine's JSON functions",
        ));
    }
    // The same refusals as the engine's, before any SQL is written.
    engine.select_records(selection)?;
    let filter = &selection.filter;
    let mut conditions = Vec::new();
    let members = match (&filter.scope, target) {
        (Some(scope), Target::CollectiveInstances) => {
            let (set, condition) = instance_scope(engine, scope)?;
            conditions.push(condition);
            set
        }
        (Some(Scope::For(s) | Scope::Among(s)), _) => {
            conditions.push(rank_set("r.rank", &engine.ranks(s)?));
            (Vec::new(), None)
        }
        _ => (Vec::new(), None),
    };
    for w in &filter.within {
        if let Within::Comm(c) = w {
            conditions.push(format!("COALESCE(r.comm_id = {}, FALSE)", engine.comm(c)?));
        }
    }
    if let Some(w) = filter.time {
        let end = if target == Target::Requests {
            "GREATEST(r.completion_end_ns, r.start_ns)"
        } else {
            "r.end_ns"
        };
        conditions.push(format!("r.start_ns <= {} AND {end} >= {}", w.end, w.start));
    }
    if let Some(p) = &filter.predicate {
        let counters = predicate_counter_sql(engine, target, "r", Some(p))?;
        let fields = |f: Field| match f {
            Field::Counter(name) => Ok(counters
                .get(&name)
                .map(|sql| (sql.clone(), COUNTER_RANGE.0, COUNTER_RANGE.1))),
            f => Ok(field_sql(target, f).map(|(sql, lo, hi)| (sql.to_string(), lo, hi))),
        };
        conditions.push(predicate(engine, p, &fields)?);
    }
    let counters = counter_columns(engine, target)?;
    let derived = derived_table(target, trace, &members, &counters);
    let join = if target == Target::RoutineCalls {
        String::new()
    } else {
        format!("\nLEFT JOIN communicators c ON c.trace = {trace} AND c.id = r.comm_id")
    };
    let mut sql = format!("FROM (\n{derived}\n) r{join}");
    if !conditions.is_empty() {
        sql.push_str(&format!("\nWHERE {}", conditions.join("\n  AND ")));
    }
    Ok(sql)
}

/// The ranks whose member calls an instance's row counts (`in_set`), and for `BETWEEN
/// PROCESS(a,b)` the two ranks counted apart (`has_a`, `has_b`).
type InstanceScope = (Vec<Rank>, Option<(Rank, Rank)>);

/// A scope on collective instances, and the condition on the counts. `FOR`: a member in the
/// set; `AMONG`: every member in it; `BETWEEN PROCESS(a,b)`: both a and b members.
fn instance_scope(engine: &Engine, scope: &Scope) -> Result<(InstanceScope, String)> {
    Ok(match scope {
        Scope::For(s) => ((engine.ranks(s)?, None), "r.in_set > 0".into()),
        Scope::Among(s) => (
            (engine.ranks(s)?, None),
            "r.found > 0 AND r.in_set = r.found".into(),
        ),
        Scope::Between(a, b) => (
            (engine.scope_ranks(scope)?, Some((*a, *b))),
            "r.has_a > 0 AND r.has_b > 0".into(),
        ),
    })
}

/// The rows of `target` with its columns (and `counters`, the routine calls' counter
/// columns), as a `SELECT` over the export.
fn derived_table(
    target: Target,
    trace: &str,
    members: &InstanceScope,
    counters: &[String],
) -> String {
    match target {
        Target::RoutineCalls => format!(
            "  SELECT rc.rank AS rank, rc.thread AS thread, rc.routine AS routine, rc.depth AS depth,\n         \
             rc.start_ns AS start_ns, rc.end_ns AS end_ns, GREATEST(rc.end_ns, rc.start_ns) - rc.start_ns AS duration_ns{}\n  \
             FROM routine_calls rc WHERE rc.trace = {trace}",
            counters
                .iter()
                .map(|c| format!(", rc.{c} AS {c}"))
                .collect::<String>()
        ),
        Target::Requests => format!(
            "  SELECT q.request_op AS request_op, q.completion_op AS completion_op, a.rank AS rank,\n         \
             a.operation AS operation, a.start_ns AS start_ns, a.end_ns AS end_ns,\n         \
             b.operation AS completed_by, b.start_ns AS completion_start_ns, b.end_ns AS completion_end_ns,\n         \
             GREATEST(b.start_ns, a.end_ns) - a.end_ns AS gap_ns,\n         \
             GREATEST(b.end_ns, a.start_ns) - a.start_ns AS duration_ns,\n         \
             a.comm AS comm_id, a.root AS root, COALESCE(a.dest, a.source) AS peer,\n         \
             COALESCE(a.send_tag, a.recv_tag) AS tag, a.bytes_sent AS bytes_sent, a.bytes_received AS bytes_received\n  \
             FROM requests q\n  \
             JOIN operations a ON a.trace = q.trace AND a.id = q.request_op\n  \
             JOIN operations b ON b.trace = q.trace AND b.id = q.completion_op\n  \
             WHERE q.trace = {trace}"
        ),
        _ => {
            // The members' counts a scope tests: in the set, and for BETWEEN each of its two.
            let (set, pair) = members;
            let mut counts = format!(
                ",\n                SUM(CASE WHEN {} THEN 1 ELSE 0 END) AS in_set",
                rank_set("o.rank", set)
            );
            let mut outer = String::new();
            if let Some((a, b)) = pair {
                counts.push_str(&format!(
                    ",\n                SUM(CASE WHEN o.rank = {a} THEN 1 ELSE 0 END) AS has_a,\n                \
                     SUM(CASE WHEN o.rank = {b} THEN 1 ELSE 0 END) AS has_b"
                ));
                outer = ", COALESCE(s.has_a, 0) AS has_a, COALESCE(s.has_b, 0) AS has_b".into();
            }
            format!(
                "  SELECT i.instance AS id, i.operation AS operation, i.comm AS comm_id, i.root AS root,\n         \
                 CARDINALITY(i.members) AS members, i.start_ns AS start_ns, i.end_ns AS end_ns,\n         \
                 GREATEST(i.end_ns, i.start_ns) - i.start_ns AS duration_ns, COALESCE(s.skew_ns, 0) AS skew_ns,\n         \
                 i.send_bytes AS bytes_sent, i.recv_bytes AS bytes_received,\n         \
                 COALESCE(s.found, 0) AS found, COALESCE(s.in_set, 0) AS in_set{outer}\n  \
                 FROM collectives i\n  \
                 LEFT JOIN (SELECT u.instance AS instance, MAX(o.start_ns) - MIN(o.start_ns) AS skew_ns,\n                \
                 COUNT(*) AS found{counts}\n             \
                 FROM collectives u CROSS JOIN UNNEST(u.members) AS member(op)\n             \
                 JOIN operations o ON o.trace = u.trace AND o.id = member.op\n             \
                 WHERE u.trace = {trace}\n             \
                 GROUP BY u.instance) s ON s.instance = i.instance\n  \
                 WHERE i.trace = {trace}"
            )
        }
    }
}

/// A field on the derived table, with its range; `None` when the target's rows have none.
fn field_sql(target: Target, f: Field) -> Option<(&'static str, i128, i128)> {
    const U16: i128 = u16::MAX as i128;
    const U32: i128 = u32::MAX as i128;
    const U64: i128 = u64::MAX as i128;
    let i32s = (i128::from(i32::MIN), i128::from(i32::MAX));
    let sizes = matches!(target, Target::Requests | Target::CollectiveInstances);
    Some(match f {
        Field::Duration => ("r.duration_ns", 0, U64),
        Field::Depth if target == Target::RoutineCalls => ("r.depth", 0, U16),
        Field::Size if sizes => ("GREATEST(r.bytes_sent, r.bytes_received)", 0, U64),
        Field::Sent if sizes => ("r.bytes_sent", 0, U64),
        Field::Received if sizes => ("r.bytes_received", 0, U64),
        Field::Root if sizes => ("r.root", 0, U32),
        Field::Comm if sizes => ("r.comm_id", 0, U32),
        Field::Peer if target == Target::Requests => ("r.peer", 0, U32),
        Field::Tag if target == Target::Requests => ("r.tag", i32s.0, i32s.1),
        Field::Members if target == Target::CollectiveInstances => ("r.members", 0, U64),
        Field::Skew if target == Target::CollectiveInstances => ("r.skew_ns", 0, U64),
        _ => return None,
    })
}

/// A `GROUP BY` key on the derived table; `None` when the target's rows have none.
fn group_sql(target: Target, k: GroupKey) -> Option<&'static str> {
    let instances = target == Target::CollectiveInstances;
    let requests = target == Target::Requests;
    Some(match k {
        GroupKey::Process if !instances => "r.rank",
        GroupKey::Peer if requests => "r.peer",
        GroupKey::Tag if requests => "r.tag",
        GroupKey::Operation if requests || instances => "r.operation",
        GroupKey::Comm if requests || instances => "COALESCE(c.name, CAST(r.comm_id AS VARCHAR))",
        GroupKey::Routine if target == Target::RoutineCalls => "r.routine",
        _ => return None,
    })
}
