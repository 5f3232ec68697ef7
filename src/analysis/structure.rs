//! Loop models and topology of a stored trace (papers P1 and P2 of the seeds): each process's
//! events as a loop nest ([`loops`]), the nests merged into a global model, the communication
//! topology identified from the communication matrix ([`topology`]), and the logical trace: a
//! process's events with its peers written as directions of that topology, which expands back
//! to any rank.

use super::loops::{self, GlobalModel, LoopNest};
use super::process_events::{self, Alphabet, EventKey};
use super::topology::{self, CommMatrix, Family, IdentifyParams, Topology, Unidentified};
use crate::error::Result;
use crate::model::{CommId, Rank};
use crate::Trace;

/// The loop nest of every process's events (no routine delimiters: loops span calls).
pub fn loop_nests(trace: &Trace) -> Result<(Alphabet, Vec<(Rank, LoopNest)>)> {
    let (alphabet, events) = process_events::extract(trace, false, false)?;
    let nests = events
        .iter()
        .map(|e| (e.rank, loops::nlr(&e.symbols, loops::DEFAULT_MAX_BODY)))
        .collect();
    Ok((alphabet, nests))
}

/// The processes' loop nests merged into one model; collectives are shared events (the same
/// call on every member), sends and receives are each process's own, and loops coalesce only
/// across processes that communicate (P1.4).
pub fn global_model(trace: &Trace) -> Result<(Alphabet, GlobalModel)> {
    let (alphabet, nests) = loop_nests(trace)?;
    let model = merge(&alphabet, &nests);
    Ok((alphabet, model))
}

fn merge(alphabet: &Alphabet, nests: &[(Rank, LoopNest)]) -> GlobalModel {
    let shared = |s: u32| matches!(alphabet.key(s), EventKey::Collective(..));
    let peer = |s: u32| match alphabet.key(s) {
        EventKey::Send(q) | EventKey::Receive(q) => Some(q),
        EventKey::Collective(..) => None,
    };
    loops::merge_communicating(nests.iter().map(|(r, n)| (*r, n)), shared, peer)
}

/// The communication matrix (bytes per sender → receiver): the point-to-point messages, and
/// the all-to-all collectives spread over their members (a trace of `MPI_Alltoall` alone has
/// no point-to-point traffic). With `comm`, one communicator's only; with `within`, only the
/// messages and collective operations of a phase (its message and operation bitmaps).
pub fn matrix(
    trace: &Trace,
    comm: Option<CommId>,
    within: Option<(&roaring::RoaringBitmap, &roaring::RoaringBitmap)>,
) -> Result<CommMatrix> {
    use crate::model::OpKind;
    use crate::store::tables::msg_col::{BYTES, COMM, RECEIVER, SENDER};
    let n = trace.header().processes.len() as u32;
    let mut m = if comm.is_none() && within.is_none() {
        CommMatrix::from_pairs(n, trace.pairs())
    } else {
        let mut m = CommMatrix::new(n);
        let mut id = 0u32;
        for chunk in 0..trace.message_chunk_count() {
            let (rows, cols) = trace.message_columns(chunk, &[SENDER, RECEIVER, COMM, BYTES])?;
            let col = |c: usize| cols[c].as_deref().unwrap_or(&[]);
            for row in 0..rows {
                let this = id;
                id += 1;
                if comm.is_some_and(|c| u64::from(c) != col(COMM)[row]) {
                    continue;
                }
                if within.is_some_and(|(messages, _)| !messages.contains(this)) {
                    continue;
                }
                m.add(
                    col(SENDER)[row] as u32,
                    col(RECEIVER)[row] as u32,
                    col(BYTES)[row],
                );
            }
        }
        m
    };
    let all_to_all = |k: OpKind| {
        matches!(
            k.blocking_collective(),
            Some(OpKind::Alltoall | OpKind::Alltoallv | OpKind::Alltoallw)
        )
    };
    if trace.summary().collective_instances > 0 {
        for c in trace.collective_instances()? {
            if !all_to_all(c.kind) || comm.is_some_and(|id| id != c.comm) {
                continue;
            }
            if within.is_some_and(|(_, ops)| !c.ops.iter().any(|&op| ops.contains(op as u32))) {
                continue;
            }
            if let Some(members) = trace.header().communicator(c.comm) {
                m.add_alltoall(&members.members, c.send_bytes);
            }
        }
    }
    Ok(m)
}

/// Identifies the topology of `matrix` with the default parameters (5% threshold).
pub fn identify(matrix: &CommMatrix) -> std::result::Result<Topology, Unidentified> {
    topology::identify(matrix, &IdentifyParams::default())
}

/// A peer as a direction from a rank in an identified topology: `EAST`, `NORTH`, `NEXT`, or
/// the coordinate offset (`(+1,-1)`) for families without compass names.
pub fn direction(t: &Topology, from: Rank, to: Rank) -> String {
    let (a, b) = (&t.coordinates[from as usize], &t.coordinates[to as usize]);
    let wraps = matches!(
        t.family,
        Family::Torus | Family::Ring | Family::Stencil6Torus | Family::Stencil8Torus
    );
    let delta: Vec<i64> = a
        .iter()
        .zip(b)
        .zip(&t.dims)
        .map(|((&x, &y), &d)| {
            let mut v = i64::from(y) - i64::from(x);
            if wraps && d > 2 {
                let d = i64::from(d);
                if v > d / 2 {
                    v -= d;
                } else if v < -(d / 2) {
                    v += d;
                }
            }
            v
        })
        .collect();
    let geometric = matches!(
        t.family,
        Family::Grid
            | Family::Torus
            | Family::Stencil6Torus
            | Family::Stencil8Grid
            | Family::Stencil8Torus
            | Family::Line
            | Family::Ring
    );
    if geometric {
        let names: &[(&str, &str)] = match delta.len() {
            1 => &[("NEXT", "PREVIOUS")],
            2 => &[("SOUTH", "NORTH"), ("EAST", "WEST")],
            3 => &[("UP", "DOWN"), ("SOUTH", "NORTH"), ("EAST", "WEST")],
            _ => &[],
        };
        if !names.is_empty() {
            let words: Vec<&str> = delta
                .iter()
                .zip(names)
                .filter(|(v, _)| **v != 0)
                .map(|(v, (plus, minus))| if *v > 0 { *plus } else { *minus })
                .collect();
            if delta.iter().all(|v| v.abs() <= 1) && !words.is_empty() {
                return words.join("-");
            }
        }
    }
    let parts: Vec<String> = delta.iter().map(|v| format!("{v:+}")).collect();
    format!("({})", parts.join(","))
}

/// The process a logical trace describes by default: the one with the most neighbours (the
/// lowest such rank), as P2.5 takes a "maximal" process.
pub fn maximal_process(t: &Topology) -> Rank {
    let n = t.coordinates.len() as Rank;
    let degree = |r: Rank| (0..n).filter(|&q| q != r && t.adjacent(r, q)).count();
    (0..n)
        .max_by_key(|&r| (degree(r), std::cmp::Reverse(r)))
        .unwrap_or(0)
}

/// One event of a logical trace: what the process does, to whom as a direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogicalEvent {
    /// A send to the neighbour in that direction.
    Send(String),
    /// A receive from the neighbour in that direction.
    Receive(String),
    /// A collective, as it is (`MPI_Bcast(0)`).
    Collective(String),
}

impl std::fmt::Display for LogicalEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogicalEvent::Send(d) => write!(f, "S {d}"),
            LogicalEvent::Receive(d) => write!(f, "R {d}"),
            LogicalEvent::Collective(c) => f.write_str(c),
        }
    }
}

/// `rank`'s events with its peers as directions of `t`.
pub fn logical_trace(trace: &Trace, t: &Topology, rank: Rank) -> Result<Vec<LogicalEvent>> {
    let (alphabet, events) = process_events::extract(trace, false, false)?;
    let Some(e) = events.iter().find(|e| e.rank == rank) else {
        return Ok(Vec::new());
    };
    Ok(e.symbols
        .iter()
        .map(|&s| match alphabet.key(s) {
            EventKey::Send(q) => LogicalEvent::Send(direction(t, rank, q)),
            EventKey::Receive(q) => LogicalEvent::Receive(direction(t, rank, q)),
            key @ EventKey::Collective(..) => LogicalEvent::Collective(key.to_string()),
        })
        .collect())
}

/// The neighbours of `rank`, by the direction [`direction`] names each one.
pub fn neighbours(t: &Topology, rank: Rank) -> std::collections::BTreeMap<String, Rank> {
    let n = t.coordinates.len() as Rank;
    (0..n)
        .filter(|&q| q != rank && t.adjacent(rank, q))
        .map(|q| (direction(t, rank, q), q))
        .collect()
}

/// A logical trace expanded to `rank`: every direction replaced by that rank's neighbour
/// there, in the alphabet's words (`S5`, `R1`, `MPI_Bcast(0)`); `None` where `rank` has no
/// neighbour in a direction the trace uses.
pub fn expand_logical(t: &Topology, events: &[LogicalEvent], rank: Rank) -> Option<Vec<String>> {
    let around = neighbours(t, rank);
    events
        .iter()
        .map(|e| match e {
            LogicalEvent::Send(d) => around.get(d).map(|q| format!("S{q}")),
            LogicalEvent::Receive(d) => around.get(d).map(|q| format!("R{q}")),
            LogicalEvent::Collective(c) => Some(c.clone()),
        })
        .collect()
}

/// Loop nests as stored with the trace: each process's nest and the global model, as text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopsResult {
    /// The largest loop body NLR looked for.
    pub max_body: u32,
    /// Per process: (rank, events, the nest as text).
    pub processes: Vec<(Rank, u64, String)>,
    /// The merged model as text.
    pub global: String,
}

/// The stored loop models, computed (and stored) when absent or when `refresh`.
pub fn loops(trace: &Trace, refresh: bool) -> Result<LoopsResult> {
    let key = format!("loops/max_body={}", loops::DEFAULT_MAX_BODY);
    if !refresh {
        if let Some(stored) = trace.result::<LoopsResult>(&key)? {
            return Ok(stored);
        }
    }
    let (alphabet, nests) = loop_nests(trace)?;
    let global = merge(&alphabet, &nests);
    let result = LoopsResult {
        max_body: loops::DEFAULT_MAX_BODY as u32,
        processes: nests
            .iter()
            .map(|(r, n)| (*r, n.events(), n.render(|s| alphabet.name(s))))
            .collect(),
        global: global.render(|s| alphabet.name(s)),
    };
    trace.put_result(&key, &result)?;
    Ok(result)
}

/// A topology as stored with the trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TopologyResult {
    /// `2D grid 4x4`, or why none was found.
    pub description: String,
    /// The extents (empty when unknown).
    pub dims: Vec<u32>,
    /// Rank → coordinates (empty when unknown).
    pub coordinates: Vec<Vec<u32>>,
    /// Bytes dropped under the threshold, over all bytes.
    pub dropped_fraction: f64,
}

/// The stored topology of the messages of `comm` and of phase `phase` (with its message and
/// operation bitmaps), identified (and stored) when absent or when `refresh`.
pub fn topology_of(
    trace: &Trace,
    comm: Option<CommId>,
    phase: Option<(u32, &roaring::RoaringBitmap, &roaring::RoaringBitmap)>,
    refresh: bool,
) -> Result<TopologyResult> {
    let key = format!(
        "topology/threshold=0.05,comm={comm:?},phase={:?}",
        phase.map(|p| p.0)
    );
    if !refresh {
        if let Some(stored) = trace.result::<TopologyResult>(&key)? {
            return Ok(stored);
        }
    }
    let m = matrix(trace, comm, phase.map(|(_, messages, ops)| (messages, ops)))?;
    let result = match identify(&m) {
        Ok(t) => TopologyResult {
            description: t.to_string(),
            dims: t.dims.clone(),
            coordinates: t.coordinates.clone(),
            dropped_fraction: t.dropped_fraction,
        },
        Err(u) => TopologyResult {
            description: u.to_string(),
            dims: Vec::new(),
            coordinates: Vec::new(),
            dropped_fraction: u.dropped_fraction,
        },
    };
    trace.put_result(&key, &result)?;
    Ok(result)
}
