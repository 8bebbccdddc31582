//! Real-thread stress test of the per-worker queue: one owner pushes (with overflow)
//! and pops 2,000,000 unique items while three thieves steal half of the owner's queue
//! — and of each other's — into their own queues and drain them. Afterwards every id
//! must have been taken exactly once and every item dropped exactly once.
//!
//! No sleeps and no timing: the threads stop on a flag the owner sets once its queue
//! is empty, and each thief drains its own queue before it exits.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;

use crate::engine::queue::local::{local, Local, Overflow, Steal, LOCAL_QUEUE_CAPACITY};

const ITEMS: u32 = 2_000_000;
const THIEVES: usize = 3;

/// Drops of `Tracked`; only this test creates them.
static DROPS: AtomicUsize = AtomicUsize::new(0);

struct Tracked(u32);

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Relaxed);
    }
}

#[derive(Default)]
struct Sink(Mutex<Vec<Tracked>>);

impl Overflow<Tracked> for Sink {
    fn push_batch(&self, items: impl Iterator<Item = Tracked>) {
        self.0.lock().unwrap().extend(items);
    }
}

/// Deterministic burst sizes (xorshift); the interleavings come from the threads.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[derive(Default)]
struct Report {
    taken: Vec<u32>,
    steals: usize,
    stolen: usize,
    misses: usize,
}

fn take(report: &mut Report, item: Tracked) {
    report.taken.push(item.0);
}

fn drain(queue: &mut Local<Tracked>, report: &mut Report) {
    while let Some(item) = queue.pop() {
        take(report, item);
    }
}

fn thief(
    index: usize,
    mut mine: Local<Tracked>,
    owner: Steal<Tracked>,
    others: Vec<Steal<Tracked>>,
    done: Arc<AtomicBool>,
) -> Report {
    let mut report = Report::default();
    let mut attempt = index;
    loop {
        drain(&mut mine, &mut report);
        attempt += 1;
        // Mostly the owner; every fourth attempt another thief (chained steals).
        let victim = match attempt % 4 {
            0 => &others[attempt / 4 % others.len()],
            _ => &owner,
        };
        if let Some((item, n)) = victim.steal_half_into_counted(&mut mine) {
            assert!(n <= LOCAL_QUEUE_CAPACITY / 2);
            report.steals += 1;
            report.stolen += n;
            take(&mut report, item);
            continue;
        }
        // The owner sets `done` only once its queue is empty and it pushes no more, so
        // after seeing it nothing new can reach `mine`: the drain above was the last.
        if done.load(SeqCst) && mine.is_empty() {
            return report;
        }
        report.misses += 1;
        thread::yield_now();
    }
}

#[test]
fn owner_and_three_thieves_take_every_item_once() {
    DROPS.store(0, SeqCst);
    let (mut owner, owner_steal) = local::<Tracked>();
    let queues: Vec<(Local<Tracked>, Steal<Tracked>)> = (0..THIEVES).map(|_| local()).collect();
    let handles: Vec<Steal<Tracked>> = queues.iter().map(|(_, s)| s.clone()).collect();
    let done = Arc::new(AtomicBool::new(false));
    let sink = Sink::default();

    let thieves: Vec<_> = queues
        .into_iter()
        .enumerate()
        .map(|(i, (mine, _))| {
            let others = handles
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, s)| s.clone())
                .collect();
            let (owner_steal, done) = (owner_steal.clone(), done.clone());
            thread::spawn(move || thief(i, mine, owner_steal, others, done))
        })
        .collect();

    let mut report = Report::default();
    let mut overflowed = 0;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut next = 0;
    while next < ITEMS {
        // Pushes outnumber pops so that the ring fills up and overflows.
        let burst = (1 + rng.below(2 * LOCAL_QUEUE_CAPACITY as u64)) as u32;
        for id in next..(next + burst).min(ITEMS) {
            overflowed += owner.push_back_or_overflow(Tracked(id), &sink);
        }
        next = (next + burst).min(ITEMS);
        for _ in 0..rng.below(LOCAL_QUEUE_CAPACITY as u64) {
            match owner.pop() {
                Some(item) => take(&mut report, item),
                None => break,
            }
        }
    }
    drain(&mut owner, &mut report);
    assert!(owner.is_empty());
    done.store(true, SeqCst);

    let reports: Vec<Report> = thieves.into_iter().map(|t| t.join().unwrap()).collect();
    let sunk = std::mem::take(&mut *sink.0.lock().unwrap());
    assert_eq!(sunk.len(), overflowed);

    let mut counts = vec![0u8; ITEMS as usize];
    let all = reports
        .iter()
        .flat_map(|r| &r.taken)
        .chain(&report.taken)
        .copied()
        .chain(sunk.iter().map(|t| t.0));
    for id in all {
        counts[id as usize] = counts[id as usize].saturating_add(1);
    }
    let lost = counts.iter().filter(|&&c| c == 0).count();
    let duplicated = counts.iter().filter(|&&c| c > 1).count();
    let steals: usize = reports.iter().map(|r| r.steals).sum();
    let stolen: usize = reports.iter().map(|r| r.stolen).sum();
    eprintln!(
        "owner popped {}, overflowed {overflowed}, {steals} steals moved {stolen}, {} misses, thieves took {:?}",
        report.taken.len(),
        reports.iter().map(|r| r.misses).sum::<usize>(),
        reports.iter().map(|r| r.taken.len()).collect::<Vec<_>>(),
    );
    assert_eq!((lost, duplicated), (0, 0), "lost / duplicated items");
    assert!(
        steals > 0,
        "no steal succeeded: the test did not exercise stealing"
    );
    assert!(overflowed > 0, "the ring never overflowed");

    // Taken items were dropped as they were taken; the overflowed ones go now.
    drop(sunk);
    drop((owner, owner_steal, handles));
    assert_eq!(DROPS.load(SeqCst), ITEMS as usize, "drops != pushed");
}
