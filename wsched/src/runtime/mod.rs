//! The runtime: the public [`Scheduler`], [`Handle`] and [`Builder`] that put the
//! layers together.
//!
//! May use: `io`, `command`, `services`, `observe`, `engine`, `time`, the crate root.
//!
//! | file | concern |
//! |---|---|
//! | `scheduler.rs` | the public [`Scheduler`] and [`Handle`] |
//! | `layers.rs` | the layers put together: their state, and the engine's hooks into them |
//! | `builder.rs` | configuration, and starting the workers |
//! | `tests/` | loom models and stress tests of the crate-private parts |

#[cfg(test)]
pub(crate) mod tests;

pub(crate) mod builder;
pub(crate) mod layers;
mod scheduler;

pub use crate::engine::handle::Handle;
pub use builder::Builder;
pub use scheduler::{Scheduler, ShutdownReport};

pub(crate) use crate::engine::bounded::DropOwed;
pub use crate::engine::bounded::{MailboxInfo, Overflow};
pub use crate::engine::context::MonitorRef;
pub use crate::engine::dead_letters::{DeadLetter, DeadLetterReason};
pub use crate::engine::held::MessageCount;
pub use crate::engine::spawn_options::SpawnOptions;
pub use crate::engine::state::ProcessState;
pub use crate::engine::unobserved::FailureReport;
pub use crate::observe::metrics::{Metrics, ProcessInfo, WorkerMetrics};
pub use crate::observe::recorder::{
    Activity, EventKind, Lane, ProcessSlice, RecordOptions, RecordedEvent, Recording, Slice,
    SliceKind, Steal, StepOutcome, SvgOptions,
};
pub use crate::observe::timing::{Histogram, LongStep, StepTimingMetrics, WorkerStepTiming};
pub use crate::services::calls::{CallError, Reply, Request};
pub use crate::services::inbox::{Inbox, InboxError};
pub use crate::services::links::Exit;
pub use crate::services::monitors::{Down, Monitor};

pub(crate) use crate::engine::held::add_messages;
pub(crate) use crate::engine::process::{drop_all_quietly, drop_quietly, panic_message};
