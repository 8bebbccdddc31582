//! loom model of the PID table's reader-writer spin lock (`spin_rwlock.rs`): a
//! writer against a thread that reads and then writes. loom's tracked access to the
//! value reports a data race if a reader were inside with a writer, if two writers
//! overlapped, or if an unlock did not order one holder's accesses before the
//! next's; the totals show a lost write (a writer's plain-store unlock clobbering
//! anything but the waiting bit would lose one).

use crate::spin_rwlock::SpinRwLock;
use crate::sync::Arc;

#[test]
fn readers_and_writers_are_ordered_and_lose_nothing() {
    loom::model(|| {
        let lock = Arc::new(SpinRwLock::new((0_u32, 0_u32)));
        let other = {
            let lock = lock.clone();
            loom::thread::spawn(move || {
                let seen = *lock.read();
                assert_eq!(seen.0, seen.1, "a write seen half done");
                let mut guard = lock.write();
                guard.0 += 1;
                guard.1 += 1;
            })
        };
        {
            let mut guard = lock.write();
            guard.0 += 10;
            guard.1 += 10;
        }
        other.join().unwrap();
        assert_eq!(*lock.read(), (11, 11));
    });
}

#[test]
fn two_writers_take_turns() {
    loom::model(|| {
        let lock = Arc::new(SpinRwLock::new(Vec::new()));
        let other = {
            let lock = lock.clone();
            loom::thread::spawn(move || lock.write().push(1))
        };
        lock.write().push(2);
        other.join().unwrap();
        let mut seen = lock.read().clone();
        seen.sort_unstable();
        assert_eq!(seen, [1, 2]);
    });
}
