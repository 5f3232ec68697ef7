//! Per-process communication patterns, after chapter 4 of Alawneh's thesis ("Techniques to
//! Facilitate the Understanding of Inter-Process Communication Traces", Concordia 2012).
//!
//! This module is pure: it works on sequences of interned symbols that a caller has already
//! read out of a trace, and touches neither the store nor any file.
//!
//! # What a process pattern is
//!
//! A process trace is reduced to the sequence of its MPI operations, each written as one
//! symbol of a small alphabet (see [`crate::analysis::process_events::Alphabet`]):
//!
//! * `S<peer>`: a send to `peer` (blocking or not, `MPI_Send`, `MPI_Isend`, ...);
//! * `R<peer>`: a receive from `peer`;
//! * a collective by its MPI name and, when it has one, its root: `MPI_Bcast(0)`,
//!   `MPI_Allreduce`.
//!
//! The message envelope (size, tag, datatype) is left out on purpose: the thesis looks at
//! *how* processes communicate, not at the data. Wait and Test calls are not symbols.
//!
//! Between the symbols the caller may put [`Event::Delimiter`]s. In the thesis's
//! "routine-call-directed" variant every routine call that directly calls MPI operations
//! becomes a delimiter tagged with its timestamp, so it is unique, never repeats, and no
//! pattern can cross it. A delimiter is therefore a hard block boundary here.
//!
//! A *process pattern* is a sequence of at least two symbols that repeats (non-contiguously)
//! inside one process trace without crossing a delimiter. Three algorithms work on it:
//!
//! * [`tandem`]: tandem-repeat removal (thesis Alg 4.5/4.6). `abababcdcdefef` becomes the
//!   general form `abcdef`; the repeat counts are kept, not thrown away as in the thesis.
//! * [`repeats`]: maximal-repeat detection by reverse-forward n-gram lookup (Alg 4.3), the
//!   entry point [`detect`], and a plain suffix-array reference for cross-checks.
//! * [`matching`]: approximate matching of a given template (Alg 4.4): q-gram filter plus
//!   Levenshtein verification.
//!
//! Assembling process patterns of several processes into communication patterns (Alg 4.7) is
//! not part of this module; [`ProcessPattern`] gives each occurrence's input range so that a
//! caller can map it to operation ids and partner events.

pub mod matching;
pub mod repeats;
pub mod tandem;

pub use matching::{edit_distance, find_matches, find_matches_in_events, Match, MatchParams};
pub use repeats::{
    detect, plain_maximal_repeats, Options, PatternRepeat, PlainRepeat, ProcessPattern,
};
pub use tandem::{remove_tandems, Reduction, TandemRun};

/// An interned event symbol; [`crate::analysis::process_events::Alphabet`] maps it to what it
/// stands for.
pub type Symbol = u32;

/// One item of a process's event sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// An MPI operation, by its symbol.
    Mpi(Symbol),
    /// A routine call that delimits patterns: no pattern or match may cross it.
    Delimiter,
}

/// Splits `events` into its blocks: for each maximal run of [`Event::Mpi`] items, the input
/// index of its first item and its symbols. Empty runs (two delimiters in a row) are skipped.
pub(crate) fn blocks(events: &[Event]) -> Vec<(usize, Vec<Symbol>)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, Vec<Symbol>)> = None;
    for (i, event) in events.iter().enumerate() {
        match *event {
            Event::Mpi(symbol) => current
                .get_or_insert_with(|| (i, Vec::new()))
                .1
                .push(symbol),
            Event::Delimiter => out.extend(current.take()),
        }
    }
    out.extend(current);
    out
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::{Event, Symbol};

    /// Letters as symbols (their code points), for the thesis's lettered examples.
    pub fn syms(text: &str) -> Vec<Symbol> {
        text.chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| c as Symbol)
            .collect()
    }

    /// Letters as events; `|` is a delimiter.
    pub fn events(text: &str) -> Vec<Event> {
        text.chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| match c {
                '|' => Event::Delimiter,
                c => Event::Mpi(c as Symbol),
            })
            .collect()
    }

    /// Symbols back to letters.
    pub fn text(symbols: &[Symbol]) -> String {
        symbols
            .iter()
            .map(|&s| char::from_u32(s).unwrap_or('?'))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_at_delimiters() {
        let events = test_util::events("ab|c||de|");
        let blocks = blocks(&events);
        assert_eq!(
            blocks,
            vec![
                (0, test_util::syms("ab")),
                (3, test_util::syms("c")),
                (6, test_util::syms("de"))
            ]
        );
        assert!(super::blocks(&test_util::events("||")).is_empty());
    }
}
