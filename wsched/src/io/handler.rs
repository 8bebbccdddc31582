//! Async handlers: a command performed as a future on the I/O runtime.
//!
//! # A yield's way through
//!
//! On the worker, right after the step that yielded (as any handler on the worker):
//! the command is taken, the limit checked (a handler with
//! [`max_in_flight`](AsyncOptions::max_in_flight) and [`WhenFull::Fail`] fails the
//! yield at once when it is full), the work registered in flight
//! (`services/in_flight.rs`), the deadline armed on the scheduler's own timers
//! (linked to the process, under the yield's tag, so withdrawing the yield releases
//! it with the rest), the user's closure called to make the future, and the future
//! spawned on the I/O runtime. The tokio task's abort handle is then given to the
//! work.
//!
//! On the runtime: the task waits for a place (when the handler is limited and
//! queues), runs the future, catching a panic, and *claims* the work for its result.
//! Only if the claim wins does it deliver: a deadline or a withdrawal that came
//! first has already claimed it, and then the result is dropped.
//!
//! Whatever ends the work first claims it: the result, the deadline (which fails the
//! yield with [`YieldError::TimedOut`] and aborts the task) or the process giving up
//! on it (which aborts the task). Aborting a tokio task drops its future at its next
//! poll, or at once if it is idle: with it go its sockets and whatever else it held.
//! A task dropped by its runtime without being claimed (the runtime shut down)
//! fails its yield as [`YieldError::Dropped`], so no process waits forever.

use std::any::type_name;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::command::handler::{take_command, Registration};
use crate::engine::cell::CellRef;
use crate::engine::completion::RawCompleter;
use crate::engine::handle::Handle;
use crate::engine::process::Command;
use crate::error::{BoxError, YieldError};
use crate::payload::Payload;
use crate::pid::Pid;
use crate::services::in_flight::{Claim, Work, WorkCounts};
use crate::services::timers::Timer;
use crate::tag::Tag;

/// What an async handler does when [`max_in_flight`](AsyncOptions::max_in_flight)
/// futures are already running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WhenFull {
    /// The yield waits, in arrival order, for a running future to end (counted in
    /// [`AsyncHandlerMetrics::queued`]). Its process can still withdraw it or end
    /// meanwhile; its timeout runs from the yield, not from the start.
    #[default]
    Queue,
    /// The yield fails at once with [`YieldError::Busy`].
    Fail,
}

/// Options of an async handler (see
/// [`Builder::async_handler_with`](crate::Builder::async_handler_with)).
///
/// ```
/// use std::time::Duration;
/// use wsched::io::{AsyncOptions, WhenFull};
///
/// let options = AsyncOptions::new()
///     .max_in_flight(8)
///     .when_full(WhenFull::Queue)
///     .timeout(Duration::from_secs(5));
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default)]
pub struct AsyncOptions {
    max_in_flight: Option<usize>,
    when_full: WhenFull,
    timeout: Option<Duration>,
}

impl AsyncOptions {
    /// No limit, no timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `limit` futures of this handler run at once; what happens to more is
    /// [`when_full`](Self::when_full)'s choice. Zero is taken as one.
    pub fn max_in_flight(mut self, limit: usize) -> Self {
        self.max_in_flight = Some(limit.max(1));
        self
    }

    /// What a yield does when the handler is full (default [`WhenFull::Queue`]).
    pub fn when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }

    /// A yield not completed `timeout` after it was dispatched fails with
    /// [`YieldError::TimedOut`], and its future is dropped. Measured on the
    /// scheduler's timers (millisecond ticks, never early).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// What an async handler knows of the yield it serves.
///
/// It can be moved into the future: [`is_wanted`](Self::is_wanted) tells the future,
/// at any point, whether the process still waits for the result (the future is
/// dropped anyway when it does not, at its next `.await`; a future that computes
/// between awaits can check it).
pub struct IoContext {
    work: Arc<Work>,
}

impl IoContext {
    /// The process that yielded the command.
    pub fn pid(&self) -> Pid {
        self.work.cell().pid()
    }

    /// The yield's tag.
    pub fn tag(&self) -> Tag {
        self.work.tag()
    }

    /// Whether the process still waits for the result: false once the yield was
    /// withdrawn, the process ended, the deadline passed or the scheduler stopped.
    pub fn is_wanted(&self) -> bool {
        self.work.is_wanted()
    }

    /// The scheduler, to send messages or spawn processes from the future.
    pub fn handle(&self) -> &Handle {
        self.work.cell().handle()
    }
}

impl fmt::Debug for IoContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoContext")
            .field("command", &self.work.command_name())
            .field("pid", &self.pid())
            .field("tag", &self.tag())
            .field("wanted", &self.is_wanted())
            .finish()
    }
}

pub use crate::observe::metrics::AsyncHandlerMetrics;

/// What one async handler's counts say now.
pub(crate) fn read_metrics(command: &'static str, counts: &WorkCounts) -> AsyncHandlerMetrics {
    AsyncHandlerMetrics {
        command,
        in_flight: WorkCounts::read(&counts.in_flight),
        queued: WorkCounts::read(&counts.queued),
        completed: WorkCounts::read(&counts.completed),
        failed: WorkCounts::read(&counts.failed),
        timed_out: WorkCounts::read(&counts.timed_out),
        aborted: WorkCounts::read(&counts.aborted),
    }
}

/// An async handler as the builder keeps it: the registration for the handler
/// table, and its counts for the metrics.
pub(crate) struct AsyncRegistration {
    pub(crate) registration: Registration,
    pub(crate) command: &'static str,
    pub(crate) counts: Arc<WorkCounts>,
}

impl AsyncRegistration {
    /// The registration of `handler` for `C`, with `options`.
    pub(crate) fn new<C, F, Fut, E>(options: AsyncOptions, handler: F) -> Self
    where
        C: Command,
        F: Fn(C, IoContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<C::Output, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        Self::with_fast_path(options, |_: &mut C| None, handler)
    }

    /// As [`new`](Self::new), with a fast path tried first, on the worker: when
    /// `now` can perform the command at once without blocking (a socket write the
    /// kernel takes whole), its result completes the yield there and then — no
    /// future, no hand-off to the I/O runtime and back. `None` sends the command
    /// (as `now` left it) on to `handler`.
    pub(crate) fn with_fast_path<C, N, F, Fut, E>(options: AsyncOptions, now: N, handler: F) -> Self
    where
        C: Command,
        N: Fn(&mut C) -> Option<Result<C::Output, E>> + Send + Sync + 'static,
        F: Fn(C, IoContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<C::Output, E>> + Send + 'static,
        E: Into<BoxError> + 'static,
    {
        let counts = Arc::new(WorkCounts::default());
        let limit = options
            .max_in_flight
            .map(|limit| Arc::new(Semaphore::new(limit)));
        let AsyncOptions {
            when_full,
            timeout,
            max_in_flight,
        } = options;
        let shared_counts = counts.clone();
        let call = move |payload: &mut Payload, cell: &CellRef, tag: Tag| {
            let mut command = take_command::<C>(payload);
            let raw = RawCompleter::for_yield(cell, tag, type_name::<C>);
            let counts = &shared_counts;
            if let Some(done) = now(&mut command) {
                crate::runtime::drop_quietly(command);
                let (result, counter) = match done {
                    Ok(output) => (Ok(Payload::new(output)), &counts.completed),
                    Err(error) => (
                        Err(YieldError::Failed {
                            command: type_name::<C>(),
                            source: error.into(),
                        }),
                        &counts.failed,
                    ),
                };
                counts.count(counter);
                raw.deliver(result);
                return;
            }
            let shared = cell.handle().shared();
            let runtime = match shared.io().handle() {
                Ok(runtime) => runtime.clone(),
                Err(error) => {
                    counts.count(&counts.failed);
                    crate::runtime::drop_quietly(command);
                    raw.fail(error);
                    return;
                }
            };
            let place = match (&limit, when_full) {
                (None, _) => Place::Free,
                (Some(limit), WhenFull::Fail) => match limit.clone().try_acquire_owned() {
                    Ok(permit) => Place::Held(permit),
                    Err(_) => {
                        counts.count(&counts.failed);
                        crate::runtime::drop_quietly(command);
                        raw.deliver(Err(YieldError::Busy {
                            command: type_name::<C>(),
                            limit: max_in_flight.unwrap_or(1),
                        }));
                        return;
                    }
                },
                (Some(limit), WhenFull::Queue) => Place::Wait(limit.clone()),
            };
            let in_flight = shared.in_flight();
            let work = in_flight.start(cell, tag, type_name::<C>, Some(counts.clone()));
            let context = IoContext { work: work.clone() };
            let future = match catch_unwind(AssertUnwindSafe(|| handler(command, context))) {
                Ok(future) => future,
                Err(panic) => {
                    in_flight.remove(&work);
                    work.claim(Claim::Result);
                    counts.count(&counts.failed);
                    raw.deliver(Err(YieldError::HandlerPanicked {
                        command: type_name::<C>(),
                        message: crate::runtime::panic_message(&*panic),
                    }));
                    return;
                }
            };
            if let Some(timeout) = timeout {
                // On the process's own timer list, under the yield's tag: armed here,
                // on the worker that stepped it, as every timer of a process is.
                if let Err((_, error)) = shared
                    .timers()
                    .arm(timeout, Timer::Deadline(work.clone(), timeout))
                {
                    in_flight.remove(&work);
                    work.claim(Claim::Result);
                    counts.count(&counts.failed);
                    crate::runtime::drop_quietly(future);
                    raw.fail(error);
                    return;
                }
            }
            let pending = Pending {
                raw: Some(raw),
                work: work.clone(),
                counts: counts.clone(),
                deadline: timeout.is_some(),
            };
            let task = runtime.spawn(run::<C, Fut, E>(future, place, pending));
            work.set_abort(Box::new(move || task.abort()));
        };
        Self {
            registration: Registration::on_worker::<C>(Arc::new(call)),
            command: type_name::<C>(),
            counts,
        }
    }
}

impl AsyncRegistration {
    /// This registration as a built-in handler's, which one of the user's for the
    /// same command replaces.
    pub(crate) fn builtin(mut self) -> Self {
        self.registration = self.registration.builtin();
        self
    }
}

/// Where a future runs with respect to its handler's limit.
enum Place {
    /// The handler has no limit.
    Free,
    /// A place taken at dispatch ([`WhenFull::Fail`]).
    Held(OwnedSemaphorePermit),
    /// A place to wait for ([`WhenFull::Queue`]).
    Wait(Arc<Semaphore>),
}

/// The yield a task answers, until it does. Dropped unanswered — the task was
/// aborted, or dropped by its runtime — it completes nothing if something else
/// claimed the work, and fails the yield as dropped if nothing did (the runtime
/// went away under it).
struct Pending {
    raw: Option<RawCompleter>,
    work: Arc<Work>,
    counts: Arc<WorkCounts>,
    /// Whether a deadline timer is armed for the yield.
    deadline: bool,
}

impl Pending {
    /// Delivers `result` if the work is still unclaimed, counting it in `counter`
    /// first (so the count is there when the process sees the result).
    fn answer(mut self, result: Result<Payload, YieldError>, counter: &AtomicU64) {
        let raw = self.raw.take().expect("answered once");
        if !self.work.claim(Claim::Result) {
            raw.cell().handle().shared().in_flight().remove(&self.work);
            raw.release();
            return;
        }
        self.counts.count(counter);
        raw.cell().handle().shared().in_flight().remove(&self.work);
        if self.deadline {
            // Before the completion, which lets the process reuse the tag.
            let cell = raw.cell();
            cell.handle()
                .shared()
                .timers()
                .cancel(cell.timers(), raw.tag());
        }
        raw.deliver(result);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(raw) = self.raw.take() else { return };
        if self.work.claim(Claim::Abort) {
            // Nothing else ended it: its runtime dropped it.
            raw.cell().handle().shared().in_flight().remove(&self.work);
            raw.deliver(Err(YieldError::Dropped {
                command: self.work.command_name(),
            }));
        } else {
            // Aborted: let go of the work, which the withdrawal left in the table.
            raw.cell().handle().shared().in_flight().remove(&self.work);
            raw.release();
        }
    }
}

/// Counts a future as running (or queued) for as long as it is.
struct Counted<'a> {
    counts: &'a WorkCounts,
    counter: &'a AtomicU64,
}

impl<'a> Counted<'a> {
    fn new(counts: &'a WorkCounts, counter: &'a AtomicU64) -> Self {
        counts.count(counter);
        Self { counts, counter }
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.counts.uncount(self.counter);
    }
}

/// The task of one yield.
async fn run<C, Fut, E>(future: Fut, place: Place, pending: Pending)
where
    C: Command,
    Fut: Future<Output = Result<C::Output, E>> + Send + 'static,
    E: Into<BoxError> + 'static,
{
    let counts = pending.counts.clone();
    let _permit = match place {
        Place::Free => None,
        Place::Held(permit) => Some(permit),
        Place::Wait(limit) => {
            let _queued = Counted::new(&counts, &counts.queued);
            // The semaphore is never closed.
            limit.acquire_owned().await.ok()
        }
    };
    let outcome = {
        let _running = Counted::new(&counts, &counts.in_flight);
        let mut future = std::pin::pin!(future);
        std::future::poll_fn(|cx| {
            match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
                Ok(Poll::Pending) => Poll::Pending,
                Err(panic) => Poll::Ready(Err(panic)),
            }
        })
        .await
    };
    let command = type_name::<C>();
    let (result, counter) = match outcome {
        Ok(Ok(output)) => (Ok(Payload::new(output)), &counts.completed),
        Ok(Err(error)) => (
            Err(YieldError::Failed {
                command,
                source: error.into(),
            }),
            &counts.failed,
        ),
        Err(panic) => (
            Err(YieldError::HandlerPanicked {
                command,
                message: crate::runtime::panic_message(&*panic),
            }),
            &counts.failed,
        ),
    };
    pending.answer(result, counter);
}
