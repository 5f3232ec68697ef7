//! Approximate matching of a template against a process's sequence (thesis Alg 4.4, §4.5).
//!
//! The template is one process's part of a communication pattern (e.g. `S2 S5` for P1 of a
//! wavefront on a 2×4 grid), given by a user or taken from detected patterns. Similarity is
//! the Levenshtein edit distance; a window matches when its distance to the template is at
//! most `k`.
//!
//! A window of the template's length `m` slides over the sequence:
//!
//! 1. **Displacement shift.** The first q-gram of the window that also occurs in the template
//!    is aligned with its offset in the template: if it sits `d > 0` places further right in
//!    the window, the window moves right by `d`.
//! 2. **q-gram filter** (Jokinen and Ukkonen 1991): a string within `k` edits of a length-`m`
//!    template shares at least `t = m - q + 1 - k·q` of its q-grams (counted with
//!    multiplicity). Windows sharing fewer are skipped without computing a distance. The
//!    thesis prints `>` in Alg 4.4 but uses `≥` in Fig 4.9 and the lemma needs `≥`.
//! 3. **Verification** by edit distance. A match is recorded and the window jumps past it,
//!    so matches never overlap.
//! 4. **Post-step.** A verified window with `k < distance ≤ 2k` may hold a match that is
//!    shorter than the template (`bcdefy` has distance 2 from `abcdef`, `bcdef` has 1): it is
//!    shrunk from the right down to `m - k` symbols, and the best shrunk window (smallest
//!    distance, then longest) is recorded if it is within `k` and overlaps no other match.
//!
//! Departures from the thesis:
//! * Fig 4.9 does not mark window 8 (`obcdef`, distance 1 ≤ k) as a match; that is an error
//!   in the figure, and this matcher reports it.
//! * The shift follows the text ("the first n-gram found in the window"). Fig 4.9 applies
//!   it only for the template's first q-gram (it verifies window 7 although `bc` there is
//!   one place right of its template offset); the matches come out the same either way.
//!   When a q-gram occurs several times in the template, its rightmost offset not beyond
//!   the window offset is used, the smallest shift.
//! * Windows at the end of the sequence are cut at its end, down to `m - k` symbols, so a
//!   shortened match at the very end is not lost.
//! * A match that lies inside a longer pattern is not flagged (the thesis wants the user told
//!   that the template may be a subset of something larger).
//!
//! The shift is a heuristic and can skip a match whose own q-grams are edited; the filter
//! and the verification lose nothing. Cost: O(N) for the sliding q-gram counts plus O(m²)
//! per verified window (with an early exit once a row exceeds the bound).

use crate::hash::FxHashMap;

use super::{blocks, Event, Symbol};

/// Parameters of [`find_matches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchParams {
    /// The q-gram ("n-gram") size of the filter; at least 1.
    pub q: usize,
    /// The largest edit distance a match may have.
    pub k: usize,
}

/// One approximate occurrence of the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    /// First position of the match in the searched sequence.
    pub start: usize,
    /// Exclusive end.
    pub end: usize,
    /// Edit distance between the template and `sequence[start..end]`.
    pub distance: usize,
}

/// The Levenshtein distance between `a` and `b` (insertions, deletions and substitutions all
/// cost 1).
pub fn edit_distance(a: &[Symbol], b: &[Symbol]) -> usize {
    distance_within(a, b, usize::MAX).expect("unbounded distance")
}

/// The edit distance if it is at most `bound`, else `None`; stops as soon as a whole row of
/// the table exceeds the bound, since the distance can only grow from there.
fn distance_within(a: &[Symbol], b: &[Symbol], bound: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > bound {
        return None;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        let mut smallest = row[0];
        for (j, &y) in b.iter().enumerate() {
            let replace = diagonal + (x != y) as usize;
            diagonal = row[j + 1];
            row[j + 1] = replace.min(row[j] + 1).min(diagonal + 1);
            smallest = smallest.min(row[j + 1]);
        }
        if smallest > bound {
            return None;
        }
    }
    let distance = row[b.len()];
    (distance <= bound).then_some(distance)
}

/// The q-gram content of a window, kept up to date as the window slides right.
struct Window<'a> {
    /// Template q-gram id at each sequence position (`NONE` when not a template q-gram).
    ids: &'a [u32],
    /// How often each q-gram occurs in the template.
    wanted: &'a [u32],
    have: Vec<u32>,
    /// Positions of the q-grams counted in `have`: `lo..hi`.
    lo: usize,
    hi: usize,
    /// Σ min(wanted, have): the shared q-grams.
    shared: usize,
}

const NONE: u32 = u32::MAX;

impl Window<'_> {
    /// Counts the q-grams starting in `start..last_start` (both bounds only grow).
    fn set(&mut self, start: usize, last_start: usize) {
        let last_start = last_start.max(start);
        if start >= self.hi {
            self.drop_until(self.hi);
            self.lo = start;
            self.hi = start;
        }
        self.drop_until(start);
        while self.hi < last_start {
            let id = self.ids[self.hi];
            if id != NONE {
                if self.have[id as usize] < self.wanted[id as usize] {
                    self.shared += 1;
                }
                self.have[id as usize] += 1;
            }
            self.hi += 1;
        }
    }

    fn drop_until(&mut self, start: usize) {
        while self.lo < start {
            let id = self.ids[self.lo];
            if id != NONE {
                self.have[id as usize] -= 1;
                if self.have[id as usize] < self.wanted[id as usize] {
                    self.shared -= 1;
                }
            }
            self.lo += 1;
        }
    }
}

/// The non-overlapping approximate occurrences of `pattern` in `sequence`, by start (Alg 4.4
/// plus its post-step). Fig 4.9: `abcdef` in `abcdmhkobcdefyeabhdefrsabcdef` with q = 2,
/// k = 1 gives `obcdef` at 7 (distance 1), `abhdef` at 15 (1) and `abcdef` at 23 (0).
pub fn find_matches(pattern: &[Symbol], sequence: &[Symbol], params: &MatchParams) -> Vec<Match> {
    let m = pattern.len();
    let n = sequence.len();
    let k = params.k;
    let q = params.q.max(1);
    let mut matches: Vec<Match> = Vec::new();
    if m == 0 {
        return matches;
    }
    let shortest = m.saturating_sub(k).max(1);
    let threshold = m as i64 - q as i64 + 1 - (k * q) as i64;

    // The positioned q-gram table of the template.
    let mut id_of: FxHashMap<&[Symbol], u32> = FxHashMap::default();
    let mut wanted: Vec<u32> = Vec::new();
    let mut offsets: Vec<Vec<usize>> = Vec::new();
    for (offset, gram) in pattern.windows(q).enumerate() {
        let fresh = wanted.len() as u32;
        let id = *id_of.entry(gram).or_insert(fresh);
        if id == fresh {
            wanted.push(0);
            offsets.push(Vec::new());
        }
        wanted[id as usize] += 1;
        offsets[id as usize].push(offset);
    }
    let ids: Vec<u32> = sequence
        .windows(q)
        .map(|gram| id_of.get(gram).copied().unwrap_or(NONE))
        .collect();
    // next_shared[j]: the first template q-gram starting at j or later.
    let mut next_shared = vec![ids.len(); ids.len() + 1];
    for j in (0..ids.len()).rev() {
        next_shared[j] = if ids[j] != NONE {
            j
        } else {
            next_shared[j + 1]
        };
    }

    let mut window = Window {
        ids: &ids,
        wanted: &wanted,
        have: vec![0; wanted.len()],
        lo: 0,
        hi: 0,
        shared: 0,
    };
    let mut near = Vec::new(); // verified windows with k < distance <= 2k
    let mut s = 0;
    while s + shortest <= n {
        let e = (s + m).min(n);
        // 1. Align the window's first shared q-gram with its template offset.
        let f = next_shared[s.min(ids.len())];
        if f + q <= e {
            let o = f - s;
            let list = &offsets[ids[f] as usize];
            let at = list.partition_point(|&po| po <= o);
            if at > 0 && list[at - 1] < o {
                s += o - list[at - 1];
                continue;
            }
        }
        // 2. Filter by shared q-grams, 3. verify.
        window.set(s, (e + 1).saturating_sub(q));
        if window.shared as i64 >= threshold {
            if let Some(distance) = distance_within(pattern, &sequence[s..e], 2 * k) {
                if distance <= k {
                    matches.push(Match {
                        start: s,
                        end: e,
                        distance,
                    });
                    s = e;
                    continue;
                }
                near.push(s);
            }
        }
        s += 1;
    }

    // 4. Shrink near misses from the right, down to m - k symbols.
    for s in near {
        let mut best: Option<Match> = None;
        for len in shortest..m.min(n - s + 1) {
            if let Some(distance) = distance_within(pattern, &sequence[s..s + len], k) {
                if best.is_none_or(|b| distance <= b.distance) {
                    best = Some(Match {
                        start: s,
                        end: s + len,
                        distance,
                    });
                }
            }
        }
        if let Some(found) = best {
            let at = matches.partition_point(|x| x.start < found.start);
            let clear_before = at == 0 || matches[at - 1].end <= found.start;
            let clear_after = at == matches.len() || found.end <= matches[at].start;
            if clear_before && clear_after {
                matches.insert(at, found);
            }
        }
    }
    matches
}

/// [`find_matches`] within each delimited block of `events` (a match never crosses a
/// delimiter), with positions in `events`.
pub fn find_matches_in_events(
    pattern: &[Symbol],
    events: &[Event],
    params: &MatchParams,
) -> Vec<Match> {
    let mut out = Vec::new();
    for (offset, symbols) in blocks(events) {
        out.extend(
            find_matches(pattern, &symbols, params)
                .into_iter()
                .map(|x| Match {
                    start: x.start + offset,
                    end: x.end + offset,
                    distance: x.distance,
                }),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{events, syms};
    use super::*;

    fn at(start: usize, end: usize, distance: usize) -> Match {
        Match {
            start,
            end,
            distance,
        }
    }

    const FIGURE_4_9: &str = "abcdmhkobcdefyeabhdefrsabcdef";

    #[test]
    fn figure_4_9() {
        let found = find_matches(
            &syms("abcdef"),
            &syms(FIGURE_4_9),
            &MatchParams { q: 2, k: 1 },
        );
        // w8 (`obcdef`, distance 1) is a match although the figure does not mark it; then
        // w16 (`abhdef`, 1) and w24 (`abcdef`, 0) as in the figure. Window numbers are
        // 1-based starts.
        assert_eq!(found, vec![at(7, 13, 1), at(15, 21, 1), at(23, 29, 0)]);
    }

    #[test]
    fn figure_4_9_distances() {
        let p = syms("abcdef");
        let ed = |w: &str| edit_distance(&p, &syms(w));
        assert_eq!(ed("abcdmh"), 2); // w1
        assert_eq!(ed("kobcde"), 3); // w7
        assert_eq!(ed("obcdef"), 1); // w8, not marked in the figure
        assert_eq!(ed("bcdefy"), 2); // w9
        assert_eq!(ed("bcdef"), 1); // w9 shrunk
        assert_eq!(ed("cdefye"), 4); // w10: the figure says 5
        assert_eq!(ed("cdef"), 2);
        assert_eq!(ed("abhdef"), 1); // w16
        assert_eq!(ed("abcdef"), 0); // w24
        assert_eq!(edit_distance(&[], &p), 6);
        assert_eq!(distance_within(&p, &syms("cdefye"), 3), None);
        assert_eq!(distance_within(&p, &syms("cdefye"), 4), Some(4));
    }

    #[test]
    fn exact_matching_with_k_zero() {
        let found = find_matches(
            &syms("abcdef"),
            &syms(FIGURE_4_9),
            &MatchParams { q: 2, k: 0 },
        );
        assert_eq!(found, vec![at(23, 29, 0)]);
        let found = find_matches(&syms("ab"), &syms("abxabab"), &MatchParams { q: 1, k: 0 });
        assert_eq!(found, vec![at(0, 2, 0), at(3, 5, 0), at(5, 7, 0)]);
    }

    #[test]
    fn post_step_finds_a_shorter_match() {
        // `bcdefy` is a near miss (distance 2); shrunk to `bcdef` it matches with 1.
        let found = find_matches(
            &syms("abcdef"),
            &syms("bcdefyxx"),
            &MatchParams { q: 2, k: 1 },
        );
        assert_eq!(found, vec![at(0, 5, 1)]);
        // With a symbol before it, `xbcdef` is itself one substitution away.
        let found = find_matches(
            &syms("abcdef"),
            &syms("xxbcdefyxx"),
            &MatchParams { q: 2, k: 1 },
        );
        assert_eq!(found, vec![at(1, 7, 1)]);
    }

    #[test]
    fn a_match_cut_by_the_end_of_the_sequence() {
        let found = find_matches(
            &syms("abcdef"),
            &syms("xxxabcde"),
            &MatchParams { q: 2, k: 1 },
        );
        assert_eq!(found, vec![at(3, 8, 1)]);
    }

    #[test]
    fn matches_stay_inside_blocks() {
        let found = find_matches_in_events(
            &syms("abc"),
            &events("abc|ab|cabc"),
            &MatchParams { q: 1, k: 0 },
        );
        assert_eq!(found, vec![at(0, 3, 0), at(8, 11, 0)]);
        // With one edit allowed, `ab` alone (a deletion) matches too; in `cabc` the window
        // `cab` is two edits away, so the match is still `abc`.
        let found = find_matches_in_events(
            &syms("abc"),
            &events("abc|ab|cabc"),
            &MatchParams { q: 1, k: 1 },
        );
        assert_eq!(found, vec![at(0, 3, 0), at(4, 6, 1), at(8, 11, 0)]);
    }

    #[test]
    fn degenerate_inputs() {
        let p = MatchParams { q: 2, k: 1 };
        assert!(find_matches(&[], &syms("abc"), &p).is_empty());
        assert!(find_matches(&syms("abc"), &[], &p).is_empty());
        // q larger than the template: the filter passes everything, the distance decides.
        let found = find_matches(&syms("ab"), &syms("xaby"), &MatchParams { q: 5, k: 0 });
        assert_eq!(found, vec![at(1, 3, 0)]);
    }

    proptest::proptest! {
        /// Every match is within k with its true distance, and matches do not overlap. With
        /// k = 0 the matches are exactly the leftmost-first non-overlapping occurrences: the
        /// shift never jumps past an exact occurrence.
        #[test]
        fn matches_are_sound(
            sequence in proptest::collection::vec(0u32..4, 0..60),
            pattern in proptest::collection::vec(0u32..4, 1..6),
            q in 1usize..4,
            k in 0usize..3,
        ) {
            let found = find_matches(&pattern, &sequence, &MatchParams { q, k });
            let mut free_from = 0;
            for x in &found {
                proptest::prop_assert!(x.start >= free_from && x.start < x.end);
                proptest::prop_assert!(x.end <= sequence.len());
                proptest::prop_assert!(x.distance <= k);
                proptest::prop_assert_eq!(
                    edit_distance(&pattern, &sequence[x.start..x.end]),
                    x.distance
                );
                free_from = x.end;
            }
            if k == 0 {
                let m = pattern.len();
                let mut exact = Vec::new();
                let mut s = 0;
                while s + m <= sequence.len() {
                    if sequence[s..s + m] == pattern[..] {
                        exact.push(at(s, s + m, 0));
                        s += m;
                    } else {
                        s += 1;
                    }
                }
                proptest::prop_assert_eq!(found, exact);
            }
        }
    }
}
