//! One lane's event buffer: preallocated, written by one thread without locked
//! instructions, readable by any thread at any time.
//!
//! An event is two words. The writer fills slot `n % capacity` and then publishes
//! `n + 1` in `published` (Release): a reader that loads `published` (Acquire) sees
//! every event before it. In ring mode the writer overwrites old slots, possibly while
//! a reader copies them; before it touches a slot, it stores the index (plus one) of
//! the event it is about to write in `started`, and its data stores are
//! Release stores, so a reader that copied any word of the newer event (its loads are
//! Acquire) then sees `started` at least that high. The reader therefore copies first
//! and checks `started` afterwards: slot `i` is intact iff no event `i + capacity` or
//! later had started, i.e. `i + capacity >= started`. Torn slots are dropped, never
//! returned; they are always a prefix of what was copied.
//!
//! The writer may also *amend* an event it still holds: replace its second word (the
//! recorder closes a step's event this way when the step ends). A reader copies the
//! old or the new word next to the same first word, and both make a whole event.
//!
//! On x86-64 every one of these loads and stores is a plain `mov`: an event costs
//! four stores to lines only this writer writes.

use crate::sync::{AtomicU64, Ordering};

/// A bounded single-writer event buffer (see the module docs).
pub(crate) struct Ring {
    slots: Box<[[AtomicU64; 2]]>,
    /// `slots.len() - 1` (the capacity is a power of two).
    mask: u64,
    /// The index of the first event a bounded buffer refuses (its capacity); none
    /// (`u64::MAX`) in ring mode, which overwrites the oldest events instead.
    limit: u64,
    /// Events written (the next event's index). Written by the writer only.
    published: AtomicU64,
    /// The index plus one of the last event that started being written. It only
    /// matters once a slot is overwritten (before that it is at most the capacity,
    /// which tears nothing), so the writer stores it on every push, unconditionally.
    started: AtomicU64,
    /// Events refused because the buffer was full (bounded mode only).
    refused: AtomicU64,
}

/// What [`Ring::push`] returns when it refused the event: no index, and one that
/// [`Ring::amend`] leaves alone (it is more than a capacity ahead of any index).
pub(crate) const REFUSED: u64 = 1 << 63;

/// What [`Ring::snapshot`] copied.
pub(crate) struct Copied {
    /// Intact events, oldest first.
    pub(crate) events: Vec<[u64; 2]>,
    /// The index of `events[0]` among all events ever written.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) first: u64,
    /// Events ever written to the buffer (kept, overwritten or being written).
    pub(crate) written: u64,
    /// Events refused because the buffer was full (bounded mode).
    pub(crate) refused: u64,
}

impl Ring {
    /// A buffer of at least `capacity` events (rounded up to a power of two, at
    /// least 2).
    pub(crate) fn new(capacity: usize, ring: bool) -> Self {
        let capacity = capacity.max(2).next_power_of_two();
        Self {
            slots: (0..capacity)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            mask: capacity as u64 - 1,
            limit: if ring { u64::MAX } else { capacity as u64 },
            published: AtomicU64::new(0),
            started: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// The slot of event `n`. Unchecked: the writer's three hooks a step each
    /// paid a bounds check here (3 instructions an event, about 1 % of a recorded
    /// ping-pong round trip).
    #[inline]
    fn slot(&self, n: u64) -> &[AtomicU64; 2] {
        let index = (n & self.mask) as usize;
        debug_assert!(index < self.slots.len());
        // SAFETY: `mask` is `slots.len() - 1`, both set once in `new` for a power
        // of two length (at least 2) and never changed, so `n & mask` is an index
        // of `slots`.
        unsafe { self.slots.get_unchecked(index) }
    }

    #[cfg_attr(any(not(test), loom), allow(dead_code))]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The index the next event gets, or `None` if a bounded buffer is full (the
    /// event is then counted as refused). Only the buffer's one writer calls this,
    /// then [`write`](Self::write)s that event, or [`push`](Self::push)es it after
    /// others; a writer that checks first, before it reads the clock for the event,
    /// makes a full bounded recorder cost no clock reads.
    #[inline]
    pub(crate) fn reserve(&self) -> Option<u64> {
        // Only this thread stores `published`: Relaxed reads its own last store.
        let n = self.published.load(Ordering::Relaxed);
        if n < self.limit {
            Some(n)
        } else {
            self.refuse();
            None
        }
    }

    #[cold]
    fn refuse(&self) {
        let refused = self.refused.load(Ordering::Relaxed);
        self.refused.store(refused + 1, Ordering::Relaxed);
    }

    /// Writes event `n`, the index [`reserve`](Self::reserve) just gave, and
    /// publishes it.
    #[inline]
    pub(crate) fn write(&self, n: u64, word0: u64, word1: u64) {
        debug_assert_eq!(
            self.published.load(Ordering::Relaxed),
            n,
            "not the reserved index"
        );
        // Announce a possible overwrite before any store into the slot: the Release
        // data stores below order this store before themselves.
        self.started.store(n + 1, Ordering::Relaxed);
        let slot = self.slot(n);
        slot[0].store(word0, Ordering::Release);
        slot[1].store(word1, Ordering::Release);
        self.published.store(n + 1, Ordering::Release);
    }

    /// Appends an event and returns its index, or [`REFUSED`] if a bounded buffer
    /// is full. Only the buffer's one writer calls this (a worker for its own lane;
    /// outside threads under the outside lane's lock).
    #[inline]
    pub(crate) fn push(&self, word0: u64, word1: u64) -> u64 {
        match self.reserve() {
            Some(n) => {
                self.write(n, word0, word1);
                n
            }
            None => REFUSED,
        }
    }

    /// Replaces the second word of event `n`, if the buffer still holds it (the
    /// writer has not lapped it; a [`REFUSED`] index is never held). Only the
    /// writer calls this. A reader copies either word, old or new, with the same
    /// first word: both are whole events, so this tears nothing.
    #[inline]
    pub(crate) fn amend(&self, n: u64, word1: u64) {
        // Only this thread stores `published`: Relaxed reads its own last store.
        // Events n + 1 .. published have been written since n; the slot still holds
        // n unless one of them is n + capacity.
        if self.published.load(Ordering::Relaxed).wrapping_sub(n) <= self.mask + 1 {
            self.slot(n)[1].store(word1, Ordering::Release);
        }
    }

    /// Copies the intact events, oldest first. Safe to call from any thread while
    /// the writer writes.
    pub(crate) fn snapshot(&self) -> Copied {
        let written = self.published.load(Ordering::Acquire);
        let capacity = self.mask + 1;
        let from = written.saturating_sub(capacity);
        let mut events: Vec<[u64; 2]> = (from..written)
            .map(|i| {
                let slot = self.slot(i);
                [
                    slot[0].load(Ordering::Acquire),
                    slot[1].load(Ordering::Acquire),
                ]
            })
            .collect();
        // Ordered after the copies by their Acquire loads (see the module docs).
        let started = self.started.load(Ordering::Acquire);
        let intact_from = from.max(started.saturating_sub(capacity));
        // The writer may have lapped the whole copy: then nothing is left.
        let torn = ((intact_from - from) as usize).min(events.len());
        events.drain(..torn);
        Copied {
            events,
            first: from + torn as u64,
            written,
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}
