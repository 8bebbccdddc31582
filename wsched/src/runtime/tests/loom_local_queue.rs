//! loom models of the per-worker queue (`runtime::queue::local`), with its ring shrunk
//! to `LOCAL_QUEUE_CAPACITY` = 4 so that wrap-around and overflow are reached.
//!
//! Every model pushes items with distinct ids, lets the threads take them, drains
//! whatever is left, and then checks that each id was taken exactly once and, once the
//! taken items are dropped, dropped exactly once (and not before). Items own no heap
//! memory, so a duplicated item shows up as a failed count rather than as a double
//! free that aborts the process.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p wsched --release --lib --target-dir target-loom runtime::tests::loom
//! ```

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use loom::thread;

use crate::engine::queue::local::{
    local, local_starting_at, Local, Overflow, Steal, LOCAL_QUEUE_CAPACITY,
};

/// Per-id drop counts. Plain `std` atomics: they are bookkeeping outside the model, so
/// they add no scheduling points.
struct Ledger {
    drops: Vec<AtomicUsize>,
}

impl Ledger {
    /// One per model iteration, leaked (a few bytes) so that items can point to it
    /// without owning anything.
    fn new(n: usize) -> &'static Self {
        Box::leak(Box::new(Self {
            drops: (0..n).map(|_| AtomicUsize::new(0)).collect(),
        }))
    }
}

struct Item {
    id: usize,
    ledger: &'static Ledger,
}

impl Drop for Item {
    fn drop(&mut self) {
        self.ledger.drops[self.id].fetch_add(1, SeqCst);
    }
}

fn item(ledger: &'static Ledger, id: usize) -> Item {
    Item { id, ledger }
}

/// Only the owner's thread overflows, so a `RefCell` suffices (and, unlike a loom
/// mutex, adds no interleavings to explore).
#[derive(Default)]
struct Sink(RefCell<Vec<Item>>);

impl Overflow<Item> for Sink {
    fn push_batch(&self, items: impl Iterator<Item = Item>) {
        self.0.borrow_mut().extend(items);
    }
}

fn drain(queue: &mut Local<Item>, into: &mut Vec<Item>) {
    while let Some(item) = queue.pop() {
        into.push(item);
    }
}

/// A thief's turn: steals from `victim` into a fresh queue of its own and drains it,
/// twice (the second attempt may meet the owner's later pushes or find the queue
/// empty), and returns everything it took.
fn steal_twice(victim: &Steal<Item>) -> Vec<Item> {
    let (mut mine, _) = local();
    let mut got = Vec::new();
    for _ in 0..2 {
        if let Some((item, n)) = victim.steal_half_into_counted(&mut mine) {
            assert!((1..=LOCAL_QUEUE_CAPACITY / 2).contains(&n), "stole {n}");
            assert_eq!(mine.len(), n - 1, "stolen items besides the returned one");
            got.push(item);
        }
        drain(&mut mine, &mut got);
    }
    got
}

/// Each id taken once; nothing dropped while queued; each dropped once afterwards.
fn check(ledger: &Ledger, taken: Vec<Item>) {
    let n = ledger.drops.len();
    let mut counts = vec![0usize; n];
    for item in &taken {
        counts[item.id] += 1;
    }
    for (id, &count) in counts.iter().enumerate() {
        assert_eq!(count, 1, "item {id} taken {count} times ({counts:?})");
    }
    for (id, d) in ledger.drops.iter().enumerate() {
        assert_eq!(d.load(SeqCst), 0, "item {id} dropped while still queued");
    }
    drop(taken);
    for (id, d) in ledger.drops.iter().enumerate() {
        assert_eq!(
            d.load(SeqCst),
            1,
            "item {id} dropped {} times",
            d.load(SeqCst)
        );
    }
}

/// The owner pushes one item and pops it while a thief, started before the push, tries
/// to steal it: the thief must see the item's bytes if it sees the new `tail`.
#[test]
fn pop_vs_steal_last_item() {
    loom::model(|| {
        let ledger = Ledger::new(1);
        let sink = Sink::default();
        let (mut owner, steal) = local();

        let thief = thread::spawn(move || steal_twice(&steal));
        owner.push_back_or_overflow(item(ledger, 0), &sink);
        let mut taken: Vec<Item> = owner.pop().into_iter().collect();
        taken.extend(thief.join().unwrap());
        drain(&mut owner, &mut taken);
        assert!(sink.0.borrow().is_empty());
        check(ledger, taken);
    });
}

/// A thief steals half of three items while the owner keeps popping and then pushes
/// again (reusing a slot the thief may still be copying from).
#[test]
fn steal_half_vs_owner_pops() {
    loom::model(|| {
        let ledger = Ledger::new(4);
        let sink = Sink::default();
        let (mut owner, steal) = local();
        for id in 0..3 {
            owner.push_back_or_overflow(item(ledger, id), &sink);
        }

        let thief = thread::spawn(move || steal_twice(&steal));
        let mut taken = Vec::new();
        taken.extend(owner.pop());
        taken.extend(owner.pop());
        owner.push_back_or_overflow(item(ledger, 3), &sink);
        taken.extend(owner.pop());
        taken.extend(thief.join().unwrap());
        drain(&mut owner, &mut taken);
        taken.extend(sink.0.take());
        check(ledger, taken);
    });
}

/// Two thieves steal from a full queue at once (one must back off while the other's
/// steal is in progress); the owner pops once and pushes again into a slot a thief may
/// just have copied from.
#[test]
fn two_thieves() {
    loom::model(|| {
        let n = LOCAL_QUEUE_CAPACITY + 1;
        let ledger = Ledger::new(n);
        let sink = Sink::default();
        let (mut owner, steal) = local();
        for id in 0..LOCAL_QUEUE_CAPACITY {
            owner.push_back_or_overflow(item(ledger, id), &sink);
        }

        let steal2 = steal.clone();
        let a = thread::spawn(move || steal_twice(&steal));
        let b = thread::spawn(move || steal_twice(&steal2));
        let mut taken: Vec<Item> = owner.pop().into_iter().collect();
        owner.push_back_or_overflow(item(ledger, n - 1), &sink);
        taken.extend(a.join().unwrap());
        taken.extend(b.join().unwrap());
        drain(&mut owner, &mut taken);
        taken.extend(sink.0.take());
        check(ledger, taken);
    });
}

/// The owner fills the ring and pushes past it while a thief steals: either the older
/// half plus the new item overflow in one batch, or (steal in progress) just the new
/// item. Indices start two short of `u32::MAX`, so they also wrap around.
#[test]
fn overflow_during_steal() {
    loom::model(|| {
        let n = LOCAL_QUEUE_CAPACITY + 2;
        let ledger = Ledger::new(n);
        let sink = Sink::default();
        let (mut owner, steal) = local_starting_at(u32::MAX - 1);
        for id in 0..LOCAL_QUEUE_CAPACITY {
            owner.push_back_or_overflow(item(ledger, id), &sink);
        }
        assert_eq!(owner.remaining_slots(), 0);

        let thief = thread::spawn(move || steal_twice(&steal));
        let mut overflowed = 0;
        for id in LOCAL_QUEUE_CAPACITY..n {
            overflowed += owner.push_back_or_overflow(item(ledger, id), &sink);
        }
        let mut taken = Vec::new();
        drain(&mut owner, &mut taken);
        taken.extend(thief.join().unwrap());
        let sunk = sink.0.take();
        assert_eq!(sunk.len(), overflowed);
        taken.extend(sunk);
        check(ledger, taken);
    });
}

/// Thief A steals from the owner into its own queue while thief B steals from A's
/// queue; the owner pops meanwhile.
#[test]
fn chained_steals() {
    loom::model(|| {
        let ledger = Ledger::new(LOCAL_QUEUE_CAPACITY);
        let sink = Sink::default();
        let (mut owner, steal) = local();
        for id in 0..LOCAL_QUEUE_CAPACITY {
            owner.push_back_or_overflow(item(ledger, id), &sink);
        }
        let (mut a_local, a_steal) = local();

        let a = thread::spawn(move || {
            let mut got = Vec::new();
            got.extend(steal.steal_half_into(&mut a_local));
            drain(&mut a_local, &mut got);
            got
        });
        let b = thread::spawn(move || steal_twice(&a_steal));
        let mut taken: Vec<Item> = owner.pop().into_iter().collect();
        taken.extend(a.join().unwrap());
        taken.extend(b.join().unwrap());
        drain(&mut owner, &mut taken);
        check(ledger, taken);
    });
}

/// The owner's `Local` is dropped while a thief steals: every item is still dropped
/// exactly once, by the thief or by `Local`'s destructor.
#[test]
fn drop_local_during_steal() {
    loom::model(|| {
        let ledger = Ledger::new(3);
        let sink = Sink::default();
        let (mut owner, steal) = local();
        for id in 0..3 {
            owner.push_back_or_overflow(item(ledger, id), &sink);
        }

        let thief = thread::spawn(move || steal_twice(&steal));
        drop(owner);
        let taken = thief.join().unwrap();
        let mut counts = [0usize; 3];
        for item in &taken {
            counts[item.id] += 1;
        }
        drop(taken);
        for (id, d) in ledger.drops.iter().enumerate() {
            assert!(counts[id] <= 1);
            assert_eq!(
                d.load(SeqCst),
                1,
                "item {id} dropped {} times",
                d.load(SeqCst)
            );
        }
    });
}
