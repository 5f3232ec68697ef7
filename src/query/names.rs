//! Name resolution: the processes, communicators, views, patterns and phases a statement
//! names, checked against the trace, with errors that list what does exist.

use roaring::RoaringTreemap;

use super::ast::{CommRef, ProcessSelector, Scope};
use super::plan::Engine;
use crate::analysis::detection::{self, PhaseParams};
use crate::error::{Error, NameKind, Result};
use crate::model::{CommId, Rank};
use crate::store::StoredView;
use crate::Trace;

pub(crate) fn no_pattern(n: u32, count: usize) -> Error {
    Error::unknown(
        NameKind::Pattern,
        n.to_string(),
        format!(
            "no communication pattern {n}: the trace has {count} (SELECT COMMUNICATION PATTERNS lists them)"
        ),
    )
}

/// `rank` if the trace has it, else why not: checked before any analysis runs.
pub(crate) fn known_rank(trace: &Trace, rank: Rank) -> Result<Rank> {
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
pub(crate) fn phase_ids(trace: &Trace, n: u32) -> Result<(RoaringTreemap, RoaringTreemap)> {
    super::needs_times(trace, "IN PHASE")?;
    phase_of(
        &detection::phases(trace, &PhaseParams::default(), false)?,
        n,
    )
}

/// Phase `n`'s message and operation ids in `found`.
pub(crate) fn phase_of(
    found: &detection::PhaseResult,
    n: u32,
) -> Result<(RoaringTreemap, RoaringTreemap)> {
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

impl<'a> Engine<'a> {
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
    pub(crate) fn scope_ranks(&self, scope: &Scope) -> Result<Vec<Rank>> {
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

    pub(crate) fn view(&self, name: &str) -> Result<StoredView> {
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
}

pub(crate) fn describe_comm(c: &CommRef) -> String {
    match c {
        CommRef::Name(n) => n.clone(),
        CommRef::Id(id) => id.to_string(),
        CommRef::World => "WORLD".into(),
    }
}

pub(crate) fn rank_list(ranks: &[Rank]) -> String {
    if ranks.len() > 8 {
        format!("[{} ranks]", ranks.len())
    } else {
        format!("{ranks:?}")
    }
}
