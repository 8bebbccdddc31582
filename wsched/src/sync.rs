//! The one switch between `std` synchronisation and loom's model-checked copies.
//!
//! Every concurrent structure in the runtime imports its atomics, cells, locks and
//! threads from here, never from `std` directly, so that `RUSTFLAGS="--cfg loom"`
//! swaps the whole runtime onto loom's scheduler. Capacities that loom must reach
//! (ring wrap-around, overflow) are shrunk under `cfg(loom)` where they are defined.

#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    pub(crate) use std::sync::Arc;
    pub(crate) use std::thread;

    /// A `parking_lot` mutex: no poisoning, so a panicking process cannot wedge a lock.
    pub(crate) type Mutex<T> = parking_lot::Mutex<T>;
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
    pub(crate) type Condvar = parking_lot::Condvar;
    /// A `parking_lot` reader-writer lock, for tables read far more than written.
    pub(crate) type RwLock<T> = parking_lot::RwLock<T>;

    /// Busy-wait hint for spin loops (loom turns this into a scheduling point).
    #[inline]
    pub(crate) fn spin_loop() {
        std::hint::spin_loop();
    }

    /// An `UnsafeCell` with loom's closure-based access API, so that code is written once.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T: ?Sized>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }
    }

    impl<T: ?Sized> UnsafeCell<T> {
        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    pub(crate) use loom::sync::Arc;
    pub(crate) use loom::thread;

    /// loom's mutex behind `parking_lot`'s API (no poisoning, `lock()` returns the guard).
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    /// The guard keeps loom's guard in an `Option` so that [`Condvar::wait`] can pass
    /// it through loom's by-value API behind parking_lot's by-reference one.
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        pub(crate) fn get_mut(&mut self) -> &mut T {
            self.0
                .get_mut()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(
                self.0
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            ))
        }
    }

    impl<T> std::ops::Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().expect("guard is held")
        }
    }

    impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().expect("guard is held")
        }
    }

    /// loom's condition variable behind `parking_lot`'s API.
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Self(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let inner = guard.0.take().expect("guard is held");
            // If loom panics inside `wait` (it reports deadlocks that way) the guard
            // stays empty, which is fine: the test is failing anyway.
            guard.0 = Some(
                self.0
                    .wait(inner)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            );
        }

        /// loom cannot time out (its `wait_timeout` never does): a timed wait is a
        /// plain wait, so a model that needs the timeout to make progress
        /// deadlocks, which is how a lost wake-up shows.
        pub(crate) fn wait_for<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _timeout: std::time::Duration,
        ) -> WaitTimeoutResult {
            self.wait(guard);
            WaitTimeoutResult(false)
        }

        /// As [`wait_for`](Self::wait_for).
        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            _deadline: std::time::Instant,
        ) -> WaitTimeoutResult {
            self.wait(guard);
            WaitTimeoutResult(false)
        }

        pub(crate) fn notify_one(&self) -> bool {
            self.0.notify_one();
            true
        }

        pub(crate) fn notify_all(&self) -> usize {
            self.0.notify_all();
            0
        }
    }

    /// loom's reader-writer lock behind `parking_lot`'s API.
    #[derive(Debug, Default)]
    pub(crate) struct RwLock<T>(loom::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::RwLock::new(value))
        }

        pub(crate) fn read(&self) -> loom::sync::RwLockReadGuard<'_, T> {
            self.0
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        pub(crate) fn write(&self) -> loom::sync::RwLockWriteGuard<'_, T> {
            self.0
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }
    }

    /// parking_lot's answer to a timed wait, for loom's waits that never time out.
    pub(crate) struct WaitTimeoutResult(bool);

    impl WaitTimeoutResult {
        pub(crate) fn timed_out(&self) -> bool {
            self.0
        }
    }

    /// In loom, a spin loop must yield to the model scheduler or it never ends.
    #[inline]
    pub(crate) fn spin_loop() {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::*;

/// What a spin lock's guard holds to reach the value it guards: a raw pointer into
/// the lock's cell, or under loom loom's tracked pointer, which reports a data race
/// if two guards' accesses overlap or an unlock did not order them. Both spin
/// locks' guards (`spin_lock.rs`, `spin_rwlock.rs`) hold one.
pub(crate) mod guard_access {
    use super::UnsafeCell;

    /// Shared access, for a reader's guard.
    pub(crate) struct Shared<T> {
        #[cfg(not(loom))]
        ptr: *const T,
        #[cfg(loom)]
        ptr: loom::cell::ConstPtr<T>,
    }

    /// Exclusive access, for a writer's (or a mutex's) guard.
    pub(crate) struct Exclusive<T> {
        #[cfg(not(loom))]
        ptr: *mut T,
        #[cfg(loom)]
        ptr: loom::cell::MutPtr<T>,
    }

    impl<T> Shared<T> {
        /// Access to `cell`'s value, for a guard its lock just handed out.
        #[inline]
        pub(crate) fn of(cell: &UnsafeCell<T>) -> Self {
            #[cfg(not(loom))]
            let ptr = cell.with(|value| value);
            #[cfg(loom)]
            let ptr = cell.get();
            Self { ptr }
        }

        /// The value.
        ///
        /// # Safety
        /// No exclusive access to the value exists while the returned reference
        /// lives, and the cell outlives it (the guard's lock enforces both).
        #[inline]
        pub(crate) unsafe fn get(&self) -> &T {
            // SAFETY: the caller's contract.
            #[cfg(not(loom))]
            unsafe {
                &*self.ptr
            }
            // SAFETY: as above.
            #[cfg(loom)]
            unsafe {
                self.ptr.deref()
            }
        }
    }

    impl<T> Exclusive<T> {
        /// Access to `cell`'s value, for a guard its lock just handed out.
        #[inline]
        pub(crate) fn of(cell: &UnsafeCell<T>) -> Self {
            #[cfg(not(loom))]
            let ptr = cell.with_mut(|value| value);
            #[cfg(loom)]
            let ptr = cell.get_mut();
            Self { ptr }
        }

        /// The value, shared.
        ///
        /// # Safety
        /// No other access to the value exists while the returned reference lives,
        /// and the cell outlives it (the guard's lock enforces both).
        #[inline]
        pub(crate) unsafe fn get(&self) -> &T {
            // SAFETY: the caller's contract.
            #[cfg(not(loom))]
            unsafe {
                &*self.ptr
            }
            // SAFETY: as above.
            #[cfg(loom)]
            unsafe {
                self.ptr.deref()
            }
        }

        /// The value, exclusively.
        ///
        /// # Safety
        /// As for [`get`](Self::get); `&mut self` makes this the only reference made
        /// through this access.
        #[inline]
        pub(crate) unsafe fn get_mut(&mut self) -> &mut T {
            // SAFETY: the caller's contract.
            #[cfg(not(loom))]
            unsafe {
                &mut *self.ptr
            }
            // SAFETY: as above.
            #[cfg(loom)]
            unsafe {
                self.ptr.deref()
            }
        }
    }
}
