//! loom models of links racing the ends of the linked processes, on the real
//! scheduler (`links.rs` explains the protocol). A link made while the other process
//! ends gets exactly one signal (a linker that traps exits gets exactly one `Exit`:
//! from the end, or "no such process" from the link itself); without the link's pass
//! through the other's mailbox lock the model fails (the trapper never hears of the
//! end, and the model cannot finish). Two linked processes failing at
//! once each end once, with their own reason or the other's, and leave nothing in the
//! table (one is stopped from another thread, as shutdown's sweep does, while the
//! other fails on the worker).

use std::time::Duration;

use crate::engine::process::{Event, Events, Process, Status, StepOutput};
use crate::error::{InitError, StepError};
use crate::exit::ExitReason;
use crate::payload::{Payload, Payloads};
use crate::runtime::tests::UntilMessage;
use crate::runtime::Exit;
use crate::{Context, Scheduler};

/// Finishes on its first step with `Exit`s, with how many it got in that step.
struct UntilExit;

impl Process for UntilExit {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let exits = events
            .into_iter()
            .filter(|e| matches!(e, Event::Message(m) if m.payload.is::<Exit>()))
            .count();
        if exits > 0 {
            out.set_status(Status::Done(Payload::new(exits)));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    }
}

#[test]
fn a_link_racing_the_end_of_the_other_gets_exactly_one_signal() {
    loom::model(|| {
        let s = Scheduler::builder().workers(1).build().unwrap();
        let target = s.spawn(UntilMessage, "run", ()).unwrap();
        let trapper = s.spawn(UntilExit, "run", ()).unwrap();
        let handle = s.handle();
        handle.shared().monitors().trap_exits(trapper, true);
        // The trapper's own `link`, as if made in a step on another worker.
        let linking = loom::thread::spawn(move || {
            let shared = handle.shared();
            shared.monitors().link(shared, trapper, target);
        });
        s.send(target, ()).unwrap();
        linking.join().unwrap();
        // With no signal the trapper never finishes: the model fails (it cannot end).
        let exits = s.wait(trapper).unwrap().downcast::<usize>().unwrap();
        assert_eq!(exits, 1, "one Exit, from the end or from the link");
        s.shutdown(Duration::ZERO);
        assert_eq!(s.handle().shared().monitors().entries(), 0);
    });
}

/// Fails on its first message.
struct FailOnMessage;

impl Process for FailOnMessage {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if events.into_iter().next().is_some() {
            return Err(StepError::new("failed"));
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }
}

#[test]
fn two_linked_processes_ending_at_once_end_once_each() {
    loom::model(|| {
        let s = Scheduler::builder().workers(1).build().unwrap();
        let a = s.spawn(FailOnMessage, "run", ()).unwrap();
        let b = s.spawn(FailOnMessage, "run", ()).unwrap();
        let handle = s.handle();
        let shared = handle.shared();
        shared.monitors().link_spawned(a, b);
        let b_cell = shared.live_cell(b).unwrap();
        // `b` is stopped from another thread (as shutdown's sweep would) while `a`
        // fails on the worker.
        let stopping = loom::thread::spawn(move || {
            handle.shared().stop_linked(vec![b_cell]);
        });
        // Refused if `b`'s stop took `a` down first.
        let _ = s.send(a, ());
        stopping.join().unwrap();
        let failed = ExitReason::Error {
            message: "failed".into(),
        };
        let reason_a = s.wait(a).unwrap_err().exit_reason().unwrap();
        let reason_b = s.wait(b).unwrap_err().exit_reason().unwrap();
        let linked = |pid, reason: &ExitReason| ExitReason::Linked {
            pid,
            reason: Box::new(reason.clone()),
        };
        assert!(
            reason_a == failed || reason_a == linked(b, &ExitReason::Killed),
            "{reason_a}"
        );
        assert!(
            reason_b == ExitReason::Killed || reason_b == linked(a, &failed),
            "{reason_b}"
        );
        s.shutdown(Duration::ZERO);
        assert_eq!(s.handle().shared().monitors().entries(), 0);
    });
}
