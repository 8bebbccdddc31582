//! What all workers and handles share: spawning, sending, scheduling, finishing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::bounded::{OverflowCounts, Pushed};
use crate::engine::cell::{CellRef, NewProcess, Owned, ProcessCell, ResultWaiter};
use crate::engine::context::Context;
use crate::engine::counters::{CoarseClock, ProcessCounts, ProcessEvent, WorkerCounters};
use crate::engine::dead_letters::{DeadLetterReason, DeadLetters};
use crate::engine::handle::{Handle, KeptHandles, ParkedHandles};
use crate::engine::held::{HeldMessages, MessageCount};
use crate::engine::hooks::{self, Hooks, Instrument, Layers};
use crate::engine::idle::Idle;
use crate::engine::live::LiveCount;
use crate::engine::process::{drop_quietly, init_process, Event, Message, SuspendPoint};
use crate::engine::queue::inject::Inject;
use crate::engine::queue::lifo::LifoSlot;
use crate::engine::queue::local::Steal;
use crate::engine::registry::Registry;
use crate::engine::unobserved::{is_failure, FailureReport, UnobservedFailures};
use crate::engine::worker::{self, Caller};
use crate::error::{
    CancelError, JoinError, Phase, ProcessError, SendError, SendErrorKind, SpawnError,
};
use crate::exit::ExitReason;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::sync::{fence, AtomicBool, Condvar, Mutex, Ordering};
use crate::time::clock;

use crossbeam_utils::CachePadded;

/// What run queues hold.
pub(crate) type Task = CellRef;

pub(crate) struct Shared {
    pub(crate) workers: usize,
    pub(crate) global_batch: usize,
    /// The seed of the workers' randomness (see `random.rs`).
    pub(crate) seed: u64,
    registry: Registry,
    /// Padded, as is `idle`: both hold atomics that workers write as they park,
    /// wake and overflow, and the compiler lays `Shared` out as it likes, so
    /// unpadded they could share a line with the pointers every step reads.
    pub(crate) inject: CachePadded<Inject<Task>>,
    pub(crate) stealers: Box<[Steal<Task>]>,
    /// Each worker's LIFO slot, by worker index (see `queue/lifo.rs`).
    pub(crate) lifos: Box<[CachePadded<LifoSlot<Task>>]>,
    pub(crate) idle: CachePadded<Idle>,
    pub(crate) counters: Box<[CachePadded<WorkerCounters>]>,
    /// The process counts of threads that are not workers (workers count their
    /// own in `counters`).
    pub(crate) outside_counts: CachePadded<ProcessCounts<std::sync::atomic::AtomicU64>>,
    /// Processes spawned (counted from before `init` runs) and not yet ended.
    live: LiveCount,
    /// The lifecycle flags: read on every spawn and by every worker's loop, written
    /// once each; padded so that no hot write shares their line.
    flags: CachePadded<Flags>,
    /// PIDs stopped by shutdown, by whoever stopped them.
    stopped: Mutex<Vec<Pid>>,
    /// Where unread messages go when their process ends, or a full bounded mailbox
    /// drops them (see `dead_letters.rs`).
    pub(crate) dead_letters: DeadLetters,
    /// Messages full bounded mailboxes dropped or rejected (see `bounded.rs`).
    pub(crate) overflows: OverflowCounts,
    /// Where failures nobody observes go (see `unobserved.rs`).
    pub(crate) unobserved: UnobservedFailures,
    /// What processes took in and have not received (see `held.rs`).
    pub(crate) held: HeldMessages,
    /// Milliseconds since the scheduler was built, for the processes' state stamps;
    /// its start is the origin of the workers' busy clocks too.
    pub(crate) clock: CoarseClock,
    /// The state of the layers above (see `hooks.rs`): each finds its part with
    /// [`part`](Self::part).
    pub(crate) layers: <Layers as Hooks>::State,
    /// Counts of this state that workers parked (see `ParkedHandles`); padded: the
    /// workers that park and take them write it.
    pub(crate) parked_handles: CachePadded<ParkedHandles>,
    /// The counts of this state each worker keeps for the cells it makes (see
    /// `KeptHandles`).
    pub(crate) kept_handles: KeptHandles,
}

/// The lifecycle flags (see `Shared::spawn` and `Shared::stop_all`).
struct Flags {
    /// False once shutdown begins: spawns fail.
    accepting: AtomicBool,
    /// True once shutdown's timeout ran out: workers stop what they pick up.
    stopping: AtomicBool,
    /// True when workers must exit.
    terminated: AtomicBool,
    /// True once a process was killed ([`Shared::kill`]): a queued process may then
    /// be claimed by someone other than its worker outside shutdown (a debug check).
    killed_any: AtomicBool,
}

pub(crate) struct SharedParts {
    pub(crate) workers: usize,
    pub(crate) global_batch: usize,
    pub(crate) seed: u64,
    pub(crate) stealers: Box<[Steal<Task>]>,
    pub(crate) dead_letters: DeadLetters,
    pub(crate) unobserved: UnobservedFailures,
    pub(crate) layers: <Layers as Hooks>::State,
}

/// How a process ended, when watchers are still to be told (see [`Shared::end`]).
struct Ended {
    pid: Pid,
    reason: ExitReason,
    /// What to do about a failure once it is known whether a watcher or a link
    /// observed it (see `unobserved.rs`).
    failure: Option<Failure>,
}

/// A failure's fate, by whether its process was detached.
enum Failure {
    /// Detached: reported if nothing observed it.
    Detached(FailureReport),
    /// Joinable, its result kept for a join: marked observed if something observed
    /// it, so that dropping the scheduler does not report it as unclaimed.
    Joinable,
}

impl Shared {
    pub(crate) fn new(parts: SharedParts) -> Arc<Self> {
        Arc::new(Self {
            workers: parts.workers,
            global_batch: parts.global_batch,
            seed: parts.seed,
            registry: Registry::new(parts.workers),
            inject: CachePadded::new(Inject::new()),
            stealers: parts.stealers,
            lifos: (0..parts.workers).map(|_| Default::default()).collect(),
            idle: CachePadded::new(Idle::new(parts.workers)),
            counters: (0..parts.workers).map(|_| Default::default()).collect(),
            outside_counts: Default::default(),
            live: LiveCount::new(parts.workers),
            flags: CachePadded::new(Flags {
                accepting: AtomicBool::new(true),
                stopping: AtomicBool::new(false),
                terminated: AtomicBool::new(false),
                killed_any: AtomicBool::new(false),
            }),
            stopped: Mutex::new(Vec::new()),
            clock: CoarseClock::new(),
            held: HeldMessages::new(),
            dead_letters: parts.dead_letters,
            overflows: OverflowCounts::default(),
            unobserved: parts.unobserved,
            layers: parts.layers,
            parked_handles: CachePadded::new(ParkedHandles::new()),
            kept_handles: KeptHandles::new(parts.workers),
        })
    }

    /// Worker `index`'s LIFO slot.
    pub(crate) fn lifo(&self, index: usize) -> &LifoSlot<Task> {
        &self.lifos[index]
    }

    // ---- spawning -------------------------------------------------------------

    /// Initialises `process` for `method` on the calling thread (so init errors are
    /// returned to the caller), then registers and queues it.
    ///
    /// Racing shutdown: the spawn counts itself live *before* it checks `accepting`,
    /// and shutdown clears `accepting` before it waits for `live` to reach zero (both
    /// SeqCst). So either the spawn sees `accepting` cleared and backs out with
    /// [`SpawnError::ShuttingDown`], or shutdown sees it live and waits for it: the
    /// process then runs (cancelled at once) or is stopped and reported. A spawn that
    /// returns `Ok` is never left in a queue nobody drains.
    pub(crate) fn spawn(
        &self,
        handle: &Handle,
        parent: Option<Pid>,
        mut process: NewProcess,
    ) -> Result<Pid, SpawnError> {
        debug_assert!(std::ptr::eq(handle.shared(), self));
        if process.has_zero_capacity() {
            drop_quietly(process);
            return Err(SpawnError::ZeroMailboxCapacity);
        }
        let caller = worker::caller(self);
        let linked = process.links_to_parent();
        self.live.add(caller);
        // Dekker with `stop_accepting`: the fences order "count, then check" here
        // against "clear, then count" there (SeqCst accesses alone would do in C++,
        // but loom models only fences as SeqCst, and spawns are not that hot).
        fence(Ordering::SeqCst);
        if !self.flags.accepting.load(Ordering::SeqCst) {
            self.live.end(caller);
            // The process is user data: its drop may panic, and we may be on a worker.
            drop_quietly(process);
            return Err(SpawnError::ShuttingDown);
        }
        let pid = self.registry.reserve(caller);
        let spawned = process.spawn(handle, caller, pid, parent, |cell, body, method, input| {
            // The process reaches the scheduler through its own cell.
            init_process(body, Context::of_process(cell), method, input)
        });
        let (cell, for_table) = match spawned {
            Ok(spawned) => (spawned.cell, spawned.for_table),
            Err(error) => {
                self.registry.release(pid, caller);
                self.live.end(caller);
                return Err(error);
            }
        };
        self.count(caller, ProcessEvent::Spawned);
        cell.stamp(self.clock.now());
        <Layers as Instrument>::spawned(self, caller, &cell);
        if linked {
            // Before it is published: it can neither run nor end unlinked.
            let parent = parent.expect("only a process spawns linked");
            <Layers as Hooks>::link_spawned(self, parent, pid);
        }
        self.registry.publish(for_table);
        // Shutdown clears `accepting` (then sets `stopping`) before it sweeps the PID
        // table shard by shard; the shard lock orders this registration against the
        // sweep: either the sweep finds the cell, or we see the flags here and do
        // what the sweep would have done.
        if self.is_stopping() {
            if let Some(owned) = cell.request_stop() {
                self.finish(owned, Err(ProcessError::Stopped));
            }
            return Ok(pid);
        }
        // A supervisor's child is left to its supervisor, which is spawning it in a
        // step and so sees the cancel itself (see `cancel_all`).
        if !self.flags.accepting.load(Ordering::SeqCst) && !cell.is_supervised() {
            let _ = cell.push_event(Event::Cancel);
        }
        worker::schedule_new(self, cell);
        Ok(pid)
    }

    /// Counts `event` in `caller`'s own counts.
    #[inline]
    fn count(&self, caller: Caller, event: ProcessEvent) {
        match caller {
            Caller::Worker(index) => self.counters[index].processes.of(event).add(1),
            Caller::Outside => {
                self.outside_counts
                    .of(event)
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    // ---- events ---------------------------------------------------------------

    /// Puts `event` into `cell`'s mailbox and queues the process if that woke it.
    /// Gives the event back if the process has ended.
    pub(crate) fn deliver(&self, cell: &CellRef, event: Event) -> Result<(), Event> {
        if cell.push_event(event)? {
            // SAFETY: this push woke it, so its waiting reference is ours, once.
            worker::schedule_woken(self, unsafe { CellRef::woken(cell) });
        }
        Ok(())
    }

    /// Queues processes woken together from outside the workers (e.g. by timers
    /// firing at once): one lock on the global queue and one wake-up, which the
    /// woken worker passes on if there is more to do. Leaves `woken` empty.
    pub(crate) fn schedule_batch(&self, woken: &mut Vec<CellRef>) {
        if woken.is_empty() {
            return;
        }
        <Layers as Instrument>::runnable_batch(self, woken);
        self.inject.push_batch_remote(woken.drain(..));
        self.idle.notify_one();
    }

    /// Sends a message that counts against a bounded mailbox's capacity: every send
    /// of a user's message. A message a full mailbox dropped to make room goes to
    /// the dead letters here, outside every lock.
    #[inline]
    pub(crate) fn send_message(
        &self,
        from: Option<Pid>,
        to: Pid,
        payload: Payload,
    ) -> Result<(), SendError> {
        match self.push_message(from, to, payload, false) {
            Ok(None) => Ok(()),
            Ok(Some(dropped)) => {
                self.drop_oldest(to, dropped);
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Sends a signal the runtime makes (a monitor's `Down`, a link's `Exit`, in a
    /// payload made by `Payload::signal`, whose mark a `#[process]`'s own buffer
    /// reads): a message that takes no room in a bounded mailbox and is never
    /// refused for want of it.
    pub(crate) fn send_signal(
        &self,
        from: Option<Pid>,
        to: Pid,
        payload: Payload,
    ) -> Result<(), SendError> {
        let sent = self.push_message(from, to, payload, true);
        debug_assert!(!matches!(sent, Ok(Some(_))), "signals displace nothing");
        sent.map(drop)
    }

    /// Hands a message a full bounded mailbox dropped to make room to the dead
    /// letters, counted.
    #[cold]
    #[inline(never)]
    pub(crate) fn drop_oldest(&self, to: Pid, dropped: Message) {
        self.overflows.count_dropped();
        self.dead_letters
            .one(to, dropped, DeadLetterReason::DroppedOldest);
    }

    /// Pushes a message into `to`'s mailbox, waking it if need be. `Ok(Some)`: the
    /// oldest message a full drop-oldest mailbox dropped to make room, for the caller
    /// to hand to [`drop_oldest`](Self::drop_oldest) once it holds no lock.
    #[inline]
    pub(crate) fn push_message(
        &self,
        from: Option<Pid>,
        to: Pid,
        payload: Payload,
        signal: bool,
    ) -> Result<Option<Message>, SendError> {
        let mut message = Some(Message { from, payload });
        // Small answers only: the message stays in `message` unless delivered.
        let pushed = worker::with_destination(self, to, |cell| {
            let pushed = cell.push_message(&mut message, signal);
            if let Pushed::Queued { woke: true } | Pushed::Displaced { woke: true } = pushed {
                // SAFETY: this push woke it, so its waiting reference is ours, once.
                worker::schedule_woken(self, unsafe { CellRef::woken(cell) });
            }
            pushed
        });
        let kind = match pushed {
            Some(Pushed::Queued { .. }) => return Ok(None),
            Some(Pushed::Displaced { .. }) => return Ok(message),
            Some(Pushed::Closed) => SendErrorKind::Finished,
            Some(Pushed::Full) => self.rejected(),
            // The only place a remote PID costs anything: it never matches a slot of
            // the PID table (see `Pid`), so local sends pay nothing for it.
            None if !to.is_local() => {
                let payload = message.take().expect("not delivered").payload;
                return <Layers as Hooks>::send_remote(self, from, to, payload, signal)
                    .map(|()| None);
            }
            None if self.registry.issued(to) => SendErrorKind::Finished,
            None => SendErrorKind::NoSuchProcess,
        };
        let payload = message.take().expect("not delivered").payload;
        Err(SendError::new(to, kind, payload))
    }

    /// Counts a message a full bounded mailbox refused.
    #[cold]
    #[inline(never)]
    fn rejected(&self) -> SendErrorKind {
        self.overflows.count_rejected();
        SendErrorKind::MailboxFull
    }

    /// The cells in the PID table (live processes, and ended ones whose results
    /// wait for a join).
    pub(crate) fn cells(&self) -> Vec<CellRef> {
        self.registry.cells()
    }

    /// The cell of `pid`, if the PID table has it.
    pub(crate) fn cell_of(&self, pid: Pid) -> Option<CellRef> {
        self.registry.get(pid)
    }

    /// Runs `f` on the cell of `pid` under its shard's lock, if the PID table has it
    /// (see [`Registry::with`]).
    #[inline]
    pub(crate) fn with_cell<R>(&self, pid: Pid, f: impl FnOnce(&CellRef) -> R) -> Option<R> {
        self.registry.with(pid, f)
    }

    /// The cell of `pid` if its process is live (not done), or why it is not.
    pub(crate) fn live_cell(&self, pid: Pid) -> Result<CellRef, SendErrorKind> {
        match self.registry.get(pid) {
            Some(cell) if !cell.is_done() => Ok(cell),
            Some(_) => Err(SendErrorKind::Finished),
            None if self.registry.issued(pid) => Err(SendErrorKind::Finished),
            None => Err(SendErrorKind::NoSuchProcess),
        }
    }

    /// Whether `pid`'s process is live with its mailbox open (not ending).
    pub(crate) fn is_live_open(&self, pid: Pid) -> bool {
        self.registry.with(pid, |cell| !cell.is_closing()) == Some(true)
    }

    /// Where `pid`'s process is suspended (if it is live and said so), and the types
    /// of the messages waiting for it, as its listing has them: for the timeout of a
    /// call to it.
    pub(crate) fn callee_state(&self, pid: Pid) -> (Option<SuspendPoint>, Vec<MessageCount>) {
        let state = self
            .registry
            .with(pid, |cell| (cell.suspend_point(), cell.waiting_messages()));
        let Some((at, mut waiting)) = state else {
            return (None, Vec::new());
        };
        self.held.add_to(pid, &mut waiting);
        (at, waiting)
    }

    /// Whether `pid`'s process is live (not done).
    pub(crate) fn is_live(&self, pid: Pid) -> bool {
        self.registry.with(pid, |cell| !cell.is_done()) == Some(true)
    }

    pub(crate) fn cancel(&self, pid: Pid) -> Result<(), CancelError> {
        if !pid.is_local() {
            return <Layers as Hooks>::stop_remote(self, pid, false);
        }
        let delivered = self
            .registry
            .with(pid, |cell| self.deliver(cell, Event::Cancel).is_ok());
        match delivered {
            Some(true) => Ok(()),
            Some(false) => Err(CancelError::new(pid, SendErrorKind::Finished)),
            None if self.registry.issued(pid) => {
                Err(CancelError::new(pid, SendErrorKind::Finished))
            }
            None => Err(CancelError::new(pid, SendErrorKind::NoSuchProcess)),
        }
    }

    /// Stops `pid` without another step, as shutdown stops the processes left at
    /// its timeout: at once if it is waiting or queued, when its current step returns
    /// if it is running. It ends with [`ProcessError::Stopped`] (reason
    /// [`ExitReason::Killed`]); its `close` runs and its watchers and links are told.
    pub(crate) fn kill(&self, pid: Pid) -> Result<(), CancelError> {
        if !pid.is_local() {
            return <Layers as Hooks>::stop_remote(self, pid, true);
        }
        let cell = self
            .live_cell(pid)
            .map_err(|kind| CancelError::new(pid, kind))?;
        if !self.flags.killed_any.load(Ordering::Relaxed) {
            self.flags.killed_any.store(true, Ordering::Relaxed);
        }
        if let Some(owned) = cell.request_stop() {
            self.finish(owned, Err(ProcessError::Stopped));
        }
        // Otherwise it is running (flagged: its worker ends it when the step
        // returns), or it ended meanwhile: either way it is not live for long.
        Ok(())
    }

    /// Whether a process was ever killed (see the worker's debug check).
    pub(crate) fn killed_any(&self) -> bool {
        self.flags.killed_any.load(Ordering::Relaxed)
    }

    // ---- results --------------------------------------------------------------

    /// Claims `pid`'s result for `waiter` (called exactly once, see
    /// [`ProcessCell::claim_result`]).
    pub(crate) fn claim_result(&self, pid: Pid, waiter: ResultWaiter) {
        match self.registry.get(pid) {
            Some(cell) => {
                if cell.claim_result(waiter) {
                    self.registry.remove(pid, worker::caller(self));
                }
            }
            // Issued but gone from the table: its result was handed out already, or
            // it was detached and has finished.
            None if self.registry.issued(pid) => waiter.answer(Err(JoinError::AlreadyClaimed(pid))),
            None => waiter.answer(Err(JoinError::NoSuchProcess(pid))),
        }
    }

    /// Blocks the calling thread until `pid` finishes (or `timeout` runs out).
    pub(crate) fn wait(&self, pid: Pid, timeout: Option<Duration>) -> Result<Payload, JoinError> {
        assert!(
            !clock::on_simulation_thread() || self.live_cell(pid).is_err(),
            "wsched: Handle::wait was called on the thread that runs a simulation for a \
             process that has not ended, which nothing would run while it blocks; use \
             Simulation::wait instead"
        );
        let slot = Arc::new(OneShot::default());
        let filler = Filler {
            pid,
            slot: Some(slot.clone()),
        };
        self.claim_result(pid, ResultWaiter::Wait(filler));
        let Some(timeout) = timeout else {
            return slot.take();
        };
        if let Some(result) = slot.take_until(clock::now() + timeout) {
            return result;
        }
        // Timed out: withdraw the claim, unless the result is being handed over
        // right now, in which case it arrives at once.
        let withdrawn = self
            .registry
            .get(pid)
            .is_some_and(|cell| cell.withdraw_waiter());
        if withdrawn {
            Err(JoinError::TimedOut(pid))
        } else {
            slot.take()
        }
    }

    // ---- ending processes -----------------------------------------------------

    /// Ends the process `owned` refers to: closes its mailbox, calls `close` (a panic
    /// there turns the result into an error), publishes the result, then — once
    /// monitors or links are in use — tells its watchers and links.
    pub(crate) fn finish(&self, owned: Owned<'_>, result: Result<Payload, ProcessError>) {
        if let Some(ended) = self.end(owned, result) {
            self.tell_watchers(ended);
        }
    }

    /// All of [`finish`](Self::finish) but telling the watchers: `Some` (the PID and
    /// its reason) when that is still to do.
    #[inline]
    fn end(
        &self,
        mut owned: Owned<'_>,
        mut result: Result<Payload, ProcessError>,
    ) -> Option<Ended> {
        // Until the end is counted, this thread holds up a shutdown: what the end
        // drops (the body, unread messages) may hold the last `Scheduler`.
        let _ending = EndingHere::enter();
        let leftovers = owned.close_mailbox();
        // Read after the mailbox is closed, which orders it against a monitor or a
        // link being set (see `monitors.rs`). One relaxed load until then.
        let watched = <Layers as Hooks>::watched(self);
        if let Err(message) = owned.close_body() {
            result = Err(ProcessError::Panicked {
                phase: Phase::Close,
                message,
            });
        }
        // Unread messages are dead letters (after those the body's `close` handed
        // over, which arrived first); the hand-off drops other events quietly. One
        // branch on the (usually empty, never allocated) leftovers.
        if !leftovers.is_empty() {
            self.dead_letters.leftovers(owned.cell().pid(), leftovers);
        }

        // Release the process's pending timers now, not at their deadlines, and
        // abort its work in flight, before its result is published; processes
        // with neither skip the layers.
        if hooks::may_have_pending(owned.cell()) {
            <Layers as Hooks>::release_pending(self, owned.cell());
        }
        if watched {
            return Some(self.end_watched(owned, result));
        }
        if let Some(report) = self.publish(owned, result, true) {
            self.unobserved.report(report);
        }
        None
    }

    /// Counts the end and publishes the result, then frees the names. With
    /// `unwatched` (nobody monitors or links to anything), returns the report of a
    /// failed detached process, nobody's to observe (see `unobserved.rs`): worked out
    /// in the branch that counts a failure, so a process that finishes pays nothing.
    /// Inlined into `end` (LLVM left it out of line): the result and the report
    /// were copied through memory for the call.
    #[inline(always)]
    fn publish(
        &self,
        owned: Owned<'_>,
        result: Result<Payload, ProcessError>,
        unwatched: bool,
    ) -> Option<FailureReport> {
        <Layers as Instrument>::exited(&owned, &result);
        let mut report = None;
        let event = match &result {
            Ok(_) => ProcessEvent::Finished,
            Err(ProcessError::Stopped) => {
                // Shutdown's report lists its own stops, not earlier kills.
                if self.is_stopping() {
                    self.stopped.lock().push(owned.cell().pid());
                }
                ProcessEvent::Stopped
            }
            Err(error) => {
                if unwatched && owned.cell().is_detached() {
                    report = failure_report(owned.cell(), &ExitReason::from(error));
                }
                ProcessEvent::Failed
            }
        };
        // Counted as ended before the result is published, so whoever receives the
        // result sees consistent metrics.
        let caller = worker::caller(self);
        self.count(caller, event);
        self.live.end(caller);
        let pid = owned.cell().pid();
        if owned.finish(result) {
            self.registry.remove(pid, caller);
        }
        // Its names, after the result is published (which orders this against a
        // registration racing the end: see `names.rs`).
        <Layers as Hooks>::released(self, pid);
        self.held.forget(pid);
        report
    }

    /// [`publish`](Self::publish) once monitors or links are in use: a stop decided
    /// by a link is reported as such, and the reason is worked out before the result
    /// is handed out. Out of line: the end of a scheduler that never monitored or
    /// linked does not carry it.
    #[inline(never)]
    fn end_watched(&self, owned: Owned<'_>, mut result: Result<Payload, ProcessError>) -> Ended {
        let pid = owned.cell().pid();
        // Once shutdown stops everything, a stop is shutdown's (and listed in its
        // report) whatever a link decided meanwhile.
        if matches!(result, Err(ProcessError::Stopped)) && !self.is_stopping() {
            if let Some(linked) = <Layers as Hooks>::take_kill(self, pid) {
                result = Err(linked);
            }
        }
        let reason = ExitReason::of(&result);
        let failure = if !is_failure(&reason) {
            None
        } else if owned.cell().is_detached() {
            failure_report(owned.cell(), &reason).map(Failure::Detached)
        } else {
            Some(Failure::Joinable)
        };
        self.publish(owned, result, false);
        Ended {
            pid,
            reason,
            failure,
        }
    }

    /// Tells the watchers and links of the end `ended`, then stops the processes its
    /// links take down with it — in a loop, not by recursion, however long the chain.
    #[inline(never)]
    fn tell_watchers(&self, ended: Ended) {
        let mut kills = Vec::new();
        self.tell_watchers_of(ended, &mut kills);
        self.stop_linked(kills);
    }

    /// Sends the `Down`s and link signals of one end (adding to `kills` whom its
    /// links take down), then reports its failure if nobody observed it.
    fn tell_watchers_of(&self, ended: Ended, kills: &mut Vec<CellRef>) {
        let observed = <Layers as Hooks>::tell_watchers(self, ended.pid, &ended.reason, kills);
        match (observed, ended.failure) {
            (false, Some(Failure::Detached(report))) => self.unobserved.report(report),
            (true, Some(Failure::Joinable)) => {
                // Still unclaimed (a join may have taken it meanwhile: then nothing).
                if let Some(cell) = self.registry.get(ended.pid) {
                    cell.mark_observed();
                }
            }
            _ => {}
        }
    }

    /// Stops the processes in `kills` (and those their ends add), whom a link's
    /// failure takes down (see `links.rs`).
    pub(crate) fn stop_linked(&self, mut kills: Vec<CellRef>) {
        while let Some(cell) = kills.pop() {
            let Some(owned) = cell.request_stop() else {
                // Running: flagged, its worker ends it when its step returns. Or done.
                continue;
            };
            if let Some(ended) = self.end(owned, Err(ProcessError::Stopped)) {
                self.tell_watchers_of(ended, &mut kills);
            }
        }
    }

    // ---- lifecycle ------------------------------------------------------------

    pub(crate) fn is_stopping(&self) -> bool {
        self.flags.stopping.load(Ordering::SeqCst)
    }

    pub(crate) fn is_terminated(&self) -> bool {
        self.flags.terminated.load(Ordering::SeqCst)
    }

    pub(crate) fn live(&self) -> usize {
        self.live.get()
    }

    /// Stops accepting spawns. Returns false if that had already happened. Every
    /// spawn that got past the check is counted in `live` once this returns (see
    /// `spawn`).
    pub(crate) fn stop_accepting(&self) -> bool {
        let was = self.flags.accepting.swap(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        was
    }

    /// Sends a cancel to every live process but the children of live supervisors;
    /// returns how many it cancelled.
    ///
    /// A supervisor stops its children itself when it is cancelled: one at a time,
    /// in reverse start order, each given its shutdown timeout (OTP's order when an
    /// application stops). Cancelling them here too would stop them all at once and
    /// cancel each twice. A child whose supervisor has ended (one that trapped the
    /// link's exit and lived on) has nobody to stop it, and is cancelled here.
    pub(crate) fn cancel_all(&self) -> usize {
        let mut cancelled = 0;
        for cell in self.registry.cells() {
            if cell.is_supervised() && self.supervisor_lives(&cell) {
                continue;
            }
            if self.deliver(&cell, Event::Cancel).is_ok() {
                cancelled += 1;
            }
        }
        cancelled
    }

    /// Whether the supervisor of the supervised process `cell` has not ended.
    fn supervisor_lives(&self, cell: &CellRef) -> bool {
        cell.parent()
            .and_then(|parent| self.registry.get(parent))
            .is_some_and(|supervisor| !supervisor.is_done())
    }

    /// Waits until no process is live or `deadline` passes; true if none is live.
    pub(crate) fn wait_all_done(&self, deadline: Instant) -> bool {
        self.live.wait_zero(deadline)
    }

    /// Stops every process still live: those nobody is stepping (waiting, or READY in
    /// a queue) here, those mid-step by their worker when the step returns (see
    /// `State::request_stop`). Returns the PIDs stopped.
    ///
    /// One sweep reaches every registered process, and a spawn that registers after
    /// it stops its process itself (see `spawn`), so afterwards this only waits for
    /// steps (and spawns inside `init`) to return: it is bounded by user code that is
    /// running right now. The periodic re-sweep is a safety net, not the mechanism.
    pub(crate) fn stop_all(&self) -> Vec<Pid> {
        self.flags.stopping.store(true, Ordering::SeqCst);
        loop {
            for cell in self.registry.cells() {
                if let Some(owned) = cell.request_stop() {
                    self.finish(owned, Err(ProcessError::Stopped));
                }
            }
            if self.wait_all_done(clock::now() + Duration::from_millis(10)) {
                break;
            }
        }
        let mut stopped = std::mem::take(&mut *self.stopped.lock());
        stopped.sort_unstable();
        stopped
    }

    /// Tells the workers to exit and wakes them all.
    pub(crate) fn terminate(&self) {
        self.flags.terminated.store(true, Ordering::SeqCst);
        self.idle.unpark_all();
    }

    /// Drops everything the scheduler still holds after its threads stopped.
    pub(crate) fn release(&self) {
        <Layers as Hooks>::release(self);
        drop(self.inject.drain_all());
    }

    /// Forgets all cells (the scheduler is being dropped), first reporting the
    /// failures of joinable processes whose results nobody claimed (see
    /// `unobserved.rs`).
    pub(crate) fn clear_registry(&self) {
        for cell in self.registry.cells() {
            let Some(error) = cell.take_unclaimed_error() else {
                continue;
            };
            let reason = ExitReason::from(&error);
            drop_quietly(error);
            if is_failure(&reason) {
                self.unobserved.report(FailureReport {
                    pid: cell.pid(),
                    entry: cell.entry().to_owned(),
                    process_type: cell.process_type(),
                    reason,
                    unclaimed: true,
                });
            }
        }
        self.registry.clear();
    }
}

std::thread_local! {
    /// How many process ends this thread is in the middle of (see [`EndingHere`]).
    static ENDING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Marks this thread as ending a process, from before it drops anything of the
/// process until its end is counted. A `Scheduler` dropped meanwhile on this thread
/// (a process's body or message owned the last one) must not wait here for the
/// processes to end: this one cannot, until the drop returns (see
/// `Scheduler::drop`).
struct EndingHere;

impl EndingHere {
    #[inline]
    fn enter() -> Self {
        // A thread whose thread-locals are gone ends no process: workers never get
        // there, and an outside thread's end then simply is not marked.
        let _ = ENDING.try_with(|n| n.set(n.get() + 1));
        Self
    }
}

impl Drop for EndingHere {
    #[inline]
    fn drop(&mut self) {
        let _ = ENDING.try_with(|n| n.set(n.get() - 1));
    }
}

/// Whether this thread is in the middle of ending a process (see [`EndingHere`]).
pub(crate) fn ending_a_process_here() -> bool {
    ENDING.try_with(|n| n.get() > 0).unwrap_or(false)
}

/// The report of a process that ended for `reason`, if it is a detached one that
/// failed: joinable processes keep their results for whoever joins them.
fn failure_report(cell: &ProcessCell, reason: &ExitReason) -> Option<FailureReport> {
    (cell.is_detached() && is_failure(reason)).then(|| FailureReport {
        pid: cell.pid(),
        entry: cell.entry().to_owned(),
        process_type: cell.process_type(),
        reason: reason.clone(),
        unclaimed: false,
    })
}

/// A result handed from whichever thread ends a process to a thread blocked in
/// [`Shared::wait`].
/// The waiting side's end of a [`OneShot`]: fills it once. Dropped unfilled (the
/// scheduler forgot the claim, e.g. its PID table was cleared), it fills the slot
/// with "stopped" so that no `wait` blocks forever.
pub(crate) struct Filler {
    pid: Pid,
    slot: Option<Arc<OneShot>>,
}

impl Filler {
    pub(crate) fn fill(mut self, result: Result<Payload, JoinError>) {
        if let Some(slot) = self.slot.take() {
            slot.fill(result);
        }
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.fill(Err(JoinError::Failed {
                pid: self.pid,
                error: ProcessError::Stopped,
            }));
        }
    }
}

#[derive(Default)]
struct OneShot {
    result: Mutex<Option<Result<Payload, JoinError>>>,
    filled: Condvar,
}

impl OneShot {
    fn fill(&self, result: Result<Payload, JoinError>) {
        *self.result.lock() = Some(result);
        self.filled.notify_all();
    }

    fn take(&self) -> Result<Payload, JoinError> {
        let mut result = self.result.lock();
        loop {
            if let Some(result) = result.take() {
                return result;
            }
            self.filled.wait(&mut result);
        }
    }

    fn take_until(&self, deadline: Instant) -> Option<Result<Payload, JoinError>> {
        let mut result = self.result.lock();
        while result.is_none() {
            if self.filled.wait_until(&mut result, deadline).timed_out() {
                break;
            }
        }
        result.take()
    }
}
