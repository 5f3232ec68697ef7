//! Tandem-repeat removal (thesis Alg 4.5 and 4.6), keeping the repeat counts.
//!
//! A tandem repeat is a run of adjacent copies of one unit: `ababab` is `ab` three times.
//! Loops leave them in a process trace, and their number of iterations varies, so the thesis
//! removes every copy but the first before mining patterns: `abababcdcdefef` becomes the
//! *general form* `abcdef`. Removing a run can make two neighbouring units equal, so the
//! removal repeats until the length stops changing (`xababyxaby` → `xabyxaby` → `xaby`).
//!
//! The candidate unit at position `i` is found as in Alg 4.6: it runs from `i` to the next
//! occurrence of the bigram that starts at `i`. The copies that follow are then counted.
//!
//! Differences from the thesis, all deliberate:
//! * the counts are kept ([`TandemRun`]) instead of thrown away, together with the input index
//!   of every kept symbol, so that results on the reduced sequence map back to the input;
//! * Alg 4.6 stops one copy early (`i < positions.size - 2`: the Fig 4.11 run needs three
//!   iterations) and accepts a copy that overlaps the previous one; here every further copy
//!   must start exactly where the previous one ends;
//! * a unit of one symbol with only two copies (`aa`) is missed by the bigram rule, because
//!   the bigram `aa` occurs once; it is tried when the bigram rule finds no run;
//! * copies are compared by a rolling hash first and symbol by symbol only when the hashes
//!   agree, so a pass costs O(n) however long the units are;
//! * a run found in a later pass may not cut through a run found earlier (it must hold it
//!   inside one copy, or lie inside its unit), so every run stays a well-formed nest.
//!
//! Runs that lie inside a removed copy are dropped: their input is covered by the outer run
//! (`xababyxabababy` keeps only the `ab`×2 of the first copy of `xaby`×2). The general form
//! is lossy in that sense, as in the thesis.

use crate::hash::FxHashMap;

use super::Symbol;

/// One run of adjacent copies of a unit that the removal collapsed to its first copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TandemRun {
    /// Where the kept copy (the unit) starts, in the reduced sequence.
    pub start: usize,
    /// Length of the unit, in reduced symbols.
    pub unit_len: usize,
    /// Number of copies in the input, the kept one included (at least 2).
    pub copies: usize,
    /// Exclusive end in the input of the last copy. The run covers the input from
    /// `origin[start]` to here.
    pub end: usize,
}

/// The result of [`remove_tandems`]: the reduced sequence and how it maps to the input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reduction {
    /// The sequence with every tandem run collapsed to its first copy.
    pub symbols: Vec<Symbol>,
    /// For each reduced position, the input index of the symbol it came from (ascending).
    pub origin: Vec<usize>,
    /// The collapsed runs, by start; a run that encloses another comes first.
    pub runs: Vec<TandemRun>,
}

impl Reduction {
    /// The input range `[start, end)` that the reduced span `[from, to)` stands for: from its
    /// first symbol to its last one, plus the removed copies of every run whose unit lies in
    /// the span. (The copies of a run whose unit starts before `from` and ends inside the span
    /// are inside the range only when the span goes on after that unit.) `from < to <= len`.
    pub fn input_range(&self, from: usize, to: usize) -> (usize, usize) {
        assert!(
            from < to && to <= self.symbols.len(),
            "bad reduced span {from}..{to}"
        );
        let mut end = self.origin[to - 1] + 1;
        // Runs attached to the span's last symbol are those whose unit ends there; their
        // copies follow it in the input.
        let first = self.runs.partition_point(|r| r.start < from);
        for run in &self.runs[first..] {
            if run.start >= to {
                break;
            }
            if run.start + run.unit_len == to {
                end = end.max(run.end);
            }
        }
        (self.origin[from], end)
    }
}

/// Removes every tandem repeat from `input`, repeating until the length stops changing, and
/// keeps the counts. Fig 4.11: `abcdabcdabcdmabcd` → `abcdmabcd` with the run `abcd`×3 at 0.
pub fn remove_tandems(input: &[Symbol]) -> Reduction {
    reduce(input, &vec![0; input.len()])
}

/// [`remove_tandems`] on a sequence cut into blocks (`block[i]` labels position `i`; a block
/// boundary lies wherever two neighbours' labels differ, so a label may come back, as an
/// enclosing routine call's does after a nested one): no unit and no run crosses a boundary.
pub(crate) fn reduce(input: &[Symbol], block: &[u32]) -> Reduction {
    assert_eq!(input.len(), block.len());
    let mut cur = Reduction {
        symbols: input.to_vec(),
        origin: (0..input.len()).collect(),
        runs: Vec::new(),
    };
    // Number the blocks in order, so that equal numbers are one contiguous block: the runs'
    // checks compare the labels at their two ends only.
    let mut cur_block = Vec::with_capacity(block.len());
    let mut number = 0u32;
    for (i, &label) in block.iter().enumerate() {
        if i > 0 && label != block[i - 1] {
            number += 1;
        }
        cur_block.push(number);
    }
    loop {
        let found = find_runs(&cur, &cur_block);
        if found.is_empty() {
            return cur;
        }
        cur = collapse(&cur, &mut cur_block, &found);
    }
}

/// A run found by one pass, in that pass's coordinates.
struct Found {
    start: usize,
    unit_len: usize,
    copies: usize,
    end: usize,
}

const NONE: usize = usize::MAX;

/// One left-to-right pass of Alg 4.5: the runs to collapse, disjoint and by start.
fn find_runs(cur: &Reduction, block: &[u32]) -> Vec<Found> {
    let s = &cur.symbols;
    let n = s.len();
    let mut found = Vec::new();
    if n < 2 {
        return found;
    }

    // The next occurrence of the bigram at each position (Alg 4.5's bigram table; a bigram
    // seen once has none). Bigrams across a block boundary are never candidates.
    let mut next = vec![NONE; n];
    let mut last: FxHashMap<u64, usize> = FxHashMap::default();
    for p in (0..n - 1).rev() {
        if block[p] != block[p + 1] {
            continue;
        }
        let key = (s[p] as u64) << 32 | s[p + 1] as u64;
        if let Some(q) = last.insert(key, p) {
            next[p] = q;
        }
    }

    let hash = PrefixHash::new(s);
    let enclosing = innermost_units(&cur.runs, n);
    let attached = attached_runs(&cur.runs);

    let mut i = 0;
    while i + 1 < n {
        // Alg 4.6's unit runs to the next occurrence of the bigram at i; a one-symbol unit
        // (`aa`) is tried when that gives no run.
        let mut best = (0, 0);
        let by_bigram = (next[i] != NONE).then(|| next[i] - i);
        let single = (s[i] == s[i + 1]).then_some(1);
        for d in [by_bigram, single].into_iter().flatten() {
            if i + 2 * d > n {
                continue;
            }
            let copies = count_copies(cur, block, &hash, &enclosing, i, d);
            if copies >= 2 {
                best = (d, copies);
                break;
            }
        }
        let (d, copies) = best;
        if copies < 2 {
            i += 1;
            continue;
        }
        // The run ends where its last copy's material ends: that copy's last symbol plus the
        // copies of runs nested in that last copy (not those of a run enclosing this one).
        let last_symbol = i + copies * d - 1;
        let last_copy = i + (copies - 1) * d;
        let mut end = cur.origin[last_symbol] + 1;
        let from = attached.partition_point(|&(at, _)| at < last_symbol);
        for &(_, r) in attached[from..]
            .iter()
            .take_while(|&&(at, _)| at == last_symbol)
        {
            let run = &cur.runs[r];
            if run.start >= last_copy {
                end = end.max(run.end);
            }
        }
        found.push(Found {
            start: i,
            unit_len: d,
            copies,
            end,
        });
        i += copies * d;
    }
    found
}

/// How many adjacent copies of the unit `[i, i + d)` start at `i`: equal by content, in one
/// block, and not cutting an earlier run.
fn count_copies(
    cur: &Reduction,
    block: &[u32],
    hash: &PrefixHash,
    enclosing: &[usize],
    i: usize,
    d: usize,
) -> usize {
    let s = &cur.symbols;
    let n = s.len();
    let unit = hash.get(i, i + d);
    let mut most = 1;
    while i + (most + 1) * d <= n
        && block[i + (most + 1) * d - 1] == block[i]
        && hash.get(i + most * d, i + (most + 1) * d) == unit
        && s[i..i + d] == s[i + most * d..i + (most + 1) * d]
    {
        most += 1;
    }
    fitting_copies(&cur.runs, enclosing, i, d, most, n)
}

/// The largest number of copies (at most `most`) whose boundaries do not cut an earlier run:
/// every earlier unit that strictly contains a copy boundary must contain the whole run.
fn fitting_copies(
    runs: &[TandemRun],
    enclosing: &[usize],
    i: usize,
    d: usize,
    most: usize,
    n: usize,
) -> usize {
    let mut allowed = most; // running minimum of the per-boundary limits
    let mut best = 0;
    for k in 0..=most {
        let b = i + k * d;
        if b < n && enclosing[b] != NONE {
            let run = &runs[enclosing[b]];
            let limit = if run.start > i {
                k.saturating_sub(1) // the unit starts inside the candidate: stop before it
            } else {
                (run.start + run.unit_len - i) / d // stay inside the unit
            };
            allowed = allowed.min(limit);
        }
        if allowed >= k {
            best = k;
        } else {
            break;
        }
    }
    best
}

/// For each position, the innermost earlier unit that strictly contains it (`start < p <
/// start + unit_len`), or `NONE`. Runs nest, so outer-first filling leaves the innermost.
fn innermost_units(runs: &[TandemRun], n: usize) -> Vec<usize> {
    let mut enclosing = vec![NONE; n];
    // `runs` is sorted by start with enclosing runs first.
    for (r, run) in runs.iter().enumerate() {
        for slot in &mut enclosing[run.start + 1..run.start + run.unit_len] {
            *slot = r;
        }
    }
    enclosing
}

/// (last position of the unit, run index) for every run, by position: the runs whose unit
/// ends at a position, whose copies follow that position in the input.
fn attached_runs(runs: &[TandemRun]) -> Vec<(usize, usize)> {
    let mut attached: Vec<(usize, usize)> = runs
        .iter()
        .enumerate()
        .map(|(r, run)| (run.start + run.unit_len - 1, r))
        .collect();
    attached.sort_unstable();
    attached
}

/// Drops all but the first copy of each found run and carries the mapping and the older runs
/// over to the new coordinates.
fn collapse(cur: &Reduction, block: &mut Vec<u32>, found: &[Found]) -> Reduction {
    let n = cur.symbols.len();
    // kept_before[p]: kept positions before p, i.e. p's new index when p is kept.
    let mut keep = vec![true; n];
    for f in found {
        for k in &mut keep[f.start + f.unit_len..f.start + f.copies * f.unit_len] {
            *k = false;
        }
    }
    let mut kept_before = Vec::with_capacity(n + 1);
    let mut count = 0;
    for &k in &keep {
        kept_before.push(count);
        count += k as usize;
    }
    kept_before.push(count);

    let mut next = Reduction {
        symbols: Vec::with_capacity(count),
        origin: Vec::with_capacity(count),
        runs: Vec::with_capacity(cur.runs.len() + found.len()),
    };
    let mut next_block = Vec::with_capacity(count);
    for p in (0..n).filter(|&p| keep[p]) {
        next.symbols.push(cur.symbols[p]);
        next.origin.push(cur.origin[p]);
        next_block.push(block[p]);
    }
    // An older run inside a removed copy is dropped; one that encloses a new run shrinks.
    for run in cur.runs.iter().filter(|r| keep[r.start]) {
        next.runs.push(TandemRun {
            start: kept_before[run.start],
            unit_len: kept_before[run.start + run.unit_len] - kept_before[run.start],
            ..*run
        });
    }
    for f in found {
        next.runs.push(TandemRun {
            start: kept_before[f.start],
            unit_len: f.unit_len,
            copies: f.copies,
            end: f.end,
        });
    }
    next.runs.sort_by(|a, b| {
        (a.start, b.unit_len, b.end).cmp(&(b.start, a.unit_len, a.end)) // enclosing first
    });
    *block = next_block;
    next
}

/// Polynomial prefix hashes modulo the Mersenne prime 2^61 - 1, for O(1) substring compares.
struct PrefixHash {
    prefix: Vec<u64>,
    power: Vec<u64>,
}

const MODULUS: u64 = (1 << 61) - 1;
const BASE: u64 = 0x1f3d_5b79_a2c4_e681 % MODULUS;

fn mul_mod(a: u64, b: u64) -> u64 {
    let product = a as u128 * b as u128;
    let folded = (product & MODULUS as u128) as u64 + (product >> 61) as u64;
    if folded >= MODULUS {
        folded - MODULUS
    } else {
        folded
    }
}

impl PrefixHash {
    fn new(symbols: &[Symbol]) -> PrefixHash {
        let mut prefix = Vec::with_capacity(symbols.len() + 1);
        let mut power = Vec::with_capacity(symbols.len() + 1);
        prefix.push(0);
        power.push(1);
        for &s in symbols {
            let h = mul_mod(*prefix.last().unwrap(), BASE) + s as u64 + 1;
            prefix.push(if h >= MODULUS { h - MODULUS } else { h });
            power.push(mul_mod(*power.last().unwrap(), BASE));
        }
        PrefixHash { prefix, power }
    }

    /// Hash of `symbols[from..to]`.
    fn get(&self, from: usize, to: usize) -> u64 {
        let shifted = mul_mod(self.prefix[from], self.power[to - from]);
        let h = self.prefix[to] + MODULUS - shifted;
        if h >= MODULUS {
            h - MODULUS
        } else {
            h
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{syms, text};
    use super::*;

    fn run(start: usize, unit_len: usize, copies: usize, end: usize) -> TandemRun {
        TandemRun {
            start,
            unit_len,
            copies,
            end,
        }
    }

    #[test]
    fn figure_4_11_abcd_three_times() {
        let r = remove_tandems(&syms("abcdabcdabcdmabcd"));
        assert_eq!(text(&r.symbols), "abcdmabcd");
        assert_eq!(r.origin, vec![0, 1, 2, 3, 12, 13, 14, 15, 16]);
        assert_eq!(r.runs, vec![run(0, 4, 3, 12)]);
        assert_eq!(r.input_range(0, 4), (0, 12));
        assert_eq!(r.input_range(0, 3), (0, 3));
        assert_eq!(r.input_range(2, 6), (2, 14));
        assert_eq!(r.input_range(5, 9), (13, 17));
    }

    #[test]
    fn general_form_abcdef() {
        let r = remove_tandems(&syms("abababcdcdefef"));
        assert_eq!(text(&r.symbols), "abcdef");
        assert_eq!(r.origin, vec![0, 1, 6, 7, 10, 11]);
        assert_eq!(
            r.runs,
            vec![run(0, 2, 3, 6), run(2, 2, 2, 10), run(4, 2, 2, 14)]
        );
        assert_eq!(r.input_range(0, 6), (0, 14));
    }

    #[test]
    fn removal_repeats_until_nothing_changes() {
        // Pass 1 collapses the abab of the second copy; then x..y repeats.
        let r = remove_tandems(&syms("xabyxababy"));
        assert_eq!(text(&r.symbols), "xaby");
        assert_eq!(r.runs, vec![run(0, 4, 2, 10)]);
        // Outer run first in one pass, its inner run in the next: the inner run's end stops
        // at its own last copy, the outer one covers everything.
        let r = remove_tandems(&syms("xababyxababy"));
        assert_eq!(text(&r.symbols), "xaby");
        assert_eq!(r.origin, vec![0, 1, 2, 5]);
        assert_eq!(r.runs, vec![run(0, 4, 2, 12), run(1, 2, 2, 5)]);
        assert_eq!(r.input_range(1, 3), (1, 5));
        assert_eq!(r.input_range(0, 4), (0, 12));
        // A run inside a removed copy is dropped; the outer run covers its input.
        let r = remove_tandems(&syms("xababyxabababy"));
        assert_eq!(text(&r.symbols), "xaby");
        assert_eq!(r.runs, vec![run(0, 4, 2, 14), run(1, 2, 2, 5)]);
    }

    #[test]
    fn single_symbol_units() {
        let r = remove_tandems(&syms("xaay"));
        assert_eq!(text(&r.symbols), "xay");
        assert_eq!(r.runs, vec![run(1, 1, 2, 3)]);
        let r = remove_tandems(&syms("aaaaa"));
        assert_eq!(text(&r.symbols), "a");
        assert_eq!(r.runs, vec![run(0, 1, 5, 5)]);
        // The bigram rule goes first, so the period aab is found before its aa.
        let r = remove_tandems(&syms("aabaabaab"));
        assert_eq!(text(&r.symbols), "ab");
        assert_eq!(r.runs, vec![run(0, 2, 3, 9), run(0, 1, 2, 2)]);
    }

    #[test]
    fn a_later_run_may_not_cut_an_earlier_one() {
        // a (ca)x2 a: the a's of the reduced `acaa` are not adjacent in the input.
        let r = remove_tandems(&syms("aacacaa"));
        assert_eq!(text(&r.symbols), "acaa");
        assert_eq!(r.runs, vec![run(0, 1, 2, 2), run(1, 2, 2, 6)]);
        assert_eq!(r.input_range(2, 4), (3, 7));
        assert_eq!(r.input_range(1, 3), (2, 6));
    }

    #[test]
    fn a_run_inside_the_first_copy_of_a_run_with_the_same_unit() {
        // ab ab aaa b: pass 1 gives (ab)x2 (aaa → a) b = abab, pass 2 (ab)x2 again.
        let r = remove_tandems(&syms("ababaaab"));
        assert_eq!(text(&r.symbols), "ab");
        assert_eq!(r.runs, vec![run(0, 2, 2, 8), run(0, 2, 2, 4)]);
        assert_eq!(r.input_range(0, 2), (0, 8));
    }

    #[test]
    fn nothing_to_remove() {
        for input in ["", "a", "ab", "abcab", "abcdmabcd"] {
            let r = remove_tandems(&syms(input));
            assert_eq!(text(&r.symbols), input);
            assert!(r.runs.is_empty());
            assert_eq!(r.origin, (0..input.len()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn runs_do_not_cross_blocks() {
        let input = syms("abab");
        let r = reduce(&input, &[0, 0, 1, 1]);
        assert_eq!(text(&r.symbols), "abab");
        let r = reduce(&syms("ababab"), &[0, 0, 0, 0, 1, 1]);
        assert_eq!(text(&r.symbols), "abab");
        assert_eq!(r.runs, vec![run(0, 2, 2, 4)]);
        // A label that comes back (the enclosing call after a nested one) is another block:
        // `abab` twice would cross from label 4 back to label 1; only the `ab` pair after
        // the boundary repeats.
        let r = reduce(&syms("abababab"), &[1, 1, 1, 4, 1, 1, 1, 1]);
        assert_eq!(text(&r.symbols), "ababab");
        assert_eq!(r.runs, vec![run(4, 2, 2, 8)]);
    }

    #[test]
    fn the_sweep_sequence_collapses_to_one_iteration() {
        // Fig 4.5: ab, ac, bd, ad three times each (the first copy has ad only twice), three
        // iterations. The iterations collapse too, so the general form is one iteration.
        let input = syms(
            "abababacacacbdbdbdadad\
             abababacacacbdbdbdadadad\
             abababacacacbdbdbdadadad",
        );
        let r = remove_tandems(&input);
        assert_eq!(text(&r.symbols), "abacbdad");
        assert_eq!(
            r.runs,
            vec![
                run(0, 8, 3, 70),
                run(0, 2, 3, 6),
                run(2, 2, 3, 12),
                run(4, 2, 3, 18),
                run(6, 2, 2, 22),
            ]
        );
    }

    proptest::proptest! {
        /// Every symbol keeps its input index, the prefixes of the reduced sequence cover
        /// prefixes of the input, one more pass finds nothing, and every run ends with its
        /// unit's last symbol.
        #[test]
        fn reduction_maps_back(input in proptest::collection::vec(0u32..3, 0..80)) {
            let r = remove_tandems(&input);
            let n = r.symbols.len();
            proptest::prop_assert_eq!(n == 0, input.is_empty());
            for (p, &o) in r.origin.iter().enumerate() {
                proptest::prop_assert_eq!(input[o], r.symbols[p]);
            }
            for p in 1..n {
                proptest::prop_assert_eq!(r.input_range(0, p).1, r.origin[p]);
            }
            if n > 0 {
                proptest::prop_assert_eq!(r.origin[0], 0);
                proptest::prop_assert_eq!(r.input_range(0, n), (0, input.len()));
            }
            // (Removing tandems from the bare reduced sequence may still find some: `aacacaa`
            // reduces to `acaa`, whose `aa` is no tandem of the input, since the copies of
            // `ca` lie between the two a's.)
            proptest::prop_assert!(find_runs(&r, &vec![0; n]).is_empty());
            for run in &r.runs {
                proptest::prop_assert!(run.copies >= 2 && run.unit_len >= 1);
                // A run may share its unit with a run around it (`ababaaab` is (ab)x2 whose
                // first copy is itself (ab)x2), so the unit's range may reach further.
                let (from, to) = r.input_range(run.start, run.start + run.unit_len);
                proptest::prop_assert!(to >= run.end);
                proptest::prop_assert!(run.end - from >= run.copies * run.unit_len);
                // The last copy ends with the unit's last symbol.
                proptest::prop_assert_eq!(input[run.end - 1], r.symbols[run.start + run.unit_len - 1]);
            }
        }
    }
}
