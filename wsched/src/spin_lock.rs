//! A spin lock for critical sections of a few instructions that two workers may
//! enter at once: a process's mailbox.
//!
//! `parking_lot::Mutex` takes a locked instruction to lock and another to unlock
//! (its unlock is a compare-and-swap, to find out whether a thread parked). A
//! mailbox is locked for a push or a drain, tens of nanoseconds, by workers that
//! never wait long, and under a fan-in both workers push into the same one: half of
//! a send's time went to those two instructions on one contended line. This lock
//! takes one locked instruction (the compare-and-swap that locks); unlocking is a
//! plain Release store.
//!
//! # Invariants
//!
//! * `locked` is true exactly while a [`SpinLockGuard`] exists; only the thread
//!   whose compare-and-swap turned it from false to true creates the guard, and only
//!   the guard's drop turns it back. So at most one guard exists: the `&mut T` it
//!   hands out is unique.
//! * Lock is Acquire and unlock is Release: everything a holder did to the value
//!   happens before the next holder's access.
//! * Nothing that can block or run user code runs under the lock (callers drop user
//!   values after unlocking), so a waiter spins briefly; it still yields its thread
//!   after a while, in case the holder was preempted (a VM with two vCPUs and more
//!   threads than that is the usual case here).
//!
//! Model-checked on its own (`runtime/tests/loom_spin_lock.rs`), as the mailbox's
//! lock inside the runtime (the models of `runtime/tests/loom_state.rs`: senders,
//! completers and shutdown against the owner's drains, suspension points and the
//! closing of the mailbox, each holder's access to the mailbox tracked by loom),
//! and on real threads by the stress test below.
//!
//! Under loom a cell's mailbox takes this lock only where a model asks for it
//! ([`spin_mailboxes`]), and loom's mutex otherwise: the models that run the whole
//! worker loop on loom threads (`loom_scheduler.rs` and the models of names, links,
//! monitors, calls and dead letters) exceed loom's branch budget with it, and still
//! had not finished after ten minutes with ten times the budget: every round of a
//! contended spin is a branch where loom may switch threads, on top of the workers'
//! own idle spinning. Those models check the protocols around the mailbox, for
//! which a mutex stands in exactly (both order holders the same way).

use std::ops::{Deref, DerefMut};

use crate::sync::guard_access::Exclusive;
use crate::sync::{spin_loop, thread, AtomicBool, Ordering, UnsafeCell};

/// The lock of a process's mailbox (see the module docs for loom's).
#[cfg(not(loom))]
pub(crate) type MailboxLock<T> = SpinLock<T>;
#[cfg(not(loom))]
pub(crate) type MailboxGuard<'a, T> = SpinLockGuard<'a, T>;
#[cfg(all(loom, test))]
pub(crate) use loom_mailbox::spin_mailboxes;
#[cfg(loom)]
pub(crate) use loom_mailbox::{MailboxGuard, MailboxLock};

/// Spins this many times, re-reading the flag, before yielding the thread.
const SPINS_BEFORE_YIELD: u32 = 64;

/// A mutual-exclusion lock that spins (see the module docs). `repr(C)`: the flag
/// comes first, so that it shares a cache line with the start of the value, which a
/// mailbox makes its first event (see the cell's `Header`).
#[repr(C)]
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands the value to one thread at a time (see the module's
// invariants), so sharing the lock only ever moves `T` between threads: `T: Send`
// is what that needs, as for `std::sync::Mutex`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks, spinning (then yielding) while another thread holds the lock.
    #[inline]
    pub(crate) fn lock(&self) -> SpinLockGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinLockGuard {
            lock: self,
            access: Exclusive::of(&self.value),
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0;
        loop {
            // Wait on a plain load (the line stays shared) before trying again.
            while self.locked.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    spin_loop();
                } else {
                    thread::yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    /// The value, through the exclusive borrow of the lock: no locking.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every guard and every other access.
        self.value.with_mut(|value| unsafe { &mut *value })
    }
}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

/// Holds the lock; unlocks when dropped.
pub(crate) struct SpinLockGuard<'a, T> {
    lock: &'a SpinLock<T>,
    access: Exclusive<T>,
}

impl<T> Deref for SpinLockGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see the module's invariants), and it
        // borrows the lock, so the value is alive and nobody else accesses it.
        unsafe { self.access.get() }
    }
}

impl<T> DerefMut for SpinLockGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`.
        unsafe { self.access.get_mut() }
    }
}

impl<T> Drop for SpinLockGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: the holder's accesses happen before the next holder's Acquire.
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// Under loom: the mailbox's lock is this spin lock or loom's mutex, chosen when the
/// cell is made (see the module docs). Glue only: the locking is each lock's own.
#[cfg(loom)]
mod loom_mailbox {
    use std::cell::Cell;
    use std::ops::{Deref, DerefMut};

    use super::{SpinLock, SpinLockGuard};
    use crate::sync::{Mutex, MutexGuard};

    loom::thread_local! {
        static SPIN: Cell<bool> = Cell::new(false);
    }

    /// Makes the cells this (loom) thread creates from now on lock their mailboxes
    /// with the runtime's spin lock.
    #[cfg(test)]
    pub(crate) fn spin_mailboxes() {
        SPIN.with(|spin| spin.set(true));
    }

    pub(crate) enum MailboxLock<T> {
        Spin(SpinLock<T>),
        Mutex(Mutex<T>),
    }

    pub(crate) enum MailboxGuard<'a, T> {
        Spin(SpinLockGuard<'a, T>),
        Mutex(MutexGuard<'a, T>),
    }

    impl<T> MailboxLock<T> {
        pub(crate) fn new(value: T) -> Self {
            if SPIN.with(Cell::get) {
                Self::Spin(SpinLock::new(value))
            } else {
                Self::Mutex(Mutex::new(value))
            }
        }

        pub(crate) fn lock(&self) -> MailboxGuard<'_, T> {
            match self {
                Self::Spin(lock) => MailboxGuard::Spin(lock.lock()),
                Self::Mutex(lock) => MailboxGuard::Mutex(lock.lock()),
            }
        }

        pub(crate) fn get_mut(&mut self) -> &mut T {
            match self {
                Self::Spin(lock) => lock.get_mut(),
                Self::Mutex(lock) => lock.get_mut(),
            }
        }
    }

    impl<T> Deref for MailboxGuard<'_, T> {
        type Target = T;

        fn deref(&self) -> &T {
            match self {
                Self::Spin(guard) => guard,
                Self::Mutex(guard) => guard,
            }
        }
    }

    impl<T> DerefMut for MailboxGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            match self {
                Self::Spin(guard) => guard,
                Self::Mutex(guard) => guard,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Threads add to a counter and append their ids under the lock, with no
    /// atomics on the data: a lost or doubled update, or a torn `Vec`, shows in the
    /// totals.
    #[test]
    fn concurrent_holders_lose_and_duplicate_nothing() {
        const THREADS: usize = 4;
        const ROUNDS: usize = 20_000;
        let lock = Arc::new(SpinLock::new((0_u64, Vec::new())));
        let handles: Vec<_> = (0..THREADS)
            .map(|id| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for round in 0..ROUNDS {
                        let mut guard = lock.lock();
                        guard.0 += 1;
                        guard.1.push((id, round));
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        let mut lock = Arc::try_unwrap(lock).ok().expect("threads are done");
        let (count, seen) = lock.get_mut();
        assert_eq!(*count, (THREADS * ROUNDS) as u64);
        assert_eq!(seen.len(), THREADS * ROUNDS);
        // Each thread's entries are all there, in its order.
        for id in 0..THREADS {
            let rounds: Vec<usize> = seen.iter().filter(|e| e.0 == id).map(|e| e.1).collect();
            assert_eq!(rounds, (0..ROUNDS).collect::<Vec<_>>(), "thread {id}");
        }
    }

    #[test]
    fn the_guard_unlocks_when_dropped_also_while_unwinding() {
        let lock = SpinLock::new(1);
        *lock.lock() += 1;
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = lock.lock();
            panic!("in the critical section");
        }));
        assert!(unwound.is_err());
        // Would spin forever if the panic had left it locked.
        assert_eq!(*lock.lock(), 2);
    }
}
