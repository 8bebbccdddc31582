//! How many processes are live, counted without a shared counter.
//!
//! Every spawn adds one and every end takes one away, a million times a second in a
//! spawn-heavy program. One shared atomic would be a cache line that every worker
//! writes on every spawn and end; here each worker has a padded count of its own,
//! written only by that worker (a load and a store, no locked instruction), and
//! threads that are not workers share one more count (read-modify-writes). A count
//! may go "negative" (wrapping): a process spawned on one worker and ended on another
//! adds to the first and takes from the second. Only the sum means anything.
//!
//! Two readers need the sum to be right:
//!
//! * **Shutdown** waits for it to reach zero ([`LiveCount::wait_zero`]). The spawn
//!   side runs `add`, a SeqCst fence, then checks whether spawns are still accepted;
//!   shutdown clears that flag, fences, then reads the counts (Dekker, see
//!   `Shared::spawn`). So every spawn that went ahead has its `add` visible to
//!   shutdown's reads, while an `end` may not be visible yet: the sum it reads can
//!   only be too high, never too low, and it reads zero only when every process that
//!   went ahead has ended. An end that makes the sum zero should wake it: ends look
//!   at a `draining` flag that shutdown raises before it first reads, and wake it
//!   under its lock when it is up. Without a fence between an end's count and its
//!   look at the flag (it was a locked instruction per process), an end racing the
//!   raising of the flag may miss it while shutdown misses the end; so shutdown
//!   does not rely on being woken: it reads the counts again every
//!   [`RECHECK`] while it waits. Such a race costs a shutdown at most that long.
//! * **Metrics**, which read the counts one by one and may see a spawn on one worker
//!   but not its end on another, or the reverse: a reader that is ordered after an
//!   end (it received the result) sees it, and the sum is clamped at zero.

use crossbeam_utils::CachePadded;

use crate::engine::worker::Caller;
use crate::sync::{fence, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};
use std::time::{Duration, Instant};

/// How often shutdown reads the counts again while it waits for them to reach
/// zero, in case the end that got there did not see it waiting (see the module
/// docs).
const RECHECK: Duration = Duration::from_millis(1);

pub(crate) struct LiveCount {
    workers: Box<[CachePadded<AtomicUsize>]>,
    outside: CachePadded<AtomicUsize>,
    /// Raised by shutdown before it waits: from then on ends wake it.
    draining: CachePadded<AtomicBool>,
    lock: Mutex<()>,
    zero: Condvar,
}

impl LiveCount {
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            workers: (0..workers).map(|_| Default::default()).collect(),
            outside: Default::default(),
            draining: Default::default(),
            lock: Mutex::new(()),
            zero: Condvar::new(),
        }
    }

    /// One process more. The caller fences before it checks whether spawns are
    /// accepted (see the module docs).
    #[inline]
    pub(crate) fn add(&self, caller: Caller) {
        self.change(caller, 1);
    }

    /// One process fewer; wakes shutdown if it is waiting (or lets it find out by
    /// itself: see the module docs).
    #[inline]
    pub(crate) fn end(&self, caller: Caller) {
        self.change(caller, 1_usize.wrapping_neg());
        // loom's condition variable cannot time out, so a model cannot recheck:
        // there the end fences, as it did, and shutdown is always woken (a model
        // whose end misses it would hang).
        #[cfg(loom)]
        fence(Ordering::SeqCst);
        if self.draining.load(Ordering::Relaxed) {
            self.wake();
        }
    }

    #[inline]
    fn change(&self, caller: Caller, delta: usize) {
        match caller {
            Caller::Worker(index) => {
                // Only worker `index` writes this count: no locked instruction.
                let count = &self.workers[index];
                count.store(
                    count.load(Ordering::Relaxed).wrapping_add(delta),
                    Ordering::Relaxed,
                );
            }
            Caller::Outside => {
                self.outside.fetch_add(delta, Ordering::Relaxed);
            }
        }
    }

    #[cold]
    fn wake(&self) {
        let _guard = self.lock.lock();
        self.zero.notify_all();
    }

    /// The number of live processes, as well as it can be read while they change
    /// (exact for a reader ordered after the spawns and ends it is asked about).
    pub(crate) fn get(&self) -> usize {
        let sum = self
            .workers
            .iter()
            .fold(self.outside.load(Ordering::SeqCst), |sum, count| {
                sum.wrapping_add(count.load(Ordering::SeqCst))
            });
        // Wrapped below zero: an end seen before its spawn.
        if sum > usize::MAX / 2 {
            0
        } else {
            sum
        }
    }

    /// Waits until no process is live or `deadline` passes; true if none is live.
    /// Called by shutdown after spawns stopped being accepted.
    pub(crate) fn wait_zero(&self, deadline: Instant) -> bool {
        self.draining.store(true, Ordering::SeqCst);
        // Pairs with the fence of an end under loom (once per shutdown, so kept
        // outside it too).
        fence(Ordering::SeqCst);
        let mut guard = self.lock.lock();
        while self.get() > 0 {
            // Woken by the end that gets there, or reading again a little later.
            let recheck = Instant::now() + RECHECK;
            if self
                .zero
                .wait_until(&mut guard, deadline.min(recheck))
                .timed_out()
                && Instant::now() >= deadline
            {
                return self.get() == 0;
            }
        }
        true
    }
}
