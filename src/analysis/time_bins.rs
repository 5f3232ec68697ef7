//! Time-binned views (Pipit's `time_profile` and `comm_over_time`): the run cut into `n`
//! equal bins, and per bin the time each routine or MPI call held (its exclusive time, summed
//! over ranks), or the messages sent and their bytes. A call spanning bins gives each bin its
//! part, so a bin's times add up to its width times the locations running through it, and
//! the bins' sums are the unbinned profile's exclusive times.
//!
//! Bin `k` of `n` over `[start, end]` is `[b(k), b(k + 1))` with
//! `b(k) = start + (end - start) · k / n` rounded down: integer nanoseconds, widths differing
//! by at most one, the last bin ending at `end`. Memory: one counter per bin and name.

use super::profile::{CallPaths, Scope, Visitor, Walk};
use crate::error::Result;
use crate::model::{Rank, Time};
use crate::store::MessageField;
use crate::Trace;

/// `n` equal bins over `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bins {
    /// The first bin's start.
    pub start: Time,
    /// The last bin's end.
    pub end: Time,
    /// How many bins.
    pub n: u32,
}

impl Bins {
    /// Bin `k`'s start (`k == n`: the end).
    pub fn bound(&self, k: u32) -> Time {
        let span = u128::from(self.end - self.start);
        self.start + (span * u128::from(k) / u128::from(self.n)) as Time
    }

    /// The bin holding `t` (the last bin holds `end`), when `t` is inside.
    pub fn bin_of(&self, t: Time) -> Option<u32> {
        if t < self.start || t > self.end {
            return None;
        }
        let span = u128::from(self.end - self.start).max(1);
        let mut k = ((u128::from(t - self.start) * u128::from(self.n)) / span) as u32;
        k = k.min(self.n - 1);
        // Rounding down the bounds can put `t` one bin off the estimate.
        while k > 0 && self.bound(k) > t {
            k -= 1;
        }
        while k + 1 < self.n && self.bound(k + 1) <= t {
            k += 1;
        }
        Some(k)
    }

    /// Calls `f(bin, part)` with each bin `[s, e)` overlaps and the length inside it.
    pub fn split(&self, s: Time, e: Time, mut f: impl FnMut(u32, Time)) {
        let (s, e) = (s.max(self.start), e.min(self.end));
        if e <= s {
            return;
        }
        let Some(mut k) = self.bin_of(s) else { return };
        while k < self.n {
            let (lo, hi) = (self.bound(k), self.bound(k + 1));
            if lo >= e {
                break;
            }
            let part = e.min(hi) - s.max(lo);
            if part > 0 {
                f(k, part);
            }
            k += 1;
        }
    }
}

/// Per bin and node (routine, MPI call or the process), the exclusive time summed over the
/// selected ranks.
#[derive(Debug, Clone)]
pub struct TimeProfile {
    /// The bins.
    pub bins: Bins,
    /// The nodes the rows name (node ids).
    pub paths: CallPaths,
    /// Per node id: its time per bin (ns).
    pub time: Vec<Vec<Time>>,
}

/// The time profile of the scope in `n` bins over its extent (the window when given, else
/// the selected ranks' first event to last); `None` when the scope holds no event.
pub fn time_profile(trace: &Trace, scope: &Scope, n: u32) -> Result<Option<TimeProfile>> {
    let mut walk = Walk::new(trace, scope)?;
    let Some(bins) = extent(&walk, scope, n) else {
        return Ok(None);
    };
    // The walk interns paths as it goes: time is kept per path, merged per node after.
    let mut v = PathBins {
        bins,
        by_path: Vec::new(),
    };
    walk.run(&mut v)?;
    let paths = walk.paths;
    let mut time: Vec<Vec<Time>> = vec![Vec::new(); paths.node_count()];
    for (path, row) in v.by_path.into_iter().enumerate() {
        if row.is_empty() {
            continue;
        }
        let node = &mut time[paths.node_of(path as u32) as usize];
        if node.is_empty() {
            node.resize(n as usize, 0);
        }
        for (k, t) in row.into_iter().enumerate() {
            node[k] += t;
        }
    }
    Ok(Some(TimeProfile { bins, paths, time }))
}

/// Per call path, time per bin (paths are few: memory paths × bins).
struct PathBins {
    bins: Bins,
    by_path: Vec<Vec<Time>>,
}

impl Visitor for PathBins {
    fn exclusive(&mut self, _: Rank, path: u32, start: Time, end: Time) {
        let path = path as usize;
        if self.by_path.len() <= path {
            self.by_path.resize(path + 1, Vec::new());
        }
        let row = &mut self.by_path[path];
        if row.is_empty() {
            row.resize(self.bins.n as usize, 0);
        }
        self.bins
            .split(start, end, |k, part| row[k as usize] += part);
    }

    fn closed(&mut self, _: Rank, _: u32, _: super::profile::CallTimes) {}
}

fn extent(walk: &Walk<'_>, scope: &Scope, n: u32) -> Option<Bins> {
    let (start, end) = match scope.window {
        Some(w) => w,
        None => walk.extent()?,
    };
    (n > 0 && start <= end).then_some(Bins { start, end, n })
}

/// Messages sent per bin and their bytes.
#[derive(Debug, Clone)]
pub struct CommOverTime {
    /// The bins.
    pub bins: Bins,
    /// Per bin: messages sent in it (by the send's start).
    pub messages: Vec<u64>,
    /// Per bin: their bytes.
    pub bytes: Vec<u64>,
}

/// The messages the scope's ranks sent, per bin of its extent (as [`time_profile`]'s), by
/// the time their send started; `None` when the scope holds no event.
pub fn comm_over_time(trace: &Trace, scope: &Scope, n: u32) -> Result<Option<CommOverTime>> {
    let walk = Walk::new(trace, scope)?;
    let Some(bins) = extent(&walk, scope, n) else {
        return Ok(None);
    };
    let all = trace.header().processes.len();
    let mut selected = vec![scope.ranks.is_none(); all];
    for &r in scope.ranks.iter().flatten() {
        if let Some(s) = selected.get_mut(r as usize) {
            *s = true;
        }
    }
    let mut out = CommOverTime {
        bins,
        messages: vec![0; n as usize],
        bytes: vec![0; n as usize],
    };
    let wanted = [
        MessageField::Sender,
        MessageField::SendTime,
        MessageField::Bytes,
    ];
    for chunk in 0..trace.message_chunk_count() {
        let m = trace.message_columns(chunk, &wanted)?;
        for row in 0..m.rows() {
            if !selected
                .get(m.sender(row) as usize)
                .copied()
                .unwrap_or(false)
            {
                continue;
            }
            if let Some(k) = bins.bin_of(m.send_time(row)) {
                out.messages[k as usize] += 1;
                out.bytes[k as usize] += m.bytes(row);
            }
        }
    }
    Ok(Some(out))
}
