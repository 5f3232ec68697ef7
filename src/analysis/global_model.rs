//! The global model of P1.4 (Ketterlin et al., INRIA RR-8562): the loop nests of several
//! processes ([`loops`](super::loops)) merged into one model whose constructs carry the ranks
//! they cover.
//!
//! [`merge_communicating`] combines the local models of several processes into one
//! [`GlobalModel`] as the paper's reduction does: pairwise, loops coalesce only where the
//! messages and collective calls they exchange link them, loops are split so that each link
//! carries whole loops (regularization), differing iteration counts are reconciled by the gcd
//! rule (coprime ones by unrolling), and every construct is annotated with the ranks it
//! covers. [`merge`] is the same alignment without links (loops coalesce by shape).
//! [`merge_classes`] merges classes of ranks that run the same model, with peers written as
//! offsets from the rank ([`Peer::Offset`]), each class as one process.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;

use super::loops::{indent, Item, LoopNest};
use crate::hash::FxHashMap;

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
/// // 9 is a collective; 1 and 2 are local events of each rank.
/// let role = |s: u32| if s == 9 { Role::Collective } else { Role::Local };
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
        self.render_with(|s, _| name(s))
    }

    /// [`GlobalModel::render`] with each symbol named knowing the ranks of its event, sorted.
    ///
    /// ```
    /// use mtfdb::analysis::loops::{merge, nlr, Role};
    /// let n = nlr(&[1], 2);
    /// let text = merge([(0, &n), (2, &n)], |_| Role::Collective)
    ///     .render_with(|s, ranks| format!("{s}x{}", ranks.len()));
    /// assert_eq!(text, "1x2 @0,2\n");
    /// ```
    pub fn render_with(&self, name: impl Fn(u32, &[u32]) -> String) -> String {
        let mut out = String::new();
        render_global(&self.items, &name, 0, &mut out);
        out
    }
}

pub use crate::model::rank_ranges;
use crate::model::{rank_runs, run_text};

fn render_global(
    items: &[GlobalItem],
    name: &dyn Fn(u32, &[u32]) -> String,
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
                let _ = write!(out, "for i{depth} in 0..{count} @{} {{", rank_set(ranks));
                if !body.is_empty() && event_run(body, ranks) == body.len() {
                    for item in body {
                        if let GlobalItem::Event { symbol, ranks } = item {
                            out.push(' ');
                            out.push_str(&name(*symbol, ranks));
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

/// `ranks` as [`rank_ranges`] writes them, but for a long regular series (six ranges or more,
/// all as long and equally far apart, as a grid's edges and interior are): its first two
/// ranges, `...` and its last.
///
/// ```
/// use mtfdb::analysis::global_model::rank_set;
/// let interior: Vec<u32> = (1..7).flat_map(|row| row * 8 + 1..row * 8 + 7).collect();
/// assert_eq!(rank_set(&interior), "9-14,17-22,...,49-54");
/// assert_eq!(rank_set(&[8, 16, 24, 32, 40, 48]), "8,16,...,48");
/// assert_eq!(rank_set(&[0, 1, 2, 5]), "0-2,5");
/// ```
pub fn rank_set(ranks: &[u32]) -> String {
    let runs = rank_runs(ranks);
    let regular = runs.len() >= 6
        && runs.windows(2).all(|w| {
            w[1].1 - w[1].0 == runs[0].1 - runs[0].0 && w[1].0 - w[0].0 == runs[1].0 - runs[0].0
        });
    if !regular {
        return rank_ranges(ranks);
    }
    let last = runs[runs.len() - 1];
    format!(
        "{},{},...,{}",
        run_text(runs[0]),
        run_text(runs[1]),
        run_text(last)
    )
}

/// The number of leading items of `items` that are events of exactly `ranks`.
fn event_run(items: &[GlobalItem], ranks: &[u32]) -> usize {
    items
        .iter()
        .take_while(|i| matches!(i, GlobalItem::Event { ranks: r, .. } if r == ranks))
        .count()
}

/// `S1 R3 @0`: events of one rank set.
fn render_run(run: &[GlobalItem], name: &dyn Fn(u32, &[u32]) -> String, out: &mut String) {
    let mut ranks: &[u32] = &[];
    for item in run {
        if let GlobalItem::Event { symbol, ranks: r } = item {
            out.push_str(&name(*symbol, r));
            out.push(' ');
            ranks = r;
        }
    }
    let _ = write!(out, "@{}", rank_set(ranks));
}

/// What an event is to [`merge`] and [`merge_communicating`].
///
/// ```
/// use mtfdb::analysis::loops::{Peer, Role};
/// assert_ne!(Role::Send(Peer::Rank(3)), Role::Receive(Peer::Rank(3)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One call of a collective, shared by every rank that has it: equal ones coalesce into
    /// one event, and two loops calling the same instances are linked.
    Collective,
    /// A send to this peer: each rank's own; it links the loop to the one receiving it.
    Send(Peer),
    /// A receive from this peer: each rank's own; it links the loop to the one sending it.
    Receive(Peer),
    /// An event of the rank alone that means the same on every rank (a routine's entry or
    /// exit): equal ones coalesce into one event, but they link no loops.
    Local,
}

/// The other end of a send or a receive: a rank, or the rank that has the event plus an
/// offset (`Offset(1)` on rank 4 is rank 5), which lets ranks that talk to their neighbours
/// alike share one symbol ([`merge_classes`]).
///
/// ```
/// use mtfdb::analysis::loops::Peer;
/// assert_eq!(Peer::Offset(-1).of(4), Some(3));
/// assert_eq!(Peer::Rank(7).of(4), Some(7));
/// assert_eq!(Peer::Offset(-1).of(0), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// This rank.
    Rank(u32),
    /// The rank that has the event, plus this.
    Offset(i64),
}

impl Peer {
    /// The peer's rank as seen from `rank`; `None` when the offset leaves the ranks.
    pub fn of(self, rank: u32) -> Option<u32> {
        match self {
            Peer::Rank(q) => Some(q),
            Peer::Offset(d) => u32::try_from(i64::from(rank) + d).ok(),
        }
    }
}

/// The units a merge works on: each input of [`merge_classes`] (one rank, or a class of
/// ranks whose models are the same), named by its smallest rank. Links are followed between
/// units: the messages one unit's ranks send at one offset to another unit's ranks all have
/// the same numbers on their own channels, since every rank of a unit runs the same model.
struct Units {
    /// The unit of every rank.
    unit_of: FxHashMap<u32, u32>,
    /// The ranks of each unit of more than one rank.
    members: FxHashMap<u32, Vec<u32>>,
    /// For a unit and a peer of its events, the distinct `(peer's unit, peer - rank)` over
    /// the unit's ranks (computed once per pair).
    peers: RefCell<FxHashMap<(u32, Peer), PeerUnits>>,
}

/// Distinct `(peer's unit, peer - rank)` pairs, shared from [`Units`]'s cache.
type PeerUnits = Rc<[(u32, i64)]>;

/// The unit of a peer that is in no input.
const NO_UNIT: u32 = u32::MAX;

impl Units {
    fn new<'r>(classes: impl IntoIterator<Item = &'r [u32]>) -> Units {
        let mut units = Units {
            unit_of: FxHashMap::default(),
            members: FxHashMap::default(),
            peers: RefCell::default(),
        };
        for ranks in classes {
            let Some(&unit) = ranks.first() else { continue };
            for &r in ranks {
                units.unit_of.insert(r, unit);
            }
            if ranks.len() > 1 {
                units.members.insert(unit, ranks.to_vec());
            }
        }
        units
    }

    /// The ranks of `unit`, appended to `out`.
    fn ranks_into(&self, unit: u32, out: &mut Vec<u32>) {
        match self.members.get(&unit) {
            Some(ranks) => out.extend_from_slice(ranks),
            None => out.push(unit),
        }
    }

    /// The unit of `rank` and the offset `rank - from` of a peer `rank` of `from`.
    fn peer(&self, from: u32, peer: Peer) -> (u32, i64) {
        let offset = match peer {
            Peer::Rank(q) => i64::from(q) - i64::from(from),
            Peer::Offset(d) => d,
        };
        let unit = peer
            .of(from)
            .and_then(|q| self.unit_of.get(&q).copied())
            .unwrap_or(NO_UNIT);
        (unit, offset)
    }

    /// Calls `f(peer's unit, peer - rank)` once per distinct pair over the ranks of `unit`.
    fn each_peer(&self, unit: u32, peer: Peer, mut f: impl FnMut(u32, i64)) {
        let Some(ranks) = self.members.get(&unit) else {
            let (u, d) = self.peer(unit, peer);
            return f(u, d);
        };
        let cached = self.peers.borrow().get(&(unit, peer)).cloned();
        let pairs = cached.unwrap_or_else(|| {
            let mut pairs: Vec<(u32, i64)> = ranks.iter().map(|&r| self.peer(r, peer)).collect();
            pairs.sort_unstable();
            pairs.dedup();
            let pairs: PeerUnits = pairs.into();
            self.peers.borrow_mut().insert((unit, peer), pairs.clone());
            pairs
        });
        for &(u, d) in pairs.iter() {
            f(u, d);
        }
    }

    /// `items` with each unit replaced by its ranks, when a unit has several.
    fn expand(&self, items: &mut [GlobalItem]) {
        if self.members.is_empty() {
            return;
        }
        for item in items {
            let (GlobalItem::Event { ranks, .. } | GlobalItem::Loop { ranks, .. }) = item;
            let mut all = Vec::with_capacity(ranks.len());
            for &unit in ranks.iter() {
                self.ranks_into(unit, &mut all);
            }
            all.sort_unstable();
            *ranks = all;
            if let GlobalItem::Loop { body, .. } = item {
                self.expand(body);
            }
        }
    }
}

/// What may be coalesced.
struct Rules<'s> {
    /// What each symbol is.
    role: &'s dyn Fn(u32) -> Role,
    /// The ranks (or classes of ranks) merged.
    units: Units,
    /// Whether loops coalesce only where they are linked by the messages or collective calls
    /// they exchange, with whole loops on both ends of every link (P1.4).
    communicating: bool,
}

impl Rules<'_> {
    /// Whether equal events of two rank sets are one event of both.
    fn coalesces(&self, symbol: u32) -> bool {
        matches!((self.role)(symbol), Role::Collective | Role::Local)
    }
}

/// A channel traffic flows on: the messages from one rank to another (in FIFO order, the
/// paper's channel without the tag, which the symbols do not carry), or the calls of one
/// collective (numbered per rank: the k-th call on every member is one instance). Between
/// units of several ranks, a channel stands for every rank's own: the messages from each rank
/// of unit `from` to the rank `offset` away, which is in unit `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Channel {
    Message { from: u32, to: u32, offset: i64 },
    Collective(u32),
}

/// Where an item's traffic lies on each channel it uses: the numbers of the messages (or
/// collective calls) it sends, receives or makes, as `start..end`, and how many of them one
/// iteration makes (the item's whole traffic for an event). Two items of different rank
/// sets are linked when their ranges on a channel overlap, and the link is regular (the
/// paper's condition for coalescing) when the ranges are equal on every channel they share.
///
/// The flows of a list are kept in one vector, each item's ranges a sorted slice of it: a
/// merge of many ranks makes millions of them, and a map (or a vector) per item made
/// allocation a third of its time.
#[derive(Debug, Default)]
struct Flows {
    /// Every item's ranges, item after item, each item's sorted by channel.
    ranges: Vec<(Channel, Range)>,
    /// Where each item's ranges start in `ranges`, and the end of the last.
    bounds: Vec<usize>,
}

impl Flows {
    /// The ranges of item `i`, sorted by channel.
    fn of(&self, i: usize) -> &[(Channel, Range)] {
        &self.ranges[self.bounds[i]..self.bounds[i + 1]]
    }
}

/// The range on `channel` of an item's sorted ranges.
fn range_on<'r>(ranges: &'r [(Channel, Range)], channel: &Channel) -> Option<&'r Range> {
    ranges
        .binary_search_by(|(c, _)| c.cmp(channel))
        .ok()
        .map(|i| &ranges[i].1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    start: u64,
    end: u64,
    per_iteration: u64,
}

/// Counts per channel of one iteration of `items` (times `times`), collective calls per
/// (symbol, rank): each use as an entry of `out`, summed per key by [`flows`].
fn count_traffic(
    items: &[GlobalItem],
    times: u64,
    rules: &Rules,
    out: &mut Vec<((Channel, u32), u64)>,
) {
    for item in items {
        match item {
            GlobalItem::Event { symbol, ranks } => {
                let role = (rules.role)(*symbol);
                for &unit in ranks {
                    match role {
                        Role::Send(peer) => rules.units.each_peer(unit, peer, |to, offset| {
                            let channel = Channel::Message {
                                from: unit,
                                to,
                                offset,
                            };
                            out.push(((channel, 0), times));
                        }),
                        Role::Receive(peer) => rules.units.each_peer(unit, peer, |from, offset| {
                            let channel = Channel::Message {
                                from,
                                to: unit,
                                offset: -offset,
                            };
                            out.push(((channel, 0), times));
                        }),
                        Role::Collective => {
                            out.push(((Channel::Collective(*symbol), unit), times));
                        }
                        Role::Local => {}
                    }
                }
            }
            GlobalItem::Loop { count, body, .. } => {
                count_traffic(body, times.saturating_mul(*count), rules, out)
            }
        }
    }
}

/// The flow of every item of a list, numbering each channel's traffic from 0 at the list's
/// start. A collective whose ranks of one item are at different call numbers gets no range
/// (it cannot make a regular link).
fn flows(items: &[GlobalItem], rules: &Rules) -> Flows {
    let mut next: FxHashMap<(Channel, u32), u64> = FxHashMap::default();
    let mut out = Flows {
        ranges: Vec::new(),
        bounds: Vec::with_capacity(items.len() + 1),
    };
    out.bounds.push(0);
    // A vector sorted and summed per item, not a map cleared per item: clearing a map that
    // one large loop grew costs its whole capacity for every small item after it.
    let mut per: Vec<((Channel, u32), u64)> = Vec::new();
    let mut all: Vec<(Channel, Range)> = Vec::new();
    for item in items {
        per.clear();
        let count = match item {
            GlobalItem::Loop { count, body, .. } => {
                count_traffic(body, 1, rules, &mut per);
                *count
            }
            GlobalItem::Event { .. } => {
                count_traffic(std::slice::from_ref(item), 1, rules, &mut per);
                1
            }
        };
        per.sort_unstable_by_key(|(key, _)| *key);
        all.clear();
        for uses in per.chunk_by(|x, y| x.0 == y.0) {
            let (channel, rank) = uses[0].0;
            let n = uses.iter().fold(0u64, |n, (_, t)| n.saturating_add(*t));
            let at = next.entry((channel, rank)).or_default();
            let range = Range {
                start: *at,
                end: *at + n.saturating_mul(count),
                per_iteration: n,
            };
            *at = range.end;
            all.push((channel, range));
        }
        // A channel keeps its range only when every rank of the item has the same one (`all`
        // is sorted by channel, as `per` is).
        out.ranges.extend(
            all.chunk_by(|x, y| x.0 == y.0)
                .filter(|group| group.iter().all(|(_, r)| *r == group[0].1))
                .map(|group| group[0]),
        );
        out.bounds.push(out.ranges.len());
    }
    out
}

/// Whether two items of disjoint rank sets exchange traffic: `Some(true)` when linked by a
/// regular link (equal ranges on every channel they share), `Some(false)` when linked but
/// not regularly, `None` when not linked.
fn link(a: &[(Channel, Range)], b: &[(Channel, Range)]) -> Option<bool> {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let mut linked = false;
    let mut regular = true;
    for (channel, x) in small {
        if let Some(y) = range_on(large, channel) {
            if x.start < y.end && y.start < x.end {
                linked = true;
                regular &= x.start == y.start && x.end == y.end;
            }
        }
    }
    linked.then_some(regular)
}

/// Every iteration boundary strictly inside loop `item` (with ranges `flow`) at which
/// traffic of the other list starts or ends (`edges`), as iteration numbers, sorted: where
/// the paper's regularization splits a loop so that each part links whole.
fn cut_points(item: &GlobalItem, flow: &[(Channel, Range)], edges: &Edges) -> Vec<u64> {
    let GlobalItem::Loop { count, .. } = item else {
        return Vec::new();
    };
    let mut cuts = Vec::new();
    for (channel, x) in flow {
        let edges = edges.on(channel);
        if edges.is_empty() || x.per_iteration == 0 {
            continue;
        }
        let from = edges.partition_point(|&(_, e)| e <= x.start);
        for &(_, edge) in edges[from..].iter().take_while(|&&(_, e)| e < x.end) {
            if (edge - x.start) % x.per_iteration == 0 {
                let t = (edge - x.start) / x.per_iteration;
                if t > 0 && t < *count {
                    cuts.push(t);
                }
            }
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// The starts and ends of a list's ranges, sorted by channel and then by number.
struct Edges(Vec<(Channel, u64)>);

impl Edges {
    /// The edges of every range of `flows`.
    fn of(flows: &Flows) -> Edges {
        let mut all: Vec<(Channel, u64)> = flows
            .ranges
            .iter()
            .flat_map(|&(c, r)| [(c, r.start), (c, r.end)])
            .collect();
        all.sort_unstable();
        all.dedup();
        Edges(all)
    }

    /// The edges on `channel`, sorted.
    fn on(&self, channel: &Channel) -> &[(Channel, u64)] {
        let from = self.0.partition_point(|(c, _)| c < channel);
        let to = from + self.0[from..].partition_point(|(c, _)| c == channel);
        &self.0[from..to]
    }
}

/// `count` iterations of `body` over `ranks`: a loop, or the body itself for one iteration.
fn iterations(count: u64, ranks: &[u32], body: &[GlobalItem]) -> Vec<GlobalItem> {
    if count == 1 {
        body.to_vec()
    } else {
        vec![GlobalItem::Loop {
            count,
            ranks: ranks.to_vec(),
            body: body.to_vec(),
        }]
    }
}

/// Splits the loops of `list` at their cut points against `other`'s edges; whether any was.
fn split_loops(list: &mut Vec<GlobalItem>, flows: &Flows, other: &Edges) -> bool {
    let mut out = Vec::with_capacity(list.len());
    let mut split = false;
    for (i, item) in list.drain(..).enumerate() {
        let cuts = cut_points(&item, flows.of(i), other);
        match item {
            GlobalItem::Loop { count, ranks, body } if !cuts.is_empty() => {
                split = true;
                let mut at = 0;
                for t in cuts.into_iter().chain([count]) {
                    out.extend(iterations(t - at, &ranks, &body));
                    at = t;
                }
            }
            item => out.push(item),
        }
    }
    *list = out;
    split
}

/// Splits loops of `a` and `b` where the other list's links begin or end inside them, until
/// no link starts or stops mid-loop on an iteration boundary (P1.4's regularization; a link
/// that starts or stops inside an iteration would need the paper's "shift", which is not
/// done, and stays irregular: its loops are then not coalesced).
/// Returns both lists' flows as they stand after it.
fn regularize(a: &mut Vec<GlobalItem>, b: &mut Vec<GlobalItem>, rules: &Rules) -> (Flows, Flows) {
    // Splitting one side moves no edge of the other, only adds edges of its own; a few
    // rounds settle it, the bound is a safeguard.
    for _ in 0..16 {
        let (fa, fb) = (flows(a, rules), flows(b, rules));
        let split_a = split_loops(a, &fa, &Edges::of(&fb));
        let split_b = split_loops(b, &fb, &Edges::of(&fa));
        if !split_a && !split_b {
            return (fa, fb);
        }
    }
    (flows(a, rules), flows(b, rules))
}

/// Above this many cells, two item lists are not aligned but put side by side.
const ALIGN_LIMIT: usize = 1 << 22;

/// Linked loops of coprime counts are unrolled (P1.4) when both unrolled bodies together
/// hold at most this many items; larger ones stay side by side.
const UNROLL_LIMIT: u64 = 4096;

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

/// How well two items coalesce, `None` when they cannot; `linked`: they are the two ends of
/// a regular link, which lets loops of coprime counts coalesce by unrolling.
fn affinity(a: &GlobalItem, b: &GlobalItem, linked: bool) -> Option<u32> {
    match (a, b) {
        (GlobalItem::Event { .. }, GlobalItem::Event { .. }) => Some(2),
        (
            GlobalItem::Loop {
                count: n, body: x, ..
            },
            GlobalItem::Loop {
                count: m, body: y, ..
            },
        ) => {
            let g = gcd(*n, *m);
            if n == m {
                Some(8)
            } else if g > 1 {
                Some(4)
            } else if linked {
                let unrolled = n
                    .saturating_mul(x.len() as u64)
                    .saturating_add(m.saturating_mul(y.len() as u64));
                (unrolled <= UNROLL_LIMIT).then_some(1)
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

fn coalesce(a: GlobalItem, b: GlobalItem, rules: &Rules) -> Vec<GlobalItem> {
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
            // The alignment pairs events of one symbol only.
            debug_assert_eq!(x, y);
            vec![GlobalItem::Event {
                symbol: x,
                ranks: union(&ra, &rb),
            }]
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
            if g == 1 && n != m {
                // Coprime counts of linked loops: both unrolled, then merged item by item.
                let unroll = |count: u64, body: &[GlobalItem]| -> Vec<GlobalItem> {
                    (0..count).flat_map(|_| body.iter().cloned()).collect()
                };
                return merge_items(unroll(n, &ba), unroll(m, &bb), rules);
            }
            let body = merge_items(blocked(n, g, &ra, ba), blocked(m, g, &rb, bb), rules);
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
/// pairs, keeping each list's order, and coalesces the pairs. Following links, loops are
/// first split where a link starts or stops inside them ([`regularize`]), and only items on
/// both ends of a regular link coalesce. Keeping both orders means the coalesced model never
/// orders two constructs both ways: the paper's cycle check holds by construction.
fn merge_items(mut a: Vec<GlobalItem>, mut b: Vec<GlobalItem>, rules: &Rules) -> Vec<GlobalItem> {
    // Only loops and events that may coalesce take part in the alignment; a rank's own
    // sends and receives keep their places between them.
    let candidates = |list: &[GlobalItem]| -> Vec<usize> {
        (0..list.len())
            .filter(|&i| match &list[i] {
                GlobalItem::Loop { .. } => true,
                GlobalItem::Event { symbol, .. } => rules.coalesces(*symbol),
            })
            .collect()
    };
    // Lists too long to align (irregular traces, whose nests are nearly flat) are put side
    // by side before any flow is computed.
    let too_long = |a: &[GlobalItem], b: &[GlobalItem]| {
        candidates(a).len().saturating_mul(candidates(b).len()) > ALIGN_LIMIT
    };
    if a.is_empty() || b.is_empty() || too_long(&a, &b) {
        a.extend(b);
        return a;
    }
    let (flows_a, flows_b) = if rules.communicating {
        regularize(&mut a, &mut b, rules)
    } else {
        (Flows::default(), Flows::default())
    };
    let affinity = |i: usize, j: usize| -> Option<u32> {
        let (x, y) = (&a[i], &b[j]);
        if let (GlobalItem::Event { symbol: s, .. }, GlobalItem::Event { symbol: t, .. }) = (x, y) {
            if s != t {
                return None;
            }
        }
        if !rules.communicating {
            return affinity(x, y, false);
        }
        let linked = link(flows_a.of(i), flows_b.of(j)) == Some(true);
        let needs_link = match x {
            GlobalItem::Loop { .. } => true,
            GlobalItem::Event { symbol, .. } => (rules.role)(*symbol) == Role::Collective,
        };
        if needs_link && !linked {
            return None;
        }
        affinity(x, y, linked)
    };
    let (ca, cb) = (candidates(&a), candidates(&b));
    let (n, m) = (ca.len(), cb.len());
    if n.saturating_mul(m) > ALIGN_LIMIT {
        a.extend(b);
        return a;
    }
    // best[p][q]: best score aligning candidates ca[p..] with cb[q..].
    let w = m + 1;
    let mut best = vec![0u32; (n + 1) * w];
    for p in (0..n).rev() {
        for q in (0..m).rev() {
            let mut s = best[(p + 1) * w + q].max(best[p * w + q + 1]);
            if let Some(x) = affinity(ca[p], cb[q]) {
                s = s.max(x + best[(p + 1) * w + q + 1]);
            }
            best[p * w + q] = s;
        }
    }
    // The aligned pairs, as original indices.
    let mut pairs = Vec::new();
    let (mut p, mut q) = (0, 0);
    while p < n && q < m {
        let here = best[p * w + q];
        if affinity(ca[p], cb[q]).is_some_and(|x| x + best[(p + 1) * w + q + 1] == here) {
            pairs.push((ca[p], cb[q]));
            p += 1;
            q += 1;
        } else if best[(p + 1) * w + q] == here {
            p += 1;
        } else {
            q += 1;
        }
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    // Original indices of the next items `a` and `b` yield.
    let (mut next_a, mut next_b) = (0, 0);
    for (i, j) in pairs {
        out.extend(a.by_ref().take(i - next_a));
        out.extend(b.by_ref().take(j - next_b));
        let (x, y) = (a.next().unwrap(), b.next().unwrap());
        out.extend(coalesce(x, y, rules));
        (next_a, next_b) = (i + 1, j + 1);
    }
    out.extend(a);
    out.extend(b);
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
/// Loops of coprime counts are not coalesced and stay side by side, each over its own ranks
/// (this structural merge ignores links; [`merge_communicating`] follows them). Every item
/// records the ranks it covers; [`GlobalModel::project`] gives each rank's exact
/// sequence back.
///
/// ```
/// use mtfdb::analysis::loops::{merge, nlr, Peer, Role};
/// // Rank 0 sends twice per iteration for 10 iterations, rank 1 receives 20 times.
/// let a: Vec<u32> = (0..10).flat_map(|_| [1, 1, 7]).collect();
/// let b = vec![2; 20];
/// let (na, nb) = (nlr(&a, 4), nlr(&b, 4));
/// let role = |s: u32| if s == 2 { Role::Receive(Peer::Rank(0)) } else { Role::Send(Peer::Rank(1)) };
/// let global = merge([(0, &na), (1, &nb)], role);
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
    merge_by(models, &role, false)
}

/// [`merge`] as P1.4 does it: loops coalesce only where their traffic links them, so that
/// "loops spanning several processes appear only where those processes communicate".
///
/// Traffic is numbered per channel: the messages from one rank to another in order (MPI
/// delivers them in order per channel; the symbols carry no tag) and the calls of one
/// collective per rank. Two items of different ranks are linked when the numbers one sends
/// and the other receives (or both call) overlap; the link is regular when they are the
/// same on every channel the two share, so that each end carries the other's whole traffic.
/// Before aligning two lists, a loop is split where a link of the other list starts or
/// stops at one of its iteration boundaries (regularization; a part of one iteration is
/// unrolled). Then only regularly linked loops coalesce: equal counts into one loop, counts
/// with a gcd `g > 1` into a loop of `g` iterations over blocked bodies, coprime counts by
/// unrolling both (up to 4,096 items in all; larger ones stay side by side). Equal
/// collective events coalesce when they are the same calls, equal local events (routine
/// entries and exits) always. The alignment keeps both lists' order, so coalescing never
/// orders two constructs both ways (the paper's cycle check holds by construction). Not
/// done: the paper's "shift" of a loop whose link starts inside an iteration; such loops
/// stay side by side.
///
/// ```
/// use mtfdb::analysis::loops::{merge, merge_communicating, nlr, Peer, Role};
/// // Symbol 2p is a send to p, 2p + 1 a receive from p: 0 and 1 talk, so do 2 and 3.
/// let seq = |peer: u32| -> Vec<u32> { (0..5).flat_map(|_| [2 * peer, 2 * peer + 1]).collect() };
/// let nests = [nlr(&seq(1), 4), nlr(&seq(0), 4), nlr(&seq(3), 4), nlr(&seq(2), 4)];
/// let models = || nests.iter().enumerate().map(|(r, n)| (r as u32, n));
/// let role = |s: u32| if s % 2 == 0 { Role::Send(Peer::Rank(s / 2)) } else { Role::Receive(Peer::Rank(s / 2)) };
/// let global = merge_communicating(models(), role);
/// let text = global.render(|s| format!("{}{}", ["S", "R"][s as usize % 2], s / 2));
/// assert_eq!(
///     text,
///     "for i0 in 0..5 @0-1 {\n  S1 R1 @0\n  S0 R0 @1\n}\n\
///      for i0 in 0..5 @2-3 {\n  S3 R3 @2\n  S2 R2 @3\n}\n"
/// );
/// // The structural merge puts all four in one loop.
/// assert_eq!(merge(models(), role).items.len(), 1);
///
/// // Regularization: rank 0 sends 10 messages in one loop; rank 1 receives 4, does
/// // something else, then receives 6. Rank 0's loop is split 4 + 6, each part linked whole.
/// let a = nlr(&[2; 10], 4);
/// let b = nlr(&[1, 1, 1, 1, 9, 1, 1, 1, 1, 1, 1], 4);
/// let role = |s: u32| match s {
///     2 => Role::Send(Peer::Rank(1)),
///     1 => Role::Receive(Peer::Rank(0)),
///     _ => Role::Local,
/// };
/// let global = merge_communicating([(0, &a), (1, &b)], role);
/// let names = |s: u32| ["", "R0", "S1"].get(s as usize).unwrap_or(&"X").to_string();
/// assert_eq!(
///     global.render(names),
///     "for i0 in 0..4 @0-1 {\n  S1 @0\n  R0 @1\n}\nX @1\nfor i0 in 0..6 @0-1 {\n  S1 @0\n  R0 @1\n}\n"
/// );
/// ```
pub fn merge_communicating<'a>(
    models: impl IntoIterator<Item = (u32, &'a LoopNest)>,
    role: impl Fn(u32) -> Role,
) -> GlobalModel {
    merge_by(models, &role, true)
}

/// [`merge_communicating`] over classes of ranks, each given as `(ranks, model)` with
/// disjoint sorted rank lists, every rank of a class having the class's model: the merge
/// treats each class as one process and each item of the result covers every rank of its
/// classes. With peers written as offsets ([`Peer::Offset`]), the ranks of a regular code
/// fall into a few classes (a 2D stencil's interior, its edges and corners), and the merge
/// costs what those few cost, at any rank count. Links are followed as between ranks: the
/// messages a class sends at one offset to the ranks of another are on each rank's own
/// channel, numbered alike on all of them.
///
/// ```
/// use mtfdb::analysis::loops::{merge_classes, nlr, Peer, Role};
/// // A ring of 6: every rank sends to the next (symbol 0) and receives from the previous
/// // (symbol 1), 5 times; rank 5 sends to rank 0 and rank 0 receives from 5 (2 and 3).
/// let role = |s: u32| match s {
///     0 => Role::Send(Peer::Offset(1)),
///     1 => Role::Receive(Peer::Offset(-1)),
///     2 => Role::Send(Peer::Offset(-5)),
///     _ => Role::Receive(Peer::Offset(5)),
/// };
/// let (first, middle, last) = (nlr(&[0, 3].repeat(5), 4), nlr(&[0, 1].repeat(5), 4), nlr(&[2, 1].repeat(5), 4));
/// let global = merge_classes(
///     [(&[0][..], &first), (&[1, 2, 3, 4][..], &middle), (&[5][..], &last)],
///     role,
/// );
/// assert_eq!(
///     global.render(|s| ["S+1", "R-1", "S-5", "R+5"][s as usize].to_string()),
///     "for i0 in 0..5 @0-5 {\n  S+1 R+5 @0\n  S+1 R-1 @1-4\n  S-5 R-1 @5\n}\n"
/// );
/// assert_eq!(global.project(3), [0, 1].repeat(5));
/// ```
pub fn merge_classes<'a>(
    classes: impl IntoIterator<Item = (&'a [u32], &'a LoopNest)>,
    role: impl Fn(u32) -> Role,
) -> GlobalModel {
    let classes: Vec<(Vec<u32>, &LoopNest)> = classes
        .into_iter()
        .map(|(ranks, nest)| (ranks.to_vec(), nest))
        .collect();
    merge_units(classes, &role, true)
}

fn merge_by<'a>(
    models: impl IntoIterator<Item = (u32, &'a LoopNest)>,
    role: &dyn Fn(u32) -> Role,
    communicating: bool,
) -> GlobalModel {
    let classes = models
        .into_iter()
        .map(|(rank, nest)| (vec![rank], nest))
        .collect();
    merge_units(classes, role, communicating)
}

/// Which classes exchange messages with which: for each class, the others it sends to or
/// receives from, by index, sorted.
fn talks(
    classes: &[(Vec<u32>, &LoopNest)],
    units: &Units,
    role: &dyn Fn(u32) -> Role,
) -> Vec<Vec<usize>> {
    fn symbols(items: &[Item], out: &mut Vec<u32>) {
        for item in items {
            match item {
                Item::Symbol(s) => out.push(*s),
                Item::Loop { body, .. } => symbols(body, out),
            }
        }
    }
    let index: FxHashMap<u32, usize> = classes
        .iter()
        .enumerate()
        .filter_map(|(i, (ranks, _))| Some((*ranks.first()?, i)))
        .collect();
    let mut talks: Vec<Vec<usize>> = vec![Vec::new(); classes.len()];
    let mut seen = Vec::new();
    for (i, (ranks, nest)) in classes.iter().enumerate() {
        let Some(&unit) = ranks.first() else { continue };
        seen.clear();
        symbols(&nest.items, &mut seen);
        seen.sort_unstable();
        seen.dedup();
        for &s in &seen {
            let (Role::Send(peer) | Role::Receive(peer)) = role(s) else {
                continue;
            };
            units.each_peer(unit, peer, |u, _| {
                if let Some(&j) = index.get(&u) {
                    if j != i {
                        talks[i].push(j);
                        talks[j].push(i);
                    }
                }
            });
        }
    }
    for list in &mut talks {
        list.sort_unstable();
        list.dedup();
    }
    talks
}

/// The pairwise merges of `classes` (each one unit named by its first rank), round after
/// round until one list is left; the units are replaced by their ranks at the end.
///
/// A round pairs each list with the first list (by first rank) that exchanges messages with
/// it and is still free, so that the lists merged exchange traffic: paired by rank order
/// alone, two classes that do not talk (a grid's corner and the edge after it) would be
/// merged, their loops left side by side, each then linked to a different loop, and one of
/// them kept out of the main loop for good. When fewer than a quarter of the lists found a
/// partner (lists that talk to no one, or a star of many ranks around one), the free ones
/// are paired in order as well, so that there are at most about log(n) rounds, as in a
/// balanced tree (which is what the structural merge, following no links, does).
fn merge_units(
    classes: Vec<(Vec<u32>, &LoopNest)>,
    role: &dyn Fn(u32) -> Role,
    communicating: bool,
) -> GlobalModel {
    const FREE: usize = usize::MAX;
    let units = Units::new(classes.iter().map(|(r, _)| &r[..]));
    let talks = if communicating {
        talks(&classes, &units, role)
    } else {
        vec![Vec::new(); classes.len()]
    };
    let mut lists: Vec<Option<Vec<GlobalItem>>> = classes
        .iter()
        .map(|(ranks, nest)| {
            let unit = *ranks.first()?;
            Some(
                nest.items
                    .iter()
                    .map(|i| GlobalItem::local(i, unit))
                    .collect(),
            )
        })
        .collect();
    let rules = &Rules {
        role,
        units,
        communicating,
    };
    // The list each class is in (a union-find forest whose roots are the lists), and the
    // classes of each list.
    let mut parent: Vec<usize> = (0..classes.len()).collect();
    let mut members: Vec<Vec<usize>> = (0..classes.len()).map(|i| vec![i]).collect();
    let mut live: Vec<usize> = (0..lists.len()).filter(|&i| lists[i].is_some()).collect();
    let mut partner = vec![FREE; classes.len()];
    while live.len() > 1 {
        let mut pairs = Vec::new();
        for &i in &live {
            if partner[i] != FREE {
                continue;
            }
            let found = members[i]
                .iter()
                .flat_map(|&c| &talks[c])
                .map(|&c| root(&mut parent, c))
                .filter(|&j| j != i && partner[j] == FREE)
                .min();
            if let Some(j) = found {
                (partner[i], partner[j]) = (j, i);
                pairs.push((i, j));
            }
        }
        if pairs.len() * 4 < live.len() {
            let free: Vec<usize> = live
                .iter()
                .copied()
                .filter(|&i| partner[i] == FREE)
                .collect();
            pairs.extend(free.chunks_exact(2).map(|p| (p[0], p[1])));
        }
        for (i, j) in pairs {
            let (a, b) = (i.min(j), i.max(j));
            let (Some(x), Some(y)) = (lists[a].take(), lists[b].take()) else {
                continue;
            };
            lists[a] = Some(merge_items(x, y, rules));
            parent[b] = a;
            let moved = std::mem::take(&mut members[b]);
            members[a].extend(moved);
        }
        live.retain(|&i| lists[i].is_some());
        for &i in &live {
            partner[i] = FREE;
        }
    }
    let mut items = live
        .first()
        .and_then(|&i| lists[i].take())
        .unwrap_or_default();
    rules.units.expand(&mut items);
    GlobalModel { items }
}

/// The list class `c` is in now (path halving).
fn root(parent: &mut [usize], mut c: usize) -> usize {
    while parent[c] != c {
        parent[c] = parent[parent[c]];
        c = parent[c];
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::loops::tests::periodic;
    use crate::analysis::loops::{nlr, LoopNest};
    use proptest::prelude::*;

    #[test]
    fn no_process_gives_an_empty_model() {
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

    /// Symbols of the merge tests: 0 a collective, 1 a send to rank 1, 2 a receive from rank
    /// 0, 3 and 4 local events.
    fn role(s: u32) -> Role {
        match s {
            0 => Role::Collective,
            1 => Role::Send(Peer::Rank(1)),
            2 => Role::Receive(Peer::Rank(0)),
            _ => Role::Local,
        }
    }

    fn names(s: u32) -> String {
        ["C", "S1", "R0", "L", "M"][s as usize].to_string()
    }

    #[test]
    fn linked_loops_of_coprime_counts_are_unrolled() {
        // Rank 0 sends 15 messages as 5 x (3 sends), rank 1 receives them as 3 x (5).
        let a: Vec<u32> = (0..5).flat_map(|_| [1, 1, 1, 3]).collect();
        let b: Vec<u32> = (0..3).flat_map(|_| [2, 2, 2, 2, 2, 4]).collect();
        let (na, nb) = (nlr(&a, 8), nlr(&b, 8));
        let linked = merge_communicating([(0, &na), (1, &nb)], role);
        assert_eq!((linked.project(0), linked.project(1)), (a, b));
        // Both loops are unrolled into their 5 and 3 bodies, whose inner loops are then
        // split where the other side's begin and end, message by message.
        assert_eq!(
            linked.render(names),
            "for i0 in 0..3 @0-1 {\n  S1 @0\n  R0 @1\n}\nL @0\n\
             for i0 in 0..2 @0-1 {\n  S1 @0\n  R0 @1\n}\nS1 L @0\nM R0 @1\n\
             for i0 in 0..3 @0-1 {\n  S1 @0\n  R0 @1\n}\nL S1 @0\nR0 M @1\n\
             for i0 in 0..2 @0-1 {\n  S1 @0\n  R0 @1\n}\nL @0\n\
             for i0 in 0..3 @0-1 {\n  S1 @0\n  R0 @1\n}\nL @0\nM @1\n"
        );
        // The structural merge leaves the two loops side by side.
        assert_eq!(merge([(0, &na), (1, &nb)], role).items.len(), 2);
    }

    #[test]
    fn collectives_coalesce_only_as_the_same_calls() {
        // Rank 0 calls C once before its loop, rank 1 once after: their loops make
        // different calls (1..4 and 0..3), so each is split where the other's calls begin
        // and end, and the calls coalesce one by one.
        let a: Vec<u32> = [0].into_iter().chain((0..3).flat_map(|_| [0, 3])).collect();
        let b: Vec<u32> = (0..3).flat_map(|_| [0, 4]).chain([0]).collect();
        let (na, nb) = (nlr(&a, 4), nlr(&b, 4));
        let linked = merge_communicating([(0, &na), (1, &nb)], role);
        assert_eq!((linked.project(0), linked.project(1)), (a, b));
        assert_eq!(
            linked.render(names),
            "C @0-1\nM @1\nfor i0 in 0..2 @0-1 {\n  C @0-1\n  L @0\n  M @1\n}\nC @0-1\nL @0\n"
        );
        // Aligning by shape alone pairs the loops, whose calls differ by one.
        let structural = merge([(0, &na), (1, &nb)], role);
        assert!(matches!(
            &structural.items[1],
            GlobalItem::Loop { count: 3, ranks, .. } if ranks == &[0, 1]
        ));
    }

    #[test]
    fn loops_that_do_not_exchange_traffic_stay_apart() {
        // Both ranks loop 6 times over local events only.
        let a = nlr(&[3; 6], 2);
        let b = nlr(&[4; 6], 2);
        let linked = merge_communicating([(0, &a), (1, &b)], role);
        assert_eq!(
            linked.render(names),
            "for i0 in 0..6 @0 { L }\nfor i0 in 0..6 @1 { M }\n"
        );
    }

    proptest! {
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
                if s == 0 { Role::Collective } else { Role::Local }
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
            let role = |s: u32| match s % 3 {
                0 => Role::Collective,
                1 => Role::Send(Peer::Rank(s % 7)),
                _ => Role::Receive(Peer::Rank(s % 5)),
            };
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
            // Each process as a class of its own is the per-rank merge.
            let singletons: Vec<[u32; 1]> = (0..nests.len() as u32).map(|r| [r * 2]).collect();
            let classes = merge_classes(singletons.iter().map(|r| &r[..]).zip(&nests), role);
            prop_assert_eq!(classes, linked);
        }

        #[test]
        fn every_rank_of_a_class_projects_the_class_sequence(
            seqs in prop::collection::vec(prop_oneof![periodic(), prop::collection::vec(0u32..3, 0..60)], 1..5),
            sizes in prop::collection::vec(1u32..5, 5),
        ) {
            // Class c holds sizes[c] consecutive ranks; peers are offsets of -2..=2.
            let nests: Vec<LoopNest> = seqs.iter().map(|s| nlr(s, 8)).collect();
            let mut next = 0;
            let classes: Vec<Vec<u32>> = nests
                .iter()
                .zip(&sizes)
                .map(|(_, &n)| {
                    next += n;
                    (next - n..next).collect()
                })
                .collect();
            let role = |s: u32| match s % 3 {
                0 => Role::Collective,
                1 => Role::Send(Peer::Offset(i64::from(s % 5) - 2)),
                _ => Role::Receive(Peer::Offset(i64::from(s % 5) - 2)),
            };
            let global = merge_classes(classes.iter().map(|r| &r[..]).zip(&nests), role);
            for (ranks, s) in classes.iter().zip(&seqs) {
                for &rank in ranks {
                    prop_assert_eq!(&global.project(rank), s);
                }
            }
            prop_assert!(global.project(next).is_empty());
        }
    }
}
