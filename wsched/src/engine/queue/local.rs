//! The per-worker run queue: a fixed ring its owner pushes to and pops from, and that
//! other workers steal half of in one claim (tokio's and Go's shape).
//!
//! # Layout
//!
//! ```text
//!            steal        real                      tail
//!   ... free | being stolen | queued, visible to all | free ...
//!              (a thief is     (owner pops here,
//!               copying these)  thieves claim here)
//! ```
//!
//! * `buffer`: `LOCAL_QUEUE_CAPACITY` slots of `UnsafeCell<MaybeUninit<T>>`. The slot
//!   of index `i` is `buffer[i & MASK]`.
//! * `tail: AtomicU32`: one past the newest item. Written **only by the owner** (the
//!   holder of the unique [`Local`]).
//! * `head: AtomicU64`: two `u32` indices packed as `steal << 32 | real`.
//!   - `real` is the oldest item still in the queue. The owner (pop, overflow) and
//!     thieves (claim) move it forward, always by CAS on the whole word.
//!   - `steal` is the oldest slot that may still be *read*. It equals `real` except
//!     while a thief copies the range `[steal, real)` it claimed; only that thief moves
//!     `steal` (up to `real`) while they differ. `steal != real` therefore means "a
//!     steal is in progress", and other thieves back off.
//!
//! # Invariants
//!
//! 1. `steal <= real <= tail` and `tail - steal <= CAPACITY`, in wrapping `u32`
//!    arithmetic. Slots of `[real, tail)` hold initialised items owned by the queue;
//!    slots of `[steal, real)` are being moved out by the thief that claimed them and
//!    count as occupied; every other slot is logically empty (its bytes may be a
//!    stale, moved-out copy).
//! 2. Each index in `[real, tail)` is owned by the queue. An index is removed from it
//!    by exactly one successful CAS that moves `real` past it: the owner's pop (one
//!    item), the owner's overflow (half the ring, only when `steal == real`), or a
//!    thief's claim (half the items, only when `steal == real`). The winner of that CAS
//!    is the only party that will ever read (move out) that slot. Because all three
//!    transitions are CASes on the same word, they are totally ordered: an item cannot
//!    be taken twice, and the owner's pop is linearizable against thieves.
//! 3. The owner writes a slot only at `tail`, and only when `tail - steal < CAPACITY`
//!    for a `steal` it loaded with `Acquire`. Physical slot `tail & MASK` was last used
//!    by index `tail - CAPACITY < steal`, which has been fully read (a thief moves
//!    `steal` past a range only after copying it out, with a release CAS). So no read
//!    of a slot can overlap the write that reuses it.
//! 4. An item is never lost: it sits in `[real, tail)` until a CAS removes it, and that
//!    CAS's winner moves it somewhere (the caller, the thief's own queue, the overflow
//!    sink). Dropping [`Local`] pops, and so drops, everything still in `[real, tail)`;
//!    items in `[steal, real)` belong to the thief copying them. `Inner` itself never
//!    drops items (its slots are `MaybeUninit`), so each item is dropped exactly once,
//!    by whoever took it.
//!
//! # Memory orderings
//!
//! * Owner push: writes the slot, then `tail.store(Release)`. A thief's
//!   `tail.load(Acquire)` that sees the new tail therefore sees the item's bytes.
//! * Every load of `head` is `Acquire`, every successful CAS of `head` is `AcqRel`:
//!   - *Release* half: a thief's release CAS (`steal := real`) publishes its reads of
//!     the slots it copied; the owner's `Acquire` load of `head` in push then orders
//!     those reads before it overwrites the slots (invariant 3).
//!   - The owner's pop and overflow CASes also *release* the `tail` stores the owner made
//!     before them. A thief loads `head` (Acquire) *then* `tail` (Acquire); whoever set
//!     the `real` it saw had seen a `tail >= real` (the owner wrote it; a thief read it
//!     with Acquire before its own release CAS), so by transitivity the thief reads a
//!     `tail >= real` too and `tail - real` never underflows.
//!   - *Acquire* half: the owner's pop/overflow CAS may read a value written by a
//!     thief's release CAS. Acquiring it makes the thief's slot reads happen-before any
//!     later owner write directly (release sequences through the owner's RMWs would also
//!     do, but we do not lean on them). A thief's CAS fails with `Acquire` because the
//!     failure value replaces its `Acquire` load of `head` in the next iteration.
//! * A thief appends to its own queue as that queue's owner: the room it fills comes
//!   from `remaining_slots` (an `Acquire` load of its `steal`, invariant 3) and it
//!   publishes the items with one `Release` store of its `tail`, like a push.
//! * The owner reads its own `tail` with `Relaxed`: it is the only writer, so coherence
//!   gives it its latest store. (A `Local` moved to another thread carries the
//!   happens-before of the move.)
//! * The owner's overflow CAS fails `Relaxed`: on failure it starts the push over with
//!   a fresh `Acquire` load.
//!
//! # Steal
//!
//! A thief (1) loads `head`; if `steal != real` it gives up (another steal is running:
//! the victim is being drained already); (2) loads `tail`, and claims
//! `n = ceil((tail - real) / 2)` (capped by the room in its own queue) by CASing `real`
//! to `real + n`, leaving `steal` behind; (3) moves the claimed `[steal, steal + n)` out
//! of the victim's slots, keeping the first (oldest) to return and appending the rest to
//! its own queue; (4) CASes `steal` up to the *current* `real` (the owner may have
//! popped meanwhile, which moves only `real`); (5) publishes its own queue's new `tail`.
//! The returned item needs no slot, so a thief whose queue is full still steals one.
//!
//! If the thief's `head` snapshot is stale when it computes `n`, its claim CAS fails and
//! it retries; so a successful claim used a `(steal, real)` that was current and a
//! `tail` read after it: `n = ceil((tail - real) / 2) <= CAPACITY / 2`, all inside
//! `[real, tail)`.
//!
//! While a steal is in progress the owner still pops (moving only `real`) and pushes
//! while `tail - steal < CAPACITY`. If the ring is full at that point it cannot move
//! half of it out (the claim's slots are still being read, and the overflow CAS requires
//! `steal == real`), so it sends just the new item to the overflow sink; the thief is
//! about to free half the ring anyway.
//!
//! A queue never steals from itself: workers skip their own index when picking a victim
//! (and `&mut Local` plus `&Steal` of the same queue would require the owner to hold
//! both). It would still be memory-safe — the claimed range and the destination range
//! `[tail, tail + n - 1)` are disjoint because `tail - steal <= CAPACITY` bounds both —
//! but it is pointless, and debug builds assert against it.
//!
//! # Wrap-around
//!
//! Indices are free-running `u32`s; all differences use `wrapping_sub`, which is exact
//! because every live difference is at most `CAPACITY`, far below `2^32`. The slot is
//! `index & MASK`; since `CAPACITY` divides `2^32`, index `u32::MAX` and index `0` map
//! to consecutive slots. `head` is monotonic (modulo `2^32`), so a CAS can only succeed
//! spuriously (ABA) if a thief stalls between its load and its CAS while `2^32` items
//! pass through the queue — the same accepted bound as tokio and Go.

use std::cell::Cell;
use std::fmt;
use std::iter;
use std::marker::PhantomData;
use std::mem::MaybeUninit;

use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release};
use crate::sync::{Arc, AtomicU32, AtomicU64, UnsafeCell};

/// Slots in each worker's ring (a power of two). Small under loom so that models reach
/// wrap-around and overflow.
#[cfg(not(loom))]
pub(crate) const LOCAL_QUEUE_CAPACITY: usize = 256;
/// Slots in each worker's ring (a power of two). Small under loom so that models reach
/// wrap-around and overflow.
#[cfg(loom)]
pub(crate) const LOCAL_QUEUE_CAPACITY: usize = 4;

const _: () = assert!(
    LOCAL_QUEUE_CAPACITY.is_power_of_two()
        && LOCAL_QUEUE_CAPACITY >= 2
        && LOCAL_QUEUE_CAPACITY <= 1 << 16
);

const CAP: u32 = LOCAL_QUEUE_CAPACITY as u32;
const MASK: usize = LOCAL_QUEUE_CAPACITY - 1;

/// Where a full queue sends half of its items (the global injection queue).
pub(crate) trait Overflow<T> {
    /// Takes ownership of every item `items` yields. Items not consumed are dropped
    /// when the iterator is.
    fn push_batch(&self, items: impl Iterator<Item = T>);
}

/// Creates a queue: the owner's handle and the thieves' handle.
pub(crate) fn local<T>() -> (Local<T>, Steal<T>) {
    local_starting_at(0)
}

/// Like [`local`], with all indices starting at `index` (tests start near `u32::MAX`
/// to cross the wrap-around of the indices).
pub(crate) fn local_starting_at<T>(index: u32) -> (Local<T>, Steal<T>) {
    let buffer = (0..LOCAL_QUEUE_CAPACITY)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let inner = Arc::new(Inner {
        head: AtomicU64::new(pack(index, index)),
        tail: AtomicU32::new(index),
        buffer,
    });
    let local = Local {
        inner: inner.clone(),
        _not_sync: PhantomData,
    };
    (local, Steal(inner))
}

struct Inner<T> {
    /// `steal << 32 | real`; see the module docs.
    head: AtomicU64,
    /// One past the newest item; written only by the owner.
    tail: AtomicU32,
    buffer: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: `Inner` moves `T` values between threads (pushed by the owner, taken by the
// owner or a thief) but never shares a `&T`, so `T: Send` is all it needs. Concurrent
// access to the slots follows the protocol in the module docs.
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Inner<T> {}

#[inline]
fn pack(steal: u32, real: u32) -> u64 {
    (u64::from(steal) << 32) | u64::from(real)
}

#[inline]
fn unpack(head: u64) -> (u32, u32) {
    ((head >> 32) as u32, head as u32)
}

impl<T> Inner<T> {
    /// Moves the item at `index` out of its slot.
    ///
    /// # Safety
    ///
    /// The caller has removed `index` from the queue with a successful CAS on `head`
    /// (or holds it in a range it claimed) and has not taken it before: the slot is
    /// initialised and nobody else reads or writes it until `steal` passes it.
    #[inline]
    unsafe fn take(&self, index: u32) -> T {
        self.buffer[index as usize & MASK].with(|slot| {
            // SAFETY: per this function's contract the slot is initialised and we are
            // its only reader; the bytes left behind count as moved out (invariant 1).
            unsafe { slot.read().assume_init() }
        })
    }

    /// Writes `item` into the slot of `index`.
    ///
    /// # Safety
    ///
    /// Only the owner calls this, with `index` in `[tail, steal + CAPACITY)` for a
    /// `steal` loaded with `Acquire` and `tail` not yet published past `index`: no
    /// one else can access the slot (invariant 3).
    #[inline]
    unsafe fn put(&self, index: u32, item: T) {
        self.buffer[index as usize & MASK].with_mut(|slot| {
            // SAFETY: per this function's contract the access is exclusive. The slot
            // holds no live item (it is outside `[steal, tail)`), so nothing is leaked
            // by overwriting it.
            unsafe { slot.write(MaybeUninit::new(item)) };
        });
    }
}

/// The owner's handle: one per worker. `Send` (a worker may be started on any thread)
/// but not `Sync` or `Clone`, which is what makes `tail` single-writer.
pub(crate) struct Local<T> {
    inner: Arc<Inner<T>>,
    _not_sync: PhantomData<Cell<()>>,
}

impl<T> Local<T> {
    /// The owner's view of `tail` (it is the only writer).
    #[inline]
    fn tail(&self) -> u32 {
        self.inner.tail.load(Relaxed)
    }

    /// Pushes `item` to the back. When the ring is full, moves its older half plus
    /// `item` to `overflow` in one batch (just `item` if a steal is in progress, which
    /// is about to free half the ring). Returns how many items went to `overflow`.
    pub(crate) fn push_back_or_overflow(&mut self, item: T, overflow: &impl Overflow<T>) -> usize {
        let tail = self.tail();
        let mut item = item;
        loop {
            let (steal, real) = unpack(self.inner.head.load(Acquire));
            if tail.wrapping_sub(steal) < CAP {
                break;
            }
            if steal != real {
                overflow.push_batch(iter::once(item));
                return 1;
            }
            match self.push_overflow(item, real, tail, overflow) {
                Ok(moved) => return moved,
                // A thief claimed items meanwhile: look again.
                Err(back) => item = back,
            }
        }
        // SAFETY: we are the owner and `tail - steal < CAPACITY` for a `steal` just
        // loaded with Acquire; `tail` is published only below.
        unsafe { self.inner.put(tail, item) };
        self.inner.tail.store(tail.wrapping_add(1), Release);
        0
    }

    /// Takes the older half of a full ring (whose `steal == real == head`) and hands it,
    /// followed by `item`, to `overflow`. Fails, giving `item` back, if a thief moved
    /// `head` first.
    fn push_overflow(
        &mut self,
        item: T,
        head: u32,
        tail: u32,
        overflow: &impl Overflow<T>,
    ) -> Result<usize, T> {
        const HALF: u32 = CAP / 2;
        debug_assert_eq!(tail.wrapping_sub(head), CAP);
        let end = head.wrapping_add(HALF);
        if self
            .inner
            .head
            .compare_exchange(pack(head, head), pack(end, end), AcqRel, Relaxed)
            .is_err()
        {
            return Err(item);
        }
        let claimed = Claimed {
            inner: &self.inner,
            next: head,
            end,
        };
        overflow.push_batch(claimed.chain(iter::once(item)));
        Ok(HALF as usize + 1)
    }

    /// Pushes every item of `items` to the back, in order, and publishes them at once.
    ///
    /// # Panics
    ///
    /// If `items` holds more than [`remaining_slots`](Self::remaining_slots) (checked
    /// against `items.len()` up front, and against what it actually yields). Items
    /// pushed before a panic stay queued.
    pub(crate) fn push_back_batch(&mut self, items: impl ExactSizeIterator<Item = T>) {
        let room = self.remaining_slots();
        assert!(
            items.len() <= room,
            "push_back_batch: {} items but only {room} free slots",
            items.len()
        );
        let mut publish = PublishOnDrop {
            tail: &self.inner.tail,
            start: self.tail(),
            written: 0,
        };
        for item in items {
            // `ExactSizeIterator` is a safe trait: do not trust `len()` for soundness.
            assert!(
                (publish.written as usize) < room,
                "push_back_batch: iterator yielded more than its len()"
            );
            // SAFETY: we are the owner; `written < room` keeps the index in
            // `[tail, steal + CAPACITY)` for the Acquire-loaded `steal` behind
            // `remaining_slots`, and `tail` is published only when `publish` drops.
            unsafe {
                self.inner
                    .put(publish.start.wrapping_add(publish.written), item)
            };
            publish.written += 1;
        }
    }

    /// Pops the oldest item (FIFO), racing thieves with a CAS on `head`.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let tail = self.tail();
        let mut head = self.inner.head.load(Acquire);
        let index = loop {
            let (steal, real) = unpack(head);
            if real == tail {
                return None;
            }
            let next_real = real.wrapping_add(1);
            // While a steal is in progress, move only `real`: the thief releases
            // `steal` itself.
            let next = if steal == real {
                pack(next_real, next_real)
            } else {
                pack(steal, next_real)
            };
            match self
                .inner
                .head
                .compare_exchange(head, next, AcqRel, Acquire)
            {
                Ok(_) => break real,
                Err(actual) => head = actual,
            }
        };
        // SAFETY: our CAS moved `real` past `index`, which was in `[real, tail)`: the
        // item is initialised and now ours alone (invariant 2).
        Some(unsafe { self.inner.take(index) })
    }

    /// Items in the queue (not counting ones a thief is copying out right now).
    pub(crate) fn len(&self) -> usize {
        let (_, real) = unpack(self.inner.head.load(Acquire));
        self.tail().wrapping_sub(real) as usize
    }

    /// Whether [`len`](Self::len) is zero.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether there is anything left to pop (the worker's "any local work?" check).
    pub(crate) fn has_tasks(&self) -> bool {
        !self.is_empty()
    }

    /// Free slots: how many items can be pushed without overflowing. Slots a thief is
    /// still copying from count as taken, so this may grow concurrently but never
    /// shrink (only the owner fills slots).
    pub(crate) fn remaining_slots(&self) -> usize {
        let (steal, _) = unpack(self.inner.head.load(Acquire));
        LOCAL_QUEUE_CAPACITY - self.tail().wrapping_sub(steal) as usize
    }
}

impl<T> Drop for Local<T> {
    fn drop(&mut self) {
        // Drops every item still queued, exactly once. Thieves may still hold `Steal`
        // handles (and so the buffer), but they find the queue empty.
        while self.pop().is_some() {}
    }
}

impl<T> fmt::Debug for Local<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Local").field("len", &self.len()).finish()
    }
}

/// Publishes `start + written` as the new `tail` when dropped, so that items pushed by
/// [`Local::push_back_batch`] stay queued even if the iterator panics.
struct PublishOnDrop<'a> {
    tail: &'a AtomicU32,
    start: u32,
    written: u32,
}

impl Drop for PublishOnDrop<'_> {
    fn drop(&mut self) {
        if self.written > 0 {
            self.tail
                .store(self.start.wrapping_add(self.written), Release);
        }
    }
}

/// The indices `[next, end)`, removed from the queue by the owner's overflow CAS and
/// moved out one by one. Drops what is not consumed.
struct Claimed<'a, T> {
    inner: &'a Inner<T>,
    next: u32,
    end: u32,
}

impl<T> Iterator for Claimed<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.next == self.end {
            return None;
        }
        let index = self.next;
        self.next = index.wrapping_add(1);
        // SAFETY: `index` is in the range our overflow CAS removed from the queue, and
        // `next` only moves forward, so it is taken once. No thief can claim it (`real`
        // is past it) and the owner cannot reuse the slot while this borrow of the
        // `Local` (through `push_back_or_overflow(&mut self)`) lives.
        Some(unsafe { self.inner.take(index) })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end.wrapping_sub(self.next) as usize;
        (n, Some(n))
    }
}

impl<T> ExactSizeIterator for Claimed<'_, T> {}

impl<T> Drop for Claimed<'_, T> {
    fn drop(&mut self) {
        self.for_each(drop);
    }
}

/// The thieves' handle: `Clone + Send + Sync`, one shared with every other worker.
pub(crate) struct Steal<T>(Arc<Inner<T>>);

impl<T> Clone for Steal<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> fmt::Debug for Steal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steal").field("len", &self.len()).finish()
    }
}

impl<T> Steal<T> {
    /// Steals half (rounded up) of this queue's items, oldest first: returns the oldest
    /// to run now and appends the others, in order, to `dst` (at most
    /// `dst.remaining_slots()` of them). `None` if there is nothing to steal or another
    /// steal from this queue is in progress.
    // Used by the loom models.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn steal_half_into(&self, dst: &mut Local<T>) -> Option<T> {
        self.steal_half_into_counted(dst).map(|(item, _)| item)
    }

    /// [`steal_half_into`](Self::steal_half_into), also returning how many items were
    /// taken from this queue in all (the returned one included, so at least 1), for
    /// the "items stolen" metric.
    pub(crate) fn steal_half_into_counted(&self, dst: &mut Local<T>) -> Option<(T, usize)> {
        debug_assert!(
            !Arc::ptr_eq(&self.0, &dst.inner),
            "a queue cannot steal from itself"
        );
        let dst_tail = dst.tail();
        // The returned item needs no slot in `dst`.
        let max = dst.remaining_slots() as u32 + 1;
        let (first, n) = self.claim_half(max)?;

        // SAFETY: our claim CAS removed `[first, first + n)` from this queue; `first`
        // is taken once, here (invariant 2).
        let item = unsafe { self.0.take(first) };
        for i in 1..n {
            // SAFETY: `first + i` is in our claimed range and taken once. We are the
            // owner of `dst` (`&mut Local`), and `dst_tail + i - 1 <= dst_tail + max - 2
            // < steal + CAPACITY` for the `steal` that `remaining_slots` loaded with
            // Acquire (invariant 3); `dst.tail` is published only below.
            unsafe {
                let moved = self.0.take(first.wrapping_add(i));
                dst.inner.put(dst_tail.wrapping_add(i - 1), moved);
            }
        }
        self.release(first, first.wrapping_add(n));
        if n > 1 {
            dst.inner.tail.store(dst_tail.wrapping_add(n - 1), Release);
        }
        Some((item, n as usize))
    }

    /// Claims `ceil(len / 2)` items (at most `max`) by moving `real` forward while
    /// leaving `steal` behind. Returns the claimed range as `(first, n)`.
    fn claim_half(&self, max: u32) -> Option<(u32, u32)> {
        let mut head = self.0.head.load(Acquire);
        loop {
            let (steal, real) = unpack(head);
            if steal != real {
                // Another thief is copying out of this queue.
                return None;
            }
            // Read after `head` (Acquire), so `tail >= real` (see "Memory orderings").
            let tail = self.0.tail.load(Acquire);
            let available = tail.wrapping_sub(real);
            let n = (available - available / 2).min(max);
            if n == 0 {
                return None;
            }
            let next = pack(steal, real.wrapping_add(n));
            match self.0.head.compare_exchange(head, next, AcqRel, Acquire) {
                Ok(_) => {
                    assert!(n <= CAP / 2, "claimed {n} of a {CAP}-slot ring");
                    return Some((real, n));
                }
                Err(actual) => head = actual,
            }
        }
    }

    /// Ends the steal of `[first, end)`: moves `steal` up to the current `real`, which
    /// the owner may have advanced past `end` by popping meanwhile.
    fn release(&self, first: u32, end: u32) {
        let mut head = pack(first, end);
        loop {
            let (steal, real) = unpack(head);
            // Cheap checks on the cold steal path; they keep loom models (run in
            // release) honest about invariants 1 and 2.
            assert_eq!(steal, first, "only the thief moves `steal` while it lags");
            assert!(real.wrapping_sub(steal) >= end.wrapping_sub(first));
            match self
                .0
                .head
                .compare_exchange(head, pack(real, real), AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// A snapshot of how many items could be stolen (racy: exact only when the queue is
    /// quiet).
    pub(crate) fn len(&self) -> usize {
        let (_, real) = unpack(self.0.head.load(Acquire));
        let tail = self.0.tail.load(Acquire);
        (tail.wrapping_sub(real) as usize).min(LOCAL_QUEUE_CAPACITY)
    }

    /// Whether [`len`](Self::len) is zero.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
