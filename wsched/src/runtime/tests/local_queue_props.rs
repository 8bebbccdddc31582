//! Model-based property test of the per-worker queue: random sequences of pushes,
//! pops, batch pushes, overflowing pushes and steals between two queues, replayed
//! against two `VecDeque`s and an overflow `Vec`. Everything whose order the queue
//! defines is compared exactly (pops take the oldest; a steal takes the oldest
//! `ceil(len / 2)`, returns the first and appends the rest in order; an overflow moves
//! the oldest half and then the new item), and at the end every pushed item has been
//! dropped exactly once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use proptest::prelude::*;

use crate::engine::queue::local::{
    local_starting_at, Local, Overflow, Steal, LOCAL_QUEUE_CAPACITY,
};

const CAP: usize = LOCAL_QUEUE_CAPACITY;

/// An item that counts its drops.
#[derive(Debug)]
struct Item {
    id: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Item {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

#[derive(Default)]
struct Sink(std::cell::RefCell<Vec<Item>>);

impl Overflow<Item> for Sink {
    fn push_batch(&self, items: impl Iterator<Item = Item>) {
        self.0.borrow_mut().extend(items);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Q {
    A,
    B,
}

#[derive(Debug, Clone)]
enum Op {
    /// `push_back_or_overflow` this many items, one by one.
    Push(Q, usize),
    /// `push_back_batch` this many items (clamped to the free slots).
    PushBatch(Q, usize),
    Pop(Q),
    /// Steal from the first queue into the other.
    Steal(Q),
}

fn queue() -> impl Strategy<Value = Q> {
    prop_oneof![3 => Just(Q::A), 1 => Just(Q::B)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (queue(), 1..=CAP + 40).prop_map(|(q, n)| Op::Push(q, n)),
        2 => (queue(), 0..=CAP).prop_map(|(q, n)| Op::PushBatch(q, n)),
        4 => queue().prop_map(Op::Pop),
        4 => queue().prop_map(Op::Steal),
    ]
}

/// Index origins: zero, just short of the `u32` wrap-around, and anywhere.
fn origin() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0),
        (u32::MAX - 3 * CAP as u32..=u32::MAX),
        any::<u32>(),
    ]
}

struct Harness {
    local: [Local<Item>; 2],
    steal: [Steal<Item>; 2],
    model: [VecDeque<u64>; 2],
    sink: Sink,
    model_sink: Vec<u64>,
    next_id: u64,
    drops: Arc<AtomicUsize>,
}

fn ix(q: Q) -> usize {
    match q {
        Q::A => 0,
        Q::B => 1,
    }
}

impl Harness {
    fn new(origin_a: u32, origin_b: u32) -> Self {
        let (la, sa) = local_starting_at(origin_a);
        let (lb, sb) = local_starting_at(origin_b);
        Self {
            local: [la, lb],
            steal: [sa, sb],
            model: [VecDeque::new(), VecDeque::new()],
            sink: Sink::default(),
            model_sink: Vec::new(),
            next_id: 0,
            drops: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn fresh(&mut self) -> Item {
        self.next_id += 1;
        Item {
            id: self.next_id,
            drops: self.drops.clone(),
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Push(q, n) => {
                let q = ix(q);
                for _ in 0..n {
                    let item = self.fresh();
                    let id = item.id;
                    let moved = self.local[q].push_back_or_overflow(item, &self.sink);
                    let model = &mut self.model[q];
                    if model.len() < CAP {
                        model.push_back(id);
                        prop_assert_eq!(moved, 0);
                    } else {
                        self.model_sink.extend(model.drain(..CAP / 2));
                        self.model_sink.push(id);
                        prop_assert_eq!(moved, CAP / 2 + 1);
                    }
                }
            }
            Op::PushBatch(q, n) => {
                let q = ix(q);
                let n = n.min(self.local[q].remaining_slots());
                let items: Vec<Item> = (0..n).map(|_| self.fresh()).collect();
                self.model[q].extend(items.iter().map(|i| i.id));
                self.local[q].push_back_batch(items.into_iter());
            }
            Op::Pop(q) => {
                let q = ix(q);
                let got = self.local[q].pop().map(|i| i.id);
                prop_assert_eq!(got, self.model[q].pop_front());
            }
            Op::Steal(q) => {
                let (src, dst) = (ix(q), 1 - ix(q));
                let [a, b] = &mut self.local;
                let dst_local = if dst == 0 { a } else { b };
                let got = self.steal[src].steal_half_into_counted(dst_local);
                let available = self.model[src].len();
                let room = CAP - self.model[dst].len();
                let n = (available - available / 2).min(room + 1);
                if n == 0 {
                    prop_assert!(got.is_none());
                } else {
                    let (item, count) = got.expect("steal from a non-empty queue failed");
                    prop_assert_eq!(count, n);
                    let mut taken = self.model[src].drain(..n);
                    prop_assert_eq!(Some(item.id), taken.next());
                    let rest: Vec<u64> = taken.collect();
                    self.model[dst].extend(rest);
                }
            }
        }
        self.check_lengths()
    }

    fn check_lengths(&self) -> Result<(), TestCaseError> {
        for q in 0..2 {
            let len = self.model[q].len();
            prop_assert_eq!(self.local[q].len(), len);
            prop_assert_eq!(self.local[q].is_empty(), len == 0);
            prop_assert_eq!(self.local[q].has_tasks(), len != 0);
            prop_assert_eq!(self.steal[q].len(), len);
            prop_assert_eq!(self.steal[q].is_empty(), len == 0);
            prop_assert_eq!(self.local[q].remaining_slots(), CAP - len);
        }
        let sunk: Vec<u64> = self.sink.0.borrow().iter().map(|i| i.id).collect();
        prop_assert_eq!(&sunk, &self.model_sink);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn local_queue_matches_model(
        origin_a in origin(),
        origin_b in origin(),
        ops in proptest::collection::vec(op(), 1..48),
        drain_before_drop in any::<bool>(),
    ) {
        let mut h = Harness::new(origin_a, origin_b);
        for op in &ops {
            h.apply(op)?;
        }
        if drain_before_drop {
            for q in [Q::A, Q::B] {
                while !h.model[ix(q)].is_empty() {
                    h.apply(&Op::Pop(q))?;
                }
                h.apply(&Op::Pop(q))?;
            }
        }
        // Every item is dropped exactly once: the taken ones already, the queued ones by
        // `Local`'s destructor, the overflowed ones with the sink.
        let pushed = h.next_id as usize;
        let drops = h.drops.clone();
        drop(h);
        prop_assert_eq!(drops.load(SeqCst), pushed);
    }
}

/// A lying `ExactSizeIterator` (yields more than its `len()`) must not write past the
/// free slots: the push panics, and the items pushed before stay queued.
#[test]
fn push_back_batch_rejects_a_lying_iterator() {
    struct Liar(std::ops::Range<u64>);
    impl Iterator for Liar {
        type Item = u64;
        fn next(&mut self) -> Option<u64> {
            self.0.next()
        }
    }
    impl ExactSizeIterator for Liar {
        fn len(&self) -> usize {
            0
        }
    }

    let (mut q, _steal) = local_starting_at::<u64>(u32::MAX - 5);
    q.push_back_batch((0..CAP as u64 - 3).collect::<Vec<_>>().into_iter());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        q.push_back_batch(Liar(100..110));
    }));
    assert!(result.is_err());
    assert_eq!(q.len(), CAP);
    let items: Vec<u64> = std::iter::from_fn(|| q.pop()).collect();
    let expected: Vec<u64> = (0..CAP as u64 - 3).chain(100..103).collect();
    assert_eq!(items, expected);
}

#[test]
#[should_panic(expected = "free slots")]
fn push_back_batch_panics_when_too_long() {
    let (mut q, _steal) = local_starting_at::<u64>(0);
    q.push_back_batch((0..CAP as u64 + 1).collect::<Vec<_>>().into_iter());
}

/// An overflow sink that takes only part of the batch (or panics midway) still gets
/// every item of it dropped exactly once, and the queue stays consistent.
#[test]
fn overflow_items_not_consumed_are_dropped() {
    struct Partial(std::cell::RefCell<Vec<Item>>, usize);
    impl Overflow<Item> for Partial {
        fn push_batch(&self, items: impl Iterator<Item = Item>) {
            self.0.borrow_mut().extend(items.take(self.1));
        }
    }
    struct Panicking;
    impl Overflow<Item> for Panicking {
        fn push_batch(&self, mut items: impl Iterator<Item = Item>) {
            drop(items.next());
            panic!("sink failed");
        }
    }

    let drops = Arc::new(AtomicUsize::new(0));
    let item = |id| Item {
        id,
        drops: drops.clone(),
    };
    let (mut q, _steal) = local_starting_at(u32::MAX - 7);
    for id in 0..CAP as u64 {
        assert_eq!(
            q.push_back_or_overflow(item(id), &Partial(Default::default(), 0)),
            0
        );
    }
    let partial = Partial(Default::default(), 3);
    assert_eq!(q.push_back_or_overflow(item(1000), &partial), CAP / 2 + 1);
    let kept: Vec<u64> = partial.0.borrow().iter().map(|i| i.id).collect();
    assert_eq!(kept, [0, 1, 2]);
    assert_eq!(drops.load(SeqCst), CAP / 2 + 1 - 3);
    assert_eq!(q.len(), CAP / 2);

    for id in 0..CAP as u64 / 2 {
        q.push_back_or_overflow(item(2000 + id), &Panicking);
    }
    let before = drops.load(SeqCst);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        q.push_back_or_overflow(item(3000), &Panicking);
    }));
    assert!(result.is_err());
    assert_eq!(drops.load(SeqCst), before + CAP / 2 + 1);
    assert_eq!(q.len(), CAP / 2);
    // The queue is intact: the newer half (pushed after the first overflow), in order.
    let rest: Vec<u64> = std::iter::from_fn(|| q.pop().map(|i| i.id)).collect();
    let expected: Vec<u64> = (2000..2000 + CAP as u64 / 2).collect();
    assert_eq!(rest, expected);
    drop(partial);
    assert_eq!(drops.load(SeqCst), CAP + 1 + CAP / 2 + 1);
}

/// The owner's handle moves between threads; the thieves' handle is shared by them.
#[test]
fn handles_are_send_and_steal_is_sync() {
    fn send<T: Send>() {}
    fn send_sync_clone<T: Send + Sync + Clone>() {}
    send::<Local<Arc<u64>>>();
    send_sync_clone::<Steal<Arc<u64>>>();
}
