//! The recorder: scheduler events in preallocated per-worker buffers, and the
//! [`Recording`] snapshots made of them.
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | options, the event encoding, the hooks the runtime calls (the clock is step timing's, `timing.rs`) |
//! | `ring.rs` | one lane's lock-free single-writer buffer |
//! | `recording.rs` | the public snapshot and the slices derived from it |
//! | `chrome.rs` | Chrome Trace Event / Perfetto JSON |
//! | `svg.rs` | a self-contained SVG picture |
//! | `terminal.rs` | a text picture |
//!
//! Off (the default), the runtime holds no recorder and every hook is one branch on
//! `Option::is_some`. On, each worker appends fixed-size events (two words) to its own
//! buffer without locks or locked instructions. A step is one event: written when it
//! starts, with the time, and *amended* in place when it ends, with its outcome (a
//! store, not a second event). Reading the clock is most of what recording costs (8
//! to 12 ns, about a tenth of a short step), so it is read at the start of every step
//! that follows an idle path (going idle, parking, waking, stealing) and of one step
//! in [`RecordOptions::clock_every`] of a run of back-to-back steps, never at a
//! step's end: a step's end, and an event that happens inside a step (a process made
//! runnable by it), take the time of the next timed event in its lane, which is the
//! next step's start or the moment the worker finds nothing to do; a step whose start
//! was not timed takes an even share of the interval between the readings around
//! it. So a step's slice covers the step and the runtime's handling of it
//! (dispatching its yields, queueing what it woke), up to the moment its worker picks
//! its next task.
//!
//! Threads that are not workers (spawns and sends from outside, timers firing, the
//! blocking pool's completions) write to one more lane, the *outside* lane, under a
//! lock, with their own clock reads.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::engine::cell::CellRef;
use crate::engine::process::Status;
use crate::engine::shared::Shared;
use crate::engine::worker::Caller;
use crate::observe::timing::Clock;
use crate::pid::Pid;
use crate::sync::Mutex;

mod chrome;
mod recording;
pub(crate) mod ring;
mod svg;
mod terminal;

pub use recording::{
    Activity, EventKind, Lane, ProcessSlice, RecordedEvent, Recording, Slice, SliceKind, Steal,
    StepOutcome,
};
pub use svg::SvgOptions;

use ring::Ring;

/// What [`Builder::record`](crate::Builder::record) records, and how much.
///
/// ```
/// use wsched::{RecordOptions, Scheduler};
///
/// // Keep the last 4096 events of each worker (a flight recorder).
/// let scheduler = Scheduler::builder()
///     .workers(2)
///     .record(RecordOptions::new().capacity_per_worker(4096).ring(true))
///     .build()?;
/// let recording = scheduler.recording().expect("the recorder is on");
/// assert_eq!(recording.workers(), 2);
/// # Ok::<(), wsched::BuildError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordOptions {
    capacity: usize,
    ring: bool,
    clock_every: u32,
    dump_on_timeout: Option<PathBuf>,
}

impl RecordOptions {
    /// The defaults: 65,536 events per worker (1 MiB each), ring mode, the clock
    /// read every [`DEFAULT_CLOCK_EVERY`](Self::DEFAULT_CLOCK_EVERY) steps of a busy
    /// worker, no dump file.
    ///
    /// ```
    /// let options = wsched::RecordOptions::new();
    /// assert_eq!(options.capacity(), 65_536);
    /// assert!(options.is_ring());
    /// ```
    pub fn new() -> Self {
        Self {
            capacity: 1 << 16,
            ring: true,
            clock_every: Self::DEFAULT_CLOCK_EVERY,
            dump_on_timeout: None,
        }
    }

    /// How often a busy worker reads the clock by default: at the start of one
    /// step in this many (see [`clock_every`](Self::clock_every)).
    pub const DEFAULT_CLOCK_EVERY: u32 = 4;

    /// How many events each worker's buffer holds (and the buffer of threads that
    /// are not workers), rounded up to a power of two (at least 2). Each event takes
    /// 16 bytes, allocated when the scheduler is built. A step takes one or two
    /// events (the step, the process it woke).
    ///
    /// ```
    /// let options = wsched::RecordOptions::new().capacity_per_worker(1000);
    /// assert_eq!(options.capacity(), 1024);
    /// ```
    pub fn capacity_per_worker(mut self, events: usize) -> Self {
        self.capacity = events.max(2).next_power_of_two();
        self
    }

    /// Ring mode (`true`, the default) keeps the *last* events, overwriting the
    /// oldest, like Go's flight recorder: what led up to a hang or a slow shutdown.
    /// Otherwise each buffer keeps the *first* events and counts the rest as lost.
    ///
    /// ```
    /// let options = wsched::RecordOptions::new().ring(false);
    /// assert!(!options.is_ring());
    /// ```
    pub fn ring(mut self, ring: bool) -> Self {
        self.ring = ring;
        self
    }

    /// A worker running step after step reads the clock at the start of one step in
    /// `steps` (at least 1), and at the start of every step that follows anything
    /// else: finding no work, sleeping, waking, stealing. The steps in between get
    /// their times by sharing the interval between the two readings around them
    /// evenly, in order.
    ///
    /// Reading the clock is most of what recording costs: 8 to 12 ns on the x86-64
    /// machines measured, about a tenth of a short step. With the default, a run of
    /// back-to-back steps is exact to within a few steps' time; a single slow step
    /// among them shows its time spread over its group of `steps`. `1` reads the
    /// clock at every step: exact slices, at about twice the cost. (Step timing's
    /// long-step detector, [`Builder::step_timing`](crate::Builder::step_timing),
    /// names slow steps exactly either way.)
    ///
    /// ```
    /// let options = wsched::RecordOptions::new().clock_every(1);
    /// assert_eq!(options.clock_interval(), 1);
    /// assert_eq!(wsched::RecordOptions::new().clock_interval(), 4);
    /// ```
    pub fn clock_every(mut self, steps: u32) -> Self {
        self.clock_every = steps.max(1);
        self
    }

    /// A busy worker reads the clock at the start of one step in this many.
    ///
    /// ```
    /// assert_eq!(wsched::RecordOptions::new().clock_every(0).clock_interval(), 1);
    /// ```
    pub fn clock_interval(&self) -> u32 {
        self.clock_every
    }

    /// When [`Scheduler::shutdown`](crate::Scheduler::shutdown) times out (it has
    /// to stop processes), also writes the recording as Chrome / Perfetto JSON to
    /// `path` (an error is printed to stderr, not raised). Either way the
    /// [`ShutdownReport`](crate::ShutdownReport) of a shutdown that timed out
    /// carries the recording.
    ///
    /// ```
    /// let options = wsched::RecordOptions::new().dump_on_timeout("hang.json");
    /// assert_eq!(options.dump_path(), Some(std::path::Path::new("hang.json")));
    /// ```
    pub fn dump_on_timeout(mut self, path: impl Into<PathBuf>) -> Self {
        self.dump_on_timeout = Some(path.into());
        self
    }

    /// The events each buffer holds.
    ///
    /// ```
    /// assert_eq!(wsched::RecordOptions::new().capacity_per_worker(8).capacity(), 8);
    /// ```
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether buffers keep the last events (else the first).
    ///
    /// ```
    /// assert!(wsched::RecordOptions::default().is_ring());
    /// ```
    pub fn is_ring(&self) -> bool {
        self.ring
    }

    /// Where a shutdown that times out writes the recording, if anywhere.
    ///
    /// ```
    /// assert_eq!(wsched::RecordOptions::new().dump_path(), None);
    /// ```
    pub fn dump_path(&self) -> Option<&std::path::Path> {
        self.dump_on_timeout.as_deref()
    }
}

impl Default for RecordOptions {
    fn default() -> Self {
        Self::new()
    }
}

// ---- the event encoding -----------------------------------------------------------
//
// Word 1 holds the kind in its low byte and an argument (a PID, at most 2^56) above.
// Word 0 holds the time in clock ticks for timed kinds, a second argument otherwise.
// A step whose start was not timed (see `RecordOptions::clock_every`) has `UNTIMED`
// there instead.

/// A step that has not ended (yet): word 0 is its start.
const STEP_START: u64 = 1;
/// A step that ended, amended from `STEP_START`: the kind is this plus the outcome's
/// code (see `outcome_code`); word 0 is still its start.
const STEP_ENDED: u64 = 12;
/// Word 0 of a step whose start was not timed: no clock reads that many ticks.
const UNTIMED: u64 = u64::MAX;
const RUNNABLE: u64 = 3;
/// Runnable, with word 0 a time (from a thread that is not a worker).
const RUNNABLE_TIMED: u64 = 4;
const IDLE: u64 = 5;
const PARK: u64 = 6;
const UNPARK: u64 = 7;
/// Word 1's argument: the victim (16 bits) and the count above it.
const STEAL: u64 = 8;
/// Word 0: the index of the process's type and entry in the lane's name table.
const SPAWN: u64 = 9;
/// Word 0: time; argument: the worker's deque depth. Followed by `COUNTERS_MORE`.
const COUNTERS: u64 = 10;
/// Word 0: live processes; argument: the global queue's length.
const COUNTERS_MORE: u64 = 11;

const KIND_BITS: u32 = 8;
const ARG_MAX: u64 = u64::MAX >> KIND_BITS;

#[inline]
fn word1(kind: u64, arg: u64) -> u64 {
    (arg.min(ARG_MAX) << KIND_BITS) | kind
}

/// [`word1`] of an event about a process of this node, whose PID's top bits (its
/// node's) are zero: it fits without the clamp, two instructions fewer on the
/// events every step writes.
#[inline]
fn word1_local(kind: u64, pid: Pid) -> u64 {
    debug_assert!(pid.is_local() && pid.as_u64() <= ARG_MAX, "{pid:?}");
    (pid.as_u64() << KIND_BITS) | kind
}

fn outcome_code(outcome: StepOutcome) -> u64 {
    match outcome {
        StepOutcome::WaitingForMessage => 0,
        StepOutcome::WaitingForYields => 1,
        StepOutcome::Continue => 2,
        StepOutcome::Done => 3,
        StepOutcome::Failed => 4,
    }
}

fn outcome_of_code(code: u64) -> StepOutcome {
    match code {
        0 => StepOutcome::WaitingForMessage,
        1 => StepOutcome::WaitingForYields,
        2 => StepOutcome::Continue,
        3 => StepOutcome::Done,
        _ => StepOutcome::Failed,
    }
}

/// Counters are sampled once every this many steps (and whenever a worker goes
/// idle, parks or wakes): reading them touches other workers' lines.
const SAMPLE_EVERY: u32 = 256;

/// At most this many distinct types and entries per lane are kept (further ones
/// show as `?`): the table is bounded like the buffers.
const MAX_NAMES: usize = 4096;

// ---- the recorder -----------------------------------------------------------------

/// One lane: a buffer, its name table, and its writer's private state.
struct LaneBuffer {
    ring: Ring,
    /// The types and entries of processes spawned from this lane, by the index
    /// `SPAWN` events carry. Locked by the writer once per spawn, by readers once
    /// per recording.
    names: Mutex<Names>,
    /// Writer-private (relaxed loads and stores by the one writer only).
    parked: AtomicBool,
    steps: AtomicU32,
    /// Steps to start before the next clock reading (0: read it at the next step).
    untimed_left: AtomicU32,
    /// The index of the running step's event, amended when the step ends (writer-
    /// private; `ring::REFUSED` if a full bounded buffer refused it).
    step: AtomicU64,
}

/// A lane's name table: each distinct process type (its full name) and entry, once.
#[derive(Default)]
struct Names {
    /// By type, then entry: looked up without allocating.
    ids: HashMap<&'static str, HashMap<Box<str>, u64>>,
    list: Vec<Name>,
}

/// A process's type (in full) and entry, as a lane's name table keeps them.
type Name = (&'static str, Box<str>);

impl LaneBuffer {
    fn new(options: &RecordOptions) -> Self {
        Self {
            ring: Ring::new(options.capacity, options.ring),
            names: Mutex::new(Names::default()),
            parked: AtomicBool::new(false),
            steps: AtomicU32::new(0),
            untimed_left: AtomicU32::new(0),
            step: AtomicU64::new(ring::REFUSED),
        }
    }

    fn name_id(&self, process_type: &'static str, entry: &str) -> u64 {
        let mut names = self.names.lock();
        if let Some(&id) = names.ids.get(process_type).and_then(|e| e.get(entry)) {
            return id;
        }
        if names.list.len() >= MAX_NAMES {
            return u64::MAX;
        }
        let id = names.list.len() as u64;
        names.list.push((process_type, entry.into()));
        let by_entry = names.ids.entry(process_type).or_default();
        by_entry.insert(entry.into(), id);
        id
    }
}

/// The recorder the runtime holds when recording is on (see the module docs).
pub(crate) struct Recorder {
    /// Step timing's clock: the time-stamp counter where the kernel keeps time with
    /// it (a few nanoseconds to read), converted when a recording is made.
    clock: Clock,
    workers: Box<[CachePadded<LaneBuffer>]>,
    /// The lane of threads that are not workers; the lock makes them one writer.
    outside: Mutex<()>,
    outside_lane: LaneBuffer,
    options: RecordOptions,
    /// Counters are sampled once every this many timed steps: [`SAMPLE_EVERY`]
    /// steps, divided by the clock interval once here rather than on every step.
    sample_every_timed: u32,
}

impl Recorder {
    pub(crate) fn new(workers: usize, options: RecordOptions) -> Self {
        Self {
            clock: Clock::new(),
            workers: (0..workers)
                .map(|_| CachePadded::new(LaneBuffer::new(&options)))
                .collect(),
            outside: Mutex::new(()),
            outside_lane: LaneBuffer::new(&options),
            sample_every_timed: SAMPLE_EVERY / options.clock_every,
            options,
        }
    }

    pub(crate) fn options(&self) -> &RecordOptions {
        &self.options
    }

    // ---- hooks: worker `worker` calls those taking its index, on its own thread ----

    /// Worker `worker`'s lane, for the hooks every step calls. Unchecked: the three
    /// bounds checks a step were about 1 % of a recorded ping-pong round trip.
    /// (The hooks that run less often index `workers` as usual.)
    #[inline]
    fn lane(&self, worker: usize) -> &LaneBuffer {
        debug_assert!(worker < self.workers.len(), "worker {worker}");
        // SAFETY: `worker` is the index of one of this scheduler's workers: the
        // step hooks are called by `run_task` with the index of the `Worker` that
        // runs it, and `runnable` with the core `worker::with_core` lent after
        // checking that it belongs to this scheduler; the recorder has one lane for
        // each of that scheduler's workers (`Builder::build` makes both from one
        // count).
        unsafe { self.workers.get_unchecked(worker) }
    }

    /// A step of `pid` starts on `worker`.
    #[inline]
    pub(crate) fn step_start(&self, shared: &Shared, worker: usize, pid: Pid) {
        let lane = self.lane(worker);
        // A full bounded buffer records nothing more: no clock read, no samples.
        let Some(n) = lane.ring.reserve() else {
            lane.step.store(ring::REFUSED, Ordering::Relaxed);
            return;
        };
        let untimed_left = lane.untimed_left.load(Ordering::Relaxed);
        if untimed_left > 0 {
            // Most steps: the event goes where `reserve` said.
            lane.untimed_left.store(untimed_left - 1, Ordering::Relaxed);
            lane.ring.write(n, UNTIMED, word1_local(STEP_START, pid));
            lane.step.store(n, Ordering::Relaxed);
            return;
        }
        lane.untimed_left
            .store(self.options.clock_every - 1, Ordering::Relaxed);
        let now = self.clock.ticks();
        // Samples go before the step's event, so nothing timed follows it until
        // the step has ended (and the event goes after them: pushed, not written
        // at `n`).
        let steps = lane.steps.load(Ordering::Relaxed) + 1;
        if steps >= self.sample_every_timed {
            lane.steps.store(0, Ordering::Relaxed);
            self.sample(shared, worker, now);
        } else {
            lane.steps.store(steps, Ordering::Relaxed);
        }
        let index = lane.ring.push(now, word1_local(STEP_START, pid));
        lane.step.store(index, Ordering::Relaxed);
    }

    /// The step of `pid` on `worker` returned: `ok` unless it failed or panicked,
    /// with the status it set.
    #[inline]
    pub(crate) fn step_end(&self, worker: usize, pid: Pid, ok: bool, status: Option<&Status>) {
        let outcome = match (ok, status) {
            (true, Some(Status::WaitingForMessage)) => StepOutcome::WaitingForMessage,
            (true, Some(Status::WaitingForYields)) => StepOutcome::WaitingForYields,
            (true, Some(Status::Continue)) => StepOutcome::Continue,
            (true, Some(Status::Done(_))) => StepOutcome::Done,
            _ => StepOutcome::Failed,
        };
        let lane = self.lane(worker);
        let kind = STEP_ENDED + outcome_code(outcome);
        lane.ring
            .amend(lane.step.load(Ordering::Relaxed), word1_local(kind, pid));
    }

    /// `worker` made `pid` runnable (queued it).
    #[inline]
    pub(crate) fn runnable(&self, worker: usize, pid: Pid) {
        self.lane(worker).ring.push(0, word1_local(RUNNABLE, pid));
    }

    /// A thread that is not a worker made `pid` runnable.
    pub(crate) fn runnable_outside(&self, pid: Pid) {
        let _writer = self.outside.lock();
        let now = self.clock.ticks();
        self.outside_lane
            .ring
            .push(now, word1(RUNNABLE_TIMED, pid.as_u64()));
    }

    /// A thread that is not a worker made these processes runnable at once.
    pub(crate) fn runnable_batch(&self, cells: &[CellRef]) {
        let _writer = self.outside.lock();
        let now = self.clock.ticks();
        for cell in cells {
            self.outside_lane
                .ring
                .push(now, word1(RUNNABLE_TIMED, cell.pid().as_u64()));
        }
    }

    /// `pid` was spawned, running `entry` of `process_type` (in full), by `caller`.
    pub(crate) fn spawned(
        &self,
        caller: Caller,
        pid: Pid,
        process_type: &'static str,
        entry: &str,
    ) {
        match caller {
            Caller::Worker(worker) => {
                let lane = &self.workers[worker];
                let id = lane.name_id(process_type, entry);
                lane.ring.push(id, word1(SPAWN, pid.as_u64()));
            }
            Caller::Outside => {
                let _writer = self.outside.lock();
                let id = self.outside_lane.name_id(process_type, entry);
                self.outside_lane.ring.push(id, word1(SPAWN, pid.as_u64()));
            }
        }
    }

    /// `worker` found nothing to do after running something: ends its last step.
    pub(crate) fn idle(&self, shared: &Shared, worker: usize) {
        let now = self.clock.ticks();
        let lane = &self.workers[worker];
        lane.ring.push(now, word1(IDLE, 0));
        lane.untimed_left.store(0, Ordering::Relaxed);
        self.sample(shared, worker, now);
    }

    /// `worker` is about to sleep.
    pub(crate) fn park(&self, worker: usize) {
        let lane = &self.workers[worker];
        lane.parked.store(true, Ordering::Relaxed);
        lane.untimed_left.store(0, Ordering::Relaxed);
        lane.ring.push(self.clock.ticks(), word1(PARK, 0));
    }

    /// `worker` is back from `park` (nothing is recorded if it did not sleep).
    pub(crate) fn unpark(&self, shared: &Shared, worker: usize) {
        let lane = &self.workers[worker];
        if !lane.parked.load(Ordering::Relaxed) {
            return;
        }
        lane.parked.store(false, Ordering::Relaxed);
        let now = self.clock.ticks();
        lane.ring.push(now, word1(UNPARK, 0));
        self.sample(shared, worker, now);
    }

    /// `thief` took `count` processes from `victim`.
    pub(crate) fn steal(&self, thief: usize, victim: usize, count: usize) {
        let arg = (victim as u64 & 0xFFFF) | ((count as u64) << 16);
        let lane = &self.workers[thief];
        lane.untimed_left.store(0, Ordering::Relaxed);
        lane.ring.push(self.clock.ticks(), word1(STEAL, arg));
    }

    /// Queue depths and live processes, as `worker` sees them at `now`.
    fn sample(&self, shared: &Shared, worker: usize, now: u64) {
        let ring = &self.workers[worker].ring;
        let depth = shared.stealers[worker].len() as u64;
        ring.push(now, word1(COUNTERS, depth));
        ring.push(
            shared.live() as u64,
            word1(COUNTERS_MORE, shared.inject.len() as u64),
        );
    }

    // ---- reading --------------------------------------------------------------

    /// A snapshot of every lane, decoded. Safe while the workers run.
    pub(crate) fn recording(&self, shared: &Shared) -> Recording {
        let rate = self.clock.femtos_per_tick();
        let origin = self.clock.start_ticks();
        let elapsed = Clock::duration(self.clock.ticks().wrapping_sub(origin), rate);
        // Ticks read on a worker just before `elapsed` may be a little past it.
        let to_time = |ticks: u64| -> Duration {
            Clock::duration(ticks.saturating_sub(origin), rate).min(elapsed)
        };
        let mut recording = Recording::new(self.workers.len(), elapsed);
        recording.set_capacity(self.options.capacity);
        recording.set_clock_every(self.options.clock_every);
        let lanes = self
            .workers
            .iter()
            .enumerate()
            .map(|(i, lane)| (Lane::Worker(i), &**lane))
            .chain(std::iter::once((Lane::Outside, &self.outside_lane)));
        for (lane, buffer) in lanes {
            let copied = buffer.ring.snapshot();
            let names: Vec<Name> = buffer.names.lock().list.clone();
            let kept = copied.events.len() as u64;
            recording.set_lost(lane, copied.written - kept + copied.refused);
            decode(
                &mut recording,
                lane,
                &copied.events,
                &names,
                &to_time,
                elapsed,
            );
        }
        // Processes whose spawn is no longer in the buffers: their types and
        // entries from the PID table, if they are still live.
        if recording.has_unnamed() {
            for info in shared.processes() {
                recording.name_if_unnamed(info.pid, info.process_type, &info.entry);
            }
        }
        recording
    }
}

/// Appends the events of one lane's copy to `recording`, resolving times: an untimed
/// event takes the time of the next timed event in its lane (the end of the step it
/// happened in), or the recording's end if there is none. An ended step becomes a
/// start and an end, the end at that same time, after the events inside the step.
fn decode(
    recording: &mut Recording,
    lane: Lane,
    raw: &[[u64; 2]],
    names: &[Name],
    to_time: &dyn Fn(u64) -> Duration,
    end: Duration,
) {
    let is_step = |kind: u64| kind == STEP_START || ended_step(kind).is_some();
    let timed_kind = |kind: u64| {
        is_step(kind)
            || matches!(
                kind,
                RUNNABLE_TIMED | IDLE | PARK | UNPARK | STEAL | COUNTERS
            )
    };
    // The times of timed events; steps whose start was not timed share the interval
    // between the readings around them evenly, in order.
    let mut stamps: Vec<Option<Duration>> = raw
        .iter()
        .map(|&[w0, w1]| (timed_kind(w1 & 0xFF) && w0 != UNTIMED).then(|| to_time(w0)))
        .collect();
    let spread = |stamps: &mut [Option<Duration>], group: &[usize], from, to: Duration| {
        let from: Duration = Option::unwrap_or(from, to).min(to);
        let share = u32::try_from(group.len() + 1).unwrap_or(u32::MAX);
        for (j, &i) in (1..).zip(group) {
            stamps[i] = Some(from + (to - from) * j / share);
        }
    };
    let mut group = Vec::new();
    let mut previous = None;
    for (i, [w0, w1]) in raw.iter().enumerate() {
        if *w0 == UNTIMED && is_step(w1 & 0xFF) {
            group.push(i);
        } else if let Some(at) = stamps[i] {
            spread(&mut stamps, &group, previous, at);
            group.clear();
            previous = Some(at);
        }
    }
    spread(&mut stamps, &group, previous, end);
    // Times, back to front: each untimed event takes the next timed one's.
    let mut times = vec![end; raw.len()];
    let mut next = end;
    for (i, stamp) in stamps.iter().enumerate().rev() {
        if let Some(at) = stamp {
            next = *at;
        }
        times[i] = next;
    }
    // Kept monotonic per lane (ticks of different cores may differ by a hair).
    let mut last = Duration::ZERO;
    // The step that ended last, until the next timed event gives its end a time.
    let mut open_end: Option<EventKind> = None;
    let mut i = 0;
    while i < raw.len() {
        let [w0, w1] = raw[i];
        let at = times[i].max(last);
        last = at;
        if stamps[i].is_some() {
            if let Some(step_end) = open_end.take() {
                recording.push(lane, RecordedEvent::new(at, step_end));
            }
        }
        let arg = w1 >> KIND_BITS;
        let pid = || Pid::from_raw(arg.max(1));
        let ended = ended_step(w1 & 0xFF);
        let kind = match w1 & 0xFF {
            STEP_START => Some(EventKind::StepStart { pid: pid() }),
            _ if ended.is_some() => {
                open_end = ended.map(|outcome| EventKind::StepEnd {
                    pid: pid(),
                    outcome,
                });
                Some(EventKind::StepStart { pid: pid() })
            }
            RUNNABLE | RUNNABLE_TIMED => Some(EventKind::Runnable { pid: pid() }),
            IDLE => Some(EventKind::Idle),
            PARK => Some(EventKind::Park),
            UNPARK => Some(EventKind::Unpark),
            STEAL => Some(EventKind::Steal {
                victim: (arg & 0xFFFF) as usize,
                count: arg >> 16,
            }),
            SPAWN => {
                match names.get(w0 as usize) {
                    Some((process_type, entry)) => {
                        recording.set_entry(pid(), entry);
                        recording.set_process_type(pid(), process_type);
                    }
                    None => recording.set_entry(pid(), "?"),
                }
                Some(EventKind::Spawned { pid: pid() })
            }
            COUNTERS => match raw.get(i + 1) {
                Some([live, more]) if more & 0xFF == COUNTERS_MORE => {
                    i += 1;
                    Some(EventKind::Counters {
                        local_queue: arg,
                        global_queue: more >> KIND_BITS,
                        live: *live,
                    })
                }
                _ => None,
            },
            // A `COUNTERS_MORE` whose first half was overwritten.
            _ => None,
        };
        if let Some(kind) = kind {
            recording.push(lane, RecordedEvent::new(at, kind));
        }
        i += 1;
    }
    if let Some(step_end) = open_end {
        recording.push(lane, RecordedEvent::new(end.max(last), step_end));
    }
}

/// The outcome of a step event amended when the step ended, or `None` for another
/// kind.
fn ended_step(kind: u64) -> Option<StepOutcome> {
    let code = kind.checked_sub(STEP_ENDED)?;
    (code <= outcome_code(StepOutcome::Failed)).then(|| outcome_of_code(code))
}

impl Shared {
    /// A snapshot of the recorder, if it is on.
    pub(crate) fn recording(&self) -> Option<Recording> {
        self.recorder().map(|r| r.recording(self))
    }

    /// The recording a shutdown that timed out reports, also written to the
    /// options' dump path if there is one.
    pub(crate) fn dump_recording(&self) -> Option<std::sync::Arc<Recording>> {
        let recorder = self.recorder()?;
        let recording = recorder.recording(self);
        if let Some(path) = recorder.options().dump_path() {
            let written = std::fs::File::create(path).and_then(|file| {
                let mut out = std::io::BufWriter::new(file);
                recording.write_chrome_json(&mut out)?;
                std::io::Write::flush(&mut out)
            });
            if let Err(error) = written {
                eprintln!(
                    "wsched: the shutdown timed out and its recording could not be written to {}: {error}",
                    path.display()
                );
            }
        }
        Some(std::sync::Arc::new(recording))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(at: u64, pid: u64, outcome: Option<StepOutcome>) -> [u64; 2] {
        let kind = outcome.map_or(STEP_START, |o| STEP_ENDED + outcome_code(o));
        [at, word1(kind, pid)]
    }

    fn decoded(raw: &[[u64; 2]], end: u64) -> Vec<RecordedEvent> {
        let mut recording = Recording::new(1, Duration::from_nanos(end));
        let to_time = |ticks: u64| Duration::from_nanos(ticks);
        decode(
            &mut recording,
            Lane::Worker(0),
            raw,
            &[],
            &to_time,
            Duration::from_nanos(end),
        );
        recording.events(Lane::Worker(0)).to_vec()
    }

    fn at(ns: u64, kind: EventKind) -> RecordedEvent {
        RecordedEvent::new(Duration::from_nanos(ns), kind)
    }

    fn start(pid: u64) -> EventKind {
        EventKind::StepStart {
            pid: Pid::from_raw(pid),
        }
    }

    fn end(pid: u64, outcome: StepOutcome) -> EventKind {
        EventKind::StepEnd {
            pid: Pid::from_raw(pid),
            outcome,
        }
    }

    /// An ended step is a start at its time and an end at the next timed event's,
    /// after what happened inside it.
    #[test]
    fn an_amended_step_decodes_to_a_start_and_an_end() {
        let done = Some(StepOutcome::Done);
        let raw = [
            step(100, 1, done),
            [0, word1(RUNNABLE, 2)],
            [250, word1(IDLE, 0)],
        ];
        assert_eq!(
            decoded(&raw, 1000),
            vec![
                at(100, start(1)),
                at(
                    250,
                    EventKind::Runnable {
                        pid: Pid::from_raw(2)
                    }
                ),
                at(250, end(1, StepOutcome::Done)),
                at(250, EventKind::Idle),
            ]
        );
    }

    /// Untimed steps share the interval between the readings around them evenly;
    /// at the end of the lane, up to the recording's end; a step still running has
    /// no end.
    #[test]
    fn untimed_steps_share_the_interval_between_readings() {
        let cont = Some(StepOutcome::Continue);
        let raw = [
            step(100, 1, cont),
            step(UNTIMED, 2, cont),
            step(UNTIMED, 3, cont),
            step(400, 4, cont),
            step(UNTIMED, 5, None),
        ];
        assert_eq!(
            decoded(&raw, 600),
            vec![
                at(100, start(1)),
                at(200, end(1, StepOutcome::Continue)),
                at(200, start(2)),
                at(300, end(2, StepOutcome::Continue)),
                at(300, start(3)),
                at(400, end(3, StepOutcome::Continue)),
                at(400, start(4)),
                at(500, end(4, StepOutcome::Continue)),
                at(500, start(5)),
            ]
        );
    }

    /// Untimed steps whose timed predecessor was overwritten start at the next
    /// reading (no time can be made up for them).
    #[test]
    fn untimed_steps_at_the_start_of_a_lane_take_the_next_reading() {
        let cont = Some(StepOutcome::Continue);
        let raw = [step(UNTIMED, 1, cont), step(300, 2, None)];
        assert_eq!(
            decoded(&raw, 600),
            vec![
                at(300, start(1)),
                at(300, end(1, StepOutcome::Continue)),
                at(300, start(2)),
            ]
        );
    }
}
