//! Per-process communication patterns, after chapter 4 of Alawneh's thesis ("Techniques to
//! Facilitate the Understanding of Inter-Process Communication Traces", Concordia 2012).
//!
//! This module is pure: it works on sequences of interned symbols that a caller has already
//! read out of a trace, and touches neither the store nor any file.
//!
//! # What a process pattern is
//!
//! A process trace is reduced to the sequence of its MPI operations, each written as one
//! symbol of a small alphabet (see [`Alphabet`]):
//!
//! * `S<peer>`: a send to `peer` (blocking or not, `MPI_Send`, `MPI_Isend`, ...);
//! * `R<peer>`: a receive from `peer`;
//! * a collective by its MPI name and, when it has one, its root: `MPI_Bcast(root 0)`,
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

use std::collections::HashMap;
use std::fmt;

use crate::model::Rank;

pub use matching::{edit_distance, find_matches, find_matches_in_events, Match, MatchParams};
pub use repeats::{
    detect, plain_maximal_repeats, Options, PatternRepeat, PlainRepeat, ProcessPattern,
};
pub use tandem::{remove_tandems, Reduction, TandemRun};

/// An interned event symbol; [`Alphabet`] maps it to what it stands for.
pub type Symbol = u32;

/// One item of a process's event sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// An MPI operation, by its symbol.
    Mpi(Symbol),
    /// A routine call that delimits patterns: no pattern or match may cross it.
    Delimiter,
}

/// What a [`Symbol`] stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    /// A send to the given process (`S<peer>`).
    Send(Rank),
    /// A receive from the given process (`R<peer>`).
    Recv(Rank),
    /// A collective operation: its MPI name (`MPI_Bcast`) and its root when it has one.
    Collective {
        /// The MPI function name.
        name: String,
        /// The root process, for rooted collectives.
        root: Option<Rank>,
    },
}

impl fmt::Display for SymbolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymbolKind::Send(peer) => write!(f, "S{peer}"),
            SymbolKind::Recv(peer) => write!(f, "R{peer}"),
            SymbolKind::Collective {
                name,
                root: Some(root),
            } => write!(f, "{name}(root {root})"),
            SymbolKind::Collective { name, root: None } => f.write_str(name),
        }
    }
}

/// Interns [`SymbolKind`]s as dense [`Symbol`]s (0, 1, 2, ... in order of first use) and
/// renders them back as display strings (`S2`, `R5`, `MPI_Bcast(root 0)`).
#[derive(Debug, Clone, Default)]
pub struct Alphabet {
    kinds: Vec<SymbolKind>,
    index: HashMap<SymbolKind, Symbol>,
}

impl Alphabet {
    /// An empty alphabet.
    pub fn new() -> Alphabet {
        Alphabet::default()
    }

    /// The symbol of `kind`, interning it on first use.
    pub fn intern(&mut self, kind: SymbolKind) -> Symbol {
        if let Some(&symbol) = self.index.get(&kind) {
            return symbol;
        }
        let symbol = Symbol::try_from(self.kinds.len()).expect("more than 2^32 symbols");
        self.kinds.push(kind.clone());
        self.index.insert(kind, symbol);
        symbol
    }

    /// The symbol of a send to `peer`.
    pub fn send(&mut self, peer: Rank) -> Symbol {
        self.intern(SymbolKind::Send(peer))
    }

    /// The symbol of a receive from `peer`.
    pub fn recv(&mut self, peer: Rank) -> Symbol {
        self.intern(SymbolKind::Recv(peer))
    }

    /// The symbol of a collective by MPI name and optional root.
    pub fn collective(&mut self, name: &str, root: Option<Rank>) -> Symbol {
        self.intern(SymbolKind::Collective {
            name: name.to_string(),
            root,
        })
    }

    /// The symbol of `kind` if it was interned.
    pub fn get(&self, kind: &SymbolKind) -> Option<Symbol> {
        self.index.get(kind).copied()
    }

    /// What `symbol` stands for; `None` for a symbol this alphabet never handed out.
    pub fn kind(&self, symbol: Symbol) -> Option<&SymbolKind> {
        self.kinds.get(symbol as usize)
    }

    /// The display string of `symbol`; `?<n>` for a symbol this alphabet never handed out.
    pub fn name(&self, symbol: Symbol) -> String {
        match self.kind(symbol) {
            Some(kind) => kind.to_string(),
            None => format!("?{symbol}"),
        }
    }

    /// A symbol sequence as display strings joined by spaces (`S2 S3 R2`).
    pub fn render(&self, symbols: &[Symbol]) -> String {
        let names: Vec<String> = symbols.iter().map(|&s| self.name(s)).collect();
        names.join(" ")
    }

    /// Number of interned symbols.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether nothing was interned yet.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }
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
    fn alphabet_interns_densely_and_renders_thesis_names() {
        let mut alphabet = Alphabet::new();
        let s2 = alphabet.send(2);
        let r5 = alphabet.recv(5);
        let bcast = alphabet.collective("MPI_Bcast", Some(0));
        let allreduce = alphabet.collective("MPI_Allreduce", None);
        assert_eq!((s2, r5, bcast, allreduce), (0, 1, 2, 3));
        assert_eq!(alphabet.send(2), s2);
        assert_eq!(alphabet.collective("MPI_Bcast", Some(0)), bcast);
        assert_ne!(alphabet.collective("MPI_Bcast", Some(1)), bcast);
        assert_eq!(alphabet.len(), 5);
        assert_eq!(alphabet.name(s2), "S2");
        assert_eq!(alphabet.name(r5), "R5");
        assert_eq!(alphabet.name(bcast), "MPI_Bcast(root 0)");
        assert_eq!(alphabet.name(allreduce), "MPI_Allreduce");
        assert_eq!(alphabet.name(99), "?99");
        assert_eq!(alphabet.render(&[s2, r5, s2]), "S2 R5 S2");
        assert_eq!(alphabet.get(&SymbolKind::Recv(5)), Some(r5));
        assert_eq!(alphabet.get(&SymbolKind::Recv(6)), None);
        assert_eq!(alphabet.kind(r5), Some(&SymbolKind::Recv(5)));
    }

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
