//! The network model a replay runs on: LogGP (Alexandrov et al., "LogGP: Incorporating Long
//! Messages into the LogP Model"), with an eager limit, and collectives as the algorithms MPI
//! libraries use. Every time is integer nanoseconds, and every formula is here, once, for
//! the replay and for the generator that writes traces following a model exactly.
//!
//! Point to point, for a message of `m` bytes (`T(m) = ceil(m / bandwidth)`):
//! - a send call starting at `t` takes its overhead `o`; an **eager** message (`m` at most
//!   the eager limit) is injected at `s = max(t + o, nic)`, where `nic` is when the sender's
//!   previous eager message left room (`g` after the previous injection, or its `T`, whichever
//!   is longer); a **rendezvous** message (above the limit) is injected at
//!   `s = max(t + o, post + L)`: once its receive was posted (`post`, the receive call's start)
//!   and the receiver's go-ahead crossed the network;
//! - a blocking send ends at `s + T(m)`; a non-blocking one (`MPI_Isend`) ends at `t + o` and
//!   its request completes at `s + T(m)`;
//! - the message arrives at `s + T(m) + L`;
//! - a blocking receive starting at `t` ends at `max(t, arrival) + o`; a non-blocking one
//!   ends at `t + o` and its request completes at the arrival;
//! - a Wait (any variant) starting at `t` ends at `max(t, its requests' completions) + o`;
//! - `MPI_Sendrecv` ends when both its halves would have.
//!
//! Collectives: every member leaves at the last member's entry plus the algorithm's time, with
//! `k = ceil(log2 p)` rounds for `p` members and one round costing `h(m) = L + 2o + T(m)`:
//! - Barrier (dissemination): `k · h(0)`;
//! - Bcast and Reduce (binomial tree), Allreduce (recursive doubling), Reduce_scatter, Scan:
//!   `k · h(m)`, `m` the largest buffer a member sends or receives;
//! - Allgather(v) (recursive doubling), Gather(v) and Scatter(v) (binomial tree):
//!   `k · h(0) + T((p - 1) · m)`, `m` the largest contribution of one member;
//! - Alltoall(v/w) (pairwise exchange): `(p - 1) · h(m)`, `m` the largest block a member sends
//!   to one other (its bytes sent over `p`).
//!
//! ```
//! use mtfdb::analysis::replay::network::NetworkModel;
//! let net = NetworkModel::default();
//! // 12,000 bytes at 12 GB/s take 1 us.
//! assert_eq!(net.transfer(12_000), 1_000);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{OpKind, Time};

/// LogGP's parameters, an eager limit and a CPU speed-up.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NetworkModel {
    /// `L`: one-way latency (ns).
    pub latency: Time,
    /// `o`: CPU overhead of sending or receiving one message (ns).
    pub overhead: Time,
    /// `g`: least time between two eager messages leaving one rank (ns).
    pub gap: Time,
    /// `1/G`: bytes per second one message moves at.
    pub bandwidth: u64,
    /// Messages of at most this many bytes are sent eagerly; longer ones wait for their
    /// receive (rendezvous).
    pub eager_limit: u64,
    /// How much faster the CPU is: computation between MPI calls is divided by it.
    pub cpu: f64,
}

impl Default for NetworkModel {
    /// 1.5 us latency, 0.4 us overhead, no gap, 12 GB/s, 64 KiB eager limit, the same CPU.
    fn default() -> NetworkModel {
        NetworkModel {
            latency: 1_500,
            overhead: 400,
            gap: 0,
            bandwidth: 12_000_000_000,
            eager_limit: 64 << 10,
            cpu: 1.0,
        }
    }
}

/// The CPU factor is never NaN (the parsers refuse it), so equality is total.
impl Eq for NetworkModel {}

impl fmt::Display for NetworkModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LATENCY {} ns, OVERHEAD {} ns, GAP {} ns, BANDWIDTH {}, EAGER LIMIT {} B, CPU {}",
            self.latency,
            self.overhead,
            self.gap,
            rate_text(self.bandwidth),
            self.eager_limit,
            self.cpu
        )
    }
}

/// A bandwidth in the largest unit that writes it whole: `12 GB/s`, `1500 B/s`.
///
/// ```
/// use mtfdb::analysis::replay::network::rate_text;
/// assert_eq!(rate_text(12_000_000_000), "12 GB/s");
/// assert_eq!(rate_text(4_200_000), "4200 KB/s");
/// assert_eq!(rate_text(1_500), "1500 B/s");
/// ```
pub fn rate_text(bytes_per_second: u64) -> String {
    let (scale, unit) = RATES
        .iter()
        .rev()
        .find(|(_, scale)| bytes_per_second.is_multiple_of(*scale))
        .map_or((1, "B/s"), |(unit, scale)| (*scale, *unit));
    format!("{} {unit}", bytes_per_second / scale)
}

impl NetworkModel {
    /// `T(m)`: the time `bytes` take on the wire, rounded up to a whole nanosecond.
    pub fn transfer(&self, bytes: u64) -> Time {
        let bandwidth = u128::from(self.bandwidth.max(1));
        let ns = (u128::from(bytes) * 1_000_000_000).div_ceil(bandwidth);
        Time::try_from(ns).unwrap_or(Time::MAX)
    }

    /// Whether a message of `bytes` is sent eagerly.
    pub fn eager(&self, bytes: u64) -> bool {
        bytes <= self.eager_limit
    }

    /// A computation of `measured` ns on a CPU [`NetworkModel::cpu`] times as fast.
    ///
    /// ```
    /// use mtfdb::analysis::replay::network::NetworkModel;
    /// let twice = NetworkModel { cpu: 2.0, ..NetworkModel::default() };
    /// assert_eq!(twice.burst(1_001), 501);
    /// assert_eq!(NetworkModel::default().burst(1_001), 1_001);
    /// ```
    pub fn burst(&self, measured: Time) -> Time {
        if self.cpu == 1.0 {
            measured
        } else {
            (measured as f64 / self.cpu).round() as Time
        }
    }

    /// One round of a tree or exchange: `L + 2o + T(bytes)`.
    fn round(&self, bytes: u64) -> Time {
        self.latency
            .saturating_add(self.overhead.saturating_mul(2))
            .saturating_add(self.transfer(bytes))
    }

    /// How long a blocking collective `kind` of `members` members takes after its last member
    /// entered, given the largest bytes one member sent and received (see the module
    /// documentation for each algorithm's formula).
    ///
    /// ```
    /// use mtfdb::analysis::replay::network::NetworkModel;
    /// use mtfdb::model::OpKind;
    /// let net = NetworkModel { latency: 1_000, overhead: 100, ..NetworkModel::default() };
    /// // 8 members: 3 rounds of L + 2o.
    /// assert_eq!(net.collective(OpKind::Barrier, 8, 0, 0), 3 * 1_200);
    /// // 12,000 bytes each round: 1 us more per round.
    /// assert_eq!(net.collective(OpKind::Allreduce, 8, 12_000, 12_000), 3 * 2_200);
    /// ```
    pub fn collective(&self, kind: OpKind, members: u32, max_send: u64, max_recv: u64) -> Time {
        use OpKind::*;
        if let Some((rounds, bytes)) = rounds(kind, members, max_send, max_recv) {
            return rounds.saturating_mul(self.round(bytes));
        }
        let p = u64::from(members.max(1));
        let tree = log2_rounds(members).saturating_mul(self.round(0));
        match kind.blocking_collective() {
            Some(Allgather | Allgatherv | Gather | Gatherv) => {
                tree.saturating_add(self.transfer((p - 1).saturating_mul(max_send)))
            }
            Some(Scatter | Scatterv) => {
                tree.saturating_add(self.transfer((p - 1).saturating_mul(max_recv)))
            }
            _ => 0,
        }
    }
}

/// `ceil(log2 p)`: the rounds of a tree or of recursive doubling over `p` members.
fn log2_rounds(members: u32) -> u64 {
    let p = u64::from(members.max(1));
    u64::from(u64::BITS - (p - 1).leading_zeros())
}

/// For the collectives made of equal rounds (`rounds · (L + 2o + T(bytes))`): the number of
/// rounds and the bytes each moves; `None` for the others (Gather, Scatter, Allgather and
/// their v forms, whose data grows along the tree) and for what is not a collective.
///
/// ```
/// use mtfdb::analysis::replay::network::rounds;
/// use mtfdb::model::OpKind;
/// assert_eq!(rounds(OpKind::Allreduce, 16, 8, 8), Some((4, 8)));
/// assert_eq!(rounds(OpKind::Alltoall, 4, 400, 400), Some((3, 100)));
/// assert_eq!(rounds(OpKind::Gather, 4, 8, 32), None);
/// ```
pub fn rounds(kind: OpKind, members: u32, max_send: u64, max_recv: u64) -> Option<(u64, u64)> {
    use OpKind::*;
    let p = u64::from(members.max(1));
    let k = log2_rounds(members);
    Some(match kind.blocking_collective()? {
        Barrier => (k, 0),
        Bcast => (k, max_recv),
        Alltoall | Alltoallv | Alltoallw => (p - 1, max_send / p),
        Allgather | Allgatherv | Gather | Gatherv | Scatter | Scatterv => return None,
        _ => (k, max_send),
    })
}

/// `text`, a decimal number with an optional unit of `units`, as a whole number of the base
/// unit (`None` when it is not one).
fn quantity(text: &str, units: &[(&str, u64)]) -> Option<u64> {
    let at = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(at);
    let scale = units.iter().find(|(u, _)| *u == unit.trim())?.1;
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let mut value = int.parse::<u64>().ok()?.checked_mul(scale)?;
    if !frac.is_empty() {
        let digits: u64 = frac.parse().ok()?;
        let denominator = 10u64.checked_pow(frac.len() as u32)?;
        let part = digits.checked_mul(scale)?;
        if part % denominator != 0 {
            return None;
        }
        value = value.checked_add(part / denominator)?;
    }
    Some(value)
}

const TIMES: &[(&str, u64)] = &[("", 1), ("ns", 1), ("us", 1_000), ("ms", 1_000_000)];
const SIZES: &[(&str, u64)] = &[
    ("", 1),
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("KB", 1_000),
    ("MB", 1_000_000),
];
const RATES: &[(&str, u64)] = &[
    ("B/s", 1),
    ("KB/s", 1_000),
    ("MB/s", 1_000_000),
    ("GB/s", 1_000_000_000),
];

impl std::str::FromStr for NetworkModel {
    type Err = String;

    /// `L,o,g,G,eager` (as `gen --network` takes it): latency, overhead and gap in ns or
    /// with a unit (`1.5us`), `G` in ns per byte (`0.2`) or as a bandwidth (`5GB/s`), the
    /// eager limit in bytes or with a unit (`64KiB`).
    ///
    /// ```
    /// use mtfdb::analysis::replay::network::NetworkModel;
    /// let net: NetworkModel = "1.5us,400,100,0.2,64KiB".parse().unwrap();
    /// assert_eq!((net.latency, net.overhead, net.gap), (1_500, 400, 100));
    /// assert_eq!((net.bandwidth, net.eager_limit), (5_000_000_000, 65_536));
    /// assert_eq!("1500,400,0,5GB/s,0".parse::<NetworkModel>().unwrap().bandwidth, 5_000_000_000);
    /// assert!("1500,400".parse::<NetworkModel>().is_err());
    /// ```
    fn from_str(text: &str) -> Result<NetworkModel, String> {
        let usage = |why: &str| {
            format!(
                "a network is L,o,g,G,EAGER (like 1.5us,0.4us,0,0.2,64KiB: G in ns per byte \
                 or as 5GB/s): {why} in {text:?}"
            )
        };
        let [l, o, g, gap_per_byte, eager] = text.split(',').map(str::trim).collect::<Vec<_>>()[..]
        else {
            return Err(usage("five values are needed"));
        };
        let time = |v: &str, what: &str| {
            quantity(v, TIMES).ok_or_else(|| usage(&format!("{what} {v:?} is not a time")))
        };
        let bandwidth = if gap_per_byte.ends_with("B/s") {
            quantity(gap_per_byte, RATES)
        } else {
            gap_per_byte
                .parse::<f64>()
                .ok()
                .filter(|g| *g > 0.0 && g.is_finite())
                .map(|g| (1e9 / g).round() as u64)
        }
        .filter(|&b| b > 0)
        .ok_or_else(|| usage(&format!("G {gap_per_byte:?} is not a positive rate")))?;
        Ok(NetworkModel {
            latency: time(l, "L")?,
            overhead: time(o, "o")?,
            gap: time(g, "g")?,
            bandwidth,
            eager_limit: quantity(eager, SIZES)
                .ok_or_else(|| usage(&format!("the eager limit {eager:?} is not a size")))?,
            cpu: 1.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_rounds_up_to_whole_nanoseconds() {
        let net = NetworkModel {
            bandwidth: 3_000_000_000,
            ..NetworkModel::default()
        };
        assert_eq!(net.transfer(0), 0);
        assert_eq!(net.transfer(1), 1);
        assert_eq!(net.transfer(3), 1);
        assert_eq!(net.transfer(4), 2);
        assert_eq!(net.transfer(3_000), 1_000);
    }

    #[test]
    fn each_collective_follows_its_algorithm() {
        let net = NetworkModel {
            latency: 1_000,
            overhead: 100,
            bandwidth: 1_000_000_000, // 1 byte per ns
            ..NetworkModel::default()
        };
        let h = |m: u64| 1_200 + m;
        // 16 members: 4 rounds; 5 members: 3 rounds; 1 member: none.
        // A Bcast's root counts the buffer once per member as sent: a round moves it once.
        assert_eq!(
            net.collective(OpKind::Bcast, 16, 16_000, 1_000),
            4 * h(1_000)
        );
        assert_eq!(net.collective(OpKind::Reduce, 5, 100, 0), 3 * h(100));
        assert_eq!(net.collective(OpKind::Allreduce, 1, 100, 100), 0);
        // Data that grows to (p - 1) contributions.
        assert_eq!(net.collective(OpKind::Allgather, 8, 10, 80), 3 * h(0) + 70);
        assert_eq!(net.collective(OpKind::Gather, 8, 10, 80), 3 * h(0) + 70);
        assert_eq!(net.collective(OpKind::Scatterv, 8, 80, 10), 3 * h(0) + 70);
        // Pairwise exchange: p - 1 rounds of one block.
        assert_eq!(net.collective(OpKind::Alltoall, 4, 400, 400), 3 * h(100));
        // A non-blocking collective is timed as its blocking form; other calls are not
        // collectives.
        assert_eq!(
            net.collective(OpKind::Iallreduce, 16, 8, 8),
            net.collective(OpKind::Allreduce, 16, 8, 8)
        );
        assert_eq!(net.collective(OpKind::Send, 16, 8, 8), 0);
    }
}
