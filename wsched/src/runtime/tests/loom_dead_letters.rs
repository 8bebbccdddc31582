//! loom model of a send racing the end of its target, on the real scheduler (its
//! worker on a loom thread): the message is read by the process, handed to the
//! dead-letter hook, or given back to its sender — exactly one of the three.
//! `dead_letters.rs` explains why (the end drains and closes the mailbox in one pass
//! under its lock); draining and closing in two passes fails the model.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::process::{Event, Events, Process, Status, StepOutput};
use crate::error::{InitError, StepError};
use crate::payload::{Payload, Payloads};
use crate::{Context, Scheduler};

/// Finishes on its first step with a `&str` message, counting the `u32`s it read.
struct ReadsOnce(Arc<AtomicUsize>);

impl Process for ReadsOnce {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let mut woken = false;
        for event in events {
            if let Event::Message(m) = event {
                if m.payload.is::<u32>() {
                    self.0.fetch_add(1, Ordering::SeqCst);
                } else {
                    woken = true;
                }
            }
        }
        out.set_status(if woken {
            Status::Done(Payload::unit())
        } else {
            Status::WaitingForMessage
        });
        Ok(())
    }
}

#[test]
fn a_send_racing_the_end_is_read_dead_lettered_or_returned_exactly_once() {
    loom::model(|| {
        // Statistics from std: read after every thread has finished.
        let read = Arc::new(AtomicUsize::new(0));
        let dead = Arc::new(AtomicUsize::new(0));
        let counted = dead.clone();
        let s = Scheduler::builder()
            .workers(1)
            .on_dead_letter(move |letter| {
                assert!(letter.payload.is::<u32>());
                counted.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        let pid = s.spawn(ReadsOnce(read.clone()), "run", ()).unwrap();
        let handle = s.handle();
        let sender = loom::thread::spawn(move || handle.send(pid, 1_u32).is_err());
        s.send(pid, "stop").unwrap();
        s.wait(pid).unwrap();
        let returned = usize::from(sender.join().unwrap());
        s.shutdown(Duration::ZERO);
        let (read, dead) = (read.load(Ordering::SeqCst), dead.load(Ordering::SeqCst));
        assert_eq!(
            read + dead + returned,
            1,
            "read {read}, dead-lettered {dead}, returned {returned}"
        );
        assert_eq!(s.metrics().dead_letters, dead as u64);
    });
}
