//! Exit reasons of `#[process]` processes on the real scheduler: each way an entry can
//! end gives the reason a join error (and a monitor, see `e2e_monitors.rs`) reports.

use std::time::Duration;

use wsched::prelude::*;
use wsched::{ExitReason, Phase, Scheduler};

const WAIT: Duration = Duration::from_secs(20);

struct Ends;

#[process]
impl Ends {
    #[entry]
    fn finish(&mut self) -> Result<u32, BoxError> {
        Ok(7)
    }

    #[entry]
    fn fail(&mut self) -> Result<u32, BoxError> {
        Err("the disk is full".into())
    }

    #[entry]
    fn panic(&mut self) -> Result<u32, BoxError> {
        panic!("out of cheese")
    }

    /// Waits for a message and passes a cancellation on with `?`.
    #[entry]
    fn wait(&mut self) -> Result<u32, BoxError> {
        recv!(u32)?;
        Ok(0)
    }

    /// Ignores cancellations: only shutdown's forced stop ends it.
    #[entry]
    fn linger(&mut self) -> Result<u32, BoxError> {
        loop {
            match recv!(u32) {
                Err(e) if e.is_cancelled() => continue,
                other => return Ok(other?),
            }
        }
    }
}

fn reason_of(s: &Scheduler, entry: &str) -> Option<ExitReason> {
    let pid = s.spawn(Ends, entry, ()).unwrap();
    if entry == "wait" {
        s.cancel(pid).unwrap();
    }
    match s.wait_timeout(pid, WAIT) {
        Ok(_) => Some(ExitReason::Normal),
        Err(error) => error.exit_reason(),
    }
}

#[test]
fn every_way_an_entry_ends_has_its_reason() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    assert_eq!(reason_of(&s, "finish"), Some(ExitReason::Normal));
    assert_eq!(
        reason_of(&s, "fail"),
        Some(ExitReason::Error {
            message: "the disk is full".into()
        })
    );
    assert_eq!(
        reason_of(&s, "panic"),
        Some(ExitReason::Panicked {
            phase: Phase::Step,
            message: "out of cheese".into()
        })
    );
    assert_eq!(reason_of(&s, "wait"), Some(ExitReason::Cancelled));
    s.shutdown(WAIT);
}

#[test]
fn a_process_stopped_by_shutdown_was_killed() {
    let s = Scheduler::builder().workers(1).build().unwrap();
    let pid = s.spawn(Ends, "linger", ()).unwrap();
    let report = s.shutdown(Duration::ZERO);
    assert_eq!(report.stopped, vec![pid]);
    let error = s.wait_timeout(pid, WAIT).unwrap_err();
    assert_eq!(error.exit_reason(), Some(ExitReason::Killed));
}
