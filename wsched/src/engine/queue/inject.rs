//! The global injection queue: FIFO, shared by all workers.
//!
//! New work submitted from outside a worker, wake-ups from other threads and the
//! overflow of full local queues land here. It is a mutex around a `VecDeque`: every
//! operation is short, and batching (a worker takes up to [`GLOBAL_BATCH`] items per
//! lock, overflow arrives half a ring at a time) keeps the lock cold. The length is
//! mirrored in an atomic so that idle workers can check for work without locking.

use std::collections::VecDeque;

use crate::engine::queue::local::{Local, Overflow};
use crate::sync::{AtomicUsize, Mutex, Ordering};

/// How many items a worker moves from the global queue into its own deque at most,
/// besides the one it runs (the seeds' figure).
pub(crate) const GLOBAL_BATCH: usize = 16;

pub(crate) struct Inject<T> {
    queue: Mutex<VecDeque<T>>,
    /// Mirrors `queue.len()`; written under the lock, read without it.
    len: AtomicUsize,
    /// Items pushed from outside the workers (see [`push_remote`](Self::push_remote)):
    /// a statistic, written under the lock (so a load and a store, no locked
    /// instruction), read without it. A plain std atomic even under loom, as the
    /// metrics' counters are.
    remote: std::sync::atomic::AtomicU64,
}

impl<T> Inject<T> {
    pub(crate) fn new() -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            remote: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many items were pushed from outside the workers.
    pub(crate) fn remote_pushes(&self) -> u64 {
        self.remote.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the queue looks empty. A racy hint, exact once producers are quiet;
    /// the park protocol orders it against pushes with SeqCst fences.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    // Used by the loom models; the runtime pushes through `push_remote`.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn push(&self, item: T) {
        let mut q = self.queue.lock();
        q.push_back(item);
        self.len.store(q.len(), Ordering::Release);
    }

    /// [`push`](Self::push) from outside the workers: counted as a remote schedule.
    pub(crate) fn push_remote(&self, item: T) {
        let mut q = self.queue.lock();
        q.push_back(item);
        self.len.store(q.len(), Ordering::Release);
        self.count_remote(1);
    }

    /// A batch pushed from outside the workers, counted as remote schedules.
    pub(crate) fn push_batch_remote(&self, items: impl Iterator<Item = T>) {
        let mut q = self.queue.lock();
        let before = q.len();
        q.extend(items);
        self.len.store(q.len(), Ordering::Release);
        self.count_remote((q.len() - before) as u64);
    }

    /// Adds to the remote count; called under the queue's lock, which orders writers.
    fn count_remote(&self, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.remote.store(self.remote.load(Relaxed) + n, Relaxed);
    }

    // Used by the loom models.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn pop(&self) -> Option<T> {
        if self.is_empty() {
            return None;
        }
        let mut q = self.queue.lock();
        let item = q.pop_front();
        self.len.store(q.len(), Ordering::Release);
        item
    }

    /// Pops one item to run now and moves up to `max_batch` more into `dst`, never
    /// more than a fair share (`len / workers + 1`, as Go does) so that one worker does
    /// not hoard a burst of submissions while the others sit idle.
    pub(crate) fn pop_batch_into(
        &self,
        dst: &mut Local<T>,
        max_batch: usize,
        workers: usize,
    ) -> Option<(T, usize)> {
        if self.is_empty() {
            return None;
        }
        let mut q = self.queue.lock();
        let first = q.pop_front()?;
        let fair = q.len() / workers.max(1) + 1;
        let n = q.len().min(max_batch).min(fair).min(dst.remaining_slots());
        dst.push_back_batch(q.drain(..n));
        self.len.store(q.len(), Ordering::Release);
        Some((first, n))
    }

    /// Removes everything (used when the scheduler stops).
    pub(crate) fn drain_all(&self) -> Vec<T> {
        let mut q = self.queue.lock();
        let items = q.drain(..).collect();
        self.len.store(0, Ordering::Release);
        items
    }
}

impl<T> Overflow<T> for Inject<T> {
    fn push_batch(&self, items: impl Iterator<Item = T>) {
        let mut q = self.queue.lock();
        q.extend(items);
        self.len.store(q.len(), Ordering::Release);
    }
}
