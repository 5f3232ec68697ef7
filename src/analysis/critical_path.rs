//! The critical path: the chain of computation and MPI calls, across ranks, that determined
//! how long the run took, found by a backward replay as Scalasca does (Böhme, Geimer, Wolf,
//! Arnold, "Scalable critical-path based performance analysis").
//!
//! The path starts at the end of the operation that ends last (on ties, on the lowest rank)
//! and walks back in time. On one rank, a call that did not wait is on the path whole, and the
//! gaps between consecutive calls are [`Activity::Computation`]. A call that waited (a
//! [`Wait`](crate::analysis::waits::Wait)) is on the path only from the instant its partner
//! released it (`start + time`) to the cursor; the path continues on the partner at that
//! instant: the late sender, the late receiver, the last member of a barrier or N x N
//! collective, the root of a broadcast, the first non-root of a reduce.
//!
//! Blocking collectives are followed by what their calls' ends record, not by their kind
//! alone: a member whose call ended after the last member entered is taken to have waited for
//! it, whatever the collective, and the path leaves it at that entry for the last member (on
//! ties, the lowest rank). So the root of a Reduce or Gather, which cannot finish before every
//! contribution arrived, passes the path to the *last* non-root, not to the first one that
//! Scalasca's early-reduce wait names; and a Bcast member that left only after a late
//! non-root entered (as a tree broadcast through that member would) passes it to that
//! non-root rather than to the root. A member that left before the last one entered keeps its
//! wait state's rule (a broadcast's non-root waits for its root).
//!
//! What the cursor meets on a rank, at instant `t`, is the operation that started last before
//! `t` (over all the rank's threads; operations that start exactly at `t` lie after the cursor):
//!
//! - if it ended before `t`, the rank computed over `[its end, t]`;
//! - if it ended at or after `t` and waited, and its wait ended before `t`, the path holds the
//!   call over `[wait end, t]` and jumps to the partner at the wait's end; when the wait ends
//!   exactly at `t`, the path jumps at once, unless that partner was already left at this same
//!   instant (a cycle of waits ending together, as skewed clocks can record): then, as for an
//!   instant *inside* a wait, the path holds the call over `[start, t]` and stays on the rank;
//! - otherwise the path holds the call over `[start, t]`;
//! - with no operation before `t`, the rank computed from the trace's first operation start.
//!
//! The path stops at the earliest operation start of the trace. It spans **operations**, not
//! routine events: a `main` entered before `MPI_Init` or left after `MPI_Finalize` is outside
//! it. So the segments tile `[first operation start, last operation end]` with no gap and no
//! overlap, and the path's length is the run's length between its first and last MPI call.
//!
//! Every operation's start, end and call are read first, by one scan that decodes each
//! operation chunk once (shared with the wait states when they are computed here); the walk,
//! the blocking collectives' member calls and the imbalance's averages look them up there.
//!
//! ```
//! use mtfdb::analysis::critical_path::{Activity, CriticalPath, Segment};
//! // Rank 0 computes over [0, 600], rank 1's receive waits for its send until 600 and
//! // finishes at 900.
//! let path = CriticalPath {
//!     segments: vec![
//!         Segment { rank: 0, start: 0, end: 600, activity: Activity::Computation },
//!         Segment { rank: 1, start: 600, end: 900,
//!                   activity: Activity::Mpi { op: 7, kind: mtfdb::model::OpKind::Recv } },
//!     ],
//!     averages: vec![(None, 350), (Some(mtfdb::model::OpKind::Recv), 150)],
//! };
//! assert_eq!(path.length(), 900);
//! assert_eq!(path.per_rank(2), vec![600, 300]);
//! // (600 - 350) of computation and (300 - 150) of the receive are above average.
//! assert_eq!(path.imbalance(), 400);
//! ```

use serde::{Deserialize, Serialize};

use super::clock::{self, ClockCorrection, ClockMap};
use super::op_times::OpTimes;
use crate::analysis::waits::{wait_states_in, waits_key, WaitStates, WAITS_KEY};
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::{CollectiveInstance, OpId, OpKind, Rank, Time};
use crate::store::scan::progress_stage;
use crate::store::OpChunkInfo;
use crate::Trace;

/// What a rank did during a segment of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Activity {
    /// Computation: the rank was between two MPI calls (or before its first).
    Computation,
    /// The MPI call `op` of kind `kind`.
    Mpi {
        /// The operation.
        op: OpId,
        /// Its kind.
        kind: OpKind,
    },
}

impl Activity {
    /// The activity's class, as [`CriticalPath::averages`] keys it: `None` for computation,
    /// the call's kind for an MPI call.
    pub fn class(self) -> Option<OpKind> {
        match self {
            Activity::Computation => None,
            Activity::Mpi { kind, .. } => Some(kind),
        }
    }
}

/// One stretch of the path: `rank` did `activity` over `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// The rank the path is on.
    pub rank: Rank,
    /// Start (ns).
    pub start: Time,
    /// End (ns), after `start`.
    pub end: Time,
    /// What the rank did.
    pub activity: Activity,
}

impl Segment {
    /// `end - start` (ns).
    pub fn duration(&self) -> Time {
        self.end - self.start
    }
}

/// The critical path of a trace, with what the imbalance compares it to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticalPath {
    /// The segments, in time order, each starting where the previous one ended.
    pub segments: Vec<Segment>,
    /// Per activity class (`None`: computation; `Some(kind)`: calls of that kind), sorted by
    /// class, the average time per rank spent in it with wait states excluded (ns, rounded
    /// down): the sum over ranks divided by the number of ranks. A rank's computation is the
    /// time from the trace's first operation start to its own last operation end that none
    /// of its operations covers.
    pub averages: Vec<(Option<OpKind>, Time)>,
}

impl CriticalPath {
    /// The path's length (ns): the run's length from its first operation start to its last
    /// operation end.
    pub fn length(&self) -> Time {
        self.segments.iter().map(Segment::duration).sum()
    }

    /// The time on the path (ns) of each rank `0..ranks`.
    pub fn per_rank(&self, ranks: u32) -> Vec<Time> {
        let mut out = vec![0; ranks as usize];
        for s in &self.segments {
            if let Some(t) = out.get_mut(s.rank as usize) {
                *t += s.duration();
            }
        }
        out
    }

    /// The time on the path (ns) of each activity class, sorted by class (`None`, computation,
    /// first).
    pub fn per_activity(&self) -> Vec<(Option<OpKind>, Time)> {
        let mut out: Vec<(Option<OpKind>, Time)> = Vec::new();
        for s in &self.segments {
            let class = s.activity.class();
            match out.binary_search_by_key(&class, |(c, _)| *c) {
                Ok(i) => out[i].1 += s.duration(),
                Err(i) => out.insert(i, (class, s.duration())),
            }
        }
        out
    }

    /// The critical-path imbalance (ns), as Scalasca defines it per call path and sums it:
    /// over every activity class `a` (computation, and the calls of each MPI kind),
    /// `max(0, time of a on the path - average time per rank in a without waits)`. It is the
    /// time the path spends in an activity beyond what an average rank spends in it: what a
    /// perfect balance of that activity would save at most.
    pub fn imbalance(&self) -> Time {
        self.per_activity()
            .into_iter()
            .map(|(class, on_path)| {
                let average = self
                    .averages
                    .binary_search_by_key(&class, |(c, _)| *c)
                    .map_or(0, |i| self.averages[i].1);
                on_path.saturating_sub(average)
            })
            .sum()
    }
}

impl crate::store::StoredResult for CriticalPath {
    const SCHEMA_VERSION: u32 = 1;
}

/// The key the critical path is stored under.
pub const CRITICAL_PATH_KEY: &str = "critical-path";

/// The critical path of `trace`, computed once (over its stored wait states) and stored with
/// it (`refresh`: the wait states and the path computed again and stored anew).
pub fn stored_critical_path(trace: &Trace, refresh: bool) -> Result<CriticalPath> {
    trace.stored_result(CRITICAL_PATH_KEY, refresh, || {
        progress_stage("critical path");
        // One read of the operations' times for the wait states (when not stored) and the
        // path.
        let times = OpTimes::new(trace)?;
        let instances = trace.collective_instances()?;
        let waits = trace.stored_result(WAITS_KEY, refresh, || {
            wait_states_in(trace, &times, &instances)
        })?;
        path_over(trace, &waits, &times, &instances)
    })
}

/// The key the critical path under `correction` is stored under ([`CRITICAL_PATH_KEY`] for
/// the stored times).
pub fn critical_path_key(correction: ClockCorrection) -> String {
    match correction {
        ClockCorrection::None => CRITICAL_PATH_KEY.to_string(),
        c => format!("{CRITICAL_PATH_KEY}/clock={}", c.name()),
    }
}

/// The critical path of `trace` with its times corrected by `correction` (see
/// [`crate::analysis::clock`]): over the wait states under the same correction, its segments
/// in corrected times; computed once and stored with it. `None` is [`stored_critical_path`].
pub fn stored_critical_path_with(
    trace: &Trace,
    correction: ClockCorrection,
    refresh: bool,
) -> Result<CriticalPath> {
    if correction == ClockCorrection::None {
        return stored_critical_path(trace, refresh);
    }
    trace.stored_result(&critical_path_key(correction), refresh, || {
        progress_stage("critical path");
        let map = clock::stored_map(trace, correction, refresh)?;
        let times = OpTimes::corrected(trace, &map)?;
        let instances = trace.collective_instances()?;
        let waits = trace.stored_result(&waits_key(correction), refresh, || {
            wait_states_in(trace, &times, &instances)
        })?;
        path_over(trace, &waits, &times, &instances)
    })
}

/// The critical path of `trace` with its times corrected by `map`: over the wait states
/// under `map`, its segments in corrected times.
pub fn critical_path_corrected(trace: &Trace, map: &ClockMap) -> Result<CriticalPath> {
    progress_stage("critical path");
    let times = OpTimes::corrected(trace, map)?;
    let instances = trace.collective_instances()?;
    let waits = wait_states_in(trace, &times, &instances)?;
    path_over(trace, &waits, &times, &instances)
}

/// The critical path of `trace` (see the module's rules).
///
/// ```no_run
/// # fn main() -> mtfdb::Result<()> {
/// use mtfdb::analysis::critical_path::critical_path;
/// let db = mtfdb::Database::open("mtfdb.db")?;
/// let trace = db.trace("stencil")?;
/// let path = critical_path(&trace)?;
/// let ranks = trace.header().processes.len() as u32;
/// println!("{} ns, {:?} per rank, imbalance {} ns", path.length(),
///          path.per_rank(ranks), path.imbalance());
/// # Ok(())
/// # }
/// ```
pub fn critical_path(trace: &Trace) -> Result<CriticalPath> {
    progress_stage("critical path");
    let times = OpTimes::new(trace)?;
    let instances = trace.collective_instances()?;
    let waits = wait_states_in(trace, &times, &instances)?;
    path_over(trace, &waits, &times, &instances)
}

/// The critical path of `trace` over its wait states `waits` (from
/// [`wait_states`](crate::analysis::waits::wait_states) or [`stored_wait_states`]).
pub fn critical_path_with(trace: &Trace, waits: &WaitStates) -> Result<CriticalPath> {
    progress_stage("critical path");
    let instances = trace.collective_instances()?;
    path_over(trace, waits, &OpTimes::new(trace)?, &instances)
}

/// The path over `waits`, reading operations from `times` (read once for every pass, and for
/// the wait states before them when the caller computed those too) and the trace's collective
/// `instances` (read once by the caller, which the wait states may have used too).
fn path_over<'t>(
    trace: &'t Trace,
    waits: &WaitStates,
    times: &OpTimes<'t>,
    instances: &[CollectiveInstance],
) -> Result<CriticalPath> {
    let releases = releases(trace, waits, times, instances)?;
    let segments = walk(trace, &releases, times)?;
    let averages = averages(trace, waits, times)?;
    Ok(CriticalPath { segments, averages })
}

/// When each operation that waited was released, and by which rank: its wait's end and
/// partner, but for a member of a blocking collective that left after the last member
/// entered, that entry and that member (see the module's rules).
fn releases(
    trace: &Trace,
    waits: &WaitStates,
    times: &OpTimes<'_>,
    instances: &[CollectiveInstance],
) -> Result<FxHashMap<OpId, (Time, Rank)>> {
    let mut out: FxHashMap<OpId, (Time, Rank)> = waits
        .waits
        .iter()
        .map(|w| (w.op, (w.start + w.time, w.partner)))
        .collect();
    let blocking = instances
        .iter()
        .filter(|i| i.kind.blocking_collective() == Some(i.kind));
    for instance in blocking {
        trace.check_cancel()?;
        let mut members: Vec<(OpId, Member)> = Vec::with_capacity(instance.ops.len());
        for &op in &instance.ops {
            let Some(t) = times.get(op) else { break };
            let member = Member {
                start: t.start,
                end: t.end,
                rank: t.rank,
            };
            members.push((op, member));
        }
        if members.len() < instance.ops.len() {
            continue;
        }
        // The last member to enter; on ties, the lowest rank.
        let Some(&(_, last)) = members
            .iter()
            .max_by_key(|(_, m)| (m.start, std::cmp::Reverse(m.rank)))
        else {
            continue;
        };
        for &(op, m) in &members {
            if m.start < last.start && last.start < m.end {
                out.insert(op, (last.start, last.rank));
            }
        }
    }
    Ok(out)
}

/// A collective member's call.
#[derive(Debug, Clone, Copy)]
struct Member {
    start: Time,
    end: Time,
    rank: Rank,
}

/// What the walk needs of one operation.
#[derive(Debug, Clone, Copy)]
struct Call {
    start: Time,
    end: Time,
    op: OpId,
    kind: OpKind,
}

/// The ranks' operations as the walk reaches them: per rank and thread, its chunks (from the
/// chunk directory), their times from those read once.
struct Timelines<'t, 'c> {
    trace: &'t Trace,
    threads: FxHashMap<Rank, Vec<Vec<OpChunkInfo>>>,
    times: &'c OpTimes<'t>,
}

impl<'t, 'c> Timelines<'t, 'c> {
    fn new(trace: &'t Trace, times: &'c OpTimes<'t>) -> Timelines<'t, 'c> {
        Timelines {
            trace,
            threads: FxHashMap::default(),
            times,
        }
    }

    /// The operation of `rank` that started last before `t`, over all its threads (the later
    /// ending one of two that started together).
    fn started_before(&mut self, rank: Rank, t: Time) -> Result<Option<Call>> {
        let trace = self.trace;
        let threads = self.threads.entry(rank).or_insert_with(|| {
            let mut by_thread: Vec<Vec<OpChunkInfo>> = Vec::new();
            let mut chunks: Vec<OpChunkInfo> = trace.op_chunks_of(rank).copied().collect();
            chunks.sort_by_key(|c| (c.thread, c.first_row));
            for c in chunks {
                match by_thread.last_mut() {
                    Some(last) if last[0].thread == c.thread => last.push(c),
                    _ => by_thread.push(vec![c]),
                }
            }
            by_thread
        });
        let mut best: Option<Call> = None;
        for chunks in threads.iter() {
            let n = chunks.partition_point(|c| self.times.time(rank, c.first_start) < t);
            let Some(info) = n.checked_sub(1).map(|i| &chunks[i]) else {
                continue;
            };
            let Some(c) = self.times.chunk(info.chunk) else {
                continue;
            };
            let Some(row) = c.start.partition_point(|&s| s < t).checked_sub(1) else {
                continue;
            };
            let (start, end) = (c.start[row], c.end[row]);
            if best.is_none_or(|b| (start, end) > (b.start, b.end)) {
                let op = c.id(row);
                let kind = c.kind(row).ok_or_else(|| unknown_call(op))?;
                best = Some(Call {
                    start,
                    end,
                    op,
                    kind,
                });
            }
        }
        Ok(best)
    }
}

/// The error for an operation whose stored call code this version does not know.
fn unknown_call(op: OpId) -> Error {
    Error::Corrupt(format!(
        "operation {op} has an MPI call this version does not know"
    ))
}

/// The segments, built backwards, merging adjacent computation of one rank.
#[derive(Default)]
struct Backwards {
    segments: Vec<Segment>,
}

impl Backwards {
    fn push(&mut self, rank: Rank, start: Time, end: Time, activity: Activity) {
        if start >= end {
            return;
        }
        if let Some(later) = self.segments.last_mut() {
            if activity == Activity::Computation
                && later.activity == Activity::Computation
                && later.rank == rank
                && later.start == end
            {
                later.start = start;
                return;
            }
        }
        self.segments.push(Segment {
            rank,
            start,
            end,
            activity,
        });
    }
}

/// The backward replay (see the module's rules).
fn walk<'t>(
    trace: &'t Trace,
    releases: &FxHashMap<OpId, (Time, Rank)>,
    times: &OpTimes<'t>,
) -> Result<Vec<Segment>> {
    let chunks = trace.op_chunks();
    let Some(first) = chunks
        .iter()
        .map(|c| times.time(c.rank, c.first_start))
        .min()
    else {
        return Ok(Vec::new());
    };
    let Some((mut t, mut rank)) = chunks
        .iter()
        .map(|c| (times.time(c.rank, c.max_end), std::cmp::Reverse(c.rank)))
        .max()
        .map(|(end, rank)| (end, rank.0))
    else {
        return Ok(Vec::new());
    };
    let mut timelines = Timelines::new(trace, times);
    let mut path = Backwards::default();
    // The ranks the path left at instant `left_at`, to break a cycle of waits ending there.
    let mut left_at: Option<Time> = None;
    let mut left: Vec<Rank> = Vec::new();
    let mut steps: u64 = 0;
    while t > first {
        steps += 1;
        if steps.is_multiple_of(4096) {
            trace.check_cancel()?;
        }
        let Some(call) = timelines.started_before(rank, t)? else {
            path.push(rank, first, t, Activity::Computation);
            t = first;
            continue;
        };
        if call.end < t {
            path.push(rank, call.end, t, Activity::Computation);
            t = call.end;
            continue;
        }
        let activity = Activity::Mpi {
            op: call.op,
            kind: call.kind,
        };
        if let Some(&(released, partner)) = releases.get(&call.op) {
            let jump = released < t
                || (released == t
                    && partner != rank
                    && !(left_at == Some(t) && left.contains(&partner)));
            if jump {
                path.push(rank, released, t, activity);
                if left_at != Some(released) {
                    left_at = Some(released);
                    left.clear();
                }
                left.push(rank);
                rank = partner;
                t = released;
                continue;
            }
        }
        path.push(rank, call.start, t, activity);
        t = call.start;
    }
    let mut segments = path.segments;
    segments.reverse();
    Ok(segments)
}

/// [`CriticalPath::averages`]: one pass over each rank's operations in turn.
fn averages(
    trace: &Trace,
    waits: &WaitStates,
    times: &OpTimes<'_>,
) -> Result<Vec<(Option<OpKind>, Time)>> {
    let Some(first) = trace
        .op_chunks()
        .iter()
        .map(|c| times.time(c.rank, c.first_start))
        .min()
    else {
        return Ok(Vec::new());
    };
    let with_ops = trace
        .op_chunks()
        .iter()
        .map(|c| c.rank + 1)
        .max()
        .unwrap_or(0);
    let ranks = (trace.header().processes.len() as u32).max(with_ops);
    let mut totals: FxHashMap<Option<OpKind>, u128> = FxHashMap::default();
    for rank in 0..ranks {
        trace.check_cancel()?;
        // The rank's operations (all threads), three columns of each chunk.
        let mut ops: Vec<(Time, Time, Option<OpKind>, OpId)> = Vec::new();
        for info in trace.op_chunks_of(rank) {
            let Some(c) = times.chunk(info.chunk) else {
                continue;
            };
            ops.extend((0..c.start.len()).map(|r| (c.start[r], c.end[r], c.kind(r), c.id(r))));
        }
        if ops.is_empty() {
            continue;
        }
        ops.sort_unstable_by_key(|&(start, end, _, id)| (start, end, id));
        // Time covered by at least one of the rank's operations, up to its last end.
        let (mut covered, mut reach) = (0, first);
        for &(start, end, kind, id) in &ops {
            let kind = kind.ok_or_else(|| unknown_call(id))?;
            let waited = waits.of(id).map_or(0, |w| w.time);
            *totals.entry(Some(kind)).or_default() +=
                u128::from((end - start).saturating_sub(waited));
            if end > reach {
                covered += end - start.max(reach);
                reach = end;
            }
        }
        *totals.entry(None).or_default() += u128::from(reach - first - covered);
    }
    let mut out: Vec<(Option<OpKind>, Time)> = totals
        .into_iter()
        .map(|(class, total)| {
            let average = total / u128::from(ranks.max(1));
            (class, Time::try_from(average).unwrap_or(Time::MAX))
        })
        .collect();
    out.sort_unstable();
    Ok(out)
}
