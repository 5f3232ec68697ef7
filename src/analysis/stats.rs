//! Statistics of the MTF paper: fan-in and fan-out per process, the per-process operation
//! table (the paper's Table 6), the communication matrix, message-size histograms and the time
//! each process spends inside MPI. Fan-in, fan-out and the whole-trace matrix come from the
//! counts kept at import; the others read the trace chunk by chunk, so memory does not grow
//! with the trace.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Result;
use crate::model::{Message, OpKind, Operation, Rank};
use crate::results::{ResultSet, Value};
use crate::store::RankTraffic;
use crate::Trace;

/// A process's traffic with its number of distinct partners: the counts kept at import, and
/// its bytes exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessTraffic {
    /// The process.
    pub rank: Rank,
    /// Message counts and bytes as the import kept them (a byte sum past 2^64 - 1 stays at
    /// 2^64 - 1 there, reported as an anomaly; [`ProcessTraffic::bytes`] has it exactly).
    pub counts: RankTraffic,
    /// The bytes exactly, in 128 bits.
    pub bytes: TrafficBytes,
    /// Distinct processes it sent messages to.
    pub receivers: u32,
    /// Distinct processes it received messages from.
    pub senders: u32,
}

/// A process's bytes, in 128 bits: message bytes sent and received, collective sizes sent and
/// received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficBytes {
    /// Bytes of the messages it sent.
    pub p2p_sent: u128,
    /// Bytes of the messages it received.
    pub p2p_recv: u128,
    /// Send sizes of its collective calls.
    pub coll_send: u128,
    /// Receive sizes of its collective calls.
    pub coll_recv: u128,
}

impl TrafficBytes {
    /// Fan-out: messages plus collective send sizes.
    pub fn fan_out(&self) -> u128 {
        self.p2p_sent + self.coll_send
    }

    /// Fan-in: messages plus collective receive sizes.
    pub fn fan_in(&self) -> u128 {
        self.p2p_recv + self.coll_recv
    }
}

/// Fan-in and fan-out of every process, by rank, from the counts kept at import; when one of
/// their byte sums went past 2^64 - 1, the bytes are summed anew from the messages and
/// collective operations, in 128 bits, so that the answer stays exact.
pub fn process_traffic(trace: &Trace) -> Result<Vec<ProcessTraffic>> {
    let saturated = trace.traffic().iter().any(|t| {
        [
            t.p2p_sent_bytes,
            t.p2p_recv_bytes,
            t.coll_send_bytes,
            t.coll_recv_bytes,
        ]
        .contains(&u64::MAX)
    });
    let mut traffic: Vec<ProcessTraffic> = trace
        .traffic()
        .iter()
        .enumerate()
        .map(|(rank, counts)| ProcessTraffic {
            rank: rank as Rank,
            counts: counts.clone(),
            bytes: TrafficBytes {
                p2p_sent: u128::from(counts.p2p_sent_bytes),
                p2p_recv: u128::from(counts.p2p_recv_bytes),
                coll_send: u128::from(counts.coll_send_bytes),
                coll_recv: u128::from(counts.coll_recv_bytes),
            },
            ..ProcessTraffic::default()
        })
        .collect();
    if saturated {
        for t in &mut traffic {
            t.bytes = TrafficBytes::default();
        }
        for m in trace.messages()? {
            if let Some(t) = traffic.get_mut(m.sender as usize) {
                t.bytes.p2p_sent += u128::from(m.bytes);
            }
            if let Some(t) = traffic.get_mut(m.receiver as usize) {
                t.bytes.p2p_recv += u128::from(m.bytes);
            }
        }
        for info in trace.op_chunks() {
            for (_, op) in trace.chunk_operations(info)? {
                if let Some(t) = traffic
                    .get_mut(op.rank as usize)
                    .filter(|_| op.kind.is_collective())
                {
                    t.bytes.coll_send += u128::from(op.send_bytes);
                    t.bytes.coll_recv += u128::from(op.recv_bytes);
                }
            }
        }
    }
    for p in trace.pairs() {
        if let Some(t) = traffic.get_mut(p.sender as usize) {
            t.receivers += 1;
        }
        if let Some(t) = traffic.get_mut(p.receiver as usize) {
            t.senders += 1;
        }
    }
    Ok(traffic)
}

/// The communication matrix of the whole trace, from the pair counts kept at import (or, when
/// a pair's bytes went past 2^64 - 1 there, from the messages, exactly).
pub fn trace_matrix(trace: &Trace, ranks: &[Rank], of: MatrixOf) -> Result<ResultSet> {
    Ok(trace_matrix_cells(trace, ranks, of)?.to_result_set())
}

/// [`trace_matrix`] as its cells with traffic: what a picture of 16,384 ranks draws without
/// holding 2^28 zeros.
pub fn trace_matrix_cells(trace: &Trace, ranks: &[Rank], of: MatrixOf) -> Result<MatrixCells> {
    if of == MatrixOf::Bytes && trace.pairs().iter().any(|p| p.bytes == u64::MAX) {
        return Ok(communication_matrix_cells(&trace.messages()?, ranks, of));
    }
    let cells = trace.pairs().iter().map(|p| {
        let value = match of {
            MatrixOf::Bytes => p.bytes,
            MatrixOf::Count => p.messages,
        };
        (p.sender, p.receiver, value)
    });
    Ok(MatrixCells::sum(ranks, of, cells))
}

/// Which way a fan table looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Bytes received (fan-in).
    In,
    /// Bytes sent (fan-out).
    Out,
}

/// The fan-in or fan-out table of `ranks`: bytes, how they split between messages and
/// collectives, message counts and distinct partners.
pub fn fan_table(traffic: &[ProcessTraffic], ranks: &[Rank], direction: Direction) -> ResultSet {
    let mut r = match direction {
        Direction::In => ResultSet::new([
            "rank",
            "fan_in_bytes",
            "message_bytes",
            "collective_bytes",
            "messages",
            "senders",
        ]),
        Direction::Out => ResultSet::new([
            "rank",
            "fan_out_bytes",
            "message_bytes",
            "collective_bytes",
            "messages",
            "receivers",
        ]),
    };
    for &rank in ranks {
        let Some(t) = traffic.get(rank as usize) else {
            continue;
        };
        let row = match direction {
            Direction::In => vec![
                rank.into(),
                t.bytes.fan_in().into(),
                t.bytes.p2p_recv.into(),
                t.bytes.coll_recv.into(),
                t.counts.messages_received.into(),
                t.senders.into(),
            ],
            Direction::Out => vec![
                rank.into(),
                t.bytes.fan_out().into(),
                t.bytes.p2p_sent.into(),
                t.bytes.coll_send.into(),
                t.counts.messages_sent.into(),
                t.receivers.into(),
            ],
        };
        r.push(row);
    }
    r
}

/// The per-process statistics table (the MTF paper's Table 6): one row per process with the
/// count of each operation kind present in the trace, bytes sent and bytes received, then a
/// totals row.
pub fn statistics_table(trace: &Trace, ranks: &[Rank]) -> Result<ResultSet> {
    let traffic = process_traffic(trace)?;
    let mut counts: BTreeMap<Rank, BTreeMap<OpKind, u64>> = BTreeMap::new();
    let wanted: BTreeSet<Rank> = ranks.iter().copied().collect();
    for info in trace
        .op_chunks()
        .iter()
        .filter(|c| wanted.contains(&c.rank))
    {
        let per = counts.entry(info.rank).or_default();
        for (_, op) in trace.chunk_operations(info)? {
            *per.entry(op.kind).or_default() += 1;
        }
    }
    let bytes = |rank: Rank| {
        traffic
            .get(rank as usize)
            .map(|t| (t.bytes.fan_out(), t.bytes.fan_in()))
    };
    Ok(statistics_rows(trace, ranks, &counts, bytes))
}

/// The statistics table over some operations only (those of a phase, a pattern or a time
/// window): counts per kind, and bytes sent and received as the operations' send and
/// receive sizes (messages and collective data alike).
pub fn statistics_table_of(trace: &Trace, ranks: &[Rank], ops: &[Operation]) -> ResultSet {
    let mut counts: BTreeMap<Rank, BTreeMap<OpKind, u64>> = BTreeMap::new();
    let mut sizes: BTreeMap<Rank, (u128, u128)> = BTreeMap::new();
    for op in ops {
        *counts
            .entry(op.rank)
            .or_default()
            .entry(op.kind)
            .or_default() += 1;
        let s = sizes.entry(op.rank).or_default();
        s.0 += u128::from(op.send_bytes);
        s.1 += u128::from(op.recv_bytes);
    }
    let bytes = |rank: Rank| Some(sizes.get(&rank).copied().unwrap_or_default());
    statistics_rows(trace, ranks, &counts, bytes)
}

fn statistics_rows(
    trace: &Trace,
    ranks: &[Rank],
    counts: &BTreeMap<Rank, BTreeMap<OpKind, u64>>,
    bytes: impl Fn(Rank) -> Option<(u128, u128)>,
) -> ResultSet {
    let kinds: Vec<OpKind> = trace.summary().by_kind.iter().map(|(k, _)| *k).collect();
    let mut columns = vec!["rank".to_string()];
    columns.extend(kinds.iter().map(|k| trace.kind_name(*k)));
    columns.extend(["bytes_sent".to_string(), "bytes_received".to_string()]);
    let mut r = ResultSet::new(columns);
    // Sums in 128 bits: byte counts of 2^64 - 1 each add up without wrapping.
    let mut totals = vec![0u128; kinds.len() + 2];
    for &rank in ranks {
        let Some((sent, received)) = bytes(rank) else {
            continue;
        };
        let per = counts.get(&rank);
        let mut row: Vec<Value> = vec![rank.into()];
        for (i, k) in kinds.iter().enumerate() {
            let n = per.and_then(|p| p.get(k)).copied().unwrap_or(0);
            totals[i] += u128::from(n);
            row.push(n.into());
        }
        totals[kinds.len()] += sent;
        totals[kinds.len() + 1] += received;
        row.push(sent.into());
        row.push(received.into());
        r.push(row);
    }
    let mut total_row: Vec<Value> = vec!["total".into()];
    total_row.extend(totals.into_iter().map(Value::from));
    r.push_total(total_row);
    r
}

/// What a communication matrix counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixOf {
    /// Bytes per sender → receiver.
    Bytes,
    /// Messages per sender → receiver.
    Count,
}

/// The communication matrix of `messages` over `ranks`: one row per sender, one column per
/// receiver.
pub fn communication_matrix<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    ranks: &[Rank],
    of: MatrixOf,
) -> ResultSet {
    communication_matrix_cells(messages, ranks, of).to_result_set()
}

/// [`communication_matrix`] as its cells with traffic.
pub fn communication_matrix_cells<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    ranks: &[Rank],
    of: MatrixOf,
) -> MatrixCells {
    let cells = messages.into_iter().map(|m| {
        let value = match of {
            MatrixOf::Bytes => m.bytes,
            MatrixOf::Count => 1,
        };
        (m.sender, m.receiver, value)
    });
    MatrixCells::sum(ranks, of, cells)
}

/// A communication matrix kept sparse: the ranks on its axes and the cells with traffic.
///
/// ```
/// use mtfdb::analysis::stats::{MatrixCells, MatrixOf};
/// let m = MatrixCells::sum(&[0, 1, 2], MatrixOf::Bytes, [(0, 1, 8), (0, 1, 8), (2, 0, 4), (5, 0, 1)].into_iter());
/// assert_eq!(m.cells, vec![(0, 1, 16), (2, 0, 4)]); // rank 5 is not on the axes
/// assert_eq!(m.to_result_set().len(), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixCells {
    /// The ranks on both axes, in order.
    pub ranks: Vec<Rank>,
    /// What the cells count.
    pub of: MatrixOf,
    /// `(sender, receiver, value)` for every pair with traffic, sorted by sender, then receiver.
    pub cells: Vec<(Rank, Rank, u128)>,
}

impl MatrixCells {
    /// Sums `(sender, receiver, value)` entries into the cells of the matrix over `ranks`;
    /// pairs outside `ranks` are left out.
    pub fn sum(
        ranks: &[Rank],
        of: MatrixOf,
        entries: impl Iterator<Item = (Rank, Rank, u64)>,
    ) -> MatrixCells {
        let mut on_axes = ranks.to_vec();
        on_axes.sort_unstable();
        let on = |r: &Rank| on_axes.binary_search(r).is_ok();
        let mut sums: crate::hash::FxHashMap<(Rank, Rank), u128> = Default::default();
        for (sender, receiver, value) in entries {
            if on(&sender) && on(&receiver) {
                *sums.entry((sender, receiver)).or_default() += u128::from(value);
            }
        }
        let mut cells: Vec<(Rank, Rank, u128)> = sums
            .into_iter()
            .filter(|&(_, v)| v > 0)
            .map(|((s, r), v)| (s, r, v))
            .collect();
        cells.sort_unstable();
        MatrixCells {
            ranks: ranks.to_vec(),
            of,
            cells,
        }
    }

    /// The matrix as a table: a row per sender, a column per receiver.
    pub fn to_result_set(&self) -> ResultSet {
        let index: BTreeMap<Rank, usize> = self
            .ranks
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, i))
            .collect();
        let mut dense = vec![vec![0u128; self.ranks.len()]; self.ranks.len()];
        for &(s, d, v) in &self.cells {
            dense[index[&s]][index[&d]] = v;
        }
        let mut columns = vec!["sender".to_string()];
        columns.extend(self.ranks.iter().map(|r| r.to_string()));
        let mut r = ResultSet::new(columns);
        for (i, &rank) in self.ranks.iter().enumerate() {
            let mut row: Vec<Value> = vec![rank.into()];
            row.extend(dense[i].iter().map(|&v| Value::from(v)));
            r.push(row);
        }
        r
    }
}

/// How a histogram cuts its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bins {
    /// `n` bins of equal width between the smallest and largest value.
    Linear(u32),
    /// Powers of two: [0,1), [1,2), [2,4), [4,8), …
    Log2,
}

/// A histogram of `sizes`: one row per bin with its bounds (`low` inclusive, `high` exclusive,
/// up to 2^64) and count. Empty bins are kept, so the shape reads true.
pub fn size_histogram(sizes: &[u64], bins: Bins) -> ResultSet {
    let mut r = ResultSet::new(["low", "high", "count"]);
    let (Some(&min), Some(&max)) = (sizes.iter().min(), sizes.iter().max()) else {
        return r;
    };
    match bins {
        Bins::Log2 => {
            let bucket = |v: u64| {
                if v == 0 {
                    0
                } else {
                    64 - v.leading_zeros() as usize
                }
            };
            let mut counts = vec![0u64; bucket(max) + 1];
            for &v in sizes {
                counts[bucket(v)] += 1;
            }
            for (b, &n) in counts.iter().enumerate().skip(bucket(min)) {
                let (low, high) = if b == 0 {
                    (0, 1)
                } else {
                    (1u128 << (b - 1), 1u128 << b)
                };
                r.push(vec![low.into(), high.into(), n.into()]);
            }
        }
        Bins::Linear(n) => {
            let n = n.max(1) as usize;
            // In 128 bits: the width of 0..2^64-1 and the last bin's end pass 64 bits.
            let width = u128::from(max - min) / n as u128 + 1;
            let mut counts = vec![0u64; n];
            for &v in sizes {
                let bin = u128::from(v - min) / width;
                counts[usize::try_from(bin).unwrap_or(usize::MAX).min(n - 1)] += 1;
            }
            for (b, &c) in counts.iter().enumerate() {
                let low = u128::from(min) + b as u128 * width;
                r.push(vec![low.into(), (low + width).into(), c.into()]);
            }
        }
    }
    r
}

/// Time each process spent inside MPI calls: the sum of its operations' durations, their
/// number, and the share of the process's time span.
pub fn mpi_time(trace: &Trace, ranks: &[Rank]) -> Result<ResultSet> {
    let mut r = ResultSet::new(["rank", "mpi_time_ns", "calls", "span_ns", "mpi_share"]);
    for &rank in ranks {
        let (mut busy, mut calls) = (0u128, 0u64);
        let (mut first, mut last) = (u64::MAX, 0u64);
        for info in trace.op_chunks_of(rank) {
            first = first.min(info.first_start);
            last = last.max(info.max_end);
            for (_, op) in trace.chunk_operations(info)? {
                busy += u128::from(op.end.saturating_sub(op.start));
                calls += 1;
            }
        }
        let span = last.saturating_sub(first.min(last));
        let share = if span > 0 {
            busy as f64 / span as f64
        } else {
            0.0
        };
        r.push(vec![
            rank.into(),
            busy.into(),
            calls.into(),
            span.into(),
            share.into(),
        ]);
    }
    Ok(r)
}
