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
    /// A simulation's scheduler, which does no real I/O: the runtime never starts.
    pub(crate) simulated: bool,
}

impl IoConfig {
    pub(crate) fn new(thread_name: &str) -> Self {
        Self {
            threads: 1,
            borrowed: None,
            shutdown_timeout: Duration::from_secs(1),
            thread_name: format!("{thread_name}-io"),
            simulated: false,
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
    owned: Mutex<Option<Owned>>,
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
        if self.config.simulated {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a simulation does no real I/O: sockets and async handlers need a real \
                 scheduler (give the command a simulated handler instead)",
            ));
        }
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
        let runtime = Owned::start(&self.config)?;
        let _ = self.handle.set(runtime.handle());
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
        if let Some(runtime) = runtime {
            runtime.shutdown(self.config.shutdown_timeout);
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

/// A runtime the scheduler owns.
///
/// One thread is a current-thread runtime driven by a thread of its own: every
/// future runs there, and a spawn from a worker wakes that one thread. (A
/// multi-threaded runtime of one worker does the same work through its
/// work-stealing machinery, and a spawn from outside can wake a second thread to
/// look for work: measured, an async yield's round trip took 1.6–1.8 times as
/// long.) More threads are a multi-threaded runtime.
struct Owned {
    runtime: Arc<tokio::runtime::Runtime>,
    /// For a current-thread runtime: what stops the thread driving it, and what
    /// tells that it stopped.
    driver: Option<(Arc<tokio::sync::Notify>, std::sync::mpsc::Receiver<()>)>,
}

impl Owned {
    fn start(config: &IoConfig) -> std::io::Result<Self> {
        if config.threads > 1 {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(config.threads)
                .thread_name(config.thread_name.clone())
                .enable_all()
                .build()?;
            return Ok(Self {
                runtime: Arc::new(runtime),
                driver: None,
            });
        }
        let runtime = Arc::new(
            tokio::runtime::Builder::new_current_thread()
                .thread_name(config.thread_name.clone())
                .enable_all()
                .build()?,
        );
        let stop = Arc::new(tokio::sync::Notify::new());
        let (stopped_tx, stopped) = std::sync::mpsc::channel();
        {
            let (runtime, stop) = (runtime.clone(), stop.clone());
            std::thread::Builder::new()
                .name(config.thread_name.clone())
                .spawn(move || {
                    runtime.block_on(stop.notified());
                    drop(runtime);
                    let _ = stopped_tx.send(());
                })?;
        }
        Ok(Self {
            runtime,
            driver: Some((stop, stopped)),
        })
    }

    fn handle(&self) -> tokio::runtime::Handle {
        self.runtime.handle().clone()
    }

    /// Stops the runtime, waiting up to `timeout` for its threads; the futures left
    /// are dropped.
    fn shutdown(self, timeout: std::time::Duration) {
        let Self { runtime, driver } = self;
        if let Some((stop, stopped)) = driver {
            // Stored if the thread is not waiting yet: it returns at once then.
            stop.notify_one();
            // It returns at the next `.await` of the future it is polling; one
            // that blocks its thread past the timeout is left to it (the thread
            // then drops the runtime when it gets back).
            if stopped.recv_timeout(timeout).is_err() {
                return;
            }
        }
        let Ok(runtime) = Arc::try_unwrap(runtime) else {
            return; // the driver thread still holds it: it drops it on its way out
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside some runtime's context (a scheduler shut down from a task),
            // where blocking to wait is not allowed: let its threads go on their own.
            runtime.shutdown_background();
        } else {
            runtime.shutdown_timeout(timeout);
        }
    }
}

fn shut_down() -> std::io::Error {
    std::io::Error::other("the scheduler has shut down: no new I/O is started")
}
