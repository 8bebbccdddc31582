//! Deterministic simulation and replay (the `sim` feature).
//!
//! A [`Simulation`] runs the same processes and services as a [`Scheduler`] on the
//! calling thread, from a seed: which runnable process steps next, which of
//! several simultaneous events comes first, every latency and fault. Time is
//! virtual and jumps to the next event when nothing is runnable.
//!
//! [`history`] (`history/`) records one process's history — on the threaded
//! scheduler, on demand or as a flight recorder — and replays it in the test harness.
//!
//! [`Scheduler`]: crate::Scheduler
//
// May use: `testing`, `supervisor`, `runtime`, `io`, `command`, `services`, `observe`, `engine`, `time`, the crate root.

pub mod history;
