//! Delay costs: the root causes of wait states, after Böhme, Geimer, Wolf et al.
//! ("Identifying the root causes of wait states in large-scale parallel applications",
//! ICPP 2010), as Scalasca computes them.
//!
//! A wait state (any kind of [`super::waits`]) is caused by a **delay**: the excess time the
//! delaying rank (the late sender, the late receiver, the last member to enter…) spent in its
//! **synchronization interval** compared with the waiting rank over its own. The interval
//! runs, on each of the two ranks, from the end of their previous synchronization (the last
//! message between them or the last collective instance both were members of, whichever
//! came later; the rank's first operation when there is none) to the synchronization point:
//! the waiting call's start on the waiting rank, the moment the delaying rank entered its
//! call (`wait start + wait time`) on the other.
//!
//! Time in an interval is counted per **category**: computation (time outside MPI calls)
//! per call path, the time of each MPI call per call path (less the call's own wait), and
//! waiting time. The delay of a category is its time on the delaying rank less its time on
//! the waiting rank, when positive; the waiting-time excess is the part of the delay that
//! the delaying rank spent waiting itself: the wait **propagated** to it.
//!
//! - **Short-term cost**: the wait itself, shared among the delaying rank's delays in
//!   proportion to them.
//! - **Long-term cost**: the waits a wait caused in turn (through the ranks that waited for
//!   it becoming late themselves), shared the same way. The share of a wait (and of what it
//!   caused) that falls on the propagated waiting time is passed back to the waits the
//!   delaying rank had in its interval, in proportion to their time there, and from them to
//!   their own causes: waits are visited from the last to end back to the first (Scalasca's
//!   backward replay), so each has received all it caused before it is shared out.
//!
//! Costs are whole nanoseconds: every share is rounded down and what rounding leaves goes to
//! the largest share, so that the short- and long-term costs of all delays and what no delay
//! explains ([`DelayCosts::unexplained`]) add up exactly to the trace's waiting time.
//!
//! Each rank's operations and routine calls (for the call paths) are held in memory, with
//! the wait states: a delay-cost analysis is O(operations) in memory, and visits each
//! operation of an interval once per wait whose interval holds it.
//!
//! ```
//! use mtfdb::analysis::delay_costs::split;
//! // 1,000 ns shared over delays of 2 and 1: floor shares, the remainder to the largest.
//! assert_eq!(split(1_000, &[2, 1]), vec![667, 333]);
//! assert_eq!(split(10, &[0, 0]), vec![0, 0]);
//! ```

use serde::{Deserialize, Serialize};

use super::clock::ClockCorrection;
use super::waits::{self, WaitStates};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{OpId, OpKind, Rank, Time};
use crate::store::ids::chunk_and_row;
use crate::store::OperationField::{End, Kind, Start};
use crate::Trace;

/// What a delay was spent in: computation (between MPI calls), or an MPI call.
pub type Activity = Option<OpKind>;

/// The cost of the delays of one rank in one activity and call path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayCost {
    /// The delaying rank.
    pub rank: Rank,
    /// Computation (`None`) or the MPI call the excess time was spent in.
    pub activity: Activity,
    /// The routines enclosing it, outermost first, joined by `/` (`main/solve`); empty
    /// outside every routine or when the trace has none.
    pub call_path: String,
    /// Waiting time these delays caused directly (ns).
    pub short_term: Time,
    /// Waiting time they caused through the propagation of the waits they caused (ns).
    pub long_term: Time,
    /// The waits they caused directly.
    pub waits: u64,
}

impl DelayCost {
    /// Short- plus long-term cost (ns).
    pub fn total(&self) -> Time {
        self.short_term + self.long_term
    }
}

/// The delay costs of a trace, the costliest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayCosts {
    /// One row per rank, activity and call path whose delays caused waiting, sorted by total
    /// cost (descending), then rank, activity and call path.
    pub rows: Vec<DelayCost>,
    /// The waiting time of every wait state (ns).
    pub waiting: Time,
    /// Waiting time no delay explains (ns): waits whose delaying rank spent no more time
    /// than the waiting one in any category over their intervals (as clocks out of step can
    /// record). Costs plus this equal [`DelayCosts::waiting`].
    pub unexplained: Time,
}

impl crate::store::StoredResult for DelayCosts {
    const SCHEMA_VERSION: u32 = 1;
}

/// The key the delay costs on clocks `correction` are stored under.
pub fn delay_costs_key(correction: ClockCorrection) -> String {
    match correction {
        ClockCorrection::None => "delays/scalasca".to_string(),
        c => format!("delays/scalasca/clock={}", c.name()),
    }
}

/// The delay costs of `trace` on the clocks `correction` gives, computed once (with the wait
/// states they explain) and stored with it (`refresh`: computed again and stored anew).
pub fn stored_delay_costs(
    trace: &Trace,
    correction: ClockCorrection,
    refresh: bool,
) -> Result<DelayCosts> {
    trace.stored_result(&delay_costs_key(correction), refresh, || {
        let waits = waits::stored_wait_states_with(trace, correction, refresh)?;
        let map = match correction {
            ClockCorrection::None => None,
            c => Some(super::clock::stored_map(trace, c, refresh)?),
        };
        delay_costs_of(trace, &waits, map.as_ref())
    })
}

/// The delay costs of `trace` on its stored times.
pub fn delay_costs(trace: &Trace) -> Result<DelayCosts> {
    let waits = waits::wait_states(trace)?;
    delay_costs_of(trace, &waits, None)
}

/// `total` shared in proportion to `weights`: each share rounded down, what rounding leaves
/// to the largest weight (the first of equals); all zeros when the weights are.
pub fn split(total: Time, weights: &[Time]) -> Vec<Time> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let mut out: Vec<Time> = weights
        .iter()
        .map(|&w| (u128::from(total) * u128::from(w) / sum) as Time)
        .collect();
    let given: Time = out.iter().sum();
    let largest = (0..weights.len())
        .max_by_key(|&i| (weights[i], std::cmp::Reverse(i)))
        .unwrap_or(0);
    out[largest] += total - given;
    out
}

/// One operation as the analysis needs it.
#[derive(Debug, Clone, Copy)]
struct Op {
    start: Time,
    end: Time,
    kind: Option<OpKind>,
    /// Its wait state's index in the wait states, if it waited.
    wait: Option<u32>,
}

/// A category: a call path and an activity, packed (`path << 32 | activity`, activity 0 for
/// computation, else the call's code + 1).
type Category = u64;

fn category(path: u32, activity: Activity) -> Category {
    let a = activity.map_or(0, |k| u64::from(k.code()) + 1);
    (u64::from(path) << 32) | a
}

/// One rank's operations (its first thread's, in time order) and call-path changes.
#[derive(Default)]
struct RankTimeline {
    ops: Vec<Op>,
    /// `(time, path)`: from `time` on, the rank is in call path `path`, sorted by time.
    paths: Vec<(Time, u32)>,
}

impl RankTimeline {
    fn path_at(&self, t: Time) -> u32 {
        let i = self.paths.partition_point(|&(at, _)| at <= t);
        if i == 0 {
            0
        } else {
            self.paths[i - 1].1
        }
    }

    /// Computation over `[a, b)`, by the call paths it crossed.
    fn computation(&self, a: Time, b: Time, out: &mut FxHashMap<Category, Time>) {
        if b <= a {
            return;
        }
        let mut at = a;
        let mut path = self.path_at(a);
        let from = self.paths.partition_point(|&(t, _)| t <= a);
        for &(t, next) in &self.paths[from..] {
            if t >= b {
                break;
            }
            *out.entry(category(path, None)).or_default() += t - at;
            at = t;
            path = next;
        }
        *out.entry(category(path, None)).or_default() += b - at;
    }

    /// The time of `[a, b)` per category, and the waits in it with their time there.
    fn profile(&self, a: Time, b: Time, waits: &WaitStates) -> Profile {
        let mut p = Profile::default();
        if b <= a {
            return p;
        }
        let mut cursor = a;
        let first = self.ops.partition_point(|o| o.end <= a);
        for op in &self.ops[first..] {
            if op.start >= b {
                break;
            }
            if op.start > cursor {
                self.computation(cursor, op.start, &mut p.time);
            }
            let (s, e) = (op.start.max(a), op.end.min(b));
            let mut busy = e.saturating_sub(s);
            if let Some(i) = op.wait {
                let w = &waits.waits[i as usize];
                let (ws, we) = (w.start.max(s), (w.start + w.time).min(e));
                let waited = we.saturating_sub(ws);
                if waited > 0 {
                    busy -= waited;
                    p.waiting += waited;
                    p.waits.push((i, waited));
                }
            }
            if busy > 0 {
                *p.time
                    .entry(category(self.path_at(op.start), op.kind))
                    .or_default() += busy;
            }
            cursor = cursor.max(op.end);
        }
        if cursor < b {
            self.computation(cursor, b, &mut p.time);
        }
        p
    }
}

/// A rank's time over an interval.
#[derive(Default)]
struct Profile {
    time: FxHashMap<Category, Time>,
    waiting: Time,
    /// The waits in the interval: their index and time in it.
    waits: Vec<(u32, Time)>,
}

/// The delay costs of `trace` given its wait states `waits` (on the clocks `map` corrects
/// to, when there is one).
pub(crate) fn delay_costs_of(
    trace: &Trace,
    waits: &WaitStates,
    map: Option<&super::clock::ClockMap>,
) -> Result<DelayCosts> {
    let ranks = trace.header().processes.len();
    let (timelines, paths) = timelines(trace, waits, map)?;
    let starts = interval_starts(trace, waits, &timelines, ranks, map)?;

    // The waits from the last to end back to the first.
    let mut order: Vec<usize> = (0..waits.waits.len()).collect();
    order.sort_unstable_by_key(|&i| {
        let w = &waits.waits[i];
        std::cmp::Reverse((w.start + w.time, w.start))
    });
    let mut caused = vec![0 as Time; waits.waits.len()];
    let mut done = vec![false; waits.waits.len()];
    let mut costs: FxHashMap<(Rank, Category), (Time, Time, u64)> = FxHashMap::default();
    let mut out = DelayCosts::default();
    for i in order {
        trace.check_cancel()?;
        done[i] = true;
        let w = waits.waits[i];
        out.waiting += w.time;
        let (Some(waiter), Some(delayer)) = (
            timelines.get(w.rank as usize),
            timelines.get(w.partner as usize),
        ) else {
            out.unexplained += w.time + caused[i];
            continue;
        };
        let (a_r, a_s) = starts[i];
        let sync = w.start + w.time;
        let mine = waiter.profile(a_r.min(w.start), w.start, waits);
        let theirs = delayer.profile(a_s.min(sync), sync, waits);
        let mut cats: Vec<(Category, Time)> = theirs
            .time
            .iter()
            .filter_map(|(&c, &t)| {
                let excess = t.saturating_sub(mine.time.get(&c).copied().unwrap_or(0));
                (excess > 0).then_some((c, excess))
            })
            .collect();
        cats.sort_unstable();
        let propagated = theirs.waiting.saturating_sub(mine.waiting);
        let mut weights: Vec<Time> = cats.iter().map(|c| c.1).collect();
        weights.push(propagated);
        if weights.iter().all(|&x| x == 0) {
            out.unexplained += w.time + caused[i];
            continue;
        }
        let short = split(w.time, &weights);
        let long = split(caused[i], &weights);
        for (k, &(c, _)) in cats.iter().enumerate() {
            let e = costs.entry((w.partner, c)).or_default();
            e.0 += short[k];
            e.1 += long[k];
            e.2 += 1;
        }
        // The share of the propagated waiting goes back to the delaying rank's own waits.
        let back = short[cats.len()] + long[cats.len()];
        if back > 0 {
            let times: Vec<Time> = theirs.waits.iter().map(|x| x.1).collect();
            for (&(j, _), share) in theirs.waits.iter().zip(split(back, &times)) {
                if done[j as usize] {
                    out.unexplained += share;
                } else {
                    caused[j as usize] += share;
                }
            }
        }
    }
    out.rows = costs
        .into_iter()
        .map(|((rank, c), (short_term, long_term, waits))| DelayCost {
            rank,
            activity: match c & 0xffff_ffff {
                0 => None,
                code => OpKind::from_code((code - 1) as u32),
            },
            call_path: paths[(c >> 32) as usize].clone(),
            short_term,
            long_term,
            waits,
        })
        .collect();
    out.rows.sort_by(|a, b| {
        b.total()
            .cmp(&a.total())
            .then(a.rank.cmp(&b.rank))
            .then(a.activity.cmp(&b.activity))
            .then(a.call_path.cmp(&b.call_path))
    });
    Ok(out)
}

/// Every rank's timeline, and the call paths by id (id 0: outside every routine, `""`).
fn timelines(
    trace: &Trace,
    waits: &WaitStates,
    map: Option<&super::clock::ClockMap>,
) -> Result<(Vec<RankTimeline>, Vec<String>)> {
    let ranks = trace.header().processes.len();
    let time = |rank: Rank, t: Time| map.map_or(t, |m| m.time(rank, t));
    let mut out: Vec<RankTimeline> = (0..ranks).map(|_| RankTimeline::default()).collect();
    // Each rank's first thread (the one its MPI calls are on in an MPI trace).
    let mut thread: Vec<Option<u32>> = vec![None; ranks];
    for c in trace.op_chunks() {
        if let Some(t) = thread.get_mut(c.rank as usize) {
            *t = Some(t.map_or(c.thread, |t| t.min(c.thread)));
        }
    }
    for rank in 0..ranks {
        let Some(th) = thread[rank] else { continue };
        for c in trace.op_chunks_of(rank as Rank).filter(|c| c.thread == th) {
            trace.check_cancel()?;
            let cols = trace.operation_columns(c.chunk, &[Start, End, Kind])?;
            for row in 0..cols.rows() {
                let id = crate::store::ids::row_id(c.chunk, row);
                out[rank].ops.push(Op {
                    start: time(rank as Rank, cols.start(row)),
                    end: time(rank as Rank, cols.end(row)),
                    kind: cols.kind(row),
                    wait: wait_index(waits, id),
                });
            }
        }
        out[rank].ops.sort_by_key(|o| (o.start, o.end));
    }
    // Call paths from the routine calls of the same threads.
    let mut paths: Vec<String> = vec![String::new()];
    let mut ids: FxHashMap<String, u32> = FxHashMap::default();
    ids.insert(String::new(), 0);
    let mut calls = trace.routine_calls()?;
    calls.retain(|c| thread.get(c.rank as usize).copied().flatten() == Some(c.thread));
    calls.sort_by_key(|c| (c.rank, c.start, c.depth));
    let mut at = 0;
    while at < calls.len() {
        let rank = calls[at].rank;
        let end = at + calls[at..].partition_point(|c| c.rank == rank);
        // Enters and leaves in time order (a leave before an enter at the same time), each
        // with the path it opens.
        let mut events: Vec<(Time, bool, u16, u32)> = Vec::new();
        let mut stack: Vec<(Time, u32)> = Vec::new(); // (end, path) of the open calls
        for c in &calls[at..end] {
            while stack.last().is_some_and(|&(e, _)| e <= c.start) {
                stack.pop();
            }
            let parent = stack.last().map_or(0, |s| s.1);
            let name = trace.string(c.routine).unwrap_or("?");
            let text = if parent == 0 {
                name.to_string()
            } else {
                format!("{}/{name}", paths[parent as usize])
            };
            let id = *ids.entry(text.clone()).or_insert_with(|| {
                paths.push(text);
                (paths.len() - 1) as u32
            });
            events.push((time(rank, c.start), true, c.depth, id));
            events.push((time(rank, c.end), false, c.depth, parent));
            stack.push((c.end, id));
        }
        // Leaves first at a time, innermost first; then enters, outermost first.
        events.sort_by_key(|&(t, enter, depth, _)| {
            (
                t,
                enter,
                if enter {
                    i32::from(depth)
                } else {
                    -i32::from(depth)
                },
            )
        });
        if let Some(timeline) = out.get_mut(rank as usize) {
            timeline.paths = events.iter().map(|&(t, _, _, p)| (t, p)).collect();
        }
        at = end;
    }
    Ok((out, paths))
}

fn wait_index(waits: &WaitStates, op: OpId) -> Option<u32> {
    waits
        .waits
        .binary_search_by_key(&op, |w| w.op)
        .ok()
        .map(|i| i as u32)
}

/// How far back a search for the previous synchronization of two ranks looks past the latest
/// candidate on one side (a collective instance one rank has left and the other not yet, a
/// message still in flight): a few steps in any program that synchronizes its ranks alike.
const LOOK_BACK: usize = 16;

/// Where each wait's synchronization interval begins: `(on the waiting rank, on the
/// delaying rank)`, the ends of the two ranks' calls in their previous synchronization: the
/// latest message between them, or collective instance both were members of, whose call had
/// ended on each rank by its synchronization point.
fn interval_starts(
    trace: &Trace,
    waits: &WaitStates,
    timelines: &[RankTimeline],
    ranks: usize,
    map: Option<&super::clock::ClockMap>,
) -> Result<Vec<(Time, Time)>> {
    let time = |rank: Rank, t: Time| map.map_or(t, |m| m.time(rank, t));
    // An operation's rank and end, read back from the stored ends (corrected).
    let rank_of_chunk: FxHashMap<u32, Rank> = trace
        .op_chunks()
        .iter()
        .map(|c| (c.chunk, c.rank))
        .collect();
    let mut ends: FxHashMap<u32, Vec<Time>> = FxHashMap::default();
    let mut end_of = |op: OpId| -> Result<Option<(Rank, Time)>> {
        let (chunk, row) = chunk_and_row(op);
        let Some(&rank) = rank_of_chunk.get(&chunk) else {
            return Ok(None);
        };
        if let std::collections::hash_map::Entry::Vacant(slot) = ends.entry(chunk) {
            let cols = trace.operation_columns(chunk, &[End])?;
            slot.insert((0..cols.rows()).map(|r| time(rank, cols.end(r))).collect());
        }
        Ok(ends[&chunk].get(row).map(|&e| (rank, e)))
    };
    let completions = waits::Completions::read(trace)?;

    // Per pair of ranks (lower first), its messages' (end on the lower, end on the higher),
    // by the later of the two.
    let mut pairs: FxHashMap<(Rank, Rank), Vec<(Time, Time)>> = FxHashMap::default();
    for (send, recv) in trace.message_ops()? {
        trace.check_cancel()?;
        let recv = completions.of(recv).unwrap_or(recv);
        if let (Some((s, se)), Some((r, re))) = (end_of(send)?, end_of(recv)?) {
            let (key, ends) = if s <= r {
                ((s, r), (se, re))
            } else {
                ((r, s), (re, se))
            };
            pairs.entry(key).or_default().push(ends);
        }
    }
    for list in pairs.values_mut() {
        list.sort_unstable_by_key(|&(a, b)| (a.max(b), a, b));
    }
    // Per rank, the collective instances it was a member of: (instance, its call's end), in
    // the order of the instances' last ends (a rank's calls end in that order).
    let mut instances: Vec<(Time, Vec<(Rank, Time)>)> = Vec::new();
    for instance in trace.collective_instances()? {
        let mut members = Vec::with_capacity(instance.ops.len());
        for &op in &instance.ops {
            let op = completions.of(op).unwrap_or(op);
            if let Some(m) = end_of(op)? {
                members.push(m);
            }
        }
        let done = members.iter().map(|m| m.1).max().unwrap_or(0);
        instances.push((done, members));
    }
    instances.sort_by_key(|c| c.0);
    let mut member_of: Vec<Vec<(u32, Time)>> = vec![Vec::new(); ranks];
    for (i, (_, members)) in instances.iter().enumerate() {
        for &(r, e) in members {
            if let Some(list) = member_of.get_mut(r as usize) {
                list.push((i as u32, e));
            }
        }
    }
    for list in &mut member_of {
        list.sort_unstable_by_key(|&(i, e)| (e, i));
    }

    let first = |r: Rank| {
        timelines
            .get(r as usize)
            .and_then(|t| t.ops.first())
            .map_or(0, |o| o.start)
    };
    let none: Vec<(u32, Time)> = Vec::new();
    let mut out = Vec::with_capacity(waits.waits.len());
    for w in &waits.waits {
        let (r, s) = (w.rank, w.partner);
        let (t_r, t_s) = (w.start, w.start + w.time);
        // The latest message between them that had ended on both sides.
        let by_message = pairs.get(&(r.min(s), r.max(s))).and_then(|list| {
            let before = list.partition_point(|&(a, b)| a.max(b) <= t_r.max(t_s));
            list[..before]
                .iter()
                .rev()
                .take(LOOK_BACK)
                .map(|&(lo, hi)| if r <= s { (lo, hi) } else { (hi, lo) })
                .find(|&(er, es)| er <= t_r && es <= t_s)
        });
        // The latest instance both were in that had ended on both sides.
        let of = |x: Rank, t: Time| {
            let list = member_of.get(x as usize).unwrap_or(&none);
            &list[..list.partition_point(|&(_, e)| e <= t)]
        };
        let (mut on_r, mut on_s) = (of(r, t_r), of(s, t_s));
        let mut by_collective = None;
        for _ in 0..2 * LOOK_BACK {
            let (Some(&(ir, er)), Some(&(is, es))) = (on_r.last(), on_s.last()) else {
                break;
            };
            if ir == is {
                by_collective = Some((ir, (er, es)));
                break;
            }
            if ir > is {
                on_r = &on_r[..on_r.len() - 1];
            } else {
                on_s = &on_s[..on_s.len() - 1];
            }
        }
        let latest = match (by_message, by_collective) {
            // The later of the two on the waiting rank.
            (Some(m), Some((_, c))) => Some(if m.0 >= c.0 { m } else { c }),
            (m, c) => m.or(c.map(|c| c.1)),
        };
        out.push(latest.unwrap_or((first(r), first(s))));
    }
    Ok(out)
}
