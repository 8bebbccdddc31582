//! Always-on counters, cheap enough to leave on, and the process listing.

use super::state::ProcessState;
use crate::pid::Pid;
use crate::process::SuspendPoint;
// Plain std atomics even under loom: these are statistics, not synchronisation, and
// modelling every counter update would multiply the interleavings loom explores
// without checking anything. (A thief reads a victim's step counter only as a hint;
// see `steal_lifo` in `worker.rs`.)
use std::sync::atomic::{AtomicU64, Ordering};

/// One worker's counters. Each is written only by its worker, so an increment is a
/// plain load and store (no locked instruction); readers on other threads may see a
/// slightly stale value, never a torn one.
#[derive(Default)]
pub(crate) struct WorkerCounters {
    pub(crate) steps: Counter,
    pub(crate) local_pops: Counter,
    pub(crate) lifo_pops: Counter,
    pub(crate) global_pops: Counter,
    pub(crate) steals: Counter,
    pub(crate) stolen: Counter,
    pub(crate) lifo_steals: Counter,
    pub(crate) parks: Counter,
    /// Processes spawned, finished, failed and stopped on this worker: the shared
    /// totals would be a cache line every worker writes per spawn and per end.
    pub(crate) processes: ProcessCounts<Counter>,
}

#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker calls this.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What happened to processes: `C` is a [`Counter`] in a worker's own counters, an
/// atomic in the one set that threads other than workers share.
#[derive(Default)]
pub(crate) struct ProcessCounts<C> {
    pub(crate) spawned: C,
    pub(crate) finished: C,
    pub(crate) failed: C,
    pub(crate) stopped: C,
}

/// What a process count counts.
#[derive(Clone, Copy)]
pub(crate) enum ProcessEvent {
    Spawned,
    Finished,
    Failed,
    Stopped,
}

impl<C> ProcessCounts<C> {
    pub(crate) fn of(&self, event: ProcessEvent) -> &C {
        match event {
            ProcessEvent::Spawned => &self.spawned,
            ProcessEvent::Finished => &self.finished,
            ProcessEvent::Failed => &self.failed,
            ProcessEvent::Stopped => &self.stopped,
        }
    }
}

/// The totals over the workers' counts and the outside ones.
pub(crate) fn process_totals<'a>(
    workers: impl Iterator<Item = &'a WorkerCounters>,
    outside: &ProcessCounts<AtomicU64>,
) -> ProcessCounts<u64> {
    let load = |count: &AtomicU64| count.load(Ordering::Relaxed);
    workers.fold(
        ProcessCounts {
            spawned: load(&outside.spawned),
            finished: load(&outside.finished),
            failed: load(&outside.failed),
            stopped: load(&outside.stopped),
        },
        |sum, worker| {
            let counts = &worker.processes;
            ProcessCounts {
                spawned: sum.spawned + counts.spawned.get(),
                finished: sum.finished + counts.finished.get(),
                failed: sum.failed + counts.failed.get(),
                stopped: sum.stopped + counts.stopped.get(),
            }
        },
    )
}

impl WorkerCounters {
    pub(crate) fn snapshot(&self) -> WorkerMetrics {
        WorkerMetrics {
            steps: self.steps.get(),
            local_pops: self.local_pops.get(),
            lifo_pops: self.lifo_pops.get(),
            global_pops: self.global_pops.get(),
            steals: self.steals.get(),
            stolen: self.stolen.get(),
            lifo_steals: self.lifo_steals.get(),
            parks: self.parks.get(),
        }
    }
}

/// A snapshot of one worker's counters since the scheduler started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// Steps run.
    pub steps: u64,
    /// Processes taken from its own deque.
    pub local_pops: u64,
    /// Processes taken from its LIFO slot (woken by the previous step).
    pub lifo_pops: u64,
    /// Processes taken from the global queue (batches count once).
    pub global_pops: u64,
    /// Successful steals.
    pub steals: u64,
    /// Processes moved by those steals (including the one run at once).
    pub stolen: u64,
    /// Of those steals, the ones that took another worker's LIFO slot because that
    /// worker was stuck in a long step.
    pub lifo_steals: u64,
    /// Times it parked on its condition variable.
    pub parks: u64,
}

/// A snapshot of the scheduler's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// One entry per worker, by worker index.
    pub workers: Vec<WorkerMetrics>,
    /// Processes spawned (successfully initialised).
    pub spawned: u64,
    /// Processes that finished with a result.
    pub finished: u64,
    /// Processes that ended with an error (failure or panic), not counting stops.
    pub failed: u64,
    /// Processes stopped without finishing: by shutdown's timeout, or killed
    /// ([`Handle::kill`](crate::Handle::kill)).
    pub stopped: u64,
    /// Processes not yet ended.
    pub live: usize,
    /// Items waiting in the global queue.
    pub global_queue: usize,
    /// Timers armed and not yet fired or cancelled, including those whose deadline
    /// never comes: [`Sleep`](crate::command::Sleep)s (cancelled when their process
    /// ends or withdraws the yield) and timed messages
    /// ([`Handle::send_after`](crate::Handle::send_after),
    /// [`Handle::send_interval`](crate::Handle::send_interval); cancelled through
    /// their [`TimerRef`](crate::TimerRef)).
    pub pending_timers: usize,
    /// Timed messages dropped undelivered, though nobody cancelled them: messages
    /// that fell due after their target had ended (an interval counts the one that
    /// found its target gone, and stops), and those still pending when the scheduler
    /// shut down (their targets had all ended). Messages still unread in a mailbox
    /// when its process ends are not counted here, but in
    /// [`dead_letters`](Self::dead_letters).
    pub undelivered_timed_messages: u64,
    /// Threads of the blocking pool alive right now (idle ones retire after the
    /// keep-alive).
    pub blocking_threads: usize,
    /// Failures nobody joined, monitored or linked to, reported to the
    /// [`on_unobserved_failure`](crate::Builder::on_unobserved_failure) hook
    /// (see [`FailureReport`](crate::FailureReport) for the rule).
    pub unobserved_failures: u64,
    /// Messages still unread when their process ended, handed to the
    /// [`on_dead_letter`](crate::Builder::on_dead_letter) hook if there is one
    /// (see [`DeadLetter`](crate::DeadLetter)).
    pub dead_letters: u64,
}

impl Metrics {
    /// The sum over all workers.
    pub fn total(&self) -> WorkerMetrics {
        self.workers
            .iter()
            .fold(WorkerMetrics::default(), |mut sum, w| {
                sum.steps += w.steps;
                sum.local_pops += w.local_pops;
                sum.lifo_pops += w.lifo_pops;
                sum.global_pops += w.global_pops;
                sum.steals += w.steals;
                sum.stolen += w.stolen;
                sum.lifo_steals += w.lifo_steals;
                sum.parks += w.parks;
                sum
            })
    }
}

/// One line of [`Scheduler::processes`](crate::Scheduler::processes).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// The process.
    pub pid: Pid,
    /// The process that spawned it (`None`: spawned from outside any process).
    pub parent: Option<Pid>,
    /// Its state when listed.
    pub state: ProcessState,
    /// The entry it runs.
    pub entry: String,
    /// Steps taken so far.
    pub steps: u64,
    /// Where it last said it waits (for macro processes: the `yield_cmd!`/`recv!`
    /// call), if it is suspended and said so.
    pub suspended_at: Option<SuspendPoint>,
}

impl std::fmt::Display for ProcessInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} [{}] after {} steps",
            self.pid, self.entry, self.state, self.steps
        )?;
        if let Some(point) = &self.suspended_at {
            write!(f, ", at {point}")?;
        }
        Ok(())
    }
}
