//! How workers are started and driven.
//!
//! A seam: the scheduler starts its workers only through [`Driver`], and this
//! build's driver is [`WorkerThreads`], one OS thread per worker, each running the
//! worker loop ([`worker::run`]) until the scheduler terminates. A driver of its own
//! (a simulation's, stepping every worker on one thread in an order it chooses)
//! sets each worker up with [`Worker::enter`](crate::engine::worker::Worker::enter)
//! and turns it with [`run_next`](crate::engine::worker::Worker::run_next). Static:
//! the scheduler names the driver's type, nothing is dispatched at run time.

use std::io;

use crate::engine::handle::Handle;
use crate::engine::queue::local::Local;
use crate::engine::shared::Task;
use crate::engine::worker;
use crate::sync::thread::{Builder, JoinHandle};

/// What starts and drives the scheduler's workers.
pub(crate) trait Driver {
    /// A started worker, joined at shutdown.
    type Running: Send;

    /// Starts worker `index` of `handle`'s scheduler, with its deque `local`, under
    /// the name `name`.
    fn start(
        name: String,
        handle: Handle,
        index: usize,
        local: Local<Task>,
    ) -> io::Result<Self::Running>;

    /// Waits until a worker stops (the scheduler terminated); a panic that escaped
    /// it (a broken invariant) comes back.
    fn join(running: Self::Running) -> std::thread::Result<()>;
}

/// One OS thread per worker, running the worker loop.
pub(crate) struct WorkerThreads;

impl Driver for WorkerThreads {
    type Running = JoinHandle<()>;

    fn start(
        name: String,
        handle: Handle,
        index: usize,
        local: Local<Task>,
    ) -> io::Result<JoinHandle<()>> {
        Builder::new()
            .name(name)
            .spawn(move || worker::run(handle, index, local))
    }

    fn join(running: JoinHandle<()>) -> std::thread::Result<()> {
        running.join()
    }
}

/// The scheduler's driver.
pub(crate) type RuntimeDriver = WorkerThreads;

/// A started worker of the scheduler's driver.
pub(crate) type RunningWorker = <RuntimeDriver as Driver>::Running;
