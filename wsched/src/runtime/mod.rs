//! The scheduler: worker threads, their run queues, process cells and the PID table.
//!
//! | file | concern |
//! |---|---|
//! | `scheduler.rs` | the public [`Scheduler`] and [`Handle`] |
//! | `builder.rs` | configuration |
//! | `shared.rs` | state shared by all workers: spawning, sending, scheduling |
//! | `cell/` | one process, in one allocation: its body, mailbox and result slot; the recycling of cells' memory |
//! | `bounded.rs` | bounded mailboxes: a capacity on messages, and what a full one does |
//! | `spawn_options.rs` | how a process is spawned: its mailbox, whether its result is kept |
//! | `state.rs` | the process state machine (one atomic word) |
//! | `registry.rs` | the PID table (a slab indexed by PID) |
//! | `names.rs` | the name table: processes registered under names |
//! | `monitors.rs` | monitors: `Down` messages when a watched process ends; the table monitors and links share |
//! | `links.rs` | links: processes that end together, or trap the other's end as `Exit` messages |
//! | `calls.rs` | request/reply calls: `Request`, `Reply`, `CallError`, the blocking `Handle::call`, the built-in `Call` command and its timer |
//! | `dead_letters.rs` | messages still unread when their process ends, to a hook and a count |
//! | `held.rs` | messages a process took in but has not received, for listings |
//! | `inbox.rs` | inboxes: a mailbox with a PID for a thread outside the scheduler |
//! | `unobserved.rs` | failures nobody joins, monitors or links to, to a hook (stderr by default) and a count |
//! | `queue/` | the per-worker deque, the LIFO slot and the global injection queue |
//! | `idle.rs` | spinning, parking and waking workers |
//! | `live.rs` | the live-process count, per worker, that shutdown waits on |
//! | `worker.rs` | the worker loop: find work, step, dispatch |
//! | `metrics.rs` | always-on counters and the process listing |
//! | `recorder/` | the optional event recorder, its timeline JSON and its pictures |
//! | `timing.rs` | opt-in step timing: step and wake-latency histograms, busy time, the long-step detector |
//! | `top.rs` | ranking processes by steps, busy time or mailbox, now or over a window |
//! | `trace.rs` | the `tracing` integration (the `tracing` feature): every hook, empty without it |

pub(crate) mod queue;
#[cfg(test)]
mod tests;

mod bounded;
mod builder;
pub(crate) mod calls;
pub(crate) mod cell;
mod dead_letters;
mod held;
mod idle;
mod inbox;
mod links;
mod live;
mod metrics;
mod monitors;
mod names;
pub(crate) mod recorder;
mod registry;
mod scheduler;
pub(crate) mod shared;
mod spawn_options;
mod state;
mod timing;
pub(crate) mod top;
mod trace;
mod unobserved;
mod worker;

pub(crate) use bounded::DropOwed;
pub use bounded::{MailboxInfo, Overflow};
pub use builder::Builder;
pub use calls::{CallError, Reply, Request};
pub use dead_letters::{DeadLetter, DeadLetterReason};
pub use inbox::{Inbox, InboxError};
pub use links::Exit;
pub use metrics::{MessageCount, Metrics, ProcessInfo, WorkerMetrics};
pub use monitors::{Down, Monitor, MonitorRef};
pub use recorder::{
    Activity, EventKind, Lane, ProcessSlice, RecordOptions, RecordedEvent, Recording, Slice,
    SliceKind, Steal, StepOutcome, SvgOptions,
};
pub use scheduler::{Handle, Scheduler, ShutdownReport};
pub use spawn_options::SpawnOptions;
pub use state::ProcessState;
pub use timing::{Histogram, LongStep, StepTimingMetrics, WorkerStepTiming};
pub use unobserved::FailureReport;

pub(crate) use crate::process::{drop_all_quietly, drop_quietly, panic_message};
pub(crate) use held::add_messages;
