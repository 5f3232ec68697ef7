//! Bar charts: histograms (a bar per bin, labelled by its bounds) and per-group values (time
//! in MPI per rank, wait states per kind or per rank stacked by kind, fan-in, `GROUP BY`
//! aggregates).

use super::canvas::{category_colour, escape, format_count, format_ns, Canvas, TickUnit, WIDTH};
use crate::error::{Error, Result};
use crate::results::{ResultSet, Value};

/// The most bars drawn side by side; more groups are drawn as blocks holding their mean.
pub const MAX_BARS: usize = 1000;

const LEFT: f64 = 90.0;
const TOP: f64 = 70.0;
const PLOT_W: f64 = WIDTH - LEFT - 40.0;
const PLOT_H: f64 = 420.0;

fn number(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Null | Value::Text(_) => 0.0,
    }
}

/// How a column's numbers read: nanoseconds as durations, the rest as counts.
fn unit_label(column: &str) -> fn(f64) -> String {
    if column.ends_with("_ns") {
        format_ns
    } else {
        format_count
    }
}

/// How a column's axis is labelled: nanoseconds as durations, the rest as counts.
fn tick_unit(column: &str) -> TickUnit {
    if column.ends_with("_ns") {
        TickUnit::Time
    } else {
        TickUnit::Count
    }
}

/// A histogram from a `low, high, count` result: one bar per bin, every bin labelled.
pub fn histogram(result: &ResultSet, title: &str, of: &str) -> Result<Canvas> {
    let (Some(low), Some(high), Some(count)) = (
        result.column("low"),
        result.column("high"),
        result.column("count"),
    ) else {
        return Err(Error::Usage(
            "a histogram picture needs the low, high and count columns of SELECT HISTOGRAM".into(),
        ));
    };
    let mut canvas = Canvas::new(WIDTH, TOP + PLOT_H + 90.0);
    canvas.heading(title);
    let total: f64 = result.rows.iter().map(|r| number(&r[count])).sum();
    canvas.note(&format!("{} bins, {} values", result.len(), total));
    let max = result
        .rows
        .iter()
        .map(|r| number(&r[count]))
        .fold(0.0, f64::max)
        .max(1.0);
    let n = result.len().max(1) as f64;
    let w = PLOT_W / n;
    let bottom = TOP + PLOT_H;
    let label = unit_label(of);
    let every = ((70.0 / w).ceil() as usize).max(1);
    canvas.group("bins");
    for (i, row) in result.rows.iter().enumerate() {
        let c = number(&row[count]);
        let h = c / max * PLOT_H;
        let (lo, hi) = (number(&row[low]), number(&row[high]));
        let bounds = format!("[{}, {})", label(lo), label(hi));
        canvas.rect(
            "bin",
            LEFT + i as f64 * w + 1.0,
            bottom - h,
            (w - 2.0).max(0.5),
            h,
            category_colour(2),
            &format!(
                " data-low=\"{}\" data-high=\"{}\" data-count=\"{}\"",
                row[low].render(),
                row[high].render(),
                row[count].render()
            ),
            &format!("{bounds}: {c}"),
        );
        if i % every == 0 {
            canvas.text(
                "bin-label",
                LEFT + (i as f64 + 0.5) * w,
                bottom + 16.0,
                "middle",
                &label(lo),
            );
        }
    }
    canvas.end_group();
    axes(
        &mut canvas,
        (bottom, max),
        TickUnit::Count,
        &format!("{of} (each bar from its label to the next)"),
    );
    canvas.vertical_text("axis-title", 24.0, TOP + PLOT_H / 2.0, "count");
    Ok(canvas)
}

/// Bars of `values` (columns of `result`, stacked when several) per row, labelled by the
/// `label` column.
pub fn bars(result: &ResultSet, title: &str, label: usize, values: &[usize]) -> Canvas {
    let per_bar = result.len().div_ceil(MAX_BARS).max(1);
    let groups: Vec<&[Vec<Value>]> = result.rows.chunks(per_bar).collect();
    let heights: Vec<Vec<f64>> = groups
        .iter()
        .map(|rows| {
            values
                .iter()
                .map(|&c| rows.iter().map(|r| number(&r[c])).sum::<f64>() / rows.len() as f64)
                .collect()
        })
        .collect();
    let max = heights
        .iter()
        .map(|h| h.iter().map(|v| v.max(0.0)).sum::<f64>())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let names: Vec<&str> = values.iter().map(|&c| result.columns[c].as_str()).collect();
    let fmt = unit_label(names.first().copied().unwrap_or(""));
    let mut canvas = Canvas::new(WIDTH, TOP + PLOT_H + 110.0);
    canvas.heading(title);
    canvas.note(&if per_bar == 1 {
        format!("{} bars", groups.len())
    } else {
        format!(
            "{} rows in {} bars of {per_bar} rows each (a bar shows their mean)",
            result.len(),
            groups.len()
        )
    });
    let w = PLOT_W / groups.len().max(1) as f64;
    let bottom = TOP + PLOT_H;
    let every = ((60.0 / w).ceil() as usize).max(1);
    let label_name = &result.columns[label];
    canvas.group("bars");
    for (i, (rows, h)) in groups.iter().zip(&heights).enumerate() {
        let first = rows[0][label].render();
        let name = if rows.len() == 1 {
            first.clone()
        } else {
            format!("{first}…{}", rows[rows.len() - 1][label].render())
        };
        let mut y = bottom;
        for (k, v) in h.iter().enumerate() {
            let bar_h = v.max(0.0) / max * PLOT_H;
            y -= bar_h;
            canvas.rect(
                "bar",
                LEFT + i as f64 * w + w * 0.1,
                y,
                (w * 0.8).max(0.5),
                bar_h,
                category_colour(k),
                &format!(
                    " data-label=\"{}\" data-series=\"{}\" data-value=\"{}\"",
                    escape(&name),
                    escape(names[k]),
                    v
                ),
                &format!("{label_name} {name}: {} {}", names[k], fmt(*v)),
            );
        }
        if i % every == 0 {
            canvas.text(
                "bar-label",
                LEFT + (i as f64 + 0.5) * w,
                bottom + 16.0,
                "middle",
                &shorten(&name, 18),
            );
        }
    }
    canvas.end_group();
    let unit = tick_unit(names.first().copied().unwrap_or(""));
    axes(&mut canvas, (bottom, max), unit, label_name);
    if names.len() > 1 {
        let key: Vec<(String, String)> = names
            .iter()
            .enumerate()
            .map(|(k, n)| (n.to_string(), category_colour(k).to_string()))
            .collect();
        canvas.key((LEFT, bottom + 70.0), &key);
    } else if let Some(n) = names.first() {
        canvas.vertical_text("axis-title", 24.0, TOP + PLOT_H / 2.0, n);
    }
    canvas
}

/// The value axis from 0 to `max` (labelled by `label`), the baseline at `bottom`, and the
/// title under the bars.
fn axes(canvas: &mut Canvas, (bottom, max): (f64, f64), unit: TickUnit, title: &str) {
    canvas.y_axis((LEFT, bottom, TOP), (0.0, max), 6, unit);
    let baseline = ((LEFT, bottom), (LEFT + PLOT_W, bottom));
    canvas.line("axis", baseline.0, baseline.1, "#333333", 1.0, "", "");
    canvas.text(
        "axis-title",
        LEFT + PLOT_W / 2.0,
        bottom + 40.0,
        "middle",
        title,
    );
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}
