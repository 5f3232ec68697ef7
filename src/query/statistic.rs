//! The MTF paper's statistics as statements: fan-in and fan-out, the per-process table, time
//! in MPI, the communication matrix and histograms, over the whole trace (from what import
//! kept) or over the rows a selection reads.

use super::ast::{Bins, Filter, MatrixMeasure, Scope, Select, Selection, Statistic, Target};
use super::exec::{measure, Row};
use super::plan::{Engine, PlanStep};
use super::usage;
use crate::analysis::stats;
use crate::error::{Error, Limit, Result};
use crate::model::{Message, Operation, Rank};
use crate::results::ResultSet;

impl<'a> Engine<'a> {
    /// Runs (or plans, for `EXPLAIN`) statistic `statistic` of `SELECT` `s`.
    pub(crate) fn statistic(
        &self,
        s: &Select,
        statistic: Statistic,
        target: Option<Target>,
        filter: &Filter,
    ) -> Result<(ResultSet, Vec<PlanStep>)> {
        let all: Vec<Rank> = (0..self.trace.header().processes.len() as Rank).collect();
        let fixed_ranks = |name: &str| -> Result<Vec<Rank>> {
            if !filter.within.is_empty() || filter.time.is_some() || filter.predicate.is_some() {
                return Err(usage(format!(
                    "{name} is computed per process over the whole trace; it takes FOR or AMONG a set of processes only"
                )));
            }
            match &filter.scope {
                None => Ok(all.clone()),
                Some(scope) => self.scope_ranks(scope),
            }
        };
        let plan_of = |what: &str, n: usize| {
            vec![PlanStep {
                step: what.to_string(),
                estimated: n as u64,
                actual: Some(n as u64),
            }]
        };
        if self.plan_only {
            // The statistics kept at import or computed per process: name the step, run nothing.
            let per_process = |name: &str, what: &str| -> Result<(ResultSet, Vec<PlanStep>)> {
                let n = fixed_ranks(name)?.len() as u64;
                let step = PlanStep {
                    step: what.to_string(),
                    estimated: n,
                    actual: None,
                };
                Ok((ResultSet::new(Vec::<String>::new()), vec![step]))
            };
            match statistic {
                Statistic::FanIn => {
                    return per_process(
                        "FAN_IN",
                        "scan messages and collective operations per process",
                    )
                }
                Statistic::FanOut => {
                    return per_process(
                        "FAN_OUT",
                        "scan messages and collective operations per process",
                    )
                }
                Statistic::MpiTime => {
                    return per_process("MPI TIME", "sum operation durations per process")
                }
                Statistic::Statistics
                    if filter.within.is_empty()
                        && filter.time.is_none()
                        && filter.predicate.is_none() =>
                {
                    return per_process(
                        "STATISTICS",
                        "count operations per process and kind; bytes per process",
                    )
                }
                Statistic::Matrix(_)
                    if filter.is_empty() && target.is_none_or(|t| t == Target::Messages) =>
                {
                    let n = all.len() as u64;
                    let step = PlanStep {
                        step: "message counts and bytes per pair, kept at import".into(),
                        estimated: n,
                        actual: None,
                    };
                    return Ok((ResultSet::new(Vec::<String>::new()), vec![step]));
                }
                // The others select rows, which plan-only reading leaves unread.
                _ => {}
            }
        }
        Ok(match statistic {
            Statistic::FanIn | Statistic::FanOut => {
                let ranks = fixed_ranks(if statistic == Statistic::FanIn {
                    "FAN_IN"
                } else {
                    "FAN_OUT"
                })?;
                let traffic = stats::process_traffic(self.trace)?;
                let dir = if statistic == Statistic::FanIn {
                    stats::Direction::In
                } else {
                    stats::Direction::Out
                };
                let r = stats::fan_table(&traffic, &ranks, dir);
                let n = r.len();
                (
                    r,
                    plan_of("scan messages and collective operations per process", n),
                )
            }
            Statistic::Statistics
                if !filter.within.is_empty()
                    || filter.time.is_some()
                    || filter.predicate.is_some() =>
            {
                // Over the operations the clauses select (a phase, a pattern, a time window).
                let ranks = match &filter.scope {
                    Some(scope) => self.scope_ranks(scope)?,
                    None => all.clone(),
                };
                let sel = Selection {
                    target: Target::Operations,
                    filter: filter.clone(),
                };
                let mut selected = self.select_ids(&sel)?;
                let ops: Vec<Operation> =
                    self.collect_rows(&sel, &mut selected, |row| match row {
                        Row::Op(_, o, _) => Some(o),
                        Row::Msg(..) | Row::Burst(..) | Row::Record(..) => None,
                    })?;
                (
                    stats::statistics_table_of(self.trace, &ranks, &ops),
                    selected.plan,
                )
            }
            Statistic::Statistics => {
                let ranks = fixed_ranks("STATISTICS")?;
                let r = stats::statistics_table(self.trace, &ranks)?;
                let n = r.len();
                (
                    r,
                    plan_of(
                        "count operations per process and kind; bytes per process",
                        n,
                    ),
                )
            }
            Statistic::MpiTime => {
                let ranks = fixed_ranks("MPI TIME")?;
                let r = stats::mpi_time(self.trace, &ranks)?;
                let n = r.len();
                (r, plan_of("sum operation durations per process", n))
            }
            Statistic::Matrix(of) => {
                let (cells, plan) = self.matrix_cells(of, target, filter)?;
                (cells.to_result_set(), plan)
            }
            Statistic::WaitStates(by) => self.wait_states_table(by, target, filter)?,
            Statistic::LateSenders => self.late_senders(s, target, filter)?,
            Statistic::Histogram { of, bins } => {
                let sel = Selection {
                    target: target.unwrap_or(Target::Messages),
                    filter: filter.clone(),
                };
                let mut selected = self.select_ids(&sel)?;
                let values: Vec<u64> =
                    self.collect_rows(&sel, &mut selected, |row| Some(measure(&row, of)))?;
                let bins = match bins {
                    Bins::Log2 => stats::Bins::Log2,
                    Bins::Count(n) if n > super::parser::MAX_BINS => {
                        return Err(Error::limit(
                            Limit::HistogramBins,
                            format!(
                                "a histogram has at most {} bins, BINS asks for {n}",
                                super::parser::MAX_BINS
                            ),
                        ))
                    }
                    Bins::Count(n) => stats::Bins::Linear(n),
                };
                (stats::size_histogram(&values, bins), selected.plan)
            }
        })
    }

    /// The cells with traffic of `COMMUNICATION MATRIX OF of` over `target` and `filter`: from
    /// the pair counts kept at import for the whole trace, else from the selected messages.
    pub(crate) fn matrix_cells(
        &self,
        of: MatrixMeasure,
        target: Option<Target>,
        filter: &Filter,
    ) -> Result<(stats::MatrixCells, Vec<PlanStep>)> {
        let of = match of {
            MatrixMeasure::Bytes => stats::MatrixOf::Bytes,
            MatrixMeasure::Count => stats::MatrixOf::Count,
        };
        let all: Vec<Rank> = (0..self.trace.header().processes.len() as Rank).collect();
        if filter.is_empty() && target.is_none_or(|t| t == Target::Messages) {
            let cells = stats::trace_matrix_cells(self.trace, &all, of)?;
            let n = cells.ranks.len() as u64;
            let plan = vec![PlanStep {
                step: "message counts and bytes per pair, kept at import".into(),
                estimated: n,
                actual: Some(n),
            }];
            return Ok((cells, plan));
        }
        let sel = Selection {
            target: target.unwrap_or(Target::Messages),
            filter: filter.clone(),
        };
        if sel.target != Target::Messages {
            return Err(usage("a COMMUNICATION MATRIX is computed over messages"));
        }
        let mut selected = self.select_ids(&sel)?;
        let messages: Vec<Message> = self.collect_rows(&sel, &mut selected, |row| match row {
            Row::Msg(_, m) => Some(m),
            Row::Op(..) | Row::Burst(..) | Row::Record(..) => None,
        })?;
        let ranks = match &filter.scope {
            Some(Scope::For(s) | Scope::Among(s)) => self.ranks(s)?,
            _ => all,
        };
        Ok((
            stats::communication_matrix_cells(&messages, &ranks, of),
            selected.plan,
        ))
    }
}
