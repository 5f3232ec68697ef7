//! Process-pattern detection: the reverse-forward n-gram lookup of thesis Alg 4.3, with the
//! semantics its worked example (Fig 4.8) shows, plus a plain suffix-array reference.
//!
//! # The algorithm
//!
//! All bigrams and their positions are collected first; a bigram seen once is dropped. A read
//! pointer then walks the sequence. At each position whose bigram repeats, the pattern grows
//! one symbol at a time, LZW-like: the extension `P + x` is looked for at *every* position of
//! its prefix `P`, which is why a pattern is complete as soon as the pointer first meets it.
//! The walk along the pattern stops when
//!
//! * the next symbol is a delimiter or the end: patterns never cross a delimiter;
//! * the extension occurs only here (the thesis removes it);
//! * the extension overlaps itself too much. With `matches` the other occurrences of the
//!   extension, `overlap` the number of adjacent pairs of prefix occurrences that both extend
//!   and lie closer than the extension's length, and `distance` the gap of the first such
//!   pair, the extension is rejected when `overlap > matches - distance` (the thesis's rule,
//!   kept literally: it lets `aba` through in the Sweep3D example so the long pattern can
//!   form, and rejects `S2S3R2S2` in Fig 4.8). When every match overlaps
//!   (`overlap == matches`, tested before the pseudo-code resets `matches`, as Fig 4.8 does),
//!   the pointer jumps to the last occurrence plus `distance`, past the periodic stretch
//!   (Fig 4.8: from 5 to 11, 1-based).
//!
//! Otherwise the extension is accepted and the walk goes on from it; an extension the pointer
//! meets again is simply walked through ("already exists → append event", Fig 4.8 row 6; the
//! pseudo-code's `continue` would leave the loop instead). When the walk stops, the pointer
//! moves to the symbol that failed to extend the pattern (or past the delimiter, or to the
//! jump).
//!
//! A pattern counts only once the pointer has met it (a bigram's frequency is set on the
//! first visit, Fig 4.8): in Fig 4.8, `R2S2` repeats but is never reported. Occurrences of a
//! pattern that overlap one another (adjacent in its position list and closer than its
//! length) form a chain that counts once, as the thesis's `matches - overlap` counts it. An
//! accepted extension absorbs its prefix's occurrences at the same positions, and with them
//! the chains they belong to, so the prefix keeps only the other chains ("the frequency of
//! S2S3 will be decremented to 0"). A pattern is reported when two or more chains remain; its
//! positions are the first occurrence of each.
//!
//! # Where this departs from the thesis
//!
//! * Frequencies are occurrence lists, not counters: the thesis adds `matches - overlap` to
//!   the extension and subtracts the same from the prefix, which leaves the prefix one too
//!   high (the current position is never subtracted) and cannot say *which* occurrences
//!   remain. Here a pattern's frequency is the number of positions it is reported with.
//! * Rejections are remembered, so an extension is judged once, not at every visit: the
//!   outcome depends only on the prefix's positions, so this changes nothing but the cost.
//! * The extensions of a prefix are computed together, by one pass over its positions that
//!   buckets them by their next symbol. The thesis scans the prefix's positions again for
//!   every extension it tries, which is quadratic when a common prefix is followed by many
//!   different symbols.
//! * Positions are kept as runs of overlapping occurrences (see Cost).
//!
//! # Cost
//!
//! O(n) hashing for the bigrams, plus one pass over the positions of every pattern the
//! pointer visits, where a stretch of mutually overlapping occurrences with a common step
//! counts as one (it is kept as a run, and all its occurrences but the last are followed by
//! the same symbol). On real traces that is close to linear. The thesis's O(n) claim does not
//! hold in general (SEEDS-THESIS §2.6): the patterns the pointer visits can have many
//! occurrences each. The worst case the thesis's own rule invites — a long periodic run in
//! three or more places, where every longer period-shifted pattern is accepted — costs
//! O(n) with the runs instead of O(n²) position by position; tandem removal first
//! ([`Options::remove_tandems`]) collapses such runs anyway.

use crate::hash::FxHashMap;

use super::tandem::{self, Reduction};
use super::{Event, Symbol};

/// Options of [`detect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Collapse tandem repeats first (thesis Alg 4.5) and mine the general form. Runs never
    /// cross a delimiter. Positions are mapped back to the input either way.
    pub remove_tandems: bool,
    /// Shortest pattern reported, in symbols of the (general-form) pattern. Values below 2
    /// mean 2: a single symbol is never a pattern.
    pub min_len: usize,
}

impl Default for Options {
    /// Tandem removal on, patterns of two symbols or more: the thesis's best configuration.
    fn default() -> Options {
        Options {
            remove_tandems: true,
            min_len: 2,
        }
    }
}

/// A tandem run collapsed inside one occurrence of a [`ProcessPattern`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatternRepeat {
    /// The occurrence it belongs to (an index into [`ProcessPattern::positions`]).
    pub occurrence: usize,
    /// Where its unit starts in [`ProcessPattern::symbols`].
    pub offset: usize,
    /// Length of the unit, in pattern symbols.
    pub unit_len: usize,
    /// Number of copies in the input, the kept one included.
    pub copies: usize,
    /// Input index of the run's first event.
    pub start: usize,
    /// Exclusive input end of the run's last copy.
    pub end: usize,
}

/// A process pattern: a symbol sequence that repeats within one process trace, with its
/// occurrences in the input event sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessPattern {
    /// The pattern; in general form (tandem runs collapsed) when tandems were removed.
    pub symbols: Vec<Symbol>,
    /// Input index (0-based, delimiters counted) of each occurrence's first event, ascending.
    pub positions: Vec<usize>,
    /// Exclusive input end of each occurrence, parallel to `positions`. Without tandem
    /// removal it is `position + symbols.len()`; with it, an occurrence also covers the
    /// removed copies of the runs inside it. Occurrences never overlap and never contain a
    /// delimiter.
    pub ends: Vec<usize>,
    /// The tandem runs whose unit lies inside an occurrence, by occurrence and then offset
    /// (an enclosing run before the runs nested in it). Empty without tandem removal.
    pub repeats: Vec<PatternRepeat>,
}

impl ProcessPattern {
    /// Number of occurrences.
    pub fn frequency(&self) -> usize {
        self.positions.len()
    }

    /// Each occurrence as an input range `(start, end)`, end exclusive.
    pub fn occurrences(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.positions
            .iter()
            .copied()
            .zip(self.ends.iter().copied())
    }

    /// The runs collapsed inside occurrence `occurrence`.
    pub fn repeats_of(&self, occurrence: usize) -> &[PatternRepeat] {
        let from = self.repeats.partition_point(|r| r.occurrence < occurrence);
        let to = self.repeats.partition_point(|r| r.occurrence <= occurrence);
        &self.repeats[from..to]
    }
}

/// Detects the process patterns of one process's event sequence (thesis §4.4, Alg 4.3, with
/// Alg 4.5 first when `options.remove_tandems`). Patterns are ordered by their first
/// position, then by length.
pub fn detect(events: &[Event], options: &Options) -> Vec<ProcessPattern> {
    detect_reduced(events, options).0
}

/// [`detect`], also giving the tandem reduction of the MPI symbols (in the coordinates of the
/// symbols alone, delimiters left out), so that a caller needs not compute it again.
pub(crate) fn detect_reduced(
    events: &[Event],
    options: &Options,
) -> (Vec<ProcessPattern>, Reduction) {
    // The MPI symbols alone, with the event index and block of each.
    let mut symbols = Vec::with_capacity(events.len());
    let mut index = Vec::with_capacity(events.len());
    let mut block = Vec::with_capacity(events.len());
    let mut current = 0u32;
    for (i, event) in events.iter().enumerate() {
        match *event {
            Event::Mpi(s) => {
                symbols.push(s);
                index.push(i);
                block.push(current);
            }
            Event::Delimiter => current += 1,
        }
    }
    assert!(symbols.len() < u32::MAX as usize, "sequence too long");

    let reduction = if options.remove_tandems {
        tandem::reduce(&symbols, &block)
    } else {
        Reduction {
            origin: (0..symbols.len()).collect(),
            symbols,
            runs: Vec::new(),
        }
    };
    let reduced = &reduction.symbols;

    // limit[r]: where r's block ends in the reduced sequence.
    let mut limit = vec![0u32; reduced.len()];
    for r in (0..reduced.len()).rev() {
        limit[r] = if r + 1 < reduced.len()
            && block[reduction.origin[r + 1]] == block[reduction.origin[r]]
        {
            limit[r + 1]
        } else {
            (r + 1) as u32
        };
    }

    let mut lookup = Lookup::new(reduced, &limit);
    lookup.run();
    let found = lookup.patterns(options.min_len.max(2));

    // runs_from[r]: the first run starting at r or later (runs are by start), so that the
    // runs inside an occurrence are found without a search.
    let runs = &reduction.runs;
    let mut runs_from = vec![runs.len() as u32; reduced.len() + 1];
    for (k, run) in runs.iter().enumerate().rev() {
        runs_from[run.start] = k as u32;
    }
    for r in (0..reduced.len()).rev() {
        runs_from[r] = runs_from[r].min(runs_from[r + 1]);
    }
    let mut patterns: Vec<ProcessPattern> = found
        .into_iter()
        .map(|(len, starts)| {
            let len = len as usize;
            let first = starts[0] as usize;
            let mut pattern = ProcessPattern {
                symbols: reduced[first..first + len].to_vec(),
                positions: Vec::with_capacity(starts.len()),
                ends: Vec::with_capacity(starts.len()),
                repeats: Vec::new(),
            };
            for (k, &r0) in starts.iter().enumerate() {
                let r0 = r0 as usize;
                let r1 = r0 + len;
                // The occurrence ends with its last symbol and the removed copies of the runs
                // whose unit ends there (all of which start inside it), as in
                // `Reduction::input_range`.
                let mut to = reduction.origin[r1 - 1] + 1;
                for run in &runs[runs_from[r0] as usize..runs_from[r1] as usize] {
                    if run.start + run.unit_len == r1 {
                        to = to.max(run.end);
                    }
                    if run.start + run.unit_len <= r1 {
                        pattern.repeats.push(PatternRepeat {
                            occurrence: k,
                            offset: run.start - r0,
                            unit_len: run.unit_len,
                            copies: run.copies,
                            start: index[reduction.origin[run.start]],
                            end: index[run.end - 1] + 1,
                        });
                    }
                }
                pattern.positions.push(index[reduction.origin[r0]]);
                pattern.ends.push(index[to - 1] + 1);
            }
            pattern
        })
        .collect();
    patterns.sort_by_key(|p| (p.positions[0], p.symbols.len()));
    (patterns, reduction)
}

const NONE: u32 = u32::MAX;

/// A run of a pattern's positions: `start + i * step` for `i` in `0..=more`. A run of two or
/// more has a step below the pattern's length, i.e. its occurrences overlap one another; this
/// is what keeps periodic stretches cheap: all but the last of them are followed by the same
/// symbol (the next symbol after occurrence `i` lies inside occurrence `i + 1`), so a run is
/// split between extensions in O(1), not one position at a time.
#[derive(Debug, Clone, Copy)]
struct Run {
    start: u32,
    step: u16,
    more: u16,
}

impl Run {
    fn single(position: u32) -> Run {
        Run {
            start: position,
            step: 0,
            more: 0,
        }
    }

    fn count(self) -> u32 {
        self.more as u32 + 1
    }

    fn last(self) -> u32 {
        self.start + self.more as u32 * self.step as u32
    }
}

/// Appends `piece` to the runs `list[floor..]` of a pattern of length `len`, merging it into
/// the last run when the positions keep one step below `len`.
fn push_run(list: &mut Vec<Run>, floor: usize, piece: Run, len: u32) {
    if list.len() > floor {
        let tail = list.last_mut().unwrap();
        let gap = piece.start - tail.last();
        if gap < len
            && gap <= u16::MAX as u32
            && (tail.more == 0 || tail.step as u32 == gap)
            && (piece.more == 0 || piece.step as u32 == gap)
            && (tail.more as u32 + piece.more as u32) < u16::MAX as u32
        {
            tail.step = gap as u16;
            tail.more += piece.more + 1;
            return;
        }
    }
    list.push(piece);
}

/// A pattern met (or to be met) by the lookup: a bigram or an extension of another pattern.
struct Node {
    /// Its positions, every in-block occurrence in ascending order, as the runs
    /// `arena[first..first + runs]`.
    first: usize,
    runs: u32,
    len: u32,
    /// Whether its extensions were computed.
    expanded: bool,
    /// Whether the pointer has met it (only met patterns count).
    visited: bool,
    /// Rejected by the overlap rule (extensions occurring once are never stored).
    rejected: bool,
    /// Where the pointer goes when the walk stops at this rejected extension, or `NONE`.
    jump: u32,
    /// Next symbols of the accepted extensions the pointer met: the occurrences followed by
    /// one of them were absorbed.
    absorbed: Vec<Symbol>,
}

/// The state of one run of Alg 4.3 over a reduced sequence.
struct Lookup<'a> {
    s: &'a [Symbol],
    limit: &'a [u32],
    nodes: Vec<Node>,
    arena: Vec<Run>,
    /// Bigram (first << 32 | second) → node.
    bigrams: FxHashMap<u64, u32>,
    /// (node << 32 | next symbol) → node of the extension, for extensions occurring twice or
    /// more.
    children: FxHashMap<u64, u32>,
    // Scratch space for `expand`: one bucket per next symbol, with its positions' runs.
    bucket_of: FxHashMap<Symbol, u32>,
    buckets: Vec<Bucket>,
    lists: Vec<Vec<Run>>,
}

/// One extension while a prefix is expanded.
#[derive(Clone, Copy)]
struct Bucket {
    symbol: Symbol,
    count: u32,
    overlap: u32,
    distance: u32,
    last: u32,
}

impl<'a> Lookup<'a> {
    fn new(s: &'a [Symbol], limit: &'a [u32]) -> Lookup<'a> {
        let mut lookup = Lookup {
            s,
            limit,
            nodes: Vec::new(),
            arena: Vec::new(),
            bigrams: FxHashMap::default(),
            children: FxHashMap::default(),
            bucket_of: FxHashMap::default(),
            buckets: Vec::new(),
            lists: Vec::new(),
        };
        lookup.extract_bigrams();
        lookup
    }

    /// ExtractBiGrams: every in-block bigram with its positions; those seen once are dropped.
    fn extract_bigrams(&mut self) {
        let n = self.s.len();
        let mut slot_of: FxHashMap<u64, u32> = FxHashMap::default();
        let mut counts: Vec<u32> = Vec::new();
        let mut slot = vec![NONE; n];
        for (p, slot_p) in slot.iter_mut().enumerate().take(n.saturating_sub(1)) {
            if self.limit[p] as usize <= p + 1 {
                continue;
            }
            let next = counts.len() as u32;
            let id = *slot_of.entry(bigram(self.s, p)).or_insert(next);
            if id == next {
                counts.push(0);
            }
            counts[id as usize] += 1;
            *slot_p = id;
        }
        // Counting sort of the positions, then one node per repeated bigram.
        let mut start = vec![0usize; counts.len() + 1];
        for (id, &count) in counts.iter().enumerate() {
            start[id + 1] = start[id] + if count >= 2 { count as usize } else { 0 };
        }
        let mut sorted = vec![0u32; start[counts.len()]];
        let mut fill = start.clone();
        for (p, &id) in slot.iter().enumerate() {
            if id != NONE && counts[id as usize] >= 2 {
                sorted[fill[id as usize]] = p as u32;
                fill[id as usize] += 1;
            }
        }
        let mut node_of = vec![NONE; counts.len()];
        for (id, &count) in counts.iter().enumerate() {
            if count < 2 {
                continue;
            }
            let first = self.arena.len();
            for &p in &sorted[start[id]..start[id + 1]] {
                push_run(&mut self.arena, first, Run::single(p), 2);
            }
            node_of[id] = self.nodes.len() as u32;
            self.nodes.push(Node {
                first,
                runs: (self.arena.len() - first) as u32,
                len: 2,
                expanded: false,
                visited: false,
                rejected: false,
                jump: NONE,
                absorbed: Vec::new(),
            });
        }
        for (key, id) in slot_of {
            if node_of[id as usize] != NONE {
                self.bigrams.insert(key, node_of[id as usize]);
            }
        }
    }

    /// The main loop of Alg 4.3.
    fn run(&mut self) {
        let n = self.s.len();
        let mut i = 0usize;
        while i + 1 < n {
            let limit = self.limit[i] as usize;
            if limit <= i + 1 {
                i = limit; // a block's last symbol starts no bigram
                continue;
            }
            let Some(&start) = self.bigrams.get(&bigram(self.s, i)) else {
                i += 1;
                continue;
            };
            self.nodes[start as usize].visited = true;
            let mut node = start;
            let mut len = 2usize;
            i = loop {
                let at = i + len; // the event that would extend the pattern
                if at >= limit {
                    break limit; // a delimiter or the end: read on after it
                }
                if !self.nodes[node as usize].expanded {
                    self.expand(node);
                }
                let symbol = self.s[at];
                let Some(&child) = self.children.get(&extension(node, symbol)) else {
                    break at; // occurs only here: removed, read on from the failing event
                };
                let c = &mut self.nodes[child as usize];
                if c.rejected {
                    break if c.jump != NONE { c.jump as usize } else { at };
                }
                if !c.visited {
                    c.visited = true;
                    self.nodes[node as usize].absorbed.push(symbol);
                }
                node = child;
                len += 1;
            };
        }
    }

    /// The symbol after the occurrence at `p` of a pattern of length `len`, if in its block.
    fn next_symbol(&self, p: u32, len: u32) -> Option<Symbol> {
        let at = (p + len) as usize;
        (at < self.limit[p as usize] as usize).then(|| self.s[at])
    }

    /// The bucket of extensions by `symbol`, created empty on first use.
    fn bucket(&mut self, symbol: Symbol) -> u32 {
        let fresh = self.buckets.len() as u32;
        let slot = *self.bucket_of.entry(symbol).or_insert(fresh);
        if slot == fresh {
            self.buckets.push(Bucket {
                symbol,
                count: 0,
                overlap: 0,
                distance: 0,
                last: 0,
            });
            match self.lists.get_mut(slot as usize) {
                Some(list) => list.clear(),
                None => self.lists.push(Vec::new()),
            }
        }
        slot
    }

    /// Puts `piece` (consecutive prefix positions, all followed by the bucket's symbol) into
    /// bucket `slot`; `previous` is the slot and position of the prefix position before it.
    fn add(&mut self, slot: u32, piece: Run, previous: (u32, u32), len: u32) {
        let b = &mut self.buckets[slot as usize];
        // Adjacent prefix positions that both extend and lie closer than the extension's
        // length overlap: the one before the piece, and those inside it.
        if previous.0 == slot && piece.start - previous.1 < len + 1 {
            b.overlap += 1;
            if b.distance == 0 {
                b.distance = piece.start - previous.1;
            }
        }
        if piece.more > 0 {
            b.overlap += piece.more as u32;
            if b.distance == 0 {
                b.distance = piece.step as u32;
            }
        }
        b.count += piece.count();
        b.last = piece.last();
        push_run(&mut self.lists[slot as usize], 0, piece, len + 1);
    }

    /// Computes all extensions of `node` at once: its positions bucketed by the next symbol,
    /// with the overlap count and distance of the thesis's rule for each bucket.
    fn expand(&mut self, node: u32) {
        let (first, runs, len) = {
            let n = &mut self.nodes[node as usize];
            n.expanded = true;
            (n.first, n.runs as usize, n.len)
        };
        self.bucket_of.clear();
        self.buckets.clear();
        let mut previous = (NONE, 0u32);
        for r in first..first + runs {
            let run = self.arena[r];
            if run.more > 0 {
                // All but the last are followed by the symbol inside the next occurrence.
                let head = Run {
                    more: run.more - 1,
                    ..run
                };
                let slot = self.bucket(self.s[(run.start + len) as usize]);
                self.add(slot, head, previous, len);
                previous = (slot, head.last());
            }
            let p = run.last();
            let slot = match self.next_symbol(p, len) {
                Some(symbol) => {
                    let slot = self.bucket(symbol);
                    self.add(slot, Run::single(p), previous, len);
                    slot
                }
                None => NONE, // the extension would cross a delimiter or the end
            };
            previous = (slot, p);
        }
        // Extensions that occur twice or more become nodes.
        for b in 0..self.buckets.len() {
            let bucket = self.buckets[b];
            if bucket.count < 2 {
                continue;
            }
            let matches = bucket.count as i64 - 1;
            let overlap = bucket.overlap as i64;
            let rejected = overlap > 0 && overlap > matches - bucket.distance as i64;
            let jump = if overlap > 0 && overlap == matches {
                bucket.last + bucket.distance
            } else {
                NONE
            };
            let id = self.nodes.len() as u32;
            let first = self.arena.len();
            self.arena.extend_from_slice(&self.lists[b]);
            self.nodes.push(Node {
                first,
                runs: self.lists[b].len() as u32,
                len: len + 1,
                expanded: false,
                visited: false,
                rejected,
                jump,
                absorbed: Vec::new(),
            });
            self.children.insert(extension(node, bucket.symbol), id);
        }
    }

    /// The reported patterns as (length, positions): met patterns of at least `min_len`
    /// symbols with two or more remaining instances.
    ///
    /// Occurrences closer than the pattern's length form a chain that counts as one instance,
    /// at its first position (the thesis's `matches - overlap`); a chain is absorbed as a
    /// whole when an accepted extension absorbed any of its occurrences.
    fn patterns(&self, min_len: usize) -> Vec<(u32, Vec<u32>)> {
        let mut out = Vec::new();
        for node in &self.nodes {
            if !node.visited || (node.len as usize) < min_len {
                continue;
            }
            let runs = &self.arena[node.first..node.first + node.runs as usize];
            let absorbed =
                |symbol: Option<Symbol>| symbol.is_some_and(|s| node.absorbed.contains(&s));
            // A run's positions but the last are followed by the symbol after its first.
            let run_absorbed = |run: &Run| {
                (run.more > 0 && absorbed(Some(self.s[(run.start + node.len) as usize])))
                    || absorbed(self.next_symbol(run.last(), node.len))
            };
            let mut kept = Vec::new();
            let mut chain = 0;
            while chain < runs.len() {
                let mut end = chain + 1;
                let mut hit = run_absorbed(&runs[chain]);
                while end < runs.len() && runs[end].start - runs[end - 1].last() < node.len {
                    hit |= run_absorbed(&runs[end]);
                    end += 1;
                }
                if !hit {
                    kept.push(runs[chain].start);
                }
                chain = end;
            }
            if kept.len() >= 2 {
                out.push((node.len, kept));
            }
        }
        out
    }
}

fn bigram(s: &[Symbol], p: usize) -> u64 {
    (s[p] as u64) << 32 | s[p + 1] as u64
}

fn extension(node: u32, symbol: Symbol) -> u64 {
    (node as u64) << 32 | symbol as u64
}

/// A maximal repeat as a suffix tree reports it: every occurrence, overlapping ones included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainRepeat {
    /// The repeated sequence.
    pub symbols: Vec<Symbol>,
    /// Input index of every occurrence, ascending.
    pub positions: Vec<usize>,
}

/// The plain maximal repeats of `events` (Gusfield's definition: occurs twice or more, and
/// can be extended neither to the right nor to the left at all occurrences at once), of at
/// least `min_len` symbols, never crossing a delimiter. This is what the thesis compares
/// against (a suffix tree); it reports the nested `abcd`, `abcdabcd`, ... repeats that the
/// n-gram lookup avoids. Built on a suffix array (prefix doubling, O(n log² n)) and its LCP
/// intervals; ordered by first position, then by length.
pub fn plain_maximal_repeats(events: &[Event], min_len: usize) -> Vec<PlainRepeat> {
    let min_len = min_len.max(1);
    let sa = SuffixArray::new(events);
    let n = sa.text.len();
    let mut out = Vec::new();
    if n == 0 {
        return out;
    }
    // The symbol left of each suffix; the text's start is a context of its own (delimiters
    // already are, being unique).
    let left: Vec<u64> = sa
        .order
        .iter()
        .map(|&p| if p == 0 { u64::MAX } else { sa.text[p - 1] })
        .collect();
    // changes[j]: how many k in 1..=j have a left symbol different from k - 1's.
    let mut changes = vec![0usize; n];
    for j in 1..n {
        changes[j] = changes[j - 1] + (left[j] != left[j - 1]) as usize;
    }
    // Every LCP interval [lb, rb] with value l > 0 is a right-maximal repeat; it is maximal
    // when its suffixes do not all have the same left symbol.
    let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
    for i in 1..=n {
        let l = if i < n { sa.lcp[i] } else { 0 };
        let mut lb = i - 1;
        while l < stack.last().unwrap().0 {
            let (value, start) = stack.pop().unwrap();
            let rb = i - 1;
            if value >= min_len && changes[rb] > changes[start] {
                let first = sa.order[start];
                let mut positions: Vec<usize> = sa.order[start..=rb].to_vec();
                positions.sort_unstable();
                out.push(PlainRepeat {
                    symbols: sa.text[first..first + value]
                        .iter()
                        .map(|&s| s as Symbol)
                        .collect(),
                    positions,
                });
            }
            lb = start;
        }
        if l > stack.last().unwrap().0 {
            stack.push((l, lb));
        }
    }
    out.sort_by_key(|r| (r.positions[0], r.symbols.len()));
    out
}

/// A suffix array over events, with each delimiter a symbol of its own.
pub(crate) struct SuffixArray {
    /// MPI symbols as themselves; the k-th delimiter as 2^32 + k.
    text: Vec<u64>,
    /// Suffix start positions in lexicographic order.
    order: Vec<usize>,
    /// lcp[j]: the longest common prefix of suffixes order[j - 1] and order[j]; lcp[0] = 0.
    lcp: Vec<usize>,
}

impl SuffixArray {
    pub(crate) fn new(events: &[Event]) -> SuffixArray {
        let mut delimiters = 0u64;
        let text: Vec<u64> = events
            .iter()
            .map(|e| match *e {
                Event::Mpi(s) => s as u64,
                Event::Delimiter => {
                    delimiters += 1;
                    (1 << 32) + delimiters
                }
            })
            .collect();
        let n = text.len();
        let mut order: Vec<usize> = (0..n).collect();
        // Prefix doubling: rank by the first k symbols, then by the first 2k.
        let mut rank: Vec<u64> = text.clone();
        let mut k = 1;
        let mut next_rank = vec![0u64; n];
        if n > 1 {
            loop {
                let key = |p: usize| (rank[p], if p + k < n { rank[p + k] + 1 } else { 0 });
                order.sort_unstable_by_key(|&p| key(p));
                next_rank[order[0]] = 0;
                for j in 1..n {
                    next_rank[order[j]] =
                        next_rank[order[j - 1]] + (key(order[j]) != key(order[j - 1])) as u64;
                }
                std::mem::swap(&mut rank, &mut next_rank);
                // Done when all ranks differ, or the compared prefixes cover every suffix.
                if rank[order[n - 1]] as usize == n - 1 || k >= n {
                    break;
                }
                k *= 2;
            }
        }
        // Kasai's LCP.
        let mut lcp = vec![0usize; n];
        let mut position = vec![0usize; n];
        for (j, &p) in order.iter().enumerate() {
            position[p] = j;
        }
        let mut h = 0usize;
        for p in 0..n {
            let j = position[p];
            if j == 0 {
                h = 0;
                continue;
            }
            let q = order[j - 1];
            while p + h < n && q + h < n && text[p + h] == text[q + h] {
                h += 1;
            }
            lcp[j] = h;
            h = h.saturating_sub(1);
        }
        SuffixArray { text, order, lcp }
    }

    /// Every position where `pattern` occurs, ascending (overlapping occurrences included).
    #[cfg(test)]
    pub(crate) fn find(&self, pattern: &[Symbol]) -> Vec<usize> {
        let pattern: Vec<u64> = pattern.iter().map(|&s| s as u64).collect();
        let prefix = |p: usize| &self.text[p..(p + pattern.len()).min(self.text.len())];
        let from = self.order.partition_point(|&p| prefix(p) < &pattern[..]);
        let to = self.order.partition_point(|&p| prefix(p) <= &pattern[..]);
        let mut found = self.order[from..to].to_vec();
        found.sort_unstable();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{events, text};
    use super::*;
    use crate::analysis::process_events::{Alphabet, EventKey};

    fn raw() -> Options {
        Options {
            remove_tandems: false,
            min_len: 2,
        }
    }

    /// (pattern as letters, positions) of every pattern.
    fn summary(patterns: &[ProcessPattern]) -> Vec<(String, Vec<usize>)> {
        patterns
            .iter()
            .map(|p| (text(&p.symbols), p.positions.clone()))
            .collect()
    }

    /// Fig 4.7/4.8: the thesis's events, as interned symbols.
    fn figure_4_8(alphabet: &mut Alphabet) -> Vec<Event> {
        "S2 S3 R2 S5 S2 S3 R2 S2 S3 R2 S2 S3 R2 S4 S2 S3 R2"
            .split(' ')
            .map(|name| {
                let peer = name[1..].parse().unwrap();
                Event::Mpi(alphabet.intern(if name.starts_with('S') {
                    EventKey::Send(peer)
                } else {
                    EventKey::Receive(peer)
                }))
            })
            .collect()
    }

    #[test]
    fn figure_4_8_finds_s2s3r2_five_times() {
        let mut alphabet = Alphabet::default();
        let events = figure_4_8(&mut alphabet);
        let found = detect(&events, &raw());
        assert_eq!(found.len(), 1);
        let p = &found[0];
        assert_eq!(alphabet.render(&p.symbols), "S2 S3 R2");
        // 1-based 1, 5, 8, 11, 15 in the thesis.
        assert_eq!(p.positions, vec![0, 4, 7, 10, 14]);
        assert_eq!(p.ends, vec![3, 7, 10, 13, 17]);
        assert_eq!(p.frequency(), 5);
        assert!(p.repeats.is_empty());
    }

    #[test]
    fn figure_4_8_after_tandem_removal() {
        // S2S3R2 three times in a row (1-based 5..13) is a tandem: its general form occurs
        // three times, the middle occurrence covering the three copies.
        let mut alphabet = Alphabet::default();
        let events = figure_4_8(&mut alphabet);
        let found = detect(&events, &Options::default());
        assert_eq!(found.len(), 1);
        let p = &found[0];
        assert_eq!(alphabet.render(&p.symbols), "S2 S3 R2");
        assert_eq!(p.positions, vec![0, 4, 14]);
        assert_eq!(p.ends, vec![3, 13, 17]);
        assert_eq!(
            p.repeats,
            vec![PatternRepeat {
                occurrence: 1,
                offset: 0,
                unit_len: 3,
                copies: 3,
                start: 4,
                end: 13
            }]
        );
        assert_eq!(p.repeats_of(1).len(), 1);
        assert!(p.repeats_of(0).is_empty());
    }

    const WRF: &str = "abcdabcdabcdabcdabcdabcdabcdabcdabcd";

    #[test]
    fn table_4_7_reports_abcd_once_with_nine_occurrences() {
        let found = detect(&events(WRF), &raw());
        assert_eq!(
            summary(&found),
            vec![("abcd".to_string(), (0..9).map(|k| 4 * k).collect())]
        );
        assert_eq!(found[0].ends, (1..10).map(|k| 4 * k).collect::<Vec<_>>());
    }

    #[test]
    fn table_4_7_the_suffix_tree_view_nests_eight_repeats() {
        // What the thesis's suffix tree reports: (abcd)^j for j = 1..8, with 10 - j
        // occurrences each.
        let plain = plain_maximal_repeats(&events(WRF), 2);
        let got: Vec<(String, usize)> = plain
            .iter()
            .map(|r| (text(&r.symbols), r.positions.len()))
            .collect();
        let want: Vec<(String, usize)> = (1..=8).map(|j| ("abcd".repeat(j), 10 - j)).collect();
        assert_eq!(got, want);
        assert_eq!(
            plain[1].positions,
            (0..8).map(|k| 4 * k).collect::<Vec<_>>()
        );
    }

    #[test]
    fn table_4_7_after_tandem_removal_nothing_repeats() {
        // abcd x9 is one tandem run; its general form occurs once, so it is no pattern.
        assert!(detect(&events(WRF), &Options::default()).is_empty());
    }

    #[test]
    fn syntactic_mining_picks_the_wrong_start() {
        // Thesis §4.4: in R3 (S2 S3 R2 R3)^4 the lookup reports R3S2S3R2, not the real
        // S2S3R2R3, because the trace happens to start with R3.
        let found = detect(&events("rstursturstursturs"), &raw());
        // r=R3, s=S2, t=S3, u=R2 (letters stand in for the symbols).
        assert_eq!(
            summary(&found),
            vec![("rstu".to_string(), vec![0, 4, 8, 12])]
        );
    }

    #[test]
    fn patterns_never_cross_a_delimiter() {
        // ab also occurs at 8, but once it is absorbed into abc at 0 and 4 it is left alone.
        assert_eq!(
            summary(&detect(&events("abc|abc|ab"), &raw())),
            vec![("abc".to_string(), vec![0, 4])]
        );
        // cb and ca exist only across delimiters.
        assert_eq!(
            summary(&detect(&events("abc|b|abc|b"), &raw())),
            vec![("abc".to_string(), vec![0, 6])]
        );
        assert!(detect(&events("a|b|a|b"), &raw()).is_empty());
        assert!(detect(&events(""), &raw()).is_empty());
        assert!(detect(&events("|||"), &Options::default()).is_empty());
    }

    /// One Sweep3D-like iteration of Fig 4.5: four wavefronts (ab, ac, bd, ad) three times
    /// each.
    const ITERATION: &str = "abababacacacbdbdbdadadad";

    #[test]
    fn figure_4_5_the_suffix_tree_list_is_that_of_three_full_iterations() {
        // The thesis's 16 suffix-tree repeats (with single symbols) are exactly the maximal
        // repeats of three full iterations. The sequence printed in Fig 4.5 has 70 symbols,
        // not 72: its first iteration lacks one `ad`, and on it a, d, da, dad, ... come out
        // one lower and the 48-symbol repeat does not exist [thesis error].
        let plain = plain_maximal_repeats(&events(&ITERATION.repeat(3)), 1);
        let mut got: Vec<(String, usize)> = plain
            .iter()
            .map(|r| (text(&r.symbols), r.positions.len()))
            .collect();
        got.sort();
        let mut thesis: Vec<(String, usize)> = [
            ("a", 27),
            ("aba", 9),
            ("ababa", 6),
            (ITERATION, 3),
            ("ac", 9),
            ("acac", 6),
            ("b", 18),
            ("bd", 9),
            ("bdbd", 6),
            ("da", 11),
            ("dad", 9),
            ("dada", 8),
            ("dadad", 6),
            ("dadada", 5),
            ("d", 18),
            (&ITERATION.repeat(2), 2),
        ]
        .iter()
        .map(|&(s, n)| (s.to_string(), n))
        .collect();
        thesis.sort();
        assert_eq!(got, thesis);
    }

    #[test]
    fn figure_4_5_the_lookup_finds_the_global_pattern_only() {
        // At 0 the pattern grows ab → aba (matches 8, overlap 6, distance 2: 6 > 8 - 2 is
        // false, the thesis's own worked example, so it is kept) → ... → the whole
        // iteration. One symbol more (at 0 and 24) overlaps itself (matches 1, overlap 1):
        // rejected, and as every match overlaps, the pointer jumps to 24 + 24 = 48, where it
        // walks the iteration to the end. The prefixes were absorbed and ac, bd, ad were never
        // met, so they count zero: syntactically the wavefronts are missed, as the thesis
        // says of its n-gram method.
        let found = detect(&events(&ITERATION.repeat(3)), &raw());
        assert_eq!(
            summary(&found),
            vec![(ITERATION.to_string(), vec![0, 24, 48])]
        );
    }

    #[test]
    fn figure_4_5_as_printed() {
        // On the 70-symbol sequence the figure prints (first iteration with `adad`), the
        // global pattern comes out in the shape of the short iteration, three times, and a
        // rotation of it that starts on the last `ad` of the previous iteration (the
        // "wrong start" of §4.4), twice. No tandem removal, no delimiters: what a purely
        // syntactic run gives.
        let printed = "abababacacacbdbdbdadad\
                       abababacacacbdbdbdadadad\
                       abababacacacbdbdbdadadad";
        let found = detect(&events(printed), &raw());
        assert_eq!(
            summary(&found),
            vec![
                ("abababacacacbdbdbdadad".to_string(), vec![0, 22, 46]),
                ("adabababacacacbdbdbdadad".to_string(), vec![20, 44]),
            ]
        );
        // With tandem removal the three iterations collapse into one: nothing repeats.
        assert!(detect(&events(printed), &Options::default()).is_empty());
    }

    /// Total copies of each wavefront unit over all occurrences of `pattern`, by unit.
    fn wavefront_totals(pattern: &ProcessPattern) -> Vec<(String, usize)> {
        let mut totals: Vec<(String, usize)> = Vec::new();
        for r in &pattern.repeats {
            let unit = text(&pattern.symbols[r.offset..r.offset + r.unit_len]);
            match totals.iter_mut().find(|(u, _)| *u == unit) {
                Some((_, n)) => *n += r.copies,
                None => totals.push((unit, r.copies)),
            }
        }
        totals
    }

    #[test]
    fn figure_4_5_routine_directed_with_tandem_removal() {
        // The valid line of Fig 4.5 is ab(9) ac(9) bd(9) ad(9) and the global pattern (3).
        // The thesis cannot have both as process patterns: a routine delimiter around each
        // wavefront block keeps the global pattern from forming (it would cross them), and
        // without such delimiters the wavefronts are tandem runs inside it. Here, with one
        // routine call per iteration (the sweep routine) and tandem removal, the global
        // pattern comes out in general form three times, and the wavefronts as its repeats,
        // 3 copies per occurrence: 9 each in all.
        let sweeps = format!("|{ITERATION}|{ITERATION}|{ITERATION}");
        let found = detect(&events(&sweeps), &Options::default());
        assert_eq!(found.len(), 1);
        let global = &found[0];
        assert_eq!(text(&global.symbols), "abacbdad");
        assert_eq!(global.positions, vec![1, 26, 51]);
        assert_eq!(global.ends, vec![25, 50, 75]);
        assert_eq!(
            wavefront_totals(global),
            vec![
                ("ab".to_string(), 9),
                ("ac".to_string(), 9),
                ("bd".to_string(), 9),
                ("ad".to_string(), 9)
            ]
        );
        assert_eq!(
            global.repeats_of(1),
            &[
                PatternRepeat {
                    occurrence: 1,
                    offset: 0,
                    unit_len: 2,
                    copies: 3,
                    start: 26,
                    end: 32
                },
                PatternRepeat {
                    occurrence: 1,
                    offset: 2,
                    unit_len: 2,
                    copies: 3,
                    start: 32,
                    end: 38
                },
                PatternRepeat {
                    occurrence: 1,
                    offset: 4,
                    unit_len: 2,
                    copies: 3,
                    start: 38,
                    end: 44
                },
                PatternRepeat {
                    occurrence: 1,
                    offset: 6,
                    unit_len: 2,
                    copies: 3,
                    start: 44,
                    end: 50
                },
            ]
        );
        // On the sequence as printed, the first iteration has ad twice: ad totals 8.
        let printed = "|abababacacacbdbdbdadad|abababacacacbdbdbdadadad|abababacacacbdbdbdadadad";
        let found = detect(&events(printed), &Options::default());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].positions, vec![1, 24, 49]);
        assert_eq!(wavefront_totals(&found[0])[3], ("ad".to_string(), 8));
    }

    #[test]
    fn figure_4_5_with_a_delimiter_around_each_wavefront() {
        // Each wavefront block in its own routine call: the four wavefronts are patterns,
        // three occurrences of three copies each, and no global pattern can form.
        let blocks = "|ababab|acacac|bdbdbd|adadad".repeat(3);
        let found = detect(&events(&blocks), &Options::default());
        let got: Vec<(String, Vec<usize>, Vec<usize>)> = found
            .iter()
            .map(|p| {
                let copies = p.repeats.iter().map(|r| r.copies).collect();
                (text(&p.symbols), p.positions.clone(), copies)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("ab".to_string(), vec![1, 29, 57], vec![3, 3, 3]),
                ("ac".to_string(), vec![8, 36, 64], vec![3, 3, 3]),
                ("bd".to_string(), vec![15, 43, 71], vec![3, 3, 3]),
                ("ad".to_string(), vec![22, 50, 78], vec![3, 3, 3]),
            ]
        );
        assert_eq!(found[0].ends, vec![7, 35, 63]);
    }

    #[test]
    fn many_delimited_iterations_map_back_exactly() {
        // 3000 iterations of `(S1 R1)^(1 + i % 3) S2 R2 B`, one routine call each (s=S1,
        // r=R1, t=S2, u=R2, B=a collective): one pattern in general form, at every iteration.
        let mut text_form = String::new();
        let mut starts = Vec::new();
        for i in 0..3000 {
            text_form.push('|');
            starts.push(text_form.len());
            text_form.push_str(&"sr".repeat(1 + i % 3));
            text_form.push_str("tuB");
        }
        let evs = events(&text_form);
        let found = detect(&evs, &Options::default());
        assert_eq!(found.len(), 1);
        let p = &found[0];
        assert_eq!(text(&p.symbols), "srtuB");
        assert_eq!(p.positions, starts);
        let ends: Vec<usize> = (0..3000).map(|i| starts[i] + 2 * (1 + i % 3) + 3).collect();
        assert_eq!(p.ends, ends);
        // Iterations with two or three sr copies carry the run; the others do not.
        assert_eq!(p.repeats.len(), 2000);
        assert_eq!(p.repeats.iter().map(|r| r.copies).sum::<usize>(), 5000);
        assert!(p.repeats.iter().all(|r| r.offset == 0 && r.unit_len == 2));
        // Without tandem removal the three shapes are patterns of their own. Only an
        // occurrence where a longer pattern starts is absorbed, so srtuB keeps the
        // iterations that end with it too: all 3000 (the thesis counts the same way).
        let raw_found = detect(&evs, &raw());
        let shapes: Vec<(String, usize)> = raw_found
            .iter()
            .map(|p| (text(&p.symbols), p.frequency()))
            .collect();
        assert_eq!(
            shapes,
            vec![
                ("srtuB".to_string(), 3000),
                ("srsrtuB".to_string(), 2000),
                ("srsrsrtuB".to_string(), 1000)
            ]
        );
    }

    #[test]
    fn long_periodic_runs_in_three_places() {
        // (ab)^20000 three times, each ended by its own symbol, without tandem removal. The
        // overlap rule accepts every longer period-shifted pattern here (three chains, distance
        // 2), which costs O(n^2) position by position; with runs it is linear.
        let k = 20_000;
        let mut evs = Vec::new();
        for end in ['x', 'y', 'z'] {
            for _ in 0..k {
                evs.push(Event::Mpi('a' as Symbol));
                evs.push(Event::Mpi('b' as Symbol));
            }
            evs.push(Event::Mpi(end as Symbol));
        }
        let found = detect(&evs, &raw());
        let got: Vec<(usize, Vec<usize>)> = found
            .iter()
            .map(|p| (p.symbols.len(), p.positions.clone()))
            .collect();
        // The whole run three times; and the last ab of each run, which no accepted
        // extension starts at (only the occurrences where a longer pattern starts are
        // absorbed, as in the thesis).
        assert_eq!(
            got,
            vec![
                (2 * k, vec![0, 2 * k + 1, 4 * k + 2]),
                (2, vec![2 * k - 2, 4 * k - 1, 6 * k])
            ]
        );
    }

    /// Every maximal repeat by brute force: each distinct substring that occurs twice and
    /// is not always preceded, nor always followed, by the same symbol.
    fn brute_force_maximal(events: &[Event], min_len: usize) -> Vec<(Vec<Symbol>, Vec<usize>)> {
        let n = events.len();
        let mpi = |e: &Event| match *e {
            Event::Mpi(s) => Some(s),
            Event::Delimiter => None,
        };
        let mut seen: Vec<(Vec<Symbol>, Vec<usize>)> = Vec::new();
        for len in min_len.max(1)..=n {
            for start in 0..=n - len {
                let Some(w) = events[start..start + len]
                    .iter()
                    .map(mpi)
                    .collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                if seen.iter().any(|(s, _)| *s == w) {
                    continue;
                }
                let at: Vec<usize> = (0..=n - len)
                    .filter(|&p| {
                        events[p..p + len]
                            .iter()
                            .map(mpi)
                            .eq(w.iter().map(|&s| Some(s)))
                    })
                    .collect();
                if at.len() < 2 {
                    continue;
                }
                // A delimiter or an end is a context of its own: never shared.
                let left = |p: usize| if p == 0 { None } else { mpi(&events[p - 1]) };
                let right = |p: usize| events.get(p + len).and_then(mpi);
                let same_left = left(at[0]).is_some() && at.iter().all(|&p| left(p) == left(at[0]));
                let same_right =
                    right(at[0]).is_some() && at.iter().all(|&p| right(p) == right(at[0]));
                if !same_left && !same_right {
                    seen.push((w, at));
                }
            }
        }
        seen.sort();
        seen
    }

    fn arbitrary_events() -> impl proptest::strategy::Strategy<Value = Vec<Event>> {
        use proptest::prelude::*;
        proptest::collection::vec(
            prop_oneof![
                12 => (0u32..3).prop_map(Event::Mpi),
                1 => Just(Event::Delimiter),
            ],
            0..90,
        )
    }

    proptest::proptest! {
        /// The suffix-array reference agrees with brute force.
        #[test]
        fn plain_repeats_are_the_maximal_repeats(
            events in arbitrary_events(),
            min_len in 1usize..4,
        ) {
            let mut got: Vec<(Vec<Symbol>, Vec<usize>)> = plain_maximal_repeats(&events, min_len)
                .into_iter()
                .map(|r| (r.symbols, r.positions))
                .collect();
            got.sort();
            proptest::prop_assert_eq!(got, brute_force_maximal(&events, min_len));
        }

        /// Every reported pattern occurs at every reported position (checked against the
        /// suffix array), never crosses a delimiter, has at least two occurrences that do not
        /// overlap, and with tandem removal covers its runs.
        #[test]
        fn detected_patterns_occur_where_reported(
            events in arbitrary_events(),
            remove_tandems in proptest::bool::ANY,
            min_len in 2usize..4,
        ) {
            let options = Options { remove_tandems, min_len };
            let found = detect(&events, &options);
            let sa = SuffixArray::new(&events);
            for p in &found {
                let len = p.symbols.len();
                proptest::prop_assert!(len >= min_len);
                proptest::prop_assert!(p.frequency() >= 2);
                proptest::prop_assert_eq!(p.positions.len(), p.ends.len());
                let everywhere = sa.find(&p.symbols);
                let mut free_from = 0;
                for (k, (start, end)) in p.occurrences().enumerate() {
                    proptest::prop_assert!(free_from <= start && start + len <= end);
                    proptest::prop_assert!(end <= events.len());
                    free_from = end;
                    proptest::prop_assert!(events[start..end].iter().all(|e| *e != Event::Delimiter));
                    proptest::prop_assert_eq!(events[start], Event::Mpi(p.symbols[0]));
                    proptest::prop_assert_eq!(events[end - 1], Event::Mpi(p.symbols[len - 1]));
                    if remove_tandems {
                        // The general form is a subsequence of the occurrence.
                        let mut rest = events[start..end].iter();
                        proptest::prop_assert!(p
                            .symbols
                            .iter()
                            .all(|&s| rest.any(|e| *e == Event::Mpi(s))));
                        for r in p.repeats_of(k) {
                            proptest::prop_assert!(r.offset + r.unit_len <= len && r.copies >= 2);
                            proptest::prop_assert!(start <= r.start && r.end <= end);
                            proptest::prop_assert!(r.end - r.start >= r.copies * r.unit_len);
                        }
                    } else {
                        proptest::prop_assert_eq!(end, start + len);
                        proptest::prop_assert!(everywhere.binary_search(&start).is_ok());
                    }
                }
                if !remove_tandems {
                    proptest::prop_assert!(p.repeats.is_empty());
                }
            }
        }
    }
}
