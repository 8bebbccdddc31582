//! loom model of the stealable LIFO slot (`queue/lifo.rs`): an owner that puts (by a
//! plain store into a slot it sees empty, by a swap into one it sees full) and
//! takes, a thief that takes twice. Every task put is taken exactly once — by the owner,
//! the thief, or the slot's drop — whatever the interleaving.

use std::sync::Arc;

use crate::engine::queue::lifo::LifoSlot;
use crate::sync::{AtomicUsize, Ordering};

/// Counts its drops, so a task dropped twice or never shows.
struct Task {
    drops: Arc<AtomicUsize>,
}

impl Drop for Task {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn every_task_put_is_taken_exactly_once() {
    loom::model(|| {
        let slot = Arc::new(LifoSlot::new());
        let drops = Arc::new(AtomicUsize::new(0));
        let taken_by_thief = Arc::new(AtomicUsize::new(0));
        let thief = {
            let (slot, taken) = (slot.clone(), taken_by_thief.clone());
            // Twice: a thief may come back to a slot the owner refilled, and its
            // swap may find null between the owner's look at an empty slot and its
            // plain store (see `put`).
            loom::thread::spawn(move || {
                for _ in 0..2 {
                    if let Some(task) = slot.take() {
                        taken.fetch_add(1, Ordering::SeqCst);
                        drop(task);
                    }
                }
            })
        };
        let new_task = || {
            Arc::new(Task {
                drops: drops.clone(),
            })
        };
        // The owner: put one, put another (getting the first back unless stolen),
        // take what is left.
        let mut owner_took = 0;
        assert!(slot.put(new_task()).is_none(), "the slot starts empty");
        if slot.put(new_task()).is_some() {
            owner_took += 1;
        }
        if slot.take().is_some() {
            owner_took += 1;
        }
        thief.join().unwrap();
        let left = usize::from(slot.take().is_some());
        assert_eq!(
            owner_took + taken_by_thief.load(Ordering::SeqCst) + left,
            2,
            "each of the two tasks was taken once"
        );
        drop(slot);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "each task dropped once");
    });
}
