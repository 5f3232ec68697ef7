//! Profiles (Cube's and Pipit's): each location's routine calls and MPI calls as one call
//! tree, walked once in time order. Every instant of a location between its first event and
//! its last is in exactly one innermost node, its *exclusive* time: the node's own routine,
//! MPI call, or the process itself (`(process)`, the tree's root) outside any call. So a
//! rank's exclusive times add up to its run time, and the root's inclusive time is that run
//! time. MPI calls are the tree's leaves (each its own routine), so a trace without routine
//! calls still profiles: its MPI calls under the process, and the computation between them
//! as the process's exclusive time.
//!
//! A call that crosses its parent's end (a leave out of order in a foreign trace) is cut at
//! the parent's end, so that the tree stays a tree and the sums stay exact.
//!
//! Cost: the operations are read chunk by chunk (start, end and call only) and each interval
//! is pushed and popped once; memory holds the routine calls of the selected ranks, the open
//! calls of one location, and the visitor's groups.

use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::{OpKind, Rank, RoutineCall, StrId, Time};
use crate::store::OperationField;
use crate::Trace;

/// The name of a node of the call tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Node {
    /// The process itself: the root, its exclusive time the computation outside any call.
    Process,
    /// A user routine (its interned name).
    Routine(StrId),
    /// An MPI call.
    Mpi(OpKind),
}

impl Node {
    /// The node's name: `(process)`, the routine's name, or the MPI call's.
    pub fn name(&self, trace: &Trace) -> String {
        match self {
            Node::Process => PROCESS.to_string(),
            Node::Routine(id) => trace
                .string(*id)
                .map_or_else(|| format!("routine{id}"), str::to_string),
            Node::Mpi(kind) => trace.kind_name(*kind),
        }
    }

    /// `process`, `routine` or `MPI`: what the node is.
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Process => "process",
            Node::Routine(_) => "routine",
            Node::Mpi(_) => "MPI",
        }
    }
}

/// The root's name in profiles: the process outside any routine or MPI call.
pub const PROCESS: &str = "(process)";

/// The call paths met so far, interned: path 0 is the root; every other path is its parent
/// path and its last node. Shared by every location, so a path names the same chain of
/// calls on every rank.
#[derive(Debug, Clone)]
pub struct CallPaths {
    nodes: Vec<Node>,
    node_ids: FxHashMap<Node, u32>,
    /// Per path: its parent path (none for the root) and its node's id.
    paths: Vec<(Option<u32>, u32)>,
    path_ids: FxHashMap<(u32, u32), u32>,
}

impl Default for CallPaths {
    fn default() -> CallPaths {
        let mut node_ids = FxHashMap::default();
        node_ids.insert(Node::Process, 0);
        CallPaths {
            nodes: vec![Node::Process],
            node_ids,
            paths: vec![(None, 0)],
            path_ids: FxHashMap::default(),
        }
    }
}

impl CallPaths {
    /// The root path: the process.
    pub const ROOT: u32 = 0;

    fn child(&mut self, parent: u32, node: Node) -> u32 {
        let next = self.nodes.len() as u32;
        let node_id = *self.node_ids.entry(node).or_insert(next);
        if node_id == next {
            self.nodes.push(node);
        }
        let next = self.paths.len() as u32;
        let id = *self.path_ids.entry((parent, node_id)).or_insert(next);
        if id == next {
            self.paths.push((Some(parent), node_id));
        }
        id
    }

    /// The node id of a path's last call (node ids are dense: 0 is the process).
    pub fn node_of(&self, path: u32) -> u32 {
        self.paths[path as usize].1
    }

    /// A node by its id.
    pub fn node(&self, id: u32) -> Node {
        self.nodes[id as usize]
    }

    /// Number of distinct nodes met.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A path's nodes from the outermost call in (the root left out; empty for the root).
    pub fn chain(&self, path: u32) -> Vec<Node> {
        let mut out = Vec::new();
        let mut at = Some(path);
        while let Some(p) = at {
            let (parent, node) = self.paths[p as usize];
            if parent.is_some() {
                out.push(self.nodes[node as usize]);
            }
            at = parent;
        }
        out.reverse();
        out
    }
}

/// What a walk reports, in time order per location.
pub trait Visitor {
    /// `[start, end)` of `rank` was exclusive time of the node ending `path` (at most one
    /// node per instant and location; never empty).
    fn exclusive(&mut self, rank: Rank, path: u32, start: Time, end: Time);

    /// A call of `path` closed: its inclusive and exclusive times and the time in MPI calls
    /// inside it (all of it for an MPI call).
    fn closed(&mut self, rank: Rank, path: u32, times: CallTimes);
}

/// A closed call's times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTimes {
    /// From its start to its end (ns).
    pub inclusive: Time,
    /// Inclusive less the inclusive time of the calls it holds (ns).
    pub exclusive: Time,
    /// Time in MPI calls inside it, itself included (ns).
    pub mpi: Time,
    /// True for an MPI call (all of its time is MPI time, none computation).
    pub mpi_call: bool,
}

/// A call open in the walk (clipped into its parent).
struct Open {
    path: u32,
    start: Time,
    end: Time,
    /// Inclusive time of its closed children.
    children: Time,
    /// Their MPI time.
    mpi: Time,
    is_mpi: bool,
}

/// One location's call tree as it is walked.
struct Tree {
    rank: Rank,
    stack: Vec<Open>,
    /// Time up to which exclusive time was reported.
    cursor: Time,
}

impl Tree {
    fn new(rank: Rank, start: Time, end: Time) -> Tree {
        Tree {
            rank,
            stack: vec![Open {
                path: CallPaths::ROOT,
                start,
                end,
                children: 0,
                mpi: 0,
                is_mpi: false,
            }],
            cursor: start,
        }
    }

    /// Enters a call `[start, end]` of `node`: the calls ended by then are closed first; it
    /// is cut to its parent, and left out when nothing of it is inside.
    fn enter(
        &mut self,
        paths: &mut CallPaths,
        v: &mut impl Visitor,
        node: Node,
        start: Time,
        end: Time,
    ) {
        while self.stack.len() > 1 && self.stack.last().is_some_and(|t| t.end <= start) {
            self.close(v);
        }
        let top = self.stack.last().expect("the root stays open");
        let s = start.max(self.cursor).max(top.start);
        let e = end.min(top.end);
        if e < s || (e == s && end > start) {
            return;
        }
        if s > self.cursor {
            v.exclusive(self.rank, top.path, self.cursor, s);
            self.cursor = s;
        }
        let path = paths.child(top.path, node);
        self.stack.push(Open {
            path,
            start: s,
            end: e,
            children: 0,
            mpi: 0,
            is_mpi: matches!(node, Node::Mpi(_)),
        });
    }

    /// Closes the innermost open call (the root too, last).
    fn close(&mut self, v: &mut impl Visitor) {
        let Some(n) = self.stack.pop() else { return };
        if n.end > self.cursor {
            v.exclusive(self.rank, n.path, self.cursor, n.end);
            self.cursor = n.end;
        }
        let inclusive = n.end - n.start;
        let mpi = if n.is_mpi { inclusive } else { n.mpi };
        if let Some(parent) = self.stack.last_mut() {
            parent.children += inclusive;
            parent.mpi += mpi;
        }
        v.closed(
            self.rank,
            n.path,
            CallTimes {
                inclusive,
                exclusive: inclusive - n.children.min(inclusive),
                mpi,
                mpi_call: n.is_mpi,
            },
        );
    }

    fn finish(mut self, v: &mut impl Visitor) {
        while !self.stack.is_empty() {
            self.close(v);
        }
    }
}

/// The ranks and time window a walk covers.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The world ranks (every rank when `None`).
    pub ranks: Option<Vec<Rank>>,
    /// Only time inside `[start, end]` (calls cut to it), when given.
    pub window: Option<(Time, Time)>,
}

/// The locations of the walk, their routine calls and spans, read before any operation.
pub struct Walk<'t> {
    trace: &'t Trace,
    /// Per selected rank, per thread: its routine calls by (start, depth).
    calls: FxHashMap<(Rank, u32), Vec<RoutineCall>>,
    ranks: Vec<Rank>,
    window: Option<(Time, Time)>,
    /// The call paths met: the visitor's path ids index it.
    pub paths: CallPaths,
}

impl<'t> Walk<'t> {
    /// Reads the routine calls of the scope's ranks.
    pub fn new(trace: &'t Trace, scope: &Scope) -> Result<Walk<'t>> {
        let all = trace.header().processes.len() as Rank;
        let ranks: Vec<Rank> = match &scope.ranks {
            Some(r) => r.clone(),
            None => (0..all).collect(),
        };
        let mut selected = vec![false; all as usize];
        for &r in &ranks {
            if let Some(s) = selected.get_mut(r as usize) {
                *s = true;
            }
        }
        let mut calls: FxHashMap<(Rank, u32), Vec<RoutineCall>> = FxHashMap::default();
        for c in trace.routine_calls()? {
            if selected.get(c.rank as usize).copied().unwrap_or(false) {
                calls.entry((c.rank, c.thread)).or_default().push(c);
            }
        }
        for list in calls.values_mut() {
            list.sort_unstable_by_key(|c| (c.start, c.depth, std::cmp::Reverse(c.end)));
        }
        Ok(Walk {
            trace,
            calls,
            ranks,
            window: scope.window,
            paths: CallPaths::default(),
        })
    }

    /// Each selected location `(rank, thread)` with its span, first event to last, cut to
    /// the window (locations with nothing inside left out); from the catalogue and the
    /// routine calls, no operation read.
    pub fn locations(&self) -> Vec<(Rank, u32, Time, Time)> {
        let mut spans: FxHashMap<(Rank, u32), (Time, Time)> = FxHashMap::default();
        let mut widen = |key: (Rank, u32), start: Time, end: Time| {
            let span = spans.entry(key).or_insert((start, end));
            span.0 = span.0.min(start);
            span.1 = span.1.max(end);
        };
        for &rank in &self.ranks {
            for info in self.trace.op_chunks_of(rank) {
                if info.rows > 0 {
                    widen(
                        (rank, info.thread),
                        info.first_start,
                        info.max_end.max(info.last_start),
                    );
                }
            }
        }
        for (&key, list) in &self.calls {
            for c in list {
                widen(key, c.start, c.end);
            }
        }
        let mut out: Vec<(Rank, u32, Time, Time)> = spans
            .into_iter()
            .filter_map(|((rank, thread), (s, e))| {
                let (s, e) = match self.window {
                    Some((ws, we)) => (s.max(ws), e.min(we)),
                    None => (s, e),
                };
                (s <= e).then_some((rank, thread, s, e))
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The earliest start and latest end of the selected locations (cut to the window).
    pub fn extent(&self) -> Option<(Time, Time)> {
        let locations = self.locations();
        let start = locations.iter().map(|l| l.2).min()?;
        let end = locations.iter().map(|l| l.3).max()?;
        Some((start, end))
    }

    /// Walks every selected location's call tree in time order, reporting to `v`.
    pub fn run(&mut self, v: &mut impl Visitor) -> Result<()> {
        use OperationField as F;
        let locations = self.locations();
        for (rank, thread, start, end) in locations {
            let mut tree = Tree::new(rank, start, end);
            let calls = self
                .calls
                .get(&(rank, thread))
                .map_or(&[][..], Vec::as_slice);
            let mut next = 0;
            for info in self.trace.op_chunks_of(rank) {
                if info.thread != thread || info.rows == 0 {
                    continue;
                }
                if let Some((ws, we)) = self.window {
                    if info.max_end.max(info.last_start) < ws || info.first_start > we {
                        continue;
                    }
                }
                let ops = self
                    .trace
                    .operation_columns(info.chunk, &[F::Start, F::End, F::Kind])?;
                for row in 0..ops.rows() {
                    let (s, e) = (ops.start(row), ops.end(row));
                    // Calls that start by the operation's start hold it (when they last).
                    while next < calls.len() && calls[next].start <= s {
                        let c = &calls[next];
                        tree.enter(&mut self.paths, v, Node::Routine(c.routine), c.start, c.end);
                        next += 1;
                    }
                    let node = Node::Mpi(ops.kind(row).unwrap_or(OpKind::Other(u32::MAX)));
                    tree.enter(&mut self.paths, v, node, s, e.max(s));
                }
            }
            for c in &calls[next..] {
                tree.enter(&mut self.paths, v, Node::Routine(c.routine), c.start, c.end);
            }
            tree.finish(v);
        }
        Ok(())
    }
}

/// One row of a profile: a routine (or call path), per rank or over all ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProfileRow {
    /// Calls (for the root: the locations).
    pub calls: u64,
    /// Inclusive time (ns).
    pub inclusive: Time,
    /// Exclusive time (ns).
    pub exclusive: Time,
    /// Time in MPI calls inside (ns).
    pub mpi: Time,
    /// Exclusive time not in an MPI call (ns).
    pub computation: Time,
}

/// How a profile groups its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ProfileBy {
    /// By routine (and MPI call) name: the flat profile.
    Routine,
    /// By call path: the chain of calls from the outermost in.
    CallPath,
}

/// A profile: its groups, keyed by (rank, when per rank; node id or path id).
#[derive(Debug, Clone)]
pub struct Profile {
    /// The call paths and nodes the keys name.
    pub paths: CallPaths,
    /// How the keys group.
    pub by: ProfileBy,
    /// Per group key: its row.
    pub rows: FxHashMap<(Option<Rank>, u32), ProfileRow>,
}

struct ProfileVisitor {
    per_rank: bool,
    rows: FxHashMap<(Option<Rank>, u32), ProfileRow>,
}

impl Visitor for ProfileVisitor {
    fn exclusive(&mut self, _: Rank, _: u32, _: Time, _: Time) {}

    fn closed(&mut self, rank: Rank, path: u32, t: CallTimes) {
        let row = self
            .rows
            .entry((self.per_rank.then_some(rank), path))
            .or_default();
        row.calls += 1;
        row.inclusive += t.inclusive;
        row.exclusive += t.exclusive;
        row.mpi += t.mpi;
        // An MPI call is all MPI; elsewhere the exclusive time is computation.
        if !t.mpi_call {
            row.computation += t.exclusive;
        }
    }
}

/// The profile of the scope: per routine (or call path), per rank or over all ranks.
pub fn profile(trace: &Trace, scope: &Scope, by: ProfileBy, per_rank: bool) -> Result<Profile> {
    let mut walk = Walk::new(trace, scope)?;
    let mut v = ProfileVisitor {
        per_rank,
        rows: FxHashMap::default(),
    };
    walk.run(&mut v)?;
    let paths = walk.paths;
    // Keyed by path while walking; by routine, paths of one node merge.
    let rows = match by {
        ProfileBy::CallPath => v.rows,
        ProfileBy::Routine => {
            let mut merged: FxHashMap<(Option<Rank>, u32), ProfileRow> = FxHashMap::default();
            for ((rank, path), r) in v.rows {
                let m = merged.entry((rank, paths.node_of(path))).or_default();
                m.calls += r.calls;
                m.inclusive += r.inclusive;
                m.exclusive += r.exclusive;
                m.mpi += r.mpi;
                m.computation += r.computation;
            }
            merged
        }
    };
    Ok(Profile { paths, by, rows })
}
