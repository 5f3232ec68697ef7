//! Loop models and topology of a stored trace (papers P1 and P2 of the seeds): each process's
//! events as a loop nest ([`loops`](mod@super::loops)), the nests merged into a global model, the communication
//! topology identified from the communication matrix ([`topology`]), and the logical trace: a
//! process's events with its peers written as directions of that topology, which expands back
//! to any rank.

use super::loops::{self, LoopNest, Peer, Role};
use super::process_events::{self, Alphabet, EventKey};
use super::rank_classes::RankModel;
use super::topology::{self, CommMatrix, Family, IdentifyParams, Topology, Unidentified};
use crate::error::Result;
use crate::model::{CommId, Rank};
use crate::Trace;

/// How loop nests are found (NLR, paper P1): `WITH BODY LIMIT k` on `SELECT LOOPS`, `SELECT
/// GLOBAL MODEL` and `SELECT LOGICAL TRACE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LoopParams {
    /// K, the largest loop body NLR looks for, in terms at the body's top level (events or
    /// inner loops); default [`loops::DEFAULT_MAX_BODY`] (64). A repeated run longer than K
    /// is left unrolled.
    pub max_body: u32,
}

impl Default for LoopParams {
    fn default() -> Self {
        LoopParams {
            max_body: loops::DEFAULT_MAX_BODY as u32,
        }
    }
}

impl LoopParams {
    /// The largest K a statement may ask for: NLR's work grows with K for every event.
    pub const MAX: u32 = 4096;
}

/// How the topology is identified: `WITH THRESHOLD x` on `SELECT TOPOLOGY` and `SELECT
/// LOGICAL TRACE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TopologyParams {
    /// Rank pairs whose volume (bytes both ways) is below this share of the largest pair's
    /// volume are dropped before the topology is identified, in thousandths; default 50
    /// (5%, P2.3).
    pub threshold: u32,
}

impl Default for TopologyParams {
    fn default() -> Self {
        TopologyParams { threshold: 50 }
    }
}

impl TopologyParams {
    /// The parameters of [`topology::identify`] these give.
    pub fn identify_params(&self) -> IdentifyParams {
        IdentifyParams {
            threshold: f64::from(self.threshold) / 1000.0,
            ..IdentifyParams::default()
        }
    }
}

/// The loop nest of every process's communication events and routine entries and exits
/// ([`process_events::extract_with_calls`]).
pub fn loop_nests(trace: &Trace, params: &LoopParams) -> Result<(Alphabet, Vec<(Rank, LoopNest)>)> {
    let (alphabet, streams) = process_events::extract_with_calls(trace)?;
    // One table for every process (a clone per process cost its whole length each time).
    let nesting: std::sync::Arc<[i8]> = nesting(&alphabet).into();
    // Processes are independent: on every core (pattern detection does the same).
    use rayon::prelude::*;
    let nests = streams
        .par_iter()
        .map(|(rank, symbols)| {
            // Between processes, so that Ctrl-C stops a long analysis.
            trace.check_cancel()?;
            let nest = loops::nlr_nested(symbols, params.max_body as usize, nesting.clone());
            Ok((*rank, nest))
        })
        .collect::<Result<_>>()?;
    Ok((alphabet, nests))
}

/// Per symbol, how it nests: +1 for a routine's entry, -1 for its exit, 0 for the others
/// (NLR's brackets: loops run over whole routine calls).
pub fn nesting(alphabet: &Alphabet) -> Vec<i8> {
    (0..alphabet.len() as u32)
        .map(|s| match alphabet.key(s) {
            EventKey::Enter(_) => 1,
            EventKey::Leave(_) => -1,
            _ => 0,
        })
        .collect()
}

/// What each event is to the global merge: collectives are shared, sends and receives link
/// their loops to their peers', routine entries and exits are local.
pub fn role(alphabet: &Alphabet, symbol: u32) -> Role {
    match alphabet.key(symbol) {
        EventKey::Send(q) => Role::Send(Peer::Rank(q)),
        EventKey::Receive(q) => Role::Receive(Peer::Rank(q)),
        EventKey::Collective(..) => Role::Collective,
        EventKey::Enter(_) | EventKey::Leave(_) => Role::Local,
    }
}

/// The processes' loop nests merged into one model; collectives are shared events (the same
/// call on every member), sends and receives are each process's own, and loops coalesce only
/// across processes that communicate (P1.4); ranks that do the same relative to themselves
/// are merged once ([`rank_classes`](super::rank_classes)).
pub fn global_model(trace: &Trace, params: &LoopParams) -> Result<RankModel> {
    let (alphabet, nests) = loop_nests(trace, params)?;
    Ok(RankModel::merge(alphabet, &nests))
}

/// The processes' loop nests merged into one model (P1.4, see [`global_model`]), over a copy
/// of `alphabet` (the model keeps one).
pub fn merge_nests(alphabet: &Alphabet, nests: &[(Rank, LoopNest)]) -> RankModel {
    RankModel::merge(alphabet.clone(), nests)
}

/// The communication matrix (bytes per sender → receiver): the point-to-point messages, and
/// the all-to-all collectives spread over their members (a trace of `MPI_Alltoall` alone has
/// no point-to-point traffic). With `comm`, one communicator's only; with `within`, only the
/// messages and collective operations of a phase (its message and operation bitmaps).
pub fn matrix(
    trace: &Trace,
    comm: Option<CommId>,
    within: Option<(&roaring::RoaringTreemap, &roaring::RoaringTreemap)>,
) -> Result<CommMatrix> {
    use crate::model::OpKind;
    use crate::store::MessageField as F;
    let n = trace.header().processes.len() as u32;
    let mut m = if comm.is_none() && within.is_none() {
        CommMatrix::from_pairs(n, trace.pairs())
    } else {
        let mut m = CommMatrix::new(n);
        for chunk in 0..trace.message_chunk_count() {
            let messages =
                trace.message_columns(chunk, &[F::Sender, F::Receiver, F::Comm, F::Bytes])?;
            for row in 0..messages.rows() {
                if comm.is_some_and(|c| c != messages.comm(row)) {
                    continue;
                }
                if within.is_some_and(|(phase, _)| !phase.contains(messages.id(row))) {
                    continue;
                }
                m.add(
                    messages.sender(row),
                    messages.receiver(row),
                    messages.bytes(row),
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
            if within.is_some_and(|(_, ops)| !c.ops.iter().any(|&op| ops.contains(op))) {
                continue;
            }
            if let Some(members) = trace.header().communicator(c.comm) {
                m.add_alltoall(&members.members, c.send_bytes);
            }
        }
    }
    Ok(m)
}

/// Identifies the topology of `matrix` (the default parameters drop pairs under 5%).
pub fn identify(
    matrix: &CommMatrix,
    params: &TopologyParams,
) -> std::result::Result<Topology, Unidentified> {
    topology::identify(matrix, &params.identify_params())
}

/// A peer as a direction from a rank in an identified topology: `EAST`, `NORTH`, `NEXT`, or
/// the coordinate offset (`(+1,-1)`) for families without compass names.
pub fn direction(t: &Topology, from: Rank, to: Rank) -> String {
    let (a, b) = (&t.coordinates[from as usize], &t.coordinates[to as usize]);
    let wraps = t.family.wraps();
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogicalEvent {
    /// A send to the neighbour in that direction.
    Send(String),
    /// A receive from the neighbour in that direction.
    Receive(String),
    /// A collective, as it is (`MPI_Bcast(0)`).
    Collective(String),
    /// Entry into the named routine.
    Enter(String),
    /// Exit from the routine entered last.
    Leave,
}

impl std::fmt::Display for LogicalEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogicalEvent::Send(d) => write!(f, "S {d}"),
            LogicalEvent::Receive(d) => write!(f, "R {d}"),
            LogicalEvent::Collective(c) => f.write_str(c),
            LogicalEvent::Enter(r) => write!(f, "{r}("),
            LogicalEvent::Leave => f.write_str(")"),
        }
    }
}

/// `rank`'s events, its routine entries and exits included, with its peers as directions of
/// `t` (a peer that is no neighbour of `t` is written as its coordinate offset).
pub fn logical_trace(trace: &Trace, t: &Topology, rank: Rank) -> Result<Vec<LogicalEvent>> {
    let (alphabet, symbols) = process_events::extract_rank_with_calls(trace, rank)?;
    Ok(symbols
        .iter()
        .map(|&s| match alphabet.key(s) {
            EventKey::Send(q) => LogicalEvent::Send(direction(t, rank, q)),
            EventKey::Receive(q) => LogicalEvent::Receive(direction(t, rank, q)),
            key @ EventKey::Collective(..) => LogicalEvent::Collective(key.to_string()),
            EventKey::Enter(_) => {
                LogicalEvent::Enter(alphabet.routine(s).unwrap_or_default().to_string())
            }
            EventKey::Leave(_) => LogicalEvent::Leave,
        })
        .collect())
}

/// A logical trace compressed into loops (P2's pipeline: logicalize, then compress the loops
/// of the one logical trace), as text.
///
/// ```
/// use mtfdb::analysis::structure::{logical_nest, LogicalEvent, LoopParams};
/// let round = [
///     LogicalEvent::Enter("step".into()),
///     LogicalEvent::Send("EAST".into()),
///     LogicalEvent::Receive("WEST".into()),
///     LogicalEvent::Leave,
/// ];
/// let events: Vec<LogicalEvent> = (0..50).flat_map(|_| round.clone()).collect();
/// assert_eq!(logical_nest(&events, &LoopParams::default()), "for i0 in 0..50 { step( S EAST R WEST ) }\n");
/// ```
pub fn logical_nest(events: &[LogicalEvent], params: &LoopParams) -> String {
    let mut ids: std::collections::HashMap<&LogicalEvent, u32> = Default::default();
    let mut words: Vec<&LogicalEvent> = Vec::new();
    let symbols: Vec<u32> = events
        .iter()
        .map(|e| {
            *ids.entry(e).or_insert_with(|| {
                words.push(e);
                words.len() as u32 - 1
            })
        })
        .collect();
    let nesting: Vec<i8> = words
        .iter()
        .map(|e| match e {
            LogicalEvent::Enter(_) => 1,
            LogicalEvent::Leave => -1,
            _ => 0,
        })
        .collect();
    loops::nlr_nested(&symbols, params.max_body as usize, &nesting[..])
        .render_nested(|s| words[s as usize].to_string(), &nesting)
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
/// there, in the alphabet's words (`S5`, `R1`, `MPI_Bcast(0)`, `solve(`, `)`); `None` where `rank` has no
/// neighbour in a direction the trace uses.
pub fn expand_logical(t: &Topology, events: &[LogicalEvent], rank: Rank) -> Option<Vec<String>> {
    let around = neighbours(t, rank);
    events
        .iter()
        .map(|e| match e {
            LogicalEvent::Send(d) => around.get(d).map(|q| format!("S{q}")),
            LogicalEvent::Receive(d) => around.get(d).map(|q| format!("R{q}")),
            LogicalEvent::Collective(_) | LogicalEvent::Enter(_) | LogicalEvent::Leave => {
                Some(e.to_string())
            }
        })
        .collect()
}

/// A process's main loop in the program's terms: how many routine calls it runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MainLoop {
    /// Iterations of the loop.
    pub count: u64,
    /// The routine whose call begins the loop's body (`solve`), if a call does.
    pub routine: Option<String>,
    /// Calls of that routine per iteration, not counting calls nested in them (8 when each
    /// iteration of the model runs 8 iterations of the program's loop).
    pub calls_per_iteration: u64,
}

impl MainLoop {
    /// The main loop of `nest` ([`LoopNest::main_loop`]) and the calls it runs.
    pub fn of(nest: &LoopNest, alphabet: &Alphabet) -> Option<MainLoop> {
        let (count, body) = nest.main_loop()?;
        let routine = first_symbol(body).and_then(|s| match alphabet.key(s) {
            EventKey::Enter(_) => Some(s),
            _ => None,
        });
        let Some(enter) = routine else {
            return Some(MainLoop {
                count,
                routine: None,
                calls_per_iteration: 0,
            });
        };
        Some(MainLoop {
            count,
            routine: alphabet.routine(enter).map(str::to_string),
            calls_per_iteration: outer_calls(body, enter, alphabet, &mut 0),
        })
    }
}

/// `3 iterations of 8 solve calls (24 calls)`, `10 iterations, one solve call each`, or
/// `10 iterations` without a routine.
///
/// ```
/// use mtfdb::analysis::structure::MainLoop;
/// let m = MainLoop { count: 3, routine: Some("solve".into()), calls_per_iteration: 8 };
/// assert_eq!(m.to_string(), "3 iterations of 8 solve calls (24 calls)");
/// ```
impl std::fmt::Display for MainLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.routine, self.calls_per_iteration) {
            (Some(r), 1) => write!(f, "{} iterations, one {r} call each", self.count),
            (Some(r), k) => write!(
                f,
                "{} iterations of {k} {r} calls ({} calls)",
                self.count,
                self.count.saturating_mul(k)
            ),
            (None, _) => write!(f, "{} iterations", self.count),
        }
    }
}

fn first_symbol(items: &[loops::Item]) -> Option<u32> {
    match items.first()? {
        loops::Item::Symbol(s) => Some(*s),
        loops::Item::Loop { body, .. } => first_symbol(body),
    }
}

/// Entries `enter` at bracket depth 0 of `items` (`depth` is the running depth), counting
/// each loop's body as many times as it runs.
fn outer_calls(items: &[loops::Item], enter: u32, alphabet: &Alphabet, depth: &mut i64) -> u64 {
    let mut calls = 0u64;
    for item in items {
        match item {
            loops::Item::Symbol(s) => match alphabet.key(*s) {
                EventKey::Enter(_) => {
                    if *depth == 0 && *s == enter {
                        calls += 1;
                    }
                    *depth += 1;
                }
                EventKey::Leave(_) => *depth -= 1,
                _ => {}
            },
            loops::Item::Loop { count, body } => {
                let per = outer_calls(body, enter, alphabet, depth);
                calls = calls.saturating_add(count.saturating_mul(per));
            }
        }
    }
    calls
}

/// One process's loop model as stored with the trace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessLoops {
    /// The world rank.
    pub rank: Rank,
    /// Its events (communication events and routine entries and exits).
    pub events: u64,
    /// Its loop nest as text.
    pub nest: String,
    /// Its main loop, if it has a loop.
    pub main_loop: Option<MainLoop>,
}

/// Loop nests as stored with the trace: each process's nest, as text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopsResult {
    /// The largest loop body NLR looked for.
    pub max_body: u32,
    /// Per process, in rank order.
    pub processes: Vec<ProcessLoops>,
}

impl crate::store::StoredResult for LoopsResult {
    const SCHEMA_VERSION: u32 = 1;
}

/// The global model as stored with the trace, as text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GlobalModelResult {
    /// The largest loop body NLR looked for.
    pub max_body: u32,
    /// The merged model as text ([`RankModel::render`]).
    pub text: String,
}

impl crate::store::StoredResult for GlobalModelResult {
    /// 2: peers relative to the rank in constructs of several ranks.
    const SCHEMA_VERSION: u32 = 2;
}

/// The key a structure result is stored under: `what` and NLR's parameters (`calls`: the
/// streams hold routine entries and exits, which models stored before did not).
pub fn loops_key(what: &str, params: &LoopParams) -> String {
    format!("{what}/max_body={},calls", params.max_body)
}

/// The stored loop models of every process, computed (and stored) when absent or when
/// `refresh`.
pub fn loops(trace: &Trace, params: &LoopParams, refresh: bool) -> Result<LoopsResult> {
    trace.stored_result(&loops_key("loops", params), refresh, || {
        let (alphabet, nests) = loop_nests(trace, params)?;
        let nesting = nesting(&alphabet);
        Ok(LoopsResult {
            max_body: params.max_body,
            processes: nests
                .iter()
                .map(|(rank, n)| ProcessLoops {
                    rank: *rank,
                    events: n.events(),
                    nest: n.render_nested(|s| alphabet.name(s), &nesting),
                    main_loop: MainLoop::of(n, &alphabet),
                })
                .collect(),
        })
    })
}

/// The stored global model, computed (and stored) when absent or when `refresh`; apart from
/// [`loops()`], so that asking for one process's nest never pays for the merge.
pub fn global_model_text(
    trace: &Trace,
    params: &LoopParams,
    refresh: bool,
) -> Result<GlobalModelResult> {
    trace.stored_result(&loops_key("global-model", params), refresh, || {
        let model = global_model(trace, params)?;
        Ok(GlobalModelResult {
            max_body: params.max_body,
            text: model.render(),
        })
    })
}

/// A topology as stored with the trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TopologyResult {
    /// `2D grid 4x4`, or why none was found.
    pub description: String,
    /// Bytes dropped under the threshold, over all bytes.
    pub dropped_fraction: f64,
    /// The topology, when one was identified.
    pub topology: Option<Topology>,
}

impl crate::store::StoredResult for TopologyResult {
    const SCHEMA_VERSION: u32 = 1;
}

/// The key the topology of `comm` and phase `phase` identified with `params` is stored under.
pub fn topology_key(comm: Option<CommId>, phase: Option<u32>, params: &TopologyParams) -> String {
    format!(
        "topology/threshold={},comm={comm:?},phase={phase:?},whole",
        params.identify_params().threshold
    )
}

/// The stored topology of the messages of `comm` and of phase `phase` (with its message and
/// operation bitmaps), identified (and stored) when absent or when `refresh`.
pub fn topology_of(
    trace: &Trace,
    comm: Option<CommId>,
    phase: Option<(u32, &roaring::RoaringTreemap, &roaring::RoaringTreemap)>,
    params: &TopologyParams,
    refresh: bool,
) -> Result<TopologyResult> {
    let key = topology_key(comm, phase.map(|p| p.0), params);
    trace.stored_result(&key, refresh, || {
        let m = matrix(trace, comm, phase.map(|(_, messages, ops)| (messages, ops)))?;
        Ok(match identify(&m, params) {
            Ok(t) => TopologyResult {
                description: t.to_string(),
                dropped_fraction: t.dropped_fraction,
                topology: Some(t),
            },
            Err(u) => TopologyResult {
                description: u.to_string(),
                dropped_fraction: u.dropped_fraction,
                topology: None,
            },
        })
    })
}
