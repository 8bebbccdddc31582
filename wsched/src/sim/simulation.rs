//! The simulated scheduler: one worker, stepped on the calling thread in an order
//! drawn from the seed, with virtual time and simulated handlers.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use crate::buggify::simulated as buggify;
use crate::command::handler::Registration;
use crate::command::Command;
use crate::engine::counters::process_totals;
use crate::engine::handle::Handle;
use crate::engine::process::IntoProcess;
use crate::engine::random::simulated as random;
use crate::engine::shared::{Shared, Task};
use crate::engine::spawn_options::SpawnOptions;
use crate::engine::worker::Worker;
use crate::error::{BuildError, CancelError, JoinError, SendError, SpawnError};
use crate::observe::metrics::{Metrics, ProcessInfo};
use crate::observe::recorder::{RecordOptions, Recording};
use crate::payload::{IntoPayloads, Payload};
use crate::pid::Pid;
use crate::runtime::builder::SimulatedBuildError;
use crate::runtime::{Builder, Scheduler};
use crate::sim::context::{Context, Due, FaultCounts};
use crate::sim::faults::Faults;
use crate::sim::handlers::SimHandler;
use crate::sim::trace::{TraceEntry, TraceEvent};

/// How many steps a run may take before it is stopped as runaway (see
/// [`SimBuilder::max_steps`]).
const DEFAULT_MAX_STEPS: u64 = 10_000_000;
/// How many steps winding a simulation down may take before what is left is killed.
const WIND_DOWN_STEPS: u64 = 100_000;

/// Configures a [`Simulation`]: its seed, its faults, the application's scheduler
/// configuration and the simulated handlers that replace its real ones.
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::command::Completer;
/// use wsched::sim::{Faults, SimHandler, Simulation};
/// use wsched::Scheduler;
///
/// struct Fetch;
/// impl Command for Fetch {
///     type Output = u32;
/// }
///
/// struct Client;
/// #[process]
/// impl Client {
///     #[entry]
///     fn run(&mut self) -> Result<u32, BoxError> {
///         let mut got = 0;
///         for _ in 0..3 {
///             got += yield_cmd!(Fetch).unwrap_or(0);
///             yield_cmd!(Sleep(Duration::from_secs(60)))?;
///         }
///         Ok(got)
///     }
/// }
///
/// // The application's configuration, as production builds it.
/// let app = Scheduler::builder().handler(|_: Fetch, done: Completer<Fetch>| done.complete(1));
/// let mut sim = Simulation::builder()
///     .seed(42)
///     .faults(Faults::none().handler_failure(0.3))
///     .scheduler(app)
///     .handler(SimHandler::new(|_: Fetch| Ok(1)).latency(Duration::ZERO..Duration::from_millis(20)))
///     .build()?;
/// let pid = sim.spawn(Client, Client::RUN, ())?;
/// let got = sim.wait(pid)?.downcast::<u32>()?;
/// assert!(got <= 3);
/// assert!(sim.elapsed() >= Duration::from_secs(180)); // three minutes, in virtual time
/// println!("seed 42: trace {:016x}", sim.trace_hash());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SimBuilder {
    seed: u64,
    faults: Option<Faults>,
    scheduler: Option<Builder>,
    handlers: Vec<Result<Registration, String>>,
    kept: Vec<TypeId>,
    max_steps: u64,
    record: Option<RecordOptions>,
    keep_trace: bool,
}

impl SimBuilder {
    fn new() -> Self {
        Self {
            seed: 0,
            faults: None,
            scheduler: None,
            handlers: Vec::new(),
            kept: Vec::new(),
            max_steps: DEFAULT_MAX_STEPS,
            record: None,
            keep_trace: false,
        }
    }

    /// The seed (default 0): the order of steps, every latency and every fault
    /// come from it.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The faults to inject (default: [`Faults::none`]). Use
    /// [`Faults::from_seed`] to draw a plan from the seed.
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = Some(faults);
        self
    }

    /// The application's scheduler configuration: its handlers, hooks and
    /// options, as production builds it. Worker count and step timing are the
    /// simulation's; every command with a handler here needs a simulated handler
    /// ([`handler`](Self::handler)) or must be kept ([`keep`](Self::keep)).
    pub fn scheduler(mut self, builder: Builder) -> Self {
        self.scheduler = Some(builder);
        self
    }

    /// The simulated handler of command `C`, replacing the application's.
    pub fn handler<C: Command>(mut self, handler: SimHandler<C>) -> Self {
        self.handlers.push(handler.into_registration());
        self
    }

    /// Keeps the application's handler of `C` as it is: for a handler that runs on
    /// the worker and is deterministic (it does no I/O and reads no clock but the
    /// runtime's). A blocking or async handler cannot be kept.
    pub fn keep<C: Command>(mut self) -> Self {
        self.kept.push(TypeId::of::<C>());
        self
    }

    /// How many steps a run may take (default ten million): past it, a run
    /// returns [`SimError::StepLimit`], so a process that never stops yielding
    /// cannot hang a test.
    pub fn max_steps(mut self, steps: u64) -> Self {
        self.max_steps = steps;
        self
    }

    /// Records the run's timeline (see [`Recording`]): its Perfetto and SVG
    /// pictures show the simulated run as the recorder sees any other, on the
    /// virtual time axis.
    pub fn record(mut self, options: RecordOptions) -> Self {
        self.record = Some(options);
        self
    }

    /// Keeps every entry of the trace (see [`Simulation::trace`]), not only its
    /// hash and last entries.
    pub fn keep_trace(mut self, keep: bool) -> Self {
        self.keep_trace = keep;
        self
    }

    /// Builds the simulation on the calling thread, which runs it.
    ///
    /// # Errors
    /// [`SimBuildError::Unsimulated`] when a command has the application's handler
    /// and no simulated one, [`SimBuildError::Invalid`] for a bad fault plan or
    /// handler, [`SimBuildError::AlreadyRunning`] when this thread runs another
    /// simulation, and the scheduler's own [`BuildError`]s.
    pub fn build(self) -> Result<Simulation, SimBuildError> {
        let faults = self.faults.unwrap_or_default();
        faults.check().map_err(SimBuildError::Invalid)?;
        let handlers = self
            .handlers
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(SimBuildError::Invalid)?;
        let context = Rc::new(RefCell::new(Context::new(
            self.seed,
            faults.clone(),
            self.keep_trace,
        )));
        // Entered first: the scheduler's timers and clocks start at virtual time.
        Context::enter(&context).map_err(|()| SimBuildError::AlreadyRunning)?;
        let mut builder = self.scheduler.unwrap_or_default();
        if let Some(options) = self.record {
            builder = builder.record(options);
        }
        let built = builder.build_simulated(self.seed, handlers, &self.kept);
        let (shared, local) = match built {
            Ok(parts) => parts,
            Err(error) => {
                Context::leave();
                return Err(match error {
                    SimulatedBuildError::Unsimulated(commands) => {
                        SimBuildError::Unsimulated(commands)
                    }
                    SimulatedBuildError::Kept(command) => SimBuildError::Invalid(format!(
                        "the handler of `{command}` cannot be kept: it does not run on the \
                         worker (a blocking or async handler); give it a simulated handler"
                    )),
                    SimulatedBuildError::Build(error) => SimBuildError::Build(error),
                });
            }
        };
        random::enter(self.seed);
        buggify::enter(self.seed, faults.buggify);
        let scheduler = Scheduler::from_parts(shared.clone(), Vec::new());
        let worker = Worker::enter(Handle::from_shared(shared), 0, local);
        Ok(Simulation {
            worker: Some(worker),
            scheduler: Some(scheduler),
            context,
            ready: Vec::new(),
            fresh: Vec::new(),
            protected: Vec::new(),
            steps: 0,
            max_steps: self.max_steps,
            seed: self.seed,
            faults,
            healed: false,
        })
    }
}

impl fmt::Debug for SimBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimBuilder")
            .field("seed", &self.seed)
            .field("faults", &self.faults)
            .field("handlers", &self.handlers.len())
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

/// A simulated scheduler: the same processes and services as a [`Scheduler`],
/// run on the calling thread from a seed, in virtual time.
///
/// Each turn, the simulation takes every process that became runnable, makes some
/// wait (the plan's delays), picks one of the runnable ones with the seed, perhaps
/// kills it (the plan's crashes), and steps it. When nothing is runnable, virtual
/// time jumps to the next thing due: a timer (sleeps, timeouts, timed messages,
/// supervisor windows), a simulated command's answer, the end of a delay. An hour
/// of timeouts takes as long as its steps do. The same seed and plan give the
/// same run, step for step; [`trace_hash`](Self::trace_hash) says so in one number.
///
/// Build one with [`Simulation::builder`]. Messages, spawns, names, monitors,
/// links, calls, supervisors and bounded mailboxes work as on a scheduler; what
/// blocks a thread does not (a simulation runs on the caller's thread): use
/// [`wait`](Self::wait) and the `run_*` methods instead of `Handle::wait` and
/// `Handle::call`. Dropping it cancels what still runs and lets it end.
pub struct Simulation {
    worker: Option<Worker>,
    scheduler: Option<Scheduler>,
    context: Rc<RefCell<Context>>,
    /// Runnable processes, in the order they became runnable.
    ready: Vec<Task>,
    /// Scratch for the processes that just became runnable.
    fresh: Vec<Task>,
    protected: Vec<Pid>,
    steps: u64,
    max_steps: u64,
    seed: u64,
    faults: Faults,
    /// Whether a liveness run's faulty phase is over (buggify turned off).
    healed: bool,
}

/// What one turn of a simulation did.
enum Turn {
    Stepped,
    Advanced,
    Idle,
}

impl Simulation {
    /// A builder, with seed 0 and no faults.
    pub fn builder() -> SimBuilder {
        SimBuilder::new()
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The fault plan.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// A handle to the simulated scheduler: spawn, send, register and look up
    /// names, monitor, cancel and kill, as on a real one. Its blocking calls
    /// (`wait`, `call`) must not be used: nothing would run while they block.
    pub fn handle(&self) -> &Handle {
        self.scheduler().handle_ref()
    }

    fn scheduler(&self) -> &Scheduler {
        self.scheduler.as_ref().expect("present until dropped")
    }

    fn shared(&self) -> &Shared {
        self.handle().shared()
    }

    /// Spawns `process` on `method` with `input` (see [`Handle::spawn`]).
    ///
    /// # Errors
    /// As [`Handle::spawn`].
    pub fn spawn<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl crate::entry::EntryRef<P, I>,
        input: I,
    ) -> Result<Pid, SpawnError> {
        self.handle().spawn(process, method, input)
    }

    /// Spawns with options (see [`Handle::spawn_with`]).
    ///
    /// # Errors
    /// As [`Handle::spawn_with`].
    pub fn spawn_with<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl crate::entry::EntryRef<P, I>,
        input: I,
        options: SpawnOptions,
    ) -> Result<Pid, SpawnError> {
        self.handle().spawn_with(process, method, input, options)
    }

    /// Sends `message` to `to` (see [`Handle::send`]).
    ///
    /// # Errors
    /// As [`Handle::send`].
    pub fn send<T: Any + Send>(&self, to: Pid, message: T) -> Result<(), SendError> {
        self.handle().send(to, message)
    }

    /// Kills `pid` (see [`Handle::kill`]).
    ///
    /// # Errors
    /// As [`Handle::kill`].
    pub fn kill(&self, pid: Pid) -> Result<(), CancelError> {
        self.handle().kill(pid)
    }

    /// Keeps the plan's crashes away from `pid` (a test's own observer, the root
    /// of a tree whose crash the test does not study).
    pub fn protect(&mut self, pid: Pid) {
        self.protected.push(pid);
    }

    /// Whether `pid` has ended (or never existed).
    pub fn has_ended(&self, pid: Pid) -> bool {
        self.shared().live_cell(pid).is_err()
    }

    /// Runs until `pid` ends, then claims its result.
    ///
    /// # Errors
    /// [`SimError::Join`] when its result cannot be had (it failed, was claimed,
    /// never existed); [`SimError::Idle`] when nothing is left to happen and it
    /// still has not ended (it waits for something that never comes);
    /// [`SimError::StepLimit`].
    pub fn wait(&mut self, pid: Pid) -> Result<Payload, SimError> {
        // Looked up again only when a process ended: the lookup took a sixth of a
        // simulated ping-pong.
        let mut ended = None;
        loop {
            let now_ended = self.ended_so_far();
            if ended != Some(now_ended) {
                ended = Some(now_ended);
                if self.has_ended(pid) {
                    return self.handle().wait(pid).map_err(SimError::Join);
                }
            }
            if let Turn::Idle = self.turn()? {
                return Err(SimError::Idle {
                    at: self.elapsed(),
                    waiting_for: format!("{pid} to end"),
                });
            }
        }
    }

    /// Runs until nothing is left to happen: nothing runnable, no timer, no
    /// answer due. Returns the virtual time it took.
    ///
    /// # Errors
    /// [`SimError::StepLimit`] (an interval timer keeps a system busy forever: run
    /// it [`for`](Self::run_for) a while instead).
    pub fn run_until_idle(&mut self) -> Result<Duration, SimError> {
        let start = self.elapsed();
        while !matches!(self.turn()?, Turn::Idle) {}
        Ok(self.elapsed() - start)
    }

    /// Runs for `duration` of virtual time: everything due by then happens.
    ///
    /// # Errors
    /// [`SimError::StepLimit`].
    pub fn run_for(&mut self, duration: Duration) -> Result<(), SimError> {
        let until = self.elapsed() + duration;
        loop {
            if !self.ready.is_empty() || self.has_fresh() {
                self.turn()?;
                continue;
            }
            match self.next_event() {
                Some(next) if next - self.origin() <= until => {
                    self.turn()?;
                }
                _ => break,
            }
        }
        let to = self.origin() + until;
        self.context.borrow_mut().advance_to(to);
        Ok(())
    }

    /// Runs until `goal` holds (checked after every step), within `within` of
    /// virtual time from now: the liveness check of a run.
    ///
    /// # Errors
    /// [`SimError::GoalNotReached`] when `within` passed first,
    /// [`SimError::Idle`] when nothing is left to happen and `goal` does not hold,
    /// [`SimError::StepLimit`].
    pub fn run_until(
        &mut self,
        mut goal: impl FnMut(&Simulation) -> bool,
        within: Duration,
    ) -> Result<(), SimError> {
        let deadline = self.elapsed() + within;
        loop {
            if goal(self) {
                return Ok(());
            }
            let runnable = !self.ready.is_empty() || self.has_fresh();
            if !runnable
                && self
                    .next_event()
                    .is_none_or(|next| next - self.origin() > deadline)
            {
                let idle = self.next_event().is_none();
                let to = self.origin() + deadline;
                self.context.borrow_mut().advance_to(to);
                return Err(if idle {
                    SimError::Idle {
                        at: self.elapsed(),
                        waiting_for: "the goal".to_owned(),
                    }
                } else {
                    SimError::GoalNotReached {
                        within,
                        steps: self.steps,
                    }
                });
            }
            self.turn()?;
        }
    }

    /// Virtual time since the simulation was built.
    pub fn elapsed(&self) -> Duration {
        self.context.borrow().elapsed()
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The hash of the run's trace so far: every step, crash, delay and handler
    /// fault, with its virtual time and process. Two runs with one seed, plan and
    /// program have one hash.
    pub fn trace_hash(&self) -> u64 {
        self.context.borrow().trace.hash()
    }

    /// Entries in the trace so far.
    pub fn trace_len(&self) -> u64 {
        self.context.borrow().trace.len()
    }

    /// Every entry of the trace, if [`SimBuilder::keep_trace`] asked for them.
    pub fn trace(&self) -> Option<Vec<TraceEntry>> {
        self.context.borrow().trace.all().map(<[_]>::to_vec)
    }

    /// The last entries of the trace (a failure's report shows them).
    pub fn trace_tail(&self) -> Vec<TraceEntry> {
        self.context.borrow().trace.tail()
    }

    /// The faults injected so far.
    pub fn fault_counts(&self) -> FaultCounts {
        self.context.borrow().counts
    }

    /// How many times the runtime took each of its rare paths on purpose: a bounded
    /// mailbox on the edge of full, a crash right after a restart, a timer firing
    /// before its cancel, a callee held until its caller's deadline.
    pub fn buggified(&self) -> [u64; 4] {
        buggify::taken()
    }

    /// The simulated scheduler's metrics (see [`Handle::metrics`]).
    pub fn metrics(&self) -> Metrics {
        self.handle().metrics()
    }

    /// Every process (see [`Handle::processes`]).
    pub fn processes(&self) -> Vec<ProcessInfo> {
        self.handle().processes()
    }

    /// The recorded timeline, if [`SimBuilder::record`] turned the recorder on.
    pub fn recording(&self) -> Option<Recording> {
        self.handle().recording()
    }

    /// How many processes have ended so far (finished, failed or stopped): moves
    /// whenever one ends.
    fn ended_so_far(&self) -> u64 {
        let shared = self.shared();
        let totals = process_totals(shared.counters.iter().map(|c| &**c), &shared.outside_counts);
        totals.finished + totals.failed + totals.stopped
    }

    fn origin(&self) -> std::time::Instant {
        self.context.borrow().origin
    }

    fn has_fresh(&self) -> bool {
        let shared = self.shared();
        shared.lifo(0).is_occupied() || !shared.inject.is_empty() || self.worker_has_local()
    }

    fn worker_has_local(&self) -> bool {
        self.worker.as_ref().is_some_and(Worker::has_local)
    }

    /// When the next timer or scheduled event is due.
    fn next_event(&self) -> Option<std::time::Instant> {
        let timer = self.shared().timers().next_deadline();
        let scheduled = self.context.borrow().next_due();
        match (timer, scheduled) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// One turn: step a runnable process, or move time to the next event.
    fn turn(&mut self) -> Result<Turn, SimError> {
        if self.steps >= self.max_steps {
            return Err(SimError::StepLimit {
                steps: self.steps,
                at: self.elapsed(),
            });
        }
        let worker = self.worker.as_mut().expect("present until dropped");
        worker.take_runnable(&mut self.fresh);
        if !self.fresh.is_empty() {
            let mut context = self.context.borrow_mut();
            let on = context.faults_on();
            let holds = buggify::any_hold();
            for task in self.fresh.drain(..) {
                // A buggify point asked for it to wait (see `buggify::hold_until`).
                if let Some(until) = holds.then(|| buggify::take_hold(task.pid())).flatten() {
                    if until > context.now {
                        let delay = until - context.now;
                        context.counts.delayed += 1;
                        context.note(task.pid(), TraceEvent::Delay(delay));
                        context.schedule(delay, Due::Release(task));
                        continue;
                    }
                }
                let p = if on { context.faults.delay } else { 0.0 };
                if context.chance(p) {
                    let max = context.faults.max_delay;
                    let delay = context.duration_in(Duration::ZERO, max);
                    context.counts.delayed += 1;
                    context.note(task.pid(), TraceEvent::Delay(delay));
                    context.schedule(delay, Due::Release(task));
                } else {
                    self.ready.push(task);
                }
            }
        }
        if !self.ready.is_empty() {
            let (task, crash) = {
                let mut context = self.context.borrow_mut();
                let index = context.below(self.ready.len());
                let task = self.ready.swap_remove(index);
                let pid = task.pid();
                let p = if context.faults_on() {
                    context.faults.crash
                } else {
                    0.0
                };
                let crash = !self.protected.contains(&pid) && context.chance(p);
                if crash {
                    context.counts.crashed += 1;
                    context.note(pid, TraceEvent::Crash);
                }
                context.note(pid, TraceEvent::Step);
                (task, crash)
            };
            if crash {
                let _ = self.handle().kill(task.pid());
            }
            self.steps += 1;
            self.worker.as_mut().expect("present").step(task);
            return Ok(Turn::Stepped);
        }
        let Some(next) = self.next_event() else {
            return Ok(Turn::Idle);
        };
        self.context.borrow_mut().advance_to(next);
        self.heal_if_due();
        // Timers or the simulation's own events, one kind a turn, the seed choosing
        // which when both are due: a process made runnable by one may step before
        // the other fires (a reply at its call's deadline beats the timeout, or not).
        let timers_first = self.context.borrow_mut().chance(0.5);
        let fired = timers_first && self.shared().timers().fire_due() > 0;
        if !fired && !self.deliver_due() {
            self.shared().timers().fire_due();
        }
        Ok(Turn::Advanced)
    }

    /// Delivers every scheduled event due by now; whether there was one.
    fn deliver_due(&mut self) -> bool {
        let mut delivered = false;
        loop {
            // Taken out before delivering: a delivery may run code that reaches the
            // context (a completion dropped into an ended process, its drops).
            let Some(scheduled) = self.context.borrow_mut().pop_due() else {
                return delivered;
            };
            delivered = true;
            match scheduled.due {
                Due::Complete { completer, result } => completer.deliver(result),
                Due::Duplicate(completer) => {
                    let command = completer.command_name();
                    completer.deliver(Err(crate::sim::context::injected(command, false)));
                }
                Due::Release(task) => self.ready.push(task),
            }
        }
    }

    /// Turns buggify points off once a liveness run's faulty phase is over.
    fn heal_if_due(&mut self) {
        if !self.healed && !self.context.borrow().faults_on() {
            self.healed = true;
            buggify::set_probability(0.0);
        }
    }

    /// Cancels every process and runs until they have ended; kills what a bounded
    /// number of steps did not end.
    fn wind_down(&mut self) {
        let shared = self.shared();
        shared.stop_accepting();
        shared.cancel_all();
        self.context.borrow_mut().faults = Faults::none();
        buggify::set_probability(0.0);
        self.max_steps = self.steps + WIND_DOWN_STEPS;
        let mut killed = false;
        loop {
            if self.shared().live() == 0 {
                break;
            }
            match self.turn() {
                Ok(Turn::Idle) | Err(_) if killed => break,
                Ok(Turn::Idle) | Err(_) => {
                    for info in self.handle().processes() {
                        let _ = self.handle().kill(info.pid);
                    }
                    killed = true;
                    self.max_steps = self.steps + WIND_DOWN_STEPS;
                }
                Ok(_) => {}
            }
        }
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        self.wind_down();
        // Answers never given: the processes that waited for them have ended.
        let (hung, scheduled) = {
            let mut context = self.context.borrow_mut();
            (std::mem::take(&mut context.hung), context.take_scheduled())
        };
        drop(hung);
        drop(scheduled);
        drop(std::mem::take(&mut self.ready));
        if let Some(worker) = self.worker.take() {
            worker.leave();
        }
        random::leave();
        buggify::leave();
        // Not a worker any more: the scheduler's shutdown stops what is left.
        drop(self.scheduler.take());
        Context::leave();
    }
}

impl fmt::Debug for Simulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulation")
            .field("seed", &self.seed)
            .field("elapsed", &self.elapsed())
            .field("steps", &self.steps)
            .field("trace_hash", &format_args!("{:016x}", self.trace_hash()))
            .finish_non_exhaustive()
    }
}

/// Why a [`Simulation`] could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum SimBuildError {
    /// These commands have the application's handler and no simulated one: give
    /// each a [`SimHandler`] (or [`keep`](SimBuilder::keep) a deterministic
    /// handler that runs on the worker), so that no real I/O happens in a
    /// simulation.
    Unsimulated(Vec<&'static str>),
    /// A fault plan or simulated handler is invalid (the message says how).
    Invalid(String),
    /// Another simulation runs on this thread: drop it first.
    AlreadyRunning,
    /// The scheduler could not be built.
    Build(BuildError),
}

impl fmt::Display for SimBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsimulated(commands) => write!(
                f,
                "no simulated handler for {}: a simulation does no real I/O, so every command \
                 the application handles needs a `SimHandler` (`SimBuilder::handler`), or \
                 `SimBuilder::keep` for a deterministic handler that runs on the worker",
                commands
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::Invalid(message) => write!(f, "invalid simulation: {message}"),
            Self::AlreadyRunning => write!(
                f,
                "another simulation runs on this thread: a thread runs one at a time (drop \
                 the other first)"
            ),
            Self::Build(_) => write!(f, "the simulated scheduler could not be built"),
        }
    }
}

impl std::error::Error for SimBuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Build(error) => Some(error),
            _ => None,
        }
    }
}

/// Why a simulation run stopped short.
#[derive(Debug)]
#[non_exhaustive]
pub enum SimError {
    /// Nothing is left to happen (nothing runnable, no timer, no answer due), and
    /// what the run waited for did not come.
    Idle {
        /// Virtual time when it went idle.
        at: Duration,
        /// What the run waited for.
        waiting_for: String,
    },
    /// The goal of [`Simulation::run_until`] did not hold within its bound: a
    /// livelock, or a system too slow to recover.
    GoalNotReached {
        /// The bound.
        within: Duration,
        /// Steps taken by then.
        steps: u64,
    },
    /// The run took the most steps allowed ([`SimBuilder::max_steps`]).
    StepLimit {
        /// Steps taken.
        steps: u64,
        /// Virtual time when it stopped.
        at: Duration,
    },
    /// The process ended, but its result cannot be had.
    Join(JoinError),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Idle { at, waiting_for } => write!(
                f,
                "the simulation went idle at {at:?} of virtual time while waiting for \
                 {waiting_for}: nothing was runnable and nothing was due (a process waits \
                 for a message nobody sends, or an answer that hangs)"
            ),
            Self::GoalNotReached { within, steps } => write!(
                f,
                "the goal did not hold within {within:?} of virtual time ({steps} steps): a \
                 livelock, or recovery slower than the bound"
            ),
            Self::StepLimit { steps, at } => write!(
                f,
                "the run took {steps} steps (the limit) by {at:?} of virtual time: a process \
                 that never stops, or raise `SimBuilder::max_steps`"
            ),
            Self::Join(_) => write!(f, "the process's result cannot be had"),
        }
    }
}

impl std::error::Error for SimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Join(error) => Some(error),
            _ => None,
        }
    }
}
