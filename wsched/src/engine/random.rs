//! The runtime's randomness: which victim a worker steals from first, and the
//! numbers processes draw ([`draw`], behind `Context::random`).
//!
//! A seam: the engine draws random numbers only through [`RandomSource`], and
//! each worker's source is seeded from the scheduler's seed and the worker's index
//! (`Shared::seed`, zero unless set), so the same seed gives the same choices. This
//! build's source is [`FastRand`]. The calls are static and inlined. On the thread
//! of a simulation, [`draw`] uses the simulation's seeded stream (see
//! [`simulated`]).

use std::cell::Cell;

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

std::thread_local! {
    /// The state of this thread's stream for [`draw`]: zero until first used (then
    /// seeded from the clock and the stack's address), or set by a simulation.
    static STREAM: Cell<u64> = const { Cell::new(0) };
}

/// A random number for a process: from this thread's stream, which a simulation
/// seeds, so that a simulated run draws the same numbers for the same seed.
pub(crate) fn draw() -> u64 {
    STREAM.with(|stream| {
        let mut state = stream.get();
        if state == 0 {
            let marker = 0u8;
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            state = FastRand::seeded(nanos ^ (&marker as *const u8 as u64)).0;
        }
        let mut source = FastRand(state);
        let value = source.next();
        stream.set(source.0);
        value
    })
}

/// A simulation's hold on this thread's stream for [`draw`].
#[cfg(feature = "sim")]
pub(crate) mod simulated {
    use super::{FastRand, RandomSource, STREAM};

    /// Seeds this thread's stream with `seed`.
    pub(crate) fn enter(seed: u64) {
        STREAM.with(|stream| stream.set(FastRand::seeded(seed ^ 0x005E_ED0F_D4A7).0));
    }

    /// Gives the stream back (reseeded from the clock at its next use).
    pub(crate) fn leave() {
        STREAM.with(|stream| stream.set(0));
    }
}

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
