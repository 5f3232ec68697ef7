//! Phases and patterns over time, as the thesis draws its phase bars: a band per phase with
//! its routine, and under it a row per communication pattern with a mark per occurrence.

use super::canvas::{category_colour, escape, format_ns, Canvas, TickUnit, WIDTH};
use crate::results::{ResultSet, Value};

const LEFT: f64 = 110.0;
const TOP: f64 = 64.0;
const RIGHT: f64 = 20.0;
const BAND_H: f64 = 46.0;
const ROW_H: f64 = 18.0;
/// Pattern rows drawn at the most (the rest are named in the note).
const MAX_PATTERN_ROWS: usize = 40;
/// The width of the time axis, in pixels.
const PIXELS: f64 = WIDTH - LEFT - RIGHT;

fn seconds_to_ns(v: &Value) -> u64 {
    match v {
        Value::Float(s) => (s * 1e9).round().max(0.0) as u64,
        Value::Int(s) => u64::try_from(*s).unwrap_or(0).saturating_mul(1_000_000_000),
        Value::Null | Value::Text(_) => 0,
    }
}

/// One communication pattern's occurrences, `(start, end)` in nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternOccurrences {
    /// The pattern's number, as `SELECT COMMUNICATION PATTERNS` numbers it.
    pub pattern: u32,
    /// Its occurrences.
    pub occurrences: Vec<(u64, u64)>,
}

/// The phase bands of `phases` (a `SELECT PHASES` result: `phase`, `start_s`, `end_s`,
/// `routine`) and the occurrences of `patterns` over the run's time `(t0, t1)`.
pub fn phases(
    title: &str,
    phases: &ResultSet,
    patterns: &[PatternOccurrences],
    (t0, t1): (u64, u64),
) -> Canvas {
    let shown = patterns.len().min(MAX_PATTERN_ROWS);
    let height = TOP + BAND_H + 20.0 + shown as f64 * ROW_H + 80.0;
    let mut canvas = Canvas::new(WIDTH, height);
    canvas.heading(title);
    let mut note = format!("{} phases, {} patterns", phases.len(), patterns.len());
    if shown < patterns.len() {
        note.push_str(&format!(" (the first {shown} drawn)"));
    }
    canvas.note(&note);
    let span = t1.saturating_sub(t0).max(1) as f64;
    let x = |t: u64| LEFT + (t.saturating_sub(t0) as f64 / span * PIXELS).min(PIXELS);
    let column = |name: &str| phases.column(name);
    canvas.text(
        "row-label",
        LEFT - 8.0,
        TOP + BAND_H / 2.0 + 4.0,
        "end",
        "phases",
    );
    canvas.group("phases");
    if let (Some(p), Some(s), Some(e)) = (column("phase"), column("start_s"), column("end_s")) {
        let routine = column("routine");
        for (i, row) in phases.rows.iter().enumerate() {
            let (start, end) = (seconds_to_ns(&row[s]), seconds_to_ns(&row[e]));
            let name = row[p].render();
            let routine = routine.map(|r| row[r].render()).unwrap_or_default();
            let (x0, x1) = (x(start), x(end));
            canvas.rect(
                "phase",
                x0,
                TOP,
                (x1 - x0).max(1.0),
                BAND_H,
                category_colour(i),
                &format!(
                    " fill-opacity=\"0.55\" data-phase=\"{}\" data-start-ns=\"{start}\" data-end-ns=\"{end}\"",
                    escape(&name)
                ),
                &format!(
                    "phase {name}: {} to {}{}",
                    format_ns(start as f64),
                    format_ns(end as f64),
                    if routine.is_empty() { String::new() } else { format!(", {routine}") }
                ),
            );
            if x1 - x0 > 60.0 {
                canvas.text(
                    "phase-label",
                    (x0 + x1) / 2.0,
                    TOP + 18.0,
                    "middle",
                    &format!("phase {name}"),
                );
                if !routine.is_empty() {
                    canvas.text(
                        "phase-routine",
                        (x0 + x1) / 2.0,
                        TOP + 34.0,
                        "middle",
                        &routine,
                    );
                }
            }
        }
    }
    canvas.end_group();

    let rows_top = TOP + BAND_H + 20.0;
    canvas.group("patterns");
    for (i, p) in patterns.iter().take(shown).enumerate() {
        let y = rows_top + i as f64 * ROW_H;
        canvas.text(
            "row-label",
            LEFT - 8.0,
            y + ROW_H / 2.0 + 4.0,
            "end",
            &format!("pattern {}", p.pattern),
        );
        // Occurrences in the same pixel are one mark (its count in data-occurrences).
        let mut marks: Vec<(f64, f64, u64, u64, u64)> = Vec::new();
        for &(s, e) in &p.occurrences {
            let (x0, x1) = (x(s), x(e));
            match marks.last_mut() {
                Some(m) if x0 - m.0 < 1.0 => {
                    m.1 = m.1.max(x1);
                    m.2 += 1;
                    m.4 = m.4.max(e);
                }
                _ => marks.push((x0, x1, 1, s, e)),
            }
        }
        for (x0, x1, n, s, e) in marks {
            canvas.rect(
                "occurrence",
                x0,
                y + 3.0,
                (x1 - x0).max(1.0),
                ROW_H - 6.0,
                category_colour(p.pattern as usize),
                &format!(" data-pattern=\"{}\" data-occurrences=\"{n}\"", p.pattern),
                &format!(
                    "pattern {}: {} from {} to {}",
                    p.pattern,
                    if n == 1 {
                        "occurrence".to_string()
                    } else {
                        format!("{n} occurrences")
                    },
                    format_ns(s as f64),
                    format_ns(e as f64)
                ),
            );
        }
    }
    canvas.end_group();
    let bottom = rows_top + shown as f64 * ROW_H + 6.0;
    canvas.x_axis(
        (LEFT, LEFT + PIXELS, bottom),
        (t0 as f64, t1 as f64),
        8,
        TickUnit::Time,
    );
    canvas
}
