//! `#[process]` processes and the timer service: a receive timeout that a message beat
//! gives its timer back at once, so a process looping on `recv!(.., timeout = …)` holds
//! one timer however many messages it gets.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wsched::prelude::*;
use wsched::{RecvError, Scheduler};

const HOUR: Duration = Duration::from_secs(3600);
const PATIENCE: Duration = Duration::from_secs(20);

/// Spins (yielding the thread) until `condition` holds, for at most [`PATIENCE`].
#[track_caller]
fn spin_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting until {what}");
        std::thread::yield_now();
    }
}

struct Receiver {
    received: Arc<AtomicU64>,
}

#[process]
impl Receiver {
    /// Sums `n` numbers, each awaited with an hour's timeout.
    #[entry]
    fn sum(&mut self, n: u64) -> Result<u64, BoxError> {
        let mut sum = 0;
        for _ in 0..n {
            sum += recv!(u64, timeout = HOUR)?;
            self.received.fetch_add(1, Ordering::SeqCst);
        }
        Ok(sum)
    }

    /// Waits for a message that never comes, with a timeout too long to represent.
    #[entry]
    fn forever(&mut self) -> String {
        match recv!(u64, timeout = Duration::MAX) {
            Ok(n) => format!("got {n}"),
            Err(RecvError::Cancelled) => "cancelled".to_string(),
            Err(e) => format!("failed: {e}"),
        }
    }

    /// Sleeps for as long as a `Duration` can say.
    #[entry]
    fn sleep_forever(&mut self) -> String {
        match yield_cmd!(Sleep(Duration::MAX)) {
            Ok(()) => "woke up".to_string(),
            Err(YieldError::Cancelled) => "cancelled".to_string(),
            Err(e) => format!("failed: {e}"),
        }
    }
}

#[test]
fn a_receive_loop_with_a_long_timeout_holds_one_timer() {
    const MESSAGES: u64 = 10_000;
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let pid = sched
        .spawn(
            Receiver {
                received: received.clone(),
            },
            "sum",
            (MESSAGES,),
        )
        .unwrap();
    let mut most = 0;
    for i in 0..MESSAGES {
        sched.send(pid, i).unwrap();
        // One message at a time, so that every receive arms (and must give back) a
        // timer of its own.
        spin_until("the message is received", || {
            received.load(Ordering::SeqCst) > i
        });
        let pending = sched.metrics().pending_timers;
        most = most.max(pending);
        assert!(
            pending <= 2,
            "after {} messages {pending} timers are pending",
            i + 1
        );
    }
    let sum = sched.wait(pid).unwrap().downcast::<u64>().unwrap();
    assert_eq!(sum, MESSAGES * (MESSAGES - 1) / 2);
    spin_until("the last timer is released", || {
        sched.metrics().pending_timers == 0
    });
    assert!(most >= 1, "the receive armed timers");
    sched.shutdown(PATIENCE);
}

#[test]
fn unrepresentable_timeouts_wait_until_cancelled() {
    let sched = Scheduler::builder().workers(1).build().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let new = || Receiver {
        received: received.clone(),
    };
    let receiving = sched.spawn(new(), "forever", ()).unwrap();
    let sleeping = sched.spawn(new(), "sleep_forever", ()).unwrap();
    spin_until("both armed their timers", || {
        sched.metrics().pending_timers == 2
    });
    for pid in [receiving, sleeping] {
        sched.cancel(pid).unwrap();
        let said = sched.wait(pid).unwrap().downcast::<String>().unwrap();
        assert_eq!(said, "cancelled");
    }
    spin_until("the timers are released", || {
        sched.metrics().pending_timers == 0
    });
    // The worker is alive and timers still work.
    let pid = sched.spawn(new(), "sum", (1_u64,)).unwrap();
    sched.send(pid, 5_u64).unwrap();
    assert_eq!(sched.wait(pid).unwrap().downcast::<u64>().unwrap(), 5);
    assert!(sched.shutdown(PATIENCE).stopped.is_empty());
}
