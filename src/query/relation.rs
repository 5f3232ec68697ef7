//! Every result is a relation: the one tail of clauses (`WHERE`, `GROUP BY` with aggregates,
//! `HAVING`, `ORDER BY`, `LIMIT`) that applies to any result a statement computes whole (an
//! analysis, a statistic, an aggregate), over the result's own columns. Statements that select
//! stored rows (operations, messages, records) keep their own operators, which read the store
//! instead; this module is for what is computed first and then narrowed.
//!
//! The clauses apply in SQL's order: `WHERE`, then the groups, then `HAVING`, then `ORDER BY`,
//! then `LIMIT`. A comparison with a NULL cell is unknown, as in SQL, and only a true condition
//! keeps a row. A result's summary rows (`total` of `STATISTICS` and `WAIT STATES`, `run` of
//! `SIMULATE`: [`ResultSet::totals`]) describe the whole result: they are no rows of the
//! relation, stay last after every clause, and are dropped by `GROUP BY`, whose groups are new
//! rows.

use std::fmt;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::ast::{CmpOp, OrderKey, SizeText, TimeText};
use super::exec::{compare_values, resolve_order, sort_rows};
use crate::error::{Error, NameKind, Result};
use crate::results::{ColumnUnit, ResultSet, Value};

/// The clauses applied to a computed result, each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tail {
    /// `WHERE …` over the result's columns (on an analysis, which selects no stored rows).
    pub filter: Option<Predicate>,
    /// `SELECT COUNT(*), SUM(col) FROM <analysis> … GROUP BY col, …`.
    pub group: Option<ResultGroup>,
    /// `HAVING …` over the columns after grouping (on a statistic or an aggregate, whose
    /// `WHERE` selects the rows it is computed over).
    pub having: Option<Predicate>,
    /// `ORDER BY k1 [ASC|DESC], …`; empty when absent.
    pub order_by: Vec<OrderKey>,
    /// `LIMIT n`.
    pub limit: Option<u64>,
}

impl Tail {
    /// True when no clause is present.
    pub fn is_empty(&self) -> bool {
        self.filter.is_none()
            && self.group.is_none()
            && self.having.is_none()
            && self.order_by.is_empty()
            && self.limit.is_none()
    }
}

/// Aggregates over the rows of a computed result, one row per group of its key columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultGroup {
    /// The aggregates, in the order written (never empty).
    pub aggregates: Vec<ResultAggregate>,
    /// The key columns, lower-cased; empty for one row over the whole result.
    pub keys: Vec<String>,
}

/// An aggregate of a result's column: `COUNT(*)`, `SUM(on_path_ns)`, …
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResultAggregate {
    /// `COUNT(*)`: the rows of the group.
    Count,
    /// `SUM(col)`: NULLs skipped; NULL when every value is.
    Sum(String),
    /// `AVG(col)`: the sum over the values that are not NULL.
    Avg(String),
    /// `MIN(col)`.
    Min(String),
    /// `MAX(col)`.
    Max(String),
}

impl ResultAggregate {
    fn parts(&self) -> (&'static str, Option<&str>) {
        match self {
            ResultAggregate::Count => ("COUNT", None),
            ResultAggregate::Sum(c) => ("SUM", Some(c)),
            ResultAggregate::Avg(c) => ("AVG", Some(c)),
            ResultAggregate::Min(c) => ("MIN", Some(c)),
            ResultAggregate::Max(c) => ("MAX", Some(c)),
        }
    }
}

/// A condition over a result's columns. Chains are flat lists, as [`Expr`](super::Expr)'s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Predicate {
    /// `column op value`.
    Compare {
        /// The column, lower-cased (a name, or an aggregate's column such as `count(*)`).
        column: String,
        /// The comparison.
        op: CmpOp,
        /// The constant.
        value: Literal,
    },
    /// `column IS NULL` (`negated`: `IS NOT NULL`).
    IsNull {
        /// The column, lower-cased.
        column: String,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// Every operand holds.
    And(Vec<Predicate>),
    /// Some operand holds.
    Or(Vec<Predicate>),
    /// `NOT a`.
    Not(Box<Predicate>),
}

/// A constant a result's column is compared with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Literal {
    /// A number without a unit: `units / 10^scale` (`0.25` is 25 with scale 2).
    Number {
        /// The digits, with the sign.
        units: i128,
        /// Decimals.
        scale: u32,
    },
    /// A duration with its unit (`10 us`), in nanoseconds: only for a duration column.
    Duration(i128),
    /// A size with its unit (`16 KiB`), in bytes: only for a column of bytes.
    Bytes(i128),
    /// A name (`'MPI_Wait'`, or a bare word: `operation = MPI_Wait`).
    Text(String),
}

// ---------------------------------------------------------------------------------------------
// Applying the tail.

/// `r` narrowed by `tail`. Columns the clauses name are resolved first, and an unknown one is
/// refused with the result's columns; `cancel` stops a long sort.
pub fn apply(mut r: ResultSet, tail: &Tail, cancel: Option<&AtomicBool>) -> Result<ResultSet> {
    if tail.is_empty() {
        return Ok(r);
    }
    let mut footer = r.take_totals();
    if let Some(p) = &tail.filter {
        r.rows = filter_rows(&r.columns, std::mem::take(&mut r.rows), p, "WHERE")?;
    }
    if let Some(g) = &tail.group {
        r = group(&r, g)?;
        footer.clear();
    }
    if let Some(p) = &tail.having {
        r.rows = filter_rows(&r.columns, std::mem::take(&mut r.rows), p, "HAVING")?;
    }
    if !tail.order_by.is_empty() {
        let keys = resolve_order(&r.columns, &tail.order_by)?;
        let rows = std::mem::take(&mut r.rows);
        r.rows = sort_rows(rows, |a, b| compare_by(&keys, a, b), cancel)?;
    }
    if let Some(n) = tail.limit {
        r.rows.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    for row in footer {
        r.push_total(row);
    }
    Ok(r)
}

/// The steps `EXPLAIN` shows for the tail, in the order they apply.
pub fn steps(tail: &Tail) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(p) = &tail.filter {
        out.push(format!("keep the result's rows where {p}"));
    }
    if let Some(g) = &tail.group {
        let aggs: Vec<String> = g.aggregates.iter().map(|a| a.to_string()).collect();
        if g.keys.is_empty() {
            out.push(format!("aggregate the result's rows: {}", aggs.join(", ")));
        } else {
            out.push(format!(
                "group the result's rows by {}: {}",
                g.keys.join(", "),
                aggs.join(", ")
            ));
        }
    }
    if let Some(p) = &tail.having {
        out.push(format!("keep the result's rows where {p}"));
    }
    if !tail.order_by.is_empty() {
        let keys: Vec<String> = tail.order_by.iter().map(|k| k.to_string()).collect();
        out.push(format!(
            "sort the result's rows by {} (summary rows stay last)",
            keys.join(", ")
        ));
    }
    if let Some(n) = tail.limit {
        out.push(format!("keep the first {n} rows"));
    }
    out
}

fn compare_by(keys: &[(usize, bool)], a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    for &(c, desc) in keys {
        let o = compare_values(&a[c], &b[c]);
        let o = if desc { o.reverse() } else { o };
        if o.is_ne() {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// The position of `name` among `columns` (any case; `wait` finds `wait_ns`), or an error for
/// `clause` that lists them.
fn column_of(columns: &[String], name: &str, clause: &str) -> Result<usize> {
    let find = |n: &str| columns.iter().position(|c| c.eq_ignore_ascii_case(n));
    find(name)
        .or_else(|| find(&format!("{name}_ns")))
        .ok_or_else(|| {
            Error::unknown(
                NameKind::Column,
                name,
                format!(
                    "{clause} {name}: the result has no such column; its columns are {}",
                    columns.join(", ")
                ),
            )
        })
}

/// What a column holds among `rows`: text, numbers, or both (a result whose first column
/// names some rows).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holds {
    Nothing,
    Numbers,
    Text,
    Both,
}

fn holds(rows: &[Vec<Value>], c: usize) -> Holds {
    let mut h = Holds::Nothing;
    for row in rows {
        let this = match row.get(c) {
            Some(Value::Int(_) | Value::Float(_)) => Holds::Numbers,
            Some(Value::Text(_)) => Holds::Text,
            _ => continue,
        };
        h = match (h, this) {
            (Holds::Nothing, x) => x,
            (x, y) if x == y => x,
            _ => Holds::Both,
        };
    }
    h
}

/// A predicate with its columns resolved.
enum Resolved {
    Compare(usize, CmpOp, Literal),
    IsNull(usize, bool),
    And(Vec<Resolved>),
    Or(Vec<Resolved>),
    Not(Box<Resolved>),
}

/// Resolves `p`'s columns and checks each constant against its column: a duration needs a
/// duration column and a duration column a unit (a bare number would be nanoseconds to one
/// reader and seconds to another), a size a column of bytes, a name a column of text.
fn resolve(
    columns: &[String],
    rows: &[Vec<Value>],
    p: &Predicate,
    clause: &str,
) -> Result<Resolved> {
    Ok(match p {
        Predicate::IsNull { column, negated } => {
            Resolved::IsNull(column_of(columns, column, clause)?, *negated)
        }
        Predicate::And(items) => Resolved::And(
            items
                .iter()
                .map(|x| resolve(columns, rows, x, clause))
                .collect::<Result<_>>()?,
        ),
        Predicate::Or(items) => Resolved::Or(
            items
                .iter()
                .map(|x| resolve(columns, rows, x, clause))
                .collect::<Result<_>>()?,
        ),
        Predicate::Not(a) => Resolved::Not(Box::new(resolve(columns, rows, a, clause)?)),
        Predicate::Compare { column, op, value } => {
            let c = column_of(columns, column, clause)?;
            let name = &columns[c];
            let unit = ColumnUnit::of(name);
            let held = holds(rows, c);
            let cmp = format!("{clause} {p}");
            match value {
                Literal::Text(_) if held == Holds::Numbers => {
                    return Err(Error::Usage(format!(
                        "{cmp}: column {name} holds numbers, not names"
                    )))
                }
                Literal::Text(_) => {}
                _ if held == Holds::Text => {
                    return Err(Error::Usage(format!(
                        "{cmp}: column {name} holds names; compare it with a quoted name"
                    )))
                }
                Literal::Duration(_) if !unit.is_duration() => {
                    return Err(Error::Usage(format!(
                        "{cmp}: column {name} is not a duration, and {value} is one"
                    )))
                }
                Literal::Bytes(_) if unit != ColumnUnit::Bytes => {
                    return Err(Error::Usage(format!(
                        "{cmp}: column {name} is not a size in bytes, and {value} is one"
                    )))
                }
                Literal::Number { .. } if unit.is_duration() => {
                    return Err(Error::Usage(format!(
                        "{cmp}: column {name} is a duration; give the number its unit \
                         (ns, us, ms or s: {name} > 10 us)"
                    )))
                }
                _ => {}
            }
            // A duration against seconds: the nanoseconds as a decimal of seconds.
            let value = match (value, unit) {
                (Literal::Duration(ns), ColumnUnit::Seconds) => Literal::Number {
                    units: *ns,
                    scale: 9,
                },
                _ => value.clone(),
            };
            Resolved::Compare(c, *op, value)
        }
    })
}

fn filter_rows(
    columns: &[String],
    rows: Vec<Vec<Value>>,
    p: &Predicate,
    clause: &str,
) -> Result<Vec<Vec<Value>>> {
    if p.depth() > super::ast::MAX_NESTING {
        return Err(Error::limit(
            crate::error::Limit::NestingDepth,
            format!(
                "a condition nests at most {} levels of parentheses and NOT",
                super::ast::MAX_NESTING
            ),
        ));
    }
    let resolved = resolve(columns, &rows, p, clause)?;
    Ok(rows
        .into_iter()
        .filter(|row| eval(&resolved, row) == Some(true))
        .collect())
}

/// SQL's three values: `None` is unknown.
fn eval(p: &Resolved, row: &[Value]) -> Option<bool> {
    match p {
        Resolved::IsNull(c, negated) => Some(matches!(row[*c], Value::Null) != *negated),
        Resolved::Not(a) => eval(a, row).map(|b| !b),
        Resolved::And(items) => {
            let mut unknown = false;
            for x in items {
                match eval(x, row) {
                    Some(false) => return Some(false),
                    None => unknown = true,
                    Some(true) => {}
                }
            }
            (!unknown).then_some(true)
        }
        Resolved::Or(items) => {
            let mut unknown = false;
            for x in items {
                match eval(x, row) {
                    Some(true) => return Some(true),
                    None => unknown = true,
                    Some(false) => {}
                }
            }
            (!unknown).then_some(false)
        }
        Resolved::Compare(c, op, value) => {
            let ord = compare_literal(&row[*c], value)?;
            Some(match op {
                CmpOp::Lt => ord.is_lt(),
                CmpOp::Le => ord.is_le(),
                CmpOp::Eq => ord.is_eq(),
                CmpOp::Ne => ord.is_ne(),
                CmpOp::Ge => ord.is_ge(),
                CmpOp::Gt => ord.is_gt(),
            })
        }
    }
}

/// How a cell compares with a constant; `None` (unknown) for a NULL cell, a NaN, or a cell of
/// the other kind (a name in a column of numbers, as `run` in `SIMULATE`'s ranks).
fn compare_literal(cell: &Value, value: &Literal) -> Option<std::cmp::Ordering> {
    match (cell, value) {
        (Value::Text(a), Literal::Text(b)) => Some(a.as_str().cmp(b.as_str())),
        (Value::Int(a), Literal::Duration(b) | Literal::Bytes(b)) => Some(a.cmp(b)),
        (Value::Float(a), Literal::Duration(b) | Literal::Bytes(b)) => a.partial_cmp(&(*b as f64)),
        (Value::Int(a), Literal::Number { units, scale }) => {
            // Exactly: a · 10^scale against the digits, when that fits 128 bits.
            match 10i128.checked_pow(*scale).and_then(|p| a.checked_mul(p)) {
                Some(left) => Some(left.cmp(units)),
                None => (*a as f64).partial_cmp(&decimal(*units, *scale)),
            }
        }
        (Value::Float(a), Literal::Number { units, scale }) => {
            a.partial_cmp(&decimal(*units, *scale))
        }
        _ => None,
    }
}

/// The float nearest `units / 10^scale` (parsed, so correctly rounded).
fn decimal(units: i128, scale: u32) -> f64 {
    format!("{units}e-{scale}")
        .parse()
        .unwrap_or(units as f64 / 10f64.powi(scale as i32))
}

/// One row per group of `g.keys` (sorted by key), the keys then the aggregates.
fn group(r: &ResultSet, g: &ResultGroup) -> Result<ResultSet> {
    let keys: Vec<usize> = g
        .keys
        .iter()
        .map(|k| column_of(&r.columns, k, "GROUP BY"))
        .collect::<Result<_>>()?;
    let mut measured = Vec::with_capacity(g.aggregates.len());
    let mut columns: Vec<String> = keys.iter().map(|&k| r.columns[k].clone()).collect();
    for a in &g.aggregates {
        let (name, arg) = a.parts();
        let at = match arg {
            Some(c) => {
                let at = column_of(&r.columns, c, &format!("{name}(…)"))?;
                if !matches!(a, ResultAggregate::Min(_) | ResultAggregate::Max(_))
                    && matches!(holds(&r.rows, at), Holds::Text | Holds::Both)
                {
                    return Err(Error::Usage(format!(
                        "{name}({c}): column {} holds names, which do not add up",
                        r.columns[at]
                    )));
                }
                columns.push(format!("{}({})", name.to_lowercase(), r.columns[at]));
                Some(at)
            }
            None => {
                columns.push("count(*)".into());
                None
            }
        };
        measured.push((a, at));
    }
    let mut order: Vec<&Vec<Value>> = r.rows.iter().collect();
    order.sort_by(|a, b| {
        keys.iter()
            .map(|&k| compare_values(&a[k], &b[k]))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut out = ResultSet::new(columns);
    let same =
        |a: &[Value], b: &[Value]| keys.iter().all(|&k| compare_values(&a[k], &b[k]).is_eq());
    let mut start = 0;
    // With no key there is one group, even of no rows (`COUNT(*)` is then 0).
    while start < order.len() || (keys.is_empty() && start == 0) {
        let mut end = start + 1;
        while end < order.len() && same(order[start], order[end]) {
            end += 1;
        }
        let end = end.min(order.len());
        let members = &order[start..end];
        let mut row: Vec<Value> = match members.first() {
            Some(first) => keys.iter().map(|&k| first[k].clone()).collect(),
            None => Vec::new(),
        };
        for (a, at) in &measured {
            row.push(fold(a, *at, members));
        }
        out.push(row);
        if end == start {
            break;
        }
        start = end;
    }
    Ok(out)
}

/// An aggregate over a group's rows; NULLs skipped.
fn fold(a: &ResultAggregate, at: Option<usize>, rows: &[&Vec<Value>]) -> Value {
    let Some(c) = at else {
        return Value::from(rows.len() as u64);
    };
    let values: Vec<&Value> = rows
        .iter()
        .map(|r| &r[c])
        .filter(|v| !matches!(v, Value::Null))
        .collect();
    if values.is_empty() {
        return Value::Null;
    }
    match a {
        ResultAggregate::Min(_) => values
            .iter()
            .min_by(|x, y| compare_values(x, y))
            .map_or(Value::Null, |v| (*v).clone()),
        ResultAggregate::Max(_) => values
            .iter()
            .max_by(|x, y| compare_values(x, y))
            .map_or(Value::Null, |v| (*v).clone()),
        ResultAggregate::Sum(_) | ResultAggregate::Avg(_) => {
            let ints: Option<Vec<i128>> = values
                .iter()
                .map(|v| match v {
                    Value::Int(i) => Some(*i),
                    _ => None,
                })
                .collect();
            let exact = ints.and_then(|v| v.iter().try_fold(0i128, |s, x| s.checked_add(*x)));
            let float_sum = || {
                values
                    .iter()
                    .map(|v| match v {
                        Value::Int(i) => *i as f64,
                        Value::Float(f) => *f,
                        _ => 0.0,
                    })
                    .sum::<f64>()
            };
            match (a, exact) {
                (ResultAggregate::Sum(_), Some(s)) => Value::Int(s),
                (ResultAggregate::Sum(_), None) => Value::Float(float_sum()),
                (_, Some(s)) => Value::Float(s as f64 / values.len() as f64),
                (_, None) => Value::Float(float_sum() / values.len() as f64),
            }
        }
        ResultAggregate::Count => Value::from(rows.len() as u64),
    }
}

// ---------------------------------------------------------------------------------------------
// Canonical text.

impl Predicate {
    /// How deeply parentheses and `NOT` nest in its canonical text.
    pub fn depth(&self) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(self, 0usize)];
        while let Some((e, d)) = stack.pop() {
            deepest = deepest.max(d);
            match e {
                Predicate::Compare { .. } | Predicate::IsNull { .. } => {}
                Predicate::Not(a) => {
                    let paren = usize::from(matches!(**a, Predicate::And(_) | Predicate::Or(_)));
                    stack.push((a, d + 1 + paren));
                }
                Predicate::And(items) => stack.extend(items.iter().map(|x| {
                    (
                        x,
                        d + usize::from(matches!(x, Predicate::And(_) | Predicate::Or(_))),
                    )
                })),
                Predicate::Or(items) => stack.extend(
                    items
                        .iter()
                        .map(|x| (x, d + usize::from(matches!(x, Predicate::Or(_))))),
                ),
            }
        }
        deepest
    }
}

/// A column as a statement writes it: bare when it reads back as that name, else quoted
/// (`'count(*)'`).
struct ColumnText<'a>(&'a str);

impl fmt::Display for ColumnText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bare = super::parser::is_bare_name(self.0)
            && !["AND", "OR", "NOT", "IS", "NULL"]
                .iter()
                .any(|k| self.0.eq_ignore_ascii_case(k));
        if bare {
            f.write_str(self.0)
        } else {
            write!(f, "{}", QuotedText(self.0))
        }
    }
}

/// Text in quotes: `'…'`, or `"…"` when it holds a `'`.
struct QuotedText<'a>(&'a str);

impl fmt::Display for QuotedText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.contains('\'') {
            write!(f, "\"{}\"", self.0)
        } else {
            write!(f, "'{}'", self.0)
        }
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operand = |f: &mut fmt::Formatter<'_>, e: &Predicate, paren: bool| {
            if paren {
                write!(f, "({e})")
            } else {
                write!(f, "{e}")
            }
        };
        match self {
            Predicate::Compare { column, op, value } => {
                write!(f, "{} {} {value}", ColumnText(column), op.symbol())
            }
            Predicate::IsNull { column, negated } => write!(
                f,
                "{} IS {}NULL",
                ColumnText(column),
                if *negated { "NOT " } else { "" }
            ),
            Predicate::And(items) => {
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" AND ")?;
                    }
                    operand(f, e, matches!(e, Predicate::And(_) | Predicate::Or(_)))?;
                }
                Ok(())
            }
            Predicate::Or(items) => {
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" OR ")?;
                    }
                    operand(f, e, matches!(e, Predicate::Or(_)))?;
                }
                Ok(())
            }
            Predicate::Not(e) => {
                f.write_str("NOT ")?;
                operand(f, e, matches!(**e, Predicate::And(_) | Predicate::Or(_)))
            }
        }
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = |f: &mut fmt::Formatter<'_>, v: i128| -> fmt::Result {
            if v < 0 {
                f.write_str("-")?;
            }
            Ok(())
        };
        match self {
            Literal::Number { units, scale } => {
                sign(f, *units)?;
                let digits = units.unsigned_abs().to_string();
                let scale = *scale as usize;
                if scale == 0 {
                    return f.write_str(&digits);
                }
                let digits = format!("{digits:0>width$}", width = scale + 1);
                let (int, frac) = digits.split_at(digits.len() - scale);
                write!(f, "{int}.{frac}")
            }
            Literal::Duration(ns) => {
                sign(f, *ns)?;
                match u64::try_from(ns.unsigned_abs()) {
                    Ok(v) if v != 0 => write!(f, "{}", TimeText(v)),
                    _ => write!(f, "{} ns", ns.unsigned_abs()),
                }
            }
            Literal::Bytes(b) => {
                sign(f, *b)?;
                match u64::try_from(b.unsigned_abs()) {
                    Ok(v) if v != 0 && v.is_multiple_of(1024) => write!(f, "{}", SizeText(v)),
                    _ => write!(f, "{} B", b.unsigned_abs()),
                }
            }
            Literal::Text(t) => write!(f, "{}", QuotedText(t)),
        }
    }
}

impl fmt::Display for ResultAggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            (name, None) => write!(f, "{name}(*)"),
            (name, Some(c)) => write!(f, "{name}({})", ColumnText(c)),
        }
    }
}

/// The tail's clauses, each with a leading space; a group's aggregates are printed before
/// the statement (`SELECT COUNT(*) FROM CRITICAL PATH GROUP BY rank`) by [`Statement`]'s
/// text, only its keys here.
///
/// [`Statement`]: super::Statement
impl fmt::Display for Tail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.filter {
            write!(f, " WHERE {p}")?;
        }
        if let Some(g) = &self.group {
            for (i, k) in g.keys.iter().enumerate() {
                f.write_str(if i == 0 { " GROUP BY " } else { ", " })?;
                write!(f, "{}", ColumnText(k))?;
            }
        }
        if let Some(p) = &self.having {
            write!(f, " HAVING {p}")?;
        }
        for (i, key) in self.order_by.iter().enumerate() {
            f.write_str(if i == 0 { " ORDER BY " } else { ", " })?;
            write!(f, "{key}")?;
        }
        if let Some(n) = self.limit {
            write!(f, " LIMIT {n}")?;
        }
        Ok(())
    }
}

/// The aggregates of a group, as `SELECT` lists them: `COUNT(*), SUM(on_path_ns)`.
pub(crate) fn aggregates_text(g: &ResultGroup) -> String {
    let parts: Vec<String> = g.aggregates.iter().map(|a| a.to_string()).collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{parse_statement, Statement};

    #[test]
    fn a_tail_reads_back_as_the_same_statement() {
        for text in [
            "SELECT CRITICAL PATH WHERE duration_ns > 10 us ORDER BY duration_ns DESC LIMIT 5",
            "SELECT CRITICAL PATH SUMMARY WHERE part != 'path' AND (share > 0.1 OR share IS NULL)",
            "SELECT PHASES WITH TANDEMS OFF WHERE NOT duration_s <= 1.5 ms LIMIT 2",
            "SIMULATE WITH LATENCY 2 us AS TRACE sim WHERE error > -0.05 ORDER BY 6 DESC",
            "SELECT COUNT(*), SUM(duration_ns) FROM CRITICAL PATH GROUP BY rank HAVING 'sum(duration_ns)' > 1 ms ORDER BY 2 DESC LIMIT 3",
            "EXPLAIN SELECT COUNT(*) FROM PHASES",
            "SELECT STATISTICS FOR ALL PROCESSES HAVING bytes_sent >= 16 KiB ORDER BY bytes_sent DESC LIMIT 4",
            "EXPLAIN SELECT CRITICAL PATH WHERE op = 'MPI_Wait'",
            "SELECT LATE SENDERS HAVING wait_ns > 1000 ns AND receiver = 3",
            "SELECT MPI TIME HAVING mpi_time_ns IS NOT NULL",
        ] {
            let parsed = parse_statement(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(matches!(parsed, Statement::Relation(..)), "{text}: {parsed:?}");
            let again = parse_statement(&parsed.to_string()).unwrap();
            assert_eq!(again, parsed, "{text} -> {parsed}");
        }
    }

    #[test]
    fn literals_print_as_they_read() {
        assert_eq!(
            Literal::Number {
                units: -125,
                scale: 2
            }
            .to_string(),
            "-1.25"
        );
        assert_eq!(Literal::Number { units: 5, scale: 3 }.to_string(), "0.005");
        assert_eq!(Literal::Duration(1_500).to_string(), "1500 ns");
        assert_eq!(Literal::Duration(10_000).to_string(), "10 us");
        assert_eq!(Literal::Bytes(1000).to_string(), "1000 B");
        assert_eq!(Literal::Bytes(16 * 1024).to_string(), "16 KiB");
        assert_eq!(Literal::Text("it's".into()).to_string(), "\"it's\"");
    }

    fn result() -> ResultSet {
        let mut r = ResultSet::new(["rank", "wait_ns", "name"]);
        r.push(vec![Value::Int(0), Value::Int(5_000), "a".into()]);
        r.push(vec![Value::Int(1), Value::Null, "b".into()]);
        r.push(vec![Value::Int(2), Value::Int(20_000), "a".into()]);
        r.push_total(vec!["total".into(), Value::Int(25_000), Value::Null]);
        r
    }

    fn run(text: &str) -> Result<ResultSet> {
        // The tail of `SELECT CRITICAL PATH <tail>`, applied to `result()`.
        let Statement::Relation(_, tail) =
            parse_statement(&format!("SELECT CRITICAL PATH {text}")).unwrap()
        else {
            panic!("{text}")
        };
        apply(result(), &tail, None)
    }

    #[test]
    fn a_null_is_unknown_and_the_total_stays_last() {
        let r = run("WHERE NOT wait > 10 us ORDER BY rank DESC").unwrap();
        let ranks: Vec<Value> = r.rows.iter().map(|row| row[0].clone()).collect();
        // Rank 1's wait is NULL: neither `wait > 10 us` nor its negation keeps it.
        assert_eq!(ranks, vec![Value::Int(0), "total".into()]);
        assert_eq!(r.totals, 1);
        let r = run("WHERE wait_ns IS NULL OR name = b LIMIT 0").unwrap();
        assert_eq!(r.rows.len(), 1, "the total alone");
        let r = run("ORDER BY wait LIMIT 2").unwrap();
        let ranks: Vec<Value> = r.rows.iter().map(|row| row[0].clone()).collect();
        assert_eq!(ranks, vec![Value::Int(1), Value::Int(0), "total".into()]);
    }

    #[test]
    fn groups_count_sum_and_drop_the_total() {
        let Statement::Relation(_, tail) = parse_statement(
            "SELECT COUNT(*), SUM(wait_ns), MAX(rank) FROM CRITICAL PATH GROUP BY name HAVING count(*) > 1",
        )
        .unwrap() else {
            panic!()
        };
        let r = apply(result(), &tail, None).unwrap();
        assert_eq!(r.columns, ["name", "count(*)", "sum(wait_ns)", "max(rank)"]);
        assert_eq!(
            r.rows,
            vec![vec![
                "a".into(),
                Value::Int(2),
                Value::Int(25_000),
                Value::Int(2)
            ]]
        );
        assert_eq!(r.totals, 0);
    }

    #[test]
    fn a_wrong_column_or_unit_is_refused_with_the_columns() {
        let e = run("WHERE foo > 1").unwrap_err().to_string();
        assert!(e.contains("its columns are rank, wait_ns, name"), "{e}");
        let e = run("WHERE wait_ns > 10").unwrap_err().to_string();
        assert!(e.contains("is a duration; give the number its unit"), "{e}");
        let e = run("WHERE rank > 10 us").unwrap_err().to_string();
        assert!(e.contains("column rank is not a duration"), "{e}");
        let e = run("WHERE name > 3").unwrap_err().to_string();
        assert!(e.contains("holds names"), "{e}");
        let e = run("ORDER BY nope").unwrap_err().to_string();
        assert!(e.contains("its columns are rank, wait_ns, name"), "{e}");
    }
}
