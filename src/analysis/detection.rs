//! Pattern and phase detection over a stored trace, with their results kept as views of the
//! trace (a pattern catalogue with each pattern's operations and messages as bitmaps, and the
//! phase tree with each phase's time span), under keys that name the parameters they were
//! computed with: asking again with the same parameters reads them back.
//!
//! The steps (thesis Figures 4.4 and 5.1): each process's events ([`process_events`]), its
//! process patterns ([`patterns`]), communication patterns across processes
//! ([`comm_patterns`]), then the sequence of communication-pattern instances by start time cut
//! into phases ([`phases`](mod@super::phases)).

use std::fmt;
use std::ops::Range;
use std::time::Instant;

use roaring::RoaringTreemap;
use serde::{Deserialize, Serialize};

use super::comm_patterns::{self, CommPattern, ProcessPatternOccurrences};
use super::phases::{self, Mode, PhaseTree};
use super::process_events::{self, Alphabet, ProcessEvents};
use crate::error::Result;
use crate::model::{OpKind, Rank, RoutineCall, Time};
use crate::store::OpChunkInfo;
use crate::Trace;

/// How process patterns are found: `WITH DELIMITERS ON|OFF, TANDEMS ON|OFF, ENVELOPE ON|OFF`
/// on the pattern statements (and on the phase statements, whose instances they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PatternParams {
    /// Routine calls delimit patterns (the thesis's routine-call-directed variant): no
    /// pattern crosses the boundary of the routine call that directly contains its events;
    /// default on.
    pub delimiters: bool,
    /// Tandem repeats (a run repeated back to back) are collapsed to one copy before the
    /// search, their copies counted; off, every repetition stays in the sequence; default on.
    pub tandems: bool,
    /// Events are told apart by their envelope too (tag, size, datatype); default off.
    pub envelope: bool,
}

impl Default for PatternParams {
    fn default() -> Self {
        PatternParams {
            delimiters: true,
            tandems: true,
            envelope: false,
        }
    }
}

impl PatternParams {
    /// The key the patterns found with these parameters are stored under.
    pub(crate) fn key(&self) -> String {
        format!(
            "patterns/delimiters={},tandems={},envelope={}",
            self.delimiters, self.tandems, self.envelope
        )
    }

    /// Where each process's own patterns are stored (under the same prefix, so that `REFRESH
    /// PATTERNS` drops them with the rest).
    fn processes_key(&self) -> String {
        format!("{}/processes", self.key())
    }
}

/// One process pattern of one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessPatternRecord {
    /// Its events in words (`S2 S3 R2`).
    pub sequence: String,
    /// Number of events.
    pub length: u32,
    /// Start positions of its occurrences in the process's event sequence, 1-based.
    pub positions: Vec<u64>,
}

/// The process patterns of one process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// The world rank.
    pub rank: Rank,
    /// Its communication events.
    pub events: u64,
    /// Its patterns, by first position.
    pub patterns: Vec<ProcessPatternRecord>,
}

/// One communication pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommPatternRecord {
    /// 1-based, in the order of first occurrence (what `IN PATTERN n` names).
    pub id: u32,
    /// The processes it involves.
    pub processes: Vec<Rank>,
    /// Its shape in words: `P0: R1 S1 | P1: R0 S0`.
    pub shape: String,
    /// Events in its first occurrence (tandem copies included).
    pub events: u32,
    /// Its occurrences as (first event start, last event start).
    pub occurrences: Vec<(Time, Time)>,
    /// The process of each occurrence's first event.
    pub first_ranks: Vec<Rank>,
    /// The operations of all its occurrences (roaring, serialized).
    // Written as one run of bytes, not a sequence of numbers: read back at memcpy speed.
    #[serde(with = "serde_bytes")]
    pub ops: Vec<u8>,
    /// The messages of all its occurrences (roaring, serialized).
    // Written as one run of bytes, not a sequence of numbers: read back at memcpy speed.
    #[serde(with = "serde_bytes")]
    pub messages: Vec<u8>,
}

impl CommPatternRecord {
    /// The operations of its occurrences.
    pub fn op_ids(&self) -> RoaringTreemap {
        deserialize(&self.ops)
    }

    /// The messages of its occurrences.
    pub fn message_ids(&self) -> RoaringTreemap {
        deserialize(&self.messages)
    }
}

/// A stored bitmap (results are sealed with a checksum, so a damaged one never gets here).
fn deserialize(bytes: &[u8]) -> RoaringTreemap {
    RoaringTreemap::deserialize_from(bytes).unwrap_or_default()
}

/// What pattern detection found in a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternResult {
    /// The parameters it was computed with.
    pub params: PatternParams,
    /// Per process.
    pub processes: Vec<ProcessRecord>,
    /// The communication patterns.
    pub patterns: Vec<CommPatternRecord>,
    /// Communication events in all.
    pub events: u64,
    /// Seconds the detection took.
    pub seconds: f64,
}

// Version 2: operation and message ids are 64-bit (roaring treemaps). Version 3: each
// process's own patterns are stored apart ([`communication_patterns`]).
impl crate::store::StoredResult for PatternResult {
    const SCHEMA_VERSION: u32 = 3;
}

impl PatternResult {
    /// The communication pattern `id`.
    pub fn pattern(&self, id: u32) -> Option<&CommPatternRecord> {
        self.patterns.iter().find(|p| p.id == id)
    }

    /// Every occurrence of every communication pattern as (start, end, pattern id, process
    /// of its first event), by start.
    pub fn instances(&self) -> Vec<(Time, Time, u32, Rank)> {
        let mut out: Vec<(Time, Time, u32, Rank)> = self
            .patterns
            .iter()
            .flat_map(|p| {
                p.occurrences
                    .iter()
                    .zip(&p.first_ranks)
                    .map(move |(&(s, e), &r)| (s, e, p.id, r))
            })
            .collect();
        out.sort_unstable();
        out
    }
}

/// The process patterns of one process's events.
pub(crate) fn process_patterns(
    events: &ProcessEvents,
    params: &PatternParams,
) -> Vec<ProcessPatternOccurrences> {
    use super::patterns::{repeats::detect_reduced, Event, Options};
    let mut input = Vec::with_capacity(events.len() + 16);
    let mut index = Vec::with_capacity(events.len());
    for i in 0..events.len() {
        if params.delimiters && i > 0 && events.blocks[i] != events.blocks[i - 1] {
            input.push(Event::Delimiter);
            index.push(usize::MAX);
        }
        input.push(Event::Mpi(events.symbols[i]));
        index.push(i);
    }
    let options = Options {
        remove_tandems: params.tandems,
        min_len: 2,
    };
    // Positions come back in the input with delimiters; map them to event indexes.
    let to_event = |pos: usize| -> usize {
        index[pos..]
            .iter()
            .copied()
            .find(|&i| i != usize::MAX)
            .unwrap_or(events.len())
    };
    let (patterns, reduction) = detect_reduced(&input, &options);
    let mut found: Vec<ProcessPatternOccurrences> = patterns
        .into_iter()
        .map(|p| ProcessPatternOccurrences {
            symbols: p.symbols.clone(),
            occurrences: p
                .occurrences()
                .map(|(start, end)| (to_event(start), to_event_end(&index, end)))
                .collect(),
            runs: p
                .repeats_of(0)
                .iter()
                .map(|r| (r.offset, r.unit_len, r.copies))
                .collect(),
        })
        .collect();
    if params.tandems {
        found.extend(uncovered_tandems(events, &reduction, &found));
    }
    found
}

/// The tandem repeats that no pattern covers, each unit as a pattern whose occurrences are its
/// copies. Tandem removal folds a run into one occurrence of its unit, so a process that does
/// the same exchange eight times in a row (a ping-pong) would otherwise show no pattern.
/// `reduction` is the tandem reduction pattern detection made of `events`' symbols.
fn uncovered_tandems(
    events: &ProcessEvents,
    reduction: &super::patterns::Reduction,
    found: &[ProcessPatternOccurrences],
) -> Vec<ProcessPatternOccurrences> {
    // Events some pattern's occurrence (or an earlier run) covers.
    let mut covered = vec![false; events.len()];
    for &(s, e) in found.iter().flat_map(|p| &p.occurrences) {
        covered[s..e].fill(true);
    }
    let mut units: Vec<ProcessPatternOccurrences> = Vec::new();
    // Runs come by start, an enclosing run before those nested in it.
    for run in &reduction.runs {
        let start = reduction.origin[run.start];
        let unit = run.unit_len;
        // Plain runs only: a unit of two events or more, with no run nested in it.
        if unit < 2 || run.end - start != unit * run.copies {
            continue;
        }
        if covered[start..run.end].contains(&true) {
            continue;
        }
        covered[start..run.end].fill(true);
        let symbols = events.symbols[start..start + unit].to_vec();
        let copies = (0..run.copies).map(|k| (start + k * unit, start + (k + 1) * unit));
        match units.iter_mut().find(|u| u.symbols == symbols) {
            Some(u) => u.occurrences.extend(copies),
            None => units.push(ProcessPatternOccurrences {
                symbols,
                occurrences: copies.collect(),
                runs: Vec::new(),
            }),
        }
    }
    for u in &mut units {
        u.occurrences.sort_unstable();
    }
    units
}

/// The event index just past input position `end - 1`.
fn to_event_end(index: &[usize], end: usize) -> usize {
    index[..end]
        .iter()
        .rev()
        .copied()
        .find(|&i| i != usize::MAX)
        .map_or(0, |i| i + 1)
}

/// Finds the process and communication patterns of `trace`.
pub fn detect_patterns(trace: &Trace, params: &PatternParams) -> Result<PatternResult> {
    let started = Instant::now();
    let (alphabet, events) = process_events::extract(trace, params.delimiters, params.envelope)?;
    let per_process: Vec<Vec<ProcessPatternOccurrences>> = {
        use rayon::prelude::*;
        events
            .par_iter()
            .map(|e| {
                // Between processes, so that Ctrl-C stops a long detection.
                trace.check_cancel()?;
                Ok(process_patterns(e, params))
            })
            .collect::<Result<_>>()?
    };
    trace.check_cancel()?;
    let messages = trace.message_ops()?;
    let collectives = trace.collective_instances()?;
    let comm = comm_patterns::assemble(&events, &per_process, &messages, &collectives);
    let processes = events
        .iter()
        .zip(&per_process)
        .map(|(e, pats)| process_record(&alphabet, e, pats))
        .collect();
    Ok(PatternResult {
        params: *params,
        processes,
        patterns: comm.iter().map(|p| comm_record(&alphabet, p)).collect(),
        events: events.iter().map(|e| e.len() as u64).sum(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn process_record(
    alphabet: &Alphabet,
    events: &ProcessEvents,
    patterns: &[ProcessPatternOccurrences],
) -> ProcessRecord {
    let mut list: Vec<ProcessPatternRecord> = patterns
        .iter()
        .filter(|p| !p.occurrences.is_empty())
        .map(|p| ProcessPatternRecord {
            sequence: p.render(alphabet),
            length: p.symbols.len() as u32,
            positions: p.occurrences.iter().map(|&(s, _)| s as u64 + 1).collect(),
        })
        .collect();
    list.sort_by(|a, b| (a.positions[0], &a.sequence).cmp(&(b.positions[0], &b.sequence)));
    ProcessRecord {
        rank: events.rank,
        events: events.len() as u64,
        patterns: list,
    }
}

/// `bitmap` as stored (see [`crate::store::put_bitmap`]).
fn serialize(mut bitmap: RoaringTreemap) -> Vec<u8> {
    let mut out = Vec::new();
    crate::store::put_bitmap(&mut bitmap, &mut out);
    out
}

fn comm_record(alphabet: &Alphabet, p: &CommPattern) -> CommPatternRecord {
    // One sort of all ids, instead of a union per occurrence (100,000 of them).
    let union = |each: &dyn Fn(&comm_patterns::CommOccurrence) -> &RoaringTreemap| {
        let mut ids: Vec<u64> = p.occurrences.iter().flat_map(|o| each(o).iter()).collect();
        ids.sort_unstable();
        ids.dedup();
        RoaringTreemap::from_sorted_iter(ids).expect("sorted ids")
    };
    let ops = union(&|o| &o.ops);
    let messages = union(&|o| &o.messages);
    CommPatternRecord {
        id: p.id,
        processes: p.processes.clone(),
        shape: p.describe(alphabet),
        events: p.occurrences.first().map_or(0, |o| o.events as u32),
        occurrences: p.occurrences.iter().map(|o| (o.start, o.end)).collect(),
        first_ranks: p.occurrences.iter().map(|o| o.first_rank).collect(),
        ops: serialize(ops),
        messages: serialize(messages),
    }
}

/// Every process's own patterns, stored apart from the communication patterns: at many
/// ranks they are most of the result, and only `SELECT PATTERNS FOR PROCESS(n)` reads them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ProcessRecords(Vec<ProcessRecord>);

impl crate::store::StoredResult for ProcessRecords {
    const SCHEMA_VERSION: u32 = 1;
}

/// The stored communication patterns for `params`, computed (and stored) when absent or when
/// `refresh`; `processes` is empty when they are read back ([`patterns`] reads those too).
/// For phases, `SELECT COMMUNICATION PATTERNS` and `IN PATTERN n`, which need no process's
/// own patterns: at 16,384 ranks reading those back took a sixth of `SELECT PHASES`.
pub fn communication_patterns(
    trace: &Trace,
    params: &PatternParams,
    refresh: bool,
) -> Result<PatternResult> {
    if !refresh {
        if let Some(stored) = trace.result(&params.key())? {
            return Ok(stored);
        }
    }
    store_patterns(trace, params, detect_patterns(trace, params)?)
}

/// Stores `found` as the patterns for `params`: each process's own apart, first, so that where
/// the communication patterns are stored, so are they.
fn store_patterns(
    trace: &Trace,
    params: &PatternParams,
    mut found: PatternResult,
) -> Result<PatternResult> {
    let processes = ProcessRecords(std::mem::take(&mut found.processes));
    trace.put_result(&params.processes_key(), &processes)?;
    trace.put_result(&params.key(), &found)?;
    found.processes = processes.0;
    Ok(found)
}

/// The stored patterns for `params`, each process's own included, computed (and stored) when
/// absent or when `refresh`.
pub fn patterns(trace: &Trace, params: &PatternParams, refresh: bool) -> Result<PatternResult> {
    let mut found = communication_patterns(trace, params, refresh)?;
    if found.processes.is_empty() {
        match trace.result::<ProcessRecords>(&params.processes_key())? {
            Some(processes) => found.processes = processes.0,
            // Stored apart and missing: detected again, both stored anew.
            None => return communication_patterns(trace, params, true),
        }
    }
    Ok(found)
}

/// The patterns stored for `params`, if they were detected before (reads, never computes:
/// for `EXPLAIN`).
pub fn stored_patterns(trace: &Trace, params: &PatternParams) -> Result<Option<PatternResult>> {
    trace.result(&params.key())
}

/// The phases stored for `params`, if they were detected before (reads, never computes).
pub fn stored_phases(trace: &Trace, params: &PhaseParams) -> Result<Option<PhaseResult>> {
    trace.result(&params.key())
}

/// Recomputes the default patterns and phases and then replaces every stored analysis result
/// of the trace with them (`REFRESH PATTERNS`): an error or a cancellation while computing
/// leaves the stored results as they were.
pub fn refresh(trace: &Trace, params: &PatternParams) -> Result<(PatternResult, PhaseResult)> {
    let phase_params = PhaseParams {
        patterns: *params,
        ..PhaseParams::default()
    };
    let found = detect_patterns(trace, params)?;
    let phases = detect_phases(trace, &found, &phase_params)?;
    trace.check_cancel()?;
    trace.drop_results("")?;
    let found = store_patterns(trace, params, found)?;
    let phases = trace.stored_result(&phase_params.key(), true, || Ok(phases))?;
    Ok((found, phases))
}

/// How phases are cut: `WITH THRESHOLD s0, THESIS ARITHMETIC` and the pattern parameters on
/// `SELECT PHASES` and `SHOW PHASE TREE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct PhaseParams {
    /// The patterns whose instances are segmented; default [`PatternParams::default`].
    pub patterns: PatternParams,
    /// The strength threshold s0 a cut must pass, in thousandths (no unit: a segmentation
    /// strength); default 0.
    pub threshold: i32,
    /// Reproduce the arithmetic of the thesis's published tables (5.2 and 5.8) instead of the
    /// corrected formulas ([`Mode::ThesisCompat`]); default off.
    pub thesis_compat: bool,
}

impl PhaseParams {
    /// The key the phases found with these parameters are stored under.
    pub(crate) fn key(&self) -> String {
        format!(
            "phases/{},s0={},thesis={}",
            self.patterns.key(),
            self.threshold,
            self.thesis_compat
        )
    }
}

/// A node of the segmentation tree, with the time it spans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseNodeRecord {
    /// `S<id>` in the thesis's numbering.
    pub id: u32,
    /// First and last pattern instance (1-based, inclusive).
    pub first: u32,
    /// Last pattern instance.
    pub last: u32,
    /// D_JS of the best cut.
    pub d: f64,
    /// Last instance of the left part of the best cut.
    pub cut: u32,
    /// The BIC threshold τ.
    pub tau: f64,
    /// The segmentation strength (none for a single instance).
    pub strength: Option<f64>,
    /// Parent node.
    pub parent: Option<u32>,
    /// Whether it is a leaf: a phase.
    pub leaf: bool,
    /// Start of its first instance.
    pub start: Time,
    /// End of its last instance.
    pub end: Time,
}

/// A phase: a leaf of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRecord {
    /// 1-based in time order (what `IN PHASE n` names).
    pub number: u32,
    /// Its node id in the tree.
    pub node: u32,
    /// First and last instance (1-based).
    pub first: u32,
    /// Last instance.
    pub last: u32,
    /// Start of its first instance.
    pub start: Time,
    /// Last event of its last instance.
    pub end: Time,
    /// The communication patterns it holds, ascending.
    pub patterns: Vec<u32>,
    /// The highest routine containing its start that began after the previous phase, with
    /// the number of its calls that start in the phase: `solve (50 calls)`.
    pub routine: String,
    /// Its operations: every process's operations from its first instance until the next
    /// phase begins (roaring, serialized).
    // Written as one run of bytes, not a sequence of numbers: read back at memcpy speed.
    #[serde(with = "serde_bytes")]
    pub ops: Vec<u8>,
    /// Its messages: those whose send is one of its operations (roaring, serialized).
    // Written as one run of bytes, not a sequence of numbers: read back at memcpy speed.
    #[serde(with = "serde_bytes")]
    pub messages: Vec<u8>,
}

impl PhaseRecord {
    /// The operations of the phase.
    pub fn op_ids(&self) -> RoaringTreemap {
        deserialize(&self.ops)
    }

    /// The messages of the phase.
    pub fn message_ids(&self) -> RoaringTreemap {
        deserialize(&self.messages)
    }
}

/// What phase detection found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// The parameters it was computed with.
    pub params: PhaseParams,
    /// The whole tree, in the thesis's numbering.
    pub nodes: Vec<PhaseNodeRecord>,
    /// The phases, in time order.
    pub phases: Vec<PhaseRecord>,
    /// The tree drawn as text.
    pub tree: String,
    /// Seconds the segmentation took (patterns not included).
    pub seconds: f64,
}

// Version 2: operation and message ids are 64-bit (roaring treemaps).
impl crate::store::StoredResult for PhaseResult {
    const SCHEMA_VERSION: u32 = 2;
}

impl PhaseResult {
    /// Phase `number`.
    pub fn phase(&self, number: u32) -> Option<&PhaseRecord> {
        self.phases.iter().find(|p| p.number == number)
    }
}

/// Every routine call, grouped by rank: one sorted vector rather than a map of one vector per
/// rank (16,384 of them at 16,384 ranks).
struct CallsByRank {
    calls: Vec<RoutineCall>,
    /// Where each rank's calls begin in `calls`, by rank, and where the last rank's end: ranks
    /// are numbered from 0 to the process count (the import checks it). A search of a list of
    /// the ranks with calls, once per rank, missed the cache at 16,384 ranks.
    first: Vec<usize>,
}

impl CallsByRank {
    fn new(mut calls: Vec<RoutineCall>) -> CallsByRank {
        calls.sort_by_key(|c| c.rank);
        let ranks = calls.last().map_or(0, |c| c.rank as usize + 1);
        let mut first = Vec::with_capacity(ranks + 1);
        for (i, c) in calls.iter().enumerate() {
            // Ranks without calls begin (and end) where the next rank's calls begin.
            while first.len() <= c.rank as usize {
                first.push(i);
            }
        }
        first.push(calls.len());
        CallsByRank { calls, first }
    }

    /// `rank`'s calls, in their stored order.
    fn of(&self, rank: Rank) -> &[RoutineCall] {
        let rank = rank as usize;
        match (self.first.get(rank), self.first.get(rank + 1)) {
            (Some(&start), Some(&end)) => &self.calls[start..end],
            _ => &[],
        }
    }
}

/// Cuts the sequence of communication-pattern instances of `patterns` into phases.
pub fn detect_phases(
    trace: &Trace,
    patterns: &PatternResult,
    params: &PhaseParams,
) -> Result<PhaseResult> {
    let instances = patterns.instances();
    let started = Instant::now();
    let symbols: Vec<u32> = instances.iter().map(|i| i.2).collect();
    let tree = phases::segment(
        &symbols,
        &phases::Params {
            s0: f64::from(params.threshold) / 1000.0,
            mode: if params.thesis_compat {
                Mode::ThesisCompat
            } else {
                Mode::Correct
            },
        },
    );
    let seconds = started.elapsed().as_secs_f64();
    let span = |first: usize, last: usize| -> (Time, Time) {
        let start = instances[first - 1].0;
        let end = instances[first - 1..last]
            .iter()
            .map(|i| i.1)
            .max()
            .unwrap_or(start);
        (start, end)
    };
    let nodes = node_records(&tree, &span);
    let calls_of = CallsByRank::new(trace.routine_calls()?);
    let mut phases = Vec::new();
    let mut previous_end: Option<Time> = None;
    let leaves = tree.leaves();
    for (i, leaf) in leaves.iter().enumerate() {
        let (start, end) = span(leaf.ps, leaf.pe);
        let next_start = leaves.get(i + 1).map(|l| span(l.ps, l.pe).0);
        let rank = instances[leaf.ps - 1].3;
        let mut ids: Vec<u32> = symbols[leaf.ps - 1..leaf.pe].to_vec();
        ids.sort_unstable();
        ids.dedup();
        phases.push(PhaseRecord {
            number: i as u32 + 1,
            node: leaf.id as u32,
            first: leaf.ps as u32,
            last: leaf.pe as u32,
            start,
            end,
            patterns: ids,
            routine: routine_of(
                trace,
                calls_of.of(rank),
                (start, end),
                previous_end,
                next_start,
            ),
            ops: Vec::new(),
            messages: Vec::new(),
        });
        previous_end = Some(end);
    }
    phase_bitmaps(trace, patterns, &calls_of, &mut phases)?;
    Ok(PhaseResult {
        params: *params,
        nodes,
        phases,
        tree: phases::render_tree(&tree),
        seconds,
    })
}

/// Fills each phase's operations and messages. The phases take turns on the timeline: a phase
/// holds every process's operations from its first instance until the next phase begins (the
/// waits and computation after its last events included); the last one, on each process,
/// until the routine call holding its last event there (begun within the phase) ends.
fn phase_bitmaps(
    trace: &Trace,
    patterns: &PatternResult,
    calls_of: &CallsByRank,
    phases: &mut [PhaseRecord],
) -> Result<()> {
    use crate::store::MessageField;
    let Some(last) = phases.last() else {
        return Ok(());
    };
    let mut last_ops = RoaringTreemap::new();
    for id in &last.patterns {
        if let Some(p) = patterns.pattern(*id) {
            last_ops |= p.op_ids();
        }
    }
    let last_rows = last_rows_in(&last_ops, trace.op_chunks());
    let starts: Vec<Time> = phases.iter().map(|p| p.start).collect();
    // The phase of an operation starting at `t` of a process whose last phase ends at `end`
    // (a message goes with its send).
    // `begun` is the number of phases begun by `t`.
    let phase_at = |begun: usize, end: Time, t: Time| -> Option<usize> {
        (begun > 0 && (begun < starts.len() || t <= end)).then(|| begun - 1)
    };
    let phase_of = |end: Time, t: Time| phase_at(starts.partition_point(|&s| s <= t), end, t);
    // Process by process: the end of its last phase, then its operations as runs of ids, one
    // phase each. A process's operations are in time order, so a chunk is a few runs, and the
    // bitmaps are built from runs (sorted by id) rather than id by id.
    let mut op_runs: Vec<Vec<Range<u64>>> = vec![Vec::new(); phases.len()];
    // Each process's end of the last phase, by rank (looked up for every message: an array,
    // not a hash map, whose lookups missed the cache at 16,384 ranks).
    let processes = &trace.header().processes;
    let mut ends: Vec<Time> = vec![
        last.end;
        processes
            .iter()
            .map(|p| p.rank as usize + 1)
            .max()
            .unwrap_or(0)
    ];
    // One rank's chunks, and those of them read while finding its end: kept from rank to
    // rank (at 16,384 ranks, two allocations per rank showed in profiles).
    let mut chunks: Vec<&OpChunkInfo> = Vec::new();
    let mut read = DecodedChunks::default();
    for rank in processes.iter().map(|p| p.rank) {
        chunks.clear();
        chunks.extend(
            trace
                .op_chunks_of(rank)
                .filter(|c| c.rows > 0 && c.max_end >= starts[0]),
        );
        read.clear_keeping_buffers();
        let latest = latest_in_last_phase(trace, &chunks, &last_rows, last.start, &mut read)?;
        let end = match latest {
            Some(event) => {
                // The routine call that began within the phase and holds its last event.
                let end = calls_of
                    .of(rank)
                    .iter()
                    .filter(|c| c.start >= last.start && c.start <= event && c.end >= event)
                    .map(|c| c.end)
                    .max()
                    .unwrap_or(event);
                ends[rank as usize] = end;
                end
            }
            None => last.end,
        };
        for info in &chunks {
            // Operations are in time order: a chunk whose first and last fall in the same
            // phase is in it whole, and is not read.
            let first = phase_of(end, info.first_start);
            if let Some(k) = first.filter(|_| first == phase_of(end, info.last_start)) {
                op_runs[k].push(info.ids());
                continue;
            }
            let chunk_starts = read.take_or_read(trace, info)?;
            // Starts are in time order within a location (the import refuses time going
            // backwards): the rows of one phase are a run, and the run's end is found by a
            // binary search for the next phase's start (or the last phase's end), not by
            // looking at every row (at 16,384 ranks every chunk spans the phases).
            let rows = chunk_starts.len();
            let first_id = info.ids().start;
            let mut row = 0;
            while row < rows {
                let t = chunk_starts[row];
                let begun = starts.partition_point(|&s| s <= t);
                let k = phase_at(begun, end, t);
                let still_in = |&s: &Time| match starts.get(begun) {
                    Some(&next_start) => s < next_start,
                    None => k.is_none() || s <= end,
                };
                let next = row + 1 + chunk_starts[row + 1..].partition_point(still_in);
                if let Some(k) = k {
                    op_runs[k].push(first_id + row as u64..first_id + next as u64);
                }
                row = next;
            }
            read.give_back(chunk_starts);
        }
    }
    let end_of = |rank: Rank| ends.get(rank as usize).copied().unwrap_or(last.end);
    let ops: Vec<RoaringTreemap> = op_runs
        .into_iter()
        .map(|mut runs| {
            runs.sort_unstable_by_key(|r| r.start);
            let mut bitmap = RoaringTreemap::new();
            for ids in runs {
                bitmap.insert_range(ids);
            }
            bitmap
        })
        .collect();
    let mut messages: Vec<IdSink> = (0..phases.len()).map(|_| IdSink::default()).collect();
    for chunk in 0..trace.message_chunk_count() {
        let sends =
            trace.message_columns(chunk, &[MessageField::Sender, MessageField::SendTime])?;
        for row in 0..sends.rows() {
            if let Some(k) = phase_of(end_of(sends.sender(row)), sends.send_time(row)) {
                messages[k].push(sends.id(row));
            }
        }
    }
    for ((phase, ops), msgs) in phases.iter_mut().zip(ops).zip(messages) {
        phase.ops = serialize(ops);
        phase.messages = serialize(msgs.finish());
    }
    Ok(())
}

/// Ids gathered into a bitmap a batch at a time: a push per id is as cheap as a vector's, and
/// the memory held is one batch, not every id.
#[derive(Default)]
struct IdSink {
    bitmap: RoaringTreemap,
    pending: Vec<u64>,
}

impl IdSink {
    /// Ids held before they go into the bitmap (8 MiB).
    const BATCH: usize = 1 << 20;

    fn push(&mut self, id: u64) {
        self.pending.push(id);
        if self.pending.len() == Self::BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.pending.sort_unstable();
        // Ids come in increasing order (chunk by chunk, row by row): appended at the end.
        // Should a batch go below the bitmap's largest, each id is inserted where it belongs.
        if self.bitmap.append(self.pending.iter().copied()).is_err() {
            for &id in &self.pending {
                self.bitmap.insert(id);
            }
        }
        self.pending.clear();
    }

    fn finish(mut self) -> RoaringTreemap {
        self.flush();
        self.bitmap
    }
}

/// Chunks whose start times were read (by chunk number), and emptied buffers for the next
/// reads: at 16,384 ranks a chunk's starts are read for every rank, and a decoded chunk's
/// columns allocated per read showed in profiles.
#[derive(Default)]
struct DecodedChunks {
    read: Vec<(u32, Vec<Time>)>,
    spare: Vec<Vec<Time>>,
}

impl DecodedChunks {
    /// The start times of `info`'s rows, read now into a spare buffer.
    fn read_now(&mut self, trace: &Trace, info: &OpChunkInfo) -> Result<Vec<Time>> {
        let mut starts = self.spare.pop().unwrap_or_default();
        trace.operation_starts_into(info.chunk, &mut starts)?;
        if starts.len() != info.rows as usize {
            return Err(crate::Error::Corrupt(format!(
                "operation chunk {} holds {} rows, its directory says {}",
                info.chunk,
                starts.len(),
                info.rows
            )));
        }
        Ok(starts)
    }

    /// The start times of `info`'s rows: read before (and taken out), or read now.
    fn take_or_read(&mut self, trace: &Trace, info: &OpChunkInfo) -> Result<Vec<Time>> {
        match self.read.iter().position(|(chunk, _)| *chunk == info.chunk) {
            Some(i) => Ok(self.read.swap_remove(i).1),
            None => self.read_now(trace, info),
        }
    }

    /// Keeps `chunk`'s start times for [`DecodedChunks::take_or_read`].
    fn keep(&mut self, chunk: u32, starts: Vec<Time>) {
        self.read.push((chunk, starts));
    }

    /// Keeps a buffer for a later read.
    fn give_back(&mut self, starts: Vec<Time>) {
        self.spare.push(starts);
    }

    /// Forgets the chunks read, keeping their buffers.
    fn clear_keeping_buffers(&mut self) {
        self.spare
            .extend(self.read.drain(..).map(|(_, starts)| starts));
    }
}

/// Per operation chunk (by chunk number), the last of its rows that is in `ops`, if any:
/// one backward pass over the bitmap for all the chunks, not a search per chunk (16,384
/// ranks have 16,384 chunks to look at).
fn last_rows_in<'a>(
    ops: &RoaringTreemap,
    chunks: impl IntoIterator<Item = &'a OpChunkInfo>,
) -> Vec<Option<u32>> {
    let mut chunks: Vec<&OpChunkInfo> = chunks.into_iter().filter(|c| c.rows > 0).collect();
    chunks.sort_unstable_by_key(|c| std::cmp::Reverse(c.chunk));
    let mut last = vec![None; chunks.first().map_or(0, |c| c.chunk as usize + 1)];
    let mut found = ops.iter();
    // A member taken from the iterator below a chunk's ids, kept for the chunks below it.
    let mut below: Option<u64> = None;
    for info in chunks {
        let ids = info.ids();
        let largest = match below.take() {
            Some(id) if id < ids.end => Some(id),
            _ => {
                found.advance_back_to(ids.end - 1);
                found.next_back()
            }
        };
        match largest {
            Some(id) if id >= ids.start => {
                last[info.chunk as usize] = Some((id - ids.start) as u32)
            }
            other => below = other,
        }
    }
    last
}

/// The latest start in a process's `chunks` of an operation of the last phase (whose last
/// row in each chunk is `last_rows`, see [`last_rows_in`]) starting at or after `from`; the
/// chunks decoded to find it are added to `read` (for the caller's next pass; a few). A
/// location's operations are stored in time order (the import refuses time going
/// backwards), so a chunk's latest operation of the last phase is its last one there; its
/// start is the chunk's last start when it is the chunk's last row, and read otherwise. The
/// chunks are searched from the last, and one none of whose operations can be later is
/// skipped.
fn latest_in_last_phase(
    trace: &Trace,
    chunks: &[&OpChunkInfo],
    last_rows: &[Option<u32>],
    from: Time,
    read: &mut DecodedChunks,
) -> Result<Option<Time>> {
    let mut latest: Option<Time> = None;
    for info in chunks.iter().rev() {
        if info.max_end < from || latest.is_some_and(|l| info.max_end < l) {
            continue;
        }
        let Some(row) = last_rows.get(info.chunk as usize).copied().flatten() else {
            continue;
        };
        let row = row as usize;
        let t = if row + 1 == info.rows as usize {
            info.last_start
        } else {
            let starts = read.read_now(trace, info)?;
            let t = starts.get(row).copied().ok_or_else(|| {
                crate::Error::Corrupt(format!(
                    "operation chunk {} has no row {row} of its last phase",
                    info.chunk
                ))
            })?;
            read.keep(info.chunk, starts);
            t
        };
        if t >= from {
            latest = Some(latest.map_or(t, |l| l.max(t)));
        }
    }
    Ok(latest)
}

fn node_records(
    tree: &PhaseTree,
    span: &dyn Fn(usize, usize) -> (Time, Time),
) -> Vec<PhaseNodeRecord> {
    tree.nodes()
        .iter()
        .map(|n| {
            let (start, end) = span(n.ps, n.pe);
            PhaseNodeRecord {
                id: n.id as u32,
                first: n.ps as u32,
                last: n.pe as u32,
                d: n.d,
                cut: n.pc as u32,
                tau: n.tau,
                strength: n.s,
                parent: n.parent.map(|p| p as u32),
                leaf: n.is_leaf(),
                start,
                end,
            }
        })
        .collect()
}

/// The highest of `calls` (those of the process of the phase's first event) containing the
/// phase's start that stays between the phase's neighbours (thesis §3.5: it crosses no other
/// phase) and between the routine calls that end before the phase and start after it (so
/// `main` does not name a phase that `solve` calls make up), and how many calls of that
/// routine start in the phase: `solve (50 calls)`.
fn routine_of(
    trace: &Trace,
    calls: &[RoutineCall],
    (start, end): (Time, Time),
    previous_end: Option<Time>,
    next_start: Option<Time>,
) -> String {
    let fits = |c: &RoutineCall| {
        let same_thread = calls.iter().filter(|d| d.thread == c.thread);
        let left = same_thread
            .clone()
            .filter(|d| d.end <= start)
            .map(|d| d.end)
            .max()
            .unwrap_or(0)
            .max(previous_end.unwrap_or(0));
        let right = same_thread
            .filter(|d| d.start >= end && d.start > start)
            .map(|d| d.start)
            .min()
            .unwrap_or(Time::MAX)
            .min(next_start.unwrap_or(Time::MAX));
        c.start >= left && c.end <= right
    };
    let containing = calls
        .iter()
        .filter(|c| c.start <= start && start <= c.end)
        .filter(|c| fits(c))
        .min_by_key(|c| (c.depth, c.start));
    match containing {
        Some(c) => {
            let name = trace.string(c.routine).unwrap_or("?").to_string();
            let count = calls
                .iter()
                .filter(|d| d.routine == c.routine && d.thread == c.thread)
                .filter(|d| d.start >= c.start && d.start <= end)
                .count();
            if count > 1 {
                format!("{name} ({count} calls)")
            } else {
                name
            }
        }
        None => String::new(),
    }
}

/// The stored phases for `params`, computed (and stored) when absent or when `refresh`.
pub fn phases(trace: &Trace, params: &PhaseParams, refresh: bool) -> Result<PhaseResult> {
    trace.stored_result(&params.key(), refresh, || {
        let found = communication_patterns(trace, &params.patterns, refresh)?;
        detect_phases(trace, &found, params)
    })
}

/// [`phases()`] of patterns already at hand (`found`, detected with `params.patterns`), which
/// spares reading them back from the store.
pub fn phases_of(
    trace: &Trace,
    found: &PatternResult,
    params: &PhaseParams,
    refresh: bool,
) -> Result<PhaseResult> {
    trace.stored_result(&params.key(), refresh, || {
        detect_phases(trace, found, params)
    })
}

/// How a `MATCH PATTERN` template is searched for (thesis Algorithm 4.4): `WITH ERRORS k,
/// NGRAM q`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TemplateParams {
    /// The largest edit distance (insertions, deletions, substitutions of events) accepted
    /// per process; default 0, exact occurrences only.
    pub errors: u32,
    /// q, the size of the n-grams the filter counts and the window shift aligns, in events;
    /// default 2 (the thesis's Fig 4.9), at least 1. A larger q filters less and shifts on
    /// longer runs of unedited events.
    pub ngram: u32,
}

impl Default for TemplateParams {
    fn default() -> Self {
        TemplateParams {
            errors: 0,
            ngram: 2,
        }
    }
}

impl TemplateParams {
    /// The largest q a statement may ask for (longer n-grams than any template filter
    /// nothing).
    pub const MAX_NGRAM: u32 = 64;
}

/// Where a `MATCH PATTERN` template occurs: per-process approximate matches (thesis
/// Algorithm 4.4) joined across processes through their messages (Algorithm 4.7).
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateMatch {
    /// The processes of the template that take part.
    pub processes: Vec<Rank>,
    /// Edits summed over the processes.
    pub edits: u32,
    /// First event's start.
    pub start: Time,
    /// Last event's start.
    pub end: Time,
    /// The operations matched.
    pub ops: RoaringTreemap,
}

/// One process of a `MATCH PATTERN` template: `P1: R0 S2 S5`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateProcess {
    /// The world rank.
    pub rank: Rank,
    /// Its events, in order.
    pub events: Vec<TemplateEvent>,
}

/// One event of a template, in the alphabet of pattern detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TemplateEvent {
    /// `S3`: a send to world rank 3.
    Send(Rank),
    /// `R0`: a receive from world rank 0.
    Receive(Rank),
    /// `MPI_Bcast(0)`, `BROADCAST(0)`, `MPI_Allreduce`: a collective, with its root's world rank
    /// for rooted ones.
    Collective(OpKind, Option<Rank>),
}

impl fmt::Display for TemplateEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateEvent::Send(r) => write!(f, "S{r}"),
            TemplateEvent::Receive(r) => write!(f, "R{r}"),
            TemplateEvent::Collective(kind, root) => {
                write!(f, "{}", kind.mpi_name().unwrap_or("MPI_Other"))?;
                if let Some(root) = root {
                    write!(f, "({root})")?;
                }
                Ok(())
            }
        }
    }
}

/// Finds `template` in the trace with at most `errors` edits per process. A match is a set of
/// per-process matches linked by messages or collectives that covers every process of the
/// template.
pub fn match_template(
    trace: &Trace,
    template: &[TemplateProcess],
    params: &TemplateParams,
) -> Result<Vec<TemplateMatch>> {
    use super::process_events::EventKey;
    let ranks = trace.header().processes.len() as Rank;
    if let Some(p) = template.iter().find(|p| p.rank >= ranks) {
        return Err(crate::Error::unknown(
            crate::NameKind::Process,
            p.rank.to_string(),
            format!(
                "the template names P{}, but the trace has ranks 0-{}",
                p.rank,
                ranks.saturating_sub(1)
            ),
        ));
    }
    let (mut alphabet, events) = process_events::extract(trace, false, false)?;
    let mut per_process: Vec<Vec<ProcessPatternOccurrences>> = vec![Vec::new(); events.len()];
    // Edits of each per-process match, by its first operation.
    let mut edits: crate::hash::FxHashMap<u64, u32> = Default::default();
    for p in template {
        let symbols: Vec<u32> = p
            .events
            .iter()
            .map(|e| {
                alphabet.intern(match *e {
                    TemplateEvent::Send(r) => EventKey::Send(r),
                    TemplateEvent::Receive(r) => EventKey::Receive(r),
                    TemplateEvent::Collective(kind, root) => EventKey::Collective(kind, root),
                })
            })
            .collect();
        trace.check_cancel()?;
        let e = &events[p.rank as usize];
        // More edits than the template has events accept whatever they accept: the same.
        let matching = super::patterns::matching::MatchParams {
            q: params.ngram as usize,
            k: (params.errors as usize).min(symbols.len()),
        };
        let found = super::patterns::matching::find_matches(&symbols, &e.symbols, &matching);
        let mut occurrences = Vec::with_capacity(found.len());
        for m in found {
            if m.end > m.start {
                edits.insert(e.ops[m.start], m.distance as u32);
                occurrences.push((m.start, m.end));
            }
        }
        per_process[p.rank as usize].push(ProcessPatternOccurrences {
            symbols,
            occurrences,
            runs: Vec::new(),
        });
    }
    let messages = trace.message_ops()?;
    let collectives = trace.collective_instances()?;
    let joined = comm_patterns::assemble(&events, &per_process, &messages, &collectives);
    let wanted: Vec<Rank> = {
        let mut r: Vec<Rank> = template.iter().map(|p| p.rank).collect();
        r.sort_unstable();
        r
    };
    let mut out = Vec::new();
    for pattern in &joined {
        let covered: Vec<Rank> = pattern
            .shape
            .iter()
            .filter(|(_, part)| matches!(part, comm_patterns::ShapePart::Pattern(..)))
            .map(|(r, _)| *r)
            .collect();
        if !wanted.iter().all(|r| covered.contains(r)) {
            continue;
        }
        for o in &pattern.occurrences {
            let total = o.ops.iter().filter_map(|op| edits.get(&op)).sum();
            out.push(TemplateMatch {
                processes: wanted.clone(),
                edits: total,
                start: o.start,
                end: o.end,
                ops: o.ops.clone(),
            });
        }
    }
    out.sort_by_key(|m| (m.start, m.end));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ranks_calls_are_found_in_their_stored_order_and_ranks_without_calls_have_none() {
        let call = |rank: Rank, start: Time| RoutineCall {
            rank,
            thread: 0,
            routine: 0,
            depth: 0,
            start,
            end: start + 1,
        };
        // Ranks 1, 3 and 4 have no calls; rank 2's calls come in two runs, out of rank order.
        let calls = vec![
            call(2, 10),
            call(0, 5),
            call(5, 1),
            call(2, 3),
            call(0, 7),
            call(2, 40),
        ];
        let by_rank = CallsByRank::new(calls);
        let starts =
            |rank: Rank| -> Vec<Time> { by_rank.of(rank).iter().map(|c| c.start).collect() };
        assert_eq!(starts(0), [5, 7]);
        assert_eq!(starts(2), [10, 3, 40]);
        assert_eq!(starts(5), [1]);
        for rank in [1, 3, 4, 6, 1000, Rank::MAX] {
            assert!(by_rank.of(rank).is_empty(), "rank {rank}");
        }
        assert!(CallsByRank::new(Vec::new()).of(0).is_empty());
    }

    #[test]
    fn an_id_sink_holds_every_id_once_in_any_order_across_batches() {
        let mut sink = IdSink::default();
        let mut want = RoaringTreemap::new();
        // A batch in order, then ids below it (a second batch that cannot be appended), then
        // repeats.
        let ids = (0..IdSink::BATCH as u64).map(|i| 1_000_000 + 2 * i);
        let low = [7u64, 3, 999_999, 1 << 40, 3];
        for id in ids.chain(low) {
            sink.push(id);
            want.insert(id);
        }
        let got = sink.finish();
        assert_eq!(got.len(), IdSink::BATCH as u64 + 4);
        assert_eq!(got, want);
    }

    #[test]
    fn the_last_row_of_each_chunk_in_a_bitmap_is_found_in_one_pass() {
        use crate::store::tables::row_id;
        let chunk = |chunk: u32, rows: u32| OpChunkInfo {
            chunk,
            rank: chunk,
            rows,
            ..OpChunkInfo::default()
        };
        // Chunk 5 is not listed: its members lie between chunk 7's and chunk 3's and must not
        // be taken for either; chunk 2 has no member; chunk 0's only member is its first row.
        let chunks = [
            chunk(0, 10),
            chunk(2, 4),
            chunk(3, 100),
            chunk(7, 50),
            chunk(9, 0),
        ];
        let ops: RoaringTreemap = [
            row_id(0, 0),
            row_id(3, 5),
            row_id(3, 99),
            row_id(5, 1),
            row_id(5, 40),
            row_id(7, 0),
            row_id(7, 12),
            row_id(8, 3),
        ]
        .into_iter()
        .collect();
        let last = last_rows_in(&ops, chunks.iter());
        assert_eq!(last.len(), 8);
        assert_eq!(last[0], Some(0));
        assert_eq!(last[2], None);
        assert_eq!(last[3], Some(99));
        assert_eq!(last[5], None);
        assert_eq!(last[7], Some(12));
        // Against a search per chunk.
        for info in &chunks {
            let ids = info.ids();
            let want = ops
                .iter()
                .rfind(|id| ids.contains(id))
                .map(|id| (id - ids.start) as u32);
            assert_eq!(last.get(info.chunk as usize).copied().flatten(), want);
        }
    }
}
