//! The runtime's randomness: which victim a worker steals from first.
//!
//! A seam: the engine draws random numbers only through [`RandomSource`], and
//! each worker's source is seeded from the scheduler's seed and the worker's index
//! (`Shared::seed`, zero unless set), so the same seed gives the same choices. This
//! build's source is [`FastRand`]. The calls are static and inlined.

/// A seedable source of random numbers.
pub(crate) trait RandomSource {
    /// A source that draws the same sequence for the same `seed`.
    fn seeded(seed: u64) -> Self;

    /// The next number.
    fn next(&mut self) -> u64;
}

/// xorshift64*: a tiny generator, good enough to spread steals.
pub(crate) struct FastRand(u64);

impl RandomSource for FastRand {
    #[inline]
    fn seeded(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    #[inline(always)]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Each worker's source of randomness.
pub(crate) type WorkerRandom = FastRand;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_numbers_and_another_seed_others() {
        let draw = |seed| {
            let mut source = WorkerRandom::seeded(seed);
            (0..8).map(|_| source.next()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert_ne!(draw(0), vec![0; 8], "seed zero still draws");
    }
}
