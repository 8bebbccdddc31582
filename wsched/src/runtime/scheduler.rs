//! The public face of the runtime: [`Scheduler`] and [`Handle`].

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::builder::Builder;
use crate::command::TimerRef;
use crate::engine::cell::NewProcess;
use crate::engine::driver::{Driver, RunningWorker, RuntimeDriver};
use crate::engine::handle::Handle;
use crate::engine::process::IntoProcess;
use crate::engine::shared::Shared;
use crate::engine::spawn_options::SpawnOptions;
use crate::entry::EntryRef;
use crate::error::{
    BuildError, CancelError, JoinError, RegisterError, SendError, SendNamedError, SpawnError,
    TimedSendError,
};
use crate::observe::metrics::{Metrics, ProcessInfo};
use crate::observe::recorder::Recording;
use crate::payload::{IntoPayloads, Payload};
use crate::pid::Pid;
use crate::services::monitors::Monitor;
use crate::services::timed;
use crate::time::clock;
use crate::time::timed_ref::Repeat;

/// Runs processes on a pool of work-stealing worker threads.
///
/// ```
/// use wsched::{Context, Events, InitError, Payloads, Process, Scheduler, Status, StepError, StepOutput};
///
/// /// Answers once, with its input doubled.
/// struct Double(u64);
///
/// impl Process for Double {
///     fn init(&mut self, _: Context, method: &str, input: Payloads) -> Result<(), InitError> {
///         if method != "run" {
///             return Err(InitError::unknown_method(method, &["run"]));
///         }
///         let n = input.into_iter().next().ok_or_else(|| InitError::failed("run takes one u64"))?;
///         self.0 = n.downcast::<u64>().map_err(InitError::failed)?;
///         Ok(())
///     }
///
///     fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
///         out.set_status(Status::Done(wsched::Payload::new(self.0 * 2)));
///         Ok(())
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(2).build()?;
/// let pid = scheduler.spawn(Double(0), "run", (21_u64,))?;
/// assert_eq!(scheduler.wait(pid)?.downcast::<u64>()?, 42);
/// let report = scheduler.shutdown(std::time::Duration::from_secs(1));
/// assert!(report.stopped.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Dropping a scheduler that was not shut down shuts it down with a zero timeout:
/// live processes get a cancel and are stopped at once. (Dropped from inside one of
/// its own processes, it does so on a separate thread, since the dropping process
/// cannot wait for itself.)
pub struct Scheduler {
    handle: Handle,
    threads: Mutex<Vec<RunningWorker>>,
    report: Mutex<Option<ShutdownReport>>,
}

/// What [`Scheduler::shutdown`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Processes that were live when shutdown began, or spawned while it ran, and
    /// finished on their own (with a result or an error) before the timeout.
    pub finished: usize,
    /// Processes still live at the timeout, stopped (closed without finishing),
    /// sorted by PID. Their results are [`ProcessError::Stopped`](crate::ProcessError::Stopped).
    pub stopped: Vec<Pid>,
    /// How long the shutdown took.
    pub elapsed: Duration,
    /// When it timed out with [`Builder::record`] on: the recording, taken after
    /// the workers stopped (in ring mode, what led up to the timeout). Also written
    /// to [`RecordOptions::dump_on_timeout`](crate::RecordOptions::dump_on_timeout)'s
    /// path if one was given.
    pub recording: Option<Arc<Recording>>,
    /// Handler work given up during the shutdown because its processes ended or
    /// the scheduler stopped: async handlers' futures dropped, blocking jobs skipped
    /// or left to finish unread.
    pub aborted_work: u64,
}

impl Scheduler {
    /// A builder with defaults: one worker per available core, the built-in
    /// commands, no other handlers.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A scheduler with the default configuration.
    ///
    /// # Errors
    /// [`BuildError::Thread`] if a thread cannot be started.
    pub fn new() -> Result<Self, BuildError> {
        Builder::new().build()
    }

    pub(crate) fn from_parts(shared: Arc<Shared>, threads: Vec<RunningWorker>) -> Self {
        Self {
            handle: Handle { shared },
            threads: Mutex::new(threads),
            report: Mutex::new(None),
        }
    }

    /// This scheduler's own handle, borrowed.
    #[cfg(feature = "sim")]
    pub(crate) fn handle_ref(&self) -> &Handle {
        &self.handle
    }

    /// A handle to this scheduler.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// See [`Handle::spawn`].
    ///
    /// # Errors
    /// As [`Handle::spawn`].
    pub fn spawn<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Result<Pid, SpawnError> {
        self.handle.spawn(process, method, input)
    }

    /// A mailbox with a PID for this thread (see [`Inbox`](crate::Inbox)).
    ///
    /// # Errors
    /// As [`Handle::inbox`].
    pub fn inbox(&self) -> Result<crate::Inbox, SpawnError> {
        self.handle.inbox()
    }

    /// See [`Handle::spawn_detached`].
    ///
    /// # Errors
    /// As [`Handle::spawn`].
    pub fn spawn_detached<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Result<Pid, SpawnError> {
        self.handle.spawn_detached(process, method, input)
    }

    /// See [`Handle::spawn_with`].
    ///
    /// # Errors
    /// As [`Handle::spawn_with`].
    pub fn spawn_with<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
        options: SpawnOptions,
    ) -> Result<Pid, SpawnError> {
        self.handle.spawn_with(process, method, input, options)
    }

    /// See [`Handle::send`].
    ///
    /// # Errors
    /// As [`Handle::send`].
    pub fn send<T: Any + Send>(&self, to: Pid, message: T) -> Result<(), SendError> {
        self.handle.send(to, message)
    }

    /// See [`Handle::cancel`].
    ///
    /// # Errors
    /// As [`Handle::cancel`].
    pub fn cancel(&self, pid: Pid) -> Result<(), CancelError> {
        self.handle.cancel(pid)
    }

    /// See [`Handle::kill`].
    ///
    /// # Errors
    /// As [`Handle::kill`].
    pub fn kill(&self, pid: Pid) -> Result<(), CancelError> {
        self.handle.kill(pid)
    }

    /// See [`Handle::wait`].
    ///
    /// # Errors
    /// As [`Handle::wait`].
    pub fn wait(&self, pid: Pid) -> Result<Payload, JoinError> {
        self.handle.wait(pid)
    }

    /// See [`Handle::wait_timeout`].
    ///
    /// # Errors
    /// As [`Handle::wait_timeout`].
    pub fn wait_timeout(&self, pid: Pid, timeout: Duration) -> Result<Payload, JoinError> {
        self.handle.wait_timeout(pid, timeout)
    }

    /// See [`Handle::call`].
    ///
    /// # Errors
    /// As [`Handle::call`].
    pub fn call<Q: Any + Send, R: Any + Send>(
        &self,
        pid: Pid,
        request: Q,
        timeout: Duration,
    ) -> Result<R, crate::CallError<Q>> {
        self.handle.call(pid, request, timeout)
    }

    /// See [`Handle::monitor`].
    pub fn monitor(&self, pid: Pid) -> Monitor {
        self.handle.monitor(pid)
    }

    /// See [`Handle::register`].
    ///
    /// # Errors
    /// As [`Handle::register`].
    pub fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        self.handle.register(name, pid)
    }

    /// See [`Handle::unregister`].
    pub fn unregister(&self, name: &str) -> Option<Pid> {
        self.handle.unregister(name)
    }

    /// See [`Handle::whereis`].
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        self.handle.whereis(name)
    }

    /// See [`Handle::send_named`].
    ///
    /// # Errors
    /// As [`Handle::send_named`].
    pub fn send_named<T: Any + Send>(&self, name: &str, message: T) -> Result<(), SendNamedError> {
        self.handle.send_named(name, message)
    }

    /// See [`Handle::send_after`].
    ///
    /// # Errors
    /// As [`Handle::send_after`].
    pub fn send_after<T: Any + Send>(
        &self,
        to: Pid,
        message: T,
        delay: Duration,
    ) -> Result<TimerRef, TimedSendError> {
        self.handle.send_after(to, message, delay)
    }

    /// See [`Handle::send_interval`].
    ///
    /// # Errors
    /// As [`Handle::send_after`].
    pub fn send_interval<T: Any + Send + Clone>(
        &self,
        to: Pid,
        message: T,
        period: Duration,
    ) -> Result<TimerRef, TimedSendError> {
        self.handle.send_interval(to, message, period)
    }

    /// See [`Handle::metrics`].
    pub fn metrics(&self) -> Metrics {
        self.handle.metrics()
    }

    /// See [`Handle::processes`].
    pub fn processes(&self) -> Vec<ProcessInfo> {
        self.handle.processes()
    }

    /// See [`Handle::recording`].
    pub fn recording(&self) -> Option<Recording> {
        self.handle.recording()
    }

    /// See [`Handle::top`].
    ///
    /// # Errors
    /// See [`Handle::top`].
    pub fn top(
        &self,
        by: crate::top::TopBy,
        n: usize,
    ) -> Result<Vec<ProcessInfo>, crate::top::TopError> {
        self.handle.top(by, n)
    }

    /// See [`Handle::top_window`].
    ///
    /// # Errors
    /// See [`Handle::top_window`].
    pub fn top_window(
        &self,
        by: crate::top::TopBy,
        n: usize,
        window: Duration,
    ) -> Result<Vec<crate::top::WindowEntry>, crate::top::TopError> {
        self.handle.top_window(by, n, window)
    }

    /// The number of worker threads.
    pub fn workers(&self) -> usize {
        self.handle.shared.workers
    }

    /// Shuts down: stops accepting spawns, sends [`Event::Cancel`](crate::Event::Cancel)
    /// to every live process and lets them finish — they may keep running and
    /// yielding while they clean up — until `timeout`; then stops the rest (closing
    /// them without another step) and exits every worker thread.
    ///
    /// The children of a running [`Supervisor`](crate::supervisor::Supervisor) get
    /// no cancel from the shutdown: their supervisor, cancelled, stops them one at a
    /// time in reverse start order, each given its
    /// [shutdown timeout](crate::supervisor::ChildSpec::shutdown), as OTP stops an
    /// application. Give `timeout` room for those timeouts: what still runs when it
    /// passes is stopped at once.
    ///
    /// Returns within `timeout` plus the time the steps running at that moment take
    /// to return (a step that never returns cannot be interrupted). Calling it again
    /// returns the first report; afterwards [`spawn`](Self::spawn) fails with
    /// [`SpawnError::ShuttingDown`], while results of finished processes can still be
    /// claimed with [`wait`](Self::wait).
    ///
    /// # Panics
    /// When called from inside one of this scheduler's own processes or worker-side
    /// handlers: the calling process would wait for itself to end. Shut down from
    /// outside, or drop the scheduler there (dropping is allowed anywhere).
    pub fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        assert!(
            !crate::engine::worker::is_worker_of(&self.handle.shared),
            "wsched: Scheduler::shutdown was called from inside one of its own processes \
             (or a handler on its worker), which would wait for itself to end; call it \
             from outside the scheduler, or drop the Scheduler instead (a drop inside \
             the scheduler shuts it down on a separate thread)"
        );
        let mut report = self.report.lock();
        if let Some(report) = &*report {
            return report.clone();
        }
        let shared = &self.handle.shared;
        let started = clock::now();
        let metrics_before = shared.metrics();
        shared.stop_accepting();
        shared.cancel_all();
        let timed_out = !shared.wait_all_done(started + timeout);
        let stopped = if timed_out {
            shared.stop_all()
        } else {
            Vec::new()
        };
        shared.terminate();
        for thread in self.threads.lock().drain(..) {
            // A worker only panics on a broken invariant; surface it.
            if let Err(panic) = RuntimeDriver::join(thread) {
                std::panic::resume_unwind(panic);
            }
        }
        shared.release();
        // Its workers' spare cell memory went to the depot: give it back now that
        // they are gone (other schedulers' workers refill it as they need).
        crate::engine::cell::give_back_spare_blocks();
        let metrics_after = shared.metrics();
        let ended = |m: &Metrics| m.finished + m.failed;
        let finished = ended(&metrics_after) - ended(&metrics_before);
        let new = ShutdownReport {
            aborted_work: metrics_after.aborted_work - metrics_before.aborted_work,
            finished: usize::try_from(finished).unwrap_or(usize::MAX),
            stopped,
            elapsed: clock::since(started),
            recording: timed_out.then(|| shared.dump_recording()).flatten(),
        };
        *report = Some(new.clone());
        new
    }
}

impl Drop for Scheduler {
    /// Shuts down with a zero timeout. Dropped from inside one of its own processes
    /// (a worker thread), or by a thread in the middle of ending a process (a kill
    /// from outside dropping the body that owned the last `Scheduler`), it cannot
    /// wait for that process to end, so it hands the shutdown to a new thread and
    /// returns at once.
    fn drop(&mut self) {
        if crate::engine::worker::is_worker_of(&self.handle.shared)
            || crate::engine::shared::ending_a_process_here()
        {
            let orphan = Scheduler {
                handle: self.handle.clone(),
                threads: Mutex::new(std::mem::take(&mut *self.threads.lock())),
                report: Mutex::new(self.report.lock().take()),
            };
            // ManuallyDrop: if the thread cannot start, the closure is dropped here,
            // and dropping the orphan here would come back to this branch.
            let orphan = std::mem::ManuallyDrop::new(orphan);
            let spawned = std::thread::Builder::new()
                .name("wsched-shutdown".to_owned())
                .spawn(move || drop(std::mem::ManuallyDrop::into_inner(orphan)));
            if let Err(error) = spawned {
                // The orphan is leaked: its threads keep running until the program
                // exits. Nothing else can be done from here.
                eprintln!(
                    "wsched: a Scheduler dropped inside one of its processes could not \
                     start a thread to shut down ({error}); its threads are left running"
                );
            }
            return;
        }
        self.shutdown(Duration::ZERO);
        // Cells hold their processes' contexts, which point back at the shared state.
        self.handle.shared.clear_registry();
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("workers", &self.workers())
            .field("live", &self.handle.shared.live())
            .finish_non_exhaustive()
    }
}

impl Handle {
    /// Spawns `process`, running its entry `method` with `input` (`()`, a tuple of
    /// up to eight values, or [`Payloads`](crate::Payloads)). `init` runs on the
    /// calling thread, so its errors come back here; the steps run on the workers.
    /// The result is kept until claimed, once, by [`wait`](Self::wait) or a
    /// [`Join`](crate::command::Join).
    ///
    /// `method` is the entry's typed name (`Worker::RUN`, an [`Entry`](crate::Entry)
    /// that `#[process]` makes for each entry), and then `input` must be exactly the
    /// tuple of its argument types, checked at compile time; or its name (`"run"`),
    /// for any `input`, checked by `init`.
    ///
    /// # Errors
    /// [`SpawnError::Init`] when `init` refuses the entry or its arguments (e.g. an
    /// unknown method, listing the available ones), [`SpawnError::InitPanicked`] when
    /// it panics, [`SpawnError::ShuttingDown`] after shutdown began.
    pub fn spawn<P: IntoProcess, I: IntoPayloads>(
        &self,
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Result<Pid, SpawnError> {
        self.spawn_new(process, method.name(), input, false)
    }

    /// A mailbox with a PID for a thread outside the scheduler (see
    /// [`Inbox`](crate::Inbox)): processes send to it as to any process, and the
    /// thread receives with a timeout, by type or by pattern. It is a process: it
    /// can be monitored, linked and named, and it ends, normally, when dropped.
    ///
    /// # Errors
    /// [`SpawnError::ShuttingDown`] after shutdown began.
    pub fn inbox(&self) -> Result<crate::Inbox, SpawnError> {
        crate::services::inbox::Inbox::new(self)
    }

    /// Like [`spawn`](Self::spawn), but the result is dropped when the process
    /// finishes instead of being kept for a claim that will never come.
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
    /// ```
    /// use wsched::{Overflow, Scheduler, SpawnOptions};
    /// # use wsched::{Context, Events, InitError, Payloads, Process, Status, StepError, StepOutput};
    /// # struct Sink;
    /// # impl Process for Sink {
    /// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
    /// #         out.set_status(Status::WaitingForMessage);
    /// #         Ok(())
    /// #     }
    /// # }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build()?;
    /// // Keeps the 10 latest messages when it falls behind; the older ones go to the
    /// // dead-letter hook.
    /// let latest = SpawnOptions::new().bounded_mailbox(10, Overflow::DropOldest).detached();
    /// let pid = scheduler.spawn_with(Sink, "run", (), latest)?;
    /// scheduler.send(pid, 1_u32)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
        self.shared.spawn(self, None, options.apply(process))
    }

    fn spawn_new<P: IntoProcess>(
        &self,
        process: P,
        method: &str,
        input: impl IntoPayloads,
        detached: bool,
    ) -> Result<Pid, SpawnError> {
        let process = NewProcess::new(process, method, input.into_payloads(), detached);
        self.shared.spawn(self, None, process)
    }

    /// Registers `pid` under `name`: [`whereis`](Self::whereis) then finds it and
    /// [`send_named`](Self::send_named) reaches it, from anywhere, until the name is
    /// [`unregister`](Self::unregister)ed or `pid` ends, which frees it: once the
    /// process is done (its result published), the name is free to register again.
    ///
    /// A name is held by one process at a time; a process may hold several names.
    /// Registering a name again for the process that holds it succeeds and changes
    /// nothing. The same rules hold for [`Context::register`](crate::Context::register)
    /// and [`this::register`](crate::this::register).
    ///
    /// ```
    /// use wsched::{RegisterError, Scheduler};
    /// # use wsched::{Context, Events, InitError, Payloads, Process, Status, StepError, StepOutput};
    /// # /// Finishes with the first message it gets.
    /// # struct First;
    /// # impl Process for First {
    /// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
    /// #         for event in events {
    /// #             if let wsched::Event::Message(m) = event {
    /// #                 out.set_status(Status::Done(m.payload));
    /// #                 return Ok(());
    /// #             }
    /// #         }
    /// #         out.set_status(Status::WaitingForMessage);
    /// #         Ok(())
    /// #     }
    /// # }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build()?;
    /// let db = scheduler.spawn(First, "run", ())?;
    /// scheduler.register("db", db)?;
    /// assert_eq!(scheduler.whereis("db"), Some(db));
    ///
    /// let other = scheduler.spawn(First, "run", ())?;
    /// let taken = scheduler.register("db", other).unwrap_err();
    /// assert_eq!(taken, RegisterError::Taken { name: "db".into(), holder: db });
    ///
    /// scheduler.send_named("db", 42_u32)?;
    /// assert_eq!(scheduler.wait(db)?.downcast::<u32>()?, 42);
    /// // `db` ended: its name is free.
    /// assert_eq!(scheduler.whereis("db"), None);
    /// scheduler.register("db", other)?;
    /// # scheduler.send(other, ())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`RegisterError::Taken`] when another live process holds the name (it says
    /// which), [`RegisterError::NotAlive`] when `pid` never existed or has finished.
    pub fn register(&self, name: &str, pid: Pid) -> Result<(), RegisterError> {
        self.shared.names().register(&self.shared, name, pid)
    }

    /// Frees `name`, whoever holds it. Returns the live process that held it (`None`:
    /// no live process did).
    pub fn unregister(&self, name: &str) -> Option<Pid> {
        self.shared.names().unregister(&self.shared, name)
    }

    /// The live process registered under `name`. (A process that is ending right now
    /// may still be found; a message sent to it then fails and comes back.)
    pub fn whereis(&self, name: &str) -> Option<Pid> {
        self.shared.names().whereis(&self.shared, name)
    }

    /// Sends `message` (with no sender PID) to the process registered under `name`,
    /// as [`send`](Self::send) would to its PID.
    ///
    /// # Errors
    /// [`SendNamedError`] when no live process holds the name, or its holder finished
    /// before the message reached it; either way the error gives the message back.
    pub fn send_named<T: Any + Send>(&self, name: &str, message: T) -> Result<(), SendNamedError> {
        self.shared
            .names()
            .send(&self.shared, None, name, Payload::new(message))
    }

    /// Calls `pid` from outside: sends it a [`Request`](crate::Request) carrying
    /// `request` and a [`Reply`](crate::Reply) handle, and blocks until the reply,
    /// `timeout`, or the callee's end. A monitor on the callee during the call makes
    /// its death an error at once, with its reason; a reply after the timeout is
    /// dropped. Do not call from inside a process (it would block a worker): a
    /// process calls with [`call!`](crate::call) or a
    /// [`Call`](crate::command::Call) yield, which suspend it instead.
    ///
    /// # Errors
    /// [`CallError::NoSuchProcess`](crate::CallError::NoSuchProcess) (with the
    /// request back) when `pid` is not live;
    /// [`CallError::MailboxFull`](crate::CallError::MailboxFull) (with the request
    /// back) when it is live but its bounded mailbox is full and rejects; `CalleeDied`
    /// when it ends before it replies; `NoReply` when it drops the reply unanswered;
    /// `Timeout`.
    pub fn call<Q: Any + Send, R: Any + Send>(
        &self,
        pid: Pid,
        request: Q,
        timeout: Duration,
    ) -> Result<R, crate::CallError<Q>> {
        crate::services::calls::call(&self.shared, pid, request, timeout)
    }

    /// Monitors `pid` from outside: the returned [`Monitor`] receives exactly one
    /// [`Down`](crate::Down) when `pid` ends — at once, with
    /// [`ExitReason::NoSuchProcess`](crate::ExitReason::NoSuchProcess), if it has
    /// ended already, is ending, or never existed. A thread waits for it with
    /// [`Monitor::wait_timeout`]; dropping the monitor (or
    /// [`Monitor::demonitor`]) stops it. Processes monitor with
    /// [`Context::monitor`](crate::Context::monitor) and get the `Down` as a message.
    pub fn monitor(&self, pid: Pid) -> Monitor {
        self.shared.monitors().monitor_from_thread(self, pid)
    }

    /// Sends `message` (with no sender PID) to `to` once `delay` has passed: never
    /// earlier, and within about a millisecond after (plus wake-up latency). The
    /// returned [`TimerRef`] cancels it; dropping the ref does not.
    ///
    /// If `to` has ended when the message falls due, the message is dropped and
    /// counted in [`Metrics::undelivered_timed_messages`]. Messages still pending at
    /// shutdown are dropped (and counted) when the timer thread stops. A delay too
    /// long to represent never falls due: the message waits until cancelled or
    /// shutdown. [`Context::send_after`](crate::Context::send_after) and
    /// [`this::send_after`](crate::this::send_after) do the same from a process,
    /// which is then the sender; the timer outlives that process.
    ///
    /// # Errors
    /// [`TimedSendError`] when `to` never existed or has finished, or the timer thread
    /// could not be started; the error gives the message back.
    pub fn send_after<T: Any + Send>(
        &self,
        to: Pid,
        message: T,
        delay: Duration,
    ) -> Result<TimerRef, TimedSendError> {
        timed::arm(self, None, to, delay, Repeat::once(message))
    }

    /// Sends a clone of `message` (with no sender PID) to `to` every `period`, until
    /// the returned [`TimerRef`] cancels it or `to` ends. The first message falls
    /// due one period from now; each next one a whole number of periods after that,
    /// so the interval does not drift, and a period the timer thread missed entirely
    /// (a stalled machine) is skipped, not made up in a burst. Periods shorter than a
    /// millisecond, the timer's resolution, are rounded up to one.
    ///
    /// The first message that falls due after `to` has ended is dropped and counted
    /// in [`Metrics::undelivered_timed_messages`], and the interval stops by itself
    /// (its ref's [`is_active`](TimerRef::is_active) turns false). An interval still
    /// running at shutdown is dropped then (counting its next message). A clone that
    /// panics stops the interval too (counted likewise).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use wsched::Scheduler;
    /// # use wsched::{Context, Events, InitError, Payloads, Process, Status, StepError, StepOutput};
    /// # /// Finishes after three messages, with how many it got.
    /// # struct Three(u32);
    /// # impl Process for Three {
    /// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
    /// #         self.0 += events.filter(|e| matches!(e, wsched::Event::Message(_))).count() as u32;
    /// #         if self.0 >= 3 {
    /// #             out.set_status(Status::Done(wsched::Payload::new(self.0)));
    /// #         } else {
    /// #             out.set_status(Status::WaitingForMessage);
    /// #         }
    /// #         Ok(())
    /// #     }
    /// # }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build()?;
    /// let pid = scheduler.spawn(Three(0), "run", ())?;
    /// let started = Instant::now();
    /// let ticks = scheduler.send_interval(pid, "tick", Duration::from_millis(2))?;
    /// assert!(scheduler.wait(pid)?.downcast::<u32>()? >= 3);
    /// assert!(started.elapsed() >= Duration::from_millis(6), "three whole periods");
    /// ticks.cancel();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`send_after`](Self::send_after); the error gives back `message`.
    pub fn send_interval<T: Any + Send + Clone>(
        &self,
        to: Pid,
        message: T,
        period: Duration,
    ) -> Result<TimerRef, TimedSendError> {
        let repeat = Repeat::every(message, period);
        let delay = repeat.period().expect("an interval has a period");
        timed::arm(self, None, to, delay, repeat)
    }

    /// The scheduler's counters.
    pub fn metrics(&self) -> Metrics {
        self.shared.metrics()
    }

    /// Every live process: PID, state, entry, steps taken and where it waits.
    pub fn processes(&self) -> Vec<ProcessInfo> {
        self.shared.processes()
    }

    /// A copy of what the recorder holds now, if [`Builder::record`] turned it on:
    /// the workers go on running (and recording) meanwhile. See
    /// [`Recording`] for what can be done with it.
    ///
    /// ```
    /// use wsched::{RecordOptions, Scheduler};
    ///
    /// let off = Scheduler::builder().workers(1).build()?;
    /// assert!(off.handle().recording().is_none());
    /// let on = Scheduler::builder().workers(1).record(RecordOptions::new()).build()?;
    /// let recording = on.handle().recording().expect("on");
    /// println!("{}", recording.to_terminal(80));
    /// # Ok::<(), wsched::BuildError>(())
    /// ```
    pub fn recording(&self) -> Option<Recording> {
        self.shared.recording()
    }
}
