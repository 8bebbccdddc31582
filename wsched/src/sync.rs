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

    /// Busy-wait hint for spin loops (loom turns this into a scheduling point).
    #[inline]
    pub(crate) fn spin_loop() {
        std::hint::spin_loop();
    }

    /// An `UnsafeCell` with loom's closure-based access API, so that code is written once.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

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
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
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
            // loom's API consumes the guard; parking_lot's borrows it. Swap through a
            // temporary so callers are written once.
            replace_with(guard, |g| {
                self.0
                    .wait(g)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
            });
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

    fn replace_with<T>(slot: &mut T, f: impl FnOnce(T) -> T) {
        // SAFETY: `slot` is read out and written back before anyone can observe it; if
        // `f` panics the process aborts (loom treats panics as test failures anyway), so
        // the moved-out value is never observed twice.
        unsafe {
            let old = std::ptr::read(slot);
            let guard = AbortOnUnwind;
            let new = f(old);
            std::mem::forget(guard);
            std::ptr::write(slot, new);
        }
    }

    struct AbortOnUnwind;
    impl Drop for AbortOnUnwind {
        fn drop(&mut self) {
            std::process::abort();
        }
    }

    /// In loom, a spin loop must yield to the model scheduler or it never ends.
    #[inline]
    pub(crate) fn spin_loop() {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::*;
