//! Real-thread stress test of the stealable LIFO slot: one owner puts 1,000,000
//! unique tasks (getting the displaced one back each time, and taking now and then)
//! while three thieves take whatever they find. Afterwards every id must have been
//! taken exactly once and every task dropped exactly once.
//!
//! No sleeps and no timing: the thieves stop on a flag the owner sets when it is
//! done, and the slot is emptied last.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;

use crate::engine::queue::lifo::LifoSlot;

const TASKS: usize = 1_000_000;
const THIEVES: usize = 3;

/// Drops of `Tracked`; only this test creates them.
static DROPS: AtomicUsize = AtomicUsize::new(0);

struct Tracked(usize);

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Relaxed);
    }
}

/// Marks `task` taken (once per id, checked at the end) and drops it.
fn record(taken: &[AtomicU8], task: Arc<Tracked>) -> usize {
    taken[task.0].fetch_add(1, Relaxed);
    1
}

#[test]
fn nothing_put_in_the_lifo_slot_is_lost_or_taken_twice() {
    let slot = Arc::new(LifoSlot::<Arc<Tracked>>::new());
    let taken: Arc<Vec<AtomicU8>> = Arc::new((0..TASKS).map(|_| AtomicU8::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let thieves: Vec<_> = (0..THIEVES)
        .map(|_| {
            let (slot, taken, done) = (slot.clone(), taken.clone(), done.clone());
            thread::spawn(move || {
                let mut stolen = 0;
                while !done.load(SeqCst) {
                    if let Some(task) = slot.take() {
                        stolen += record(&taken, task);
                    } else {
                        std::hint::spin_loop();
                    }
                }
                stolen
            })
        })
        .collect();
    let mut owner_took = 0;
    for id in 0..TASKS {
        if let Some(previous) = slot.put(Arc::new(Tracked(id))) {
            owner_took += record(&taken, previous);
        }
        if id % 7 == 0 {
            if let Some(task) = slot.take() {
                owner_took += record(&taken, task);
            }
        }
    }
    done.store(true, SeqCst);
    let stolen: usize = thieves.into_iter().map(|t| t.join().unwrap()).sum();
    let left = slot.take().map_or(0, |task| record(&taken, task));
    assert_eq!(owner_took + stolen + left, TASKS);
    assert!(
        stolen > 0,
        "the thieves never got anything: the test tested nothing"
    );
    let wrong: Vec<usize> = (0..TASKS)
        .filter(|&id| taken[id].load(Relaxed) != 1)
        .take(10)
        .collect();
    assert!(wrong.is_empty(), "ids not taken exactly once: {wrong:?}");
    drop(slot);
    assert_eq!(
        DROPS.load(Relaxed),
        TASKS,
        "every task dropped exactly once"
    );
}
