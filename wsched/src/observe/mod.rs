//! Observability: counters and listings, step timing, `tracing`, the event recorder
//! and `top`.
//!
//! May use: `engine`, `time`, the crate root.
//!
//! | file | concern |
//! |---|---|
//! | `instrument.rs` | the engine's instrument hooks: each event to the recorder, step timing and `tracing` |
//! | `metrics.rs` | always-on counters and the process listing |
//! | `timing.rs` | opt-in step timing: step and wake-latency histograms, busy time, the long-step detector |
//! | `trace.rs` | the `tracing` integration (the `tracing` feature): every hook, empty without it |
//! | `recorder/` | the optional event recorder, its timeline JSON and its pictures |
//! | `top.rs` | ranking processes by steps, busy time or mailbox, now or over a window |
//! | `codecs.rs` | payload codecs: values as text under stable names (the `sim` and `cluster` features) |
//! | `history.rs` | recorded process histories (the `sim` feature): what they hold, payload codecs, the capture and flight recorders |

#[cfg(any(feature = "sim", feature = "cluster"))]
pub(crate) mod codecs;
#[cfg(feature = "sim")]
pub(crate) mod history;
pub(crate) mod instrument;
pub(crate) mod metrics;
pub(crate) mod recorder;
pub(crate) mod timing;
pub(crate) mod top;
pub(crate) mod trace;
