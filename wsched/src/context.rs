//! What a running process can do to the world outside its own steps.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::error::{CancelError, SendError, SpawnError};
use crate::payload::{IntoPayloads, Payload, Payloads};
use crate::pid::Pid;
use crate::process::{IntoProcess, Process};

/// Handed to [`Process::init`]: the process's own PID and a way to send messages and
/// spawn processes on the scheduler (or the [`testing`](crate::testing) harness) that
/// runs it. Cheap to clone; keep it for later steps.
#[derive(Clone)]
pub struct Context {
    pid: Pid,
    backend: Arc<dyn Backend>,
}

impl Context {
    pub(crate) fn new(pid: Pid, backend: Arc<dyn Backend>) -> Self {
        Self { pid, backend }
    }

    /// This process's PID.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Sends `message` to `to`, as coming from this process.
    ///
    /// # Errors
    /// [`SendError`] when `to` does not exist or has finished; the error gives the
    /// message back.
    pub fn send<T: Any + Send>(&self, to: Pid, message: T) -> Result<(), SendError> {
        self.backend.send(Some(self.pid), to, Payload::new(message))
    }

    /// Asks `pid` to stop: it receives [`Event::Cancel`](crate::Event::Cancel) (for
    /// `#[process]` processes, the pending suspension point returns a cancellation
    /// error) and may clean up, even by yielding, before it finishes.
    ///
    /// # Errors
    /// [`CancelError`] when `pid` does not exist or has finished.
    pub fn cancel(&self, pid: Pid) -> Result<(), CancelError> {
        self.backend.cancel(Some(self.pid), pid)
    }

    /// Spawns `process` running entry `method` with `input`. Its result is kept until
    /// someone claims it with a join or a wait.
    ///
    /// # Errors
    /// [`SpawnError`] when the entry does not exist, its `init` fails or panics, or
    /// the scheduler is shutting down.
    pub fn spawn<P: IntoProcess>(
        &self,
        process: P,
        method: &str,
        input: impl IntoPayloads,
    ) -> Result<Pid, SpawnError> {
        self.spawn_boxed(process, method, input, false)
    }

    /// Like [`spawn`](Self::spawn), but nobody will claim the result: it is dropped
    /// when the process finishes, so fire-and-forget processes do not accumulate.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn).
    pub fn spawn_detached<P: IntoProcess>(
        &self,
        process: P,
        method: &str,
        input: impl IntoPayloads,
    ) -> Result<Pid, SpawnError> {
        self.spawn_boxed(process, method, input, true)
    }
}

impl Context {
    fn spawn_boxed<P: IntoProcess>(
        &self,
        process: P,
        method: &str,
        input: impl IntoPayloads,
        detached: bool,
    ) -> Result<Pid, SpawnError> {
        let process = Box::new(process.into_process());
        let input = input.into_payloads();
        self.backend
            .spawn(Some(self.pid), process, method, input, detached)
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").field("pid", &self.pid).finish()
    }
}

/// What a [`Context`] talks to: the scheduler, or the testing harness's recorder.
pub(crate) trait Backend: Send + Sync + 'static {
    fn spawn(
        &self,
        parent: Option<Pid>,
        process: Box<dyn Process>,
        method: &str,
        input: Payloads,
        detached: bool,
    ) -> Result<Pid, SpawnError>;

    fn send(&self, from: Option<Pid>, to: Pid, payload: Payload) -> Result<(), SendError>;

    fn cancel(&self, from: Option<Pid>, pid: Pid) -> Result<(), CancelError>;
}
