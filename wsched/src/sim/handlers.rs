//! Simulated handlers: what stands in for a command's real handler in a
//! simulation. Each answers after a latency drawn from the seed, and the fault
//! plan (or the handler's own odds) makes it fail, lose its answer, hang or answer
//! twice.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use crate::command::handler::{Placement, Registration};
use crate::command::{Command, Completer};
use crate::engine::completion::RawCompleter;
use crate::error::{BoxError, YieldError};
use crate::payload::Payload;
use crate::sim::context::{injected, Context, Due};
use crate::sim::trace::TraceEvent;

type Answer<C> = dyn Fn(C) -> Result<<C as Command>::Output, BoxError> + Send + Sync;

/// The simulated handler of command `C`: how it answers, how long it takes, and
/// (overriding the simulation's [`Faults`](super::Faults)) how often it fails,
/// hangs or answers twice.
///
/// ```
/// use std::time::Duration;
/// use wsched::sim::SimHandler;
/// use wsched::Command;
///
/// struct Charge { cents: u64 }
/// impl Command for Charge {
///     type Output = u64; // a receipt number
/// }
///
/// let charge = SimHandler::new(|c: Charge| Ok(c.cents * 10))
///     .latency(Duration::from_millis(5)..Duration::from_millis(80))
///     .failure(0.1); // one charge in ten fails, whatever the plan says
/// # let _ = charge;
/// ```
pub struct SimHandler<C: Command> {
    answer: Arc<Answer<C>>,
    latency: Option<Range<Duration>>,
    failure: Option<f64>,
    lost_answer: Option<f64>,
    hang: Option<f64>,
    duplicate: Option<f64>,
    timeout: Option<Duration>,
}

impl<C: Command> SimHandler<C> {
    /// A handler that answers with `answer(command)`: its output, or its error
    /// (which the yield gets as [`YieldError::Failed`](crate::YieldError::Failed)).
    /// It must be deterministic: the simulation replays it from the seed.
    pub fn new<F>(answer: F) -> Self
    where
        F: Fn(C) -> Result<C::Output, BoxError> + Send + Sync + 'static,
    {
        Self {
            answer: Arc::new(answer),
            latency: None,
            failure: None,
            lost_answer: None,
            hang: None,
            duplicate: None,
            timeout: None,
        }
    }

    /// Answers after a latency drawn uniformly from `range`, instead of the plan's.
    pub fn latency(mut self, range: Range<Duration>) -> Self {
        self.latency = Some(range);
        self
    }

    /// Fails (on purpose, with a [`SimulatedFault`](super::SimulatedFault)) with
    /// probability `p`, instead of the plan's.
    pub fn failure(mut self, p: f64) -> Self {
        self.failure = Some(p);
        self
    }

    /// Does the work and then loses the answer with probability `p`, instead of
    /// the plan's: the yield fails with a [`SimulatedFault`](super::SimulatedFault)
    /// whose `applied` is true — a request that reached the other side, whose
    /// reply did not come back. The fault behind most non-idempotent retries.
    pub fn lost_answer(mut self, p: f64) -> Self {
        self.lost_answer = Some(p);
        self
    }

    /// Gives up after `timeout`, as a real async handler's `AsyncOptions::timeout`
    /// would (so give it the same): any answer — an output, an error, a failure or
    /// lost answer of the plan — drawn to come later, or a hang, fails the yield
    /// with [`YieldError::TimedOut`] at `timeout` instead (the handler's work done
    /// when its answer was merely late, not when the command hung or failed).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Never answers with probability `p`, instead of the plan's.
    pub fn hang(mut self, p: f64) -> Self {
        self.hang = Some(p);
        self
    }

    /// Answers twice with probability `p`, instead of the plan's.
    pub fn duplicate(mut self, p: f64) -> Self {
        self.duplicate = Some(p);
        self
    }

    fn check(&self) -> Result<(), String> {
        for (name, p) in [
            ("failure", self.failure),
            ("lost_answer", self.lost_answer),
            ("hang", self.hang),
            ("duplicate", self.duplicate),
        ] {
            if let Some(p) = p.filter(|p| !(0.0..=1.0).contains(p)) {
                return Err(format!(
                    "the simulated handler of `{}` has {name} {p}: a probability must be \
                     within 0 and 1",
                    std::any::type_name::<C>()
                ));
            }
        }
        if let Some(range) = self.latency.as_ref().filter(|r| r.start > r.end) {
            return Err(format!(
                "the simulated handler of `{}` has latency {range:?}: its start must not \
                 be after its end",
                std::any::type_name::<C>()
            ));
        }
        Ok(())
    }

    /// The handler, as the scheduler registers it: it runs on the worker, inside
    /// the step that yielded, and leaves its answer with the simulation.
    pub(crate) fn into_registration(self) -> Result<Registration, String> {
        self.check()?;
        let handler = move |command: C, done: Completer<C>| {
            let command_name = std::any::type_name::<C>();
            let pid = done.pid();
            let Some(()) = Context::with(|sim| self.handle(sim, command, done)) else {
                // Registered only in a simulation, which runs its steps on its own
                // thread: reaching here means a step ran elsewhere.
                panic!(
                    "a simulated handler of `{command_name}` ran outside its simulation ({pid})"
                );
            };
        };
        Ok(Registration::new::<C, _>(Placement::Worker, handler))
    }

    /// Draws what happens to one yield of `command`, and leaves it with `sim`.
    fn handle(&self, sim: &mut Context, command: C, done: Completer<C>) {
        let command_name = std::any::type_name::<C>();
        let pid = done.pid();
        let on = sim.faults_on();
        let odds = |own: Option<f64>, plan: f64| if on { own.unwrap_or(plan) } else { 0.0 };
        let hang = odds(self.hang, sim.faults.handler_hang);
        let failure = odds(self.failure, sim.faults.handler_failure);
        let lost = odds(self.lost_answer, sim.faults.handler_lost_answer);
        let duplicate = odds(self.duplicate, sim.faults.handler_duplicate);
        let latency = match &self.latency {
            Some(range) => range.clone(),
            None => sim.faults.latency.clone(),
        };
        let latency = sim.duration_in(latency.start, latency.end);
        let timed_out = |after| YieldError::TimedOut {
            command: command_name,
            after,
        };
        if sim.chance(hang) {
            sim.counts.hung += 1;
            sim.note(pid, TraceEvent::Hang);
            match self.timeout {
                // Its caller gives up at the timeout, as a real handler's would.
                Some(after) => {
                    let result = Err(timed_out(after));
                    sim.schedule(
                        after,
                        Due::Complete {
                            completer: done.into_raw(),
                            result,
                        },
                    );
                }
                None => sim.hung.push(done.into_raw()),
            }
            return;
        }
        if sim.chance(duplicate) {
            sim.counts.duplicated += 1;
            sim.note(pid, TraceEvent::Duplicate);
            let second =
                RawCompleter::for_yield(done.process_cell(), done.tag(), std::any::type_name::<C>);
            let after =
                latency + sim.duration_in(Duration::ZERO, latency + Duration::from_millis(1));
            sim.schedule(after, Due::Duplicate(second));
        }
        let (result, after) = if sim.chance(failure) {
            sim.counts.failed += 1;
            sim.note(pid, TraceEvent::Fail);
            (Err(injected(command_name, false)), latency)
        } else {
            // The answer runs now, inside the step, so that a panic in it is the
            // yield's, as a real handler's would be; what it does is done, even when
            // the answer is then lost or late.
            let answer = (self.answer)(command);
            if sim.chance(lost) {
                sim.counts.lost += 1;
                sim.note(pid, TraceEvent::LostAnswer);
                (Err(injected(command_name, true)), latency)
            } else {
                let result = answer
                    .map(Payload::new)
                    .map_err(|source| YieldError::Failed {
                        command: command_name,
                        source,
                    });
                (result, latency)
            }
        };
        // Whatever the answer, one that would come after the deadline does not: the
        // timeout comes first, as a real handler's would.
        let (result, after) = match self.timeout.filter(|&timeout| after > timeout) {
            Some(timeout) => (Err(timed_out(timeout)), timeout),
            None => (result, after),
        };
        let completer = done.into_raw();
        sim.schedule(after, Due::Complete { completer, result });
    }
}

impl<C: Command> fmt::Debug for SimHandler<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimHandler")
            .field("command", &std::any::type_name::<C>())
            .field("latency", &self.latency)
            .field("failure", &self.failure)
            .field("lost_answer", &self.lost_answer)
            .field("timeout", &self.timeout)
            .field("hang", &self.hang)
            .field("duplicate", &self.duplicate)
            .finish()
    }
}
