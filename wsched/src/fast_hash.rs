//! The hasher of the runtime's internal tables, whose keys need no protection against
//! crafted collisions: PIDs (sequential integers) and `TypeId`s (already hashes).
//! One multiply per integer instead of SipHash's rounds.

use std::hash::{BuildHasherDefault, Hasher};

/// Fibonacci hashing's multiplier (2^64 / φ): spreads sequential integers.
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Default)]
pub(crate) struct FastHasher(u64);

/// For `HashMap::with_hasher` / `HashMap<K, V, FastHash>`.
pub(crate) type FastHash = BuildHasherDefault<FastHasher>;

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(SPREAD);
    }

    fn write_u128(&mut self, n: u128) {
        self.write_u64(n as u64);
        self.write_u64((n >> 64) as u64);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hash};

    use super::*;

    fn hash<T: Hash>(value: T) -> u64 {
        FastHash::default().hash_one(value)
    }

    #[test]
    fn sequential_keys_spread_over_the_high_bits() {
        // hashbrown takes its control bytes from the top 7 bits: sequential PIDs
        // must not share them.
        let tops: HashSet<u64> = (1..=128_u64).map(|n| hash(n) >> 57).collect();
        assert!(tops.len() > 64, "only {} distinct top bits", tops.len());
        assert_ne!(
            hash(std::any::TypeId::of::<u8>()),
            hash(std::any::TypeId::of::<u16>())
        );
    }
}
