//! The one-page report (`mtfdb report NAME -o report.html`): a self-contained HTML page (no
//! network access, no external script, style or font) with the trace's summary, the matrix
//! heatmap, the size histogram, a timeline of one iteration of its main communication
//! pattern, phases and patterns, the topology, time in MPI, the top waits of every kind and
//! beside them their causes, the delay costs (on the stored times, or on corrected clocks:
//! [`report_corrected`]). Tables sort when their header is clicked. Every time and size in
//! them reads with its unit (`235.1 ms`, `16.0 KiB`, through [`crate::units`]); a cell keeps
//! its exact value for sorting.
//!
//! Each section is a statement of the language run through [`svg::statement_svg`] or
//! [`Session::run`]; the statement is printed under its section, so that a reader can run it
//! again. A section that does not apply to the trace (no messages, no topology found) says
//! why in its place instead of failing the report.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
//! # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
//! let mut session = mtfdb::Session::new(db);
//! session.use_trace("paper")?;
//! let html = mtfdb::export::report::report(&mut session)?;
//! assert!(html.contains("<svg") && !html.contains("<script src") && !html.contains("<link"));
//! # Ok::<(), mtfdb::Error>(())
//! ```

use std::fmt::Write as _;

use super::svg::{self, canvas::escape};
use crate::analysis::clock::ClockCorrection;
use crate::analysis::detection::{self, PatternParams};
use crate::analysis::waits;
use crate::error::Result;
use crate::results::{ResultSet, Value};
use crate::{units, Session};

/// Rows a report table shows at the most (the statement under it gives them all).
const MAX_TABLE_ROWS: usize = 200;
/// Waits, and causes, the report lists.
const TOP: usize = 20;

/// The report of the session's current trace, as one HTML document.
pub fn report(session: &mut Session) -> Result<String> {
    report_corrected(session, ClockCorrection::None)
}

/// [`report`] with its wait states (and top waits) on the clocks `correction` gives: their
/// statements, printed under their sections, say `WITH CLOCK CORRECTION …`.
pub fn report_corrected(session: &mut Session, correction: ClockCorrection) -> Result<String> {
    let name = session.current_trace()?;
    let trace = session.database().trace(&name)?;
    let info = trace.info();
    let summary = trace.summary().clone();
    let mut page = Page::new(&name);

    let mut facts = ResultSet::new(["what", "value"]);
    let span = summary
        .first_time
        .zip(summary.last_time)
        .map(|(a, b)| b.saturating_sub(a));
    for (what, value) in [
        ("trace", name.clone()),
        ("format", info.format.clone()),
        ("source", info.source.clone()),
        ("processes", info.processes.to_string()),
        (
            "run time",
            span.map_or("-".into(), |ns| units::duration(ns as f64)),
        ),
        ("operations", summary.operations.to_string()),
        ("messages", summary.messages.to_string()),
        ("message bytes", units::bytes(summary.message_bytes)),
        (
            "collective instances",
            summary.collective_instances.to_string(),
        ),
        ("routine calls", summary.routine_calls.to_string()),
        (
            "anomalies",
            summary
                .anomalies
                .iter()
                .map(|(kind, n)| format!("{kind}: {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    ] {
        let value = if value.is_empty() {
            "none".to_string()
        } else {
            value
        };
        facts.push(vec![what.into(), value.into()]);
    }
    page.section("Summary", "mtfdb info", Ok(Part::Table(facts)));
    let by_call = "SELECT COUNT(*), SUM(DURATION) FROM OPERATIONS GROUP BY OPERATION";
    page.section("Calls", by_call, session.run(by_call).map(Part::Table));

    let has_messages = summary.messages > 0;
    let matrix = "SELECT COMMUNICATION MATRIX";
    let histogram = "SELECT HISTOGRAM OF SIZE";
    if has_messages {
        page.section("Communication matrix", matrix, picture(session, matrix));
        page.section("Message sizes", histogram, picture(session, histogram));
    } else {
        page.absent(
            "Communication matrix",
            "the trace has no point-to-point messages",
        );
    }

    // One iteration: from an occurrence of the most frequent communication pattern to the
    // next one (the run's first twentieth when no pattern repeats).
    let window = detection::communication_patterns(&trace, &PatternParams::default(), false)
        .ok()
        .and_then(|found| {
            let p = found.patterns.iter().max_by_key(|p| p.occurrences.len())?;
            let middle = p.occurrences.len() / 2;
            let start = p.occurrences.get(middle.saturating_sub(1))?.0;
            let end = p.occurrences.get(middle)?.0;
            (end > start).then_some((start, end))
        })
        .or_else(|| {
            let (a, b) = summary.first_time.zip(summary.last_time)?;
            Some((a, a + (b - a).div_ceil(20).max(1)))
        });
    if let Some((a, b)) = window {
        let timeline = format!("SELECT OPERATIONS BETWEEN TIME {a} ns AND {b} ns");
        page.section(
            "Timeline of one iteration",
            &timeline,
            picture(session, &timeline),
        );
    }
    let phases = "SELECT PHASES";
    page.section("Phases and patterns", phases, picture(session, phases));
    let patterns = "SELECT COMMUNICATION PATTERNS";
    page.section("Patterns", patterns, session.run(patterns).map(Part::Table));
    if has_messages {
        let topology = "SELECT TOPOLOGY";
        page.section("Topology", topology, picture(session, topology));
    }
    let mpi = "SELECT MPI TIME";
    page.section("Time in MPI per rank", mpi, picture(session, mpi));
    let clock = match correction {
        ClockCorrection::None => String::new(),
        c => format!(" WITH CLOCK CORRECTION {c}"),
    };
    let waits = format!("SELECT WAIT STATES{clock}");
    page.section("Wait states", &waits, picture(session, &waits));
    let top = format!("SELECT OPERATIONS WHERE WAIT > 0{clock} ORDER BY WAIT DESC LIMIT {TOP}");
    let causes = format!("SELECT DELAY COSTS{clock}");
    let top_waits = waits::stored_wait_states_with(&trace, correction, false)
        .and_then(|w| top_waits_table(&trace, &w));
    let delay_costs = session.run(&causes);
    page.pair(
        "Top waits and their causes",
        ("The longest waits, every kind", &top, top_waits),
        (
            "Their causes: the delays that cost the most waiting (short-term: the waits they \
             caused; long-term: the waits those caused in turn)",
            &causes,
            delay_costs,
        ),
    );
    Ok(page.finish())
}

/// The [`TOP`] longest waits of every kind, longest first: who waited, in which call, why,
/// for whom, how long and when.
fn top_waits_table(trace: &crate::Trace, states: &waits::WaitStates) -> Result<ResultSet> {
    let mut waits: Vec<&waits::Wait> = states.waits.iter().collect();
    waits.sort_by(|a, b| b.time.cmp(&a.time).then(a.op.cmp(&b.op)));
    waits.truncate(TOP);
    let ids: roaring::RoaringTreemap = waits.iter().map(|w| w.op).collect();
    let calls: crate::hash::FxHashMap<u64, String> = trace
        .operations(&ids)?
        .into_iter()
        .map(|(id, o)| (id, trace.kind_name(o.kind)))
        .collect();
    let mut r = ResultSet::new(["rank", "call", "kind", "waited for", "wait_ns", "start_ns"]);
    for w in waits {
        r.push(vec![
            w.rank.into(),
            calls.get(&w.op).cloned().unwrap_or_default().into(),
            w.kind.name().into(),
            w.partner.into(),
            w.time.into(),
            w.start.into(),
        ]);
    }
    Ok(r)
}

/// What a section shows.
enum Part {
    Picture(String),
    Table(ResultSet),
}

fn picture(session: &mut Session, statement: &str) -> Result<Part> {
    let svg = svg::statement_svg(session, statement)?;
    // Inline in HTML, the XML declaration has no place.
    let body = match svg.find("<svg") {
        Some(at) => svg[at..].to_string(),
        None => svg,
    };
    Ok(Part::Picture(body))
}

/// The HTML page being written.
struct Page {
    html: String,
    toc: Vec<(String, String)>,
    body: String,
}

impl Page {
    fn new(trace: &str) -> Page {
        let mut html = String::new();
        let _ = write!(
            html,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>mtfdb report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
             <h1>mtfdb report: {}</h1>\n",
            escape(trace),
            escape(trace)
        );
        Page {
            html,
            toc: Vec::new(),
            body: String::new(),
        }
    }

    fn anchor(&mut self, title: &str) -> String {
        let id = format!("s{}", self.toc.len() + 1);
        self.toc.push((id.clone(), title.to_string()));
        id
    }

    fn section(&mut self, title: &str, statement: &str, part: Result<Part>) {
        let id = self.anchor(title);
        let _ = write!(
            self.body,
            "<section id=\"{id}\">\n<h2>{}</h2>\n",
            escape(title)
        );
        match part {
            Ok(Part::Picture(svg)) => {
                let _ = writeln!(self.body, "<div class=\"picture\">{svg}</div>");
            }
            Ok(Part::Table(t)) => self.table(&t),
            Err(e) => {
                let _ = writeln!(
                    self.body,
                    "<p class=\"absent\">Not available: {}</p>",
                    escape(&e.to_string())
                );
            }
        }
        let _ = write!(
            self.body,
            "<p class=\"statement\"><code>{}</code></p>\n</section>\n",
            escape(statement)
        );
    }

    fn absent(&mut self, title: &str, why: &str) {
        let id = self.anchor(title);
        let _ = write!(
            self.body,
            "<section id=\"{id}\">\n<h2>{}</h2>\n<p class=\"absent\">Not drawn: {}.</p>\n</section>\n",
            escape(title),
            escape(why)
        );
    }

    /// Two tables side by side under one title, each with its caption and statement.
    fn pair(
        &mut self,
        title: &str,
        left: (&str, &str, Result<ResultSet>),
        right: (&str, &str, Result<ResultSet>),
    ) {
        let id = self.anchor(title);
        let _ = write!(
            self.body,
            "<section id=\"{id}\">\n<h2>{}</h2>\n<div class=\"pair\">\n",
            escape(title)
        );
        for (caption, statement, part) in [left, right] {
            let _ = writeln!(self.body, "<div>\n<h3>{}</h3>", escape(caption));
            match part {
                Ok(t) => self.table_of(&t, TOP),
                Err(e) => {
                    let _ = writeln!(
                        self.body,
                        "<p class=\"absent\">Not available: {}</p>",
                        escape(&e.to_string())
                    );
                }
            }
            let _ = write!(
                self.body,
                "<p class=\"statement\"><code>{}</code></p>\n</div>\n",
                escape(statement)
            );
        }
        self.body.push_str("</div>\n</section>\n");
    }

    fn table(&mut self, t: &ResultSet) {
        self.table_of(t, MAX_TABLE_ROWS)
    }

    /// `t`'s first `max` rows; times and sizes with their units (see [`Unit::of`]), the exact
    /// value kept in `data-v` for sorting.
    fn table_of(&mut self, t: &ResultSet, max: usize) {
        let units: Vec<Unit> = t.columns.iter().map(|c| Unit::of(c)).collect();
        self.body
            .push_str("<table class=\"sortable\">\n<thead><tr>");
        for (c, unit) in t.columns.iter().zip(&units) {
            let _ = write!(self.body, "<th>{}</th>", escape(unit.header(c)));
        }
        self.body.push_str("</tr></thead>\n<tbody>\n");
        for row in t.rows.iter().take(max) {
            self.body.push_str("<tr>");
            for (v, unit) in row
                .iter()
                .zip(units.iter().chain(std::iter::repeat(&Unit::None)))
            {
                let exact = match v {
                    Value::Int(i) => Some(*i as f64),
                    Value::Float(f) => Some(*f),
                    _ => None,
                };
                match exact {
                    Some(x) => {
                        let _ = write!(
                            self.body,
                            "<td class=\"num\" data-v=\"{x}\">{}</td>",
                            escape(&unit.render(v, x))
                        );
                    }
                    None => {
                        let _ = write!(self.body, "<td>{}</td>", escape(&v.render()));
                    }
                }
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</tbody>\n</table>\n");
        if t.len() > max {
            let _ = writeln!(
                self.body,
                "<p class=\"absent\">The first {max} of {} rows.</p>",
                t.len()
            );
        }
    }

    fn finish(mut self) -> String {
        self.html.push_str("<nav><ul>");
        for (id, title) in &self.toc {
            let _ = write!(
                self.html,
                "<li><a href=\"#{id}\">{}</a></li>",
                escape(title)
            );
        }
        self.html.push_str("</ul></nav>\n<main>\n");
        self.html.push_str(&self.body);
        let _ = write!(
            self.html,
            "</main>\n<footer>Written by mtfdb {}.</footer>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
            env!("CARGO_PKG_VERSION")
        );
        self.html
    }
}

/// What a table column holds, told by its name: a time in ns (`wait_ns`, `SUM(DURATION)`),
/// a size in bytes (`bytes_sent`, `SUM(SIZE)`), or anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Nanoseconds,
    Bytes,
    None,
}

impl Unit {
    fn of(column: &str) -> Unit {
        let c = column.to_ascii_lowercase();
        if c.ends_with("_ns") || c.contains("(ns)") || c.contains("duration") || c == "wait" {
            Unit::Nanoseconds
        } else if c.contains("bytes")
            || c.contains("size")
            || c.ends_with("(sent)")
            || c.ends_with("(received)")
        {
            Unit::Bytes
        } else {
            Unit::None
        }
    }

    /// The header without the unit the cells now carry (`wait_ns` → `wait`).
    fn header(self, column: &str) -> &str {
        match self {
            Unit::Nanoseconds => column
                .strip_suffix("_ns")
                .or_else(|| column.strip_suffix(" (ns)"))
                .unwrap_or(column),
            _ => column,
        }
    }

    fn render(self, v: &Value, exact: f64) -> String {
        match self {
            Unit::Nanoseconds => units::duration(exact),
            Unit::Bytes if exact >= 0.0 => units::bytes(exact.round() as u64),
            _ => v.render(),
        }
    }
}

const STYLE: &str = "
body { font-family: sans-serif; margin: 0 auto; max-width: 1240px; padding: 0 16px; color: #222; }
h1 { font-size: 1.5em; margin: 18px 0 6px; }
h2 { font-size: 1.15em; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 28px; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 6px 16px; }
nav a { color: #1f5fa8; text-decoration: none; }
.picture svg { max-width: 100%; height: auto; border: 1px solid #eee; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; }
th { background: #f2f2f2; cursor: pointer; user-select: none; }
th.asc::after { content: ' \\25B2'; } th.desc::after { content: ' \\25BC'; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.statement code { color: #555; font-size: 0.85em; }
.absent { color: #8a5a00; }
.pair { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.pair h3 { font-size: 0.95em; font-weight: normal; color: #444; max-width: 560px; }
footer { margin: 30px 0; color: #888; font-size: 0.85em; }
";

/// Sorts a table by the clicked column, numbers as numbers, again to reverse.
const SCRIPT: &str = "
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.addEventListener('click', function () {
    var table = th.closest('table');
    var body = table.tBodies[0];
    var ascending = !th.classList.contains('asc');
    table.querySelectorAll('th').forEach(function (h) { h.classList.remove('asc', 'desc'); });
    th.classList.add(ascending ? 'asc' : 'desc');
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].textContent, y = b.cells[index].textContent;
      var nx = parseFloat(a.cells[index].dataset.v !== undefined ? a.cells[index].dataset.v : x);
      var ny = parseFloat(b.cells[index].dataset.v !== undefined ? b.cells[index].dataset.v : y);
      var order = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return ascending ? order : -order;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
";
