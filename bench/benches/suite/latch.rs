//! A countdown both sides use to tell the bench thread "every process ran": the one
//! that brings it to zero sends on a `std` channel (the shape of tokio's own
//! `spawn_many` benchmark).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

pub struct Latch {
    left: AtomicUsize,
    done: mpsc::SyncSender<()>,
}

impl Latch {
    pub fn new(count: usize) -> (Arc<Self>, mpsc::Receiver<()>) {
        let (done, wait) = mpsc::sync_channel(1);
        let latch = Arc::new(Self {
            left: AtomicUsize::new(count),
            done,
        });
        (latch, wait)
    }

    pub fn count_down(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _ = self.done.send(());
        }
    }

    /// What is left: 0 after exactly `count` count-downs (a count-down too many wraps
    /// around, which the checks catch).
    pub fn left(&self) -> usize {
        self.left.load(Ordering::Acquire)
    }
}

/// Waits for the latch to reach zero, up to `timeout`.
pub fn wait(done: &mpsc::Receiver<()>, timeout: Duration) -> Result<(), String> {
    done.recv_timeout(timeout)
        .map_err(|e| format!("the count-down did not reach zero: {e}"))
}
