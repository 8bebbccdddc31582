//! loom model of the recycler's depot (`cell/recycle.rs`): blocks of ended cells
//! handed from one thread's bin to the depot and from there to another thread's
//! bin or to a thread that keeps none, through the cache's own functions (with
//! loom's capacities: a bin spills one block on its third, the depot holds two).
//! Nothing is handed out twice (every block taken is distinct, and a block freed
//! twice makes loom's allocator panic) and nothing is lost (a block left nowhere
//! is reported by loom's leak check at the end of the run: the bins are freed when
//! their threads exit, the depot when the model empties it).

use std::alloc::Layout;
use std::ptr::NonNull;

use crate::engine::cell::block_cache::{enable, keep_via, kept, take_via, Depot};
use crate::sync::Arc;

fn layout() -> Layout {
    Layout::from_size_align(64, 8).unwrap()
}

fn fresh() -> NonNull<u8> {
    // SAFETY: the layout is not zero-sized.
    NonNull::new(unsafe { loom::alloc::alloc(layout()) }).unwrap()
}

/// Frees a block the cache handed out or would not keep.
fn free(block: NonNull<u8>) {
    // SAFETY: every block here came from `fresh`, with `layout()`, and is freed once
    // by whoever holds it (the check this model makes).
    unsafe { loom::alloc::dealloc(block.as_ptr(), layout()) }
}

/// A block for a new cell: the cache's, or a fresh one (as `recycle::allocate`).
fn take(depot: &Depot) -> (NonNull<u8>, bool) {
    match take_via(depot, layout()) {
        Some(block) => (block, true),
        None => (fresh(), false),
    }
}

#[test]
fn blocks_handed_between_threads_through_the_depot_are_neither_lost_nor_doubled() {
    loom::model(|| {
        let depot = Arc::new(Depot::new());
        // A worker ending processes: its bin takes two blocks, the third spills one.
        let ender = {
            let depot = depot.clone();
            loom::thread::spawn(move || {
                enable();
                for _ in 0..3 {
                    if let Some(block) = keep_via(&depot, fresh(), layout()) {
                        free(block);
                    }
                }
            })
        };
        // A worker spawning with an empty bin: refills it from the depot.
        let spawner = {
            let depot = depot.clone();
            loom::thread::spawn(move || {
                enable();
                take(&depot)
            })
        };
        // A thread that is not a worker takes single blocks from the depot.
        let (outside, _) = take(&depot);
        ender.join().unwrap();
        let (inside, from_cache) = spawner.join().unwrap();
        assert_ne!(inside, outside, "a block handed out twice");
        if from_cache {
            // Only a spilled block can have reached the spawner's empty bin.
            assert_eq!(depot.holds(layout()), 0);
        }
        free(inside);
        free(outside);
        depot.empty();
    });
}

/// A full depot refuses a spill: the full bin gives its oldest batch back to the
/// allocator, once (loom's allocator reports a block freed twice or never).
#[test]
fn what_neither_a_full_bin_nor_a_full_depot_keeps_is_given_back() {
    loom::model(|| {
        let depot = Arc::new(Depot::new());
        let enders: Vec<_> = (0..2)
            .map(|_| {
                let depot = depot.clone();
                loom::thread::spawn(move || {
                    enable();
                    let mut refused = 0;
                    for _ in 0..4 {
                        if let Some(block) = keep_via(&depot, fresh(), layout()) {
                            free(block);
                            refused += 1;
                        }
                    }
                    (refused, kept(layout()))
                })
            })
            .collect();
        let ended: Vec<_> = enders.into_iter().map(|e| e.join().unwrap()).collect();
        // Eight blocks: two bins of two and a depot of two; the other two were
        // given back by the bins themselves, so every keep was taken.
        assert_eq!(depot.holds(layout()), 2);
        assert_eq!(ended, [(0, 2), (0, 2)]);
        assert_eq!(depot.given_back(), 2);
        depot.empty();
    });
}
