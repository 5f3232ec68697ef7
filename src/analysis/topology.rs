//! Communication-topology identification (Xu et al., "logicalization", P2.3–P2.4).
//!
//! A [`CommMatrix`] (bytes per sender → receiver) is filtered: unordered pairs whose volume
//! (bytes both ways) is below a fraction of the largest pair volume (5% by default) are
//! dropped, and so is traffic a rank sends to itself; [`Topology::dropped_fraction`] reports
//! the bytes dropped. The pairs kept form an undirected graph, which [`identify`] matches
//! against a library of reference families over every factorization of the rank count:
//! lines and rings, grids and tori of any dimension, hypercubes, the 6-point stencil of NAS
//! BT/SP on a 2D torus, 8-point stencils on a 2D grid or torus, all-to-all, binary trees and
//! the NAS CG pattern. Cheap invariants come first (edge count, degree sequence, a colour
//! refinement histogram, the distance profile of vertex-transitive references); an exact
//! isomorphism search (VF2-like, with colour and distance refinement) then yields each rank's
//! coordinates in the reference. Colour refinement takes the place of the paper's O(n³)
//! adjacency spectrum as the refinement invariant.
//!
//! Not in the library: tori that wrap along some dimensions only, stencils on 3D lattices,
//! and mixed or partial patterns (subgraph isomorphism, which the paper leaves open too).
//!
//! Some references are isomorphic to one another (the 8-point stencil on a 3x3 torus is the
//! all-to-all of 9, a 4x4 torus is the hypercube of dimension 4); candidates are tried by
//! number of dimensions, then in the order of [`Family`], then by extents, so the
//! description with the fewest dimensions is reported.
//!
//! ```
//! use mtfdb::analysis::topology::{identify, CommMatrix, Family, IdentifyParams};
//! // A ring of 6 ranks numbered out of order.
//! let order = [0u32, 3, 1, 5, 2, 4];
//! let mut m = CommMatrix::new(6);
//! for i in 0..6 {
//!     m.add(order[i], order[(i + 1) % 6], 1000);
//! }
//! let topo = identify(&m, &IdentifyParams::default()).unwrap();
//! assert_eq!(topo.family, Family::Ring);
//! assert_eq!(topo.to_string(), "ring of 6");
//! assert!(topo.adjacent(0, 3) && topo.adjacent(3, 1) && !topo.adjacent(0, 1));
//! ```

use std::collections::VecDeque;
use std::fmt;

use crate::hash::FxHashMap;
use crate::store::PairTraffic;

/// Bytes sent from rank to rank: a sparse `n x n` communication matrix.
///
/// ```
/// use mtfdb::analysis::topology::CommMatrix;
/// let m = CommMatrix::from_dense(&[vec![0, 5], vec![7, 0]]);
/// assert_eq!(m.ranks(), 2);
/// assert_eq!(m.total_bytes(), 12);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommMatrix {
    n: u32,
    entries: Vec<(u32, u32, u64)>,
}

impl CommMatrix {
    /// An empty matrix over `n` ranks.
    ///
    /// ```
    /// use mtfdb::analysis::topology::CommMatrix;
    /// assert_eq!(CommMatrix::new(4).total_bytes(), 0);
    /// ```
    pub fn new(n: u32) -> CommMatrix {
        CommMatrix {
            n,
            entries: Vec::new(),
        }
    }

    /// Adds `bytes` sent from `sender` to `receiver`; the matrix grows to hold both ranks.
    ///
    /// ```
    /// use mtfdb::analysis::topology::CommMatrix;
    /// let mut m = CommMatrix::new(2);
    /// m.add(0, 3, 10);
    /// assert_eq!(m.ranks(), 4);
    /// ```
    pub fn add(&mut self, sender: u32, receiver: u32, bytes: u64) {
        self.n = self.n.max(sender.max(receiver) + 1);
        self.entries.push((sender, receiver, bytes));
    }

    /// The matrix of a dense `rows[sender][receiver]` table (`n` is the number of rows).
    ///
    /// ```
    /// use mtfdb::analysis::topology::CommMatrix;
    /// let m = CommMatrix::from_dense(&[vec![0, 1, 0], vec![1, 0, 1], vec![0, 1, 0]]);
    /// assert_eq!((m.ranks(), m.total_bytes()), (3, 4));
    /// ```
    pub fn from_dense(rows: &[Vec<u64>]) -> CommMatrix {
        let mut m = CommMatrix::new(rows.len() as u32);
        for (s, row) in rows.iter().enumerate() {
            for (r, &bytes) in row.iter().enumerate() {
                if bytes > 0 {
                    m.add(s as u32, r as u32, bytes);
                }
            }
        }
        m
    }

    /// The matrix of a trace's point-to-point traffic ([`Trace::pairs`](crate::Trace::pairs))
    /// over `n` ranks (the trace's process count).
    ///
    /// ```
    /// use mtfdb::analysis::topology::CommMatrix;
    /// use mtfdb::store::PairTraffic;
    /// let pairs = [PairTraffic { sender: 0, receiver: 1, messages: 2, bytes: 64 }];
    /// assert_eq!(CommMatrix::from_pairs(3, &pairs).total_bytes(), 64);
    /// ```
    pub fn from_pairs(n: u32, pairs: &[PairTraffic]) -> CommMatrix {
        let mut m = CommMatrix::new(n);
        for p in pairs {
            m.add(p.sender, p.receiver, p.bytes);
        }
        m
    }

    /// Adds one all-to-all collective among `members` (world ranks) whose members sent
    /// `send_bytes` in all, spread evenly over the `members x members` blocks (each member's
    /// block to itself included, which the filter then drops). The paper builds its matrix
    /// from point-to-point calls alone; this lets a caller count `MPI_Alltoall` instances
    /// ([`CollectiveInstance::send_bytes`](crate::model::CollectiveInstance::send_bytes)) too.
    ///
    /// ```
    /// use mtfdb::analysis::topology::CommMatrix;
    /// let mut m = CommMatrix::new(4);
    /// m.add_alltoall(&[0, 1, 2, 3], 4 * 4 * 100);
    /// assert_eq!(m.total_bytes(), 1600);
    /// ```
    pub fn add_alltoall(&mut self, members: &[u32], send_bytes: u64) {
        let k = members.len() as u64;
        if k == 0 {
            return;
        }
        let block = send_bytes / (k * k);
        for &s in members {
            for &r in members {
                self.add(s, r, block);
            }
        }
    }

    /// The point-to-point matrix of a stored trace: [`Trace::pairs`](crate::Trace::pairs)
    /// over the trace's processes.
    ///
    /// ```
    /// use mtfdb::analysis::topology::{identify, CommMatrix, IdentifyParams};
    /// use mtfdb::gen::{generate, GenConfig, Scenario};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = mtfdb::Database::open(dir.path().join("db")).unwrap();
    /// let config = GenConfig::new(Scenario::Ring, 8, 2);
    /// db.import_events("ring", |sink| generate(&config, sink).map(|_| ())).unwrap();
    /// let m = CommMatrix::from_trace(&db.trace("ring").unwrap());
    /// let t = identify(&m, &IdentifyParams::default()).unwrap();
    /// assert_eq!(t.to_string(), "ring of 8");
    /// ```
    pub fn from_trace(trace: &crate::Trace) -> CommMatrix {
        CommMatrix::from_pairs(trace.header().processes.len() as u32, trace.pairs())
    }

    /// The number of ranks.
    ///
    /// ```
    /// use mtfdb::analysis::topology::CommMatrix;
    /// assert_eq!(CommMatrix::new(9).ranks(), 9);
    /// ```
    pub fn ranks(&self) -> u32 {
        self.n
    }

    /// Bytes over all entries, a rank's traffic to itself included.
    ///
    /// ```
    /// use mtfdb::analysis::topology::CommMatrix;
    /// let mut m = CommMatrix::new(2);
    /// m.add(0, 0, 3);
    /// m.add(0, 1, 4);
    /// assert_eq!(m.total_bytes(), 7);
    /// ```
    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.2).sum()
    }
}

/// A family of reference topologies.
///
/// ```
/// use mtfdb::analysis::topology::Family;
/// assert_eq!(Family::Torus.describe(&[8, 8, 16]), "3D torus 8x8x16");
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Family {
    /// A linear array (1D grid), `dims = [n]`.
    Line,
    /// A ring (1D torus), `dims = [n]`, `n >= 3`.
    Ring,
    /// A mesh without wrap-around; every extent at least 2, not all 2 (that is the hypercube).
    Grid,
    /// A torus; every extent at least 3.
    Torus,
    /// The NAS BT/SP 6-point stencil on a 2D torus `[rows, cols]` (extents at least 3):
    /// neighbours at (Δrow, Δcol) = (0,±1), (±1,0), (+1,−1), (−1,+1), modulo the extents.
    Stencil6Torus,
    /// The 8-point stencil (every cell at Chebyshev distance 1) on a 2D grid, no wrap-around.
    Stencil8Grid,
    /// The 8-point stencil on a 2D torus (extents at least 3).
    Stencil8Torus,
    /// The NAS CG pattern on its `nprows x npcols` process grid (`n` a power of two,
    /// `npcols` is `nprows` or twice it): partners `p XOR 2^k` within the row and the
    /// transpose partner.
    Cg,
    /// The hypercube of dimension `k >= 3`, `dims = [2; k]`, coordinates the bits.
    Hypercube,
    /// A complete binary tree in heap order, `dims = [n]`: the parent of `i` is `(i-1)/2`.
    BinaryTree,
    /// Every rank with every other, `dims = [n]`.
    AllToAll,
}

impl Family {
    /// Every family, in the order candidates of the same dimension count are tried.
    ///
    /// ```
    /// use mtfdb::analysis::topology::Family;
    /// assert_eq!(Family::ALL.len(), 11);
    /// ```
    pub const ALL: [Family; 11] = [
        Family::Line,
        Family::Ring,
        Family::Grid,
        Family::Torus,
        Family::Stencil6Torus,
        Family::Stencil8Grid,
        Family::Stencil8Torus,
        Family::Cg,
        Family::Hypercube,
        Family::BinaryTree,
        Family::AllToAll,
    ];

    /// The human rendering of the family with these extents (`2D grid 4x4`).
    ///
    /// ```
    /// use mtfdb::analysis::topology::Family;
    /// assert_eq!(Family::Grid.describe(&[4, 4]), "2D grid 4x4");
    /// assert_eq!(Family::Ring.describe(&[16]), "ring of 16");
    /// ```
    pub fn describe(self, dims: &[u32]) -> String {
        let shape = dims
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join("x");
        let n: u64 = dims.iter().map(|&d| u64::from(d)).product();
        match self {
            Family::Line => format!("line of {n}"),
            Family::Ring => format!("ring of {n}"),
            Family::Grid => format!("{}D grid {shape}", dims.len()),
            Family::Torus => format!("{}D torus {shape}", dims.len()),
            Family::Stencil6Torus => format!("6-point stencil on a 2D torus {shape}"),
            Family::Stencil8Grid => format!("8-point stencil on a 2D grid {shape}"),
            Family::Stencil8Torus => format!("8-point stencil on a 2D torus {shape}"),
            Family::Cg => format!("NAS CG pattern on a {shape} process grid"),
            Family::Hypercube => format!("hypercube of dimension {} ({n} ranks)", dims.len()),
            Family::BinaryTree => format!("binary tree of {n}"),
            Family::AllToAll => format!("all-to-all of {n}"),
        }
    }

    /// Whether the family's lattice wraps around (its neighbours are taken modulo the
    /// extents): rings, tori and the stencils on a torus.
    ///
    /// ```
    /// use mtfdb::analysis::topology::Family;
    /// assert!(Family::Ring.wraps() && Family::Stencil6Torus.wraps());
    /// assert!(!Family::Line.wraps() && !Family::Stencil8Grid.wraps());
    /// ```
    pub fn wraps(self) -> bool {
        matches!(
            self,
            Family::Ring | Family::Torus | Family::Stencil6Torus | Family::Stencil8Torus
        )
    }

    /// Whether the positions at `a` and `b` (coordinates within `dims`) are neighbours in
    /// this family. Worked out from the coordinates alone, independently of the graphs the
    /// identification builds.
    ///
    /// ```
    /// use mtfdb::analysis::topology::Family;
    /// assert!(Family::Torus.adjacent(&[4, 4], &[0, 0], &[3, 0]));
    /// assert!(!Family::Grid.adjacent(&[4, 4], &[0, 0], &[3, 0]));
    /// assert!(Family::Stencil6Torus.adjacent(&[4, 4], &[0, 0], &[1, 3]));
    /// ```
    pub fn adjacent(self, dims: &[u32], a: &[u32], b: &[u32]) -> bool {
        if a == b || a.len() != dims.len() || b.len() != dims.len() {
            return false;
        }
        if matches!(self, Family::AllToAll | Family::BinaryTree | Family::Cg) {
            return self.adjacent_by_position(dims, a, b);
        }
        let wrap = self.wraps();
        // Signed step along each dimension, modulo the extent where the family wraps: -1, 0
        // or 1, or not a neighbour at all. Kept on the stack, as this runs per edge (a helper
        // returning the steps made this three times slower, perf).
        let mut steps = [0i64; MAX_DIMS];
        let Some(steps) = steps.get_mut(..dims.len()) else {
            return false;
        };
        for (i, step) in steps.iter_mut().enumerate() {
            let (x, y, d) = (i64::from(a[i]), i64::from(b[i]), i64::from(dims[i]));
            let diff = if wrap { (y - x).rem_euclid(d) } else { y - x };
            *step = match diff {
                -1..=1 => diff,
                _ if wrap && diff == d - 1 => -1,
                _ => return false,
            };
        }
        match self {
            Family::Line | Family::Ring | Family::Grid | Family::Torus | Family::Hypercube => {
                steps.iter().map(|x| x.abs()).sum::<i64>() == 1
            }
            Family::Stencil6Torus => matches!(
                (steps[0], steps[1]),
                (0, 1) | (0, -1) | (1, 0) | (-1, 0) | (1, -1) | (-1, 1)
            ),
            Family::Stencil8Grid | Family::Stencil8Torus => true,
            // (Answered above.)
            Family::AllToAll | Family::BinaryTree | Family::Cg => {
                self.adjacent_by_position(dims, a, b)
            }
        }
    }

    /// [`Family::adjacent`] for the families whose neighbours are not unit steps.
    fn adjacent_by_position(self, dims: &[u32], a: &[u32], b: &[u32]) -> bool {
        match self {
            Family::AllToAll => true,
            Family::BinaryTree => {
                let (x, y) = (a[0], b[0]);
                (y > 0 && (y - 1) / 2 == x) || (x > 0 && (x - 1) / 2 == y)
            }
            Family::Cg => {
                let (rows, cols) = (dims[0], dims[1]);
                let (pa, pb) = (a[0] * cols + a[1], b[0] * cols + b[1]);
                let row_partners = a[0] == b[0] && (a[1] ^ b[1]).is_power_of_two();
                row_partners || cg_transpose(rows, cols, pa) == Some(pb)
            }
            _ => false,
        }
    }

    /// Whether the family has an instance with these extents (see each variant for the
    /// extents it takes). The one place that decides it: [`candidates`] and `reference` both
    /// ask here.
    fn takes(self, dims: &[u32]) -> bool {
        let Some(n) = dims
            .iter()
            .try_fold(1u32, |acc, &d| acc.checked_mul(d))
            .filter(|_| !dims.is_empty())
        else {
            return false;
        };
        match self {
            Family::Line => dims.len() == 1 && n >= 2,
            Family::Ring => dims.len() == 1 && n >= 3,
            Family::Grid => {
                dims.len() >= 2 && dims.iter().all(|&d| d >= 2) && dims.iter().any(|&d| d > 2)
            }
            Family::Torus => dims.len() >= 2 && dims.iter().all(|&d| d >= 3),
            Family::Stencil6Torus | Family::Stencil8Torus => {
                dims.len() == 2 && dims.iter().all(|&d| d >= 3)
            }
            Family::Stencil8Grid => dims.len() == 2 && dims.iter().all(|&d| d >= 2),
            Family::Hypercube => dims.len() >= 3 && dims.iter().all(|&d| d == 2),
            Family::BinaryTree => dims.len() == 1 && n >= 4,
            Family::AllToAll => dims.len() == 1 && n >= 2,
            Family::Cg => {
                dims.len() == 2 && n >= 4 && n.is_power_of_two() && {
                    let (rows, cols) = cg_grid(n);
                    dims == [rows, cols]
                }
            }
        }
    }

    /// The number of edges of the reference with these extents, from the extents alone
    /// (equal to the built reference's, which a test checks for every candidate of many
    /// rank counts); only meaningful where the family [takes](Family::takes) the extents.
    /// Where the family wraps, every extent is at least 3, so no two wrap-around steps
    /// coincide.
    fn edge_count(self, dims: &[u32]) -> u64 {
        let n: u64 = dims.iter().map(|&d| u64::from(d)).product();
        let k = dims.len() as u64;
        match self {
            Family::Line | Family::BinaryTree => n - 1,
            Family::Ring => n,
            // Along dimension i, n / d_i lines of d_i - 1 edges each.
            Family::Grid | Family::Hypercube => dims
                .iter()
                .map(|&d| (u64::from(d) - 1) * (n / u64::from(d)))
                .sum(),
            // Every node has 2k distinct neighbours.
            Family::Torus => k * n,
            Family::Stencil6Torus => 3 * n,
            Family::Stencil8Torus => 4 * n,
            Family::Stencil8Grid => {
                let (r, c) = (u64::from(dims[0]), u64::from(dims[1]));
                (r - 1) * c + r * (c - 1) + 2 * (r - 1) * (c - 1)
            }
            Family::AllToAll => n * (n - 1) / 2,
            // log2(cols) row partners per node, and a transpose partner off the diagonal,
            // which holds `cols` nodes (`rows` on a square grid, `2 * rows` on a `rows x
            // 2rows` one); a transpose partner is in another row, never a row partner.
            Family::Cg => {
                let cols = u64::from(dims[1]);
                (n * u64::from(cols.trailing_zeros()) + (n - cols)) / 2
            }
        }
    }

    /// A reference of this family with these extents, `None` when the family has no
    /// instance with them (see each variant for the extents it takes).
    fn reference(self, dims: &[u32]) -> Option<Reference> {
        if !self.takes(dims) {
            return None;
        }
        let n: u32 = dims.iter().product();
        let plus_minus = |k: usize| -> Vec<Vec<i64>> {
            (0..k)
                .flat_map(|i| {
                    [1, -1].map(|s| {
                        let mut o = vec![0; k];
                        o[i] = s;
                        o
                    })
                })
                .collect()
        };
        let moore: Vec<Vec<i64>> = (-1..=1)
            .flat_map(|x| (-1..=1).map(move |y| vec![x, y]))
            .filter(|o| o != &[0, 0])
            .collect();
        let (graph, coords) = match self {
            Family::Line | Family::Ring | Family::Grid | Family::Torus | Family::Hypercube => {
                lattice(dims, self.wraps(), &plus_minus(dims.len()))
            }
            Family::Stencil6Torus => {
                let offsets = [[0, 1], [0, -1], [1, 0], [-1, 0], [1, -1], [-1, 1]];
                lattice(dims, self.wraps(), &offsets.map(|o| o.to_vec()))
            }
            Family::Stencil8Grid | Family::Stencil8Torus => lattice(dims, self.wraps(), &moore),
            Family::BinaryTree => {
                let edges = (1..n).map(|i| (i, (i - 1) / 2));
                (
                    Graph::from_edges(n, edges),
                    (0..n).map(|i| vec![i]).collect(),
                )
            }
            Family::AllToAll => {
                let edges = (0..n).flat_map(|i| (0..i).map(move |j| (i, j)));
                (
                    Graph::from_edges(n, edges),
                    (0..n).map(|i| vec![i]).collect(),
                )
            }
            Family::Cg => {
                let (rows, cols) = (dims[0], dims[1]);
                let mut edges = Vec::new();
                for p in 0..n {
                    for k in 0..cols.trailing_zeros() {
                        edges.push((p, p ^ (1 << k)));
                    }
                    if let Some(t) = cg_transpose(rows, cols, p) {
                        edges.push((p, t));
                    }
                }
                let coords = (0..n).map(|p| vec![p / cols, p % cols]).collect();
                (Graph::from_edges(n, edges), coords)
            }
        };
        let transitive = matches!(
            self,
            Family::Ring
                | Family::Torus
                | Family::Stencil6Torus
                | Family::Stencil8Torus
                | Family::Hypercube
                | Family::AllToAll
        );
        Some(Reference {
            graph,
            coords,
            transitive,
        })
    }
}

/// The NPB CG process grid of `n = 2^m` ranks: `(2^floor(m/2), 2^ceil(m/2))`.
fn cg_grid(n: u32) -> (u32, u32) {
    let m = n.trailing_zeros();
    (1 << (m / 2), 1 << m.div_ceil(2))
}

/// The CG transpose partner of position `p` (row-major on `rows x cols`), `None` on the
/// diagonal. With `cols = 2 * rows`, positions `2j` and `2j+1` form super-position `j` of a
/// `rows x rows` grid, transposed the same way.
fn cg_transpose(rows: u32, cols: u32, p: u32) -> Option<u32> {
    let t = if rows == cols {
        (p % cols) * cols + p / cols
    } else {
        let (j, half) = (p / 2, p % 2);
        2 * ((j % rows) * rows + j / rows) + half
    };
    (t != p).then_some(t)
}

/// An undirected simple graph, sorted adjacency lists kept in one vector (node `v`'s
/// neighbours are `targets[offsets[v]..offsets[v + 1]]`): a graph of 16,384 ranks is two
/// allocations, not 16,384.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Graph {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Graph {
    fn from_edges(n: u32, edges: impl IntoIterator<Item = (u32, u32)>) -> Graph {
        let pairs: Vec<(u32, u32)> = edges
            .into_iter()
            .filter(|(a, b)| a != b)
            .flat_map(|(a, b)| [(a, b), (b, a)])
            .collect();
        // Grouped by source, then each list sorted and deduplicated in place.
        let (offsets, mut targets) =
            crate::grouping::by_key(n as usize, pairs.iter().map(|&(a, b)| (a as usize, b)));
        let mut kept = Vec::with_capacity(targets.len());
        let mut dedup_offsets = Vec::with_capacity(offsets.len());
        dedup_offsets.push(0);
        for v in 0..n as usize {
            let list = &mut targets[offsets[v] as usize..offsets[v + 1] as usize];
            list.sort_unstable();
            let from = kept.len();
            for &w in list.iter() {
                if kept.len() == from || kept.last() != Some(&w) {
                    kept.push(w);
                }
            }
            dedup_offsets.push(kept.len() as u32);
        }
        Graph {
            offsets: dedup_offsets,
            targets: kept,
        }
    }

    fn n(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The neighbours of `v`, sorted.
    fn adj(&self, v: usize) -> &[u32] {
        &self.targets[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }

    fn degree(&self, v: usize) -> usize {
        (self.offsets[v + 1] - self.offsets[v]) as usize
    }

    /// Every node's neighbours, in node order.
    fn lists(&self) -> impl Iterator<Item = &[u32]> + '_ {
        (0..self.n()).map(|v| self.adj(v))
    }

    fn edges(&self) -> u64 {
        self.targets.len() as u64 / 2
    }

    fn has_edge(&self, a: u32, b: u32) -> bool {
        self.adj(a as usize).binary_search(&b).is_ok()
    }

    fn sorted_degrees(&self) -> Vec<usize> {
        let mut d: Vec<usize> = (0..self.n()).map(|v| self.degree(v)).collect();
        d.sort_unstable();
        d
    }

    /// BFS distances from `root` (`u32::MAX` where unreachable).
    fn distances(&self, root: u32) -> Vec<u32> {
        let mut dist = vec![u32::MAX; self.n()];
        let mut queue = VecDeque::from([root]);
        dist[root as usize] = 0;
        while let Some(v) = queue.pop_front() {
            for &w in self.adj(v as usize) {
                if dist[w as usize] == u32::MAX {
                    dist[w as usize] = dist[v as usize] + 1;
                    queue.push_back(w);
                }
            }
        }
        dist
    }
}

/// Number of nodes at each distance (the distance profile of one node).
fn profile(dist: &[u32]) -> Vec<u32> {
    let mut p = Vec::new();
    for &d in dist {
        if d != u32::MAX {
            if p.len() <= d as usize {
                p.resize(d as usize + 1, 0);
            }
            p[d as usize] += 1;
        }
    }
    p
}

/// The graph and coordinates of a lattice: positions row-major over `dims` (the last
/// coordinate varies fastest), each joined to the positions at `offsets`, wrapping or not.
fn lattice(dims: &[u32], wrap: bool, offsets: &[Vec<i64>]) -> (Graph, Vec<Vec<u32>>) {
    let coords = positions(dims);
    let n = coords.len() as u32;
    let mut edges = Vec::with_capacity(n as usize * offsets.len());
    for (p, c) in coords.iter().enumerate() {
        'offsets: for o in offsets {
            let mut q: i64 = 0;
            for i in 0..dims.len() {
                let d = i64::from(dims[i]);
                let mut x = i64::from(c[i]) + o[i];
                if wrap {
                    x = x.rem_euclid(d);
                } else if !(0..d).contains(&x) {
                    continue 'offsets;
                }
                q = q * d + x;
            }
            edges.push((p as u32, q as u32));
        }
    }
    (Graph::from_edges(n, edges), coords)
}

/// One candidate: a family instance with its graph and coordinates.
#[derive(Debug, Clone)]
struct Reference {
    graph: Graph,
    coords: Vec<Vec<u32>>,
    /// Every node looks the same (one root suffices in the search).
    transitive: bool,
}

/// Every multiset factorization of `n` into factors of at least 2, factors ascending.
fn factorizations(n: u32) -> Vec<Vec<u32>> {
    fn rec(n: u32, min: u32, prefix: &mut Vec<u32>, out: &mut Vec<Vec<u32>>) {
        if n == 1 {
            if !prefix.is_empty() {
                out.push(prefix.clone());
            }
            return;
        }
        let mut f = min;
        while u64::from(f) * u64::from(f) <= u64::from(n) {
            if n.is_multiple_of(f) {
                prefix.push(f);
                rec(n / f, f, prefix, out);
                prefix.pop();
            }
            f += 1;
        }
        if n >= min {
            prefix.push(n);
            out.push(prefix.clone());
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    rec(n, 2, &mut Vec::new(), &mut out);
    out
}

/// The candidate (family, dims) pairs for `n` ranks: every factorization of `n` with every
/// family that [takes](Family::takes) it, in the order they are tried: by number of
/// dimensions, then family, then extents. (CG's `[rows, cols]` is one of the
/// factorizations.)
fn candidates(n: u32) -> Vec<(Family, Vec<u32>)> {
    let mut out: Vec<(Family, Vec<u32>)> = factorizations(n)
        .into_iter()
        .flat_map(|dims| Family::ALL.map(|family| (family, dims.clone())))
        .filter(|(family, dims)| family.takes(dims))
        .collect();
    out.sort_by(|a, b| (a.1.len(), a.0, &a.1).cmp(&(b.1.len(), b.0, &b.1)));
    out
}

/// The parameters of [`identify`].
///
/// ```
/// use mtfdb::analysis::topology::IdentifyParams;
/// let p = IdentifyParams::default();
/// assert_eq!(p.threshold, 0.05);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdentifyParams {
    /// Unordered pairs whose volume (bytes both ways) is below this fraction of the largest
    /// pair volume are dropped (P2.3's 5%).
    pub threshold: f64,
    /// The most candidate assignments the isomorphism search tries for one reference before
    /// giving up on it ([`Failure::SearchBudget`]).
    pub search_budget: u64,
}

impl Default for IdentifyParams {
    fn default() -> IdentifyParams {
        IdentifyParams {
            threshold: 0.05,
            search_budget: 50_000_000,
        }
    }
}

/// An identified topology: the family, its extents and every rank's coordinates.
///
/// ```
/// use mtfdb::analysis::topology::{identify, CommMatrix, Family, IdentifyParams};
/// // A 2x3 grid, row-major, plus a faint pair under the 5% threshold.
/// let mut m = CommMatrix::new(6);
/// for (a, b) in [(0, 1), (1, 2), (3, 4), (4, 5), (0, 3), (1, 4), (2, 5)] {
///     m.add(a, b, 500);
///     m.add(b, a, 500);
/// }
/// m.add(0, 5, 10);
/// let t = identify(&m, &IdentifyParams::default()).unwrap();
/// assert_eq!((t.family, t.dims.clone()), (Family::Grid, vec![2, 3]));
/// assert_eq!(t.to_string(), "2D grid 2x3");
/// assert_eq!(t.dropped_fraction, 10.0 / 7010.0);
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Topology {
    /// The family.
    pub family: Family,
    /// The extents (ascending for grids, tori and stencils; `[rows, cols]` for CG; `[n]`
    /// for lines, rings, trees and all-to-all; `[2; k]` for the hypercube).
    pub dims: Vec<u32>,
    /// `coordinates[rank]`: the rank's position, one coordinate per entry of `dims`.
    pub coordinates: Vec<Vec<u32>>,
    /// Bytes dropped (under the threshold, or sent to oneself) over all bytes.
    pub dropped_fraction: f64,
}

impl Topology {
    /// Whether ranks `a` and `b` are neighbours in the identified topology.
    ///
    /// ```
    /// use mtfdb::analysis::topology::{identify, CommMatrix, IdentifyParams};
    /// let m = CommMatrix::from_dense(&[vec![0, 1, 0], vec![1, 0, 1], vec![0, 1, 0]]);
    /// let t = identify(&m, &IdentifyParams::default()).unwrap();
    /// assert!(t.adjacent(0, 1) && !t.adjacent(0, 2));
    /// ```
    pub fn adjacent(&self, a: u32, b: u32) -> bool {
        match (
            self.coordinates.get(a as usize),
            self.coordinates.get(b as usize),
        ) {
            (Some(x), Some(y)) => self.family.adjacent(&self.dims, x, y),
            _ => false,
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.family.describe(&self.dims))
    }
}

/// Why a candidate, or the whole graph, did not match.
///
/// ```
/// use mtfdb::analysis::topology::Failure;
/// let f = Failure::EdgeCount { expected: 24, found: 23 };
/// assert_eq!(f.to_string(), "edge count 24, the graph has 23");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No pair exchanged any bytes between distinct ranks.
    NoTraffic,
    /// The graph kept is not connected (so no reference matches).
    Disconnected {
        /// Connected components (isolated ranks included).
        components: u32,
    },
    /// Every candidate was rejected (see [`Unidentified::rejections`]).
    NoCandidateMatched,
    /// The candidate has a different number of edges.
    EdgeCount {
        /// The candidate's.
        expected: u64,
        /// The graph's.
        found: u64,
    },
    /// Same edge count, different sorted degree sequence.
    DegreeSequence,
    /// Colour refinement (1-dimensional Weisfeiler–Leman) gives different class sizes.
    Refinement,
    /// The candidate is vertex-transitive and its distance profile differs from the one of
    /// a graph node.
    DistanceProfile,
    /// The isomorphism search proved there is no mapping.
    NotIsomorphic,
    /// The isomorphism search ran out of its budget.
    SearchBudget,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::NoTraffic => f.write_str("no traffic between distinct ranks"),
            Failure::Disconnected { components } => {
                write!(f, "the graph has {components} connected components")
            }
            Failure::NoCandidateMatched => f.write_str("no candidate matched"),
            Failure::EdgeCount { expected, found } => {
                write!(f, "edge count {expected}, the graph has {found}")
            }
            Failure::DegreeSequence => f.write_str("degree sequence differs"),
            Failure::Refinement => f.write_str("colour refinement classes differ"),
            Failure::DistanceProfile => f.write_str("distance profile differs"),
            Failure::NotIsomorphic => f.write_str("not isomorphic"),
            Failure::SearchBudget => f.write_str("isomorphism search budget exhausted"),
        }
    }
}

/// One rejected candidate.
///
/// ```
/// use mtfdb::analysis::topology::{Failure, Rejection};
/// let r = Rejection { candidate: "ring of 4".into(), failed: Failure::DegreeSequence };
/// assert_eq!(r.failed, Failure::DegreeSequence);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The candidate's rendering (`2D grid 4x4`).
    pub candidate: String,
    /// The first invariant, or the search, that failed.
    pub failed: Failure,
}

/// The answer when no reference matches: the graph's size and why each candidate failed.
///
/// ```
/// use mtfdb::analysis::topology::{identify, CommMatrix, Failure, IdentifyParams};
/// let u = identify(&CommMatrix::new(4), &IdentifyParams::default()).unwrap_err();
/// assert_eq!(u.reason, Failure::NoTraffic);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Unidentified {
    /// Ranks.
    pub ranks: u32,
    /// Edges of the graph kept.
    pub edges: u64,
    /// Bytes dropped over all bytes.
    pub dropped_fraction: f64,
    /// [`Failure::NoTraffic`], [`Failure::Disconnected`] or [`Failure::NoCandidateMatched`].
    pub reason: Failure,
    /// Every candidate of the rank count, with the first test it failed.
    pub rejections: Vec<Rejection>,
}

impl fmt::Display for Unidentified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown topology of {} ranks and {} edges: {}",
            self.ranks, self.edges, self.reason
        )
    }
}

/// The filtered graph of a matrix (each pair's volume both ways, pairs under `threshold`
/// times the largest dropped) and the fraction of bytes dropped: read off the entries where
/// they allow it ([`two_way_filtered_graph`]), else by sorting them by rank
/// ([`any_filtered_graph`]). Both give the adjacency lists directly: a hash map of pairs cost
/// a third of identifying a 16,384-rank stencil.
fn filtered_graph(matrix: &CommMatrix, threshold: f64) -> (Graph, f64) {
    two_way_filtered_graph(matrix, threshold)
        .unwrap_or_else(|| any_filtered_graph(matrix, threshold))
}

/// [`filtered_graph`] of any matrix: entries in any order, repeated or one way.
fn any_filtered_graph(matrix: &CommMatrix, threshold: f64) -> (Graph, f64) {
    let n = matrix.n as usize;
    let total: u64 = matrix.entries.iter().map(|&(_, _, bytes)| bytes).sum();
    // Each pair listed under both its ranks.
    let (offsets, mut listed) = crate::grouping::by_key(
        n,
        matrix
            .entries
            .iter()
            .filter(|&&(s, r, bytes)| s != r && bytes > 0)
            .flat_map(|&(s, r, bytes)| [(s as usize, (r, bytes)), (r as usize, (s, bytes))]),
    );
    // Each rank's neighbours once, with the pair's volume (bytes both ways), merged in place.
    let mut merged = 0usize;
    let mut merged_offsets = Vec::with_capacity(n + 1);
    merged_offsets.push(0u32);
    for v in 0..n {
        let (from, to) = (offsets[v] as usize, offsets[v + 1] as usize);
        listed[from..to].sort_unstable_by_key(|&(w, _)| w);
        let first = merged;
        for i in from..to {
            let (w, bytes) = listed[i];
            if merged > first && listed[merged - 1].0 == w {
                listed[merged - 1].1 += bytes;
            } else {
                listed[merged] = (w, bytes);
                merged += 1;
            }
        }
        merged_offsets.push(merged as u32);
    }
    let volumes = &listed[..merged];
    let max = volumes.iter().map(|&(_, v)| v).max().unwrap_or(0);
    let mut kept = KeptPairs::new(n, merged, threshold * max as f64);
    for v in 0..n {
        for &(w, volume) in &volumes[merged_offsets[v] as usize..merged_offsets[v + 1] as usize] {
            kept.neighbour(v as u32, w, volume);
        }
        kept.end_rank();
    }
    kept.finish(total)
}

/// A filtered graph built rank by rank, in rank order: each rank's neighbours (ascending)
/// with their pair's two-way volume, kept where it reaches the cut.
struct KeptPairs {
    graph: Graph,
    cut: f64,
    kept_bytes: u64,
}

impl KeptPairs {
    fn new(ranks: usize, neighbours: usize, cut: f64) -> KeptPairs {
        let mut offsets = Vec::with_capacity(ranks + 1);
        offsets.push(0);
        KeptPairs {
            graph: Graph {
                offsets,
                targets: Vec::with_capacity(neighbours),
            },
            cut,
            kept_bytes: 0,
        }
    }

    /// Neighbour `w` of the current rank `v`, their pair having sent `volume` bytes.
    fn neighbour(&mut self, v: u32, w: u32, volume: u64) {
        if volume as f64 >= self.cut {
            self.graph.targets.push(w);
            // Each pair is listed under both its ranks: its bytes count once.
            if v < w {
                self.kept_bytes += volume;
            }
        }
    }

    /// Ends the current rank's list.
    fn end_rank(&mut self) {
        self.graph.offsets.push(self.graph.targets.len() as u32);
    }

    /// The graph, and the fraction of the matrix's `total` bytes dropped.
    fn finish(self, total: u64) -> (Graph, f64) {
        let dropped = if total == 0 {
            0.0
        } else {
            (total - self.kept_bytes) as f64 / total as f64
        };
        (self.graph, dropped)
    }
}

/// [`filtered_graph`] where it can be read off the entries as they are: listed by sender,
/// then receiver, each pair once (as a trace's pair table is), and every pair that sent bytes
/// one way sent some back (as stencils, rings and most codes do). Then a rank's neighbours
/// are its own entries' receivers, already in order, and a pair's two-way volume is its
/// entry's bytes plus those of the entry back, found in the receiver's entries: no copy of
/// the entries is made (the general path's, sorted by rank, was most of identifying a
/// 16,384-rank stencil, in page faults). `None` where the entries are not so.
fn two_way_filtered_graph(matrix: &CommMatrix, threshold: f64) -> Option<(Graph, f64)> {
    let n = matrix.n as usize;
    let entries = &matrix.entries;
    if !entries
        .windows(2)
        .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1))
    {
        return None;
    }
    // Where each sender's entries start.
    let mut start = vec![0u32; n + 1];
    for &(s, r, _) in entries {
        if s as usize >= n || r as usize >= n {
            return None;
        }
        start[s as usize + 1] += 1;
    }
    for v in 0..n {
        start[v + 1] += start[v];
    }
    let back = |s: u32, r: u32| -> Option<u64> {
        let run = &entries[start[r as usize] as usize..start[r as usize + 1] as usize];
        let at = run.binary_search_by_key(&s, |&(_, to, _)| to).ok()?;
        Some(run[at].2).filter(|&bytes| bytes > 0)
    };
    let (mut total, mut max) = (0u64, 0u64);
    for &(s, r, bytes) in entries {
        total += bytes;
        if s != r && bytes > 0 {
            max = max.max(bytes + back(s, r)?);
        }
    }
    let mut kept = KeptPairs::new(n, entries.len(), threshold * max as f64);
    for v in 0..n {
        for &(s, r, bytes) in &entries[start[v] as usize..start[v + 1] as usize] {
            if s != r && bytes > 0 {
                kept.neighbour(s, r, bytes + back(s, r)?);
            }
        }
        kept.end_rank();
    }
    Some(kept.finish(total))
}

/// The most dimensions a candidate has: each extent is at least 2 and their product a rank
/// count. Coordinates worked on per edge are kept on the stack, this many at most.
const MAX_DIMS: usize = 32;

/// Every position's coordinates, row-major over `dims` (see [`row_major`]).
fn positions(dims: &[u32]) -> Vec<Vec<u32>> {
    let n: u32 = dims.iter().product();
    (0..n)
        .map(|p| {
            let mut c = vec![0; dims.len()];
            row_major(p, dims, &mut c);
            c
        })
        .collect()
}

/// Position `p`'s coordinates, row-major over `dims` (the last coordinate varies fastest), as
/// every reference numbers its positions.
fn row_major(mut p: u32, dims: &[u32], out: &mut [u32]) {
    for i in (0..dims.len()).rev() {
        out[i] = p % dims[i];
        p /= dims[i];
    }
}

/// Whether ranks numbered as the candidate numbers its positions (row-major, as
/// `MPI_Cart_create` numbers them) are its graph: every edge of `g` joins neighbours of the
/// candidate. `g` is simple and has as many edges as the candidate, so then the two are the
/// same graph. Worked out from the coordinates, without building the candidate's graph.
fn numbered_as_positions(g: &Graph, family: Family, dims: &[u32]) -> bool {
    let k = dims.len();
    let (mut a, mut b) = ([0u32; MAX_DIMS], [0u32; MAX_DIMS]);
    if k > MAX_DIMS {
        return false;
    }
    (0..g.n()).all(|v| {
        row_major(v as u32, dims, &mut a[..k]);
        g.adj(v).iter().filter(|&&w| w as usize > v).all(|&w| {
            row_major(w, dims, &mut b[..k]);
            family.adjacent(dims, &a[..k], &b[..k])
        })
    })
}

/// Identifies the communication topology of `matrix`.
///
/// Returns the first candidate (by number of dimensions, then [`Family`] order, then
/// extents) that passes every invariant and the isomorphism search, or why none did.
///
/// ```
/// use mtfdb::analysis::topology::{identify, CommMatrix, Family, IdentifyParams};
/// let mut m = CommMatrix::new(5);
/// for a in 0..5 {
///     for b in 0..5 {
///         if a != b {
///             m.add(a, b, 64);
///         }
///     }
/// }
/// let t = identify(&m, &IdentifyParams::default()).unwrap();
/// assert_eq!(t.family, Family::AllToAll);
/// assert_eq!(t.to_string(), "all-to-all of 5");
/// ```
pub fn identify(matrix: &CommMatrix, params: &IdentifyParams) -> Result<Topology, Unidentified> {
    let (g, dropped_fraction) = filtered_graph(matrix, params.threshold);
    let n = matrix.n;
    let edges = g.edges();
    let unidentified = |reason, rejections| Unidentified {
        ranks: n,
        edges,
        dropped_fraction,
        reason,
        rejections,
    };
    if edges == 0 {
        return Err(unidentified(Failure::NoTraffic, Vec::new()));
    }
    let components = components(&g);
    if components > 1 {
        return Err(unidentified(
            Failure::Disconnected { components },
            Vec::new(),
        ));
    }
    let mut degrees = None;
    let mut rejections = Vec::new();
    for (family, dims) in candidates(n) {
        let candidate = family.describe(&dims);
        // The edge count first, from the extents alone: most candidates fail it, and then
        // their reference is never built.
        let expected = family.edge_count(&dims);
        if expected != edges {
            rejections.push(Rejection {
                candidate,
                failed: Failure::EdgeCount {
                    expected,
                    found: edges,
                },
            });
            continue;
        }
        if family == Family::AllToAll {
            // A simple graph with n(n-1)/2 edges is complete.
            return Ok(Topology {
                family,
                dims,
                coordinates: (0..n).map(|i| vec![i]).collect(),
                dropped_fraction,
            });
        }
        if numbered_as_positions(&g, family, &dims) {
            return Ok(Topology {
                family,
                coordinates: positions(&dims),
                dims,
                dropped_fraction,
            });
        }
        let h = family
            .reference(&dims)
            .expect("a candidate's family takes its extents");
        let degrees = degrees.get_or_insert_with(|| g.sorted_degrees());
        match matches(&g, degrees, &h, params.search_budget) {
            Ok(map) => {
                return Ok(Topology {
                    family,
                    dims,
                    coordinates: map.iter().map(|&x| h.coords[x as usize].clone()).collect(),
                    dropped_fraction,
                })
            }
            Err(failed) => rejections.push(Rejection { candidate, failed }),
        }
    }
    Err(unidentified(Failure::NoCandidateMatched, rejections))
}

fn components(g: &Graph) -> u32 {
    let mut seen = vec![false; g.n()];
    let mut count = 0;
    for s in 0..g.n() {
        if seen[s] {
            continue;
        }
        count += 1;
        seen[s] = true;
        let mut stack = vec![s as u32];
        while let Some(v) = stack.pop() {
            for &w in g.adj(v as usize) {
                if !seen[w as usize] {
                    seen[w as usize] = true;
                    stack.push(w);
                }
            }
        }
    }
    count
}

/// The most rounds of [`refine`]. Colours only prune the search (which checks every edge
/// itself), so refinement need not run until stable: on a grid that takes about half its
/// width in rounds, each costing every edge, which made large grids cost O(n^1.5). A few
/// rounds already tell corners, borders and their neighbours apart.
const REFINE_ROUNDS: usize = 6;

/// Joint colour refinement of `g` and `h` for at most [`REFINE_ROUNDS`] rounds: colours of
/// both, or `None` as soon as the class sizes differ (then no isomorphism exists).
///
/// A node's next colour is a hash of its colour and of the multiset of its neighbours'
/// colours (a sum of mixed values, so no sort), numbered densely in the order first seen. A
/// collision of two hashes merges two classes in both graphs alike: the colouring stays a
/// function of the structure, so isomorphic graphs still get equal class sizes; only
/// pruning is lost.
fn refine(g: &Graph, h: &Graph) -> Option<(Vec<u32>, Vec<u32>)> {
    let mut cg: Vec<u32> = g.lists().map(|l| l.len() as u32).collect();
    let mut ch: Vec<u32> = h.lists().map(|l| l.len() as u32).collect();
    let mut classes = 0usize;
    let mut table: FxHashMap<u64, u32> = FxHashMap::default();
    let mut counts: Vec<i64> = Vec::new();
    for _ in 0..REFINE_ROUNDS {
        table.clear();
        counts.clear();
        let mut step = |graph: &Graph, colours: &[u32], sign: i64| -> Vec<u32> {
            graph
                .lists()
                .enumerate()
                .map(|(v, list)| {
                    let neighbours = list.iter().fold(0u64, |sum, &w| {
                        sum.wrapping_add(mix(0, u64::from(colours[w as usize])))
                    });
                    let key = mix(u64::from(colours[v]), neighbours);
                    let next = table.len() as u32;
                    let c = *table.entry(key).or_insert(next);
                    if counts.len() <= c as usize {
                        counts.resize(c as usize + 1, 0);
                    }
                    counts[c as usize] += sign;
                    c
                })
                .collect()
        };
        let ng = step(g, &cg, 1);
        let nh = step(h, &ch, -1);
        if counts.iter().any(|&c| c != 0) {
            return None;
        }
        (cg, ch) = (ng, nh);
        let now = counts.len();
        if now == classes {
            break;
        }
        classes = now;
    }
    Some((cg, ch))
}

/// Runs the invariants after the edge count and the isomorphism search of `g` against `h`:
/// the mapping `g` node → `h` node, or the first failure. `h` is a candidate for `g`'s rank
/// count, so both have the same number of nodes, and [`identify`] only gets here with a
/// connected `g` that has an edge (so at least 2 nodes) and as many edges as `h`.
fn matches(
    g: &Graph,
    g_degrees: &[usize],
    h: &Reference,
    budget: u64,
) -> Result<Vec<u32>, Failure> {
    debug_assert_eq!(
        g.edges(),
        h.graph.edges(),
        "identify compared the edge counts"
    );
    if h.graph.sorted_degrees() != g_degrees {
        return Err(Failure::DegreeSequence);
    }
    // Ranks numbered as the candidate numbers its positions (row-major, as MPI_Cart_create
    // numbers them): the identity is an isomorphism, found with one pass over the edges
    // instead of refinement and search.
    if *g == h.graph {
        return Ok((0..g.n() as u32).collect());
    }
    let (gc, hc) = refine(g, &h.graph).ok_or(Failure::Refinement)?;
    search(g, &h.graph, &gc, &hc, h.transitive, budget)
}

/// The most anchors (individualized pairs) whose distances refine the search at once.
const MAX_ANCHORS: usize = 32;

/// Mixes a value into a 64-bit signature (splitmix64 finalizer).
fn mix(sig: u64, x: u64) -> u64 {
    let mut z = sig ^ x.wrapping_add(0x9E37_79B9_7F4A_7C15).wrapping_add(sig << 6);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Signatures extended by the distances from one more anchor.
fn extend(sig: &[u64], dist: &[u32]) -> Vec<u64> {
    sig.iter()
        .zip(dist)
        .map(|(&s, &d)| mix(s, u64::from(d)))
        .collect()
}

/// The VF2-like search (`transitive_h`: every node of `h` looks the same).
///
/// `g`'s nodes are taken in BFS order from a node of its rarest colour; each is mapped to an
/// unused neighbour of its BFS parent's image whose mapped neighbours are exactly the images
/// of its own mapped neighbours and whose signature is the same. A signature is the colour
/// and the distances from every anchor: the root, and each node mapped where more than one
/// candidate was feasible (individualization with distance refinement); an anchor whose
/// signature multisets differ between the graphs is rejected at once.
fn search(
    g: &Graph,
    h: &Graph,
    gc: &[u32],
    hc: &[u32],
    transitive_h: bool,
    budget: u64,
) -> Result<Vec<u32>, Failure> {
    const NONE: u32 = u32::MAX;
    let n = g.n();
    let mut class_size: FxHashMap<u32, u32> = FxHashMap::default();
    for &c in gc {
        *class_size.entry(c).or_default() += 1;
    }
    let root = (0..n as u32)
        .min_by_key(|&v| {
            (
                class_size[&gc[v as usize]],
                std::cmp::Reverse(g.degree(v as usize)),
                v,
            )
        })
        .unwrap_or(0);
    let dg = g.distances(root);
    let mut order = Vec::with_capacity(n);
    let mut parent = vec![NONE; n];
    {
        let mut seen = vec![false; n];
        seen[root as usize] = true;
        let mut queue = VecDeque::from([root]);
        while let Some(v) = queue.pop_front() {
            order.push(v);
            for &w in g.adj(v as usize) {
                if !seen[w as usize] {
                    seen[w as usize] = true;
                    parent[w as usize] = v;
                    queue.push_back(w);
                }
            }
        }
    }
    let root_profile = profile(&dg);
    let mut roots: Vec<u32> = (0..n as u32)
        .filter(|&x| hc[x as usize] == gc[root as usize])
        .collect();
    if transitive_h {
        // Every node of a vertex-transitive reference looks the same: one root suffices.
        roots.truncate(1);
    }
    let g_base: Vec<u64> = (0..n)
        .map(|v| mix(u64::from(gc[v]), u64::from(dg[v])))
        .collect();
    let mut steps: u64 = 0;
    let mut map = vec![NONE; n];
    let mut inv = vec![NONE; n];
    // Per depth: the feasible candidates and the next to try; when the depth is a choice
    // point, g's signatures extended by the distances from the node, and their sorted copy
    // (both depend on the depth alone, not on the candidate tried).
    let mut cands: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut next = vec![0usize; n];
    let mut g_choice: Vec<Option<(Vec<u64>, Vec<u64>)>> = vec![None; n];
    // The sorted h signatures of the candidate tried at a choice point.
    let mut sorted_h: Vec<u64> = Vec::with_capacity(n);
    for r in roots {
        let dh = h.distances(r);
        if profile(&dh) != root_profile {
            if transitive_h {
                return Err(Failure::DistanceProfile);
            }
            continue;
        }
        let h_base: Vec<u64> = (0..n)
            .map(|c| mix(u64::from(hc[c]), u64::from(dh[c])))
            .collect();
        // The anchor stack: (depth, g signatures, h signatures); the base at depth 0.
        let mut anchors: Vec<(usize, Vec<u64>, Vec<u64>)> = vec![(0, g_base.clone(), h_base)];
        map.iter_mut().for_each(|x| *x = NONE);
        inv.iter_mut().for_each(|x| *x = NONE);
        map[root as usize] = r;
        inv[r as usize] = root;
        let mut d = 1usize;
        let mut fresh = true;
        loop {
            let v = order[d] as usize;
            if map[v] != NONE {
                inv[map[v] as usize] = NONE;
                map[v] = NONE;
            }
            if anchors.last().is_some_and(|a| a.0 == d) {
                anchors.pop();
            }
            if fresh {
                fresh = false;
                let (_, sg, sh) = anchors.last().expect("the base anchor");
                let source = map[parent[v] as usize] as usize;
                let mut list = std::mem::take(&mut cands[d]);
                list.clear();
                for &c in h.adj(source) {
                    steps += 1;
                    if steps > budget {
                        return Err(Failure::SearchBudget);
                    }
                    let ci = c as usize;
                    if inv[ci] != NONE || sh[ci] != sg[v] {
                        continue;
                    }
                    let mut mapped = 0usize;
                    let mut ok = true;
                    for &u in g.adj(v) {
                        let m = map[u as usize];
                        if m != NONE {
                            mapped += 1;
                            if !h.has_edge(m, c) {
                                ok = false;
                                break;
                            }
                        }
                    }
                    if ok
                        && h.adj(ci)
                            .iter()
                            .filter(|&&w| inv[w as usize] != NONE)
                            .count()
                            == mapped
                    {
                        list.push(c);
                    }
                }
                g_choice[d] = (list.len() > 1 && anchors.len() < MAX_ANCHORS).then(|| {
                    let next_g = extend(sg, &g.distances(v as u32));
                    let mut sorted_g = next_g.clone();
                    sorted_g.sort_unstable();
                    (next_g, sorted_g)
                });
                cands[d] = list;
                next[d] = 0;
            }
            let mut chosen = NONE;
            while next[d] < cands[d].len() {
                let c = cands[d][next[d]];
                next[d] += 1;
                if let Some((next_g, sorted_g)) = &g_choice[d] {
                    // A choice point: individualize v -> c and refine by distances from them;
                    // the signature multisets must be the same.
                    steps += n as u64;
                    if steps > budget {
                        return Err(Failure::SearchBudget);
                    }
                    let (_, _, sh) = anchors.last().expect("the base anchor");
                    let next_h = extend(sh, &h.distances(c));
                    sorted_h.clear();
                    sorted_h.extend_from_slice(&next_h);
                    sorted_h.sort_unstable();
                    if sorted_h != *sorted_g {
                        continue;
                    }
                    anchors.push((d, next_g.clone(), next_h));
                }
                chosen = c;
                break;
            }
            if chosen == NONE {
                if d == 1 {
                    break;
                }
                d -= 1;
                continue;
            }
            map[v] = chosen;
            inv[chosen as usize] = v as u32;
            if d + 1 == n {
                return Ok(map);
            }
            d += 1;
            fresh = true;
        }
    }
    Err(Failure::NotIsomorphic)
}

/// A synthetic matrix of the reference `family` with extents `dims`, its ranks numbered by
/// a random permutation drawn from `seed`: every neighbour pair exchanges 1 MiB each way.
/// `None` when the family has no instance with these extents. Meant for benchmarks and
/// tests of [`identify`].
///
/// ```
/// use mtfdb::analysis::topology::{identify, synthetic_matrix, Family, IdentifyParams};
/// let m = synthetic_matrix(Family::Torus, &[3, 4, 5], 7).unwrap();
/// let t = identify(&m, &IdentifyParams::default()).unwrap();
/// assert_eq!(t.to_string(), "3D torus 3x4x5");
/// ```
pub fn synthetic_matrix(family: Family, dims: &[u32], seed: u64) -> Option<CommMatrix> {
    let r = family.reference(dims)?;
    let n = r.graph.n() as u32;
    let perm = permutation(n, seed);
    let mut m = CommMatrix::new(n);
    for (a, list) in r.graph.lists().enumerate() {
        for &b in list.iter().filter(|&&b| b as usize > a) {
            let (pa, pb) = (perm[a], perm[b as usize]);
            m.add(pa, pb, 1 << 20);
            m.add(pb, pa, 1 << 20);
        }
    }
    Some(m)
}

/// The two large cases of P2's evaluation scaled up, for benchmarks: a 1,024-rank 3D torus
/// 8x8x16 and a 529-rank 2D grid 23x23 (a renumbered 5-point stencil), both with ranks
/// permuted by `seed`, each with its expected rendering.
///
/// ```
/// use mtfdb::analysis::topology::{benchmark_matrices, identify, IdentifyParams};
/// for (expected, m) in benchmark_matrices(3) {
///     assert_eq!(identify(&m, &IdentifyParams::default()).unwrap().to_string(), expected);
/// }
/// ```
pub fn benchmark_matrices(seed: u64) -> Vec<(String, CommMatrix)> {
    [
        (Family::Torus, vec![8, 8, 16]),
        (Family::Grid, vec![23, 23]),
    ]
    .into_iter()
    .map(|(family, dims)| {
        let m = synthetic_matrix(family, &dims, seed).expect("a valid reference");
        (family.describe(&dims), m)
    })
    .collect()
}

/// A seeded Fisher–Yates permutation of `0..n` (splitmix64).
fn permutation(n: u32, seed: u64) -> Vec<u32> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut p: Vec<u32> = (0..n).collect();
    for i in (1..n as usize).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn shuffled(family: Family, dims: &[u32], seed: u64) -> (CommMatrix, Topology) {
        let m = synthetic_matrix(family, dims, seed).unwrap();
        let t = identify(&m, &IdentifyParams::default()).unwrap();
        (m, t)
    }

    /// Every communicating pair of `m` is adjacent in `t`, and `t` has no more edges.
    fn assert_mapping(m: &CommMatrix, t: &Topology) {
        let n = m.ranks();
        let mut pairs: Vec<(u32, u32)> = m
            .entries
            .iter()
            .filter(|e| e.0 != e.1)
            .map(|e| (e.0.min(e.1), e.0.max(e.1)))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        for &(a, b) in &pairs {
            assert!(t.adjacent(a, b), "{t}: {a} and {b} communicate");
        }
        let adjacent = (0..n)
            .flat_map(|a| (0..a).map(move |b| (a, b)))
            .filter(|&(a, b)| t.adjacent(a, b))
            .count();
        assert_eq!(adjacent, pairs.len(), "{t}: edge count");
    }

    #[test]
    fn ranks_numbered_row_major_are_their_positions_and_renumbered_ones_are_found_too() {
        // Every family numbered row-major, as MPI_Cart_create does: the identity is checked
        // first (from the coordinates, without the reference), and rank r sits at position r
        // of the reference.
        for (family, dims) in [
            (Family::Torus, vec![6, 8]),
            (Family::Grid, vec![3, 4, 5]),
            (Family::Line, vec![7]),
            (Family::Ring, vec![9]),
            (Family::Stencil6Torus, vec![4, 5]),
            (Family::Stencil8Grid, vec![3, 5]),
            (Family::Stencil8Torus, vec![4, 6]),
            (Family::Hypercube, vec![2, 2, 2]),
            (Family::BinaryTree, vec![13]),
            (Family::Cg, vec![4, 8]),
        ] {
            let r = family.reference(&dims).unwrap();
            let n: u32 = dims.iter().product();
            let mut m = CommMatrix::new(n);
            for (a, list) in r.graph.lists().enumerate() {
                for &b in list {
                    m.add(a as u32, b, 1 << 20);
                }
            }
            let t = identify(&m, &IdentifyParams::default()).unwrap();
            assert_eq!((t.family, &t.dims), (family, &dims));
            assert_eq!(t.coordinates, r.coords);
            assert_mapping(&m, &t);
            // Renumbered, the search finds a mapping all the same.
            let (m, t) = shuffled(family, &dims, 11);
            assert_eq!((t.family, &t.dims), (family, &dims));
            assert_mapping(&m, &t);
        }
    }

    #[test]
    fn topology_factorizations() {
        assert_eq!(
            factorizations(12),
            vec![vec![2, 2, 3], vec![2, 6], vec![3, 4], vec![12]]
        );
        assert_eq!(factorizations(7), vec![vec![7]]);
        assert_eq!(factorizations(1), Vec::<Vec<u32>>::new());
        assert_eq!(factorizations(1024).len(), 42);
    }

    #[test]
    fn topology_coordinate_rule_matches_the_reference_graphs() {
        let cases: Vec<(Family, Vec<u32>)> = vec![
            (Family::Line, vec![5]),
            (Family::Ring, vec![5]),
            (Family::Grid, vec![3, 4]),
            (Family::Grid, vec![2, 3, 4]),
            (Family::Torus, vec![3, 5]),
            (Family::Torus, vec![3, 3, 4]),
            (Family::Stencil6Torus, vec![4, 4]),
            (Family::Stencil6Torus, vec![3, 5]),
            (Family::Stencil8Grid, vec![3, 4]),
            (Family::Stencil8Torus, vec![4, 5]),
            (Family::Cg, vec![4, 4]),
            (Family::Cg, vec![2, 4]),
            (Family::Cg, vec![4, 8]),
            (Family::Hypercube, vec![2, 2, 2, 2]),
            (Family::BinaryTree, vec![11]),
            (Family::AllToAll, vec![6]),
        ];
        for (family, dims) in cases {
            let r = family.reference(&dims).unwrap();
            let n = r.graph.n() as u32;
            for a in 0..n {
                for b in 0..n {
                    assert_eq!(
                        family.adjacent(&dims, &r.coords[a as usize], &r.coords[b as usize]),
                        r.graph.has_edge(a, b),
                        "{family:?} {dims:?}: {a} {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn topology_edge_count_is_the_reference_graphs() {
        // identify compares edge_count before it builds a reference: the shortcut is safe
        // only if the two agree for every candidate.
        let powers = [512, 1024, 2048, 4096];
        for n in (2..=300).chain(powers) {
            for (family, dims) in candidates(n) {
                let built = family.reference(&dims).unwrap().graph.edges();
                assert_eq!(family.edge_count(&dims), built, "{family:?} {dims:?}");
            }
        }
    }

    #[test]
    fn topology_reference_sizes() {
        let edges = |f: Family, d: &[u32]| f.reference(d).unwrap().graph.edges();
        assert_eq!(edges(Family::Grid, &[4, 4]), 24);
        assert_eq!(edges(Family::Torus, &[8, 8, 16]), 3072);
        assert_eq!(edges(Family::Stencil6Torus, &[4, 4]), 48);
        assert_eq!(edges(Family::Stencil8Grid, &[3, 3]), 20);
        assert_eq!(edges(Family::Cg, &[4, 4]), 22);
        assert_eq!(edges(Family::BinaryTree, &[7]), 6);
        assert_eq!(edges(Family::Hypercube, &[2, 2, 2]), 12);
        // The paper's remark: CG on 16 has the degree sequence of an 8x2 grid.
        assert_eq!(
            Family::Cg
                .reference(&[4, 4])
                .unwrap()
                .graph
                .sorted_degrees(),
            Family::Grid
                .reference(&[2, 8])
                .unwrap()
                .graph
                .sorted_degrees()
        );
        assert!(Family::Grid.reference(&[2, 2]).is_none());
        assert!(Family::Torus.reference(&[2, 4]).is_none());
        assert!(Family::Cg.reference(&[2, 8]).is_none());
    }

    #[test]
    fn topology_shuffled_references_are_identified_with_a_valid_mapping() {
        let cases: Vec<(Family, Vec<u32>, &str)> = vec![
            (Family::Line, vec![9], "line of 9"),
            (Family::Ring, vec![9], "ring of 9"),
            (Family::Grid, vec![4, 4], "2D grid 4x4"),
            (Family::Grid, vec![3, 7], "2D grid 3x7"),
            (Family::Grid, vec![2, 3, 4], "3D grid 2x3x4"),
            (Family::Torus, vec![3, 5], "2D torus 3x5"),
            (Family::Torus, vec![4, 4, 6], "3D torus 4x4x6"),
            (Family::Torus, vec![3, 3, 3, 3], "4D torus 3x3x3x3"),
            (
                Family::Stencil6Torus,
                vec![4, 4],
                "6-point stencil on a 2D torus 4x4",
            ),
            (
                Family::Stencil6Torus,
                vec![5, 7],
                "6-point stencil on a 2D torus 5x7",
            ),
            (
                Family::Stencil8Grid,
                vec![4, 6],
                "8-point stencil on a 2D grid 4x6",
            ),
            (
                Family::Stencil8Torus,
                vec![5, 5],
                "8-point stencil on a 2D torus 5x5",
            ),
            (
                Family::Cg,
                vec![4, 4],
                "NAS CG pattern on a 4x4 process grid",
            ),
            (
                Family::Cg,
                vec![4, 8],
                "NAS CG pattern on a 4x8 process grid",
            ),
            (
                Family::Cg,
                vec![16, 16],
                "NAS CG pattern on a 16x16 process grid",
            ),
            (
                Family::Hypercube,
                vec![2; 5],
                "hypercube of dimension 5 (32 ranks)",
            ),
            (Family::BinaryTree, vec![31], "binary tree of 31"),
            (Family::BinaryTree, vec![20], "binary tree of 20"),
            (Family::AllToAll, vec![12], "all-to-all of 12"),
        ];
        for (family, dims, text) in cases {
            for seed in [1, 2, 3] {
                let (m, t) = shuffled(family, &dims, seed);
                assert_eq!((t.family, &t.dims), (family, &dims), "{text}");
                assert_eq!(t.to_string(), text);
                assert_eq!(t.dropped_fraction, 0.0);
                assert_eq!(t.coordinates.len() as u32, m.ranks());
                assert_mapping(&m, &t);
            }
        }
    }

    #[test]
    fn topology_isomorphic_references_give_the_fewest_dimensions() {
        // A 4x4 torus is the hypercube of dimension 4.
        let (_, t) = shuffled(Family::Hypercube, &[2, 2, 2, 2], 5);
        assert_eq!(t.to_string(), "2D torus 4x4");
        // On a 3x3 torus the 8-point stencil reaches every other rank, and on a 2x2 grid too.
        let (m, t) = shuffled(Family::Stencil8Torus, &[3, 3], 5);
        assert_eq!(t.to_string(), "all-to-all of 9");
        assert_mapping(&m, &t);
        let (_, t) = shuffled(Family::Stencil8Grid, &[2, 2], 5);
        assert_eq!(t.to_string(), "all-to-all of 4");
        // CG on 4 ranks is a line: 0-1 in the row, 1-2 transposed, 2-3 in the row.
        let (m, t) = shuffled(Family::Cg, &[2, 2], 5);
        assert_eq!(t.to_string(), "line of 4");
        assert_mapping(&m, &t);
    }

    #[test]
    fn the_filtered_graph_sums_both_directions_and_repeated_entries() {
        let mut m = CommMatrix::new(4);
        // Pair {0,1}: 10 + 5 one way, 7 the other (22); pair {1,2}: 100 one way only; pair
        // {0,3}: 5 (under a quarter of 100); a self-send.
        for (s, r, bytes) in [(0, 1, 10), (2, 1, 100), (0, 1, 5), (1, 0, 7), (3, 0, 5)] {
            m.add(s, r, bytes);
        }
        m.add(1, 1, 3);
        let (g, dropped) = filtered_graph(&m, 0.2);
        let lists: Vec<&[u32]> = g.lists().collect();
        assert_eq!(lists, [&[1][..], &[0, 2][..], &[1][..], &[][..]]);
        assert_eq!(dropped, 8.0 / 130.0);
        let (g, dropped) = filtered_graph(&m, 0.0);
        assert_eq!(g.edges(), 3);
        assert_eq!(dropped, 3.0 / 130.0);
    }

    #[test]
    fn the_two_way_filtered_graph_is_the_general_one() {
        // A 5x6 torus whose pairs send different volumes each way, sorted as a trace's pair
        // table is, with a self-send and faint pairs: both paths give the same graph and
        // the same dropped fraction at every threshold.
        let torus = Family::Torus.reference(&[5, 6]).unwrap();
        let mut entries = Vec::new();
        for (a, list) in torus.graph.lists().enumerate() {
            for &b in list {
                entries.push((a as u32, b, 1000 + 37 * u64::from(a as u32 ^ b)));
            }
        }
        entries.push((3, 3, 500));
        entries.push((0, 17, 20));
        entries.push((17, 0, 9));
        let matrix = |entries: &[(u32, u32, u64)]| {
            let mut sorted = entries.to_vec();
            sorted.sort_unstable();
            let mut m = CommMatrix::new(30);
            for (s, r, bytes) in sorted {
                m.add(s, r, bytes);
            }
            m
        };
        let m = matrix(&entries);
        for threshold in [0.0, 0.05, 0.9] {
            let two_way = two_way_filtered_graph(&m, threshold).expect("sorted, two-way");
            assert_eq!(two_way, any_filtered_graph(&m, threshold));
        }
        // One pair sending one way only, still sorted: the general path answers.
        entries.push((29, 0, 5));
        let m = matrix(&entries);
        assert!(two_way_filtered_graph(&m, 0.05).is_none());
        assert_eq!(filtered_graph(&m, 0.05), any_filtered_graph(&m, 0.05));
    }

    #[test]
    fn topology_threshold_drops_faint_pairs_and_reports_their_bytes() {
        let mut m = synthetic_matrix(Family::Ring, &[8], 3).unwrap();
        let ring_bytes = m.total_bytes();
        // Faint chords (4% of a ring pair's two-way volume) and a self-send.
        m.add(0, 4, (1 << 21) / 25);
        m.add(1, 5, (1 << 21) / 25);
        m.add(2, 2, 1000);
        let t = identify(&m, &IdentifyParams::default()).unwrap();
        assert_eq!(t.to_string(), "ring of 8");
        let dropped = 2 * ((1 << 21) / 25) + 1000;
        assert_eq!(
            t.dropped_fraction,
            dropped as f64 / (ring_bytes + dropped) as f64
        );
        // With a 1% threshold the chords stay and the ring is lost.
        let params = IdentifyParams {
            threshold: 0.01,
            ..IdentifyParams::default()
        };
        let u = identify(&m, &params).unwrap_err();
        assert_eq!((u.ranks, u.edges), (8, 10));
        assert_eq!(u.reason, Failure::NoCandidateMatched);
        assert_eq!(u.dropped_fraction, 1000.0 / (ring_bytes + dropped) as f64);
    }

    #[test]
    fn topology_unknown_reports_the_failed_invariants() {
        // A star of 5: four leaves around rank 0.
        let mut m = CommMatrix::new(5);
        for leaf in 1..5 {
            m.add(0, leaf, 100);
        }
        let u = identify(&m, &IdentifyParams::default()).unwrap_err();
        assert_eq!(u.reason, Failure::NoCandidateMatched);
        let rejections: Vec<(String, Failure)> = u
            .rejections
            .iter()
            .map(|r| (r.candidate.clone(), r.failed.clone()))
            .collect();
        assert_eq!(
            rejections,
            vec![
                ("line of 5".to_string(), Failure::DegreeSequence),
                (
                    "ring of 5".to_string(),
                    Failure::EdgeCount {
                        expected: 5,
                        found: 4
                    }
                ),
                ("binary tree of 5".to_string(), Failure::DegreeSequence),
                (
                    "all-to-all of 5".to_string(),
                    Failure::EdgeCount {
                        expected: 10,
                        found: 4
                    }
                ),
            ]
        );
        // Two disjoint rings.
        let mut m = CommMatrix::new(6);
        for (a, b) in [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)] {
            m.add(a, b, 1);
        }
        let u = identify(&m, &IdentifyParams::default()).unwrap_err();
        assert_eq!(u.reason, Failure::Disconnected { components: 2 });
        assert_eq!(
            u.to_string(),
            "unknown topology of 6 ranks and 6 edges: the graph has 2 connected components"
        );
        // A 3x3 torus with one edge moved keeps the edge count, not the degrees.
        let mut m = CommMatrix::new(9);
        let r = Family::Torus.reference(&[3, 3]).unwrap();
        for (a, l) in r.graph.lists().enumerate() {
            for &b in l {
                if (a as u32) < b && (a, b) != (0, 1) {
                    m.add(a as u32, b, 1);
                }
            }
        }
        m.add(0, 4, 1);
        let u = identify(&m, &IdentifyParams::default()).unwrap_err();
        let torus = u
            .rejections
            .iter()
            .find(|r| r.candidate == "2D torus 3x3")
            .unwrap();
        assert_eq!(torus.failed, Failure::DegreeSequence);
        // No traffic at all.
        let u = identify(&CommMatrix::new(16), &IdentifyParams::default()).unwrap_err();
        assert_eq!(u.reason, Failure::NoTraffic);
    }

    #[test]
    fn topology_search_budget_is_reported() {
        let m = synthetic_matrix(Family::Torus, &[5, 5], 1).unwrap();
        let params = IdentifyParams {
            search_budget: 3,
            ..IdentifyParams::default()
        };
        let u = identify(&m, &params).unwrap_err();
        let torus = u
            .rejections
            .iter()
            .find(|r| r.candidate == "2D torus 5x5")
            .unwrap();
        assert_eq!(torus.failed, Failure::SearchBudget);
    }

    #[test]
    fn topology_large_shuffled_torus_and_grid() {
        let mut cases = benchmark_matrices(42);
        let names: Vec<&str> = cases.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(names, ["3D torus 8x8x16", "2D grid 23x23"]);
        cases.push((
            "NAS CG pattern on a 32x32 process grid".to_string(),
            synthetic_matrix(Family::Cg, &[32, 32], 42).unwrap(),
        ));
        cases.push((
            "hypercube of dimension 11 (2048 ranks)".to_string(),
            synthetic_matrix(Family::Hypercube, &[2; 11], 42).unwrap(),
        ));
        for (text, m) in &cases {
            let start = Instant::now();
            let t = identify(m, &IdentifyParams::default()).unwrap();
            eprintln!("{text}: identified in {:?}", start.elapsed());
            assert_eq!(t.to_string(), *text);
            assert_mapping(m, &t);
        }
    }
}
