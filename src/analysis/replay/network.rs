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
//! Collectives: the last member leaves at the last member's entry plus the algorithm's time,
//! with `k = ceil(log2 p)` rounds for `p` members and one round costing `h(m) = L + 2o + T(m)`;
//! in the tree and doubling algorithms every member leaves then, in the pairwise exchange each
//! member leaves when its own last round is done (below):
//! - Barrier (dissemination): `k · h(0)`;
//! - Bcast and Reduce (binomial tree), Allreduce (recursive doubling), Reduce_scatter, Scan:
//!   `k · h(m)`, `m` the largest buffer a member sends or receives;
//! - Allgather(v) (recursive doubling), Gather(v) and Scatter(v) (binomial tree):
//!   `k · h(0) + T((p - 1) · m)`, `m` the largest contribution of one member;
//! - Alltoall(v/w) (pairwise exchange): `(p - 1) · h(m)`, `m` the largest block a member sends
//!   to one other (its bytes sent over `p`). In round `k` (1 to `p - 1`) member `i` sends to
//!   `i + k` and receives from `i - k` (mod `p`, communicator ranks), as `MPI_Sendrecv`: it
//!   finishes the round at `max(its previous round's end, the sender's + L + T(m)) + 2o`.
//!   Unrolled ([`NetworkModel::pairwise_exchange`]), with `b = L + T(m)`, `E` the last entry
//!   and `s = p(p - 1)/2 mod p`, member `i` leaves at
//!   `2o(p - 1) + (p - 2)·b + max(E, entry[i - s] + b)`: a member whose data chain starts at a
//!   member that entered early enough leaves one `b` before the last to leave. So a trace of
//!   Alltoalls shows `o` apart from `L` when its members enter at different times (members
//!   entering together all leave at `E + (p - 1)·h(m)`).
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

    /// When each member of a blocking collective `kind` whose members leave at their own
    /// times (a pairwise exchange) leaves, from their entries by communicator rank and the
    /// largest bytes one member sent and received; `None` for the collectives whose members
    /// all leave `collective(…)` after the last entry.
    pub fn member_ends(
        &self,
        kind: OpKind,
        entries: &[Time],
        max_send: u64,
        max_recv: u64,
    ) -> Option<Vec<Time>> {
        if !is_pairwise_exchange(kind) {
            return None;
        }
        let (_, block) = rounds(kind, entries.len() as u32, max_send, max_recv)?;
        Some(self.pairwise_exchange(entries, block))
    }

    /// When each member of a pairwise exchange (an Alltoall) leaves, given when each entered
    /// (`entries[i]`: the member of communicator rank `i`) and the block of `block` bytes it
    /// sends to each other member (see the module documentation for the formula).
    ///
    /// ```
    /// use mtfdb::analysis::replay::network::NetworkModel;
    /// let net = NetworkModel { latency: 1_000, overhead: 100, bandwidth: 1_000_000_000, ..NetworkModel::default() };
    /// // Entering together, everyone leaves after 3 rounds of L + 2o + T(500).
    /// assert_eq!(net.pairwise_exchange(&[0, 0, 0, 0], 500), vec![3 * 1_700; 4]);
    /// // Member 2 enters 10 us late: the member whose longest chain starts at member 2
    /// // (2 + s, s = 4·3/2 mod 4 = 2: member 0) is the last to leave, 3 rounds after;
    /// // the others leave one L + T(m) earlier.
    /// assert_eq!(
    ///     net.pairwise_exchange(&[0, 0, 10_000, 0], 500),
    ///     vec![10_000 + 3 * 1_700, 10_000 + 3 * 1_700 - 1_500, 10_000 + 3 * 1_700 - 1_500, 10_000 + 3 * 1_700 - 1_500]
    /// );
    /// ```
    pub fn pairwise_exchange(&self, entries: &[Time], block: u64) -> Vec<Time> {
        let p = entries.len();
        if p < 2 {
            return entries.to_vec();
        }
        let b = self.latency.saturating_add(self.transfer(block));
        let last = entries.iter().copied().max().unwrap_or(0);
        let rounds = p as u64 - 1;
        let base = self
            .overhead
            .saturating_mul(2)
            .saturating_mul(rounds)
            .saturating_add(b.saturating_mul(rounds - 1));
        let s = exchange_shift(p);
        (0..p)
            .map(|i| {
                let chain = entries[(i + p - s) % p].saturating_add(b);
                base.saturating_add(last.max(chain))
            })
            .collect()
    }
}

/// The overhead `o` a pairwise exchange's entries and exits show (both in communicator-rank
/// order), the inverse of [`NetworkModel::pairwise_exchange`]: the first member to leave left
/// at `E + 2o(p - 1) + (p - 2)·b` and the last `b` later, provided the first's chain of rounds
/// started at a member that entered more than `b` before the last entry `E` (checked). `None`
/// when that does not hold (the members entered too close together to tell `o` from `L`).
///
/// ```
/// use mtfdb::analysis::replay::network::{overhead_of_exchange, NetworkModel};
/// let net = NetworkModel { latency: 1_000, overhead: 100, bandwidth: 1_000_000_000, ..NetworkModel::default() };
/// let entries = [0, 0, 10_000, 0];
/// let exits = net.pairwise_exchange(&entries, 500);
/// assert_eq!(overhead_of_exchange(&entries, &exits), Some(100));
/// // Entering together: L and o cannot be told apart.
/// assert_eq!(overhead_of_exchange(&[0; 4], &net.pairwise_exchange(&[0; 4], 500)), None);
/// ```
pub fn overhead_of_exchange(entries: &[Time], exits: &[Time]) -> Option<Time> {
    let p = entries.len();
    if p < 2 || exits.len() != p {
        return None;
    }
    let last_entry = entries.iter().copied().max()?;
    let first_exit = exits.iter().copied().min()?;
    let b = exits.iter().copied().max()?.checked_sub(first_exit)?;
    // Were the first to leave's exit on its chain instead (`entry + b > E`), the spread seen
    // would be exactly `E - entry`: strictly less tells the two apart.
    let s = exchange_shift(p);
    let shown = (0..p)
        .any(|i| exits[i] == first_exit && entries[(i + p - s) % p].saturating_add(b) < last_entry);
    if b == 0 || !shown {
        return None;
    }
    let rounds = (p - 1) as f64;
    let overheads = first_exit.checked_sub(last_entry)? as f64 - (rounds - 1.0) * b as f64;
    (overheads >= 0.0).then(|| (overheads / (2.0 * rounds)).round() as Time)
}

/// Whether `kind` is timed as a pairwise exchange (the Alltoalls), whose members leave at
/// different times (see [`NetworkModel::pairwise_exchange`]).
pub fn is_pairwise_exchange(kind: OpKind) -> bool {
    use OpKind::*;
    matches!(
        kind.blocking_collective(),
        Some(Alltoall | Alltoallv | Alltoallw)
    )
}

/// `s = p(p - 1)/2 mod p`: member `i`'s longest chain of rounds starts at member `i - s`.
fn exchange_shift(p: usize) -> usize {
    let p = p as u128;
    ((p * (p - 1) / 2) % p) as usize
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

    /// The pairwise exchange's closed form against its rounds run one by one: in round `k`
    /// member `i` waits for its own previous round and for member `i - k`'s (plus `L + T(m)`
    /// on the wire), then spends `2o` sending and receiving.
    #[test]
    fn the_pairwise_exchange_formula_is_its_rounds_unrolled() {
        let net = NetworkModel {
            latency: 1_000,
            overhead: 100,
            bandwidth: 1_000_000_000,
            ..NetworkModel::default()
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        let mut shown = 0;
        for p in 1..=13usize {
            for _ in 0..50 {
                // Entries within a few rounds of each other, some equal.
                let entries: Vec<Time> = (0..p).map(|_| next(4) * next(3_000)).collect();
                let block = next(2_000);
                let b = net.latency + net.transfer(block);
                let mut t = entries.clone();
                for k in 1..p {
                    t = (0..p)
                        .map(|i| t[i].max(t[(i + p - k) % p] + b) + 2 * net.overhead)
                        .collect();
                }
                assert_eq!(net.pairwise_exchange(&entries, block), t, "{entries:?}");
                // The inverse finds `o` whenever it answers.
                if let Some(o) = overhead_of_exchange(&entries, &t) {
                    assert_eq!(o, net.overhead, "{entries:?}");
                    shown += 1;
                }
            }
        }
        assert!(
            shown > 200,
            "the overhead shows in {shown} of 650 exchanges"
        );
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

/// One parameter of a what-if: the base network's value kept, set, or scaled.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub enum Change<T> {
    /// The base network's value.
    #[default]
    Keep,
    /// This value.
    Set(T),
    /// The base network's value times this factor (`x2`), rounded to a whole unit.
    Scale(f64),
}

impl<T: Copy + Into<u64> + TryFrom<u64>> Change<T> {
    fn apply(self, base: T) -> T {
        match self {
            Change::Keep => base,
            Change::Set(v) => v,
            Change::Scale(f) => {
                let scaled = (base.into() as f64 * f).round().clamp(0.0, u64::MAX as f64);
                T::try_from(scaled as u64).unwrap_or(base)
            }
        }
    }
}

/// `SIMULATE WITH BANDWIDTH x2, LATENCY x0.5`: a network given by its changes to a base, the
/// network fitted to the trace when any change is relative (`x` a factor), else the default
/// network. Parameters not named keep the base's value.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct NetworkChange {
    /// `L`.
    pub latency: Change<Time>,
    /// `o`.
    pub overhead: Change<Time>,
    /// `g`.
    pub gap: Change<Time>,
    /// Bytes per second.
    pub bandwidth: Change<u64>,
    /// The eager limit (bytes).
    pub eager_limit: Change<u64>,
    /// The CPU speed-up (a factor already: `CPU 2.0` and `CPU x2` are the same).
    pub cpu: Option<f64>,
}

/// Factors are never NaN (the parser refuses them), so equality is total.
impl Eq for NetworkChange {}

impl NetworkChange {
    /// True when a parameter is relative: the base is then the fitted network.
    pub fn is_relative(&self) -> bool {
        [self.latency, self.overhead, self.gap]
            .iter()
            .any(|c| matches!(c, Change::Scale(_)))
            || [self.bandwidth, self.eager_limit]
                .iter()
                .any(|c| matches!(c, Change::Scale(_)))
    }

    /// The network `base` becomes.
    ///
    /// ```
    /// use mtfdb::analysis::replay::network::{Change, NetworkChange, NetworkModel};
    /// let fitted = NetworkModel { bandwidth: 3_770_000_000, ..NetworkModel::default() };
    /// let change = NetworkChange { bandwidth: Change::Scale(2.0), ..NetworkChange::default() };
    /// assert_eq!(change.apply(&fitted).bandwidth, 7_540_000_000);
    /// assert_eq!(change.apply(&fitted).latency, fitted.latency);
    /// ```
    pub fn apply(&self, base: &NetworkModel) -> NetworkModel {
        NetworkModel {
            latency: self.latency.apply(base.latency),
            overhead: self.overhead.apply(base.overhead),
            gap: self.gap.apply(base.gap),
            bandwidth: self.bandwidth.apply(base.bandwidth).max(1),
            eager_limit: self.eager_limit.apply(base.eager_limit),
            cpu: self.cpu.unwrap_or(base.cpu),
        }
    }
}

impl fmt::Display for NetworkChange {
    /// The parameters changed, as `SIMULATE WITH` writes them: `LATENCY x0.5, BANDWIDTH 24
    /// GB/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let mut time = |name: &str, c: Change<Time>| match c {
            Change::Keep => {}
            Change::Set(v) => parts.push(format!("{name} {v} ns")),
            Change::Scale(x) => parts.push(format!("{name} x{x}")),
        };
        time("LATENCY", self.latency);
        time("OVERHEAD", self.overhead);
        time("GAP", self.gap);
        match self.bandwidth {
            Change::Keep => {}
            Change::Set(v) => parts.push(format!("BANDWIDTH {}", rate_text(v))),
            Change::Scale(x) => parts.push(format!("BANDWIDTH x{x}")),
        }
        match self.eager_limit {
            Change::Keep => {}
            Change::Set(v) => parts.push(format!("EAGER LIMIT {v} B")),
            Change::Scale(x) => parts.push(format!("EAGER LIMIT x{x}")),
        }
        if let Some(cpu) = self.cpu {
            parts.push(format!("CPU {cpu}"));
        }
        f.write_str(&parts.join(", "))
    }
}
