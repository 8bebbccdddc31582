//! Deterministic simulation (the `sim` feature): run a whole system from a seed,
//! in virtual time, with faults, and find the seed that breaks it.
//!
//! A [`Simulation`] runs the same processes (made by `#[process]` or written by
//! hand) and the same services (monitors, links, names, calls, supervisors,
//! bounded mailboxes, timed messages) as a [`Scheduler`](crate::Scheduler), on the
//! calling thread, driven by a seed:
//!
//! - **Order.** Which runnable process steps next, and which of several events
//!   due at one instant comes first, are drawn from the seed. The same seed gives
//!   the same run, step for step, and the run's trace has a hash
//!   ([`Simulation::trace_hash`]) to prove it.
//! - **Virtual time.** Sleeps, `send_after`/`send_interval`, `recv!` and call
//!   timeouts and supervisors' restart windows run on the simulation's clock,
//!   which jumps to the next event when nothing is runnable: a day of timeouts
//!   takes as long as its steps. Processes read time and randomness from the
//!   runtime ([`this::now`](crate::this::now), [`this::random`](crate::this::random),
//!   [`Context::now`](crate::Context::now), [`Context::random`](crate::Context::random)),
//!   which the simulation controls too.
//! - **Simulated handlers.** Every command the application handles gets a
//!   [`SimHandler`]: it answers after a seeded latency, and fails, hangs or answers
//!   twice as the fault plan says. A command with a real handler and no simulated
//!   one is an error when the simulation is built, so no real I/O happens in one.
//! - **Faults as data.** A [`Faults`] plan (drawn from the seed by
//!   [`Faults::from_seed`], or written by the test) sets how often handlers fail,
//!   hang or answer twice, how long they take, how often a process crashes between
//!   two steps (ending "killed", so links, monitors and supervisors act), how long
//!   runnable processes wait, and how often the runtime takes its rare paths on
//!   purpose (buggify). Only what production allows: messages from one process to
//!   another are never reordered, nothing is dropped that production delivers.
//!   *Safety* mode keeps faults all run long; *liveness* mode stops them after a
//!   while, and [`Simulation::run_until`] then fails a run that does not reach
//!   its goal in time, so a livelock does not hide.
//! - **A test driver.** [`check`] runs a body over a range of seeds and, at the
//!   first failure, prints the seed, its plan, the trace's last events, the
//!   command that reproduces it ([`SEED_VARIABLE`]) and the run's timeline.
//! - **Record and replay one process.** [`history`] records one process's
//!   history — on the threaded scheduler, on demand or as a flight recorder of its
//!   type's last steps — and replays it in the test harness, reporting the first
//!   divergence.
//!
//! ```
//! use std::time::Duration;
//! use wsched::prelude::*;
//! use wsched::sim::{Faults, Simulation};
//!
//! struct Ticker;
//! #[process]
//! impl Ticker {
//!     #[entry]
//!     fn run(&mut self) -> Result<u32, BoxError> {
//!         let mut ticks = 0;
//!         // A day of one-minute timeouts.
//!         for _ in 0..(24 * 60) {
//!             if recv!(u32, timeout = Duration::from_secs(60)).is_err() {
//!                 ticks += 1;
//!             }
//!         }
//!         Ok(ticks)
//!     }
//! }
//!
//! let mut sim = Simulation::builder().seed(7).faults(Faults::none()).build()?;
//! let pid = sim.spawn(Ticker, Ticker::RUN, ())?;
//! assert_eq!(sim.wait(pid)?.downcast::<u32>()?, 24 * 60);
//! assert!(sim.elapsed() >= Duration::from_secs(24 * 3600));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//
// | file | concern |
// |---|---|
// | `mod.rs` | what a simulation is, and its public face |
// | `simulation.rs` | the simulated scheduler: its builder, the turn (pick, crash, step, advance time), winding down |
// | `context.rs` | the simulation's state that steps reach: the seeded stream, virtual time, what is due later |
// | `faults.rs` | the fault plan, drawn from a seed or written by a test |
// | `handlers.rs` | simulated handlers: seeded latency, failure, hang, duplicate |
// | `trace.rs` | the run's trace and its hash |
// | `check.rs` | the test driver over a range of seeds, and its failure report |
// | `history/` | one process's recorded history: codecs, files, replay in the harness |
//
// May use: `testing`, `supervisor`, `runtime`, `io`, `command`, `services`, `observe`, `engine`, `time`, the crate root.

mod check;
mod context;
mod faults;
mod handlers;
pub mod history;
mod simulation;
mod trace;

pub use check::{check, Check, CheckFailure, CheckReport, SEED_VARIABLE};
pub use context::FaultCounts;
pub use faults::{Faults, Mode, SimulatedFault};
pub use handlers::SimHandler;
pub use simulation::{SimBuildError, SimBuilder, SimError, Simulation};
pub use trace::{TraceEntry, TraceEvent};
