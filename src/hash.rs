//! A small, fast, non-cryptographic hasher for the integer keys of the matcher and the query
//! engine.
//!
//! The matcher's maps are keyed by a few integers (communicator, ranks, tag, request id)
//! chosen by the tracer, not by an adversary, so std's DoS-resistant SipHash is wasted
//! work on the hot import path. This hasher folds each word in with a rotate, xor and
//! multiply, and rotates the result once more at the end so that the low bits (which pick
//! the bucket) depend on every input bit, even for keys whose low bits are always zero
//! (request handles that are aligned pointers).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// An odd constant with well-spread bits (the one rustc's FxHasher uses).
const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// The hasher; build maps with [`FxHashMap`].
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn write_i32(&mut self, n: i32) {
        self.add(n as u32 as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash_of(v: impl Hash) -> u64 {
        BuildHasherDefault::<FxHasher>::default().hash_one(v)
    }

    #[test]
    fn aligned_keys_spread_over_low_bits() {
        // Request handles that are 64-byte aligned pointers must not share buckets.
        let mut low = std::collections::HashSet::new();
        for i in 0..256u64 {
            low.insert(hash_of((3u32, 0x7f00_0000_0000 + i * 64)) & 0xff);
        }
        assert!(low.len() > 128, "only {} distinct low bytes", low.len());
    }

    #[test]
    fn equal_keys_hash_equal_and_bytes_are_folded() {
        assert_eq!(hash_of((1u32, 2u32, 3i32)), hash_of((1u32, 2u32, 3i32)));
        assert_ne!(hash_of((1u32, 2u32)), hash_of((2u32, 1u32)));
        assert_ne!(hash_of("abcdefghij"), hash_of("abcdefghik"));
    }
}
