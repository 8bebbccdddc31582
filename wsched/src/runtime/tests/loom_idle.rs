//! loom model of the park / wake handshake: two workers and an outside submitter.
//! A lost wake-up leaves a worker parked with work queued and nobody awake: loom
//! reports that as a deadlock.

use crate::engine::idle::{Idle, Unregister};
use crate::engine::queue::inject::Inject;
use crate::sync::{Arc, AtomicBool, AtomicUsize, Ordering};

const WORKERS: usize = 2;
const ITEMS: usize = 2;

struct World {
    idle: Idle,
    queue: Inject<usize>,
    taken: AtomicUsize,
    done: AtomicBool,
}

/// The worker loop of `worker.rs`, reduced to the global queue (stealing would only
/// add more places to look in the same re-check).
fn worker(world: &World, index: usize) {
    let mut searching = false;
    loop {
        if world.done.load(Ordering::SeqCst) {
            return;
        }
        if world.queue.pop().is_some() {
            if searching {
                searching = false;
                if world.idle.stop_searching() {
                    world.idle.notify_one();
                }
            }
            if world.taken.fetch_add(1, Ordering::SeqCst) + 1 == ITEMS {
                world.done.store(true, Ordering::SeqCst);
                world.idle.unpark_all();
            }
            continue;
        }
        if !searching {
            searching = world.idle.try_start_searching();
        }
        world.idle.register_sleeper(index, searching);
        searching = false;
        if !world.queue.is_empty() || world.done.load(Ordering::SeqCst) {
            match world.idle.unregister(index) {
                Unregister::Awake => continue,
                Unregister::AlreadyWoken => {}
            }
        }
        world.idle.park(index);
        searching = true;
    }
}

#[test]
fn no_wake_up_is_lost_between_finding_nothing_and_parking() {
    loom::model(|| {
        let world = Arc::new(World {
            idle: Idle::new(WORKERS),
            queue: Inject::new(),
            taken: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        });
        let workers: Vec<_> = (0..WORKERS)
            .map(|index| {
                let world = world.clone();
                loom::thread::spawn(move || worker(&world, index))
            })
            .collect();
        for item in 0..ITEMS {
            world.queue.push(item);
            world.idle.notify_one();
        }
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(world.taken.load(Ordering::SeqCst), ITEMS);
    });
}

/// Two idle workers of two ask to search at once: at most half may (one), or a burst
/// of idle workers would hammer every victim together. (Refuted the "check, then add
/// separately" version: loom found both getting through.)
#[test]
fn at_most_half_the_workers_search_at_once() {
    loom::model(|| {
        let idle = Arc::new(Idle::new(WORKERS));
        let askers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let idle = idle.clone();
                loom::thread::spawn(move || idle.try_start_searching())
            })
            .collect();
        let searching = askers
            .into_iter()
            .map(|asker| asker.join().unwrap())
            .filter(|&started| started)
            .count();
        assert_eq!(searching, 1, "exactly one of two idle workers searches");
    });
}
