//! The blocking pool: threads for handlers that block, so workers never do.
//!
//! The equivalent of Go handing its P to another thread during a syscall: a blocking
//! handler runs here while the worker goes on stepping processes. Threads start on
//! demand up to a bound, and retire after sitting idle for a while; jobs beyond the
//! bound wait in a FIFO queue.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

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
    threads: usize,
    idle: usize,
    shutdown: bool,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl BlockingPool {
    pub(crate) fn new(max_threads: usize, keep_alive: Duration, thread_name: String) -> Self {
        Self {
            state: Mutex::new(PoolState {
                queue: VecDeque::new(),
                threads: 0,
                idle: 0,
                shutdown: false,
                handles: Vec::new(),
            }),
            condvar: Condvar::new(),
            max_threads: max_threads.max(1),
            keep_alive,
            thread_name,
        }
    }

    /// Runs `job` on a pool thread. After shutdown, the job is dropped (its
    /// completers then deliver "dropped" to processes that are gone anyway).
    pub(crate) fn run(self: &std::sync::Arc<Self>, job: Job) {
        let mut state = self.state.lock();
        if state.shutdown {
            drop(state);
            drop(job);
            return;
        }
        state.queue.push_back(job);
        if state.idle > 0 {
            drop(state);
            self.condvar.notify_one();
            return;
        }
        if state.threads < self.max_threads {
            state.threads += 1;
            let pool = self.clone();
            let spawned = std::thread::Builder::new()
                .name(self.thread_name.clone())
                .spawn(move || pool.work());
            match spawned {
                Ok(handle) => {
                    state.handles.retain(|h| !h.is_finished());
                    state.handles.push(handle);
                }
                // The job stays queued for the threads that exist; with none, it
                // runs when a later `run` manages to start one.
                Err(_) => state.threads -= 1,
            }
        }
    }

    fn work(&self) {
        let mut state = self.state.lock();
        loop {
            if let Some(job) = state.queue.pop_front() {
                drop(state);
                job();
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
            if timed_out && state.queue.is_empty() {
                break;
            }
        }
        state.threads -= 1;
    }

    /// Stops taking jobs, lets running ones finish and joins the idle threads.
    /// Threads still inside a blocking job are left to finish it on their own: a
    /// handler that never returns cannot be interrupted.
    pub(crate) fn shutdown(&self) {
        let handles = {
            let mut state = self.state.lock();
            state.shutdown = true;
            let dropped: Vec<Job> = state.queue.drain(..).collect();
            drop(state);
            drop(dropped);
            std::mem::take(&mut self.state.lock().handles)
        };
        self.condvar.notify_all();
        for handle in handles {
            if handle.is_finished() {
                let _ = handle.join();
            }
        }
    }

    /// Threads alive right now.
    pub(crate) fn threads(&self) -> usize {
        self.state.lock().threads
    }
}
