//! Crate-private pieces exposed to the benchmark suite (`bench/`, package
//! `wsched-bench`) behind the `bench-internals` cargo feature. Not an API: hidden from
//! the docs, no stability promise, never enabled by the runtime itself.
//!
//! Only thin, `#[inline]` forwarding wrappers live here (a `pub(crate)` item cannot be
//! re-exported as `pub`), so that `engine/queue/local.rs`, which is model-checked
//! under loom, stays exactly as it is.

use std::cell::RefCell;

use crate::engine::queue::local;

/// Slots in each worker's ring.
pub const LOCAL_QUEUE_CAPACITY: usize = local::LOCAL_QUEUE_CAPACITY;

/// Creates a per-worker deque: the owner's handle and the thieves' handle.
pub fn local<T>() -> (Local<T>, Steal<T>) {
    let (owner, thief) = local::local();
    (Local(owner), Steal(thief))
}

/// The owner's handle of the per-worker deque (`runtime::queue::local::Local`).
pub struct Local<T>(local::Local<T>);

impl<T> Local<T> {
    /// Pushes `item` to the back; when the ring is full, moves half of it (plus
    /// `item`) to `overflow` instead. Returns how many items went to `overflow`.
    #[inline]
    pub fn push_back_or_overflow(&mut self, item: T, overflow: &mut Vec<T>) -> usize {
        self.0
            .push_back_or_overflow(item, &VecOverflow(RefCell::new(overflow)))
    }

    /// Pops the oldest item.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        self.0.pop()
    }

    /// Items in the queue.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the queue is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The thieves' handle of the per-worker deque (`runtime::queue::local::Steal`).
pub struct Steal<T>(local::Steal<T>);

impl<T> Clone for Steal<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> Steal<T> {
    /// Steals half (rounded up) of the items: returns the oldest, appends the rest to
    /// `dst`. Also returns how many items were taken in all.
    #[inline]
    pub fn steal_half_into(&self, dst: &mut Local<T>) -> Option<(T, usize)> {
        self.0.steal_half_into_counted(&mut dst.0)
    }

    /// A racy snapshot of how many items could be stolen.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether [`len`](Self::len) is zero.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An overflow sink that collects into a vector.
struct VecOverflow<'a, T>(RefCell<&'a mut Vec<T>>);

impl<T> local::Overflow<T> for VecOverflow<'_, T> {
    fn push_batch(&self, items: impl Iterator<Item = T>) {
        self.0.borrow_mut().extend(items);
    }
}
