//! The engine's always-on counters: each worker's (steps, pops, steals, parks,
//! overflows, busy time), processes started and ended, and the coarse clock that
//! stamps processes' state changes. Observability reads them into
//! [`Metrics`](crate::Metrics) (`observe/metrics.rs`).

// Plain std atomics even under loom: these are statistics, not synchronisation, and
// modelling every counter update would multiply the interleavings loom explores
// without checking anything. (A thief reads a victim's step counter only as a hint;
// see `steal_lifo` in `worker.rs`.)
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::time::clock;

/// One worker's counters. Each is written only by its worker, so an increment is a
/// plain load and store (no locked instruction); readers on other threads may see a
/// slightly stale value, never a torn one.
#[derive(Default)]
pub(crate) struct WorkerCounters {
    pub(crate) steps: Counter,
    pub(crate) local_pops: Counter,
    pub(crate) lifo_pops: Counter,
    pub(crate) global_pops: Counter,
    pub(crate) steals: Counter,
    pub(crate) stolen: Counter,
    pub(crate) lifo_steals: Counter,
    pub(crate) parks: Counter,
    /// Times it was woken from a park and parked again without running a step.
    pub(crate) noop_wakes: Counter,
    /// Times its deque overflowed into the global queue, and the processes moved.
    pub(crate) overflows: Counter,
    pub(crate) overflowed: Counter,
    /// Busy time: see [`BusyClock`].
    pub(crate) busy: BusyClock,
    /// Processes spawned, finished, failed and stopped on this worker: the shared
    /// totals would be a cache line every worker writes per spawn and per end.
    pub(crate) processes: ProcessCounts<Counter>,
}

#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker calls this.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A worker's busy time, as tokio counts it: from waking up to parking again
/// (spinning and searching included, sleeping not). Read from the clock twice per
/// park, never per step.
pub(crate) struct BusyClock {
    /// Nanoseconds of finished busy periods.
    total: Counter,
    /// When the current busy period began (nanoseconds after the scheduler's start),
    /// or [`PARKED`] while the worker sleeps.
    since: AtomicU64,
}

const PARKED: u64 = u64::MAX;

impl Default for BusyClock {
    fn default() -> Self {
        Self {
            total: Counter::default(),
            since: AtomicU64::new(PARKED),
        }
    }
}

impl BusyClock {
    /// The worker woke up (or started). Only its worker calls this.
    pub(crate) fn wake(&self, start: Instant) {
        self.since.store(nanos_since(start), Ordering::Relaxed);
    }

    /// The worker is about to sleep. Only its worker calls this.
    pub(crate) fn park(&self, start: Instant) {
        let since = self.since.swap(PARKED, Ordering::Relaxed);
        if since != PARKED {
            self.total.add(nanos_since(start).saturating_sub(since));
        }
    }

    /// Busy time so far, the current period included.
    pub(crate) fn read(&self, start: Instant) -> Duration {
        // Two loads, not one snapshot: a read racing a park may miss or count the
        // period being closed once, which a statistic can afford.
        let since = self.since.load(Ordering::Relaxed);
        let current = if since == PARKED {
            0
        } else {
            nanos_since(start).saturating_sub(since)
        };
        Duration::from_nanos(self.total.get() + current)
    }
}

/// The scheduler's coarse clock: milliseconds since it started, refreshed by the
/// workers when they wake and every 61 steps (when they look at the global queue)
/// instead of read from the OS at every step (a clock read costs about as much as a
/// step).
/// What [`ProcessInfo::time_in_state`] is measured with.
pub(crate) struct CoarseClock {
    start: Instant,
    /// Milliseconds since `start` at the last refresh, wrapping (49 days).
    now: crossbeam_utils::CachePadded<std::sync::atomic::AtomicU32>,
}

impl CoarseClock {
    pub(crate) fn new() -> Self {
        Self {
            start: clock::now(),
            now: Default::default(),
        }
    }

    /// When the scheduler started.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    fn exact(&self) -> u32 {
        // Wrapping on purpose: stamps are compared by wrapping difference.
        clock::since(self.start).as_millis() as u32
    }

    /// Reads the OS clock. Written only when the millisecond changed, so that
    /// workers refreshing at once do not pull the line from each other.
    pub(crate) fn refresh(&self) {
        let now = self.exact();
        if self.now.load(Ordering::Relaxed) != now {
            self.now.store(now, Ordering::Relaxed);
        }
    }

    /// The time at the last refresh.
    #[inline]
    pub(crate) fn now(&self) -> u32 {
        self.now.load(Ordering::Relaxed)
    }

    /// How long ago `stamp` (a [`now`](Self::now) value) was, to the millisecond.
    pub(crate) fn since(&self, stamp: u32) -> Duration {
        Duration::from_millis(u64::from(self.exact().wrapping_sub(stamp)))
    }
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(clock::since(start).as_nanos()).unwrap_or(u64::MAX - 1)
}

/// What happened to processes: `C` is a [`Counter`] in a worker's own counters, an
/// atomic in the one set that threads other than workers share.
#[derive(Default)]
pub(crate) struct ProcessCounts<C> {
    pub(crate) spawned: C,
    pub(crate) finished: C,
    pub(crate) failed: C,
    pub(crate) stopped: C,
}

/// What a process count counts.
#[derive(Clone, Copy)]
pub(crate) enum ProcessEvent {
    Spawned,
    Finished,
    Failed,
    Stopped,
}

impl<C> ProcessCounts<C> {
    pub(crate) fn of(&self, event: ProcessEvent) -> &C {
        match event {
            ProcessEvent::Spawned => &self.spawned,
            ProcessEvent::Finished => &self.finished,
            ProcessEvent::Failed => &self.failed,
            ProcessEvent::Stopped => &self.stopped,
        }
    }
}

/// The totals over the workers' counts and the outside ones.
pub(crate) fn process_totals<'a>(
    workers: impl Iterator<Item = &'a WorkerCounters>,
    outside: &ProcessCounts<AtomicU64>,
) -> ProcessCounts<u64> {
    let load = |count: &AtomicU64| count.load(Ordering::Relaxed);
    workers.fold(
        ProcessCounts {
            spawned: load(&outside.spawned),
            finished: load(&outside.finished),
            failed: load(&outside.failed),
            stopped: load(&outside.stopped),
        },
        |sum, worker| {
            let counts = &worker.processes;
            ProcessCounts {
                spawned: sum.spawned + counts.spawned.get(),
                finished: sum.finished + counts.finished.get(),
                failed: sum.failed + counts.failed.get(),
                stopped: sum.stopped + counts.stopped.get(),
            }
        },
    )
}
