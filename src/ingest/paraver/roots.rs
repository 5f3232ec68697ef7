//! The roots of rooted collectives (`MPI_Bcast`, `MPI_Reduce`, `MPI_Gather`, …). Extrae
//! writes the root flag (event 50100003) on the root's own call only, but every member's
//! call must name its root. As MPI orders them, the i-th call of a collective kind on a
//! communicator by each member is instance i: once one member's call of an instance names
//! the root, every member's call of that instance gets it. Calls wait (in their threads)
//! until then; an instance whose every member called without a root never learns it.
//!
//! Memory follows the instances some member has called and some member has not.

use std::collections::VecDeque;

use crate::hash::FxHashMap;
use crate::model::{CommId, OpKind, Rank};

/// A collective call waiting for its root: (thread, item).
pub(crate) type Waiting = (u32, u64);

#[derive(Debug, Default)]
struct Instance {
    root: Option<Rank>,
    /// Members whose call of this instance was seen.
    called: usize,
    waiting: Vec<Waiting>,
}

/// The instances of one collective kind on one communicator.
#[derive(Debug)]
struct Series {
    /// Calls so far, per member.
    calls: Vec<u64>,
    /// Index of `open[0]`.
    base: u64,
    open: VecDeque<Instance>,
}

/// Instances of rooted collectives still waiting for a member.
#[derive(Debug, Default)]
pub(crate) struct Roots {
    series: FxHashMap<(CommId, OpKind), Series>,
}

impl Roots {
    /// A call of `kind` on `comm` (of `size` members) by its member `member`, naming `root`
    /// or not, made by item `who`. Returns the calls whose root is now settled: `Some` root,
    /// or `None` when the instance completed without any member naming it.
    pub fn call(
        &mut self,
        comm: CommId,
        kind: OpKind,
        size: usize,
        member: usize,
        root: Option<Rank>,
        who: Waiting,
    ) -> Vec<(Waiting, Option<Rank>)> {
        let series = self.series.entry((comm, kind)).or_insert_with(|| Series {
            calls: vec![0; size],
            base: 0,
            open: VecDeque::new(),
        });
        let Some(calls) = series.calls.get_mut(member) else {
            return Vec::new();
        };
        let index = *calls;
        *calls += 1;
        let pos = (index - series.base) as usize;
        while series.open.len() <= pos {
            series.open.push_back(Instance::default());
        }
        let instance = &mut series.open[pos];
        instance.called += 1;
        let mut settled = Vec::new();
        match (root, instance.root) {
            (Some(r), None) => {
                instance.root = Some(r);
                settled.extend(instance.waiting.drain(..).map(|w| (w, Some(r))));
            }
            (None, Some(r)) => settled.push((who, Some(r))),
            (None, None) => instance.waiting.push(who),
            (Some(_), Some(_)) => {}
        }
        // Instances every member called are done; one whose root nobody named never will.
        while series.open.front().is_some_and(|i| i.called >= size) {
            #[allow(clippy::expect_used)] // the caller saw an instance at the front
            let done = series.open.pop_front().expect("a front instance");
            series.base += 1;
            settled.extend(done.waiting.into_iter().map(|w| (w, None)));
        }
        settled
    }

    /// The end of the trace: every call still waiting never learns its root.
    pub fn finish(&mut self) -> Vec<Waiting> {
        let mut left = Vec::new();
        for series in self.series.values_mut() {
            for instance in series.open.drain(..) {
                left.extend(instance.waiting);
            }
        }
        left.sort_unstable();
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_learn_the_root_of_their_instance() {
        let mut roots = Roots::default();
        let bcast = |roots: &mut Roots, member, root, who| {
            roots.call(6, OpKind::Bcast, 3, member, root, (member as u32, who))
        };
        // Instance 0: members 0 and 1 wait, member 2 is the root (world rank 9).
        assert!(bcast(&mut roots, 0, None, 10).is_empty());
        assert!(bcast(&mut roots, 1, None, 11).is_empty());
        // Member 0 already calls instance 1.
        assert!(bcast(&mut roots, 0, None, 12).is_empty());
        assert_eq!(
            bcast(&mut roots, 2, Some(9), 13),
            vec![((0, 10), Some(9)), ((1, 11), Some(9))]
        );
        // Instance 1: its root (member 1) calls, then member 2 learns it at once.
        assert_eq!(bcast(&mut roots, 1, Some(4), 14), vec![((0, 12), Some(4))]);
        assert_eq!(bcast(&mut roots, 2, None, 15), vec![((2, 15), Some(4))]);
        // Instance 2: nobody names the root.
        bcast(&mut roots, 0, None, 16);
        bcast(&mut roots, 1, None, 17);
        assert_eq!(roots.finish(), vec![(0, 16), (1, 17)]);
    }
}
