//! The timer service behind [`Sleep`](crate::command::Sleep): one thread and a heap.
//!
//! Pending timers live in a binary heap ordered by deadline (then by arrival, so
//! equal deadlines fire in order). One thread sleeps until the earliest deadline,
//! pops everything due and completes it outside the lock. Insertion and expiry are
//! O(log n), so a million pending timers cost a few dozen comparisons each and about
//! 70 bytes apiece. A timer whose process has ended is not searched for and removed:
//! it fires into a closed mailbox and is ignored, which is cheaper than cancelling.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::completer::RawCompleter;
use crate::payload::Payload;

struct Timer {
    deadline: Instant,
    seq: u64,
    completer: RawCompleter,
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Timer {}

impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timer {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest deadline.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

#[derive(Default)]
struct Wheel {
    heap: BinaryHeap<Timer>,
    next_seq: u64,
    shutdown: bool,
}

pub(crate) struct Timers {
    wheel: Mutex<Wheel>,
    condvar: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Timers {
    pub(crate) fn start(thread_name: String) -> std::io::Result<Arc<Self>> {
        let timers = Arc::new(Self {
            wheel: Mutex::new(Wheel::default()),
            condvar: Condvar::new(),
            thread: Mutex::new(None),
        });
        let runner = timers.clone();
        let handle = std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || runner.run())?;
        *timers.thread.lock() = Some(handle);
        Ok(timers)
    }

    /// Completes `completer` with `()` after `duration`.
    pub(crate) fn sleep(&self, duration: Duration, completer: RawCompleter) {
        let deadline = Instant::now() + duration;
        let mut wheel = self.wheel.lock();
        if wheel.shutdown {
            return; // dropping the completer reports it; the process is gone anyway
        }
        let seq = wheel.next_seq;
        wheel.next_seq += 1;
        let is_earliest = wheel
            .heap
            .peek()
            .is_none_or(|first| deadline < first.deadline);
        wheel.heap.push(Timer {
            deadline,
            seq,
            completer,
        });
        drop(wheel);
        if is_earliest {
            self.condvar.notify_one();
        }
    }

    /// Timers not yet fired.
    pub(crate) fn pending(&self) -> usize {
        self.wheel.lock().heap.len()
    }

    fn run(&self) {
        let mut due = Vec::new();
        let mut wheel = self.wheel.lock();
        loop {
            if wheel.shutdown {
                break;
            }
            let now = Instant::now();
            while wheel.heap.peek().is_some_and(|t| t.deadline <= now) {
                due.push(wheel.heap.pop().expect("peeked"));
            }
            if !due.is_empty() {
                drop(wheel);
                for timer in due.drain(..) {
                    timer.completer.deliver(Ok(Payload::unit()));
                }
                wheel = self.wheel.lock();
                continue;
            }
            match wheel.heap.peek().map(|t| t.deadline) {
                Some(deadline) => {
                    self.condvar.wait_until(&mut wheel, deadline);
                }
                None => self.condvar.wait(&mut wheel),
            }
        }
        let abandoned = std::mem::take(&mut wheel.heap);
        drop(wheel);
        drop(abandoned);
    }

    /// Stops the thread; pending timers are dropped (their processes have ended).
    pub(crate) fn shutdown(&self) {
        self.wheel.lock().shutdown = true;
        self.condvar.notify_all();
        if let Some(handle) = self.thread.lock().take() {
            let _ = handle.join();
        }
    }
}
