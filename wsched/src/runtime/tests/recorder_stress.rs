//! The recorder's event buffer under real threads: a writer laps a small ring many
//! times (and amends events) while readers snapshot it; every snapshot holds only
//! intact, consecutive events, and the final one exactly the last `capacity`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::observe::recorder::ring::{Ring, REFUSED};

fn check(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555
}

#[test]
fn snapshots_racing_a_lapping_writer_are_never_torn() {
    const CAPACITY: usize = 256;
    const EVENTS: u64 = 2_000_000;
    /// The writer goes on past `EVENTS` until the readers have taken this many
    /// snapshots that held events, so every run races them against the writer.
    const SNAPSHOTS: u64 = 200;
    let ring = Arc::new(Ring::new(CAPACITY, true));
    let done = Arc::new(AtomicBool::new(false));
    let taken = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (ring, done, taken) = (ring.clone(), done.clone(), taken.clone());
            std::thread::spawn(move || {
                let (mut snapshots, mut seen, mut last_first) = (0u64, 0u64, 0u64);
                while !done.load(Ordering::Acquire) {
                    let copied = ring.snapshot();
                    assert!(copied.events.len() <= CAPACITY);
                    assert!(copied.first >= last_first, "snapshots go forward");
                    last_first = copied.first;
                    for (k, event) in copied.events.iter().enumerate() {
                        let i = copied.first + k as u64;
                        assert_eq!(*event, [i, check(i)], "event {i} is torn");
                    }
                    if !copied.events.is_empty() {
                        snapshots += 1;
                        taken.fetch_add(1, Ordering::Relaxed);
                    }
                    seen += copied.events.len() as u64;
                }
                (snapshots, seen)
            })
        })
        .collect();
    let mut written = 0;
    while written < EVENTS || taken.load(Ordering::Relaxed) < SNAPSHOTS {
        ring.push(written, check(written));
        written += 1;
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        let (snapshots, seen) = reader.join().unwrap();
        assert!(seen >= snapshots);
    }
    assert!(taken.load(Ordering::Relaxed) >= SNAPSHOTS);
    let last = ring.snapshot();
    assert_eq!(last.written, written);
    assert_eq!(last.first, written - CAPACITY as u64);
    assert_eq!(last.events.len(), ring.capacity());
    for (k, event) in last.events.iter().enumerate() {
        let i = last.first + k as u64;
        assert_eq!(*event, [i, check(i)]);
    }
}

/// Amending events (as a step's end amends its start) while readers copy: every
/// copied event is either as written or as amended, never a mix of two events.
#[test]
fn snapshots_racing_amends_see_whole_events() {
    const CAPACITY: usize = 64;
    const EVENTS: u64 = 500_000;
    let ring = Arc::new(Ring::new(CAPACITY, true));
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (ring, done) = (ring.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                let copied = ring.snapshot();
                for (k, event) in copied.events.iter().enumerate() {
                    let i = copied.first + k as u64;
                    assert_eq!(event[0], i, "event {i} is out of place");
                    assert!(
                        event[1] == check(i) || event[1] == !check(i),
                        "event {i} is torn"
                    );
                }
            }
        })
    };
    for i in 0..EVENTS {
        let n = ring.push(i, check(i));
        assert_eq!(n, i);
        // Amend the event before last: the ring still holds it.
        if let Some(earlier) = i.checked_sub(1) {
            ring.amend(earlier, !check(earlier));
        }
    }
    // An event the writer lapped is left alone: its slot holds a newer one.
    ring.amend(EVENTS - 1 - CAPACITY as u64, 0);
    done.store(true, Ordering::Release);
    reader.join().unwrap();
    let last = ring.snapshot();
    assert_eq!(last.events.len(), CAPACITY);
    for (k, event) in last.events.iter().enumerate() {
        let i = last.first + k as u64;
        let second = if i == EVENTS - 1 { check(i) } else { !check(i) };
        assert_eq!(*event, [i, second]);
    }
}

#[test]
fn a_bounded_buffer_loses_nothing_it_accepted() {
    let ring = Arc::new(Ring::new(1024, false));
    let writer = {
        let ring = ring.clone();
        std::thread::spawn(move || {
            for i in 0..5000 {
                let n = ring.push(i, check(i));
                assert_eq!(n, if i < 1024 { i } else { REFUSED });
            }
        })
    };
    while !writer.is_finished() {
        let copied = ring.snapshot();
        assert_eq!(copied.first, 0);
        for (i, event) in copied.events.iter().enumerate() {
            assert_eq!(*event, [i as u64, check(i as u64)]);
        }
    }
    writer.join().unwrap();
    let last = ring.snapshot();
    assert_eq!((last.events.len(), last.refused), (1024, 5000 - 1024));
}
