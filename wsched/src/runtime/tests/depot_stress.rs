//! Real-thread stress test of the recycler's cache and depot (`cell/recycle.rs`):
//! four worker-like threads take blocks for new cells and keep the blocks of ended
//! ones, passing batches through a depot of their own, while a thread that keeps
//! none takes single blocks from it. Every holder stamps the block it was handed
//! with its own mark and checks the mark is still there when it gives the block
//! back: a block handed to two holders at once shows as a mark overwritten.
//! Afterwards every block ever allocated is accounted for: given back to the
//! allocator, or still in a thread's bin or in the depot.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;

use crate::engine::cell::block_cache::{enable, keep_via, kept, take_via, Depot};

const WORKERS: usize = 4;
const ROUNDS: usize = 2_000;
/// Blocks a worker holds at once at most: enough to fill its bin and spill.
const HELD: usize = 600;

fn layout() -> Layout {
    Layout::from_size_align(4096 + 64, 64).unwrap()
}

/// Counts of blocks from and back to the allocator.
#[derive(Default)]
struct Counts {
    allocated: AtomicUsize,
    freed: AtomicUsize,
}

/// A block for a new cell, stamped with `mark`.
fn take(depot: &Depot, counts: &Counts, mark: u64) -> NonNull<u8> {
    let block = take_via(depot, layout()).unwrap_or_else(|| {
        counts.allocated.fetch_add(1, SeqCst);
        // SAFETY: the layout is not zero-sized.
        NonNull::new(unsafe { std::alloc::alloc(layout()) }).unwrap()
    });
    // SAFETY: the block is at least 8 bytes, aligned, and ours alone (the claim
    // under test: `give_back` checks it).
    unsafe { block.cast::<u64>().as_ptr().write(mark) };
    block
}

/// Checks `block` still bears `mark`, then keeps it (or frees what is not kept).
fn give_back(depot: &Depot, counts: &Counts, block: NonNull<u8>, mark: u64) {
    // SAFETY: as in `take`.
    let found = unsafe { block.cast::<u64>().as_ptr().read() };
    assert_eq!(found, mark, "a block was handed to two holders at once");
    if let Some(block) = keep_via(depot, block, layout()) {
        counts.freed.fetch_add(1, SeqCst);
        // SAFETY: allocated with `layout()` (here or in `take`), not kept, held by
        // nobody else.
        unsafe { std::alloc::dealloc(block.as_ptr(), layout()) };
    }
}

#[test]
fn blocks_passed_through_the_depot_are_neither_lost_nor_handed_out_twice() {
    let depot = Arc::new(Depot::new());
    let counts = Arc::new(Counts::default());
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let (depot, counts) = (depot.clone(), counts.clone());
            thread::spawn(move || {
                enable();
                let mut held = Vec::with_capacity(HELD);
                let mut mark = (worker as u64) << 32;
                for round in 0..ROUNDS {
                    // Bursts of spawns, then bursts of ends, of varying sizes.
                    let burst = (round * 7 + worker * 13) % HELD;
                    while held.len() < burst {
                        mark += 1;
                        held.push((take(&depot, &counts, mark), mark));
                    }
                    while held.len() > burst / 3 {
                        let (block, mark) = held.pop().unwrap();
                        give_back(&depot, &counts, block, mark);
                    }
                }
                for (block, mark) in held.drain(..) {
                    give_back(&depot, &counts, block, mark);
                }
                // Freed when this thread exits, with its cache.
                kept(layout())
            })
        })
        .collect();
    // A thread that is not a worker: single blocks, given straight back.
    let outside = {
        let (depot, counts) = (depot.clone(), counts.clone());
        thread::spawn(move || {
            for round in 0..ROUNDS * 10 {
                let mark = (u64::from(u32::MAX) << 32) | round as u64;
                let block = take(&depot, &counts, mark);
                // A thread that keeps nothing gives the block to the allocator.
                give_back(&depot, &counts, block, mark);
            }
        })
    };
    let in_bins: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    outside.join().unwrap();
    let in_depot = depot.holds(layout());
    // Blocks a full bin gave back itself, finding the depot full (unmarked: the
    // count is the depot's).
    let by_bins = depot.given_back();
    let (allocated, freed) = (counts.allocated.load(SeqCst), counts.freed.load(SeqCst));
    assert_eq!(
        allocated,
        freed + by_bins + in_bins + in_depot,
        "allocated {allocated}, freed {freed}, given back by full bins {by_bins}, in bins \
         {in_bins}, in the depot {in_depot}"
    );
    depot.empty();
}
