//! The blocking pool: threads for handlers that block, so workers never do.
//!
//! The equivalent of Go handing its P to another thread during a syscall: a blocking
//! handler runs here while the worker goes on stepping processes. Threads start on
//! demand up to a bound, and retire after sitting idle for a while; jobs beyond the
//! bound wait in a FIFO queue.
//!
//! # Who runs a new job
//!
//! A new job goes to an idle thread only if one is idle *and not already woken for
//! an earlier job*: `notified` counts wake-ups sent and not yet taken, and `run` wakes
//! a thread only while `idle > notified` (tokio's blocking pool counts them the same
//! way). Otherwise it starts a thread, up to the bound. Without that count, two jobs
//! queued back to back both "found" the same idle thread, ran one after the other,
//! and deadlocked when the first waited for the second.
//!
//! All of it is one mutex and one condition variable; a woken thread takes a
//! notification (if any is left) before it looks at the queue, so every
//! notification is consumed exactly once, by a thread that then runs a job or finds
//! the queue drained by a busy thread that looped round to it (harmless).

use std::collections::VecDeque;
use std::time::Duration;

use std::sync::Arc;

use crate::engine::shared::Shared;
use crate::sync::{thread, Condvar, Mutex};

impl Shared {
    /// The pool of threads that runs blocking handlers.
    #[inline(always)]
    pub(crate) fn blocking(&self) -> &Arc<BlockingPool> {
        self.part()
    }
}

pub(crate) type Job = Box<dyn FnOnce() + Send>;

pub(crate) struct BlockingPool {
    state: Mutex<PoolState>,
    condvar: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
}

struct PoolState {
    queue: VecDeque<Job>,
    /// Threads alive.
    threads: usize,
    /// Threads waiting on the condition variable.
    idle: usize,
    /// Wake-ups sent to idle threads and not yet taken by one (at most `idle`).
    notified: usize,
    shutdown: bool,
}

impl BlockingPool {
    pub(crate) fn new(max_threads: usize, keep_alive: Duration, thread_name: String) -> Self {
        Self {
            state: Mutex::new(PoolState {
                queue: VecDeque::new(),
                threads: 0,
                idle: 0,
                notified: 0,
                shutdown: false,
            }),
            condvar: Condvar::new(),
            max_threads: max_threads.max(1),
            keep_alive,
            thread_name,
        }
    }

    /// Runs `job` on a pool thread. After shutdown, the job is dropped (its
    /// completers then deliver "dropped" to processes that are gone anyway).
    pub(crate) fn run(self: &Arc<Self>, job: Job) {
        let mut state = self.state.lock();
        if state.shutdown {
            drop(state);
            crate::runtime::drop_quietly(job);
            return;
        }
        state.queue.push_back(job);
        if state.idle > state.notified {
            state.notified += 1;
            drop(state);
            self.condvar.notify_one();
            return;
        }
        if state.threads < self.max_threads {
            state.threads += 1;
            let pool = self.clone();
            let spawned = thread::Builder::new()
                .name(self.thread_name.clone())
                .spawn(move || pool.work());
            if spawned.is_err() {
                // The job stays queued for the threads that exist; with none, it runs
                // when a later `run` manages to start one.
                state.threads -= 1;
            }
        }
    }

    fn work(&self) {
        let mut state = self.state.lock();
        loop {
            if let Some(job) = state.queue.pop_front() {
                drop(state);
                // Handlers run under `catch_panics` inside the job; this catches what
                // is left (e.g. a panicking drop), so a job never kills its thread.
                crate::runtime::drop_quietly(std::panic::catch_unwind(
                    std::panic::AssertUnwindSafe(job),
                ));
                state = self.state.lock();
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            let timed_out = self
                .condvar
                .wait_for(&mut state, self.keep_alive)
                .timed_out();
            state.idle -= 1;
            if state.notified > 0 {
                // Woken for a job (or a timeout raced a wake-up: take it anyway, so
                // the count stays exact and the job is not left waiting).
                state.notified -= 1;
                continue;
            }
            if timed_out && state.queue.is_empty() {
                break;
            }
        }
        state.threads -= 1;
    }

    /// Stops taking jobs, drops the queued ones and wakes the idle threads, which
    /// exit. Threads inside a blocking job exit when it returns: a handler that never
    /// returns cannot be interrupted.
    pub(crate) fn shutdown(&self) {
        let dropped: Vec<Job> = {
            let mut state = self.state.lock();
            state.shutdown = true;
            state.queue.drain(..).collect()
        };
        self.condvar.notify_all();
        // Their completers report "dropped"; their commands are user values.
        crate::runtime::drop_all_quietly(dropped);
    }

    /// Threads alive right now.
    pub(crate) fn threads(&self) -> usize {
        self.state.lock().threads
    }
}
