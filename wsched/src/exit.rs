//! Why a process ended: [`ExitReason`], the value monitors deliver in
//! [`Down`](crate::Down) messages and links in [`Exit`](crate::Exit) messages, and that
//! [`ProcessError`] and [`JoinError`] convert to.
//!
//! A process's result (its output, or a [`ProcessError`]) is handed out once, to
//! whoever joins it. A reason is what everybody else may learn: it is `Clone`, keeps
//! only text (an error's `Display`, a panic's message), and is worked out from the
//! result when somebody wants it, never on the path of a process that nobody watches.
//!
//! Where to find one: in a [`Down`](crate::Down) (monitors), an [`Exit`](crate::Exit)
//! (links, for processes that trap exits), from a failed join
//! ([`JoinError::exit_reason`]) or any [`ProcessError`] ([`ProcessError::exit_reason`]).
//! Not in [`ProcessInfo`](crate::ProcessInfo): listings show live processes, which
//! have no reason yet.

use std::fmt;

use crate::error::RecvError;
use crate::error::{JoinError, Phase, ProcessError, StepError, YieldError};
use crate::pid::Pid;

/// Why a process ended, for those who watch it (monitors) rather than join it.
///
/// ```
/// use wsched::{ExitReason, Phase, ProcessError};
///
/// let panicked = ProcessError::Panicked { phase: Phase::Step, message: "boom".into() };
/// let reason = ExitReason::from(&panicked);
/// assert!(matches!(&reason, ExitReason::Panicked { message, .. } if message == "boom"));
/// assert!(!reason.is_normal());
/// assert_eq!(ExitReason::from(&ProcessError::Stopped), ExitReason::Killed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExitReason {
    /// It finished: the entry returned `Ok` (a hand-written process reported
    /// [`Status::Done`](crate::Status::Done)).
    Normal,
    /// A step failed: the entry returned `Err` (other than a cancellation), or a
    /// hand-written step returned a [`StepError`]. The error's text.
    Error {
        /// The error's `Display` text.
        message: String,
    },
    /// A callback panicked (the panic was caught; the worker carried on).
    Panicked {
        /// Where it panicked.
        phase: Phase,
        /// The panic message.
        message: String,
    },
    /// It was asked to stop ([`Handle::cancel`](crate::Handle::cancel), or a graceful
    /// shutdown) and ended by passing the cancellation on: its entry returned the
    /// `YieldError::Cancelled` or `RecvError::Cancelled` its suspension point gave it.
    Cancelled,
    /// The process was stopped without finishing ([`ProcessError::Stopped`]):
    /// shutdown's timeout ran out, or somebody killed it
    /// ([`Handle::kill`](crate::Handle::kill), e.g. a supervisor whose shutdown
    /// timeout for it ran out).
    Killed,
    /// A process it was linked to ended with a failure, and it did not trap exits
    /// ([`ProcessError::Linked`]).
    Linked {
        /// The linked process that ended.
        pid: Pid,
        /// Why that one ended — or, if a link's failure ended it too, why the process
        /// whose failure started the chain ended: never itself `Linked`.
        reason: Box<ExitReason>,
    },
    /// The process did not exist when it was watched: it had ended already, or was
    /// ending, or its PID was never issued. (Erlang's `noproc`.)
    NoSuchProcess,
    /// The process lives on another node of a cluster (the `cluster` feature), and
    /// that node is down, or was never reached: declared down after its silence, or
    /// after a lost message, or restarted as a new incarnation — or this scheduler
    /// is in no cluster. The process may still be running there; nothing more from
    /// it will arrive here. (Erlang's `noconnection`.)
    NoConnection,
}

impl ExitReason {
    /// Whether the process finished normally (its entry returned `Ok`). Every other
    /// reason is a failure of some kind.
    pub fn is_normal(&self) -> bool {
        matches!(self, Self::Normal)
    }

    /// The reason of a process whose result is `result`.
    pub(crate) fn of<T>(result: &Result<T, ProcessError>) -> Self {
        match result {
            Ok(_) => Self::Normal,
            Err(error) => error.into(),
        }
    }
}

/// Whether a step error is a cancellation passed on by the entry.
fn is_cancellation(error: &StepError) -> bool {
    let error = error.get_ref();
    matches!(error.downcast_ref(), Some(RecvError::Cancelled))
        || matches!(error.downcast_ref(), Some(YieldError::Cancelled))
}

impl From<&ProcessError> for ExitReason {
    fn from(error: &ProcessError) -> Self {
        match error {
            ProcessError::Failed(step) if is_cancellation(step) => Self::Cancelled,
            ProcessError::Failed(step) => Self::Error {
                message: step.to_string(),
            },
            ProcessError::Panicked { phase, message } => Self::Panicked {
                phase: *phase,
                message: message.clone(),
            },
            ProcessError::Stopped => Self::Killed,
            ProcessError::Linked { pid, reason } => Self::Linked {
                pid: *pid,
                reason: reason.clone(),
            },
        }
    }
}

impl ProcessError {
    /// Why the process ended, as monitors are told ([`ExitReason`]).
    pub fn exit_reason(&self) -> ExitReason {
        self.into()
    }
}

impl JoinError {
    /// Why the joined process ended, when the join got as far as its end: `Some` for
    /// [`Failed`](Self::Failed) (the process's [`ProcessError`] as a reason), `None`
    /// when the join itself failed (no such process, already claimed, detached,
    /// timed out).
    pub fn exit_reason(&self) -> Option<ExitReason> {
        self.process_error().map(ExitReason::from)
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Normal => f.write_str("finished normally"),
            Self::Error { message } => write!(f, "failed: {message}"),
            Self::Panicked { phase, message } => write!(f, "panicked in {phase}: {message}"),
            Self::Cancelled => f.write_str("cancelled: it was asked to stop and did"),
            Self::Killed => f.write_str("killed: stopped before it finished"),
            Self::Linked { pid, reason } => {
                write!(f, "stopped because linked process {pid} ended ({reason})")
            }
            Self::NoSuchProcess => {
                f.write_str("no such process: it had ended (or never existed) when it was watched")
            }
            Self::NoConnection => f.write_str(
                "no connection: its node is down or unreachable (it may still run there)",
            ),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn each_process_error_has_its_reason() {
        let failed = ProcessError::Failed(StepError::new("disk full"));
        assert_eq!(
            failed.exit_reason(),
            ExitReason::Error {
                message: "disk full".into()
            }
        );
        let cancelled = ProcessError::Failed(StepError::new(RecvError::Cancelled));
        assert_eq!(cancelled.exit_reason(), ExitReason::Cancelled);
        let cancelled = ProcessError::Failed(StepError::new(YieldError::Cancelled));
        assert_eq!(cancelled.exit_reason(), ExitReason::Cancelled);
        let timeout = ProcessError::Failed(StepError::new(RecvError::Timeout));
        assert!(matches!(timeout.exit_reason(), ExitReason::Error { .. }));
        assert_eq!(ProcessError::Stopped.exit_reason(), ExitReason::Killed);
        assert_eq!(ExitReason::of::<()>(&Ok(())), ExitReason::Normal);
        let join = JoinError::Failed {
            pid: Pid::from_raw(3),
            error: ProcessError::Stopped,
        };
        assert_eq!(join.exit_reason(), Some(ExitReason::Killed));
        assert_eq!(JoinError::TimedOut(Pid::from_raw(3)).exit_reason(), None);
    }

    #[test]
    fn reasons_say_what_happened() {
        let reason = ExitReason::Panicked {
            phase: Phase::Step,
            message: "index out of bounds".into(),
        };
        assert_eq!(reason.to_string(), "panicked in step: index out of bounds");
        assert!(ExitReason::Normal.is_normal());
        assert!(!ExitReason::NoSuchProcess.is_normal());
    }
}
