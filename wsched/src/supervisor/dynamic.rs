//! Dynamic supervision: children added, stopped, started again and removed while the
//! supervisor runs, as Erlang's `start_child`, `terminate_child`, `restart_child`
//! and `delete_child`.
//!
//! Each operation is a call to the supervisor process (a [`Request`] whose answer
//! is a `Result<_, ChildError>`), so it is made the same way from a process
//! ([`call!`](crate::call)) and from a thread ([`Handle::call`], or the
//! [`SupervisorHandle`](super::SupervisorHandle) methods that wrap it). The
//! supervisor answers in its own steps, in the order the requests arrive, so an
//! operation never races the supervisor's own restarts. A request that arrives while
//! a group restart or another child's termination is under way waits for it; one that
//! arrives while the supervisor shuts down is answered [`ChildError::ShuttingDown`].

use std::fmt;

use crate::payload::Payload;
use crate::pid::Pid;
use crate::runtime::{CallError, Request};

use super::spec::ChildSpec;

/// Adds a child to a running supervisor and starts it: call the supervisor with it
/// (`call!(sup, StartChild(spec))` in a process, or
/// [`SupervisorHandle::start_child`](super::SupervisorHandle::start_child)); the
/// answer is `Result<Pid, ChildError>`.
///
/// The child goes last: started after, and stopped before, every child already
/// there. Its id must be unique among the supervisor's children
/// ([`ChildError::AlreadyPresent`]). If it cannot start, the supervisor keeps running
/// and forgets the spec ([`ChildError::StartFailed`]).
#[derive(Debug)]
pub struct StartChild(pub ChildSpec);

/// Stops a running child and keeps its spec, not restarting it until asked
/// ([`RestartChild`]): the answer, `Result<(), ChildError>`, comes once it has
/// ended. It is stopped as the supervisor stops children at shutdown (cancelled,
/// then killed after its [shutdown timeout](ChildSpec::shutdown)). A child that is
/// not running is left as it is, and stays stopped. A
/// [temporary](super::Restart::Temporary) child's spec is removed with it, as
/// after any end of a temporary child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminateChild(pub String);

/// Starts a stopped child again (one [`TerminateChild`] stopped, or one that ended
/// and was not restarted): the answer is `Result<Pid, ChildError>`. A running child
/// is [`ChildError::Running`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartChild(pub String);

/// Removes a stopped child's spec: the answer is `Result<(), ChildError>`. A running
/// child is [`ChildError::Running`]: terminate it first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteChild(pub String);

/// Why a dynamic supervision request failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildError {
    /// The supervisor has no child with this id.
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// A child with this id exists already (running or stopped): ids are unique.
    AlreadyPresent {
        /// The id.
        id: String,
    },
    /// The child is running: restarting or deleting it needs it stopped first.
    Running {
        /// Its id.
        id: String,
        /// Its process.
        pid: Pid,
    },
    /// The child could not start (its factory or `init` refused or panicked).
    StartFailed {
        /// Its id.
        id: String,
        /// Why (the spawn error's text).
        message: String,
    },
    /// The supervisor is shutting down or has ended: it starts and stops nothing
    /// more.
    ShuttingDown,
    /// A [`Resize`](super::Resize) request to a supervisor that is no pool.
    NotAPool,
    /// The request got no answer from a supervisor: the process is not running (or
    /// is no supervisor), its mailbox is full, or the timeout passed.
    Unreachable {
        /// What the call said.
        message: String,
    },
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound { id } => write!(f, "the supervisor has no child `{id}`"),
            Self::AlreadyPresent { id } => write!(
                f,
                "the supervisor has a child `{id}` already; child ids must be unique \
                 (delete the old one first, or pick another id)"
            ),
            Self::Running { id, pid } => {
                write!(f, "child `{id}` is running as {pid}; terminate it first")
            }
            Self::StartFailed { id, message } => {
                write!(f, "child `{id}` could not start: {message}")
            }
            Self::ShuttingDown => f.write_str(
                "the supervisor is shutting down (or has ended) and starts or stops no child",
            ),
            Self::NotAPool => f.write_str(
                "only a pool (`Supervisor::pool`) can be resized; add children with \
                 `StartChild` instead",
            ),
            Self::Unreachable { message } => {
                write!(f, "the supervisor did not answer: {message}")
            }
        }
    }
}

impl std::error::Error for ChildError {}

impl ChildError {
    /// The error of a call to the supervisor that got no answer.
    pub(super) fn unreachable<Q>(error: CallError<Q>) -> Self {
        Self::Unreachable {
            message: error.to_string(),
        }
    }
}

/// A dynamic supervision request, as the supervisor queues it.
pub(super) enum DynamicRequest {
    Start(Request<StartChild, Result<Pid, ChildError>>),
    Terminate(Request<TerminateChild, Result<(), ChildError>>),
    Restart(Request<RestartChild, Result<Pid, ChildError>>),
    Delete(Request<DeleteChild, Result<(), ChildError>>),
    Resize(Request<super::Resize, Result<usize, ChildError>>),
}

impl DynamicRequest {
    /// The request in `payload`, or the payload back if it is none.
    pub(super) fn from_payload(payload: Payload) -> Result<Self, Payload> {
        let payload = match payload.downcast() {
            Ok(request) => return Ok(Self::Start(request)),
            Err(other) => other.into_payload(),
        };
        let payload = match payload.downcast() {
            Ok(request) => return Ok(Self::Terminate(request)),
            Err(other) => other.into_payload(),
        };
        let payload = match payload.downcast() {
            Ok(request) => return Ok(Self::Restart(request)),
            Err(other) => other.into_payload(),
        };
        let payload = match payload.downcast() {
            Ok(request) => return Ok(Self::Delete(request)),
            Err(other) => other.into_payload(),
        };
        match payload.downcast() {
            Ok(request) => Ok(Self::Resize(request)),
            Err(other) => Err(other.into_payload()),
        }
    }

    /// Answers [`ChildError::ShuttingDown`].
    pub(super) fn refuse(self) {
        match self {
            Self::Start(r) => drop(r.reply.send(Err(ChildError::ShuttingDown))),
            Self::Terminate(r) => drop(r.reply.send(Err(ChildError::ShuttingDown))),
            Self::Restart(r) => drop(r.reply.send(Err(ChildError::ShuttingDown))),
            Self::Delete(r) => drop(r.reply.send(Err(ChildError::ShuttingDown))),
            Self::Resize(r) => drop(r.reply.send(Err(ChildError::ShuttingDown))),
        }
    }
}
