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
    /// `ticks` labelled ticks formatted by `label`.
    pub fn x_axis(
        &mut self,
        (x0, x1, y): (f64, f64, f64),
        (lo, hi): (f64, f64),
        ticks: usize,
        label: &dyn Fn(f64) -> String,
    ) {
        self.line("axis", (x0, y), (x1, y), "#333333", 1.0, "", "");
        for v in nice_ticks(lo, hi, ticks) {
            let x = x0 + (v - lo) / (hi - lo).max(f64::MIN_POSITIVE) * (x1 - x0);
            self.line("tick", (x, y), (x, y + 4.0), "#333333", 1.0, "", "");
            self.text("tick-label", x, y + 16.0, "middle", &label(v));
        }
    }

    /// A vertical axis along x = `x` from `y0` (bottom, value `lo`) to `y1` (top, `hi`).
    pub fn y_axis(
        &mut self,
        (x, y0, y1): (f64, f64, f64),
        (lo, hi): (f64, f64),
        ticks: usize,
        label: &dyn Fn(f64) -> String,
    ) {
        self.line("axis", (x, y0), (x, y1), "#333333", 1.0, "", "");
        for v in nice_ticks(lo, hi, ticks) {
            let y = y0 - (v - lo) / (hi - lo).max(f64::MIN_POSITIVE) * (y0 - y1);
            self.line("tick", (x - 4.0, y), (x, y), "#333333", 1.0, "", "");
            self.text("tick-label", x - 6.0, y + 4.0, "end", &label(v));
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

    /// A legend of named colours (calls, wait kinds), in rows from (x, y).
    pub fn key(&mut self, (x, y): (f64, f64), entries: &[(String, String)]) {
        self.body.push_str("<g class=\"key\">\n");
        let mut cx = x;
        for (name, colour) in entries {
            let width = 18.0 + 7.0 * name.chars().count() as f64;
            if cx + width > self.width - 12.0 {
                break;
            }
            self.rect("key-swatch", cx, y - 9.0, 10.0, 10.0, colour, "", name);
            self.text("key-label", cx + 14.0, y, "start", name);
            cx += width + 10.0;
        }
        self.body.push_str("</g>\n");
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
    if hi <= lo || !lo.is_finite() || !hi.is_finite() || n == 0 {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let power = 10f64.powf(raw.log10().floor());
    // The round step nearest the raw one (on a log scale).
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .min_by(|a, b| (a / raw).ln().abs().total_cmp(&(b / raw).ln().abs()))
        .unwrap_or(power);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() <= 2 * n + 2 {
        out.push(v);
        v += step;
    }
    out
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

/// The colour of an MPI call (or of computation), the same in every picture: sends green,
/// receives red, waits blue, each family of collectives its own hue; other names take a
/// colour from [`category_colour`] by a hash of the name.
pub fn call_colour(name: &str) -> &'static str {
    let bare = name
        .strip_prefix("MPI_")
        .unwrap_or(name)
        .trim_start_matches('I')
        .to_ascii_lowercase();
    match bare.as_str() {
        "computation" => "#d9d9d9",
        "send" | "ssend" | "bsend" | "rsend" => "#2ca02c",
        "recv" | "mrecv" => "#d62728",
        "sendrecv" | "sendrecv_replace" => "#bcbd22",
        "wait" | "waitall" | "waitany" | "waitsome" | "test" | "testall" | "testany"
        | "testsome" | "probe" => "#1f77b4",
        "bcast" => "#ff7f0e",
        "reduce" | "allreduce" | "reduce_scatter" | "reduce_scatter_block" | "scan" | "exscan" => {
            "#9467bd"
        }
        "barrier" => "#8c564b",
        "alltoall" | "alltoallv" | "alltoallw" => "#17becf",
        "gather" | "gatherv" | "allgather" | "allgatherv" | "scatter" | "scatterv" => "#e377c2",
        "nit" | "nit_thread" | "finalize" => "#555555",
        _ => {
            let hash = name
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            category_colour(hash)
        }
    }
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
    fn a_call_has_one_colour_in_every_picture() {
        assert_eq!(call_colour("MPI_Isend"), call_colour("MPI_Send"));
        assert_eq!(call_colour("MPI_Init"), call_colour("MPI_Finalize"));
        assert_ne!(call_colour("MPI_Irecv"), call_colour("MPI_Isend"));
        assert_eq!(call_colour("MPI_Bcast"), "#ff7f0e");
    }

    #[test]
    fn text_is_escaped_for_xml() {
        assert_eq!(
            escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\u{fffd}"
        );
    }
}
