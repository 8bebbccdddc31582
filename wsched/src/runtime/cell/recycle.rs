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
//! spawns a few processes should not hold memory for them until it exits (nor make
//! the allocations of a spawn from outside depend on which thread freed the last
//! cell). The cache is bounded ([`BINS`] layouts, [`BIN_CAPACITY`] blocks each: a
//! few hundred KiB per worker at most) and given back to the allocator when the
//! thread exits. A block freed on one thread and reused on another is fine: it is plain
//! memory, handed over with the cell's last reference (whose drop synchronises with
//! every earlier use, see `CellRef`'s `Drop`).
//!
//! Under loom, blocks go through loom's allocator instead, which reports a cell that
//! was never freed (a reference-count bug) at the end of each model run.

use std::alloc::Layout;
use std::ptr::NonNull;

/// Distinct cell layouts (process types, in practice) a thread keeps blocks for.
#[cfg(not(loom))]
const BINS: usize = 4;
/// Blocks kept per layout.
#[cfg(not(loom))]
const BIN_CAPACITY: usize = 256;

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

#[cfg(not(loom))]
use std::alloc::{alloc as global_alloc, dealloc as global_dealloc};

#[cfg(not(loom))]
mod cache {
    use super::{BINS, BIN_CAPACITY};
    use std::alloc::Layout;
    use std::cell::RefCell;
    use std::ptr::NonNull;

    /// Free blocks of one layout.
    struct Bin {
        /// `None` while the bin is unused (then `blocks` is empty).
        layout: Option<Layout>,
        blocks: Vec<NonNull<u8>>,
    }

    struct Cache {
        /// Whether this thread keeps blocks at all (worker threads only).
        enabled: bool,
        bins: [Bin; BINS],
    }

    thread_local! {
        static CACHE: RefCell<Cache> = const {
            RefCell::new(Cache {
                enabled: false,
                bins: [const {
                    Bin {
                        layout: None,
                        blocks: Vec::new(),
                    }
                }; BINS],
            })
        };
    }

    /// Turns keeping on, with room for every block it may keep allocated now, so
    /// that freeing a cell never allocates.
    pub(super) fn enable() {
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            cache.enabled = true;
            for bin in &mut cache.bins {
                bin.blocks.reserve_exact(BIN_CAPACITY);
            }
        });
    }

    /// A kept block of `layout`, if this thread has one.
    #[inline]
    pub(super) fn take(layout: Layout) -> Option<NonNull<u8>> {
        CACHE
            .try_with(|cache| {
                let mut cache = cache.try_borrow_mut().ok()?;
                if !cache.enabled {
                    return None;
                }
                cache
                    .bins
                    .iter_mut()
                    .find(|bin| bin.layout == Some(layout))?
                    .blocks
                    .pop()
            })
            .ok()
            .flatten()
    }

    /// Keeps `block` (of `layout`) for a later [`take`]; gives it back if this
    /// thread keeps enough already (or is exiting).
    #[inline]
    pub(super) fn keep(block: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
        CACHE
            .try_with(|cache| {
                let Ok(mut cache) = cache.try_borrow_mut() else {
                    return Some(block);
                };
                if !cache.enabled {
                    return Some(block);
                }
                let bins = &mut cache.bins;
                let bin = match bins.iter().position(|bin| bin.layout == Some(layout)) {
                    Some(found) => &mut bins[found],
                    // A new layout takes over a bin with nothing in it.
                    None => match bins.iter_mut().find(|bin| bin.blocks.is_empty()) {
                        Some(bin) => {
                            bin.layout = Some(layout);
                            bin
                        }
                        None => return Some(block),
                    },
                };
                if bin.blocks.len() == BIN_CAPACITY {
                    return Some(block);
                }
                // Within the capacity `enable` reserved: no allocation.
                bin.blocks.push(block);
                None
            })
            .unwrap_or(Some(block))
    }

    impl Drop for Cache {
        fn drop(&mut self) {
            for bin in &mut self.bins {
                if let Some(layout) = bin.layout {
                    for block in bin.blocks.drain(..) {
                        // SAFETY: every kept block came from the global allocator
                        // with its bin's layout, and is freed once, here.
                        unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
                    }
                }
            }
        }
    }

    #[cfg(test)]
    pub(super) fn kept(layout: Layout) -> usize {
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

    #[test]
    fn the_cache_is_bounded_per_layout_and_in_layouts() {
        keep_blocks_on_this_thread();
        let layouts: Vec<Layout> = (0..=BINS)
            .map(|i| Layout::from_size_align(1000 + 8 * i, 8).unwrap())
            .collect();
        for &layout in &layouts {
            let blocks: Vec<_> = (0..BIN_CAPACITY + 10).map(|_| allocate(layout)).collect();
            for block in blocks {
                // SAFETY: each allocated above with `layout`, released once.
                unsafe { release(block, layout) };
            }
        }
        for &layout in &layouts[..BINS] {
            assert_eq!(cache::kept(layout), BIN_CAPACITY);
        }
        assert_eq!(
            cache::kept(layouts[BINS]),
            0,
            "no bin left for a fifth layout"
        );
    }
}
