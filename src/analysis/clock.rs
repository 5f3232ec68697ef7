//! The tracer's clock: messages received before they were sent, and the corrections tracers
//! use for them.
//!
//! A trace written without clock offsets (EZTrace) or with one clock per node (DUMPI) can show
//! a receive that ends before its send started: a violated clock condition (Lamport's
//! happened-before). [`ClockCheck`] counts them per (sender, receiver) pair, as the import's
//! [`Anomaly::ClockConditionViolated`] and `mtfdb clock` report them.
//!
//! [`ClockMap`] corrects the times of each rank ([`ClockCorrection`]):
//!
//! - **offsets**: one constant offset per rank, estimated from the messages themselves. For a
//!   pair of ranks `a`, `b` with messages both ways, let `Δab` be the smallest `receive end -
//!   send start` of a message from `a` to `b` (in the two local clocks) and `Δba` the other
//!   way. With a minimal one-way latency `L` the same both ways, `Δab = L + (ob - oa)` and `Δba
//!   = L - (ob - oa)`, so `ob - oa = (Δab - Δba) / 2` and `L = (Δab + Δba) / 2` (the estimate
//!   NTP makes of a round trip). Offsets relative to rank 0 follow along a spanning tree of
//!   such pairs (breadth first from rank 0); a rank no pair links to rank 0 keeps its clock
//!   ([`ClockMap::unrelated`]). Exact when each pair has a message each way at the minimal
//!   latency. A pair that messages do not link both ways is linked by the synchronizing
//!   collectives its ranks share ([`ClockMap::by_collectives`]): no member leaves before every
//!   member entered, so an entry and another member's leave are a message each way (EZTrace's
//!   traces match no non-blocking receive, and its ranks' clocks start apart).
//! - **interpolate**: the same estimate over the first and over the second half of the run,
//!   each at the mean time of its two messages, and a line through the two: an offset and a
//!   drift per rank, as tracers that measure offsets at `MPI_Init` and `MPI_Finalize`
//!   interpolate them (a pair with messages both ways in one half only keeps its constant
//!   estimate).
//! - **clc**: the interpolation, then the controlled logical clock (Becker, Rabenseifner,
//!   Wolf, as Scalasca applies it after offset interpolation) with forward amortization: a
//!   receive that still ends earlier than its send's (corrected) start plus the minimal
//!   latency is moved to that time, and the rank's later events by a jump that decays by
//!   `1 - γ` (γ = 0.99) of the time elapsed, so that local intervals keep 99% of their length
//!   and the clock returns to the interpolated one. Point-to-point messages only; collectives
//!   keep the interpolated times.
//!
//! Every scan leaves out the messages whose `MPI_Irecv` no Wait or Test completed, as the
//! import does: their receive time is the call's own end, not when the data arrived, so they
//! say nothing of the clocks (a trace cut short, a tracer that records no completion).
//!
//! Memory is per rank and per pair, not per message: the message scans keep the smallest
//! latency of each pair, a model is two numbers per rank, and the set of uncompleted Irecvs
//! is a compressed bitmap (the kind index's, less the completed ones). The controlled logical
//! clock is the exception: it keeps per rank the jumps that are not overtaken by a later one
//! (a staircase), one per receive it had to move at most, so its map grows with the
//! violations it repairs (none on a trace whose clocks only drift). Cost follows messages: one
//! scan for detection, one for a model, a few for the controlled logical clock (each pass
//! moves receives; it stops when a pass moves none).
//!
//! ```
//! use mtfdb::analysis::clock::{ClockCheck, ClockCorrection};
//! let mut check = ClockCheck::default();
//! check.message(0, 1, 1_000, 900); // received 100 ns before it was sent
//! check.message(0, 1, 2_000, 2_500);
//! check.message(1, 0, 3_000, 3_100);
//! let pairs = check.violations();
//! assert_eq!(pairs.len(), 1);
//! assert_eq!((pairs[0].sender, pairs[0].receiver, pairs[0].messages, pairs[0].worst), (0, 1, 1, 100));
//! assert_eq!(ClockCorrection::from_name("clc").unwrap(), ClockCorrection::Clc);
//! ```

use std::collections::VecDeque;
use std::fmt;

use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

use super::op_times::OpTimes;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::{Anomaly, OpKind, Rank, Time};
use crate::store::{IndexDim, MessageField};
use crate::Trace;

/// How the times of a trace are corrected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ClockCorrection {
    /// The times as recorded.
    #[default]
    None,
    /// One constant offset per rank, estimated from the messages.
    Offsets,
    /// An offset and a drift per rank (a linear interpolation over the run).
    Interpolate,
    /// The interpolation, then the controlled logical clock (forward amortization).
    Clc,
}

impl ClockCorrection {
    /// Every correction, in the order options list them.
    pub const ALL: [ClockCorrection; 4] = [
        ClockCorrection::None,
        ClockCorrection::Offsets,
        ClockCorrection::Interpolate,
        ClockCorrection::Clc,
    ];

    /// The correction's name as options write it (`none`, `offsets`, `interpolate`, `clc`).
    pub fn name(self) -> &'static str {
        match self {
            ClockCorrection::None => "none",
            ClockCorrection::Offsets => "offsets",
            ClockCorrection::Interpolate => "interpolate",
            ClockCorrection::Clc => "clc",
        }
    }

    /// The correction named `name` (case-insensitive).
    pub fn from_name(name: &str) -> Result<ClockCorrection> {
        ClockCorrection::named(name).ok_or_else(|| Error::Usage(ClockCorrection::unknown(name)))
    }

    /// The correction named `name` (case-insensitive), if any.
    pub(crate) fn named(name: &str) -> Option<ClockCorrection> {
        ClockCorrection::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }

    /// The message for a name no correction has, listing those that exist.
    pub(crate) fn unknown(name: &str) -> String {
        let names: Vec<&str> = ClockCorrection::ALL.iter().map(|c| c.name()).collect();
        let (last, rest) = names.split_last().expect("corrections exist");
        format!(
            "unknown clock correction {name:?}: {} or {last}",
            rest.join(", ")
        )
    }
}

impl fmt::Display for ClockCorrection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The messages of one (sender, receiver) pair that violate the clock condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairViolation {
    /// Sender world rank.
    pub sender: Rank,
    /// Receiver world rank.
    pub receiver: Rank,
    /// Messages of the pair whose receive ended before the send started.
    pub messages: u64,
    /// The largest violation (ns): send start minus receive end.
    pub worst: Time,
    /// The send start of the first violating message, in the order they were seen.
    pub time: Time,
}

impl PairViolation {
    /// The pair's anomaly.
    pub fn anomaly(&self) -> Anomaly {
        Anomaly::ClockConditionViolated {
            sender: self.sender,
            receiver: self.receiver,
            messages: self.messages,
            worst: self.worst,
            time: self.time,
        }
    }
}

/// Counts, per (sender, receiver) pair, the messages received before they were sent (memory
/// per pair with such messages).
#[derive(Debug, Default)]
pub struct ClockCheck {
    pairs: FxHashMap<(Rank, Rank), PairViolation>,
}

impl ClockCheck {
    /// One matched message: sent from `sender` starting at `send_time`, received by `receiver`
    /// ending at `recv_time`.
    pub fn message(&mut self, sender: Rank, receiver: Rank, send_time: Time, recv_time: Time) {
        if recv_time >= send_time {
            return;
        }
        let by = send_time - recv_time;
        self.pairs
            .entry((sender, receiver))
            .and_modify(|p| {
                p.messages += 1;
                p.worst = p.worst.max(by);
            })
            .or_insert(PairViolation {
                sender,
                receiver,
                messages: 1,
                worst: by,
                time: send_time,
            });
    }

    /// The pairs with violating messages, by sender then receiver.
    pub fn violations(&self) -> Vec<PairViolation> {
        let mut out: Vec<PairViolation> = self.pairs.values().copied().collect();
        out.sort_unstable_by_key(|p| (p.sender, p.receiver));
        out
    }
}

/// The messages of a trace that say something of its clocks: every matched message but those
/// whose `MPI_Irecv` no Wait or Test completed. Such a message's receive time is the Irecv
/// call's own end, which says nothing of when the data arrived: the import does not judge it
/// ([`MatchSink::uncompleted_message`](crate::ingest::matcher::MatchSink::uncompleted_message)),
/// and neither do the check and the estimates here.
struct TimedMessages<'t> {
    trace: &'t Trace,
    /// The Irecvs no request link completes (a bitmap of operation ids: the trace's Irecvs
    /// from the kind index, less those the links name, read a chunk at a time).
    uncompleted: RoaringTreemap,
}

impl<'t> TimedMessages<'t> {
    fn of(trace: &'t Trace) -> Result<TimedMessages<'t>> {
        let mut uncompleted = trace.index(IndexDim::Kind, OpKind::Irecv.code())?;
        if !uncompleted.is_empty() {
            for chunk in 0..trace.request_link_chunk_count() {
                trace.check_cancel()?;
                for link in trace.request_link_chunk(chunk)? {
                    uncompleted.remove(link.request_op);
                }
            }
        }
        Ok(TimedMessages { trace, uncompleted })
    }

    /// Calls `f(sender, receiver, send start, receive end)` for every message, chunk by
    /// chunk; returns how many messages it left out.
    fn scan(&self, mut f: impl FnMut(Rank, Rank, Time, Time)) -> Result<u64> {
        use MessageField::{Receiver, RecvOp, RecvTime, SendTime, Sender};
        let trace = self.trace;
        let mut left_out = 0;
        for chunk in 0..trace.message_chunk_count() {
            trace.check_cancel()?;
            let m =
                trace.message_columns(chunk, &[Sender, Receiver, SendTime, RecvTime, RecvOp])?;
            for row in 0..m.rows() {
                if self.uncompleted.contains(m.recv_op(row)) {
                    left_out += 1;
                    continue;
                }
                f(
                    m.sender(row),
                    m.receiver(row),
                    m.send_time(row),
                    m.recv_time(row),
                );
            }
        }
        Ok(left_out)
    }

    /// The pairs whose messages violate the clock condition in the stored times, or in the
    /// times `map` corrects them to, and how many messages were not judged.
    fn check(&self, map: Option<&ClockMap>) -> Result<(Vec<PairViolation>, u64)> {
        let mut check = ClockCheck::default();
        let left_out = self.scan(|s, r, send, recv| match map {
            Some(m) => check.message(s, r, m.time(s, send), m.time(r, recv)),
            None => check.message(s, r, send, recv),
        })?;
        Ok((check.violations(), left_out))
    }
}

/// Whether no member of a blocking instance of `kind` can leave before every member entered:
/// a barrier, and the collectives whose every member's result depends on every member's
/// data (with a count of zero an MPI library need not wait, which the estimate then takes
/// for a longer wait).
fn synchronizes(kind: OpKind) -> bool {
    matches!(
        kind,
        OpKind::Barrier
            | OpKind::Allreduce
            | OpKind::Allgather
            | OpKind::Alltoall
            | OpKind::ReduceScatterBlock
    )
}

/// Calls `f(a, b, a's enter, b's leave)` for the members of every synchronizing collective
/// instance of `trace` ([`synchronizes`]): `a`'s entry happened before `b` left, as a
/// message from `a` to `b` sent at the entry and received at the leave would. Pairs are the
/// first member with each other member, both ways, so that the cost follows the members.
fn scan_synchronizing(trace: &Trace, mut f: impl FnMut(Rank, Rank, Time, Time)) -> Result<()> {
    let times = OpTimes::new(trace)?;
    for chunk in 0..trace.collective_chunk_count() {
        trace.check_cancel()?;
        for instance in trace.collective_chunk(chunk)? {
            if !synchronizes(instance.kind) || instance.ops.len() < 2 {
                continue;
            }
            let Some(first) = times.get(instance.ops[0]) else {
                continue;
            };
            for &op in &instance.ops[1..] {
                let Some(other) = times.get(op) else {
                    continue;
                };
                if other.rank != first.rank {
                    f(first.rank, other.rank, first.start, other.end);
                    f(other.rank, first.rank, other.start, first.end);
                }
            }
        }
    }
    Ok(())
}

/// Per ordered pair of ranks that messages (`tight`) do not link both ways, the tightest
/// entry-to-leave delta of the synchronizing collectives they share, over the run and each
/// half (split at `mid`), bounded by the pair's messages one way if it has any.
fn synchronized_pairs(trace: &Trace, tight: &PairBounds, mid: Time) -> Result<PairBounds> {
    let mut synced = PairBounds::default();
    scan_synchronizing(trace, |a, b, enter, leave| {
        if tight.contains_key(&(a, b)) && tight.contains_key(&(b, a)) {
            return;
        }
        let delta = leave as i128 - enter as i128;
        let slots = synced.entry((a, b)).or_default();
        tighten(&mut slots[0], delta, enter);
        tighten(&mut slots[if enter < mid { 1 } else { 2 }], delta, enter);
    })?;
    for (pair, slots) in synced.iter_mut() {
        if let Some(one_way) = tight.get(pair) {
            for (slot, t) in slots.iter_mut().zip(one_way) {
                if let Some(t) = t {
                    tighten(slot, t.delta, t.at);
                }
            }
        }
    }
    Ok(synced)
}

/// The pairs of `trace` whose messages violate the clock condition in its stored times, or
/// in the times `map` corrects them to. As at import, a message whose `MPI_Irecv` no Wait or
/// Test completed is not judged: its receive time is the call's own end, not the data's
/// arrival.
pub fn check(trace: &Trace, map: Option<&ClockMap>) -> Result<Vec<PairViolation>> {
    Ok(TimedMessages::of(trace)?.check(map)?.0)
}

/// One rank's clock in a [`ClockMap`]: its offset from the reference clock is `offset + drift
/// * (t - t0)` ns at its local time `t`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RankClock {
    /// The offset (ns) at the model's `t0`.
    pub offset: f64,
    /// The drift (ns per ns).
    pub drift: f64,
}

impl RankClock {
    fn at(&self, t: Time, t0: Time) -> f64 {
        self.offset + self.drift * (t as f64 - t0 as f64)
    }
}

/// The decay of a controlled-logical-clock jump: `1 / CLC_DECAY` of the time elapsed (γ =
/// 0.99).
const CLC_DECAY: u64 = 100;
/// Passes of the controlled logical clock over the messages before it gives up (each pass
/// moves the receives the passes before left early; a trace whose messages form a causal
/// cycle never settles, and what is left is counted in [`ClockMap::unresolved`]).
const CLC_MAX_PASSES: u32 = 64;

/// A correction of a trace's times, per rank: `time(rank, t)` is the corrected time of local
/// time `t` on `rank`. The original time of a corrected one follows from the model (the
/// offsets and drifts are stored with a corrected trace, `mtfdb clock NAME` shows them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockMap {
    /// The correction this map makes.
    pub correction: ClockCorrection,
    /// The time (ns) offsets are given at: the trace's first time.
    pub t0: Time,
    /// Added to every corrected time (ns), so that no corrected time goes below zero: the
    /// corrected clock is rank 0's plus `shift`.
    pub shift: Time,
    /// Per rank (by world rank), its clock's offset and drift from rank 0's.
    pub ranks: Vec<RankClock>,
    /// Ranks no pair of ranks with messages both ways (or synchronizing collectives) links to
    /// rank 0: their clocks are kept (plus `shift`).
    pub unrelated: Vec<Rank>,
    /// Whether a rank's clock was related to rank 0's through a synchronizing collective
    /// (messages left it unrelated).
    pub by_collectives: bool,
    /// The smallest one-way latency (ns) the pairs with messages both ways show: what the
    /// controlled logical clock keeps between a send and its receive.
    pub latency: Time,
    /// Controlled logical clock: per rank, its jumps as (interpolated time `u`, `K`): from
    /// `u` on, the rank's clock is ahead by `(K - u) / 100` while that is positive. Sorted by
    /// `u`, `K` increasing.
    pub jumps: Vec<Vec<(Time, Time)>>,
    /// Controlled logical clock: how many times it moved a receive.
    pub moved: u64,
    /// Controlled logical clock: passes over the messages.
    pub passes: u32,
    /// Messages that still violate the clock condition after the correction (only a trace
    /// whose messages form a causal cycle has any after `clc`).
    pub unresolved: u64,
}

impl crate::store::StoredResult for ClockMap {
    // 2: the map says whether collectives linked ranks (`by_collectives`).
    const SCHEMA_VERSION: u32 = 2;
}

/// The smallest `receive end - send start` of one direction of a pair, and when (the send).
#[derive(Debug, Clone, Copy)]
struct Tight {
    delta: i128,
    at: Time,
}

/// Per ordered pair of ranks, its tightest bound over the run and each half.
type PairBounds = FxHashMap<(Rank, Rank), [Option<Tight>; 3]>;

fn tighten(slot: &mut Option<Tight>, delta: i128, at: Time) {
    if slot.is_none_or(|t| delta < t.delta) {
        *slot = Some(Tight { delta, at });
    }
}

/// One pair's offset estimate: `o_b - o_a` (ns) at time `at`, and the one-way latency.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    diff: f64,
    at: f64,
    latency: f64,
}

fn estimate(ab: Option<Tight>, ba: Option<Tight>) -> Option<Estimate> {
    let (ab, ba) = (ab?, ba?);
    Some(Estimate {
        diff: (ab.delta - ba.delta) as f64 / 2.0,
        at: (ab.at as f64 + ba.at as f64) / 2.0,
        latency: (ab.delta + ba.delta) as f64 / 2.0,
    })
}

impl ClockMap {
    /// The identity: times as recorded.
    pub fn identity() -> ClockMap {
        ClockMap::default()
    }

    /// The map `correction` makes of `trace`'s times, estimated from its messages.
    pub fn estimate(trace: &Trace, correction: ClockCorrection) -> Result<ClockMap> {
        let ranks = trace
            .header()
            .processes
            .iter()
            .map(|p| p.rank as usize + 1)
            .max()
            .unwrap_or(0);
        let summary = trace.summary();
        let (first, last) = (
            summary.first_time.unwrap_or(0),
            summary.last_time.unwrap_or(0),
        );
        if correction == ClockCorrection::None {
            return Ok(ClockMap::identity());
        }
        // Per ordered pair: the tightest message over the run, its first half, its second.
        let messages = TimedMessages::of(trace)?;
        let mid = first + (last - first) / 2;
        let mut tight = PairBounds::default();
        messages.scan(|s, r, send, recv| {
            if s == r {
                return;
            }
            let delta = recv as i128 - send as i128;
            let slots = tight.entry((s, r)).or_default();
            tighten(&mut slots[0], delta, send);
            tighten(&mut slots[if send < mid { 1 } else { 2 }], delta, send);
        })?;
        let violating = |m: Option<&ClockMap>| -> Result<u64> {
            Ok(messages.check(m)?.0.iter().map(|p| p.messages).sum())
        };
        let mut map = fit(
            &tight,
            &FxHashMap::default(),
            ranks,
            correction,
            first,
            last,
        );
        let mut unresolved = None;
        // Ranks messages leave unrelated are linked by the synchronizing collectives they
        // share. Collectives estimate worse than messages (their members' waits are not
        // symmetric as a latency is): where their lines leave more messages received before
        // they were sent than the recorded times do, the messages' lines alone are kept.
        if !map.unrelated.is_empty() {
            let synced = synchronized_pairs(trace, &tight, mid)?;
            let linked = fit(&tight, &synced, ranks, correction, first, last);
            if linked.by_collectives {
                let with_collectives = violating(Some(&linked))?;
                if with_collectives <= violating(None)? {
                    map = linked;
                    unresolved = Some(with_collectives);
                }
            }
        }
        if correction == ClockCorrection::Clc {
            map.controlled_logical_clock(&messages)?;
            unresolved = None;
        }
        map.unresolved = match unresolved {
            Some(n) => n,
            None => violating(Some(&map))?,
        };
        Ok(map)
    }

    /// The time before the controlled logical clock: `t` corrected by the rank's offset and
    /// drift.
    fn interpolated(&self, rank: Rank, t: Time) -> Time {
        let Some(clock) = self.ranks.get(rank as usize) else {
            return t;
        };
        let u = t as f64 + self.shift as f64 - clock.at(t, self.t0);
        // Times near 2^64 lose ns precision in f64: correct by the rounded offset instead.
        let correction = u.round() - t as f64;
        (t as i128 + correction as i128).clamp(0, Time::MAX as i128) as Time
    }

    /// The corrected time of local time `t` on `rank`.
    pub fn time(&self, rank: Rank, t: Time) -> Time {
        if self.correction == ClockCorrection::None {
            return t;
        }
        let u = self.interpolated(rank, t);
        u.saturating_add(self.jump(rank, u))
    }

    /// How far the controlled logical clock moves interpolated time `u` on `rank`.
    fn jump(&self, rank: Rank, u: Time) -> Time {
        let Some(steps) = self.jumps.get(rank as usize) else {
            return 0;
        };
        let i = steps.partition_point(|&(at, _)| at <= u);
        match i.checked_sub(1).map(|i| steps[i].1) {
            Some(k) if k > u => (k - u) / CLC_DECAY,
            _ => 0,
        }
    }

    /// Moves `rank`'s clock so that interpolated time `u` reads at least `need`; returns
    /// whether it moved.
    fn raise(&mut self, rank: Rank, u: Time, need: Time) -> bool {
        if u.saturating_add(self.jump(rank, u)) >= need {
            return false;
        }
        let k = u.saturating_add((need - u).saturating_mul(CLC_DECAY));
        let steps = &mut self.jumps[rank as usize];
        let i = steps.partition_point(|&(at, _)| at <= u);
        // Later jumps this one overtakes are dropped: the staircase keeps K increasing.
        let end = i + steps[i..].iter().take_while(|&&(_, kj)| kj <= k).count();
        if i > 0 && steps[i - 1].0 == u {
            steps[i - 1].1 = k;
            steps.drain(i..end);
        } else {
            steps.splice(i..end, [(u, k)]);
        }
        true
    }

    /// Forward amortization over the messages until no receive ends before its send's start
    /// plus the minimal latency.
    fn controlled_logical_clock(&mut self, messages: &TimedMessages<'_>) -> Result<()> {
        self.jumps = vec![Vec::new(); self.ranks.len()];
        for pass in 1..=CLC_MAX_PASSES {
            let mut moved = 0u64;
            messages.scan(|s, r, send, recv| {
                if (s as usize) >= self.ranks.len() || (r as usize) >= self.ranks.len() {
                    return;
                }
                // A receive ends after its send starts: at least 1 ns later.
                let need = self.time(s, send).saturating_add(self.latency.max(1));
                let u = self.interpolated(r, recv);
                if self.raise(r, u, need) {
                    moved += 1;
                }
            })?;
            self.passes = pass;
            self.moved += moved;
            if moved == 0 {
                break;
            }
        }
        Ok(())
    }
}

/// The offsets (and drifts) per rank that the pairs' tightest messages give.
/// The offset (and drift) line `o_b - o_a` of the pair `a < b` from its tightest deltas
/// each way (`ab`, `ba`), and the pair's one-way latency; `None` unless both ways have one.
fn pair_line(
    ab: &[Option<Tight>; 3],
    ba: &[Option<Tight>; 3],
    correction: ClockCorrection,
    first: Time,
) -> Option<(RankClock, f64)> {
    let whole = estimate(ab[0], ba[0])?;
    // The latency from each half where both directions have messages (a drift skews the
    // estimate over the whole run by the change of offset between the two messages), else
    // from the whole run.
    let halves: Vec<f64> = [1, 2]
        .into_iter()
        .filter_map(|w| estimate(ab[w], ba[w]))
        .map(|e| e.latency)
        .collect();
    let latency = if halves.is_empty() {
        whole.latency
    } else {
        halves.into_iter().fold(f64::INFINITY, f64::min)
    };
    let mut line = RankClock {
        offset: whole.diff,
        drift: 0.0,
    };
    if correction != ClockCorrection::Offsets {
        if let (Some(e1), Some(e2)) = (estimate(ab[1], ba[1]), estimate(ab[2], ba[2])) {
            if e2.at > e1.at {
                let drift = (e2.diff - e1.diff) / (e2.at - e1.at);
                line = RankClock {
                    offset: e1.diff + drift * (first as f64 - e1.at),
                    drift,
                };
            }
        }
    }
    Some((line, latency))
}

/// The lines of every pair `tight` has both ways, by unordered pair (a < b), and the least
/// latency among them.
fn pair_lines(
    tight: &PairBounds,
    correction: ClockCorrection,
    first: Time,
) -> (FxHashMap<(Rank, Rank), RankClock>, Option<f64>) {
    let mut lines = FxHashMap::default();
    let mut latency: Option<f64> = None;
    for (&(a, b), ab) in tight.iter().filter(|((a, b), _)| a < b) {
        let Some(ba) = tight.get(&(b, a)) else {
            continue;
        };
        if let Some((line, l)) = pair_line(ab, ba, correction, first) {
            latency = Some(latency.map_or(l, |m: f64| m.min(l)));
            lines.insert((a, b), line);
        }
    }
    (lines, latency)
}

/// Each rank's neighbours in `lines`, sorted.
fn neighbours_of(lines: &FxHashMap<(Rank, Rank), RankClock>, ranks: usize) -> Vec<Vec<Rank>> {
    let mut neighbours: Vec<Vec<Rank>> = vec![Vec::new(); ranks];
    for &(a, b) in lines.keys() {
        if (b as usize) < ranks {
            neighbours[a as usize].push(b);
            neighbours[b as usize].push(a);
        }
    }
    neighbours.iter_mut().for_each(|n| n.sort_unstable());
    neighbours
}

/// The map of the pairs' lines: from messages (`tight`), and for pairs no messages link both
/// ways, from synchronizing collectives (`synced`), which give no latency (a collective's
/// members wait for each other: its duration is no network latency).
fn fit(
    tight: &PairBounds,
    synced: &PairBounds,
    ranks: usize,
    correction: ClockCorrection,
    first: Time,
    last: Time,
) -> ClockMap {
    let (lines, latency) = pair_lines(tight, correction, first);
    let (synced_lines, _) = pair_lines(synced, correction, first);
    let by_messages = neighbours_of(&lines, ranks);
    let by_collectives = neighbours_of(&synced_lines, ranks);
    // A spanning forest, breadth first from rank 0 along messages; a rank messages do not
    // reach is reached along a collective from the ranks reached so far (one at a time, so
    // that what messages reach from it comes first); a rank neither reaches starts a tree of
    // its own, and keeps its clock.
    let mut clocks: Vec<Option<RankClock>> = vec![None; ranks];
    let mut root_of: Vec<Rank> = vec![0; ranks];
    let mut by_message_queue: VecDeque<Rank> = VecDeque::new();
    let mut by_collective_queue: VecDeque<Rank> = VecDeque::new();
    // Per rank, how many of its collective neighbours were looked at.
    let mut looked_at: Vec<usize> = vec![0; ranks];
    let mut next_root = 0;
    let mut linked_by_collectives = false;
    loop {
        if let Some(p) = by_message_queue.pop_front() {
            by_collective_queue.push_back(p);
            for &c in &by_messages[p as usize] {
                if clocks[c as usize].is_none() {
                    let line = lines[&(p.min(c), p.max(c))];
                    attach(&mut clocks, &mut root_of, p, c, line);
                    by_message_queue.push_back(c);
                }
            }
        } else if let Some(p) = by_collective_queue.pop_front() {
            let candidates = &by_collectives[p as usize];
            let seen = &mut looked_at[p as usize];
            while *seen < candidates.len() && clocks[candidates[*seen] as usize].is_some() {
                *seen += 1;
            }
            if let Some(&c) = candidates.get(*seen) {
                let line = synced_lines[&(p.min(c), p.max(c))];
                attach(&mut clocks, &mut root_of, p, c, line);
                linked_by_collectives = true;
                by_collective_queue.push_front(p);
                by_message_queue.push_back(c);
            }
        } else {
            while next_root < ranks && clocks[next_root].is_some() {
                next_root += 1;
            }
            if next_root == ranks {
                break;
            }
            clocks[next_root] = Some(RankClock::default());
            root_of[next_root] = next_root as Rank;
            by_message_queue.push_back(next_root as Rank);
        }
    }
    let unrelated = (0..ranks)
        .filter(|&r| root_of[r] != 0)
        .map(|r| r as Rank)
        .collect();
    let ranks: Vec<RankClock> = clocks.into_iter().map(Option::unwrap_or_default).collect();
    // The largest offset over the run (a line's largest is at an end) becomes the shift.
    let shift = ranks
        .iter()
        .flat_map(|c| [c.at(first, first), c.at(last, first)])
        .fold(0.0f64, f64::max)
        .ceil() as Time;
    ClockMap {
        correction,
        t0: first,
        shift,
        ranks,
        unrelated,
        by_collectives: linked_by_collectives,
        latency: latency.unwrap_or(0.0).max(0.0).round() as Time,
        ..ClockMap::default()
    }
}

/// Clocks child rank `c` from its parent `p` along their pair's line.
fn attach(
    clocks: &mut [Option<RankClock>],
    root_of: &mut [Rank],
    p: Rank,
    c: Rank,
    line: RankClock,
) {
    let parent = clocks[p as usize].expect("a parent has its clock");
    let sign = if p < c { 1.0 } else { -1.0 };
    clocks[c as usize] = Some(RankClock {
        offset: parent.offset + sign * line.offset,
        drift: parent.drift + sign * line.drift,
    });
    root_of[c as usize] = root_of[p as usize];
}

/// The key a trace's clock map for `correction` is stored under.
pub fn map_key(correction: ClockCorrection) -> String {
    format!("clock/{}", correction.name())
}

/// The key under which an import stores the map it corrected the trace's times with.
pub const APPLIED_KEY: &str = "clock/applied";

/// `trace`'s clock map for `correction`, estimated once and stored with it (`refresh`:
/// estimated again).
pub fn stored_map(trace: &Trace, correction: ClockCorrection, refresh: bool) -> Result<ClockMap> {
    if correction == ClockCorrection::None {
        return Ok(ClockMap::identity());
    }
    trace.stored_result(&map_key(correction), refresh, || {
        ClockMap::estimate(trace, correction)
    })
}

/// What `mtfdb clock NAME` prints: the correction the import applied (if any), the pairs
/// whose messages violate the clock condition in the stored times, the clock map
/// `correction` estimates from the messages, and the wait states per rank under it.
pub fn report(trace: &Trace, correction: ClockCorrection) -> Result<String> {
    use std::fmt::Write;
    let mut out = String::new();
    let w = &mut out;
    match trace.result::<ClockMap>(APPLIED_KEY)? {
        Some(applied) => writeln!(
            w,
            "times corrected at import with {} (the map below, as estimated from the \
             original times, gives each rank's offset and drift)",
            applied.correction
        ),
        None => writeln!(w, "times as recorded (imported without clock correction)"),
    }
    .ok();
    let (pairs, left_out) = TimedMessages::of(trace)?.check(None)?;
    let violating: u64 = pairs.iter().map(|p| p.messages).sum();
    writeln!(
        w,
        "messages received before they were sent: {violating} in {} pair(s)",
        pairs.len()
    )
    .ok();
    if left_out > 0 {
        writeln!(
            w,
            "  not judged, as at import: {left_out} message(s) whose MPI_Irecv no Wait or \
             Test completed (the receive time is the call's own end, not the data's arrival)"
        )
        .ok();
    }
    if !pairs.is_empty() {
        writeln!(w, "  sender  receiver  messages  worst_ns  first_send_ns").ok();
        for p in &pairs {
            writeln!(
                w,
                "  {:>6}  {:>8}  {:>8}  {:>8}  {}",
                p.sender, p.receiver, p.messages, p.worst, p.time
            )
            .ok();
        }
    }
    let map = match (correction, trace.result::<ClockMap>(APPLIED_KEY)?) {
        (ClockCorrection::None, _) => ClockMap::identity(),
        _ => ClockMap::estimate(trace, correction)?,
    };
    if correction != ClockCorrection::None {
        writeln!(
            w,
            "clock map ({correction}, from the messages{}; rank 0's clock is the reference, \
             corrected = local - offset - drift * (t - {}) + {}):",
            if map.by_collectives {
                " and synchronizing collectives"
            } else {
                ""
            },
            map.t0,
            map.shift
        )
        .ok();
        writeln!(w, "  rank  offset_ns  drift_ppm").ok();
        for (rank, c) in map.ranks.iter().enumerate() {
            writeln!(w, "  {rank:>4}  {:>9.0}  {:>9.3}", c.offset, c.drift * 1e6).ok();
        }
        writeln!(w, "  minimal one-way latency: {} ns", map.latency).ok();
        if !map.unrelated.is_empty() {
            writeln!(
                w,
                "  ranks with no messages both ways to rank 0's group, clocks kept: {:?}",
                map.unrelated
            )
            .ok();
        }
        if correction == ClockCorrection::Clc {
            writeln!(
                w,
                "  controlled logical clock: {} receive(s) moved in {} pass(es)",
                map.moved, map.passes
            )
            .ok();
        }
        writeln!(
            w,
            "  messages still received before they were sent: {}",
            map.unresolved
        )
        .ok();
    }
    let waits = crate::analysis::waits::wait_states_with(trace, &map)?;
    let ranks = map.ranks.len().max(
        trace
            .header()
            .processes
            .iter()
            .map(|p| p.rank as usize + 1)
            .max()
            .unwrap_or(0),
    );
    writeln!(w, "wait states per rank (ns), clock {correction}:").ok();
    let kinds = crate::analysis::waits::WaitKind::ALL;
    let header: Vec<String> = kinds.iter().map(|k| k.name().replace(' ', "_")).collect();
    writeln!(w, "  rank  {}", header.join("  ")).ok();
    for (rank, row) in waits.per_rank(ranks as u32).iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&header)
            .map(|(v, h)| format!("{v:>width$}", width = h.len()))
            .collect();
        writeln!(w, "  {rank:>4}  {}", cells.join("  ")).ok();
    }
    writeln!(
        w,
        "  receives that ended before their send began (no wait counted): {}",
        waits.inconsistent
    )
    .ok();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_decays_and_later_jumps_overtake_it() {
        let mut m = ClockMap {
            correction: ClockCorrection::Clc,
            ranks: vec![RankClock::default(); 2],
            jumps: vec![Vec::new(); 2],
            ..ClockMap::default()
        };
        assert!(m.raise(1, 1_000, 1_500));
        assert_eq!(m.time(1, 999), 999);
        assert_eq!(m.time(1, 1_000), 1_500);
        // 1000 ns later, 1% of it (10 ns) is gone.
        assert_eq!(m.time(1, 2_000), 2_490);
        // Fully decayed after 50 us.
        assert_eq!(m.time(1, 60_000), 60_000);
        // Already late enough: nothing moves.
        assert!(!m.raise(1, 2_000, 2_400));
        // A larger jump later overtakes nothing before it, and drops what it overtakes after.
        assert!(m.raise(1, 500, 3_000));
        assert_eq!(m.jumps[1].len(), 1);
        assert_eq!(m.time(1, 500), 3_000);
        assert!(m.time(1, 1_000) >= 1_500);
    }

    #[test]
    fn offsets_of_a_pair_are_exact_at_the_minimal_latency() {
        // Rank 1's clock is 700 ns ahead; 50 ns latency both ways.
        let mut tight = PairBounds::default();
        let t = |delta, at| Some(Tight { delta, at });
        tight.insert((0, 1), [t(750, 100), None, None]);
        tight.insert((1, 0), [t(-650, 900), None, None]);
        let m = fit(
            &tight,
            &FxHashMap::default(),
            2,
            ClockCorrection::Offsets,
            0,
            1_000,
        );
        assert_eq!(m.ranks[1].offset, 700.0);
        assert_eq!(m.latency, 50);
        assert_eq!(m.shift, 700);
        // Rank 1 reads 1700 when rank 0 reads 1000: both are 1000 + shift.
        assert_eq!(m.time(1, 1_700), m.time(0, 1_000));
    }
}
