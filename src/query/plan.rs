//! Planning: a selection becomes bitmap algebra over the store's indexes (process,
//! communicator, kind, peer; sender, receiver, communicator for messages) and chunk pruning by
//! time, with each step recorded as a [`PlanStep`] that `EXPLAIN` prints. No row is read here:
//! the [`Selected`] ids and their plan are what the operators of [`exec`](super::exec) read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use roaring::RoaringTreemap;

use super::ast::{Scope, Selection, Target, Within};
use super::exec::{compares_time, reads_counters, uses_wait, Counters};
use super::names::{no_pattern, phase_ids, phase_of, rank_list};
use super::usage;
use crate::analysis::clock::{self, ClockCorrection, ClockMap};
use crate::analysis::detection::{self, PatternParams, PhaseParams};
use crate::analysis::waits::{self, WaitStates};
use crate::error::{Error, Result};
use crate::model::OpKind;
use crate::store::ids::{chunk_id_space, chunk_ids};
use crate::store::{IndexDim, OpChunkInfo};
use crate::Trace;

/// One step of a plan, as `EXPLAIN` shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlanStep {
    /// What the step does.
    pub step: String,
    /// Rows the step keeps, as the bitmaps say (before rows are read).
    pub estimated: u64,
    /// Rows that survive it once read (`None` for steps answered by bitmaps alone).
    pub actual: Option<u64>,
}

/// What a selection evaluates to: operation or message ids, and the plan that found them.
pub(crate) struct Selected {
    pub(crate) messages: bool,
    /// The rows are the CPU bursts before the selected operations.
    pub(crate) bursts: bool,
    /// The rows are a record target's, read from its table (`ids` is then empty).
    pub(crate) records: Option<Target>,
    pub(crate) ids: RoaringTreemap,
    pub(crate) plan: Vec<PlanStep>,
    /// The trace's wait states, loaded only when the statement reads `WAIT` (never under
    /// `EXPLAIN`): operation rows then carry a `wait_ns` column.
    pub(crate) waits: Option<Arc<WaitStates>>,
    /// The trace's counters, when the statement reads them (its rows, a counter aggregate, a
    /// counter in `WHERE`) and its rows are calls of a trace that has some: each row then
    /// carries its values, read with its chunk, and a column per counter.
    pub(crate) counters: Option<Arc<Counters>>,
    /// The clock map the wait states were computed on (`WITH CLOCK CORRECTION`), loaded with
    /// them; `None` for the stored times.
    pub(crate) clock: Option<Arc<ClockMap>>,
}

/// Runs statements against one trace.
#[derive(Clone, Copy)]
pub(crate) struct Engine<'a> {
    pub(crate) trace: &'a Trace,
    pub(crate) cancel: Option<&'a AtomicBool>,
    /// `EXPLAIN`: plan from the bitmaps and the stored results only; read no rows, run no
    /// analysis, write nothing.
    pub(crate) plan_only: bool,
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

    /// This engine for `EXPLAIN`: statements are planned, not run (see [`Statement::Explain`](super::ast::Statement::Explain)).
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

    pub(crate) fn check_cancel(&self) -> Result<()> {
        match self.cancel {
            Some(f) if f.load(Ordering::Relaxed) => Err(Error::Cancelled),
            _ => Ok(()),
        }
    }

    /// The union of `dim`'s bitmaps for `values`, reading only `chunks` when given.
    pub(crate) fn union_in(
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
    pub(crate) fn candidate_chunks(
        &self,
        sel: &Selection,
        messages: bool,
    ) -> Result<Option<Vec<u32>>> {
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
    pub(crate) fn kinds(&self, target: Target) -> Vec<OpKind> {
        self.trace
            .summary()
            .by_kind
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| match target {
                Target::Messages | Target::Operations | Target::CpuBursts => true,
                Target::RoutineCalls
                | Target::Requests
                | Target::CollectiveInstances
                | Target::Anomalies
                | Target::Metrics => false,
                Target::PointToPoint => k.is_send() || k.is_receive(),
                Target::Sends => k.is_send(),
                Target::Receives => k.is_receive(),
                Target::Collectives => k.is_collective(),
                Target::Operation(want) => *k == want,
            })
            .collect()
    }

    /// Evaluates a selection to ids by bitmap algebra, pruning chunks by time; rows are not
    /// read yet. The rows will carry their counters when its `WHERE` reads one.
    pub(crate) fn select_ids(&self, sel: &Selection) -> Result<Selected> {
        let mut selected = self.select_ids_only(sel)?;
        if reads_counters(sel.filter.predicate.as_ref()) {
            self.read_counters(sel, &mut selected)?;
        }
        Ok(selected)
    }

    /// Makes the rows of `selected` carry their counters (and a column each), when they are
    /// calls of a trace that recorded some.
    pub(crate) fn read_counters(&self, sel: &Selection, selected: &mut Selected) -> Result<()> {
        if selected.counters.is_none() {
            selected.counters = self.counters_of(sel.target)?;
        }
        Ok(())
    }

    /// [`Engine::select_ids`] without the counters.
    fn select_ids_only(&self, sel: &Selection) -> Result<Selected> {
        if sel.filter.time.is_some() {
            super::needs_times(self.trace, "BETWEEN TIME")?;
        }
        if sel.target == Target::CpuBursts {
            super::needs_times(self.trace, "CPU BURSTS")?;
        }
        if sel.filter.predicate.as_ref().is_some_and(compares_time) {
            super::needs_times(self.trace, "WHERE on DURATION or SKEW")?;
        }
        if sel.target.is_record() {
            return self.select_records(sel);
        }
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
        if !messages && !matches!(sel.target, Target::Operations | Target::CpuBursts) {
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
                    let found = detection::communication_patterns(
                        self.trace,
                        &PatternParams::default(),
                        false,
                    )?;
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
        let mut selected = Selected {
            messages,
            bursts: sel.target == Target::CpuBursts,
            records: None,
            ids,
            plan,
            waits: None,
            counters: None,
            clock: None,
        };
        if uses_wait(sel.filter.predicate.as_ref()) {
            if messages {
                return Err(usage(
                    "WAIT is the waiting time of an operation; messages have none \
                     (SELECT LATE SENDERS lists the messages that were waited for)",
                ));
            }
            self.load_waits(&mut selected, sel.filter.clock)?;
        }
        Ok(selected)
    }

    /// Gives `selected` the trace's wait states on the clocks `correction` gives (with the
    /// clock map, unless `None`): read back when stored, else computed and stored first;
    /// under `EXPLAIN` only named as a step (nothing is computed or written).
    pub(crate) fn load_waits(
        &self,
        selected: &mut Selected,
        correction: ClockCorrection,
    ) -> Result<()> {
        super::needs_times(self.trace, "WAIT")?;
        if selected.waits.is_some() {
            return Ok(());
        }
        let estimated = selected.ids.len();
        let corrected = match correction {
            ClockCorrection::None => String::new(),
            c => format!(" on clocks corrected by {c}"),
        };
        if self.plan_only && correction != ClockCorrection::None {
            selected.plan.push(PlanStep {
                step: super::analyses::clock_step(self.trace, correction)?,
                estimated: self.trace.summary().messages,
                actual: None,
            });
        }
        let step = if self.plan_only {
            if self
                .trace
                .result::<WaitStates>(&waits::waits_key(correction))?
                .is_some()
            {
                format!("read the stored wait states{corrected}")
            } else {
                format!("wait state analysis{corrected} runs first (nothing stored yet)")
            }
        } else {
            if correction != ClockCorrection::None {
                selected.clock = Some(Arc::new(clock::stored_map(self.trace, correction, false)?));
            }
            selected.waits = Some(Arc::new(waits::stored_wait_states_with(
                self.trace, correction, false,
            )?));
            format!("read the stored wait states{corrected} (computed and stored the first time)")
        };
        selected.plan.push(PlanStep {
            step,
            estimated,
            actual: None,
        });
        Ok(())
    }

    /// `EXPLAIN`'s step for a pattern's or phase's ids: from the stored result when there is
    /// one; else the analysis that would run first is named and the ids are left as they are
    /// (the estimate is an upper bound).
    pub(crate) fn plan_stored_ids(
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

    pub(crate) fn scope_bitmap(
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
}
