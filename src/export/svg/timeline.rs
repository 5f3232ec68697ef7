//! A timeline, as Vampir and Paraver draw one: a lane per rank, time across, MPI calls as boxes
//! coloured by call, the computation between them and the user routines around them beside
//! them, messages as lines from send to receive, a collective's members joined.
//!
//! Whatever the selection's size, the marks are bounded by the picture's pixels, and no mark
//! is ever moved in time:
//!
//! - a call narrower than a pixel is gathered with the others starting in the same pixel of
//!   its lane into one box drawn from the first one's start to the last one's end (its
//!   `data-ops` says how many, its colour is the call that takes most of their time); the
//!   same for computation (`data-bursts`) and routine calls (`data-calls`);
//! - messages with the same lanes whose ends fall in the same pixels are one line
//!   (`data-messages`), drawn at those pixels: at most half a pixel from each message's
//!   times. When even so there would be more than [`MAX_LINES`] lines, no line is drawn:
//!   every message is counted, at its send on the sender's lane and at its receive on the
//!   receiver's, in density cells (`message-density`, a few pixels of one lane each, darker
//!   with more messages, with `data-sent`, `data-received` and the cell's time range), and the
//!   picture's note says so ("… messages drawn as … density cells");
//! - beyond [`MAX_LANES`] ranks a lane holds a block of consecutive ranks.
//!
//! The `data-ops` of the boxes add up to the rows drawn; the `data-messages` of the lines, or
//! the `data-sent` of the cells, to the messages drawn. The `messages` group carries the plot's
//! time range and pixels (`data-t0`, `data-t1`, `data-x0`, `data-x1`), so that a test reads
//! back from the picture where each line is in time.

use super::canvas::{
    distinct_call_colours, escape, format_count, format_ns, Canvas, TickUnit, COMPUTATION, WIDTH,
};
use crate::hash::FxHashMap as HashMap;
use crate::model::{rank_ranges, Rank};
use crate::results::{Row, Value};

/// The most lanes drawn; more ranks share lanes in blocks.
pub const MAX_LANES: usize = 380;

const LEFT: f64 = 80.0;
const TOP: f64 = 64.0;
const RIGHT: f64 = 20.0;
/// Message lines drawn at the most: beyond, messages are counted in density cells.
pub const MAX_LINES: usize = 20_000;
/// Density cells drawn at the most: beyond, a cell spans more pixels.
const MAX_CELLS: usize = 60_000;
/// Boxes of gathered calls at the most: beyond, calls are gathered over wider pixels.
const MAX_GATHERED: f64 = 150_000.0;
/// The colour of computation on the critical path: the path's cause, as strong as its hops.
const PATH_COMPUTATION: &str = "#e6550d";
/// The height of the critical path's own row, under the lanes.
const PATH_ROW: f64 = 18.0;

/// What a span of a lane is, and so where and how it is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Layer {
    /// The selected rows: MPI calls, CPU bursts or path segments (class `op`).
    Rows,
    /// Computation beside selected calls (class `computation`).
    Computation,
    /// User routine calls around selected calls (class `routine`, in a strip above).
    Routines,
    /// A critical path's segments again, in the path's own row (class `path-row`).
    PathRow,
}

impl Layer {
    /// The class of its marks and the attribute that counts what a mark holds.
    fn class_and_count(self) -> (&'static str, &'static str) {
        match self {
            Layer::Rows => ("op", "data-ops"),
            Layer::Computation => ("computation", "data-bursts"),
            Layer::Routines => ("routine", "data-calls"),
            Layer::PathRow => ("path-row", "data-ops"),
        }
    }
}

/// A call, a computation or a routine call on one rank.
#[derive(Debug, Clone, Copy)]
struct Span {
    layer: Layer,
    rank: Rank,
    /// A routine call's nesting depth (deeper calls are drawn over the calls around them).
    depth: u16,
    kind: u16,
    start: u64,
    end: u64,
}

/// A line between two ranks at two times: a message, or a step of the critical path.
#[derive(Debug, Clone, Copy)]
struct Link {
    from: (Rank, u64),
    to: (Rank, u64),
}

/// Where a result's columns hold what a timeline draws, found once per result.
#[derive(Debug, Clone, Copy)]
enum Layout {
    Message {
        sender: usize,
        receiver: usize,
        send: usize,
        recv: usize,
    },
    Span {
        rank: usize,
        start: usize,
        end: usize,
        /// `operation` (an MPI call, with its `id`) or `activity` (a path segment).
        name: Option<usize>,
        id: Option<usize>,
    },
    Other,
}

impl Layout {
    fn of(columns: &[String]) -> Layout {
        let at = |name: &str| columns.iter().position(|c| c == name);
        if let (Some(sender), Some(receiver), Some(send), Some(recv)) = (
            at("sender"),
            at("receiver"),
            at("send_time_ns"),
            at("recv_time_ns"),
        ) {
            return Layout::Message {
                sender,
                receiver,
                send,
                recv,
            };
        }
        match (at("rank"), at("start_ns"), at("end_ns")) {
            (Some(rank), Some(start), Some(end)) => Layout::Span {
                rank,
                start,
                end,
                name: at("operation")
                    .or_else(|| at("activity"))
                    .or_else(|| at("routine")),
                id: at("operation").and(at("id")),
            },
            _ => Layout::Other,
        }
    }
}

/// What a timeline draws, gathered from result rows (operations, CPU bursts, messages,
/// critical path segments) before it is drawn.
#[derive(Debug, Default)]
pub struct Timeline {
    spans: Vec<Span>,
    messages: Vec<Link>,
    path: Vec<Link>,
    /// Each collective instance drawn: its members' (rank, middle time).
    collectives: Vec<Vec<(Rank, u64)>>,
    kinds: Vec<String>,
    kind_index: HashMap<String, u16>,
    /// `(operation id, index in spans)` of the calls added with their id.
    op_ids: Vec<(u64, usize)>,
    op_ids_sorted: bool,
    layout: Option<(Vec<String>, Layout)>,
    messages_between_drawn_ranks: bool,
    /// The layer the rows added go to.
    adding: Option<Layer>,
    /// Drawn as a critical path: its computation as strong as its steps, its own row.
    path_mode: bool,
}

fn int(v: &Value) -> Option<u64> {
    match v {
        Value::Int(v) => u64::try_from(*v).ok(),
        _ => None,
    }
}

impl Timeline {
    /// An empty timeline.
    pub fn new() -> Timeline {
        Timeline {
            op_ids_sorted: true,
            ..Timeline::default()
        }
    }

    fn kind(&mut self, name: &str) -> u16 {
        if let Some(&k) = self.kind_index.get(name) {
            return k;
        }
        let k = self.kinds.len() as u16;
        self.kinds.push(name.to_string());
        self.kind_index.insert(name.to_string(), k);
        k
    }

    /// Adds one result row: an operation (`rank`, `operation`, `start_ns`, `end_ns`), a CPU
    /// burst (no `operation`: drawn as computation), a critical path segment (`activity`) or
    /// a message (`sender`, `receiver`, `send_time_ns`, `recv_time_ns`). Rows of none of
    /// these shapes are skipped.
    pub fn add_row(&mut self, row: &Row) {
        let layout = match &self.layout {
            Some((columns, layout)) if columns.as_slice() == row.columns() => *layout,
            _ => {
                let layout = Layout::of(row.columns());
                self.layout = Some((row.columns().to_vec(), layout));
                layout
            }
        };
        let v = row.values();
        match layout {
            Layout::Message {
                sender,
                receiver,
                send,
                recv,
            } => {
                if let (Some(s), Some(r), Some(ts), Some(tr)) = (
                    int(&v[sender]),
                    int(&v[receiver]),
                    int(&v[send]),
                    int(&v[recv]),
                ) {
                    self.add_message((s as Rank, ts), (r as Rank, tr));
                }
            }
            Layout::Span {
                rank,
                start,
                end,
                name,
                id,
            } => {
                let (Some(rank), Some(start), Some(end)) =
                    (int(&v[rank]), int(&v[start]), int(&v[end]))
                else {
                    return;
                };
                if self.adding == Some(Layer::Computation) && end <= start {
                    // Calls back to back: no computation to draw.
                    return;
                }
                let kind = match name.map(|n| &v[n]) {
                    Some(Value::Text(t)) => self.kind(t),
                    _ => self.kind("computation"),
                };
                if let Some(op) = id.and_then(|i| int(&v[i])) {
                    if self.op_ids.last().is_some_and(|&(last, _)| last > op) {
                        self.op_ids_sorted = false;
                    }
                    self.op_ids.push((op, self.spans.len()));
                }
                self.spans.push(Span {
                    layer: self.adding.unwrap_or(Layer::Rows),
                    rank: rank as Rank,
                    depth: 0,
                    kind,
                    start,
                    end,
                });
            }
            Layout::Other => {}
        }
    }

    /// Adds a row of `SELECT CPU BURSTS` as computation beside the selected calls (drawn
    /// under them in their lanes, class `computation`).
    pub fn add_computation_row(&mut self, row: &Row) {
        self.adding = Some(Layer::Computation);
        self.add_row(row);
        self.adding = None;
    }

    /// Adds a call of the user routine `name` at nesting `depth` on `rank`, drawn in a strip
    /// at the top of the rank's lane (class `routine`).
    pub fn add_routine(&mut self, rank: Rank, name: &str, depth: u16, (start, end): (u64, u64)) {
        let kind = self.kind(name);
        self.spans.push(Span {
            layer: Layer::Routines,
            rank,
            depth,
            kind,
            start,
            end,
        });
    }

    /// The ranks with selected rows (calls, bursts, segments), sorted.
    pub fn ranks_with_rows(&self) -> Vec<Rank> {
        let mut ranks: Vec<Rank> = self
            .spans
            .iter()
            .filter(|s| s.layer == Layer::Rows)
            .map(|s| s.rank)
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks
    }

    /// Adds a message from `(sender, send time)` to `(receiver, receive time)`.
    pub fn add_message(&mut self, from: (Rank, u64), to: (Rank, u64)) {
        self.messages.push(Link { from, to });
    }

    /// Draws only the messages whose both ranks have calls drawn (messages selected beside
    /// a selection of calls).
    pub fn keep_messages_between_drawn_ranks(&mut self) {
        self.messages_between_drawn_ranks = true;
    }

    /// Joins consecutive spans on different ranks as a path (the critical path), and draws
    /// it as one: its computation (the path's cause) in a strong colour, not the grey of
    /// computation elsewhere, the steps between ranks as thin red lines, and under the
    /// lanes a row of the whole path.
    pub fn join_as_path(&mut self) {
        self.path_mode = true;
        for w in self.spans.windows(2) {
            if w[0].rank != w[1].rank {
                self.path.push(Link {
                    from: (w[0].rank, w[0].end),
                    to: (w[1].rank, w[1].start),
                });
            }
        }
    }

    /// Joins the member operations of a collective instance, when at least two of its
    /// members were added as operations (by their `id`). Call it after the rows.
    pub fn add_collective(&mut self, member_ids: &[u64]) {
        if !self.op_ids_sorted {
            self.op_ids.sort_unstable();
            self.op_ids_sorted = true;
        }
        let members: Vec<(Rank, u64)> = member_ids
            .iter()
            .filter_map(|id| {
                let at = self.op_ids.binary_search_by_key(id, |&(op, _)| op).ok()?;
                let s = self.spans[self.op_ids[at].1];
                Some((s.rank, s.start + (s.end.saturating_sub(s.start)) / 2))
            })
            .collect();
        if members.len() >= 2 {
            self.collectives.push(members);
        }
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty() && self.messages.is_empty()
    }

    /// Draws the timeline over `window` (nanoseconds; the rows' own extent when `None`),
    /// titled `title`.
    pub fn draw(mut self, title: &str, window: Option<(u64, u64)>) -> Canvas {
        if self.messages_between_drawn_ranks {
            let drawn = self.ranks_with_rows();
            let on = |r: Rank| drawn.binary_search(&r).is_ok();
            self.messages.retain(|m| on(m.from.0) && on(m.to.0));
        }
        if let Some((t0, t1)) = window {
            self.messages
                .retain(|m| (t0..=t1).contains(&m.from.1) && (t0..=t1).contains(&m.to.1));
        }
        let mut ranks: Vec<Rank> = self
            .spans
            .iter()
            .map(|s| s.rank)
            .chain(self.messages.iter().flat_map(|m| [m.from.0, m.to.0]))
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        let per_lane = ranks.len().div_ceil(MAX_LANES).max(1);
        let lanes = ranks.len().div_ceil(per_lane).max(1);
        let lane_of: HashMap<Rank, usize> = ranks
            .iter()
            .enumerate()
            .map(|(i, &r)| (r, i / per_lane))
            .collect();
        let lane_h = (760.0 / lanes as f64).clamp(2.0, 26.0);
        let plot_w = WIDTH - LEFT - RIGHT;
        let (t0, t1) = window.unwrap_or_else(|| {
            // The selected rows and messages (routine calls around them may reach beyond).
            let rows = self.spans.iter().filter(|s| s.layer != Layer::Routines);
            let lo = rows
                .clone()
                .map(|s| s.start)
                .chain(self.messages.iter().map(|m| m.from.1.min(m.to.1)))
                .min()
                .unwrap_or(0);
            let hi = rows
                .map(|s| s.end)
                .chain(self.messages.iter().map(|m| m.from.1.max(m.to.1)))
                .max()
                .unwrap_or(lo + 1);
            (lo, hi.max(lo + 1))
        });
        let span_ns = (t1.saturating_sub(t0)).max(1) as f64;
        let x = |t: u64| LEFT + (t.saturating_sub(t0) as f64 / span_ns * plot_w).min(plot_w);
        let plot_h = lanes as f64 * lane_h;
        let path_row = if self.path_mode { PATH_ROW + 8.0 } else { 0.0 };
        let axis_y = TOP + plot_h + path_row + 4.0;
        let mut canvas = Canvas::new(WIDTH, axis_y + 86.0);
        canvas.heading(title);
        let lane_y = |rank: Rank| TOP + lane_of.get(&rank).copied().unwrap_or(0) as f64 * lane_h;

        // Every kind its own colour; on a critical path, computation is the cause drawn.
        let mut colours = distinct_call_colours(&self.kinds);
        if self.path_mode {
            if let Some(k) = self.kinds.iter().position(|k| k == "computation") {
                colours[k] = PATH_COMPUTATION.to_string();
            }
        }

        // Lanes and their labels, thinned to one every 14 pixels.
        let every = ((14.0 / lane_h).ceil() as usize).max(1);
        canvas.group("lanes");
        for lane in 0..lanes {
            let members = &ranks[lane * per_lane..((lane + 1) * per_lane).min(ranks.len())];
            let y = TOP + lane as f64 * lane_h;
            if lane % 2 == 1 {
                canvas.rect("lane", LEFT, y, plot_w, lane_h, "#f4f4f4", "", "");
            }
            let Some(first) = members.first() else {
                continue;
            };
            if lane % every == 0 {
                let label = if per_lane == 1 {
                    format!("rank {first}")
                } else {
                    rank_ranges(members)
                };
                canvas.text(
                    "lane-label",
                    LEFT - 6.0,
                    y + lane_h / 2.0 + 4.0,
                    "end",
                    &label,
                );
            }
        }
        canvas.end_group();

        // Within a lane: routine calls in a strip at the top, calls and computation below.
        let has_routines = self.spans.iter().any(|s| s.layer == Layer::Routines);
        let margin = if lane_h > 6.0 && !self.path_mode {
            2.0
        } else {
            0.0
        };
        let inner = lane_h - 2.0 * margin;
        let strip = if has_routines {
            (inner * 0.3).clamp(1.0, inner / 2.0)
        } else {
            0.0
        };
        let band = |layer: Layer| match layer {
            Layer::Routines => (margin, strip),
            Layer::Rows | Layer::Computation | Layer::PathRow => (margin + strip, inner - strip),
        };
        // Computation first (under), then routines from the outermost, then the rows.
        let order = |l: Layer| match l {
            Layer::Computation => 0,
            Layer::Routines => 1,
            Layer::Rows | Layer::PathRow => 2,
        };
        self.spans
            .sort_unstable_by_key(|s| (order(s.layer), s.rank, s.depth, s.start));
        // A bucket is a pixel wide, wider when lanes x pixels would pass MAX_GATHERED.
        let bucket_w = (lanes as f64 * plot_w / MAX_GATHERED).ceil().max(1.0);
        let style = SpanStyle {
            kinds: &self.kinds,
            colours: &colours,
            x: &x,
            bucket_w,
            individually: per_lane == 1,
        };
        for layer in [Layer::Computation, Layer::Routines, Layer::Rows] {
            let (class, _) = layer.class_and_count();
            let (dy, h) = band(layer);
            canvas.group(&format!("{class}s"));
            let spans = self.spans.iter().filter(|s| s.layer == layer);
            draw_spans(&mut canvas, spans, layer, &style, &|rank: Rank| {
                let lane = lane_of[&rank];
                (
                    lane,
                    ranks[lane * per_lane],
                    TOP + lane as f64 * lane_h + dy,
                    h,
                )
            });
            canvas.end_group();
        }
        if self.path_mode {
            // The whole path in one row: what it does at every moment, computation or calls.
            let y = TOP + plot_h + 8.0;
            canvas.text(
                "lane-label",
                LEFT - 6.0,
                y + PATH_ROW / 2.0 + 4.0,
                "end",
                "path",
            );
            canvas.group("path-rows");
            let style = SpanStyle {
                individually: true,
                ..style
            };
            let spans = self.spans.iter().filter(|s| s.layer == Layer::Rows);
            draw_spans(&mut canvas, spans, Layer::PathRow, &style, &|rank: Rank| {
                (0, rank, y, PATH_ROW)
            });
            canvas.end_group();
        }

        // Collectives: a dashed line from the member on the first lane to the one on the
        // last, through the middle of their calls; instances on the same lanes and pixels are
        // one line.
        let mut joined: HashMap<(usize, usize, i64, i64), u64> = HashMap::default();
        for members in &self.collectives {
            let first = members.iter().min_by_key(|m| (m.0, m.1));
            let last = members.iter().max_by_key(|m| (m.0, m.1));
            if let (Some(a), Some(b)) = (first, last) {
                let key = (
                    lane_of[&a.0],
                    lane_of[&b.0],
                    x(a.1).round() as i64,
                    x(b.1).round() as i64,
                );
                *joined.entry(key).or_default() += 1;
            }
        }
        let mut joined: Vec<_> = joined.into_iter().collect();
        joined.sort_unstable();
        canvas.group("collectives");
        for ((from, to, x0, x1), n) in joined {
            canvas.line(
                "collective",
                (x0 as f64, TOP + (from as f64 + 0.5) * lane_h),
                (x1 as f64, TOP + (to as f64 + 0.5) * lane_h),
                "#555555",
                0.6,
                &format!(" stroke-dasharray=\"2,2\" data-collectives=\"{n}\""),
                &format!("{n} collective instance{}", if n == 1 { "" } else { "s" }),
            );
        }
        canvas.end_group();

        // Messages: a line per pair of lanes and pixels of their ends (at most half a pixel
        // from each message's times), or, past MAX_LINES lines, density cells.
        let px = |t: u64| (x(t) - LEFT).round() as i64;
        let mut lines: HashMap<(usize, usize, i64, i64), u64> = HashMap::default();
        for m in &self.messages {
            let key = (
                lane_of[&m.from.0],
                lane_of[&m.to.0],
                px(m.from.1),
                px(m.to.1),
            );
            *lines.entry(key).or_default() += 1;
            if lines.len() > MAX_LINES {
                break;
            }
        }
        canvas.group_with(
            "messages",
            &format!(
                " data-t0=\"{t0}\" data-t1=\"{t1}\" data-x0=\"{LEFT}\" data-x1=\"{}\"",
                LEFT + plot_w
            ),
        );
        let mut density_note = String::new();
        if lines.len() <= MAX_LINES {
            let mut lines: Vec<_> = lines.into_iter().collect();
            lines.sort_unstable();
            let y = |lane: usize| TOP + (lane as f64 + 0.5) * lane_h;
            for ((from, to, x0, x1), n) in lines {
                let (sender, receiver) = (ranks[from * per_lane], ranks[to * per_lane]);
                canvas.line(
                    "message",
                    (LEFT + x0 as f64, y(from)),
                    (LEFT + x1 as f64, y(to)),
                    "#000000",
                    0.7,
                    &format!(
                        " data-messages=\"{n}\" data-sender=\"{sender}\" data-receiver=\"{receiver}\""
                    ),
                    &if n == 1 {
                        format!("message {sender} → {receiver}")
                    } else {
                        format!("{n} messages")
                    },
                );
            }
        } else {
            let (cells, cell_w) =
                density_cells(&self.messages, &lane_of, &|t: u64| x(t) - LEFT, plot_w);
            density_note = format!(
                "; {} messages drawn as {} density cells ({} px of a lane each; more than {} \
                 lines would be needed)",
                format_count(self.messages.len() as f64),
                format_count(cells.len() as f64),
                cell_w,
                format_count(MAX_LINES as f64)
            );
            let most = cells.iter().map(|(_, (s, r))| s + r).max().unwrap_or(1) as f64;
            for ((lane, c), (sent, received)) in cells {
                let x0 = c as f64 * cell_w;
                let w = cell_w.min(plot_w - x0);
                let time = |p: f64| t0 as f64 + p / plot_w * span_ns;
                let (from, to) = (time(x0).floor() as u64, time(x0 + w).ceil() as u64);
                let n = (sent + received) as f64;
                let opacity = 0.15 + 0.75 * (1.0 + n).ln() / (1.0 + most).ln();
                canvas.rect(
                    "message-density",
                    LEFT + x0,
                    TOP + lane as f64 * lane_h + lane_h * 0.25,
                    w,
                    (lane_h * 0.5).max(1.0),
                    "#000000",
                    &format!(
                        " fill-opacity=\"{opacity:.2}\" data-sent=\"{sent}\" data-received=\"{received}\" \
                         data-rank=\"{}\" data-from-ns=\"{from}\" data-to-ns=\"{to}\"",
                        ranks[lane * per_lane]
                    ),
                    &format!(
                        "{sent} sent, {received} received from {} to {}",
                        format_ns(from as f64),
                        format_ns(to as f64)
                    ),
                );
            }
        }
        canvas.end_group();

        canvas.group("path");
        for p in &self.path {
            let y = |r: Rank| lane_y(r) + lane_h / 2.0;
            canvas.line(
                "path-step",
                (x(p.from.1), y(p.from.0)),
                (x(p.to.1), y(p.to.0)),
                "#d00000",
                1.0,
                " stroke-opacity=\"0.7\"",
                "critical path: a step between ranks",
            );
        }
        canvas.end_group();

        let count = |layer: Layer| self.spans.iter().filter(|s| s.layer == layer).count();
        let mut note = if self.path_mode {
            let (mut computation, mut mpi) = (0u64, 0u64);
            for s in self.spans.iter().filter(|s| s.layer == Layer::Rows) {
                let d = s.end.saturating_sub(s.start);
                if self.kinds[s.kind as usize] == "computation" {
                    computation += d;
                } else {
                    mpi += d;
                }
            }
            let share = computation as f64 / (computation + mpi).max(1) as f64 * 100.0;
            format!(
                "critical path of {} segments on {} ranks: {} computing ({share:.0}%), {} in MPI \
                 calls, {} steps between ranks",
                count(Layer::Rows),
                ranks.len(),
                format_ns(computation as f64),
                format_ns(mpi as f64),
                self.path.len()
            )
        } else {
            let mut note = format!("{} calls", count(Layer::Rows));
            if count(Layer::Computation) > 0 {
                note.push_str(&format!(", {} computations", count(Layer::Computation)));
            }
            if count(Layer::Routines) > 0 {
                note.push_str(&format!(", {} routine calls", count(Layer::Routines)));
            }
            note.push_str(&format!(
                ", {} messages on {} ranks from {} to {}",
                self.messages.len(),
                ranks.len(),
                format_ns(t0 as f64),
                format_ns(t1 as f64)
            ));
            note
        };
        if per_lane > 1 {
            note.push_str(&format!("; {per_lane} ranks a lane"));
        }
        note.push_str(&density_note);
        canvas.note(&note);

        canvas.x_axis(
            (LEFT, LEFT + plot_w, axis_y),
            (t0 as f64, t1 as f64),
            8,
            TickUnit::Time,
        );
        let mut used = vec![false; self.kinds.len()];
        for s in &self.spans {
            used[s.kind as usize] = true;
        }
        let mut key: Vec<(String, String)> = self
            .kinds
            .iter()
            .zip(&colours)
            .zip(&used)
            .filter(|(_, used)| **used)
            .map(|((n, c), _)| {
                let name = if self.path_mode && n == "computation" {
                    "computation on the path".to_string()
                } else {
                    n.clone()
                };
                (name, c.clone())
            })
            .collect();
        key.sort();
        if count(Layer::Computation) > 0 && !self.kinds.iter().any(|k| k == "computation") {
            key.insert(0, ("computation".into(), COMPUTATION.into()));
        }
        let key_at = (LEFT, axis_y + 46.0);
        let extra = canvas.key_height(LEFT, &key) - 18.0;
        canvas.key(key_at, &key);
        canvas.grow(extra);
        canvas
    }
}

/// How [`draw_spans`] draws: the kinds' names and colours, where times go, the width of a
/// bucket of gathered spans, and whether a span a pixel wide or more is drawn on its own.
#[derive(Clone, Copy)]
struct SpanStyle<'a> {
    kinds: &'a [String],
    colours: &'a [String],
    x: &'a dyn Fn(u64) -> f64,
    bucket_w: f64,
    individually: bool,
}

/// Spans gathered in one bucket of a lane.
#[derive(Default)]
struct Bucket {
    spans: u64,
    start: u64,
    end: u64,
    first_rank: Rank,
    /// Per kind: the deepest nesting and the time.
    time: HashMap<u16, (u16, u64)>,
}

/// Draws `spans` of `layer`: each a box when it is a pixel wide or more (and lanes hold one
/// rank each), else gathered per lane and bucket of pixels into one box from the first
/// one's start to the last one's end. `place` gives a rank's lane, the lane's first rank, top
/// and height.
fn draw_spans<'s>(
    canvas: &mut Canvas,
    spans: impl Iterator<Item = &'s Span>,
    layer: Layer,
    style: &SpanStyle,
    place: &dyn Fn(Rank) -> (usize, Rank, f64, f64),
) {
    let (class, count) = layer.class_and_count();
    let x = style.x;
    let mut buckets: HashMap<(usize, i64), Bucket> = HashMap::default();
    for s in spans {
        let (x0, x1) = (x(s.start), x(s.end));
        let (lane, first_rank, y, h) = place(s.rank);
        if style.individually && x1 - x0 >= 1.0 {
            let name = &style.kinds[s.kind as usize];
            canvas.rect(
                class,
                x0,
                y,
                x1 - x0,
                h,
                &style.colours[s.kind as usize],
                &format!(
                    " {count}=\"1\" data-rank=\"{}\" data-call=\"{}\" data-start-ns=\"{}\" data-end-ns=\"{}\"",
                    s.rank,
                    escape(name),
                    s.start,
                    s.end
                ),
                &format!(
                    "rank {}: {name} from {} for {}",
                    s.rank,
                    format_ns(s.start as f64),
                    format_ns(s.end.saturating_sub(s.start) as f64)
                ),
            );
            continue;
        }
        let b = buckets
            .entry((lane, ((x0 - LEFT) / style.bucket_w).floor() as i64))
            .or_insert(Bucket {
                start: s.start,
                end: s.end,
                first_rank,
                ..Bucket::default()
            });
        b.spans += 1;
        b.start = b.start.min(s.start);
        b.end = b.end.max(s.end);
        let t = b.time.entry(s.kind).or_default();
        t.0 = t.0.max(s.depth);
        t.1 += s.end.saturating_sub(s.start).max(1);
    }
    let mut gathered: Vec<((usize, i64), Bucket)> = buckets.into_iter().collect();
    gathered.sort_unstable_by_key(|(k, _)| *k);
    for ((lane, _), b) in gathered {
        // The deepest routine, then the kind that took most of the time.
        let main = b
            .time
            .iter()
            .max_by_key(|(k, (depth, t))| (*depth, *t, std::cmp::Reverse(**k)))
            .map(|(k, _)| *k)
            .unwrap_or(0);
        let (x0, x1) = (x(b.start), x(b.end));
        let (_, _, y, h) = place(b.first_rank);
        let name = &style.kinds[main as usize];
        canvas.rect(
            class,
            x0,
            y,
            (x1 - x0).max(1.0),
            h,
            &style.colours[main as usize],
            &format!(
                " {count}=\"{}\" data-rank=\"{}\" data-call=\"{}\" data-start-ns=\"{}\" data-end-ns=\"{}\"",
                b.spans,
                b.first_rank,
                escape(name),
                b.start,
                b.end
            ),
            &format!(
                "{} {} from {} to {}, mostly {name} (lane {lane})",
                b.spans,
                match layer {
                    Layer::Rows | Layer::PathRow => "calls",
                    Layer::Computation => "computations",
                    Layer::Routines => "routine calls",
                },
                format_ns(b.start as f64),
                format_ns(b.end as f64),
            ),
        );
    }
}

/// Counts `messages` per lane and cell of pixels, at the send on the sender's lane and at
/// the receive on the receiver's: (lane, cell) → (sent, received), and the cell's width in
/// pixels (1, 2, 4, … until at most [`MAX_CELLS`] cells). `px` is a time's pixel from the
/// plot's left edge, `plot_w` the plot's width.
#[allow(clippy::type_complexity)]
fn density_cells(
    messages: &[Link],
    lane_of: &HashMap<Rank, usize>,
    px: &dyn Fn(u64) -> f64,
    plot_w: f64,
) -> (Vec<((usize, i64), (u64, u64))>, f64) {
    let mut cell_w = 1.0;
    loop {
        let last = (plot_w / cell_w).ceil() as i64 - 1;
        let cell = |t: u64| ((px(t) / cell_w).floor() as i64).clamp(0, last.max(0));
        let mut cells: HashMap<(usize, i64), (u64, u64)> = HashMap::default();
        for m in messages {
            cells
                .entry((lane_of[&m.from.0], cell(m.from.1)))
                .or_default()
                .0 += 1;
            cells.entry((lane_of[&m.to.0], cell(m.to.1))).or_default().1 += 1;
        }
        if cells.len() <= MAX_CELLS || cell_w >= plot_w {
            let mut cells: Vec<_> = cells.into_iter().collect();
            cells.sort_unstable();
            return (cells, cell_w);
        }
        cell_w *= 2.0;
    }
}
