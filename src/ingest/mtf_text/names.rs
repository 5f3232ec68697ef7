//! Names shared by the parser and the writer: which bytes make a bare name, the MPI call
//! name table, and a fast hasher for the parser's string interning.

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use crate::model::OpKind;

/// Whether `b` may appear in a bare (unquoted) name.
#[inline]
pub(crate) fn is_bare(b: u8) -> bool {
    !matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'"' | b'#' | b'=' | b',')
}

/// Whether `s` can be written as a bare name (non-empty, only bare bytes).
pub(crate) fn can_be_bare(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_bare)
}

/// A small multiply-rotate hasher: the parser hashes short names it has seen before.
#[derive(Default, Clone, Copy)]
pub(crate) struct QuickHasher(u64);

const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

impl QuickHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(23) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for QuickHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            // `chunks_exact(8)` yields slices of exactly 8 bytes.
            #[allow(clippy::unwrap_used)]
            self.mix(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

pub(crate) type QuickBuild = BuildHasherDefault<QuickHasher>;

/// The longest call name (with `MPI_`) that can name a fixed kind, in bytes.
const MAX_KIND_NAME: usize = 36;

/// Slots of the open-addressing table of fixed kinds (a power of two, under half full).
const KIND_SLOTS: usize = 256;

#[inline]
fn name_hash(key: &[u8]) -> usize {
    let mut h: u32 = 0x811c_9dc5;
    for &b in key {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h ^ (h >> 15)) as usize
}

/// Every fixed kind by its lower-case name without `MPI_`, in an open-addressing table.
/// A slot of the kind table: a lower-case name and its kind.
type KindSlot = Option<(&'static [u8], OpKind)>;

fn kind_table() -> &'static [KindSlot] {
    static TABLE: OnceLock<Vec<KindSlot>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![None; KIND_SLOTS];
        for &k in OpKind::ALL {
            // Every kind of `OpKind::ALL` has its MPI name (only `Other` lacks one).
            #[allow(clippy::expect_used)]
            let bare = &k.mpi_name().expect("fixed kinds have names")[4..];
            let lower: &'static [u8] =
                Box::leak(bare.to_ascii_lowercase().into_bytes().into_boxed_slice());
            let mut i = name_hash(lower) & (KIND_SLOTS - 1);
            while table[i].is_some() {
                i = (i + 1) & (KIND_SLOTS - 1);
            }
            table[i] = Some((lower, k));
        }
        table
    })
}

/// The kind an MPI call name stands for: case-insensitive, with or without `MPI_`.
/// `None` for names that are no fixed kind (they become `OpKind::Other`).
#[inline]
pub(crate) fn kind_from_name(name: &[u8]) -> Option<OpKind> {
    let mut lower = [0u8; MAX_KIND_NAME];
    if name.len() > MAX_KIND_NAME {
        return None;
    }
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    let mut key = &lower[..name.len()];
    if key.starts_with(b"mpi_") {
        key = &key[4..];
    }
    let table = kind_table();
    let mut i = name_hash(key) & (KIND_SLOTS - 1);
    loop {
        match table[i] {
            None => return None,
            Some((n, k)) if n == key => return Some(k),
            Some(_) => i = (i + 1) & (KIND_SLOTS - 1),
        }
    }
}

/// Whether a string given as the name of an `Other` call would be read back as a fixed kind
/// (and so must be quoted to stay `Other`).
pub(crate) fn names_a_kind(name: &str) -> bool {
    kind_from_name(name.as_bytes()).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_found_in_every_spelling() {
        for &k in OpKind::ALL {
            let name = k.mpi_name().unwrap();
            assert_eq!(kind_from_name(name.as_bytes()), Some(k));
            assert_eq!(kind_from_name(&name.as_bytes()[4..]), Some(k));
            assert_eq!(kind_from_name(name.to_uppercase().as_bytes()), Some(k));
            assert_eq!(kind_from_name(name[4..].to_lowercase().as_bytes()), Some(k));
        }
        assert_eq!(kind_from_name(b"MPI_Comm_rank"), None);
        assert_eq!(kind_from_name(b"mpi_"), None);
        assert_eq!(kind_from_name(&[b'x'; 100]), None);
    }

    #[test]
    fn bare_names() {
        assert!(can_be_bare("MPI_DOUBLE"));
        assert!(can_be_bare("naïve::solve<3>"));
        assert!(!can_be_bare(""));
        assert!(!can_be_bare("a b"));
        assert!(!can_be_bare("f(a,b)"));
        assert!(!can_be_bare("x=1"));
    }
}
