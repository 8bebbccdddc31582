//! loom model of a timed message's cancel racing its firing, on the real scheduler
//! and timer service (their worker and timer threads on loom threads, the timer
//! service on a stepping clock, so a message armed "due now" is due by the time the
//! timer thread looks). `services/timed.rs` explains the protocol: the timer thread
//! holds the message's lock from its "still armed?" check until the message is in
//! the mailbox and the interval re-armed; a cancel marks it under that lock, then
//! unlinks it from the wheel.

use std::time::Duration;

use crate::engine::process::{Event, Events, Process, Status, StepOutput};
use crate::error::{InitError, StepError};
use crate::payload::{Payload, Payloads};
use crate::services::timed;
use crate::time::timed_ref::Repeat;
use crate::time::timer::Clock;
use crate::{Context, Scheduler};

/// Counts its `()` messages; finishes with the count on a `&str` message.
struct Counter(u64);

impl Process for Counter {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        for event in events {
            match event {
                Event::Message(m) if m.payload.is::<()>() => self.0 += 1,
                Event::Message(_) => {
                    out.set_status(Status::Done(Payload::new(self.0)));
                    return Ok(());
                }
                Event::Cancel | Event::Completion(_) => {}
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }
}

/// Far enough that the stepping clock never reaches it in a model.
const LATER: Duration = Duration::from_millis(500);

/// An interval due at once (and next only `LATER`) is cancelled while the timer
/// thread may be firing it: the cancel stops it whatever the interleaving, leaves no
/// re-armed timer behind, and at most the one message sent before it arrives. (A
/// probe message armed after the cancel, and fired after whatever the timer thread
/// had in hand, tells when to look at the wheel.)
#[test]
fn a_cancel_racing_an_interval_that_fires_stops_it_for_good() {
    let mut model = loom::model::Builder::new();
    // Three threads (this one, the worker, the timer thread). Two preemptions are what
    // the race takes: this thread stopped before its cancel, the timer thread stopped
    // in the middle of firing. (A variant that re-arms after letting go of the
    // message's lock fails here, and passes at one.)
    model.preemption_bound = Some(2);
    model.check(|| {
        let s = Scheduler::builder()
            .workers(1)
            .timer_clock(Clock::stepping())
            .build()
            .unwrap();
        let pid = s.spawn(Counter(0), "run", ()).unwrap();
        let timer = timed::arm(
            &s.handle(),
            None,
            pid,
            Duration::ZERO,
            Repeat::every((), LATER),
        )
        .unwrap();
        assert!(timer.cancel(), "a running interval is stopped by a cancel");
        assert!(!timer.is_active());
        timed::arm(
            &s.handle(),
            None,
            pid,
            Duration::ZERO,
            Repeat::once("probe"),
        )
        .unwrap();
        let messages = s.wait(pid).unwrap().downcast::<u64>().unwrap();
        assert!(messages <= 1, "{messages} messages");
        assert_eq!(
            s.metrics().pending_timers,
            0,
            "a timer re-armed after the cancel"
        );
        s.shutdown(Duration::ZERO);
        let metrics = s.metrics();
        assert_eq!(
            (metrics.pending_timers, metrics.undelivered_timed_messages),
            (0, 0)
        );
    });
}
