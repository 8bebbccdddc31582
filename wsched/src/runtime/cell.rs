//! One process as the scheduler holds it: the body, the mailbox (its MPSC event
//! queue), its state word and the slot its result waits in until claimed.

use std::mem;

use super::state::{AfterStep, EventKind, ProcessState, State, StopRequest, Suspend};
use crate::command::timer::TimerList;
use crate::command::{Completer, Join};
use crate::entry_name::EntryName;
use crate::error::{JoinError, ProcessError};
use crate::payload::Payload;
use crate::pid::Pid;
use crate::process::{Event, Process, SuspendPoint};
use crate::runtime::shared::Filler;
use crate::runtime::Handle;
use crate::sync::{AtomicU64, Mutex, Ordering, UnsafeCell};
use std::sync::Arc;

/// Receives the answer to a claim of a process's result, exactly once. The two
/// claims the runtime makes are variants of their own, so a join or a wait does
/// not box a closure.
pub(crate) enum ResultWaiter {
    /// A `Join` command: the answer completes it.
    Join(Completer<Join>),
    /// A blocking `wait` on some thread.
    Wait(Filler),
    /// Anything else (the loom models).
    #[cfg_attr(not(loom), allow(dead_code))]
    Call(Box<dyn FnOnce(Result<Payload, JoinError>) + Send>),
}

impl ResultWaiter {
    pub(crate) fn answer(self, result: Result<Payload, JoinError>) {
        match self {
            Self::Join(done) => done.complete(result),
            Self::Wait(filler) => filler.fill(result),
            Self::Call(call) => call(result),
        }
    }
}

pub(crate) struct ProcessCell {
    pid: Pid,
    /// The scheduler running the process (`None` only for cells made by unit tests
    /// and loom models). Completers and the process's `Context` reach the scheduler
    /// through the cell, so a yield or a send touches the process's own reference
    /// count, never the scheduler's, which every worker would contend on.
    handle: Option<Handle>,
    parent: Option<Pid>,
    entry: EntryName,
    detached: bool,
    state: State,
    /// The event queue. Producers (senders, completers, shutdown) push under the
    /// lock; the owner moves everything out in one go before a step, so a mailbox
    /// costs one short lock per event and per step. See [`Mailbox`] for why it
    /// allocates nothing in steady state and holds no buffer while idle. `closed` is
    /// set, under the same lock, before the process is marked done: a producer that
    /// finds the mailbox open knows its event will be seen or dropped by the owner,
    /// never lost in a queue nobody reads without the producer being told.
    mailbox: Mutex<Mailbox>,
    /// Touched only through [`Owned`], i.e. by whoever holds the RUNNING state.
    body: UnsafeCell<Option<Box<dyn Process>>>,
    /// Written only by the owner (a plain load and store, no locked instruction).
    steps: AtomicU64,
    /// Where the process waits, for listings. The owner keeps its own copy of the
    /// last value it published (`published_at`, touched only through [`Owned`]) so
    /// that a process suspending at the same place step after step — the common case
    /// — costs no lock.
    suspended_at: Mutex<Option<SuspendPoint>>,
    published_at: UnsafeCell<Option<SuspendPoint>>,
    outcome: Mutex<Outcome>,
    /// The process's pending timers, linked by the timer service (under its lock).
    /// Withdrawing a yield or ending the process looks for timers only if there are
    /// some, so processes that never sleep never take the timer lock.
    timers: TimerList,
}

// SAFETY: `body` and `published_at` are the only fields that are not `Sync` by
// themselves. They are accessed only through `Owned`, which exists only while its
// holder owns the RUNNING state (see the "one owner" invariant in `state.rs`), so no
// two threads ever touch them at once, and the AcqRel CASes that pass ownership on
// order one owner's accesses before the next's.
// `Box<dyn Process>` is `Send`, so moving that access between threads is sound.
unsafe impl Sync for ProcessCell {}

/// Events in arrival order: the oldest in `first`, later ones in `rest` (which is
/// empty while `first` is). Most processes get one event between two steps, which
/// `first` holds without an allocation; `rest` grows only for a process that gets
/// bursts, and gives its memory back when a burst was large. (An earlier version
/// swapped the worker's step buffer into the mailbox, so each idle process held
/// some worker's old step buffer, of whatever size that worker's steps had grown
/// it to.)
#[derive(Default)]
struct Mailbox {
    first: Option<Event>,
    rest: Vec<Event>,
    closed: bool,
}

/// A burst buffer larger than this is freed when emptied rather than kept.
const MAILBOX_KEEP: usize = 16;

impl Mailbox {
    fn push(&mut self, event: Event) {
        if self.first.is_none() {
            debug_assert!(self.rest.is_empty());
            self.first = Some(event);
        } else {
            self.rest.push(event);
        }
    }

    /// Moves every event, oldest first, to the end of `buffer`.
    fn drain_into(&mut self, buffer: &mut Vec<Event>) {
        if let Some(first) = self.first.take() {
            buffer.push(first);
            buffer.append(&mut self.rest);
            if self.rest.capacity() > MAILBOX_KEEP {
                self.rest = Vec::new();
            }
        }
    }
}

enum Outcome {
    Pending { waiter: Option<ResultWaiter> },
    Finished(Result<Payload, ProcessError>),
    Claimed,
}

/// Proof that the holder owns the process's RUNNING state, and with it the body.
pub(crate) struct Owned<'a> {
    cell: &'a ProcessCell,
}

impl ProcessCell {
    /// A READY cell holding `body`, without a scheduler (for the loom models).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn new(
        pid: Pid,
        parent: Option<Pid>,
        entry: &str,
        detached: bool,
        body: Box<dyn Process>,
    ) -> Self {
        let mut cell = Self::unstarted(pid, parent, entry, detached, None);
        cell.state = State::new_ready();
        cell.body = UnsafeCell::new(Some(body));
        cell
    }

    /// A RUNNING cell without a body, owned by whoever made it.
    fn unstarted(
        pid: Pid,
        parent: Option<Pid>,
        entry: &str,
        detached: bool,
        handle: Option<Handle>,
    ) -> Self {
        Self {
            pid,
            handle,
            parent,
            entry: EntryName::new(entry),
            detached,
            state: State::new_running(),
            mailbox: Mutex::new(Mailbox::default()),
            body: UnsafeCell::new(None),
            steps: AtomicU64::new(0),
            suspended_at: Mutex::new(None),
            published_at: UnsafeCell::new(None),
            outcome: Mutex::new(Outcome::Pending { waiter: None }),
            timers: TimerList::new(),
        }
    }

    /// Makes the cell of a process being spawned on `handle`'s scheduler: `init` gets
    /// the cell (to build the process's `Context` from) and returns the initialised
    /// body, or the error that refuses the spawn. The cell is created RUNNING, owned
    /// by this function, so installing the body needs no other synchronisation than
    /// the state machine's; it is returned READY, for the caller to register and
    /// queue.
    pub(crate) fn spawn<E>(
        handle: &Handle,
        pid: Pid,
        parent: Option<Pid>,
        entry: &str,
        detached: bool,
        init: impl FnOnce(&Arc<ProcessCell>) -> Result<Box<dyn Process>, E>,
    ) -> Result<Arc<ProcessCell>, E> {
        let cell = Arc::new(Self::unstarted(
            pid,
            parent,
            entry,
            detached,
            Some(handle.clone()),
        ));
        {
            let mut owned = Owned { cell: &cell };
            match init(&cell) {
                Ok(body) => {
                    owned.with_body(|slot| *slot = Some(body));
                    let ready = owned.finish_step(Suspend::Continue);
                    debug_assert!(
                        matches!(ready, Ok(true)),
                        "nobody else can reach an unpublished cell"
                    );
                }
                Err(error) => {
                    // Never published: nobody will look at it again.
                    owned.release();
                    return Err(error);
                }
            }
        }
        Ok(cell)
    }

    /// The scheduler running this process.
    pub(crate) fn handle(&self) -> &Handle {
        self.handle
            .as_ref()
            .expect("a process run by a scheduler has its handle")
    }

    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    pub(crate) fn parent(&self) -> Option<Pid> {
        self.parent
    }

    pub(crate) fn entry(&self) -> &str {
        self.entry.as_str()
    }

    pub(crate) fn state(&self) -> ProcessState {
        self.state.snapshot()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state.is_done()
    }

    pub(crate) fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }

    /// The process's pending timers.
    pub(crate) fn timers(&self) -> &TimerList {
        &self.timers
    }

    pub(crate) fn suspend_point(&self) -> Option<SuspendPoint> {
        *self.suspended_at.lock()
    }

    /// Queues `event`. `Ok(true)`: the caller woke the process and must schedule it.
    /// `Err(event)`: the process has finished; the event is handed back.
    pub(crate) fn push_event(&self, event: Event) -> Result<bool, Event> {
        let kind = match &event {
            Event::Completion(_) => EventKind::Completion,
            Event::Message(_) => EventKind::Message,
            Event::Cancel => EventKind::Cancel,
        };
        {
            let mut mailbox = self.mailbox.lock();
            if mailbox.closed {
                return Err(event);
            }
            mailbox.push(event);
        }
        // After the push: see the "no lost wake-up" invariant in `state.rs`.
        Ok(self.state.notify(kind))
    }

    pub(crate) fn start_running(&self) -> Option<Owned<'_>> {
        self.state.start_running().then(|| Owned { cell: self })
    }

    /// Shutdown stopping the process: `Some` when the caller took it over and must
    /// end it; `None` when it had ended or its worker will end it after its step (see
    /// [`State::request_stop`]).
    pub(crate) fn request_stop(&self) -> Option<Owned<'_>> {
        (self.state.request_stop() == StopRequest::Claimed).then(|| Owned { cell: self })
    }

    /// Takes back a process whose owner's token was dropped by unwinding (see
    /// "Orphans" in `state.rs`), to end it.
    pub(crate) fn reclaim_orphan(&self) -> Option<Owned<'_>> {
        self.state.reclaim_orphan().then(|| Owned { cell: self })
    }

    /// Claims the result for `waiter`, which is called exactly once: now, with the
    /// result of a finished process or the reason the claim fails (detached, already
    /// claimed), or later, when the process finishes. A result is handed out once.
    /// Returns true when the result was handed out now (the PID table may forget the
    /// cell).
    pub(crate) fn claim_result(&self, waiter: ResultWaiter) -> bool {
        if self.detached {
            waiter.answer(Err(JoinError::Detached(self.pid)));
            return false;
        }
        let mut outcome = self.outcome.lock();
        match &mut *outcome {
            Outcome::Pending {
                waiter: slot @ None,
            } => {
                *slot = Some(waiter);
                false
            }
            Outcome::Pending { waiter: Some(_) } | Outcome::Claimed => {
                drop(outcome);
                waiter.answer(Err(JoinError::AlreadyClaimed(self.pid)));
                false
            }
            Outcome::Finished(_) => {
                let Outcome::Finished(result) = mem::replace(&mut *outcome, Outcome::Claimed)
                else {
                    unreachable!("matched Finished")
                };
                drop(outcome);
                waiter.answer(self.joined(result));
                true
            }
        }
    }

    fn joined(&self, result: Result<Payload, ProcessError>) -> Result<Payload, JoinError> {
        result.map_err(|error| JoinError::Failed {
            pid: self.pid,
            error,
        })
    }

    /// Withdraws a registered waiter (a wait that timed out). Returns false when the
    /// result was already handed to it.
    pub(crate) fn withdraw_waiter(&self) -> bool {
        let mut outcome = self.outcome.lock();
        match &mut *outcome {
            Outcome::Pending { waiter } => waiter.take().is_some(),
            _ => false,
        }
    }

    /// Stores the result, or hands it to the registered waiter (outside the lock).
    /// Returns true when the result has been handed out (or discarded, for a
    /// detached process), so the PID table no longer needs the cell.
    fn store_result(&self, result: Result<Payload, ProcessError>) -> bool {
        let waiter = {
            let mut outcome = self.outcome.lock();
            match mem::replace(&mut *outcome, Outcome::Claimed) {
                Outcome::Pending { waiter: Some(w) } => Some(w),
                Outcome::Pending { waiter: None } if self.detached => None,
                Outcome::Pending { waiter: None } => {
                    *outcome = Outcome::Finished(result);
                    return false;
                }
                Outcome::Finished(_) | Outcome::Claimed => {
                    unreachable!("a process finishes once")
                }
            }
        };
        match waiter {
            Some(w) => w.answer(self.joined(result)),
            // Detached: nobody wants the result. Its drop may run user code that
            // panics, on a worker that must survive it.
            None => super::drop_quietly(result),
        }
        true
    }
}

impl<'a> Owned<'a> {
    pub(crate) fn cell(&self) -> &ProcessCell {
        self.cell
    }

    /// Moves the queued events into `buffer` (the worker's, which keeps its
    /// capacity from step to step).
    pub(crate) fn take_events(&mut self, buffer: &mut Vec<Event>) {
        debug_assert!(buffer.is_empty());
        self.cell.mailbox.lock().drain_into(buffer);
    }

    /// Between two steps run back to back: appends to `buffer` whatever arrived in
    /// the mailbox meanwhile (nothing to do, and no lock, if no wake flag is set).
    /// Returns `false` if shutdown asked to stop the process: it must not step again.
    pub(crate) fn refill_events(&mut self, buffer: &mut Vec<Event>) -> bool {
        let (stop, woken) = self.cell.state.running_flags();
        if stop {
            return false;
        }
        if woken {
            self.cell.state.clear_wake_flags();
            self.cell.mailbox.lock().drain_into(buffer);
        }
        true
    }

    /// Runs `f` on the body (`None` once the process was closed).
    pub(crate) fn with_body<R>(&mut self, f: impl FnOnce(&mut Option<Box<dyn Process>>) -> R) -> R {
        // SAFETY: `Owned` exists only while its holder owns the RUNNING state, so no
        // other thread can be inside this cell's body (see the Sync impl above).
        self.cell.body.with_mut(|body| f(unsafe { &mut *body }))
    }

    pub(crate) fn record_step(&mut self, suspended_at: Option<SuspendPoint>) {
        let steps = &self.cell.steps;
        steps.store(steps.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let changed = self.cell.published_at.with_mut(|published| {
            // SAFETY: as in `with_body`: only the owner touches `published_at`.
            let published = unsafe { &mut *published };
            let changed = *published != suspended_at;
            *published = suspended_at;
            changed
        });
        if changed {
            *self.cell.suspended_at.lock() = suspended_at;
        }
    }

    /// Leaves RUNNING after a step: `Ok(true)` means READY again (queue it),
    /// `Ok(false)` waiting. `Err` hands the token back: shutdown asked to stop the
    /// process, end it.
    pub(crate) fn finish_step(self, suspend: Suspend) -> Result<bool, Self> {
        match self.cell.state.finish_step(suspend) {
            AfterStep::Ready => {
                self.release();
                Ok(true)
            }
            AfterStep::Waiting => {
                self.release();
                Ok(false)
            }
            AfterStep::Stop => Err(self),
        }
    }

    /// Gives up the token without the orphan mark of its `Drop`: the caller is about
    /// to make the transition that ends ownership.
    fn release(self) -> &'a ProcessCell {
        let cell = self.cell;
        std::mem::forget(self);
        cell
    }

    /// First half of ending the process: closes the mailbox, so later sends fail and
    /// get their message back. Returns the events nobody will read, to be dropped
    /// outside the lock.
    pub(crate) fn close_mailbox(&mut self) -> Vec<Event> {
        let mut leftovers = Vec::new();
        let mut mailbox = self.cell.mailbox.lock();
        mailbox.closed = true;
        mailbox.drain_into(&mut leftovers);
        leftovers
    }

    /// Second half: marks the process done and stores or hands out `result`. Returns
    /// whether the result was handed out (or discarded, for a detached process), so
    /// the PID table may forget the cell.
    pub(crate) fn finish(self, result: Result<Payload, ProcessError>) -> bool {
        let cell = self.release();
        *cell.suspended_at.lock() = None;
        cell.state.set_done();
        cell.store_result(result)
    }
}

impl Drop for Owned<'_> {
    /// Reached only when the owner unwinds before leaving RUNNING: mark the process so
    /// the worker that catches the panic can reclaim and end it.
    fn drop(&mut self) {
        self.cell.state.mark_orphaned();
    }
}
