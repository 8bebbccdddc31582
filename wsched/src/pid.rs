//! Process identifiers.

use std::fmt;
use std::num::NonZeroU64;

/// The identifier of a process: unique for the lifetime of the scheduler that issued
/// it and never reused, so a stale PID can only ever name the process it was issued
/// for (and then reports that process as finished).
///
/// Printed as `<N>`, or as `<N.G>` for the `G`-th later process to reuse the place
/// `N` of an ended one in the scheduler's PID table (`<3.1>` follows `<3>`): the
/// number behind it ([`as_u64`](Self::as_u64)) packs both, and would print as a
/// ten-digit number.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(NonZeroU64);

impl Pid {
    /// Builds a PID from its number. PIDs normally come from the scheduler or the
    /// [`testing`](crate::testing) harness; this exists for tests and diagnostics.
    ///
    /// # Panics
    /// If `n` is zero: PID numbers start at 1.
    pub fn from_raw(n: u64) -> Self {
        Self(NonZeroU64::new(n).expect("PID numbers start at 1"))
    }

    /// What a process's cell holds before the process is spawned (never issued).
    pub(crate) const UNSPAWNED: Pid = Pid(NonZeroU64::MAX);

    /// The PID's number.
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }
}

impl Pid {
    /// Writes `N` or `N.G` (see the type's docs).
    fn write_number(self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let raw = self.0.get();
        let (place, generation) = (raw & u64::from(u32::MAX), raw >> 32);
        if generation == 0 {
            write!(f, "{place}")
        } else {
            write!(f, "{place}.{generation}")
        }
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<")?;
        self.write_number(f)?;
        f.write_str(">")
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pid<")?;
        self.write_number(f)?;
        f.write_str(">")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_printable_and_round_trip() {
        let (p1, p2) = (Pid::from_raw(1), Pid::from_raw(2));
        assert!(p1 < p2);
        assert_eq!(p1.to_string(), "<1>");
        assert_eq!(format!("{p2:?}"), "Pid<2>");
        assert_eq!(Pid::from_raw(p2.as_u64()), p2);
    }

    #[test]
    fn a_reused_place_prints_with_its_generation_not_as_one_big_number() {
        let reused = Pid::from_raw((1 << 32) | 3);
        assert_eq!(reused.to_string(), "<3.1>");
        assert_eq!(format!("{reused:?}"), "Pid<3.1>");
        assert_eq!(Pid::from_raw((7 << 32) | 12).to_string(), "<12.7>");
    }
}
