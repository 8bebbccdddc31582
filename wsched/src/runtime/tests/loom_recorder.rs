//! loom models of the recorder's event buffer (`recorder/ring.rs`): a snapshot
//! taken while its writer writes (or amends) returns only intact events, consecutive,
//! never a slot half overwritten, and once the writer is done, exactly what it kept.

use crate::observe::recorder::ring::{Copied, Ring};
use crate::sync::{thread, Arc};

/// Event `i` is `[i, check(i)]`: a torn slot mixes two events and fails the check.
fn check(i: u64) -> u64 {
    i.wrapping_mul(7) + 1
}

fn assert_intact(copied: &Copied, capacity: usize) {
    assert!(copied.events.len() <= capacity);
    assert!(copied.first + copied.events.len() as u64 <= copied.written);
    for (k, event) in copied.events.iter().enumerate() {
        let i = copied.first + k as u64;
        assert_eq!(*event, [i, check(i)], "event {i} is torn or out of place");
    }
}

// The reader runs on the spawned thread and the writer on the model's main thread:
// loom explored the other way round as a single execution.

#[test]
fn a_snapshot_racing_overwrites_returns_only_intact_events() {
    loom::model(|| {
        let ring = Arc::new(Ring::new(2, true));
        let reader = {
            let ring = ring.clone();
            thread::spawn(move || assert_intact(&ring.snapshot(), 2))
        };
        for i in 0..4 {
            ring.push(i, check(i));
        }
        reader.join().unwrap();
        let last = ring.snapshot();
        assert_intact(&last, 2);
        assert_eq!(last.first, 2, "the ring keeps the last two");
        assert_eq!(last.events.len(), 2);
    });
}

#[test]
fn a_bounded_buffer_keeps_the_first_events_and_counts_the_rest() {
    loom::model(|| {
        let ring = Arc::new(Ring::new(2, false));
        let reader = {
            let ring = ring.clone();
            thread::spawn(move || {
                let racing = ring.snapshot();
                assert_intact(&racing, 2);
                assert_eq!(racing.first, 0, "nothing is overwritten");
            })
        };
        for i in 0..3 {
            ring.push(i, check(i));
        }
        reader.join().unwrap();
        let last = ring.snapshot();
        assert_intact(&last, 2);
        assert_eq!((last.first, last.events.len(), last.refused), (0, 2, 1));
    });
}

#[test]
fn a_snapshot_racing_an_amend_and_an_overwrite_sees_whole_events() {
    loom::model(|| {
        let ring = Arc::new(Ring::new(2, true));
        let reader = {
            let ring = ring.clone();
            thread::spawn(move || {
                let copied = ring.snapshot();
                for (k, event) in copied.events.iter().enumerate() {
                    let i = copied.first + k as u64;
                    assert_eq!(event[0], i, "event {i} is out of place");
                    assert!(event[1] == check(i) || event[1] == !check(i), "torn");
                }
            })
        };
        // Event 1 is amended while held, then overwritten by event 3.
        for i in 0..2 {
            ring.push(i, check(i));
        }
        ring.amend(1, !check(1));
        ring.push(2, check(2));
        ring.push(3, check(3));
        // Lapped: left alone.
        ring.amend(1, 0);
        reader.join().unwrap();
        let last = ring.snapshot();
        assert_eq!(last.events, vec![[2, check(2)], [3, check(3)]]);
    });
}
