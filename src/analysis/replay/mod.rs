//! What if: replay a stored trace on a model network and predict its run time.
//!
//! - [`network`]: the LogGP model with an eager limit and the collective algorithms, every
//!   formula in one place;
//! - [`schedule`]: the discrete-event replay of every rank's bursts and calls.

pub mod network;
pub mod schedule;

use std::collections::VecDeque;

use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

use self::network::NetworkModel;
use self::schedule::{Call, Step, Unresolved};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{OpId, OpKind, Rank, Time};
use crate::store::{OpChunkInfo, OperationColumns, OperationField};
use crate::Trace;

/// One operation replayed: its measured and simulated times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// The operation.
    pub op: OpId,
    /// Its process.
    pub rank: Rank,
    /// Measured `(start, end)`.
    pub measured: (Time, Time),
    /// Simulated `(start, end)`.
    pub simulated: (Time, Time),
}

/// How the trace's operations link up, read once: which send each receive got its message
/// from, which requests each Wait completes, the collective instance of each member.
struct Links {
    /// Receiving operation → its message's sending operation.
    send_of: FxHashMap<OpId, OpId>,
    /// Operations that sent a matched message.
    senders: RoaringTreemap,
    /// Completion (Wait/Test) → the operations whose requests it completed.
    completes: FxHashMap<OpId, Vec<OpId>>,
    /// Member of a blocking collective instance → (instance, its members).
    instance: FxHashMap<OpId, (u64, u32)>,
}

impl Links {
    fn read(trace: &Trace) -> Result<Links> {
        let mut send_of = FxHashMap::default();
        let mut senders = RoaringTreemap::new();
        for (send, recv) in trace.message_ops()? {
            send_of.insert(recv, send);
            senders.insert(send);
        }
        let mut completes: FxHashMap<OpId, Vec<OpId>> = FxHashMap::default();
        for link in trace.request_links()? {
            completes
                .entry(link.completion_op)
                .or_default()
                .push(link.request_op);
        }
        let mut instance = FxHashMap::default();
        for (i, c) in trace.collective_instances()?.into_iter().enumerate() {
            if c.kind.blocking_collective() != Some(c.kind) {
                continue;
            }
            let members = c.ops.len() as u32;
            for op in c.ops {
                instance.insert(op, (i as u64, members));
            }
        }
        Ok(Links {
            send_of,
            senders,
            completes,
            instance,
        })
    }
}

/// One location's operations, read chunk by chunk as the replay asks for them.
struct Cursor<'t> {
    chunks: Vec<&'t OpChunkInfo>,
    next_chunk: usize,
    columns: Option<OperationColumns>,
    row: usize,
    rank: Rank,
    /// The measured end of the previous operation.
    previous_end: Option<Time>,
    /// Requests created and not completed yet: operation → (a send?, its message).
    requests: FxHashMap<OpId, (bool, u64)>,
    /// The operation handed to the replay and not ended yet, with its measured times.
    pending: VecDeque<(OpId, Time, Time)>,
}

const FIELDS: &[OperationField] = &[
    OperationField::Start,
    OperationField::End,
    OperationField::Kind,
    OperationField::SendBytes,
    OperationField::RecvBytes,
];

impl Cursor<'_> {
    /// The next row, reading the next chunk when this one is done.
    fn advance(&mut self, trace: &Trace) -> Result<Option<(OperationColumns, usize)>> {
        loop {
            if let Some(columns) = self.columns.take() {
                if self.row < columns.rows() {
                    let row = self.row;
                    self.row += 1;
                    return Ok(Some((columns, row)));
                }
            }
            let Some(info) = self.chunks.get(self.next_chunk) else {
                return Ok(None);
            };
            self.next_chunk += 1;
            self.columns = Some(trace.operation_columns(info.chunk, FIELDS)?);
            self.row = 0;
        }
    }

    /// The next call of this location for the replay.
    fn next(&mut self, trace: &Trace, links: &Links) -> Result<Option<Call>> {
        let Some((columns, row)) = self.advance(trace)? else {
            return Ok(None);
        };
        let (id, start, end) = (columns.id(row), columns.start(row), columns.end(row));
        let burst = self.previous_end.map_or(0, |e| start.saturating_sub(e));
        self.previous_end = Some(end);
        // A call the model knows nothing of keeps its duration.
        let step = match columns.kind(row) {
            Some(kind) => self.step(id, kind, &columns, row, links),
            None => Step::Local,
        };
        self.columns = Some(columns);
        self.pending.push_back((id, start, end));
        Ok(Some(Call {
            burst,
            duration: end.saturating_sub(start),
            step,
        }))
    }

    fn step(
        &mut self,
        id: OpId,
        kind: OpKind,
        columns: &OperationColumns,
        row: usize,
        links: &Links,
    ) -> Step {
        let blocking = !kind.is_nonblocking();
        let sent = kind.is_send() && links.senders.contains(id);
        let received = links
            .send_of
            .get(&id)
            .copied()
            .filter(|_| kind.is_receive());
        let bytes = columns.send_bytes(row);
        match (sent, received) {
            (true, Some(recv)) => Step::SendRecv {
                send: id,
                bytes,
                recv,
            },
            (true, None) if !kind.is_receive() => {
                if !blocking {
                    self.requests.insert(id, (true, id));
                }
                Step::Send {
                    message: id,
                    bytes,
                    blocking,
                }
            }
            (false, Some(message)) if !kind.is_send() => {
                if !blocking {
                    self.requests.insert(id, (false, message));
                }
                Step::Recv { message, blocking }
            }
            _ if kind.is_completion() => {
                let (mut sends, mut recvs) = (Vec::new(), Vec::new());
                for op in links.completes.get(&id).into_iter().flatten() {
                    match self.requests.remove(op) {
                        Some((true, m)) => sends.push(m),
                        Some((false, m)) => recvs.push(m),
                        None => {}
                    }
                }
                if sends.is_empty() && recvs.is_empty() {
                    Step::Local
                } else {
                    Step::Wait { sends, recvs }
                }
            }
            _ => match links.instance.get(&id) {
                Some(&(instance, members)) => Step::Collective {
                    instance,
                    kind,
                    members,
                    send_bytes: bytes,
                    recv_bytes: columns.recv_bytes(row),
                },
                None => Step::Local,
            },
        }
    }
}

/// Replays every operation of `trace` on `net`; `each` receives every operation with its
/// measured and simulated times, in each location's order. Locations (a rank's threads) are
/// replayed as ranks of their own.
pub fn replay_trace(
    trace: &Trace,
    net: &NetworkModel,
    each: &mut dyn FnMut(Replayed) -> Result<()>,
) -> Result<Unresolved> {
    let links = Links::read(trace)?;
    let mut by_location: FxHashMap<(Rank, u32), usize> = FxHashMap::default();
    let mut cursors: Vec<Cursor<'_>> = Vec::new();
    for info in trace.op_chunks().iter().filter(|c| c.rows > 0) {
        let at = *by_location
            .entry((info.rank, info.thread))
            .or_insert_with(|| {
                cursors.push(Cursor {
                    chunks: Vec::new(),
                    next_chunk: 0,
                    columns: None,
                    row: 0,
                    rank: info.rank,
                    previous_end: None,
                    requests: FxHashMap::default(),
                    pending: VecDeque::new(),
                });
                cursors.len() - 1
            });
        cursors[at].chunks.push(info);
    }
    for c in &mut cursors {
        c.chunks.sort_by_key(|info| info.first_row);
    }
    let origin: Vec<Time> = cursors
        .iter()
        .map(|c| c.chunks.first().map_or(0, |info| info.first_start))
        .collect();
    // The two closures share the cursors: one hands out calls, the other takes their ends.
    let cursors = std::cell::RefCell::new(cursors);
    schedule::replay(
        net,
        &origin,
        &mut |r| cursors.borrow_mut()[r].next(trace, &links),
        &mut |r, start, end| {
            let mut cursors = cursors.borrow_mut();
            let cursor = &mut cursors[r];
            let Some((op, s, e)) = cursor.pending.pop_front() else {
                return Ok(());
            };
            each(Replayed {
                op,
                rank: cursor.rank,
                measured: (s, e),
                simulated: (start, end),
            })
        },
    )
}

/// One rank's measured and predicted times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankPrediction {
    /// The rank.
    pub rank: Rank,
    /// When its last operation ended, measured and predicted (ns since the trace's start).
    pub end: (Time, Time),
    /// Its time inside MPI calls, measured and predicted.
    pub mpi: (Time, Time),
}

/// What [`simulate`] predicts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The model replayed.
    pub model: NetworkModel,
    /// Per rank, in rank order.
    pub ranks: Vec<RankPrediction>,
    /// The run time (first start to last end), measured and predicted.
    pub run: (Time, Time),
    /// Calls whose partner never came (replayed with their measured duration).
    pub unresolved: u64,
}

impl Prediction {
    /// `(measured - predicted) / measured` of the run time.
    pub fn error(&self) -> f64 {
        relative_error(self.run.0, self.run.1)
    }
}

/// `(measured - predicted) / measured` (0 when nothing was measured).
pub fn relative_error(measured: Time, predicted: Time) -> f64 {
    if measured == 0 {
        0.0
    } else {
        (measured as f64 - predicted as f64) / measured as f64
    }
}

/// Replays `trace` on `net` and sums each rank's end and time in MPI, measured and predicted.
pub fn simulate(trace: &Trace, net: &NetworkModel) -> Result<Prediction> {
    let first = trace.summary().first_time.unwrap_or(0);
    let mut ranks: FxHashMap<Rank, RankPrediction> = FxHashMap::default();
    let unresolved = replay_trace(trace, net, &mut |r| {
        let p = ranks.entry(r.rank).or_insert(RankPrediction {
            rank: r.rank,
            end: (0, 0),
            mpi: (0, 0),
        });
        p.end.0 = p.end.0.max(r.measured.1.saturating_sub(first));
        p.end.1 = p.end.1.max(r.simulated.1.saturating_sub(first));
        p.mpi.0 += r.measured.1.saturating_sub(r.measured.0);
        p.mpi.1 += r.simulated.1.saturating_sub(r.simulated.0);
        Ok(())
    })?;
    let mut ranks: Vec<RankPrediction> = ranks.into_values().collect();
    ranks.sort_by_key(|p| p.rank);
    let run = ranks
        .iter()
        .fold((0, 0), |(m, p), r| (m.max(r.end.0), p.max(r.end.1)));
    Ok(Prediction {
        model: *net,
        ranks,
        run,
        unresolved: unresolved.calls,
    })
}
