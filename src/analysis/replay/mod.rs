//! What if: replay a stored trace on a model network and predict its run time.
//!
//! - [`network`]: the LogGP model with an eager limit and the collective algorithms, every
//!   formula in one place;
//! - [`schedule`]: the discrete-event replay of every rank's bursts and calls.

pub mod fit;
pub mod network;
pub mod schedule;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use self::network::NetworkModel;
use self::schedule::{Call, Step, Unresolved};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::ingest::EventSink;
use crate::model::{OpId, OpKind, Operation, Rank, Time};
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
    /// It waited for a partner the trace does not have, and kept its measured duration.
    pub unresolved: bool,
}

/// How the trace's operations link up, read once, each list sorted by operation id: a
/// location's operations come in id order, so it walks through each list (see [`Walk`])
/// instead of looking every operation up.
struct Links {
    /// (receiving operation, its message's sending operation).
    receives: Vec<(OpId, OpId)>,
    /// (sending operation of a matched message, nothing).
    sends: Vec<(OpId, ())>,
    /// (completion (Wait/Test), an operation whose request it completed).
    completions: Vec<(OpId, OpId)>,
    /// (member of a blocking collective instance, (instance, its members)).
    members: Vec<(OpId, (u64, u32))>,
}

impl Links {
    /// Reads the three tables, each on its own core where there is one, and sorts them.
    fn read(trace: &Trace) -> Result<Links> {
        use rayon::prelude::*;
        let messages = || -> Result<_> {
            let messages = trace.message_ops()?;
            let mut receives: Vec<(OpId, OpId)> = messages.iter().map(|&(s, r)| (r, s)).collect();
            let mut sends: Vec<(OpId, ())> = messages.into_iter().map(|(s, _)| (s, ())).collect();
            receives.par_sort_unstable();
            sends.par_sort_unstable();
            Ok((receives, sends))
        };
        let completions = || -> Result<_> {
            let mut completions: Vec<(OpId, OpId)> = trace
                .request_links()?
                .into_iter()
                .map(|l| (l.completion_op, l.request_op))
                .collect();
            completions.par_sort_unstable();
            Ok(completions)
        };
        let members = || -> Result<_> {
            let mut members = Vec::new();
            for (i, c) in trace.collective_instances()?.into_iter().enumerate() {
                if c.kind.blocking_collective() == Some(c.kind) {
                    let count = c.ops.len() as u32;
                    members.extend(c.ops.into_iter().map(|op| (op, (i as u64, count))));
                }
            }
            members.par_sort_unstable();
            Ok(members)
        };
        let (messages, (completions, members)) =
            rayon::join(messages, || rayon::join(completions, members));
        let (receives, sends) = messages?;
        Ok(Links {
            receives,
            sends,
            completions: completions?,
            members: members?,
        })
    }
}

/// A walk through one of [`Links`]' sorted lists, for ids asked in increasing order.
struct Walk<'l, T> {
    items: &'l [(OpId, T)],
    at: usize,
}

impl<'l, T> Walk<'l, T> {
    /// A walk starting at the first item of `from` or later.
    fn new(items: &'l [(OpId, T)], from: OpId) -> Walk<'l, T> {
        Walk {
            at: items.partition_point(|(id, _)| *id < from),
            items,
        }
    }

    /// The items of `id` (asked in increasing order).
    fn of(&mut self, id: OpId) -> &'l [(OpId, T)] {
        while self.items.get(self.at).is_some_and(|(i, _)| *i < id) {
            self.at += 1;
        }
        let start = self.at;
        while self.items.get(self.at).is_some_and(|(i, _)| *i == id) {
            self.at += 1;
        }
        &self.items[start..self.at]
    }
}

/// The walks of one chunk through the links.
struct ChunkLinks<'l> {
    receives: Walk<'l, OpId>,
    sends: Walk<'l, ()>,
    completions: Walk<'l, OpId>,
    members: Walk<'l, (u64, u32)>,
}

impl<'l> ChunkLinks<'l> {
    fn new(links: &'l Links, from: OpId) -> ChunkLinks<'l> {
        ChunkLinks {
            receives: Walk::new(&links.receives, from),
            sends: Walk::new(&links.sends, from),
            completions: Walk::new(&links.completions, from),
            members: Walk::new(&links.members, from),
        }
    }
}

/// One location's operations, read chunk by chunk as the replay asks for them.
struct Cursor<'t> {
    chunks: Vec<&'t OpChunkInfo>,
    next_chunk: usize,
    columns: Option<(OperationColumns, ChunkLinks<'t>)>,
    row: usize,
    rank: Rank,
    /// The measured end of the previous operation.
    previous_end: Option<Time>,
    /// Requests created and not completed yet: operation → (a send?, its message).
    requests: FxHashMap<OpId, (bool, u64)>,
    /// The operation handed to the replay and not ended yet, with its measured times (and
    /// whole, when asked for).
    pending: VecDeque<(OpId, Time, Time, Option<Operation>)>,
    /// The current chunk's operations whole, when the caller wants them.
    whole: Option<VecDeque<(OpId, Operation)>>,
}

const FIELDS: &[OperationField] = &[
    OperationField::Start,
    OperationField::End,
    OperationField::Kind,
    OperationField::SendBytes,
    OperationField::RecvBytes,
];

impl<'t> Cursor<'t> {
    /// Makes sure a chunk with a row left is decoded (reading the next chunk when this one
    /// is done); false at the location's end.
    fn advance(&mut self, trace: &Trace, links: &'t Links) -> Result<bool> {
        loop {
            if self
                .columns
                .as_ref()
                .is_some_and(|(columns, _)| self.row < columns.rows())
            {
                return Ok(true);
            }
            let Some(info) = self.chunks.get(self.next_chunk) else {
                return Ok(false);
            };
            self.next_chunk += 1;
            let columns = trace.operation_columns(info.chunk, FIELDS)?;
            self.columns = Some((columns, ChunkLinks::new(links, info.ids().start)));
            if self.whole.is_some() {
                self.whole = Some(trace.chunk_operations(info)?.into());
            }
            self.row = 0;
        }
    }

    /// The next call of this location for the replay.
    fn next(&mut self, trace: &Trace, links: &'t Links) -> Result<Option<Call>> {
        if !self.advance(trace, links)? {
            return Ok(None);
        }
        let row = self.row;
        self.row += 1;
        let Some((columns, walks)) = self.columns.as_mut() else {
            return Ok(None);
        };
        let (id, start, end) = (columns.id(row), columns.start(row), columns.end(row));
        let burst = self.previous_end.map_or(0, |e| start.saturating_sub(e));
        self.previous_end = Some(end);
        // A call the model knows nothing of keeps its duration.
        let step = match columns.kind(row) {
            Some(kind) => step(id, kind, columns, row, walks, &mut self.requests),
            None => Step::Local,
        };
        let whole = self
            .whole
            .as_mut()
            .and_then(VecDeque::pop_front)
            .map(|(_, op)| op);
        self.pending.push_back((id, start, end, whole));
        Ok(Some(Call {
            burst,
            duration: end.saturating_sub(start),
            step,
        }))
    }
}

/// What the replay makes of operation `id` (row `row` of `columns`), given the links of its
/// chunk and its location's open requests.
fn step(
    id: OpId,
    kind: OpKind,
    columns: &OperationColumns,
    row: usize,
    links: &mut ChunkLinks<'_>,
    requests: &mut FxHashMap<OpId, (bool, u64)>,
) -> Step {
    let blocking = !kind.is_nonblocking();
    let sent = kind.is_send() && !links.sends.of(id).is_empty();
    let received = if kind.is_receive() {
        links.receives.of(id).first().map(|&(_, send)| send)
    } else {
        None
    };
    let bytes = columns.send_bytes(row);
    match (sent, received) {
        (true, Some(recv)) => Step::SendRecv {
            send: id,
            bytes,
            recv,
        },
        (true, None) if !kind.is_receive() => {
            if !blocking {
                requests.insert(id, (true, id));
            }
            Step::Send {
                message: id,
                bytes,
                blocking,
            }
        }
        (false, Some(message)) if !kind.is_send() => {
            if !blocking {
                requests.insert(id, (false, message));
            }
            Step::Recv { message, blocking }
        }
        _ if kind.is_completion() => {
            let (mut sends, mut recvs) = (Vec::new(), Vec::new());
            for (_, op) in links.completions.of(id) {
                match requests.remove(op) {
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
        _ if kind.is_collective() => match links.members.of(id).first() {
            Some(&(_, (instance, members))) => Step::Collective {
                instance,
                kind,
                members,
                send_bytes: bytes,
                recv_bytes: columns.recv_bytes(row),
            },
            None => Step::Local,
        },
        _ => Step::Local,
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
    replay_with(trace, net, false, &mut |r, _| each(r))
}

/// [`replay_trace`], handing each operation whole too (with its simulated times) when
/// `whole`.
fn replay_with(
    trace: &Trace,
    net: &NetworkModel,
    whole: bool,
    each: &mut dyn FnMut(Replayed, Option<Operation>) -> Result<()>,
) -> Result<Unresolved> {
    let links = &Links::read(trace)?;
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
                    whole: whole.then(VecDeque::new),
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
    schedule::replay(
        net,
        &origin,
        &mut Locations {
            trace,
            links,
            cursors,
            each,
        },
    )
}

/// The trace's locations as the replay's program.
struct Locations<'t, 'e> {
    trace: &'t Trace,
    links: &'t Links,
    cursors: Vec<Cursor<'t>>,
    each: &'e mut dyn FnMut(Replayed, Option<Operation>) -> Result<()>,
}

impl schedule::Program for Locations<'_, '_> {
    fn next(&mut self, rank: usize) -> Result<Option<Call>> {
        self.cursors[rank].next(self.trace, self.links)
    }

    fn ended(&mut self, rank: usize, start: Time, end: Time, unresolved: bool) -> Result<()> {
        let cursor = &mut self.cursors[rank];
        let Some((op, s, e, operation)) = cursor.pending.pop_front() else {
            return Ok(());
        };
        let operation = operation.map(|mut o| {
            (o.start, o.end) = (start, end);
            o
        });
        (self.each)(
            Replayed {
                op,
                rank: cursor.rank,
                measured: (s, e),
                simulated: (start, end),
                unresolved,
            },
            operation,
        )
    }
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
    /// Its calls that waited for a partner the trace does not have (kept their measured
    /// duration).
    pub unresolved: u64,
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
    predict(trace, net, None)
}

/// [`simulate`], storing the simulated run in `db` as a trace called `name`: the same
/// operations (messages, requests and collectives matched again by the import) at their
/// simulated times. Routine calls are not kept (the replay does not time them).
pub fn simulate_as_trace(
    db: &crate::Database,
    trace: &Trace,
    net: &NetworkModel,
    name: &str,
) -> Result<Prediction> {
    if db.trace_names()?.iter().any(|n| n == name) {
        return Err(crate::Error::Usage(format!(
            "a trace named {name:?} already exists: store the simulation under another name \
             (AS TRACE other), or drop it first (mtfdb drop {name})"
        )));
    }
    let mut prediction = None;
    let source = format!("SIMULATE WITH {net} of trace {:?}", trace.name());
    db.import_events_from(name, &source, "simulated", |sink| {
        sink.header(trace.header())?;
        for (id, text) in trace.strings().iter().enumerate() {
            sink.string(id as u32, text)?;
        }
        prediction = Some(predict(trace, net, Some(&mut *sink))?);
        sink.finish()
    })?;
    prediction.ok_or_else(|| crate::Error::Usage("the simulation stored nothing".into()))
}

fn predict(
    trace: &Trace,
    net: &NetworkModel,
    mut sink: Option<&mut dyn EventSink>,
) -> Result<Prediction> {
    let first = trace.summary().first_time.unwrap_or(0);
    let mut ranks: FxHashMap<Rank, RankPrediction> = FxHashMap::default();
    let unresolved = replay_with(trace, net, sink.is_some(), &mut |r, operation| {
        let p = ranks.entry(r.rank).or_insert(RankPrediction {
            rank: r.rank,
            end: (0, 0),
            mpi: (0, 0),
            unresolved: 0,
        });
        p.unresolved += u64::from(r.unresolved);
        p.end.0 = p.end.0.max(r.measured.1.saturating_sub(first));
        p.end.1 = p.end.1.max(r.simulated.1.saturating_sub(first));
        p.mpi.0 += r.measured.1.saturating_sub(r.measured.0);
        p.mpi.1 += r.simulated.1.saturating_sub(r.simulated.0);
        match (&mut sink, operation) {
            (Some(sink), Some(op)) => sink.operation(&op),
            _ => Ok(()),
        }
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
