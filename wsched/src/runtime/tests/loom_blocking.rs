//! loom model of the blocking pool's idle/notify logic (`command/blocking.rs`):
//! threads started and woken by `run`, jobs that wait for each other. A job that
//! never runs shows as a loom deadlock.

use std::sync::Arc;
use std::time::Duration;

use crate::command::blocking::BlockingPool;
use crate::sync::{Condvar, Mutex};

/// A counter others can wait on, built on loom's primitives (so that waiting for
/// something that never happens is a deadlock loom reports, not a spin).
#[derive(Default)]
struct Count {
    n: Mutex<usize>,
    condvar: Condvar,
}

impl Count {
    fn add(&self) {
        *self.n.lock() += 1;
        self.condvar.notify_all();
    }

    fn wait_for(&self, target: usize) {
        let mut n = self.n.lock();
        while *n < target {
            self.condvar.wait(&mut n);
        }
    }
}

/// One thread is idle when two jobs that wait for each other arrive: the second
/// must go to a new thread, not queue behind the first on the idle one.
#[test]
fn jobs_queued_back_to_back_run_on_separate_threads() {
    loom::model(|| {
        let pool = Arc::new(BlockingPool::new(2, Duration::MAX, "test".into()));
        // Start one thread; it goes idle after its job.
        let warm = Arc::new(Count::default());
        let w = warm.clone();
        pool.run(Box::new(move || w.add()));
        warm.wait_for(1);

        let (arrived, done) = (Arc::new(Count::default()), Arc::new(Count::default()));
        for _ in 0..2 {
            let (arrived, done) = (arrived.clone(), done.clone());
            pool.run(Box::new(move || {
                // Each job waits until both are running.
                arrived.add();
                arrived.wait_for(2);
                done.add();
            }));
        }
        done.wait_for(2);
        pool.shutdown();
    });
}
