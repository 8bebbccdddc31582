//! loom models of calls (see `calls.rs`).
//!
//! The slot alone: a reply racing a thread's timeout is either taken by the caller
//! or refused to the replier, never both and never neither (fails if a closed slot
//! accepts answers); and a callee that drops its reply as it dies is reported dead,
//! not "no reply", whichever of the drop and the `Down` comes first (deadlocks if a
//! death cannot override a "no reply").
//!
//! A process's call, on the real scheduler (its worker on a loom thread): the reply,
//! sent from another thread, races the callee's death (the call's monitor) or the
//! caller's cancel (which withdraws the yield, releasing the call's timer). One
//! answer completes the yield, the replier learns whether it was the one, and the
//! call leaves no monitor and no timer behind, even on a callee that lives on (the
//! cancel model fails when the release of a call forgets its monitor).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::command::{Call, CallAnswer};
use crate::engine::context::Context;
use crate::engine::process::{Event, Events, Process, Status, StepOutput, Tag};
use crate::error::{InitError, StepError};
use crate::exit::ExitReason;
use crate::payload::{Payload, Payloads};
use crate::pid::Pid;
use crate::runtime::{CallError, Reply, Request};
use crate::services::calls::{Answer, CallSlot};
use crate::sync::{Condvar, Mutex};
use crate::Scheduler;

#[test]
fn a_reply_racing_the_timeout_is_taken_or_refused_exactly_once() {
    loom::model(|| {
        let (slot, reply) = CallSlot::for_model::<u32>();
        let sent = Arc::new(AtomicBool::new(false));
        let flag = sent.clone();
        let replier = loom::thread::spawn(move || flag.store(reply.send(7), Ordering::SeqCst));
        let got = slot.give_up();
        replier.join().unwrap();
        let got_reply = matches!(got, Some(Answer::Replied(_)));
        assert_eq!(got_reply, sent.load(Ordering::SeqCst));
    });
}

#[test]
fn a_reply_dropped_by_a_dying_callee_reports_the_death() {
    loom::model(|| {
        let (slot, reply) = CallSlot::for_model::<u32>();
        let dropper = loom::thread::spawn(move || drop(reply));
        let monitor = slot.clone();
        let death = loom::thread::spawn(move || {
            monitor.answer(Answer::CalleeDied(ExitReason::Killed));
        });
        let got = slot.wait_for_model(true);
        dropper.join().unwrap();
        death.join().unwrap();
        assert!(matches!(got, Some(Answer::CalleeDied(ExitReason::Killed))));
    });
}

/// Where the keeper puts the reply it receives, for a thread of the model to answer.
type Kept = Arc<(Mutex<Option<Reply<u32>>>, Condvar)>;

/// A callee that hands the reply of the call it receives to the model, then
/// finishes on its next message (or a cancel).
struct Keeper(Kept);

impl Process for Keeper {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        for event in events {
            match event {
                Event::Message(m) => match m.payload.downcast::<Request<u32, u32>>() {
                    Ok(Request { reply, .. }) => {
                        *self.0 .0.lock() = Some(reply);
                        self.0 .1.notify_all();
                    }
                    Err(_) => {
                        out.set_status(Status::Done(Payload::unit()));
                        return Ok(());
                    }
                },
                Event::Cancel => {
                    out.set_status(Status::Done(Payload::unit()));
                    return Ok(());
                }
                Event::Completion(_) => {}
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }
}

/// Calls `callee` (no timeout) and finishes with what came of it: the outcome's
/// text, or "cancelled" (withdrawing the call) if a cancel comes first.
struct CallOnce {
    callee: Pid,
    called: bool,
}

impl Process for CallOnce {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if !std::mem::replace(&mut self.called, true) {
            out.yield_command(Tag(1), Call::new::<u32, u32>(self.callee, 1, None));
        }
        for event in events {
            let said = match event {
                Event::Completion(c) => {
                    let answer: CallAnswer = c.result.unwrap().downcast().unwrap();
                    match answer.into_result::<u32, u32>() {
                        Ok(_) => "replied",
                        Err(CallError::CalleeDied { .. }) => "died",
                        Err(other) => panic!("{other}"),
                    }
                }
                Event::Cancel => {
                    out.withdraw(Tag(1));
                    "cancelled"
                }
                Event::Message(_) => continue,
            };
            out.set_status(Status::Done(Payload::new(said)));
            return Ok(());
        }
        out.set_status(Status::WaitingForYields);
        Ok(())
    }
}

/// Starts a keeper and a caller calling it, and waits until the keeper holds the
/// reply: the scheduler, the keeper, the caller and the reply.
fn call_held() -> (Scheduler, Pid, Pid, Reply<u32>) {
    let s = Scheduler::builder().workers(1).build().unwrap();
    let kept: Kept = Arc::new((Mutex::new(None), Condvar::new()));
    let keeper = s.spawn(Keeper(kept.clone()), "run", ()).unwrap();
    let caller = s
        .spawn(
            CallOnce {
                callee: keeper,
                called: false,
            },
            "run",
            (),
        )
        .unwrap();
    let mut held = kept.0.lock();
    while held.is_none() {
        kept.1.wait(&mut held);
    }
    let reply = held.take().unwrap();
    drop(held);
    (s, keeper, caller, reply)
}

/// What a finished model must leave: no monitor, no timer.
fn check_clean(s: &Scheduler) {
    // Before the shutdown, which would release any timer left.
    assert_eq!(s.metrics().pending_timers, 0, "a timer left");
    s.shutdown(Duration::ZERO);
    assert_eq!(
        s.handle().shared().monitors().entries(),
        0,
        "a monitor left"
    );
}

#[test]
fn a_reply_racing_the_death_of_the_callee_answers_the_calling_process_once() {
    loom::model(|| {
        let (s, keeper, caller, reply) = call_held();
        let replier = loom::thread::spawn(move || reply.send(2));
        s.send(keeper, ()).unwrap();
        let said: &str = s.wait(caller).unwrap().downcast().unwrap();
        let sent = replier.join().unwrap();
        assert_eq!(
            said == "replied",
            sent,
            "the replier is told whether it answered"
        );
        check_clean(&s);
    });
}

#[test]
fn a_reply_racing_the_cancel_of_the_caller_is_taken_at_most_once() {
    loom::model(|| {
        let (s, keeper, caller, reply) = call_held();
        let replier = loom::thread::spawn(move || reply.send(2));
        // Refused when the reply finished the caller first.
        let _ = s.cancel(caller);
        let said: &str = s.wait(caller).unwrap().downcast().unwrap();
        let sent = replier.join().unwrap();
        // A refused reply means the caller gave up; a taken one may still come after
        // the caller saw its cancel (then it is dropped with the ended caller).
        assert!(said == "cancelled" || sent, "{said}, sent: {sent}");
        // The callee lives on: the call's monitor on it is gone all the same.
        assert_eq!(
            s.handle().shared().monitors().entries(),
            0,
            "a monitor left"
        );
        s.send(keeper, ()).unwrap();
        s.wait(keeper).unwrap();
        check_clean(&s);
    });
}
