//! Collective instances: the i-th call of the same collective kind on the same communicator
//! by each member forms instance i.
//!
//! Per (communicator, kind) a *series* counts the calls of each member and keeps the open
//! (partial) instances in a deque, oldest first. Instance i completes when the last member
//! makes its (i+1)-th call; since every member makes its i-th call before its (i+1)-th,
//! instance i always completes before instance i+1, so a completed instance is always the
//! front of its deque and instances are emitted in index order within their series.
//! Blocking and non-blocking forms (`Bcast`, `Ibcast`) are separate series.

use std::collections::VecDeque;

use crate::hash::FxHashMap;
use crate::model::{
    Anomaly, CollectiveInstance, CommId, Communicator, OpId, OpKind, Operation, Rank, Time,
};

/// How a communicator's world ranks map to member indexes.
#[derive(Debug)]
struct CommInfo {
    size: u32,
    /// World rank r is member r (`MPI_COMM_WORLD` and its duplicates).
    identity: bool,
    /// World rank → index in `members`, when not the identity.
    local: FxHashMap<Rank, u32>,
    /// The members' world ranks, in communicator-rank order.
    members: Vec<Rank>,
}

impl CommInfo {
    fn new(c: &Communicator) -> CommInfo {
        let identity = c.members.iter().enumerate().all(|(i, &r)| r as usize == i);
        let local = if identity {
            FxHashMap::default()
        } else {
            c.members
                .iter()
                .enumerate()
                .map(|(i, &r)| (r, i as u32))
                .collect()
        };
        CommInfo {
            size: c.members.len() as u32,
            identity,
            local,
            members: c.members.clone(),
        }
    }

    #[inline]
    fn local(&self, rank: Rank) -> Option<u32> {
        if self.identity {
            (rank < self.size).then_some(rank)
        } else {
            self.local.get(&rank).copied()
        }
    }
}

/// The calls of one collective kind on one communicator.
#[derive(Debug)]
struct Series {
    /// Calls made so far by each member.
    calls: Vec<u64>,
    /// Index of the front instance of `open`.
    base: u64,
    /// Partial instances, oldest first.
    open: VecDeque<OpenInstance>,
}

/// A partial instance and what its members' signatures are checked against.
#[derive(Debug)]
struct OpenInstance {
    instance: CollectiveInstance,
    /// The bytes the first member that recorded any sent, in a collective where every
    /// member sends the same ([`same_contribution`]).
    contribution: Option<u64>,
    /// The member that entered last: its start and operation.
    last_enter: (Time, OpId),
    /// The member that left first: its end and operation.
    first_leave: (Time, OpId),
    /// The rank of the first member that called.
    first_rank: Rank,
}

/// Collectives in which every member sends the same number of bytes (MPI's type signatures
/// agree): the reductions, scans, the regular gathers and all-to-all. The `v` and `w`
/// forms, broadcasts and scatters (whose root alone sends) are not among them.
fn same_contribution(kind: OpKind) -> bool {
    use OpKind::*;
    matches!(
        kind.blocking_collective().unwrap_or(kind),
        Allreduce | Reduce | Scan | Exscan | Allgather | Alltoall | ReduceScatterBlock | Gather
    )
}

/// Why a collective call could not be placed in an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// The operation names no communicator, or one the header does not declare.
    UnknownComm,
    /// The calling rank is not a member of the communicator.
    NotMember,
}

/// What a call did.
#[derive(Debug)]
pub(super) enum Placed {
    /// Added to a partial instance (new or existing).
    Partial {
        /// The instance's root disagreed with this call's root.
        root_mismatch: bool,
        /// What the call broke of the instance's signature.
        anomaly: Option<Anomaly>,
    },
    /// The call completed the instance, returned here to be emitted and then handed back
    /// with [`Collectives::recycle`].
    Complete {
        instance: CollectiveInstance,
        root_mismatch: bool,
        /// What the call broke of the instance's signature.
        anomaly: Option<Anomaly>,
        /// A barrier whose members do not all overlap in time.
        no_overlap: Option<Anomaly>,
    },
}

/// A partial instance left at the end, with the size of its communicator.
#[derive(Debug)]
pub(super) struct Partial {
    pub instance: CollectiveInstance,
    pub expected: u32,
    /// The world ranks of the members that did not call, in communicator-rank order.
    pub absent: Vec<Rank>,
    /// The rank of the first member that called.
    pub first_rank: Rank,
}

#[derive(Debug, Default)]
pub(super) struct Collectives {
    comms: FxHashMap<CommId, CommInfo>,
    series: FxHashMap<(CommId, u32), Series>,
    open: usize,
    pool: Vec<Vec<OpId>>,
}

/// Emptied member lists kept for reuse.
const POOL_LIMIT: usize = 64;

impl Collectives {
    pub fn new(comms: &[Communicator]) -> Collectives {
        Collectives {
            comms: comms.iter().map(|c| (c.id, CommInfo::new(c))).collect(),
            ..Collectives::default()
        }
    }

    /// Partial instances currently held.
    pub fn open(&self) -> usize {
        self.open
    }

    /// Places one collective call.
    pub fn call(&mut self, id: OpId, op: &Operation) -> Result<Placed, Refused> {
        let comm = op.comm.ok_or(Refused::UnknownComm)?;
        let info = self.comms.get(&comm).ok_or(Refused::UnknownComm)?;
        let member = info.local(op.rank).ok_or(Refused::NotMember)? as usize;
        let size = info.size;
        let series = self
            .series
            .entry((comm, op.kind.code()))
            .or_insert_with(|| Series {
                calls: vec![0; size as usize],
                base: 0,
                open: VecDeque::new(),
            });
        let index = series.calls[member];
        series.calls[member] += 1;
        let pos = (index - series.base) as usize;
        let opened = pos == series.open.len();
        let recorded = (same_contribution(op.kind) && op.send_bytes > 0).then_some(op.send_bytes);
        let mut anomaly = None;
        if opened {
            let mut ops = self.pool.pop().unwrap_or_default();
            ops.push(id);
            series.open.push_back(OpenInstance {
                instance: CollectiveInstance {
                    kind: op.kind,
                    comm,
                    root: op.root,
                    ops,
                    start: op.start,
                    end: op.end,
                    send_bytes: op.send_bytes,
                    recv_bytes: op.recv_bytes,
                },
                contribution: recorded,
                last_enter: (op.start, id),
                first_leave: (op.end, id),
                first_rank: op.rank,
            });
            self.open += 1;
        } else {
            let open = &mut series.open[pos];
            let inst = &mut open.instance;
            inst.ops.push(id);
            inst.start = inst.start.min(op.start);
            inst.end = inst.end.max(op.end);
            inst.send_bytes += op.send_bytes;
            inst.recv_bytes += op.recv_bytes;
            if op.start > open.last_enter.0 {
                open.last_enter = (op.start, id);
            }
            if op.end < open.first_leave.0 {
                open.first_leave = (op.end, id);
            }
            match (open.contribution, recorded) {
                (Some(expected), Some(bytes)) if bytes != expected => {
                    anomaly = Some(Anomaly::CollectiveSizeMismatch {
                        op: id,
                        rank: op.rank,
                        kind: op.kind,
                        comm,
                        bytes,
                        expected,
                    });
                }
                (None, Some(_)) => open.contribution = recorded,
                _ => {}
            }
        }
        let open = &mut series.open[pos];
        let inst = &mut open.instance;
        let root_mismatch = match (inst.root, op.root) {
            (Some(first), Some(this)) => first != this,
            (None, Some(this)) => {
                inst.root = Some(this);
                false
            }
            _ => false,
        };
        if inst.ops.len() as u32 == size {
            debug_assert_eq!(pos, 0, "instances complete in index order");
            // `pos` was found in `series.open` just above.
            #[allow(clippy::expect_used)]
            let open = series
                .open
                .remove(pos)
                .expect("the completed instance is present");
            if pos == 0 {
                series.base += 1;
            }
            self.open -= 1;
            // A blocking barrier: nobody leaves before everybody entered.
            let ((entered, op), (left, leave_op)) = (open.last_enter, open.first_leave);
            let no_overlap = (open.instance.kind == OpKind::Barrier && entered > left).then(|| {
                Anomaly::BarrierWithoutOverlap {
                    op,
                    leave_op,
                    comm,
                    gap: entered - left,
                }
            });
            Ok(Placed::Complete {
                instance: open.instance,
                root_mismatch,
                anomaly,
                no_overlap,
            })
        } else {
            Ok(Placed::Partial {
                root_mismatch,
                anomaly,
            })
        }
    }

    /// Takes back an emitted instance's member list for reuse.
    pub fn recycle(&mut self, instance: CollectiveInstance) {
        if self.pool.len() < POOL_LIMIT {
            let mut ops = instance.ops;
            ops.clear();
            self.pool.push(ops);
        }
    }

    /// Every partial instance, ordered by communicator, kind code and instance index.
    pub fn drain(&mut self) -> Vec<Partial> {
        let mut keys: Vec<(CommId, u32)> = self
            .series
            .iter()
            .filter(|(_, s)| !s.open.is_empty())
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        let mut out = Vec::with_capacity(self.open);
        for key in keys {
            let Some(info) = self.comms.get(&key.0) else {
                continue;
            };
            if let Some(series) = self.series.get_mut(&key) {
                let base = series.base;
                let calls = &series.calls;
                // Member m made the instance of index i if it made more than i calls.
                out.extend(series.open.drain(..).enumerate().map(|(pos, open)| {
                    let index = base + pos as u64;
                    let absent = info
                        .members
                        .iter()
                        .zip(calls)
                        .filter(|(_, &n)| n <= index)
                        .map(|(&r, _)| r)
                        .collect();
                    Partial {
                        instance: open.instance,
                        expected: info.size,
                        absent,
                        first_rank: open.first_rank,
                    }
                }));
            }
        }
        self.open = 0;
        out
    }
}
