//! `EXPLAIN SQL <select>`: the statement as standard SQL over the tables of the Parquet export
//! (`operations`, `messages`, `communicators`; their schema is in `docs/parquet.md`), in the
//! dialect Spark SQL, Trino and DuckDB share: `COALESCE`, `GREATEST`, `CASE`, `LEFT JOIN`,
//! `GROUP BY`, `ORDER BY … NULLS FIRST`, `LIMIT`, no engine's own functions.
//!
//! The SQL returns the rows mtfdb returns, in its order: rows of a selection by id unless
//! ordered, groups by their keys, ties of `ORDER BY` in the order before it (the sort is
//! stable). Names are resolved against the trace when the SQL is written: communicators
//! become their ids, process sets their ranks. The semantics are the engine's, written out:
//!
//! - an operation is in a time window when it overlaps it (`start_ns <= end AND end_ns >=
//!   start`), a message when its flight does (from its send to its receive);
//! - a `WHERE` comparison on a field a row does not have (the peer of a collective, a
//!   message's root) is false, except `!=`, which holds: each comparison is wrapped so that
//!   `NOT` reads the same in SQL's three-valued logic; constants beyond a column's range are
//!   folded into what they compare to (`SIZE > 18446744073709551616` is false);
//! - a hardware counter is the export's column of it, NULL where the call has no sample, and
//!   the engine's unknown is SQL's NULL: a comparison on it is left unwrapped, and `SUM`,
//!   `AVG`, `MIN` and `MAX` of it skip the NULLs and are NULL over none;
//! - `BETWEEN PROCESS(a,b)` holds for an operation of a whose destination, source or root is
//!   b (or the other way), `AMONG set` for one whose rank and peers are all in the set, `FOR
//!   set` for one whose rank is; for a message, on its sender and receiver.
//!
//! What needs mtfdb's analyses (`IN PHASE`, `IN PATTERN`, `WAIT`, patterns, phases,
//! topology) or its stored views (`IN VIEW`) is refused with the reason and the exported table
//! to use instead.

use super::ast::{
    Aggregate, CmpOp, Comparison, CounterName, Expr, Field, Filter, GroupKey, Measure, OrderColumn,
    Scope, Select, SelectBody, Selection, Statistic, Target, Value as Operand, Within,
};
use super::plan::Engine;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::Rank;

/// The SQL of `select` over the export of the engine's trace.
pub(crate) fn select_sql(engine: &Engine, select: &Select) -> Result<String> {
    let trace = quote(engine.trace.name());
    let (mut sql, tie) = match &select.body {
        SelectBody::Rows(selection) if selection.target.is_record() => (
            super::sql_records::rows_sql(engine, selection, &trace)?,
            "id".to_string(),
        ),
        SelectBody::Aggregate {
            aggregates,
            selection,
            group_by,
        } if selection.target.is_record() => {
            super::sql_records::aggregate_sql(engine, aggregates, selection, group_by, &trace)?
        }
        SelectBody::Rows(selection) => (rows_sql(engine, selection, &trace)?, "id".to_string()),
        SelectBody::Aggregate {
            aggregates,
            selection,
            group_by,
        } => aggregate_sql(engine, aggregates, selection, group_by, &trace)?,
        SelectBody::Statistic {
            statistic,
            target,
            filter,
        } => statistic_sql(engine, *statistic, *target, filter, &trace)?,
    };
    let columns = output_columns(engine, select)?;
    let mut keys: Vec<String> = select
        .order_by
        .iter()
        .map(|k| {
            let name = match &k.column {
                // A statistic's columns are named as mtfdb names them.
                OrderColumn::Name(n) if columns.is_empty() => n.to_lowercase(),
                OrderColumn::Name(n) => columns
                    .iter()
                    .find(|c| {
                        c.eq_ignore_ascii_case(n) || c.eq_ignore_ascii_case(&format!("{n}_ns"))
                    })
                    .cloned()
                    .ok_or_else(|| unsupported(&format!("ORDER BY {n}: no such column")))?,
                OrderColumn::Aggregate(a) => alias(*a),
                OrderColumn::Position(p) => p.to_string(),
            };
            Ok(if k.descending {
                format!("{name} DESC NULLS LAST")
            } else {
                format!("{name} ASC NULLS FIRST")
            })
        })
        .collect::<Result<_>>()?;
    if !tie.is_empty() {
        keys.push(tie);
    }
    if !keys.is_empty() {
        sql.push_str(&format!("\nORDER BY {}", keys.join(", ")));
    }
    if let Some(n) = select.limit {
        sql.push_str(&format!("\nLIMIT {n}"));
    }
    Ok(sql)
}

/// The names of the columns the SQL selects, for `ORDER BY` by name.
fn output_columns(engine: &Engine, select: &Select) -> Result<Vec<String>> {
    Ok(match &select.body {
        SelectBody::Rows(s) if s.target.is_record() => super::catalog::columns(s.target)
            .iter()
            .map(|c| c.name.to_string())
            .collect(),
        SelectBody::Rows(s) if s.target == Target::Messages => {
            MESSAGE_COLUMNS.iter().map(|(n, _)| n.to_string()).collect()
        }
        SelectBody::Rows(s) => OPERATION_COLUMNS
            .iter()
            .map(|(n, _)| n.to_string())
            .chain(counter_columns(engine, s.target)?)
            .collect(),
        SelectBody::Aggregate {
            aggregates,
            group_by,
            ..
        } => group_by
            .iter()
            .map(|k| k.to_string().to_lowercase())
            .chain(aggregates.iter().map(|a| alias(*a)))
            .collect(),
        SelectBody::Statistic { .. } => Vec::new(),
    })
}

/// The export's counter columns of `target`'s rows (none when they are not calls or the
/// trace recorded no counter), in the order mtfdb shows them.
pub(super) fn counter_columns(engine: &Engine, target: Target) -> Result<Vec<String>> {
    Ok(engine
        .counters_of(target)?
        .map(|c| c.columns.clone())
        .unwrap_or_default())
}

/// The SQL of the counter that `what` reads on `target`'s rows (those of table alias `t`):
/// its column, resolved as the engine resolves it.
pub(super) fn counter_sql(
    engine: &Engine,
    target: Target,
    t: &str,
    name: CounterName,
    what: &str,
) -> Result<String> {
    let counters = engine.counters_of(target)?;
    let i = engine.counter_index(target, counters.as_deref(), name, what)?;
    let column = counters.map(|c| c.columns[i].clone()).unwrap_or_default();
    Ok(format!("{t}.{column}"))
}

/// The SQL of the counters a condition on `target`'s rows (table alias `t`) names, resolved
/// before any SQL is written (the same refusals as the engine's).
pub(super) fn predicate_counter_sql(
    engine: &Engine,
    target: Target,
    t: &str,
    p: Option<&Expr>,
) -> Result<FxHashMap<CounterName, String>> {
    let counters = engine.counters_of(target)?;
    Ok(engine
        .predicate_counters(target, counters.as_deref(), p)?
        .into_iter()
        .map(|(name, i)| {
            let column = counters
                .as_ref()
                .map(|c| c.columns[i].clone())
                .unwrap_or_default();
            (name, format!("{t}.{column}"))
        })
        .collect())
}

/// The range of a counter's column (64-bit signed).
pub(super) const COUNTER_RANGE: (i128, i128) = (i64::MIN as i128, i64::MAX as i128);

/// `SELECT MESSAGES`' columns and their SQL.
const MESSAGE_COLUMNS: [(&str, &str); 8] = [
    ("id", "m.id"),
    ("sender", "m.sender"),
    ("receiver", "m.receiver"),
    ("comm", "COALESCE(c.name, CAST(m.comm AS VARCHAR))"),
    ("tag", "m.tag"),
    ("size", "m.size"),
    ("send_time_ns", "m.send_time_ns"),
    ("recv_time_ns", "m.recv_time_ns"),
];

/// `SELECT OPERATIONS`' columns and their SQL.
const OPERATION_COLUMNS: [(&str, &str); 14] = [
    ("id", "o.id"),
    ("rank", "o.rank"),
    ("thread", "o.thread"),
    ("operation", "o.operation"),
    ("start_ns", "o.start_ns"),
    ("end_ns", "o.end_ns"),
    ("duration_ns", "o.duration_ns"),
    ("comm", "COALESCE(c.name, CAST(o.comm AS VARCHAR))"),
    ("peer", "COALESCE(o.dest, o.source)"),
    ("tag", "COALESCE(o.send_tag, o.recv_tag)"),
    ("bytes_sent", "o.bytes_sent"),
    ("bytes_received", "o.bytes_received"),
    ("root", "o.root"),
    ("datatype", "o.datatype"),
];

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

pub(super) fn unsupported(what: &str) -> Error {
    Error::Usage(format!("EXPLAIN SQL: {what}"))
}

/// The `FROM` and `WHERE` of a selection: its table joined with the communicators (for their
/// names), and every clause.
fn from_where(engine: &Engine, selection: &Selection, trace: &str) -> Result<String> {
    let messages = selection.target == Target::Messages;
    let (table, t) = if messages {
        ("messages", "m")
    } else {
        ("operations", "o")
    };
    let mut conditions = vec![format!("{t}.trace = {trace}")];
    match selection.target {
        Target::Messages | Target::Operations => {}
        Target::PointToPoint => conditions.push("(o.is_send OR o.is_receive)".into()),
        Target::Sends => conditions.push("o.is_send".into()),
        Target::Receives => conditions.push("o.is_receive".into()),
        Target::Collectives => conditions.push("o.is_collective".into()),
        Target::Operation(kind) => conditions.push(format!(
            "o.operation = {}",
            quote(&engine.trace.kind_name(kind))
        )),
        Target::RoutineCalls
        | Target::Requests
        | Target::CollectiveInstances
        | Target::Anomalies
        | Target::Metrics => {
            return Err(unsupported(&format!(
                "{} is translated as a selection or an aggregate, not under a statistic",
                selection.target
            )))
        }
        Target::CpuBursts => {
            return Err(unsupported(
                "CPU BURSTS are the gaps between a location's calls: order `operations` by \
                 start_ns per rank and thread and take each end_ns to the next start_ns",
            ))
        }
    }
    conditions.extend(filter_conditions(engine, selection, messages)?);
    Ok(format!(
        "FROM {table} {t}\nLEFT JOIN communicators c ON c.trace = {t}.trace AND c.id = {t}.comm\nWHERE {}",
        conditions.join("\n  AND ")
    ))
}

fn rows_sql(engine: &Engine, selection: &Selection, trace: &str) -> Result<String> {
    let columns: &[(&str, &str)] = if selection.target == Target::Messages {
        &MESSAGE_COLUMNS
    } else {
        &OPERATION_COLUMNS
    };
    let mut list: Vec<String> = columns
        .iter()
        .map(|(name, sql)| {
            if sql.ends_with(&format!(".{name}")) {
                sql.to_string()
            } else {
                format!("{sql} AS {name}")
            }
        })
        .collect();
    // The operations' counters, after the columns, as mtfdb shows them.
    list.extend(
        counter_columns(engine, selection.target)?
            .into_iter()
            .map(|c| format!("o.{c}")),
    );
    Ok(format!(
        "SELECT {}\n{}",
        list.join(", "),
        from_where(engine, selection, trace)?
    ))
}

/// The alias of an aggregate's column (SQL's plain names: `count`, `sum_size`).
pub(super) fn alias(a: Aggregate) -> String {
    let measure = |m: Measure| match m {
        Measure::Size => "size".to_string(),
        Measure::Duration => "duration".to_string(),
        Measure::Sent => "sent".to_string(),
        Measure::Received => "received".to_string(),
        // The counter's name as written, made a plain SQL name.
        Measure::Counter(name) => name
            .as_str()
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9' | '_') => c,
                _ => '_',
            })
            .collect(),
    };
    match a {
        Aggregate::Count => "count_all".into(),
        Aggregate::Sum(m) => format!("sum_{}", measure(m)),
        Aggregate::Avg(m) => format!("avg_{}", measure(m)),
        Aggregate::Min(m) => format!("min_{}", measure(m)),
        Aggregate::Max(m) => format!("max_{}", measure(m)),
    }
}

/// The SQL of `SIZE` or `DURATION` on an operation (`o`) or a message (`m`) (a counter is
/// [`counter_sql`]'s).
fn measure_sql(messages: bool, m: Measure) -> &'static str {
    match (messages, m) {
        (false, Measure::Size) => "GREATEST(o.bytes_sent, o.bytes_received)",
        (false, Measure::Duration) => "o.duration_ns",
        (false, Measure::Sent) => "o.bytes_sent",
        (false, Measure::Received) => "o.bytes_received",
        (true, Measure::Sent | Measure::Received) => "m.size",
        (true, Measure::Size) => "m.size",
        // Written by `counter_sql` (aggregates); HISTOGRAM takes no counter.
        (_, Measure::Counter(_)) => "NULL",
        (true, Measure::Duration) => {
            "CASE WHEN m.recv_time_ns >= m.send_time_ns THEN m.recv_time_ns - m.send_time_ns ELSE 0 END"
        }
    }
}

fn aggregate_sql(
    engine: &Engine,
    aggregates: &[Aggregate],
    selection: &Selection,
    group_by: &[GroupKey],
    trace: &str,
) -> Result<(String, String)> {
    let messages = selection.target == Target::Messages;
    // Counters resolved before any SQL is written, as the engine resolves them.
    let mut counters = FxHashMap::default();
    for a in aggregates {
        if let Some(name) = a.counter() {
            let sql = counter_sql(engine, selection.target, "o", name, &a.to_string())?;
            counters.insert(name, sql);
        }
    }
    let measure = |m: Measure| match m {
        Measure::Counter(name) => counters.get(&name).cloned().unwrap_or_default(),
        m => measure_sql(messages, m).to_string(),
    };
    let mut list = Vec::new();
    let mut keys = Vec::new();
    for k in group_by {
        let sql = match (messages, k) {
            (false, GroupKey::Process) => "o.rank",
            (false, GroupKey::Peer) => "COALESCE(o.dest, o.source)",
            (false, GroupKey::Operation) => "o.operation",
            (false, GroupKey::Tag) => "COALESCE(o.send_tag, o.recv_tag)",
            (false, GroupKey::Comm) => "COALESCE(c.name, CAST(o.comm AS VARCHAR))",
            (true, GroupKey::Process) => "m.sender",
            (true, GroupKey::Peer) => "m.receiver",
            (true, GroupKey::Tag) => "m.tag",
            (true, GroupKey::Comm) => "COALESCE(c.name, CAST(m.comm AS VARCHAR))",
            // Operations and messages have no routine nor class: one group of nulls.
            (_, GroupKey::Routine | GroupKey::Class) => {
                list.push(format!("NULL AS {}", k.to_string().to_lowercase()));
                continue;
            }
            // Every message's operation is `message`: a constant, not a grouping column.
            (true, GroupKey::Operation) => {
                list.push("'message' AS operation".into());
                continue;
            }
        };
        let name = k.to_string().to_lowercase();
        list.push(format!("{sql} AS {name}"));
        keys.push(sql);
    }
    Ok(grouped(
        list,
        aggregates,
        &measure,
        &from_where(engine, selection, trace)?,
        &keys,
        group_by,
    ))
}

/// An aggregate's SQL and its tie-break order: the group columns `list` (already written),
/// then each aggregate of `measure`, over `from_where`, grouped by `keys`.
pub(super) fn grouped(
    mut list: Vec<String>,
    aggregates: &[Aggregate],
    measure: &dyn Fn(Measure) -> String,
    from_where: &str,
    keys: &[&str],
    group_by: &[GroupKey],
) -> (String, String) {
    for a in aggregates {
        let sql = match a {
            Aggregate::Count => "COUNT(*)".to_string(),
            // A counter's NULLs are skipped, and a group of none is NULL; its average is the
            // exact sum over the count, rounded once, as mtfdb's.
            Aggregate::Sum(m @ Measure::Counter(_)) => format!("SUM({})", measure(*m)),
            Aggregate::Avg(m @ Measure::Counter(_)) => format!(
                "CAST(SUM({0}) AS DOUBLE) / CAST(COUNT({0}) AS DOUBLE)",
                measure(*m)
            ),
            Aggregate::Sum(m) => format!("COALESCE(SUM({}), 0)", measure(*m)),
            Aggregate::Avg(m) => format!("AVG(CAST({} AS DOUBLE))", measure(*m)),
            Aggregate::Min(m) => format!("MIN({})", measure(*m)),
            Aggregate::Max(m) => format!("MAX({})", measure(*m)),
        };
        list.push(format!("{sql} AS {}", alias(*a)));
    }
    let mut sql = format!("SELECT {}\n{from_where}", list.join(", "));
    if !keys.is_empty() {
        sql.push_str(&format!("\nGROUP BY {}", keys.join(", ")));
    } else if !group_by.is_empty() {
        // Grouped by constants only: one group, and none when no row is selected.
        sql.push_str("\nHAVING COUNT(*) > 0");
    }
    // Groups come in the order of their keys.
    let tie = group_by
        .iter()
        .map(|k| format!("{} ASC NULLS FIRST", k.to_string().to_lowercase()))
        .collect::<Vec<_>>()
        .join(", ");
    (sql, tie)
}

fn statistic_sql(
    engine: &Engine,
    statistic: Statistic,
    target: Option<Target>,
    filter: &Filter,
    trace: &str,
) -> Result<(String, String)> {
    let whole = filter.within.is_empty() && filter.time.is_none() && filter.predicate.is_none();
    let ranks = |filter: &Filter| -> Result<Option<Vec<Rank>>> {
        match &filter.scope {
            None => Ok(None),
            Some(scope) => engine.scope_ranks(scope).map(Some),
        }
    };
    match statistic {
        Statistic::MpiTime if whole => {
            let scope = ranks(filter)?
                .map(|r| format!("\n  AND {}", rank_set("p.rank", &r)))
                .unwrap_or_default();
            Ok((
                format!(
                    "SELECT p.rank AS rank, COALESCE(t.busy, 0) AS mpi_time_ns, COALESCE(t.calls, 0) AS calls,\n       \
                     COALESCE(t.span, 0) AS span_ns,\n       \
                     CASE WHEN COALESCE(t.span, 0) > 0 THEN CAST(t.busy AS DOUBLE) / CAST(t.span AS DOUBLE) ELSE 0.0 END AS mpi_share\n\
                     FROM processes p\n\
                     LEFT JOIN (SELECT o.rank AS rank, SUM(o.duration_ns) AS busy, COUNT(*) AS calls,\n                  \
                     MAX(o.end_ns) - MIN(o.start_ns) AS span\n           \
                     FROM operations o WHERE o.trace = {trace} GROUP BY o.rank) t ON t.rank = p.rank\n\
                     WHERE p.trace = {trace}{scope}"
                ),
                "rank".into(),
            ))
        }
        Statistic::Matrix(of) => {
            let selection = Selection {
                target: target.unwrap_or(Target::Messages),
                filter: filter.clone(),
            };
            if selection.target != Target::Messages {
                return Err(unsupported(
                    "a COMMUNICATION MATRIX is computed over messages",
                ));
            }
            let value = match of {
                super::ast::MatrixMeasure::Bytes => "SUM(m.size) AS bytes",
                super::ast::MatrixMeasure::Count => "COUNT(*) AS messages",
            };
            // The matrix's axes are the scope's ranks: pairs with an end outside are not in it.
            let axes = match &filter.scope {
                Some(Scope::For(s) | Scope::Among(s)) => {
                    let set = engine.ranks(s)?;
                    format!(
                        "\n  AND {} AND {}",
                        rank_set("m.sender", &set),
                        rank_set("m.receiver", &set)
                    )
                }
                _ => String::new(),
            };
            Ok((
                format!(
                    "-- one row per pair with traffic (mtfdb prints a row per sender, a column per receiver)\n\
                     SELECT m.sender AS sender, m.receiver AS receiver, {value}\n{}{axes}\nGROUP BY m.sender, m.receiver",
                    from_where(engine, &selection, trace)?
                ),
                "sender, receiver".into(),
            ))
        }
        Statistic::FanIn | Statistic::FanOut if whole => {
            let (me, them, coll) = if statistic == Statistic::FanIn {
                ("receiver", "sender", "bytes_received")
            } else {
                ("sender", "receiver", "bytes_sent")
            };
            let scope = ranks(filter)?
                .map(|r| format!("\nWHERE {}", rank_set("p.rank", &r)))
                .unwrap_or_default();
            let name = if statistic == Statistic::FanIn {
                ("fan_in_bytes", "senders")
            } else {
                ("fan_out_bytes", "receivers")
            };
            Ok((
                format!(
                    "SELECT p.rank AS rank, COALESCE(mb.bytes, 0) + COALESCE(cb.bytes, 0) AS {},\n       \
                     COALESCE(mb.bytes, 0) AS message_bytes, COALESCE(cb.bytes, 0) AS collective_bytes,\n       \
                     COALESCE(mb.messages, 0) AS messages, COALESCE(mb.partners, 0) AS {}\n\
                     FROM processes p\n\
                     LEFT JOIN (SELECT m.{me} AS rank, SUM(m.size) AS bytes, COUNT(*) AS messages, COUNT(DISTINCT m.{them}) AS partners\n           \
                     FROM messages m WHERE m.trace = {trace} GROUP BY m.{me}) mb ON mb.rank = p.rank\n\
                     LEFT JOIN (SELECT o.rank AS rank, SUM(o.{coll}) AS bytes\n           \
                     FROM operations o WHERE o.trace = {trace} AND o.is_collective GROUP BY o.rank) cb ON cb.rank = p.rank{scope}{}",
                    name.0,
                    name.1,
                    if scope.is_empty() {
                        format!("\nWHERE p.trace = {trace}")
                    } else {
                        format!("\n  AND p.trace = {trace}")
                    }
                ),
                "rank".into(),
            ))
        }
        Statistic::Histogram {
            of,
            bins: super::ast::Bins::Log2,
        } => {
            let selection = Selection {
                target: target.unwrap_or(Target::Messages),
                filter: filter.clone(),
            };
            let x = measure_sql(selection.target == Target::Messages, of);
            // Bin b holds [2^(b-1), 2^b); bin 0 holds 0. The bins between the smallest and
            // the largest value's are kept, empty or not.
            let mut ladder = String::from("CASE WHEN x < 1 THEN 0");
            let mut bins = vec!["(0, 0, 1)".to_string()];
            for b in 1..=64u32 {
                let (low, high) = (1u128 << (b - 1), 1u128 << b);
                if b < 64 {
                    ladder.push_str(&format!(" WHEN x < {high} THEN {b}"));
                }
                bins.push(format!("({b}, {low}, {high})"));
            }
            ladder.push_str(" ELSE 64 END");
            Ok((
                format!(
                    "WITH v AS (SELECT {x} AS x\n{}),\n\
                     b AS (SELECT {ladder} AS bin FROM v)\n\
                     SELECT bins.low AS low, bins.high AS high, COUNT(b.bin) AS count\n\
                     FROM (VALUES {}) AS bins(bin, low, high)\n\
                     LEFT JOIN b ON b.bin = bins.bin\n\
                     WHERE bins.bin BETWEEN (SELECT MIN(bin) FROM b) AND (SELECT MAX(bin) FROM b)\n\
                     GROUP BY bins.bin, bins.low, bins.high",
                    from_where(engine, &selection, trace)?,
                    bins.join(", ")
                ),
                "low".into(),
            ))
        }
        Statistic::Histogram { .. } => Err(unsupported(
            "HISTOGRAM … BINS n is not translated (integer division differs between SQL engines); \
             LOG2 bins are",
        )),
        Statistic::Statistics if whole => {
            let summary = engine.trace.summary();
            let kinds: Vec<String> = summary
                .by_kind
                .iter()
                .map(|(k, _)| engine.trace.kind_name(*k))
                .collect();
            let scope = ranks(filter)?
                .map(|r| format!("\n  AND {}", rank_set("p.rank", &r)))
                .unwrap_or_default();
            let counts: Vec<String> = kinds
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    format!(
                        "COALESCE(SUM(CASE WHEN o.operation = {} THEN 1 ELSE 0 END), 0) AS k{i}",
                        quote(k)
                    )
                })
                .collect();
            let per_rank: Vec<String> = (0..kinds.len())
                .map(|i| format!("COALESCE(k.k{i}, 0) AS k{i}"))
                .collect();
            let totals: Vec<String> = (0..kinds.len())
                .map(|i| format!("SUM(k{i}) AS k{i}"))
                .collect();
            let shown: Vec<String> = (0..kinds.len()).map(|i| format!("k{i}")).collect();
            let rows = format!(
                "SELECT p.rank AS rank, {},\n         \
                 COALESCE(ms.bytes, 0) + COALESCE(cs.bytes, 0) AS bytes_sent,\n         \
                 COALESCE(mr.bytes, 0) + COALESCE(cr.bytes, 0) AS bytes_received\n  \
                 FROM processes p\n  \
                 LEFT JOIN (SELECT o.rank AS rank, {} FROM operations o WHERE o.trace = {trace} GROUP BY o.rank) k ON k.rank = p.rank\n  \
                 LEFT JOIN (SELECT m.sender AS rank, SUM(m.size) AS bytes FROM messages m WHERE m.trace = {trace} GROUP BY m.sender) ms ON ms.rank = p.rank\n  \
                 LEFT JOIN (SELECT m.receiver AS rank, SUM(m.size) AS bytes FROM messages m WHERE m.trace = {trace} GROUP BY m.receiver) mr ON mr.rank = p.rank\n  \
                 LEFT JOIN (SELECT o.rank AS rank, SUM(o.bytes_sent) AS bytes FROM operations o WHERE o.trace = {trace} AND o.is_collective GROUP BY o.rank) cs ON cs.rank = p.rank\n  \
                 LEFT JOIN (SELECT o.rank AS rank, SUM(o.bytes_received) AS bytes FROM operations o WHERE o.trace = {trace} AND o.is_collective GROUP BY o.rank) cr ON cr.rank = p.rank\n  \
                 WHERE p.trace = {trace}{scope}",
                per_rank.join(", "),
                counts.join(", ")
            );
            Ok((
                format!(
                    "-- one column per MPI call of the trace, in mtfdb's order: {}\n\
                     WITH per_rank AS (\n  {rows}\n)\n\
                     SELECT rank, {}, bytes_sent, bytes_received FROM (\n  \
                     SELECT 0 AS part, rank AS n, CAST(rank AS VARCHAR) AS rank, {}, bytes_sent, bytes_received FROM per_rank\n  \
                     UNION ALL\n  \
                     SELECT 1 AS part, 0 AS n, 'total' AS rank, {}, COALESCE(SUM(bytes_sent), 0) AS bytes_sent,\n         \
                     COALESCE(SUM(bytes_received), 0) AS bytes_received FROM per_rank\n) t",
                    kinds.join(", "),
                    shown.join(", "),
                    shown.join(", "),
                    totals.join(", ")
                ),
                "part, n".into(),
            ))
        }
        Statistic::WaitStates(_) | Statistic::LateSenders => Err(unsupported(&format!(
            "{statistic} needs mtfdb's wait-state analysis: use the exported table wait_states"
        ))),
        Statistic::MpiTime | Statistic::FanIn | Statistic::FanOut | Statistic::Statistics => {
            Err(unsupported(&format!(
                "{statistic} takes FOR or AMONG a set of processes only"
            )))
        }
    }
}

/// `expr` in `ranks`, as ranges: `(expr BETWEEN 0 AND 15 OR expr = 32)`.
pub(super) fn rank_set(expr: &str, ranks: &[Rank]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            format!("{expr} = {}", sorted[i])
        } else {
            format!("{expr} BETWEEN {} AND {}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    match parts.len() {
        0 => "FALSE".into(),
        1 => parts.remove(0),
        _ => format!("({})", parts.join(" OR ")),
    }
}

/// The clauses of a selection as SQL conditions on a row of operations (`o`) or messages
/// (`m`).
fn filter_conditions(
    engine: &Engine,
    selection: &Selection,
    messages: bool,
) -> Result<Vec<String>> {
    let filter = &selection.filter;
    let mut out = Vec::new();
    if let Some(scope) = &filter.scope {
        out.push(scope_condition(engine, scope, messages)?);
    }
    for w in &filter.within {
        match w {
            Within::Comm(c) => {
                let id = engine.comm(c)?;
                out.push(if messages {
                    format!("m.comm = {id}")
                } else {
                    format!("COALESCE(o.comm = {id}, FALSE)")
                });
            }
            Within::View(v) => {
                return Err(unsupported(&format!(
                    "IN VIEW {v}: a view is mtfdb's stored selection, not in the export; write its clauses instead"
                )))
            }
            Within::Phase(n) => {
                return Err(unsupported(&format!(
                    "IN PHASE {n} needs mtfdb's phase detection: use the exported table phases (its start_ns and end_ns)"
                )))
            }
            Within::Pattern(n) => {
                return Err(unsupported(&format!(
                    "IN PATTERN {n} needs mtfdb's pattern detection: use the exported tables patterns and pattern_occurrences"
                )))
            }
        }
    }
    if let Some(w) = filter.time {
        out.push(if messages {
            format!(
                "m.send_time_ns <= {} AND GREATEST(m.recv_time_ns, m.send_time_ns) >= {}",
                w.end, w.start
            )
        } else {
            format!("o.start_ns <= {} AND o.end_ns >= {}", w.end, w.start)
        });
    }
    if let Some(p) = &filter.predicate {
        let counters = predicate_counter_sql(engine, selection.target, "o", Some(p))?;
        let fields = |f: Field| match f {
            Field::Counter(name) => Ok(counters
                .get(&name)
                .map(|sql| (sql.clone(), COUNTER_RANGE.0, COUNTER_RANGE.1))),
            f => Ok(field_sql(f, messages)?.map(|(sql, lo, hi)| (sql.to_string(), lo, hi))),
        };
        out.push(predicate(engine, p, &fields)?);
    }
    Ok(out)
}

fn scope_condition(engine: &Engine, scope: &Scope, messages: bool) -> Result<String> {
    Ok(match (scope, messages) {
        (Scope::Between(a, b), true) => format!(
            "((m.sender = {a} AND m.receiver = {b}) OR (m.sender = {b} AND m.receiver = {a}))"
        ),
        (Scope::Between(a, b), false) => {
            let peers = |r: Rank| {
                format!("COALESCE(o.dest = {r}, FALSE) OR COALESCE(o.source = {r}, FALSE) OR COALESCE(o.root = {r}, FALSE)")
            };
            format!(
                "((o.rank = {a} AND ({})) OR (o.rank = {b} AND ({})))",
                peers(*b),
                peers(*a)
            )
        }
        (Scope::Among(s), true) => {
            let set = engine.ranks(s)?;
            format!(
                "{} AND {}",
                rank_set("m.sender", &set),
                rank_set("m.receiver", &set)
            )
        }
        (Scope::Among(s), false) => {
            let set = engine.ranks(s)?;
            format!(
                "{} AND (o.dest IS NULL OR {}) AND (o.source IS NULL OR {})",
                rank_set("o.rank", &set),
                rank_set("o.dest", &set),
                rank_set("o.source", &set)
            )
        }
        (Scope::For(s), true) => {
            let set = engine.ranks(s)?;
            format!(
                "({} OR {})",
                rank_set("m.sender", &set),
                rank_set("m.receiver", &set)
            )
        }
        (Scope::For(s), false) => rank_set("o.rank", &engine.ranks(s)?),
    })
}

/// The SQL of a field on an operation or a message, with its range; `None` when the row has
/// no such field.
fn field_sql(f: Field, messages: bool) -> Result<Option<(&'static str, i128, i128)>> {
    const U32: i128 = u32::MAX as i128;
    const U64: i128 = u64::MAX as i128;
    let (i32_lo, i32_hi) = (i128::from(i32::MIN), i128::from(i32::MAX));
    Ok(Some(match (f, messages) {
        (Field::Wait, false) => {
            return Err(unsupported(
                "WAIT needs mtfdb's wait-state analysis: use the exported table wait_states",
            ))
        }
        (Field::Wait, true) => return Err(unsupported("messages have no WAIT")),
        (Field::Root | Field::Depth | Field::Members | Field::Skew, true) => return Ok(None),
        (Field::Depth | Field::Members | Field::Skew, false) => return Ok(None),
        (Field::Sent, false) => ("o.bytes_sent", 0, U64),
        (Field::Received, false) => ("o.bytes_received", 0, U64),
        (Field::Sent | Field::Received, true) => ("m.size", 0, U64),
        (Field::Size, false) => ("GREATEST(o.bytes_sent, o.bytes_received)", 0, U64),
        (Field::Tag, false) => ("COALESCE(o.send_tag, o.recv_tag)", i32_lo, i32_hi),
        (Field::Sender, false) => ("CASE WHEN o.is_send THEN o.rank ELSE o.source END", 0, U32),
        (Field::Receiver, false) => (
            "CASE WHEN o.is_send THEN o.dest WHEN o.is_receive THEN o.rank END",
            0,
            U32,
        ),
        (Field::Duration, false) => ("o.duration_ns", 0, U64),
        (Field::Peer, false) => ("COALESCE(o.dest, o.source)", 0, U32),
        (Field::Root, false) => ("o.root", 0, U32),
        (Field::Comm, false) => ("o.comm", 0, U32),
        (Field::Size, true) => ("m.size", 0, U64),
        (Field::Tag, true) => ("m.tag", i32_lo, i32_hi),
        (Field::Sender, true) => ("m.sender", 0, U32),
        (Field::Receiver | Field::Peer, true) => ("m.receiver", 0, U32),
        (Field::Duration, true) => (
            "CASE WHEN m.recv_time_ns >= m.send_time_ns THEN m.recv_time_ns - m.send_time_ns ELSE 0 END",
            0,
            U64,
        ),
        (Field::Comm, true) => ("m.comm", 0, U32),
        // The caller's (`predicate_counter_sql`).
        (Field::Counter(_), _) => return Ok(None),
    }))
}

/// A field's SQL on the rows being filtered, with its range (`None`: the rows have no such
/// field).
pub(super) type FieldSql<'f> = dyn Fn(Field) -> Result<Option<(String, i128, i128)>> + 'f;

/// A `WHERE` condition as SQL, its fields written by `fields`.
pub(super) fn predicate(engine: &Engine, e: &Expr, fields: &FieldSql) -> Result<String> {
    Ok(match e {
        Expr::And(items) => format!(
            "({})",
            items
                .iter()
                .map(|x| predicate(engine, x, fields))
                .collect::<Result<Vec<_>>>()?
                .join(" AND ")
        ),
        Expr::Or(items) => format!(
            "({})",
            items
                .iter()
                .map(|x| predicate(engine, x, fields))
                .collect::<Result<Vec<_>>>()?
                .join(" OR ")
        ),
        Expr::Not(a) => format!("(NOT {})", predicate(engine, a, fields)?),
        Expr::Compare(c) => comparison(engine, c, fields)?,
    })
}

/// A comparison that is TRUE or FALSE, never NULL: false on a missing field, except `<>`. On
/// a counter it is NULL where the call has no sample, as the engine's is unknown there.
fn comparison(engine: &Engine, c: &Comparison, fields: &FieldSql) -> Result<String> {
    let n = match &c.value {
        Operand::Number(n) => *n,
        Operand::Comm(r) => i128::from(engine.comm(r)?),
    };
    let Some((sql, lo, hi)) = fields(c.field)? else {
        return Ok(if c.op == CmpOp::Ne { "TRUE" } else { "FALSE" }.into());
    };
    if let Field::Counter(_) = c.field {
        return Ok(counter_comparison(&sql, c.op, n, (lo, hi)));
    }
    let present = format!("({sql} IS NOT NULL)");
    // Constants beyond the column's range compare the same with every value of it.
    if n < lo {
        return Ok(match c.op {
            CmpOp::Lt | CmpOp::Le | CmpOp::Eq => "FALSE".into(),
            CmpOp::Ne => "TRUE".into(),
            CmpOp::Gt | CmpOp::Ge => present,
        });
    }
    if n > hi {
        return Ok(match c.op {
            CmpOp::Gt | CmpOp::Ge | CmpOp::Eq => "FALSE".into(),
            CmpOp::Ne => "TRUE".into(),
            CmpOp::Lt | CmpOp::Le => present,
        });
    }
    let op = match c.op {
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Eq => "=",
        CmpOp::Ne => "<>",
        CmpOp::Ge => ">=",
        CmpOp::Gt => ">",
    };
    let missing = if c.op == CmpOp::Ne { "TRUE" } else { "FALSE" };
    Ok(format!("COALESCE({sql} {op} {n}, {missing})"))
}

/// A comparison of a counter's column `sql` (of range `lo..=hi`) with `n`, NULL where the
/// column is: a constant beyond the range is replaced by the bound that gives every value the
/// same answer (`x > 2^70` is `x > 2^63 - 1`, false for every value, NULL for none).
fn counter_comparison(sql: &str, op: CmpOp, n: i128, (lo, hi): (i128, i128)) -> String {
    let (op, n) = if n < lo {
        match op {
            // False for every value.
            CmpOp::Lt | CmpOp::Le | CmpOp::Eq => (CmpOp::Lt, lo),
            // True for every value.
            CmpOp::Ne | CmpOp::Gt | CmpOp::Ge => (CmpOp::Ge, lo),
        }
    } else if n > hi {
        match op {
            CmpOp::Gt | CmpOp::Ge | CmpOp::Eq => (CmpOp::Gt, hi),
            CmpOp::Ne | CmpOp::Lt | CmpOp::Le => (CmpOp::Le, hi),
        }
    } else {
        (op, n)
    };
    let op = match op {
        CmpOp::Ne => "<>",
        other => other.symbol(),
    };
    format!("({sql} {op} {n})")
}
