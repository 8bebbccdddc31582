//! The state of the simulation running on this thread, which its simulated
//! handlers reach (they run inside steps, where the `Simulation` is not at hand):
//! the seeded stream, the fault plan, virtual time and what is due later.

use std::cell::RefCell;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::engine::completion::RawCompleter;
use crate::engine::random::{FastRand, RandomSource};
use crate::engine::shared::Task;
use crate::error::YieldError;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::sim::faults::Faults;
use crate::sim::trace::{Trace, TraceEvent};
use crate::time::clock::virtual_time;

/// Something due at a virtual instant.
pub(crate) enum Due {
    /// A simulated command's completion.
    Complete {
        completer: RawCompleter,
        result: Result<Payload, YieldError>,
    },
    /// A second completion of a command already completed (or to be).
    Duplicate(RawCompleter),
    /// A runnable process whose delay is over.
    Release(Task),
}

pub(crate) struct Scheduled {
    pub(crate) at: Instant,
    /// Breaks ties between events due at one instant: drawn from the seed, so the
    /// seed decides which of simultaneous events comes first.
    order: u64,
    /// Breaks the remaining ties (equal draws) by insertion.
    seq: u64,
    pub(crate) due: Due,
}

impl Scheduled {
    fn key(&self) -> (Instant, u64, u64) {
        (self.at, self.order, self.seq)
    }
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// What the simulated handlers did, for the run's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Simulated commands that failed on purpose.
    pub failed: u64,
    /// Simulated commands whose work was done and whose answer was lost.
    pub lost: u64,
    /// Simulated commands left without an answer.
    pub hung: u64,
    /// Second completions delivered.
    pub duplicated: u64,
    /// Processes killed between two steps.
    pub crashed: u64,
    /// Runnable processes made to wait.
    pub delayed: u64,
}

/// The simulation's state that steps reach.
pub(crate) struct Context {
    pub(crate) rng: FastRand,
    pub(crate) faults: Faults,
    pub(crate) origin: Instant,
    pub(crate) now: Instant,
    /// `now - origin`, kept as time moves: every trace note reads it.
    elapsed: Duration,
    queue: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    /// Completers of commands that hang: kept, so their yields never complete.
    pub(crate) hung: Vec<RawCompleter>,
    pub(crate) trace: Trace,
    pub(crate) counts: FaultCounts,
}

std::thread_local! {
    static CURRENT: RefCell<Option<Rc<RefCell<Context>>>> = const { RefCell::new(None) };
}

impl Context {
    pub(crate) fn new(seed: u64, faults: Faults, keep_trace: bool) -> Self {
        let origin = Instant::now();
        Self {
            rng: FastRand::seeded(seed),
            faults,
            origin,
            now: origin,
            elapsed: Duration::ZERO,
            queue: BinaryHeap::new(),
            seq: 0,
            hung: Vec::new(),
            trace: Trace::new(keep_trace),
            counts: FaultCounts::default(),
        }
    }

    /// Installs `context` as this thread's simulation, its time as the runtime's.
    /// Fails if another simulation runs on this thread.
    pub(crate) fn enter(context: &Rc<RefCell<Self>>) -> Result<(), ()> {
        CURRENT.with(|current| {
            let mut current = current.borrow_mut();
            if current.is_some() {
                return Err(());
            }
            *current = Some(context.clone());
            virtual_time::set(Some(context.borrow().now));
            Ok(())
        })
    }

    /// Takes this thread's simulation off it.
    pub(crate) fn leave() {
        CURRENT.with(|current| current.borrow_mut().take());
        virtual_time::set(None);
    }

    /// Runs `f` on this thread's simulation, if one runs here.
    pub(crate) fn with<R>(f: impl FnOnce(&mut Self) -> R) -> Option<R> {
        let context = CURRENT.with(|current| current.borrow().clone())?;
        let mut context = context.borrow_mut();
        Some(f(&mut context))
    }

    /// Virtual time elapsed since the start.
    pub(crate) fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Whether the plan's faults are on now.
    #[inline]
    pub(crate) fn faults_on(&self) -> bool {
        self.faults.active_at(self.elapsed)
    }

    /// True with probability `p`, drawn from the seed (no draw when `p` is zero, so
    /// a plan without a kind of fault draws the same stream as before it existed).
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next() % 1_000_000) < (p * 1e6) as u64
    }

    /// A number below `n` (which must not be zero).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.rng.next() % n as u64) as usize
    }

    /// A duration drawn uniformly from `range`.
    pub(crate) fn duration_in(&mut self, start: Duration, end: Duration) -> Duration {
        let span = end.saturating_sub(start).as_nanos() as u64;
        if span == 0 {
            return start;
        }
        start + Duration::from_nanos(self.rng.next() % span)
    }

    /// Makes `due` happen `after` from now.
    pub(crate) fn schedule(&mut self, after: Duration, due: Due) {
        self.seq += 1;
        let order = self.rng.next();
        self.queue.push(Reverse(Scheduled {
            at: self.now + after,
            order,
            seq: self.seq,
            due,
        }));
    }

    /// When the next scheduled event is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse(s)| s.at)
    }

    /// The next event due by now, if any.
    pub(crate) fn pop_due(&mut self) -> Option<Scheduled> {
        match self.queue.peek() {
            Some(Reverse(s)) if s.at <= self.now => self.queue.pop().map(|Reverse(s)| s),
            _ => None,
        }
    }

    /// Everything still scheduled, for the end of the run.
    pub(crate) fn take_scheduled(&mut self) -> Vec<Scheduled> {
        std::mem::take(&mut self.queue)
            .into_vec()
            .into_iter()
            .map(|Reverse(s)| s)
            .collect()
    }

    /// Moves virtual time to `to` (never backwards).
    pub(crate) fn advance_to(&mut self, to: Instant) {
        if to > self.now {
            self.now = to;
            self.elapsed = to - self.origin;
            virtual_time::set(Some(to));
        }
    }

    /// Notes `event` in the trace, at the current virtual time.
    pub(crate) fn note(&mut self, pid: Pid, event: TraceEvent) {
        self.trace.note(self.elapsed, pid, event);
    }
}

/// A yield's error for a command the simulation failed on purpose (`applied`: after
/// its work was done, the answer lost).
pub(crate) fn injected(command: &'static str, applied: bool) -> YieldError {
    YieldError::Failed {
        command,
        source: Box::new(crate::sim::faults::SimulatedFault { command, applied }),
    }
}
