//! What a running process can do to the world outside its own steps.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::cell::{CellRef, NewProcess, ThinCell};
use crate::engine::handle::Handle;
use crate::engine::held::MessageCount;
use crate::engine::process::{IntoProcess, Message};
use crate::engine::spawn_options::SpawnOptions;
use crate::entry::EntryRef;
use crate::error::{
    CancelError, RegisterError, SendError, SendNamedError, SpawnError, TimedSendError,
};
use crate::payload::{IntoPayloads, Payload};
use crate::pid::Pid;
use crate::time::timed_ref::Repeat;
use crate::time::timed_ref::TimerRef;

/// Handed to [`Process::init`](crate::Process::init): the process's own PID and a way to send messages,
/// spawn processes, register names and arm timed messages on the scheduler (or the
/// [`testing`](crate::testing) harness) that runs it. Cheap to clone; keep it for
/// later steps. Each method works as the [`Handle`](crate::Handle) method of the same
/// name, with this process as the sender. There is no `call`: a call waits, so a
/// process makes one by yielding a [`Call`](crate::command::Call) (or with
/// [`call!`](crate::call)), not through its context.
///
/// Two words: a context lives in most processes' state. A process on a scheduler
/// finds its PID, and the scheduler, through its own cell.
#[derive(Clone)]
pub struct Context {
    backend: BackendRef,
}

#[derive(Clone)]
enum BackendRef {
    /// A process on a scheduler: its own cell.
    Process(ThinCell),
    /// Anything else (the testing harness's recorder), with the process's PID.
    Other(Arc<OtherBackend>),
}

struct OtherBackend {
    pid: Pid,
    backend: Arc<dyn Backend>,
}

impl Context {
    pub(crate) fn new(pid: Pid, backend: Arc<dyn Backend>) -> Self {
        Self {
            backend: BackendRef::Other(Arc::new(OtherBackend { pid, backend })),
        }
    }

    /// The context of the process in `cell`, run by a scheduler.
    pub(crate) fn of_process(cell: CellRef) -> Self {
        Self {
            backend: BackendRef::Process(ThinCell::new(cell)),
        }
    }

    /// Publishes a summary of the messages this process took in and has not
    /// received yet (a `#[process]` machine's buffer), for listings.
    pub(crate) fn publish_held(&self, messages: &VecDeque<Message>) {
        let mut held = Vec::new();
        for message in messages {
            crate::runtime::add_messages(&mut held, message.payload.type_name(), 1);
        }
        self.backend().publish_held(self.pid(), held);
    }

    /// Tells this process's bounded mailbox how many counted messages it took in
    /// and holds unreceived (a `#[process]` machine's, at the end of a step: see
    /// `engine/bounded.rs`).
    pub(crate) fn report_held(&self, held: usize) {
        self.backend().report_held(held);
    }

    /// Hands the messages this process took in and never received to the
    /// scheduler's dead letters (a `#[process]` machine's buffer, as it closes).
    pub(crate) fn hand_over_unreceived(&self, messages: &mut VecDeque<Message>) {
        self.backend().dead_letters(self.pid(), messages);
    }

    /// The scheduler this process runs on; `None` in the testing harness.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn scheduler(&self) -> Option<Handle> {
        self.backend().scheduler()
    }

    fn backend(&self) -> &dyn Backend {
        match &self.backend {
            BackendRef::Process(cell) => cell.header(),
            BackendRef::Other(other) => &*other.backend,
        }
    }

    /// This process's PID.
    #[inline]
    pub fn pid(&self) -> Pid {
        match &self.backend {
            BackendRef::Process(cell) => cell.header().pid(),
            BackendRef::Other(other) => other.pid,
        }
    }

    /// The runtime's clock: the time its timers and timeouts are measured by. Read
    /// time here rather than from `Instant::now`, so that a simulation (the `sim`
    /// feature) controls it: there it is virtual time.
    #[inline]
    pub fn now(&self) -> std::time::Instant {
        crate::time::clock::now()
    }

    /// A random number from the runtime. Draw randomness here rather than from a
    /// generator of your own, so that a simulation (the `sim` feature) replays it:
    /// there it comes from the simulation's seed. Not for cryptography.
    #[inline]
    pub fn random(&self) -> u64 {
        crate::engine::random::draw()
    }

    /// Sends `message` to `to`, as coming from this process. A full bounded mailbox
    /// rejects it or drops its oldest message, as [`Handle::send`](crate::Handle::send)
    /// says.
    ///
    /// # Errors
    /// [`SendError`] when `to` does not exist or has finished, or its bounded mailbox
    /// is full and rejects; the error gives the message back.
    #[inline]
    pub fn send<T: Any + Send>(&self, to: Pid, message: T) -> Result<(), SendError> {
        let payload = Payload::new(message);
        match &self.backend {
            // Called directly, not through `dyn Backend`: the hot path of every
            // message inlines down to the mailbox push.
            BackendRef::Process(cell) => {
                let header = cell.header();
                header.send(Some(header.pid()), to, payload)
            }
            BackendRef::Other(other) => other.backend.send(Some(other.pid), to, payload),
        }
    }

    /// Asks `pid` to stop: it receives [`Event::Cancel`](crate::Event::Cancel) (for
    /// `#[process]` processes, the pending suspension point returns a cancellation
    /// error) and may clean up, even by yielding, before it finishes.
    ///
    /// # Errors
    /// [`CancelError`] when `pid` does not exist or has finished.
    pub fn cancel(&self, pid: Pid) -> Result<(), CancelError> {
        self.backend().cancel(Some(self.pid()), pid)
    }

    /// Stops `pid` without another step: the strong form of [`cancel`](Self::cancel),
    /// for a process that did not finish when asked (a supervisor's shutdown timeout
    /// uses it). See [`Handle::kill`](crate::Handle::kill). Killing this process
    /// itself ends it when the current step returns.
    ///
    /// # Errors
    /// [`CancelError`] when `pid` does not exist or has finished.
    pub fn kill(&self, pid: Pid) -> Result<(), CancelError> {
        self.backend().kill(Some(self.pid()), pid)
    }

    /// Spawns `process` running entry `method` with `input`. Its result is kept until
    /// someone claims it with a join or a wait.
    ///
    /// `method` is the entry's typed name (`Worker::RUN`: see [`Entry`](crate::Entry)),
    /// which fixes the type of `input` at compile time, or its name (`"run"`), for
    /// any `input`, checked by the child's `init`.
    ///
    /// # Errors
    /// [`SpawnError`] when the entry does not exist, its `init` fails or panics, or
    /// the scheduler is shutting down.
    pub fn spawn<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Result<Pid, SpawnError> {
        self.spawn_new(process, method.name(), input, false)
    }

    /// Like [`spawn`](Self::spawn), but nobody will claim the result: it is dropped
    /// when the process finishes, so fire-and-forget processes do not accumulate.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn).
    pub fn spawn_detached<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Result<Pid, SpawnError> {
        self.spawn_new(process, method.name(), input, true)
    }

    /// Like [`spawn`](Self::spawn), as `options` say: with a bounded mailbox
    /// ([`SpawnOptions::bounded_mailbox`]), detached ([`SpawnOptions::detached`]).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn), plus [`SpawnError::ZeroMailboxCapacity`] for a
    /// bounded mailbox of capacity 0.
    pub fn spawn_with<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
        options: SpawnOptions,
    ) -> Result<Pid, SpawnError> {
        let process = NewProcess::new(process, method.name(), input.into_payloads(), false);
        self.spawn_process(options.apply(process))
    }

    /// [`spawn_linked_with`](Self::spawn_linked_with) for a supervisor's child: when
    /// the scheduler shuts down, its supervisor stops it, in order, instead of the
    /// shutdown's sweep.
    pub(crate) fn spawn_supervised<P: IntoProcess>(
        &self,
        process: P,
        method: &str,
        input: impl IntoPayloads,
        options: SpawnOptions,
    ) -> Result<Pid, SpawnError> {
        self.spawn_linked_new(process, method, input, options, true)
    }

    fn spawn_linked_new<P: IntoProcess>(
        &self,
        process: P,
        method: &str,
        input: impl IntoPayloads,
        options: SpawnOptions,
        supervised: bool,
    ) -> Result<Pid, SpawnError> {
        let mut process =
            NewProcess::new(process, method, input.into_payloads(), false).link_to_parent();
        if supervised {
            process = process.supervised();
        }
        self.spawn_process(options.apply(process))
    }
}

/// Names and timed messages.
impl Context {
    /// Registers `pid` (often [`pid`](Self::pid), this process) under `name`. See
    /// [`Handle::register`](crate::Handle::register) for the rules; the name is freed
    /// when `pid` ends.
    ///
    /// A process cannot register itself from its `init`: it is not live until its
    /// first step.
    ///
    /// # Errors
    /// [`RegisterError::Taken`] when another live process holds the name,
    /// [`RegisterError::NotAlive`] when `pid` does not exist or has finished.
    pub fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        self.backend().register(name, pid)
    }

    /// Frees `name`. Returns the live process that held it (`None`: nobody did).
    pub fn unregister(&self, name: &str) -> Option<Pid> {
        self.backend().unregister(name)
    }

    /// The live process registered under `name`.
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        self.backend().whereis(name)
    }

    /// Sends `message` to the process registered under `name`, as coming from this
    /// process.
    ///
    /// # Errors
    /// [`SendNamedError`] when no live process holds the name, or its holder finished
    /// before the message reached it; the error gives the message back.
    pub fn send_named<T: Any + Send>(&self, name: &str, message: T) -> Result<(), SendNamedError> {
        self.backend()
            .send_named(Some(self.pid()), name, Payload::new(message))
    }

    /// Sends `message` to `to`, as coming from this process, once `delay` has passed.
    /// See [`Handle::send_after`](crate::Handle::send_after).
    ///
    /// # Errors
    /// As [`Handle::send_after`](crate::Handle::send_after).
    pub fn send_after<T: Any + Send>(
        &self,
        to: Pid,
        message: T,
        delay: Duration,
    ) -> Result<TimerRef, TimedSendError> {
        self.backend()
            .send_timed(Some(self.pid()), to, delay, Repeat::once(message))
    }

    /// Sends a clone of `message` to `to`, as coming from this process, every
    /// `period` until cancelled or `to` ends. See
    /// [`Handle::send_interval`](crate::Handle::send_interval).
    ///
    /// # Errors
    /// As [`Handle::send_after`](crate::Handle::send_after).
    pub fn send_interval<T: Any + Send + Clone>(
        &self,
        to: Pid,
        message: T,
        period: Duration,
    ) -> Result<TimerRef, TimedSendError> {
        let repeat = Repeat::every(message, period);
        let delay = repeat.period().expect("an interval has a period");
        self.backend()
            .send_timed(Some(self.pid()), to, delay, repeat)
    }
}

/// Monitors.
impl Context {
    /// Monitors `pid`: when it ends, this process gets exactly one
    /// [`Down`](crate::Down) message (from `pid`) saying why, with the returned
    /// reference. If `pid` has ended already (or is ending), or never existed, the
    /// `Down` comes at once, with [`ExitReason::NoSuchProcess`](crate::ExitReason::NoSuchProcess).
    /// Each call sets a monitor of its own, with its own `Down`. A monitor held by a
    /// process that ends is removed with it. See
    /// [`Down`](crate::Down) for an example, and [`Handle::monitor`](crate::Handle::monitor)
    /// to watch from outside.
    pub fn monitor(&self, pid: Pid) -> MonitorRef {
        self.backend().monitor(self.pid(), pid)
    }

    /// Stops `monitor`. `true`: it was stopped before its `Down` was sent, and none
    /// will come. `false`: its `Down` was sent already — it is in this process's
    /// mailbox, still to be received (or it was stopped before). Nothing is sent
    /// after `demonitor` returns.
    pub fn demonitor(&self, monitor: MonitorRef) -> bool {
        self.backend().demonitor(monitor)
    }
}

/// Links.
impl Context {
    /// Links this process and `pid`, both ways: when either ends with a reason other
    /// than [`ExitReason::Normal`](crate::ExitReason::Normal), the other is stopped
    /// too (ending with [`ProcessError::Linked`](crate::ProcessError::Linked)) —
    /// unless it [traps exits](Self::trap_exits), in which case it gets an
    /// [`Exit`](crate::Exit) message instead (for normal ends too). Linking twice
    /// changes nothing. If `pid` has ended (or is ending) or never existed, the signal
    /// comes at once, with [`ExitReason::NoSuchProcess`](crate::ExitReason::NoSuchProcess):
    /// this process then ends when its current step returns, unless it traps exits.
    /// Call it from a step, not from `init`.
    pub fn link(&self, pid: Pid) {
        self.backend().link(self.pid(), pid);
    }

    /// Removes the link between this process and `pid`, both ways (nothing if there
    /// was none). Once it returns the link sends nothing more; an `Exit` sent before
    /// stays in the mailbox.
    pub fn unlink(&self, pid: Pid) {
        self.backend().unlink(self.pid(), pid);
    }

    /// Whether the ends of linked processes come to this process as
    /// [`Exit`](crate::Exit) messages (`true`) or stop it when they are failures
    /// (`false`, the default).
    pub fn trap_exits(&self, on: bool) {
        self.backend().trap_exits(self.pid(), on);
    }

    /// Like [`spawn`](Self::spawn), and links the child to this process before it
    /// can run (see [`link`](Self::link)): even a child that fails in its first step
    /// takes this process down (or sends it an `Exit`).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn); no link is made then.
    pub fn spawn_linked<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Result<Pid, SpawnError> {
        let process =
            NewProcess::new(process, method.name(), input.into_payloads(), false).link_to_parent();
        self.spawn_process(process)
    }

    /// Like [`spawn_linked`](Self::spawn_linked), with `options` as
    /// [`spawn_with`](Self::spawn_with) takes them: e.g. a detached child
    /// ([`SpawnOptions::detached`]) watched through its link alone, as a
    /// [`Supervisor`](crate::supervisor::Supervisor)'s children are, which must not
    /// leave a result behind each time one ends.
    ///
    /// # Errors
    /// As [`spawn_with`](Self::spawn_with); no link is made then.
    pub fn spawn_linked_with<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
        options: SpawnOptions,
    ) -> Result<Pid, SpawnError> {
        self.spawn_linked_new(process, method.name(), input, options, false)
    }
}

impl Context {
    /// Whether a `yield_all!` of `Spawn`s in this step may spawn each child as it
    /// is yielded (see [`Backend::spawns_at_yield`]). Asked only from a step of
    /// this process.
    #[inline]
    pub(crate) fn spawns_at_yield(&self) -> bool {
        self.backend().spawns_at_yield()
    }

    /// Spawns `process` as this process's child (every spawn of the context, and
    /// the `Spawn`s of a `yield_all!` done at once: see
    /// [`spawns_at_yield`](Self::spawns_at_yield)).
    #[inline]
    pub(crate) fn spawn_process(&self, process: NewProcess) -> Result<Pid, SpawnError> {
        self.backend().spawn(Some(self.pid()), process)
    }

    fn spawn_new<P: IntoProcess>(
        &self,
        process: P,
        method: &str,
        input: impl IntoPayloads,
        detached: bool,
    ) -> Result<Pid, SpawnError> {
        self.spawn_process(NewProcess::new(
            process,
            method,
            input.into_payloads(),
            detached,
        ))
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").field("pid", &self.pid()).finish()
    }
}

/// Names one monitor: returned when it is set, carried by its [`Down`](crate::Down), and given
/// to `demonitor` to stop it. Unique within a scheduler (or a testing harness).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MonitorRef {
    pub(crate) id: u64,
    pub(crate) target: Pid,
}

impl MonitorRef {
    pub(crate) fn new(id: u64, target: Pid) -> Self {
        Self { id, target }
    }

    /// The process it watches.
    pub fn target(&self) -> Pid {
        self.target
    }
}

impl fmt::Debug for MonitorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MonitorRef(#{} on {})", self.id, self.target)
    }
}

/// What a [`Context`] talks to: the scheduler, or the testing harness's recorder.
pub(crate) trait Backend: Send + Sync + 'static {
    /// Spawns `process` (its entry, input and detachment travel with it).
    fn spawn(&self, parent: Option<Pid>, process: NewProcess) -> Result<Pid, SpawnError>;

    /// Whether a `yield_all!` of [`Spawn`](crate::command::Spawn)s by this process
    /// may spawn each child as it is yielded, completing the yield at once,
    /// instead of handing the commands to the handler after the step (see
    /// `Handlers::spawns_at_yield`). Asked only from a step of the process.
    fn spawns_at_yield(&self) -> bool {
        false
    }

    fn send(&self, from: Option<Pid>, to: Pid, payload: Payload) -> Result<(), SendError>;

    fn cancel(&self, from: Option<Pid>, pid: Pid) -> Result<(), CancelError>;

    /// Stops `pid` without another step (see `Shared::kill`).
    fn kill(&self, from: Option<Pid>, pid: Pid) -> Result<(), CancelError>;

    fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError>;

    fn unregister(&self, name: &str) -> Option<Pid>;

    fn whereis(&self, name: &str) -> Option<Pid>;

    fn send_named(
        &self,
        from: Option<Pid>,
        name: &str,
        payload: Payload,
    ) -> Result<(), SendNamedError>;

    /// Arms a timed message from `from` to `to`, first due after `delay`.
    fn send_timed(
        &self,
        from: Option<Pid>,
        to: Pid,
        delay: Duration,
        repeat: Repeat,
    ) -> Result<TimerRef, TimedSendError>;

    /// `watcher` monitors `target` (see `services/monitors.rs`).
    fn monitor(&self, watcher: Pid, target: Pid) -> MonitorRef;

    /// Stops a monitor; `true` if its `Down` had not been sent.
    fn demonitor(&self, monitor: MonitorRef) -> bool;

    /// Links `me` and `other` (see `services/links.rs`).
    fn link(&self, me: Pid, other: Pid);

    fn unlink(&self, me: Pid, other: Pid);

    fn trap_exits(&self, me: Pid, on: bool);

    /// The scheduler this process runs on, if it runs on one (not in the testing
    /// harness): for layers that reach it from a process (the cluster).
    fn scheduler(&self) -> Option<Handle> {
        None
    }

    /// Takes messages `to` took in and never received, as it ends (see
    /// `engine/dead_letters.rs`). Runners without a dead-letter hook drop them.
    fn dead_letters(&self, to: Pid, messages: &mut VecDeque<Message>) {
        let _ = to;
        crate::runtime::drop_all_quietly(messages.drain(..));
    }

    /// Records what `pid` took in and has not received, for listings (see
    /// `engine/held.rs`). Runners without listings ignore it.
    fn publish_held(&self, pid: Pid, held: Vec<MessageCount>) {
        let _ = (pid, held);
    }

    /// Records how many counted messages the calling process (a `#[process]` with
    /// a bounded mailbox) took in and holds unreceived (see
    /// `engine/bounded.rs`). Runners without bounded mailboxes ignore it.
    fn report_held(&self, held: usize) {
        let _ = held;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_two_words() {
        // Most processes keep theirs: it is part of what an idle process costs.
        assert_eq!(std::mem::size_of::<Context>(), 16);
        assert_eq!(std::mem::size_of::<Option<Context>>(), 16);
    }
}
