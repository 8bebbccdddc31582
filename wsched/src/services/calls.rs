//! Request/reply calls: a caller sends a [`Request`] (the request and a [`Reply`]
//! handle) and waits until the reply, a timeout, or the callee's death.
//!
//! Two callers share everything below: a thread blocking in
//! [`Handle::call`](crate::Handle::call), and a process yielding the built-in
//! [`Call`] command (which `call!` in `#[process]` code does), whose completion is
//! the answer.
//!
//! # The call slot, and who wins
//!
//! Every outcome goes through one [`CallSlot`] under its lock; the first to arrive
//! decides, the rest are dropped quietly:
//!
//! * the reply ([`Reply::send`]) or the reply's drop without answering (no reply);
//! * the callee's end, through a monitor set (before the request is sent) whose
//!   watcher is the slot: it answers "callee died" with the reason;
//! * the caller giving up (a thread's timeout; a process's timer firing, its cancel
//!   withdrawing the yield, or its end): the slot is closed, so a reply after that is
//!   dropped on the replier's side, never delivered.
//!
//! A dying callee usually drops the [`Reply`] it holds (or the request still in its
//! mailbox) before its `Down` goes out, which would make a death look like "no
//! reply". So a reply dropped while a worker thread unwinds (a panicking step,
//! most likely the callee's) answers "no reply" only once the worker has caught the
//! panic and ended the process it ended (see [`unwound`]); a death overrides a "no
//! reply" not yet collected; a caller thread that finds "no reply" while the callee
//! is ending (its mailbox closed: the end drops what it holds after that) waits for
//! the `Down`, which the monitor guarantees right after the end publishes its
//! result; and for a calling process, whose answer is delivered as soon as it is
//! known, a reply dropped while the callee is ending answers nothing (the `Down` is
//! on its way). A reply dropped on any other thread, panicking or not (a helper
//! thread the callee handed it to), answers "no reply" at once: its callee lives on.
//!
//! # A process's call
//!
//! The [`Call`] handler, on the worker that stepped the caller: arms the call's timer
//! (a `Timer::Call`, with no deadline when the call has no timeout), sets the
//! monitor, sends the request, and parks the yield's completer in the slot (or
//! completes it at once if an answer came meanwhile). Whoever answers first takes the
//! completer out under the slot's lock and completes it outside, after removing the
//! monitor (unless the monitor is what fired) and the timer. The timer's release —
//! the caller withdrew the yield (a cancel) or ended — closes the slot and drops the
//! completer uncompleted, so a call never outlives its caller's interest.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buggify::{self, buggify, Buggify};
use crate::engine::cell::CellRef;
use crate::engine::completion::RawCompleter;
use crate::engine::handle::Handle;
use crate::engine::held::MessageCount;
use crate::engine::process::Command;
use crate::engine::process::Tag;
use crate::engine::process::{SuspendKind, SuspendPoint};
use crate::engine::shared::Shared;
use crate::error::YieldError;
use crate::exit::ExitReason;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::runtime::drop_quietly;
use crate::services::monitors::MonitorRef;
use crate::services::timers::{Timer, Timers};
use crate::sync::{Condvar, Mutex};
use crate::time::clock;
use crate::type_name::{request_mismatch, request_path, Short, WithArticle};

/// A request as the callee receives it: `recv!(Request<Q, R>)` (or a hand-written
/// process's message payload). Answer with `reply.send(value)`.
///
/// ```
/// use wsched::prelude::*;
/// use wsched::Scheduler;
///
/// /// Answers `Request<u32, u32>` calls with the double of the request.
/// struct Doubler;
///
/// #[process]
/// impl Doubler {
///     #[entry]
///     fn serve(&mut self) -> Result<(), BoxError> {
///         loop {
///             let Request { request, reply, .. } = recv!(Request<u32, u32>)?;
///             reply.send(request * 2);
///         }
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let pid = scheduler.spawn_detached(Doubler, "serve", ())?;
/// let four: u32 = scheduler.call(pid, 2_u32, std::time::Duration::from_secs(5))?;
/// assert_eq!(four, 4);
/// # Ok::<(), BoxError>(())
/// ```
#[non_exhaustive]
pub struct Request<Q, R> {
    /// What the caller asked.
    pub request: Q,
    /// Where the answer goes. Dropping it unanswered fails the call at once with
    /// [`CallError::NoReply`].
    pub reply: Reply<R>,
}

impl<Q, R> Request<Q, R> {
    /// A request and the reply handle of `slot`.
    fn new(request: Q, slot: Arc<CallSlot>) -> Self {
        Self {
            request,
            reply: Reply {
                slot: Some(slot),
                _answer: PhantomData,
            },
        }
    }
}

impl<Q: fmt::Debug, R> fmt::Debug for Request<Q, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

/// The answer handle of a call: answers once.
pub struct Reply<R> {
    slot: Option<Arc<CallSlot>>,
    _answer: PhantomData<fn(R)>,
}

impl<R: Any + Send> Reply<R> {
    /// Answers the call. Returns `false` when the caller had given up (timed out or
    /// was cancelled) or the call had failed already: the value is dropped quietly.
    pub fn send(mut self, value: R) -> bool {
        let slot = self.slot.take().expect("a reply answers once");
        slot.answer(Answer::Replied(Payload::new(value)))
    }
}

impl<R: Any + Send> Reply<R> {
    /// Answers the call, or gives `value` back when the caller had given up (timed
    /// out, was cancelled, or ended) or the call had failed already: for a value
    /// that must not be lost, such as a job handed to whichever caller still waits.
    ///
    /// # Errors
    /// The value, when nobody will see it.
    pub fn try_send(mut self, value: R) -> Result<(), R> {
        let slot = self.slot.take().expect("a reply answers once");
        slot.offer(Answer::Replied(Payload::new(value)))
            .map_err(|refused| match refused {
                Answer::Replied(payload) => payload
                    .downcast::<R>()
                    .unwrap_or_else(|_| unreachable!("the payload offered")),
                _ => unreachable!("the answer offered"),
            })
    }
}

impl<R> Reply<R> {
    /// Disarms the reply without answering (the request came back undelivered).
    fn disarm(mut self) {
        self.slot = None;
    }
}

#[cfg(feature = "cluster")]
impl<Q, R> Request<Q, R> {
    /// The request and its slot, the reply disarmed: the request is crossing to
    /// another node, and the answer will come back into the slot from there.
    pub(crate) fn into_parts(self) -> (Q, Option<Arc<CallSlot>>) {
        let mut reply = self.reply;
        (self.request, reply.slot.take())
    }

    /// A request from a caller on another node: the first answer goes to
    /// `forward`.
    pub(crate) fn forwarded(request: Q, forward: Box<dyn FnOnce(Answer) + Send>) -> Self {
        let slot = Arc::new(CallSlot::new());
        slot.inner.lock().state = SlotState::Forward(forward);
        Self::new(request, slot)
    }
}

impl<R> Drop for Reply<R> {
    /// Answers "no reply", whatever thread drops it. Dropped while a worker unwinds
    /// (a step panicking, most likely its callee's), the answer waits until the
    /// worker has caught the panic: if the panic ended the callee, the callee is
    /// then ending and its monitor's "callee died" wins (see the module docs).
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            if std::thread::panicking() && crate::engine::worker::on_a_worker() {
                unwound::defer(slot);
            } else {
                slot.answer(Answer::NoReply);
            }
        }
    }
}

/// Replies dropped while a worker thread unwound, answered once the worker caught
/// the panic ([`settle`](unwound::settle), after every run of a process).
pub(crate) mod unwound {
    use std::cell::{Cell, RefCell};
    use std::sync::Arc;

    use crate::services::calls::{Answer, CallSlot};

    std::thread_local! {
        /// Whether `DEFERRED` holds anything: the check after every run, one load
        /// of a thread-local without a destructor.
        static ANY: Cell<bool> = const { Cell::new(false) };
        static DEFERRED: RefCell<Vec<Arc<CallSlot>>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn defer(slot: Arc<CallSlot>) {
        let deferred = DEFERRED.try_with(|deferred| {
            deferred.borrow_mut().push(slot.clone());
            ANY.set(true);
        });
        if deferred.is_err() {
            // The thread is going away: nothing would answer later.
            slot.answer(Answer::NoReply);
        }
    }

    /// Answers the deferred replies' "no reply". Called by a worker after it ran a
    /// process (and, if the process's step panicked, ended it).
    #[inline]
    pub(crate) fn settle() {
        if ANY.try_with(Cell::get).unwrap_or(false) {
            settle_all();
        }
    }

    #[inline(never)]
    fn settle_all() {
        ANY.set(false);
        let slots = DEFERRED.with(|deferred| std::mem::take(&mut *deferred.borrow_mut()));
        for slot in slots {
            slot.answer(Answer::NoReply);
        }
    }
}

impl<R> fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reply")
            .field("answered", &self.slot.is_none())
            .finish()
    }
}

/// Why a call returned no reply.
#[non_exhaustive]
pub enum CallError<Q> {
    /// The callee did not exist or had ended before the request was delivered; the
    /// request is given back.
    NoSuchProcess {
        /// The callee.
        pid: Pid,
        /// The request, never delivered.
        request: Q,
    },
    /// The callee is live but its bounded mailbox is full and rejects messages
    /// ([`Overflow::Reject`](crate::Overflow::Reject)): the request was not
    /// delivered and is given back. The callee is busy, not gone: call again once it
    /// has taken in some of its mailbox, shed the load, or spawn it with a larger
    /// capacity.
    MailboxFull {
        /// The callee.
        pid: Pid,
        /// The request, never delivered.
        request: Q,
    },
    /// The callee is on another node of a cluster (the `cluster` feature) and the
    /// request could not cross: its node is down or the PID is of an old
    /// incarnation ([`SendErrorKind::NoConnection`](crate::SendErrorKind::NoConnection)),
    /// or `Request<Q, R>` was not registered with `ClusterConfig::register_call`
    /// ([`SendErrorKind::NotEncodable`](crate::SendErrorKind::NotEncodable)). The
    /// request is given back.
    Unreachable {
        /// The callee.
        pid: Pid,
        /// Why the request could not cross.
        kind: crate::error::SendErrorKind,
        /// The request, never delivered.
        request: Q,
    },
    /// The callee ended before it replied.
    CalleeDied {
        /// The callee.
        pid: Pid,
        /// Why it ended.
        reason: ExitReason,
    },
    /// No answer came within the timeout; a reply arriving later is dropped.
    ///
    /// Its message names the request the callee must receive, a `Request<Q, R>`, and
    /// says where the callee was and whether the request still waited in its mailbox:
    /// a receive of another type there (a `Request` with another reply type, say)
    /// never takes it.
    #[non_exhaustive]
    Timeout {
        /// The callee.
        pid: Pid,
        /// The reply type the call expected, `R`, as [`std::any::type_name`] spells it.
        reply: &'static str,
        /// Where the callee was suspended when the call gave up; `None` if it was
        /// not (it was running, or had ended), or did not say (a hand-written process
        /// that reports no suspension point).
        callee_at: Option<SuspendPoint>,
        /// Whether a request of the call's types, a `Request<Q, R>`, still waited in
        /// the callee's mailbox, not received, when the call gave up (this call's, or
        /// another caller's of the same types); `None` when that is not known (a
        /// timeout played by the [`testing`](crate::testing) harness).
        request_waiting: Option<bool>,
    },
    /// The callee dropped the [`Reply`] without answering. A callee that drops it
    /// while it is still running — including by returning from its entry or step
    /// with the reply unanswered, even with an error — gives this, since the drop
    /// comes first; one that ends while holding it (a panic, a link, a kill, the
    /// request still unread in its mailbox) gives [`CalleeDied`](Self::CalleeDied).
    NoReply {
        /// The callee.
        pid: Pid,
    },
    /// The calling process is being cancelled (shutdown or a cancel request): it
    /// stopped waiting, and a reply arriving later is dropped. The request may have
    /// been delivered. Later suspension points work normally, so the entry can clean
    /// up.
    Cancelled {
        /// The callee.
        pid: Pid,
    },
    /// The [`Call`] yield itself failed: the call's timer could not be armed (no
    /// timer thread could be started), a handler registered for [`Call`] in place of
    /// the scheduler's failed, or the answer was read with other types than the call
    /// was made with.
    Failed {
        /// The callee.
        pid: Pid,
        /// What failed.
        error: YieldError,
    },
}

impl<Q> CallError<Q> {
    /// The callee.
    pub fn pid(&self) -> Pid {
        match self {
            Self::NoSuchProcess { pid, .. }
            | Self::MailboxFull { pid, .. }
            | Self::Unreachable { pid, .. }
            | Self::CalleeDied { pid, .. }
            | Self::Timeout { pid, .. }
            | Self::NoReply { pid }
            | Self::Cancelled { pid }
            | Self::Failed { pid, .. } => *pid,
        }
    }

    /// The request, if it was never delivered.
    pub fn into_request(self) -> Option<Q> {
        match self {
            Self::NoSuchProcess { request, .. }
            | Self::MailboxFull { request, .. }
            | Self::Unreachable { request, .. } => Some(request),
            _ => None,
        }
    }

    /// A [`Timeout`](Self::Timeout) of a call of `pid` answered with an `R`, which
    /// was at `callee_at` with `waiting` in its mailbox (`None`: not known).
    fn timeout<R: Any>(
        pid: Pid,
        callee_at: Option<SuspendPoint>,
        waiting: Option<&[MessageCount]>,
    ) -> Self
    where
        Q: Any,
    {
        let request = std::any::type_name::<Request<Q, R>>();
        Self::Timeout {
            pid,
            reply: std::any::type_name::<R>(),
            callee_at,
            request_waiting: waiting.map(|w| w.iter().any(|m| m.type_name == request)),
        }
    }

    /// Whether this is [`Timeout`](Self::Timeout).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// Whether this is [`Cancelled`](Self::Cancelled).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Cancelled { .. })
    }
}

impl<Q> fmt::Debug for CallError<Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<Q> fmt::Display for CallError<Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchProcess { pid, .. } => write!(
                f,
                "call to {pid} not delivered: no such process (it never existed or has \
                 ended); the request is in the error"
            ),
            Self::MailboxFull { pid, .. } => write!(
                f,
                "call to {pid} not delivered: the process is live but its bounded mailbox \
                 is full; call again once it has taken in its messages, shed the load, or \
                 spawn it with a larger capacity (the request is in the error)"
            ),
            Self::Unreachable { pid, kind, .. } => match kind {
                crate::error::SendErrorKind::NotEncodable => write!(
                    f,
                    "call to {pid} not delivered: it is on another node, and the call's \
                     `Request<{}, _>` cannot cross; register it on every node with \
                     `ClusterConfig::register_call::<Q, R>()` (the request is in the error)",
                    Short(std::any::type_name::<Q>())
                ),
                _ => write!(
                    f,
                    "call to {pid} not delivered: its node is down or unreachable, or the \
                     PID is of an earlier incarnation of it (the request is in the error)"
                ),
            },
            Self::CalleeDied { pid, reason } => {
                write!(f, "{pid} ended before it replied to the call: {reason}")
            }
            Self::Timeout {
                pid,
                reply,
                callee_at,
                request_waiting,
            } => timeout_message(
                f,
                *pid,
                (std::any::type_name::<Q>(), reply),
                callee_at.as_ref(),
                *request_waiting,
            ),
            Self::NoReply { pid } => write!(
                f,
                "{pid} dropped the call's reply handle without answering; it must call \
                 `reply.send(value)`"
            ),
            Self::Cancelled { pid } => write!(
                f,
                "the call to {pid} was abandoned: the calling process is asked to stop"
            ),
            Self::Failed { pid, error } => write!(f, "the call to {pid} failed: {error}"),
        }
    }
}

impl<Q> std::error::Error for CallError<Q> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Its message is in ours (as for every error of the crate: see `error.rs`).
            Self::Failed { error, .. } => error.source(),
            _ => None,
        }
    }
}

/// The message of [`CallError::Timeout`]: the request the call sent, a
/// `Request<Q, R>` (`types` are the names of `Q` and `R`), where the callee was, and
/// whether the request still waited in its mailbox; with why a receive there does
/// not take it, when its type tells.
fn timeout_message(
    f: &mut fmt::Formatter<'_>,
    pid: Pid,
    (request, reply): (&str, &str),
    callee_at: Option<&SuspendPoint>,
    request_waiting: Option<bool>,
) -> fmt::Result {
    let sent_full = format!("{}<{request}, {reply}>", request_path());
    let sent = Short(&sent_full);
    write!(
        f,
        "{pid} did not reply within the timeout to the call's `{sent}` (the call expects {} \
         reply)",
        WithArticle(reply)
    )?;
    let Some(request_waiting) = request_waiting else {
        return write!(
            f,
            "; give it longer, or check that it receives `{sent}` and answers it"
        );
    };
    if !request_waiting {
        f.write_str("; it took the request but has not answered it")?;
        if let Some(point) = callee_at {
            write!(f, ", and waits at {point}")?;
        }
        return f.write_str("; give it longer, or check that it answers with `reply.send(value)`");
    }
    match callee_at.map(|point| (point, point.kind)) {
        Some((
            point,
            SuspendKind::Receive {
                message_type: Some(receives),
            },
        )) => {
            write!(
                f,
                "; it waits at {point}, so the request stays in its mailbox: "
            )?;
            match request_mismatch(&sent_full, receives) {
                Some(mismatch) => {
                    write!(
                        f,
                        "{mismatch}; make the call's types and the receive's agree"
                    )
                }
                None => write!(f, "it must receive `{sent}`"),
            }
        }
        Some((point, _)) => write!(
            f,
            "; the request is still in its mailbox, not received yet (it is at {point}); \
             give it longer, or check that it receives `{sent}`"
        ),
        None => write!(
            f,
            "; the request is still in its mailbox, not received yet; give it longer, or \
             check that it receives `{sent}`"
        ),
    }
}

/// What reached a call's slot.
pub(crate) enum Answer {
    Replied(Payload),
    NoReply,
    CalleeDied(ExitReason),
    /// A process's call timer fired (a thread times out on its own): where the callee
    /// was, and the types of the messages waiting for it (`None`: not known).
    TimedOut(Option<SuspendPoint>, Option<Vec<MessageCount>>),
    /// The request came back undelivered: a `Request<Q, R>` in a payload.
    NoSuchProcess(Payload),
    /// The request came back from a full bounded mailbox: a `Request<Q, R>` in a
    /// payload.
    MailboxFull(Payload),
    /// The request could not cross to the callee's node: a `Request<Q, R>` in a
    /// payload, and why.
    Unreachable(Payload, crate::error::SendErrorKind),
}

impl Answer {
    /// The answer for a request `send` gave back: a full mailbox, or no such process.
    fn undelivered(error: crate::error::SendError) -> Self {
        use crate::error::SendErrorKind;
        match error.kind() {
            SendErrorKind::MailboxFull => Self::MailboxFull(error.into_payload()),
            kind @ (SendErrorKind::NoConnection
            | SendErrorKind::NotEncodable
            | SendErrorKind::NodeBusy) => Self::Unreachable(error.into_payload(), kind),
            _ => Self::NoSuchProcess(error.into_payload()),
        }
    }
}

/// A process waiting on a call: the yield's completer, and what its answerer needs
/// to clean up after it.
struct Waiter {
    completer: RawCompleter,
    /// The call's monitor on the callee, removed once the call is answered.
    monitor: MonitorRef,
}

enum SlotState {
    /// Nobody answered yet.
    Waiting,
    /// A process waits: the first answer completes its yield.
    Process(Waiter),
    Answered(Answer),
    /// The caller gave up or collected its answer: later answers are dropped.
    Closed,
    /// The caller is on another node: the first answer goes there (see
    /// `cluster/calls.rs`).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    Forward(Box<dyn FnOnce(Answer) + Send>),
}

struct Inner {
    state: SlotState,
    /// For a process's call, from before its request is sent: the scheduler and the
    /// callee, to tell a "no reply" dropped by an ending callee (see the module docs).
    process: Option<(Handle, Pid)>,
}

/// Where a call's outcome lands (see the module docs).
pub(crate) struct CallSlot {
    inner: Mutex<Inner>,
    filled: Condvar,
}

impl CallSlot {
    fn new() -> Self {
        Self {
            inner: Mutex::new(Inner {
                state: SlotState::Waiting,
                process: None,
            }),
            filled: Condvar::new(),
        }
    }

    /// Offers `answer`; `true` if it is the one the caller will see. A death
    /// overrides an uncollected "no reply" (see the module docs).
    pub(crate) fn answer(&self, answer: Answer) -> bool {
        match self.offer(answer) {
            Ok(()) => true,
            Err(refused) => {
                drop_quietly(refused);
                false
            }
        }
    }

    /// [`answer`](Self::answer), giving back an answer the caller will not see.
    fn offer(&self, answer: Answer) -> Result<(), Answer> {
        if matches!(answer, Answer::NoReply) && self.process_callee_ending() {
            // The callee's `Down` is on its way and will answer.
            return Err(answer);
        }
        let mut inner = self.inner.lock();
        if matches!(inner.state, SlotState::Forward(_)) {
            let SlotState::Forward(forward) =
                std::mem::replace(&mut inner.state, SlotState::Closed)
            else {
                unreachable!("matched Forward")
            };
            drop(inner);
            forward(answer);
            return Ok(());
        }
        let takes = matches!(
            (&inner.state, &answer),
            (SlotState::Waiting | SlotState::Process(_), _)
                | (SlotState::Answered(Answer::NoReply), Answer::CalleeDied(_))
        );
        if !takes {
            drop(inner);
            return Err(answer);
        }
        if matches!(inner.state, SlotState::Process(_)) {
            let SlotState::Process(waiter) = std::mem::replace(&mut inner.state, SlotState::Closed)
            else {
                unreachable!("matched Process")
            };
            let callee = inner.process.take().map(|(_, callee)| callee);
            drop(inner);
            waiter.complete(callee.expect("a process's call knows its callee"), answer);
            return Ok(());
        }
        let old = std::mem::replace(&mut inner.state, SlotState::Answered(answer));
        drop(inner);
        self.filled.notify_all();
        drop(old);
        Ok(())
    }

    /// Whether this is a process's call whose callee is ending (its mailbox closed).
    /// Asked outside the slot's lock: the registry has locks of its own.
    fn process_callee_ending(&self) -> bool {
        let process = self.inner.lock().process.clone();
        // A remote callee's death comes from its node, on the stream the "no reply"
        // came on, before it: nothing is on its way.
        process.is_some_and(|(handle, callee)| {
            callee.is_local() && !handle.shared().is_live_open(callee)
        })
    }

    /// Waits for an answer until `deadline`; `None` on timeout (the slot is closed,
    /// later answers dropped). `callee_ending` is asked (outside the slot's lock)
    /// about a "no reply": `true` waits on, until the deadline, for the death that is
    /// then on its way.
    fn wait(&self, deadline: Instant, callee_ending: impl Fn() -> bool) -> Option<Answer> {
        let mut ending = None;
        let mut inner = self.inner.lock();
        let mut timed_out = false;
        loop {
            if let SlotState::Answered(answer) = &inner.state {
                let no_reply = matches!(answer, Answer::NoReply);
                if no_reply && ending.is_none() && !timed_out {
                    drop(inner);
                    ending = Some(callee_ending());
                    inner = self.inner.lock();
                    continue;
                }
                if timed_out || !no_reply || ending != Some(true) {
                    let SlotState::Answered(answer) =
                        std::mem::replace(&mut inner.state, SlotState::Closed)
                    else {
                        unreachable!("matched Answered")
                    };
                    return Some(answer);
                }
            } else if timed_out {
                drop(inner);
                // Whatever arrived since is taken; later answers are dropped.
                return self.give_up();
            }
            timed_out = self.filled.wait_until(&mut inner, deadline).timed_out();
        }
    }

    /// The caller gives up (its timeout ran out): an answer already there is taken,
    /// anything later is dropped on its sender's side.
    pub(crate) fn give_up(&self) -> Option<Answer> {
        match std::mem::replace(&mut self.inner.lock().state, SlotState::Closed) {
            SlotState::Answered(answer) => Some(answer),
            SlotState::Waiting | SlotState::Closed => None,
            SlotState::Process(_) | SlotState::Forward(_) => {
                unreachable!("a thread's call has no waiting process and is not forwarded")
            }
        }
    }

    /// A process's call is sent: `completer` waits for the answer, completed at once
    /// if one came already.
    fn wait_in_process(&self, callee: Pid, completer: RawCompleter, monitor: MonitorRef) {
        let waiter = Waiter { completer, monitor };
        let mut inner = self.inner.lock();
        match std::mem::replace(&mut inner.state, SlotState::Closed) {
            SlotState::Waiting => inner.state = SlotState::Process(waiter),
            SlotState::Answered(answer) => {
                inner.process = None;
                drop(inner);
                waiter.complete(callee, answer);
            }
            SlotState::Closed | SlotState::Process(_) | SlotState::Forward(_) => {
                unreachable!("only the caller's handler closes the slot or waits on it")
            }
        }
    }

    /// The process's call timer fired: the answer says where the callee was and what
    /// waited in its mailbox (asked
    /// outside the slot's lock: the registry and the callee's mailbox have locks of
    /// their own).
    fn time_out(&self) {
        let process = self.inner.lock().process.clone();
        let (callee_at, waiting) = process
            .map(|(handle, callee)| handle.shared().callee_state(callee))
            .unwrap_or_default();
        self.answer(Answer::TimedOut(callee_at, Some(waiting)));
    }

    /// The process's call timer was released: the caller withdrew the yield (a
    /// cancel) or ended, or the call was answered. Its completer, if still waiting,
    /// is dropped uncompleted, and anything later is dropped.
    fn release(&self) {
        let mut inner = self.inner.lock();
        let old = std::mem::replace(&mut inner.state, SlotState::Closed);
        inner.process = None;
        drop(inner);
        match old {
            SlotState::Process(waiter) => {
                let handle = waiter.completer.handle().clone();
                handle
                    .shared()
                    .monitors()
                    .demonitor(handle.shared(), waiter.monitor);
                waiter.completer.release();
            }
            other => drop_quietly(other),
        }
    }
}

impl Waiter {
    /// Completes the calling process's yield with `answer`, after removing the call's
    /// monitor (unless it fired: then it is gone, and its table's lock is held) and
    /// its timer.
    fn complete(self, callee: Pid, answer: Answer) {
        let Self { completer, monitor } = self;
        let shared = completer.handle().shared();
        if !matches!(answer, Answer::CalleeDied(_)) {
            shared.monitors().demonitor(shared, monitor);
        }
        if !matches!(answer, Answer::TimedOut(..)) {
            // Released now rather than at its deadline; its release finds the slot
            // closed.
            shared
                .timers()
                .cancel(completer.cell().timers(), completer.tag());
        }
        completer.deliver(Ok(Payload::new(CallAnswer { callee, answer })));
    }
}

/// The call's timer, in the scheduler's timer service (see `time/timer.rs`):
/// fires at the call's deadline, or never for a call without a timeout; released when
/// the caller withdraws the yield or ends.
pub(crate) struct CallTimer {
    cell: CellRef,
    tag: Tag,
    slot: Arc<CallSlot>,
}

impl CallTimer {
    pub(crate) fn cell(&self) -> &CellRef {
        &self.cell
    }

    pub(crate) fn tag(&self) -> Tag {
        self.tag
    }

    pub(crate) fn fire(self) {
        self.slot.time_out();
    }

    pub(crate) fn release(self) {
        self.slot.release();
    }
}

#[cfg(loom)]
impl CallSlot {
    /// A slot and a reply to it, for the loom models.
    pub(crate) fn for_model<R>() -> (Arc<Self>, Reply<R>) {
        let slot = Arc::new(Self::new());
        let reply = Reply {
            slot: Some(slot.clone()),
            _answer: PhantomData,
        };
        (slot, reply)
    }

    pub(crate) fn wait_for_model(&self, callee_ending: bool) -> Option<Answer> {
        let far = Instant::now() + Duration::from_secs(3600);
        self.wait(far, || callee_ending)
    }
}

/// The blocking call of [`Handle::call`](crate::Handle::call).
pub(crate) fn call<Q, R>(
    shared: &Shared,
    pid: Pid,
    request: Q,
    timeout: Duration,
) -> Result<R, CallError<Q>>
where
    Q: Any + Send,
    R: Any + Send,
{
    assert!(
        !clock::on_simulation_thread(),
        "wsched: Handle::call was called on the thread that runs a simulation, where \
         nothing runs while it blocks; call from a process (`call!`) instead"
    );
    let slot = Arc::new(CallSlot::new());
    // Before the request goes: a death after it is delivered is seen with its reason.
    let monitor = shared
        .monitors()
        .monitor_for_call(shared, pid, slot.clone());
    let message = Request::<Q, R>::new(request, slot.clone());
    if let Err(error) = shared.send_message(None, pid, Payload::new(message)) {
        shared.monitors().demonitor(shared, monitor);
        return CallAnswer::new(pid, Answer::undelivered(error)).into_result();
    }
    let deadline = clock::now()
        .checked_add(timeout)
        .unwrap_or_else(|| clock::now() + Duration::from_secs(u32::MAX.into()));
    let answer = slot.wait(deadline, || pid.is_local() && !shared.is_live_open(pid));
    shared.monitors().demonitor(shared, monitor);
    match answer {
        None => {
            let (callee_at, waiting) = shared.callee_state(pid);
            Err(CallError::timeout::<R>(pid, callee_at, Some(&waiting)))
        }
        Some(answer) => CallAnswer {
            callee: pid,
            answer,
        }
        .into_result(),
    }
}

/// A call made by a process: a built-in [`Command`] that sends `callee` a
/// [`Request`] and completes with the [`CallAnswer`] — the reply, the callee's death
/// (a monitor watches it during the call: a death is an error at once, with its
/// reason), the reply dropped unanswered, or the timeout. A reply after the call gave
/// up is dropped quietly.
///
/// In `#[process]` code, [`call!`](crate::call) yields one and reads its answer as a
/// single suspension point. A hand-written process yields it like any command and
/// reads the answer from the completion with [`CallAnswer::into_result`]:
///
/// ```
/// use std::time::Duration;
/// use wsched::command::{Call, CallAnswer};
/// use wsched::prelude::*;
/// use wsched::{Context, Event, Events, InitError, Payloads, Process, Scheduler, Status};
/// use wsched::{StepError, StepOutput};
///
/// /// Asks `callee` for the double of 21 and finishes with the answer (or the
/// /// reason there was none).
/// struct Asker {
///     callee: Pid,
/// }
///
/// impl Process for Asker {
///     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
///         Ok(())
///     }
///
///     fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
///         for event in events {
///             if let Event::Completion(c) = event {
///                 // The completion of the `Call` yield: the call's outcome.
///                 let payload = c.result.map_err(StepError::new)?;
///                 let answer: CallAnswer = payload.downcast().map_err(StepError::new)?;
///                 let said = match answer.into_result::<u32, u32>() {
///                     Ok(n) => format!("got {n}"),
///                     Err(e) => e.to_string(),
///                 };
///                 out.set_status(Status::Done(Payload::new(said)));
///                 return Ok(());
///             }
///         }
///         let call = Call::new::<u32, u32>(self.callee, 21, Some(Duration::from_secs(5)));
///         out.yield_command(Tag(1), call);
///         out.set_status(Status::WaitingForYields);
///         Ok(())
///     }
/// }
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
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let callee = scheduler.spawn_detached(Doubler, "serve", ())?;
/// let asker = scheduler.spawn(Asker { callee }, "run", ())?;
/// assert_eq!(scheduler.wait(asker)?.downcast::<String>()?, "got 42");
/// # Ok::<(), BoxError>(())
/// ```
pub struct Call {
    callee: Pid,
    /// A `Request<Q, R>`, its reply answering `slot`.
    request: Payload,
    slot: Arc<CallSlot>,
    timeout: Option<Duration>,
    /// `Q` and `R`, for errors.
    types: fn() -> (&'static str, &'static str),
}

impl Call {
    /// A call of `callee` with `request`, answered with an `R`, giving up after
    /// `timeout` (`None`: waits until the reply, the callee's death or the caller's
    /// cancel). A timeout too long to represent as a deadline waits as long as
    /// `None` does.
    pub fn new<Q: Any + Send, R: Any + Send>(
        callee: Pid,
        request: Q,
        timeout: Option<Duration>,
    ) -> Self {
        let slot = Arc::new(CallSlot::new());
        Self {
            callee,
            request: Payload::new(Request::<Q, R>::new(request, slot.clone())),
            slot,
            timeout,
            types: || (std::any::type_name::<Q>(), std::any::type_name::<R>()),
        }
    }

    /// The process called.
    pub fn callee(&self) -> Pid {
        self.callee
    }

    /// How long the call waits for an answer (`None`: no limit).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The request, if it is a `Q`.
    pub fn request<Q: Any, R: Any>(&self) -> Option<&Q> {
        self.request
            .downcast_ref::<Request<Q, R>>()
            .map(|request| &request.request)
    }

    /// Takes the call apart into its request (for the testing harness, which plays
    /// the callee). The reply handle, never sent, is disarmed.
    pub(crate) fn into_request<Q: Any, R: Any>(self) -> Result<Q, Self> {
        let Self {
            callee,
            request,
            slot,
            timeout,
            types,
        } = self;
        match request.downcast::<Request<Q, R>>() {
            Ok(Request { request, reply }) => {
                reply.disarm();
                Ok(request)
            }
            Err(e) => Err(Self {
                callee,
                request: e.into_payload(),
                slot,
                timeout,
                types,
            }),
        }
    }

    /// The request's and the reply's type names.
    pub(crate) fn type_names(&self) -> (&'static str, &'static str) {
        (self.types)()
    }
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (request, reply) = self.type_names();
        f.debug_struct("Call")
            .field("callee", &self.callee)
            .field("request", &request)
            .field("reply", &reply)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Command for Call {
    type Output = CallAnswer;
}

/// The outcome of a [`Call`]: what its yield completes with. Read it with
/// [`into_result`](Self::into_result), with the types the call was made with.
pub struct CallAnswer {
    callee: Pid,
    answer: Answer,
}

impl CallAnswer {
    /// The process called.
    pub fn callee(&self) -> Pid {
        self.callee
    }

    /// The reply, or why there was none.
    ///
    /// # Errors
    /// As [`CallError`]'s variants say;
    /// [`CallError::Failed`] with [`YieldError::WrongOutputType`] when `Q` or `R` is
    /// not what the call was made with.
    pub fn into_result<Q: Any, R: Any>(self) -> Result<R, CallError<Q>> {
        let pid = self.callee;
        let wrong = |e: crate::PayloadTypeError| CallError::Failed {
            pid,
            error: YieldError::WrongOutputType {
                expected: e.expected(),
                actual: e.actual(),
            },
        };
        match self.answer {
            Answer::Replied(payload) => payload.downcast::<R>().map_err(wrong),
            Answer::NoReply => Err(CallError::NoReply { pid }),
            Answer::CalleeDied(reason) => Err(CallError::CalleeDied { pid, reason }),
            Answer::TimedOut(callee_at, waiting) => {
                Err(CallError::timeout::<R>(pid, callee_at, waiting.as_deref()))
            }
            Answer::NoSuchProcess(payload) => {
                let Request { request, reply } =
                    payload.downcast::<Request<Q, R>>().map_err(wrong)?;
                reply.disarm();
                Err(CallError::NoSuchProcess { pid, request })
            }
            Answer::MailboxFull(payload) => {
                let Request { request, reply } =
                    payload.downcast::<Request<Q, R>>().map_err(wrong)?;
                reply.disarm();
                Err(CallError::MailboxFull { pid, request })
            }
            Answer::Unreachable(payload, kind) => {
                let Request { request, reply } =
                    payload.downcast::<Request<Q, R>>().map_err(wrong)?;
                reply.disarm();
                Err(CallError::Unreachable { pid, kind, request })
            }
        }
    }

    /// The answer a call of `callee` gets (for the testing harness).
    pub(crate) fn new(callee: Pid, answer: Answer) -> Self {
        Self { callee, answer }
    }

    /// A call's request that never reached `callee`, given back (for the testing
    /// harness): `full`, refused by a full mailbox; else no such process.
    pub(crate) fn undelivered<Q: Any + Send, R: Any + Send>(
        callee: Pid,
        request: Q,
        full: bool,
    ) -> Self {
        let slot = Arc::new(CallSlot::new());
        let mut request = Request::<Q, R>::new(request, slot);
        request.reply.slot = None;
        let payload = Payload::new(request);
        let answer = if full {
            Answer::MailboxFull(payload)
        } else {
            Answer::NoSuchProcess(payload)
        };
        Self::new(callee, answer)
    }
}

impl fmt::Debug for CallAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let answer = match &self.answer {
            Answer::Replied(_) => "replied",
            Answer::NoReply => "no reply",
            Answer::CalleeDied(_) => "callee died",
            Answer::TimedOut(..) => "timed out",
            Answer::NoSuchProcess(_) => "no such process",
            Answer::MailboxFull(_) => "mailbox full",
            Answer::Unreachable(..) => "unreachable",
        };
        f.debug_struct("CallAnswer")
            .field("callee", &self.callee)
            .field("answer", &answer)
            .finish()
    }
}

/// The scheduler's handler for [`Call`], on the worker that stepped the caller (see
/// the module docs).
pub(crate) fn handle_call(timers: &Arc<Timers>, call: Call, completer: RawCompleter) {
    let Call {
        callee,
        request,
        slot,
        timeout,
        ..
    } = call;
    let handle = completer.handle().clone();
    let shared = handle.shared();
    let caller = completer.cell().pid();
    let (cell, tag) = (completer.cell().clone(), completer.tag());
    slot.inner.lock().process = Some((handle.clone(), callee));
    // The timer first: a call that cannot time out as asked fails before its
    // request goes. Released (closing the slot) if the caller withdraws or ends.
    let deadline = timeout.and_then(|timeout| timers.now().checked_add(timeout));
    // A rare path a simulation takes on purpose: the callee gets to run only at the
    // deadline, so that its reply and the timeout race.
    if let Some(deadline) = deadline.filter(|_| buggify(Buggify::ReplyAtDeadline)) {
        buggify::hold_until(callee, timers.fires_at(deadline));
    }
    let timer = Timer::Call(Box::new(CallTimer {
        cell: cell.clone(),
        tag,
        slot: slot.clone(),
    }));
    if let Err(refused) = timers.arm_at(deadline, timer) {
        let (timer, error) = refused.into_parts();
        drop(timer);
        // Closed first: the reply dropped with the unsent request answers nothing.
        let _ = slot.give_up_any();
        match error {
            Some(error) => completer.fail(error),
            // The service has shut down: every process has ended, the caller too.
            None => completer.release(),
        }
        drop_quietly(request);
        return;
    }
    // Before the request goes: a death after it is delivered is seen with its reason.
    let monitor = shared
        .monitors()
        .monitor_for_call(shared, callee, slot.clone());
    if let Err(error) = shared.send_message(Some(caller), callee, request) {
        shared.monitors().demonitor(shared, monitor);
        // Whatever the monitor said of a dead callee, or a reply dropped, is dropped.
        let _ = slot.give_up_any();
        shared.timers().cancel(cell.timers(), tag);
        let answer = CallAnswer::new(callee, Answer::undelivered(error));
        completer.deliver(Ok(Payload::new(answer)));
        return;
    }
    slot.wait_in_process(callee, completer, monitor);
}

/// A request made by a test (see `wsched::testing::request`): the request, and its
/// slot, where the reply lands.
pub(crate) fn test_request<Q, R>(request: Q) -> (Request<Q, R>, Arc<CallSlot>) {
    let slot = Arc::new(CallSlot::new());
    (Request::new(request, slot.clone()), slot)
}

impl CallSlot {
    /// The answer that arrived, if one did (for the testing harness: later answers are
    /// then dropped).
    pub(crate) fn take_answer(&self) -> Option<Answer> {
        let mut inner = self.inner.lock();
        if !matches!(inner.state, SlotState::Answered(_)) {
            return None;
        }
        match std::mem::replace(&mut inner.state, SlotState::Closed) {
            SlotState::Answered(answer) => Some(answer),
            _ => unreachable!("matched Answered"),
        }
    }

    /// Whether the answer there is a reply dropped unanswered (for the harness).
    pub(crate) fn holds_no_reply(&self) -> bool {
        matches!(
            self.inner.lock().state,
            SlotState::Answered(Answer::NoReply)
        )
    }

    /// Closes the slot whatever is in it (a call whose request was not delivered; a
    /// test's caller giving up).
    pub(crate) fn give_up_any(&self) -> Option<Answer> {
        let mut inner = self.inner.lock();
        inner.process = None;
        match std::mem::replace(&mut inner.state, SlotState::Closed) {
            SlotState::Answered(answer) => Some(answer),
            _ => None,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    #[test]
    fn the_request_path_the_type_names_read_is_the_requests() {
        let name = std::any::type_name::<super::Request<(), ()>>();
        assert_eq!(
            &name[..name.find('<').unwrap_or(name.len())],
            crate::type_name::REQUEST_PATH
        );
    }
}
