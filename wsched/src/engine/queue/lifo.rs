//! The LIFO slot: one process a worker runs next, which other workers may steal.
//!
//! A process woken by a step on worker W (a message, a completion from a handler on
//! W) most likely shares W's cache with its waker, so W runs it next instead of
//! queueing it behind older work: a ping-pong pair runs back to back. But W is busy
//! with the rest of the waking step, which may be long; meanwhile the woken process
//! must not be stranded while other workers idle. So the slot is stealable, as Go's
//! `runnext` is, and not private, as tokio's LIFO slot is.
//!
//! # Invariants
//!
//! * The slot holds either nothing (a null pointer) or one task, as the thin
//!   pointer [`SlotTask::into_raw`] made of it (for an `Arc`, its strong count),
//!   which the slot owns.
//! * Only the owner puts a task in; the owner and thieves take it out, each by one
//!   atomic `swap` of null. So a task put in is taken out exactly once, by whoever's
//!   swap returned it, who turns it back into the task with
//!   [`SlotTask::from_raw`]: a task is never lost, duplicated or dropped twice.
//! * `put` into a slot its owner sees empty is a plain store: nobody but the owner
//!   makes the slot non-null, so nothing can fill it between that load and the
//!   store (a thief's swap there finds null and writes null). A slot seen full is
//!   swapped, as the task in it may be being stolen. A spawn or a wake-up into an
//!   empty slot, the common case, costs no locked instruction.
//! * The store and the swaps release the task (and everything its waker wrote
//!   before queueing it) to whoever takes it; the swaps' acquire half makes the
//!   taker see it.
//!
//! See `worker.rs` for when thieves may take. The slot never blocks and never
//! allocates.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::sync::{AtomicPtr, Ordering};

/// A task that travels through the slot as one thin pointer owning it.
pub(crate) trait SlotTask: Sized {
    /// What the thin pointer points to.
    type Target;

    /// Gives up the task as a pointer that owns it.
    fn into_raw(self) -> *mut Self::Target;

    /// Takes back the task `into_raw` gave up.
    ///
    /// # Safety
    /// `raw` came from `into_raw`, and is taken back once.
    unsafe fn from_raw(raw: *mut Self::Target) -> Self;
}

impl<T> SlotTask for Arc<T> {
    type Target = T;

    fn into_raw(self) -> *mut T {
        Arc::into_raw(self).cast_mut()
    }

    unsafe fn from_raw(raw: *mut T) -> Self {
        // SAFETY: the caller passes back what `into_raw` returned, once.
        unsafe { Arc::from_raw(raw) }
    }
}

pub(crate) struct LifoSlot<T: SlotTask> {
    task: AtomicPtr<T::Target>,
    /// The slot owns a `T` when non-null.
    _owns: PhantomData<T>,
}

// SAFETY: the slot moves tasks between threads (put by one, taken by another), which
// is sound when `T: Send`. It never hands out a shared reference to its content.
unsafe impl<T: SlotTask + Send> Send for LifoSlot<T> {}
// SAFETY: as above; all access goes through atomic swaps.
unsafe impl<T: SlotTask + Send> Sync for LifoSlot<T> {}

impl<T: SlotTask> LifoSlot<T> {
    pub(crate) fn new() -> Self {
        Self {
            task: AtomicPtr::new(std::ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Puts `task` into the slot; returns the task it held before, if any. Called
    /// by the slot's owner only (see the invariants).
    pub(crate) fn put(&self, task: T) -> Option<T> {
        let new = task.into_raw();
        if self.task.load(Ordering::Relaxed).is_null() {
            // Only this thread makes the slot non-null: it stays empty until this
            // store (see the invariants).
            self.task.store(new, Ordering::Release);
            return None;
        }
        let previous = self.task.swap(new, Ordering::AcqRel);
        // SAFETY: a non-null value in the slot came from `into_raw` in `put`, and our
        // swap removed it, so we own it (see the invariants).
        (!previous.is_null()).then(|| unsafe { T::from_raw(previous) })
    }

    /// Takes the task out of the slot, if it holds one.
    pub(crate) fn take(&self) -> Option<T> {
        // A plain load first: an empty slot (most calls) costs no locked instruction.
        if self.task.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let previous = self.task.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: as in `put`: our swap removed the pointer, so we own it.
        (!previous.is_null()).then(|| unsafe { T::from_raw(previous) })
    }

    /// Whether the slot looks occupied (a racy hint; the park protocol orders it
    /// against `put` with SeqCst fences).
    pub(crate) fn is_occupied(&self) -> bool {
        !self.task.load(Ordering::Acquire).is_null()
    }
}

impl<T: SlotTask> Drop for LifoSlot<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

impl<T: SlotTask> Default for LifoSlot<T> {
    fn default() -> Self {
        Self::new()
    }
}
