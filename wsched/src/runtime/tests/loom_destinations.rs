//! loom model of a worker's destination table holding a cell (`worker.rs`,
//! `Destinations`): the real scheduler, its worker on a loom thread. A process
//! sends twice in a row to another, so the worker's entry for that PID holds its
//! cell (a counted reference); the other process then ends, its result is claimed
//! (the PID table lets go of the cell) and the model drops the last other reference
//! it held, while the worker sends to the ended process again through the entry.
//! That send must find the cell alive and its mailbox closed ("finished"), and the
//! cell must be freed exactly once, when the worker exits and drops its table:
//! loom's allocator panics on a second free and reports a cell never freed. An
//! entry that held the cell without a count of its own fails the model.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::process::{Events, Process, Status, StepOutput};
use crate::error::{InitError, SendErrorKind, StepError};
use crate::payload::{Payload, Payloads};
use crate::pid::Pid;
use crate::runtime::tests::UntilMessage;
use crate::{Context, Scheduler};

/// First step: sends to `to` twice (the worker's entry for `to` holds its cell
/// from the second send). Next step (woken by the model once `to` has ended): sends
/// once more, and finishes with whether that send found `to` finished.
struct SendsThrough {
    to: Pid,
    ctx: Option<Context>,
    sent: bool,
    refused: Arc<AtomicUsize>,
}

impl Process for SendsThrough {
    fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("init ran");
        if !self.sent {
            self.sent = true;
            ctx.send(self.to, ()).map_err(StepError::new)?;
            ctx.send(self.to, ()).map_err(StepError::new)?;
            out.set_status(Status::WaitingForMessage);
            return Ok(());
        }
        match ctx.send(self.to, ()) {
            Err(e) if e.kind() == SendErrorKind::Finished => {
                self.refused.fetch_add(1, Ordering::SeqCst);
            }
            other => panic!("a send to an ended process: {other:?}"),
        }
        out.set_status(Status::Done(Payload::unit()));
        Ok(())
    }
}

#[test]
fn a_cell_held_by_a_destination_entry_outlives_its_process_and_is_freed_once() {
    loom::model(|| {
        let s = Scheduler::builder().workers(1).build().unwrap();
        let target = s.spawn(UntilMessage, "run", ()).unwrap();
        // A reference of the model's own, dropped while the worker uses the entry.
        let cell = s.handle().shared().cell_of(target).unwrap();
        let refused = Arc::new(AtomicUsize::new(0));
        let sender = s
            .spawn(
                SendsThrough {
                    to: target,
                    ctx: None,
                    sent: false,
                    refused: refused.clone(),
                },
                "run",
                (),
            )
            .unwrap();
        // Ended and claimed: the PID table has let go of the cell.
        s.wait(target).unwrap();
        s.send(sender, ()).unwrap();
        drop(cell);
        s.wait(sender).unwrap();
        assert_eq!(refused.load(Ordering::SeqCst), 1);
        let report = s.shutdown(Duration::ZERO);
        assert!(report.stopped.is_empty(), "{report:?}");
    });
}
