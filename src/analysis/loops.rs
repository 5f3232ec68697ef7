//! Loop-nest models of process traces (Ketterlin, Kuhn, Genaud, Clauss, *Loop-based Modeling
//! of Parallel Communication Traces*, INRIA RR-8562, 2014).
//!
//! [`nlr`] (Nested Loop Recognition) compresses one process's symbol sequence on line into a
//! [`LoopNest`]: three consecutive copies of a sequence of at most `k` terms become a loop of
//! 3 iterations, and a loop directly followed by one more copy of its body gets one more
//! iteration. Loop bodies are terms too, so loops nest. Only the last `window` terms may be
//! rewritten; older ones are final, which keeps the work per event bounded. [`expand`] gives
//! back the exact input.
//!
//! The merge of several processes' nests into one global model is
//! [`global_model`](super::global_model), re-exported here.
//! [`Nlr::with_nesting`] keeps loop bodies balanced with respect to routine entries and
//! exits, so that loops run over whole calls.
//!
//! ```
//! use mtfdb::analysis::loops::{expand, nlr, Item};
//! // 1 2 2 2 2 2, four times
//! let seq: Vec<u32> = (0..4).flat_map(|_| [1, 2, 2, 2, 2, 2]).collect();
//! let nest = nlr(&seq, 8);
//! assert_eq!(
//!     nest.items,
//!     vec![Item::Loop {
//!         count: 4,
//!         body: vec![Item::Symbol(1), Item::Loop { count: 5, body: vec![Item::Symbol(2)] }],
//!     }]
//! );
//! assert_eq!(expand(&nest), seq);
//! assert_eq!(nest.render(|s| format!("S{s}")), "for i0 in 0..4 {\n  S1\n  for i1 in 0..5 { S2 }\n}\n");
//! ```

use std::fmt::Write as _;
use std::sync::Arc;

use crate::hash::FxHashMap;

pub use super::global_model::{
    merge, merge_classes, merge_communicating, GlobalItem, GlobalModel, Peer, Role,
};

/// The default largest loop body, in terms at the body's top level: room for a
/// Sweep3D-like iteration of 33 events on an interior rank, twice over.
///
/// ```
/// use mtfdb::analysis::loops::{nlr, DEFAULT_MAX_BODY};
/// let seq: Vec<u32> = (0..3).flat_map(|_| 0..DEFAULT_MAX_BODY as u32).collect();
/// assert_eq!(nlr(&seq, DEFAULT_MAX_BODY).items.len(), 1);
/// ```
pub const DEFAULT_MAX_BODY: usize = 64;

/// One element of a loop nest: an event's symbol, or a loop.
///
/// ```
/// use mtfdb::analysis::loops::Item;
/// let item = Item::Loop { count: 3, body: vec![Item::Symbol(7)] };
/// assert_eq!(item.events(), 3);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Item {
    /// One event.
    Symbol(u32),
    /// `count` repetitions of `body`.
    Loop {
        /// Number of iterations (at least 2 in what [`nlr`] makes; 3 when a loop is made).
        count: u64,
        /// The body, run once per iteration.
        body: Vec<Item>,
    },
}

impl Item {
    /// Number of events the item stands for.
    ///
    /// ```
    /// use mtfdb::analysis::loops::Item;
    /// let inner = Item::Loop { count: 4, body: vec![Item::Symbol(1), Item::Symbol(2)] };
    /// assert_eq!(Item::Loop { count: 10, body: vec![inner, Item::Symbol(3)] }.events(), 90);
    /// ```
    pub fn events(&self) -> u64 {
        match self {
            Item::Symbol(_) => 1,
            Item::Loop { count, body } => {
                count.saturating_mul(body.iter().map(Item::events).sum::<u64>())
            }
        }
    }

    fn expand_into(&self, out: &mut Vec<u32>) {
        match self {
            Item::Symbol(s) => out.push(*s),
            Item::Loop { count, body } => {
                for _ in 0..*count {
                    for item in body {
                        item.expand_into(out);
                    }
                }
            }
        }
    }
}

/// A process's trace as a sequence of events and (nested) loops: what [`nlr`] returns.
///
/// ```
/// use mtfdb::analysis::loops::nlr;
/// let nest = nlr(&[5, 1, 2, 1, 2, 1, 2, 1, 2, 9], 4);
/// assert_eq!(nest.render(|s| s.to_string()), "5\nfor i0 in 0..4 { 1 2 }\n9\n");
/// assert_eq!(nest.events(), 10);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LoopNest {
    /// The top-level items in order.
    pub items: Vec<Item>,
}

impl LoopNest {
    /// Number of events the nest stands for (the length of its expansion).
    ///
    /// ```
    /// use mtfdb::analysis::loops::nlr;
    /// assert_eq!(nlr(&[1; 1000], 4).events(), 1000);
    /// ```
    pub fn events(&self) -> u64 {
        self.items.iter().map(Item::events).sum()
    }

    /// The top-level loop that stands for the most events (the first of equals), as
    /// `(count, body)`: the main loop of an iterative program.
    ///
    /// ```
    /// use mtfdb::analysis::loops::{nlr, Item};
    /// let nest = nlr(&[9, 9, 9, 1, 2, 1, 2, 1, 2, 1, 2], 4);
    /// let (count, body) = nest.main_loop().unwrap();
    /// assert_eq!((count, body), (4, &[Item::Symbol(1), Item::Symbol(2)][..]));
    /// ```
    pub fn main_loop(&self) -> Option<(u64, &[Item])> {
        let mut best: Option<(u64, &[Item], u64)> = None;
        for item in &self.items {
            if let Item::Loop { count, body } = item {
                let events = item.events();
                if best.is_none_or(|(_, _, e)| events > e) {
                    best = Some((*count, body, events));
                }
            }
        }
        best.map(|(count, body, _)| (count, body))
    }

    /// The nest as text, one loop header per line, a loop whose body holds only events on
    /// one line (`for i0 in 0..200 { S1 R1 }`), runs of events on one line; `name` spells a
    /// symbol. The length of this text is the model size P1's Table I reports.
    ///
    /// ```
    /// use mtfdb::analysis::loops::nlr;
    /// let seq: Vec<u32> = (0..3).flat_map(|_| [0, 0, 0, 1]).collect();
    /// let text = nlr(&seq, 4).render(|s| ["A", "B"][s as usize].to_string());
    /// assert_eq!(text, "for i0 in 0..3 {\n  for i1 in 0..3 { A }\n  B\n}\n");
    /// ```
    pub fn render(&self, name: impl Fn(u32) -> String) -> String {
        self.render_nested(name, &[])
    }

    /// [`LoopNest::render`] for symbols that nest (`nesting` as [`Nlr::with_nesting`] takes
    /// it): a run of events starts a new line where a call opens after the line's calls
    /// have all closed, one call per line.
    ///
    /// ```
    /// use mtfdb::analysis::loops::nlr;
    /// // 0 = "f(", 1 = ")", 2 = "S1"
    /// let nest = nlr(&[0, 2, 1, 0, 2, 2, 1], 4);
    /// let names = |s: u32| ["f(", ")", "S1"][s as usize].to_string();
    /// assert_eq!(nest.render(names), "f( S1 ) f( S1 S1 )\n");
    /// assert_eq!(nest.render_nested(names, &[1, -1]), "f( S1 )\nf( S1 S1 )\n");
    /// ```
    pub fn render_nested(&self, name: impl Fn(u32) -> String, nesting: &[i8]) -> String {
        let mut out = String::new();
        render_items(&self.items, &name, nesting, 0, &mut out);
        out
    }
}

fn render_items(
    items: &[Item],
    name: &dyn Fn(u32) -> String,
    nesting: &[i8],
    depth: usize,
    out: &mut String,
) {
    let mut line_open = false;
    // Calls the current line opened and has not closed.
    let mut line_calls = 0i32;
    for item in items {
        match item {
            Item::Symbol(s) => {
                let change = nesting.get(*s as usize).map_or(0, |&d| i32::from(d));
                if line_open && change > 0 && line_calls == 0 {
                    out.push('\n');
                    line_open = false;
                }
                if line_open {
                    out.push(' ');
                } else {
                    indent(out, depth);
                    line_open = true;
                    line_calls = 0;
                }
                line_calls += change;
                out.push_str(&name(*s));
            }
            Item::Loop { count, body } => {
                if line_open {
                    out.push('\n');
                    line_open = false;
                }
                indent(out, depth);
                let _ = write!(out, "for i{depth} in 0..{count} {{");
                if body.iter().all(|i| matches!(i, Item::Symbol(_))) {
                    for i in body {
                        if let Item::Symbol(s) = i {
                            out.push(' ');
                            out.push_str(&name(*s));
                        }
                    }
                    out.push_str(" }\n");
                } else {
                    out.push('\n');
                    render_items(body, name, nesting, depth + 1, out);
                    indent(out, depth);
                    out.push_str("}\n");
                }
            }
        }
    }
    if line_open {
        out.push('\n');
    }
}

pub(super) fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// The symbol sequence a nest stands for: `expand(&nlr(x, k)) == x` for every `x` and `k`.
///
/// ```
/// use mtfdb::analysis::loops::{expand, nlr};
/// let x = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
/// assert_eq!(expand(&nlr(&x, 3)), x);
/// ```
pub fn expand(nest: &LoopNest) -> Vec<u32> {
    let mut out = Vec::with_capacity(usize::try_from(nest.events()).unwrap_or(0).min(1 << 24));
    for item in &nest.items {
        item.expand_into(&mut out);
    }
    out
}

/// A term of the recognizer: a symbol (`len == 0`, `head` the symbol) or a loop (`head` the
/// interned body, `len` the body's length, `count` the iterations). Interned bodies make
/// equal terms equal as values, so matching is a comparison of small structs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Term {
    head: u32,
    len: u32,
    count: u64,
}

impl Term {
    fn symbol(s: u32) -> Term {
        Term {
            head: s,
            len: 0,
            count: 0,
        }
    }
}

/// The on-line loop recognizer (NLR): feed it symbols with [`Nlr::push`], take the model
/// with [`Nlr::finish`]. Work per event is bounded by a function of the largest body `k`
/// (at most `k` candidate bodies, each compared term by term), whatever the input's length.
///
/// ```
/// use mtfdb::analysis::loops::Nlr;
/// let mut r = Nlr::new(4);
/// for _ in 0..100 {
///     r.push(1);
///     r.push(2);
/// }
/// r.push(3);
/// assert_eq!(r.finish().render(|s| s.to_string()), "for i0 in 0..100 { 1 2 }\n3\n");
/// ```
#[derive(Debug, Clone)]
pub struct Nlr {
    k: usize,
    window: usize,
    /// Per symbol, +1 for an opening one (a routine's entry), -1 for a closing one (its
    /// exit), 0 (or absent) for others; see [`Nlr::with_nesting`]. Shared: one table serves
    /// every process of a trace, and its alphabet grows with the ranks.
    nesting: Arc<[i8]>,
    /// Top-level terms; `stack[..base]` are final (out of the window).
    stack: Vec<Term>,
    base: usize,
    bodies: Vec<Box<[Term]>>,
    body_ids: FxHashMap<Box<[Term]>, u32>,
}

impl Nlr {
    /// A recognizer of loops whose bodies have at most `k` terms at their top level (at least
    /// 1), with a window of `4 * k + 4` terms.
    ///
    /// ```
    /// use mtfdb::analysis::loops::Nlr;
    /// let r = Nlr::new(16);
    /// assert_eq!(r.finish().events(), 0);
    /// ```
    pub fn new(k: usize) -> Nlr {
        let k = k.max(1);
        Nlr::with_window(k, 4 * k + 4)
    }

    /// A recognizer with body bound `k` and a window of `window` terms (raised to `3 * k + 1`,
    /// the least that lets a body of `k` terms be found).
    ///
    /// ```
    /// use mtfdb::analysis::loops::Nlr;
    /// let mut r = Nlr::with_window(2, 7);
    /// for s in [1, 2, 1, 2, 1, 2] {
    ///     r.push(s);
    /// }
    /// assert_eq!(r.finish().render(|s| s.to_string()), "for i0 in 0..3 { 1 2 }\n");
    /// ```
    pub fn with_window(k: usize, window: usize) -> Nlr {
        let k = k.max(1);
        Nlr {
            k,
            window: window.max(3 * k + 1),
            nesting: Arc::from([]),
            stack: Vec::new(),
            base: 0,
            bodies: Vec::new(),
            body_ids: FxHashMap::default(),
        }
    }

    /// A recognizer ([`Nlr::new`]) whose loop bodies are balanced: `nesting[s]` is +1 for a
    /// symbol that opens a bracket (a routine's entry), -1 for one that closes it (its
    /// exit), 0 for others (symbols past the end are 0). A body never closes more than it
    /// opened before and closes all it opens, so loops run over whole routine calls: of
    /// `setup( B ) solve( B ) solve( B ) solve( B )`, the loop is the three `solve( B )`
    /// calls, not three copies of `B ) solve(` that start inside `setup`.
    ///
    /// ```
    /// use mtfdb::analysis::loops::Nlr;
    /// // 0 = B, 1 = "solve(", 2 = ")", 3 = "setup(".
    /// let mut r = Nlr::with_nesting(8, vec![0, 1, -1, 1]);
    /// for s in [3, 0, 2, 1, 0, 2, 1, 0, 2, 1, 0, 2] {
    ///     r.push(s);
    /// }
    /// let names = ["B", "solve(", ")", "setup("];
    /// assert_eq!(
    ///     r.finish().render(|s| names[s as usize].to_string()),
    ///     "setup( B )\nfor i0 in 0..3 { solve( B ) }\n"
    /// );
    /// ```
    pub fn with_nesting(k: usize, nesting: impl Into<Arc<[i8]>>) -> Nlr {
        Nlr {
            nesting: nesting.into(),
            ..Nlr::new(k)
        }
    }

    /// How a term changes the bracket depth: a symbol by its nesting, a loop not at all
    /// (its body is balanced).
    fn depth_change(&self, t: Term) -> i32 {
        if t.len == 0 {
            self.nesting
                .get(t.head as usize)
                .map_or(0, |&d| i32::from(d))
        } else {
            0
        }
    }

    /// Whether `terms` close nothing they did not open and leave nothing open.
    fn balanced(&self, terms: &[Term]) -> bool {
        if self.nesting.is_empty() {
            return true;
        }
        let mut depth = 0;
        for &t in terms {
            depth += self.depth_change(t);
            if depth < 0 {
                return false;
            }
        }
        depth == 0
    }

    /// Feeds one event, then rewrites the window until no rule applies.
    ///
    /// ```
    /// use mtfdb::analysis::loops::Nlr;
    /// let mut r = Nlr::new(1);
    /// for _ in 0..5 {
    ///     r.push(0);
    /// }
    /// assert_eq!(r.finish().render(|_| "x".into()), "for i0 in 0..5 { x }\n");
    /// ```
    pub fn push(&mut self, symbol: u32) {
        self.stack.push(Term::symbol(symbol));
        self.reduce();
        let live = self.stack.len() - self.base;
        if live > self.window {
            self.base = self.stack.len() - self.window;
        }
    }

    fn reduce(&mut self) {
        'rewrite: loop {
            let len = self.stack.len();
            let live = len - self.base;
            let top = self.stack[len - 1];
            for k in 1..=self.k {
                if k >= live {
                    break;
                }
                // Rule 1: a loop directly followed by one more copy of its body.
                let before = self.stack[len - 1 - k];
                if before.len as usize == k {
                    let body = &self.bodies[before.head as usize];
                    if body[k - 1] == top && self.stack[len - k..] == body[..] {
                        self.stack[len - 1 - k].count += 1;
                        self.stack.truncate(len - k);
                        continue 'rewrite;
                    }
                }
                // Rule 2: three consecutive copies of a sequence of k terms.
                if 3 * k <= live
                    && before == top
                    && self.stack[len - 1 - 2 * k] == top
                    && self.stack[len - 2 * k..len - k] == self.stack[len - k..]
                    && self.stack[len - 3 * k..len - 2 * k] == self.stack[len - k..]
                    && self.balanced(&self.stack[len - k..])
                {
                    let head = self.intern(len - k, len);
                    self.stack.truncate(len - 3 * k);
                    self.stack.push(Term {
                        head,
                        len: k as u32,
                        count: 3,
                    });
                    continue 'rewrite;
                }
            }
            return;
        }
    }

    fn intern(&mut self, from: usize, to: usize) -> u32 {
        let body = &self.stack[from..to];
        if let Some(&id) = self.body_ids.get(body) {
            return id;
        }
        let id = self.bodies.len() as u32;
        let boxed: Box<[Term]> = body.into();
        self.bodies.push(boxed.clone());
        self.body_ids.insert(boxed, id);
        id
    }

    fn item(&self, term: Term) -> Item {
        if term.len == 0 {
            Item::Symbol(term.head)
        } else {
            Item::Loop {
                count: term.count,
                body: self.bodies[term.head as usize]
                    .iter()
                    .map(|&t| self.item(t))
                    .collect(),
            }
        }
    }

    /// The model of everything pushed.
    ///
    /// ```
    /// use mtfdb::analysis::loops::{Item, Nlr};
    /// let mut r = Nlr::new(2);
    /// r.push(4);
    /// assert_eq!(r.finish().items, vec![Item::Symbol(4)]);
    /// ```
    pub fn finish(self) -> LoopNest {
        LoopNest {
            items: self.stack.iter().map(|&t| self.item(t)).collect(),
        }
    }
}

/// The loop nest of a whole sequence, with bodies of at most `k` top-level terms (see
/// [`Nlr`]).
///
/// ```
/// use mtfdb::analysis::loops::nlr;
/// let seq: Vec<u32> = (0..200).flat_map(|_| [1, 2, 2, 2]).collect();
/// assert_eq!(nlr(&seq, 8).render(|s| format!("S{s}")), "for i0 in 0..200 {\n  S1\n  for i1 in 0..3 { S2 }\n}\n");
/// ```
pub fn nlr(symbols: &[u32], k: usize) -> LoopNest {
    nlr_nested(symbols, k, Arc::from([]))
}

/// [`nlr`] with balanced loop bodies (see [`Nlr::with_nesting`]).
///
/// ```
/// use mtfdb::analysis::loops::{nlr, nlr_nested};
/// // 0 opens, 1 closes: the loop is over `0 2 1`, not over `2 1 0`, which closes first.
/// let seq = [3, 2, 1, 0, 2, 1, 0, 2, 1, 0, 2, 1];
/// assert_eq!(nlr(&seq, 4).render(|s| s.to_string()), "3\nfor i0 in 0..3 { 2 1 0 }\n2 1\n");
/// let nested = nlr_nested(&seq, 4, vec![1, -1]);
/// assert_eq!(nested.render(|s| s.to_string()), "3 2 1\nfor i0 in 0..3 { 0 2 1 }\n");
/// ```
pub fn nlr_nested(symbols: &[u32], k: usize, nesting: impl Into<Arc<[i8]>>) -> LoopNest {
    let mut r = Nlr::with_nesting(k, nesting);
    r.stack.reserve(64);
    for &s in symbols {
        r.push(s);
    }
    r.finish()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sym(s: u32) -> Item {
        Item::Symbol(s)
    }

    fn lp(count: u64, body: Vec<Item>) -> Item {
        Item::Loop { count, body }
    }

    #[test]
    fn three_copies_make_a_loop_and_one_more_copy_extends_it() {
        assert_eq!(
            nlr(&[1, 2, 1, 2], 4).items,
            vec![sym(1), sym(2), sym(1), sym(2)]
        );
        assert_eq!(
            nlr(&[1, 2, 1, 2, 1, 2], 4).items,
            vec![lp(3, vec![sym(1), sym(2)])]
        );
        assert_eq!(
            nlr(&[1, 2, 1, 2, 1, 2, 1, 2, 1], 4).items,
            vec![lp(4, vec![sym(1), sym(2)]), sym(1)]
        );
    }

    #[test]
    fn loops_nest_and_inner_counts_are_part_of_the_body() {
        // (0 x4, 1) x3, then 0 x5, 1: the last inner count differs, so no extension.
        let mut seq: Vec<u32> = (0..3).flat_map(|_| [0, 0, 0, 0, 1]).collect();
        seq.extend([0, 0, 0, 0, 0, 1]);
        let nest = nlr(&seq, 4);
        assert_eq!(
            nest.items,
            vec![
                lp(3, vec![lp(4, vec![sym(0)]), sym(1)]),
                lp(5, vec![sym(0)]),
                sym(1)
            ]
        );
        assert_eq!(expand(&nest), seq);
        // Three levels: ((7 8) x3 9) x4 10, all x5.
        let level2: Vec<u32> = (0..4)
            .flat_map(|_| [7, 8, 7, 8, 7, 8, 9])
            .chain([10])
            .collect();
        let seq: Vec<u32> = (0..5).flat_map(|_| level2.clone()).collect();
        let nest = nlr(&seq, 4);
        assert_eq!(
            nest.items,
            vec![lp(
                5,
                vec![lp(4, vec![lp(3, vec![sym(7), sym(8)]), sym(9)]), sym(10)]
            )]
        );
        assert_eq!(nest.main_loop().map(|(c, _)| c), Some(5));
    }

    #[test]
    fn bodies_longer_than_k_are_not_found() {
        let seq: Vec<u32> = (0..10).flat_map(|_| [1, 2, 3]).collect();
        assert_eq!(nlr(&seq, 2).items.len(), 30);
        assert_eq!(
            nlr(&seq, 3).items,
            vec![lp(10, vec![sym(1), sym(2), sym(3)])]
        );
    }

    #[test]
    fn the_window_holds_at_least_three_bodies_and_one_term() {
        // A window of 0 is raised to 3k + 1 = 7 terms: enough to find a body of 2.
        let mut r = Nlr::with_window(2, 0);
        for s in [9, 8, 7, 1, 2, 1, 2, 1, 2, 1, 2] {
            r.push(s);
        }
        assert_eq!(
            r.finish().items,
            vec![sym(9), sym(8), sym(7), lp(4, vec![sym(1), sym(2)])]
        );
    }

    #[test]
    fn empty_input_gives_an_empty_nest() {
        let nest = nlr(&[], 8);
        assert!(nest.items.is_empty());
        assert_eq!(nest.render(|s| s.to_string()), "");
        assert!(nest.main_loop().is_none());
    }

    /// Sequences with nested repetitions: blocks of random symbols repeated a random number
    /// of times, possibly around inner repetitions, with noise between them.
    pub(crate) fn periodic() -> impl Strategy<Value = Vec<u32>> {
        let inner = (prop::collection::vec(0u32..4, 1..4), 1usize..6);
        let block = (prop::collection::vec(inner, 1..4), 1usize..12, 0u32..6);
        prop::collection::vec(block, 0..5).prop_map(|blocks| {
            let mut out = Vec::new();
            for (inners, times, noise) in blocks {
                for _ in 0..times {
                    for (body, n) in &inners {
                        for _ in 0..*n {
                            out.extend(body);
                        }
                    }
                }
                out.push(100 + noise);
            }
            out
        })
    }

    proptest! {
        #[test]
        fn expansion_gives_back_random_input(x in prop::collection::vec(0u32..3, 0..300), k in 1usize..10) {
            let nest = nlr(&x, k);
            prop_assert_eq!(nest.events(), x.len() as u64);
            prop_assert_eq!(expand(&nest), x);
        }

        #[test]
        fn balanced_bodies_expand_exactly_and_stay_balanced(
            x in prop_oneof![periodic(), prop::collection::vec(0u32..4, 0..300)],
            k in 1usize..12,
        ) {
            // 0 opens, 1 closes (2, 3 and the noise are plain).
            let nest = nlr_nested(&x, k, vec![1, -1]);
            prop_assert_eq!(expand(&nest), x);
            fn check(items: &[Item]) -> bool {
                items.iter().all(|i| match i {
                    Item::Symbol(_) => true,
                    Item::Loop { body, .. } => {
                        let mut depth = 0i32;
                        for s in expand(&LoopNest { items: body.clone() }) {
                            depth += match s { 0 => 1, 1 => -1, _ => 0 };
                            if depth < 0 {
                                return false;
                            }
                        }
                        depth == 0 && check(body)
                    }
                })
            }
            prop_assert!(check(&nest.items), "{:?}", nest);
        }

        #[test]
        fn expansion_gives_back_periodic_input(x in periodic(), k in 1usize..16) {
            let nest = nlr(&x, k);
            prop_assert_eq!(expand(&nest), x);
        }

    }
}
