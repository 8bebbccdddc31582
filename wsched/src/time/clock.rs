//! The clock the runtime reads: every timer deadline, timeout, state stamp and step
//! time comes from [`now`].
//!
//! A seam: the runtime reads time only through [`TimeSource`], and this build's
//! source is [`RuntimeClock`], the operating system's monotonic clock. A build
//! that must control time (a deterministic simulation) puts its own source there.
//! The call is static and inlined: reading the clock costs what `Instant::now` does.

use std::time::{Duration, Instant};

/// Where the runtime's time comes from.
pub(crate) trait TimeSource {
    /// Whether this is the operating system's monotonic clock, which step timing
    /// may then read through the CPU's time-stamp counter instead (see
    /// `observe/timing.rs`).
    const IS_SYSTEM: bool;

    /// The current instant.
    fn now() -> Instant;
}

/// The operating system's monotonic clock.
pub(crate) struct SystemClock;

impl TimeSource for SystemClock {
    const IS_SYSTEM: bool = true;

    #[inline(always)]
    fn now() -> Instant {
        Instant::now()
    }
}

/// The runtime's clock.
pub(crate) type RuntimeClock = SystemClock;

/// The current instant, by the runtime's clock.
#[inline(always)]
pub(crate) fn now() -> Instant {
    <RuntimeClock as TimeSource>::now()
}

/// How long ago `earlier` was, by the runtime's clock (zero if it is later).
#[inline(always)]
pub(crate) fn since(earlier: Instant) -> Duration {
    now().saturating_duration_since(earlier)
}
