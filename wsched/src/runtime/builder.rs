//! Configuring and starting a scheduler.

use std::sync::Arc;
use std::time::Duration;

use super::layers::State;
use super::scheduler::Scheduler;
use crate::command::blocking::BlockingPool;
use crate::command::handler::{Handlers, Placement, Registration};
use crate::command::{builtin_registrations, Command, Completer};
use crate::engine::dead_letters::{DeadLetter, DeadLetterHook, DeadLetters};
use crate::engine::driver::{Driver, RuntimeDriver};
use crate::engine::handle::Handle;
use crate::engine::queue::inject::GLOBAL_BATCH;
use crate::engine::queue::local;
use crate::engine::shared::{Shared, SharedParts, Task};
use crate::engine::unobserved::{FailureHook, FailureReport, UnobservedFailures};
use crate::error::BuildError;
use crate::observe::instrument::Observers;
use crate::observe::recorder::{RecordOptions, Recorder};
use crate::observe::timing::{LongStepHook, Timing, TimingOptions};
use crate::services::in_flight::InFlight;
use crate::services::monitors::Monitors;
use crate::services::names::Names;
use crate::services::remote::Remote;
use crate::services::timers::Timers;
#[cfg(test)]
use crate::time::timer::Clock;

/// Configures a [`Scheduler`]: workers, handlers, pools.
///
/// ```
/// use wsched::command::Completer;
/// use wsched::{Command, Scheduler};
///
/// struct Add(u32, u32);
/// impl Command for Add {
///     type Output = u32;
/// }
///
/// let scheduler = Scheduler::builder()
///     .workers(2)
///     .handler(|Add(a, b), done: Completer<Add>| done.complete(a + b))
///     .build()?;
/// # Ok::<(), wsched::BuildError>(())
/// ```
pub struct Builder {
    workers: Option<usize>,
    thread_name: String,
    global_batch: usize,
    blocking_threads: usize,
    blocking_keep_alive: Duration,
    registrations: Vec<Registration>,
    on_unobserved_failure: Option<FailureHook>,
    on_dead_letter: Option<DeadLetterHook>,
    record: Option<RecordOptions>,
    step_timing: bool,
    long_step: Option<Duration>,
    on_long_step: Option<LongStepHook>,
    /// The seed of the workers' randomness (see `engine/random.rs`): zero, so each
    /// worker's victim choices are its index's; a deterministic run will set it.
    seed: u64,
    /// The timer service's clock (the system's unless a test says otherwise).
    #[cfg(test)]
    timer_clock: Option<Clock>,
    /// The I/O runtime async handlers and sockets run on.
    #[cfg(feature = "tokio")]
    io: crate::io::runtime::IoConfig,
    #[cfg(feature = "tokio")]
    async_handlers: Vec<crate::io::handler::AsyncRegistration>,
    /// Recorded histories: codecs, flight recorders (the `sim` feature).
    #[cfg(feature = "sim")]
    history: crate::observe::history::HistoryOptions,
    /// What layers above this one do with the scheduler once it is built (the
    /// cluster joins), in order; a failure unwinds the build.
    on_build: Vec<OnBuild>,
}

/// See [`Builder::on_build`].
pub(crate) type OnBuild =
    Box<dyn FnOnce(&Arc<Shared>) -> Result<(), Box<dyn std::error::Error + Send + Sync>> + Send>;

impl Builder {
    pub(crate) fn new() -> Self {
        Self {
            workers: None,
            thread_name: "wsched".to_owned(),
            global_batch: GLOBAL_BATCH,
            seed: 0,
            blocking_threads: 64,
            blocking_keep_alive: Duration::from_secs(10),
            registrations: Vec::new(),
            on_unobserved_failure: None,
            on_dead_letter: None,
            record: None,
            step_timing: false,
            long_step: None,
            on_long_step: None,
            #[cfg(test)]
            timer_clock: None,
            #[cfg(feature = "tokio")]
            io: crate::io::runtime::IoConfig::new("wsched"),
            #[cfg(feature = "tokio")]
            async_handlers: Vec::new(),
            #[cfg(feature = "sim")]
            history: crate::observe::history::HistoryOptions::new(
                crate::command::builtin::standard_codecs(),
            ),
            on_build: Vec::new(),
        }
    }

    /// Runs `then` on the scheduler once it is built: the seam through which a
    /// layer above (the cluster) joins it. A failure shuts the scheduler down and
    /// fails the build with [`BuildError::Join`].
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn on_build(mut self, then: OnBuild) -> Self {
        self.on_build.push(then);
        self
    }

    /// Runs the timer service on `clock` (the loom models' stepping clock).
    #[cfg(test)]
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn timer_clock(mut self, clock: Clock) -> Self {
        self.timer_clock = Some(clock);
        self
    }

    /// The number of worker threads (default: `std::thread::available_parallelism`).
    /// Zero is refused by [`build`](Self::build).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// The prefix of thread names: workers are `{prefix}-worker-{i}`, blocking
    /// threads `{prefix}-blocking`, the timer thread (started by the first
    /// [`Sleep`](crate::command::Sleep) or timed message) `{prefix}-timer` (default
    /// `wsched`).
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.thread_name = prefix.into();
        self
    }

    /// How many processes a worker moves from the global queue into its deque at
    /// once, besides the one it runs (default 16, at least 1).
    pub fn global_batch(mut self, batch: usize) -> Self {
        self.global_batch = batch.max(1);
        self
    }

    /// The most threads the blocking pool runs at once (default 64, at least 1);
    /// further blocking jobs wait in FIFO order.
    pub fn blocking_threads(mut self, threads: usize) -> Self {
        self.blocking_threads = threads.max(1);
        self
    }

    /// How long an idle blocking thread waits for work before it exits (default
    /// 10 s).
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.blocking_keep_alive = keep_alive;
        self
    }

    /// Registers `handler` for command type `C`. It runs on the worker right after
    /// the step that yielded, so it must not block: complete at once, or move the
    /// [`Completer`] to another thread and complete there. A registration for a
    /// built-in command ([`Sleep`](crate::command::Sleep),
    /// [`Spawn`](crate::command::Spawn), [`Join`](crate::command::Join)) replaces the
    /// built-in handler.
    ///
    /// Registering two handlers for one command type makes [`build`](Self::build)
    /// fail with [`BuildError::DuplicateHandler`].
    pub fn handler<C, F>(mut self, handler: F) -> Self
    where
        C: Command,
        F: Fn(C, Completer<C>) + Send + Sync + 'static,
    {
        self.registrations
            .push(Registration::new(Placement::Worker, handler));
        self
    }

    /// Registers a handler that may block; it runs on the blocking pool, so the
    /// workers keep stepping other processes meanwhile. Otherwise as
    /// [`handler`](Self::handler).
    pub fn blocking_handler<C, F>(mut self, handler: F) -> Self
    where
        C: Command,
        F: Fn(C, Completer<C>) + Send + Sync + 'static,
    {
        self.registrations
            .push(Registration::new(Placement::Blocking, handler));
        self
    }

    /// Registers an async handler for command type `C` (the `tokio` feature): the
    /// command is performed by the future `handler` returns, run on the I/O runtime
    /// (see [`io_threads`](Self::io_threads), [`io_runtime`](Self::io_runtime)).
    /// `Ok(output)` completes the yield; `Err(error)` fails it with
    /// [`YieldError::Failed`](crate::YieldError::Failed), the error kept as its
    /// source (an `std::io::Error` stays one, to downcast); a panic fails it with
    /// [`YieldError::HandlerPanicked`](crate::YieldError::HandlerPanicked).
    ///
    /// The future is dropped as soon as nobody waits for its result: the process
    /// withdrew the yield (a `recv!` timeout or a pattern arm won), ended for any
    /// reason, or the scheduler shut down. Options and the yield's context:
    /// [`async_handler_with`](Self::async_handler_with).
    ///
    /// ```
    /// use std::time::Duration;
    /// use wsched::prelude::*;
    /// use wsched::Scheduler;
    ///
    /// struct Lookup(String);
    /// impl Command for Lookup {
    ///     type Output = usize;
    /// }
    ///
    /// struct Client;
    ///
    /// #[process]
    /// impl Client {
    ///     #[entry]
    ///     fn run(&mut self) -> Result<usize, BoxError> {
    ///         Ok(yield_cmd!(Lookup("wsched".into()))?)
    ///     }
    /// }
    ///
    /// let scheduler = Scheduler::builder()
    ///     .async_handler(|Lookup(name): Lookup| async move {
    ///         tokio::time::sleep(Duration::from_millis(1)).await; // any tokio I/O
    ///         Ok::<_, std::io::Error>(name.len())
    ///     })
    ///     .build()?;
    /// let pid = scheduler.spawn(Client, Client::RUN, ())?;
    /// assert_eq!(scheduler.wait(pid)?.downcast::<usize>()?, 6);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tokio")]
    pub fn async_handler<C, F, Fut, E>(self, handler: F) -> Self
    where
        C: Command,
        F: Fn(C) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<C::Output, E>> + Send + 'static,
        E: Into<crate::error::BoxError> + 'static,
    {
        self.async_handler_with(crate::io::AsyncOptions::new(), move |command: C, _| {
            handler(command)
        })
    }

    /// Registers an async handler for `C` with `options` (at most N futures at
    /// once, queued or refused beyond; a timeout), whose closure also receives the
    /// yield's [`IoContext`](crate::io::IoContext): the process, the tag, whether
    /// the result is still wanted. Otherwise as
    /// [`async_handler`](Self::async_handler).
    ///
    /// Registering two handlers of any kind for one command type makes
    /// [`build`](Self::build) fail with [`BuildError::DuplicateHandler`].
    #[cfg(feature = "tokio")]
    pub fn async_handler_with<C, F, Fut, E>(
        mut self,
        options: crate::io::AsyncOptions,
        handler: F,
    ) -> Self
    where
        C: Command,
        F: Fn(C, crate::io::IoContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<C::Output, E>> + Send + 'static,
        E: Into<crate::error::BoxError> + 'static,
    {
        self.async_handlers
            .push(crate::io::handler::AsyncRegistration::new(options, handler));
        self
    }

    /// The number of threads of the I/O runtime the scheduler owns (the `tokio`
    /// feature; default one). It is a tokio runtime sized for I/O, not for
    /// computing: async handlers and sockets wait on it, processes compute on the
    /// workers. One thread is a current-thread runtime on a thread of its own, which
    /// hands results to the workers fastest; more make a multi-threaded runtime, for
    /// futures that compute or for more sockets than one thread can serve. Built
    /// with the first future, so a scheduler that does no I/O starts no thread; shut
    /// down last at the scheduler's shutdown. Ignored if
    /// [`io_runtime`](Self::io_runtime) gives the application's own.
    #[cfg(feature = "tokio")]
    pub fn io_threads(mut self, threads: usize) -> Self {
        self.io.threads = threads.max(1);
        self
    }

    /// Runs async handlers and sockets on the application's tokio runtime instead
    /// of one the scheduler owns (the `tokio` feature). The scheduler spawns on it
    /// and never shuts it down: at the scheduler's shutdown, the futures of its
    /// processes are aborted and the runtime goes on.
    #[cfg(feature = "tokio")]
    pub fn io_runtime(mut self, runtime: tokio::runtime::Handle) -> Self {
        self.io.borrowed = Some(runtime);
        self
    }

    /// How long the shutdown of the owned I/O runtime waits for its threads to
    /// stop, after every future of the scheduler was aborted (the `tokio` feature;
    /// default one second).
    #[cfg(feature = "tokio")]
    pub fn io_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.io.shutdown_timeout = timeout;
        self
    }

    /// Calls `hook` with each failure nobody observes: a detached process that ends
    /// with an error, a panic or a linked process's failure while nothing monitors
    /// or links to it, and, when the scheduler is dropped, each joinable process
    /// whose failed result nobody claimed. See [`FailureReport`] for the exact
    /// rule. The default prints one line per failure to stderr (PID, entry, reason).
    /// Either way each is counted in [`Metrics::unobserved_failures`](crate::Metrics).
    ///
    /// The hook runs on the thread that ends the process (usually a worker), under
    /// no runtime lock, once per failure; it must not block. A panic in it is
    /// caught.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use wsched::Scheduler;
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let scheduler = Scheduler::builder()
    ///     .on_unobserved_failure(move |report| log.lock().unwrap().push(report.pid))
    ///     .build()?;
    /// # Ok::<(), wsched::BuildError>(())
    /// ```
    pub fn on_unobserved_failure<F>(mut self, hook: F) -> Self
    where
        F: Fn(&FailureReport) + Send + Sync + 'static,
    {
        self.on_unobserved_failure = Some(Box::new(hook));
        self
    }

    /// Gives `hook` each message still unread when its process ends (a
    /// [`DeadLetter`]: the process, the sender if known, the payload, which the
    /// hook owns and may keep, and the [`reason`](DeadLetter::reason)). Without a
    /// hook they are dropped; either way each is counted in
    /// [`Metrics::dead_letters`](crate::Metrics). For `#[process]` processes this
    /// includes messages taken in that no `recv!` received. Messages a full bounded
    /// mailbox dropped come here too (see [`DeadLetterReason`](crate::DeadLetterReason)).
    ///
    /// The hook runs on the thread that ends the process (usually a worker), under
    /// no runtime lock, in the order the messages arrived; it must not block. A
    /// message a full mailbox dropped is handed over on the thread whose send
    /// dropped it (the timer thread for a timed message). A panic in it is caught.
    pub fn on_dead_letter<F>(mut self, hook: F) -> Self
    where
        F: Fn(DeadLetter) + Send + Sync + 'static,
    {
        self.on_dead_letter = Some(Box::new(hook));
        self
    }

    /// Records scheduler events (off by default) into buffers allocated now, one per
    /// worker and one for threads that are not workers, each holding
    /// [`RecordOptions::capacity_per_worker`] events, the last ones in ring mode.
    /// [`Scheduler::recording`] copies them out at any time, as a [`Recording`]
    /// that renders to Chrome / Perfetto JSON, SVG or text; a shutdown that times out
    /// puts one in its [`ShutdownReport`](crate::ShutdownReport).
    ///
    /// Recorded: each step (process, start, outcome), each process made runnable
    /// (spawned, woken, requeued), spawns with their entries, workers going idle,
    /// parking and waking, steals, and every few hundred steps and at each park
    /// and wake-up, queue depths and the live-process count. Workers write their own
    /// buffers without locks; the clock is read on idle paths and at the start of
    /// a step (of one step in [`RecordOptions::clock_every`] in a run of back-to-back
    /// steps, whose others share the time between readings), so a step's slice lasts
    /// until its worker picks its next task (it includes the runtime's handling of
    /// the step), and an event inside a step is stamped with the step's end. Off,
    /// each hook costs one branch.
    ///
    /// ```
    /// use wsched::{RecordOptions, Scheduler};
    ///
    /// let scheduler = Scheduler::builder().workers(1).record(RecordOptions::new()).build()?;
    /// // ... run processes ...
    /// let recording = scheduler.recording().expect("recording is on");
    /// let mut json = Vec::new();
    /// recording.write_chrome_json(&mut json)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`Scheduler::recording`]: crate::Scheduler::recording
    /// [`Recording`]: crate::Recording
    pub fn record(mut self, options: RecordOptions) -> Self {
        self.record = Some(options);
        self
    }

    /// Times every step (off by default): per worker, a histogram of step durations
    /// and one of wake latencies; per process, its busy time
    /// ([`ProcessInfo::busy`](crate::ProcessInfo::busy)). Read them in
    /// [`Metrics::step_timing`](crate::Metrics::step_timing).
    ///
    /// It costs two clock reads per step (as much as a short step), and one more
    /// when a step wakes a process into its worker's LIFO slot. The wake latency is
    /// measured for processes woken that way (or spawned) by a step and run next by
    /// the same worker, the path of messages between processes; processes woken by
    /// other threads, moved on to the worker's deque or taken by another worker are
    /// not measured.
    ///
    /// ```
    /// use wsched::Scheduler;
    ///
    /// let scheduler = Scheduler::builder().step_timing(true).build()?;
    /// // ... run processes ...
    /// let timing = scheduler.metrics().step_timing.expect("on");
    /// println!("{} steps, p99 {:?}", timing.steps().count(), timing.steps().quantile(0.99));
    /// # Ok::<(), wsched::BuildError>(())
    /// ```
    pub fn step_timing(mut self, on: bool) -> Self {
        self.step_timing = on;
        self
    }

    /// Reports steps that run longer than `threshold`, while they run, to the
    /// [`on_long_step`](Self::on_long_step) hook (by default a line on stderr), once
    /// per step: the process, its entry, and the suspension point the step resumed
    /// from (a step cannot be interrupted, but it can be named). Turns
    /// [`step_timing`](Self::step_timing) on. A thread checks the workers every
    /// quarter of `threshold` (between 1 ms and 100 ms).
    pub fn long_step_threshold(mut self, threshold: Duration) -> Self {
        self.long_step = Some(threshold);
        self.step_timing = true;
        self
    }

    /// Gives `hook` each [`LongStep`](crate::LongStep) found (see
    /// [`long_step_threshold`](Self::long_step_threshold)), instead of printing it
    /// to stderr. It runs on the detector's thread; a panic in it is caught.
    pub fn on_long_step<F>(mut self, hook: F) -> Self
    where
        F: Fn(&crate::LongStep) + Send + Sync + 'static,
    {
        self.on_long_step = Some(Box::new(hook));
        self
    }

    /// Starts the scheduler's threads.
    ///
    /// # Errors
    /// [`BuildError::NoWorkers`] for zero workers, [`BuildError::DuplicateHandler`]
    /// for two handlers of one command type, [`BuildError::Thread`] when a worker
    /// thread cannot be started.
    pub fn build(mut self) -> Result<Scheduler, BuildError> {
        let thread_name = self.thread_name.clone();
        let on_build = std::mem::take(&mut self.on_build);
        let (shared, locals) = self.shared()?;
        let mut threads = Vec::with_capacity(locals.len());
        for (index, local) in locals.into_iter().enumerate() {
            let handle = Handle::from_shared(shared.clone());
            let spawned = RuntimeDriver::start(
                format!("{thread_name}-worker-{index}"),
                handle,
                index,
                local,
            );
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(error) => {
                    // Unwind what started: the scheduler drops and joins them.
                    drop(Scheduler::from_parts(shared, threads));
                    return Err(BuildError::Thread(error));
                }
            }
        }
        if let Err(error) = Timing::start_detector(&shared, format!("{thread_name}-long-steps")) {
            drop(Scheduler::from_parts(shared, threads));
            return Err(BuildError::Thread(error));
        }
        for then in on_build {
            if let Err(error) = then(&shared) {
                let scheduler = Scheduler::from_parts(shared, threads);
                scheduler.shutdown(Duration::from_secs(1));
                return Err(BuildError::Join(error));
            }
        }
        Ok(Scheduler::from_parts(shared, threads))
    }

    /// A scheduler whose workers never start, for the loom models that step its
    /// processes on their own threads with the worker's own step function (see
    /// `runtime/tests/loom_state.rs`). Its processes must have ended before it is
    /// dropped: nobody else would run them.
    #[cfg(all(test, loom))]
    pub(crate) fn build_without_workers(self) -> Scheduler {
        let (shared, _deques) = self.shared().expect("the scheduler's state is built");
        Scheduler::from_parts(shared, Vec::new())
    }

    /// The state of a simulated scheduler (see `sim/`): one worker, which the
    /// simulation drives on its own thread, the timers fired by the simulation, the
    /// workers' randomness seeded with `seed`, no step timing. Each command the
    /// application registered a handler for must have a handler in `simulated`
    /// (which replace the application's) or be in `kept` (an application's handler
    /// that runs on the worker, kept as it is); the built-in socket handlers are
    /// left out, and the I/O runtime refuses to start.
    ///
    /// # Errors
    /// [`SimulatedBuildError::Unsimulated`] naming every command that has neither,
    /// [`SimulatedBuildError::Kept`] naming a kept handler that does not run on the
    /// worker, and the errors of [`build`](Self::build).
    #[cfg(feature = "sim")]
    pub(crate) fn build_simulated(
        mut self,
        seed: u64,
        simulated: Vec<Registration>,
        kept: &[std::any::TypeId],
    ) -> Result<(Arc<Shared>, local::Local<Task>), SimulatedBuildError> {
        let replaced: Vec<std::any::TypeId> = simulated.iter().map(Registration::type_id).collect();
        let mut unsimulated = Vec::new();
        let mut registrations = Vec::new();
        for registration in std::mem::take(&mut self.registrations) {
            let id = registration.type_id();
            if replaced.contains(&id) {
                continue;
            }
            if !kept.contains(&id) {
                unsimulated.push(registration.command());
            } else if registration.placement() != Placement::Worker {
                return Err(SimulatedBuildError::Kept(registration.command()));
            } else {
                registrations.push(registration);
            }
        }
        #[cfg(feature = "tokio")]
        for handler in std::mem::take(&mut self.async_handlers) {
            let id = handler.registration.type_id();
            if kept.contains(&id) && !replaced.contains(&id) {
                return Err(SimulatedBuildError::Kept(handler.command));
            }
            if !replaced.contains(&id) {
                unsimulated.push(handler.command);
            }
        }
        if !unsimulated.is_empty() {
            return Err(SimulatedBuildError::Unsimulated(unsimulated));
        }
        registrations.extend(simulated);
        self.registrations = registrations;
        self.workers = Some(1);
        self.seed = seed;
        self.step_timing = false;
        let (shared, mut locals) = self.shared_with(true)?;
        Ok((shared, locals.pop().expect("one worker")))
    }

    /// The scheduler's shared state and its workers' deques, no thread started.
    fn shared(self) -> Result<(Arc<Shared>, Vec<local::Local<Task>>), BuildError> {
        self.shared_with(false)
    }

    /// [`shared`](Self::shared), for a simulation when `simulated`.
    fn shared_with(
        self,
        simulated: bool,
    ) -> Result<(Arc<Shared>, Vec<local::Local<Task>>), BuildError> {
        let workers = match self.workers {
            Some(0) => return Err(BuildError::NoWorkers),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        // Its thread starts with the first timer.
        let timer_name = format!("{}-timer", self.thread_name);
        #[cfg(test)]
        let timers = match self.timer_clock {
            Some(clock) => <Timers>::with_clock(timer_name, clock),
            None => <Timers>::new(timer_name),
        };
        #[cfg(not(test))]
        let timers = <Timers>::new(timer_name);
        // A simulation fires its timers itself, in virtual time.
        #[cfg(feature = "sim")]
        let timers = if simulated {
            <Timers>::driven(format!("{}-timer", self.thread_name))
        } else {
            timers
        };
        #[cfg(not(any(feature = "sim", feature = "tokio")))]
        let _ = simulated;
        let mut registrations = builtin_registrations(timers.clone());
        // The commands the user registers handlers for: a built-in async handler one
        // of them replaces is left out of the metrics.
        #[cfg(feature = "tokio")]
        let replaced: Vec<&'static str> = self
            .registrations
            .iter()
            .map(Registration::command)
            .chain(self.async_handlers.iter().map(|handler| handler.command))
            .collect();
        registrations.extend(self.registrations);
        #[cfg(feature = "tokio")]
        let io = {
            let mut counts = Vec::new();
            for handler in self.async_handlers {
                counts.push((handler.command, handler.counts));
                registrations.push(handler.registration);
            }
            // A simulation does no real I/O: no socket handlers.
            let sockets = if simulated {
                Vec::new()
            } else {
                crate::io::tcp::registrations()
                    .into_iter()
                    .chain(crate::io::udp::registrations())
                    .collect()
            };
            for handler in sockets {
                if !replaced.contains(&handler.command) {
                    counts.push((handler.command, handler.counts));
                }
                registrations.push(handler.registration);
            }
            let mut config = self.io;
            config.thread_name = format!("{}-io", self.thread_name);
            config.simulated = simulated;
            crate::io::IoRuntime::new(config, counts)
        };
        let handlers = Handlers::new(registrations, self.step_timing)?;
        let (locals, stealers): (Vec<_>, Vec<_>) = (0..workers).map(|_| local::local()).unzip();
        let shared = Shared::new(SharedParts {
            workers,
            global_batch: self.global_batch,
            seed: self.seed,
            stealers: stealers.into_boxed_slice(),
            dead_letters: DeadLetters::new(self.on_dead_letter),
            unobserved: UnobservedFailures::new(self.on_unobserved_failure),
            layers: State {
                handlers,
                blocking: Arc::new(BlockingPool::new(
                    self.blocking_threads,
                    self.blocking_keep_alive,
                    format!("{}-blocking", self.thread_name),
                )),
                names: Names::new(),
                monitors: Monitors::new(),
                timers,
                in_flight: InFlight::new(),
                remote: Remote::default(),
                #[cfg(feature = "tokio")]
                io,
                observers: Observers {
                    recorder: self.record.map(|o| Box::new(Recorder::new(workers, o))),
                    timing: self.step_timing.then(|| {
                        Box::new(Timing::new(
                            workers,
                            TimingOptions {
                                long_step: self.long_step,
                                hook: self.on_long_step,
                            },
                        ))
                    }),
                    #[cfg(feature = "sim")]
                    history: Box::new(crate::observe::history::HistoryState::new(self.history)),
                },
            },
        });
        Ok((shared, locals))
    }
}

/// Why a simulated scheduler could not be built (see `Builder::build_simulated`).
#[cfg(feature = "sim")]
#[derive(Debug)]
pub(crate) enum SimulatedBuildError {
    /// These commands have an application's handler and no simulated one.
    Unsimulated(Vec<&'static str>),
    /// This command's handler was to be kept, but it does not run on the worker.
    Kept(&'static str),
    /// The scheduler itself could not be built.
    Build(BuildError),
}

#[cfg(feature = "sim")]
impl From<BuildError> for SimulatedBuildError {
    fn from(error: BuildError) -> Self {
        Self::Build(error)
    }
}

/// Recorded histories (the `sim` feature; see `wsched::sim::history`).
#[cfg(feature = "sim")]
impl Builder {
    /// The codecs that recorded histories keep values with: messages, completion
    /// outputs, entry arguments, yielded commands and results of a type with a
    /// codec are kept whole, the others by their type name only (default:
    /// [`Codecs::new`](crate::sim::history::Codecs::new), the standard types').
    /// Give [`replay`](crate::sim::history::replay) the same.
    pub fn history_codecs(mut self, codecs: crate::observe::history::Codecs) -> Self {
        self.history.codecs = codecs;
        self
    }

    /// A flight recorder for the processes of type `P` (the struct of a
    /// `#[process]`, or the type implementing [`Process`](crate::Process)): each
    /// keeps the history of its last `steps` steps, and when one fails (its entry
    /// returns an error, or it panics) that history is dumped — to
    /// [`on_flight_dump`](Self::on_flight_dump)'s hook, and kept for
    /// [`Handle::take_flight_dumps`](crate::Handle::take_flight_dumps) (the
    /// latest 64). A process that ends otherwise drops its recorder.
    ///
    /// The memory is bounded: at most `steps` steps per live process of the type.
    /// Each of their steps records its events and yields (encoding the values
    /// with codecs); processes of other types pay one branch a step.
    pub fn flight_recorder<P: crate::IntoProcess>(self, steps: usize) -> Self {
        self.flight_recorder_named(std::any::type_name::<P>(), steps)
    }

    /// [`flight_recorder`](Self::flight_recorder) for the process type named
    /// `process_type`, as [`std::any::type_name`] spells it (the name a
    /// history's [`process_type`](crate::sim::history::History::process_type)
    /// holds).
    pub fn flight_recorder_named(mut self, process_type: &'static str, steps: usize) -> Self {
        self.history
            .flights
            .retain(|(name, _)| *name != process_type);
        self.history.flights.push((process_type, steps));
        self
    }

    /// Calls `hook` with each flight recorder's dump (see
    /// [`flight_recorder`](Self::flight_recorder)), on the worker where the process
    /// failed: it should be quick (log it, save it, send it away). A panic in it is
    /// caught.
    pub fn on_flight_dump(
        mut self,
        hook: impl Fn(&crate::observe::history::History) + Send + Sync + 'static,
    ) -> Self {
        self.history.on_dump = Some(Box::new(hook));
        self
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("thread_name", &self.thread_name)
            .field("global_batch", &self.global_batch)
            .field("blocking_threads", &self.blocking_threads)
            .field("blocking_keep_alive", &self.blocking_keep_alive)
            .field("handlers", &self.registrations.len())
            .field(
                "on_unobserved_failure",
                &self.on_unobserved_failure.is_some(),
            )
            .field("on_dead_letter", &self.on_dead_letter.is_some())
            .field("record", &self.record)
            .field("step_timing", &self.step_timing)
            .field("long_step_threshold", &self.long_step)
            .field("on_long_step", &self.on_long_step.is_some())
            .finish()
    }
}
