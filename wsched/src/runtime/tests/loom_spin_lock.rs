//! loom model of the mailbox's spin lock (`spin_lock.rs`): holders on two threads
//! never overlap (loom's tracked access to the value reports a data race if they
//! did, or if unlocking did not order one holder's writes before the next holder's
//! reads), and no update is lost.

use crate::spin_lock::SpinLock;
use crate::sync::Arc;

#[test]
fn holders_on_two_threads_are_ordered_and_lose_nothing() {
    loom::model(|| {
        let lock = Arc::new(SpinLock::new(Vec::new()));
        let other = {
            let lock = lock.clone();
            loom::thread::spawn(move || {
                lock.lock().push(1);
                lock.lock().push(2);
            })
        };
        lock.lock().push(10);
        other.join().unwrap();
        let mut seen = lock.lock().clone();
        // The other thread's pushes stay in its order, wherever ours fell.
        seen.retain(|&n| n < 10);
        assert_eq!(seen, [1, 2]);
        assert_eq!(lock.lock().len(), 3);
    });
}
