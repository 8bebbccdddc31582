//! # wsched
//!
//! Erlang-style processes written as explicit, testable state machines, run on a
//! work-stealing scheduler, in stable Rust.
//!
//! A process is a plain struct. Its `#[entry]` methods are ordinary sequential Rust
//! that suspends at [`yield_cmd!`] (ask a handler to do something and get its typed
//! result back) and [`recv!`] (wait for a message); the [`#[process]`](process)
//! attribute turns them into a state machine, and a [`Scheduler`] steps millions of
//! them on a few worker threads.
//!
//! # Example
//!
//! A handler registered, a process spawned by its entry's name, a message sent, the
//! result waited for (the repository's `examples/examples/quickstart.rs` is this
//! program printing what happens; `cargo run --example quickstart` runs it):
//!
//! ```
//! use std::time::Duration;
//! use wsched::command::Completer;
//! use wsched::prelude::*;
//! use wsched::Scheduler;
//!
//! /// A command: "fetch this page". The process only asks; a handler does it.
//! struct Fetch {
//!     url: String,
//! }
//! impl Command for Fetch {
//!     type Output = String;
//! }
//!
//! /// The process's state: a plain struct.
//! struct Greeter {
//!     greeted: u32,
//! }
//!
//! #[process]
//! impl Greeter {
//!     #[entry]
//!     fn greet(&mut self, name: String) -> Result<String, BoxError> {
//!         let url = format!("/users/{name}");
//!         let page = yield_cmd!(Fetch { url })?; // suspends until the handler answers
//!         let ack = recv!(String)?; // suspends until a String message arrives
//!         self.greeted += 1;
//!         Ok(format!("{page} {ack}"))
//!     }
//! }
//!
//! let scheduler = Scheduler::builder()
//!     .workers(2)
//!     .handler(|fetch: Fetch, done: Completer<Fetch>| {
//!         done.complete(format!("<h1>{}</h1>", fetch.url));
//!     })
//!     .build()?;
//! let pid = scheduler.spawn(Greeter { greeted: 0 }, "greet", ("ada".to_string(),))?;
//! scheduler.send(pid, "welcome back!".to_string())?;
//! let text = scheduler.wait(pid)?.downcast::<String>()?;
//! assert_eq!(text, "<h1>/users/ada</h1> welcome back!");
//! scheduler.shutdown(Duration::from_secs(1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Concepts
//!
//! **Processes and entries.** A process owns its struct for as long as it runs. It is
//! started by naming one of its entries and passing the arguments as a tuple
//! ([`Scheduler::spawn`], [`this::spawn`], the [`Spawn`](command::Spawn) command):
//! by the entry's typed name (`Greeter::GREET`, an [`Entry`]), whose arguments the
//! compiler checks, or by its name as a string (`"greet"`), checked at run time; it
//! has a [`Pid`] and a mailbox, and it ends with a result, which whoever joins it
//! gets ([`Scheduler::wait`], the [`Join`](command::Join) command), and an
//! [`ExitReason`].
//!
//! **Suspension points.** An entry waits only at the DSL macros: [`yield_cmd!`] for a
//! command, [`yield_all!`] for many at once, [`recv!`] for a message (selectively, by
//! type, with an optional timeout) and [`call!`] for another process's reply. Each is
//! where the state machine stops; nothing else blocks, and a step never waits for I/O.
//!
//! **Commands and handlers.** A [`Command`] describes something to do and the type
//! of its output. The [`Builder`] registers one handler per command type; it gets the
//! command and a [`Completer`](command::Completer), which completes the yield now or
//! later, from any thread. Handlers that block run on a separate pool
//! ([`Builder::blocking_handler`]). [`Sleep`](command::Sleep), [`Spawn`](command::Spawn)
//! and [`Join`](command::Join) are built in.
//!
//! **Messages.** Anyone who knows a PID sends it any `Send + 'static` value
//! ([`Scheduler::send`], [`this::send`]); the process takes it with [`recv!`].
//! Processes also find each other by a registered name ([`Handle::register`]), and
//! have messages delivered later or every period (`this::send_after`,
//! `this::send_interval`).
//!
//! **Failure.** An entry ends in error by returning `Err`, a panic is caught and ends
//! only its process, and a cancel ([`Scheduler::cancel`]) reaches the entry as an
//! error from the suspension point where it waits, so it can clean up. Processes watch
//! each other with monitors ([`Context::monitor`], a [`Down`] message when the other
//! ends) and links ([`Context::link`]: they end together, or the trapping side gets
//! an [`Exit`] message), and [`supervisor`]s restart them. A process may be spawned
//! with a bounded mailbox ([`SpawnOptions::bounded_mailbox`]): when it is full, a send
//! fails and hands the message back, or the oldest queued message is dropped
//! ([`Overflow`]); signals and completions always get through. Nothing is lost
//! silently: failures nobody observes go to [`Builder::on_unobserved_failure`], and
//! messages nobody read — left at the end, or dropped by a full mailbox — to
//! [`Builder::on_dead_letter`], all counted in [`Metrics`].
//!
//! **Testing.** A process changes only when it is stepped, so a test can step it by
//! hand: [`testing::TestProcess`] starts it, shows the commands it yielded, completes
//! them in any order, sends it messages and cancels it, with no threads and no clock.
//! With the `sim` feature, `wsched::sim` runs a whole system the same way: from a
//! seed, on one thread, in virtual time, with simulated handlers and injected
//! faults, over as many seeds as a test likes; and it records one process's history
//! on a real scheduler and replays it in the harness.
//!
//! **Underneath.** The macro implements the [`Process`] trait, which any type can
//! implement by hand: [`init`](Process::init) once, then [`step`](Process::step) with
//! [`Event`]s — completions, messages, cancels — writing its [`Status`] and new yields
//! into a [`StepOutput`]. The scheduler and the harness treat both kinds the same.
//!
//! **Looking inside.** [`Scheduler::metrics`] has counters per worker and for the
//! whole scheduler, [`Scheduler::processes`] lists every process with its state and
//! where it waits, and [`Builder::record`] records a timeline.
//!
//! # The book
//!
//! The repository's `book/` directory is a guide from nothing to confident use
//! (`mdbook serve book` serves it; each chapter is a Markdown file under `book/src/`,
//! and every Rust listing in it is a doc test of this crate, those of the async I/O
//! chapter with the `tokio` feature, those of the simulation chapter with the
//! `sim` feature and those of the cluster chapter with the `cluster` feature):
//!
//! | chapter | file |
//! |---|---|
//! | why processes | `book/src/why-processes.md` |
//! | getting started | `book/src/getting-started.md` |
//! | your first process | `book/src/first-process.md` |
//! | commands and handlers | `book/src/commands.md` |
//! | messages and PIDs | `book/src/messages.md` |
//! | many commands at once | `book/src/yield-all.md` |
//! | errors, panics and cancellation | `book/src/errors.md` |
//! | testing a process step by step (see [`testing`]) | `book/src/testing.md` |
//! | when processes fail: monitors, links, supervisors, calls, names, bounded mailboxes, dead letters | `book/src/failure-handling.md` |
//! | finding bugs by simulation (the `sim` feature): a bank whose planted bug a seed finds and replays, virtual time, simulated handlers, fault plans, `sim::check` | `book/src/simulation.md` |
//! | async I/O (the `tokio` feature): plain, blocking or async handlers, cancellation reaching the future, options, the I/O runtime, sockets as processes | `book/src/io.md` |
//! | beyond one machine: clusters (the `cluster` feature): nodes, remote PIDs, sends, calls, monitors and links across nodes, node failure, cluster-wide names, remote spawns, testing on the in-memory fabric | `book/src/cluster.md` |
//! | observability: metrics, listings, step timing, `top`, tracing, recorded timelines | `book/src/observability.md` |
//! | writing a [`Process`] by hand | `book/src/hand-written.md` |
//! | how the scheduler works inside: work stealing, the deque and LIFO slot, parking | `book/src/inside.md` |
//! | performance | `book/src/performance.md` |
//! | reference: the `#[process]` macro's syntax and every compile error it gives | `book/src/reference.md` |
//!
//! The programs in `examples/examples/` (`cargo run --example NAME`) show whole
//! applications: `quickstart`, `fan_out` (100 commands at once), `workflow` (a
//! multi-step order with retries, a timer and cancellation), `chat` (processes
//! talking by PID), `echo_server` and `chat_tcp` (sockets as processes, with the
//! `tokio` feature: see `wsched::io::tcp`), `supervise`, `hand_written` (the
//! [`Process`] trait without the macro), `showcase`, `http_client` (processes
//! calling an HTTP server through `reqwest` in an async handler), `bank` (a payment
//! run whose planted bug a simulation finds over 1,000 seeds and replays from its
//! seed, with the `sim` feature: see `wsched::sim`), and the measuring ones
//! `pingpong`, `timers`, `top` and `timeline`.
//!
//! # Tracing
//!
//! With the `tracing` cargo feature (off by default), the scheduler reports to
//! `tracing` subscribers: each process has a span, `process` at DEBUG with its
//! `pid`, `entry` and `parent`, entered for each of its steps (a root: never a child
//! of its spawner's span); inside it, TRACE events for the messages, completions and
//! cancels a step receives and the commands it yields, DEBUG events when it is
//! spawned and when it exits (with its [`ExitReason`]), WARN events when it fails or
//! panics. Dead letters and long steps (see [`Builder::long_step_threshold`]) are
//! WARN events too; workers (target `wsched::worker`) trace their steals and parks
//! at TRACE. Process events have the target `wsched`. Without the feature none of
//! this is compiled in; with it and no subscriber, a step costs about a dozen more
//! instructions.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate self as wsched;

mod buggify;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod command;
mod engine;
mod entry;
mod entry_name;
mod error;
mod exit;
mod fast_hash;
#[cfg(feature = "tokio")]
pub mod io;
mod observe;
mod payload;
mod pid;
mod runtime;
mod services;
#[cfg(feature = "sim")]
pub mod sim;
mod spin_lock;
mod spin_rwlock;
pub mod supervisor;
mod tag;
mod time;
mod type_name;
// The switch exports the whole toolbox; each build uses part of it.
#[allow(unused_imports, dead_code)]
mod sync;

// The #[process] macro's runtime support, the harness, and the DSL.
#[doc(hidden)]
#[path = "macro_support/mod.rs"]
pub mod __private;
pub mod testing;

/// The event recorder's types: what a [`Recording`] holds and the pictures drawn
/// from it. Turn the recorder on with [`Builder::record`] and a [`RecordOptions`];
/// take a recording with [`Handle::recording`] (both also at the crate root).
pub mod recorder {
    pub use crate::runtime::{
        Activity, EventKind, Lane, ProcessSlice, RecordOptions, RecordedEvent, Recording, Slice,
        SliceKind, Steal, StepOutcome, SvgOptions,
    };
}

/// Ranking processes by what they do, now or over a window: see
/// [`Handle::top`](crate::Handle::top) and
/// [`Handle::top_window`](crate::Handle::top_window).
pub mod top {
    pub use crate::observe::top::{rank, rank_window, TopBy, TopError, WindowEntry};
}
// The benchmark suite's view of crate-private structures (see the file).
#[cfg(all(feature = "bench-internals", not(loom)))]
#[doc(hidden)]
#[path = "bench_internals.rs"]
pub mod __bench;
#[doc(inline)]
pub use __private::{prelude, this};
pub use engine::process::IntoProcess;
pub use wsched_macros::process;

pub use command::{Command, TimerRef};
pub use engine::context::Context;
pub use engine::process::{
    Completion, Event, Events, Message, Process, Status, StepOutput, SuspendKind, SuspendPoint,
    Tag, Yield,
};
pub use entry::{Entry, EntryRef};
pub use error::{
    BoxError, BuildError, CancelError, InitError, JoinError, Phase, ProcessError, RecvError,
    RegisterError, SendError, SendErrorKind, SendNamedError, SendNamedErrorKind, SpawnError,
    StepError, TimedSendError, TimedSendErrorKind, YieldError,
};
pub use exit::ExitReason;
#[cfg(any(feature = "sim", feature = "cluster"))]
pub use observe::codecs::Codecs;
pub use payload::{IntoPayloads, Payload, PayloadTypeError, Payloads, PayloadsIntoIter};
pub use pid::Pid;
pub use runtime::{
    Builder, CallError, DeadLetter, DeadLetterReason, Down, Exit, FailureReport, Handle, Histogram,
    Inbox, InboxError, LongStep, MailboxInfo, MessageCount, Metrics, Monitor, MonitorRef, Overflow,
    ProcessInfo, ProcessState, Reply, Request, Scheduler, ShutdownReport, SpawnOptions,
    StepTimingMetrics, WorkerMetrics, WorkerStepTiming,
};
pub use runtime::{RecordOptions, Recording};

/// The README's example compiles: it is run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The book's chapters (`book/src/`) are doc tests: every Rust listing in them is
/// compiled, and run unless marked `no_run`, by `cargo test --workspace`.
#[cfg(doctest)]
mod book {
    #[doc = include_str!("../../book/src/introduction.md")]
    struct Introduction;
    #[doc = include_str!("../../book/src/why-processes.md")]
    struct WhyProcesses;
    #[doc = include_str!("../../book/src/getting-started.md")]
    struct GettingStarted;
    #[doc = include_str!("../../book/src/first-process.md")]
    struct FirstProcess;
    #[doc = include_str!("../../book/src/commands.md")]
    struct Commands;
    #[doc = include_str!("../../book/src/messages.md")]
    struct Messages;
    #[doc = include_str!("../../book/src/yield-all.md")]
    struct YieldAll;
    #[doc = include_str!("../../book/src/errors.md")]
    struct Errors;
    #[doc = include_str!("../../book/src/testing.md")]
    struct Testing;
    #[doc = include_str!("../../book/src/failure-handling.md")]
    struct FailureHandling;
    /// Compiled and run only with the `sim` feature, which its listings use (as
    /// `cargo test --workspace` builds `wsched`: the examples enable it).
    #[cfg(feature = "sim")]
    #[doc = include_str!("../../book/src/simulation.md")]
    struct Simulation;
    /// Compiled and run only with the `tokio` feature, which its listings use (as
    /// `cargo test --workspace` builds `wsched`: the examples enable it).
    #[cfg(feature = "tokio")]
    #[doc = include_str!("../../book/src/io.md")]
    struct Io;
    /// Compiled and run only with the `cluster` feature, which its listings use (as
    /// `cargo test --workspace` builds `wsched`: the examples enable it).
    #[cfg(feature = "cluster")]
    #[doc = include_str!("../../book/src/cluster.md")]
    struct Cluster;
    #[doc = include_str!("../../book/src/observability.md")]
    struct Observability;
    #[doc = include_str!("../../book/src/hand-written.md")]
    struct HandWritten;
    #[doc = include_str!("../../book/src/inside.md")]
    struct Inside;
    #[doc = include_str!("../../book/src/performance.md")]
    struct Performance;
    #[doc = include_str!("../../book/src/reference.md")]
    struct Reference;
}
