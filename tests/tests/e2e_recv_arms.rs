//! `recv!` with arms, Erlang's `receive`: several types, each with a pattern and a
//! guard, and a timeout arm, in one suspension point. A message no arm takes stays
//! queued, in order; a guard that refuses leaves its message queued; the timeout arm
//! runs only when nothing matched; bindings are values in guards and bodies; the
//! harness drives it step by step.

use std::time::Duration;

use wsched::command::Sleep;
use wsched::prelude::*;
use wsched::testing::{TestProcess, TestStatus};
use wsched::{Down, ExitReason, MonitorRef, Scheduler};

const PATIENCE: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq)]
struct Report {
    id: u32,
    text: String,
}

struct Go;

/// Receives with arms, then everything left, and finishes with what it saw.
struct Picky;

#[process]
impl Picky {
    #[entry]
    fn run(&mut self) -> Result<Vec<String>, BoxError> {
        let mut seen = Vec::new();
        // Waits for `Go` alone: every other message stays queued.
        recv!(Go)?;
        for _ in 0..2 {
            let line = recv! {
                Report { id, text } if id > 10 => format!("big report {id}: {text}"),
                n: u32 if n % 2 == 0 => format!("even {n}"),
                after(Duration::from_secs(3600)) => "timeout".to_owned(),
            }?;
            seen.push(line);
        }
        // The rest, in arrival order.
        while let Ok(message) = recv!(timeout = Duration::ZERO) {
            if let Some(report) = message.payload.downcast_ref::<Report>() {
                seen.push(format!("left: report {}", report.id));
            } else if let Some(n) = message.payload.downcast_ref::<u32>() {
                seen.push(format!("left: {n}"));
            }
        }
        Ok(seen)
    }
}

#[test]
fn the_first_message_an_arm_takes_is_received_and_the_rest_stay_in_order() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let pid = s.spawn(Picky, "run", ()).unwrap();
    let small = Report {
        id: 3,
        text: "small".into(),
    };
    let big = Report {
        id: 42,
        text: "big".into(),
    };
    s.send(pid, small).unwrap(); // a guard refuses it: stays
    s.send(pid, 7_u32).unwrap(); // a guard refuses it: stays
    s.send(pid, big).unwrap(); // taken first: the oldest an arm takes
    s.send(pid, "unrelated").unwrap(); // no arm's type: stays
    s.send(pid, 8_u32).unwrap(); // taken second
    s.send(pid, 9_u32).unwrap();
    s.send(pid, Go).unwrap();
    let seen: Vec<String> = s.wait_timeout(pid, PATIENCE).unwrap().downcast().unwrap();
    assert_eq!(
        seen,
        [
            "big report 42: big",
            "even 8",
            "left: report 3",
            "left: 7",
            "left: 9"
        ]
    );
}

/// Waits for one monitor's `Down`, with a timeout.
struct Watcher;

#[process]
impl Watcher {
    #[entry]
    fn run(&mut self, target: Pid, others: Vec<Pid>) -> Result<String, BoxError> {
        for other in others {
            this::monitor(other);
        }
        let watched: MonitorRef = this::monitor(target);
        let outcome = recv! {
            Down { monitor, reason, .. } if monitor == watched => format!("target ended: {reason}"),
            after(Duration::from_millis(1)) => "still running".to_owned(),
        }?;
        Ok(outcome)
    }
}

/// Ends when told.
struct Sleeper;

#[process]
impl Sleeper {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        recv!(&'static str)?;
        Ok(())
    }
}

#[test]
fn a_pattern_binds_fields_and_the_timeout_arm_runs_only_when_nothing_matched() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let target = s.spawn(Sleeper, "run", ()).unwrap();
    let other = s.spawn(Sleeper, "run", ()).unwrap();
    // The other process's `Down` comes first; it matches no arm (its guard refuses):
    // the timeout arm runs.
    s.send(other, "end").unwrap();
    let watcher = s.spawn(Watcher, "run", (target, vec![other])).unwrap();
    let outcome: String = s
        .wait_timeout(watcher, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    assert_eq!(outcome, "still running");

    // The target has ended: its `Down` is taken at once, whatever the timeout.
    let ended = s.monitor(target);
    s.send(target, "end").unwrap();
    ended.wait_timeout(PATIENCE).expect("the target ended");
    let watcher = s
        .spawn(Watcher, "run", (target, Vec::<Pid>::new()))
        .unwrap();
    let outcome: String = s
        .wait_timeout(watcher, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    assert_eq!(
        outcome,
        format!("target ended: {}", ExitReason::NoSuchProcess)
    );
}

/// Counts until a `Stop`; its bodies suspend and use `?`.
struct Counter {
    total: u64,
}

#[process]
impl Counter {
    #[entry]
    fn run(&mut self) -> Result<u64, BoxError> {
        loop {
            let stop = recv! {
                mut n: u64 if n > 0 => {
                    n -= 1;
                    yield_cmd!(Sleep(Duration::from_millis(1)))?;
                    self.total += n;
                    false
                }
                Stop => true,
            }?;
            if stop {
                return Ok(self.total);
            }
        }
    }
}

struct Stop;

#[test]
fn the_harness_drives_a_receive_with_arms_step_by_step() {
    let mut t = TestProcess::start(Counter { total: 0 }, "run", ()).unwrap();
    assert_eq!(t.status(), TestStatus::WaitingForMessage);
    // Refused by the guard: stays, and the receive keeps waiting.
    t.send(0_u64);
    assert_eq!(t.status(), TestStatus::WaitingForMessage);
    t.send(5_u64);
    // The body runs in the entry: it suspends on its yield.
    let (tag, _) = t.expect_yield::<Sleep>();
    t.complete(tag, ());
    assert_eq!(t.status(), TestStatus::WaitingForMessage);
    t.send(Stop);
    assert_eq!(t.status(), TestStatus::Done);
    assert_eq!(t.result::<u64>(), 4);
}

#[test]
fn a_cancel_ends_a_receive_with_arms_with_an_error() {
    let mut t = TestProcess::start(Counter { total: 0 }, "run", ()).unwrap();
    t.cancel();
    assert_eq!(t.status(), TestStatus::Failed);
}
