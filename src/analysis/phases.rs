//! Execution-phase detection of Alawneh's thesis (chapter 5): recursive Jensen–Shannon
//! segmentation of the sequence of communication-pattern instances, ordered by start time,
//! with the BIC stopping rule of Li et al. (2002) and a strength threshold `s0`.
//!
//! For a segment of length `l` with `k` distinct symbols, every cut `i` in `1..l` (the left
//! part holds the first `i` symbols) is scored with the Jensen–Shannon divergence, logs in
//! base 2:
//!
//! ```text
//! H      = −Σ (N_j/l) log2(N_j/l)
//! D(i)   = H − (i/l)·H_l − ((l−i)/l)·H_r
//! K      = k_l + k_r + 1 − k
//! τ      = log2(l)·K / (2l)
//! s      = (2l·D̂ − log2(l)·K) / (log2(l)·K)
//! ```
//!
//! The cut goes at the first maximum `D̂` of `D`, and the segment is split while `s > s0`.
//! Every segment the recursion reaches is kept, split or not, so the result is the whole
//! binary tree of the thesis's Tables 5.2 and 5.8; its leaves, in sequence order, are the
//! phases.
//!
//! Details the thesis leaves open, decided here:
//! - `K ≥ 1` for every cut: each symbol of the segment lies in the left part, the right part
//!   or both, so `k_l + k_r ≥ k`. `K = 0` cannot happen, and `log2(l)·K ≥ 1` for `l ≥ 2`.
//!   A homogeneous segment (one distinct symbol) has `k_l = k_r = k = 1`, hence `K = 2`, and
//!   gets the formula's `s`: exactly `−1` in [`Mode::Correct`] (`D̂ = 0`), and
//!   `−1 − 1/(2·log2 l)` in [`Mode::ThesisCompat`] (`D̂ = −1/(2l)`), as in the tables.
//!   It is never split, whatever `s0`: both halves would have the same distribution.
//! - Ties: the first cut whose score is within a rounding tolerance (`1e−11` of
//!   `l·log2 l` bits of information gain) of the maximum wins, so that cuts equal in exact
//!   arithmetic resolve to the leftmost one.
//! - A segment of length 1 is a leaf with `D = 0`, `τ = 0`, no `s` and `pc = ps − 1`, as the
//!   tables print it.
//! - A NaN `s0` splits nothing (`s > NaN` is false).
//!
//! Cost: the scores of all cuts of a segment take one pass over it (the left part's
//! `Σ c·log2 c` is kept up to date as the cut moves, the right part's follows from the
//! segment's totals), so a segmentation costs `O(n · depth)`. The recursion runs on an
//! explicit work stack and cannot overflow the call stack.
//!
//! ```
//! use mtfdb::analysis::phases::{segment, Params};
//!
//! let seq: Vec<char> = "AAAAAABBBBBB".chars().collect();
//! let tree = segment(&seq, &Params::default());
//! let phases: Vec<(usize, usize)> = tree.leaves().iter().map(|n| (n.ps, n.pe)).collect();
//! assert_eq!(phases, vec![(1, 6), (7, 12)]);
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::Hash;

/// Which right-hand entropy the divergence uses.
///
/// ```
/// use mtfdb::analysis::phases::Mode;
///
/// assert_eq!(Mode::default(), Mode::Correct);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The textbook Jensen–Shannon divergence: `H_r = −Σ (c_j/(l−i)) log2(c_j/(l−i))`.
    #[default]
    Correct,
    /// The arithmetic behind the thesis's published tables (5.2 and 5.8): the right-hand
    /// entropy divides the counts by `l−i+1` instead of `l−i`, with its weight `(l−i)/l`
    /// unchanged. A homogeneous segment of length `l` then scores `D = −1/(2l)`, cut one
    /// element before its end.
    ThesisCompat,
}

/// Segmentation parameters.
///
/// ```
/// use mtfdb::analysis::phases::{Mode, Params};
///
/// let coarse = Params { s0: 0.5, ..Params::default() };
/// assert_eq!(coarse.mode, Mode::Correct);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Strength threshold: a segment is split while its strength `s > s0`. `0` (the default)
    /// is the plain BIC rule `D̂ > τ`; a larger `s0` gives fewer, coarser phases.
    pub s0: f64,
    /// Which divergence to compute.
    pub mode: Mode,
}

impl Default for Params {
    /// `s0 = 0`, [`Mode::Correct`].
    ///
    /// ```
    /// use mtfdb::analysis::phases::{Mode, Params};
    ///
    /// assert_eq!(Params::default(), Params { s0: 0.0, mode: Mode::Correct });
    /// ```
    fn default() -> Self {
        Params {
            s0: 0.0,
            mode: Mode::Correct,
        }
    }
}

/// One segment of the segmentation tree, with the columns of the thesis's tables.
/// Positions are 1-based and inclusive.
///
/// ```
/// use mtfdb::analysis::phases::{segment, Params};
///
/// let tree = segment(&["A", "A", "B", "B"], &Params::default());
/// let root = tree.root().unwrap();
/// assert_eq!((root.ps, root.pe, root.len, root.pc), (1, 4, 4, 2));
/// assert_eq!(root.children, Some((1, 2)));
/// assert_eq!(tree.nodes()[1].parent, Some(0));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseNode {
    /// Number in the tables' order: `S0` is the root; a split numbers both children at once,
    /// then the left subtree is numbered before the right one. Also the index in
    /// [`PhaseTree::nodes`].
    pub id: usize,
    /// First position of the segment.
    pub ps: usize,
    /// Last position of the segment.
    pub pe: usize,
    /// `pe − ps + 1`.
    pub len: usize,
    /// The maximum divergence `D̂` over the segment's cuts (`0` for length 1).
    pub d: f64,
    /// Cutting position: the last position of the left part at the best cut
    /// (`ps − 1` for length 1). Set whether or not the segment was split.
    pub pc: usize,
    /// The BIC threshold `τ = log2(len)·K/(2·len)` (`0` for length 1).
    pub tau: f64,
    /// The segmentation strength; `None` for length 1 (the tables' "-").
    pub s: Option<f64>,
    /// The enclosing segment; `None` for the root.
    pub parent: Option<usize>,
    /// Left and right parts `[ps, pc]` and `[pc+1, pe]`, if the segment was split.
    pub children: Option<(usize, usize)>,
}

impl PhaseNode {
    /// Whether the segment was not split, i.e. is a phase.
    ///
    /// ```
    /// use mtfdb::analysis::phases::{segment, Params};
    ///
    /// let tree = segment(&[7u32], &Params::default());
    /// assert!(tree.root().unwrap().is_leaf());
    /// ```
    pub fn is_leaf(&self) -> bool {
        self.children.is_none()
    }
}

/// The whole segmentation tree: every segment the recursion reached, indexed by id.
///
/// ```
/// use mtfdb::analysis::phases::{segment, Params};
///
/// let seq: Vec<char> = "XXXXYYYYZZZZ".chars().collect();
/// let tree = segment(&seq, &Params::default());
/// assert_eq!(tree.len(), 5);
/// assert_eq!(tree.leaves().len(), 3);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseTree {
    nodes: Vec<PhaseNode>,
    params: Params,
}

impl PhaseTree {
    /// All segments, indexed by id (so in numbering order); empty for an empty sequence.
    ///
    /// ```
    /// use mtfdb::analysis::phases::{segment, Params};
    ///
    /// let tree = segment(&[1u8, 1, 2, 2], &Params::default());
    /// assert!(tree.nodes().iter().enumerate().all(|(i, n)| n.id == i));
    /// ```
    pub fn nodes(&self) -> &[PhaseNode] {
        &self.nodes
    }

    /// The segment numbered `id`.
    ///
    /// ```
    /// use mtfdb::analysis::phases::{segment, Params};
    ///
    /// let tree = segment(&[1u8, 1, 2, 2], &Params::default());
    /// assert_eq!(tree.node(2).map(|n| (n.ps, n.pe)), Some((3, 4)));
    /// assert!(tree.node(3).is_none());
    /// ```
    pub fn node(&self, id: usize) -> Option<&PhaseNode> {
        self.nodes.get(id)
    }

    /// The whole sequence's segment `S0`; `None` for an empty sequence.
    ///
    /// ```
    /// use mtfdb::analysis::phases::{segment, Params};
    ///
    /// assert!(segment::<u32>(&[], &Params::default()).root().is_none());
    /// ```
    pub fn root(&self) -> Option<&PhaseNode> {
        self.nodes.first()
    }

    /// The phases: the leaves in sequence order. They partition `1..=n`.
    ///
    /// ```
    /// use mtfdb::analysis::phases::{segment, Params};
    ///
    /// let seq: Vec<char> = "AAAAAABBBBBB".chars().collect();
    /// let tree = segment(&seq, &Params::default());
    /// let ids: Vec<usize> = tree.leaves().iter().map(|n| n.id).collect();
    /// assert_eq!(ids, vec![1, 2]);
    /// ```
    pub fn leaves(&self) -> Vec<&PhaseNode> {
        let mut leaves = Vec::new();
        self.walk(|node, _| {
            if node.is_leaf() {
                leaves.push(node);
            }
        });
        leaves
    }

    /// Number of segments (internal ones included).
    ///
    /// ```
    /// use mtfdb::analysis::phases::{segment, Params};
    ///
    /// assert_eq!(segment(&['a'], &Params::default()).len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the tree has no segment (the sequence was empty).
    ///
    /// ```
    /// use mtfdb::analysis::phases::{segment, Params};
    ///
    /// assert!(segment::<char>(&[], &Params::default()).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The parameters the tree was built with.
    ///
    /// ```
    /// use mtfdb::analysis::phases::{segment, Mode, Params};
    ///
    /// let params = Params { s0: 0.5, mode: Mode::ThesisCompat };
    /// assert_eq!(segment(&[1u32, 2], &params).params(), params);
    /// ```
    pub fn params(&self) -> Params {
        self.params
    }

    /// Visits the nodes in pre-order, left subtree first (hence in sequence order for the
    /// leaves), with their depth; iterative, so a degenerate tree is no problem.
    fn walk<'a>(&'a self, mut visit: impl FnMut(&'a PhaseNode, usize)) {
        let mut stack: Vec<(usize, usize)> = Vec::new();
        if !self.nodes.is_empty() {
            stack.push((0, 0));
        }
        while let Some((id, depth)) = stack.pop() {
            let node = &self.nodes[id];
            visit(node, depth);
            if let Some((left, right)) = node.children {
                stack.push((right, depth + 1));
                stack.push((left, depth + 1));
            }
        }
    }
}

/// Segments `symbols` (pattern ids of the communication-pattern instances, ordered by start
/// time) and returns the whole tree. Any hashable symbol type works; only equality matters.
///
/// ```
/// use mtfdb::analysis::phases::{segment, Mode, Params};
///
/// // Table 5.2's S7 of the thesis: D = 0.92, cut after position 2, τ = 0.23, s = 2.97.
/// let seq: Vec<char> = "AAXYY".chars().collect();
/// let tree = segment(&seq, &Params { s0: 0.0, mode: Mode::ThesisCompat });
/// let root = tree.root().unwrap();
/// assert_eq!(root.pc, 2);
/// assert!((root.d - 0.922).abs() < 1e-3 && (root.s.unwrap() - 2.97).abs() < 5e-3);
/// ```
pub fn segment<T: Eq + Hash>(symbols: &[T], params: &Params) -> PhaseTree {
    let mut ids: HashMap<&T, u32> = HashMap::new();
    let seq: Vec<u32> = symbols
        .iter()
        .map(|sym| {
            let next = ids.len() as u32;
            *ids.entry(sym).or_insert(next)
        })
        .collect();
    let mut scorer = Scorer::new(seq.len(), ids.len(), params.mode);
    let mut nodes: Vec<PhaseNode> = Vec::new();
    if !seq.is_empty() {
        nodes.push(PhaseNode::new(0, 1, seq.len(), None));
    }
    let mut work: Vec<usize> = if seq.is_empty() { Vec::new() } else { vec![0] };
    while let Some(id) = work.pop() {
        let (ps, pe) = (nodes[id].ps, nodes[id].pe);
        let Some(cut) = scorer.best_cut(&seq[ps - 1..pe]) else {
            // Length 1: the defaults of `PhaseNode::new` are the tables' values.
            continue;
        };
        let len = pe - ps + 1;
        let l = len as f64;
        let penalty = l.log2() * cut.k as f64; // ≥ 1 since len ≥ 2 and K ≥ 1
        let s = (2.0 * cut.gain - penalty) / penalty;
        let pc = ps + cut.i - 1;
        let node = &mut nodes[id];
        node.d = cut.gain / l;
        node.pc = pc;
        node.tau = penalty / (2.0 * l);
        node.s = Some(s);
        if !cut.homogeneous && s > params.s0 {
            let left = nodes.len();
            nodes[id].children = Some((left, left + 1));
            nodes.push(PhaseNode::new(left, ps, pc, Some(id)));
            nodes.push(PhaseNode::new(left + 1, pc + 1, pe, Some(id)));
            work.push(left + 1);
            work.push(left);
        }
    }
    PhaseTree {
        nodes,
        params: *params,
    }
}

/// Indented text of the whole tree for `SHOW PHASE TREE`: a header, then one line per
/// segment in pre-order (left before right), two spaces per level (at most 32 levels; deeper
/// lines say their depth), with range, length, `D`, cut, `τ`, `s` (`-` for length 1) to three
/// decimals, and `leaf` on the phases.
///
/// ```
/// use mtfdb::analysis::phases::{render_tree, segment, Params};
///
/// let text = render_tree(&segment(&['A', 'A', 'B', 'B'], &Params::default()));
/// assert_eq!(
///     text,
///     "phase tree: 3 segments, 2 leaves (mode correct, s0 0)\n\
///      S0 [1..4] len=4 D=1.000 pc=2 tau=0.250 s=3.000\n  \
///      S1 [1..2] len=2 D=0.000 pc=1 tau=0.500 s=-1.000 leaf\n  \
///      S2 [3..4] len=2 D=0.000 pc=3 tau=0.500 s=-1.000 leaf\n"
/// );
/// ```
pub fn render_tree(tree: &PhaseTree) -> String {
    const MAX_INDENT: usize = 32;
    let params = tree.params();
    let mode = match params.mode {
        Mode::Correct => "correct",
        Mode::ThesisCompat => "thesis-compat",
    };
    let mut out = format!(
        "phase tree: {} segments, {} leaves (mode {mode}, s0 {})\n",
        tree.len(),
        tree.leaves().len(),
        params.s0
    );
    tree.walk(|n, depth| {
        let indent = depth.min(MAX_INDENT) * 2;
        let s = n.s.map_or_else(|| "-".to_string(), fixed3);
        let _ = write!(
            out,
            "{:indent$}S{} [{}..{}] len={} D={} pc={} tau={} s={s}",
            "",
            n.id,
            n.ps,
            n.pe,
            n.len,
            fixed3(n.d),
            n.pc,
            fixed3(n.tau),
        );
        if depth > MAX_INDENT {
            let _ = write!(out, " depth={depth}");
        }
        out.push_str(if n.is_leaf() { " leaf\n" } else { "\n" });
    });
    out
}

/// Three decimals, without a minus sign on a value that rounds to zero.
fn fixed3(x: f64) -> String {
    let text = format!("{x:.3}");
    if text == "-0.000" {
        "0.000".to_string()
    } else {
        text
    }
}

impl PhaseNode {
    /// A fresh segment with the values of a length-1 leaf; `segment` fills the others in.
    fn new(id: usize, ps: usize, pe: usize, parent: Option<usize>) -> Self {
        PhaseNode {
            id,
            ps,
            pe,
            len: pe - ps + 1,
            d: 0.0,
            pc: ps - 1,
            tau: 0.0,
            s: None,
            parent,
            children: None,
        }
    }
}

/// The best cut of a segment.
#[derive(Debug, Clone, Copy)]
struct Cut {
    /// Length of the left part (`1..len`).
    i: usize,
    /// `len · D̂`, in bits.
    gain: f64,
    /// `K = k_l + k_r + 1 − k` at that cut.
    k: usize,
    /// Whether the segment holds a single distinct symbol.
    homogeneous: bool,
}

/// Scores every cut of a segment in one pass, reusing its buffers across segments.
struct Scorer {
    mode: Mode,
    /// `xlog[c] = c·log2 c` for `c` up to the sequence length.
    xlog: Vec<f64>,
    /// Per symbol: its count in the segment, then (during the pass) in the left part.
    total: Vec<u32>,
    left: Vec<u32>,
    /// The segment's distinct symbols, to reset the counts in `O(len)`.
    distinct: Vec<u32>,
}

impl Scorer {
    fn new(n: usize, symbols: usize, mode: Mode) -> Self {
        let xlog = (0..=n)
            .map(|c| {
                let c = c as f64;
                if c > 1.0 {
                    c * c.log2()
                } else {
                    0.0
                }
            })
            .collect();
        Scorer {
            mode,
            xlog,
            total: vec![0; symbols],
            left: vec![0; symbols],
            distinct: Vec::new(),
        }
    }

    /// The first best cut of `seg`, or `None` if it has fewer than two symbols.
    ///
    /// With `X(part) = Σ_j c_j·log2 c_j` over a part's counts, a part of length `n` has
    /// `n·H = n·log2 n − X`, so `l·D(i) = (l·H) − (i·H_l) − (m·H_r)` with `m = l − i` needs
    /// only `X(left)` and `X(right)`, both updated in `O(1)` when the cut moves by one.
    /// In thesis-compat mode `m·H'_r = m·(m·log2(m+1) − X(right))/(m+1)`.
    fn best_cut(&mut self, seg: &[u32]) -> Option<Cut> {
        let len = seg.len();
        if len < 2 {
            return None;
        }
        self.distinct.clear();
        for &x in seg {
            let count = &mut self.total[x as usize];
            if *count == 0 {
                self.distinct.push(x);
            }
            *count += 1;
        }
        let k = self.distinct.len();
        let whole: f64 = self
            .distinct
            .iter()
            .map(|&x| self.xlog[self.total[x as usize] as usize])
            .sum();
        let total_entropy = self.xlog[len] - whole; // len·H
        let tolerance = 1e-11 * self.xlog[len].max(1.0);

        let mut left_x = CompensatedSum::default();
        let mut right_x = CompensatedSum::new(whole);
        let (mut k_left, mut k_right) = (0usize, k);
        let mut best: Option<Cut> = None;
        for i in 1..len {
            let x = seg[i - 1] as usize;
            let in_left = self.left[x] as usize;
            let in_right = self.total[x] as usize - in_left;
            left_x.add(self.xlog[in_left + 1] - self.xlog[in_left]);
            right_x.add(self.xlog[in_right - 1] - self.xlog[in_right]);
            if in_left == 0 {
                k_left += 1;
            }
            if in_right == 1 {
                k_right -= 1;
            }
            self.left[x] += 1;

            let m = len - i;
            let left_entropy = self.xlog[i] - left_x.value(); // i·H_l
            let right_entropy = match self.mode {
                Mode::Correct => self.xlog[m] - right_x.value(), // m·H_r
                Mode::ThesisCompat => {
                    let m = m as f64;
                    m * (m * (m + 1.0).log2() - right_x.value()) / (m + 1.0)
                }
            };
            let gain = total_entropy - left_entropy - right_entropy;
            if best.is_none_or(|b| gain > b.gain + tolerance) {
                best = Some(Cut {
                    i,
                    gain,
                    k: k_left + k_right + 1 - k,
                    homogeneous: k == 1,
                });
            }
        }
        for &x in &self.distinct {
            self.total[x as usize] = 0;
            self.left[x as usize] = 0;
        }
        best
    }
}

/// Neumaier's compensated sum, so that the running `Σ c·log2 c` of a part does not drift
/// over a long segment.
#[derive(Debug, Default, Clone, Copy)]
struct CompensatedSum {
    sum: f64,
    compensation: f64,
}

impl CompensatedSum {
    fn new(start: f64) -> Self {
        CompensatedSum {
            sum: start,
            compensation: 0.0,
        }
    }

    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.compensation += (self.sum - t) + x;
        } else {
            self.compensation += (x - t) + self.sum;
        }
        self.sum = t;
    }

    fn value(&self) -> f64 {
        self.sum + self.compensation
    }
}
