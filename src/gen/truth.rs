//! The ground truth a generator computes while it emits: what a correct import and correct
//! queries must find in the generated trace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{OpKind, Rank, Time};

/// Messages from one world rank to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairTruth {
    /// Sender world rank.
    pub sender: Rank,
    /// Receiver world rank.
    pub receiver: Rank,
    /// Number of point-to-point messages.
    pub messages: u64,
    /// Their total payload in bytes.
    pub bytes: u64,
}

/// The tallies of one world rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankTruth {
    /// The world rank.
    pub rank: Rank,
    /// Its operations.
    pub operations: u64,
    /// Its operations by MPI name (`MPI_Isend`); kinds it never called are absent.
    pub ops_by_kind: BTreeMap<String, u64>,
    /// Routine calls (enter events).
    pub routine_calls: u64,
    /// Point-to-point messages sent.
    pub p2p_sent_messages: u64,
    /// Point-to-point bytes sent.
    pub p2p_sent_bytes: u64,
    /// Point-to-point messages received.
    pub p2p_recv_messages: u64,
    /// Point-to-point bytes received.
    pub p2p_recv_bytes: u64,
    /// Sum of `send_bytes` over its collective operations.
    pub coll_send_bytes: u64,
    /// Sum of `recv_bytes` over its collective operations.
    pub coll_recv_bytes: u64,
    /// Its first event's time (ns).
    pub first_time: Time,
    /// Its last event's end (ns).
    pub last_time: Time,
}

impl RankTruth {
    /// Its operations of `kind`.
    pub fn count(&self, kind: OpKind) -> u64 {
        kind.mpi_name()
            .and_then(|name| self.ops_by_kind.get(name))
            .copied()
            .unwrap_or(0)
    }

    /// Fan-out as the MTF paper defines it: bytes sent point-to-point plus collective send bytes.
    pub fn fan_out(&self) -> u64 {
        self.p2p_sent_bytes + self.coll_send_bytes
    }

    /// Fan-in: bytes received point-to-point plus collective receive bytes.
    pub fn fan_in(&self) -> u64 {
        self.p2p_recv_bytes + self.coll_recv_bytes
    }
}

/// A communication structure the generator emitted (a halo exchange, one wavefront, an `io`
/// round of collectives), counted each time it was emitted: what pattern detection must find.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatternTruth {
    /// The processes taking part.
    pub processes: u32,
    /// The fewest events (sends, receives, collectives) any of them has in one occurrence; a
    /// structure of one event per process is no pattern (patterns have at least two events).
    pub min_events: u32,
    /// How many times it was emitted.
    pub occurrences: u64,
}

/// Everything a generated trace must contain, computed by the generator as it emits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// The scenario's name (`stencil2d`).
    pub scenario: String,
    /// The trace name put in the header (`stencil2d-16`).
    pub trace_name: String,
    /// The topology, in words (`4x4 grid`).
    pub topology: String,
    /// Number of ranks.
    pub ranks: u32,
    /// Iterations of the main loop (calls of `solve` per rank).
    pub iterations: u32,
    /// After how many iterations every rank's events repeat exactly: 1 when all iterations
    /// are alike, 8 for `stencil2d` (a Gather every 4th iteration, a Scatterv every 8th). A
    /// loop model's main loop runs `iterations / period` turns of `period` iterations.
    pub period: u32,
    /// The seed.
    pub seed: u64,
    /// `permutation[position]` is the world rank of logical position `position` (the
    /// identity unless ranks were shuffled).
    pub permutation: Vec<Rank>,
    /// Operations emitted.
    pub operations: u64,
    /// Routine enter and leave events emitted.
    pub routine_events: u64,
    /// Operations plus routine events.
    pub events: u64,
    /// Routine calls (enter events).
    pub routine_calls: u64,
    /// Strings defined.
    pub strings: u32,
    /// Operations by MPI name over all ranks.
    pub ops_by_kind: BTreeMap<String, u64>,
    /// Point-to-point messages (one per send).
    pub messages: u64,
    /// Their total payload in bytes.
    pub message_bytes: u64,
    /// Messages per (sender, receiver), sorted by sender then receiver; pairs that exchanged
    /// nothing are absent.
    pub pairs: Vec<PairTruth>,
    /// Collective instances (one per call by all members of a communicator) by MPI name.
    pub collectives: BTreeMap<String, u64>,
    /// Per world rank, in rank order.
    pub per_rank: Vec<RankTruth>,
    /// Earliest event time (ns).
    pub first_time: Time,
    /// Latest event end (ns).
    pub last_time: Time,
    /// The communication structures emitted, by name (recorded by `stencil2d`, `sweep`, `lu`
    /// and `bt`, and the setup broadcast of every scenario).
    pub patterns: BTreeMap<String, PatternTruth>,
}

impl GroundTruth {
    /// Operations of `kind` over all ranks.
    pub fn count(&self, kind: OpKind) -> u64 {
        kind.mpi_name()
            .and_then(|name| self.ops_by_kind.get(name))
            .copied()
            .unwrap_or(0)
    }

    /// Collective instances of `kind`.
    pub fn instances(&self, kind: OpKind) -> u64 {
        kind.mpi_name()
            .and_then(|name| self.collectives.get(name))
            .copied()
            .unwrap_or(0)
    }

    /// The messages from `sender` to `receiver`, if any.
    pub fn pair(&self, sender: Rank, receiver: Rank) -> Option<&PairTruth> {
        self.pairs
            .binary_search_by_key(&(sender, receiver), |pt| (pt.sender, pt.receiver))
            .ok()
            .map(|i| &self.pairs[i])
    }

    /// The world ranks `rank` exchanged messages with (either direction), sorted.
    pub fn partners(&self, rank: Rank) -> Vec<Rank> {
        let mut out: Vec<Rank> = self
            .pairs
            .iter()
            .filter_map(|pt| {
                if pt.sender == rank {
                    Some(pt.receiver)
                } else if pt.receiver == rank {
                    Some(pt.sender)
                } else {
                    None
                }
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}
