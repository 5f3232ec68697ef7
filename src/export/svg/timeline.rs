//! A timeline, as Vampir and Paraver draw one: a lane per rank, time across, MPI calls as boxes
//! coloured by call, messages as lines from send to receive, a collective's members joined.
//!
//! Whatever the selection's size, the marks are bounded by the picture's pixels: a call
//! narrower than a pixel is gathered with the others starting in the same pixel of its lane
//! into one box (its `data-ops` says how many, its colour is the call that takes most of
//! their time), messages with the same lanes and pixels into one line (`data-messages`), and
//! beyond [`MAX_LANES`] ranks a lane holds a block of consecutive ranks. The `data-ops` of
//! the boxes add up to the rows drawn.

use super::canvas::{call_colour, escape, format_ns, Canvas, WIDTH};
use crate::hash::FxHashMap as HashMap;
use crate::model::{rank_ranges, Rank};
use crate::results::{Row, Value};

/// The most lanes drawn; more ranks share lanes in blocks.
pub const MAX_LANES: usize = 380;

const LEFT: f64 = 80.0;
const TOP: f64 = 64.0;
const RIGHT: f64 = 20.0;
/// Message lines drawn at the most: beyond, messages are gathered over wider pixels.
const MAX_LINES: usize = 20_000;
/// Boxes of gathered calls at the most: beyond, calls are gathered over wider pixels.
const MAX_GATHERED: f64 = 150_000.0;

/// A call or a computation on one rank.
#[derive(Debug, Clone, Copy)]
struct Span {
    rank: Rank,
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
                    rank: rank as Rank,
                    kind,
                    start,
                    end,
                });
            }
            Layout::Other => {}
        }
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

    /// Joins consecutive spans on different ranks as a path (the critical path).
    pub fn join_as_path(&mut self) {
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
            let mut drawn: Vec<Rank> = self.spans.iter().map(|s| s.rank).collect();
            drawn.sort_unstable();
            drawn.dedup();
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
            let lo = self
                .spans
                .iter()
                .map(|s| s.start)
                .chain(self.messages.iter().map(|m| m.from.1.min(m.to.1)))
                .min()
                .unwrap_or(0);
            let hi = self
                .spans
                .iter()
                .map(|s| s.end)
                .chain(self.messages.iter().map(|m| m.from.1.max(m.to.1)))
                .max()
                .unwrap_or(lo + 1);
            (lo, hi.max(lo + 1))
        });
        let span_ns = (t1.saturating_sub(t0)).max(1) as f64;
        let x = |t: u64| LEFT + (t.saturating_sub(t0) as f64 / span_ns * plot_w).min(plot_w);
        let plot_h = lanes as f64 * lane_h;
        let mut canvas = Canvas::new(WIDTH, TOP + plot_h + 90.0);
        canvas.heading(title);
        let mut note = format!(
            "{} calls, {} messages on {} ranks from {} to {}",
            self.spans.len(),
            self.messages.len(),
            ranks.len(),
            format_ns(t0 as f64),
            format_ns(t1 as f64)
        );
        if per_lane > 1 {
            note.push_str(&format!("; {per_lane} ranks a lane"));
        }
        canvas.note(&note);
        let lane_y = |rank: Rank| TOP + lane_of.get(&rank).copied().unwrap_or(0) as f64 * lane_h;

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

        // Calls: individually when a pixel wide or more on a lane of one rank, else gathered
        // per lane and starting pixel.
        self.spans.sort_unstable_by_key(|s| (s.rank, s.start));
        let colour_of = |kinds: &[String], k: u16| call_colour(&kinds[k as usize]);
        #[derive(Default)]
        struct Bucket {
            ops: u64,
            start: u64,
            end: u64,
            time: HashMap<u16, u64>,
        }
        let mut buckets: HashMap<(usize, i64), Bucket> = HashMap::default();
        // A bucket is a pixel wide, wider when lanes x pixels would pass MAX_GATHERED.
        let width = (lanes as f64 * plot_w / MAX_GATHERED).ceil().max(1.0);
        canvas.group("calls");
        for s in &self.spans {
            let (x0, x1) = (x(s.start), x(s.end));
            let lane = lane_of[&s.rank];
            if per_lane == 1 && x1 - x0 >= 1.0 {
                let name = &self.kinds[s.kind as usize];
                canvas.rect(
                    "op",
                    x0,
                    lane_y(s.rank) + 2.0,
                    x1 - x0,
                    lane_h - 4.0,
                    colour_of(&self.kinds, s.kind),
                    &format!(
                        " data-ops=\"1\" data-rank=\"{}\" data-call=\"{}\"",
                        s.rank,
                        escape(name)
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
                .entry((lane, ((x0 - LEFT) / width).floor() as i64))
                .or_insert(Bucket {
                    start: s.start,
                    end: s.end,
                    ..Bucket::default()
                });
            b.ops += 1;
            b.start = b.start.min(s.start);
            b.end = b.end.max(s.end);
            *b.time.entry(s.kind).or_default() += s.end.saturating_sub(s.start).max(1);
        }
        let mut gathered: Vec<((usize, i64), Bucket)> = buckets.into_iter().collect();
        gathered.sort_unstable_by_key(|(k, _)| *k);
        for ((lane, _), b) in gathered {
            let main = b
                .time
                .iter()
                .max_by_key(|(k, t)| (**t, std::cmp::Reverse(**k)))
                .map(|(k, _)| *k)
                .unwrap_or(0);
            let (x0, x1) = (x(b.start), x(b.end));
            let first = ranks[lane * per_lane];
            canvas.rect(
                "op",
                x0,
                TOP + lane as f64 * lane_h + if lane_h > 6.0 { 2.0 } else { 0.0 },
                (x1 - x0).max(1.0),
                if lane_h > 6.0 { lane_h - 4.0 } else { lane_h },
                colour_of(&self.kinds, main),
                &format!(
                    " data-ops=\"{}\" data-rank=\"{first}\" data-call=\"{}\"",
                    b.ops,
                    escape(&self.kinds[main as usize])
                ),
                &format!(
                    "{} calls from {} to {}, mostly {}",
                    b.ops,
                    format_ns(b.start as f64),
                    format_ns(b.end as f64),
                    self.kinds[main as usize]
                ),
            );
        }
        canvas.end_group();

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

        // Messages, gathered per pair of lanes and pixels.
        // Gathered more coarsely (2, 4, … pixels) while they would be more than MAX_LINES.
        let mut step = 1.0;
        let mut lines = loop {
            let mut lines: HashMap<(usize, usize, i64, i64), u64> = HashMap::default();
            for m in &self.messages {
                let at = |t: u64| ((x(t) - LEFT) / step).round() as i64;
                let key = (
                    lane_of[&m.from.0],
                    lane_of[&m.to.0],
                    at(m.from.1),
                    at(m.to.1),
                );
                *lines.entry(key).or_default() += 1;
            }
            if lines.len() <= MAX_LINES || step >= plot_w {
                break lines
                    .into_iter()
                    .map(|((a, b, x0, x1), n)| {
                        let at = |p: i64| LEFT + p as f64 * step;
                        ((a, b, at(x0), at(x1)), n)
                    })
                    .collect::<Vec<_>>();
            }
            step *= 2.0;
        };
        lines.sort_unstable_by(|a, b| a.0 .0.cmp(&b.0 .0).then(a.0 .1.cmp(&b.0 .1)));
        canvas.group("messages");
        for ((from, to, x0, x1), n) in lines {
            let y = |lane: usize| TOP + (lane as f64 + 0.5) * lane_h;
            canvas.line(
                "message",
                (x0, y(from)),
                (x1, y(to)),
                "#000000",
                0.7,
                &format!(" data-messages=\"{n}\""),
                &if n == 1 {
                    format!(
                        "message {} → {}",
                        ranks[from * per_lane],
                        ranks[to * per_lane]
                    )
                } else {
                    format!("{n} messages")
                },
            );
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
                2.0,
                "",
                "critical path",
            );
        }
        canvas.end_group();

        canvas.x_axis(
            (LEFT, LEFT + plot_w, TOP + plot_h + 4.0),
            (t0 as f64, t1 as f64),
            8,
            &|v| format_ns(v),
        );
        let mut key: Vec<(String, String)> = self
            .kinds
            .iter()
            .enumerate()
            .map(|(k, n)| (n.clone(), colour_of(&self.kinds, k as u16).to_string()))
            .collect();
        key.sort();
        canvas.key((LEFT, TOP + plot_h + 50.0), &key);
        canvas
    }
}
