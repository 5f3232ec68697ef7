//! Ordering and limits: `ORDER BY` keys resolved against the result's columns, a stable sort
//! that stops when cancelled, and the top-k that keeps about 2k rows for `ORDER BY … LIMIT k`.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, NameKind, Result};
use crate::query::ast::{OrderColumn, OrderKey, Select};
use crate::results::{ResultSet, Value};

/// The result columns `ORDER BY` names, with whether each is descending. A name matches a
/// column of that name, or else the column of that name in nanoseconds (`ORDER BY wait` is
/// `ORDER BY wait_ns`).
pub(crate) fn order_keys(columns: &[String], s: &Select) -> Result<Vec<(usize, bool)>> {
    resolve_order(columns, &s.order_by)
}

/// [`order_keys`] of any list of keys (a statement's, or the relational tail's).
pub(crate) fn resolve_order(columns: &[String], keys: &[OrderKey]) -> Result<Vec<(usize, bool)>> {
    let column = |name: &str| columns.iter().position(|c| c.eq_ignore_ascii_case(name));
    keys.iter()
        .map(|k| {
            let col = match &k.column {
                OrderColumn::Name(n) => column(n).or_else(|| column(&format!("{n}_ns"))),
                OrderColumn::Aggregate(a) => column(&a.to_string()),
                OrderColumn::Position(p) => {
                    (*p as usize).checked_sub(1).filter(|i| *i < columns.len())
                }
            }
            .ok_or_else(|| {
                Error::unknown(
                    NameKind::Column,
                    k.column_text(),
                    format!(
                        "ORDER BY {}: the result has no such column; its columns are {}",
                        k.column_text(),
                        columns.join(", ")
                    ),
                )
            })?;
            Ok((col, k.descending))
        })
        .collect()
}

/// Whether `ORDER BY` names an operation's wait (`wait` or `wait_ns`), a column operation
/// rows carry only when the statement reads `WAIT`.
pub(crate) fn orders_by_wait(s: &Select) -> bool {
    s.order_by.iter().any(|k| {
        matches!(&k.column, OrderColumn::Name(n)
            if n.eq_ignore_ascii_case("wait") || n.eq_ignore_ascii_case(super::WAIT_COLUMN))
    })
}

/// Orders two result rows by `keys`.
fn compare_rows(keys: &[(usize, bool)], a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    for &(c, desc) in keys {
        let o = compare_values(&a[c], &b[c]);
        let o = if desc { o.reverse() } else { o };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// The `k` first rows in `keys` order of everything pushed, ties kept in the order pushed,
/// holding at most about 2k rows: the same rows, in the same order, as a stable sort of all
/// of them cut to k. A `k` past what the input holds (`LIMIT 18446744073709551615`) keeps
/// every row and sorts once at the end, as `ORDER BY` without a limit does.
pub(crate) struct TopK {
    keys: Vec<(usize, bool)>,
    k: usize,
    /// Rows held before they are sorted and cut to `k`; saturating, so that a huge `k`
    /// never wraps to a small bound (which sorted everything held at every row).
    bound: usize,
    rows: Vec<Vec<Value>>,
}

impl TopK {
    /// The top `k` rows by `keys`.
    pub(crate) fn new(keys: Vec<(usize, bool)>, k: usize) -> TopK {
        TopK {
            keys,
            k,
            bound: k.saturating_mul(2).saturating_add(1024),
            rows: Vec::new(),
        }
    }

    /// Takes `row` in; sorts and cuts (stopping when `cancel` is set) when `bound` are held.
    pub(crate) fn push(&mut self, row: Vec<Value>, cancel: Option<&AtomicBool>) -> Result<()> {
        self.rows.push(row);
        if self.rows.len() >= self.bound {
            self.cut(cancel)?;
        }
        Ok(())
    }

    fn cut(&mut self, cancel: Option<&AtomicBool>) -> Result<()> {
        let keys = &self.keys;
        let rows = std::mem::take(&mut self.rows);
        self.rows = sort_rows(rows, |a, b| compare_rows(keys, a, b), cancel)?;
        self.rows.truncate(self.k);
        Ok(())
    }

    /// The first `k` rows, in order.
    pub(crate) fn into_rows(mut self, cancel: Option<&AtomicBool>) -> Result<Vec<Vec<Value>>> {
        self.cut(cancel)?;
        Ok(self.rows)
    }
}

/// A computed result ordered and cut as `s` says, through the relational tail: its summary
/// rows (`total`) stay last.
pub(crate) fn order_and_limit(
    r: ResultSet,
    s: &Select,
    cancel: Option<&AtomicBool>,
) -> Result<ResultSet> {
    let tail = crate::query::relation::Tail {
        order_by: s.order_by.clone(),
        limit: s.limit,
        ..Default::default()
    };
    crate::query::relation::apply(r, &tail, cancel)
}

/// Rows a sort orders between two looks at the cancellation flag.
const SORT_RUN: usize = 1 << 16;

/// A stable sort of `rows` by `cmp` that stops with [`Error::Cancelled`] soon after `cancel` is
/// set: runs of [`SORT_RUN`] rows are sorted, then merged pairwise, the flag checked between
/// runs and merges.
pub(crate) fn sort_rows<T>(
    mut rows: Vec<T>,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
    cancel: Option<&AtomicBool>,
) -> Result<Vec<T>> {
    let check = || match cancel {
        Some(f) if f.load(Ordering::Relaxed) => Err(Error::Cancelled),
        _ => Ok(()),
    };
    if rows.len() <= SORT_RUN {
        check()?;
        rows.sort_by(&cmp);
        return Ok(rows);
    }
    let mut runs: Vec<Vec<T>> = Vec::new();
    while !rows.is_empty() {
        check()?;
        let rest = rows.split_off(rows.len().min(SORT_RUN));
        let mut run = std::mem::replace(&mut rows, rest);
        run.sort_by(&cmp);
        runs.push(run);
    }
    // Each pass merges neighbouring runs, the earlier one first on ties: the sort is stable.
    while runs.len() > 1 {
        let mut next = Vec::with_capacity(runs.len().div_ceil(2));
        let mut pass = runs.into_iter();
        while let Some(a) = pass.next() {
            let Some(b) = pass.next() else {
                next.push(a);
                break;
            };
            let mut merged = Vec::with_capacity(a.len() + b.len());
            let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
            loop {
                if merged.len() % SORT_RUN == 0 {
                    check()?;
                }
                let take_a = match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) => cmp(y, x) != std::cmp::Ordering::Less,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                merged.extend(if take_a { a.next() } else { b.next() });
            }
            next.push(merged);
        }
        runs = next;
    }
    Ok(runs.pop().unwrap_or_default())
}

pub(crate) fn compare_values(a: &Value, b: &Value) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (Value::Int(x), Value::Float(y)) => float_cmp(*x, *y),
        (Value::Float(x), Value::Int(y)) => float_cmp(*y, *x).reverse(),
        (Value::Text(x), Value::Text(y)) => x.cmp(y),
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Text(_), _) => Ordering::Greater,
        (_, Value::Text(_)) => Ordering::Less,
    }
}

/// An integer against a float (NaN equal to everything, as elsewhere in the ordering).
fn float_cmp(x: i128, y: f64) -> std::cmp::Ordering {
    (x as f64)
        .partial_cmp(&y)
        .unwrap_or(std::cmp::Ordering::Equal)
}

impl crate::query::ast::OrderKey {
    fn column_text(&self) -> String {
        match &self.column {
            OrderColumn::Name(n) => n.clone(),
            OrderColumn::Aggregate(a) => a.to_string(),
            OrderColumn::Position(p) => p.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: i128) -> Vec<Vec<Value>> {
        (0..n)
            .map(|i| vec![Value::Int((i * 7919) % 1000), Value::Int(i)])
            .collect()
    }

    #[test]
    fn a_limit_past_the_input_holds_every_row_and_sorts_them_once() {
        for k in [usize::MAX, usize::MAX / 2, usize::MAX / 2 + 1] {
            let mut top = TopK::new(vec![(0, true)], k);
            for row in rows(100_000) {
                top.push(row, None).unwrap();
            }
            // Not cut on the way: a bound that wrapped cut (sorted) at every row.
            assert_eq!(top.rows.len(), 100_000, "k = {k}");
            let mut want = rows(100_000);
            want.sort_by(|a, b| compare_rows(&[(0, true)], a, b));
            assert!(top.into_rows(None).unwrap() == want, "k = {k}");
        }
    }

    #[test]
    fn the_sort_of_a_huge_limit_stops_when_cancelled() {
        let cancel = AtomicBool::new(false);
        let mut top = TopK::new(vec![(0, false)], usize::MAX);
        for row in rows(1000) {
            top.push(row, Some(&cancel)).unwrap();
        }
        cancel.store(true, Ordering::Relaxed);
        assert!(matches!(
            top.into_rows(Some(&cancel)),
            Err(Error::Cancelled)
        ));
    }
}
