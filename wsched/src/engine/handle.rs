//! [`Handle`]: a reference to a scheduler, from any thread. The engine's part of it
//! is here (sending, cancelling, killing, waiting for results); the layers above add
//! theirs (spawning, names, calls, monitors, timed messages, observation) in `impl
//! Handle` blocks of their own.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::shared::Shared;
use crate::error::{CancelError, JoinError, SendError};
use crate::payload::Payload;
use crate::pid::Pid;

/// A cheap, cloneable reference to a scheduler, usable from any thread (handlers get
/// one through [`Completer::handle`](crate::command::Completer::handle)).
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl Handle {
    pub(crate) fn from_shared(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Sends `message` to `to` (with no sender PID). A process waiting for a message
    /// is woken; one waiting for yields gets it at its next step.
    ///
    /// To a process with a full bounded mailbox (see
    /// [`SpawnOptions::bounded_mailbox`](crate::SpawnOptions::bounded_mailbox)), the send fails with
    /// [`SendErrorKind::MailboxFull`](crate::SendErrorKind::MailboxFull) if the mailbox
    /// rejects, or succeeds and drops the oldest queued message if it drops (to the
    /// dead-letter hook, on this thread).
    ///
    /// # Errors
    /// [`SendError`] when `to` never existed or has finished, or its bounded mailbox
    /// is full and rejects; it gives the message back.
    pub fn send<T: Any + Send>(&self, to: Pid, message: T) -> Result<(), SendError> {
        self.shared.send_message(None, to, Payload::new(message))
    }

    /// Asks `pid` to stop, as shutdown does for every process: it receives
    /// [`Event::Cancel`](crate::Event::Cancel) — woken whatever it waits for — and
    /// may clean up, even by yielding more commands, before it finishes. Nothing
    /// forces it to finish.
    ///
    /// # Errors
    /// [`CancelError`] when `pid` never existed or has finished.
    pub fn cancel(&self, pid: Pid) -> Result<(), CancelError> {
        self.shared.cancel(pid)
    }

    /// Stops `pid` without another step, as shutdown stops the processes still live
    /// at its timeout: at once if it waits or sits in a queue, when its current step
    /// returns if it is running (a step cannot be interrupted). It gets no cancel and
    /// no say; its `close` runs, its result is [`ProcessError::Stopped`](crate::ProcessError::Stopped),
    /// and monitors and links learn [`ExitReason::Killed`](crate::ExitReason::Killed).
    /// Use [`cancel`](Self::cancel) first and kill what did not finish in time: a
    /// [`Supervisor`](crate::supervisor::Supervisor)'s shutdown does exactly that.
    ///
    /// A kill is not a failure (like a cancel, somebody decided it), so it is not
    /// reported as unobserved, and shutdown's report does not list it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wsched::{ExitReason, Scheduler};
    /// # use wsched::{Context, Events, InitError, Payloads, Process, Status, StepError, StepOutput};
    /// # /// Ignores everything, cancels included.
    /// # struct Stubborn;
    /// # impl Process for Stubborn {
    /// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
    /// #         out.set_status(Status::WaitingForMessage);
    /// #         Ok(())
    /// #     }
    /// # }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build()?;
    /// let pid = scheduler.spawn_detached(Stubborn, "run", ())?;
    /// let down = scheduler.monitor(pid);
    /// scheduler.cancel(pid)?;
    /// assert!(down.wait_timeout(Duration::from_millis(20)).is_none(), "it ignores its cancel");
    /// scheduler.kill(pid)?;
    /// let reason = down.wait_timeout(Duration::from_secs(20)).expect("killed").reason;
    /// assert_eq!(reason, ExitReason::Killed);
    /// assert_eq!(scheduler.metrics().stopped, 1);
    /// assert!(scheduler.shutdown(Duration::from_secs(1)).stopped.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`CancelError`] when `pid` never existed or has finished.
    pub fn kill(&self, pid: Pid) -> Result<(), CancelError> {
        self.shared.kill(pid)
    }

    /// Blocks until `pid` finishes and returns its result (claiming it: a result is
    /// handed out once).
    ///
    /// # Errors
    /// [`JoinError::Failed`] when the process ended with an error; otherwise why the
    /// result cannot be had (no such process, already claimed, detached).
    pub fn wait(&self, pid: Pid) -> Result<Payload, JoinError> {
        self.shared.wait(pid, None)
    }

    /// Like [`wait`](Self::wait), giving up after `timeout` with
    /// [`JoinError::TimedOut`] (the result can then still be claimed later).
    ///
    /// # Errors
    /// As [`wait`](Self::wait), plus [`JoinError::TimedOut`].
    pub fn wait_timeout(&self, pid: Pid, timeout: Duration) -> Result<Payload, JoinError> {
        self.shared.wait(pid, Some(timeout))
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle").finish_non_exhaustive()
    }
}
