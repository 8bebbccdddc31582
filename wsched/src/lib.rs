//! # wsched
//!
//! Erlang-style processes written as explicit, testable state machines, run on a
//! work-stealing scheduler.
//!
//! A [`Process`] is stepped with [`Event`]s — completions of the commands it yielded,
//! messages sent to its [`Pid`], cancel requests — and writes its [`Status`] and new
//! yields into a [`StepOutput`]. The [`Scheduler`] runs millions of them on a few
//! worker threads.
//!
//! Processes find each other by [`Pid`] or by a registered name
//! ([`Handle::register`]), watch each other with monitors ([`Context::monitor`],
//! a [`Down`] message when the other ends) and links ([`Context::link`]: they end
//! together, or the trapping side gets an [`Exit`] message). A process may be
//! spawned with a bounded mailbox ([`SpawnOptions::bounded_mailbox`]): when it is
//! full, a send fails and hands the message back, or the oldest queued message is
//! dropped ([`Overflow`]); signals and completions always get through. Nothing is
//! lost silently: failures nobody observes go to
//! [`Builder::on_unobserved_failure`], and messages nobody read — left at the end,
//! or dropped by a full mailbox — to [`Builder::on_dead_letter`], all counted in
//! [`Metrics`].
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
//!
//! # The book
//!
//! The repository's `book/` directory holds a guide to wsched (build it with
//! `mdbook serve book`; its chapters are Markdown files under `book/src/`). In order:
//! why processes; getting started; your first process; commands and handlers;
//! messages and PIDs; many commands at once; errors, panics and cancellation; testing
//! a process step by step (see [`testing`]); when processes fail (monitors, links,
//! supervisors, calls, names, bounded mailboxes, dead letters); observability
//! (metrics, listings, step timing, `top`, tracing, recorded timelines);
//! writing a [`Process`] by hand; how the scheduler works inside (work stealing, the
//! local deque and LIFO slot, the global queue, spinning and parking, the process
//! states); performance; and a reference of the `#[process]` macro's syntax and of
//! every compile error it gives, with the fix. Every Rust listing in it is a doc test
//! of this crate.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate self as wsched;

pub mod command;
mod context;
mod entry_name;
mod error;
mod exit;
mod fast_hash;
mod payload;
mod pid;
mod process;
mod runtime;
mod spin_lock;
pub mod supervisor;
mod type_name;
// The switch exports the whole toolbox; each build uses part of it.
#[allow(unused_imports, dead_code)]
mod sync;

// The #[process] macro's runtime support, the harness, and the DSL.
#[doc(hidden)]
#[path = "macro_support/mod.rs"]
pub mod __private;
pub mod testing;

/// Ranking processes by what they do, now or over a window: see
/// [`Handle::top`](crate::Handle::top) and
/// [`Handle::top_window`](crate::Handle::top_window).
pub mod top {
    pub use crate::runtime::top::{rank, rank_window, TopBy, TopError, WindowEntry};
}
// The benchmark suite's view of crate-private structures (see the file).
#[cfg(all(feature = "bench-internals", not(loom)))]
#[doc(hidden)]
#[path = "bench_internals.rs"]
pub mod __bench;
#[doc(inline)]
pub use __private::{prelude, this, RecvError};
pub use process::IntoProcess;
pub use wsched_macros::process;

pub use command::{Command, TimerRef};
pub use context::Context;
pub use error::{
    BoxError, BuildError, CancelError, InitError, JoinError, Phase, ProcessError, RegisterError,
    SendError, SendErrorKind, SendNamedError, SendNamedErrorKind, SpawnError, StepError,
    TimedSendError, TimedSendErrorKind, YieldError,
};
pub use exit::ExitReason;
pub use payload::{IntoPayloads, Payload, PayloadTypeError, Payloads};
pub use pid::Pid;
pub use process::{
    Completion, Event, Events, Message, Process, Status, StepOutput, SuspendKind, SuspendPoint,
    Tag, Yield,
};
pub use runtime::{
    Activity, EventKind, Lane, ProcessSlice, RecordOptions, RecordedEvent, Recording, Slice,
    SliceKind, Steal, StepOutcome, SvgOptions,
};
pub use runtime::{
    Builder, CallError, DeadLetter, DeadLetterReason, Down, Exit, FailureReport, Handle, Histogram,
    LongStep, MailboxInfo, MessageCount, Metrics, Monitor, MonitorRef, Overflow, ProcessInfo,
    ProcessState, Reply, Request, Scheduler, ShutdownReport, SpawnOptions, StepTimingMetrics,
    WorkerMetrics, WorkerStepTiming,
};

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
