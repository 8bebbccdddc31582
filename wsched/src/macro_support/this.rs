//! The running process, seen from inside its own entries.
//!
//! These functions reach the [`Context`] that the scheduler (or the
//! [`testing`](crate::testing) harness) handed to the process, and work in the body of
//! any `#[entry]` or `#[suspend]` method of a [`#[process]`](crate::process) impl —
//! and in any code those call, closures included — while the process is being stepped.
//! Outside a step (another thread, a `Drop` impl run after the process ended, a
//! hand-written [`Process`](crate::Process)) they panic; [`try_context`] does not.
//! From a thread, use the [`Scheduler`](crate::Scheduler) or a
//! [`Handle`](crate::Handle) instead: most of these functions have a method of the
//! same name there (`send`, `spawn`, `register`, `whereis`, `monitor`, `cancel`, …).
//!
//! ```
//! use wsched::prelude::*;
//!
//! struct Parent;
//! struct Child;
//!
//! #[process]
//! impl Child {
//!     #[entry]
//!     fn run(&mut self, parent: Pid) -> Result<(), BoxError> {
//!         this::send(parent, format!("hello from {}", this::pid()))?;
//!         Ok(())
//!     }
//! }
//!
//! #[process]
//! impl Parent {
//!     #[entry]
//!     fn run(&mut self) -> Result<String, BoxError> {
//!         this::spawn_detached(Child, "run", (this::pid(),))?;
//!         Ok(recv!(String)?)
//!     }
//! }
//!
//! let mut parent = wsched::testing::TestProcess::start(Parent, "run", ()).unwrap();
//! let child = parent.take_spawned().remove(0);
//! let mut child = wsched::testing::TestProcess::from_spawned(child);
//! assert!(child.is_done());
//! let sent = child.take_sent().remove(0);
//! parent.send_from(sent.from, sent.payload);
//! assert_eq!(parent.result::<String>(), "hello from <2>");
//! ```
//!
//! Names and timed messages work from entries too: a server that registers itself
//! and ticks itself every second until it is told to stop.
//!
//! ```
//! use std::time::Duration;
//! use wsched::prelude::*;
//!
//! #[derive(Clone)]
//! struct Tick;
//!
//! struct Server { ticks: u32 }
//!
//! #[process]
//! impl Server {
//!     #[entry]
//!     fn serve(&mut self) -> Result<u32, BoxError> {
//!         this::register("server", this::pid())?;
//!         let ticking = this::send_interval(this::pid(), Tick, Duration::from_secs(1))?;
//!         loop {
//!             let message = recv!()?;
//!             if message.payload.is::<Tick>() {
//!                 self.ticks += 1;
//!             } else {
//!                 ticking.cancel();
//!                 return Ok(self.ticks);
//!             }
//!         }
//!     }
//! }
//!
//! // Step by step: a timed message arriving is just a message.
//! let mut server = wsched::testing::TestProcess::start(Server { ticks: 0 }, "serve", ()).unwrap();
//! assert_eq!(server.whereis("server"), Some(server.pid()));
//! let mut timer = server.take_timed().remove(0);
//! assert_eq!(timer.period, Some(Duration::from_secs(1)));
//! let tick = timer.fire().unwrap();
//! server.send_from(timer.from, tick);
//! server.send("stop");
//! assert!(timer.is_cancelled());
//! assert_eq!(server.result::<u32>(), 1);
//! assert_eq!(server.whereis("server"), None, "freed when the server ended");
//! ```

use super::io;
use crate::command::TimerRef;
use crate::engine::context::Context;
use crate::engine::process::IntoProcess;
use crate::entry::EntryRef;
use crate::error::{
    CancelError, RegisterError, SendError, SendNamedError, SpawnError, TimedSendError,
};
use crate::payload::IntoPayloads;
use crate::pid::Pid;
use crate::runtime::{MonitorRef, SpawnOptions};
use std::any::Any;
use std::time::Duration;

/// The process's [`Context`] (a cheap clone).
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn context() -> Context {
    io::with_context("wsched::this::context()", Context::clone)
}

/// The process's [`Context`], or `None` outside a step of a `#[process]` process.
pub fn try_context() -> Option<Context> {
    io::try_with_context(Context::clone)
}

/// The process's own PID.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[inline]
#[track_caller]
pub fn pid() -> Pid {
    io::with_context("wsched::this::pid()", Context::pid)
}

/// The runtime's clock (see [`Context::now`]): virtual time in a simulation.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn now() -> std::time::Instant {
    io::with_context("wsched::this::now()", Context::now)
}

/// A random number from the runtime (see [`Context::random`]): from the seed in a
/// simulation.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn random() -> u64 {
    io::with_context("wsched::this::random()", Context::random)
}

/// The name the running entry was started by.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn entry() -> &'static str {
    io::with("wsched::this::entry()", |io| *io.entry)
}

/// Whether a cancel request (shutdown, or an explicit cancel) has reached the process.
/// The pending suspension point reports it once as an error; this stays `true`
/// afterwards, so loops can check it.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn is_cancelled() -> bool {
    io::with("wsched::this::is_cancelled()", |io| io.cancelled)
}

/// Sends `message` to `to`, as coming from this process. See [`Context::send`] (and
/// for bounded mailboxes, [`Handle::send`](crate::Handle::send)).
///
/// # Errors
/// [`SendError`] when `to` does not exist or has finished, or its bounded mailbox is
/// full and rejects; it gives the message back.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[inline]
#[track_caller]
pub fn send<T: Any + Send>(to: Pid, message: T) -> Result<(), SendError> {
    io::with_context("wsched::this::send()", |ctx| ctx.send(to, message))
}

/// Asks `pid` to stop. See [`Context::cancel`].
///
/// # Errors
/// [`CancelError`] when `pid` does not exist or has finished.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn cancel(pid: Pid) -> Result<(), CancelError> {
    io::with_context("wsched::this::cancel()", |ctx| ctx.cancel(pid))
}

/// Stops `pid` without another step. See [`Context::kill`].
///
/// # Errors
/// [`CancelError`] when `pid` does not exist or has finished.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn kill(pid: Pid) -> Result<(), CancelError> {
    io::with_context("wsched::this::kill()", |ctx| ctx.kill(pid))
}

/// Spawns a process whose result can be joined. See [`Context::spawn`]; to wait for
/// its result from an entry, yield [`Join`](crate::command::Join). `method` is the
/// entry's typed name (`Worker::RUN`, whose arguments the compiler checks: see
/// [`Entry`](crate::Entry)) or its name (`"run"`).
///
/// # Errors
/// [`SpawnError`] when the entry is unknown, `init` refuses the arguments or panics,
/// or the scheduler is shutting down.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn spawn<P: IntoProcess, I: IntoPayloads>(
    process: P,
    method: impl EntryRef<P, I>,
    input: I,
) -> Result<Pid, SpawnError> {
    io::with_context("wsched::this::spawn()", |ctx| {
        ctx.spawn(process, method, input)
    })
}

/// Spawns a process whose result is discarded. See [`Context::spawn_detached`].
///
/// # Errors
/// As [`spawn`].
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn spawn_detached<P: IntoProcess, I: IntoPayloads>(
    process: P,
    method: impl EntryRef<P, I>,
    input: I,
) -> Result<Pid, SpawnError> {
    io::with_context("wsched::this::spawn_detached()", |ctx| {
        ctx.spawn_detached(process, method, input)
    })
}

/// Spawns a process as `options` say (a bounded mailbox, detached). See
/// [`Context::spawn_with`].
///
/// # Errors
/// As [`spawn`], plus [`SpawnError::ZeroMailboxCapacity`] for a bounded mailbox of
/// capacity 0.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn spawn_with<P: IntoProcess, I: IntoPayloads>(
    process: P,
    method: impl EntryRef<P, I>,
    input: I,
    options: SpawnOptions,
) -> Result<Pid, SpawnError> {
    io::with_context("wsched::this::spawn_with()", |ctx| {
        ctx.spawn_with(process, method, input, options)
    })
}

/// Registers `pid` (often [`pid()`], this process) under `name`. See
/// [`Handle::register`](crate::Handle::register) for the rules; the name is freed when
/// `pid` ends.
///
/// # Errors
/// [`RegisterError::Taken`] when another live process holds the name,
/// [`RegisterError::NotAlive`] when `pid` does not exist or has finished.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn register(name: &str, pid: Pid) -> Result<(), RegisterError> {
    io::with_context("wsched::this::register()", |ctx| ctx.register(name, pid))
}

/// Frees `name`; returns the live process that held it. See
/// [`Handle::unregister`](crate::Handle::unregister).
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn unregister(name: &str) -> Option<Pid> {
    io::with_context("wsched::this::unregister()", |ctx| ctx.unregister(name))
}

/// The live process registered under `name`. See
/// [`Handle::whereis`](crate::Handle::whereis).
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn whereis(name: &str) -> Option<Pid> {
    io::with_context("wsched::this::whereis()", |ctx| ctx.whereis(name))
}

/// Sends `message` to the process registered under `name`, as coming from this
/// process. See [`Handle::send_named`](crate::Handle::send_named).
///
/// # Errors
/// [`SendNamedError`] when no live process holds the name, or its holder finished
/// before the message reached it; it gives the message back.
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn send_named<T: Any + Send>(name: &str, message: T) -> Result<(), SendNamedError> {
    io::with_context("wsched::this::send_named()", |ctx| {
        ctx.send_named(name, message)
    })
}

/// Sends `message` to `to`, as coming from this process, once `delay` has passed.
/// See [`Handle::send_after`](crate::Handle::send_after); to wait for a moment within
/// the process itself, yield [`Sleep`](crate::command::Sleep) instead.
///
/// # Errors
/// As [`Handle::send_after`](crate::Handle::send_after).
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn send_after<T: Any + Send>(
    to: Pid,
    message: T,
    delay: Duration,
) -> Result<TimerRef, TimedSendError> {
    io::with_context("wsched::this::send_after()", |ctx| {
        ctx.send_after(to, message, delay)
    })
}

/// Sends a clone of `message` to `to`, as coming from this process, every `period`
/// until cancelled or `to` ends. See
/// [`Handle::send_interval`](crate::Handle::send_interval).
///
/// # Errors
/// As [`Handle::send_after`](crate::Handle::send_after).
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn send_interval<T: Any + Send + Clone>(
    to: Pid,
    message: T,
    period: Duration,
) -> Result<TimerRef, TimedSendError> {
    io::with_context("wsched::this::send_interval()", |ctx| {
        ctx.send_interval(to, message, period)
    })
}

/// Monitors `pid`: this process gets one [`Down`](crate::Down) message when it ends
/// (at once, with [`ExitReason::NoSuchProcess`](crate::ExitReason::NoSuchProcess), if it
/// is not live). See [`Context::monitor`].
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn monitor(pid: Pid) -> MonitorRef {
    io::with_context("wsched::this::monitor()", |ctx| ctx.monitor(pid))
}

/// Stops `monitor`; `true` if its `Down` had not been sent (then none comes). See
/// [`Context::demonitor`].
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn demonitor(monitor: MonitorRef) -> bool {
    io::with_context("wsched::this::demonitor()", |ctx| ctx.demonitor(monitor))
}

/// Links this process and `pid`, both ways. See [`Context::link`].
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn link(pid: Pid) {
    io::with_context("wsched::this::link()", |ctx| ctx.link(pid));
}

/// Removes the link between this process and `pid`. See [`Context::unlink`].
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn unlink(pid: Pid) {
    io::with_context("wsched::this::unlink()", |ctx| ctx.unlink(pid));
}

/// Whether linked processes' ends come as [`Exit`](crate::Exit) messages. See
/// [`Context::trap_exits`].
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn trap_exits(on: bool) {
    io::with_context("wsched::this::trap_exits()", |ctx| ctx.trap_exits(on));
}

/// Spawns a process linked to this one. See [`Context::spawn_linked`].
///
/// # Errors
/// As [`spawn`].
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn spawn_linked<P: IntoProcess, I: IntoPayloads>(
    process: P,
    method: impl EntryRef<P, I>,
    input: I,
) -> Result<Pid, SpawnError> {
    io::with_context("wsched::this::spawn_linked()", |ctx| {
        ctx.spawn_linked(process, method, input)
    })
}

/// How many messages wait in the process's mailbox, not received yet (for example
/// messages of other types than a typed `recv!(T)` asked for).
///
/// # Panics
/// Outside a step of a `#[process]` process.
#[track_caller]
pub fn mailbox_len() -> usize {
    io::with("wsched::this::mailbox_len()", |io| io.mailbox.len())
}
