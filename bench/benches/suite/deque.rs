//! wsched's per-worker deque (`engine/queue/local.rs`, reached through the
//! `bench-internals` feature) against `crossbeam-deque`'s FIFO `Worker` (the same
//! discipline: the owner pops the oldest item).
//!
//! Items are `usize`s, pointer-sized like the `Arc`s the scheduler queues.
//!
//! * **owner**: one thread pushes `batch` items then pops them all, `rounds` times.
//!   `batch` stays below our ring's capacity, so our overflow path is never taken
//!   (checked: zero items overflowed).
//! * **steal**: the owner pushes `total` items in chunks of 32 and pops 16 after each
//!   chunk (draining to 64 whenever it holds more than 192), while a thief on another
//!   thread keeps stealing half into its own deque (`steal_half_into` /
//!   `steal_batch_and_pop`) and popping that dry. crossbeam's batch steal takes at most
//!   32 items; ours takes half, up to 128: that difference is part of what is measured.
//!
//! Both check that every item came out exactly once (count and sum).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use crossbeam_deque::{Steal as CbSteal, Worker};
use wsched::__bench::{local, Local, LOCAL_QUEUE_CAPACITY};

use crate::harness::{check, Measured, Stopwatch};

const CHUNK: usize = 32;
const POP_AFTER_CHUNK: usize = 16;
const HIGH: usize = 192;
const LOW: usize = 64;

/// The owner's side of either deque.
trait Owner {
    fn push(&mut self, item: usize);
    fn pop(&mut self) -> Option<usize>;
    fn len(&self) -> usize;
    /// Items that went to an overflow sink instead of the deque.
    fn overflowed(&mut self) -> Vec<usize>;
}

struct Ours {
    local: Local<usize>,
    overflow: Vec<usize>,
}

impl Owner for Ours {
    #[inline]
    fn push(&mut self, item: usize) {
        self.local.push_back_or_overflow(item, &mut self.overflow);
    }
    #[inline]
    fn pop(&mut self) -> Option<usize> {
        self.local.pop()
    }
    #[inline]
    fn len(&self) -> usize {
        self.local.len()
    }
    fn overflowed(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.overflow)
    }
}

struct Theirs(Worker<usize>);

impl Owner for Theirs {
    #[inline]
    fn push(&mut self, item: usize) {
        self.0.push(item);
    }
    #[inline]
    fn pop(&mut self) -> Option<usize> {
        self.0.pop()
    }
    #[inline]
    fn len(&self) -> usize {
        self.0.len()
    }
    fn overflowed(&mut self) -> Vec<usize> {
        Vec::new()
    }
}

fn ours() -> Ours {
    Ours {
        local: local().0,
        overflow: Vec::new(),
    }
}

/// Owner push + pop on one thread: returns (items popped, their sum).
fn owner_only(q: &mut impl Owner, rounds: usize, batch: usize) -> (usize, u64) {
    let mut count = 0;
    let mut sum = 0_u64;
    let mut next = 0;
    for _ in 0..rounds {
        for _ in 0..batch {
            q.push(next);
            next += 1;
        }
        while let Some(item) = q.pop() {
            count += 1;
            sum += item as u64;
        }
    }
    (count, sum)
}

fn expected(total: usize) -> (usize, u64) {
    (total, (total as u64) * (total as u64 - 1) / 2)
}

pub fn owner_ours(rounds: usize, batch: usize) -> Result<Measured, String> {
    assert!(batch < LOCAL_QUEUE_CAPACITY);
    let mut q = ours();
    let clock = Stopwatch::start();
    let got = owner_only(&mut q, rounds, batch);
    let m = clock.stop();
    check("items overflowed", q.overflowed().len(), 0)?;
    check("(count, sum) popped", got, expected(rounds * batch))?;
    Ok(m)
}

pub fn owner_crossbeam(rounds: usize, batch: usize) -> Result<Measured, String> {
    let mut q = Theirs(Worker::new_fifo());
    let clock = Stopwatch::start();
    let got = owner_only(&mut q, rounds, batch);
    let m = clock.stop();
    check("(count, sum) popped", got, expected(rounds * batch))?;
    Ok(m)
}

/// The owner's half of the steal workload.
fn busy_owner(q: &mut impl Owner, total: usize) -> (usize, u64) {
    let mut count = 0;
    let mut sum = 0_u64;
    let mut take = |item: usize| {
        count += 1;
        sum += item as u64;
    };
    let mut next = 0;
    while next < total {
        let end = (next + CHUNK).min(total);
        for item in next..end {
            q.push(item);
        }
        next = end;
        for _ in 0..POP_AFTER_CHUNK {
            match q.pop() {
                Some(item) => take(item),
                None => break,
            }
        }
        if q.len() > HIGH {
            while q.len() > LOW {
                match q.pop() {
                    Some(item) => take(item),
                    None => break,
                }
            }
        }
    }
    while let Some(item) = q.pop() {
        take(item);
    }
    for item in q.overflowed() {
        take(item);
    }
    (count, sum)
}

/// Runs `owner` on this thread and `thief` on another, released together; returns
/// the combined (count, sum) and the time from release until both are done.
fn with_thief<O: Owner>(
    mut q: O,
    total: usize,
    thief: impl FnOnce(&AtomicBool) -> (usize, u64) + Send + 'static,
) -> ((usize, u64), Measured) {
    let start = Arc::new(Barrier::new(2));
    let owner_done = Arc::new(AtomicBool::new(false));
    let thread = {
        let start = start.clone();
        let owner_done = owner_done.clone();
        thread::spawn(move || {
            start.wait();
            thief(&owner_done)
        })
    };
    start.wait();
    let clock = Stopwatch::start();
    let (count, sum) = busy_owner(&mut q, total);
    owner_done.store(true, Ordering::Release);
    let (stolen, stolen_sum) = thread.join().expect("the thief does not panic");
    let m = clock.stop();
    ((count + stolen, sum + stolen_sum), m)
}

pub fn steal_ours(total: usize) -> Result<Measured, String> {
    let (owner, stealer) = local::<usize>();
    let q = Ours {
        local: owner,
        overflow: Vec::new(),
    };
    let (got, m) = with_thief(q, total, move |owner_done| {
        let mut mine = local::<usize>().0;
        let mut count = 0;
        let mut sum = 0_u64;
        loop {
            match stealer.steal_half_into(&mut mine) {
                Some((item, _)) => {
                    count += 1;
                    sum += item as u64;
                    while let Some(item) = mine.pop() {
                        count += 1;
                        sum += item as u64;
                    }
                }
                None if owner_done.load(Ordering::Acquire) && stealer.is_empty() => break,
                None => std::hint::spin_loop(),
            }
        }
        (count, sum)
    });
    check(
        "(count, sum) taken by owner and thief",
        got,
        expected(total),
    )?;
    Ok(m)
}

pub fn steal_crossbeam(total: usize) -> Result<Measured, String> {
    let worker = Worker::new_fifo();
    let stealer = worker.stealer();
    let (got, m) = with_thief(Theirs(worker), total, move |owner_done| {
        let mine = Worker::new_fifo();
        let mut count = 0;
        let mut sum = 0_u64;
        loop {
            match stealer.steal_batch_and_pop(&mine) {
                CbSteal::Success(item) => {
                    count += 1;
                    sum += item as u64;
                    while let Some(item) = mine.pop() {
                        count += 1;
                        sum += item as u64;
                    }
                }
                CbSteal::Retry => std::hint::spin_loop(),
                CbSteal::Empty if owner_done.load(Ordering::Acquire) && stealer.is_empty() => break,
                CbSteal::Empty => std::hint::spin_loop(),
            }
        }
        (count, sum)
    });
    check(
        "(count, sum) taken by owner and thief",
        got,
        expected(total),
    )?;
    Ok(m)
}
