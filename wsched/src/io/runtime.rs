//! The tokio runtime that async handlers and sockets run on.
//!
//! Either the scheduler's own — a small multi-threaded runtime sized for I/O, built
//! the first time a future is spawned (so a scheduler that never does I/O starts no
//! thread) and shut down last, after the workers, with a timeout — or the
//! application's, given as a [`tokio::runtime::Handle`], which wsched only spawns
//! on and never shuts down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use crate::engine::shared::Shared;
use crate::services::in_flight::WorkCounts;

impl Shared {
    /// The runtime async handlers and sockets run on.
    #[inline(always)]
    pub(crate) fn io(&self) -> &IoRuntime {
        self.part()
    }
}

/// How the builder configured the I/O runtime.
#[derive(Clone, Debug)]
pub(crate) struct IoConfig {
    /// Worker threads of an owned runtime.
    pub(crate) threads: usize,
    /// The application's runtime, if it gave one.
    pub(crate) borrowed: Option<tokio::runtime::Handle>,
    /// How long the shutdown of an owned runtime waits for its threads.
    pub(crate) shutdown_timeout: Duration,
    /// Prefix of an owned runtime's thread names.
    pub(crate) thread_name: String,
}

impl IoConfig {
    pub(crate) fn new(thread_name: &str) -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(2)),
            borrowed: None,
            shutdown_timeout: Duration::from_secs(1),
            thread_name: format!("{thread_name}-io"),
        }
    }
}

/// The I/O runtime of one scheduler.
pub(crate) struct IoRuntime {
    config: IoConfig,
    /// Where futures are spawned: the borrowed handle, or the owned runtime's, set
    /// once it is built.
    handle: OnceLock<tokio::runtime::Handle>,
    /// The owned runtime, until the shutdown takes it.
    owned: Mutex<Option<tokio::runtime::Runtime>>,
    /// Set by the shutdown: no future is spawned after it.
    closed: AtomicBool,
    /// Each async handler's command and counts, in registration order, for the
    /// metrics.
    handlers: Vec<(&'static str, Arc<WorkCounts>)>,
}

impl IoRuntime {
    pub(crate) fn new(config: IoConfig, handlers: Vec<(&'static str, Arc<WorkCounts>)>) -> Self {
        let handle = OnceLock::new();
        if let Some(borrowed) = &config.borrowed {
            let _ = handle.set(borrowed.clone());
        }
        Self {
            config,
            handle,
            owned: Mutex::new(None),
            closed: AtomicBool::new(false),
            handlers,
        }
    }

    /// The runtime to spawn on, building the owned one if this is the first use.
    ///
    /// # Errors
    /// When the scheduler has shut down, or the owned runtime cannot be built (its
    /// threads cannot start).
    pub(crate) fn handle(&self) -> Result<&tokio::runtime::Handle, std::io::Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(shut_down());
        }
        if let Some(handle) = self.handle.get() {
            return Ok(handle);
        }
        let mut owned = self.owned.lock();
        // Checked again under the lock: the shutdown takes it too.
        if self.closed.load(Ordering::Acquire) {
            return Err(shut_down());
        }
        if let Some(handle) = self.handle.get() {
            return Ok(handle);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.config.threads.max(1))
            .thread_name(self.config.thread_name.clone())
            .enable_all()
            .build()?;
        let _ = self.handle.set(runtime.handle().clone());
        *owned = Some(runtime);
        Ok(self.handle.get().expect("just set"))
    }

    /// Refuses new futures and shuts an owned runtime down, waiting up to the
    /// configured timeout for its threads (futures still running are dropped). A
    /// borrowed runtime is left running.
    pub(crate) fn shutdown(&self) {
        let runtime = {
            let mut owned = self.owned.lock();
            self.closed.store(true, Ordering::Release);
            owned.take()
        };
        let Some(runtime) = runtime else { return };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside some runtime's context (a scheduler shut down from a task),
            // where blocking to wait is not allowed: let its threads go on their own.
            runtime.shutdown_background();
        } else {
            runtime.shutdown_timeout(self.config.shutdown_timeout);
        }
    }

    /// Each async handler's metrics, in registration order.
    pub(crate) fn metrics(&self) -> Vec<super::AsyncHandlerMetrics> {
        self.handlers
            .iter()
            .map(|(command, counts)| super::handler::read_metrics(command, counts))
            .collect()
    }
}

fn shut_down() -> std::io::Error {
    std::io::Error::other("the scheduler has shut down: no new I/O is started")
}
