//! The error types of the runtime. Each says what went wrong and, where it can, what
//! to do about it; errors that would otherwise lose a value carry it back.

use std::error::Error;
use std::fmt;

use crate::payload::{Payload, Returned};
use crate::pid::Pid;
use crate::type_name::{Short, WithArticle};

/// A boxed error that can cross threads.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

// Every error here that wraps another one writes the wrapped error's message into
// its own and gives the wrapped error's *source* as its source (not the wrapped
// error itself): a report that walks the chain (anyhow, eyre) then prints each
// message once, while `to_string()` alone still says everything. (The Rust API
// guidelines: include the source's text or return it from `source()`, never both.)

fn write_list(f: &mut fmt::Formatter<'_>, names: &[String]) -> fmt::Result {
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "`{name}`")?;
    }
    Ok(())
}

/// [`Process::init`](crate::Process::init) refused to start.
#[derive(Debug)]
#[non_exhaustive]
pub enum InitError {
    /// No entry has that name.
    UnknownMethod {
        /// The name that was asked for.
        method: String,
        /// The entries the process does have.
        available: Vec<String>,
    },
    /// The entry was given the wrong number of input payloads.
    ArgumentCount {
        /// The entry.
        entry: String,
        /// How many arguments it takes.
        expected: usize,
        /// How many payloads it was given.
        got: usize,
    },
    /// An input payload does not hold the argument's type.
    ArgumentType {
        /// The entry.
        entry: String,
        /// The argument's name.
        argument: String,
        /// The argument's position, from 0.
        position: usize,
        /// The argument's type.
        expected: &'static str,
        /// The type the payload holds.
        actual: &'static str,
    },
    /// Any other reason.
    Failed(BoxError),
}

impl InitError {
    /// An [`UnknownMethod`](Self::UnknownMethod) error.
    pub fn unknown_method(method: &str, available: &[&str]) -> Self {
        Self::UnknownMethod {
            method: method.to_owned(),
            available: available.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// A [`Failed`](Self::Failed) error from anything that converts into a boxed error
    /// (any error type, a `String`, a `&str`).
    pub fn failed(error: impl Into<BoxError>) -> Self {
        Self::Failed(error.into())
    }
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownMethod { method, available } if available.is_empty() => {
                write!(f, "no entry named `{method}`: this process has no entries")
            }
            Self::UnknownMethod { method, available } => {
                write!(f, "no entry named `{method}`; available entries: ")?;
                write_list(f, available)
            }
            Self::ArgumentCount {
                entry,
                expected,
                got,
            } => write!(
                f,
                "entry `{entry}` takes {expected} argument{} but was started with {got} input payload{}",
                if *expected == 1 { "" } else { "s" },
                if *got == 1 { "" } else { "s" },
            ),
            Self::ArgumentType {
                entry,
                argument,
                position,
                expected,
                actual,
            } => write!(
                f,
                "entry `{entry}`: argument `{argument}` (position {position}) is {}, \
                 but its input payload holds {}",
                WithArticle(expected),
                WithArticle(actual),
            ),
            Self::Failed(e) => write!(f, "init failed: {e}"),
        }
    }
}

impl Error for InitError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // Its message is in ours (see the top of this file).
            Self::Failed(e) => e.source(),
            _ => None,
        }
    }
}

/// [`Process::step`](crate::Process::step) failed; the process ends with this error.
#[derive(Debug)]
pub struct StepError(BoxError);

impl StepError {
    /// Wraps anything that converts into a boxed error: any error type, a `String`,
    /// a `&str`.
    pub fn new(error: impl Into<BoxError>) -> Self {
        Self(error.into())
    }

    /// The underlying error.
    pub fn get_ref(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }

    /// Takes the underlying error.
    pub fn into_inner(self) -> BoxError {
        self.0
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Error for StepError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

/// Which callback of a process panicked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// [`Process::init`](crate::Process::init).
    Init,
    /// [`Process::step`](crate::Process::step).
    Step,
    /// [`Process::close`](crate::Process::close).
    Close,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Init => "init",
            Self::Step => "step",
            Self::Close => "close",
        })
    }
}

/// Why a process ended without a result.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProcessError {
    /// A step returned an error (for macro processes: the entry returned `Err`).
    Failed(StepError),
    /// A callback panicked; the panic was caught and the worker carried on.
    Panicked {
        /// Where it panicked.
        phase: Phase,
        /// The panic message (`<non-string panic payload>` if it was not a string).
        message: String,
    },
    /// The process was stopped before it finished: shutdown's timeout ran out, or it
    /// was killed ([`Handle::kill`](crate::Handle::kill)).
    Stopped,
    /// A process it was linked to ended with a failure, and this one did not trap
    /// exits, so it was stopped too (see [`Context::link`](crate::Context::link)).
    Linked {
        /// The linked process that ended.
        pid: Pid,
        /// Why that one ended — or, if a link's failure ended it too, why the process
        /// whose failure started the chain ended: never itself `Linked`.
        reason: Box<crate::ExitReason>,
    },
}

impl ProcessError {
    /// The panic message, if the process panicked.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            Self::Panicked { message, .. } => Some(message),
            _ => None,
        }
    }
}

impl fmt::Display for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed(e) => write!(f, "process failed: {e}"),
            Self::Panicked { phase, message } => {
                write!(f, "process panicked in {phase}: {message}")
            }
            Self::Stopped => {
                f.write_str("process was stopped before it finished (killed, or by shutdown)")
            }
            Self::Linked { pid, reason } => write!(
                f,
                "process was stopped because linked process {pid} ended ({reason}); \
                 trap exits to be told with a message instead"
            ),
        }
    }
}

impl Error for ProcessError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // Its message is in ours (see the top of this file).
            Self::Failed(e) => e.source(),
            _ => None,
        }
    }
}

/// A process could not be spawned.
#[derive(Debug)]
#[non_exhaustive]
pub enum SpawnError {
    /// The scheduler is shutting down (or has shut down) and takes no new processes.
    ShuttingDown,
    /// The process's `init` refused the entry or its arguments.
    Init(InitError),
    /// The process's `init` panicked.
    InitPanicked {
        /// The panic message.
        message: String,
    },
    /// [`SpawnOptions::bounded_mailbox`](crate::SpawnOptions::bounded_mailbox) was
    /// given a capacity of 0, which no message could ever enter. The process was not
    /// started (`init` did not run).
    ZeroMailboxCapacity,
    /// Spawning on another node of a cluster failed (the `cluster` feature: a
    /// supervisor's remote child, say); the text says why.
    Remote(String),
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ShuttingDown => f.write_str(
                "cannot spawn: the scheduler is shutting down and takes no new processes",
            ),
            Self::Init(e) => write!(f, "cannot spawn: {e}"),
            Self::InitPanicked { message } => write!(f, "cannot spawn: init panicked: {message}"),
            Self::ZeroMailboxCapacity => f.write_str(
                "cannot spawn: a bounded mailbox needs a capacity of at least 1 message; \
                 give `SpawnOptions::bounded_mailbox` a capacity >= 1, or leave the mailbox \
                 unbounded",
            ),
            Self::Remote(why) => write!(f, "cannot spawn on another node: {why}"),
        }
    }
}

impl Error for SpawnError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // Its message is in ours (see the top of this file).
            Self::Init(e) => e.source(),
            _ => None,
        }
    }
}

/// Why a message could not be delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// No process ever had this PID on this scheduler.
    NoSuchProcess,
    /// The process has finished (or is finishing) and takes no more messages.
    Finished,
    /// The process's bounded mailbox is full and rejects messages when full (see
    /// [`SpawnOptions::bounded_mailbox`](crate::SpawnOptions::bounded_mailbox) and
    /// [`Overflow::Reject`](crate::Overflow::Reject)). The process is live: the same
    /// message may be sent again once it has taken in some of its mailbox.
    MailboxFull,
    /// The process lives on another node of a cluster that cannot be reached: the
    /// node is down, the PID belongs to an earlier incarnation of it (a PID of a
    /// restarted node's old processes is refused forever), or this scheduler is in
    /// no cluster (the `cluster` feature).
    NoConnection,
    /// The message was for a process on another node, and its type has no codec
    /// registered with the cluster, so it cannot cross ([`SendError::message_type`]
    /// names it). Register it on every node, under one name.
    NotEncodable,
    /// The message was for a process on another node, and the frames waiting to
    /// leave for the broker have reached the cluster's bound
    /// (`ClusterConfig::max_queued_frames`): the link is saturated. Nothing was
    /// lost; send again once it has drained, or slow the producer down.
    NodeBusy,
}

/// What to do about a full mailbox, for error messages.
macro_rules! full_advice {
    () => {
        "send again once the process has taken in its messages, shed the load, or \
         spawn the process with a larger capacity"
    };
}

/// What a [`SendErrorKind`] means, for error messages.
fn why(kind: SendErrorKind) -> &'static str {
    match kind {
        SendErrorKind::NoSuchProcess => "no such process",
        SendErrorKind::Finished => "the process has finished",
        SendErrorKind::MailboxFull => concat!("its bounded mailbox is full; ", full_advice!()),
        SendErrorKind::NoConnection => {
            "its node is down or unreachable, or the PID is of an earlier incarnation of that node"
        }
        SendErrorKind::NodeBusy => {
            "it is on another node, and the frames waiting to leave for the broker have \
             reached the cluster's bound; send again once they have drained"
        }
        SendErrorKind::NotEncodable => {
            "it is on another node, and the message's type has no codec for crossing nodes; \
             register it on every node with `ClusterConfig::register::<T>(name)`"
        }
    }
}

/// A message could not be delivered; the message is handed back.
///
/// `Send + Sync` like every error here, although the message need not be `Sync`: it
/// is only reachable by value, through [`into_payload`](Self::into_payload).
pub struct SendError {
    to: Pid,
    kind: SendErrorKind,
    payload: Returned,
}

impl SendError {
    pub(crate) fn new(to: Pid, kind: SendErrorKind, payload: Payload) -> Self {
        Self {
            to,
            kind,
            payload: Returned::new(payload),
        }
    }

    /// The PID the message was for.
    pub fn to(&self) -> Pid {
        self.to
    }

    /// Why it was not delivered.
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// The type name of the undelivered message.
    pub fn message_type(&self) -> &'static str {
        self.payload.type_name()
    }

    /// Takes back the undelivered message.
    pub fn into_payload(self) -> Payload {
        self.payload.into_payload()
    }
}

impl fmt::Debug for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("to", &self.to)
            .field("kind", &self.kind)
            .field("message_type", &self.payload.type_name())
            .finish()
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot send {} to {}: {} (the message is returned in this error)",
            WithArticle(self.payload.type_name()),
            self.to,
            why(self.kind)
        )
    }
}

impl Error for SendError {}

/// A cancel request could not be delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CancelError {
    pid: Pid,
    kind: SendErrorKind,
}

impl CancelError {
    pub(crate) fn new(pid: Pid, kind: SendErrorKind) -> Self {
        Self { pid, kind }
    }

    /// The process that was to be cancelled.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Why the request was not delivered.
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }
}

impl fmt::Display for CancelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot cancel {}: {}", self.pid, why(self.kind))
    }
}

impl Error for CancelError {}

/// A process could not be registered under a name.
///
/// ```
/// use wsched::{Pid, RegisterError};
///
/// let taken = RegisterError::Taken { name: "db".to_owned(), holder: Pid::from_raw(3) };
/// assert_eq!(
///     taken.to_string(),
///     "cannot register the name `db`: <3> holds it (unregister it first, or wait for <3> to end)"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegisterError {
    /// Another process holds the name, and has not ended.
    Taken {
        /// The name.
        name: String,
        /// The process that holds it.
        holder: Pid,
    },
    /// The process to register does not exist or has finished, so it cannot hold a
    /// name.
    NotAlive {
        /// The name.
        name: String,
        /// The process that was to hold it.
        pid: Pid,
        /// Whether it never existed or has finished.
        kind: SendErrorKind,
    },
}

impl RegisterError {
    /// The name that could not be registered.
    pub fn name(&self) -> &str {
        match self {
            Self::Taken { name, .. } | Self::NotAlive { name, .. } => name,
        }
    }
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Taken { name, holder } => write!(
                f,
                "cannot register the name `{name}`: {holder} holds it (unregister it first, \
                 or wait for {holder} to end)"
            ),
            Self::NotAlive { name, pid, kind } => {
                write!(f, "cannot register {pid} as `{name}`: {}", why(*kind))
            }
        }
    }
}

impl Error for RegisterError {}

/// Why a message sent to a name was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendNamedErrorKind {
    /// No live process holds the name.
    NotRegistered,
    /// The process that held the name finished before the message reached it.
    HolderFinished(Pid),
    /// The process that holds the name has a full bounded mailbox that rejects (see
    /// [`SendErrorKind::MailboxFull`]).
    MailboxFull(Pid),
}

/// A message sent to a name was not delivered; the message is handed back.
pub struct SendNamedError {
    name: String,
    kind: SendNamedErrorKind,
    payload: Returned,
}

impl SendNamedError {
    pub(crate) fn new(name: &str, kind: SendNamedErrorKind, payload: Payload) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            payload: Returned::new(payload),
        }
    }

    /// The name the message was for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Why it was not delivered.
    pub fn kind(&self) -> SendNamedErrorKind {
        self.kind
    }

    /// The type name of the undelivered message.
    pub fn message_type(&self) -> &'static str {
        self.payload.type_name()
    }

    /// Takes back the undelivered message.
    pub fn into_payload(self) -> Payload {
        self.payload.into_payload()
    }
}

impl fmt::Debug for SendNamedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendNamedError")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("message_type", &self.payload.type_name())
            .finish()
    }
}

impl fmt::Display for SendNamedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot send {} to the name `{}`: ",
            WithArticle(self.payload.type_name()),
            self.name
        )?;
        match self.kind {
            SendNamedErrorKind::NotRegistered => {
                f.write_str("no live process is registered under it")?;
            }
            SendNamedErrorKind::HolderFinished(pid) => {
                write!(f, "its holder {pid} finished before the message reached it")?;
            }
            SendNamedErrorKind::MailboxFull(pid) => {
                write!(
                    f,
                    concat!("its holder {} has a full bounded mailbox; ", full_advice!()),
                    pid
                )?;
            }
        }
        f.write_str(" (the message is returned in this error)")
    }
}

impl Error for SendNamedError {}

/// Why a timed message could not be armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimedSendErrorKind {
    /// No process ever had the target's PID on this scheduler.
    NoSuchProcess,
    /// The target has finished (or is finishing).
    Finished,
    /// The scheduler's timer thread is not running and could not be started; the
    /// next timed message (or `Sleep`) tries again. The OS error is in the message
    /// and in [`TimedSendError::io_error`].
    NoTimerThread,
    /// The target lives on another node that cannot be reached, or the message's
    /// type cannot cross nodes (see [`SendErrorKind::NoConnection`] and
    /// [`SendErrorKind::NotEncodable`]).
    Remote(SendErrorKind),
}

/// A timed message ([`Handle::send_after`](crate::Handle::send_after),
/// [`Handle::send_interval`](crate::Handle::send_interval)) could not be armed; the
/// message is handed back.
pub struct TimedSendError {
    to: Pid,
    kind: TimedSendErrorKind,
    source: Option<std::io::Error>,
    payload: Returned,
}

impl TimedSendError {
    pub(crate) fn new(to: Pid, kind: SendErrorKind, payload: Payload) -> Self {
        let kind = match kind {
            SendErrorKind::NoSuchProcess => TimedSendErrorKind::NoSuchProcess,
            SendErrorKind::Finished => TimedSendErrorKind::Finished,
            // Arming checks only that the target lives; a full mailbox is met when
            // the message falls due (see `engine/bounded.rs`).
            SendErrorKind::MailboxFull => unreachable!("arming pushes nothing"),
            kind @ (SendErrorKind::NoConnection
            | SendErrorKind::NotEncodable
            | SendErrorKind::NodeBusy) => TimedSendErrorKind::Remote(kind),
        };
        Self {
            to,
            kind,
            source: None,
            payload: Returned::new(payload),
        }
    }

    pub(crate) fn no_timer_thread(to: Pid, error: std::io::Error, payload: Payload) -> Self {
        Self {
            to,
            kind: TimedSendErrorKind::NoTimerThread,
            source: Some(error),
            payload: Returned::new(payload),
        }
    }

    /// The PID the message was for.
    pub fn to(&self) -> Pid {
        self.to
    }

    /// Why it was not armed.
    pub fn kind(&self) -> TimedSendErrorKind {
        self.kind
    }

    /// The type name of the message.
    pub fn message_type(&self) -> &'static str {
        self.payload.type_name()
    }

    /// The OS error that kept the timer thread from starting
    /// ([`NoTimerThread`](TimedSendErrorKind::NoTimerThread)).
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.source.as_ref()
    }

    /// Takes back the message (for an interval, the one it would have sent copies of).
    pub fn into_payload(self) -> Payload {
        self.payload.into_payload()
    }
}

impl fmt::Debug for TimedSendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedSendError")
            .field("to", &self.to)
            .field("kind", &self.kind)
            .field("source", &self.source)
            .field("message_type", &self.payload.type_name())
            .finish()
    }
}

impl fmt::Display for TimedSendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot send {} to {} later: ",
            WithArticle(self.payload.type_name()),
            self.to
        )?;
        match (self.kind, &self.source) {
            (TimedSendErrorKind::NoSuchProcess, _) => f.write_str("no such process")?,
            (TimedSendErrorKind::Finished, _) => f.write_str("the process has finished")?,
            (TimedSendErrorKind::Remote(kind), _) => f.write_str(why(kind))?,
            (TimedSendErrorKind::NoTimerThread, source) => {
                f.write_str("the timer thread could not be started")?;
                if let Some(source) = source {
                    write!(f, " ({source})")?;
                }
                f.write_str("; try again later")?;
            }
        }
        f.write_str(" (the message is returned in this error)")
    }
}

impl Error for TimedSendError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        // The OS error's message is in ours (see the top of this file).
        self.source.as_ref().and_then(Error::source)
    }
}

/// Waiting for (joining) a process's result failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum JoinError {
    /// No process ever had this PID on this scheduler.
    NoSuchProcess(Pid),
    /// Someone else already claimed (or is waiting to claim) the result: a result is
    /// handed out exactly once. Also what a join of a detached process that has
    /// already finished gets: once it is gone, the PID table no longer knows it was
    /// detached.
    AlreadyClaimed(Pid),
    /// The process was spawned detached: its result is discarded, not kept.
    Detached(Pid),
    /// The timeout ran out before the process finished; it is still running and its
    /// result can still be claimed.
    TimedOut(Pid),
    /// The process ended with an error.
    Failed {
        /// The process.
        pid: Pid,
        /// How it failed.
        error: ProcessError,
    },
}

impl JoinError {
    /// The process's own error, when it ended with one.
    pub fn process_error(&self) -> Option<&ProcessError> {
        match self {
            Self::Failed { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchProcess(pid) => write!(f, "cannot join {pid}: no such process"),
            Self::AlreadyClaimed(pid) => write!(
                f,
                "cannot join {pid}: its result was already claimed by another join or wait \
                 (or it was spawned detached and has finished: a detached process's result \
                 is not kept)"
            ),
            Self::Detached(pid) => write!(
                f,
                "cannot join {pid}: it was spawned detached, so its result is not kept"
            ),
            Self::TimedOut(pid) => write!(f, "timed out waiting for {pid}; it is still running"),
            Self::Failed { pid, error } => write!(f, "{pid} ended with an error: {error}"),
        }
    }
}

impl Error for JoinError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // Its message is in ours (see the top of this file).
            Self::Failed { error, .. } => error.source(),
            _ => None,
        }
    }
}

/// Why a yielded command produced no output.
#[derive(Debug)]
#[non_exhaustive]
pub enum YieldError {
    /// No handler is registered for the command's type.
    NoHandler {
        /// The command's type name.
        command: &'static str,
    },
    /// The handler dropped the completer without completing it.
    Dropped {
        /// The command's type name.
        command: &'static str,
    },
    /// The handler panicked.
    HandlerPanicked {
        /// The command's type name.
        command: &'static str,
        /// The panic message.
        message: String,
    },
    /// The handler reported a failure.
    Failed {
        /// The command's type name.
        command: &'static str,
        /// The handler's error.
        source: BoxError,
    },
    /// The process is being cancelled; the pending suspension point gives up.
    Cancelled,
    /// The handler did not complete within its timeout (an async handler's
    /// `AsyncOptions::timeout`, with the `tokio` feature); its work was dropped.
    TimedOut {
        /// The command's type name.
        command: &'static str,
        /// The timeout that passed.
        after: std::time::Duration,
    },
    /// The handler was already running as many commands as it may at once, and
    /// refuses more rather than queue them (an async handler's `WhenFull::Fail`,
    /// with the `tokio` feature).
    Busy {
        /// The command's type name.
        command: &'static str,
        /// How many it may run at once.
        limit: usize,
    },
    /// The completion held a value of another type than the command's output
    /// (only possible with hand-made completions, e.g. in the testing harness).
    WrongOutputType {
        /// The command's output type.
        expected: &'static str,
        /// The type the completion held.
        actual: &'static str,
    },
}

impl fmt::Display for YieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoHandler { command } => write!(
                f,
                "no handler is registered for command `{}`; register one on the scheduler builder",
                Short(command)
            ),
            Self::Dropped { command } => write!(
                f,
                "the handler of `{}` dropped its completer without completing it",
                Short(command)
            ),
            Self::HandlerPanicked { command, message } => {
                write!(f, "the handler of `{}` panicked: {message}", Short(command))
            }
            Self::Failed { command, source } => {
                write!(f, "command `{}` failed: {source}", Short(command))
            }
            Self::Cancelled => f.write_str("cancelled: the process is asked to stop"),
            Self::TimedOut { command, after } => write!(
                f,
                "command `{}` timed out after {after:?}; its work was dropped",
                Short(command)
            ),
            Self::Busy { command, limit } => write!(
                f,
                "command `{}` refused: its handler already runs {limit} at once (its \
                 `max_in_flight`); retry later, or let it queue with `WhenFull::Queue`",
                Short(command)
            ),
            Self::WrongOutputType { expected, actual } => write!(
                f,
                "completion holds {}, not the command's output type `{}`",
                WithArticle(actual),
                Short(expected)
            ),
        }
    }
}

impl YieldError {
    /// The handler's own error, for [`Failed`](Self::Failed): what it gave the
    /// completer's `fail`, or what an async handler's future returned as `Err`.
    pub fn failure(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        match self {
            Self::Failed { source, .. } => Some(&**source),
            _ => None,
        }
    }

    /// The handler's error, if it is an [`std::io::Error`] (an async handler's
    /// socket or file error), to look at its
    /// [`kind`](std::io::Error::kind).
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.failure()?.downcast_ref()
    }
}

impl Error for YieldError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // Its message is in ours (see the top of this file).
            Self::Failed { source, .. } => source.source(),
            _ => None,
        }
    }
}

/// The scheduler builder was given an impossible configuration.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// Zero workers were asked for; at least one is needed.
    NoWorkers,
    /// Two handlers were registered for one command type.
    DuplicateHandler {
        /// The command's type name.
        command: &'static str,
    },
    /// A worker or helper thread could not be started.
    Thread(std::io::Error),
    /// Joining what the builder was told to join once built failed: a cluster
    /// (the `cluster` feature; the error is a `wsched::cluster::ClusterError`).
    Join(Box<dyn Error + Send + Sync>),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoWorkers => {
                f.write_str("a scheduler needs at least one worker; set workers(n) with n >= 1")
            }
            Self::DuplicateHandler { command } => write!(
                f,
                "two handlers are registered for command `{}`; register each command type once",
                Short(command)
            ),
            Self::Thread(e) => write!(f, "could not start a scheduler thread: {e}"),
            Self::Join(e) => write!(f, "could not join: {e}"),
        }
    }
}

impl Error for BuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // Its message is in ours (see the top of this file).
            Self::Thread(e) => e.source(),
            _ => None,
        }
    }
}

/// Why `recv!` returned no message.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecvError {
    /// The process is being cancelled (shutdown or a cancel request). Later
    /// suspension points work normally, so the entry can clean up.
    Cancelled,
    /// The timeout of `recv!(timeout = …)` ran out; no message was taken.
    Timeout,
    /// The timeout's timer (a [`Sleep`](crate::command::Sleep) yield) failed, e.g. no timer is available.
    Timer(YieldError),
}

impl RecvError {
    /// Whether this is [`Cancelled`](Self::Cancelled).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Cancelled)
    }

    /// Whether this is [`Timeout`](Self::Timeout).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout)
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cancelled => f.write_str("cancelled: the process is asked to stop"),
            Self::Timeout => f.write_str("timed out waiting for a message"),
            Self::Timer(e) => write!(f, "the receive timeout's timer failed: {e}"),
        }
    }
}

impl Error for RecvError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // Its message is in ours (as for every error of the crate: see `error.rs`).
            Self::Timer(e) => e.source(),
            _ => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::error::Error;
    use std::fmt;
    use std::io;

    use super::{
        BoxError, BuildError, InitError, JoinError, ProcessError, SpawnError, StepError,
        TimedSendError, YieldError,
    };
    use crate::payload::Payload;
    use crate::pid::Pid;
    use crate::{CallError, RecvError};

    /// A user's error with a cause of its own, following the guideline: its message
    /// does not repeat the cause's.
    #[derive(Debug)]
    pub(crate) struct ReadConfig(pub(crate) io::Error);

    impl fmt::Display for ReadConfig {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("could not read the configuration")
        }
    }

    impl Error for ReadConfig {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    fn user_error() -> BoxError {
        Box::new(ReadConfig(io::Error::other("disk on fire")))
    }

    fn yield_failed() -> YieldError {
        YieldError::Failed {
            command: "app::Fetch",
            source: user_error(),
        }
    }

    fn process_failed() -> ProcessError {
        ProcessError::Failed(StepError::new(user_error()))
    }

    /// Walks the chain: no message repeats the next one (which would print it twice
    /// in a report), and the user's cause is still reachable at its end.
    pub(crate) fn assert_each_message_once(error: &(dyn Error + 'static)) {
        let mut level = error;
        let mut messages = vec![level.to_string()];
        while let Some(next) = level.source() {
            let (this, next_text) = (level.to_string(), next.to_string());
            assert!(
                !this.contains(&next_text),
                "`{this}` repeats its source `{next_text}`"
            );
            messages.push(next_text);
            level = next;
        }
        let whole = messages.join(": ");
        assert_eq!(whole.matches("disk on fire").count(), 1, "{whole}");
    }

    #[test]
    fn no_error_repeats_its_source() {
        let errors: Vec<Box<dyn Error + 'static>> = vec![
            Box::new(InitError::Failed(user_error())),
            Box::new(StepError::new(user_error())),
            Box::new(process_failed()),
            Box::new(SpawnError::Init(InitError::Failed(user_error()))),
            Box::new(JoinError::Failed {
                pid: Pid::from_raw(3),
                error: process_failed(),
            }),
            Box::new(yield_failed()),
            Box::new(BuildError::Thread(io::Error::other(ReadConfig(
                io::Error::other("disk on fire"),
            )))),
            Box::new(TimedSendError::no_timer_thread(
                Pid::from_raw(3),
                io::Error::other(ReadConfig(io::Error::other("disk on fire"))),
                Payload::new(1_u32),
            )),
            Box::new(CallError::<u32>::Failed {
                pid: Pid::from_raw(3),
                error: yield_failed(),
            }),
            Box::new(RecvError::Timer(yield_failed())),
        ];
        for error in &errors {
            assert_each_message_once(&**error);
        }
    }

    #[test]
    fn wrapped_messages_stay_in_the_display() {
        let join = JoinError::Failed {
            pid: Pid::from_raw(3),
            error: process_failed(),
        };
        assert_eq!(
            join.to_string(),
            "<3> ended with an error: process failed: could not read the configuration"
        );
        assert_eq!(join.source().unwrap().to_string(), "disk on fire");
        assert_eq!(
            yield_failed().to_string(),
            "command `Fetch` failed: could not read the configuration"
        );
    }
}
