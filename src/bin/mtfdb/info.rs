//! Text rendering of `mtfdb traces` and `mtfdb info`.

use std::fmt::Write;

use mtfdb::model::{Anomaly, Location, LocationKind, Rank};
use mtfdb::results::{printable, ResultSet, Value};
use mtfdb::{Result, Trace};

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Nanoseconds as seconds with microsecond precision.
fn seconds(ns: u64) -> String {
    format!("{:.6} s", ns as f64 / 1e9)
}

/// Bytes in a human unit, with the exact count beside it.
fn bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else {
        format!("{} ({} B)", mtfdb::units::bytes(n), thousands(n))
    }
}

pub use mtfdb::model::rank_ranges;

/// `mtfdb info NAME --format csv|json`: the trace's counts as (item, value) rows, the same
/// counts the text report prints.
pub fn info_result(trace: &Trace) -> ResultSet {
    let info = trace.info();
    let s = &info.summary;
    let mut result = ResultSet::new(["item", "value"]);
    let mut row = |item: &str, value: Value| result.push(vec![Value::Text(item.into()), value]);
    let count = |n: u64| Value::Int(n.into());
    let time = |t: Option<u64>| t.map_or(Value::Null, |t| Value::Int(t.into()));
    row("name", Value::Text(info.name.clone()));
    row("source", Value::Text(info.source.clone()));
    row("format", Value::Text(info.format.clone()));
    row("processes", Value::Int(info.processes as i128));
    row(
        "communicators",
        Value::Int(trace.header().communicators.len() as i128),
    );
    row("operations", count(s.operations));
    for (kind, n) in &s.by_kind {
        row(&format!("operations {}", trace.kind_name(*kind)), count(*n));
    }
    row("messages", count(s.messages));
    row("message_bytes", count(s.message_bytes));
    row("collective_instances", count(s.collective_instances));
    row("request_links", count(s.request_links));
    row("routine_calls", count(s.routine_calls));
    for (kind, n) in &s.anomalies {
        row(&format!("anomalies {kind}"), count(*n));
    }
    row("first_time_ns", time(s.first_time));
    row("last_time_ns", time(s.last_time));
    result
}

/// How many rows of a per-process listing are shown before it is elided.
const MAX_LISTED: usize = 32;

/// The `mtfdb info NAME` report.
pub fn render(trace: &Trace, all_anomalies: bool) -> Result<String> {
    let info = trace.info();
    let header = trace.header();
    let s = &info.summary;
    let mut out = String::new();
    let w = &mut out;
    // Every name below comes from the trace (or its importer) and is shown through
    // `printable`, before it is padded: a name cannot act on the terminal or skew a column.
    let _ = writeln!(
        w,
        "trace {}  (imported from {}, format {})",
        printable(&info.name),
        printable(&info.source),
        printable(&info.format)
    );
    if !header.scenario.is_empty() {
        let _ = writeln!(w, "scenario: {}", printable(&header.scenario));
    }
    if !header.comments.is_empty() {
        // Comments of several lines keep a line each, aligned under the first.
        let lines: Vec<_> = header.comments.split('\n').map(printable).collect();
        let _ = writeln!(w, "comments: {}", lines.join("\n          "));
    }
    match (s.first_time, s.last_time) {
        (Some(a), Some(b)) => {
            let _ = writeln!(
                w,
                "time span: {} to {} ({})",
                seconds(a),
                seconds(b),
                seconds(b - a)
            );
        }
        _ => {
            let _ = writeln!(w, "time span: no events");
        }
    }

    let _ = writeln!(w, "\nprocessors: {}", header.processors.len());
    for p in header.processors.iter().take(MAX_LISTED) {
        let ranks: Vec<Rank> = header
            .processes
            .iter()
            .filter(|q| q.processor == Some(p.id))
            .map(|q| q.rank)
            .collect();
        let _ = writeln!(
            w,
            "  {:<4} {:<16} ranks {}",
            p.id,
            printable(&p.name),
            rank_ranges(&ranks)
        );
    }
    elide(w, header.processors.len());

    let _ = writeln!(w, "\nprocesses: {}", header.processes.len());
    let ops_per_rank = trace.operations_per_rank();
    for p in header.processes.iter().take(MAX_LISTED) {
        let node = p
            .processor
            .and_then(|id| header.processors.iter().find(|q| q.id == id))
            .map_or("-".into(), |q| printable(&q.name));
        let _ = writeln!(
            w,
            "  rank {:<5} {:<12} on {:<16} {:>12} operations",
            p.rank,
            printable(&p.name),
            node,
            thousands(ops_per_rank.get(p.rank as usize).copied().unwrap_or(0))
        );
    }
    elide(w, header.processes.len());

    render_locations(w, &header.locations);

    let _ = writeln!(w, "\ncommunicators: {}", header.communicators.len());
    for c in header.communicators.iter().take(MAX_LISTED) {
        let _ = writeln!(
            w,
            "  {} (id {}): {} members: {}",
            printable(&c.name),
            c.id,
            c.members.len(),
            rank_ranges(&c.members)
        );
    }
    elide(w, header.communicators.len());

    let _ = writeln!(w, "\noperations: {}", thousands(s.operations));
    for (kind, n) in &s.by_kind {
        let _ = writeln!(
            w,
            "  {:<28} {:>14}",
            printable(&trace.kind_name(*kind)),
            thousands(*n)
        );
    }
    let _ = writeln!(
        w,
        "\nmessages (matched send/receive pairs): {}, {}",
        thousands(s.messages),
        if s.message_bytes == u64::MAX && s.anomaly_count("value overflow") > 0 {
            // The import kept a sum past 2^64 - 1 at 2^64 - 1 and reported it: say so.
            "more than 18,446,744,073,709,551,615 B (a sum past 2^64 - 1; see the value overflow anomalies)"
                .to_string()
        } else {
            bytes(s.message_bytes)
        }
    );
    let _ = writeln!(
        w,
        "collective instances: {}",
        thousands(s.collective_instances)
    );
    let _ = writeln!(
        w,
        "requests completed by a Wait/Test: {}",
        thousands(s.request_links)
    );
    let _ = writeln!(w, "routine calls: {}", thousands(s.routine_calls));
    let _ = write!(
        w,
        "unmatched operations: {} sends never received, {} receives never matched",
        thousands(s.anomaly_count("send never received")),
        thousands(s.anomaly_count("receive never matched"))
    );
    // Kept apart: sends a receive recorded without its envelope may have received.
    let unrecorded = s.anomaly_count("send to a receive not recorded");
    if unrecorded > 0 {
        let _ = write!(
            w,
            "; {} sends to ranks with receives the trace records no envelope of",
            thousands(unrecorded)
        );
    }
    // Kept apart: what a rank whose data is missing left waiting is no error of the others.
    let missing = s.anomaly_count("peer's event data missing");
    if missing > 0 {
        let _ = write!(
            w,
            "; {} left waiting for a rank whose event data is missing",
            thousands(missing)
        );
    }
    let _ = writeln!(w);
    if s.operations == 0 {
        let _ = writeln!(
            w,
            "MPI: the trace records no MPI calls (its processes are the tracer's processes)"
        );
    }
    if s.anomalies.is_empty() {
        let _ = writeln!(w, "anomalies: none");
    } else {
        let total: u64 = s.anomalies.iter().map(|(_, n)| *n).sum();
        let _ = writeln!(
            w,
            "anomalies: {} in {} classes (kept and counted; {})",
            thousands(total),
            s.anomalies.len(),
            what_was_lost(s)
        );
        let list = trace.anomalies()?;
        for (kind, n) in &s.anomalies {
            let _ = writeln!(w, "  {:<36} {:>10}", printable(kind), thousands(*n));
            let examples: Vec<&Anomaly> = list.iter().filter(|a| a.kind_name() == kind).collect();
            let shown = if all_anomalies {
                examples.len()
            } else {
                examples.len().min(EXAMPLES)
            };
            for a in &examples[..shown] {
                let _ = writeln!(w, "      e.g. {}", printable(&describe(trace, a)));
            }
            if shown < examples.len() {
                let _ = writeln!(
                    w,
                    "      … {} more",
                    thousands((examples.len() - shown) as u64)
                );
            }
        }
        if !all_anomalies && list.len() as u64 > EXAMPLES as u64 {
            let _ = writeln!(
                w,
                "  (mtfdb info {} --anomalies lists every one)",
                printable(&info.name)
            );
        }
    }
    let stored = trace.stored_bytes()?;
    let per_op = if s.operations > 0 {
        stored as f64 / s.operations as f64
    } else {
        0.0
    };
    let _ = writeln!(
        w,
        "\non disk: {} ({per_op:.2} bytes per operation, indexes included)",
        bytes(stored)
    );
    Ok(out)
}

/// Examples shown per anomaly class.
const EXAMPLES: usize = 3;

/// The locations that are not MPI ranks' main threads: counts by kind, then each one.
fn render_locations(w: &mut String, locations: &[Location]) {
    if locations.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "\nother locations (not MPI ranks): {}",
        thousands(locations.len() as u64)
    );
    let mut by_kind: Vec<(LocationKind, u64, u64, u64)> = Vec::new();
    for l in locations {
        match by_kind.iter_mut().find(|k| k.0 == l.kind) {
            Some(k) => {
                k.1 += 1;
                k.2 += l.regions;
                k.3 += l.events;
            }
            None => by_kind.push((l.kind, 1, l.regions, l.events)),
        }
    }
    by_kind.sort();
    for (kind, n, regions, events) in by_kind {
        let _ = writeln!(
            w,
            "  {:<16} {:>6}   {:>12} regions entered {:>12} events",
            kind.name(),
            thousands(n),
            thousands(regions),
            thousands(events)
        );
    }
    for l in locations.iter().take(MAX_LISTED) {
        let owner = match (l.rank, l.thread) {
            (Some(r), Some(t)) => format!("rank {r} thread {t}"),
            (Some(r), None) => format!("rank {r}"),
            _ => "no process".to_string(),
        };
        let _ = writeln!(
            w,
            "    {:<28} {:<12} {:<20} in {:<20} {:>10} regions",
            printable(&l.name),
            l.kind.name(),
            owner,
            printable(&l.group),
            thousands(l.regions)
        );
    }
    elide(w, locations.len());
}

fn elide(w: &mut String, n: usize) {
    if n > MAX_LISTED {
        let _ = writeln!(w, "  … and {} more", n - MAX_LISTED);
    }
}

/// One anomaly in words.
fn describe(trace: &Trace, a: &Anomaly) -> String {
    trace.anomaly_text(a)
}

/// Whether the import kept every record it read, or what it could not keep: ranks whose
/// event data is missing or cut short, and records it skipped.
fn what_was_lost(s: &mtfdb::store::TraceSummary) -> String {
    let missing = s.anomaly_count("rank's event data missing");
    let skipped = s.anomaly_count("record skipped");
    let mut lost = Vec::new();
    if missing > 0 {
        let plural = if missing == 1 { "" } else { "s" };
        lost.push(format!(
            "event data of {} location{plural} missing or cut short",
            thousands(missing)
        ));
    }
    if skipped > 0 {
        lost.push(format!("{} records skipped", thousands(skipped)));
    }
    if lost.is_empty() {
        "the trace was imported whole".to_string()
    } else {
        format!("{}; the rest was imported", lost.join(", "))
    }
}
