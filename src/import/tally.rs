//! What the import counts beside matching, and the anomalies it finds doing so: bytes and
//! messages per process and per (sender, receiver) pair, with a sum that passes 2^64 - 1
//! kept saturated and reported once; an MPI call recorded without its records. Export runs
//! the same over the operations it writes, to tell the anomalies a trace's source reported
//! from those any import finds again.

use std::collections::HashSet;

use crate::by_rank::ByRank;
use crate::model::{flags, Anomaly, Message, OpId, OpKind, Operation, Rank};
use crate::store::{PairTraffic, RankTraffic};

/// Adds `x` to a byte count; on overflow the count stays at `u64::MAX` and `true` says so
/// (no sum wraps silently).
fn add_bytes(total: &mut u64, x: u64) -> bool {
    match total.checked_add(x) {
        Some(v) => {
            *total = v;
            false
        }
        None => {
            *total = u64::MAX;
            true
        }
    }
}

/// The counts, and the sums already reported as overflowing.
#[derive(Default)]
pub(crate) struct Tally {
    /// Per process traffic, by rank.
    pub(crate) traffic: Vec<RankTraffic>,
    /// Messages and bytes per (sender, receiver), by sender.
    pub(crate) pairs: ByRank<Rank, (u64, u64)>,
    overflowed: HashSet<(Option<Rank>, String)>,
}

impl Tally {
    /// A tally of `processes` processes.
    pub(crate) fn new(processes: usize) -> Tally {
        Tally {
            traffic: vec![RankTraffic::default(); processes],
            ..Tally::default()
        }
    }

    /// Reports, once per sum, that a byte count passed 2^64 - 1 (it stays saturated there).
    fn overflow(&mut self, rank: Option<Rank>, what: &str, out: &mut Vec<Anomaly>) {
        if self.overflowed.insert((rank, what.to_string())) {
            out.push(Anomaly::ValueOverflow {
                rank,
                what: format!(
                    "the sum of {what} passed 2^64 - 1 bytes; it is kept at 18446744073709551615 (saturated)"
                ),
            });
        }
    }

    /// Counts operation `id`; the anomalies it gives rise to go to `out`.
    pub(crate) fn operation(&mut self, id: OpId, op: &Operation, out: &mut Vec<Anomaly>) {
        if op.kind.is_collective() {
            if let Some(t) = self.traffic.get_mut(op.rank as usize) {
                let over = add_bytes(&mut t.coll_send_bytes, op.send_bytes)
                    | add_bytes(&mut t.coll_recv_bytes, op.recv_bytes);
                if over {
                    self.overflow(Some(op.rank), "collective bytes of the rank", out);
                }
            }
        }
        if op.flags & flags::WITHOUT_RECORDS != 0 {
            if let OpKind::Other(name) = op.kind {
                out.push(Anomaly::CallWithoutRecords {
                    op: id,
                    rank: op.rank,
                    name,
                });
            }
        }
    }

    /// Counts a matched message; the anomalies it gives rise to go to `out`.
    pub(crate) fn message(&mut self, m: &Message, out: &mut Vec<Anomaly>) {
        if let Some(t) = self.traffic.get_mut(m.sender as usize) {
            t.messages_sent += 1;
            if add_bytes(&mut t.p2p_sent_bytes, m.bytes) {
                self.overflow(Some(m.sender), "bytes sent by the rank", out);
            }
        }
        if let Some(t) = self.traffic.get_mut(m.receiver as usize) {
            t.messages_received += 1;
            if add_bytes(&mut t.p2p_recv_bytes, m.bytes) {
                self.overflow(Some(m.receiver), "bytes received by the rank", out);
            }
        }
        let pair = self.pairs.get_or_default(m.sender, m.receiver);
        pair.0 += 1;
        if add_bytes(&mut pair.1, m.bytes) {
            let what = format!("bytes from rank {} to rank {}", m.sender, m.receiver);
            self.overflow(None, &what, out);
        }
    }

    /// The pairs, sorted by sender and receiver, and the bytes of all messages; the
    /// anomalies the total gives rise to go to `out`.
    pub(crate) fn finish(&mut self, out: &mut Vec<Anomaly>) -> (Vec<PairTraffic>, u64) {
        let mut pairs: Vec<PairTraffic> = self
            .pairs
            .drain()
            .into_iter()
            .map(|(sender, receiver, (messages, bytes))| PairTraffic {
                sender,
                receiver,
                messages,
                bytes,
            })
            .collect();
        pairs.sort_by_key(|p| (p.sender, p.receiver));
        let mut total = 0u64;
        let mut over = false;
        for p in &pairs {
            over |= add_bytes(&mut total, p.bytes);
        }
        if over {
            self.overflow(None, "all message bytes", out);
        }
        (pairs, total)
    }
}
