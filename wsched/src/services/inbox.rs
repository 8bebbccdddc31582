//! Inboxes: a mailbox with a PID for a thread outside the scheduler.
//!
//! An [`Inbox`] is a real process, so everything that works on a PID works on it:
//! processes send to it, monitor it, link to it, and name it. Its body only moves
//! each message it is sent, in order, to a queue the thread reads; the thread
//! receives from that queue by type, by pattern, or whatever comes first, each with
//! a timeout. Dropping the inbox ends the process normally (a `Down` says
//! [`ExitReason::Normal`](crate::ExitReason::Normal)); the messages the thread never
//! received become dead letters, as any process's unread messages do.
//!
//! Only the process's own steps publish what the queue holds for listings (see
//! `held.rs`: the owner publishes and forgets), so a receive on the thread nudges
//! the process with a private message to publish again.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::engine::context::Context;
use crate::engine::handle::Handle;
use crate::engine::process::{Event, Events, Message, Process, Status, StepOutput};
use crate::error::{InitError, SendError, SpawnError, StepError};
use crate::payload::{Payload, Payloads};
use crate::pid::Pid;
use crate::services::monitors::MonitorRef;
use crate::time::clock;

/// A mailbox with a PID for a thread outside the scheduler: processes send to it as
/// to any process, and the thread receives, by type or by pattern, with a timeout.
/// Made by [`Handle::inbox`] (or [`Scheduler::inbox`](crate::Scheduler::inbox)).
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::{Down, ExitReason, Scheduler};
///
/// /// Once told to go, answers the PID it is given with "hello", then finishes.
/// struct Greeter;
///
/// /// The go-ahead, sent once the thread watches the greeter.
/// struct Go;
///
/// #[process]
/// impl Greeter {
///     #[entry]
///     fn run(&mut self, to: Pid) -> Result<(), BoxError> {
///         let Go = recv!(Go)?;
///         this::send(to, 7_u32)?;
///         this::send(to, "hello")?;
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(2).build()?;
/// let inbox = scheduler.inbox()?;
/// let greeter = scheduler.spawn(Greeter, "run", (inbox.pid(),))?;
/// // Watched before it may end: a monitor set on a process that has already
/// // ended gets its `Down` at once, with `ExitReason::NoSuchProcess`.
/// let watch = inbox.monitor(greeter);
/// scheduler.send(greeter, Go)?;
/// let wait = Duration::from_secs(20);
/// // By type: the `&str` first, though the `u32` came before it.
/// assert_eq!(inbox.recv::<&str>(wait)?, "hello");
/// assert_eq!(inbox.recv::<u32>(wait)?, 7);
/// // By pattern: the `Down` of this monitor.
/// let down = inbox.recv_matching(wait, |down: &Down| down.monitor == watch)?;
/// assert_eq!(down.reason, ExitReason::Normal);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Inbox {
    pid: Pid,
    context: Context,
    handle: Handle,
    queue: Arc<Queue>,
}

/// Why an inbox gave no message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InboxError {
    /// No message (of the type, or matching the pattern) came within the timeout.
    Timeout,
    /// The inbox's process ended (the scheduler shut down, or it was killed or
    /// cancelled): no message will come. Those already there can still be
    /// received.
    Closed,
}

impl fmt::Display for InboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str(
                "no matching message reached the inbox within the timeout; wait longer, \
                 or check what its PID is sent",
            ),
            Self::Closed => f.write_str(
                "the inbox's process has ended (the scheduler shut down, or the process \
                 was killed or cancelled): no message will reach it",
            ),
        }
    }
}

impl std::error::Error for InboxError {}

/// What the inbox process hands the thread.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    arrived: Condvar,
}

#[derive(Default)]
struct QueueState {
    messages: VecDeque<Message>,
    /// The process has ended.
    closed: bool,
    /// The thread dropped the inbox: what is left goes to the dead letters.
    dropped: bool,
}

/// Sent by the thread: it took messages (the process publishes what is left), or
/// dropped the inbox (the process ends). Private, so nobody else can send one.
enum Nudge {
    Received,
    Close,
}

/// The inbox's process: moves messages to the queue.
struct InboxProcess {
    queue: Arc<Queue>,
    context: Option<Context>,
    /// Where `init`, which runs on the thread making the inbox, leaves a copy of
    /// the context for the inbox to act as its process.
    context_out: Arc<Mutex<Option<Context>>>,
}

impl InboxProcess {
    fn context(&self) -> &Context {
        self.context.as_ref().expect("init stored the context")
    }

    /// Publishes what waits in the queue, for listings.
    fn publish(&self, state: &QueueState) {
        self.context().publish_held(&state.messages);
    }
}

impl Process for InboxProcess {
    fn init(&mut self, ctx: Context, method: &str, _: Payloads) -> Result<(), InitError> {
        if method != Inbox::ENTRY {
            return Err(InitError::unknown_method(method, &[Inbox::ENTRY]));
        }
        *self.context_out.lock() = Some(ctx.clone());
        self.context = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let mut state = self.queue.state.lock();
        let mut arrived = false;
        let mut close = state.dropped;
        for event in events {
            match event {
                Event::Message(message) => match message.payload.downcast::<Nudge>() {
                    Ok(Nudge::Received) => {}
                    Ok(Nudge::Close) => close = true,
                    Err(other) => {
                        arrived = true;
                        state.messages.push_back(Message {
                            from: message.from,
                            payload: other.into_payload(),
                        });
                    }
                },
                // Asked to stop (a cancel, the scheduler's shutdown): it ends, and the
                // thread learns it from `Closed`.
                Event::Cancel => close = true,
                Event::Completion(_) => {}
            }
        }
        if close {
            state.closed = true;
            if state.dropped {
                let mut unread = std::mem::take(&mut state.messages);
                self.context().hand_over_unreceived(&mut unread);
            }
            drop(state);
            self.queue.arrived.notify_all();
            out.set_status(Status::Done(Payload::unit()));
            return Ok(());
        }
        self.publish(&state);
        drop(state);
        if arrived {
            self.queue.arrived.notify_all();
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }

    /// However it ended: the thread's waits end with `Closed`.
    fn close(&mut self) {
        self.queue.state.lock().closed = true;
        self.queue.arrived.notify_all();
    }

    /// Listings name it by the type its user holds: `Inbox::inbox <7>`.
    fn __type_name() -> &'static str {
        std::any::type_name::<Inbox>()
    }
}

impl Inbox {
    /// The entry of an inbox's process, as listings show it (`Inbox::inbox <7>`).
    pub const ENTRY: &'static str = "inbox";

    pub(crate) fn new(handle: &Handle) -> Result<Self, SpawnError> {
        let queue = Arc::new(Queue::default());
        let context_out = Arc::new(Mutex::new(None));
        let process = InboxProcess {
            queue: queue.clone(),
            context: None,
            context_out: context_out.clone(),
        };
        let pid = handle.spawn_detached(process, Self::ENTRY, ())?;
        // `init` ran on this thread, within the spawn.
        let context = context_out.lock().take().expect("init ran");
        Ok(Self {
            pid,
            context,
            handle: handle.clone(),
            queue,
        })
    }

    /// Its PID: processes send to it, monitor it, link to it.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The oldest message, whatever its type: waits up to `timeout`.
    ///
    /// # Errors
    /// [`InboxError::Timeout`] when none came; [`InboxError::Closed`] when none ever
    /// will.
    pub fn recv_message(&self, timeout: Duration) -> Result<Message, InboxError> {
        self.take(timeout, |_| true)
    }

    /// The oldest message of type `T` (messages of other types stay, in order, for
    /// later receives): waits up to `timeout`.
    ///
    /// # Errors
    /// As [`recv_message`](Self::recv_message).
    pub fn recv<T: Any + Send>(&self, timeout: Duration) -> Result<T, InboxError> {
        self.recv_matching(timeout, |_: &T| true)
    }

    /// The oldest message of type `T` for which `pattern` holds (the others stay,
    /// in order): Erlang's selective `receive`, with a guard. Waits up to `timeout`.
    ///
    /// # Errors
    /// As [`recv_message`](Self::recv_message).
    pub fn recv_matching<T: Any + Send>(
        &self,
        timeout: Duration,
        mut pattern: impl FnMut(&T) -> bool,
    ) -> Result<T, InboxError> {
        let message = self.take(timeout, |message| {
            message
                .payload
                .downcast_ref::<T>()
                .is_some_and(&mut pattern)
        })?;
        Ok(message
            .payload
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("matched as a `T`")))
    }

    /// The oldest message `wanted` accepts, whatever its type (the others stay, in
    /// order): a receive of one of several types, or of a message by its sender.
    /// Waits up to `timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wsched::{Down, Scheduler};
    ///
    /// struct Report(u32);
    ///
    /// let scheduler = Scheduler::new()?;
    /// let inbox = scheduler.inbox()?;
    /// scheduler.send(inbox.pid(), "not this")?;
    /// scheduler.send(inbox.pid(), Report(7))?;
    /// // A `Report`, or the `Down` of a process the inbox watches: whichever comes first.
    /// let message = inbox.recv_message_where(Duration::from_secs(20), |m| {
    ///     m.payload.is::<Report>() || m.payload.is::<Down>()
    /// })?;
    /// match message.payload.downcast::<Report>() {
    ///     Ok(Report(n)) => assert_eq!(n, 7),
    ///     Err(other) => panic!("a Down: {:?}", other.into_payload().downcast::<Down>()),
    /// }
    /// assert_eq!(inbox.len(), 1, "the `&str` stays");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`recv_message`](Self::recv_message).
    pub fn recv_message_where(
        &self,
        timeout: Duration,
        wanted: impl FnMut(&Message) -> bool,
    ) -> Result<Message, InboxError> {
        self.take(timeout, wanted)
    }

    /// The oldest message of type `T` already there, without waiting.
    pub fn try_recv<T: Any + Send>(&self) -> Option<T> {
        self.recv::<T>(Duration::ZERO).ok()
    }

    /// How many messages wait to be received.
    pub fn len(&self) -> usize {
        self.queue.state.lock().messages.len()
    }

    /// Whether no message waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sends `message` to `to`, from this inbox: `to` sees this inbox's PID as the
    /// sender, and can answer it.
    ///
    /// # Errors
    /// As [`Handle::send`].
    pub fn send<T: Any + Send>(&self, to: Pid, message: T) -> Result<(), SendError> {
        self.context.send(to, message)
    }

    /// Monitors `pid`: its [`Down`](crate::Down) comes to this inbox, as a message.
    pub fn monitor(&self, pid: Pid) -> MonitorRef {
        self.context.monitor(pid)
    }

    /// Stops the monitor; `true` if it was stopped before its `Down` was sent.
    pub fn demonitor(&self, monitor: MonitorRef) -> bool {
        self.context.demonitor(monitor)
    }

    /// Links this inbox to `pid`. A failure of `pid` ends the inbox (its receives
    /// then say [`InboxError::Closed`]) unless it [traps exits](Self::trap_exits).
    pub fn link(&self, pid: Pid) {
        self.context.link(pid);
    }

    /// Removes the link to `pid`.
    pub fn unlink(&self, pid: Pid) {
        self.context.unlink(pid);
    }

    /// With `on`, the ends of linked processes come as [`Exit`](crate::Exit)
    /// messages instead of ending the inbox.
    pub fn trap_exits(&self, on: bool) {
        self.context.trap_exits(on);
    }

    /// Takes the oldest message `wanted` accepts, waiting until `timeout`.
    fn take(
        &self,
        timeout: Duration,
        mut wanted: impl FnMut(&Message) -> bool,
    ) -> Result<Message, InboxError> {
        let deadline = clock::now().checked_add(timeout);
        let mut state = self.queue.state.lock();
        loop {
            if let Some(at) = state.messages.iter().position(&mut wanted) {
                let message = state.messages.remove(at).expect("found");
                drop(state);
                // Its process publishes what is left, for listings; an ended one has
                // nothing to publish.
                let _ = self.handle.send(self.pid, Nudge::Received);
                return Ok(message);
            }
            if state.closed {
                return Err(InboxError::Closed);
            }
            if clock::on_simulation_thread() {
                assert!(
                    timeout.is_zero(),
                    "wsched: Inbox::recv was called with a timeout on the thread that runs a \
                     simulation, where nothing runs while it blocks; run the simulation \
                     (`Simulation::run_until`) first, then take what arrived with a zero \
                     timeout (`try_recv`)"
                );
                return Err(InboxError::Timeout);
            }
            let timed_out = match deadline {
                Some(deadline) => self
                    .queue
                    .arrived
                    .wait_until(&mut state, deadline)
                    .timed_out(),
                None => {
                    self.queue.arrived.wait(&mut state);
                    false
                }
            };
            if timed_out {
                // A last look: what came with the deadline.
                return match state.messages.iter().position(&mut wanted) {
                    Some(_) => {
                        drop(state);
                        self.take(Duration::ZERO, wanted)
                    }
                    None if state.closed => Err(InboxError::Closed),
                    None => Err(InboxError::Timeout),
                };
            }
        }
    }
}

impl Drop for Inbox {
    /// Ends the inbox's process normally; what the thread never received becomes
    /// dead letters.
    fn drop(&mut self) {
        self.queue.state.lock().dropped = true;
        let _ = self.handle.send(self.pid, Nudge::Close);
    }
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox")
            .field("pid", &self.pid)
            .field("waiting", &self.len())
            .finish()
    }
}
