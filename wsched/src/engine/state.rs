//! The process state machine, packed into one atomic word.
//!
//! ```text
//!            spawn                 worker pops it
//!   ──────────────────▶ READY ─────────────────────▶ RUNNING ──▶ DONE
//!                         ▲                             │
//!                         │ completion / cancel         │ step says "waiting for yields"
//!                         ├──────────────── WAITING_YIELDS ◀┤
//!                         │ message / completion / cancel │
//!                         └──────────────── WAITING_MESSAGE ◀┘ step says "waiting for a message"
//! ```
//!
//! Invariants:
//!
//! * **One owner.** Exactly one party may touch a process's body: the one that moved
//!   the word to RUNNING with a successful CAS (from READY, or — only when shutdown
//!   stops a process — from READY or a waiting state). It releases ownership with the
//!   CAS that leaves RUNNING.
//! * **Stop.** Shutdown's sweep either takes over a process nobody steps (READY or
//!   waiting) or sets the STOP flag on a RUNNING one, whose closing CAS sees it and
//!   keeps the process for its worker to end: one sweep reaches every process.
//! * **Orphans.** If the owner's bookkeeping unwinds (a bug, or a user value whose
//!   `Drop` panics where the runtime did not expect it), the dropped ownership token
//!   marks the word ORPHANED while it stays RUNNING; the worker that caught the panic
//!   reclaims ownership from that mark alone and ends the process, so no process stays
//!   RUNNING with nobody stepping it.
//! * **One queue entry.** A process is in a run queue iff it is READY. Whoever moves
//!   it to READY (a notifier waking it, or its worker re-queueing it) pushes it, once.
//! * **No lost wake-up.** A producer first puts its event into the mailbox, then calls
//!   [`State::notify`]. If the process is RUNNING, `notify` sets a *wake flag* for the
//!   kind of event instead of queueing it; the worker's closing CAS
//!   ([`State::finish_step`]) sees the flag and re-queues instead of sleeping. All of
//!   these are read-modify-writes of one word, so in its modification order either the
//!   flag lands before the closing CAS (which then sees it) or after it (and `notify`
//!   sees the waiting state and wakes the process itself).
//! * **The waiting reference.** A waiting process holds one count of its cell's
//!   references: the one its worker stepped it with, which the worker leaves in the
//!   cell when the closing CAS makes the process wait, instead of giving it back.
//!   Whoever moves it out of waiting takes that count: a notifier that woke it queues
//!   the process with it; shutdown (or a kill, or a link) that claimed it gives it
//!   back. So a wake-up and the step before it cost no reference-count traffic, two
//!   locked instructions on the process's line fewer per message.
//! * **Pending events.** A READY process carries [`PENDING`] when an event was
//!   pushed into its mailbox since it last took its events: the notifier that makes
//!   it READY sets it in the same CAS, a notifier that finds it READY without it
//!   sets it (the first one only: later ones see it and only load), and the closing
//!   CAS of a step during which events arrived (a wake flag) sets it. The worker's
//!   CAS to RUNNING reads and clears it, and takes the mailbox's events (its lock)
//!   only when it was set: a process spawned and run with nothing sent to it, most
//!   of a spawn-heavy program, skips its mailbox. An event pushed whose notifier has
//!   not run yet when the flag was read is not lost: that notifier finds the process
//!   RUNNING and sets a wake flag, as for any event during a step.
//! * **Wake rules.** A process waiting for yields is woken by a completion or a
//!   cancel, not by a message (the message waits in the mailbox for the next step); a
//!   process waiting for a message is woken by anything.
//! * DONE is final.
//!
//! # What the loom models check, and through which code
//!
//! `runtime/tests/loom_state.rs` runs the runtime's own code on every side, with no
//! copy of it: a model thread steps the process with `worker::run_task` (the
//! closing CAS, and the waiting reference left in the cell or moved into a queue),
//! producers wake it through `Shared::deliver` and the send path (which take the
//! waiting reference to queue it), and shutdown is `Shared::stop_all`. The scheduler
//! is built without its worker threads, so a model counts exactly how often the
//! process was queued (everything queued from a thread that is not a worker goes to
//! the global queue), and loom's allocator sees every reference given back: a
//! waiting reference kept twice or never left frees the cell twice or leaks it.
//! The mailboxes there take the runtime's spin lock, as outside loom.
//!
//! What those models do not reach, and why:
//!
//! * Where `schedule` puts a process from a worker thread (the LIFO slot, the deque
//!   and their wake-up rules) is not in them: a worker's queues exist only inside
//!   `worker::run`'s loop. `loom_scheduler.rs` runs that loop on loom threads.
//! * The models of the whole loop (`loom_scheduler.rs`, and those of names, links,
//!   monitors, calls, dead letters and destinations) lock mailboxes with loom's
//!   mutex, not the spin lock: see `spin_lock.rs`.
//! * The re-step of a process whose yields completed at once (`dispatch_direct`, the
//!   reference stock) happens on the worker with nothing racing it; the models of
//!   `loom_scheduler.rs` go through it with completers on other threads.
//!
//! The recycler's cache and depot are checked by `loom_depot.rs`, and a cell held
//! by a worker's destination entry by `loom_destinations.rs`; see their modules.

use crate::sync::{AtomicU32, Ordering};

const STATE_MASK: u32 = 0b111;
const READY: u32 = 1;
const RUNNING: u32 = 2;
const WAITING_YIELDS: u32 = 3;
const WAITING_MESSAGE: u32 = 4;
const DONE: u32 = 5;

const WOKEN_BY_COMPLETION: u32 = 1 << 3;
const WOKEN_BY_MESSAGE: u32 = 1 << 4;
const WOKEN_BY_CANCEL: u32 = 1 << 5;
const FLAGS: u32 = WOKEN_BY_COMPLETION | WOKEN_BY_MESSAGE | WOKEN_BY_CANCEL;
/// Set (with RUNNING) when the owner's token was dropped without a transition.
const ORPHANED: u32 = 1 << 6;
/// Set (with RUNNING) by shutdown: end the process when its step returns.
const STOP: u32 = 1 << 7;
/// Set (with READY) while the mailbox may hold events the process has not taken
/// (see "Pending events" in the module docs).
const PENDING: u32 = 1 << 8;

/// What [`State::request_stop`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopRequest {
    /// The caller took the process over (it was not running) and must end it;
    /// `waiting`: it took it from a waiting state, and with it the waiting reference.
    Claimed { waiting: bool },
    /// It is running; its worker ends it when the step returns.
    Flagged,
    /// It had already ended.
    Done,
}

/// Where a process goes after its step (see [`State::finish_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterStep {
    /// READY again: the worker queues it.
    Ready,
    /// Waiting: whoever wakes it queues it.
    Waiting,
    /// Shutdown asked to stop it: still RUNNING, the worker ends it.
    Stop,
}

/// What kind of event a producer delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    Completion,
    Message,
    Cancel,
}

impl EventKind {
    fn flag(self) -> u32 {
        match self {
            Self::Completion => WOKEN_BY_COMPLETION,
            Self::Message => WOKEN_BY_MESSAGE,
            Self::Cancel => WOKEN_BY_CANCEL,
        }
    }
}

/// What a step asked for, as far as the state machine cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Suspend {
    Yields,
    Message,
    Continue,
}

/// A snapshot of the state, for listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcessState {
    /// Queued to run.
    Ready,
    /// Being stepped by a worker.
    Running,
    /// Waiting for completions of its yields.
    WaitingForYields,
    /// Waiting for a message.
    WaitingForMessage,
    /// Finished (its result may still be waiting to be claimed).
    Done,
}

impl std::fmt::Display for ProcessState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Ready => "ready",
            Self::Running => "running",
            Self::WaitingForYields => "waiting for yields",
            Self::WaitingForMessage => "waiting for a message",
            Self::Done => "done",
        })
    }
}

#[derive(Debug)]
pub(crate) struct State(AtomicU32);

impl State {
    /// A new process starts READY: the spawner queues it.
    pub(crate) fn new_ready() -> Self {
        Self(AtomicU32::new(READY))
    }

    /// A process being spawned starts RUNNING, owned by its spawner, which installs
    /// its body and then makes it READY (see `ProcessCell::spawn`).
    pub(crate) fn new_running() -> Self {
        Self(AtomicU32::new(RUNNING))
    }

    pub(crate) fn snapshot(&self) -> ProcessState {
        match self.0.load(Ordering::Acquire) & STATE_MASK {
            READY => ProcessState::Ready,
            RUNNING => ProcessState::Running,
            WAITING_YIELDS => ProcessState::WaitingForYields,
            WAITING_MESSAGE => ProcessState::WaitingForMessage,
            _ => ProcessState::Done,
        }
    }

    /// Records that an event of `kind` is in the mailbox. Returns `true` when the
    /// caller moved the process to READY and must now queue it.
    #[inline]
    pub(crate) fn notify(&self, kind: EventKind) -> bool {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let next = match current & STATE_MASK {
                RUNNING if current & kind.flag() != 0 => return false,
                RUNNING => current | kind.flag(),
                WAITING_YIELDS if kind == EventKind::Message => return false,
                WAITING_YIELDS | WAITING_MESSAGE => READY | PENDING,
                // READY: already queued; its worker takes the mailbox's events
                // when told there are some.
                READY if current & PENDING == 0 => current | PENDING,
                // READY and told already; DONE: nobody will read it, the mailbox
                // was closed first.
                _ => return false,
            };
            // AcqRel: the successful CAS publishes the mailbox push (release) and the
            // queueing that follows must see the worker's last writes (acquire).
            match self
                .0
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return current & STATE_MASK != READY && next & STATE_MASK == READY,
                Err(actual) => current = actual,
            }
        }
    }

    /// READY → RUNNING, by the worker that popped the process: `Some(pending)`,
    /// whether its mailbox may hold events for it (see "Pending events" in the
    /// module docs). `None` if the process was not READY (claimed by shutdown, a
    /// link or a kill; the caller skips it).
    #[inline]
    pub(crate) fn start_running(&self) -> Option<bool> {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            if current & STATE_MASK != READY {
                return None;
            }
            // Acquire: the step sees what its notifiers pushed (their CASes
            // released it) and what its last owner did.
            match self
                .0
                .compare_exchange(current, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(current & PENDING != 0),
                Err(actual) => current = actual,
            }
        }
    }

    /// Leaves RUNNING after a step: READY again when it asked to continue or an event
    /// that wakes it arrived during the step, waiting otherwise — or, if shutdown
    /// flagged it meanwhile, stays RUNNING so its worker ends it.
    pub(crate) fn finish_step(&self, suspend: Suspend) -> AfterStep {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            debug_assert_eq!(current & STATE_MASK, RUNNING, "finish_step by a non-owner");
            if current & STOP != 0 {
                return AfterStep::Stop;
            }
            let flags = current & FLAGS;
            // Events that arrived during the step are pending for the next.
            let ready = if flags != 0 { READY | PENDING } else { READY };
            let next = match suspend {
                Suspend::Continue => ready,
                Suspend::Yields if flags & (WOKEN_BY_COMPLETION | WOKEN_BY_CANCEL) != 0 => ready,
                Suspend::Yields => WAITING_YIELDS,
                Suspend::Message if flags != 0 => ready,
                Suspend::Message => WAITING_MESSAGE,
            };
            // Release: the step's writes to the body must be visible to the next owner.
            match self
                .0
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next & STATE_MASK == READY => return AfterStep::Ready,
                Ok(_) => return AfterStep::Waiting,
                Err(actual) => current = actual,
            }
        }
    }

    /// RUNNING → READY for a process being spawned, before its cell is published:
    /// nobody else can reach the word yet (no notifier, no shutdown), so a plain
    /// store does what [`finish_step`](Self::finish_step)'s CAS would, without the
    /// locked instruction. Publishing the cell (the PID table's lock, the queue)
    /// orders it before anyone else's access.
    pub(crate) fn make_ready_unshared(&self) {
        debug_assert_eq!(self.0.load(Ordering::Relaxed), RUNNING, "a fresh spawn");
        self.0.store(READY, Ordering::Release);
    }

    /// Shutdown stopping the process. A process nobody is stepping (waiting, or READY
    /// in a queue) is taken over: [`StopRequest::Claimed`], the caller now owns it
    /// and ends it. A RUNNING one gets the STOP flag, which the closing CAS of its
    /// step sees ([`State::finish_step`] then keeps it RUNNING for its worker to end
    /// it): [`StopRequest::Flagged`]. Being read-modify-writes of the one word, the two
    /// cannot miss each other. A READY process claimed here stays in its queue; the
    /// worker that pops it finds it DONE and skips it.
    pub(crate) fn request_stop(&self) -> StopRequest {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            let state = current & STATE_MASK;
            let next = match state {
                READY | WAITING_YIELDS | WAITING_MESSAGE => RUNNING,
                RUNNING if current & STOP != 0 => return StopRequest::Flagged,
                RUNNING => current | STOP,
                _ => return StopRequest::Done,
            };
            match self
                .0
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == RUNNING => {
                    return StopRequest::Claimed {
                        waiting: state != READY,
                    }
                }
                Ok(_) => return StopRequest::Flagged,
                Err(actual) => current = actual,
            }
        }
    }

    /// While RUNNING (checked by its owner between two steps it runs back to back):
    /// whether shutdown asked to stop it, and whether events arrived in the mailbox
    /// since the flags were last cleared.
    pub(crate) fn running_flags(&self) -> (bool, bool) {
        let current = self.0.load(Ordering::Acquire);
        debug_assert_eq!(current & STATE_MASK, RUNNING);
        (current & STOP != 0, current & FLAGS != 0)
    }

    /// Clears the wake flags of a RUNNING process whose owner is about to take the
    /// mailbox's events itself. An event pushed after the take sets its flag again,
    /// so it is not lost: the closing CAS of the step sees it.
    pub(crate) fn clear_wake_flags(&self) {
        let previous = self.0.fetch_and(!FLAGS, Ordering::AcqRel);
        debug_assert_eq!(previous & STATE_MASK, RUNNING);
    }

    /// Marks a RUNNING process whose owner's token was dropped by unwinding.
    pub(crate) fn mark_orphaned(&self) {
        let previous = self.0.fetch_or(ORPHANED, Ordering::AcqRel);
        debug_assert_eq!(previous & STATE_MASK, RUNNING, "orphaned by a non-owner");
    }

    /// Takes ownership of an orphaned process (see the module docs). Returns false if
    /// it is not marked orphaned.
    pub(crate) fn reclaim_orphan(&self) -> bool {
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            if current & (STATE_MASK | ORPHANED) != RUNNING | ORPHANED {
                return false;
            }
            match self.0.compare_exchange(
                current,
                current & !ORPHANED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// RUNNING → DONE, by the owner, after the mailbox was closed.
    pub(crate) fn set_done(&self) {
        let previous = self.0.swap(DONE, Ordering::AcqRel);
        debug_assert_eq!(previous & STATE_MASK, RUNNING, "set_done by a non-owner");
    }

    pub(crate) fn is_done(&self) -> bool {
        self.0.load(Ordering::Acquire) & STATE_MASK == DONE
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_message_does_not_wake_a_process_waiting_for_yields() {
        let s = State::new_ready();
        assert!(s.start_running().is_some());
        assert_eq!(AfterStep::Waiting, s.finish_step(Suspend::Yields));
        assert!(!s.notify(EventKind::Message));
        assert_eq!(s.snapshot(), ProcessState::WaitingForYields);
        assert!(s.notify(EventKind::Completion));
        assert_eq!(s.snapshot(), ProcessState::Ready);
        // Already queued: a second event does not queue it twice.
        assert!(!s.notify(EventKind::Completion));
    }

    #[test]
    fn a_process_knows_whether_events_wait_when_it_starts_a_step() {
        // Spawned and run with nothing sent: no events to take.
        let s = State::new_ready();
        assert_eq!(s.start_running(), Some(false));
        // Continued with nothing arriving during the step: none either.
        assert_eq!(AfterStep::Ready, s.finish_step(Suspend::Continue));
        assert_eq!(s.start_running(), Some(false));
        // An event during the step: pending at the next start.
        assert!(!s.notify(EventKind::Message));
        assert_eq!(AfterStep::Ready, s.finish_step(Suspend::Continue));
        assert_eq!(s.start_running(), Some(true));
        // Sent to while queued: the first sender marks it, the queue is not told
        // again (it is queued already), and the start sees it.
        assert_eq!(AfterStep::Ready, s.finish_step(Suspend::Continue));
        assert!(!s.notify(EventKind::Message));
        assert!(!s.notify(EventKind::Completion));
        assert_eq!(s.snapshot(), ProcessState::Ready);
        assert_eq!(s.start_running(), Some(true));
        // Woken from waiting: pending, as the event that woke it is in the mailbox.
        assert_eq!(AfterStep::Waiting, s.finish_step(Suspend::Message));
        assert!(s.notify(EventKind::Message));
        assert_eq!(s.start_running(), Some(true));
    }

    #[test]
    fn anything_wakes_a_process_waiting_for_a_message() {
        for kind in [EventKind::Message, EventKind::Completion, EventKind::Cancel] {
            let s = State::new_ready();
            assert!(s.start_running().is_some());
            assert_eq!(AfterStep::Waiting, s.finish_step(Suspend::Message));
            assert!(s.notify(kind), "{kind:?}");
        }
    }

    #[test]
    fn events_during_a_step_set_the_wake_flag() {
        let s = State::new_ready();
        assert!(s.start_running().is_some());
        assert!(!s.notify(EventKind::Message));
        // A message flag does not keep a process waiting for yields awake...
        assert_eq!(AfterStep::Waiting, s.finish_step(Suspend::Yields));
        assert!(s.notify(EventKind::Cancel));
        assert!(s.start_running().is_some());
        assert!(!s.notify(EventKind::Completion));
        // ...a completion flag does, and the flags are cleared by the transition.
        assert_eq!(AfterStep::Ready, s.finish_step(Suspend::Yields));
        assert!(s.start_running().is_some());
        assert_eq!(AfterStep::Waiting, s.finish_step(Suspend::Yields));
    }

    #[test]
    fn done_is_final_and_a_waiting_process_is_claimed_for_stop() {
        let s = State::new_ready();
        assert!(s.start_running().is_some());
        assert_eq!(AfterStep::Waiting, s.finish_step(Suspend::Message));
        assert_eq!(s.request_stop(), StopRequest::Claimed { waiting: true });
        s.set_done();
        assert!(s.is_done());
        assert!(!s.notify(EventKind::Message));
        assert!(s.start_running().is_none());
        assert_eq!(s.request_stop(), StopRequest::Done);
    }

    #[test]
    fn a_running_process_flagged_for_stop_stays_with_its_worker() {
        let s = State::new_ready();
        assert!(s.start_running().is_some());
        assert_eq!(s.request_stop(), StopRequest::Flagged);
        assert_eq!(s.request_stop(), StopRequest::Flagged, "idempotent");
        assert!(!s.notify(EventKind::Completion));
        assert_eq!(s.finish_step(Suspend::Yields), AfterStep::Stop);
        assert_eq!(s.snapshot(), ProcessState::Running);
        s.set_done();
    }

    #[test]
    fn a_ready_process_claimed_for_stop_is_skipped_by_its_worker() {
        let s = State::new_ready();
        assert_eq!(s.request_stop(), StopRequest::Claimed { waiting: false });
        assert!(s.start_running().is_none());
    }

    #[test]
    fn only_an_orphan_is_reclaimed_and_it_stays_running() {
        let s = State::new_ready();
        assert!(!s.reclaim_orphan());
        assert!(s.start_running().is_some());
        assert!(!s.reclaim_orphan());
        s.mark_orphaned();
        // Events arriving meanwhile set their wake flag as for any running process.
        assert!(!s.notify(EventKind::Message));
        assert!(s.reclaim_orphan());
        assert!(!s.reclaim_orphan(), "reclaimed once");
        assert_eq!(s.snapshot(), ProcessState::Running);
        s.set_done();
    }
}
