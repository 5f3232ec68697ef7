//! The planner and executor: a parsed [`Statement`] becomes bitmap algebra over the store's
//! indexes (process, communicator, kind, peer; sender, receiver, communicator for messages),
//! chunk pruning by time, and only then a fetch of the surviving rows, which are filtered by
//! what no index answers (time overlap, `WHERE`), then aggregated, ordered and limited.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rayon::prelude::*;
use roaring::RoaringTreemap;

use super::ast::{
    Aggregate, Bins, CmpOp, CommRef, Comparison, Expr, Field, Filter, GroupKey, Measure,
    OrderColumn, ProcessSelector, Scope, Select, SelectBody, Selection, ShowWhat, Statement,
    Statistic, Target, TimeWindow, Within,
};
use super::ast::{Analysis, Threshold};
use super::result::{ResultSet, RowSink, Value};
use crate::analysis::detection::{self, PatternParams, PhaseParams};
use crate::analysis::stats;
use crate::analysis::structure;
use crate::error::{Error, Limit, NameKind, Result};
use crate::hash::FxHashMap;
use crate::model::{CommId, Message, OpKind, Operation, Rank, Time};
use crate::store::ids::{chunk_and_row, chunk_id_space, chunk_ids};
use crate::store::{IndexDim, MessageColumns, MessageField, OpChunkInfo, StoredView};
use crate::{Database, Trace};

fn no_pattern(n: u32, count: usize) -> Error {
    Error::unknown(
        NameKind::Pattern,
        n.to_string(),
        format!(
            "no communication pattern {n}: the trace has {count} (SELECT COMMUNICATION PATTERNS lists them)"
        ),
    )
}

/// Calls `f` with each row of `rows` and its value of group key `key` (a rank, a tag or a
/// communicator id): one loop per key, so that reading the key is not decided row by row.
#[inline]
fn for_each_key(
    messages: &MessageColumns,
    key: &GroupKey,
    rows: std::ops::Range<usize>,
    mut f: impl FnMut(usize, i64),
) {
    match key {
        GroupKey::Process => rows.for_each(|r| f(r, messages.sender(r).into())),
        GroupKey::Peer => rows.for_each(|r| f(r, messages.receiver(r).into())),
        GroupKey::Tag => rows.for_each(|r| f(r, messages.tag(r).into())),
        GroupKey::Comm | GroupKey::Operation => rows.for_each(|r| f(r, messages.comm(r).into())),
    }
}

/// `rank` if the trace has it, else why not: checked before any analysis runs.
fn known_rank(trace: &Trace, rank: Rank) -> Result<Rank> {
    let ranks = trace.header().processes.len() as Rank;
    if rank < ranks {
        Ok(rank)
    } else {
        Err(Error::unknown(
            NameKind::Process,
            rank.to_string(),
            format!(
                "no process {rank}: the trace has ranks 0-{}",
                ranks.saturating_sub(1)
            ),
        ))
    }
}

/// Phase `n`'s messages and operations (default parameters), or why there is no such phase.
fn phase_ids(trace: &Trace, n: u32) -> Result<(RoaringTreemap, RoaringTreemap)> {
    phase_of(
        &detection::phases(trace, &PhaseParams::default(), false)?,
        n,
    )
}

/// Phase `n`'s message and operation ids in `found`.
fn phase_of(found: &detection::PhaseResult, n: u32) -> Result<(RoaringTreemap, RoaringTreemap)> {
    match found.phase(n) {
        Some(p) => Ok((p.message_ids(), p.op_ids())),
        None => Err(Error::unknown(
            NameKind::Phase,
            n.to_string(),
            format!(
                "no phase {n}: the trace has {} (SELECT PHASES lists them)",
                found.phases.len()
            ),
        )),
    }
}

fn phase_params(threshold: Threshold) -> PhaseParams {
    PhaseParams {
        threshold: threshold.0,
        ..PhaseParams::default()
    }
}

/// Nanoseconds as seconds.
fn seconds(ns: Time) -> f64 {
    ns as f64 / 1e9
}

/// `1, 5, 8` with at most `max` items, then `… (n in all)`.
fn list_text<T: std::fmt::Display>(items: &[T], max: usize) -> String {
    let shown: Vec<String> = items.iter().take(max).map(|x| x.to_string()).collect();
    let mut s = shown.join(", ");
    if items.len() > max {
        s.push_str(&format!(", … ({} in all)", items.len()));
    }
    s
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut} …")
}

fn usage(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// One step of a plan, as `EXPLAIN` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanStep {
    /// What the step does.
    pub step: String,
    /// Rows the step keeps, as the bitmaps say (before rows are read).
    pub estimated: u64,
    /// Rows that survive it once read (`None` for steps answered by bitmaps alone).
    pub actual: Option<u64>,
}

/// What a selection evaluates to: operation or message ids, and the plan that found them.
struct Selected {
    messages: bool,
    ids: RoaringTreemap,
    plan: Vec<PlanStep>,
}

/// Runs statements against one trace.
pub struct Engine<'a> {
    trace: &'a Trace,
    cancel: Option<&'a AtomicBool>,
    /// `EXPLAIN`: plan from the bitmaps and the stored results only; read no rows, run no
    /// analysis, write nothing.
    plan_only: bool,
}

/// The columns of a selection's rows: operations or messages.
fn row_columns(messages: bool) -> Vec<String> {
    let names: &[&str] = if messages {
        &[
            "id",
            "sender",
            "receiver",
            "comm",
            "tag",
            "size",
            "send_time_ns",
            "recv_time_ns",
        ]
    } else {
        &[
            "id",
            "rank",
            "thread",
            "operation",
            "start_ns",
            "end_ns",
            "duration_ns",
            "comm",
            "peer",
            "tag",
            "bytes_sent",
            "bytes_received",
            "root",
        ]
    };
    names.iter().map(|n| n.to_string()).collect()
}

/// A row of a selection, read from the store.
enum Row {
    Op(u64, Operation),
    Msg(u64, Message),
}

impl<'a> Engine<'a> {
    /// An engine over `trace`.
    pub fn new(trace: &'a Trace) -> Engine<'a> {
        Engine {
            trace,
            cancel: None,
            plan_only: false,
        }
    }

    /// This engine for `EXPLAIN`: statements are planned, not run (see [`Statement::Explain`]).
    pub fn plan_only(mut self) -> Engine<'a> {
        self.plan_only = true;
        self
    }

    /// An engine that stops with [`Error::Cancelled`] once `flag` is set (checked between
    /// chunks), so that Ctrl-C in the REPL stops the query, not the session.
    pub fn with_cancel(trace: &'a Trace, flag: &'a AtomicBool) -> Engine<'a> {
        Engine {
            trace,
            cancel: Some(flag),
            plan_only: false,
        }
    }

    fn check_cancel(&self) -> Result<()> {
        match self.cancel {
            Some(f) if f.load(Ordering::Relaxed) => Err(Error::Cancelled),
            _ => Ok(()),
        }
    }

    /// The communicator a query names.
    pub fn comm(&self, c: &CommRef) -> Result<CommId> {
        let comms = &self.trace.header().communicators;
        let found = match c {
            CommRef::Id(id) => comms.iter().find(|k| k.id == *id),
            CommRef::Name(name) => comms.iter().find(|k| &k.name == name),
            CommRef::World => {
                let n = self.trace.header().processes.len();
                comms
                    .iter()
                    .find(|k| k.name == "MPI_COMM_WORLD")
                    .or_else(|| {
                        comms.iter().find(|k| {
                            k.members.len() == n
                                && k.members.iter().enumerate().all(|(i, r)| *r as usize == i)
                        })
                    })
            }
        };
        found.map(|k| k.id).ok_or_else(|| {
            let names: Vec<String> = comms
                .iter()
                .map(|k| format!("{} (id {})", k.name, k.id))
                .collect();
            Error::unknown(
                NameKind::Communicator,
                describe_comm(c),
                format!(
                    "no communicator {} in trace {:?}; it has: {}",
                    describe_comm(c),
                    self.trace.name(),
                    names.join(", ")
                ),
            )
        })
    }

    /// The world ranks a scope names (both ranks of `BETWEEN`), sorted, distinct and checked.
    fn scope_ranks(&self, scope: &Scope) -> Result<Vec<Rank>> {
        match scope {
            Scope::For(s) | Scope::Among(s) => self.ranks(s),
            Scope::Between(a, b) => self.ranks(&ProcessSelector::List(vec![
                super::ast::RankRange::single(*a),
                super::ast::RankRange::single(*b),
            ])),
        }
    }

    /// The world ranks a selector names, sorted and distinct. A rank the trace does not have
    /// is refused before any list is built, so that a selector never costs more than the
    /// trace's own ranks.
    pub fn ranks(&self, s: &ProcessSelector) -> Result<Vec<Rank>> {
        let n = self.trace.header().processes.len() as Rank;
        let no_such = |bad: Rank| {
            Error::unknown(
                NameKind::Process,
                bad.to_string(),
                format!(
                    "process {bad} is not in trace {:?}, whose ranks are 0-{}",
                    self.trace.name(),
                    n.saturating_sub(1)
                ),
            )
        };
        let mut out: Vec<Rank> = match s {
            ProcessSelector::Process(r) => vec![*r],
            ProcessSelector::List(ranges) => {
                if let Some(bad) = ranges.iter().map(|r| r.first.max(r.last)).find(|r| *r >= n) {
                    let first_bad = ranges
                        .iter()
                        .filter(|r| r.first.max(r.last) >= n)
                        .map(|r| r.first.max(n))
                        .min()
                        .unwrap_or(bad);
                    return Err(no_such(first_bad));
                }
                ranges.iter().flat_map(|r| r.first..=r.last).collect()
            }
            ProcessSelector::All => (0..n).collect(),
            ProcessSelector::InComm(c) => {
                let id = self.comm(c)?;
                self.trace
                    .header()
                    .communicator(id)
                    .map(|k| k.members.clone())
                    .unwrap_or_default()
            }
        };
        out.sort_unstable();
        out.dedup();
        if let Some(bad) = out.iter().find(|r| **r >= n) {
            return Err(no_such(*bad));
        }
        Ok(out)
    }

    /// The union of `dim`'s bitmaps for `values`, reading only `chunks` when given.
    fn union_in(
        &self,
        dim: IndexDim,
        values: impl IntoIterator<Item = u32>,
        chunks: Option<&[u32]>,
    ) -> Result<RoaringTreemap> {
        let mut out = RoaringTreemap::new();
        for v in values {
            out |= match chunks {
                Some(c) => self.trace.index_in_chunks(dim, v, c)?,
                None => self.trace.index(dim, v)?,
            };
        }
        Ok(out)
    }

    /// The chunks a selection can touch, when its time window or process scope narrows them
    /// (from the chunk directories, without reading any bitmap); `None` for all.
    fn candidate_chunks(&self, sel: &Selection, messages: bool) -> Result<Option<Vec<u32>>> {
        let window = sel.filter.time;
        if messages {
            return Ok(window.map(|w| {
                self.trace
                    .message_chunk_times()
                    .iter()
                    .enumerate()
                    .filter(|(_, (lo, hi))| *lo <= w.end && *hi >= w.start)
                    .map(|(i, _)| i as u32)
                    .collect()
            }));
        }
        let ranks = sel
            .filter
            .scope
            .as_ref()
            .map(|s| self.scope_ranks(s))
            .transpose()?;
        if window.is_none() && ranks.is_none() {
            return Ok(None);
        }
        let in_window = |c: &&OpChunkInfo| {
            window.is_none_or(|w| c.first_start <= w.end && c.max_end >= w.start)
        };
        Ok(Some(match ranks {
            // Each rank's own chunks, not a scan of every chunk per rank.
            Some(ranks) => {
                let mut chunks: Vec<u32> = ranks
                    .iter()
                    .flat_map(|&r| self.trace.op_chunks_of(r))
                    .filter(in_window)
                    .map(|c| c.chunk)
                    .collect();
                chunks.sort_unstable();
                chunks.dedup();
                chunks
            }
            None => self
                .trace
                .op_chunks()
                .iter()
                .filter(in_window)
                .map(|c| c.chunk)
                .collect(),
        }))
    }

    /// The operation kinds a target selects, among those the trace has.
    fn kinds(&self, target: Target) -> Vec<OpKind> {
        self.trace
            .summary()
            .by_kind
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| match target {
                Target::Messages | Target::Operations => true,
                Target::PointToPoint => k.is_send() || k.is_receive(),
                Target::Sends => k.is_send(),
                Target::Receives => k.is_receive(),
                Target::Collectives => k.is_collective(),
                Target::Operation(want) => *k == want,
            })
            .collect()
    }

    /// Evaluates a selection to ids by bitmap algebra, pruning chunks by time; rows are not
    /// read yet.
    fn select_ids(&self, sel: &Selection) -> Result<Selected> {
        let messages = sel.target == Target::Messages;
        let mut plan = Vec::new();
        let mut ids = if messages {
            self.trace.all_message_ids()
        } else {
            self.trace.all_operation_ids()
        };
        plan.push(PlanStep {
            step: if messages {
                "all messages (ids 0..n)".into()
            } else {
                "all operations (chunk ranges)".into()
            },
            estimated: ids.len(),
            actual: None,
        });
        let chunks = self.candidate_chunks(sel, messages)?;
        if let Some(chunks) = &chunks {
            let mut keep = RoaringTreemap::new();
            for &c in chunks {
                keep.insert_range(chunk_id_space(c));
            }
            ids &= keep;
            plan.push(PlanStep {
                step: format!(
                    "only the {} chunk{} the time window and processes can touch",
                    chunks.len(),
                    if chunks.len() == 1 { "" } else { "s" }
                ),
                estimated: ids.len(),
                actual: None,
            });
        }
        let chunks = chunks.as_deref();
        if !messages && sel.target != Target::Operations {
            let kinds = self.kinds(sel.target);
            let names: Vec<String> = kinds.iter().map(|k| self.trace.kind_name(*k)).collect();
            ids &= self.union_in(IndexDim::Kind, kinds.iter().map(|k| k.code()), chunks)?;
            plan.push(PlanStep {
                step: format!(
                    "AND kind index [{}]",
                    if names.is_empty() {
                        "none in trace".into()
                    } else {
                        names.join(", ")
                    }
                ),
                estimated: ids.len(),
                actual: None,
            });
        }
        if let Some(scope) = &sel.filter.scope {
            let (bits, what) = self.scope_bitmap(scope, messages, chunks)?;
            ids &= bits;
            plan.push(PlanStep {
                step: format!("AND {what}"),
                estimated: ids.len(),
                actual: None,
            });
        }
        for w in &sel.filter.within {
            match w {
                Within::Comm(c) => {
                    let id = self.comm(c)?;
                    let dim = if messages {
                        IndexDim::MessageComm
                    } else {
                        IndexDim::Comm
                    };
                    ids &= self.union_in(dim, [id], chunks)?;
                    plan.push(PlanStep {
                        step: format!("AND {dim:?} index [{id}]"),
                        estimated: ids.len(),
                        actual: None,
                    });
                }
                Within::View(name) => {
                    let view = self.view(name)?;
                    if view.messages != messages {
                        return Err(usage(format!(
                            "view {name:?} holds {}, but this query selects {}",
                            if view.messages {
                                "messages"
                            } else {
                                "operations"
                            },
                            if messages { "messages" } else { "operations" }
                        )));
                    }
                    ids &= &view.ids;
                    plan.push(PlanStep {
                        step: format!("AND view {name}"),
                        estimated: ids.len(),
                        actual: None,
                    });
                }
                Within::Pattern(n) if self.plan_only => {
                    self.plan_stored_ids(
                        &mut ids,
                        &mut plan,
                        detection::stored_patterns(self.trace, &PatternParams::default())?
                            .map(|found| {
                                found
                                    .pattern(*n)
                                    .map(|p| (p.message_ids(), p.op_ids()))
                                    .ok_or_else(|| no_pattern(*n, found.patterns.len()))
                            })
                            .transpose()?,
                        messages,
                        format!("pattern {n}'s occurrences"),
                        "pattern detection",
                    );
                }
                Within::Phase(n) if self.plan_only => {
                    self.plan_stored_ids(
                        &mut ids,
                        &mut plan,
                        detection::stored_phases(self.trace, &PhaseParams::default())?
                            .map(|found| phase_of(&found, *n))
                            .transpose()?,
                        messages,
                        format!("phase {n}'s operations"),
                        "phase detection",
                    );
                }
                Within::Pattern(n) => {
                    let found = detection::patterns(self.trace, &PatternParams::default(), false)?;
                    let Some(p) = found.pattern(*n) else {
                        return Err(no_pattern(*n, found.patterns.len()));
                    };
                    ids &= if messages {
                        p.message_ids()
                    } else {
                        p.op_ids()
                    };
                    plan.push(PlanStep {
                        step: format!("AND pattern {n}'s occurrences"),
                        estimated: ids.len(),
                        actual: None,
                    });
                }
                Within::Phase(n) => {
                    let (phase_messages, phase_ops) = phase_ids(self.trace, *n)?;
                    ids &= if messages { phase_messages } else { phase_ops };
                    plan.push(PlanStep {
                        step: format!("AND phase {n}'s operations"),
                        estimated: ids.len(),
                        actual: None,
                    });
                }
            }
        }
        if let (Some(w), false) = (sel.filter.time, messages) {
            // Chunks entirely outside the window go without being read.
            for c in self.trace.op_chunks() {
                if c.rows > 0 && (c.first_start > w.end || c.max_end < w.start) {
                    ids.remove_range(chunk_ids(c.chunk, c.rows as usize));
                }
            }
            plan.push(PlanStep {
                step: format!("prune chunks outside {} ns .. {} ns", w.start, w.end),
                estimated: ids.len(),
                actual: None,
            });
        }
        Ok(Selected {
            messages,
            ids,
            plan,
        })
    }

    /// `EXPLAIN`'s step for a pattern's or phase's ids: from the stored result when there is
    /// one; else the analysis that would run first is named and the ids are left as they are
    /// (the estimate is an upper bound).
    fn plan_stored_ids(
        &self,
        ids: &mut RoaringTreemap,
        plan: &mut Vec<PlanStep>,
        stored: Option<(RoaringTreemap, RoaringTreemap)>,
        messages: bool,
        what: String,
        analysis: &str,
    ) {
        let step = match stored {
            Some((message_ids, op_ids)) => {
                *ids &= if messages { message_ids } else { op_ids };
                format!("AND {what} (stored)")
            }
            None => format!("AND {what}: {analysis} runs first (nothing stored yet)"),
        };
        plan.push(PlanStep {
            step,
            estimated: ids.len(),
            actual: None,
        });
    }

    fn scope_bitmap(
        &self,
        scope: &Scope,
        messages: bool,
        chunks: Option<&[u32]>,
    ) -> Result<(RoaringTreemap, String)> {
        let index = |dim: IndexDim, v: u32| self.union_in(dim, [v], chunks);
        let (own, other) = if messages {
            (IndexDim::MessageSender, IndexDim::MessageReceiver)
        } else {
            (IndexDim::Process, IndexDim::Peer)
        };
        Ok(match scope {
            Scope::Between(a, b) => {
                self.scope_ranks(scope)?;
                let ab = index(own, *a)? & index(other, *b)?;
                let ba = index(own, *b)? & index(other, *a)?;
                (
                    ab | ba,
                    format!(
                        "({own:?}[{a}] AND {other:?}[{b}]) OR ({own:?}[{b}] AND {other:?}[{a}])"
                    ),
                )
            }
            Scope::For(s) => {
                let ranks = self.ranks(s)?;
                let mut bits = self.union_in(own, ranks.iter().copied(), chunks)?;
                if messages {
                    bits |= self.union_in(other, ranks.iter().copied(), chunks)?;
                    (bits, format!("sender or receiver in {}", rank_list(&ranks)))
                } else {
                    (bits, format!("Process index {}", rank_list(&ranks)))
                }
            }
            Scope::Among(s) => {
                let ranks = self.ranks(s)?;
                let bits = self.union_in(own, ranks.iter().copied(), chunks)?;
                if messages {
                    let recv = self.union_in(other, ranks.iter().copied(), chunks)?;
                    (
                        bits & recv,
                        format!("sender and receiver in {}", rank_list(&ranks)),
                    )
                } else {
                    (
                        bits,
                        format!(
                            "Process index {} (peers checked on read)",
                            rank_list(&ranks)
                        ),
                    )
                }
            }
        })
    }

    fn view(&self, name: &str) -> Result<StoredView> {
        self.trace.view(name)?.ok_or_else(|| {
            let names: Vec<String> = self
                .trace
                .views()
                .unwrap_or_default()
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            Error::unknown(
                NameKind::View,
                name,
                format!(
                    "no view named {name:?} in trace {:?}{}",
                    self.trace.name(),
                    if names.is_empty() {
                        " (it has none)".to_string()
                    } else {
                        format!(" (it has: {})", names.join(", "))
                    }
                ),
            )
        })
    }

    /// Reads the selected rows chunk by chunk (a roaring container is a chunk), checking for
    /// Ctrl-C, and hands each row that overlaps the window, has its peers in the set and
    /// matches WHERE to `visit`, which returns whether it wants more: `LIMIT n` stops reading
    /// after n rows. Memory holds one chunk's rows, never the selection's.
    fn each_row(
        &self,
        sel: &Selection,
        selected: &mut Selected,
        mut visit: impl FnMut(Row) -> Result<bool>,
    ) -> Result<()> {
        let among: Option<Vec<Rank>> = match &sel.filter.scope {
            Some(Scope::Among(s)) if !selected.messages => Some(self.ranks(s)?),
            _ => None,
        };
        if let Some(p) = &sel.filter.predicate {
            check_nesting(p)?;
        }
        let comm_ids = self.predicate_comms(sel.filter.predicate.as_ref())?;
        if self.plan_only {
            selected.plan.push(PlanStep {
                step: "read rows; keep those overlapping the window, with peers in the set and matching WHERE".into(),
                estimated: selected.ids.len(),
                actual: None,
            });
            return Ok(());
        }
        let keep = |row: &Row| {
            sel.filter.time.is_none_or(|w| overlaps(row, w))
                && among.as_ref().is_none_or(|set| peers_within(row, set))
                && sel
                    .filter
                    .predicate
                    .as_ref()
                    .is_none_or(|p| eval(p, row, &comm_ids))
        };
        let mut kept = 0u64;
        let mut stopped = false;
        let mut one_chunk = RoaringTreemap::new();
        let mut ids = selected.ids.iter().peekable();
        while let Some(id) = ids.next() {
            one_chunk.insert(id);
            let same_chunk = ids
                .peek()
                .is_some_and(|&next| chunk_and_row(next).0 == chunk_and_row(id).0);
            if same_chunk {
                continue;
            }
            for row in self.read_rows(selected.messages, &one_chunk)? {
                if keep(&row) {
                    kept += 1;
                    if !visit(row)? {
                        stopped = true;
                        break;
                    }
                }
            }
            one_chunk.clear();
            if stopped {
                break;
            }
        }
        selected.plan.push(PlanStep {
            step: if stopped {
                "read rows until the limit; keep those overlapping the window, with peers in the set and matching WHERE".into()
            } else {
                "read rows; keep those overlapping the window, with peers in the set and matching WHERE".into()
            },
            estimated: selected.ids.len(),
            actual: Some(kept),
        });
        Ok(())
    }

    /// What `pick` takes from each row [`Engine::each_row`] keeps: only that is held, never
    /// the rows.
    fn collect_rows<T>(
        &self,
        sel: &Selection,
        selected: &mut Selected,
        pick: impl Fn(Row) -> Option<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each_row(sel, selected, |row| {
            out.extend(pick(row));
            Ok(true)
        })?;
        Ok(out)
    }

    /// The rows of `ids`, all in one chunk.
    fn read_rows(&self, messages: bool, ids: &RoaringTreemap) -> Result<Vec<Row>> {
        self.check_cancel()?;
        Ok(if messages {
            self.trace
                .messages_by_id_without_ops(ids)?
                .into_iter()
                .map(|(id, m)| Row::Msg(id, m))
                .collect()
        } else {
            self.trace
                .operations(ids)?
                .into_iter()
                .map(|(id, o)| Row::Op(id, o))
                .collect()
        })
    }

    /// Communicator names in a predicate, resolved once.
    fn predicate_comms(&self, p: Option<&Expr>) -> Result<BTreeMap<String, CommId>> {
        let mut out = BTreeMap::new();
        let mut stack: Vec<&Expr> = p.into_iter().collect();
        while let Some(e) = stack.pop() {
            match e {
                Expr::Compare(Comparison {
                    value: super::ast::Value::Comm(c),
                    ..
                }) => {
                    if let std::collections::btree_map::Entry::Vacant(slot) =
                        out.entry(describe_comm(c))
                    {
                        slot.insert(self.comm(c)?);
                    }
                }
                Expr::Compare(_) => {}
                Expr::And(items) | Expr::Or(items) => stack.extend(items),
                Expr::Not(a) => stack.push(a),
            }
        }
        Ok(out)
    }

    /// A row's values, in the order of [`row_columns`].
    fn row_values(&self, row: &Row) -> Vec<Value> {
        match row {
            Row::Msg(id, m) => vec![
                (*id).into(),
                m.sender.into(),
                m.receiver.into(),
                self.comm_name(m.comm).into(),
                m.tag.into(),
                m.bytes.into(),
                m.send_time.into(),
                m.recv_time.into(),
            ],
            Row::Op(id, o) => vec![
                (*id).into(),
                o.rank.into(),
                o.thread.into(),
                self.trace.kind_name(o.kind).into(),
                o.start.into(),
                o.end.into(),
                (o.end - o.start).into(),
                o.comm.map(|c| self.comm_name(c)).into(),
                o.dest.or(o.source).into(),
                o.send_tag.or(o.recv_tag).into(),
                o.send_bytes.into(),
                o.recv_bytes.into(),
                o.root.into(),
            ],
        }
    }

    fn comm_name(&self, id: CommId) -> String {
        self.trace
            .header()
            .communicator(id)
            .map_or_else(|| id.to_string(), |c| c.name.clone())
    }

    /// Runs a SELECT (or plans it, for EXPLAIN).
    pub fn select(&self, s: &Select, explain: bool) -> Result<ResultSet> {
        if !explain && matches!(s.body, SelectBody::Rows(_)) {
            let mut r = ResultSet::new(Vec::<String>::new());
            self.select_into(s, &mut r)?;
            return Ok(r);
        }
        let (result, plan) = match &s.body {
            // Only EXPLAIN comes here (rows are streamed by `select_into`): it shows the plan
            // with each step's row count, so the rows are read and counted, not kept.
            SelectBody::Rows(sel) => {
                let mut selected = self.select_ids(sel)?;
                self.each_row(sel, &mut selected, |_| Ok(true))?;
                (ResultSet::new(Vec::<String>::new()), selected.plan)
            }
            SelectBody::Aggregate {
                aggregates,
                selection,
                group_by,
            } if self.is_message_scan(aggregates, selection, group_by) => {
                let n = self.trace.summary().messages;
                let (r, actual) = if self.plan_only {
                    (ResultSet::new(Vec::<String>::new()), None)
                } else {
                    (self.message_scan_aggregate(aggregates, group_by)?, Some(n))
                };
                let plan = vec![PlanStep {
                    step: format!(
                        "scan only the needed columns of the message chunks ({}), in parallel",
                        self.trace.message_chunk_count()
                    ),
                    estimated: n,
                    actual,
                }];
                (r, plan)
            }
            SelectBody::Aggregate {
                aggregates,
                selection,
                group_by,
            } => {
                let mut selected = self.select_ids(selection)?;
                let r = self.aggregate(selection, &mut selected, aggregates, group_by)?;
                (r, selected.plan)
            }
            SelectBody::Statistic {
                statistic,
                target,
                filter,
            } => self.statistic(*statistic, *target, filter)?,
        };
        if explain {
            let mut r = ResultSet::new(["step", "plan", "estimated_rows", "actual_rows"]);
            for (i, p) in plan.iter().enumerate() {
                r.push(vec![
                    ((i + 1) as u64).into(),
                    p.step.clone().into(),
                    p.estimated.into(),
                    p.actual.into(),
                ]);
            }
            return Ok(r);
        }
        order_and_limit(result, s, self.cancel)
    }

    /// Runs a `SELECT` and hands its rows to `sink` as they come: a selection of rows
    /// without `ORDER BY` is written while it is read and stops reading at its `LIMIT`; with
    /// `ORDER BY … LIMIT k` only the k first rows are held (top-k). Other statements are
    /// computed whole (an aggregate holds its groups, not its rows) and then handed over.
    pub fn select_into(&self, s: &Select, sink: &mut dyn RowSink) -> Result<()> {
        let SelectBody::Rows(sel) = &s.body else {
            return sink.result(self.select(s, false)?);
        };
        let mut selected = self.select_ids(sel)?;
        let columns = row_columns(selected.messages);
        let limit = s.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        if s.order_by.is_empty() {
            sink.columns(&columns)?;
            if limit == Some(0) {
                return Ok(());
            }
            let mut written = 0usize;
            return self.each_row(sel, &mut selected, |row| {
                sink.row(self.row_values(&row))?;
                written += 1;
                Ok(limit.is_none_or(|l| written < l))
            });
        }
        let keys = order_keys(&columns, s)?;
        let mut all = ResultSet::new(columns);
        match limit {
            Some(k) => {
                let mut top = TopK {
                    keys,
                    k,
                    rows: Vec::new(),
                };
                self.each_row(sel, &mut selected, |row| {
                    top.push(self.row_values(&row));
                    Ok(true)
                })?;
                all.rows = top.into_rows();
            }
            None => {
                self.each_row(sel, &mut selected, |row| {
                    all.push(self.row_values(&row));
                    Ok(true)
                })?;
                all = order_and_limit(all, s, self.cancel)?;
            }
        }
        sink.result(all)
    }

    fn aggregate(
        &self,
        selection: &Selection,
        selected: &mut Selected,
        aggregates: &[Aggregate],
        group_by: &[GroupKey],
    ) -> Result<ResultSet> {
        let mut columns: Vec<String> = group_by
            .iter()
            .map(|k| k.to_string().to_lowercase())
            .collect();
        columns.extend(aggregates.iter().map(|a| a.to_string().to_lowercase()));
        let mut groups: BTreeMap<Vec<GroupValue>, Vec<Acc>> = BTreeMap::new();
        // Rows are folded into their groups as they are read: memory holds the groups.
        self.each_row(selection, selected, |row| {
            let row = &row;
            let key: Vec<GroupValue> = group_by.iter().map(|k| self.group_value(row, *k)).collect();
            let accs = groups
                .entry(key)
                .or_insert_with(|| vec![Acc::default(); aggregates.len()]);
            for (acc, a) in accs.iter_mut().zip(aggregates) {
                let v = match a {
                    Aggregate::Count => 0,
                    Aggregate::Sum(m)
                    | Aggregate::Avg(m)
                    | Aggregate::Min(m)
                    | Aggregate::Max(m) => measure(row, *m),
                };
                acc.add(v);
            }
            Ok(true)
        })?;
        if groups.is_empty() && group_by.is_empty() {
            groups.insert(Vec::new(), vec![Acc::default(); aggregates.len()]);
        }
        let mut r = ResultSet::new(columns);
        for (key, accs) in groups {
            let mut row: Vec<Value> = key.into_iter().map(GroupValue::into_value).collect();
            for (acc, a) in accs.iter().zip(aggregates) {
                row.push(acc.value(*a)?);
            }
            r.push(row);
        }
        Ok(r)
    }

    /// Whether an aggregate is a plain scan of all messages that column reads can answer.
    fn is_message_scan(
        &self,
        aggregates: &[Aggregate],
        selection: &Selection,
        group_by: &[GroupKey],
    ) -> bool {
        selection.target == Target::Messages
            && selection.filter.is_empty()
            && !group_by.contains(&GroupKey::Operation)
            && aggregates.iter().all(|a| {
                !matches!(
                    a,
                    Aggregate::Sum(Measure::Duration)
                        | Aggregate::Avg(Measure::Duration)
                        | Aggregate::Min(Measure::Duration)
                        | Aggregate::Max(Measure::Duration)
                )
            })
    }

    /// Aggregates every message reading only the columns the groups and sizes need, chunk by
    /// chunk on every core.
    fn message_scan_aggregate(
        &self,
        aggregates: &[Aggregate],
        group_by: &[GroupKey],
    ) -> Result<ResultSet> {
        let key_field = |k: &GroupKey| match k {
            GroupKey::Process => MessageField::Sender,
            GroupKey::Peer => MessageField::Receiver,
            GroupKey::Tag => MessageField::Tag,
            GroupKey::Comm | GroupKey::Operation => MessageField::Comm,
        };
        let mut wanted: Vec<MessageField> = group_by.iter().map(key_field).collect();
        wanted.push(MessageField::Bytes);
        let chunks = self.trace.message_chunk_count();
        type Groups = BTreeMap<Vec<i64>, Vec<Acc>>;
        // Chunks are scanned in parallel (rayon), each into its own groups, merged at the end.
        // Every aggregate of this path measures SIZE, so one accumulator per group serves them
        // all; it is copied per aggregate at the end.
        let scan_chunk = |chunk: u32| -> Result<Groups> {
            self.check_cancel()?;
            let messages = self.trace.message_columns(chunk, &wanted)?;
            let rows = messages.rows();
            // Keys are small integers (ranks, tags, communicator ids) in practice: index a dense
            // table by their mixed-radix code (each key counted from its least value, 0 at most)
            // when it stays small, else hash the key.
            let (least, radix): (Vec<i64>, Vec<u64>) = group_by
                .iter()
                .map(|k| {
                    let (mut lo, mut hi) = (0i64, 0i64);
                    for_each_key(&messages, k, 0..rows, |_, v| {
                        lo = lo.min(v);
                        hi = hi.max(v);
                    });
                    (lo, hi.abs_diff(lo) + 1)
                })
                .unzip();
            let space = radix
                .iter()
                .try_fold(1u64, |acc, r| acc.checked_mul(*r))
                .filter(|s| *s <= 1 << 16);
            let mut groups: Groups = BTreeMap::new();
            if let Some(space) = space {
                let mut dense = vec![Acc::default(); space as usize];
                // The rows' codes, a block of rows at a time, a key at a time.
                const BLOCK: usize = 1024;
                let mut codes = [0u64; BLOCK];
                for first in (0..rows).step_by(BLOCK) {
                    let block = first..rows.min(first + BLOCK);
                    codes.fill(0);
                    for ((k, rad), &lo) in group_by.iter().zip(&radix).zip(&least) {
                        for_each_key(&messages, k, block.clone(), |r, v| {
                            let code = &mut codes[r - first];
                            *code = *code * rad + v.abs_diff(lo);
                        });
                    }
                    for (r, &code) in block.zip(&codes) {
                        dense[code as usize].add(messages.bytes(r));
                    }
                }
                for (code, acc) in dense.into_iter().enumerate().filter(|(_, a)| a.count > 0) {
                    let mut key = vec![0i64; radix.len()];
                    let mut rest = code as u64;
                    for i in (0..radix.len()).rev() {
                        key[i] = least[i].wrapping_add((rest % radix[i]) as i64);
                        rest /= radix[i];
                    }
                    groups.insert(key, vec![acc; aggregates.len()]);
                }
            } else {
                let mut hashed: FxHashMap<Vec<i64>, Acc> = FxHashMap::default();
                let mut key = Vec::with_capacity(group_by.len());
                for r in 0..rows {
                    let size = messages.bytes(r);
                    key.clear();
                    for k in group_by {
                        for_each_key(&messages, k, r..r + 1, |_, v| key.push(v));
                    }
                    match hashed.get_mut(&key) {
                        Some(acc) => acc.add(size),
                        None => {
                            let mut acc = Acc::default();
                            acc.add(size);
                            hashed.insert(key.clone(), acc);
                        }
                    }
                }
                groups.extend(
                    hashed
                        .into_iter()
                        .map(|(k, acc)| (k, vec![acc; aggregates.len()])),
                );
            }
            Ok(groups)
        };
        let partials: Vec<Result<Groups>> = (0..chunks).into_par_iter().map(scan_chunk).collect();
        let mut merged: Groups = BTreeMap::new();
        for part in partials {
            for (k, accs) in part? {
                match merged.get_mut(&k) {
                    Some(into) => into.iter_mut().zip(&accs).for_each(|(a, b)| a.merge(b)),
                    None => {
                        merged.insert(k, accs);
                    }
                }
            }
        }
        if merged.is_empty() && group_by.is_empty() {
            merged.insert(Vec::new(), vec![Acc::default(); aggregates.len()]);
        }
        let mut columns: Vec<String> = group_by
            .iter()
            .map(|k| k.to_string().to_lowercase())
            .collect();
        columns.extend(aggregates.iter().map(|a| a.to_string().to_lowercase()));
        let mut rows: Vec<Vec<Value>> = Vec::with_capacity(merged.len());
        for (key, accs) in merged {
            let mut row: Vec<Value> = key
                .iter()
                .zip(group_by)
                .map(|(&v, k)| match k {
                    GroupKey::Tag => Value::Int(i128::from(v)),
                    GroupKey::Comm | GroupKey::Operation => match CommId::try_from(v) {
                        Ok(c) => Value::Text(self.comm_name(c)),
                        Err(_) => Value::Int(i128::from(v)),
                    },
                    _ => Value::Int(i128::from(v)),
                })
                .collect();
            for (acc, a) in accs.iter().zip(aggregates) {
                row.push(acc.value(*a)?);
            }
            rows.push(row);
        }
        // Groups come out in the order of their stored codes; order them by their values.
        rows.sort_by(|a, b| {
            a.iter()
                .zip(b)
                .map(|(x, y)| compare_values(x, y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let mut r = ResultSet::new(columns);
        for row in rows {
            r.push(row);
        }
        Ok(r)
    }

    fn group_value(&self, row: &Row, key: GroupKey) -> GroupValue {
        match (row, key) {
            (Row::Op(_, o), GroupKey::Process) => GroupValue::Int(i64::from(o.rank)),
            (Row::Msg(_, m), GroupKey::Process) => GroupValue::Int(i64::from(m.sender)),
            (Row::Op(_, o), GroupKey::Peer) => o
                .dest
                .or(o.source)
                .map_or(GroupValue::None, |p| GroupValue::Int(i64::from(p))),
            (Row::Msg(_, m), GroupKey::Peer) => GroupValue::Int(i64::from(m.receiver)),
            (Row::Op(_, o), GroupKey::Operation) => GroupValue::Text(self.trace.kind_name(o.kind)),
            (Row::Msg(..), GroupKey::Operation) => GroupValue::Text("message".into()),
            (Row::Op(_, o), GroupKey::Tag) => o
                .send_tag
                .or(o.recv_tag)
                .map_or(GroupValue::None, |t| GroupValue::Int(i64::from(t))),
            (Row::Msg(_, m), GroupKey::Tag) => GroupValue::Int(i64::from(m.tag)),
            (Row::Op(_, o), GroupKey::Comm) => o
                .comm
                .map_or(GroupValue::None, |c| GroupValue::Text(self.comm_name(c))),
            (Row::Msg(_, m), GroupKey::Comm) => GroupValue::Text(self.comm_name(m.comm)),
        }
    }

    fn statistic(
        &self,
        statistic: Statistic,
        target: Option<Target>,
        filter: &Filter,
    ) -> Result<(ResultSet, Vec<PlanStep>)> {
        let all: Vec<Rank> = (0..self.trace.header().processes.len() as Rank).collect();
        let fixed_ranks = |name: &str| -> Result<Vec<Rank>> {
            if !filter.within.is_empty() || filter.time.is_some() || filter.predicate.is_some() {
                return Err(usage(format!(
                    "{name} is computed per process over the whole trace; it takes FOR or AMONG a set of processes only"
                )));
            }
            match &filter.scope {
                None => Ok(all.clone()),
                Some(scope) => self.scope_ranks(scope),
            }
        };
        let plan_of = |what: &str, n: usize| {
            vec![PlanStep {
                step: what.to_string(),
                estimated: n as u64,
                actual: Some(n as u64),
            }]
        };
        if self.plan_only {
            // The statistics kept at import or computed per process: name the step, run nothing.
            let per_process = |name: &str, what: &str| -> Result<(ResultSet, Vec<PlanStep>)> {
                let n = fixed_ranks(name)?.len() as u64;
                let step = PlanStep {
                    step: what.to_string(),
                    estimated: n,
                    actual: None,
                };
                Ok((ResultSet::new(Vec::<String>::new()), vec![step]))
            };
            match statistic {
                Statistic::FanIn => {
                    return per_process(
                        "FAN_IN",
                        "scan messages and collective operations per process",
                    )
                }
                Statistic::FanOut => {
                    return per_process(
                        "FAN_OUT",
                        "scan messages and collective operations per process",
                    )
                }
                Statistic::MpiTime => {
                    return per_process("MPI TIME", "sum operation durations per process")
                }
                Statistic::Statistics
                    if filter.within.is_empty()
                        && filter.time.is_none()
                        && filter.predicate.is_none() =>
                {
                    return per_process(
                        "STATISTICS",
                        "count operations per process and kind; bytes per process",
                    )
                }
                Statistic::Matrix(_)
                    if filter.is_empty() && target.is_none_or(|t| t == Target::Messages) =>
                {
                    let n = all.len() as u64;
                    let step = PlanStep {
                        step: "message counts and bytes per pair, kept at import".into(),
                        estimated: n,
                        actual: None,
                    };
                    return Ok((ResultSet::new(Vec::<String>::new()), vec![step]));
                }
                // The others select rows, which plan-only reading leaves unread.
                _ => {}
            }
        }
        Ok(match statistic {
            Statistic::FanIn | Statistic::FanOut => {
                let ranks = fixed_ranks(if statistic == Statistic::FanIn {
                    "FAN_IN"
                } else {
                    "FAN_OUT"
                })?;
                let traffic = stats::process_traffic(self.trace)?;
                let dir = if statistic == Statistic::FanIn {
                    stats::Direction::In
                } else {
                    stats::Direction::Out
                };
                let r = stats::fan_table(&traffic, &ranks, dir);
                let n = r.len();
                (
                    r,
                    plan_of("scan messages and collective operations per process", n),
                )
            }
            Statistic::Statistics
                if !filter.within.is_empty()
                    || filter.time.is_some()
                    || filter.predicate.is_some() =>
            {
                // Over the operations the clauses select (a phase, a pattern, a time window).
                let ranks = match &filter.scope {
                    Some(scope) => self.scope_ranks(scope)?,
                    None => all.clone(),
                };
                let sel = Selection {
                    target: Target::Operations,
                    filter: filter.clone(),
                };
                let mut selected = self.select_ids(&sel)?;
                let ops: Vec<Operation> =
                    self.collect_rows(&sel, &mut selected, |row| match row {
                        Row::Op(_, o) => Some(o),
                        Row::Msg(..) => None,
                    })?;
                (
                    stats::statistics_table_of(self.trace, &ranks, &ops),
                    selected.plan,
                )
            }
            Statistic::Statistics => {
                let ranks = fixed_ranks("STATISTICS")?;
                let r = stats::statistics_table(self.trace, &ranks)?;
                let n = r.len();
                (
                    r,
                    plan_of(
                        "count operations per process and kind; bytes per process",
                        n,
                    ),
                )
            }
            Statistic::MpiTime => {
                let ranks = fixed_ranks("MPI TIME")?;
                let r = stats::mpi_time(self.trace, &ranks)?;
                let n = r.len();
                (r, plan_of("sum operation durations per process", n))
            }
            Statistic::Matrix(of)
                if filter.is_empty() && target.is_none_or(|t| t == Target::Messages) =>
            {
                let of = match of {
                    super::ast::MatrixMeasure::Bytes => stats::MatrixOf::Bytes,
                    super::ast::MatrixMeasure::Count => stats::MatrixOf::Count,
                };
                let r = stats::trace_matrix(self.trace, &all, of)?;
                let n = r.len();
                (
                    r,
                    plan_of("message counts and bytes per pair, kept at import", n),
                )
            }
            Statistic::Matrix(of) => {
                let sel = Selection {
                    target: target.unwrap_or(Target::Messages),
                    filter: filter.clone(),
                };
                if sel.target != Target::Messages {
                    return Err(usage("a COMMUNICATION MATRIX is computed over messages"));
                }
                let mut selected = self.select_ids(&sel)?;
                let messages: Vec<Message> =
                    self.collect_rows(&sel, &mut selected, |row| match row {
                        Row::Msg(_, m) => Some(m),
                        Row::Op(..) => None,
                    })?;
                let ranks = match &filter.scope {
                    Some(Scope::For(s) | Scope::Among(s)) => self.ranks(s)?,
                    _ => all.clone(),
                };
                let of = match of {
                    super::ast::MatrixMeasure::Bytes => stats::MatrixOf::Bytes,
                    super::ast::MatrixMeasure::Count => stats::MatrixOf::Count,
                };
                (
                    stats::communication_matrix(&messages, &ranks, of),
                    selected.plan,
                )
            }
            Statistic::Histogram { of, bins } => {
                let sel = Selection {
                    target: target.unwrap_or(Target::Messages),
                    filter: filter.clone(),
                };
                let mut selected = self.select_ids(&sel)?;
                let values: Vec<u64> =
                    self.collect_rows(&sel, &mut selected, |row| Some(measure(&row, of)))?;
                let bins = match bins {
                    Bins::Log2 => stats::Bins::Log2,
                    Bins::Count(n) if n > super::parser::MAX_BINS => {
                        return Err(Error::limit(
                            Limit::HistogramBins,
                            format!(
                                "a histogram has at most {} bins, BINS asks for {n}",
                                super::parser::MAX_BINS
                            ),
                        ))
                    }
                    Bins::Count(n) => stats::Bins::Linear(n),
                };
                (stats::size_histogram(&values, bins), selected.plan)
            }
        })
    }

    /// Evaluates a selection to the ids a view stores.
    pub fn view_ids(&self, sel: &Selection) -> Result<StoredView> {
        let mut selected = self.select_ids(sel)?;
        let mut ids = RoaringTreemap::new();
        self.each_row(sel, &mut selected, |row| {
            match row {
                Row::Op(id, _) | Row::Msg(id, _) => ids.insert(id),
            };
            Ok(true)
        })?;
        Ok(StoredView {
            messages: selected.messages,
            definition: format!("SELECT {sel}"),
            ids,
        })
    }
}

/// A syntax error as the crate's error: "at column 22: expected …" with the statement and a
/// caret (the CLI adds its own "error: ").
pub fn query_error(e: super::QueryError) -> Error {
    match e.limit {
        Some(limit) => Error::limit(limit, super::parser::Located(&e).to_string()),
        None => Error::Syntax(Box::new(e)),
    }
}

/// Refuses a condition nested deeper than the language allows (a tree a library caller built
/// can be any depth; the parser stops at the same limit).
fn check_nesting(p: &Expr) -> Result<()> {
    if p.depth() > super::ast::MAX_NESTING {
        return Err(Error::limit(
            Limit::NestingDepth,
            format!(
                "a condition nests at most {} levels of parentheses and NOT; this one {}",
                super::ast::MAX_NESTING,
                p.depth()
            ),
        ));
    }
    Ok(())
}

fn describe_comm(c: &CommRef) -> String {
    match c {
        CommRef::Name(n) => n.clone(),
        CommRef::Id(id) => id.to_string(),
        CommRef::World => "WORLD".into(),
    }
}

fn rank_list(ranks: &[Rank]) -> String {
    if ranks.len() > 8 {
        format!("[{} ranks]", ranks.len())
    } else {
        format!("{ranks:?}")
    }
}

fn overlaps(row: &Row, w: TimeWindow) -> bool {
    let (start, end) = match row {
        Row::Op(_, o) => (o.start, o.end),
        Row::Msg(_, m) => (m.send_time, m.recv_time.max(m.send_time)),
    };
    start <= w.end && end >= w.start
}

/// For AMONG on operations: a point-to-point operation's peers must be in the set too.
fn peers_within(row: &Row, set: &[Rank]) -> bool {
    match row {
        Row::Op(_, o) => [o.dest, o.source]
            .iter()
            .flatten()
            .all(|p| set.binary_search(p).is_ok()),
        Row::Msg(..) => true,
    }
}

fn measure(row: &Row, m: Measure) -> u64 {
    match (row, m) {
        (Row::Op(_, o), Measure::Size) => o.send_bytes.max(o.recv_bytes),
        (Row::Op(_, o), Measure::Duration) => o.end - o.start,
        (Row::Msg(_, msg), Measure::Size) => msg.bytes,
        (Row::Msg(_, msg), Measure::Duration) => msg.recv_time.saturating_sub(msg.send_time),
    }
}

/// A field's value on a row, exactly (sizes and times are 64-bit unsigned, tags and ranks 32
/// bits: all fit 128 bits with their sign); `None` when the row has no such field (then a
/// comparison fails, except `!=`, which holds).
fn field(row: &Row, f: Field) -> Option<i128> {
    match row {
        Row::Op(_, o) => match f {
            Field::Size => Some(i128::from(o.send_bytes.max(o.recv_bytes))),
            Field::Tag => o.send_tag.or(o.recv_tag).map(i128::from),
            Field::Sender => {
                if o.kind.is_send() {
                    Some(i128::from(o.rank))
                } else {
                    o.source.map(i128::from)
                }
            }
            Field::Receiver => {
                if o.kind.is_send() {
                    o.dest.map(i128::from)
                } else if o.kind.is_receive() {
                    Some(i128::from(o.rank))
                } else {
                    None
                }
            }
            Field::Duration => Some(i128::from(o.end) - i128::from(o.start)),
            Field::Peer => o.dest.or(o.source).map(i128::from),
            Field::Root => o.root.map(i128::from),
            Field::Comm => o.comm.map(i128::from),
        },
        Row::Msg(_, m) => match f {
            Field::Size => Some(i128::from(m.bytes)),
            Field::Tag => Some(i128::from(m.tag)),
            Field::Sender => Some(i128::from(m.sender)),
            Field::Receiver | Field::Peer => Some(i128::from(m.receiver)),
            Field::Duration => Some(i128::from(m.recv_time.saturating_sub(m.send_time))),
            Field::Root => None,
            Field::Comm => Some(i128::from(m.comm)),
        },
    }
}

/// Whether `e` holds on `row`. Chains are flat lists and nesting is bounded
/// ([`check_nesting`]), so the recursion is shallow.
fn eval(e: &Expr, row: &Row, comms: &BTreeMap<String, CommId>) -> bool {
    match e {
        Expr::And(items) => items.iter().all(|x| eval(x, row, comms)),
        Expr::Or(items) => items.iter().any(|x| eval(x, row, comms)),
        Expr::Not(a) => !eval(a, row, comms),
        Expr::Compare(c) => {
            let right = match &c.value {
                super::ast::Value::Number(n) => *n,
                super::ast::Value::Comm(cr) => match comms.get(&describe_comm(cr)) {
                    Some(id) => i128::from(*id),
                    None => return c.op == CmpOp::Ne,
                },
            };
            match field(row, c.field) {
                Some(left) => c.op.holds(left, right),
                None => c.op == CmpOp::Ne,
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum GroupValue {
    None,
    Int(i64),
    Text(String),
}

impl GroupValue {
    fn into_value(self) -> Value {
        match self {
            GroupValue::None => Value::Null,
            GroupValue::Int(i) => Value::Int(i128::from(i)),
            GroupValue::Text(s) => Value::Text(s),
        }
    }
}

#[derive(Debug, Clone)]
struct Acc {
    count: u64,
    sum: u128,
    /// Meaningful only when `count > 0`.
    min: u64,
    max: u64,
}

impl Default for Acc {
    fn default() -> Acc {
        Acc {
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Acc {
    fn merge(&mut self, o: &Acc) {
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    #[inline]
    fn add(&mut self, v: u64) {
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    fn value(&self, a: Aggregate) -> Result<Value> {
        Ok(match a {
            Aggregate::Count => self.count.into(),
            Aggregate::Sum(_) => Value::Int(i128::try_from(self.sum).map_err(|_| {
                Error::limit(
                    Limit::ValueRange,
                    format!("{a} is {}, past 2^127 - 1", self.sum),
                )
            })?),
            Aggregate::Avg(_) => {
                if self.count == 0 {
                    Value::Null
                } else {
                    Value::Float(self.sum as f64 / self.count as f64)
                }
            }
            Aggregate::Min(_) => (self.count > 0).then_some(self.min).into(),
            Aggregate::Max(_) => (self.count > 0).then_some(self.max).into(),
        })
    }
}

/// The result columns `ORDER BY` names, with whether each is descending.
fn order_keys(columns: &[String], s: &Select) -> Result<Vec<(usize, bool)>> {
    let column = |name: &str| columns.iter().position(|c| c.eq_ignore_ascii_case(name));
    s.order_by
        .iter()
        .map(|k| {
            let col = match &k.column {
                OrderColumn::Name(n) => column(n),
                OrderColumn::Aggregate(a) => column(&a.to_string()),
                OrderColumn::Position(p) => {
                    (*p as usize).checked_sub(1).filter(|i| *i < columns.len())
                }
            }
            .ok_or_else(|| {
                Error::unknown(
                    NameKind::Column,
                    k.column_text(),
                    format!(
                        "ORDER BY {}: the result has no such column; its columns are {}",
                        k.column_text(),
                        columns.join(", ")
                    ),
                )
            })?;
            Ok((col, k.descending))
        })
        .collect()
}

/// Orders two result rows by `keys`.
fn compare_rows(keys: &[(usize, bool)], a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    for &(c, desc) in keys {
        let o = compare_values(&a[c], &b[c]);
        let o = if desc { o.reverse() } else { o };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}

/// The `k` first rows in `keys` order of everything pushed, ties kept in the order pushed,
/// holding at most about 2k rows: the same rows, in the same order, as a stable sort of all
/// of them cut to k.
struct TopK {
    keys: Vec<(usize, bool)>,
    k: usize,
    rows: Vec<Vec<Value>>,
}

impl TopK {
    fn push(&mut self, row: Vec<Value>) {
        self.rows.push(row);
        if self.rows.len() >= 2 * self.k + 1024 {
            self.cut();
        }
    }

    fn cut(&mut self) {
        let keys = &self.keys;
        self.rows.sort_by(|a, b| compare_rows(keys, a, b));
        self.rows.truncate(self.k);
    }

    fn into_rows(mut self) -> Vec<Vec<Value>> {
        self.cut();
        self.rows
    }
}

fn order_and_limit(mut r: ResultSet, s: &Select, cancel: Option<&AtomicBool>) -> Result<ResultSet> {
    if !s.order_by.is_empty() {
        let keys = order_keys(&r.columns, s)?;
        let rows = std::mem::take(&mut r.rows);
        r.rows = sort_rows(rows, |a, b| compare_rows(&keys, a, b), cancel)?;
    }
    if let Some(n) = s.limit {
        r.rows.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(r)
}

/// Rows a sort orders between two looks at the cancellation flag.
const SORT_RUN: usize = 1 << 16;

/// A stable sort of `rows` by `cmp` that stops with [`Error::Cancelled`] soon after `cancel` is
/// set: runs of [`SORT_RUN`] rows are sorted, then merged pairwise, the flag checked between
/// runs and merges.
fn sort_rows<T>(
    mut rows: Vec<T>,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
    cancel: Option<&AtomicBool>,
) -> Result<Vec<T>> {
    let check = || match cancel {
        Some(f) if f.load(Ordering::Relaxed) => Err(Error::Cancelled),
        _ => Ok(()),
    };
    if rows.len() <= SORT_RUN {
        check()?;
        rows.sort_by(&cmp);
        return Ok(rows);
    }
    let mut runs: Vec<Vec<T>> = Vec::new();
    while !rows.is_empty() {
        check()?;
        let rest = rows.split_off(rows.len().min(SORT_RUN));
        let mut run = std::mem::replace(&mut rows, rest);
        run.sort_by(&cmp);
        runs.push(run);
    }
    // Each pass merges neighbouring runs, the earlier one first on ties: the sort is stable.
    while runs.len() > 1 {
        let mut next = Vec::with_capacity(runs.len().div_ceil(2));
        let mut pass = runs.into_iter();
        while let Some(a) = pass.next() {
            let Some(b) = pass.next() else {
                next.push(a);
                break;
            };
            let mut merged = Vec::with_capacity(a.len() + b.len());
            let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
            loop {
                if merged.len() % SORT_RUN == 0 {
                    check()?;
                }
                let take_a = match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) => cmp(y, x) != std::cmp::Ordering::Less,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                merged.extend(if take_a { a.next() } else { b.next() });
            }
            next.push(merged);
        }
        runs = next;
    }
    Ok(runs.pop().unwrap_or_default())
}

fn compare_values(a: &Value, b: &Value) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (Value::Int(x), Value::Float(y)) => float_cmp(*x, *y),
        (Value::Float(x), Value::Int(y)) => float_cmp(*y, *x).reverse(),
        (Value::Text(x), Value::Text(y)) => x.cmp(y),
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Text(_), _) => Ordering::Greater,
        (_, Value::Text(_)) => Ordering::Less,
    }
}

/// An integer against a float (NaN equal to everything, as elsewhere in the ordering).
fn float_cmp(x: i128, y: f64) -> std::cmp::Ordering {
    (x as f64)
        .partial_cmp(&y)
        .unwrap_or(std::cmp::Ordering::Equal)
}

impl super::ast::OrderKey {
    fn column_text(&self) -> String {
        match &self.column {
            OrderColumn::Name(n) => n.clone(),
            OrderColumn::Aggregate(a) => a.to_string(),
            OrderColumn::Position(p) => p.to_string(),
        }
    }
}

/// A user's conversation with a database: the current trace, and statements run one by one.
///
/// ```no_run
/// let db = mtfdb::Database::open("traces.mtfdb")?;
/// let mut session = mtfdb::query::Session::new(db);
/// let fan_in = session.run("SELECT FAN_IN FOR ALL PROCESSES")?;
/// print!("{}", fan_in.to_table());
/// # Ok::<(), mtfdb::Error>(())
/// ```
pub struct Session {
    db: Database,
    current: Option<String>,
    cancel: Arc<AtomicBool>,
    /// The trace last queried, kept open (its metadata decoded) between statements.
    open: Option<Trace>,
}

impl Session {
    /// A session on `db`, with no trace chosen yet (a query then uses the only trace).
    pub fn new(db: Database) -> Session {
        Session {
            db,
            current: None,
            cancel: Arc::new(AtomicBool::new(false)),
            open: None,
        }
    }

    /// The flag that cancels the running statement when set (it is cleared when the next
    /// statement starts).
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    /// Makes `flag` the one that cancels this session's statements (a process-wide Ctrl-C
    /// flag, say); the trace kept open follows it too.
    pub fn set_cancel_flag(&mut self, flag: Arc<AtomicBool>) {
        if let Some(t) = &mut self.open {
            t.set_cancel(flag.clone());
        }
        self.cancel = flag;
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Chooses the trace later statements query.
    pub fn use_trace(&mut self, name: &str) -> Result<()> {
        self.open = Some(self.open_trace(name)?);
        self.current = Some(name.to_string());
        Ok(())
    }

    /// Opens trace `name`, stopped by this session's cancellation flag.
    fn open_trace(&self, name: &str) -> Result<Trace> {
        let mut trace = self.db.trace(name)?;
        trace.set_cancel(self.cancel.clone());
        Ok(trace)
    }

    /// Lets go of the trace kept open between statements (an import in this process can then
    /// release sled's memory as it goes).
    pub fn close_trace(&mut self) {
        self.open = None;
    }

    /// The current trace, opened once and kept while it stays current.
    fn trace(&mut self) -> Result<&Trace> {
        let name = self.current_trace()?;
        let open = match self.open.take() {
            Some(t) if t.name() == name => t,
            _ => self.open_trace(&name)?,
        };
        Ok(self.open.insert(open))
    }

    /// The trace statements query: the chosen one, else the only one.
    pub fn current_trace(&self) -> Result<String> {
        if let Some(t) = &self.current {
            return Ok(t.clone());
        }
        let traces = self.db.trace_names()?;
        match traces.len() {
            1 => Ok(traces.into_iter().next().unwrap_or_default()),
            0 => Err(usage("the database holds no traces; import one first (mtfdb import FILE)")),
            _ => Err(usage(format!(
                "the database holds several traces; choose one with --trace NAME or USE TRACE name: {}",
                traces.join(", ")
            ))),
        }
    }

    /// Parses and runs one statement, returning its result.
    pub fn run(&mut self, text: &str) -> Result<ResultSet> {
        let stmt = super::parse_statement(text).map_err(query_error)?;
        self.execute(&stmt)
    }

    /// Runs one statement and hands its rows to `sink` as they come: a `SELECT` of rows is
    /// written while it is read (see [`Engine::select_into`]); other statements are computed
    /// and then handed over whole.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
    /// # db.import(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/traces/stencil2d-16.mtf"), Some("paper")).unwrap();
    /// let mut session = mtfdb::query::Session::new(db);
    /// session.use_trace("paper").unwrap();
    /// let mut first = mtfdb::query::ResultSet::new(Vec::<String>::new());
    /// session.run_into("SELECT ALL OPERATIONS LIMIT 2", &mut first).unwrap();
    /// assert_eq!(first.len(), 2);
    /// ```
    pub fn run_into(&mut self, text: &str, sink: &mut dyn RowSink) -> Result<()> {
        let stmt = super::parse_statement(text).map_err(query_error)?;
        let Statement::Select(select) = &stmt else {
            return sink.result(self.execute(&stmt)?);
        };
        self.cancel.store(false, Ordering::Relaxed);
        let cancel = self.cancel.clone();
        let trace = self.trace()?;
        Engine::with_cancel(trace, &cancel).select_into(select, sink)
    }

    /// Runs a parsed statement.
    pub fn execute(&mut self, stmt: &Statement) -> Result<ResultSet> {
        self.cancel.store(false, Ordering::Relaxed);
        let cancel = self.cancel.clone();
        let out = match stmt {
            Statement::UseTrace(name) => {
                self.use_trace(name)?;
                let mut r = ResultSet::new(["trace"]);
                r.push(vec![name.clone().into()]);
                r
            }
            Statement::Show(ShowWhat::Traces) => self.show_traces()?,
            Statement::Show(what) => self.show(*what)?,
            Statement::Select(s) => {
                let trace = self.trace()?;
                Engine::with_cancel(trace, &cancel).select(s, false)?
            }
            Statement::Explain(s) => {
                let trace = self.trace()?;
                Engine::with_cancel(trace, &cancel)
                    .plan_only()
                    .select(s, true)?
            }
            Statement::ExplainAnalyze(s) => {
                let trace = self.trace()?;
                Engine::with_cancel(trace, &cancel).select(s, true)?
            }
            Statement::CreateView { name, selection } => {
                let chars = name.chars().count();
                if chars > super::parser::MAX_NAME_CHARS {
                    return Err(Error::limit(
                        Limit::NameLength,
                        format!(
                            "a view name has at most {} characters, this one {chars}",
                            super::parser::MAX_NAME_CHARS
                        ),
                    ));
                }
                let trace = self.open_trace(&self.current_trace()?)?;
                let view = Engine::with_cancel(&trace, &cancel).view_ids(selection)?;
                // A Ctrl-C during the selection leaves the views as they were.
                trace.check_cancel()?;
                trace.put_view(name, &view)?;
                let mut r = ResultSet::new(["view", "rows"]);
                r.push(vec![name.clone().into(), view.ids.len().into()]);
                r
            }
            Statement::Analysis(a) => self.analysis(a)?,
            Statement::DropView(name) => {
                let trace = self.db.trace(&self.current_trace()?)?;
                if !trace.drop_view(name)? {
                    return Err(Error::unknown(
                        NameKind::View,
                        name,
                        format!("no view named {name:?} in trace {:?}", trace.name()),
                    ));
                }
                let mut r = ResultSet::new(["dropped view"]);
                r.push(vec![name.clone().into()]);
                r
            }
        };
        Ok(out)
    }

    /// `SHOW TRACES`: every trace of the database with its counts.
    fn show_traces(&self) -> Result<ResultSet> {
        let mut r = ResultSet::new([
            "name",
            "processes",
            "operations",
            "messages",
            "format",
            "source",
        ]);
        for t in self.db.traces()? {
            r.push(vec![
                t.name.into(),
                (t.processes as u64).into(),
                t.summary.operations.into(),
                t.summary.messages.into(),
                t.format.into(),
                t.source.into(),
            ]);
        }
        Ok(r)
    }

    /// Pattern and phase statements: results are read from the trace's stored views when
    /// they were computed before with the same parameters.
    fn analysis(&mut self, a: &Analysis) -> Result<ResultSet> {
        let trace = self.trace()?;
        let params = PatternParams::default();
        Ok(match a {
            Analysis::ProcessPatterns { rank, envelope } => {
                let params = PatternParams {
                    envelope: *envelope,
                    ..params
                };
                let rank = known_rank(trace, *rank)?;
                let found = detection::patterns(trace, &params, false)?;
                let Some(p) = found.processes.iter().find(|p| p.rank == rank) else {
                    return Err(Error::Corrupt(format!(
                        "the stored patterns have no process {rank}"
                    )));
                };
                let mut r =
                    ResultSet::new(["pattern", "sequence", "length", "occurrences", "positions"]);
                for (i, pat) in p.patterns.iter().enumerate() {
                    r.push(vec![
                        (i as u64 + 1).into(),
                        pat.sequence.clone().into(),
                        pat.length.into(),
                        (pat.positions.len() as u64).into(),
                        list_text(&pat.positions, 20).into(),
                    ]);
                }
                r
            }
            Analysis::CommunicationPatterns { envelope } => {
                let params = PatternParams {
                    envelope: *envelope,
                    ..params
                };
                let found = detection::patterns(trace, &params, false)?;
                let mut r = ResultSet::new([
                    "pattern",
                    "processes",
                    "occurrences",
                    "events",
                    "messages",
                    "first_s",
                    "last_s",
                    "shape",
                ]);
                for p in &found.patterns {
                    let first = p.occurrences.first().map_or(0, |o| o.0);
                    let last = p.occurrences.last().map_or(0, |o| o.1);
                    r.push(vec![
                        p.id.into(),
                        crate::model::rank_ranges(&p.processes).into(),
                        (p.occurrences.len() as u64).into(),
                        p.events.into(),
                        p.message_ids().len().into(),
                        seconds(first).into(),
                        seconds(last).into(),
                        shorten(&p.shape, 200).into(),
                    ]);
                }
                r
            }
            Analysis::Match { template, errors } => {
                let matches = detection::match_template(trace, template, *errors)?;
                let mut r = ResultSet::new([
                    "match",
                    "processes",
                    "edits",
                    "start_s",
                    "end_s",
                    "operations",
                ]);
                for (i, m) in matches.iter().enumerate() {
                    r.push(vec![
                        (i as u64 + 1).into(),
                        crate::model::rank_ranges(&m.processes).into(),
                        m.edits.into(),
                        seconds(m.start).into(),
                        seconds(m.end).into(),
                        m.ops.len().into(),
                    ]);
                }
                r
            }
            Analysis::Phases(threshold) => {
                let found = detection::phases(trace, &phase_params(*threshold), false)?;
                let mut r = ResultSet::new([
                    "phase",
                    "node",
                    "instances",
                    "start_s",
                    "end_s",
                    "duration_s",
                    "patterns",
                    "routine",
                ]);
                for p in &found.phases {
                    r.push(vec![
                        p.number.into(),
                        format!("S{}", p.node).into(),
                        format!("{}-{}", p.first, p.last).into(),
                        seconds(p.start).into(),
                        seconds(p.end).into(),
                        seconds(p.end - p.start).into(),
                        list_text(&p.patterns, 20).into(),
                        p.routine.clone().into(),
                    ]);
                }
                r
            }
            Analysis::PhaseTree(threshold) => {
                let found = detection::phases(trace, &phase_params(*threshold), false)?;
                let mut r = ResultSet::new(["segmentation tree"]);
                for line in found.tree.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r
            }
            Analysis::Loops(rank) => {
                let rank = known_rank(trace, *rank)?;
                let found = structure::loops(trace, false)?;
                let Some(p) = found.processes.iter().find(|p| p.rank == rank) else {
                    return Err(Error::Corrupt(format!(
                        "the stored loop models have no process {rank}"
                    )));
                };
                let mut r = ResultSet::new(["loop nest"]);
                for line in p.nest.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r.push(vec![format!(
                    "-- {} events, {} bytes of model",
                    p.events,
                    p.nest.len()
                )
                .into()]);
                if let Some(main) = &p.main_loop {
                    r.push(vec![format!("-- main loop: {main}").into()]);
                }
                r
            }
            Analysis::GlobalModel => {
                let found = structure::global_model_text(trace, false)?;
                let mut r = ResultSet::new(["global model"]);
                for line in found.text.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r
            }
            Analysis::Topology { comm, phase } => {
                let comm_id = match comm {
                    Some(c) => Some(Engine::new(trace).comm(c)?),
                    None => None,
                };
                let bitmaps = match phase {
                    Some(k) => {
                        let (messages, ops) = phase_ids(trace, *k)?;
                        Some((*k, messages, ops))
                    }
                    None => None,
                };
                let t = structure::topology_of(
                    trace,
                    comm_id,
                    bitmaps.as_ref().map(|(k, m, o)| (*k, m, o)),
                    false,
                )?;
                let mut r = ResultSet::new([
                    "topology",
                    "dimensions",
                    "traffic_dropped",
                    "rank",
                    "coordinates",
                ]);
                let (dims, coordinates) = match &t.topology {
                    Some(found) => (&found.dims[..], &found.coordinates[..]),
                    None => (&[][..], &[][..]),
                };
                let dims: Vec<String> = dims.iter().map(u32::to_string).collect();
                if coordinates.is_empty() {
                    r.push(vec![
                        t.description.clone().into(),
                        Value::Null,
                        t.dropped_fraction.into(),
                        Value::Null,
                        Value::Null,
                    ]);
                }
                for (rank, coords) in coordinates.iter().enumerate() {
                    let first = rank == 0;
                    let coords: Vec<String> = coords.iter().map(u32::to_string).collect();
                    r.push(vec![
                        if first {
                            t.description.clone().into()
                        } else {
                            Value::Null
                        },
                        if first {
                            dims.join("x").into()
                        } else {
                            Value::Null
                        },
                        if first {
                            t.dropped_fraction.into()
                        } else {
                            Value::Null
                        },
                        (rank as u64).into(),
                        format!("({})", coords.join(",")).into(),
                    ]);
                }
                r
            }
            Analysis::LogicalTrace(rank) => {
                let found = structure::topology_of(trace, None, None, false)?;
                let Some(t) = found.topology else {
                    return Err(usage(format!(
                        "a logical trace needs a known topology: {}",
                        found.description
                    )));
                };
                let rank = match rank {
                    Some(r) => known_rank(trace, *r)?,
                    None => structure::maximal_process(&t),
                };
                let events = structure::logical_trace(trace, &t, rank)?;
                let nest = structure::logical_nest(&events);
                let mut r = ResultSet::new(["logical trace"]);
                r.push(vec![format!("-- rank {rank}; topology: {t}").into()]);
                for line in nest.lines() {
                    r.push(vec![line.to_string().into()]);
                }
                r.push(vec![format!(
                    "-- {} events, {} bytes of model",
                    events.len(),
                    nest.len()
                )
                .into()]);
                r
            }
            Analysis::Refresh => {
                let (found, phases) = detection::refresh(trace, &params)?;
                let mut r = ResultSet::new(["computed", "count", "events", "seconds"]);
                r.push(vec![
                    "communication patterns".into(),
                    (found.patterns.len() as u64).into(),
                    found.events.into(),
                    found.seconds.into(),
                ]);
                r.push(vec![
                    "phases".into(),
                    (phases.phases.len() as u64).into(),
                    (phases.nodes.len() as u64).into(),
                    phases.seconds.into(),
                ]);
                r
            }
        })
    }

    fn show(&self, what: ShowWhat) -> Result<ResultSet> {
        let trace = self.open_trace(&self.current_trace()?)?;
        let h = trace.header();
        Ok(match what {
            ShowWhat::Traces => self.show_traces()?,
            ShowWhat::Processes => {
                let counts = trace.operations_per_rank();
                let mut r = ResultSet::new(["rank", "name", "processor", "operations"]);
                for p in &h.processes {
                    let node = p
                        .processor
                        .and_then(|id| h.processors.iter().find(|q| q.id == id))
                        .map(|q| q.name.clone());
                    r.push(vec![
                        p.rank.into(),
                        p.name.clone().into(),
                        node.into(),
                        counts.get(p.rank as usize).copied().into(),
                    ]);
                }
                r
            }
            ShowWhat::Communicators => {
                let mut r = ResultSet::new(["id", "name", "size", "members"]);
                for c in &h.communicators {
                    let members: Vec<String> = c.members.iter().map(|m| m.to_string()).collect();
                    r.push(vec![
                        c.id.into(),
                        c.name.clone().into(),
                        (c.members.len() as u64).into(),
                        members.join(",").into(),
                    ]);
                }
                r
            }
            ShowWhat::Operations => {
                let mut r = ResultSet::new(["operation", "count"]);
                for (k, n) in &trace.summary().by_kind {
                    r.push(vec![trace.kind_name(*k).into(), (*n).into()]);
                }
                r
            }
            ShowWhat::Views => {
                let mut r = ResultSet::new(["name", "rows", "of", "definition"]);
                for (name, v) in trace.views()? {
                    r.push(vec![
                        name.into(),
                        v.ids.len().into(),
                        if v.messages { "messages" } else { "operations" }.into(),
                        v.definition.into(),
                    ]);
                }
                r
            }
        })
    }
}
