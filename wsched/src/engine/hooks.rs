//! The seam between the engine and the layers above it.
//!
//! The engine runs processes. Around that, the layers above keep state and want to
//! know what happens: a process's end must reach its monitors, links, names and
//! waiting calls (the services); a step's yields go to their handlers (commands);
//! timers must be released (the services' timers, on the time layer's wheel); and
//! observability records every step, steal and park. The engine names none of them.
//! It calls two traits of its own, [`Hooks`] and [`Instrument`], on [`Layers`], a
//! name it owns for "whatever sits above": the runtime layer implements `Hooks`
//! (`runtime/layers.rs`, which puts the layers together) and observability
//! implements `Instrument` (`observe/instrument.rs`).
//!
//! The calls are static: `<Layers as Hooks>::dispatch(…)` resolves at compile time,
//! to the one implementation, and inlines like a direct call, so the seam costs
//! nothing on the paths it sits on (a step, a yield, a process's end).
//!
//! The layers' state lives in [`Shared`] as [`Hooks::State`], a type the runtime
//! layer chooses; each layer finds its own part of it by type with
//! [`Shared::part`] (`shared.part::<Monitors>()`), so no layer names another's state,
//! and the engine names none of it. Per process, the instruments keep their span in
//! the process's cell as [`Instrument::ProcessSpan`].

use crate::engine::cell::{CellRef, Owned, ProcessCell};
use crate::engine::dead_letters::DeadLetterReason;
use crate::engine::process::{Event, Status, Yield};
use crate::engine::shared::Shared;
use crate::engine::worker::Caller;
use crate::entry_name::EntryName;
use crate::error::{CancelError, ProcessError, SendError};
use crate::exit::ExitReason;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::tag::Tag;

/// The layers above the engine, as the engine calls them: the one type that
/// implements [`Hooks`] and [`Instrument`].
pub(crate) struct Layers;

/// What the engine asks of the services, commands and time above it.
pub(crate) trait Hooks {
    /// Their state, one per scheduler, kept in [`Shared`]; each layer finds its part
    /// with [`Shared::part`].
    type State: Send + Sync + 'static;

    // ---- yields ----------------------------------------------------------------

    /// Hands `yielded`, from the step of `task` that just returned, to the handler
    /// registered for its command, on this worker.
    fn dispatch(shared: &Shared, task: &CellRef, yielded: &mut Yield);

    /// The process of `task` withdrew its yield `tag`: releases the yield's timer
    /// and aborts its work in flight. Called only for a process that may have
    /// either ([`may_have_pending`]).
    fn withdraw(shared: &Shared, task: &CellRef, tag: Tag);

    /// After each run of a process on a worker, and once more as the worker exits:
    /// settles what the run left to settle once it is over (replies dropped while it
    /// unwound).
    fn after_run();

    // ---- processes starting and ending ------------------------------------------

    /// `child`, just spawned by `parent` linked to it, is not yet published: link
    /// them.
    fn link_spawned(shared: &Shared, parent: Pid, child: Pid);

    /// Whether anything monitors or links to any process: until then a process's
    /// end skips [`take_kill`](Self::take_kill) and
    /// [`tell_watchers`](Self::tell_watchers). Read after the ending process's
    /// mailbox closed.
    fn watched(shared: &Shared) -> bool;

    /// Releases the pending timers and aborts the work in flight of `cell`'s
    /// process: it is ending. Called only for a process that may have either
    /// ([`may_have_pending`]).
    fn release_pending(shared: &Shared, cell: &ProcessCell);

    /// Frees what `pid` held in the layers above (its names), once its result is
    /// published.
    fn released(shared: &Shared, pid: Pid);

    /// The failure a link made `pid` stop with, if a link did: its end then reports
    /// that instead of a plain stop.
    fn take_kill(shared: &Shared, pid: Pid) -> Option<ProcessError>;

    /// Tells `pid`'s monitors and links that it ended for `reason`, adding to
    /// `kills` the processes its links take down. Returns whether anybody observed
    /// the end.
    fn tell_watchers(
        shared: &Shared,
        pid: Pid,
        reason: &ExitReason,
        kills: &mut Vec<CellRef>,
    ) -> bool;

    // ---- processes on other nodes -------------------------------------------------

    /// Sends a message to `to`, a process on another node (`to.is_local()` is
    /// false): hands it to the cluster layer, or fails with the message back.
    fn send_remote(
        shared: &Shared,
        from: Option<Pid>,
        to: Pid,
        payload: Payload,
        signal: bool,
    ) -> Result<(), SendError>;

    /// Cancels (`kill`: kills) `pid`, a process on another node.
    fn stop_remote(shared: &Shared, pid: Pid, kill: bool) -> Result<(), CancelError>;

    // ---- the scheduler's end ------------------------------------------------------

    /// Releases what the layers hold once every worker has stopped (the timer
    /// thread and its pending timers, the blocking pool).
    fn release(shared: &Shared);
}

/// What the engine tells observability. Every method has an empty default: an
/// instrument overrides what it records, and an event nobody records costs nothing.
pub(crate) trait Instrument {
    /// What the instruments keep in each process's cell (its `tracing` span).
    type ProcessSpan: Send + 'static;

    /// What a step's instruments carry from its start to its end.
    type Step;

    /// The span of a cell not spawned yet.
    fn no_span() -> Self::ProcessSpan;

    /// The span of a process spawned as `pid`, on `entry`, by `parent`.
    fn process_span(pid: Pid, entry: &EntryName, parent: Option<Pid>) -> Self::ProcessSpan;

    /// Whether steps are timed: the worker then notes whether the process it runs
    /// was woken into its LIFO slot (its wake latency is measured).
    #[inline(always)]
    fn timing_steps(shared: &Shared) -> bool {
        let _ = shared;
        false
    }

    /// A process of type `process_type` is about to be initialised on `entry` with
    /// `input` (into `span`, its cell's, not yet published); `requested`: its
    /// history is to be recorded (`SpawnOptions::record_history`).
    #[cfg(feature = "sim")]
    #[inline(always)]
    fn history_begins(
        shared: &Shared,
        span: &mut Self::ProcessSpan,
        process_type: &'static str,
        entry: &str,
        input: &crate::payload::Payloads,
        requested: bool,
    ) {
        let _ = (shared, span, process_type, entry, input, requested);
    }

    /// A process was initialised (its cell is `owned`, not yet published).
    #[inline(always)]
    fn initialised(owned: &Owned<'_>) {
        let _ = owned;
    }

    /// `cell`'s process was spawned by `caller`, and is about to be published.
    #[inline(always)]
    fn spawned(shared: &Shared, caller: Caller, cell: &CellRef) {
        let _ = (shared, caller, cell);
    }

    /// `pid` became runnable on `worker`'s queues.
    #[inline(always)]
    fn runnable(shared: &Shared, worker: usize, pid: Pid) {
        let _ = (shared, worker, pid);
    }

    /// `pid` became runnable in the global queue, from outside the workers.
    #[inline(always)]
    fn runnable_outside(shared: &Shared, pid: Pid) {
        let _ = (shared, pid);
    }

    /// The processes of `cells` became runnable together, from outside the workers.
    #[inline(always)]
    fn runnable_batch(shared: &Shared, cells: &[CellRef]) {
        let _ = (shared, cells);
    }

    /// `worker` found nothing to run (the first idle round after work).
    #[inline(always)]
    fn idle(shared: &Shared, worker: usize) {
        let _ = (shared, worker);
    }

    /// `worker` stole `taken` processes from `victim` (from its LIFO slot: `lifo`).
    #[inline(always)]
    fn stole(shared: &Shared, worker: usize, victim: usize, taken: usize, lifo: bool) {
        let _ = (shared, worker, victim, taken, lifo);
    }

    /// `worker` goes to sleep.
    #[inline(always)]
    fn parked(shared: &Shared, worker: usize) {
        let _ = (shared, worker);
    }

    /// `worker` woke up: woken by a producer, or (`timed_out`) to look for a
    /// process stranded in a LIFO slot.
    #[inline(always)]
    fn unparked(shared: &Shared, worker: usize, timed_out: bool) {
        let _ = (shared, worker, timed_out);
    }

    /// A step of `owned` (the process of `task`) begins on `worker`, with `events`;
    /// `woken`: the process was woken into this worker's LIFO slot (read, and
    /// cleared, only by step timing).
    fn step_begins(
        shared: &Shared,
        worker: usize,
        task: &CellRef,
        owned: &Owned<'_>,
        events: &[Event],
        woken: &mut bool,
    ) -> Self::Step;

    /// The step `step` of `task` returned (before anything else happens).
    #[inline(always)]
    fn step_returned(shared: &Shared, worker: usize, task: &CellRef, step: &Self::Step) {
        let _ = (shared, worker, task, step);
    }

    /// The step of `pid` is over and recorded: `ok` if it returned `Ok`, with
    /// `status`.
    #[inline(always)]
    fn step_ended(shared: &Shared, worker: usize, pid: Pid, ok: bool, status: Option<&Status>) {
        let _ = (shared, worker, pid, ok, status);
    }

    /// The step `step` yielded `yields`.
    #[inline(always)]
    fn yielded(step: &Self::Step, yields: &[Yield]) {
        let _ = (step, yields);
    }

    /// Whether the instruments look at each yield of the process whose span is
    /// `span` ([`yielded`](Self::yielded): its yields are traced, or its history
    /// captured), so that none may skip the dispatch after its step (see
    /// `Handlers::spawns_at_yield`).
    ///
    /// # Safety
    /// The caller owns the process (it runs a step of it).
    #[inline(always)]
    unsafe fn yields_watched(span: &Self::ProcessSpan) -> bool {
        let _ = span;
        false
    }

    /// The process of `owned` ends with `result`.
    #[inline(always)]
    fn exited(owned: &Owned<'_>, result: &Result<Payload, ProcessError>) {
        let _ = (owned, result);
    }

    /// A message to `to` (from `from`) became a dead letter for `reason`.
    #[inline(always)]
    fn dead_letter(to: Pid, from: Option<Pid>, payload: &Payload, reason: DeadLetterReason) {
        let _ = (to, from, payload, reason);
    }
}

/// Whether `cell`'s process may have pending timers or work in flight: only then do
/// a withdrawal and its end call into the layers (two relaxed loads of its own cell;
/// processes that never sleep and never use a blocking or async handler skip them).
#[inline(always)]
pub(crate) fn may_have_pending(cell: &ProcessCell) -> bool {
    cell.timers().may_have_pending() || cell.has_work_out()
}

impl Shared {
    /// The part of the layers' state of type `T` (see [`Hooks::State`]).
    #[inline(always)]
    pub(crate) fn part<T>(&self) -> &T
    where
        <Layers as Hooks>::State: AsRef<T>,
    {
        self.layers.as_ref()
    }
}
