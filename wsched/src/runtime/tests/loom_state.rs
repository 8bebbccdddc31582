//! loom models of the process state machine together with its mailbox and the
//! waiting reference, through the runtime's own code on every side:
//!
//! * the worker's side is `worker::run_task`, the function a worker steps a process
//!   with (taking its events, the step, the closing CAS, and leaving its reference
//!   in a waiting process or queueing it with it);
//! * a waker's side is `Shared::deliver` (completions, cancels) or the send path
//!   (`Handle::send`), which take the waiting reference to queue what they woke;
//! * shutdown's side is `Shared::stop_all`, the sweep that claims or flags.
//!
//! The scheduler is built without its worker threads
//! (`Builder::build_without_workers`): a model thread plays the worker, taking
//! processes from the global queue (where everything queued from a thread that is
//! not a worker goes) and stepping them with `run_task`. So a model sees exactly
//! how many times a process was queued, and loom's allocator checks that every
//! reference taken was given back: a waiting reference kept twice or never left
//! shows as a cell freed twice (loom panics on the second free) or leaked.
//!
//! The cells' mailboxes take the runtime's spin lock here, as outside loom (see
//! `spin_lock.rs` for why the models of the whole worker loop use loom's mutex).
//!
//! Run with the README's loom command.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::engine::process::{Completion, Event, Events, Process, Status, StepOutput, Tag};
use crate::engine::state::{ProcessState, Suspend};
use crate::engine::worker::run_task;
use crate::error::{InitError, StepError};
use crate::payload::{Payload, Payloads};
use crate::pid::Pid;
use crate::spin_lock::spin_mailboxes;
use crate::{Context, Handle, Scheduler};

/// Counts every event its steps see into `seen` and waits as `suspend` says; a
/// cancel ends it. (The counts are std atomics: read after the threads are joined.)
struct Waits {
    suspend: Suspend,
    seen: Arc<AtomicUsize>,
}

impl Process for Waits {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let mut cancelled = false;
        for event in events {
            self.seen.fetch_add(1, Ordering::SeqCst);
            cancelled |= matches!(event, Event::Cancel);
        }
        out.set_status(match self.suspend {
            _ if cancelled => Status::Done(Payload::unit()),
            Suspend::Yields => Status::WaitingForYields,
            Suspend::Message => Status::WaitingForMessage,
            Suspend::Continue => Status::Continue,
        });
        Ok(())
    }
}

/// Ends on its first step, with the number of messages it saw there.
struct EndsAtOnce;

impl Process for EndsAtOnce {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        out.set_status(Status::Done(Payload::new(events.len())));
        Ok(())
    }
}

/// A scheduler whose processes the model's threads step, their mailboxes locked
/// with the runtime's spin lock (see `spin_lock.rs`).
fn scheduler() -> Scheduler {
    spin_mailboxes();
    Scheduler::builder().workers(1).build_without_workers()
}

/// [`scheduler`], with one process spawned in it (so queued once, on the global
/// queue).
fn scheduler_with(suspend: Suspend) -> (Scheduler, Pid, Arc<AtomicUsize>) {
    let s = scheduler();
    let seen = Arc::new(AtomicUsize::new(0));
    let waits = Waits {
        suspend,
        seen: seen.clone(),
    };
    let pid = s.spawn(waits, "run", ()).unwrap();
    (s, pid, seen)
}

fn completion() -> Event {
    Event::Completion(Completion {
        tag: Tag(1),
        result: Ok(Payload::unit()),
    })
}

/// What a worker does with the next process in the global queue: steps it with the
/// worker's own function. `false` if the queue was empty.
fn run_next(handle: &Handle) -> bool {
    let Some(task) = handle.shared().inject.pop() else {
        return false;
    };
    let (mut events, mut out) = (Vec::new(), StepOutput::new());
    // As `worker::run` passes it: the slot keeps the reference unless `run_task`
    // moves it into a queue (or leaves it with the process it made wait).
    let mut slot = Some(task);
    run_task(handle, 0, false, &mut slot, &mut events, &mut out);
    true
}

/// How many times the process is in the global queue (which holds nothing else).
fn queued(s: &Scheduler) -> usize {
    s.handle().shared().inject.len()
}

/// The state of `pid`, whose cell the table keeps until its result is claimed.
fn state(s: &Scheduler, pid: Pid) -> ProcessState {
    s.handle().shared().cell_of(pid).unwrap().state()
}

/// Delivers `event` to `pid` as a completer or a cancel does, from a thread of its
/// own: `Shared::deliver`, which queues the process if this woke it.
fn deliver_from_thread(s: &Scheduler, pid: Pid, event: Event) -> loom::thread::JoinHandle<()> {
    let handle = s.handle();
    loom::thread::spawn(move || {
        let shared = handle.shared();
        let cell = shared.cell_of(pid).expect("the process is in the table");
        assert!(shared.deliver(&cell, event).is_ok(), "the mailbox is open");
    })
}

/// Ends the model: shutdown's sweep stops `pid` if it is still live (claiming it
/// from waiting gives its waiting reference back), its result is claimed, and the
/// scheduler drops what its queue and table hold. Returns whether it was stopped.
fn shut_down(s: Scheduler, pid: Pid) -> bool {
    s.handle().shared().stop_all();
    assert_eq!(s.metrics().live, 0);
    let stopped = s.wait(pid).is_err();
    drop(s);
    stopped
}

/// A completion racing the step that makes the process wait for it: seen by that
/// step, or queued exactly once (by the completer, which found it waiting, or by
/// the worker, whose closing CAS found the completion's wake flag).
#[test]
fn completion_while_running_queues_the_process_exactly_once() {
    loom::model(|| {
        let (s, pid, seen) = scheduler_with(Suspend::Yields);
        let completer = deliver_from_thread(&s, pid, completion());
        assert!(run_next(&s.handle()));
        completer.join().unwrap();
        if seen.load(Ordering::SeqCst) == 1 {
            // Consumed by the step: at most a harmless spurious re-queue.
            assert!(queued(&s) <= 1);
        } else {
            // Not consumed: the process must be queued, exactly once.
            assert_eq!(queued(&s), 1);
            assert_eq!(state(&s, pid), ProcessState::Ready);
            assert!(run_next(&s.handle()));
            assert_eq!(seen.load(Ordering::SeqCst), 1, "the next step saw it");
        }
        assert!(shut_down(s, pid));
    });
}

#[test]
fn message_racing_the_move_to_waiting_for_a_message_is_not_lost() {
    loom::model(|| {
        let (s, pid, seen) = scheduler_with(Suspend::Message);
        let handle = s.handle();
        let sender = loom::thread::spawn(move || handle.send(pid, ()).unwrap());
        assert!(run_next(&s.handle()));
        sender.join().unwrap();
        if seen.load(Ordering::SeqCst) == 0 {
            assert_eq!(queued(&s), 1);
            assert!(run_next(&s.handle()));
            assert_eq!(seen.load(Ordering::SeqCst), 1);
        } else {
            assert!(queued(&s) <= 1);
        }
        assert!(shut_down(s, pid));
    });
}

#[test]
fn a_message_does_not_wake_a_process_waiting_for_yields() {
    loom::model(|| {
        let (s, pid, seen) = scheduler_with(Suspend::Yields);
        let handle = s.handle();
        let sender = loom::thread::spawn(move || handle.send(pid, ()).unwrap());
        assert!(run_next(&s.handle()));
        sender.join().unwrap();
        assert_eq!(
            queued(&s),
            0,
            "a message never queues a process waiting for yields"
        );
        assert_eq!(state(&s, pid), ProcessState::WaitingForYields);
        // Not lost either: a completion wakes it and the message is still there.
        deliver_from_thread(&s, pid, completion()).join().unwrap();
        assert_eq!(queued(&s), 1);
        assert!(run_next(&s.handle()));
        assert_eq!(seen.load(Ordering::SeqCst), 2);
        assert!(shut_down(s, pid));
    });
}

#[test]
fn cancel_and_completion_racing_queue_a_waiting_process_once() {
    loom::model(|| {
        let (s, pid, seen) = scheduler_with(Suspend::Yields);
        assert!(run_next(&s.handle()));
        assert_eq!(state(&s, pid), ProcessState::WaitingForYields);
        let completer = deliver_from_thread(&s, pid, completion());
        let canceller = deliver_from_thread(&s, pid, Event::Cancel);
        completer.join().unwrap();
        canceller.join().unwrap();
        assert_eq!(queued(&s), 1);
        // The cancel ends it, in the step that sees both events.
        assert!(run_next(&s.handle()));
        assert_eq!(seen.load(Ordering::SeqCst), 2);
        assert!(!shut_down(s, pid), "it ended on its cancel");
    });
}

/// Shutdown's sweep racing a completion that wakes a waiting process, and the
/// worker that takes the woken process from the queue: the process ends exactly
/// once, stopped (by the sweep, or by its worker, which sees shutdown under way;
/// the sweep waits for a process it finds mid-step).
#[test]
fn shutdown_stop_racing_a_completion_ends_the_process_exactly_once() {
    loom::model(|| {
        let (s, pid, _) = scheduler_with(Suspend::Yields);
        assert!(run_next(&s.handle()));
        let handle = s.handle();
        let worker = loom::thread::spawn(move || {
            let shared = handle.shared();
            let cell = shared.cell_of(pid).unwrap();
            let delivered = shared.deliver(&cell, completion()).is_ok();
            drop(cell);
            // A worker takes the woken process, if the completion woke it.
            if delivered {
                run_next(&handle);
            }
        });
        let stopped = s.handle().shared().stop_all();
        worker.join().unwrap();
        assert_eq!(stopped, [pid]);
        // Whatever is left in the queue was stopped already: a worker skips it.
        while run_next(&s.handle()) {}
        let metrics = s.metrics();
        assert_eq!(
            (metrics.stopped, metrics.live),
            (1, 0),
            "ended exactly once"
        );
        assert_eq!(state(&s, pid), ProcessState::Done);
        assert!(shut_down(s, pid));
    });
}

/// Shutdown's sweep racing the worker's step and its closing CAS: the sweep takes
/// the process over (before the worker starts it, or once it waits) or flags it
/// and waits while its worker ends it; either way it ends exactly once.
#[test]
fn shutdown_stop_racing_the_end_of_a_step_ends_the_process_exactly_once() {
    loom::model(|| {
        let (s, pid, _) = scheduler_with(Suspend::Message);
        let handle = s.handle();
        let worker = loom::thread::spawn(move || {
            run_next(&handle);
        });
        let stopped = s.handle().shared().stop_all();
        worker.join().unwrap();
        assert_eq!(stopped, [pid]);
        while run_next(&s.handle()) {}
        let metrics = s.metrics();
        assert_eq!(
            (metrics.stopped, metrics.live),
            (1, 0),
            "ended exactly once"
        );
        assert!(shut_down(s, pid));
    });
}

/// A message sent while its process ends is read by the last step, left over when
/// the mailbox closes (a dead letter), or refused, so the sender gets it back:
/// exactly one of the three, never accepted into a mailbox nobody will read.
#[test]
fn a_message_racing_the_end_of_its_process_is_read_left_over_or_handed_back() {
    loom::model(|| {
        let s = scheduler();
        let pid = s.spawn(EndsAtOnce, "run", ()).unwrap();
        let handle = s.handle();
        let sender = loom::thread::spawn(move || handle.send(pid, ()).is_err());
        assert!(run_next(&s.handle()));
        let returned = usize::from(sender.join().unwrap());
        let read = s.wait(pid).unwrap().downcast::<usize>().unwrap();
        let dead = s.metrics().dead_letters as usize;
        assert_eq!(
            read + dead + returned,
            1,
            "read {read}, dead-lettered {dead}, returned {returned}"
        );
        assert!(
            s.send(pid, ()).is_err(),
            "an ended process refuses messages"
        );
        assert_eq!(s.metrics().live, 0);
    });
}
