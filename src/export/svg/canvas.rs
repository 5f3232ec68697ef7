//! The SVG document every picture writes into: elements with a class and a tooltip, text
//! escaped for XML, axes with readable ticks, and the colour scales with their legends.
//!
//! Pictures mark what they draw with a class (`cell`, `op`, `message`, `phase`, …) and data
//! attributes (`data-ops`, `data-value`), so that a test, or a user's script, reads back from
//! the SVG what it shows; every mark has a `<title>`, which browsers show on hover.

pub use crate::units::{count as format_count, duration as format_ns};
use std::fmt::Write as _;

/// Width of every picture, in CSS pixels (a laptop screen's content width).
pub const WIDTH: f64 = 1200.0;

/// An SVG document being written (the whole picture is bounded by its marks, which every
/// picture bounds by aggregating: blocks of ranks, pixels of time).
pub struct Canvas {
    body: String,
    width: f64,
    height: f64,
}

impl Canvas {
    /// An empty picture `width` x `height` pixels.
    pub fn new(width: f64, height: f64) -> Canvas {
        Canvas {
            body: String::with_capacity(1 << 16),
            width,
            height,
        }
    }

    /// The height (pictures grow with their lanes before they start drawing).
    pub fn height(&self) -> f64 {
        self.height
    }

    /// The finished document.
    pub fn finish(self) -> String {
        let mut out = String::with_capacity(self.body.len() + 512);
        let _ = write!(
            out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
             viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <rect class=\"background\" x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n",
            w = num(self.width),
            h = num(self.height)
        );
        out.push_str(&self.body);
        out.push_str("</svg>\n");
        out
    }

    /// A rectangle of `class` with its fill, extra attributes (already formatted, each with a
    /// leading space) and a tooltip.
    #[allow(clippy::too_many_arguments)]
    pub fn rect(
        &mut self,
        class: &str,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        fill: &str,
        attributes: &str,
        title: &str,
    ) {
        let _ = write!(
            self.body,
            "<rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"{attributes}>",
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0))
        );
        self.title_and_close(title, "rect");
    }

    /// A line of `class` from (x1, y1) to (x2, y2).
    #[allow(clippy::too_many_arguments)]
    pub fn line(
        &mut self,
        class: &str,
        (x1, y1): (f64, f64),
        (x2, y2): (f64, f64),
        stroke: &str,
        width: f64,
        attributes: &str,
        title: &str,
    ) {
        let _ = write!(
            self.body,
            "<line class=\"{class}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{stroke}\" stroke-width=\"{}\"{attributes}>",
            num(x1),
            num(y1),
            num(x2),
            num(y2),
            num(width)
        );
        self.title_and_close(title, "line");
    }

    /// A circle of `class` at (x, y).
    pub fn circle(&mut self, class: &str, (x, y): (f64, f64), r: f64, fill: &str, title: &str) {
        let _ = write!(
            self.body,
            "<circle class=\"{class}\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{fill}\" stroke=\"#333333\" stroke-width=\"0.5\">",
            num(x),
            num(y),
            num(r)
        );
        self.title_and_close(title, "circle");
    }

    /// Text at (x, y); `anchor` is start, middle or end.
    pub fn text(&mut self, class: &str, x: f64, y: f64, anchor: &str, text: &str) {
        let _ = write!(
            self.body,
            "<text class=\"{class}\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">",
            num(x),
            num(y)
        );
        escape_into(&mut self.body, text);
        self.body.push_str("</text>\n");
    }

    /// Text turned a quarter to the left (vertical axis titles), centred at (x, y).
    pub fn vertical_text(&mut self, class: &str, x: f64, y: f64, text: &str) {
        let _ = write!(
            self.body,
            "<text class=\"{class}\" x=\"{x}\" y=\"{y}\" text-anchor=\"middle\" transform=\"rotate(-90 {x} {y})\">",
            x = num(x),
            y = num(y)
        );
        escape_into(&mut self.body, text);
        self.body.push_str("</text>\n");
    }

    /// The picture's title, top left.
    pub fn heading(&mut self, text: &str) {
        let _ = write!(
            self.body,
            "<text class=\"heading\" x=\"12\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
        );
        escape_into(&mut self.body, text);
        self.body.push_str("</text>\n");
    }

    /// A note under the heading (what was aggregated, what was left out).
    pub fn note(&mut self, text: &str) {
        self.text("note", 12.0, 40.0, "start", text);
    }

    fn title_and_close(&mut self, title: &str, element: &str) {
        if title.is_empty() {
            self.body.push_str(&format!("</{element}>\n"));
            return;
        }
        self.body.push_str("<title>");
        escape_into(&mut self.body, title);
        let _ = writeln!(self.body, "</title></{element}>");
    }

    /// A horizontal axis along y = `y` from `x0` to `x1` for values `lo..hi`, with about
    /// `ticks` ticks labelled in `unit` (every label distinct: see [`tick_labels`]).
    pub fn x_axis(
        &mut self,
        (x0, x1, y): (f64, f64, f64),
        (lo, hi): (f64, f64),
        ticks: usize,
        unit: TickUnit,
    ) {
        self.line("axis", (x0, y), (x1, y), "#333333", 1.0, "", "");
        for (v, label) in tick_labels(lo, hi, ticks, unit) {
            let x = x0 + (v - lo) / (hi - lo).max(f64::MIN_POSITIVE) * (x1 - x0);
            self.line("tick", (x, y), (x, y + 4.0), "#333333", 1.0, "", "");
            self.text("tick-label", x, y + 16.0, "middle", &label);
        }
    }

    /// A vertical axis along x = `x` from `y0` (bottom, value `lo`) to `y1` (top, `hi`).
    pub fn y_axis(
        &mut self,
        (x, y0, y1): (f64, f64, f64),
        (lo, hi): (f64, f64),
        ticks: usize,
        unit: TickUnit,
    ) {
        self.line("axis", (x, y0), (x, y1), "#333333", 1.0, "", "");
        for (v, label) in tick_labels(lo, hi, ticks, unit) {
            let y = y0 - (v - lo) / (hi - lo).max(f64::MIN_POSITIVE) * (y0 - y1);
            self.line("tick", (x - 4.0, y), (x, y), "#333333", 1.0, "", "");
            self.text("tick-label", x - 6.0, y + 4.0, "end", &label);
        }
    }

    /// A colour legend: a bar of the scale from `lo` to `hi` with its two ends labelled, and
    /// `data-min`/`data-max` holding the range exactly.
    pub fn legend(&mut self, (x, y): (f64, f64), scale: &ColourScale, what: &str) {
        let _ = writeln!(
            self.body,
            "<g class=\"legend\" data-min=\"{}\" data-max=\"{}\" data-scale=\"{}\">",
            scale.lo,
            scale.hi,
            if scale.log { "log" } else { "linear" }
        );
        const STEPS: usize = 32;
        let w = 160.0;
        for i in 0..STEPS {
            let t = i as f64 / (STEPS - 1) as f64;
            self.rect(
                "legend-step",
                x + w * i as f64 / STEPS as f64,
                y,
                w / STEPS as f64 + 0.5,
                10.0,
                &palette(t),
                "",
                "",
            );
        }
        self.text(
            "legend-label",
            x,
            y + 24.0,
            "start",
            &format_count(scale.lo),
        );
        self.text(
            "legend-label",
            x + w,
            y + 24.0,
            "end",
            &format_count(scale.hi),
        );
        self.text("legend-title", x + w / 2.0, y - 4.0, "middle", what);
        self.body.push_str("</g>\n");
    }

    /// A legend of named colours (calls, wait kinds), in rows from (x, y) that wrap at the
    /// picture's width; every entry is shown (the picture grows to hold the rows: see
    /// [`Canvas::key_height`]).
    pub fn key(&mut self, (x, y): (f64, f64), entries: &[(String, String)]) {
        self.body.push_str("<g class=\"key\">\n");
        for ((cx, cy), (name, colour)) in
            key_places(x, self.width, entries).into_iter().zip(entries)
        {
            let _ = write!(
                self.body,
                "<rect class=\"key-swatch\" x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\" data-name=\"",
                num(cx),
                num(y + cy - 9.0)
            );
            escape_into(&mut self.body, name);
            self.body.push_str("\">");
            self.title_and_close(name, "rect");
            self.text("key-label", cx + 14.0, y + cy, "start", name);
        }
        self.body.push_str("</g>\n");
    }

    /// The height the rows of [`Canvas::key`] take for `entries` from `x`.
    pub fn key_height(&self, x: f64, entries: &[(String, String)]) -> f64 {
        key_places(x, self.width, entries)
            .last()
            .map_or(0.0, |&(_, y)| y + KEY_ROW)
    }

    /// Makes the picture `extra` pixels taller (a legend that wraps).
    pub fn grow(&mut self, extra: f64) {
        self.height += extra.max(0.0);
    }

    /// Starts a group of `class` with extra attributes (formatted, each with a leading
    /// space), closed by [`Canvas::end_group`].
    pub fn group_with(&mut self, class: &str, attributes: &str) {
        let _ = writeln!(self.body, "<g class=\"{class}\"{attributes}>");
    }

    /// Starts a group of `class` (closed by [`Canvas::end_group`]).
    pub fn group(&mut self, class: &str) {
        let _ = writeln!(self.body, "<g class=\"{class}\">");
    }

    /// Ends the group [`Canvas::group`] started.
    pub fn end_group(&mut self) {
        self.body.push_str("</g>\n");
    }
}

/// The height of a row of [`Canvas::key`].
const KEY_ROW: f64 = 18.0;

/// Where each entry of a key goes, relative to its first row: left to right, wrapping at
/// `width`.
fn key_places(x: f64, width: f64, entries: &[(String, String)]) -> Vec<(f64, f64)> {
    let (mut cx, mut cy) = (x, 0.0);
    entries
        .iter()
        .map(|(name, _)| {
            let w = 18.0 + 7.0 * name.chars().count() as f64;
            if cx > x && cx + w > width - 12.0 {
                cx = x;
                cy += KEY_ROW;
            }
            let at = (cx, cy);
            cx += w + 10.0;
            at
        })
        .collect()
}

/// A number as SVG writes it: at most two decimals, no trailing zeros.
pub fn num(v: f64) -> String {
    let r = (v * 100.0).round() / 100.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// Appends `s` escaped for XML text and attribute values (characters XML cannot carry
/// become U+FFFD).
pub fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// `s` escaped for XML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

/// About `n` round values (1, 2 or 5 times a power of ten) between `lo` and `hi`.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let Some(step) = nice_step(lo, hi, n) else {
        return vec![lo];
    };
    let first = (lo / step).ceil();
    // Each tick from its index (not by adding steps), so that rounding does not pile up.
    (0..=2 * n + 2)
        .map(|i| (first + i as f64) * step)
        .take_while(|v| *v <= hi + step * 1e-9)
        .collect()
}

/// The step of [`nice_ticks`]: the round value (1, 2 or 5 times a power of ten) nearest
/// `(hi - lo) / n` on a log scale; `None` for an empty or non-finite range.
fn nice_step(lo: f64, hi: f64, n: usize) -> Option<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() || n == 0 {
        return None;
    }
    let raw = (hi - lo) / n as f64;
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .min_by(|a, b| (a / raw).ln().abs().total_cmp(&(b / raw).ln().abs()))
}

/// What an axis's values are, for its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickUnit {
    /// Nanoseconds, labelled in s, ms, µs or ns.
    Time,
    /// Plain numbers, shortened with k, M, G, T.
    Count,
}

/// The ticks of an axis over `lo..hi` ([`nice_ticks`]) with their labels in `unit`: one unit
/// for the whole axis (that of its largest value) and as many decimals as the step needs, so
/// that no two labels are the same at any zoom (`1.708002 s`, `1.708004 s`, … where a
/// duration rounded to three decimals would repeat `1.708 s`).
///
/// ```
/// use mtfdb::export::svg::canvas::{tick_labels, TickUnit};
/// let labels: Vec<String> = tick_labels(1.708e9, 1.708_02e9, 5, TickUnit::Time)
///     .into_iter()
///     .map(|(_, l)| l)
///     .collect();
/// assert_eq!(labels[..2], ["1.708 s".to_string(), "1.708005 s".to_string()]);
/// ```
pub fn tick_labels(lo: f64, hi: f64, n: usize, unit: TickUnit) -> Vec<(f64, String)> {
    let ticks = nice_ticks(lo, hi, n);
    let step = nice_step(lo, hi, n).unwrap_or(1.0);
    let largest = ticks.iter().fold(0f64, |m, v| m.max(v.abs()));
    let (scale, suffix) = match unit {
        TickUnit::Time => match largest {
            a if a >= 1e9 => (1e9, " s"),
            a if a >= 1e6 => (1e6, " ms"),
            a if a >= 1e3 => (1e3, " µs"),
            _ => (1.0, " ns"),
        },
        TickUnit::Count => match largest {
            a if a >= 1e12 => (1e12, "T"),
            a if a >= 1e9 => (1e9, "G"),
            a if a >= 1e6 => (1e6, "M"),
            a if a >= 1e4 => (1e3, "k"),
            _ => (1.0, ""),
        },
    };
    // Decimals enough for the step in the axis's unit (a step is 1, 2 or 5 times 10^k).
    let decimals = (-(step / scale).log10().floor()).clamp(0.0, 16.0) as usize;
    ticks
        .into_iter()
        .map(|v| {
            let text = format!("{:.decimals$}", v / scale);
            // Round values read without their trailing zeros (`1.708 s`, not `1.708000 s`).
            let text = if text.contains('.') {
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                text
            };
            let text = if text == "-0" { "0".to_string() } else { text };
            (v, format!("{text}{suffix}"))
        })
        .collect()
}

/// A sequential colour scale from `lo` to `hi`, logarithmic when the data spans more than
/// two orders of magnitude (traffic does: a neighbour exchange beside a reduction's bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColourScale {
    /// The smallest value drawn.
    pub lo: f64,
    /// The largest value drawn.
    pub hi: f64,
    /// Whether colours follow log(value).
    pub log: bool,
}

impl ColourScale {
    /// The scale of positive `values` (at least one).
    pub fn of(values: impl Iterator<Item = f64>) -> ColourScale {
        let (mut lo, mut hi) = (f64::INFINITY, 0f64);
        for v in values.filter(|v| *v > 0.0) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            lo = 0.0;
        }
        ColourScale {
            lo,
            hi,
            log: lo > 0.0 && hi / lo > 100.0,
        }
    }

    /// The colour of `v`.
    pub fn colour(&self, v: f64) -> String {
        let t = if self.hi <= self.lo {
            1.0
        } else if self.log {
            (v.max(self.lo).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        palette(t.clamp(0.0, 1.0))
    }
}

/// A perceptually ordered palette from pale yellow (t = 0) to dark purple (t = 1), readable
/// when printed in grey.
pub fn palette(t: f64) -> String {
    const STOPS: [(f64, f64, f64); 5] = [
        (253.0, 231.0, 37.0),
        (94.0, 201.0, 98.0),
        (33.0, 145.0, 140.0),
        (59.0, 82.0, 139.0),
        (68.0, 1.0, 84.0),
    ];
    let t = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// Distinct colours for categories (MPI calls, wait kinds, phases), as Vampir colours calls
/// by kind; the `i`th category's colour.
pub fn category_colour(i: usize) -> &'static str {
    const COLOURS: [&str; 12] = [
        "#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324",
        "#469990", "#808000", "#000075", "#a9a9a9",
    ];
    COLOURS[i % COLOURS.len()]
}

/// The families of MPI calls that share a hue: (hue in degrees, saturation, members by
/// their name without `MPI_` in lower case). A non-blocking call (`MPI_I…`) is its blocking
/// call's shade, lighter.
const FAMILIES: [(f64, f64, &[&str]); 10] = [
    (120.0, 0.55, &["send", "ssend", "bsend", "rsend"]),
    (0.0, 0.7, &["recv", "mrecv"]),
    (60.0, 0.6, &["sendrecv", "sendrecv_replace"]),
    (
        210.0,
        0.65,
        &[
            "wait", "waitall", "waitany", "waitsome", "test", "testall", "testany", "testsome",
            "probe", "mprobe",
        ],
    ),
    (30.0, 0.9, &["bcast"]),
    (
        275.0,
        0.45,
        &[
            "reduce",
            "allreduce",
            "reduce_scatter",
            "reduce_scatter_block",
            "scan",
            "exscan",
        ],
    ),
    (15.0, 0.35, &["barrier"]),
    (185.0, 0.7, &["alltoall", "alltoallv", "alltoallw"]),
    (
        320.0,
        0.6,
        &[
            "gather",
            "gatherv",
            "allgather",
            "allgatherv",
            "scatter",
            "scatterv",
        ],
    ),
    (
        0.0,
        0.0,
        &[
            "init",
            "init_thread",
            "finalize",
            "comm_split",
            "comm_dup",
            "comm_free",
        ],
    ),
];

/// The colour of computation (CPU bursts) in every picture.
pub const COMPUTATION: &str = "#c9d3dd";

/// The colour of an MPI call (or of computation), the same in every picture and different
/// for every call: each family of calls its hue (sends green, receives red, waits and tests
/// blue, each family of collectives its own), each call in it its own lightness, the
/// non-blocking call lighter than its blocking one; other names (user routines, calls
/// outside the families) a colour from a hash of the name.
pub fn call_colour(name: &str) -> String {
    if name == "computation" {
        return COMPUTATION.to_string();
    }
    let bare = name
        .strip_prefix("MPI_")
        .unwrap_or(name)
        .to_ascii_lowercase();
    let member = |bare: &str| {
        FAMILIES.iter().find_map(|&(hue, sat, members)| {
            let i = members.iter().position(|m| *m == bare)?;
            Some((hue, sat, i, members.len()))
        })
    };
    let (found, non_blocking) = match member(&bare) {
        Some(m) => (Some(m), false),
        None => match bare.strip_prefix('i').and_then(member) {
            Some(m) => (Some(m), true),
            None => (None, false),
        },
    };
    match found {
        Some((hue, sat, i, n)) => {
            // 2n shades from dark to light: the blocking call, then its non-blocking one.
            let shade = (2 * i + usize::from(non_blocking)) as f64 / (2 * n - 1).max(1) as f64;
            hsl(hue, sat, 0.28 + 0.44 * shade)
        }
        None => {
            let hash = name
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
            hsl(
                (hash % 360) as f64,
                0.5,
                0.38 + (hash / 360 % 5) as f64 * 0.06,
            )
        }
    }
}

/// Distinct colours for `names`, in their order: each its [`call_colour`], made lighter or
/// darker step by step where it would repeat an earlier one (two names hashed alike), so that
/// no two swatches of a legend are the same.
pub fn distinct_call_colours(names: &[String]) -> Vec<String> {
    let mut used = std::collections::HashSet::new();
    names
        .iter()
        .map(|name| {
            let mut colour = call_colour(name);
            let mut k = 0u32;
            while !used.insert(colour.clone()) {
                k += 1;
                colour = shift(&colour, k);
            }
            colour
        })
        .collect()
}

/// `colour` (`#rrggbb`) moved by `k` small steps, alternately lighter and darker.
fn shift(colour: &str, k: u32) -> String {
    let c = u32::from_str_radix(colour.trim_start_matches('#'), 16).unwrap_or(0);
    let delta = (k.div_ceil(2) * 3) as i32 * if k % 2 == 1 { 1 } else { -1 };
    let channel = |s: u32| (((c >> s) & 0xff) as i32 + delta).clamp(0, 255) as u32;
    let moved = (channel(16) << 16) | (channel(8) << 8) | channel(0);
    if moved == c {
        // At white or black: step away from it.
        return format!("#{:06x}", c ^ k.min(255));
    }
    format!("#{moved:06x}")
}

/// The `#rrggbb` of a hue (degrees), saturation and lightness (0 to 1).
fn hsl(hue: f64, sat: f64, light: f64) -> String {
    let c = (1.0 - (2.0 * light - 1.0).abs()) * sat;
    let h = hue.rem_euclid(360.0) / 60.0;
    let x = c * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = light - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside_the_range() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(nice_ticks(3.0, 97.0, 4), vec![20.0, 40.0, 60.0, 80.0]);
        assert_eq!(nice_ticks(5.0, 5.0, 4), vec![5.0]);
    }

    #[test]
    fn the_colour_scale_goes_log_over_two_decades_and_spans_the_palette() {
        let s = ColourScale::of([1.0, 10.0, 10_000.0].into_iter());
        assert!(s.log);
        assert_eq!((s.lo, s.hi), (1.0, 10_000.0));
        assert_eq!(s.colour(1.0), palette(0.0));
        assert_eq!(s.colour(10_000.0), palette(1.0));
        assert_eq!(s.colour(100.0), palette(0.5));
        assert!(!ColourScale::of([5.0, 50.0].into_iter()).log);
    }

    #[test]
    fn every_call_has_its_own_colour_and_families_share_a_hue() {
        let mut names: Vec<String> = FAMILIES
            .iter()
            .flat_map(|f| f.2.iter())
            .flat_map(|m| [format!("MPI_{m}"), format!("MPI_I{m}")])
            .collect();
        names.push("computation".into());
        let colours: std::collections::BTreeSet<String> =
            names.iter().map(|n| call_colour(n)).collect();
        assert_eq!(colours.len(), names.len(), "{names:?}");
        // The same call, the same colour, whatever its spelling's case.
        assert_eq!(call_colour("MPI_Waitall"), call_colour("MPI_WAITALL"));
        assert_ne!(call_colour("MPI_Wait"), call_colour("MPI_Waitall"));
        assert_ne!(call_colour("MPI_Init"), call_colour("MPI_Finalize"));
        // A repeat made distinct.
        let twice = distinct_call_colours(&["a".into(), "a".into(), "a".into()]);
        assert!(twice[0] != twice[1] && twice[1] != twice[2] && twice[0] != twice[2]);
    }

    #[test]
    fn tick_labels_are_distinct_at_any_zoom() {
        let mut seed = 42u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..10_000 {
            let lo = (next() * 1e13).floor();
            let span = (10f64.powf(next() * 12.0)).max(2.0).floor();
            for unit in [TickUnit::Time, TickUnit::Count] {
                let labels = tick_labels(lo, lo + span, 8, unit);
                let set: std::collections::BTreeSet<&String> =
                    labels.iter().map(|(_, l)| l).collect();
                assert_eq!(set.len(), labels.len(), "{lo} + {span}: {labels:?}");
            }
        }
        let labels: Vec<String> = tick_labels(0.0, 2e6, 4, TickUnit::Time)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert_eq!(labels, ["0 ms", "0.5 ms", "1 ms", "1.5 ms", "2 ms"]);
    }

    #[test]
    fn text_is_escaped_for_xml() {
        assert_eq!(
            escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\u{fffd}"
        );
    }
}
