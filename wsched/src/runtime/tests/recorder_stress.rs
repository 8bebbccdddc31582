//! The recorder's event buffer under real threads: a writer laps a small ring many
//! times while readers snapshot it; every snapshot holds only intact, consecutive
//! events, and the final one exactly the last `capacity`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::runtime::recorder::ring::Ring;

fn check(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5555
}

#[test]
fn snapshots_racing_a_lapping_writer_are_never_torn() {
    const CAPACITY: usize = 256;
    const EVENTS: u64 = 2_000_000;
    let ring = Arc::new(Ring::new(CAPACITY, true));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (ring, done) = (ring.clone(), done.clone());
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
                    snapshots += 1;
                    seen += copied.events.len() as u64;
                }
                (snapshots, seen)
            })
        })
        .collect();
    for i in 0..EVENTS {
        ring.push(i, check(i));
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        let (snapshots, seen) = reader.join().unwrap();
        assert!(snapshots > 0 && seen > 0);
    }
    let last = ring.snapshot();
    assert_eq!(last.written, EVENTS);
    assert_eq!(last.first, EVENTS - CAPACITY as u64);
    assert_eq!(last.events.len(), ring.capacity());
    for (k, event) in last.events.iter().enumerate() {
        let i = last.first + k as u64;
        assert_eq!(*event, [i, check(i)]);
    }
}

#[test]
fn a_bounded_buffer_loses_nothing_it_accepted() {
    let ring = Arc::new(Ring::new(1024, false));
    let writer = {
        let ring = ring.clone();
        std::thread::spawn(move || {
            for i in 0..5000 {
                ring.push(i, check(i));
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
