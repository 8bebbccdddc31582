//! Process identifiers.

use std::fmt;
use std::num::NonZeroU64;

/// The identifier of a process: unique for the lifetime of the scheduler that issued
/// it and never reused, so a stale PID can only ever name the process it was issued
/// for (and then reports that process as finished). Printed as `<N>`.
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

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.0)
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pid<{}>", self.0)
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
}
