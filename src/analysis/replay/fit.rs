//! `SELECT NETWORK MODEL`: the network's latency, overhead and bandwidth as the trace's own
//! message times show them, by least squares.
//!
//! Under the model (see [`super::network`]) a message of `m` bytes whose receiver was already
//! waiting and whose sender's network was free takes `L + 2o + m·G` from the send's start to
//! the end of the call that completed its receive (`MPI_Recv`, or the Wait of an `MPI_Irecv`);
//! any other message takes longer. A collective made of equal rounds (Barrier, Bcast,
//! Reduce, Allreduce, Alltoall, …) takes that time per round of `m` bytes after its last
//! member entered (a pairwise exchange's last member to leave: its members leave at
//! different times). So, per size, the quickest message or round is on one line: a
//! least-squares line through the quickest of each size gives `G` (its slope) and `L + 2o`
//! (its intercept). The overhead `o` is the median duration of the non-blocking sends and
//! receives (which take exactly `o`), or else the least time a blocking `MPI_Send` took
//! beyond its message's `m·G`, or else (a trace of collectives only) the median `o` of the
//! Alltoalls whose members entered far enough apart to show it
//! ([`network::overhead_of_exchange`]); `L` is what is left.

use serde::{Deserialize, Serialize};

use super::super::op_times::OpTimes;
use super::matching::CommRanks;
use super::network::{self, NetworkModel};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{CollectiveInstance, OpKind, Time};
use crate::store::{MessageField, OperationColumns, OperationField};
use crate::Trace;

/// Durations of non-blocking calls kept to take their median (a sample: bounded memory).
const OVERHEAD_SAMPLE: usize = 1 << 20;

/// The network a trace's messages show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkFit {
    /// The fitted latency, overhead and bandwidth (the other parameters at their defaults);
    /// `None` when the trace has too few message sizes to fit a line.
    pub model: Option<NetworkModel>,
    /// The fitted `G`, in ns per byte.
    pub ns_per_byte: f64,
    /// The fitted `L + 2o`.
    pub intercept: f64,
    /// Messages looked at.
    pub messages: u64,
    /// Distinct message sizes (points of the fit).
    pub sizes: u64,
    /// Root mean square of the points' relative distance from the line.
    pub error: f64,
    /// Whether the overhead could be told apart from the latency (a trace whose only calls
    /// are collectives entered together shows only `L + 2o`, reported as the latency with
    /// `o` = 0).
    pub overhead_known: bool,
}

/// Fits the network model to `trace`'s messages (see the module documentation).
pub fn fit_network(trace: &Trace) -> Result<NetworkFit> {
    crate::store::scan::progress_stage("network fit");
    // One scan of the operations: their times, and the calls' durations for the overhead.
    let (times, per_chunk) = OpTimes::read_with(
        trace,
        None,
        &[OperationField::SendBytes],
        CallTimes::of_chunk,
    )?;
    let calls = CallTimes::gather(per_chunk);
    // The call that completes each non-blocking receive.
    let mut completion = FxHashMap::default();
    for link in trace.request_links()? {
        completion.insert(link.request_op, link.completion_op);
    }
    // Per size: the quickest message's time from its send's start to its receive's end.
    let mut quickest: FxHashMap<u64, Time> = FxHashMap::default();
    let mut messages = 0u64;
    for chunk in 0..trace.message_chunk_count() {
        let m = trace.message_columns(
            chunk,
            &[
                MessageField::Bytes,
                MessageField::SendTime,
                MessageField::RecvOp,
            ],
        )?;
        for row in 0..m.rows() {
            let receive = m.recv_op(row);
            let Some(op) = times.get(receive) else {
                continue;
            };
            let end = match op.kind {
                Some(OpKind::Irecv) => match completion.get(&receive) {
                    Some(&wait) => match times.get(wait) {
                        Some(w) => w.end,
                        None => continue,
                    },
                    None => continue,
                },
                _ => op.end,
            };
            let Some(took) = end.checked_sub(m.send_time(row)) else {
                continue;
            };
            messages += 1;
            let q = quickest.entry(m.bytes(row)).or_insert(took);
            *q = (*q).min(took);
        }
    }
    // Collectives of equal rounds: the quickest member's time after the last one entered (a
    // pairwise exchange's last member's), per round, at the average member's bytes.
    let mut round_times: FxHashMap<u64, Time> = FxHashMap::default();
    let mut comm_ranks = CommRanks::default();
    let mut exchange_overheads: Vec<Time> = Vec::new();
    for c in trace.collective_instances()? {
        let members = c.ops.len() as u32;
        let p = u64::from(members.max(1));
        let Some((rounds, bytes)) =
            network::rounds(c.kind, members, c.send_bytes / p, c.recv_bytes / p)
        else {
            continue;
        };
        if rounds == 0 || c.kind.blocking_collective() != Some(c.kind) {
            continue;
        }
        let pairwise = network::is_pairwise_exchange(c.kind);
        let (mut last_start, mut first_end, mut last_end) = (0, Time::MAX, 0);
        for &op in &c.ops {
            if let Some(t) = times.get(op) {
                last_start = last_start.max(t.start);
                first_end = first_end.min(t.end);
                last_end = last_end.max(t.end);
            }
        }
        // The other algorithms' members leave together; a pairwise exchange's last member
        // leaves after all its rounds.
        let Some(took) = (if pairwise { last_end } else { first_end }).checked_sub(last_start)
        else {
            continue;
        };
        if pairwise {
            let overhead = exchange_overhead(trace, &c, &times, &mut comm_ranks)?;
            exchange_overheads.extend(overhead);
        }
        let per_round = took / rounds;
        let q = round_times.entry(bytes).or_insert(per_round);
        *q = (*q).min(per_round);
    }
    for (bytes, took) in round_times {
        let q = quickest.entry(bytes).or_insert(took);
        *q = (*q).min(took);
    }
    let mut points: Vec<(f64, f64)> = quickest
        .into_iter()
        .map(|(bytes, took)| (bytes as f64, took as f64))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (intercept, slope) = least_squares(&points).unwrap_or((f64::NAN, f64::NAN));
    let error = if points.is_empty() || slope.is_nan() {
        f64::NAN
    } else {
        let sum: f64 = points
            .iter()
            .map(|&(x, y)| ((intercept + slope * x - y) / y.max(1.0)).powi(2))
            .sum();
        (sum / points.len() as f64).sqrt()
    };
    let overhead = calls
        .overhead(slope)
        .or_else(|| median(&mut exchange_overheads));
    let model = (slope > 0.0 && intercept.is_finite()).then(|| {
        let o = overhead.unwrap_or(0);
        NetworkModel {
            latency: (intercept - 2.0 * o as f64).max(0.0).round() as Time,
            overhead: o,
            bandwidth: (1e9 / slope).round() as u64,
            ..NetworkModel::default()
        }
    });
    Ok(NetworkFit {
        overhead_known: overhead.is_some(),
        model,
        ns_per_byte: slope,
        intercept,
        messages,
        sizes: points.len() as u64,
        error,
    })
}

/// The overhead a pairwise exchange's members show ([`network::overhead_of_exchange`]), their
/// entries and exits placed by communicator rank; `None` when some member is missing or
/// misplaced, or they entered too close together.
fn exchange_overhead(
    trace: &Trace,
    c: &CollectiveInstance,
    times: &OpTimes<'_>,
    comm_ranks: &mut CommRanks,
) -> Result<Option<Time>> {
    let mut by_rank = vec![None; c.ops.len()];
    for &op in &c.ops {
        let Some(t) = times.get(op) else {
            return Ok(None);
        };
        let at = comm_ranks.rank_in(trace.header(), c.comm, t.rank);
        match at.and_then(|at| by_rank.get_mut(at as usize)) {
            Some(slot) => *slot = Some((t.start, t.end)),
            None => return Ok(None),
        }
    }
    let Some(members) = by_rank.into_iter().collect::<Option<Vec<_>>>() else {
        return Ok(None);
    };
    let (entries, exits): (Vec<Time>, Vec<Time>) = members.into_iter().unzip();
    Ok(network::overhead_of_exchange(&entries, &exits))
}

/// What one pass over the operations tells of the overhead: the durations of the non-blocking
/// sends and receives (which take exactly `o`; the first [`OVERHEAD_SAMPLE`]), and, per size,
/// the quickest `MPI_Send` (`o + m·G` when its network was free).
struct CallTimes {
    nonblocking: Vec<Time>,
    quickest_send: FxHashMap<u64, Time>,
}

impl CallTimes {
    /// What one operation chunk's Start, End, Kind and SendBytes columns tell (the first
    /// [`OVERHEAD_SAMPLE`] non-blocking calls of the chunk at most).
    fn of_chunk(ops: &OperationColumns) -> CallTimes {
        let mut calls = CallTimes {
            nonblocking: Vec::new(),
            quickest_send: FxHashMap::default(),
        };
        for row in 0..ops.rows() {
            let took = ops.end(row).saturating_sub(ops.start(row));
            match ops.kind(row) {
                Some(OpKind::Isend | OpKind::Irecv)
                    if calls.nonblocking.len() < OVERHEAD_SAMPLE =>
                {
                    calls.nonblocking.push(took)
                }
                Some(OpKind::Send) => {
                    let q = calls
                        .quickest_send
                        .entry(ops.send_bytes(row))
                        .or_insert(took);
                    *q = (*q).min(took);
                }
                _ => {}
            }
        }
        calls
    }

    /// The chunks' findings, in chunk order, as one pass over the chunks in order would
    /// gather them: chunks after the sample is full add nothing (the sends only matter in a
    /// trace without non-blocking calls).
    fn gather(chunks: Vec<CallTimes>) -> CallTimes {
        let mut calls = CallTimes {
            nonblocking: Vec::new(),
            quickest_send: FxHashMap::default(),
        };
        for chunk in chunks {
            if calls.nonblocking.len() >= OVERHEAD_SAMPLE {
                break;
            }
            calls.nonblocking.extend(chunk.nonblocking);
            for (bytes, took) in chunk.quickest_send {
                let q = calls.quickest_send.entry(bytes).or_insert(took);
                *q = (*q).min(took);
            }
        }
        calls
    }

    /// The overhead: the median non-blocking call, or else the least time an `MPI_Send` took
    /// beyond its message's `m·G` (`G` = `ns_per_byte`, when a line was fitted).
    fn overhead(mut self, ns_per_byte: f64) -> Option<Time> {
        if let Some(o) = median(&mut self.nonblocking) {
            return Some(o);
        }
        if ns_per_byte.is_nan() || ns_per_byte <= 0.0 {
            return None;
        }
        self.quickest_send
            .iter()
            .map(|(&bytes, &took)| took as f64 - ns_per_byte * bytes as f64)
            .reduce(f64::min)
            .map(|o| o.max(0.0).round() as Time)
    }
}

/// The middle value of `values` (`None` when empty); reorders them.
fn median(values: &mut [Time]) -> Option<Time> {
    let middle = values.len() / 2;
    (!values.is_empty()).then(|| *values.select_nth_unstable(middle).1)
}

/// The line `y = a + b·x` closest to `points` in least squares, as `(a, b)`; `None` with
/// fewer than two distinct `x`.
fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    (points.len() >= 2 && sxx > 0.0).then(|| {
        let b = sxy / sxx;
        (mean_y - b * mean_x, b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_finds_the_line_through_exact_points() {
        let points = [(0.0, 2_000.0), (100.0, 2_025.0), (1_000.0, 2_250.0)];
        let (a, b) = least_squares(&points).unwrap();
        assert!((a - 2_000.0).abs() < 1e-9 && (b - 0.25).abs() < 1e-12);
        assert_eq!(least_squares(&[(5.0, 1.0), (5.0, 2.0)]), None);
    }
}
