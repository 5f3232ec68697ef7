//! Hardware counters on the rows of calls (operations and routine calls): the trace's
//! counters as columns ([`catalog::counter_columns`]), the names a statement gives them, and
//! each row's values, read from the store with the row's chunk, one chunk at a time.
//!
//! [`catalog::counter_columns`]: crate::query::catalog::counter_columns

use std::sync::Arc;

use super::Row;
use crate::error::{Error, NameKind, Result};
use crate::hash::FxHashMap;
use crate::model::Metric;
use crate::query::ast::{CounterName, Expr, Field, Target};
use crate::query::catalog::counter_columns;
use crate::query::plan::Engine;
use crate::store::counters::ChunkCounters;
use crate::store::ids::chunk_and_row;

/// A call's values, one per counter of its trace (`None`: no sample of it); empty when the
/// statement reads no counters.
pub(crate) type CallCounters = crate::store::counters::CallValues;

/// The counters the rows of a selection carry.
#[derive(Debug)]
pub(crate) struct Counters {
    /// Routine calls' (else operations').
    routines: bool,
    /// The trace's counters, in the order of their values.
    pub(crate) metrics: Vec<Metric>,
    /// Each counter's column.
    pub(crate) columns: Vec<String>,
}

impl Counters {
    /// The counter a statement names `name`: by its name (as `SELECT METRICS` lists it) or
    /// its column's, in any case; the first of that name.
    pub(crate) fn index(&self, name: &str) -> Option<usize> {
        self.metrics
            .iter()
            .position(|m| m.name.eq_ignore_ascii_case(name))
            .or_else(|| {
                self.columns
                    .iter()
                    .position(|c| c.eq_ignore_ascii_case(name))
            })
    }

    /// Gives each of `rows` (operations or routine calls, in chunk order) its values, reading
    /// each chunk's counters once.
    pub(crate) fn attach(&self, engine: &Engine, rows: &mut [Row]) -> Result<()> {
        let n = self.metrics.len();
        let mut loaded: Option<(u32, ChunkCounters)> = None;
        for row in rows {
            let (id, slot) = match row {
                Row::Op(id, _, c) if !self.routines => (*id, c),
                Row::Record(id, r) if self.routines => (*id, &mut r.counters),
                _ => continue,
            };
            // An operation's id and a routine call's position are both chunk * 2^16 + row.
            let chunk = chunk_and_row(id).0;
            let values = match &loaded {
                Some((c, values)) if *c == chunk => values,
                _ => {
                    let values = if self.routines {
                        engine.trace.routine_counters(chunk, n)?
                    } else {
                        engine.trace.operation_counters(chunk, n)?
                    };
                    &loaded.insert((chunk, values)).1
                }
            };
            *slot = values.values(id);
        }
        Ok(())
    }
}

/// The value of counter `i` of `row`, if the row is a call with a sample of it.
pub(crate) fn counter_of(row: &Row, i: usize) -> Option<i64> {
    let values = match row {
        Row::Op(_, _, c) => c,
        Row::Record(_, r) => &r.counters,
        Row::Msg(..) | Row::Burst(..) => return None,
    };
    values.get(i).copied().flatten()
}

/// The counters a condition names.
fn named_in(p: &Expr) -> Vec<CounterName> {
    let mut out = Vec::new();
    let mut stack = vec![p];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Compare(c) => {
                if let Field::Counter(name) = c.field {
                    out.push(name);
                }
            }
            Expr::And(items) | Expr::Or(items) => stack.extend(items),
            Expr::Not(a) => stack.push(a),
        }
    }
    out
}

/// Whether a condition names a counter.
pub(crate) fn reads_counters(p: Option<&Expr>) -> bool {
    p.is_some_and(|p| !named_in(p).is_empty())
}

impl Engine<'_> {
    /// The counters the rows of `target` carry: `None` when they are not calls or the trace
    /// recorded no counter.
    pub(crate) fn counters_of(&self, target: Target) -> Result<Option<Arc<Counters>>> {
        if !target.has_counters() {
            return Ok(None);
        }
        let metrics = self.trace.metrics()?;
        if metrics.is_empty() {
            return Ok(None);
        }
        Ok(Some(Arc::new(Counters {
            routines: target == Target::RoutineCalls,
            columns: counter_columns(&metrics),
            metrics,
        })))
    }

    /// The index among `counters` (those of `target`'s rows) of the counter `name` that
    /// aggregate `what` reads (`SUM(PAPI_TOT_CYC)`); an error naming the trace's counters if
    /// it has none of that name, or if `target`'s rows are no calls.
    pub(crate) fn counter_index(
        &self,
        target: Target,
        counters: Option<&Counters>,
        name: CounterName,
        what: &str,
    ) -> Result<usize> {
        let missing = format!("{what}: no counter {name}");
        self.resolve(target, counters, name, what, &missing)
    }

    /// [`Engine::counter_index`] of what `what` reads, with `missing` saying what is wrong
    /// when there is no such counter (the list of the trace's counters follows it).
    fn resolve(
        &self,
        target: Target,
        counters: Option<&Counters>,
        name: CounterName,
        what: &str,
        missing: &str,
    ) -> Result<usize> {
        if !target.has_counters() {
            return Err(Error::Usage(format!(
                "{what}: counters are kept per operation and per routine call; {target} has none"
            )));
        }
        if let Some(i) = counters.and_then(|c| c.index(name.as_str())) {
            return Ok(i);
        }
        let has = match counters {
            Some(c) => {
                let names: Vec<&str> = c.metrics.iter().map(|m| m.name.as_str()).collect();
                format!("the trace's counters are {}", names.join(", "))
            }
            None => "the trace has no counters".to_string(),
        };
        Err(Error::unknown(
            NameKind::Counter,
            name.as_str().to_string(),
            format!("{missing} ({has}; SELECT METRICS lists them)"),
        ))
    }

    /// The counters a condition on `target`'s rows names, resolved against `counters` (see
    /// [`Engine::counter_index`]) before any row is read.
    pub(crate) fn predicate_counters(
        &self,
        target: Target,
        counters: Option<&Counters>,
        p: Option<&Expr>,
    ) -> Result<FxHashMap<CounterName, usize>> {
        let fields = if target == Target::RoutineCalls {
            "DURATION, DEPTH"
        } else {
            "SIZE, SENT, RECEIVED, TAG, SENDER, RECEIVER, DURATION, PEER, ROOT, COMM, WAIT"
        };
        let mut out = FxHashMap::default();
        for name in p.map(named_in).unwrap_or_default() {
            // The name may as well be a misspelt field: say both.
            let missing = format!(
                "WHERE {name}: {name} is neither a field of {target} ({fields}) nor a counter \
                 of the trace"
            );
            let what = format!("WHERE {name}");
            out.insert(name, self.resolve(target, counters, name, &what, &missing)?);
        }
        Ok(out)
    }
}
