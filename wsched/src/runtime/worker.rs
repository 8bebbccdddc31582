//! The worker loop: find work, step it, dispatch its yields, park when idle.
//!
//! Work is found in this order (DESIGN.md, layer 3):
//!
//! 1. every 61st round, the global queue first, so it cannot starve;
//! 2. the LIFO slot: the process most recently woken by this worker (cache-warm; a
//!    ping-pong pair runs back to back), at most [`MAX_LIFO_STREAK`] times in a row;
//! 3. the worker's own deque;
//! 4. the global queue, taking a batch into the deque;
//! 5. stealing half of another worker's deque, victims visited in a random order
//!    that reaches each once (a random start and a random stride coprime with the
//!    number of workers, as Go does).
//!
//! Finding nothing, the worker spins (rounds 1–3), yields its thread (4–15), then
//! parks (16 on) through the handshake in `idle.rs`.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use super::cell::Owned;
use super::idle::Unregister;
use super::panic_message;
use super::queue::local::Local;
use super::shared::{Shared, Task};
use super::state::Suspend;
use super::Handle;
use crate::error::{Phase, ProcessError, StepError};
use crate::process::{Event, Events, Status, StepOutput};

/// How often the global queue is checked first (Go's figure).
const GLOBAL_CHECK_INTERVAL: u32 = 61;
/// How many times in a row the LIFO slot may be used before its process goes to the
/// back of the deque, so two processes waking each other cannot starve the rest.
const MAX_LIFO_STREAK: u8 = 3;
/// Idle rounds spent spinning, then yielding the thread, before parking.
const SPIN_ROUNDS: u32 = 4;
const YIELD_ROUNDS: u32 = 16;

/// The worker's private state, reachable from its thread-local so that processes
/// woken or spawned on this thread go to this worker's queues.
struct Core {
    index: usize,
    local: Local<Task>,
    lifo: Option<Task>,
    lifo_streak: u8,
    tick: u32,
    searching: bool,
    rng: FastRand,
}

struct Current {
    shared: *const Shared,
    core: Rc<RefCell<Core>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's worker core if the thread is one of `shared`'s
/// workers and the core is not borrowed (it never is while a process runs).
fn with_core<R>(shared: &Shared, f: impl FnOnce(&mut Core) -> R) -> Option<R> {
    CURRENT.with(|current| {
        let current = current.borrow();
        let current = current.as_ref()?;
        if !std::ptr::eq(current.shared, shared) {
            return None;
        }
        let mut core = current.core.try_borrow_mut().ok()?;
        Some(f(&mut core))
    })
}

/// Queues a newly spawned process: on this worker's deque if spawned by one of
/// `shared`'s workers, else on the global queue.
pub(crate) fn schedule_new(shared: &Shared, task: Task) {
    schedule(shared, task, Placement::Back);
}

/// Queues a process woken by an event: into this worker's LIFO slot when woken from
/// one of `shared`'s workers (it likely shares this cache), else the global queue.
pub(crate) fn schedule_woken(shared: &Shared, task: Task) {
    schedule(shared, task, Placement::Lifo);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    Lifo,
    Back,
}

fn schedule(shared: &Shared, task: Task, placement: Placement) {
    let mut task = Some(task);
    let pushed_local = with_core(shared, |core| {
        let task = task.take().expect("taken once");
        match placement {
            Placement::Lifo => {
                if let Some(previous) = core.lifo.replace(task) {
                    core.local.push_back_or_overflow(previous, &shared.inject);
                    return true;
                }
                false
            }
            Placement::Back => {
                core.local.push_back_or_overflow(task, &shared.inject);
                true
            }
        }
    });
    match (pushed_local, task) {
        // Work others may steal was added: maybe wake one.
        (Some(true), _) => {
            shared.idle.notify_one();
        }
        // Only the LIFO slot changed: this worker runs it next, nobody to wake.
        (Some(false), _) => {}
        (None, Some(task)) => {
            shared.inject.push(task);
            shared.idle.notify_one();
        }
        (None, None) => unreachable!("the closure did not run, so it did not take the task"),
    }
}

/// The body of worker thread `index`.
pub(crate) fn run(handle: Handle, index: usize, local: Local<Task>) {
    let shared: &Shared = handle.shared();
    let core = Rc::new(RefCell::new(Core {
        index,
        local,
        lifo: None,
        lifo_streak: 0,
        tick: 0,
        searching: false,
        rng: FastRand::new(index as u64),
    }));
    CURRENT.with(|current| {
        *current.borrow_mut() = Some(Current {
            shared,
            core: core.clone(),
        })
    });

    let mut events = Vec::new();
    let mut out = StepOutput::new();
    let mut idle_rounds = 0u32;
    while !shared.is_terminated() {
        let task = core.borrow_mut().next_task(shared);
        match task {
            Some(task) => {
                idle_rounds = 0;
                shared.counters[index].steps.add(1);
                run_task(&handle, task, &mut events, &mut out);
            }
            None => {
                idle_rounds += 1;
                if idle_rounds < SPIN_ROUNDS {
                    for _ in 0..(1 << idle_rounds) {
                        std::hint::spin_loop();
                    }
                } else if idle_rounds < YIELD_ROUNDS {
                    std::thread::yield_now();
                } else {
                    park(shared, &core);
                    idle_rounds = 0;
                }
            }
        }
    }

    CURRENT.with(|current| *current.borrow_mut() = None);
    // All processes have ended before workers are told to exit, so queues are empty;
    // drop whatever is left defensively, outside the thread-local.
    let mut core = core.borrow_mut();
    drop(core.lifo.take());
    while core.local.pop().is_some() {}
}

impl Core {
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
        if self.tick % GLOBAL_CHECK_INTERVAL == 0 {
            if let Some(task) = self.pop_global(shared) {
                return Some(task);
            }
        }
        if let Some(task) = self.lifo.take() {
            if self.lifo_streak < MAX_LIFO_STREAK {
                self.lifo_streak += 1;
                counters.lifo_pops.add(1);
                return Some(task);
            }
            self.local.push_back_or_overflow(task, &shared.inject);
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
        let coprimes = coprimes(workers);
        let mut victim = (random as usize) % workers;
        let stride = coprimes[((random >> 32) as usize) % coprimes.len()];
        for _ in 0..workers {
            if victim != self.index {
                if let Some((task, taken)) =
                    shared.stealers[victim].steal_half_into_counted(&mut self.local)
                {
                    let counters = &shared.counters[self.index];
                    counters.steals.add(1);
                    counters.stolen.add(taken as u64);
                    return Some(task);
                }
            }
            victim = (victim + stride) % workers;
        }
        None
    }

    fn has_work(&self, shared: &Shared) -> bool {
        self.lifo.is_some()
            || self.local.has_tasks()
            || !shared.inject.is_empty()
            || shared.stealers.iter().any(|s| !s.is_empty())
    }
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

fn park(shared: &Shared, core: &Rc<RefCell<Core>>) {
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
            Unregister::Awake => return,
            Unregister::AlreadyWoken => {
                shared.idle.park(index);
                core.borrow_mut().searching = true;
                return;
            }
        }
    }
    shared.counters[index].parks.add(1);
    shared.idle.park(index);
    // The waker counted this worker as searching.
    core.borrow_mut().searching = true;
}

/// Steps one process and deals with the outcome.
fn run_task(handle: &Handle, task: Task, events: &mut Vec<Event>, out: &mut StepOutput) {
    let shared = handle.shared();
    let Some(mut owned) = task.start_running() else {
        debug_assert!(false, "a queued process was not READY");
        return;
    };
    if shared.is_stopping() {
        shared.finish(owned, Err(ProcessError::Stopped));
        return;
    }
    owned.take_events(events);
    out.clear();
    let stepped = owned.with_body(|body| {
        let body = body
            .as_mut()
            .expect("a process that has not ended has a body");
        catch_unwind(AssertUnwindSafe(|| body.step(Events::new(events), out)))
    });
    events.clear();
    owned.record_step(out.suspend_point());

    let status = match stepped {
        Err(panic) => {
            out.clear();
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
            out.clear();
            shared.finish(owned, Err(ProcessError::Failed(error)));
            return;
        }
        Ok(Ok(())) => out.take_status(),
    };

    // Yields go out in order, after the step, before the state changes: a handler
    // that completes at once sets the wake-up flag and the process runs again here.
    for y in out.drain_yields() {
        shared.handlers.dispatch(handle, &shared.blocking, &task, y);
    }

    // Withdrawn yields (a `recv!` timeout that a message beat, yields given up on
    // cancel): cancel their timers now, not at their deadlines. After the dispatch,
    // so a timer this very step armed is found; processes without pending timers
    // skip the timer lock.
    if task.timers().may_have_pending() {
        for tag in out.drain_withdrawn() {
            shared.timers.cancel(task.timers(), tag);
        }
    }

    let suspend = match status {
        Some(Status::Done(result)) => {
            shared.finish(owned, Ok(result));
            return;
        }
        None => {
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
    suspend_or_requeue(shared, &task, owned, suspend);
}

fn suspend_or_requeue(shared: &Shared, task: &Task, owned: Owned<'_>, suspend: Suspend) {
    if shared.is_stopping() {
        shared.finish(owned, Err(ProcessError::Stopped));
        return;
    }
    if owned.finish_step(suspend) {
        let placement = if suspend == Suspend::Continue {
            // It gave the worker back on purpose: behind everyone else.
            Placement::Back
        } else {
            // Woken during its step, e.g. by a handler that completed at once.
            Placement::Lifo
        };
        schedule(shared, task.clone(), placement);
    } else if shared.is_stopping() {
        // Shutdown started stopping processes between our check and the
        // transition; its sweep may have missed this one (see `Shared::stop_all`).
        if let Some(owned) = task.claim_waiting() {
            shared.finish(owned, Err(ProcessError::Stopped));
        }
    }
}

/// xorshift64*: a tiny per-worker generator for victim selection.
struct FastRand(u64);

impl FastRand {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
