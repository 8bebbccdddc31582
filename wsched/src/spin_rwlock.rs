//! A reader-writer spin lock for the PID table's shards: sections of a few
//! instructions, written by every spawn and every end, read by lookups.
//!
//! `parking_lot::RwLock` takes a locked instruction to write-lock a shard and
//! another to unlock it (its unlock is a compare-and-swap, to find out whether a
//! thread parked): a spawn publishes its process in a shard and its end frees the
//! slot, so four locked instructions per process, of the fifteen a chain of spawns
//! took per link; on a line the other worker writes too, when it ends the processes
//! this one spawns. This lock takes one to lock and, for a writer, none to unlock
//! (a plain Release store): a link of that chain took 226–230 ns, and 211–216 ns
//! with it. Readers take one to lock and one to unlock, as before.
//!
//! # Invariants
//!
//! The lock is one word: [`WRITER`] (a writer holds it), [`WRITER_WAITING`] (a
//! writer waits: new readers hold back) and the number of readers holding it.
//!
//! * Readers enter only by a compare-and-swap from a word with neither writer bit
//!   to the same word plus one; a writer enters only by a compare-and-swap from a
//!   word with no writer and no reader (the waiting bit may be set) to [`WRITER`]
//!   alone. So while [`WRITER`] is set no reader is inside and no other writer
//!   enters, and while readers are inside no writer enters: a write guard's
//!   `&mut T` is unique, and read guards only share `&T`.
//! * While [`WRITER`] is set, nobody else changes the word: a reader's
//!   compare-and-swap fails (it never adds blindly), and a waiting writer sets
//!   [`WRITER_WAITING`] only by a compare-and-swap from a word with readers and no
//!   writer. So the writer unlocks with a plain store of zero and loses nothing.
//! * Lock is Acquire and unlock is Release (a reader's decrement too): what a writer
//!   did happens before every later holder's access, and what readers read happens
//!   before the next writer's changes.
//! * A waiting writer holds new readers back ([`WRITER_WAITING`]), so a stream of
//!   lookups cannot starve a spawn; the readers inside finish and let it in.
//! * Nothing that blocks or runs user code runs under the lock. A waiter spins
//!   briefly, then yields its thread, in case the holder was preempted.
//!
//! Model-checked by `runtime/tests/loom_spin_rwlock.rs` (a writer against a reader
//! and a writer, loom tracking each guard's access to the value), and stressed on
//! real threads below. Under loom the PID table itself takes loom's `RwLock`, which
//! stands in for this one exactly, for the reason the mailboxes take loom's mutex:
//! the models of the whole scheduler would exceed loom's branch budget with every
//! spin a branch (see `spin_lock.rs`).

use std::ops::{Deref, DerefMut};

use crate::sync::guard_access::{Exclusive, Shared};
use crate::sync::{spin_loop, thread, AtomicUsize, Ordering, UnsafeCell};

/// Set while a writer holds the lock.
const WRITER: usize = 1 << (usize::BITS - 1);
/// Set while a writer waits for the lock: new readers hold back.
const WRITER_WAITING: usize = 1 << (usize::BITS - 2);
/// Either writer bit: a reader enters only when both are clear.
const WRITER_BITS: usize = WRITER | WRITER_WAITING;

/// Spins this many times, re-reading the word, before yielding the thread.
const SPINS_BEFORE_YIELD: u32 = 64;

/// A reader-writer lock that spins (see the module docs).
pub(crate) struct SpinRwLock<T> {
    state: AtomicUsize,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out `&mut T` to one thread at a time and `&T` to several at
// once (see the invariants), as `std::sync::RwLock` does, which needs `T: Send +
// Sync`.
unsafe impl<T: Send + Sync> Sync for SpinRwLock<T> {}
// SAFETY: the lock owns its `T`.
unsafe impl<T: Send> Send for SpinRwLock<T> {}

/// Waits a little longer each round: spins, then yields the thread.
struct Backoff(u32);

impl Backoff {
    fn wait(&mut self) {
        if self.0 < SPINS_BEFORE_YIELD {
            self.0 += 1;
            spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

impl<T> SpinRwLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            state: AtomicUsize::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks for reading, spinning (then yielding) while a writer holds or waits
    /// for the lock.
    #[inline]
    pub(crate) fn read(&self) -> SpinReadGuard<'_, T> {
        let word = self.state.load(Ordering::Relaxed);
        if word & WRITER_BITS != 0
            || self
                .state
                .compare_exchange_weak(word, word + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            self.read_contended();
        }
        SpinReadGuard {
            lock: self,
            access: Shared::of(&self.value),
        }
    }

    #[cold]
    #[inline(never)]
    fn read_contended(&self) {
        let mut backoff = Backoff(0);
        loop {
            let word = self.state.load(Ordering::Relaxed);
            if word & WRITER_BITS == 0
                && self
                    .state
                    .compare_exchange(word, word + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            backoff.wait();
        }
    }

    /// Locks for writing, spinning (then yielding) while others hold the lock.
    #[inline]
    pub(crate) fn write(&self) -> SpinWriteGuard<'_, T> {
        if self
            .state
            .compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.write_contended();
        }
        SpinWriteGuard {
            lock: self,
            access: Exclusive::of(&self.value),
        }
    }

    #[cold]
    #[inline(never)]
    fn write_contended(&self) {
        let mut backoff = Backoff(0);
        loop {
            let word = self.state.load(Ordering::Relaxed);
            if word & !WRITER_WAITING == 0 {
                // Nobody inside: enter, clearing the waiting bit (another writer
                // still waiting sets it again).
                if self
                    .state
                    .compare_exchange(word, WRITER, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
            } else if word & WRITER_BITS == 0 {
                // Readers inside: hold new ones back (those inside finish). Never
                // while a writer is inside, whose unlock is a plain store.
                let _ = self.state.compare_exchange(
                    word,
                    word | WRITER_WAITING,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            backoff.wait();
        }
    }

    /// The value, through the exclusive borrow of the lock: no locking.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every guard and every other access.
        self.value.with_mut(|value| unsafe { &mut *value })
    }
}

/// Holds the lock for reading; unlocks when dropped.
pub(crate) struct SpinReadGuard<'a, T> {
    lock: &'a SpinRwLock<T>,
    access: Shared<T>,
}

impl<T> Deref for SpinReadGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: while a read guard lives no writer is inside (see the invariants),
        // and the guard borrows the lock, so the value is alive and only read.
        unsafe { self.access.get() }
    }
}

impl<T> Drop for SpinReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: this reader's reads happen before the next writer's changes.
        self.lock.state.fetch_sub(1, Ordering::Release);
    }
}

/// Holds the lock for writing; unlocks when dropped.
pub(crate) struct SpinWriteGuard<'a, T> {
    lock: &'a SpinRwLock<T>,
    access: Exclusive<T>,
}

impl<T> Deref for SpinWriteGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one while it lives (see the invariants),
        // and it borrows the lock, so the value is alive and nobody else accesses it.
        unsafe { self.access.get() }
    }
}

impl<T> DerefMut for SpinWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`.
        unsafe { self.access.get_mut() }
    }
}

impl<T> Drop for SpinWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // A plain store (see the invariants). Release: the writer's changes happen
        // before the next holder's Acquire.
        self.lock.state.store(0, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Writers move units between two counters and append to a log, readers check
    /// that the counters always add up and the log matches them: a reader inside
    /// with a writer, or two writers at once, shows as a torn total or a lost entry.
    #[test]
    fn readers_never_see_a_write_half_done_and_no_write_is_lost() {
        const WRITERS: usize = 2;
        const READERS: usize = 2;
        const ROUNDS: usize = 20_000;
        let lock = Arc::new(SpinRwLock::new((0_i64, 0_i64, Vec::new())));
        let writing = Arc::new(AtomicBool::new(true));
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let (lock, writing) = (lock.clone(), writing.clone());
                std::thread::spawn(move || {
                    let mut reads = 0_u64;
                    while writing.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                        let guard = lock.read();
                        assert_eq!(guard.0 + guard.1, 0, "a write seen half done");
                        assert_eq!(guard.2.len() as i64, guard.0, "the log and the count");
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|id| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for round in 0..ROUNDS {
                        let mut guard = lock.write();
                        guard.0 += 1;
                        guard.1 -= 1;
                        guard.2.push((id, round));
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        for reader in readers {
            assert!(reader.join().unwrap() > 0);
        }
        let mut lock = Arc::try_unwrap(lock).ok().expect("threads are done");
        let (up, down, log) = lock.get_mut();
        assert_eq!(
            (*up, *down),
            ((WRITERS * ROUNDS) as i64, -((WRITERS * ROUNDS) as i64))
        );
        for id in 0..WRITERS {
            let rounds: Vec<usize> = log.iter().filter(|e| e.0 == id).map(|e| e.1).collect();
            assert_eq!(rounds, (0..ROUNDS).collect::<Vec<_>>(), "writer {id}");
        }
    }

    #[test]
    fn a_waiting_writer_holds_new_readers_back() {
        let lock = Arc::new(SpinRwLock::new(0));
        let first = lock.read();
        let writer = {
            let lock = lock.clone();
            std::thread::spawn(move || *lock.write() += 1)
        };
        // The writer marks itself waiting while the first reader holds the lock.
        while lock.state.load(Ordering::Relaxed) & WRITER_WAITING == 0 {
            std::thread::yield_now();
        }
        assert!(
            lock.state.load(Ordering::Relaxed) & WRITER == 0,
            "not inside yet"
        );
        drop(first);
        writer.join().unwrap();
        // A reader after it sees its write.
        assert_eq!(*lock.read(), 1);
        assert_eq!(
            lock.state.load(Ordering::Relaxed),
            0,
            "unlocked, nothing left over"
        );
    }

    #[test]
    fn guards_unlock_when_dropped_also_while_unwinding() {
        let lock = SpinRwLock::new(1);
        for write in [false, true] {
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if write {
                    let _guard = lock.write();
                    panic!("in the critical section");
                }
                let _guard = lock.read();
                panic!("in the critical section");
            }));
            assert!(unwound.is_err());
        }
        // Would spin forever if a panic had left it locked.
        *lock.write() += 1;
        assert_eq!(*lock.read(), 2);
    }
}
