//! Pattern, phase, loop and topology statements: each runs its analysis (or reads the result
//! stored before with the same parameters) and renders what it found as rows.

use super::ast::Analysis;
use super::catalog;
use super::names::{known_rank, phase_ids};
use super::plan::{Engine, PlanStep};
use super::session::Session;
use super::usage;
use crate::analysis::clock::{self, ClockCorrection, ClockMap};
use crate::analysis::critical_path::{self, Activity, CriticalPath};
use crate::analysis::delay_costs::{self, DelayCosts};
use crate::analysis::detection::{self, PatternParams, PhaseParams};
use crate::analysis::profile::{self, ProfileBy};
use crate::analysis::structure::TopologyParams;
use crate::analysis::waits::{waits_key, WaitStates};
use crate::analysis::{replay, structure, time_bins};
use crate::error::{Error, Result};
use crate::model::{Rank, Time};
use crate::results::{ResultSet, Value};
use crate::Trace;

/// `EXPLAIN`'s step for the clock map of `correction`: read back, or estimated from the
/// messages first.
pub(super) fn clock_step(trace: &crate::Trace, correction: ClockCorrection) -> Result<String> {
    Ok(
        if trace
            .result::<ClockMap>(&clock::map_key(correction))?
            .is_some()
        {
            format!("read the stored clock map ({correction})")
        } else {
            format!("estimate the clock map ({correction}) from the messages and synchronizing collectives (then stored)")
        },
    )
}

/// Nanoseconds as seconds; null in an untimed trace, whose times are only its order.
fn seconds(trace: &crate::Trace, ns: Time) -> Value {
    if trace.header().untimed {
        Value::Null
    } else {
        (ns as f64 / 1e9).into()
    }
}

/// `1, 5, 8` with at most `max` items, then `… (n in all)`.
fn list_text<T: std::fmt::Display>(items: &[T], max: usize) -> String {
    let shown: Vec<String> = items.iter().take(max).map(|x| x.to_string()).collect();
    let mut s = shown.join(", ");
    if items.len() > max {
        s.push_str(&format!(", … ({} in all)", items.len()));
    }
    s
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut} …")
}

/// `SELECT CRITICAL PATH SUMMARY`: the path's length and imbalance, each rank's time on it
/// (ranks that are on it), and each activity's time on it beside the average rank's.
fn critical_path_summary(
    path: &CriticalPath,
    ranks: u32,
    activity: impl Fn(Option<crate::model::OpKind>) -> Value,
) -> ResultSet {
    let mut r = ResultSet::new([
        "part",
        "on_path_ns",
        "share",
        "average_per_rank_ns",
        "imbalance_ns",
    ]);
    let length = path.length();
    let share = |t: Time| -> Value {
        if length == 0 {
            Value::Null
        } else {
            (t as f64 / length as f64).into()
        }
    };
    r.push(vec![
        "path".into(),
        length.into(),
        share(length),
        Value::Null,
        path.imbalance().into(),
    ]);
    for (rank, t) in path.per_rank(ranks).into_iter().enumerate() {
        if t > 0 {
            r.push(vec![
                format!("rank {rank}").into(),
                t.into(),
                share(t),
                Value::Null,
                Value::Null,
            ]);
        }
    }
    for (class, t) in path.per_activity() {
        let average = path
            .averages
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(0, |a| a.1);
        r.push(vec![
            activity(class),
            t.into(),
            share(t),
            average.into(),
            t.saturating_sub(average).into(),
        ]);
    }
    r
}

/// `SIMULATE`'s rows: per rank its measured and predicted end and time in MPI, then the run.
fn simulation_rows(p: &replay::Prediction) -> ResultSet {
    let mut r = ResultSet::new([
        "rank",
        "measured_end_ns",
        "predicted_end_ns",
        "measured_mpi_ns",
        "predicted_mpi_ns",
        "error",
        "unresolved_calls",
    ]);
    for rank in &p.ranks {
        r.push(vec![
            rank.rank.into(),
            rank.end.0.into(),
            rank.end.1.into(),
            rank.mpi.0.into(),
            rank.mpi.1.into(),
            replay::relative_error(rank.end.0, rank.end.1).into(),
            rank.unresolved.into(),
        ]);
    }
    let mpi = p.mpi;
    r.push_total(vec![
        "run".into(),
        p.run.0.into(),
        p.run.1.into(),
        mpi.0.into(),
        mpi.1.into(),
        p.error().into(),
        p.unresolved.into(),
    ]);
    r
}

/// `SELECT DELAY COSTS`' rows: one per delaying rank, activity and call path, the costliest
/// first (all of them, or those of `rank`).
pub(crate) fn delay_cost_rows(trace: &Trace, costs: &DelayCosts, rank: Option<Rank>) -> ResultSet {
    let mut r = ResultSet::new([
        "rank",
        "activity",
        "call_path",
        "short_term_ns",
        "long_term_ns",
        "total_ns",
        "waits",
    ]);
    for c in costs
        .rows
        .iter()
        .filter(|c| rank.is_none_or(|k| k == c.rank))
    {
        r.push(vec![
            c.rank.into(),
            match c.activity {
                None => "computation".into(),
                Some(kind) => trace.kind_name(kind).into(),
            },
            if c.call_path.is_empty() {
                Value::Null
            } else {
                c.call_path.clone().into()
            },
            c.short_term.into(),
            c.long_term.into(),
            c.total().into(),
            c.waits.into(),
        ]);
    }
    r
}

/// `SELECT NETWORK MODEL`'s rows: each fitted parameter, the fit, and the `SIMULATE`
/// statement that replays on it.
fn network_fit_rows(fit: &replay::fit::NetworkFit) -> ResultSet {
    let mut r = ResultSet::new(["parameter", "value", "unit"]);
    let mut row = |name: &str, value: Value, unit: &str| {
        r.push(vec![name.into(), value, unit.into()]);
    };
    match &fit.model {
        Some(net) => {
            if fit.overhead_known {
                row("latency", net.latency.into(), "ns");
                row("overhead", net.overhead.into(), "ns");
            } else {
                row("latency", net.latency.into(), "ns: L + 2o");
                row(
                    "overhead",
                    Value::Null,
                    "unknown: no point-to-point call shows it apart, nor an Alltoall whose members entered apart",
                );
            }
            row("bandwidth", net.bandwidth.into(), "B/s");
            row("gap per byte", fit.ns_per_byte.into(), "ns/B");
        }
        None => row(
            "latency",
            Value::Null,
            "too few message sizes to fit (two are needed)",
        ),
    }
    row("messages", fit.messages.into(), "");
    row("message sizes", fit.sizes.into(), "");
    row("fit error (rms)", fit.error.into(), "relative");
    if let Some(net) = &fit.model {
        let statement = Analysis::Simulate {
            network: *net,
            as_trace: None,
        };
        row("statement", statement.to_string().into(), "");
    }
    r
}

/// The trace-level scope of a profile or time-binned statement: its ranks and window.
fn profile_scope(
    trace: &crate::Trace,
    scope: &crate::query::ast::AnalysisScope,
) -> Result<profile::Scope> {
    Ok(profile::Scope {
        ranks: match &scope.ranks {
            Some(selector) => Some(Engine::new(trace).ranks(selector)?),
            None => None,
        },
        window: scope.time.map(|w| (w.start, w.end)),
    })
}

/// `SELECT PROFILE`'s rows: per routine (or call path), per rank when asked, the process
/// first, then by exclusive time (call paths in tree order).
fn profile_rows(trace: &crate::Trace, p: &profile::Profile, per_process: bool) -> ResultSet {
    let leave_out = catalog::profile_leave_out(p.by, per_process);
    let mut r = ResultSet::new(catalog::column_names(catalog::PROFILE_COLUMNS, &leave_out));
    // Each key's node and, by call path, the names of its chain.
    let mut rows: Vec<(
        Option<Rank>,
        Vec<String>,
        profile::Node,
        profile::ProfileRow,
    )> = p
        .rows
        .iter()
        .map(|(&(rank, key), row)| {
            let (node, chain) = match p.by {
                ProfileBy::Routine => {
                    let node = p.paths.node(key);
                    (node, vec![node.name(trace)])
                }
                ProfileBy::CallPath => {
                    let chain = p.paths.chain(key);
                    let node = chain.last().copied().unwrap_or(profile::Node::Process);
                    (node, chain.iter().map(|n| n.name(trace)).collect())
                }
            };
            (rank, chain, node, *row)
        })
        .collect();
    rows.sort_by(|a, b| {
        let root = |n: &profile::Node| *n != profile::Node::Process;
        a.0.cmp(&b.0)
            .then_with(|| root(&a.2).cmp(&root(&b.2)))
            .then_with(|| match p.by {
                ProfileBy::Routine => b.3.exclusive.cmp(&a.3.exclusive),
                ProfileBy::CallPath => std::cmp::Ordering::Equal,
            })
            .then_with(|| a.1.cmp(&b.1))
    });
    for (rank, chain, node, row) in rows {
        let mut out: Vec<Value> = Vec::with_capacity(8);
        if let Some(rank) = rank {
            out.push(rank.into());
        }
        let name = if chain.is_empty() {
            profile::PROCESS.to_string()
        } else {
            chain.join(" > ")
        };
        out.extend([
            name.into(),
            node.kind().into(),
            row.calls.into(),
            row.inclusive.into(),
            row.exclusive.into(),
            row.mpi.into(),
            row.computation.into(),
        ]);
        r.push(out);
    }
    r
}

/// `SELECT TIME PROFILE`'s rows: per bin, each routine's or MPI call's time in it (the
/// names with time in the bin), the most first.
fn time_profile_rows(trace: &crate::Trace, t: Option<&time_bins::TimeProfile>) -> ResultSet {
    let mut r = ResultSet::new(catalog::column_names(catalog::TIME_PROFILE_COLUMNS, &[]));
    let Some(t) = t else { return r };
    let names: Vec<(String, &str)> = (0..t.paths.node_count() as u32)
        .map(|id| {
            let node = t.paths.node(id);
            (node.name(trace), node.kind())
        })
        .collect();
    for k in 0..t.bins.n {
        let mut cells: Vec<(Time, usize)> = t
            .time
            .iter()
            .enumerate()
            .filter_map(|(node, bins)| bins.get(k as usize).filter(|&&v| v > 0).map(|&v| (v, node)))
            .collect();
        cells.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| names[a.1].0.cmp(&names[b.1].0)));
        for (time, node) in cells {
            r.push(vec![
                k.into(),
                t.bins.bound(k).into(),
                t.bins.bound(k + 1).into(),
                names[node].0.clone().into(),
                names[node].1.into(),
                time.into(),
            ]);
        }
    }
    r
}

/// `SELECT COMMUNICATION OVER TIME`'s rows: every bin with the messages sent in it.
fn comm_over_time_rows(c: Option<&time_bins::CommOverTime>) -> ResultSet {
    let mut r = ResultSet::new(catalog::column_names(catalog::COMM_OVER_TIME_COLUMNS, &[]));
    let Some(c) = c else { return r };
    for k in 0..c.bins.n {
        r.push(vec![
            k.into(),
            c.bins.bound(k).into(),
            c.bins.bound(k + 1).into(),
            c.messages[k as usize].into(),
            c.bytes[k as usize].into(),
        ]);
    }
    r
}

/// A relative what-if's rows: per rank (then the run) the measured end and MPI time, the
/// replay on the fitted network, and the replay on the changed one, with the change from
/// the fitted replay and the fitted replay's own error against the measurement.
fn what_if_rows(fitted: &replay::Prediction, changed: &replay::Prediction) -> ResultSet {
    let mut r = ResultSet::new([
        "rank",
        "measured_end_ns",
        "fitted_end_ns",
        "predicted_end_ns",
        "measured_mpi_ns",
        "fitted_mpi_ns",
        "predicted_mpi_ns",
        "change",
        "fitted_error",
    ]);
    let change = |before: Time, after: Time| -> Value {
        if before == 0 {
            Value::Null
        } else {
            (after as f64 / before as f64 - 1.0).into()
        }
    };
    for (f, c) in fitted.ranks.iter().zip(&changed.ranks) {
        r.push(vec![
            f.rank.into(),
            f.end.0.into(),
            f.end.1.into(),
            c.end.1.into(),
            f.mpi.0.into(),
            f.mpi.1.into(),
            c.mpi.1.into(),
            change(f.end.1, c.end.1),
            replay::relative_error(f.end.0, f.end.1).into(),
        ]);
    }
    r.push(vec![
        "run".into(),
        fitted.run.0.into(),
        fitted.run.1.into(),
        changed.run.1.into(),
        fitted.mpi.0.into(),
        fitted.mpi.1.into(),
        changed.mpi.1.into(),
        change(fitted.run.1, changed.run.1),
        fitted.error().into(),
    ]);
    r
}

/// The network fitted to `trace`, which a relative what-if changes.
fn fitted_network(trace: &crate::Trace) -> Result<replay::network::NetworkModel> {
    let fit = replay::fit::fit_network(trace)?;
    fit.model.ok_or_else(|| {
        usage(format!(
            "a relative what-if (x2, x0.5) changes the network fitted to the trace, and trace \
             {:?} has too few message sizes to fit one ({} sizes; two are needed): give every \
             parameter in absolute values",
            trace.name(),
            fit.sizes
        ))
    })
}

impl Session {
    /// `EXPLAIN` of an analysis: the steps it would take, each with the rows it would read,
    /// and which stored results it would read back instead of computing. Only the catalogue
    /// is looked at: no row is read, nothing is computed or written.
    pub(super) fn explain_analysis(&mut self, a: &Analysis) -> Result<ResultSet> {
        let trace = self.trace()?;
        let summary = trace.summary();
        let (ops, messages) = (summary.operations, summary.messages);
        let mut plan: Vec<PlanStep> = Vec::new();
        let mut step = |text: String, rows: u64| {
            plan.push(PlanStep {
                step: text,
                estimated: rows,
                actual: None,
            })
        };
        let patterns = |params: &PatternParams| -> Result<String> {
            Ok(if detection::stored_patterns(trace, params)?.is_some() {
                "read the stored communication patterns".into()
            } else {
                "pattern detection over every process's operations (then stored)".into()
            })
        };
        let phases = |params: &PhaseParams| -> Result<String> {
            Ok(if detection::stored_phases(trace, params)?.is_some() {
                "read the stored phases".into()
            } else {
                "phase detection: segment the pattern instances, fill each phase's \
                     operations and messages (then stored)"
                    .into()
            })
        };
        // The parameters first, each with its effective value.
        let settings = super::options::settings(a);
        if !settings.is_empty() {
            let texts: Vec<String> = settings
                .iter()
                .map(|s| {
                    if s.default {
                        format!("{} (default)", s.text)
                    } else {
                        s.text.clone()
                    }
                })
                .collect();
            step(format!("with {}", texts.join(", ")), 0);
        }
        match a {
            Analysis::ProcessPatterns { options, .. }
            | Analysis::CommunicationPatterns { options } => step(patterns(options)?, ops),
            Analysis::Match { .. } => step(
                "read every process's events; search the template with its edits".into(),
                ops,
            ),
            Analysis::Phases(p) | Analysis::PhaseTree(p) => {
                step(patterns(&p.patterns)?, ops);
                step(phases(p)?, ops);
            }
            Analysis::Refresh => step(
                "pattern and phase detection anew over every operation (stored results replaced)"
                    .into(),
                ops,
            ),
            Analysis::Loops(..) | Analysis::GlobalModel(_) | Analysis::LogicalTrace { .. } => {
                step(
                    "loop nests of every process (NLR), read back when stored".into(),
                    ops,
                );
                if matches!(a, Analysis::GlobalModel(_)) {
                    step(
                        "merge the nests of ranks alike relative to themselves, then the classes"
                            .into(),
                        trace.header().processes.len() as u64,
                    );
                }
            }
            Analysis::Topology { .. } => step(
                "identify the topology of the rank-to-rank traffic (kept at import), read back \
                 when stored"
                    .into(),
                trace.pairs().len() as u64,
            ),
            Analysis::CriticalPath { clock, .. } => {
                if *clock != ClockCorrection::None {
                    step(clock_step(trace, *clock)?, messages);
                }
                step(
                    if trace.result::<WaitStates>(&waits_key(*clock))?.is_some() {
                        "read the stored wait states".into()
                    } else {
                        "wait state analysis (then stored)".into()
                    },
                    ops,
                );
                step(
                    if trace
                        .result::<CriticalPath>(&critical_path::critical_path_key(*clock))?
                        .is_some()
                    {
                        "read the stored critical path".into()
                    } else {
                        "walk back from the last end along the waits (then stored)".into()
                    },
                    ops,
                );
            }
            Analysis::DelayCosts { clock, .. } => {
                if *clock != ClockCorrection::None {
                    step(clock_step(trace, *clock)?, messages);
                }
                if trace
                    .result::<DelayCosts>(&delay_costs::delay_costs_key(*clock))?
                    .is_some()
                {
                    step("read the stored delay costs".into(), 0);
                } else {
                    step(
                        if trace.result::<WaitStates>(&waits_key(*clock))?.is_some() {
                            "read the stored wait states".into()
                        } else {
                            "wait state analysis (then stored)".into()
                        },
                        ops,
                    );
                    step(
                        "each wait's synchronization interval from the messages and collective                          instances before it; each rank's operations and routine calls"
                            .into(),
                        ops + messages + summary.collective_instances,
                    );
                    step(
                        "compare the two ranks' time per call path in each interval; share                          each wait and what it caused from the last wait back (then stored)"
                            .into(),
                        ops,
                    );
                }
            }
            Analysis::Simulate { network, as_trace } => {
                step(
                    "read the links: each receive's send, each Wait's requests, each \
                     collective's members"
                        .into(),
                    messages + summary.request_links + summary.collective_instances,
                );
                step(
                    format!("replay every location's calls and computation on {network}"),
                    ops,
                );
                if let Some(name) = as_trace {
                    step(format!("import the simulated run as trace {name:?}"), ops);
                }
            }
            Analysis::FitNetwork => step(
                "the quickest message of each size and round of each collective; least squares"
                    .into(),
                messages,
            ),
            Analysis::WhatIf { change } => {
                step(
                    "fit the network to the trace: the quickest message of each size; least \
                     squares"
                        .into(),
                    messages,
                );
                step(
                    "replay every location's calls and computation on the fitted network".into(),
                    ops,
                );
                step(
                    format!("replay them again on the fitted network with {change}"),
                    ops,
                );
            }
            Analysis::Profile { by, scope, .. } => {
                step(
                    "read the routine calls of the selected ranks".into(),
                    summary.routine_calls,
                );
                step(
                    format!(
                        "walk each location's call tree (routine calls and MPI calls, start, \
                         end and call columns) once in time order{}, summing per {}",
                        scope,
                        match by {
                            ProfileBy::Routine => "routine",
                            ProfileBy::CallPath => "call path",
                        }
                    ),
                    ops,
                );
            }
            Analysis::TimeProfile { bins, scope } => {
                step(
                    "read the routine calls of the selected ranks".into(),
                    summary.routine_calls,
                );
                step(
                    format!(
                        "walk each location's call tree once{scope}, splitting each exclusive \
                         interval across {bins} bins"
                    ),
                    ops,
                );
            }
            Analysis::CommunicationOverTime { bins, scope } => step(
                format!(
                    "read the messages' sender, send time and bytes{scope}, counting each in \
                     one of {bins} bins by its send's start"
                ),
                messages,
            ),
        }
        Ok(crate::query::exec::plan_table(&plan))
    }

    /// Pattern and phase statements: results are read from the trace's stored views when
    /// they were computed before with the same parameters.
    pub(super) fn analysis(&mut self, a: &Analysis) -> Result<ResultSet> {
        if let Analysis::Simulate {
            network,
            as_trace: Some(name),
        } = a
        {
            super::needs_times(self.trace()?, "SIMULATE")?;
            // The trace is read while the database imports the new one.
            let source = self.open_trace(&self.current_trace()?)?;
            return Ok(simulation_rows(&replay::simulate_as_trace(
                self.database(),
                &source,
                network,
                name,
            )?));
        }
        let trace = self.trace()?;
        let timed = match a {
            Analysis::Phases(_) => Some("SELECT PHASES"),
            Analysis::PhaseTree(_) => Some("SHOW PHASE TREE"),
            Analysis::Refresh => Some("REFRESH PATTERNS (which cuts phases)"),
            Analysis::CriticalPath { .. } => Some("SELECT CRITICAL PATH"),
            Analysis::DelayCosts { .. } => Some("SELECT DELAY COSTS"),
            Analysis::FitNetwork => Some("SELECT NETWORK MODEL"),
            Analysis::Simulate { .. } | Analysis::WhatIf { .. } => Some("SIMULATE"),
            Analysis::Profile { .. } => Some("SELECT PROFILE"),
            Analysis::TimeProfile { .. } => Some("SELECT TIME PROFILE"),
            Analysis::CommunicationOverTime { .. } => Some("SELECT COMMUNICATION OVER TIME"),
            _ => None,
        };
        if let Some(what) = timed {
            super::needs_times(trace, what)?;
        }
        Ok(match a {
            Analysis::Simulate { network, .. } => {
                simulation_rows(&replay::simulate(trace, network)?)
            }
            Analysis::FitNetwork => network_fit_rows(&replay::fit::fit_network(trace)?),
            Analysis::WhatIf { change } => {
                let fitted = fitted_network(trace)?;
                let on_fitted = replay::simulate(trace, &fitted)?;
                let changed = replay::simulate(trace, &change.apply(&fitted))?;
                what_if_rows(&on_fitted, &changed)
            }
            Analysis::Profile {
                by,
                per_process,
                scope,
            } => {
                let scope = profile_scope(trace, scope)?;
                profile_rows(
                    trace,
                    &profile::profile(trace, &scope, *by, *per_process)?,
                    *per_process,
                )
            }
            Analysis::TimeProfile { bins, scope } => {
                let scope = profile_scope(trace, scope)?;
                time_profile_rows(
                    trace,
                    time_bins::time_profile(trace, &scope, *bins)?.as_ref(),
                )
            }
            Analysis::CommunicationOverTime { bins, scope } => {
                let scope = profile_scope(trace, scope)?;
                comm_over_time_rows(time_bins::comm_over_time(trace, &scope, *bins)?.as_ref())
            }
            Analysis::ProcessPatterns { rank, options } => {
                let rank = known_rank(trace, *rank)?;
                let found = detection::patterns(trace, options, false)?;
                let Some(p) = found.processes.iter().find(|p| p.rank == rank) else {
                    return Err(Error::Corrupt(format!(
                        "the stored patterns have no process {rank}"
                    )));
                };
                let mut r =
                    ResultSet::new(["pattern", "sequence", "length", "occurrences", "positions"]);
                for (i, pat) in p.patterns.iter().enumerate() {
                    r.push(vec![
                        (i as u64 + 1).into(),
                        pat.sequence.clone().into(),
                        pat.length.into(),
                        (pat.positions.len() as u64).into(),
                        list_text(&pat.positions, 20).into(),
                    ]);
                }
                r
            }
            Analysis::CommunicationPatterns { options } => {
                let found = detection::communication_patterns(trace, options, false)?;
                let mut r = ResultSet::new([
                    "pattern",
                    "processes",
                    "occurrences",
                    "events",
                    "messages",
                    "first_s",
                    "last_s",
                    "shape",
                ]);
                for p in &found.patterns {
                    let first = p.occurrences.first().map_or(0, |o| o.0);
                    let last = p.occurrences.last().map_or(0, |o| o.1);
                    r.push(vec![
                        p.id.into(),
                        crate::model::rank_ranges(&p.processes).into(),
                        (p.occurrences.len() as u64).into(),
                        p.events.into(),
                        p.message_ids().len().into(),
                        seconds(trace, first),
                        seconds(trace, last),
                        shorten(&p.shape, 200).into(),
                    ]);
                }
                r
            }
            Analysis::Match { template, options } => {
                let matches = detection::match_template(trace, template, options)?;
                let mut r = ResultSet::new([
                    "match",
                    "processes",
                    "edits",
                    "start_s",
                    "end_s",
                    "operations",
                ]);
                for (i, m) in matches.iter().enumerate() {
                    r.push(vec![
                        (i as u64 + 1).into(),
                        crate::model::rank_ranges(&m.processes).into(),
                        m.edits.into(),
                        seconds(trace, m.start),
                        seconds(trace, m.end),
                        m.ops.len().into(),
                    ]);
                }
                r
            }
            Analysis::Phases(params) => {
                let found = detection::phases(trace, params, false)?;
                let mut r = ResultSet::new([
                    "phase",
                    "node",
                    "instances",
                    "start_s",
                    "end_s",
                    "duration_s",
                    "patterns",
                    "routine",
                ]);
                for p in &found.phases {
                    r.push(vec![
                        p.number.into(),
                        format!("S{}", p.node).into(),
                        format!("{}-{}", p.first, p.last).into(),
                        seconds(trace, p.start),
                        seconds(trace, p.end),
                        seconds(trace, p.end - p.start),
                        list_text(&p.patterns, 20).into(),
                        p.routine.clone().into(),
                    ]);
                }
                r
            }
            Analysis::PhaseTree(params) => {
                let found = detection::phases(trace, params, false)?;
                let mut r = ResultSet::new(["segmentation tree"]);
                for line in found.tree.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r
            }
            Analysis::Loops(rank, params) => {
                let rank = known_rank(trace, *rank)?;
                let found = structure::loops(trace, params, false)?;
                let Some(p) = found.processes.iter().find(|p| p.rank == rank) else {
                    return Err(Error::Corrupt(format!(
                        "the stored loop models have no process {rank}"
                    )));
                };
                let mut r = ResultSet::new(["loop nest"]);
                for line in p.nest.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r.push(vec![format!(
                    "-- {} events, {} bytes of model",
                    p.events,
                    p.nest.len()
                )
                .into()]);
                if let Some(main) = &p.main_loop {
                    r.push(vec![format!("-- main loop: {main}").into()]);
                }
                r
            }
            Analysis::CriticalPath { summary, clock } => {
                let path = critical_path::stored_critical_path_with(trace, *clock, false)?;
                let activity = |class: Option<crate::model::OpKind>| -> Value {
                    match class {
                        None => "computation".into(),
                        Some(kind) => trace.kind_name(kind).into(),
                    }
                };
                if *summary {
                    critical_path_summary(&path, trace.header().processes.len() as u32, activity)
                } else {
                    let mut r = ResultSet::new([
                        "segment",
                        "rank",
                        "start_ns",
                        "end_ns",
                        "duration_ns",
                        "activity",
                        "op",
                    ]);
                    for (i, s) in path.segments.iter().enumerate() {
                        r.push(vec![
                            (i as u64).into(),
                            s.rank.into(),
                            s.start.into(),
                            s.end.into(),
                            s.duration().into(),
                            activity(s.activity.class()),
                            match s.activity {
                                Activity::Mpi { op, .. } => op.into(),
                                Activity::Computation => Value::Null,
                            },
                        ]);
                    }
                    r
                }
            }
            Analysis::DelayCosts { rank, clock } => {
                let costs = delay_costs::stored_delay_costs(trace, *clock, false)?;
                delay_cost_rows(trace, &costs, *rank)
            }
            Analysis::GlobalModel(params) => {
                let found = structure::global_model_text(trace, params, false)?;
                let mut r = ResultSet::new(["global model"]);
                for line in found.text.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r
            }
            Analysis::Topology {
                comm,
                phase,
                options,
            } => {
                let t = topology_of(trace, comm.as_ref(), *phase, options)?;
                let mut r = ResultSet::new([
                    "topology",
                    "dimensions",
                    "traffic_dropped",
                    "rank",
                    "coordinates",
                ]);
                let (dims, coordinates) = match &t.topology {
                    Some(found) => (&found.dims[..], &found.coordinates[..]),
                    None => (&[][..], &[][..]),
                };
                let dims: Vec<String> = dims.iter().map(u32::to_string).collect();
                if coordinates.is_empty() {
                    r.push(vec![
                        t.description.clone().into(),
                        Value::Null,
                        t.dropped_fraction.into(),
                        Value::Null,
                        Value::Null,
                    ]);
                }
                r.rows.reserve(coordinates.len());
                let mut digits = itoa::Buffer::new();
                for (rank, coords) in coordinates.iter().enumerate() {
                    // One string per row, written in place (a string per coordinate, joined
                    // and formatted, was a third of the statement at 16,384 ranks).
                    let mut text = String::with_capacity(2 + 6 * coords.len());
                    text.push('(');
                    for (i, &c) in coords.iter().enumerate() {
                        if i > 0 {
                            text.push(',');
                        }
                        text.push_str(digits.format(c));
                    }
                    text.push(')');
                    let (topology, dimensions, dropped) = if rank == 0 {
                        (
                            t.description.clone().into(),
                            dims.join("x").into(),
                            t.dropped_fraction.into(),
                        )
                    } else {
                        (Value::Null, Value::Null, Value::Null)
                    };
                    r.push(vec![
                        topology,
                        dimensions,
                        dropped,
                        (rank as u64).into(),
                        text.into(),
                    ]);
                }
                r
            }
            Analysis::LogicalTrace {
                rank,
                loops,
                topology,
            } => {
                let found = structure::topology_of(trace, None, None, topology, false)?;
                let Some(t) = found.topology else {
                    return Err(usage(format!(
                        "a logical trace needs a known topology: {}",
                        found.description
                    )));
                };
                let rank = match rank {
                    Some(r) => known_rank(trace, *r)?,
                    None => structure::maximal_process(&t),
                };
                let events = structure::logical_trace(trace, &t, rank)?;
                let nest = structure::logical_nest(&events, loops);
                let mut r = ResultSet::new(["logical trace"]);
                r.push(vec![format!("-- rank {rank}; topology: {t}").into()]);
                for line in nest.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r.push(vec![format!(
                    "-- {} events, {} bytes of model",
                    events.len(),
                    nest.len()
                )
                .into()]);
                r
            }
            Analysis::Refresh => {
                let (found, phases) = detection::refresh(trace, &PatternParams::default())?;
                let mut r = ResultSet::new(["computed", "count", "events", "seconds"]);
                r.push(vec![
                    "communication patterns".into(),
                    (found.patterns.len() as u64).into(),
                    found.events.into(),
                    found.seconds.into(),
                ]);
                r.push(vec![
                    "phases".into(),
                    (phases.phases.len() as u64).into(),
                    (phases.nodes.len() as u64).into(),
                    phases.seconds.into(),
                ]);
                r
            }
        })
    }
}

/// The topology of `trace`'s traffic, on communicator `comm` and in phase `phase` when given
/// (read back when stored).
pub(super) fn topology_of(
    trace: &crate::Trace,
    comm: Option<&crate::query::ast::CommRef>,
    phase: Option<u32>,
    params: &TopologyParams,
) -> Result<structure::TopologyResult> {
    let comm_id = match comm {
        Some(c) => Some(Engine::new(trace).comm(c)?),
        None => None,
    };
    let bitmaps = match phase {
        Some(k) => {
            let (messages, ops) = phase_ids(trace, k)?;
            Some((k, messages, ops))
        }
        None => None,
    };
    structure::topology_of(
        trace,
        comm_id,
        bitmaps.as_ref().map(|(k, m, o)| (*k, m, o)),
        params,
        false,
    )
}
