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
#[cfg(not(feature = "sim"))]
pub(crate) type RuntimeClock = SystemClock;

/// The runtime's clock with the `sim` feature: a simulation's virtual time on the
/// thread that runs one (see [`virtual_time`]), the system's everywhere else.
#[cfg(feature = "sim")]
pub(crate) type RuntimeClock = SimulatedClock;

/// A simulation's virtual time, or the system's clock on a thread that runs none.
#[cfg(feature = "sim")]
pub(crate) struct SimulatedClock;

#[cfg(feature = "sim")]
impl TimeSource for SimulatedClock {
    // Step timing must read `now`, not the time-stamp counter.
    const IS_SYSTEM: bool = false;

    #[inline]
    fn now() -> Instant {
        virtual_time::get().unwrap_or_else(SystemClock::now)
    }
}

/// The virtual time of the simulation running on this thread: set by the
/// simulation, read by [`now`]. A simulation steps every process on its own
/// thread, so a thread-local is all the runtime's reads need.
#[cfg(feature = "sim")]
pub(crate) mod virtual_time {
    use std::cell::Cell;
    use std::time::Instant;

    std::thread_local! {
        static NOW: Cell<Option<Instant>> = const { Cell::new(None) };
    }

    /// This thread's virtual time, if a simulation runs on it.
    #[inline]
    pub(crate) fn get() -> Option<Instant> {
        NOW.with(Cell::get)
    }

    /// Sets (`Some`) or clears this thread's virtual time; returns the previous.
    pub(crate) fn set(now: Option<Instant>) -> Option<Instant> {
        NOW.with(|cell| cell.replace(now))
    }
}

/// The current instant, by the runtime's clock.
#[inline(always)]
pub(crate) fn now() -> Instant {
    <RuntimeClock as TimeSource>::now()
}

/// Whether a simulation runs on this thread: nothing else runs while it blocks,
/// so what would block it (a `Handle::wait` or `Handle::call` from outside) must
/// refuse instead.
#[inline]
pub(crate) fn on_simulation_thread() -> bool {
    #[cfg(feature = "sim")]
    return virtual_time::get().is_some();
    #[cfg(not(feature = "sim"))]
    false
}

/// How long ago `earlier` was, by the runtime's clock (zero if it is later).
#[inline(always)]
pub(crate) fn since(earlier: Instant) -> Duration {
    now().saturating_duration_since(earlier)
}
