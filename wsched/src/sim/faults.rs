//! The faults a simulation injects: data, drawn from the seed or given by the test,
//! and printed with every failure so that a run is understood from its report.

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use crate::engine::random::{FastRand, RandomSource};

/// How long faults last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Faults for the whole run: checks that nothing bad happens (balances add
    /// up, no message is lost), however long faults go on.
    Safety,
    /// Faults for the first `faulty_for` of virtual time, then none (handlers
    /// answer, nothing crashes, no delay): checks that the system gets back to
    /// its goal once the world is healthy, within the bound a test gives
    /// [`Simulation::run_until`](super::Simulation::run_until), so a livelock
    /// fails instead of hiding. A command left hanging in the faulty phase stays
    /// unanswered: getting past it (a timeout, a retry) is the system's job.
    Liveness {
        /// How long the faulty phase lasts, from the start of the run.
        faulty_for: Duration,
    },
}

/// What a simulation does wrong on purpose, and how often.
///
/// Every probability is per occasion: per yield of a simulated command for the
/// handler faults, per step for crashes, per process made runnable for delays.
/// Only what production allows is injected: a crash ends a process between two
/// of its steps with the reason "killed", as [`Handle::kill`](crate::Handle::kill)
/// does (links, monitors and supervisors act as they would); a delay postpones
/// when a runnable process next steps, which never reorders the messages one
/// process sent another; nothing is dropped that production would deliver.
///
/// `Faults::from_seed` draws a plan from the seed, as FoundationDB's and
/// TigerBeetle's simulators do, so that a range of seeds explores calm runs and
/// stormy ones; `Display` prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Probability that a simulated command fails (its yield gets
    /// [`YieldError::Failed`](crate::YieldError::Failed) with a [`SimulatedFault`]).
    pub handler_failure: f64,
    /// Probability that a simulated command does its work and then loses its answer
    /// (its yield fails with a [`SimulatedFault`] whose `applied` is true).
    pub handler_lost_answer: f64,
    /// Probability that a simulated command never completes.
    pub handler_hang: f64,
    /// Probability that a simulated command completes twice (the runtime must
    /// ignore the second completion).
    pub handler_duplicate: f64,
    /// How long a simulated command takes, drawn uniformly (a handler may set
    /// its own).
    pub latency: Range<Duration>,
    /// Probability, per step, that the process about to step is killed instead.
    pub crash: f64,
    /// Probability that a process made runnable waits before it steps.
    pub delay: f64,
    /// How long such a wait lasts at most (drawn uniformly from zero).
    pub max_delay: Duration,
    /// Probability that the runtime takes one of its rare paths on purpose (a
    /// bounded mailbox on the edge of full rejecting, a restarted child crashing
    /// at once, a timer firing just before its cancel, a callee running only at its
    /// caller's deadline so that the reply races the timeout).
    pub buggify: f64,
    /// How long the faults last.
    pub mode: Mode,
}

impl Faults {
    /// No faults: every command completes after its handler's latency (zero unless
    /// set), nothing crashes or waits. The seed still chooses the order of steps.
    pub fn none() -> Self {
        Self {
            handler_failure: 0.0,
            handler_lost_answer: 0.0,
            handler_hang: 0.0,
            handler_duplicate: 0.0,
            latency: Duration::ZERO..Duration::ZERO,
            crash: 0.0,
            delay: 0.0,
            max_delay: Duration::ZERO,
            buggify: 0.0,
            mode: Mode::Safety,
        }
    }

    /// A plan drawn from `seed`: each kind of fault is off in some seeds and on, at
    /// a probability of its own, in others, so a range of seeds covers calm and
    /// stormy runs alike. The same seed always draws the same plan.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = FastRand::seeded(seed ^ 0xFA01_7B1A_4E00_0001);
        // Off in about a third of the seeds; otherwise up to `max`.
        let mut pick = |max: f64| {
            let on = rng.next() % 3 != 0;
            let level = (rng.next() % 1_000) as f64 / 1_000.0;
            if on {
                max * level
            } else {
                0.0
            }
        };
        let handler_failure = pick(0.2);
        let handler_hang = pick(0.02);
        let handler_duplicate = pick(0.05);
        let crash = pick(0.01);
        let delay = pick(0.3);
        let buggify = pick(0.1);
        let longest = 1 + rng.next() % 50;
        let max_delay = Duration::from_millis(1 + rng.next() % 20);
        // Drawn after the others, so that adding it left their draws as they were.
        let handler_lost_answer = {
            let on = rng.next() % 3 != 0;
            let level = (rng.next() % 1_000) as f64 / 1_000.0;
            if on {
                0.05 * level
            } else {
                0.0
            }
        };
        Self {
            handler_failure,
            handler_lost_answer,
            handler_hang,
            handler_duplicate,
            latency: Duration::ZERO..Duration::from_millis(longest),
            crash,
            delay,
            max_delay,
            buggify,
            mode: Mode::Safety,
        }
    }

    /// This plan, with faults only for the first `faulty_for` of the run (see
    /// [`Mode::Liveness`]).
    pub fn liveness(mut self, faulty_for: Duration) -> Self {
        self.mode = Mode::Liveness { faulty_for };
        self
    }

    /// This plan, faults lasting the whole run (see [`Mode::Safety`]).
    pub fn safety(mut self) -> Self {
        self.mode = Mode::Safety;
        self
    }

    /// This plan with crashes at probability `p` per step.
    pub fn crash(mut self, p: f64) -> Self {
        self.crash = p;
        self
    }

    /// This plan with simulated commands failing at probability `p`.
    pub fn handler_failure(mut self, p: f64) -> Self {
        self.handler_failure = p;
        self
    }

    /// This plan with simulated commands doing their work and losing their answer at
    /// probability `p`.
    pub fn handler_lost_answer(mut self, p: f64) -> Self {
        self.handler_lost_answer = p;
        self
    }

    /// This plan with simulated commands never completing at probability `p`.
    pub fn handler_hang(mut self, p: f64) -> Self {
        self.handler_hang = p;
        self
    }

    /// This plan with simulated commands completing twice at probability `p`.
    pub fn handler_duplicate(mut self, p: f64) -> Self {
        self.handler_duplicate = p;
        self
    }

    /// This plan with simulated commands taking a latency drawn from `range`.
    pub fn latency(mut self, range: Range<Duration>) -> Self {
        self.latency = range;
        self
    }

    /// This plan with runnable processes waiting up to `max` before they step, at
    /// probability `p`.
    pub fn delay(mut self, p: f64, max: Duration) -> Self {
        self.delay = p;
        self.max_delay = max;
        self
    }

    /// This plan with the runtime's rare paths taken at probability `p`.
    pub fn buggify(mut self, p: f64) -> Self {
        self.buggify = p;
        self
    }

    /// Whether faults are on at `elapsed` into the run.
    #[inline]
    pub(crate) fn active_at(&self, elapsed: Duration) -> bool {
        match self.mode {
            Mode::Safety => true,
            Mode::Liveness { faulty_for } => elapsed < faulty_for,
        }
    }

    /// Checks every probability is within 0 to 1 and the ranges are ordered.
    pub(crate) fn check(&self) -> Result<(), String> {
        let probabilities = [
            ("handler_failure", self.handler_failure),
            ("handler_lost_answer", self.handler_lost_answer),
            ("handler_hang", self.handler_hang),
            ("handler_duplicate", self.handler_duplicate),
            ("crash", self.crash),
            ("delay", self.delay),
            ("buggify", self.buggify),
        ];
        for (name, p) in probabilities {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!(
                    "`{name}` is {p}: a probability must be within 0 and 1"
                ));
            }
        }
        if self.latency.start > self.latency.end {
            return Err(format!(
                "`latency` is {:?}: its start must not be after its end",
                self.latency
            ));
        }
        Ok(())
    }
}

impl Default for Faults {
    fn default() -> Self {
        Self::none()
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let percent = |p: f64| format!("{:.2}%", p * 100.0);
        write!(
            f,
            "handlers fail {}, lose the answer {}, hang {}, complete twice {}, take \
             {:?}..{:?}; crashes {} per step; delays {} up to {:?}; buggify {}; ",
            percent(self.handler_failure),
            percent(self.handler_lost_answer),
            percent(self.handler_hang),
            percent(self.handler_duplicate),
            self.latency.start,
            self.latency.end,
            percent(self.crash),
            percent(self.delay),
            self.max_delay,
            percent(self.buggify),
        )?;
        match self.mode {
            Mode::Safety => write!(f, "safety mode (faults all run long)"),
            Mode::Liveness { faulty_for } => {
                write!(f, "liveness mode (faults for the first {faulty_for:?})")
            }
        }
    }
}

/// The error a yield gets when a simulation fails its command on purpose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimulatedFault {
    /// The command's type name.
    pub command: &'static str,
    /// Whether the handler ran before the answer was lost (a request that arrived,
    /// whose reply did not): whatever the handler did was done — and is done
    /// again by a retry. (Its answer may have been an error, which was lost too.)
    pub applied: bool,
}

impl fmt::Display for SimulatedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.applied {
            write!(
                f,
                "the simulation lost the answer of this `{}` on purpose, after its work \
                 was done (a handler fault of its plan)",
                self.command
            )
        } else {
            write!(
                f,
                "the simulation failed this `{}` on purpose (a handler fault of its plan)",
                self.command
            )
        }
    }
}

impl std::error::Error for SimulatedFault {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_one_plan_and_seeds_draw_different_ones() {
        assert_eq!(Faults::from_seed(7), Faults::from_seed(7));
        let plans: Vec<String> = (0..20).map(|s| Faults::from_seed(s).to_string()).collect();
        let mut distinct = plans.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() > 15, "{plans:#?}");
        for seed in 0..200 {
            Faults::from_seed(seed)
                .check()
                .expect("a drawn plan is valid");
        }
    }

    #[test]
    fn a_bad_probability_is_named() {
        let error = Faults::none().crash(1.5).check().unwrap_err();
        assert!(error.contains("`crash` is 1.5"), "{error}");
    }

    #[test]
    fn liveness_plans_heal() {
        let faults = Faults::none().liveness(Duration::from_secs(1));
        assert!(faults.active_at(Duration::from_millis(999)));
        assert!(!faults.active_at(Duration::from_secs(1)));
        assert!(Faults::none().active_at(Duration::from_secs(1_000_000)));
    }
}
