//! Step-by-step testing of processes, without threads or a scheduler.
//!
//! A process only changes when it is stepped, so a test can play the scheduler: start
//! it, look at the commands it yielded, complete them (by tag, in any order), send it
//! messages, cancel it, and check its status and result. [`TestProcess`] does that for
//! any process, made by [`#[process]`](crate::process) or written by hand. Everything
//! is deterministic: the same calls give the same tags, yields and results.
//!
//! The [`Context`] the process gets records what it does to the world: messages it
//! sends ([`TestProcess::take_sent`]), processes it spawns
//! ([`TestProcess::take_spawned`], which can be driven in turn with
//! [`TestProcess::from_spawned`]) and timed messages it arms
//! ([`TestProcess::take_timed`]). Sends always succeed; spawned processes are
//! initialised (so a bad entry name or bad arguments fail the spawn as on the
//! scheduler) but run only when a test steps them. PIDs are handed out from `<1>`, the
//! process under test, in spawn order.
//!
//! Timed messages never fire by themselves: a test fires one with
//! [`TimedSent::fire`] (which also tells whether the process cancelled it) and hands
//! the message to the process like any other — on the scheduler, a timed message
//! arriving is an ordinary message. Names work as on the scheduler, in a table that
//! the process under test and the processes it spawns share: a process registers,
//! looks up and sends to names through its context, a test registers the names of
//! processes it plays ([`TestProcess::register`]) and checks what is registered
//! ([`TestProcess::whereis`]), and a process's names are freed when it ends.
//!
//! Monitors are recorded, not run: [`TestProcess::take_monitors`] gives the monitors
//! the process set, and a test plays the target's end by sending the process the
//! [`Down`] that [`Monitored::down`] builds — on the scheduler a `Down` is an ordinary
//! message too. [`TestProcess::is_monitoring`] tells whether the process demonitored.
//!
//! Links are recorded too ([`TestProcess::links`], [`TestProcess::traps_exits`]); a
//! test plays the end of a linked process with [`TestProcess::linked_exit`], which
//! delivers an [`Exit`] message to a process that traps exits and stops one that does
//! not, as the scheduler would.
//!
//! Calls are played step by step too: a process that calls (`call!`, or a
//! [`Call`] yield) waits on a yield that nothing handles;
//! [`TestProcess::take_call`] gives the request, and the test completes the yield with
//! the answer it chooses — a reply, the callee's death, a reply dropped unanswered, a
//! timeout, an unknown callee — built by [`CallMade`]. A callee under test gets a
//! [`Request`] made by [`request`], whose [`ReplyProbe`] tells what it replied.
//!
//! Kills are recorded ([`TestProcess::take_kills`]), and
//! [`TestProcess::play_end`] plays the end of any process as the scheduler would
//! signal it to the process under test — through its link and its monitors — which
//! is what testing a [`Supervisor`](crate::supervisor::Supervisor) step by step
//! needs (see there for an example).
//!
//! Panics inside the process are caught and reported as
//! [`ProcessError::Panicked`]; a step that fails ends the process as on the scheduler,
//! which also calls [`Process::close`] exactly once when the process ends.
//!
//! ```
//! use std::time::Duration;
//! use wsched::prelude::*;
//! use wsched::testing::TestProcess;
//!
//! struct Fetch(String);
//! impl Command for Fetch {
//!     type Output = String;
//! }
//!
//! struct Crawler {
//!     pages: Vec<String>,
//! }
//!
//! #[process]
//! impl Crawler {
//!     #[entry]
//!     fn crawl(&mut self, urls: Vec<String>) -> Result<usize, BoxError> {
//!         for url in urls {
//!             let page = yield_cmd!(Fetch(url))?;
//!             self.pages.push(page);
//!             yield_cmd!(Sleep(Duration::from_millis(10)))?;
//!         }
//!         Ok(self.pages.len())
//!     }
//! }
//!
//! let mut t = TestProcess::start(Crawler { pages: vec![] }, "crawl", (vec!["/a".to_string()],))
//!     .unwrap();
//! let (tag, fetch) = t.expect_yield::<Fetch>();
//! assert_eq!((tag, fetch.0.as_str()), (Tag(1), "/a"));
//! t.complete(tag, "page a".to_string());
//! let (tag, _) = t.expect_yield::<Sleep>();
//! t.complete(tag, ());
//! assert_eq!(t.result::<usize>(), 1);
//! ```

// May use: `runtime`, `io`, `command`, `services`, `observe`, `engine`, `time`, the crate root.

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::command::{Command, Spawn, TimerRef};
use crate::engine::cell::NewProcess;
use crate::engine::context::{Backend, Context};
use crate::engine::process::{
    init_process, panic_message, Completion, Event, Events, IntoProcess, Message, Process, Status,
    StepOutput, SuspendPoint, Tag, Yield,
};
use crate::entry::EntryRef;
use crate::error::{
    CancelError, InitError, Phase, ProcessError, RegisterError, SendError, SendErrorKind,
    SendNamedError, SendNamedErrorKind, SpawnError, StepError, TimedSendError, YieldError,
};
use crate::exit::ExitReason;
use crate::payload::{IntoPayloads, OutputType, Payload};
use crate::pid::Pid;
use crate::runtime::{Down, Exit, MonitorRef};
use crate::time::timed_ref::{Repeat, TimedState};
use crate::type_name::{Short, WithArticle};
// Calls (see the calls block below).
use crate::command::{Call, CallAnswer};
use crate::runtime::Request;
use crate::services::calls::{self, Answer, CallSlot};

// Kills, and playing the ends of linked and monitored processes (supervision).
mod ends;

/// A completion event for `tag` carrying `output` (build events for
/// [`TestProcess::step_with`]).
pub fn completion<T: Any + Send>(tag: Tag, output: T) -> Event {
    Event::Completion(Completion {
        tag,
        result: Ok(Payload::new(output)),
    })
}

/// A failed completion event for `tag`.
pub fn failure(tag: Tag, error: YieldError) -> Event {
    Event::Completion(Completion {
        tag,
        result: Err(error),
    })
}

/// A message event from `from` (`None`: from outside any process).
pub fn message<T: Any + Send>(from: Option<Pid>, value: T) -> Event {
    Event::Message(Message {
        from,
        payload: Payload::new(value),
    })
}

/// A message a process sent through its [`Context`].
#[derive(Debug)]
pub struct Sent {
    /// The sender (the process's PID).
    pub from: Option<Pid>,
    /// The recipient.
    pub to: Pid,
    /// The message.
    pub payload: Payload,
}

/// A timed message a process armed through its [`Context`] (`send_after`,
/// `send_interval`). Nothing fires it but [`fire`](Self::fire).
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// struct Reminder;
///
/// #[process]
/// impl Reminder {
///     /// Asks to be reminded in a minute; finishes with the reminder, or early on
///     /// "never mind", cancelling it.
///     #[entry]
///     fn run(&mut self) -> Result<String, BoxError> {
///         let reminder = this::send_after(this::pid(), "remember!", Duration::from_secs(60))?;
///         let said = recv!(&str)?;
///         if said == "never mind" {
///             reminder.cancel();
///         }
///         Ok(said.to_owned())
///     }
/// }
///
/// let mut t = TestProcess::start(Reminder, "run", ()).unwrap();
/// let mut reminder = t.take_timed().remove(0);
/// assert_eq!((reminder.to, reminder.delay), (t.pid(), Duration::from_secs(60)));
/// let message = reminder.fire().expect("armed");
/// t.send_from(reminder.from, message);
/// assert_eq!(t.result::<String>(), "remember!");
///
/// let mut t = TestProcess::start(Reminder, "run", ()).unwrap();
/// let mut reminder = t.take_timed().remove(0);
/// t.send("never mind");
/// assert!(reminder.is_cancelled());
/// assert!(reminder.fire().is_none(), "a cancelled timer sends nothing");
/// ```
pub struct TimedSent {
    /// The process that armed it.
    pub from: Option<Pid>,
    /// The process it sends to.
    pub to: Pid,
    /// How long after it was armed its (first) message falls due.
    pub delay: Duration,
    /// An interval's period (the delay between its messages); `None` for a
    /// `send_after`.
    pub period: Option<Duration>,
    repeat: Repeat,
    state: Arc<TimedState>,
}

impl TimedSent {
    /// The message the timer sends when it falls due, as on the scheduler: a
    /// `send_after`'s message once, a fresh clone of an interval's message each time.
    /// `None` once the process cancelled the timer, or a `send_after` was fired
    /// already (its [`TimerRef::cancel`] then returns `false`, as after a real
    /// firing). Hand the message to its target with
    /// [`TestProcess::send_from`]`(self.from, message)`.
    pub fn fire(&mut self) -> Option<Payload> {
        self.state.fire_by_hand(&mut self.repeat)
    }

    /// Whether the process cancelled it through its [`TimerRef`].
    pub fn is_cancelled(&self) -> bool {
        self.state.is_cancelled()
    }

    /// The type name of the message it sends.
    pub fn message_type(&self) -> &'static str {
        match &self.repeat {
            Repeat::Once(message) | Repeat::Every { message, .. } => message.type_name(),
        }
    }
}

impl fmt::Debug for TimedSent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedSent")
            .field("from", &self.from)
            .field("to", &self.to)
            .field("delay", &self.delay)
            .field("period", &self.period)
            .field("message_type", &self.message_type())
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// A monitor a process set through its [`Context`] (`monitor`). Nothing fires it: a
/// test plays the target's end by sending the watcher [`down`](Self::down).
///
/// ```
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// /// Restarts nothing, but counts how its worker ended.
/// struct Overseer;
///
/// #[process]
/// impl Overseer {
///     #[entry]
///     fn oversee(&mut self, worker: Pid) -> Result<bool, BoxError> {
///         this::monitor(worker);
///         let down = recv!(Down)?;
///         Ok(down.reason.is_normal())
///     }
/// }
///
/// let worker = Pid::from_raw(7);
/// let mut t = TestProcess::start(Overseer, "oversee", (worker,)).unwrap();
/// let monitored = t.take_monitors().remove(0);
/// assert_eq!((monitored.watcher, monitored.target), (t.pid(), worker));
/// assert!(t.is_monitoring(monitored.monitor));
/// let down = monitored.down(ExitReason::Panicked { phase: wsched::Phase::Step, message: "boom".into() });
/// t.send_from(Some(worker), down);
/// assert!(!t.result::<bool>());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Monitored {
    /// The process that set the monitor.
    pub watcher: Pid,
    /// The process it watches.
    pub target: Pid,
    /// The reference `monitor` returned.
    pub monitor: MonitorRef,
}

impl Monitored {
    /// The `Down` the watcher would get if the target ended with `reason` (send it
    /// with [`TestProcess::send_from`], from the target).
    pub fn down(&self, reason: ExitReason) -> Down {
        Down {
            pid: self.target,
            reason,
            monitor: self.monitor,
        }
    }
}

/// A process spawned through a [`Context`]: already initialised, not stepped yet.
/// Drive it with [`TestProcess::from_spawned`].
pub struct Spawned {
    /// The PID it was given.
    pub pid: Pid,
    /// The spawning process.
    pub parent: Option<Pid>,
    /// The entry it runs.
    pub method: String,
    /// Whether it was spawned detached (its result would be discarded).
    pub detached: bool,
    process: Option<Box<dyn Process>>,
    recorder: Arc<Recorder>,
}

impl Drop for Spawned {
    /// A spawned process that no test takes over is closed, as the scheduler would.
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
        }
    }
}

/// What the recorder keeps of a spawn (no `Arc` to itself, so no cycle).
struct SpawnRecord {
    pid: Pid,
    parent: Option<Pid>,
    method: String,
    detached: bool,
    process: Box<dyn Process>,
}

impl fmt::Debug for Spawned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawned")
            .field("pid", &self.pid)
            .field("parent", &self.parent)
            .field("method", &self.method)
            .field("detached", &self.detached)
            .finish_non_exhaustive()
    }
}

/// The [`Backend`] of the harness's contexts: records instead of running.
struct Recorder {
    this: Weak<Recorder>,
    next_pid: AtomicU64,
    sent: Mutex<Vec<Sent>>,
    spawned: Mutex<Vec<SpawnRecord>>,
    /// Cancel requests made through a context: (by, target).
    cancels: Mutex<Vec<(Pid, Pid)>>,
    /// Kills made through a context: (by, target).
    kills: Mutex<Vec<(Pid, Pid)>>,
    timed: Mutex<Vec<TimedSent>>,
    next_monitor: AtomicU64,
    monitors: Mutex<Vec<Monitored>>,
    /// Monitors set and not demonitored, with their watchers.
    active_monitors: Mutex<HashMap<MonitorRef, Pid>>,
    /// Links, each as (smaller PID, larger PID).
    links: Mutex<HashSet<(Pid, Pid)>>,
    /// The processes that trap exits.
    trapping: Mutex<HashSet<Pid>>,
    /// The family's names, and the processes of the family that ended (which can
    /// hold none).
    names: Mutex<HashMap<String, Pid>>,
    ended: Mutex<HashSet<Pid>>,
}

impl Recorder {
    fn new() -> Arc<Self> {
        Arc::new_cyclic(|this| Self {
            this: this.clone(),
            next_pid: AtomicU64::new(1),
            sent: Mutex::new(Vec::new()),
            spawned: Mutex::new(Vec::new()),
            cancels: Mutex::new(Vec::new()),
            kills: Mutex::new(Vec::new()),
            timed: Mutex::new(Vec::new()),
            next_monitor: AtomicU64::new(1),
            monitors: Mutex::new(Vec::new()),
            active_monitors: Mutex::new(HashMap::new()),
            links: Mutex::new(HashSet::new()),
            trapping: Mutex::new(HashSet::new()),
            names: Mutex::new(HashMap::new()),
            ended: Mutex::new(HashSet::new()),
        })
    }

    fn next_pid(&self) -> Pid {
        Pid::from_raw(self.next_pid.fetch_add(1, Ordering::Relaxed))
    }

    fn arc(&self) -> Arc<Recorder> {
        self.this
            .upgrade()
            .expect("a context outlives its recorder only if leaked")
    }

    fn context(&self, pid: Pid) -> Context {
        Context::new(pid, self.arc())
    }

    /// `pid` ended: it can no longer hold names. (Its links stay until a test plays
    /// the signal with `linked_exit`.)
    fn end(&self, pid: Pid) {
        self.ended.lock().insert(pid);
        self.names.lock().retain(|_, holder| *holder != pid);
    }
}

impl Backend for Recorder {
    fn spawn(&self, parent: Option<Pid>, mut process: NewProcess) -> Result<Pid, SpawnError> {
        let pid = self.next_pid();
        let method = process.entry().to_owned();
        let input = process.take_input();
        init_process(&mut process, self.context(pid), &method, input)?;
        if process.links_to_parent() {
            let parent = parent.expect("only a process spawns linked");
            self.links.lock().insert(link_key(parent, pid));
        }
        self.spawned.lock().push(SpawnRecord {
            pid,
            parent,
            method,
            detached: process.is_detached(),
            process: Box::new(process),
        });
        Ok(pid)
    }

    fn send(&self, from: Option<Pid>, to: Pid, payload: Payload) -> Result<(), SendError> {
        self.sent.lock().push(Sent { from, to, payload });
        Ok(())
    }

    fn cancel(&self, from: Option<Pid>, pid: Pid) -> Result<(), CancelError> {
        let by = from.expect("contexts always carry their process's PID");
        self.cancels.lock().push((by, pid));
        Ok(())
    }

    fn kill(&self, from: Option<Pid>, pid: Pid) -> Result<(), CancelError> {
        let by = from.expect("contexts always carry their process's PID");
        self.kills.lock().push((by, pid));
        Ok(())
    }

    /// As on the scheduler, except that every PID the family did not see end counts
    /// as live (a test may register PIDs of processes it only plays).
    fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        if self.ended.lock().contains(&pid) {
            return Err(RegisterError::NotAlive {
                name: name.to_owned(),
                pid,
                kind: SendErrorKind::Finished,
            });
        }
        let mut names = self.names.lock();
        match names.get(name) {
            Some(&holder) if holder != pid => Err(RegisterError::Taken {
                name: name.to_owned(),
                holder,
            }),
            _ => {
                names.insert(name.to_owned(), pid);
                Ok(())
            }
        }
    }

    fn unregister(&self, name: &str) -> Option<Pid> {
        self.names.lock().remove(name)
    }

    fn whereis(&self, name: &str) -> Option<Pid> {
        self.names.lock().get(name).copied()
    }

    fn send_named(
        &self,
        from: Option<Pid>,
        name: &str,
        payload: Payload,
    ) -> Result<(), SendNamedError> {
        match self.whereis(name) {
            Some(to) => self.send(from, to, payload).map_err(|error| {
                SendNamedError::new(
                    name,
                    SendNamedErrorKind::HolderFinished(to),
                    error.into_payload(),
                )
            }),
            None => Err(SendNamedError::new(
                name,
                SendNamedErrorKind::NotRegistered,
                payload,
            )),
        }
    }

    fn send_timed(
        &self,
        from: Option<Pid>,
        to: Pid,
        delay: Duration,
        repeat: Repeat,
    ) -> Result<TimerRef, TimedSendError> {
        let state = TimedState::new();
        self.timed.lock().push(TimedSent {
            from,
            to,
            delay,
            period: repeat.period(),
            repeat,
            state: state.clone(),
        });
        Ok(TimerRef::recorded(state))
    }

    fn monitor(&self, watcher: Pid, target: Pid) -> MonitorRef {
        let id = self.next_monitor.fetch_add(1, Ordering::Relaxed);
        let monitor = MonitorRef::new(id, target);
        self.monitors.lock().push(Monitored {
            watcher,
            target,
            monitor,
        });
        self.active_monitors.lock().insert(monitor, watcher);
        monitor
    }

    fn demonitor(&self, monitor: MonitorRef) -> bool {
        self.active_monitors.lock().remove(&monitor).is_some()
    }

    fn link(&self, me: Pid, other: Pid) {
        if me != other {
            self.links.lock().insert(link_key(me, other));
        }
    }

    fn unlink(&self, me: Pid, other: Pid) {
        self.links.lock().remove(&link_key(me, other));
    }

    fn trap_exits(&self, me: Pid, on: bool) {
        let mut trapping = self.trapping.lock();
        if on {
            trapping.insert(me);
        } else {
            trapping.remove(&me);
        }
    }
}

/// A link as the recorder keeps it: the same both ways.
fn link_key(a: Pid, b: Pid) -> (Pid, Pid) {
    (a.min(b), a.max(b))
}

/// A yield whose command the test took out ([`TestProcess::take_yield`]): what
/// completing it is checked against.
struct Taken {
    tag: Tag,
    command: &'static str,
    output: Option<OutputType>,
}

/// Where a [`TestProcess`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestStatus {
    /// Initialised, never stepped.
    NotStepped,
    /// Suspended until a completion of an outstanding yield arrives.
    WaitingForYields,
    /// Suspended until a message arrives.
    WaitingForMessage,
    /// Asked to be stepped again at once ([`Status::Continue`]).
    Continue,
    /// Finished with a result ([`TestProcess::result`]).
    Done,
    /// Ended with an error, or a panic ([`TestProcess::error`]).
    Failed,
}

impl fmt::Display for TestStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotStepped => "not stepped yet",
            Self::WaitingForYields => "waiting for yields",
            Self::WaitingForMessage => "waiting for a message",
            Self::Continue => "runnable (continue)",
            Self::Done => "done",
            Self::Failed => "failed",
        })
    }
}

/// A process driven step by step by a test. See the [module docs](self).
///
/// # Example
///
/// ```
/// use wsched::prelude::*;
/// use wsched::testing::{TestProcess, TestStatus};
///
/// struct Charge(u64);
/// impl Command for Charge {
///     type Output = bool;
/// }
///
/// struct Till;
///
/// #[process]
/// impl Till {
///     #[entry]
///     fn sell(&mut self, cents: u64) -> Result<&'static str, BoxError> {
///         let note = recv!(&'static str)?;
///         Ok(if yield_cmd!(Charge(cents))? { note } else { "declined" })
///     }
/// }
///
/// let mut t = TestProcess::start(Till, "sell", (250_u64,)).unwrap();
/// assert_eq!(t.status(), TestStatus::WaitingForMessage);
/// t.send("thanks");
/// let (tag, charge) = t.expect_yield::<Charge>();
/// assert_eq!(charge.0, 250);
/// t.complete(tag, true);
/// assert_eq!(t.result::<&str>(), "thanks");
/// ```
///
/// Methods that step (`step`, `step_with`, `complete`, `fail`, `send`, `send_from`,
/// `cancel`) panic if the process has already ended; the others never step.
pub struct TestProcess {
    process: Box<dyn Process>,
    pid: Pid,
    entry: String,
    recorder: Arc<Recorder>,
    events: Vec<Event>,
    out: StepOutput,
    /// Yields not completed yet, in tag order.
    outstanding: Vec<Yield>,
    /// Yields whose command a test took out with `take_yield`, not completed yet.
    taken: Vec<Taken>,
    last_yields: Vec<Tag>,
    withdrawn: Vec<Tag>,
    status: TestStatus,
    result: Option<Payload>,
    result_taken: bool,
    error: Option<ProcessError>,
    suspend_point: Option<SuspendPoint>,
    steps: usize,
    closed: bool,
}

impl TestProcess {
    /// Initialises `process` as PID `<1>` to run entry `method` with `input`, and runs its
    /// first step (with no events), as the scheduler does after spawning it. `method`
    /// is the entry's typed name (`Worker::RUN`, whose arguments the compiler checks:
    /// see [`Entry`](crate::Entry)) or its name (`"run"`).
    ///
    /// # Errors
    /// The [`InitError`] of a refused init (unknown entry, wrong arguments). A panic in
    /// `init` is resumed.
    pub fn start<P: IntoProcess, I: IntoPayloads>(
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Result<Self, InitError> {
        let mut t = Self::init(process, method, input)?;
        t.step();
        Ok(t)
    }

    /// Like [`start`](Self::start), but without the first step: the test makes it, with
    /// [`step`](Self::step) or [`step_with`](Self::step_with).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn init<P: IntoProcess, I: IntoPayloads>(
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Result<Self, InitError> {
        let recorder = Recorder::new();
        let pid = recorder.next_pid();
        let mut process: Box<dyn Process> = Box::new(process.into_process());
        let ctx = recorder.context(pid);
        // SAFETY: the box keeps the process in place until it is dropped.
        unsafe { process.__stays_in_place() };
        if let Err(e) = process.init(ctx, method.name(), input.into_payloads()) {
            process.close();
            return Err(e);
        }
        Ok(Self::new(process, pid, method.name().to_owned(), recorder))
    }

    /// Takes over a process spawned through the context of another test process (see
    /// [`take_spawned`](Self::take_spawned)) and runs its first step.
    pub fn from_spawned(mut spawned: Spawned) -> Self {
        let process = spawned.process.take().expect("taken only here");
        let mut t = Self::new(
            process,
            spawned.pid,
            std::mem::take(&mut spawned.method),
            spawned.recorder.clone(),
        );
        t.step();
        t
    }

    /// Takes over the child process of a yielded [`Spawn`] command: initialises it
    /// with a fresh PID of this family (panicking if its init fails) and runs its first
    /// step. Complete the `Spawn` yield with the returned process's [`pid`](Self::pid).
    ///
    /// # Panics
    /// If the child's `init` refuses its entry or arguments.
    pub fn from_spawn_command(&self, command: Spawn) -> Self {
        let pid = self.recorder.next_pid();
        let mut process = command.process.unstash();
        let method = process.entry().to_owned();
        let input = process.take_input();
        if let Err(e) = init_process(&mut process, self.recorder.context(pid), &method, input) {
            panic!("the spawned process could not start: {e}");
        }
        if process.links_to_parent() {
            self.recorder.link(self.pid, pid);
        }
        let mut t = Self::new(Box::new(process), pid, method, self.recorder.clone());
        t.step();
        t
    }

    fn new(process: Box<dyn Process>, pid: Pid, entry: String, recorder: Arc<Recorder>) -> Self {
        Self {
            process,
            pid,
            entry,
            recorder,
            events: Vec::new(),
            out: StepOutput::new(),
            outstanding: Vec::new(),
            taken: Vec::new(),
            last_yields: Vec::new(),
            withdrawn: Vec::new(),
            status: TestStatus::NotStepped,
            result: None,
            result_taken: false,
            error: None,
            suspend_point: None,
            steps: 0,
            closed: false,
        }
    }

    /// The process's PID.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The entry it was started with.
    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// Where it stands.
    pub fn status(&self) -> TestStatus {
        self.status
    }

    /// How many steps it was given.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Whether it finished with a result.
    pub fn is_done(&self) -> bool {
        self.status == TestStatus::Done
    }

    /// Whether it ended, with a result or an error.
    pub fn is_ended(&self) -> bool {
        matches!(self.status, TestStatus::Done | TestStatus::Failed)
    }

    /// Where it waits, as its last step reported (for `#[process]` processes, the
    /// `yield_cmd!` / `recv!` call and what it waits for).
    pub fn suspend_point(&self) -> Option<SuspendPoint> {
        self.suspend_point
    }

    /// The error it ended with (a failed step, or a caught panic).
    pub fn error(&self) -> Option<&ProcessError> {
        self.error.as_ref()
    }

    /// The error it ended with.
    ///
    /// # Panics
    /// If it did not end with an error; the message says where it stands.
    #[track_caller]
    pub fn expect_error(&self) -> &ProcessError {
        match &self.error {
            Some(e) => e,
            None => panic!("expected the process to have failed, but it is {self}"),
        }
    }

    /// Takes its result, as a `T`.
    ///
    /// # Panics
    /// If it is not done (the message says where it waits or how it failed), the
    /// result was taken already, or it is not a `T`.
    #[track_caller]
    pub fn result<T: Any>(&mut self) -> T {
        let payload = self.result_payload();
        match payload.downcast::<T>() {
            Ok(v) => v,
            Err(e) => panic!(
                "the result of {} is {}, not {}",
                self.pid,
                WithArticle(e.actual()),
                WithArticle(e.expected())
            ),
        }
    }

    /// Takes its result as a [`Payload`].
    ///
    /// # Panics
    /// If it is not done, or the result was taken already.
    #[track_caller]
    pub fn result_payload(&mut self) -> Payload {
        match self.result.take() {
            Some(p) => {
                self.result_taken = true;
                p
            }
            None if self.result_taken => panic!("the result of {} was already taken", self.pid),
            None => panic!("expected the process to be done, but it is {self}"),
        }
    }

    /// Its result, not taken (for replays, which compare it with the recorded one).
    #[cfg(feature = "sim")]
    pub(crate) fn result_ref(&self) -> Option<&Payload> {
        self.result.as_ref()
    }

    /// The yields it made that are not completed yet, in tag order (commands taken out
    /// with [`take_yield`](Self::take_yield) are not listed).
    pub fn yields(&self) -> &[Yield] {
        &self.outstanding
    }

    /// The tags of the yields its last step made.
    pub fn last_yields(&self) -> &[Tag] {
        &self.last_yields
    }

    /// The tags the process withdrew ([`StepOutput::withdraw`]) over all its steps,
    /// in order: on the scheduler, their timers would have been cancelled. For
    /// `#[process]` processes, a `recv!` timeout that a message beat, and yields
    /// given up on cancel.
    ///
    /// Withdrawn yields stay in [`yields`](Self::yields) — nothing completes or
    /// forgets them, as on the scheduler — so a test can still complete them, to
    /// check that a late completion is ignored.
    pub fn withdrawn(&self) -> &[Tag] {
        &self.withdrawn
    }

    /// The first outstanding yield of a `C`: its tag and the command.
    ///
    /// # Panics
    /// If there is none; the message lists the outstanding yields and where the process
    /// waits.
    #[track_caller]
    pub fn expect_yield<C: Command>(&self) -> (Tag, &C) {
        match self.outstanding.iter().find(|y| y.is::<C>()) {
            Some(y) => (y.tag(), y.command::<C>().expect("type was checked")),
            None => panic!(
                "expected an outstanding yield of `{}`, but the process is {self}",
                Short(std::any::type_name::<C>())
            ),
        }
    }

    /// Takes the first outstanding yield of a `C` out: its tag and the command (e.g. a
    /// [`Spawn`] to run with [`from_spawn_command`](Self::from_spawn_command)). The tag
    /// stays open: complete it as usual.
    ///
    /// # Panics
    /// As [`expect_yield`](Self::expect_yield).
    #[track_caller]
    pub fn take_yield<C: Command>(&mut self) -> (Tag, C) {
        let Some(i) = self.outstanding.iter().position(|y| y.is::<C>()) else {
            panic!(
                "expected an outstanding yield of `{}`, but the process is {self}",
                Short(std::any::type_name::<C>())
            )
        };
        let y = self.outstanding.remove(i);
        let tag = y.tag();
        self.taken.push(Taken {
            tag,
            command: y.command_name(),
            output: y.output_type(),
        });
        (tag, y.into_command::<C>().expect("type was checked"))
    }

    /// Steps with the events queued so far (none, unless a step is being retried).
    ///
    /// # Panics
    /// If the process has ended.
    #[track_caller]
    pub fn step(&mut self) -> &mut Self {
        if self.is_ended() {
            panic!("cannot step {}: it has ended ({self})", self.pid);
        }
        self.steps += 1;
        self.out.clear();
        let process = &mut self.process;
        let (events, out) = (&mut self.events, &mut self.out);
        let stepped = catch_unwind(AssertUnwindSafe(|| process.step(Events::new(events), out)));
        self.events.clear();
        self.last_yields.clear();
        for y in self.out.drain_yields() {
            self.last_yields.push(y.tag());
            self.outstanding.push(y);
        }
        self.withdrawn.extend(self.out.drain_withdrawn());
        self.suspend_point = self.out.suspend_point();
        let ended = match stepped {
            Ok(Ok(())) => match self.out.take_status() {
                Some(Status::Done(result)) => {
                    self.status = TestStatus::Done;
                    self.result = Some(result);
                    true
                }
                Some(Status::WaitingForYields) => {
                    self.status = TestStatus::WaitingForYields;
                    false
                }
                Some(Status::WaitingForMessage) => {
                    self.status = TestStatus::WaitingForMessage;
                    false
                }
                Some(Status::Continue) => {
                    self.status = TestStatus::Continue;
                    false
                }
                None => {
                    self.fail_with(ProcessError::Failed(StepError::new(
                        "the step set no status",
                    )));
                    true
                }
            },
            Ok(Err(e)) => {
                self.fail_with(ProcessError::Failed(e));
                true
            }
            Err(panic) => {
                self.fail_with(ProcessError::Panicked {
                    phase: Phase::Step,
                    message: panic_message(&*panic),
                });
                true
            }
        };
        if ended {
            self.close();
        }
        self
    }

    fn fail_with(&mut self, error: ProcessError) {
        self.status = TestStatus::Failed;
        self.error = Some(error);
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.recorder.end(self.pid);
            let process = &mut self.process;
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| process.close())) {
                if self.error.is_none() {
                    self.status = TestStatus::Failed;
                    self.result = None;
                    self.error = Some(ProcessError::Panicked {
                        phase: Phase::Close,
                        message: panic_message(&*panic),
                    });
                }
            }
        }
    }

    /// Steps with `events`, as the scheduler would hand them in one step. Completions
    /// of outstanding yields count as completed; no other check is made (use this to
    /// feed unknown tags, duplicates, or several events at once).
    ///
    /// # Panics
    /// If the process has ended.
    #[track_caller]
    pub fn step_with(&mut self, events: impl IntoIterator<Item = Event>) -> &mut Self {
        for event in events {
            if let Event::Completion(c) = &event {
                self.forget(c.tag);
            }
            self.events.push(event);
        }
        self.step()
    }

    fn forget(&mut self, tag: Tag) -> bool {
        let before = self.outstanding.len() + self.taken.len();
        self.outstanding.retain(|y| y.tag() != tag);
        self.taken.retain(|t| t.tag != tag);
        before != self.outstanding.len() + self.taken.len()
    }

    /// The command name and output type of the outstanding yield `tag`.
    ///
    /// # Panics
    /// If no outstanding yield has that tag.
    #[track_caller]
    fn check_outstanding(&self, tag: Tag) -> (&'static str, Option<OutputType>) {
        let outstanding = self.outstanding.iter().find(|y| y.tag() == tag);
        if let Some(y) = outstanding {
            return (y.command_name(), y.output_type());
        }
        match self.taken.iter().find(|t| t.tag == tag) {
            Some(t) => (t.command, t.output),
            None => panic!(
                "cannot complete {tag}: no outstanding yield has that tag; the process is {self}"
            ),
        }
    }

    /// Completes the outstanding yield `tag` with `output` and steps.
    ///
    /// # Panics
    /// If no outstanding yield has that tag, or `output` is not of its command's
    /// output type (say, an `i32` for a command whose output is a `u32`: write
    /// `25_u32`); use [`step_with`](Self::step_with) to feed arbitrary events. Also if
    /// the process has ended.
    #[track_caller]
    pub fn complete<T: Any + Send>(&mut self, tag: Tag, output: T) -> &mut Self {
        let (command, expected) = self.check_outstanding(tag);
        // Checked here, where the test's line is, rather than left to the entry,
        // which would fail later with a `YieldError::WrongOutputType`.
        let output = Payload::new(output);
        if let Some(expected) = expected {
            if output.value_type_id() != expected.type_id
                && expected.type_id != TypeId::of::<Payload>()
            {
                panic!(
                    "cannot complete {tag} with {}: its command `{}` outputs {}",
                    WithArticle(output.type_name()),
                    Short(command),
                    WithArticle((expected.type_name)()),
                );
            }
        }
        self.step_with([completion(tag, output)])
    }

    /// Fails the outstanding yield `tag` with `error` and steps.
    ///
    /// # Panics
    /// As [`complete`](Self::complete).
    #[track_caller]
    pub fn fail(&mut self, tag: Tag, error: YieldError) -> &mut Self {
        self.check_outstanding(tag);
        self.step_with([failure(tag, error)])
    }

    /// Sends `value` as a message from outside any process, and steps.
    ///
    /// # Panics
    /// If the process has ended.
    #[track_caller]
    pub fn send<T: Any + Send>(&mut self, value: T) -> &mut Self {
        self.step_with([message(None, value)])
    }

    /// Sends `value` as a message from `from`, and steps.
    ///
    /// # Panics
    /// If the process has ended.
    #[track_caller]
    pub fn send_from<T: Any + Send>(&mut self, from: Option<Pid>, value: T) -> &mut Self {
        self.step_with([message(from, value)])
    }

    /// Asks the process to stop (as shutdown does), and steps.
    ///
    /// # Panics
    /// If the process has ended.
    #[track_caller]
    pub fn cancel(&mut self) -> &mut Self {
        self.step_with([Event::Cancel])
    }

    /// Takes the messages this process sent through its context, in order.
    pub fn take_sent(&mut self) -> Vec<Sent> {
        let mut sent = self.recorder.sent.lock();
        let (mine, others) = std::mem::take(&mut *sent)
            .into_iter()
            .partition(|s| s.from == Some(self.pid));
        *sent = others;
        mine
    }

    /// Takes the cancel requests this process made through its context (the PIDs it
    /// asked to stop), in order. Like sends, they always succeed in the harness.
    pub fn take_cancel_requests(&mut self) -> Vec<Pid> {
        let mut cancels = self.recorder.cancels.lock();
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut *cancels)
            .into_iter()
            .partition(|(by, _)| *by == self.pid);
        *cancels = others;
        mine.into_iter().map(|(_, pid)| pid).collect()
    }

    /// Takes the timed messages this process armed through its context, in order.
    pub fn take_timed(&mut self) -> Vec<TimedSent> {
        let mut timed = self.recorder.timed.lock();
        let (mine, others) = std::mem::take(&mut *timed)
            .into_iter()
            .partition(|t| t.from == Some(self.pid));
        *timed = others;
        mine
    }

    /// Takes the monitors this process set through its context, in order (see
    /// [`Monitored`]).
    pub fn take_monitors(&mut self) -> Vec<Monitored> {
        let mut monitors = self.recorder.monitors.lock();
        let (mine, others) = std::mem::take(&mut *monitors)
            .into_iter()
            .partition(|m| m.watcher == self.pid);
        *monitors = others;
        mine
    }

    /// The processes linked to this one (sorted): made through its context (`link`,
    /// `spawn_linked`, `Spawn::linked`) or by a process of its family linking to it,
    /// and not unlinked. A link to a process that ended stays until the test plays
    /// that end with [`linked_exit`](Self::linked_exit).
    pub fn links(&self) -> Vec<Pid> {
        let mut links: Vec<Pid> = self
            .recorder
            .links
            .lock()
            .iter()
            .filter_map(|&(a, b)| match self.pid {
                pid if pid == a => Some(b),
                pid if pid == b => Some(a),
                _ => None,
            })
            .collect();
        links.sort();
        links
    }

    /// Whether the process traps exits (see [`Context::trap_exits`]).
    pub fn traps_exits(&self) -> bool {
        self.recorder.trapping.lock().contains(&self.pid)
    }

    /// Plays the end of `pid`, a process linked to this one, with `reason`, as the
    /// scheduler would signal it: the link goes; a process that traps exits is
    /// stepped with an [`Exit`] message from `pid`; one that does not is stopped —
    /// closed, ending with [`ProcessError::Linked`] — unless `reason` is normal, when
    /// nothing happens. Returns whether they were linked (if not, nothing happens).
    ///
    /// # Panics
    /// If the process has ended.
    #[track_caller]
    pub fn linked_exit(&mut self, pid: Pid, reason: ExitReason) -> bool {
        assert!(!self.is_ended(), "the process has ended: it is {self}");
        if !self.recorder.links.lock().remove(&link_key(self.pid, pid)) {
            return false;
        }
        if self.traps_exits() {
            self.send_from(Some(pid), Exit { pid, reason });
        } else if !reason.is_normal() {
            let reason = match reason {
                ExitReason::Linked { reason, .. } => reason,
                other => Box::new(other),
            };
            self.fail_with(ProcessError::Linked { pid, reason });
            self.close();
        }
        true
    }

    /// Whether `monitor` is set and was not demonitored.
    pub fn is_monitoring(&self, monitor: MonitorRef) -> bool {
        self.recorder.active_monitors.lock().contains_key(&monitor)
    }

    /// Registers `pid` under `name` in the names this process and its family see,
    /// as if `pid` had registered itself: typically a process the test plays (a
    /// server that the process under test finds or sends to by name). The rules are
    /// the scheduler's (see [`Handle::register`](crate::Handle::register)), except
    /// that any PID the family did not see end counts as live.
    ///
    /// # Errors
    /// [`RegisterError::Taken`] when another process holds the name,
    /// [`RegisterError::NotAlive`] when `pid` is a process of this family that ended.
    pub fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        self.recorder.register(name, pid)
    }

    /// The process registered under `name` in the names this process and its family
    /// see (to check what the process registered, or that its names were freed when
    /// it ended).
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        self.recorder.whereis(name)
    }

    /// Takes the processes this process spawned through its context, in order.
    pub fn take_spawned(&mut self) -> Vec<Spawned> {
        let mine: Vec<SpawnRecord> = {
            let mut spawned = self.recorder.spawned.lock();
            let (mine, others) = std::mem::take(&mut *spawned)
                .into_iter()
                .partition(|s| s.parent == Some(self.pid));
            *spawned = others;
            mine
        };
        mine.into_iter()
            .map(|r| Spawned {
                pid: r.pid,
                parent: r.parent,
                method: r.method,
                detached: r.detached,
                process: Some(r.process),
                recorder: self.recorder.clone(),
            })
            .collect()
    }
}

impl fmt::Display for TestProcess {
    /// A one-line account for failure messages: PID, entry, status, where it waits and
    /// what is outstanding.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "process {} (entry `{}`) {}",
            self.pid, self.entry, self.status
        )?;
        match (&self.status, &self.error) {
            (TestStatus::Failed, Some(e)) => return write!(f, ": {e}"),
            (TestStatus::Done, _) => return Ok(()),
            _ => {}
        }
        if let Some(point) = self.suspend_point {
            write!(f, ", suspended at the {point}")?;
        }
        if self.outstanding.is_empty() && self.taken.is_empty() {
            f.write_str("; no outstanding yields")
        } else {
            f.write_str("; outstanding yields:")?;
            for y in &self.outstanding {
                write!(f, " {} `{}`", y.tag(), Short(y.command_name()))?;
            }
            for t in &self.taken {
                write!(f, " {} (taken)", t.tag)?;
            }
            Ok(())
        }
    }
}

impl fmt::Debug for TestProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TestProcess({self})")
    }
}

impl Drop for TestProcess {
    /// Closes the process if it has not ended, as the scheduler does at shutdown, and
    /// closes the processes it spawned that no test took over.
    fn drop(&mut self) {
        self.close();
        drop(self.take_spawned());
    }
}

// ==== Calls (request/reply) ======================================================
//
// Kept in one block: the harness's side of `services/calls.rs`. A process under test
// that calls yields a `Call`, which nothing handles: the test plays the callee with
// `TestProcess::take_call` and the answers `CallMade` builds. A callee under test gets
// a `Request` from `request`, and the test reads its reply from the `ReplyProbe`.

/// A call the process under test made (a [`Call`] yield),
/// taken with [`TestProcess::take_call`]: the test plays the callee, and answers the
/// yield with [`TestProcess::complete`] and an answer built here — a reply, the
/// callee's death, a reply dropped unanswered, a timeout, or an unknown callee. A
/// cancel is played with [`TestProcess::cancel`], as for any yield.
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// struct Asker;
///
/// #[process]
/// impl Asker {
///     /// Asks `callee` for the double of 21, and says what came of it.
///     #[entry]
///     fn ask(&mut self, callee: Pid) -> String {
///         // The reply's type is inferred from where the answer goes.
///         let answer: Result<u32, _> = call!(callee, 21_u32, timeout = Duration::from_secs(5));
///         match answer {
///             Ok(n) => format!("got {n}"),
///             Err(e) => format!("{e}"),
///         }
///     }
/// }
///
/// let callee = Pid::from_raw(7);
/// let mut t = TestProcess::start(Asker, "ask", (callee,)).unwrap();
/// let call = t.take_call::<u32, u32>();
/// assert_eq!((call.callee, call.request, call.timeout), (callee, 21, Some(Duration::from_secs(5))));
/// t.complete(call.tag, call.reply(42));
/// assert_eq!(t.result::<String>(), "got 42");
///
/// // The callee dies during the call: an error at once, with the reason.
/// let mut t = TestProcess::start(Asker, "ask", (callee,)).unwrap();
/// let call = t.take_call::<u32, u32>();
/// t.complete(call.tag, call.callee_died(ExitReason::Killed));
/// assert!(t.result::<String>().contains("ended before it replied"));
/// ```
pub struct CallMade<Q, R> {
    /// The yield's tag: complete it with the answer.
    pub tag: Tag,
    /// The process called.
    pub callee: Pid,
    /// What was asked.
    pub request: Q,
    /// How long the caller waits (`None`: no limit).
    pub timeout: Option<Duration>,
    _reply: std::marker::PhantomData<fn(R)>,
}

impl<Q: Any + Send, R: Any + Send> CallMade<Q, R> {
    /// The answer when the callee replies `value`.
    pub fn reply(&self, value: R) -> CallAnswer {
        CallAnswer::new(self.callee, Answer::Replied(Payload::new(value)))
    }

    /// The answer when the callee ends with `reason` before it replies (the call's
    /// monitor reports it): [`CallError::CalleeDied`](crate::CallError::CalleeDied).
    pub fn callee_died(&self, reason: ExitReason) -> CallAnswer {
        CallAnswer::new(self.callee, Answer::CalleeDied(reason))
    }

    /// The answer when the callee drops the reply unanswered: [`CallError::NoReply`](crate::CallError::NoReply).
    pub fn no_reply(&self) -> CallAnswer {
        CallAnswer::new(self.callee, Answer::NoReply)
    }

    /// The answer when the timeout runs out first: [`CallError::Timeout`](crate::CallError::Timeout).
    pub fn timeout(&self) -> CallAnswer {
        CallAnswer::new(self.callee, Answer::TimedOut(None, None))
    }

    /// The answer when the callee is not live: [`CallError::NoSuchProcess`](crate::CallError::NoSuchProcess), with the
    /// request given back.
    pub fn no_such_process(self) -> CallAnswer {
        CallAnswer::undelivered::<Q, R>(self.callee, self.request, false)
    }

    /// The answer when the callee is live but its bounded mailbox is full and
    /// rejects: [`CallError::MailboxFull`](crate::CallError::MailboxFull), with the
    /// request given back.
    pub fn mailbox_full(self) -> CallAnswer {
        CallAnswer::undelivered::<Q, R>(self.callee, self.request, true)
    }
}

impl<Q: fmt::Debug, R> fmt::Debug for CallMade<Q, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallMade")
            .field("tag", &self.tag)
            .field("callee", &self.callee)
            .field("request", &self.request)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl TestProcess {
    /// Takes the first outstanding call out (a [`Call`] yield,
    /// e.g. made by `call!`), whose request is a `Q` and reply an `R`. The tag stays
    /// open: complete it with an answer the returned [`CallMade`] builds.
    ///
    /// # Panics
    /// If no call is outstanding, or the call's types are not `Q` and `R`.
    #[track_caller]
    pub fn take_call<Q: Any + Send, R: Any + Send>(&mut self) -> CallMade<Q, R> {
        let (tag, call) = self.take_yield::<Call>();
        let (callee, timeout) = (call.callee(), call.timeout());
        match call.into_request::<Q, R>() {
            Ok(request) => CallMade {
                tag,
                callee,
                request,
                timeout,
                _reply: std::marker::PhantomData,
            },
            Err(call) => {
                let (request, reply) = call.type_names();
                panic!(
                    "the call tagged {tag:?} asks with {} for {}, not with {} for {}",
                    WithArticle(request),
                    WithArticle(reply),
                    WithArticle(std::any::type_name::<Q>()),
                    WithArticle(std::any::type_name::<R>())
                )
            }
        }
    }
}

/// A [`Request`] to hand to a callee under test (send it with
/// [`TestProcess::send`]), and the probe that reads its reply.
///
/// ```
/// use wsched::prelude::*;
/// use wsched::testing::{request, TestProcess};
///
/// struct Doubler;
///
/// #[process]
/// impl Doubler {
///     #[entry]
///     fn serve(&mut self) -> Result<(), BoxError> {
///         let Request { request, reply, .. } = recv!(Request<u32, u32>)?;
///         reply.send(request * 2);
///         Ok(())
///     }
/// }
///
/// let mut t = TestProcess::start(Doubler, "serve", ()).unwrap();
/// let (asked, probe) = request::<u32, u32>(21);
/// assert_eq!(probe.reply(), None);
/// t.send(asked);
/// assert_eq!(probe.reply(), Some(42));
/// ```
pub fn request<Q, R>(request: Q) -> (Request<Q, R>, ReplyProbe<R>) {
    let (request, slot) = calls::test_request(request);
    (
        request,
        ReplyProbe {
            slot,
            _reply: std::marker::PhantomData,
        },
    )
}

/// Reads the answer to a [`Request`] made by [`request`]: what the callee did with
/// its [`Reply`](crate::Reply).
pub struct ReplyProbe<R> {
    slot: Arc<CallSlot>,
    _reply: std::marker::PhantomData<fn() -> R>,
}

impl<R: Any> ReplyProbe<R> {
    /// The reply, if the callee sent one (once: later calls give `None`).
    ///
    /// # Panics
    /// If the callee dropped the reply unanswered: check with
    /// [`dropped_unanswered`](Self::dropped_unanswered) first when that may happen.
    #[track_caller]
    pub fn reply(&self) -> Option<R> {
        match self.slot.take_answer()? {
            Answer::Replied(payload) => match payload.downcast::<R>() {
                Ok(value) => Some(value),
                Err(_) => unreachable!("a Reply<R> answers with an R"),
            },
            _ => panic!("the callee dropped the reply without answering"),
        }
    }

    /// Whether the callee dropped the reply without answering (then the caller would
    /// get [`CallError::NoReply`](crate::CallError::NoReply)).
    pub fn dropped_unanswered(&self) -> bool {
        self.slot.holds_no_reply()
    }

    /// Plays the caller giving up (a timeout, a cancel): a reply after this is
    /// refused (`send` returns `false`) and dropped.
    pub fn give_up(&self) {
        let _ = self.slot.give_up_any();
    }
}

impl<R> fmt::Debug for ReplyProbe<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyProbe")
            .field("reply", &std::any::type_name::<R>())
            .finish()
    }
}

// ==== end of calls ===============================================================

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Sleep;
    use crate::{process, recv, yield_cmd, BoxError, RecvError};
    use std::time::Duration;

    struct Echo;

    // The macro works inside the runtime crate too (`extern crate self as wsched`).
    #[process]
    impl Echo {
        #[entry]
        fn run(&mut self, times: u32) -> Result<Vec<u32>, BoxError> {
            let mut got = Vec::new();
            for _ in 0..times {
                yield_cmd!(Sleep(Duration::from_millis(1)))?;
                got.push(recv!(u32)?);
            }
            Ok(got)
        }

        #[entry]
        fn cancelled(&mut self) -> bool {
            matches!(recv!(), Err(RecvError::Cancelled))
        }
    }

    #[test]
    fn testing_drives_a_macro_process() {
        let mut t = TestProcess::start(Echo, "run", (2_u32,)).unwrap();
        assert_eq!(t.status(), TestStatus::WaitingForYields);
        t.complete(Tag(1), ());
        assert_eq!(t.status(), TestStatus::WaitingForMessage);
        t.send(5_u32);
        t.complete(Tag(2), ()).send(6_u32);
        assert_eq!(t.result::<Vec<u32>>(), vec![5, 6]);
        assert_eq!(t.steps(), 5);
    }

    #[test]
    fn testing_display_says_where_the_process_waits() {
        let t = TestProcess::start(Echo, "run", (1_u32,)).unwrap();
        let shown = t.to_string();
        assert!(
            shown.starts_with(
                "process <1> (entry `run`) waiting for yields, suspended at the yield of \
                 `Sleep` at wsched/src/testing.rs:"
            ),
            "{shown}"
        );
        assert!(shown.ends_with("; outstanding yields: #1 `Sleep`"));
    }

    #[test]
    fn testing_cancel_and_init_errors() {
        let mut t = TestProcess::start(Echo, "cancelled", ()).unwrap();
        t.cancel();
        assert!(t.result::<bool>());
        let err = TestProcess::start(Echo, "nope", ()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no entry named `nope`; available entries: `run`, `cancelled`"
        );
    }
}
