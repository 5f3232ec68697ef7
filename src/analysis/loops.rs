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
//! [`merge`] combines the local models of several processes into one [`GlobalModel`]: loops
//! that line up across processes are coalesced into one loop annotated with the ranks it
//! covers, and differing iteration counts are reconciled by the gcd rule of the paper.
//!
//! The merge is structural, a simplification of the paper's: it aligns the processes' models
//! and coalesces what lines up ([`merge_communicating`]: only loops whose processes exchange
//! messages or share a collective, as in the paper). The paper also links each send to its
//! receive (flows on communication links), splits loops until every link carries whole loops
//! ("regularization") and refuses merges that would make the order between constructs
//! cyclic; none of that is done here, and coprime iteration counts leave two loops side by
//! side instead of unrolling both.
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

use crate::hash::FxHashMap;

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
        let mut out = String::new();
        render_items(&self.items, &name, 0, &mut out);
        out
    }
}

fn render_items(items: &[Item], name: &dyn Fn(u32) -> String, depth: usize, out: &mut String) {
    let mut line_open = false;
    for item in items {
        match item {
            Item::Symbol(s) => {
                if line_open {
                    out.push(' ');
                } else {
                    indent(out, depth);
                    line_open = true;
                }
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
                    render_items(body, name, depth + 1, out);
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

fn indent(out: &mut String, depth: usize) {
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
    /// exit), 0 (or absent) for others; see [`Nlr::with_nesting`].
    nesting: Vec<i8>,
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
            nesting: Vec::new(),
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
    pub fn with_nesting(k: usize, nesting: Vec<i8>) -> Nlr {
        Nlr {
            nesting,
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
    nlr_nested(symbols, k, Vec::new())
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
pub fn nlr_nested(symbols: &[u32], k: usize, nesting: Vec<i8>) -> LoopNest {
    let mut r = Nlr::with_nesting(k, nesting);
    r.stack.reserve(64);
    for &s in symbols {
        r.push(s);
    }
    r.finish()
}

/// One element of a [`GlobalModel`]: an event or a loop, with the ranks whose traces hold it.
///
/// ```
/// use mtfdb::analysis::loops::GlobalItem;
/// let item = GlobalItem::Event { symbol: 2, ranks: vec![0, 1] };
/// assert_eq!(item.ranks(), &[0, 1]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GlobalItem {
    /// One event of every rank in `ranks`.
    Event {
        /// The event's symbol.
        symbol: u32,
        /// The ranks that have it, sorted.
        ranks: Vec<u32>,
    },
    /// `count` iterations of `body`, run by every rank in `ranks`.
    Loop {
        /// Number of iterations.
        count: u64,
        /// The ranks that run the loop, sorted.
        ranks: Vec<u32>,
        /// The body; each of its items covers some of `ranks`.
        body: Vec<GlobalItem>,
    },
}

impl GlobalItem {
    /// The ranks the item covers.
    ///
    /// ```
    /// use mtfdb::analysis::loops::GlobalItem;
    /// let l = GlobalItem::Loop { count: 2, ranks: vec![3], body: vec![] };
    /// assert_eq!(l.ranks(), &[3]);
    /// ```
    pub fn ranks(&self) -> &[u32] {
        match self {
            GlobalItem::Event { ranks, .. } | GlobalItem::Loop { ranks, .. } => ranks,
        }
    }

    fn local(item: &Item, rank: u32) -> GlobalItem {
        match item {
            Item::Symbol(s) => GlobalItem::Event {
                symbol: *s,
                ranks: vec![rank],
            },
            Item::Loop { count, body } => GlobalItem::Loop {
                count: *count,
                ranks: vec![rank],
                body: body.iter().map(|i| GlobalItem::local(i, rank)).collect(),
            },
        }
    }

    fn project_into(&self, rank: u32, out: &mut Vec<u32>) {
        match self {
            GlobalItem::Event { symbol, ranks } => {
                if ranks.binary_search(&rank).is_ok() {
                    out.push(*symbol);
                }
            }
            GlobalItem::Loop { count, ranks, body } => {
                if ranks.binary_search(&rank).is_ok() {
                    for _ in 0..*count {
                        for item in body {
                            item.project_into(rank, out);
                        }
                    }
                }
            }
        }
    }
}

/// The model of several processes at once, what [`merge`] makes of their local models.
/// Projected on one rank it gives back that rank's exact sequence.
///
/// ```
/// use mtfdb::analysis::loops::{merge, nlr, Role};
/// let a: Vec<u32> = (0..6).flat_map(|_| [1, 9]).collect();
/// let b: Vec<u32> = (0..6).flat_map(|_| [2, 9]).collect();
/// let (na, nb) = (nlr(&a, 4), nlr(&b, 4));
/// // 9 is a collective; 1 and 2 are messages between the two ranks.
/// let role = |s: u32| if s == 9 { Role::Collective } else { Role::Message(2 - s) };
/// let global = merge([(0, &na), (1, &nb)], role);
/// assert_eq!(global.project(1), b);
/// assert_eq!(
///     global.render(|s| format!("e{s}")),
///     "for i0 in 0..6 @0-1 {\n  e1 @0\n  e2 @1\n  e9 @0-1\n}\n"
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GlobalModel {
    /// The top-level items; the order of items of different ranks carries no meaning.
    pub items: Vec<GlobalItem>,
}

impl GlobalModel {
    /// The sequence of `rank`'s events the model stands for.
    ///
    /// ```
    /// use mtfdb::analysis::loops::{merge, nlr, Role};
    /// let n = nlr(&[4, 4, 4, 4], 2);
    /// let global = merge([(7, &n)], |_| Role::Collective);
    /// assert_eq!(global.project(7), vec![4, 4, 4, 4]);
    /// assert!(global.project(0).is_empty());
    /// ```
    pub fn project(&self, rank: u32) -> Vec<u32> {
        let mut out = Vec::new();
        for item in &self.items {
            item.project_into(rank, &mut out);
        }
        out
    }

    /// The model as text. A loop reads `for i0 in 0..200 @0-15 {` with the ranks it covers
    /// (ranges of consecutive ranks) after `@`; each run of events of one rank set is a line
    /// `S1 R7 @0`; a loop whose body is one run of events of all its ranks takes one line,
    /// `for i0 in 0..200 @0-15 { MPI_Alltoall MPI_Allreduce }`.
    ///
    /// ```
    /// use mtfdb::analysis::loops::{merge, nlr, Role};
    /// let n = nlr(&[1, 2, 2, 2], 2);
    /// let text = merge([(0, &n), (2, &n)], |_| Role::Collective).render(|s| s.to_string());
    /// assert_eq!(text, "1 @0,2\nfor i0 in 0..3 @0,2 { 2 }\n");
    /// ```
    pub fn render(&self, name: impl Fn(u32) -> String) -> String {
        let mut out = String::new();
        render_global(&self.items, &name, 0, &mut out);
        out
    }
}

pub use crate::model::rank_ranges;

fn render_global(
    items: &[GlobalItem],
    name: &dyn Fn(u32) -> String,
    depth: usize,
    out: &mut String,
) {
    let mut i = 0;
    while i < items.len() {
        match &items[i] {
            GlobalItem::Event { ranks, .. } => {
                let run = event_run(&items[i..], ranks);
                indent(out, depth);
                render_run(&items[i..i + run], name, out);
                out.push('\n');
                i += run;
            }
            GlobalItem::Loop { count, ranks, body } => {
                indent(out, depth);
                let _ = write!(out, "for i{depth} in 0..{count} @{} {{", rank_ranges(ranks));
                if !body.is_empty() && event_run(body, ranks) == body.len() {
                    for item in body {
                        if let GlobalItem::Event { symbol, .. } = item {
                            out.push(' ');
                            out.push_str(&name(*symbol));
                        }
                    }
                    out.push_str(" }\n");
                } else {
                    out.push('\n');
                    render_global(body, name, depth + 1, out);
                    indent(out, depth);
                    out.push_str("}\n");
                }
                i += 1;
            }
        }
    }
}

/// The number of leading items of `items` that are events of exactly `ranks`.
fn event_run(items: &[GlobalItem], ranks: &[u32]) -> usize {
    items
        .iter()
        .take_while(|i| matches!(i, GlobalItem::Event { ranks: r, .. } if r == ranks))
        .count()
}

/// `S1 R3 @0`: events of one rank set.
fn render_run(run: &[GlobalItem], name: &dyn Fn(u32) -> String, out: &mut String) {
    let mut ranks: &[u32] = &[];
    for item in run {
        if let GlobalItem::Event { symbol, ranks: r } = item {
            out.push_str(&name(*symbol));
            out.push(' ');
            ranks = r;
        }
    }
    let _ = write!(out, "@{}", rank_ranges(ranks));
}

/// What an event is to [`merge_communicating`].
///
/// ```
/// use mtfdb::analysis::loops::Role;
/// assert_ne!(Role::Message(3), Role::Local);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One event shared by every rank that has it (a collective): equal ones coalesce into
    /// one event, and two loops holding the same one communicate.
    Collective,
    /// A point-to-point event with this peer rank: each rank's own; two loops communicate
    /// when a peer of one is a rank of the other.
    Message(u32),
    /// An event of the rank alone that means the same on every rank (a routine's entry or
    /// exit): equal ones coalesce into one event, but they link no loops.
    Local,
}

/// What may be coalesced.
struct Rules<'s> {
    /// What each symbol is.
    role: &'s dyn Fn(u32) -> Role,
    /// Whether loops coalesce only if they communicate.
    communicating: bool,
}

impl Rules<'_> {
    /// Whether equal events of two rank sets are one event of both.
    fn coalesces(&self, symbol: u32) -> bool {
        matches!((self.role)(symbol), Role::Collective | Role::Local)
    }
}

type Shared<'s> = &'s Rules<'s>;

/// What a loop talks to: the peers of its events and its shared events, sorted.
#[derive(Default)]
struct Reach {
    peers: Vec<u32>,
    shared: Vec<u32>,
}

impl Reach {
    fn of(item: &GlobalItem, rules: Shared) -> Option<Reach> {
        if !rules.communicating || !matches!(item, GlobalItem::Loop { .. }) {
            return None;
        }
        let mut reach = Reach::default();
        let mut stack = vec![item];
        while let Some(item) = stack.pop() {
            match item {
                GlobalItem::Event { symbol, .. } => match (rules.role)(*symbol) {
                    Role::Collective => reach.shared.push(*symbol),
                    Role::Message(p) => reach.peers.push(p),
                    Role::Local => {}
                },
                GlobalItem::Loop { body, .. } => stack.extend(body),
            }
        }
        for v in [&mut reach.peers, &mut reach.shared] {
            v.sort_unstable();
            v.dedup();
        }
        Some(reach)
    }
}

fn intersect(a: &[u32], b: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// Whether two loops exchange messages or share a collective (true for the structural
/// merge, which computes no reach).
fn communicate(a: &GlobalItem, ra: &Option<Reach>, b: &GlobalItem, rb: &Option<Reach>) -> bool {
    match (ra, rb) {
        (Some(ra), Some(rb)) => {
            intersect(&ra.peers, b.ranks())
                || intersect(&rb.peers, a.ranks())
                || intersect(&ra.shared, &rb.shared)
        }
        _ => true,
    }
}

/// Above this many cells, two item lists are not aligned but put side by side.
const ALIGN_LIMIT: usize = 1 << 22;

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if j == b.len() || (i < a.len() && a[i] < b[j]) {
            out.push(a[i]);
            i += 1;
        } else if i == a.len() || b[j] < a[i] {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
            j += 1;
        }
    }
    out
}

/// How well two items coalesce, `None` when they cannot.
fn affinity(a: &GlobalItem, b: &GlobalItem, shared: Shared) -> Option<u32> {
    match (a, b) {
        (GlobalItem::Event { symbol: x, .. }, GlobalItem::Event { symbol: y, .. }) => {
            (x == y && shared.coalesces(*x)).then_some(2)
        }
        (GlobalItem::Loop { count: n, .. }, GlobalItem::Loop { count: m, .. }) => {
            if n == m {
                Some(8)
            } else if gcd(*n, *m) > 1 {
                Some(4)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// `body` as the body of a loop of `g` iterations standing for `count` ones.
fn blocked(count: u64, g: u64, ranks: &[u32], body: Vec<GlobalItem>) -> Vec<GlobalItem> {
    if count == g {
        body
    } else {
        vec![GlobalItem::Loop {
            count: count / g,
            ranks: ranks.to_vec(),
            body,
        }]
    }
}

fn coalesce(a: GlobalItem, b: GlobalItem, shared: Shared) -> Vec<GlobalItem> {
    match (a, b) {
        (
            GlobalItem::Event {
                symbol: x,
                ranks: ra,
            },
            GlobalItem::Event {
                symbol: y,
                ranks: rb,
            },
        ) => {
            if x == y {
                vec![GlobalItem::Event {
                    symbol: x,
                    ranks: union(&ra, &rb),
                }]
            } else {
                vec![
                    GlobalItem::Event {
                        symbol: x,
                        ranks: ra,
                    },
                    GlobalItem::Event {
                        symbol: y,
                        ranks: rb,
                    },
                ]
            }
        }
        (
            GlobalItem::Loop {
                count: n,
                ranks: ra,
                body: ba,
            },
            GlobalItem::Loop {
                count: m,
                ranks: rb,
                body: bb,
            },
        ) => {
            let g = gcd(n, m);
            let body = merge_items(blocked(n, g, &ra, ba), blocked(m, g, &rb, bb), shared);
            vec![GlobalItem::Loop {
                count: g,
                ranks: union(&ra, &rb),
                body,
            }]
        }
        (a, b) => vec![a, b],
    }
}

/// Aligns two item lists (of disjoint rank sets) by the best-scoring sequence of coalescible
/// pairs, keeping each list's order, and coalesces the pairs.
fn merge_items(a: Vec<GlobalItem>, b: Vec<GlobalItem>, shared: Shared) -> Vec<GlobalItem> {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 || n.saturating_mul(m) > ALIGN_LIMIT {
        let mut out = a;
        out.extend(b);
        return out;
    }
    let reach_a: Vec<Option<Reach>> = a.iter().map(|i| Reach::of(i, shared)).collect();
    let reach_b: Vec<Option<Reach>> = b.iter().map(|i| Reach::of(i, shared)).collect();
    let affinity = |i: usize, j: usize, a: &GlobalItem, b: &GlobalItem| {
        affinity(a, b, shared).filter(|_| communicate(a, &reach_a[i], b, &reach_b[j]))
    };
    // best[i][j]: best score aligning a[i..] with b[j..].
    let w = m + 1;
    let mut best = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            let mut s = best[(i + 1) * w + j].max(best[i * w + j + 1]);
            if let Some(x) = affinity(i, j, &a[i], &b[j]) {
                s = s.max(x + best[(i + 1) * w + j + 1]);
            }
            best[i * w + j] = s;
        }
    }
    let mut out = Vec::with_capacity(n + m);
    let mut a = a.into_iter().map(Some).collect::<Vec<_>>();
    let mut b = b.into_iter().map(Some).collect::<Vec<_>>();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        let here = best[i * w + j];
        let pair = affinity(i, j, a[i].as_ref().unwrap(), b[j].as_ref().unwrap());
        if pair.is_some_and(|x| x + best[(i + 1) * w + j + 1] == here) {
            out.extend(coalesce(a[i].take().unwrap(), b[j].take().unwrap(), shared));
            i += 1;
            j += 1;
        } else if best[(i + 1) * w + j] == here {
            out.push(a[i].take().unwrap());
            i += 1;
        } else {
            out.push(b[j].take().unwrap());
            j += 1;
        }
    }
    out.extend(a[i..].iter_mut().map(|x| x.take().unwrap()));
    out.extend(b[j..].iter_mut().map(|x| x.take().unwrap()));
    out
}

/// Merges the local models of several processes, given as `(rank, model)` with distinct
/// ranks, into one global model by a balanced tree of pairwise merges (P1.4's reduction).
///
/// Each pairwise merge aligns the two item lists (keeping each one's order) and coalesces
/// aligned pairs: equal events whose [`Role`] is `Collective` or `Local` into one event
/// over both rank sets (a send `S3` of two ranks stays two events), loops of equal counts
/// into one loop whose body is the merge of both bodies, and loops of counts `n != m` with
/// `g = gcd(n, m) > 1` into a loop of `g` iterations whose body holds, per side, a loop of
/// `n / g` (resp. `m / g`) iterations over the old body (the body itself when that is 1).
/// Loops of coprime counts are not coalesced and stay side by side, each over its own ranks.
/// Every item records the ranks it covers; [`GlobalModel::project`] gives each rank's exact
/// sequence back.
///
/// ```
/// use mtfdb::analysis::loops::{merge, nlr, Role};
/// // Rank 0 sends twice per iteration for 10 iterations, rank 1 receives 20 times.
/// let a: Vec<u32> = (0..10).flat_map(|_| [1, 1, 7]).collect();
/// let b = vec![2; 20];
/// let (na, nb) = (nlr(&a, 4), nlr(&b, 4));
/// let global = merge([(0, &na), (1, &nb)], |s| Role::Message(1 - s % 2));
/// assert_eq!(
///     global.render(|s| format!("e{s}")),
///     "for i0 in 0..10 @0-1 {\n  e1 e1 e7 @0\n  for i1 in 0..2 @1 { e2 }\n}\n"
/// );
/// assert_eq!((global.project(0), global.project(1)), (a, b));
/// ```
pub fn merge<'a>(
    models: impl IntoIterator<Item = (u32, &'a LoopNest)>,
    role: impl Fn(u32) -> Role,
) -> GlobalModel {
    merge_by(
        models,
        &Rules {
            role: &role,
            communicating: false,
        },
    )
}

/// [`merge`], coalescing loops only where their processes communicate (P1.4: "loops spanning
/// several processes appear only where those processes communicate"): two loops coalesce
/// when an event of one is a [`Role::Message`] whose peer is a rank of the other, or when
/// both hold the same [`Role::Collective`] event. Loops of processes that do not talk to
/// each other stay apart, each over its own ranks.
///
/// ```
/// use mtfdb::analysis::loops::{merge, merge_communicating, nlr, Role};
/// // Symbol 2p is a send to p, 2p + 1 a receive from p: 0 and 1 talk, so do 2 and 3.
/// let seq = |peer: u32| -> Vec<u32> { (0..5).flat_map(|_| [2 * peer, 2 * peer + 1]).collect() };
/// let nests = [nlr(&seq(1), 4), nlr(&seq(0), 4), nlr(&seq(3), 4), nlr(&seq(2), 4)];
/// let models = || nests.iter().enumerate().map(|(r, n)| (r as u32, n));
/// let role = |s: u32| Role::Message(s / 2);
/// let global = merge_communicating(models(), role);
/// let text = global.render(|s| format!("{}{}", ["S", "R"][s as usize % 2], s / 2));
/// assert_eq!(
///     text,
///     "for i0 in 0..5 @0-1 {\n  S1 R1 @0\n  S0 R0 @1\n}\n\
///      for i0 in 0..5 @2-3 {\n  S3 R3 @2\n  S2 R2 @3\n}\n"
/// );
/// // The structural merge puts all four in one loop.
/// assert_eq!(merge(models(), role).items.len(), 1);
/// ```
pub fn merge_communicating<'a>(
    models: impl IntoIterator<Item = (u32, &'a LoopNest)>,
    role: impl Fn(u32) -> Role,
) -> GlobalModel {
    merge_by(
        models,
        &Rules {
            role: &role,
            communicating: true,
        },
    )
}

fn merge_by<'a>(
    models: impl IntoIterator<Item = (u32, &'a LoopNest)>,
    rules: &Rules,
) -> GlobalModel {
    let mut level: Vec<Vec<GlobalItem>> = models
        .into_iter()
        .map(|(rank, nest)| {
            nest.items
                .iter()
                .map(|i| GlobalItem::local(i, rank))
                .collect()
        })
        .collect();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut it = level.into_iter();
        while let Some(a) = it.next() {
            next.push(match it.next() {
                Some(b) => merge_items(a, b, rules),
                None => a,
            });
        }
        level = next;
    }
    GlobalModel {
        items: level.pop().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
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
        assert!(merge(std::iter::empty(), |_| Role::Collective)
            .items
            .is_empty());
    }

    #[test]
    fn coprime_counts_stay_apart_and_equal_counts_coalesce() {
        let a = nlr(&[1; 7], 2);
        let b = nlr(&[1; 5], 2);
        let c = nlr(&[1; 7], 2);
        let global = merge([(0, &a), (1, &b), (2, &c)], |_| Role::Collective);
        assert_eq!(
            global.render(|s| s.to_string()),
            "for i0 in 0..7 @0,2 { 1 }\nfor i0 in 0..5 @1 { 1 }\n"
        );
        for (rank, n) in [(0, 7), (1, 5), (2, 7), (3, 0)] {
            assert_eq!(global.project(rank), vec![1; n]);
        }
    }

    #[test]
    fn the_gcd_rule_blocks_both_loops() {
        let a = nlr(&[3; 6], 2);
        let b = nlr(&[4; 9], 2);
        let global = merge([(0, &a), (1, &b)], |_| Role::Collective);
        assert_eq!(
            global.items,
            vec![GlobalItem::Loop {
                count: 3,
                ranks: vec![0, 1],
                body: vec![
                    GlobalItem::Loop {
                        count: 2,
                        ranks: vec![0],
                        body: vec![GlobalItem::Event {
                            symbol: 3,
                            ranks: vec![0]
                        }],
                    },
                    GlobalItem::Loop {
                        count: 3,
                        ranks: vec![1],
                        body: vec![GlobalItem::Event {
                            symbol: 4,
                            ranks: vec![1]
                        }],
                    },
                ],
            }]
        );
        assert_eq!(global.project(0), vec![3; 6]);
        assert_eq!(global.project(1), vec![4; 9]);
    }

    /// Sequences with nested repetitions: blocks of random symbols repeated a random number
    /// of times, possibly around inner repetitions, with noise between them.
    fn periodic() -> impl Strategy<Value = Vec<u32>> {
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

        #[test]
        fn loops_of_counts_with_a_common_divisor_become_one_loop_of_their_gcd(
            counts in prop::collection::vec(3u64..40, 2..5),
        ) {
            // Rank r repeats its own two-event body counts[r] times around a shared event 0.
            let seqs: Vec<Vec<u32>> = counts
                .iter()
                .enumerate()
                .map(|(r, &n)| (0..n).flat_map(|_| [0, 10 + r as u32]).collect())
                .collect();
            let nests: Vec<LoopNest> = seqs.iter().map(|s| nlr(s, 4)).collect();
            let global = merge(nests.iter().enumerate().map(|(r, n)| (r as u32, n)), |s| {
                if s == 0 { Role::Collective } else { Role::Message(s - 10) }
            });
            for (r, s) in seqs.iter().enumerate() {
                prop_assert_eq!(&global.project(r as u32), s);
            }
            let g = counts.iter().copied().fold(0, gcd);
            if g > 1 {
                prop_assert_eq!(global.items.len(), 1);
                let GlobalItem::Loop { count, ranks, .. } = &global.items[0] else {
                    panic!("not a loop");
                };
                prop_assert_eq!(*count, g);
                prop_assert_eq!(ranks.len(), counts.len());
            }
        }

        #[test]
        fn every_rank_projects_its_own_sequence(
            seqs in prop::collection::vec(prop_oneof![periodic(), prop::collection::vec(0u32..3, 0..60)], 1..6),
        ) {
            let nests: Vec<LoopNest> = seqs.iter().map(|s| nlr(s, 8)).collect();
            let role = |s: u32| if s.is_multiple_of(2) { Role::Collective } else { Role::Message(s % 7) };
            let global = merge(nests.iter().enumerate().map(|(r, n)| (r as u32 * 2, n)), role);
            for (r, s) in seqs.iter().enumerate() {
                prop_assert_eq!(&global.project(r as u32 * 2), s);
                prop_assert!(global.project(r as u32 * 2 + 1).is_empty());
            }
            let linked = merge_communicating(
                nests.iter().enumerate().map(|(r, n)| (r as u32 * 2, n)),
                role,
            );
            for (r, s) in seqs.iter().enumerate() {
                prop_assert_eq!(&linked.project(r as u32 * 2), s);
            }
        }
    }
}
