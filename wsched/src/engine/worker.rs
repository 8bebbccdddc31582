//! The worker loop: find work, step it, dispatch its yields, park when idle.
//!
//! Work is found in this order:
//!
//! 1. every 61st round, the global queue first, so it cannot starve;
//! 2. the LIFO slot: the process most recently woken by this worker (cache-warm; a
//!    ping-pong pair runs back to back), at most [`MAX_LIFO_STREAK`] times in a row;
//!    see `queue/lifo.rs`;
//! 3. the worker's own deque;
//! 4. the global queue, taking a batch into the deque;
//! 5. stealing half of another worker's deque, victims visited in a random order
//!    that reaches each once (a random start and a random stride coprime with the
//!    number of workers, as Go does);
//! 6. stealing another worker's LIFO slot, but only from a worker that has been in
//!    the same step for a grace period ([`LIFO_STEAL_GRACE`]): a short step is about
//!    to end and its worker runs the woken process itself, cache-warm; a long step
//!    must not strand it while this worker idles.
//!
//! Finding nothing, the worker spins (rounds 1–3), yields its thread once (round 4),
//! then parks (5 on) through the handshake in `idle.rs`; a worker that is not
//! searching while another is skips the yielding (see [`leave_to_searcher`]). While another worker is awake
//! (or its LIFO slot is occupied) it parks with a timeout instead, to come back and
//! look (see "Watching LIFO slots" in `idle.rs`): filling an empty LIFO slot from
//! inside a step then wakes nobody, where a wake-up per message cost a system call
//! and kept a second core busy finding nothing in every ping-pong.
//!
//! A worker also keeps what makes its processes' operations cheaper without sharing
//! anything: the counts of the scheduler's handle that cells it destroyed held, for
//! the cells it makes ([`lend_handle`]; in the scheduler's state, one slot per
//! worker), and the cells of the processes its steps send to often, so that a send
//! skips the PID table's lock ([`with_destination`]). When a step
//! leaves its process waiting, the worker's reference to the cell stays with the
//! process (see "The waiting reference" in `state.rs`).
//!
//! A worker survives anything the code it runs does: user code runs under
//! `catch_unwind`, user values are dropped with `drop_quietly`, and as a last line of
//! defence a panic escaping a step's bookkeeping is caught here and ends only the
//! process being stepped (reclaimed through its orphan mark, see `state.rs`).

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::rc::Rc;
use std::time::Duration;

use crate::engine::cell::{Owned, RefStock};
use crate::engine::completion::dispatch_direct;
use crate::engine::handle::Handle;
use crate::engine::hooks::{self, Hooks, Instrument, Layers};
use crate::engine::idle::Unregister;
use crate::engine::process::{drop_all_quietly, drop_quietly, panic_message};
use crate::engine::process::{Event, Events, Status, StepOutput};
use crate::engine::queue::lifo::LifoSlot;
use crate::engine::queue::local::Local;
use crate::engine::random::{RandomSource, WorkerRandom};
use crate::engine::shared::{Shared, Task};
use crate::engine::state::Suspend;
use crate::error::{Phase, ProcessError, StepError};
use crate::pid::Pid;
use crate::sync::{spin_loop, thread};

/// How often the global queue is checked first (Go's figure).
const GLOBAL_CHECK_INTERVAL: u32 = 61;
/// How many times in a row a process whose yields were completed at once is stepped
/// again without going back to a queue (tokio gives a task a budget of 128 units).
const RESTEP_BUDGET: u32 = 32;
/// How many times in a row the LIFO slot may be used before its process goes to the
/// back of the deque, so two processes waking each other cannot starve the rest.
const MAX_LIFO_STREAK: u8 = 3;
/// Idle rounds spent spinning, then yielding the thread, before parking (fewer under
/// loom, whose models explore every one of them). One round of yielding: with twelve,
/// a worker sharing its core with another process (a busy host) kept taking the
/// core back from the worker with work, and a process spawning 10,000 children took
/// 1.2 times as long (the suite's contended `spawn_many_inside`); with none, a
/// worker parked before the next piece of a fan-out arrived and the fan-out took
/// 1.8 times as long. Quiet machines see no difference either way.
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 4;
#[cfg(not(loom))]
const YIELD_ROUNDS: u32 = 5;
#[cfg(loom)]
const SPIN_ROUNDS: u32 = 1;
#[cfg(loom)]
const YIELD_ROUNDS: u32 = 2;
/// How long a worker that watches other workers' LIFO slots sleeps at first, and at
/// most: it doubles the timeout each time it wakes to find nothing (Go's `sysmon`
/// backs off from 20 µs to 10 ms the same way), and starts over once it runs a
/// process. So a process stranded behind a long step waits at most a few
/// milliseconds, and a busy scheduler's watcher wakes a few hundred times a second.
const WATCH_FIRST: Duration = Duration::from_micros(50);
const WATCH_MAX: Duration = Duration::from_millis(5);
/// How long (in spin-loop hints, a few microseconds) a thief watches a victim's step
/// counter before it may take the victim's LIFO slot: Go waits ~3 µs before taking a
/// running P's `runnext`. Ping-pong steps take well under that.
#[cfg(not(loom))]
pub(crate) const LIFO_STEAL_GRACE: u32 = 2_000;
#[cfg(loom)]
pub(crate) const LIFO_STEAL_GRACE: u32 = 1;
/// How many spins of the grace period pass between two looks at the victim.
#[cfg(not(loom))]
const LIFO_WATCH_EVERY: u32 = 50;
#[cfg(loom)]
const LIFO_WATCH_EVERY: u32 = 1;

/// The worker's private state, reachable from its thread-local so that processes
/// woken or spawned on this thread go to this worker's queues.
struct Core {
    index: usize,
    local: Local<Task>,
    lifo_streak: u8,
    /// With step timing on: whether the process in the LIFO slot was woken into it
    /// by a step of this worker, and that for the process `find_task` just took
    /// from the slot (see `timing.rs`).
    lifo_woken: bool,
    taken_woken: bool,
    tick: u32,
    searching: bool,
    rng: WorkerRandom,
    /// The strides that visit every victim once (computed once: searching runs
    /// often, and this was a fresh `Vec` per search).
    strides: Box<[usize]>,
}

/// What a worker keeps in its thread's `CURRENT` (see `with_current`).
struct Current {
    shared: *const Shared,
    /// The worker's index, readable while `core` is borrowed.
    index: usize,
    core: Rc<RefCell<Core>>,
    /// The processes this worker's steps send to (see [`with_destination`]).
    destinations: RefCell<Destinations>,
}

impl Drop for Current {
    /// A thread that ends without `leave` (unwinding) drops this from `CURRENT`'s
    /// destructor: `CURRENT_PTR` must not point to it any more.
    fn drop(&mut self) {
        let _ = CURRENT_PTR.try_with(|ptr| ptr.set(ptr::null()));
    }
}

/// Entries in a worker's [`Destinations`].
const DESTINATIONS: usize = 64;

/// The processes a worker's steps sent to lately, by PID (direct-mapped), so that a
/// send finds its destination's cell without the PID table's shard lock. That lock
/// cost two locked instructions a send, a tenth of a ping-pong round trip, and when
/// many processes reply to one (fan-in) both workers wrote its shard's line.
///
/// An entry holds a cell (a reference) only from the second send in a row to its
/// PID, as the entry sees them: a process sent to once costs no reference count,
/// and sends spread over more processes than there are entries (a ring of a
/// thousand) do not churn the held cells. A held cell's PID is its for ever (PIDs
/// are never reused), so an entry needs no invalidation: a send to a process that has
/// ended finds its mailbox closed, as through the table. What an entry holds after
/// its process ended is a cell's memory (the process itself was dropped when it
/// ended), until another PID takes the entry or the worker exits.
struct Destinations {
    entries: Box<[Destination; DESTINATIONS]>,
}

#[derive(Default)]
struct Destination {
    /// The PID of the last send through this entry that did not find its cell here.
    seen: Option<Pid>,
    held: Option<(Pid, Task)>,
}

impl Destinations {
    fn new() -> Self {
        Self {
            entries: Box::new(std::array::from_fn(|_| Destination::default())),
        }
    }

    /// The entry for `pid`: the top bits of a Fibonacci hash of the whole PID. Its
    /// low bits alone would not do: processes in one shard of the PID table share
    /// them, and a process and the one it spawned often are in one shard.
    #[inline]
    fn entry_of(pid: Pid) -> usize {
        const SHIFT: u32 = u64::BITS - DESTINATIONS.trailing_zeros();
        (pid.as_u64().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> SHIFT) as usize
    }
}

/// Runs `f` on the cell of `pid`, if the PID table has it: through this worker's
/// [`Destinations`] on a worker of `shared`, else under the table's shard lock. `f`
/// must be short and must not send.
#[inline]
pub(crate) fn with_destination<R>(
    shared: &Shared,
    pid: Pid,
    f: impl FnOnce(&Task) -> R,
) -> Option<R> {
    let mut f = Some(f);
    let cached = with_current(shared, |current| {
        let mut destinations = current.destinations.try_borrow_mut().ok()?;
        let entry = &mut destinations.entries[Destinations::entry_of(pid)];
        let f = f.take().expect("taken once");
        if let Some((held, cell)) = &entry.held {
            if *held == pid {
                return Some(Some(f(cell)));
            }
        }
        if entry.seen != Some(pid) {
            entry.seen = Some(pid);
            return Some(shared.with_cell(pid, f));
        }
        // The second send in a row: hold the cell.
        let Some(cell) = shared.cell_of(pid) else {
            return Some(None);
        };
        let result = f(&cell);
        entry.seen = None;
        let old = entry.held.replace((pid, cell));
        drop(destinations);
        // Dropped outside the borrow: it may be a cell's last reference.
        drop(old);
        Some(Some(result))
    });
    match cached.flatten() {
        Some(result) => result,
        None => shared.with_cell(pid, f.take()?),
    }
}

/// A handle to `handle`'s scheduler for a new cell made by `caller`: on a worker, a
/// count it kept from a cell it destroyed or took from the parked ones, else a
/// clone (see `KeptHandles`). Every lent handle is a real count: a cell that moves
/// to another thread owns its own.
#[inline]
pub(crate) fn lend_handle(handle: &Handle, caller: Caller) -> Handle {
    match caller {
        Caller::Worker(index) => {
            let shared = handle.shared();
            // SAFETY: `caller` is `Caller::Worker(index)` only on the thread of
            // worker `index` of `handle`'s scheduler (see `caller`).
            unsafe {
                shared
                    .kept_handles
                    .lend(index, handle, &shared.parked_handles)
            }
        }
        Caller::Outside => handle.clone(),
    }
}

/// Takes back the handle of a cell that was destroyed: kept for [`lend_handle`] on
/// a worker of its scheduler, dropped elsewhere (also on a worker whose state is
/// being set up or taken down, which [`caller`] calls outside).
#[inline]
pub(crate) fn keep_handle(handle: Handle) {
    let Caller::Worker(index) = caller(handle.shared()) else {
        return drop(handle);
    };
    // Its count goes to the worker's kept ones.
    let handle = std::mem::ManuallyDrop::new(handle);
    let shared = handle.shared();
    // SAFETY: this is the thread of worker `index` of `handle`'s scheduler (see
    // `caller`), and the count handed over is the forgotten `handle`'s.
    unsafe { shared.kept_handles.keep(index, &shared.parked_handles) }
}

/// Which thread is calling into the scheduler: one of its workers (by index), or any
/// other thread. Per-worker state (counts written without locked instructions, the
/// worker's own shards of the PID table) is chosen by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// Worker `n` of this scheduler: only that worker's thread is this caller.
    Worker(usize),
    /// A thread that is not one of this scheduler's workers.
    Outside,
}

/// Who is calling into `shared`. A thread whose thread-local is gone (a call from
/// another thread-local's destructor) is outside: workers never get there.
#[inline]
pub(crate) fn caller(shared: &Shared) -> Caller {
    with_current(shared, |current| Caller::Worker(current.index)).unwrap_or(Caller::Outside)
}

#[cfg(not(loom))]
thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
    /// The `Current` in `CURRENT` while it is set, null while it is being set or
    /// taken (see `with_current`). No destructor: an access is a TLS offset.
    static CURRENT_PTR: Cell<*const Current> = const { Cell::new(ptr::null()) };
}
// loom runs its threads on one OS thread: thread-locals must be its own.
#[cfg(loom)]
loom::thread_local! {
    static CURRENT: RefCell<Option<Current>> = RefCell::new(None);
    static CURRENT_PTR: Cell<*const Current> = Cell::new(ptr::null());
}

/// Runs `f` on this thread's worker state if the thread is one of `shared`'s
/// workers. Through `CURRENT_PTR`, not `CURRENT`: every spawn, send, schedule and
/// end asks, and `CURRENT`'s `try_with` (a check of the thread-local's state) and
/// `RefCell` borrow cost ~7 instructions an ask.
#[inline]
fn with_current<R>(shared: &Shared, f: impl FnOnce(&Current) -> R) -> Option<R> {
    // `try_with`: a call from another thread-local's destructor, after this one is
    // gone (never on a worker), is outside. Without a destructor it never is gone
    // outside loom, and the check folds away.
    let current = CURRENT_PTR.try_with(Cell::get).unwrap_or(ptr::null());
    // SAFETY: a non-null pointer is the `Current` that `CURRENT` holds on this
    // thread: `Worker::new` sets it once `CURRENT` is filled, and `leave` (or the
    // `Current`'s drop, if the thread ends without it) clears it before `CURRENT`
    // is emptied. Only those two borrow `CURRENT` mutably, so the `Current` is
    // neither moved nor replaced while `f` holds this shared reference (what it
    // changes, it changes through its own `RefCell`s).
    let current = unsafe { current.as_ref() }?;
    std::ptr::eq(current.shared, shared).then(|| f(current))
}

/// Whether the calling thread is a worker of any scheduler (and not in its
/// thread-locals' destructors).
pub(crate) fn on_a_worker() -> bool {
    CURRENT
        .try_with(|current| current.try_borrow().map_or(true, |c| c.is_some()))
        .unwrap_or(false)
}

/// Whether the calling thread is one of `shared`'s workers.
pub(crate) fn is_worker_of(shared: &Shared) -> bool {
    caller(shared) != Caller::Outside
}

/// Runs `f` with this thread's worker core if the thread is one of `shared`'s
/// workers and the core is not borrowed (it never is while a process runs).
fn with_core<R>(shared: &Shared, f: impl FnOnce(&mut Core) -> R) -> Option<R> {
    with_current(shared, |current| {
        let mut core = current.core.try_borrow_mut().ok()?;
        Some(f(&mut core))
    })
    .flatten()
}

/// Queues a newly spawned process: into this worker's LIFO slot if spawned by one
/// of `shared`'s workers, else on the global queue. Like Go's new goroutines, the
/// child runs next, where its spawner just wrote its cell and arguments (a
/// spawner's earlier child moves from the slot to the back of the deque, so a burst
/// of spawns keeps its order but the last); other workers may still take it.
pub(crate) fn schedule_new(shared: &Shared, task: Task) {
    schedule(shared, task, Placement::Lifo);
}

/// Queues a process woken by an event: into this worker's LIFO slot when woken from
/// one of `shared`'s workers (it likely shares this cache), else the global queue.
/// The waker's step may go on for long, so other workers may have to take it: see
/// the module docs.
pub(crate) fn schedule_woken(shared: &Shared, task: Task) {
    schedule(shared, task, Placement::Lifo);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Woken by another process's step: run next here, unless the step runs long.
    Lifo,
    /// Woken during its own step (e.g. a handler completed at once): this worker
    /// runs it right away, nobody else needs to know.
    LifoAfterStep,
    Back,
}

fn schedule(shared: &Shared, task: Task, placement: Placement) {
    let mut task = Some(task);
    let pushed = with_core(shared, |core| {
        let task = task.take().expect("taken once");
        <Layers as Instrument>::runnable(shared, core.index, task.pid());
        if <Layers as Instrument>::timing_steps(shared) {
            // Its own step again, or not into the slot: nothing to measure.
            core.lifo_woken = placement == Placement::Lifo;
        }
        match placement {
            Placement::Lifo | Placement::LifoAfterStep => {
                if let Some(previous) = shared.lifo(core.index).put(task) {
                    core.push_back(shared, previous);
                    return Pushed::Deque;
                }
                if placement == Placement::Lifo {
                    Pushed::LifoDuringStep
                } else {
                    Pushed::LifoAfterStep
                }
            }
            Placement::Back => {
                core.push_back(shared, task);
                Pushed::Deque
            }
        }
    });
    match (pushed, task) {
        // Work others may take was added: maybe wake one.
        (Some(Pushed::Deque), _) => {
            shared.idle.notify_one();
        }
        // Only the LIFO slot changed, during a step that may run long: wake a worker
        // only if none will look at the slot (see "Watching LIFO slots" in idle.rs).
        (Some(Pushed::LifoDuringStep), _) => {
            shared.idle.notify_lifo_filled();
        }
        // Only the LIFO slot changed, at the end of a step: this worker runs it next.
        (Some(Pushed::LifoAfterStep), _) => {}
        (None, Some(task)) => {
            <Layers as Instrument>::runnable_outside(shared, task.pid());
            shared.inject.push_remote(task);
            shared.idle.notify_one();
        }
        (None, None) => unreachable!("the closure did not run, so it did not take the task"),
    }
}

/// Where `schedule` put a process.
enum Pushed {
    /// Into the deque (perhaps moving the LIFO slot's previous process there).
    Deque,
    /// Into the empty LIFO slot, from inside another process's step.
    LifoDuringStep,
    /// Into the empty LIFO slot, at the end of the step of the process itself.
    LifoAfterStep,
}

/// One worker, set up on the thread that drives it: what a [`Driver`] runs (see
/// `driver.rs`). [`run`] drives it as a worker thread does; a driver of its own
/// (a simulation's) may call [`run_next`](Self::run_next) as it likes instead.
///
/// [`Driver`]: crate::engine::driver::Driver
pub(crate) struct Worker {
    handle: Handle,
    index: usize,
    core: Rc<RefCell<Core>>,
    /// The step's events and output, kept from step to step for their capacity.
    events: Vec<Event>,
    out: StepOutput,
}

impl Worker {
    /// Sets worker `index` (its deque `local`) up on the calling thread.
    pub(crate) fn enter(handle: Handle, index: usize, local: Local<Task>) -> Self {
        let shared: &Shared = handle.shared();
        let core = Rc::new(RefCell::new(Core {
            index,
            local,
            lifo_streak: 0,
            lifo_woken: false,
            taken_woken: false,
            tick: 0,
            searching: false,
            rng: WorkerRandom::seeded(shared.seed.wrapping_add(index as u64)),
            strides: coprimes(shared.stealers.len()).into_boxed_slice(),
        }));
        crate::engine::cell::keep_blocks_on_this_thread();
        CURRENT.with(|current| {
            *current.borrow_mut() = Some(Current {
                shared,
                index,
                core: core.clone(),
                destinations: RefCell::new(Destinations::new()),
            });
            // Once filled, no longer borrowed: see `with_current`.
            let filled = current.borrow().as_ref().map_or(ptr::null(), ptr::from_ref);
            CURRENT_PTR.with(|ptr| ptr.set(filled));
        });
        shared.counters[index].busy.wake(shared.clock.start());
        shared.clock.refresh();
        Self {
            handle,
            index,
            core,
            events: Vec::new(),
            out: StepOutput::new(),
        }
    }

    fn shared(&self) -> &Shared {
        self.handle.shared()
    }

    /// Runs the next process this worker finds (its LIFO slot, its deque, the global
    /// queue, a steal), if it finds one: one turn of the worker loop. Returns
    /// whether it ran one.
    #[inline]
    pub(crate) fn run_next(&mut self) -> bool {
        let shared = self.handle.shared();
        let Some(task) = self.core.borrow_mut().next_task(shared) else {
            return false;
        };
        self.step(task);
        true
    }

    /// Steps `task`, a process this worker took from a queue (a simulation's
    /// driver takes them with [`take_runnable`](Self::take_runnable)).
    #[inline]
    pub(crate) fn step(&mut self, task: Task) {
        let shared = self.handle.shared();
        let index = self.index;
        shared.counters[index].steps.add(1);
        // `run_task` takes the task out only to requeue it (moving the reference
        // count into the queue instead of cloning it); until then it is here for
        // `recover`.
        let mut slot = Some(task);
        let woken = <Layers as Instrument>::timing_steps(shared) && self.core.borrow().taken_woken;
        let (events, out) = (&mut self.events, &mut self.out);
        let stepped = catch_unwind(AssertUnwindSafe(|| {
            run_task(&self.handle, index, woken, &mut slot, events, out);
        }));
        if let (Err(panic), Some(task)) = (stepped, &slot) {
            recover(shared, task, &*panic, &mut self.events, &mut self.out);
        }
        // Replies dropped while the run unwound answer now that a panic that ended
        // the process has ended it (see `services/calls.rs`).
        <Layers as Hooks>::after_run();
    }

    /// Moves every process runnable on this worker's queues into `into`: its LIFO
    /// slot, then its deque, then the global queue. A simulation's driver, the only
    /// worker of its scheduler, chooses among them itself.
    #[cfg(feature = "sim")]
    pub(crate) fn take_runnable(&mut self, into: &mut Vec<Task>) {
        let shared = self.handle.shared();
        let mut core = self.core.borrow_mut();
        into.extend(shared.lifo(self.index).take());
        while let Some(task) = core.local.pop() {
            into.push(task);
        }
        while let Some(task) = shared.inject.pop() {
            into.push(task);
        }
    }

    /// Whether this worker's deque holds a process.
    #[cfg(feature = "sim")]
    pub(crate) fn has_local(&self) -> bool {
        self.core.borrow().local.has_tasks()
    }

    /// Takes the worker off its thread, once the scheduler has terminated.
    pub(crate) fn leave(self) {
        <Layers as Hooks>::after_run();
        // Taken out before it is dropped: dropping it may destroy cells (the
        // destinations it holds), which look at this thread-local.
        CURRENT_PTR.with(|ptr| ptr.set(ptr::null()));
        let current = CURRENT.with(|current| current.borrow_mut().take());
        drop(current);
        // What this worker kept, and what was parked, goes back now that it can keep
        // and park no more; the last worker to leave gives back what the others
        // parked meanwhile.
        let shared = self.handle.shared();
        // SAFETY: this is worker `self.index`'s thread, no longer in the
        // thread-local, so it keeps nothing after this.
        unsafe { shared.kept_handles.give_back(self.index, &self.handle) };
        shared.parked_handles.give_back(&self.handle);
        // All processes have ended before workers are told to exit, so queues hold
        // only processes shutdown already stopped; drop them outside the
        // thread-local.
        drop(shared.lifo(self.index).take());
        let mut core = self.core.borrow_mut();
        while core.local.pop().is_some() {}
    }
}

/// The body of worker thread `index`: runs processes until the scheduler
/// terminates, spinning, then yielding, then parking when there is nothing to run.
pub(crate) fn run(handle: Handle, index: usize, local: Local<Task>) {
    let mut worker = Worker::enter(handle, index, local);
    let mut idle_rounds = 0u32;
    // Set when a producer woke this worker from a park, cleared by the next step: a
    // wake-up that finds nothing to run is counted as a no-op wake when it parks
    // again.
    let mut woken = false;
    // The timeout of the next sleep spent watching LIFO slots (see `park`): a local,
    // as it is reset after every task.
    let mut watch = WATCH_FIRST;
    while !worker.shared().is_terminated() {
        if worker.run_next() {
            idle_rounds = 0;
            woken = false;
            watch = WATCH_FIRST;
            continue;
        }
        let shared = worker.shared();
        if idle_rounds == 0 {
            <Layers as Instrument>::idle(shared, index);
        }
        idle_rounds += 1;
        if idle_rounds < SPIN_ROUNDS {
            for _ in 0..(1 << idle_rounds) {
                spin_loop();
            }
        } else if idle_rounds < YIELD_ROUNDS && !leave_to_searcher(shared, &worker.core) {
            thread::yield_now();
        } else if park(shared, &worker.core, &mut watch, &mut woken) != Parked::TimedOut {
            idle_rounds = 0;
        } else {
            // Back from watching: one search (which takes a stranded LIFO process),
            // and if it finds nothing, straight back to sleep.
            idle_rounds = YIELD_ROUNDS - 1;
        }
    }
    worker.leave();
}

/// Whether an idle worker should skip its rounds of yielding and go to sleep: it
/// is not searching (it may not steal) while another worker is, so its rounds would
/// only look at the queues the searcher looks at, on a core that the thread making
/// the work may need. A thread spawning 10,000 processes from outside on 2 cores
/// took 520–600 ns a spawn while both workers polled the global queue for them, and
/// about 410 ns with one asleep; the searcher wakes the sleeper when it finds work
/// (see `Core::next_task`).
fn leave_to_searcher(shared: &Shared, core: &Rc<RefCell<Core>>) -> bool {
    !core.borrow().searching && shared.idle.someone_searching()
}

/// A panic escaped `run_task` (user code itself runs under `catch_unwind`, so this is
/// a runtime bug or a user `Drop` the runtime did not guard). The worker goes on; the
/// process being stepped, if the unwinding left it orphaned, ends with the panic.
fn recover(
    shared: &Shared,
    task: &Task,
    panic: &(dyn std::any::Any + Send),
    events: &mut Vec<Event>,
    out: &mut StepOutput,
) {
    // Leftovers of the step are user values too.
    clear_quietly(events);
    clear_output_quietly(out);
    if let Some(owned) = task.reclaim_orphan() {
        let message = panic_message(panic);
        let _ = catch_unwind(AssertUnwindSafe(|| {
            shared.finish(
                owned,
                Err(ProcessError::Panicked {
                    phase: Phase::Step,
                    message,
                }),
            );
        }));
    }
}

impl Core {
    /// Pushes `task` to the back of the deque, counting an overflow into the global
    /// queue.
    #[inline]
    fn push_back(&mut self, shared: &Shared, task: Task) {
        let moved = self.local.push_back_or_overflow(task, &*shared.inject);
        if moved > 0 {
            let counters = &shared.counters[self.index];
            counters.overflows.add(1);
            counters.overflowed.add(moved as u64);
        }
    }

    fn next_task(&mut self, shared: &Shared) -> Option<Task> {
        let task = self.find_task(shared);
        if task.is_some() && self.searching {
            self.searching = false;
            // The last searcher found work: wake another to keep looking, in case
            // more arrived (keeps a burst from being run by one worker alone).
            if shared.idle.stop_searching() {
                shared.idle.notify_one();
            }
        }
        task
    }

    fn find_task(&mut self, shared: &Shared) -> Option<Task> {
        let counters = &shared.counters[self.index];
        self.tick = self.tick.wrapping_add(1);
        if self.tick.is_multiple_of(GLOBAL_CHECK_INTERVAL) {
            // The same interval suits the coarse clock: no branch of its own.
            shared.clock.refresh();
            if let Some(task) = self.pop_global(shared) {
                return Some(task);
            }
        }
        self.taken_woken = false;
        if let Some(task) = shared.lifo(self.index).take() {
            if self.lifo_streak < MAX_LIFO_STREAK {
                self.lifo_streak += 1;
                counters.lifo_pops.add(1);
                self.taken_woken = std::mem::take(&mut self.lifo_woken);
                return Some(task);
            }
            self.push_back(shared, task);
        }
        self.lifo_streak = 0;
        if let Some(task) = self.local.pop() {
            counters.local_pops.add(1);
            return Some(task);
        }
        if let Some(task) = self.pop_global(shared) {
            return Some(task);
        }
        if !self.searching {
            self.searching = shared.idle.try_start_searching();
        }
        if self.searching {
            return self.steal(shared);
        }
        None
    }

    fn pop_global(&mut self, shared: &Shared) -> Option<Task> {
        let (task, _moved) =
            shared
                .inject
                .pop_batch_into(&mut self.local, shared.global_batch, shared.workers)?;
        shared.counters[self.index].global_pops.add(1);
        Some(task)
    }

    fn steal(&mut self, shared: &Shared) -> Option<Task> {
        let workers = shared.stealers.len();
        if workers < 2 {
            return None;
        }
        let random = self.rng.next();
        let start = (random as usize) % workers;
        let stride = self.strides[((random >> 32) as usize) % self.strides.len()];
        let counters = &shared.counters[self.index];
        let mut victim = start;
        for _ in 0..workers {
            if victim != self.index {
                if let Some((task, taken)) =
                    shared.stealers[victim].steal_half_into_counted(&mut self.local)
                {
                    counters.steals.add(1);
                    counters.stolen.add(taken as u64);
                    <Layers as Instrument>::stole(shared, self.index, victim, taken, false);
                    return Some(task);
                }
            }
            victim = (victim + stride) % workers;
        }
        // No deque had anything: look for a process stranded in the LIFO slot of a
        // worker that is stuck in a long step.
        let mut victim = start;
        for _ in 0..workers {
            if victim != self.index {
                if let Some(task) = steal_lifo(shared, victim) {
                    counters.steals.add(1);
                    counters.stolen.add(1);
                    counters.lifo_steals.add(1);
                    <Layers as Instrument>::stole(shared, self.index, victim, 1, true);
                    return Some(task);
                }
            }
            victim = (victim + stride) % workers;
        }
        None
    }

    /// Whether a queue holds work this worker could take now.
    fn has_work(&self, shared: &Shared) -> bool {
        self.local.has_tasks()
            || !shared.inject.is_empty()
            || shared.stealers.iter().any(|s| !s.is_empty())
            || shared.lifo(self.index).is_occupied()
    }

    /// Whether another worker's LIFO slot holds a process: not work to take now
    /// (its worker runs it when its step ends), but one to watch while asleep.
    fn lifo_to_watch(&self, shared: &Shared) -> bool {
        shared
            .lifos
            .iter()
            .enumerate()
            .any(|(index, slot)| index != self.index && slot.is_occupied())
    }
}

/// Takes `victim`'s LIFO slot if `victim` stays inside one step for the grace period
/// (its step counter does not move): then the slot's process would wait behind the
/// rest of that step. A worker between steps takes its own slot within the grace.
fn steal_lifo(shared: &Shared, victim: usize) -> Option<Task> {
    let slot: &LifoSlot<Task> = shared.lifo(victim);
    if !slot.is_occupied() {
        return None;
    }
    let steps = &shared.counters[victim].steps;
    let before = steps.get();
    // The victim writes both lines watched here on every step: looking at them on
    // every spin would pull them away from it once per spin and slow down the very
    // steps being watched. Look once every `LIFO_WATCH_EVERY` spins instead.
    for _ in 0..LIFO_STEAL_GRACE / LIFO_WATCH_EVERY {
        for _ in 0..LIFO_WATCH_EVERY {
            spin_loop();
        }
        if steps.get() != before || !slot.is_occupied() {
            return None;
        }
    }
    slot.take()
}

/// The numbers in 1..=n coprime with n: strides that visit every victim once.
fn coprimes(n: usize) -> Vec<usize> {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    (1..=n).filter(|&i| gcd(i, n) == 1).collect()
}

/// How a worker came back from `park`.
#[derive(PartialEq, Eq)]
enum Parked {
    /// Woken by a producer.
    Woken,
    /// Found work (or a wake-up already waiting) before falling asleep.
    NotAsleep,
    /// Its watch over LIFO slots timed out.
    TimedOut,
}

/// Parks this worker; `watch` is the timeout of a sleep spent watching LIFO slots,
/// doubled here when it runs out. `woken` says whether the last wake-up has not
/// run a step yet (see `run`); set here when a producer wakes the worker.
fn park(
    shared: &Shared,
    core: &Rc<RefCell<Core>>,
    watch: &mut Duration,
    woken: &mut bool,
) -> Parked {
    let (index, was_searching) = {
        let mut core = core.borrow_mut();
        let searching = core.searching;
        core.searching = false;
        (core.index, searching)
    };
    shared.idle.register_sleeper(index, was_searching);
    // The re-check that makes the handshake safe (see idle.rs).
    if shared.is_terminated() || core.borrow().has_work(shared) {
        match shared.idle.unregister(index) {
            Unregister::Awake => return Parked::NotAsleep,
            Unregister::AlreadyWoken => {
                shared.idle.park(index);
                core.borrow_mut().searching = true;
                return Parked::NotAsleep;
            }
        }
    }
    let counters = &shared.counters[index];
    counters.parks.add(1);
    if std::mem::take(woken) {
        counters.noop_wakes.add(1);
    }
    counters.busy.park(shared.clock.start());
    <Layers as Instrument>::parked(shared, index);
    // Read after registering (and its fence): see "Watching LIFO slots" in idle.rs.
    // Under loom, only a slot seen occupied is watched: watching because another
    // worker is awake only adds timed wake-ups (it cannot lose one), and loom takes
    // every timeout as a branch, which a model's long step makes unbounded.
    let others_awake = cfg!(not(loom)) && shared.idle.others_awake();
    if core.borrow().lifo_to_watch(shared) || others_awake {
        if !shared.idle.park_watching(index, *watch) {
            // Timed out, awake, not searching: look around (a stranded process is
            // taken by `steal_lifo`), and sleep longer next time if there is nothing.
            *watch = (*watch * 2).min(WATCH_MAX);
            counters.busy.wake(shared.clock.start());
            <Layers as Instrument>::unparked(shared, index, true);
            return Parked::TimedOut;
        }
    } else {
        shared.idle.park(index);
    }
    counters.busy.wake(shared.clock.start());
    shared.clock.refresh();
    *woken = true;
    <Layers as Instrument>::unparked(shared, index, false);
    // The waker counted this worker as searching.
    core.borrow_mut().searching = true;
    Parked::Woken
}

/// Steps one process and deals with the outcome.
///
/// When the handlers of a step's yields complete them at once on this worker, the
/// completions go straight into the next step's events (`dispatch_direct`) and the
/// process is stepped again here, without leaving RUNNING: no mailbox lock, no
/// state transitions, no trip through a run queue. At most [`RESTEP_BUDGET`] times
/// in a row, so a process that keeps yielding such commands cannot hold the worker.
pub(crate) fn run_task(
    handle: &Handle,
    index: usize,
    mut woken: bool,
    slot: &mut Option<Task>,
    events: &mut Vec<Event>,
    out: &mut StepOutput,
) {
    let shared = handle.shared();
    let task = slot.as_ref().expect("the worker passes a task");
    let Some((mut owned, pending)) = task.start_running() else {
        // Shutdown, a link's failure or a kill stopped it while it sat in a queue (see
        // `State::request_stop`): it is DONE, or RUNNING while whoever claimed it
        // finishes it.
        debug_assert!(
            task.is_done()
                || shared.is_stopping()
                || <Layers as Hooks>::watched(shared)
                || shared.killed_any(),
            "a queued process was not READY, and neither shutdown, a link nor a kill stops processes"
        );
        return;
    };
    if shared.is_stopping() {
        shared.finish(owned, Err(ProcessError::Stopped));
        return;
    }
    // Once per run, not again when the step ends: the coarse clock does not move
    // during a step (its worker refreshes it between steps), so a second stamp
    // would write the same value.
    task.stamp(shared.clock.now());
    // Nothing was pushed since it last took its events (a process spawned and run
    // before anyone sent to it): no need to lock its mailbox.
    if pending {
        owned.take_events(events);
    }
    // The references of this run's completers (see `RefStock`); given back when the
    // run ends, before the task is handed on.
    let mut stock = RefStock::new(task);
    let mut budget = RESTEP_BUDGET;
    loop {
        out.clear();
        let step =
            <Layers as Instrument>::step_begins(shared, index, task, &owned, events, &mut woken);
        let stepped = owned
            .with_body(|body| {
                catch_unwind(AssertUnwindSafe(|| body.step(Events::new(events), out)))
            })
            .expect("a process that has not ended has a body");
        <Layers as Instrument>::step_returned(shared, index, task, &step);
        // Events the step did not consume, and the yields of a failed step, are
        // user values: dropped quietly.
        clear_quietly(events);
        owned.record_step(out.packed_suspend_point());
        <Layers as Instrument>::step_ended(
            shared,
            index,
            task.pid(),
            matches!(stepped, Ok(Ok(()))),
            out.status(),
        );

        let status = match stepped {
            Err(panic) => {
                clear_output_quietly(out);
                let message = panic_message(&*panic);
                shared.finish(
                    owned,
                    Err(ProcessError::Panicked {
                        phase: Phase::Step,
                        message,
                    }),
                );
                return;
            }
            Ok(Err(error)) => {
                clear_output_quietly(out);
                shared.finish(owned, Err(ProcessError::Failed(error)));
                return;
            }
            Ok(Ok(())) => out.take_status(),
        };

        // Yields go out in order, after the step, before the state changes.
        if !out.yields().is_empty() {
            <Layers as Instrument>::yielded(&step, out.yields());
            dispatch_direct(&mut stock, events, || {
                out.dispatch_yields(|y| <Layers as Hooks>::dispatch(shared, task, y));
            });
        }

        // Withdrawn yields (a `recv!` timeout that a message beat, yields given up
        // on cancel): cancel their timers now, not at their deadlines, and abort
        // their work in flight. After the dispatch, so a timer or work this very
        // step started is found; processes with neither skip the layers.
        if !out.withdrawn().is_empty() && hooks::may_have_pending(task) {
            for tag in out.drain_withdrawn() {
                <Layers as Hooks>::withdraw(shared, task, tag);
            }
        }

        let suspend = match status {
            Some(Status::Done(result)) => {
                // Completions of its last yields: nobody will read them.
                clear_quietly(events);
                shared.finish(owned, Ok(result));
                return;
            }
            None => {
                clear_quietly(events);
                shared.finish(
                    owned,
                    Err(ProcessError::Failed(StepError::new(
                        "step returned without a status: call StepOutput::set_status before returning",
                    ))),
                );
                return;
            }
            Some(Status::WaitingForYields) => Suspend::Yields,
            Some(Status::WaitingForMessage) => Suspend::Message,
            Some(Status::Continue) => Suspend::Continue,
        };

        // Completions arrived during the dispatch: they wake a process waiting for
        // yields or for a message alike, so step it again now.
        if !events.is_empty()
            && suspend != Suspend::Continue
            && budget > 0
            && !shared.is_stopping()
            && owned.refill_events(events)
        {
            budget -= 1;
            shared.counters[index].steps.add(1);
            continue;
        }
        // Not now: the completions go where completions from elsewhere go, the
        // mailbox, and wake the process as those would. Usually there are none: a
        // `Drain` made and dropped for nothing was ~20 instructions a step.
        if !events.is_empty() {
            for event in events.drain(..) {
                if let Err(event) = task.push_event(event) {
                    drop_quietly(event);
                }
            }
        }
        // Before the closing CAS: once the process waits, the reference the stock
        // borrows is the waiting process's (see `suspend_or_requeue`), and the stock
        // relies on it to never hold the last counts.
        drop(stock);
        match suspend_or_requeue(shared, owned, suspend) {
            AfterRun::Queue(placement) => {
                let task = slot.take().expect("the task is taken only here");
                schedule(shared, task, placement);
            }
            AfterRun::Waiting => {
                // The waiting process holds this reference now, for whoever wakes it
                // to queue it with (see "The waiting reference" in `state.rs`): it is
                // not given back. Nothing may touch the cell through it any more.
                std::mem::forget(slot.take());
            }
            AfterRun::Ended => {}
        }
        return;
    }
}

/// Empties `events` (user values), catching panics of their `Drop`s.
fn clear_quietly(events: &mut Vec<Event>) {
    if !events.is_empty() {
        drop_all_quietly(events.drain(..));
    }
}

/// Empties `out` (its status and yields hold user values), catching panics.
fn clear_output_quietly(out: &mut StepOutput) {
    drop_quietly(out.take_status());
    drop_all_quietly(out.drain_yields());
    out.clear();
}

/// What became of a process after a run that did not end it at once.
enum AfterRun {
    /// READY again: the caller queues it there, with its reference.
    Queue(Placement),
    /// Waiting: the caller's reference is the waiting process's now, and must be
    /// forgotten, not dropped.
    Waiting,
    /// Stopped by shutdown and ended: the caller drops its reference.
    Ended,
}

/// Ends a step that did not end the process.
fn suspend_or_requeue(shared: &Shared, owned: Owned<'_>, suspend: Suspend) -> AfterRun {
    if shared.is_stopping() {
        shared.finish(owned, Err(ProcessError::Stopped));
        return AfterRun::Ended;
    }
    match owned.finish_step(suspend) {
        Ok(true) if suspend == Suspend::Continue => {
            // It gave the worker back on purpose: behind everyone else.
            AfterRun::Queue(Placement::Back)
        }
        // Woken during its step, e.g. by a handler that completed at once.
        Ok(true) => AfterRun::Queue(Placement::LifoAfterStep),
        Ok(false) => AfterRun::Waiting,
        // Shutdown flagged it during the step (see `State::request_stop`).
        Err(owned) => {
            shared.finish(owned, Err(ProcessError::Stopped));
            AfterRun::Ended
        }
    }
}
