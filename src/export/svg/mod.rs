//! Pictures: an SVG of any statement that has a natural picture.
//!
//! | statement | picture |
//! |---|---|
//! | `SELECT COMMUNICATION MATRIX …` | a heatmap ([`heatmap`]), blocks of ranks beyond 410 |
//! | `SELECT HISTOGRAM …` | bars with labelled bins ([`bars::histogram`]) |
//! | a selection of operations, messages or CPU bursts | a timeline ([`timeline`]), with the computation and user routines beside `SELECT OPERATIONS` |
//! | `SELECT PHASES`, `SELECT COMMUNICATION PATTERNS` | phase bands and pattern occurrences ([`phases`]) |
//! | `SELECT TOPOLOGY` | the ranks at their coordinates, edges kept and dropped ([`topology`]) |
//! | `SELECT WAIT STATES [GROUP BY …]`, `MPI TIME`, `FAN_IN`, `FAN_OUT`, `… GROUP BY …` aggregates | bars ([`bars::bars`]) |
//! | `SELECT CRITICAL PATH` | the path's segments on a timeline, its computation (the cause) in strong orange, its steps between ranks as thin red lines, a row of the whole path |
//!
//! The drawing functions take result sets (and, for the matrix, its cells with traffic;
//! for the topology, the identified [`Topology`](crate::analysis::topology::Topology));
//! [`statement_svg`] runs the statement and picks the picture. Every mark is bounded by
//! pixels, not by the trace: the matrix of 16,384 ranks and a timeline of a million calls
//! draw in well under a second (`cargo bench --bench pictures`).
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
//! # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
//! let mut session = mtfdb::Session::new(db);
//! let svg = mtfdb::export::svg::statement_svg(&mut session, "SELECT COMMUNICATION MATRIX")?;
//! assert!(svg.starts_with("<?xml") && svg.contains("class=\"cell\""));
//! # Ok::<(), mtfdb::Error>(())
//! ```

pub mod bars;
pub mod canvas;
pub mod heatmap;
pub mod phases;
pub mod timeline;
pub mod topology;

use std::path::Path;

use crate::analysis::detection::{self, PhaseParams};
use crate::analysis::stats;
use crate::error::{Error, Result};
use crate::model::Rank;
use crate::query::ast::{
    Analysis, Measure, Scope, Select, SelectBody, Selection, Statement, Statistic, Target,
};
use crate::query::{parse_statement, query_error, Session};
use crate::results::ResultSet;

/// What has a picture, for the error of a statement that has none.
const PICTURES: &str = "COMMUNICATION MATRIX, HISTOGRAM, a selection of operations, messages or \
                        CPU BURSTS (a timeline), PHASES, COMMUNICATION PATTERNS, TOPOLOGY, WAIT \
                        STATES, MPI TIME, FAN_IN, FAN_OUT, CRITICAL PATH and GROUP BY aggregates";

/// The picture of `statement` run in `session`, as an SVG document.
pub fn statement_svg(session: &mut Session, statement: &str) -> Result<String> {
    let stmt = parse_statement(statement).map_err(query_error)?;
    let trace_name = session.current_trace()?;
    let title = format!(
        "{trace_name}: {}",
        statement.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    let canvas = match &stmt {
        Statement::Select(select) => select_picture(session, select, statement, &title)?,
        Statement::Analysis(a) => analysis_picture(session, a, &title)?,
        _ => return Err(no_picture(statement)),
    };
    Ok(canvas.finish())
}

/// Writes the picture of `statement` to the file at `path`, whole or not at all (a regular
/// file is replaced once the picture is complete; a device or FIFO is written in place: see
/// [`super::output`]).
pub fn write_statement_svg(session: &mut Session, statement: &str, path: &Path) -> Result<()> {
    let svg = statement_svg(session, statement)?;
    super::write_whole(path, svg.as_bytes())
}

fn no_picture(statement: &str) -> Error {
    Error::Usage(format!(
        "{:?} has no picture; pictures are drawn for {PICTURES}",
        statement.trim()
    ))
}

fn select_picture(
    session: &mut Session,
    select: &Select,
    text: &str,
    title: &str,
) -> Result<canvas::Canvas> {
    match &select.body {
        SelectBody::Statistic { statistic, .. } => {
            let columns = |r: &ResultSet, names: &[&str]| -> Vec<usize> {
                names.iter().filter_map(|n| r.column(n)).collect()
            };
            match statistic {
                Statistic::Matrix(_) => Ok(heatmap::heatmap(&session.matrix_cells(text)?, title)),
                Statistic::Histogram { of, .. } => {
                    let r = session.run(text)?;
                    // The bin labels read as durations (`_ns`) or as byte counts.
                    let of = match of {
                        Measure::Duration => "duration_ns",
                        Measure::Size | Measure::Sent | Measure::Received => "size in bytes",
                        Measure::Counter(_) => "counter value",
                    };
                    bars::histogram(&r, title, of)
                }
                Statistic::WaitStates(None) => {
                    let r = session.run(text)?;
                    let values = columns(&r, &["total_ns"]);
                    Ok(bars::bars(&r, title, 0, &values))
                }
                Statistic::WaitStates(Some(_)) => {
                    let r = session.run(text)?;
                    let values: Vec<usize> = (1..r.columns.len())
                        .filter(|&c| r.columns[c].ends_with("_ns") && r.columns[c] != "total_ns")
                        .collect();
                    Ok(bars::bars(&r, title, 0, &values))
                }
                Statistic::MpiTime => {
                    let r = session.run(text)?;
                    let values = columns(&r, &["mpi_time_ns"]);
                    Ok(bars::bars(&r, title, 0, &values))
                }
                Statistic::FanIn | Statistic::FanOut => {
                    let r = session.run(text)?;
                    let values = columns(&r, &["message_bytes", "collective_bytes"]);
                    Ok(bars::bars(&r, title, 0, &values))
                }
                Statistic::Statistics | Statistic::LateSenders => Err(no_picture(text)),
            }
        }
        SelectBody::Aggregate { group_by, .. } if group_by.len() > 1 => Err(Error::Usage(format!(
            "{:?}: a bar chart is drawn for a GROUP BY on one key",
            text.trim()
        ))),
        // The key, then the first aggregate.
        SelectBody::Aggregate { group_by, .. } if group_by.len() == 1 => {
            Ok(bars::bars(&session.run(text)?, title, 0, &[1]))
        }
        SelectBody::Aggregate { .. } => Err(no_picture(text)),
        SelectBody::Rows(selection) => timeline_of(session, select, selection, title),
    }
}

/// A timeline of the rows of `selection`, with the messages between them when they are
/// operations, and their collectives joined.
fn timeline_of(
    session: &mut Session,
    select: &Select,
    selection: &Selection,
    title: &str,
) -> Result<canvas::Canvas> {
    crate::query::needs_times(session.trace()?, "a timeline")?;
    let mut drawn = timeline::Timeline::new();
    for row in session.query_statement(&Statement::Select(select.clone()))? {
        drawn.add_row(&row?);
    }
    // Messages and collectives join operations only (a record target's ids are its own).
    let operations = !matches!(selection.target, Target::Messages | Target::CpuBursts)
        && !selection.target.is_record();
    if operations && !drawn.is_empty() {
        let messages = Statement::Select(Select {
            body: SelectBody::Rows(Selection {
                target: Target::Messages,
                filter: selection.filter.clone(),
            }),
            order_by: Vec::new(),
            limit: None,
        });
        // Messages are drawn between the ranks whose calls are drawn.
        drawn.keep_messages_between_drawn_ranks();
        for row in session.query_statement(&messages)? {
            drawn.add_row(&row?);
        }
        let trace = session.database().trace(&session.current_trace()?)?;
        for chunk in 0..trace.collective_chunk_count() {
            for c in trace.collective_chunk(chunk)? {
                drawn.add_collective(&c.ops);
            }
        }
    }
    let window = selection.filter.time.map(|w| (w.start, w.end));
    // Beside all the calls of some ranks: the computation between them and the user
    // routines around them, so that a window is not blank where the ranks compute. Only
    // when the rows are every call of their ranks in the window: a choice of calls (a
    // condition, a communicator, a view, a limit) leaves gaps that are not computation.
    let f = &selection.filter;
    let every_call = f.predicate.is_none()
        && f.within.is_empty()
        && matches!(f.scope, None | Some(Scope::For(_)))
        && select.limit.is_none();
    if selection.target == Target::Operations && every_call && !drawn.is_empty() {
        let bursts = Statement::Select(Select {
            body: SelectBody::Rows(Selection {
                target: Target::CpuBursts,
                filter: selection.filter.clone(),
            }),
            order_by: Vec::new(),
            limit: None,
        });
        for row in session.query_statement(&bursts)? {
            drawn.add_computation_row(&row?);
        }
        let ranks = drawn.ranks_with_rows();
        let trace = session.database().trace(&session.current_trace()?)?;
        for chunk in 0..trace.routine_chunk_count() {
            for call in trace.routine_chunk(chunk)? {
                let inside = window.is_none_or(|(a, b)| call.start <= b && call.end >= a);
                if inside && ranks.binary_search(&call.rank).is_ok() {
                    let name = trace.string(call.routine).unwrap_or("routine");
                    drawn.add_routine(call.rank, name, call.depth, (call.start, call.end));
                }
            }
        }
    }
    Ok(drawn.draw(title, window))
}

fn analysis_picture(session: &mut Session, a: &Analysis, title: &str) -> Result<canvas::Canvas> {
    let trace = session.database().trace(&session.current_trace()?)?;
    let run_span = {
        let s = trace.summary();
        (s.first_time.unwrap_or(0), s.last_time.unwrap_or(0))
    };
    match a {
        Analysis::Phases(_) | Analysis::CommunicationPatterns { .. } => {
            let params = match a {
                Analysis::Phases(p) => *p,
                Analysis::CommunicationPatterns { options } => PhaseParams {
                    patterns: *options,
                    ..PhaseParams::default()
                },
                _ => unreachable!("matched above"),
            };
            let phases = session.execute(&Statement::Analysis(Analysis::Phases(params)))?;
            let found = detection::communication_patterns(&trace, &params.patterns, false)?;
            let patterns: Vec<phases::PatternOccurrences> = found
                .patterns
                .iter()
                .map(|p| phases::PatternOccurrences {
                    pattern: p.id,
                    occurrences: p.occurrences.clone(),
                })
                .collect();
            Ok(phases::phases(title, &phases, &patterns, run_span))
        }
        Analysis::Topology {
            comm,
            phase,
            options,
        } => {
            let found = session.topology(comm.as_ref(), *phase, options)?;
            let Some(t) = found.topology else {
                return Err(Error::Usage(format!(
                    "no topology to draw: {}",
                    found.description
                )));
            };
            let ranks: Vec<Rank> = (0..trace.header().processes.len() as Rank).collect();
            let cells = stats::trace_matrix_cells(&trace, &ranks, stats::MatrixOf::Bytes)?;
            Ok(topology::topology(title, &t, &cells))
        }
        Analysis::CriticalPath { clock, .. } => {
            let path = Statement::Analysis(Analysis::CriticalPath {
                summary: false,
                clock: *clock,
            });
            let mut drawn = timeline::Timeline::new();
            for row in session.query_statement(&path)? {
                drawn.add_row(&row?);
            }
            drawn.join_as_path();
            Ok(drawn.draw(title, None))
        }
        _ => Err(no_picture(&Statement::Analysis(a.clone()).to_string())),
    }
}
