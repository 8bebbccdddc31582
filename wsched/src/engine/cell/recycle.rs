//! The memory of ended processes' cells, kept per thread for the next spawn.
//!
//! A spawn-heavy program makes and frees a cell per process, a million a second.
//! Through the global allocator each one is a `malloc` and a `free` of a few hundred
//! bytes, too big for glibc's fast paths once frees come in bursts (a whole level of
//! a process tree ending at once): the profile of such a run was a third
//! `malloc`/`free`, with chunk coalescing and unlinking, and each new cell was cold
//! memory. Here a thread that frees a cell keeps the block, by exact layout, and the
//! next cell of that layout made on the thread reuses it, still in this core's cache.
//!
//! Only worker threads keep blocks ([`keep_blocks_on_this_thread`]): they are the
//! ones that spawn and end processes at a high rate, and a user's thread that
//! spawns a few processes should not hold memory for them until it exits. The cache
//! is bounded ([`BINS`] layouts, [`BIN_CAPACITY`] blocks each: a few hundred KiB per
//! worker at most) and given back to the allocator when the thread exits. A block
//! freed on one thread and reused on another is fine: it is plain memory, handed
//! over with the cell's last reference (whose drop synchronises with every earlier
//! use, see `CellRef`'s `Drop`).
//!
//! # The depot
//!
//! A worker whose bin is full passes half of it ([`BATCH`] blocks, one lock) to a
//! process-wide depot (bounded too, [`DEPOT_CAPACITY`] blocks a layout; when it is
//! full, the batch goes back to the allocator), and a worker whose bin is empty
//! takes a batch back from it. A spawn from a thread that
//! is not a worker takes its one block from the depot when it has one. Why: a
//! thread spawning many processes from outside allocates every cell, and the
//! workers free them; through glibc both sides take the allocating thread's arena
//! lock, and the profile of such a run (10,000 spawns from outside) was that
//! lock's futex waits and wakes, half of all the time spent, at twice tokio's count.
//! With the depot the cells go round — spawner, workers, depot, spawner — without
//! the allocator. It is emptied when a scheduler shuts down
//! ([`give_back_spare_blocks`]), so memory returns to the allocator once the
//! schedulers are gone.
//!
//! # Under loom
//!
//! The runtime's cells skip the cache under loom and go through loom's allocator,
//! which reports a cell that was never freed (a reference-count bug) at the end of
//! each model run, and one freed twice at once: a kept block would hide both. The
//! cache itself (this file's `cache` module, with loom's thread-locals, mutex and
//! atomics and its capacities shrunk so that spills and refills happen within a few
//! blocks) is model-checked on its own, as it is, with a depot of the model's own:
//! a process-wide depot would carry blocks from one model run into the next
//! (`runtime/tests/loom_depot.rs`). `runtime/tests/depot_stress.rs` checks it on
//! real threads.

use std::alloc::Layout;
use std::ptr::NonNull;

/// Distinct cell layouts (process types, in practice) a thread keeps blocks for.
#[cfg(not(loom))]
const BINS: usize = 4;
/// Blocks kept per layout.
#[cfg(not(loom))]
const BIN_CAPACITY: usize = 256;
/// Blocks moved between a worker's bin and the depot at once.
#[cfg(not(loom))]
const BATCH: usize = BIN_CAPACITY / 2;
/// Blocks the depot keeps per layout.
#[cfg(not(loom))]
const DEPOT_CAPACITY: usize = 4 * BIN_CAPACITY;
// Under loom: a bin spills on its third block, and the depot is full with two.
#[cfg(all(loom, test))]
const BINS: usize = 2;
#[cfg(all(loom, test))]
const BIN_CAPACITY: usize = 2;
#[cfg(all(loom, test))]
const BATCH: usize = 1;
#[cfg(all(loom, test))]
const DEPOT_CAPACITY: usize = 2;

/// A block for a cell of `layout` (never zero-sized: a cell has a header).
pub(super) fn allocate(layout: Layout) -> NonNull<u8> {
    #[cfg(not(loom))]
    if let Some(block) = cache::take(layout) {
        return block;
    }
    // SAFETY: `layout` is not zero-sized (a cell holds at least its header).
    let block = unsafe { global_alloc(layout) };
    NonNull::new(block).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
}

/// Gives back a block from [`allocate`] with the same `layout`, whose cell was
/// dropped.
///
/// # Safety
/// `block` came from `allocate(layout)`, nothing uses it any more, and it is given
/// back once.
pub(super) unsafe fn release(block: NonNull<u8>, layout: Layout) {
    #[cfg(not(loom))]
    let Some(block) = cache::keep(block, layout) else {
        return;
    };
    // SAFETY: forwarded from the caller: the block is ours, allocated with `layout`.
    unsafe { global_dealloc(block.as_ptr(), layout) }
}

#[cfg(loom)]
use loom::alloc::{alloc as global_alloc, dealloc as global_dealloc};
/// Makes this thread keep the blocks of the cells it frees (worker threads call it
/// when they start).
pub(crate) fn keep_blocks_on_this_thread() {
    #[cfg(not(loom))]
    cache::enable();
}

/// Gives the depot's blocks back to the allocator (a scheduler shut down; the
/// schedulers still running fill it again as their processes end).
pub(crate) fn give_back_spare_blocks() {
    #[cfg(not(loom))]
    cache::empty_depot();
}

#[cfg(not(loom))]
use std::alloc::{alloc as global_alloc, dealloc as global_dealloc};

// Under loom only its model uses it (see the module docs).
#[cfg(any(not(loom), test))]
pub(crate) mod cache {
    use crate::engine::cell::recycle::{global_dealloc, BATCH, BINS, BIN_CAPACITY, DEPOT_CAPACITY};
    use std::alloc::Layout;
    use std::cell::RefCell;
    use std::ptr::NonNull;

    use crate::sync::{AtomicUsize, Mutex, Ordering};

    /// Free blocks of one layout.
    struct Bin {
        /// `None` while the bin is unused (then `blocks` is empty).
        layout: Option<Layout>,
        blocks: Vec<NonNull<u8>>,
    }

    impl Bin {
        const UNUSED: Self = Self {
            layout: None,
            blocks: Vec::new(),
        };
    }

    /// The bin for `layout` among `bins`; an unused (empty) bin takes the layout
    /// over if none has it. `None` when every bin holds blocks of other layouts.
    fn bin_for(bins: &mut [Bin; BINS], layout: Layout) -> Option<&mut Bin> {
        match bins.iter().position(|bin| bin.layout == Some(layout)) {
            Some(found) => Some(&mut bins[found]),
            None => {
                let bin = bins.iter_mut().find(|bin| bin.blocks.is_empty())?;
                bin.layout = Some(layout);
                Some(bin)
            }
        }
    }

    /// Gives the oldest `count` blocks of `bin` back to the allocator.
    fn free_oldest(bin: &mut Bin, count: usize) {
        if let Some(layout) = bin.layout {
            for block in bin.blocks.drain(..count) {
                // SAFETY: every kept block came from the global allocator with its
                // bin's layout, and leaves the bin here, so it is freed once.
                unsafe { global_dealloc(block.as_ptr(), layout) };
            }
        }
    }

    /// Gives every block of `bin` back to the allocator.
    fn free_all(bin: &mut Bin) {
        let count = bin.blocks.len();
        free_oldest(bin, count);
    }

    struct Cache {
        /// Whether this thread keeps blocks at all (worker threads only).
        enabled: bool,
        bins: [Bin; BINS],
    }

    #[cfg(not(loom))]
    thread_local! {
        static CACHE: RefCell<Cache> = const { RefCell::new(Cache::NEW) };
    }
    // loom runs its threads on one OS thread: thread-locals must be its own.
    #[cfg(loom)]
    loom::thread_local! {
        static CACHE: RefCell<Cache> = RefCell::new(Cache::NEW);
    }

    impl Cache {
        const NEW: Self = Self {
            enabled: false,
            bins: [Bin::UNUSED; BINS],
        };
    }

    /// Blocks that workers' full bins passed on (see the module docs).
    pub(crate) struct Depot {
        bins: Mutex<Bins>,
        /// How many blocks `bins` holds, updated under its lock: read without it,
        /// so that a thread finding nothing there does not take the lock to see it.
        blocks: AtomicUsize,
        /// How many blocks full bins gave back to the allocator because this depot
        /// had no room for them (the tests' accounts of every block).
        given_back: AtomicUsize,
    }

    struct Bins([Bin; BINS]);

    // SAFETY: the blocks are plain memory from the global allocator, owned by
    // whoever holds them and tied to no thread; the depot's are only reached under
    // its mutex.
    unsafe impl Send for Bins {}

    /// The process-wide depot.
    #[cfg(not(loom))]
    static DEPOT: Depot = Depot::new();

    impl Depot {
        #[cfg(not(loom))]
        pub(crate) const fn new() -> Self {
            Self {
                bins: Mutex::new(Bins([Bin::UNUSED; BINS])),
                blocks: AtomicUsize::new(0),
                given_back: AtomicUsize::new(0),
            }
        }

        /// As outside loom, whose mutex and atomics cannot be made in a `const fn`.
        #[cfg(loom)]
        pub(crate) fn new() -> Self {
            Self {
                bins: Mutex::new(Bins([Bin::UNUSED; BINS])),
                blocks: AtomicUsize::new(0),
                given_back: AtomicUsize::new(0),
            }
        }

        fn may_have_blocks(&self) -> bool {
            self.blocks.load(Ordering::Relaxed) > 0
        }

        /// Moves up to `BATCH` blocks of `layout` into `into` (empty, with room).
        fn refill(&self, into: &mut Vec<NonNull<u8>>, layout: Layout) {
            let mut bins = self.bins.lock();
            let Some(bin) = bins.0.iter_mut().find(|b| b.layout == Some(layout)) else {
                return;
            };
            let from = bin.blocks.len().saturating_sub(BATCH);
            into.extend(bin.blocks.drain(from..));
            self.blocks.fetch_sub(into.len(), Ordering::Relaxed);
        }

        /// One block of `layout`, for a thread that keeps none.
        fn take_one(&self, layout: Layout) -> Option<NonNull<u8>> {
            if !self.may_have_blocks() {
                return None;
            }
            let mut bins = self.bins.lock();
            let block = bins
                .0
                .iter_mut()
                .find(|b| b.layout == Some(layout))?
                .blocks
                .pop()?;
            self.blocks.fetch_sub(1, Ordering::Relaxed);
            Some(block)
        }

        /// Moves the oldest `BATCH` blocks of a full bin's `from` here, as many as
        /// there is room for; returns whether any moved.
        fn spill(&self, from: &mut Vec<NonNull<u8>>, layout: Layout) -> bool {
            let mut bins = self.bins.lock();
            let Some(bin) = bin_for(&mut bins.0, layout) else {
                return false;
            };
            if bin.blocks.capacity() == 0 {
                // Once per layout: room for all it may hold, so spills never allocate.
                bin.blocks.reserve_exact(DEPOT_CAPACITY);
            }
            let moved = BATCH.min(DEPOT_CAPACITY - bin.blocks.len());
            if moved == 0 {
                return false;
            }
            bin.blocks.extend(from.drain(..moved));
            self.blocks.fetch_add(moved, Ordering::Relaxed);
            true
        }

        /// Gives every block, and the room reserved for them, back.
        pub(crate) fn empty(&self) {
            let mut bins = self.bins.lock();
            for bin in &mut bins.0 {
                free_all(bin);
                *bin = Bin::UNUSED;
            }
            self.blocks.store(0, Ordering::Relaxed);
        }

        /// How many blocks full bins gave back to the allocator, finding no room
        /// here.
        #[cfg(test)]
        pub(crate) fn given_back(&self) -> usize {
            self.given_back.load(Ordering::Relaxed)
        }

        #[cfg(test)]
        pub(crate) fn holds(&self, layout: Layout) -> usize {
            self.bins
                .lock()
                .0
                .iter()
                .find(|bin| bin.layout == Some(layout))
                .map_or(0, |bin| bin.blocks.len())
        }
    }

    /// Turns keeping on, with room for every block it may keep allocated now, so
    /// that freeing a cell never allocates.
    pub(crate) fn enable() {
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            cache.enabled = true;
            for bin in &mut cache.bins {
                bin.blocks.reserve_exact(BIN_CAPACITY);
            }
        });
    }

    /// A kept block of `layout`: this thread's if it keeps blocks (refilled from
    /// the depot when empty), else one from the depot.
    #[cfg(not(loom))]
    #[inline]
    pub(super) fn take(layout: Layout) -> Option<NonNull<u8>> {
        take_via(&DEPOT, layout)
    }

    /// [`take`], with `depot` as the depot.
    #[inline]
    pub(crate) fn take_via(depot: &Depot, layout: Layout) -> Option<NonNull<u8>> {
        CACHE
            .try_with(|cache| {
                let mut cache = cache.try_borrow_mut().ok()?;
                if !cache.enabled {
                    drop(cache);
                    return depot.take_one(layout);
                }
                let bin = bin_for(&mut cache.bins, layout)?;
                if bin.blocks.is_empty() && depot.may_have_blocks() {
                    // Within the capacity `enable` reserved: no allocation.
                    depot.refill(&mut bin.blocks, layout);
                }
                bin.blocks.pop()
            })
            .ok()
            .flatten()
    }

    /// Keeps `block` (of `layout`) for a later [`take`]; gives it back if this
    /// thread keeps none (or is exiting) or has no bin for `layout`. A full bin
    /// passes a batch to the depot, or, if the depot has no room either, gives that
    /// batch back to the allocator.
    #[cfg(not(loom))]
    #[inline]
    pub(super) fn keep(block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
        keep_via(&DEPOT, block, layout)
    }

    /// [`keep`], with `depot` as the depot.
    #[inline]
    pub(crate) fn keep_via(
        depot: &Depot,
        block: NonNull<u8>,
        layout: Layout,
    ) -> Option<NonNull<u8>> {
        CACHE
            .try_with(|cache| {
                let Ok(mut cache) = cache.try_borrow_mut() else {
                    return Some(block);
                };
                if !cache.enabled {
                    return Some(block);
                }
                let Some(bin) = bin_for(&mut cache.bins, layout) else {
                    return Some(block);
                };
                if bin.blocks.len() == BIN_CAPACITY && !depot.spill(&mut bin.blocks, layout) {
                    // Neither has room: the oldest batch goes back to the allocator
                    // now, so that the next `BATCH` frees are pushes again. Giving
                    // back only this block left the bin full, and every later free
                    // locked the depot to find it full (three locked instructions a
                    // process while 10,000 children of one spawner ended).
                    free_oldest(bin, BATCH);
                    depot.given_back.fetch_add(BATCH, Ordering::Relaxed);
                }
                // Within the capacity `enable` reserved: no allocation.
                bin.blocks.push(block);
                None
            })
            .unwrap_or(Some(block))
    }

    /// Gives the process-wide depot's blocks back.
    #[cfg(not(loom))]
    pub(super) fn empty_depot() {
        DEPOT.empty();
    }

    impl Drop for Cache {
        fn drop(&mut self) {
            self.bins.iter_mut().for_each(free_all);
        }
    }

    #[cfg(test)]
    pub(crate) fn kept(layout: Layout) -> usize {
        CACHE.with(|cache| {
            cache
                .borrow()
                .bins
                .iter()
                .find(|bin| bin.layout == Some(layout))
                .map_or(0, |bin| bin.blocks.len())
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_is_not_a_worker_keeps_nothing() {
        let layout = Layout::from_size_align(296, 8).unwrap();
        let block = allocate(layout);
        // SAFETY: allocated above with `layout`, unused, released once.
        unsafe { release(block, layout) };
        assert_eq!(cache::kept(layout), 0);
    }

    #[test]
    fn a_released_block_is_reused_by_the_next_allocation_of_its_layout() {
        keep_blocks_on_this_thread();
        let layout = Layout::from_size_align(296, 8).unwrap();
        let other = Layout::from_size_align(304, 8).unwrap();
        let first = allocate(layout);
        // SAFETY: allocated above with `layout`, unused, released once.
        unsafe { release(first, layout) };
        assert_eq!(cache::kept(layout), 1);
        let unrelated = allocate(other);
        assert_ne!(unrelated, first, "another layout does not take it");
        assert_eq!(allocate(layout), first, "the same layout does");
        assert_eq!(cache::kept(layout), 0);
        // SAFETY: as above.
        unsafe {
            release(first, layout);
            release(unrelated, other);
        }
    }

    /// Releases `count` fresh blocks of `layout` on this thread through `depot`.
    fn release_fresh(depot: &cache::Depot, layout: Layout, count: usize) {
        for _ in 0..count {
            // SAFETY: `layout` is not zero-sized.
            let block = NonNull::new(unsafe { global_alloc(layout) }).unwrap();
            if let Some(block) = cache::keep_via(depot, block, layout) {
                // SAFETY: allocated just above with `layout`, not kept.
                unsafe { global_dealloc(block.as_ptr(), layout) };
            }
        }
    }

    #[test]
    fn the_cache_is_bounded_per_layout_and_in_layouts() {
        // Its own depot, with no bins for a fifth layout either.
        let depot = cache::Depot::new();
        keep_blocks_on_this_thread();
        let layouts: Vec<Layout> = (0..=BINS)
            .map(|i| Layout::from_size_align(1000 + 8 * i, 8).unwrap())
            .collect();
        for &layout in &layouts {
            release_fresh(&depot, layout, BIN_CAPACITY);
        }
        for &layout in &layouts[..BINS] {
            assert_eq!(cache::kept(layout), BIN_CAPACITY);
        }
        assert_eq!(
            cache::kept(layouts[BINS]),
            0,
            "no bin left for a fifth layout"
        );
        assert_eq!(depot.holds(layouts[BINS]), 0, "nor in the depot");
        depot.empty();
    }

    #[test]
    fn a_full_bin_passes_a_batch_to_the_depot_up_to_its_capacity() {
        let depot = cache::Depot::new();
        keep_blocks_on_this_thread();
        let layout = Layout::from_size_align(2000, 8).unwrap();
        release_fresh(&depot, layout, BIN_CAPACITY);
        assert_eq!(
            depot.holds(layout),
            0,
            "nothing spills before the bin is full"
        );
        release_fresh(&depot, layout, 1);
        assert_eq!(cache::kept(layout), BIN_CAPACITY - BATCH + 1);
        assert_eq!(depot.holds(layout), BATCH);
        // Fill the depot: what neither has room for goes back to the allocator, a
        // batch at a time, so the bin has room again until the next batch.
        release_fresh(&depot, layout, 2 * DEPOT_CAPACITY);
        assert_eq!(depot.holds(layout), DEPOT_CAPACITY);
        let kept = cache::kept(layout);
        assert!(
            (BIN_CAPACITY - BATCH + 1..=BIN_CAPACITY).contains(&kept),
            "{kept} blocks kept"
        );
        release_fresh(&depot, layout, BIN_CAPACITY - kept + 1);
        assert_eq!(
            cache::kept(layout),
            BIN_CAPACITY - BATCH + 1,
            "a full bin that finds the depot full gives back its oldest batch"
        );
        // Every block released is accounted for: none was refused (the bin always
        // takes the block), so each is kept, in the depot, or given back by the bin.
        let released = BIN_CAPACITY + 1 + 2 * DEPOT_CAPACITY + (BIN_CAPACITY - kept + 1);
        assert_eq!(
            cache::kept(layout) + depot.holds(layout) + depot.given_back(),
            released
        );
        assert_eq!(depot.given_back() % BATCH, 0, "whole batches");
        assert_eq!(depot.holds(layout), DEPOT_CAPACITY);
        depot.empty();
        assert_eq!(depot.holds(layout), 0);
        // This thread's bin is freed when the test's thread exits.
    }

    #[test]
    fn an_empty_bin_takes_a_batch_from_the_depot() {
        let depot = cache::Depot::new();
        keep_blocks_on_this_thread();
        let layout = Layout::from_size_align(2008, 8).unwrap();
        release_fresh(&depot, layout, BIN_CAPACITY + 1);
        let taken: Vec<_> = (0..BIN_CAPACITY - BATCH + 1)
            .map(|_| cache::take_via(&depot, layout).unwrap())
            .collect();
        assert_eq!(cache::kept(layout), 0);
        assert_eq!(depot.holds(layout), BATCH);
        let refilled = cache::take_via(&depot, layout).expect("the depot has blocks");
        assert_eq!(cache::kept(layout), BATCH - 1, "a whole batch came over");
        assert_eq!(depot.holds(layout), 0);
        assert!(!taken.contains(&refilled), "each block is handed out once");
        for block in taken.into_iter().chain([refilled]) {
            // SAFETY: from the global allocator with `layout`, handed out once.
            unsafe { global_dealloc(block.as_ptr(), layout) };
        }
    }

    #[test]
    fn a_thread_that_keeps_nothing_takes_single_blocks_from_the_depot() {
        let depot = cache::Depot::new();
        let layout = Layout::from_size_align(2016, 8).unwrap();
        assert!(
            cache::take_via(&depot, layout).is_none(),
            "an empty depot has none"
        );
        // A worker-like thread fills it (its own bin is freed when it exits).
        std::thread::scope(|scope| {
            scope.spawn(|| {
                keep_blocks_on_this_thread();
                release_fresh(&depot, layout, BIN_CAPACITY + 1);
            });
        });
        assert_eq!(depot.holds(layout), BATCH);
        let block = cache::take_via(&depot, layout).expect("one from the depot");
        assert_eq!(depot.holds(layout), BATCH - 1);
        assert_eq!(cache::kept(layout), 0, "this thread keeps nothing");
        // SAFETY: from the global allocator with `layout`, handed out once.
        unsafe { global_dealloc(block.as_ptr(), layout) };
        depot.empty();
    }
}
