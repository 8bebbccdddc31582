//! One process's history, recorded on a scheduler and replayed in the test harness.
//!
//! A **history** ([`History`]) holds the entry a process was started on, with its
//! arguments, and for each step the events it received (messages, completions,
//! cancels) and the commands it yielded, then how it ended. Values — messages,
//! completion outputs, arguments, commands, the result — are kept whole when their
//! type has a codec ([`Codecs`]), and by their type name otherwise.
//!
//! **Recording.** Spawn a process with
//! [`SpawnOptions::record_history`](crate::SpawnOptions::record_history) and take
//! its history with [`Handle::take_history`] (or look at it so far with
//! [`Handle::history`]). Or give a process type a **flight recorder**
//! ([`Builder::flight_recorder`](crate::Builder::flight_recorder)): each of its
//! processes keeps its last steps, dumped when it fails — to a hook
//! ([`Builder::on_flight_dump`](crate::Builder::on_flight_dump)) and kept for
//! [`Handle::take_flight_dumps`]. Processes not recorded pay one branch a step.
//!
//! **Replaying.** [`replay`] starts a new instance in the
//! [`testing`](crate::testing) harness on the recorded entry and arguments, feeds
//! it each recorded step's events, and checks each step's yields (tags, command
//! types, and values where codecs allow) and the end against the recording. The
//! first difference is a [`Divergence`], which says at which step, what was
//! expected and what was found. [`replay_to`] stops after a given step and hands
//! over the [`TestProcess`](crate::testing::TestProcess), for the test to go on by
//! hand.
//!
//! **Saving.** With the `serde` feature, `Codecs::register` keeps any
//! `serde` type's values (as JSON), and `History::save` and `History::load`
//! write and read histories as JSON files — which a repository can keep and
//! `cargo test` replay, so a recorded run stays a regression test.
//!
//! What a history cannot hold, a replay cannot reproduce: a step that reads the
//! clock, draws random numbers, or looks at its own PID (the harness runs the
//! process as `<1>`) may yield something else on replay. What the process does
//! through its context (sends, spawns, monitors) is not recorded, and in the
//! harness goes to the harness's records.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use wsched::prelude::*;
//! use wsched::sim::history::{replay, Codecs};
//! use wsched::{Scheduler, SpawnOptions};
//!
//! struct Counter {
//!     total: u32,
//! }
//!
//! #[process]
//! impl Counter {
//!     #[entry]
//!     fn count(&mut self, start: u32) -> Result<u32, BoxError> {
//!         self.total = start;
//!         loop {
//!             let n = recv!(u32)?;
//!             if n == 0 {
//!                 return Ok(self.total);
//!             }
//!             self.total += n;
//!             yield_cmd!(Sleep(Duration::from_millis(1)))?;
//!         }
//!     }
//! }
//!
//! let scheduler = Scheduler::builder().workers(2).build()?;
//! let record = SpawnOptions::new().record_history();
//! let pid = scheduler.spawn_with(Counter { total: 0 }, "count", (10_u32,), record)?;
//! for n in [1_u32, 2, 0] {
//!     scheduler.send(pid, n)?;
//! }
//! assert_eq!(scheduler.wait(pid)?.downcast::<u32>()?, 13);
//! let history = scheduler.take_history(pid).expect("recorded");
//! println!("{history}");
//!
//! // A new instance, stepped by the harness, does exactly what the first one did.
//! let report = replay(&history, Counter { total: 0 }, &Codecs::new())?;
//! assert_eq!(report.steps(), history.steps.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//
// `observe/history.rs` holds the capture, and the types it fills (a lower layer,
// which cannot name this one); this module is their public face.

mod codec;
mod replay;

pub use crate::observe::history::{
    Codecs, Encoded, History, Outcome, RecordedEvent, RecordedStep, RecordedValue, RecordedYield,
    RecordedYieldError,
};
#[cfg(feature = "serde")]
pub use codec::HistoryFileError;
pub use replay::{replay, replay_to, Divergence, DivergenceKind, ReplayReport};

use crate::engine::handle::Handle;
use crate::observe::instrument::Observers;
use crate::pid::Pid;
use crate::runtime::Scheduler;

/// Recorded histories (the `sim` feature; see [`sim::history`](crate::sim::history)).
impl Handle {
    /// A copy of `pid`'s history so far, if it was spawned with
    /// [`SpawnOptions::record_history`](crate::SpawnOptions::record_history) and its
    /// history was not taken: it goes on recording. Its
    /// [`outcome`](History::outcome) is [`Outcome::Running`] until the process
    /// ends.
    pub fn history(&self, pid: Pid) -> Option<History> {
        self.shared.part::<Observers>().history.history(pid)
    }

    /// Takes `pid`'s history (see [`history`](Self::history)), which frees it: the
    /// scheduler keeps a recorded process's history, even after it ended, until it
    /// is taken. Taken from a process still running, it stops recording it.
    pub fn take_history(&self, pid: Pid) -> Option<History> {
        self.shared.part::<Observers>().history.take(pid)
    }

    /// Takes the flight recorders' dumps kept so far, oldest first (see
    /// [`Builder::flight_recorder`](crate::Builder::flight_recorder); at most the
    /// latest 64 are kept).
    pub fn take_flight_dumps(&self) -> Vec<History> {
        self.shared.part::<Observers>().history.take_dumps()
    }
}

/// Recorded histories (the `sim` feature; see [`sim::history`](crate::sim::history)).
impl Scheduler {
    /// [`Handle::history`].
    pub fn history(&self, pid: Pid) -> Option<History> {
        self.handle().history(pid)
    }

    /// [`Handle::take_history`].
    pub fn take_history(&self, pid: Pid) -> Option<History> {
        self.handle().take_history(pid)
    }

    /// [`Handle::take_flight_dumps`].
    pub fn take_flight_dumps(&self) -> Vec<History> {
        self.handle().take_flight_dumps()
    }
}
