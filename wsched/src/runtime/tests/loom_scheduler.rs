//! loom models of the real scheduler: `Scheduler::builder().build()` starts the real
//! worker loop (`worker::run`: the LIFO slot, the deque, the global queue, stealing,
//! spinning and parking) on loom threads, and the models drive it through the public
//! API. A lost wake-up, a process nobody runs or a shutdown that waits forever shows
//! as a loom deadlock; a process run twice or lost, as a failed assertion.
//!
//! Under loom the worker spins and yields fewer rounds and the LIFO steal grace is
//! one spin (see `worker.rs`), and a timed wait is a plain wait (see `sync.rs`).

use std::time::Duration;

use crate::command::Completer;
use crate::engine::cell::{ProcessCell, ResultWaiter};
use crate::engine::process::{Event, Events, Process, Status, StepOutput, Tag};
use crate::error::{InitError, SpawnError, StepError, YieldError};
use crate::payload::{Payload, Payloads};
use crate::pid::Pid;
use crate::sync::{Arc, AtomicUsize, Condvar, Mutex, Ordering};
use crate::{Command, Context, Scheduler};

use super::Inert;

/// Finishes with the number of messages in its first step that had any (a cancel
/// also ends it, with 0), so a model can tell a delivered message from a stop.
struct Receiver;

impl Process for Receiver {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let mut messages = 0_u64;
        let mut cancelled = false;
        for event in events {
            match event {
                Event::Message(_) => messages += 1,
                Event::Cancel => cancelled = true,
                Event::Completion(_) => {}
            }
        }
        if messages > 0 || cancelled {
            out.set_status(Status::Done(Payload::new(messages)));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    }
}

/// Sends one message to `to` in its first step and finishes.
struct Sender {
    to: Pid,
    ctx: Option<Context>,
}

impl Process for Sender {
    fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("init ran");
        ctx.send(self.to, ()).map_err(StepError::new)?;
        out.set_status(Status::Done(Payload::unit()));
        Ok(())
    }
}

fn build(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("the scheduler starts")
}

/// A message from one process wakes another (into the sender's worker's LIFO slot,
/// from which the owner or an idle worker takes it); both finish, whichever worker
/// runs what, and shutdown then finds nothing live.
#[test]
fn a_woken_process_runs_on_whichever_worker_takes_it() {
    // Three threads through the whole worker loop: at the default preemption bound
    // this takes minutes; bound 1 still covers every wake-up handshake with one
    // preemption inside it, which is where lost wake-ups hide.
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        let s = build(2);
        let receiver = s.spawn(Receiver, "run", ()).unwrap();
        let sender = s
            .spawn(
                Sender {
                    to: receiver,
                    ctx: None,
                },
                "run",
                (),
            )
            .unwrap();
        s.wait(sender).unwrap();
        let messages = s.wait(receiver).unwrap().downcast::<u64>().unwrap();
        assert_eq!(messages, 1, "the message was delivered once");
        let report = s.shutdown(Duration::ZERO);
        assert!(report.stopped.is_empty(), "{report:?}");
        let metrics = s.metrics();
        assert_eq!((metrics.live, metrics.finished), (0, 2));
    });
}

/// A spawn from another thread racing shutdown: refused, or its process runs (it
/// is cancelled) — never accepted and then left in a queue nobody drains.
#[test]
fn a_spawn_racing_shutdown_is_refused_or_runs() {
    loom::model(|| {
        let s = build(1);
        let handle = s.handle();
        let spawner = loom::thread::spawn(move || handle.spawn(Receiver, "run", ()));
        let report = s.shutdown(Duration::ZERO);
        match spawner.join().unwrap() {
            Ok(pid) => {
                // Shutdown waited for it (loom's timed waits never time out, so it
                // was not stopped but finished on its cancel).
                assert!(report.stopped.is_empty(), "{report:?}");
                assert_eq!(report.finished, 1);
                assert_eq!(s.wait(pid).unwrap().downcast::<u64>().unwrap(), 0);
            }
            Err(SpawnError::ShuttingDown) => assert_eq!(report.finished, 0),
            Err(other) => panic!("{other}"),
        }
        assert_eq!(s.metrics().live, 0);
    });
}

/// A command whose handler keeps the completer, for the model to complete or drop.
struct Held;

impl Command for Held {
    type Output = u64;
}

/// A command whose handler panics while it holds the completer.
struct Boom;

impl Command for Boom {
    type Output = u64;
}

/// Yields `Held` twice (tags 1 and 2) and `Boom` (tag 3), then finishes with what
/// the three completions said, by tag: `Ok(n)`, or the error's kind.
struct Yielder {
    yielded: bool,
    seen: Vec<(u64, Result<u64, &'static str>)>,
}

impl Process for Yielder {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if !self.yielded {
            self.yielded = true;
            out.yield_command(Tag(1), Held);
            out.yield_command(Tag(2), Held);
            out.yield_command(Tag(3), Boom);
        }
        for event in events {
            if let Event::Completion(c) = event {
                let seen = match c.result {
                    Ok(value) => Ok(value.downcast::<u64>().expect("a u64")),
                    Err(YieldError::Dropped { .. }) => Err("dropped"),
                    Err(YieldError::HandlerPanicked { .. }) => Err("panicked"),
                    Err(_) => Err("other"),
                };
                self.seen.push((c.tag.0, seen));
            }
        }
        if self.seen.len() == 3 {
            self.seen.sort_unstable();
            out.set_status(Status::Done(Payload::new(std::mem::take(&mut self.seen))));
        } else {
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    }
}

/// A completer completed on one thread and another dropped on a second, racing the
/// worker's steps, and a handler that unwinds on the worker: each yield is answered
/// exactly once, with the right kind of answer, and the process wakes for them
/// however they interleave with its steps.
#[test]
fn completers_completed_dropped_and_unwound_answer_each_yield_once() {
    loom::model(|| {
        // The completers, handed over by the handler; the condition variable (a
        // loom one) wakes the model once both are in, where polling for them made
        // every poll a branch for loom to explore.
        let held = Arc::new((Mutex::new(Vec::<Completer<Held>>::new()), Condvar::new()));
        let keep = held.clone();
        let s = Scheduler::builder()
            .workers(1)
            .handler(move |_: Held, done: Completer<Held>| {
                let (completers, both_in) = &*keep;
                let mut completers = completers.lock();
                completers.push(done);
                if completers.len() == 2 {
                    both_in.notify_one();
                }
            })
            .handler(|_: Boom, _done: Completer<Boom>| panic!("the Boom handler panicked"))
            .build()
            .unwrap();
        let pid = s
            .spawn(
                Yielder {
                    yielded: false,
                    seen: Vec::new(),
                },
                "run",
                (),
            )
            .unwrap();
        let (first, second) = {
            let (completers, both_in) = &*held;
            let mut completers = completers.lock();
            while completers.len() < 2 {
                both_in.wait(&mut completers);
            }
            let second = completers.pop().unwrap();
            (completers.pop().unwrap(), second)
        };
        // One completer dropped on another thread while this one completes the
        // other, both racing the worker's steps.
        let dropper = loom::thread::spawn(move || drop(second));
        first.complete(7);
        dropper.join().unwrap();
        let seen = s.wait(pid).unwrap();
        assert_eq!(
            seen.downcast::<Vec<(u64, Result<u64, &'static str>)>>()
                .unwrap(),
            vec![(1, Ok(7)), (2, Err("dropped")), (3, Err("panicked"))]
        );
        let report = s.shutdown(Duration::ZERO);
        assert!(report.stopped.is_empty());
    });
}

/// A wait that times out withdraws its claim while the process finishes: either the
/// waiter got the result (exactly once) or it was withdrawn and the result stays
/// for the next claim — never lost, never handed out twice. (Timeouts cannot happen
/// under loom, so this drives the cell's claim/withdraw/finish directly.)
#[test]
fn a_withdrawn_wait_racing_the_end_of_its_process_loses_nothing() {
    loom::model(|| {
        let cell = ProcessCell::ready(Pid::from_raw(1), None, "run", false, Inert);
        let answered = Arc::new(AtomicUsize::new(0));
        let finisher = {
            let cell = cell.clone();
            loom::thread::spawn(move || {
                let (mut owned, _) = cell.start_running().expect("READY");
                drop(owned.close_mailbox());
                owned.finish(Ok(Payload::new(7_u64)))
            })
        };
        let a = answered.clone();
        let handed_out_now = cell.claim_result(ResultWaiter::Call(Box::new(move |result| {
            assert_eq!(result.unwrap().downcast::<u64>().unwrap(), 7);
            a.fetch_add(1, Ordering::SeqCst);
        })));
        let withdrawn = !handed_out_now && cell.withdraw_waiter();
        let handed_out_at_finish = finisher.join().unwrap();
        if withdrawn {
            assert_eq!(answered.load(Ordering::SeqCst), 0);
            assert!(!handed_out_at_finish, "kept for the next claim");
            let a = answered.clone();
            assert!(
                cell.claim_result(ResultWaiter::Call(Box::new(move |result| {
                    assert_eq!(result.unwrap().downcast::<u64>().unwrap(), 7);
                    a.fetch_add(1, Ordering::SeqCst);
                })))
            );
        }
        assert_eq!(
            answered.load(Ordering::SeqCst),
            1,
            "handed out exactly once"
        );
    });
}

/// Sends to `to`, then keeps its worker in the same step until `to` has run: only
/// another worker taking `to` from this worker's LIFO slot lets the step end.
struct StuckSender {
    to: Pid,
    ran: Arc<AtomicUsize>,
    ctx: Option<Context>,
}

impl Process for StuckSender {
    fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("init ran");
        ctx.send(self.to, ()).map_err(StepError::new)?;
        while self.ran.load(Ordering::SeqCst) == 0 {
            loom::thread::yield_now();
        }
        out.set_status(Status::Done(Payload::unit()));
        Ok(())
    }
}

/// Records that it ran, then finishes.
struct Marker {
    ran: Arc<AtomicUsize>,
}

impl Process for Marker {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if events.len() == 0 {
            out.set_status(Status::WaitingForMessage);
        } else {
            self.ran.fetch_add(1, Ordering::SeqCst);
            out.set_status(Status::Done(Payload::unit()));
        }
        Ok(())
    }
}

/// The stranded-LIFO case: a process woken by a step that goes on and on must be
/// run by the other worker (which may be searching, spinning or parked when the
/// wake-up comes), or the step never ends.
#[test]
fn a_process_woken_during_a_long_step_is_taken_by_the_other_worker() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        let s = build(2);
        let ran = Arc::new(AtomicUsize::new(0));
        let marker = s.spawn(Marker { ran: ran.clone() }, "run", ()).unwrap();
        let sender = s
            .spawn(
                StuckSender {
                    to: marker,
                    ran: ran.clone(),
                    ctx: None,
                },
                "run",
                (),
            )
            .unwrap();
        s.wait(sender).unwrap();
        s.wait(marker).unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1, "run exactly once");
        let report = s.shutdown(Duration::ZERO);
        assert!(report.stopped.is_empty(), "{report:?}");
    });
}
