//! Opt-in step timing: how long steps take and how long woken processes wait, per
//! worker; each process's busy time; and a detector that names steps running too
//! long while they still run.
//!
//! Off unless [`Builder::step_timing`](crate::Builder::step_timing) or
//! [`Builder::long_step_threshold`](crate::Builder::long_step_threshold) turns it
//! on: then every step costs two clock reads, which is as much as a short step.
//! Off, the worker pays one predictable branch on `Shared::timing` per step.
//!
//! # The clock
//!
//! On x86-64 Linux, when the kernel keeps time with the CPU's time-stamp counter
//! (which says the counter is invariant and in step across cores), ticks of that
//! counter: a read costs about a third of `Instant::now()` on the virtual machines
//! this was measured on. Elsewhere, nanoseconds of `Instant`. Ticks are converted to
//! time when read out, with the rate measured over the scheduler's life so far
//! (see [`Clock::femtos_per_tick`]), so nothing is calibrated at start.
//!
//! # What is measured
//!
//! * A step: from just before `Process::step` to just after it returns, into the
//!   worker's histogram and the process's busy time.
//! * A handler that runs on the worker (registered with `Builder::handler`): from
//!   just before it is called to just after it returns, into the busy time of the
//!   process whose yield it handles. A handler that blocks its worker holds it as a
//!   long step would, so the detector watches it too. The handlers are wrapped to
//!   be timed when the scheduler is built with timing on; without, dispatching a
//!   yield is unchanged.
//! * Wake latency: for a process a step woke into its worker's LIFO slot (or
//!   spawned there), from the end of that step (before which it cannot run there)
//!   to the start of its own step, when the same worker runs it next: the path of
//!   a message between processes. Taking the waking step's end, which is read
//!   anyway, spares a clock read per wake-up. A process woken from another thread
//!   (a timer, the blocking pool, outside code), moved on to the worker's deque, or
//!   taken by another worker is not measured: its wake left no time behind where
//!   the runner finds it.
//!
//! # The long-step detector
//!
//! A step cannot be interrupted, but it can be named while it runs. With a
//! threshold set, each worker publishes the start and the PID of the step it runs
//! (four stores per step, to a line of its own), with a sequence number that tells
//! one step from the next. A
//! thread wakes every quarter of the threshold (at least every millisecond, at most
//! every 100 ms), and reports each step it finds running for longer than the
//! threshold once, with the process's entry, the suspension point the step
//! resumed from and, when it is a handler of one of the step's yields that runs
//! long on the worker, the command that handler handles, to [`Builder::on_long_step`](crate::Builder::on_long_step) (by
//! default, a line on stderr). The thread ends with the scheduler.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::engine::counters::Counter;
use crate::engine::process::SuspendPoint;
use crate::engine::shared::Shared;
use crate::observe::trace;
use crate::pid::Pid;
use crate::runtime::drop_quietly;
use crate::time::clock::{self, RuntimeClock, TimeSource};
use crate::type_name::ProcessLabel;

/// Buckets of a histogram: bucket `i` counts durations of `2^i ..= 2^(i+1) - 1`
/// ticks (bucket 0 also zero), so 64 cover every `u64`.
const BUCKETS: usize = 64;

/// The hook that long steps are reported to.
pub(crate) type LongStepHook = Box<dyn Fn(&LongStep) + Send + Sync>;

/// The clock step timing reads: see the module docs.
pub(crate) struct Clock {
    start: Instant,
    start_ticks: u64,
    tsc: bool,
}

impl Clock {
    pub(crate) fn new() -> Self {
        let tsc = <RuntimeClock as TimeSource>::IS_SYSTEM && tsc_is_the_system_clock();
        let mut clock = Self {
            start: clock::now(),
            start_ticks: 0,
            tsc,
        };
        clock.start_ticks = clock.ticks();
        clock
    }

    /// Now, in ticks.
    #[inline]
    pub(crate) fn ticks(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.tsc {
            // SAFETY: `rdtsc` has no preconditions on x86-64 (it is available on
            // every x86-64 CPU and reads a register); `tsc` is set only where the
            // kernel vouches for the counter as a clock.
            return unsafe { std::arch::x86_64::_rdtsc() };
        }
        u64::try_from(clock::since(self.start).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Femtoseconds per tick (an integer fine enough for a 100 GHz counter),
    /// measured over the scheduler's life so far.
    pub(crate) fn femtos_per_tick(&self) -> u64 {
        const FEMTOS_PER_NANO: u128 = 1_000_000;
        if !self.tsc {
            return FEMTOS_PER_NANO as u64;
        }
        let ticks = u128::from(self.ticks().wrapping_sub(self.start_ticks));
        let femtos = clock::since(self.start).as_nanos() * FEMTOS_PER_NANO;
        match femtos.checked_div(ticks) {
            Some(rate) => u64::try_from(rate).unwrap_or(u64::MAX),
            None => FEMTOS_PER_NANO as u64,
        }
    }

    /// What the clock read when it was made.
    pub(crate) fn start_ticks(&self) -> u64 {
        self.start_ticks
    }

    pub(crate) fn duration(ticks: u64, femtos_per_tick: u64) -> Duration {
        let nanos = u128::from(ticks) * u128::from(femtos_per_tick) / 1_000_000;
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// Whether the time-stamp counter is this machine's system clock (Linux says so in
/// sysfs): then it is invariant and synchronised across cores.
fn tsc_is_the_system_clock() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|source| source.trim() == "tsc")
}

/// A log-bucket histogram one worker writes (plain loads and stores).
struct Buckets([Counter; BUCKETS]);

impl Default for Buckets {
    fn default() -> Self {
        Self(std::array::from_fn(|_| Counter::default()))
    }
}

impl Buckets {
    #[inline]
    fn record(&self, ticks: u64) {
        let bucket = (u64::BITS - 1).saturating_sub(ticks.leading_zeros()) as usize;
        self.0[bucket].add(1);
    }

    fn snapshot(&self, femtos_per_tick: u64) -> Histogram {
        Histogram {
            counts: self.0.iter().map(Counter::get).collect(),
            femtos_per_tick,
        }
    }
}

/// One worker's timing state.
#[derive(Default)]
struct WorkerTiming {
    steps: Buckets,
    wakes: Buckets,
    /// When its last step ended (ticks): where the wake latency of a process that
    /// step woke into the LIFO slot is counted from.
    last_end: AtomicU64,
    /// The step running now, for the detector: its start in ticks (0: none), its
    /// process, and a number that changes with every step (written last, with
    /// Release, so that a reader who sees it unchanged around its reads of the
    /// other two read one step's values).
    started: AtomicU64,
    pid: AtomicU64,
    sequence: AtomicU64,
    /// The command whose handler runs on the worker for the step, if one does: the
    /// `Payload::type_name_fn` of the yield, as a pointer (null: none).
    handling: AtomicPtr<()>,
}

/// Step timing, as `Shared::timing` holds it when it is on.
pub(crate) struct Timing {
    pub(crate) clock: Clock,
    workers: Box<[CachePadded<WorkerTiming>]>,
    long_step: Option<Duration>,
    hook: Option<LongStepHook>,
    long_steps: AtomicU64,
}

/// What the builder says about step timing.
pub(crate) struct TimingOptions {
    pub(crate) long_step: Option<Duration>,
    pub(crate) hook: Option<LongStepHook>,
}

impl Timing {
    pub(crate) fn new(workers: usize, options: TimingOptions) -> Self {
        Self {
            clock: Clock::new(),
            workers: (0..workers).map(|_| Default::default()).collect(),
            long_step: options.long_step,
            hook: options.hook,
            long_steps: AtomicU64::new(0),
        }
    }

    /// Worker `index` begins a step of `pid`; returns its start. `woken`: whether a
    /// step of this worker put the process into its LIFO slot (its wake latency is
    /// counted from the end of this worker's last step).
    #[inline]
    pub(crate) fn step_begins(&self, index: usize, pid: Pid, woken: bool) -> u64 {
        let worker = &self.workers[index];
        let now = self.clock.ticks();
        if woken {
            let woken_at = worker.last_end.load(Ordering::Relaxed);
            worker.wakes.record(now.saturating_sub(woken_at));
        }
        if self.long_step.is_some() {
            worker.started.store(now, Ordering::Relaxed);
            worker.pid.store(pid.as_u64(), Ordering::Relaxed);
            worker
                .handling
                .store(std::ptr::null_mut(), Ordering::Relaxed);
            let sequence = worker.sequence.load(Ordering::Relaxed);
            worker
                .sequence
                .store(sequence.wrapping_add(1), Ordering::Release);
        }
        now
    }

    /// Runs `handler`, the handler of a `command` (its type name's function) that a
    /// step of worker `index` yielded, on the worker; returns how long it held the
    /// worker, in ticks. The detector sees it as a step running from its start,
    /// naming the command.
    #[inline(never)]
    pub(crate) fn run_handler(
        &self,
        index: usize,
        command: fn() -> &'static str,
        handler: impl FnOnce(),
    ) -> u64 {
        /// Tells the detector the handler is over, even if it unwinds.
        struct Over<'a>(Option<&'a WorkerTiming>);
        impl Drop for Over<'_> {
            fn drop(&mut self) {
                if let Some(worker) = self.0 {
                    worker.started.store(0, Ordering::Relaxed);
                }
            }
        }
        let worker = &self.workers[index];
        let began = self.clock.ticks();
        let watched = self.long_step.is_some().then_some(&**worker);
        if let Some(worker) = watched {
            worker.started.store(began, Ordering::Relaxed);
            worker.handling.store(command as *mut (), Ordering::Relaxed);
            let sequence = worker.sequence.load(Ordering::Relaxed);
            worker
                .sequence
                .store(sequence.wrapping_add(1), Ordering::Release);
        }
        let over = Over(watched);
        handler();
        drop(over);
        self.clock.ticks().saturating_sub(began)
    }

    /// Worker `index` ended the step that began at `started`; returns its length in
    /// ticks.
    #[inline]
    pub(crate) fn step_ends(&self, index: usize, started: u64) -> u64 {
        let worker = &self.workers[index];
        let now = self.clock.ticks();
        let ticks = now.saturating_sub(started);
        worker.steps.record(ticks);
        worker.last_end.store(now, Ordering::Relaxed);
        if self.long_step.is_some() {
            worker.started.store(0, Ordering::Relaxed);
        }
        ticks
    }

    pub(crate) fn metrics(&self) -> StepTimingMetrics {
        let femtos_per_tick = self.clock.femtos_per_tick();
        StepTimingMetrics {
            workers: self
                .workers
                .iter()
                .map(|w| WorkerStepTiming {
                    steps: w.steps.snapshot(femtos_per_tick),
                    wake_latency: w.wakes.snapshot(femtos_per_tick),
                })
                .collect(),
            long_steps: self.long_steps.load(Ordering::Relaxed),
        }
    }

    /// A process's busy time, from its ticks.
    pub(crate) fn busy(&self, ticks: u64) -> Duration {
        Clock::duration(ticks, self.clock.femtos_per_tick())
    }

    /// Starts the long-step detector, if a threshold was set.
    pub(crate) fn start_detector(shared: &Arc<Shared>, thread_name: String) -> std::io::Result<()> {
        let Some(timing) = shared.timing() else {
            return Ok(());
        };
        let Some(threshold) = timing.long_step else {
            return Ok(());
        };
        let period = (threshold / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
        let shared = Arc::downgrade(shared);
        std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || detect(&shared, threshold, period))
            .map(drop)
    }

    fn report(&self, step: LongStep) {
        self.long_steps.fetch_add(1, Ordering::Relaxed);
        trace::trace_long_step(
            step.pid,
            &step.entry,
            step.resumed_from.as_ref(),
            step.running_for,
        );
        let ran = catch_unwind(AssertUnwindSafe(|| match &self.hook {
            Some(hook) => hook(&step),
            None => eprintln!("wsched: {step}"),
        }));
        if let Err(panic) = ran {
            drop_quietly(panic);
        }
    }
}

/// The detector's loop: see the module docs.
fn detect(shared: &Weak<Shared>, threshold: Duration, period: Duration) {
    let mut reported: Vec<u64> = Vec::new();
    loop {
        std::thread::sleep(period);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.is_terminated() {
            return;
        }
        let Some(timing) = shared.timing() else {
            return;
        };
        reported.resize(timing.workers.len(), u64::MAX);
        let femtos_per_tick = timing.clock.femtos_per_tick();
        for (index, worker) in timing.workers.iter().enumerate() {
            let sequence = worker.sequence.load(Ordering::Acquire);
            let started = worker.started.load(Ordering::Relaxed);
            let pid = worker.pid.load(Ordering::Relaxed);
            if started == 0 || pid == 0 || reported[index] == sequence {
                continue;
            }
            let pid = Pid::from_raw(pid);
            let running_for = Clock::duration(
                timing.clock.ticks().saturating_sub(started),
                femtos_per_tick,
            );
            if running_for < threshold || worker.sequence.load(Ordering::Acquire) != sequence {
                continue;
            }
            reported[index] = sequence;
            let handling = worker.handling.load(Ordering::Relaxed);
            // SAFETY: `handling` holds null or a pointer made from a
            // `fn() -> &'static str` (see `Timing::run_handler`), which is what it is
            // turned back into: a function pointer, valid for the program's life.
            let command = (!handling.is_null())
                .then(|| unsafe { std::mem::transmute::<*mut (), fn() -> &'static str>(handling) });
            let (entry, process_type, resumed_from) = shared
                .cell_of(pid)
                .map(|cell| {
                    let entry = cell.entry().to_owned();
                    (entry, cell.process_type(), cell.suspend_point())
                })
                .unwrap_or_default();
            timing.report(LongStep {
                pid,
                entry,
                process_type,
                resumed_from,
                running_for,
                worker: index,
                command: command.map(|name| crate::type_name::short(name())),
            });
        }
    }
}

/// A step found running longer than
/// [`Builder::long_step_threshold`](crate::Builder::long_step_threshold), reported
/// once per step while it runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LongStep {
    /// The process whose step it is.
    pub pid: Pid,
    /// The entry it runs.
    pub entry: String,
    /// The type it runs, in full (see
    /// [`ProcessInfo::process_type`](crate::ProcessInfo::process_type)); empty if
    /// the process ended before it was named.
    pub process_type: &'static str,
    /// Where the process had suspended before this step, so where the code that
    /// runs long begins (`None`: its first step, or a process that does not say).
    pub resumed_from: Option<SuspendPoint>,
    /// How long the step had run when it was found.
    pub running_for: Duration,
    /// The worker running it.
    pub worker: usize,
    /// The command whose handler was running on the worker for the step, when it
    /// was found there (the step's own code was over): a handler that blocks its
    /// worker holds it as a long step does.
    pub command: Option<String>,
}

impl fmt::Display for LongStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "long step: process {} has been running for {:?} on worker {}",
            ProcessLabel::new(self.process_type, &self.entry, self.pid),
            self.running_for,
            self.worker
        )?;
        if let Some(command) = &self.command {
            write!(f, ", in the handler of `{command}` on the worker")?;
        }
        match &self.resumed_from {
            Some(point) => write!(f, ", resumed from the {point}"),
            None => f.write_str(", in its first step"),
        }
    }
}

/// A histogram of durations in power-of-two buckets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Count per bucket of ticks (see [`BUCKETS`]).
    counts: Vec<u64>,
    femtos_per_tick: u64,
}

impl Histogram {
    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The non-empty buckets, shortest first: each one's bounds (from, up to and
    /// excluding) and how many durations fell in it.
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, Duration, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|&(_, &count)| count > 0)
            .map(|(i, &count)| (self.lower(i), self.upper(i), count))
    }

    fn lower(&self, bucket: usize) -> Duration {
        let ticks = if bucket == 0 { 0 } else { 1u64 << bucket };
        Clock::duration(ticks, self.femtos_per_tick)
    }

    fn upper(&self, bucket: usize) -> Duration {
        Clock::duration(
            1u64.checked_shl(bucket as u32 + 1).unwrap_or(u64::MAX),
            self.femtos_per_tick,
        )
    }

    /// The duration below which a fraction `q` (0.0 to 1.0) of the recorded ones
    /// fall, to the bucket: the upper bound of the bucket that holds that rank.
    /// `None` when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(self.upper(i));
            }
        }
        None
    }

    /// Adds `other`'s counts (both must come from one scheduler's clock).
    pub fn merge(&mut self, other: &Histogram) {
        if self.counts.is_empty() {
            *self = other.clone();
            return;
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
    }
}

/// One worker's step timing (see [`StepTimingMetrics`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStepTiming {
    /// How long its steps took.
    pub steps: Histogram,
    /// How long processes woken into its LIFO slot waited for their step (see
    /// [`Builder::step_timing`](crate::Builder::step_timing) for what is measured).
    pub wake_latency: Histogram,
}

/// Step timing, when it is on
/// ([`Metrics::step_timing`](crate::Metrics::step_timing)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StepTimingMetrics {
    /// By worker index.
    pub workers: Vec<WorkerStepTiming>,
    /// Long steps reported so far.
    pub long_steps: u64,
}

impl StepTimingMetrics {
    /// The step durations of all workers together.
    pub fn steps(&self) -> Histogram {
        let mut all = Histogram::default();
        for worker in &self.workers {
            all.merge(&worker.steps);
        }
        all
    }

    /// The wake latencies of all workers together.
    pub fn wake_latency(&self) -> Histogram {
        let mut all = Histogram::default();
        for worker in &self.workers {
            all.merge(&worker.wake_latency);
        }
        all
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn histogram(counts: &[(usize, u64)]) -> Histogram {
        let mut h = Histogram {
            counts: vec![0; BUCKETS],
            femtos_per_tick: 1_000_000,
        };
        for &(bucket, count) in counts {
            h.counts[bucket] = count;
        }
        h
    }

    #[test]
    fn a_duration_goes_to_the_bucket_of_its_highest_bit() {
        let buckets = Buckets::default();
        for ticks in [0, 1, 2, 3, 4, 1023, 1024, u64::MAX] {
            buckets.record(ticks);
        }
        let h = buckets.snapshot(1_000_000);
        let filled: Vec<(Duration, Duration, u64)> = h.buckets().collect();
        let ns = Duration::from_nanos;
        assert_eq!(
            filled,
            [
                (ns(0), ns(2), 2),
                (ns(2), ns(4), 2),
                (ns(4), ns(8), 1),
                (ns(512), ns(1024), 1),
                (ns(1024), ns(2048), 1),
                (ns(1 << 63), ns(u64::MAX), 1),
            ]
        );
        assert_eq!(h.count(), 8);
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let h = histogram(&[(3, 90), (10, 9), (20, 1)]);
        let ns = Duration::from_nanos;
        assert_eq!(h.quantile(0.5), Some(ns(16)));
        assert_eq!(h.quantile(0.9), Some(ns(16)));
        assert_eq!(h.quantile(0.95), Some(ns(2048)));
        assert_eq!(h.quantile(1.0), Some(ns(1 << 21)));
        assert_eq!(h.quantile(0.0), Some(ns(16)));
        assert_eq!(Histogram::default().quantile(0.5), None);
        let mut merged = h.clone();
        merged.merge(&histogram(&[(3, 10)]));
        assert_eq!(merged.count(), 110);
    }

    #[test]
    fn the_clock_moves_forward_and_converts_to_time() {
        let clock = Clock::new();
        let before = clock.ticks();
        std::thread::sleep(Duration::from_millis(5));
        let ticks = clock.ticks() - before;
        let slept = Clock::duration(ticks, clock.femtos_per_tick());
        assert!(slept >= Duration::from_millis(4), "{slept:?}");
    }
}
