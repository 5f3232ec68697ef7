//! A tiny deterministic pseudo-random generator (SplitMix64), so that a seed fixes a trace
//! without any dependency.

/// SplitMix64: a 64-bit state advanced by a fixed odd increment and scrambled by two
/// multiply-xorshift rounds.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub(crate) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (0 when `bound` is 0), by multiply-shift.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// A seeded random permutation of `0..n` (Fisher-Yates).
pub(crate) fn permutation(n: u32, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed ^ 0x5EED_0F5A_u64.rotate_left(17));
    let mut perm: Vec<u32> = (0..n).collect();
    for i in (1..perm.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    perm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen_rng_is_deterministic_and_bounded() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..1000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            assert!(x < 10);
        }
        assert_eq!(SplitMix64::new(3).below(0), 0);
        assert_ne!(SplitMix64::new(1).next_u64(), SplitMix64::new(2).next_u64());
    }

    #[test]
    fn gen_permutation_is_a_permutation() {
        for n in [0u32, 1, 2, 16, 100] {
            let mut p = permutation(n, 42);
            p.sort_unstable();
            assert_eq!(p, (0..n).collect::<Vec<_>>());
        }
        assert_eq!(permutation(64, 9), permutation(64, 9));
        assert_ne!(permutation(64, 9), permutation(64, 10));
    }
}
