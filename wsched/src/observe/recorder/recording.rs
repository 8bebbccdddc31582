//! The public snapshot of a recording, and the slices derived from its events.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::pid::Pid;
use crate::type_name::{ProcessLabel, ProcessName};

/// Where an event was recorded: a worker's own buffer, or the one buffer that
/// threads which are not workers share (spawns and sends from outside, timers
/// firing, the blocking pool's completions).
///
/// ```
/// use wsched::recorder::Lane;
/// assert_eq!(Lane::Worker(1).to_string(), "worker 1");
/// assert_eq!(Lane::Outside.to_string(), "outside");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lane {
    /// Worker `n`.
    Worker(usize),
    /// Threads that are not workers.
    Outside,
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lane::Worker(n) => write!(f, "worker {n}"),
            Lane::Outside => f.write_str("outside"),
        }
    }
}

/// How a step ended, as its process said.
///
/// ```
/// assert_eq!(wsched::recorder::StepOutcome::Continue.to_string(), "continue");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StepOutcome {
    /// [`Status::WaitingForMessage`](crate::Status::WaitingForMessage).
    WaitingForMessage,
    /// [`Status::WaitingForYields`](crate::Status::WaitingForYields).
    WaitingForYields,
    /// [`Status::Continue`](crate::Status::Continue): runnable again at once.
    Continue,
    /// [`Status::Done`](crate::Status::Done): the process finished.
    Done,
    /// The step failed or panicked (or set no status): the process ended.
    Failed,
}

impl StepOutcome {
    /// Whether the process ended with this step.
    ///
    /// ```
    /// assert!(wsched::recorder::StepOutcome::Done.ends());
    /// assert!(!wsched::recorder::StepOutcome::WaitingForMessage.ends());
    /// ```
    pub fn ends(self) -> bool {
        matches!(self, StepOutcome::Done | StepOutcome::Failed)
    }
}

impl fmt::Display for StepOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StepOutcome::WaitingForMessage => "waiting for a message",
            StepOutcome::WaitingForYields => "waiting for yields",
            StepOutcome::Continue => "continue",
            StepOutcome::Done => "done",
            StepOutcome::Failed => "failed",
        })
    }
}

/// What happened.
///
/// ```
/// use wsched::Pid;
/// use wsched::recorder::EventKind;
/// let kind = EventKind::StepStart { pid: Pid::from_raw(3) };
/// assert_eq!(kind.pid(), Some(Pid::from_raw(3)));
/// assert_eq!(EventKind::Park.pid(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A step of `pid` started.
    StepStart {
        /// The process stepped.
        pid: Pid,
    },
    /// The step of `pid` returned.
    StepEnd {
        /// The process stepped.
        pid: Pid,
        /// What it said.
        outcome: StepOutcome,
    },
    /// `pid` was queued to run (spawned, woken, or requeued after a `Continue`).
    Runnable {
        /// The process queued.
        pid: Pid,
    },
    /// `pid` was spawned (its entry is in [`Recording::entry`], its type in
    /// [`Recording::process_type`]).
    Spawned {
        /// The new process.
        pid: Pid,
    },
    /// The worker found nothing to run (it searches, then parks).
    Idle,
    /// The worker went to sleep.
    Park,
    /// The worker woke up.
    Unpark,
    /// The worker took `count` processes from worker `victim`'s queues.
    Steal {
        /// The worker robbed.
        victim: usize,
        /// How many processes moved (including the one run at once).
        count: u64,
    },
    /// A sample of counters, taken by the worker every few hundred steps and
    /// whenever it goes idle or wakes.
    Counters {
        /// Processes in the worker's own deque.
        local_queue: u64,
        /// Processes in the global queue.
        global_queue: u64,
        /// Processes not yet ended.
        live: u64,
    },
}

impl EventKind {
    /// The process the event is about, if any.
    ///
    /// ```
    /// use wsched::Pid;
    /// use wsched::recorder::EventKind;
    /// assert_eq!(EventKind::Runnable { pid: Pid::from_raw(2) }.pid(), Some(Pid::from_raw(2)));
    /// ```
    pub fn pid(&self) -> Option<Pid> {
        match *self {
            EventKind::StepStart { pid }
            | EventKind::StepEnd { pid, .. }
            | EventKind::Runnable { pid }
            | EventKind::Spawned { pid } => Some(pid),
            _ => None,
        }
    }
}

/// One event: when (since the scheduler started) and what.
///
/// ```
/// use std::time::Duration;
/// use wsched::recorder::{EventKind, RecordedEvent};
/// let event = RecordedEvent::new(Duration::from_micros(5), EventKind::Park);
/// assert_eq!(event.at, Duration::from_micros(5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordedEvent {
    /// Since the scheduler was built.
    pub at: Duration,
    /// What happened.
    pub kind: EventKind,
}

impl RecordedEvent {
    /// An event at `at`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = wsched::recorder::RecordedEvent::new(Duration::ZERO, wsched::recorder::EventKind::Idle);
    /// assert_eq!(e.kind, wsched::recorder::EventKind::Idle);
    /// ```
    pub fn new(at: Duration, kind: EventKind) -> Self {
        Self { at, kind }
    }
}

/// A snapshot of what the recorder holds: per lane, the events in order, and the
/// entries and types of the processes they name (which label them in the pictures
/// and the JSON: `Crawler::run <5>`, see [`label`](Self::label)). Made by
/// [`Scheduler::recording`](crate::Scheduler::recording) (a copy: the scheduler
/// goes on recording), or built by hand with [`new`](Self::new) and
/// [`push`](Self::push), e.g. to test a renderer.
///
/// ```
/// use std::time::Duration;
/// use wsched::{Pid, Recording};
/// use wsched::recorder::{EventKind, Lane, RecordedEvent};
///
/// let pid = Pid::from_raw(1);
/// let mut recording = Recording::new(1, Duration::from_micros(10));
/// recording.set_entry(pid, "run");
/// let at = |us| Duration::from_micros(us);
/// recording.push(Lane::Worker(0), RecordedEvent::new(at(1), EventKind::StepStart { pid }));
/// recording.push(
///     Lane::Worker(0),
///     RecordedEvent::new(at(4), EventKind::StepEnd { pid, outcome: wsched::recorder::StepOutcome::Done }),
/// );
/// let slices = recording.worker_slices(0);
/// assert_eq!(slices.len(), 1);
/// assert_eq!(slices[0].end - slices[0].start, at(3));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recording {
    workers: usize,
    duration: Duration,
    capacity: usize,
    /// See [`clock_every`](Self::clock_every); 0 (read as 1) when built by hand.
    clock_every: u32,
    /// Per lane: workers by index, then the outside lane.
    lanes: Vec<Vec<RecordedEvent>>,
    lost: Vec<u64>,
    entries: BTreeMap<Pid, String>,
    /// Full type names (see [`process_type`](Self::process_type)).
    types: BTreeMap<Pid, String>,
}

/// A span of time on a worker's lane.
///
/// ```
/// use wsched::recorder::{Slice, SliceKind};
/// # let recording = wsched::Recording::new(1, std::time::Duration::ZERO);
/// for slice in recording.worker_slices(0) {
///     if let SliceKind::Step { pid, .. } = slice.kind {
///         println!("{pid} ran for {:?}", slice.end - slice.start);
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Start, since the scheduler was built.
    pub start: Duration,
    /// End (not before `start`).
    pub end: Duration,
    /// What the worker did.
    pub kind: SliceKind,
}

/// What a worker did during a [`Slice`].
///
/// ```
/// let kind = wsched::recorder::SliceKind::Park;
/// assert!(matches!(kind, wsched::recorder::SliceKind::Park));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SliceKind {
    /// A step of `pid` (and the runtime's handling of it, up to the worker's next
    /// pick: see [`Builder::record`](crate::Builder::record)).
    Step {
        /// The process stepped.
        pid: Pid,
        /// How it ended (`None` if its end was not recorded).
        outcome: Option<StepOutcome>,
    },
    /// Asleep.
    Park,
}

/// What a process was doing during a [`ProcessSlice`].
///
/// ```
/// assert_eq!(wsched::recorder::Activity::Runnable.to_string(), "runnable");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Activity {
    /// Queued, waiting for a worker.
    Runnable,
    /// Being stepped (on `worker`).
    Running {
        /// The worker stepping it.
        worker: usize,
    },
    /// Suspended, waiting for a message or its yields.
    Waiting,
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Activity::Runnable => "runnable",
            Activity::Running { .. } => "running",
            Activity::Waiting => "waiting",
        })
    }
}

/// A span of time in one process's life.
///
/// ```
/// # let recording = wsched::Recording::new(1, std::time::Duration::ZERO);
/// for pid in recording.pids() {
///     for slice in recording.process_slices(pid) {
///         println!("{pid} {} for {:?}", slice.activity, slice.end - slice.start);
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessSlice {
    /// Start, since the scheduler was built.
    pub start: Duration,
    /// End (not before `start`).
    pub end: Duration,
    /// What the process was doing.
    pub activity: Activity,
}

/// A steal: `thief` took `count` processes from `victim` at `at`.
///
/// ```
/// # let recording = wsched::Recording::new(2, std::time::Duration::ZERO);
/// for steal in recording.steals() {
///     println!("worker {} took {} from worker {}", steal.thief, steal.count, steal.victim);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steal {
    /// When.
    pub at: Duration,
    /// The worker robbed.
    pub victim: usize,
    /// The worker that took them.
    pub thief: usize,
    /// How many processes moved.
    pub count: u64,
}

impl Recording {
    /// An empty recording of `workers` workers spanning `duration` (from the
    /// scheduler's start to the snapshot).
    ///
    /// ```
    /// let r = wsched::Recording::new(4, std::time::Duration::from_millis(1));
    /// assert_eq!(r.workers(), 4);
    /// assert!(r.events(wsched::recorder::Lane::Worker(0)).is_empty());
    /// ```
    pub fn new(workers: usize, duration: Duration) -> Self {
        Self {
            workers,
            duration,
            capacity: 0,
            clock_every: 1,
            lanes: vec![Vec::new(); workers + 1],
            lost: vec![0; workers + 1],
            entries: BTreeMap::new(),
            types: BTreeMap::new(),
        }
    }

    /// Appends `event` to `lane` (events of a lane are kept in the order pushed,
    /// which must be the order of their times).
    ///
    /// # Panics
    /// If `lane` is a worker this recording does not have.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wsched::Recording;
    /// use wsched::recorder::{EventKind, Lane, RecordedEvent};
    /// let mut r = Recording::new(1, Duration::from_micros(3));
    /// r.push(Lane::Worker(0), RecordedEvent::new(Duration::from_micros(1), EventKind::Park));
    /// assert_eq!(r.events(Lane::Worker(0)).len(), 1);
    /// ```
    pub fn push(&mut self, lane: Lane, event: RecordedEvent) {
        let index = self.lane_index(lane);
        self.lanes[index].push(event);
    }

    /// Names the entry `pid` runs.
    ///
    /// ```
    /// let mut r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// let pid = wsched::Pid::from_raw(7);
    /// r.set_entry(pid, "serve");
    /// assert_eq!(r.entry(pid), Some("serve"));
    /// ```
    pub fn set_entry(&mut self, pid: Pid, entry: &str) {
        self.entries.insert(pid, entry.to_owned());
    }

    /// Names the type `pid` runs, in full, as [`std::any::type_name`] spells it
    /// (see [`ProcessInfo::process_type`](crate::ProcessInfo::process_type)); the
    /// pictures and the JSON show it shortened, before the entry.
    ///
    /// ```
    /// let mut r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// let pid = wsched::Pid::from_raw(7);
    /// r.set_entry(pid, "serve");
    /// r.set_process_type(pid, "my_crate::Server");
    /// assert_eq!(r.process_type(pid), Some("my_crate::Server"));
    /// assert_eq!(r.label(pid), "Server::serve <7>");
    /// ```
    pub fn set_process_type(&mut self, pid: Pid, process_type: &str) {
        self.types.insert(pid, process_type.to_owned());
    }

    pub(crate) fn set_clock_every(&mut self, steps: u32) {
        self.clock_every = steps;
    }

    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
    }

    pub(crate) fn set_lost(&mut self, lane: Lane, lost: u64) {
        let index = self.lane_index(lane);
        self.lost[index] = lost;
    }

    /// Whether some process the events name has no entry (its spawn was not kept).
    pub(crate) fn has_unnamed(&self) -> bool {
        self.lanes
            .iter()
            .flatten()
            .filter_map(|e| e.kind.pid())
            .any(|pid| !self.entries.contains_key(&pid))
    }

    pub(crate) fn name_if_unnamed(&mut self, pid: Pid, process_type: &str, entry: &str) {
        if !self.entries.contains_key(&pid) {
            self.set_entry(pid, entry);
            self.set_process_type(pid, process_type);
        }
    }

    fn lane_index(&self, lane: Lane) -> usize {
        match lane {
            Lane::Worker(n) => {
                assert!(n < self.workers, "no worker {n} in this recording");
                n
            }
            Lane::Outside => self.workers,
        }
    }

    /// The number of workers.
    ///
    /// ```
    /// assert_eq!(wsched::Recording::new(2, std::time::Duration::ZERO).workers(), 2);
    /// ```
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// From the scheduler's start to the moment of the snapshot.
    ///
    /// ```
    /// let r = wsched::Recording::new(1, std::time::Duration::from_secs(1));
    /// assert_eq!(r.duration(), std::time::Duration::from_secs(1));
    /// ```
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The events of `lane`, oldest first.
    ///
    /// ```
    /// let r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// assert!(r.events(wsched::recorder::Lane::Outside).is_empty());
    /// ```
    pub fn events(&self, lane: Lane) -> &[RecordedEvent] {
        &self.lanes[self.lane_index(lane)]
    }

    /// Events of `lane` that were recorded but are not in this recording: in ring
    /// mode overwritten by newer ones, otherwise refused because the buffer was full
    /// (and, rarely, one being overwritten while the snapshot copied it).
    ///
    /// ```
    /// let r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// assert_eq!(r.lost(wsched::recorder::Lane::Worker(0)), 0);
    /// ```
    pub fn lost(&self, lane: Lane) -> u64 {
        self.lost[self.lane_index(lane)]
    }

    /// The buffer capacity each lane had (0 for a recording built by hand).
    ///
    /// ```
    /// assert_eq!(wsched::Recording::new(1, std::time::Duration::ZERO).capacity(), 0);
    /// ```
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How often a busy worker read the clock: at the start of one step in this many
    /// (see [`RecordOptions::clock_every`](crate::RecordOptions::clock_every)); the
    /// times of the steps in between are shares of the interval between readings. 1
    /// for a recording built by hand.
    ///
    /// ```
    /// assert_eq!(wsched::Recording::new(1, std::time::Duration::ZERO).clock_every(), 1);
    /// ```
    pub fn clock_every(&self) -> u32 {
        self.clock_every.max(1)
    }

    /// The entry `pid` runs, if its spawn was recorded or it was live at the
    /// snapshot.
    ///
    /// ```
    /// let r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// assert_eq!(r.entry(wsched::Pid::from_raw(1)), None);
    /// ```
    pub fn entry(&self, pid: Pid) -> Option<&str> {
        self.entries.get(&pid).map(String::as_str)
    }

    /// The type `pid` runs, in full (see
    /// [`set_process_type`](Self::set_process_type)), if its spawn was recorded or
    /// it was live at the snapshot.
    ///
    /// ```
    /// let r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// assert_eq!(r.process_type(wsched::Pid::from_raw(1)), None);
    /// ```
    pub fn process_type(&self, pid: Pid) -> Option<&str> {
        self.types.get(&pid).map(String::as_str)
    }

    /// How the pictures and the JSON label `pid`: its type, shortened, its entry
    /// and the PID, `Crawler::run <5>`, as listings do. Without a type (a recording
    /// built by hand that names none), the entry and the PID; `?` for an unknown
    /// entry.
    ///
    /// ```
    /// let mut r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// let pid = wsched::Pid::from_raw(5);
    /// assert_eq!(r.label(pid), "? <5>");
    /// r.set_entry(pid, "run");
    /// assert_eq!(r.label(pid), "run <5>");
    /// r.set_process_type(pid, "my_crate::crawl::Crawler");
    /// assert_eq!(r.label(pid), "Crawler::run <5>");
    /// ```
    pub fn label(&self, pid: Pid) -> String {
        ProcessLabel {
            name: self.process_name(pid),
            pid,
        }
        .to_string()
    }

    /// [`label`](Self::label) without the PID: `Crawler::run`.
    pub(crate) fn process_name(&self, pid: Pid) -> ProcessName<'_> {
        ProcessName {
            process_type: self.process_type(pid),
            entry: self.entry(pid),
        }
    }

    /// Every process the events name, in PID order.
    ///
    /// ```
    /// let r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// assert!(r.pids().is_empty());
    /// ```
    pub fn pids(&self) -> Vec<Pid> {
        let mut pids: Vec<Pid> = self
            .lanes
            .iter()
            .flatten()
            .filter_map(|e| e.kind.pid())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// What worker `worker` did: its steps and parks, in order, never overlapping.
    /// A step whose end was not recorded ends at the worker's next event; one still
    /// running at the snapshot ends at [`duration`](Self::duration).
    ///
    /// ```
    /// let r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// assert!(r.worker_slices(0).is_empty());
    /// ```
    pub fn worker_slices(&self, worker: usize) -> Vec<Slice> {
        let mut slices = Vec::new();
        let mut open: Option<(Duration, SliceKind)> = None;
        let close = |open: &mut Option<(Duration, SliceKind)>,
                     slices: &mut Vec<Slice>,
                     at: Duration,
                     outcome: Option<StepOutcome>| {
            if let Some((start, mut kind)) = open.take() {
                if let SliceKind::Step { outcome: o, .. } = &mut kind {
                    *o = outcome;
                }
                slices.push(Slice {
                    start,
                    end: at.max(start),
                    kind,
                });
            }
        };
        for event in self.events(Lane::Worker(worker)) {
            match event.kind {
                EventKind::StepStart { pid } => {
                    close(&mut open, &mut slices, event.at, None);
                    open = Some((event.at, SliceKind::Step { pid, outcome: None }));
                }
                EventKind::StepEnd { pid, outcome } => {
                    if matches!(open, Some((_, SliceKind::Step { pid: p, .. })) if p == pid) {
                        close(&mut open, &mut slices, event.at, Some(outcome));
                    }
                }
                EventKind::Park => {
                    close(&mut open, &mut slices, event.at, None);
                    open = Some((event.at, SliceKind::Park));
                }
                EventKind::Unpark | EventKind::Idle => {
                    close(&mut open, &mut slices, event.at, None);
                }
                _ => {}
            }
        }
        close(&mut open, &mut slices, self.duration, None);
        slices
    }

    /// What `pid` was doing, from the first event naming it: runnable (queued),
    /// running (on which worker), waiting. Its last slice ends at its final step's
    /// end, or at [`duration`](Self::duration) if it had not ended.
    ///
    /// ```
    /// let r = wsched::Recording::new(1, std::time::Duration::ZERO);
    /// assert!(r.process_slices(wsched::Pid::from_raw(1)).is_empty());
    /// ```
    pub fn process_slices(&self, pid: Pid) -> Vec<ProcessSlice> {
        // This process's events from every lane, by time; a stable sort keeps each
        // lane's own order among equal times.
        let mut events: Vec<(Duration, usize, EventKind)> = Vec::new();
        for (lane, list) in self.lanes.iter().enumerate() {
            for e in list.iter().filter(|e| e.kind.pid() == Some(pid)) {
                events.push((e.at, lane, e.kind));
            }
        }
        events.sort_by_key(|&(at, _, _)| at);
        let mut slices = Vec::new();
        let mut open: Option<(Duration, Activity)> = None;
        let mut ended = false;
        // Woken while running (a wake whose time falls inside the step, e.g. from
        // another thread): runnable, not waiting, when the step ends.
        let mut woken = false;
        let mut set =
            |open: &mut Option<(Duration, Activity)>, at: Duration, next: Option<Activity>| {
                if let Some((start, state)) = open.take() {
                    slices.push(ProcessSlice {
                        start,
                        end: at.max(start),
                        activity: state,
                    });
                }
                *open = next.map(|state| (at, state));
            };
        for (at, lane, kind) in events {
            match (kind, open) {
                (EventKind::Runnable { .. }, Some((_, Activity::Running { .. }))) => woken = true,
                // Already queued: nothing changes. After its end: a late, refused wake.
                (EventKind::Runnable { .. }, Some((_, Activity::Runnable))) => {}
                (EventKind::Runnable { .. }, _) if ended => {}
                (EventKind::Runnable { .. }, _) => set(&mut open, at, Some(Activity::Runnable)),
                (EventKind::StepStart { .. }, _) => {
                    ended = false;
                    woken = false;
                    set(&mut open, at, Some(Activity::Running { worker: lane }));
                }
                (EventKind::StepEnd { outcome, .. }, _) => {
                    let next = match outcome {
                        o if o.ends() => {
                            ended = true;
                            None
                        }
                        StepOutcome::Continue => Some(Activity::Runnable),
                        _ if woken => Some(Activity::Runnable),
                        _ => Some(Activity::Waiting),
                    };
                    set(&mut open, at, next);
                }
                _ => {}
            }
        }
        set(&mut open, self.duration, None);
        slices
    }

    /// Every steal, in time order.
    ///
    /// ```
    /// let r = wsched::Recording::new(2, std::time::Duration::ZERO);
    /// assert!(r.steals().is_empty());
    /// ```
    pub fn steals(&self) -> Vec<Steal> {
        let mut steals: Vec<Steal> = (0..self.workers)
            .flat_map(|thief| {
                self.events(Lane::Worker(thief))
                    .iter()
                    .filter_map(move |e| match e.kind {
                        EventKind::Steal { victim, count } => Some(Steal {
                            at: e.at,
                            victim,
                            thief,
                            count,
                        }),
                        _ => None,
                    })
            })
            .collect();
        steals.sort_by_key(|s| (s.at, s.thief));
        steals
    }
}

/// Formats a duration for pictures: `0`, `750 ns`, `12.5 µs`, `3 ms`, `1.25 s`.
pub(crate) fn short_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    let (value, unit) = if ns == 0.0 {
        return "0".to_owned();
    } else if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}
