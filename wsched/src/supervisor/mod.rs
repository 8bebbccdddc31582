//! Supervisors: processes that start other processes, watch them, restart them by
//! rule, and stop them in order — written with the crate's own links, monitors,
//! cancels and kills, as any user process could be.
//!
//! A [`Supervisor`] is built from [`ChildSpec`]s and spawned like any process, on
//! entry [`Supervisor::ENTRY`] with no input (from a [`Handle`], a
//! [`Context`], `this::spawn`, or as a child of another supervisor:
//! [`ChildSpec::supervisor`]).
//!
//! # Rules
//!
//! * **Start.** The supervisor traps exits and, in its first step, starts its
//!   children in the order they were added, each spawned detached and linked to it
//!   ([`Context::spawn_linked_with`], with the spec's
//!   [spawn options](ChildSpec::spawn_options)) from a fresh value its spec's factory
//!   builds. If a child cannot start (an unknown entry, arguments its `init`
//!   refuses, a panic), the supervisor says so at once — the child's
//!   [`ChildInfo::start_error`] and the supervisor's
//!   [`error`](SupervisorHandle::error) — then stops the children started so far and
//!   fails with [`SupervisorError::StartFailed`]. (Spawned by its typed name, a
//!   child's arguments are checked at compile time instead: see
//!   [`Entry`](crate::Entry).)
//! * **A child ends.** Its link tells the supervisor ([`Exit`](crate::Exit)). Its
//!   [`Restart`] kind decides whether it is restarted: `Permanent` always,
//!   `Transient` unless it finished normally or passed a cancellation on, `Temporary`
//!   never (it is then removed). The [`Strategy`] decides which children restart
//!   with it: itself (`OneForOne`), all (`OneForAll`), or itself and those started
//!   after it (`RestForOne`); the others in the group are first stopped in reverse
//!   start order, then the group started again in start order. Each start builds a
//!   fresh process with the factory.
//! * **Intensity.** At most [`Intensity::max`] restarts within any
//!   [`Intensity::period`] (a group restart counts once; a restart whose spawn fails
//!   counts again). The restart that would exceed it is not made: the supervisor
//!   stops all its children in order and fails with [`SupervisorError::Intensity`],
//!   naming the child and the count. Its own supervisor sees that failure as a child
//!   ending, and applies its own rules: failures climb the tree until a level copes,
//!   or the root fails.
//! * **Ordered shutdown.** When the supervisor is cancelled (by
//!   [`Handle::cancel`](crate::Handle::cancel), its own supervisor, or the
//!   scheduler's shutdown) or gives up, it stops its running children one at a time
//!   in reverse start order. Each is unlinked, monitored and cancelled, then given
//!   its [`shutdown timeout`](ChildSpec::shutdown) to end; one still running then is
//!   killed ([`Context::kill`]: stopped without another step,
//!   reason [`ExitReason::Killed`]). The next child is
//!   stopped only once the previous one has ended. A zero timeout kills at once;
//!   [`Duration::MAX`] waits as long as it takes (the default for supervisors). A
//!   cancelled supervisor then ends with [`ExitReason::Cancelled`].
//!   A cancel wins over the other events of the same step: a supervisor being shut
//!   down does not restart the children whose ends it sees meanwhile. Once the
//!   scheduler is shutting down, restarts fail and the supervisor shuts down instead.
//! * **Other links.** An `Exit` with a failure from a linked process that is not a
//!   child (whoever spawned the supervisor linked to it, say) makes the supervisor
//!   stop its children in order and fail with [`SupervisorError::LinkedExit`]: what
//!   the link would do to a process that does not trap exits, done in order. Normal
//!   ends of such processes are ignored, as is any other message.
//! * **Queries.** A [`SupervisorHandle`] ([`Supervisor::handle`], taken before
//!   spawning) reads its children, their PIDs and restart counts from any thread; a
//!   process may instead send it [`WhichChildren`] and receive [`Children`]. A
//!   subtree's handle comes from its parent's ([`SupervisorHandle::supervisor`]).
//! * **Dynamic supervision.** A running supervisor takes calls that change its
//!   children: [`StartChild`] adds one and starts it, [`TerminateChild`] stops one
//!   (in order, with its timeout, as at shutdown) and keeps its spec,
//!   [`RestartChild`] starts a stopped one again, [`DeleteChild`] removes a stopped
//!   one's spec; each is answered with a `Result<_, ChildError>`. A process makes
//!   them with `call!`, a thread through the [`SupervisorHandle`] methods of the same
//!   names. They are served in order, between the supervisor's own restarts, never
//!   during one; refused once it shuts down. A terminated child stays stopped
//!   through group restarts, until restarted or deleted.
//!
//! # Pools
//!
//! [`Supervisor::pool`] builds a supervisor of identical workers from one template
//! that hands jobs to whichever is idle, and that [`Resize`] grows and shrinks
//! while it runs (Erlang's `simple_one_for_one` with the job queue added). Workers
//! pull: each asks for its next job with a [`NextJob`] call, and is idle while it
//! waits; a job ([`Submit`]) goes to the worker idle longest, or waits in the
//! pool's queue. Shrinking retires workers between jobs — idle ones at once, busy
//! ones when they next ask, answered [`Next::Retire`] — so resizing loses no job. A
//! worker that fails holding a job loses that one, and is restarted by its spec.
//!
//! ```
//! use std::time::Duration;
//! use wsched::prelude::*;
//! use wsched::supervisor::{ChildSpec, Next, NextJob, Supervisor};
//! use wsched::Scheduler;
//!
//! /// Squares the numbers it is handed, sending each result to `results`.
//! struct Squarer {
//!     pool: Pid,
//!     results: Pid,
//! }
//!
//! #[process]
//! impl Squarer {
//!     #[entry]
//!     fn run(&mut self) -> Result<(), BoxError> {
//!         loop {
//!             // The request names the job type, the answer what the call returns.
//!             let next: Next<u64> = call!(self.pool, NextJob::<u64>::new())?;
//!             match next {
//!                 Next::Job(n) => this::send(self.results, n * n)?,
//!                 Next::Retire => return Ok(()),
//!             }
//!         }
//!     }
//! }
//!
//! /// Adds up `count` numbers it receives.
//! struct Sum;
//!
//! #[process]
//! impl Sum {
//!     #[entry]
//!     fn run(&mut self, count: usize) -> Result<u64, BoxError> {
//!         let mut sum = 0;
//!         for _ in 0..count {
//!             sum += recv!(u64)?;
//!         }
//!         Ok(sum)
//!     }
//! }
//!
//! let scheduler = Scheduler::builder().workers(2).build()?;
//! let handle = scheduler.handle();
//! let sum = scheduler.spawn(Sum, "run", (100_usize,))?;
//! let pool = Supervisor::pool::<u64>("squarer", 4, move |id, pool| {
//!     ChildSpec::new(id, move || Squarer { pool, results: sum }, "run", ())
//! });
//! let view = pool.handle();
//! scheduler.spawn(pool, Supervisor::ENTRY, ())?;
//! for n in 0..50_u64 {
//!     view.submit(&handle, n)?;
//! }
//! view.resize(&handle, 8, Duration::from_secs(20))?; // more hands
//! for n in 50..100_u64 {
//!     view.submit(&handle, n)?;
//! }
//! view.resize(&handle, 2, Duration::from_secs(20))?; // fewer, losing no job
//! let total: u64 = scheduler.wait_timeout(sum, Duration::from_secs(20))?.downcast()?;
//! assert_eq!(total, (0..100_u64).map(|n| n * n).sum::<u64>());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Example: a small tree
//!
//! ```
//! use std::time::Duration;
//! use wsched::prelude::*;
//! use wsched::supervisor::{ChildSpec, Restart, Strategy, Supervisor};
//! use wsched::Scheduler;
//!
//! struct Worker;
//!
//! #[process]
//! impl Worker {
//!     /// Serves until a "crash" message makes it fail.
//!     #[entry]
//!     fn serve(&mut self) -> Result<(), BoxError> {
//!         loop {
//!             if recv!(&str)? == "crash" {
//!                 return Err("asked to crash".into());
//!             }
//!         }
//!     }
//! }
//!
//! let scheduler = Scheduler::builder().workers(2).build()?;
//! let root = Supervisor::new(Strategy::OneForOne)
//!     .intensity(3, Duration::from_secs(5))
//!     .child(ChildSpec::new("db", || Worker, "serve", ()))
//!     .child(ChildSpec::supervisor("web", || {
//!         Supervisor::new(Strategy::OneForAll)
//!             .child(ChildSpec::new("listener", || Worker, "serve", ()))
//!             .child(ChildSpec::new("cache", || Worker, "serve", ()).restart(Restart::Transient))
//!     }));
//! let view = root.handle();
//! let pid = scheduler.spawn(root, Supervisor::ENTRY, ())?;
//!
//! // Wait until both children run, then crash the database worker.
//! let db = view.wait_for(Duration::from_secs(20), |children| {
//!     children.iter().all(|c| c.pid.is_some()).then(|| children[0].pid.unwrap())
//! }).expect("started");
//! let down = scheduler.monitor(db);
//! scheduler.send(db, "crash")?;
//! down.wait_timeout(Duration::from_secs(20)).expect("it crashed");
//! let restarted = view.wait_for(Duration::from_secs(20), |children| {
//!     (children[0].restarts == 1 && children[0].pid.is_some()).then(|| children[0].pid.unwrap())
//! }).expect("restarted");
//! assert_ne!(restarted, db);
//! assert_eq!(view.restarts(), 1);
//!
//! // Shut the tree down: children stop in reverse order, the root ends cancelled.
//! let root_down = scheduler.monitor(pid);
//! scheduler.cancel(pid)?;
//! let reason = root_down.wait_timeout(Duration::from_secs(20)).expect("it stops").reason;
//! assert_eq!(reason, wsched::ExitReason::Cancelled);
//! assert_eq!(scheduler.metrics().live, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// | file | concern |
// |---|---|
// | `mod.rs` | the rules (above), `Supervisor`, its errors, `SupervisorHandle` and the published view |
// | `spec.rs` | child specs: how a child starts, its restart kind and shutdown timeout |
// | `strategy.rs` | strategies and the restart intensity |
// | `process.rs` | the supervisor as a process: starting, restarting, ordered shutdown |
// | `dynamic.rs` | children started, terminated, restarted and deleted at run time |
// | `pool.rs` | worker pools: the job queue and its requests |
//
// Layer: a user of the runtime, as any process is. It uses only the public face
// (`Context`, `Handle`, links, monitors, calls, `SpawnOptions`) and the crate's
// vocabulary (`Pid`, `Payload`, errors); nothing below it names it, except
// `Context::spawn_supervised`, the one hook that marks its children for shutdown.
//
// May use: `runtime`, `io`, `command`, `services`, `observe`, `engine`, `time`, the crate root.
mod dynamic;
mod pool;
mod process;
mod spec;
mod strategy;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::engine::context::Context;
use crate::engine::handle::Handle;
use crate::exit::ExitReason;
use crate::pid::Pid;
use crate::time::clock;
use crate::type_name::plural;

pub use dynamic::{ChildError, DeleteChild, RestartChild, StartChild, TerminateChild};
pub use pool::{Next, NextJob, Resize, Submit};
pub use spec::{ChildKind, ChildSpec, Restart};
pub use strategy::{Intensity, Strategy};

use process::{Pending, Phase};
use strategy::RestartLog;

/// A supervisor: a process that starts its children, restarts them by rule and stops
/// them in order. See the [module docs](self) for the rules and an example.
///
/// Built once, spawned once (on [`ENTRY`](Self::ENTRY), no input). As a child of
/// another supervisor, its [`ChildSpec::supervisor`] factory builds a fresh one at
/// every start.
pub struct Supervisor {
    strategy: Strategy,
    intensity: Intensity,
    children: Vec<Child>,
    clock: Box<dyn Fn() -> Instant + Send>,
    ctx: Option<Context>,
    phase: Phase,
    log: RestartLog,
    restarts: u64,
    pending: Pending,
    /// Set when the supervisor ends: `None` cancelled, `Some` failed.
    outcome: Option<Option<SupervisorError>>,
    /// Dynamic supervision requests waiting for a group restart or a termination
    /// to finish (see `dynamic.rs`).
    requests: std::collections::VecDeque<dynamic::DynamicRequest>,
    /// For a pool: its job queue and how it makes workers (see `pool.rs`).
    pool: Option<PoolState>,
    view: Arc<Shared>,
}

/// What a pool adds to a supervisor.
struct PoolState {
    name: String,
    template: Box<dyn Fn(String, Pid) -> ChildSpec + Send>,
    /// The pool's own PID, for the template (known from `init`), and the workers
    /// `init` adds.
    pid: Option<Pid>,
    initial: usize,
    /// The number the next worker's id ends with.
    next: u64,
    jobs: Box<dyn pool::Jobs>,
    /// Workers to retire when they next ask for a job.
    retiring: usize,
    /// Workers told to retire that have not ended yet.
    retired: Vec<Pid>,
}

impl PoolState {
    /// What [`SupervisorHandle::pool`] shows, given the children listed.
    fn info(&self, listed: usize) -> PoolInfo {
        let retiring = self.retired.len() + self.retiring;
        PoolInfo {
            size: listed.saturating_sub(retiring),
            queued: self.jobs.queued(),
            idle: self.jobs.idle(),
            retiring,
        }
    }

    /// The spec of the next worker: `name-N`.
    fn next_spec(&mut self) -> ChildSpec {
        let id = format!("{}-{}", self.name, self.next);
        self.next += 1;
        (self.template)(id, self.pid.expect("a pool makes workers once spawned"))
    }
}

/// A child as the supervisor keeps it.
struct Child {
    spec: ChildSpec,
    pid: Option<Pid>,
    restarts: u64,
    /// A temporary child that ended, or a deleted one: never started again, not
    /// listed.
    removed: bool,
    /// Stopped by a [`TerminateChild`] request: not started again until a
    /// [`RestartChild`] request.
    terminated: bool,
    /// Why its latest start failed (see [`ChildInfo::start_error`]).
    start_error: Option<String>,
}

impl Supervisor {
    /// The entry a supervisor is spawned on, with no input: its typed name (see
    /// [`Entry`](crate::Entry)), so `spawn(sup, Supervisor::ENTRY, ())` is checked
    /// like a `#[process]`'s spawn. `Supervisor::ENTRY.name()` is `"supervise"`.
    pub const ENTRY: crate::Entry<Supervisor, ()> = crate::Entry::new("supervise");

    /// A supervisor with `strategy`, no children yet, and the default intensity (1
    /// restart in 5 seconds).
    pub fn new(strategy: Strategy) -> Self {
        Self {
            strategy,
            intensity: Intensity::default(),
            children: Vec::new(),
            clock: Box::new(clock::now),
            ctx: None,
            phase: Phase::Starting,
            log: RestartLog::default(),
            restarts: 0,
            pending: Pending::new(),
            outcome: None,
            requests: std::collections::VecDeque::new(),
            pool: None,
            view: Arc::new(Shared::default()),
        }
    }

    /// At most `max_restarts` restarts within any `period`; one more makes the
    /// supervisor stop its children and fail (see [`Intensity`]).
    pub fn intensity(mut self, max_restarts: u32, period: Duration) -> Self {
        self.intensity = Intensity {
            max: max_restarts,
            period,
        };
        self
    }

    /// A pool of `size` identical workers handed jobs of type `J` (see the
    /// [pool rules](self#pools)): a one-for-one supervisor whose children
    /// `template` builds, given each worker's id (`name-0`, `name-1`, …) and the
    /// pool's PID, which its workers ask for jobs ([`NextJob`]). Resize it at run
    /// time with [`Resize`]; hand it jobs with [`Submit`]. It adds more children
    /// with [`StartChild`] as any supervisor, but only its template's are resized.
    pub fn pool<J: std::any::Any + Send>(
        name: impl Into<String>,
        size: usize,
        template: impl Fn(String, Pid) -> ChildSpec + Send + 'static,
    ) -> Self {
        let mut supervisor = Self::new(Strategy::OneForOne);
        supervisor.pool = Some(PoolState {
            name: name.into(),
            template: Box::new(template),
            pid: None,
            initial: size,
            next: 0,
            jobs: Box::new(pool::JobQueue::<J>::new()),
            retiring: 0,
            retired: Vec::new(),
        });
        supervisor
    }

    /// Adds a child, started after those added before it and stopped before them.
    /// Ids must be unique: a supervisor with two children of the same id refuses to
    /// start ([`SpawnError::Init`](crate::SpawnError::Init)).
    pub fn child(mut self, spec: ChildSpec) -> Self {
        self.push_child(spec);
        self
    }

    /// Adds `spec` last, not started, to the children and the published view.
    fn push_child(&mut self, spec: ChildSpec) {
        let info = ChildInfo {
            id: spec.id().to_owned(),
            pid: None,
            restarts: 0,
            restart: spec.restart_kind(),
            kind: spec.kind(),
            start_error: None,
        };
        {
            let mut view = self.view.state.lock();
            view.children.push(Some(info));
            view.nested.push(spec.nested_handle());
        }
        self.children.push(Child {
            spec,
            pid: None,
            restarts: 0,
            removed: false,
            terminated: false,
            start_error: None,
        });
    }

    /// Where the intensity window reads the time (default: the runtime's clock, as
    /// [`Context::now`](crate::Context::now) reads it, which is virtual time in a
    /// simulation): a test may pass a clock it moves by hand, to check the window
    /// without waiting.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::{Duration, Instant};
    /// use wsched::supervisor::{Strategy, Supervisor};
    ///
    /// let now = Arc::new(Mutex::new(Instant::now()));
    /// let clock = now.clone();
    /// let sup = Supervisor::new(Strategy::OneForOne).clock(move || *clock.lock().unwrap());
    /// *now.lock().unwrap() += Duration::from_secs(60); // the supervisor sees a minute pass
    /// # drop(sup);
    /// ```
    pub fn clock(mut self, clock: impl Fn() -> Instant + Send + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// A read-only view of this supervisor once it runs: its PID, its children with
    /// their PIDs and restart counts, its state. Take it before spawning.
    pub fn handle(&self) -> SupervisorHandle {
        SupervisorHandle {
            shared: self.view.clone(),
        }
    }

    /// Its strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Its restart intensity.
    pub fn restart_intensity(&self) -> Intensity {
        self.intensity
    }

    fn publish(&self, f: impl FnOnce(&mut View)) {
        f(&mut self.view.state.lock());
        self.view.changed.notify_all();
    }

    /// Publishes a pool's state.
    fn publish_pool(&self) {
        if let Some(pool) = &self.pool {
            let listed = self.children.iter().filter(|c| !c.removed).count();
            let info = pool.info(listed);
            self.publish(|view| view.pool = Some(info));
        }
    }
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervisor")
            .field("strategy", &self.strategy)
            .field("intensity", &self.intensity)
            .field(
                "children",
                &self.children.iter().map(|c| &c.spec).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Why a supervisor failed. Its `Display` text is the
/// [`ExitReason::Error`] message its own supervisor (or monitors and links) see.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SupervisorError {
    /// Restarting `child` would have exceeded the restart intensity: it would have
    /// been restart number `restarts` within `period`.
    Intensity {
        /// The id of the child whose end needed the restart.
        child: String,
        /// The restarts within the window, counting the one refused (`max + 1`).
        restarts: usize,
        /// The window.
        period: Duration,
    },
    /// A child could not be started when the supervisor started.
    StartFailed {
        /// Its id.
        child: String,
        /// Why (the spawn error's text).
        message: String,
    },
    /// A linked process that is not a child ended with a failure.
    LinkedExit {
        /// That process.
        pid: Pid,
        /// Why it ended.
        reason: ExitReason,
    },
}

impl fmt::Display for SupervisorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Intensity {
                child,
                restarts,
                period,
            } => write!(
                f,
                "supervisor gave up: child `{child}` ended, and restarting it would make {} \
                 within {period:?}, over the restart intensity",
                plural(*restarts as u64, "restart")
            ),
            Self::StartFailed { child, message } => {
                write!(f, "supervisor could not start child `{child}`: {message}")
            }
            Self::LinkedExit { pid, reason } => {
                write!(
                    f,
                    "supervisor stopped: linked process {pid} ended ({reason})"
                )
            }
        }
    }
}

impl std::error::Error for SupervisorError {}

/// One child of a running supervisor, as [`SupervisorHandle::children`] and
/// [`Children`] list it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildInfo {
    /// Its id.
    pub id: String,
    /// Its running process, `None` while it is not running (being restarted, or
    /// ended for good).
    pub pid: Option<Pid>,
    /// How many times it was started again after its first start.
    pub restarts: u64,
    /// Its restart kind.
    pub restart: Restart,
    /// Worker or supervisor.
    pub kind: ChildKind,
    /// Why its latest start failed (the spawn error's text: an unknown entry,
    /// arguments its `init` refused, a panic), from the moment it failed; `None`
    /// once a start works, and for a child never started yet.
    pub start_error: Option<String>,
}

/// Where a supervisor stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SupervisorState {
    /// Spawned (or not yet), children not started.
    #[default]
    Starting,
    /// Children started; restarting them as they end.
    Running,
    /// Stopping part of its children to restart them with a failed one.
    Restarting,
    /// Stopping its children to end.
    ShuttingDown,
    /// Ended.
    Ended,
}

/// Ask a supervisor for its children: send it this from a process, and it answers
/// with [`Children`] (to the sender; a message from outside any process gets no
/// answer — use a [`SupervisorHandle`] there).
///
/// The answer reflects every message the supervisor read before the question: a
/// child's end that reached it first has been dealt with — restarted, for a
/// one-for-one supervisor; for a group restart, the children being stopped or not
/// yet started again show no PID until the restart is complete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WhichChildren;

/// A supervisor's answer to [`WhichChildren`]: its children in start order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Children(pub Vec<ChildInfo>);

/// What the supervisor publishes for its handles.
#[derive(Default)]
struct Shared {
    state: Mutex<View>,
    changed: Condvar,
}

#[derive(Default)]
struct View {
    pid: Option<Pid>,
    /// By child index; `None` for removed children.
    children: Vec<Option<ChildInfo>>,
    /// By child index: where a child supervisor's spec puts the handle of the
    /// supervisor each start builds (`None` for workers).
    nested: Vec<Option<spec::NestedHandle>>,
    restarts: u64,
    state: SupervisorState,
    error: Option<SupervisorError>,
    pool: Option<PoolInfo>,
}

/// A pool's state (see [`SupervisorHandle::pool`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolInfo {
    /// Its size: the workers it keeps, once those told to retire have.
    pub size: usize,
    /// Jobs waiting for a worker.
    pub queued: usize,
    /// Workers waiting for a job.
    pub idle: usize,
    /// Workers told to retire (or to be told when they next ask) that have not
    /// ended yet.
    pub retiring: usize,
}

impl View {
    fn children(&self) -> Vec<ChildInfo> {
        self.children.iter().flatten().cloned().collect()
    }
}

/// A read-only view of a running [`Supervisor`] (see [`Supervisor::handle`]):
/// cheap to clone, usable from any thread. Each call reads a consistent snapshot.
#[derive(Clone)]
pub struct SupervisorHandle {
    shared: Arc<Shared>,
}

impl SupervisorHandle {
    /// The supervisor's PID, once spawned.
    pub fn pid(&self) -> Option<Pid> {
        self.shared.state.lock().pid
    }

    /// Its children in start order (temporary children that ended are gone).
    pub fn children(&self) -> Vec<ChildInfo> {
        self.shared.state.lock().children()
    }

    /// The child with `id`.
    pub fn child(&self, id: &str) -> Option<ChildInfo> {
        self.shared
            .state
            .lock()
            .children
            .iter()
            .flatten()
            .find(|c| c.id == id)
            .cloned()
    }

    /// The handle of child supervisor `id` as it runs now (each restart builds a
    /// new one): reach a subtree from its root. `None` if there is no such child, it
    /// is a worker, or it has not started yet.
    pub fn supervisor(&self, id: &str) -> Option<SupervisorHandle> {
        let view = self.shared.state.lock();
        let index = view
            .children
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.id == id))?;
        let nested = view.nested.get(index)?.as_ref()?.clone();
        drop(view);
        let handle = nested.lock().clone();
        handle
    }

    /// Adds a child to the running supervisor and starts it (see [`StartChild`]),
    /// calling it through `scheduler` from this thread; waits at most `timeout` for
    /// the answer. A process sends the same request with `call!`.
    ///
    /// # Errors
    /// As [`StartChild`] says, or [`ChildError::Unreachable`] when the supervisor is
    /// not running (or not spawned yet) or does not answer within `timeout`.
    pub fn start_child(
        &self,
        scheduler: &Handle,
        spec: ChildSpec,
        timeout: Duration,
    ) -> Result<Pid, ChildError> {
        self.request(scheduler, StartChild(spec), timeout)
    }

    /// Stops child `id` and keeps its spec (see [`TerminateChild`]); returns once it
    /// has ended.
    ///
    /// # Errors
    /// As [`start_child`](Self::start_child).
    pub fn terminate_child(
        &self,
        scheduler: &Handle,
        id: &str,
        timeout: Duration,
    ) -> Result<(), ChildError> {
        self.request(scheduler, TerminateChild(id.to_owned()), timeout)
    }

    /// Starts stopped child `id` again (see [`RestartChild`]).
    ///
    /// # Errors
    /// As [`start_child`](Self::start_child).
    pub fn restart_child(
        &self,
        scheduler: &Handle,
        id: &str,
        timeout: Duration,
    ) -> Result<Pid, ChildError> {
        self.request(scheduler, RestartChild(id.to_owned()), timeout)
    }

    /// Removes stopped child `id`'s spec (see [`DeleteChild`]).
    ///
    /// # Errors
    /// As [`start_child`](Self::start_child).
    pub fn delete_child(
        &self,
        scheduler: &Handle,
        id: &str,
        timeout: Duration,
    ) -> Result<(), ChildError> {
        self.request(scheduler, DeleteChild(id.to_owned()), timeout)
    }

    /// Resizes the pool to `size` workers (see [`Resize`]); returns the new size.
    ///
    /// # Errors
    /// [`ChildError::NotAPool`] for a supervisor that is no pool, a worker that
    /// cannot start ([`ChildError::StartFailed`]), or as
    /// [`start_child`](Self::start_child).
    pub fn resize(
        &self,
        scheduler: &Handle,
        size: usize,
        timeout: Duration,
    ) -> Result<usize, ChildError> {
        self.request(scheduler, Resize(size), timeout)
    }

    /// Hands the pool a job (see [`Submit`]).
    ///
    /// # Errors
    /// When the supervisor is not spawned, or has ended (with the job in the error).
    pub fn submit<J: std::any::Any + Send>(
        &self,
        scheduler: &Handle,
        job: J,
    ) -> Result<(), crate::SendError> {
        // Not spawned yet: no process has this PID, so the job comes back in the
        // error, as from a pool that has ended.
        let pid = self.pid().unwrap_or(Pid::from_raw(u64::MAX));
        scheduler.send(pid, Submit(job))
    }

    /// Calls the supervisor with a dynamic supervision request.
    fn request<Q: std::any::Any + Send, R: std::any::Any + Send>(
        &self,
        scheduler: &Handle,
        request: Q,
        timeout: Duration,
    ) -> Result<R, ChildError> {
        let pid = self.pid().ok_or_else(|| ChildError::Unreachable {
            message: "the supervisor has not been spawned".to_owned(),
        })?;
        scheduler
            .call::<Q, Result<R, ChildError>>(pid, request, timeout)
            .map_err(ChildError::unreachable)?
    }

    /// A pool's size, queue and idle workers (`None` for a supervisor that is no
    /// pool), as of its last step.
    pub fn pool(&self) -> Option<PoolInfo> {
        self.shared.state.lock().pool
    }

    /// Restarts made so far (what the intensity counts: a group restart once).
    pub fn restarts(&self) -> u64 {
        self.shared.state.lock().restarts
    }

    /// Where it stands.
    pub fn state(&self) -> SupervisorState {
        self.shared.state.lock().state
    }

    /// The error it fails with, from the moment it decides to: while it stops its
    /// children to end ([`SupervisorState::ShuttingDown`]) and after it has ended
    /// (its own supervisor then sees its text, as an [`ExitReason::Error`]). `None`
    /// while it runs, and when it ends otherwise (cancelled, or killed).
    pub fn error(&self) -> Option<SupervisorError> {
        self.shared.state.lock().error.clone()
    }

    /// Waits until `check` returns `Some` for the children (in start order), or
    /// `timeout` passes (`None`). `check` runs on every change the supervisor
    /// publishes, under its lock: keep it short.
    pub fn wait_for<T>(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&[ChildInfo]) -> Option<T>,
    ) -> Option<T> {
        let deadline = clock::now().checked_add(timeout);
        let mut view = self.shared.state.lock();
        loop {
            if let Some(found) = check(&view.children()) {
                return Some(found);
            }
            refuse_to_block_a_simulation("SupervisorHandle::wait_for", timeout);
            match deadline {
                Some(deadline) => {
                    if self
                        .shared
                        .changed
                        .wait_until(&mut view, deadline)
                        .timed_out()
                    {
                        return check(&view.children());
                    }
                }
                None => self.shared.changed.wait(&mut view),
            }
        }
    }

    /// Waits until the supervisor is in `state`, or `timeout` passes; whether it is.
    pub fn wait_state(&self, state: SupervisorState, timeout: Duration) -> bool {
        let deadline = clock::now().checked_add(timeout);
        let mut view = self.shared.state.lock();
        while view.state != state {
            refuse_to_block_a_simulation("SupervisorHandle::wait_state", timeout);
            if timeout.is_zero() {
                return false;
            }
            match deadline {
                Some(deadline) => {
                    if self
                        .shared
                        .changed
                        .wait_until(&mut view, deadline)
                        .timed_out()
                    {
                        return view.state == state;
                    }
                }
                None => self.shared.changed.wait(&mut view),
            }
        }
        true
    }
}

impl fmt::Debug for SupervisorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let view = self.shared.state.lock();
        f.debug_struct("SupervisorHandle")
            .field("pid", &view.pid)
            .field("state", &view.state)
            .field("restarts", &view.restarts)
            .field("error", &view.error)
            .field("children", &view.children())
            .finish()
    }
}

/// Panics, saying what to do instead, when `what` would wait on the thread that
/// runs a simulation: nothing would run while it blocked.
fn refuse_to_block_a_simulation(what: &str, timeout: Duration) {
    assert!(
        timeout.is_zero() || !clock::on_simulation_thread(),
        "wsched: {what} was called with a timeout on the thread that runs a simulation, \
         where nothing runs while it blocks; run the simulation (`Simulation::run_until`) \
         until the supervisor gets there, then look with a zero timeout"
    );
}
