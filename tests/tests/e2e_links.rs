//! `#[process]` processes with links (`this::spawn_linked`, `this::link`,
//! `this::trap_exits`, `recv!(Exit)`, the `Spawn::linked` command), on the real
//! scheduler and step by step in the testing harness.

use std::time::Duration;

use wsched::prelude::*;
use wsched::testing::TestProcess;
use wsched::{ProcessError, Scheduler};

const WAIT: Duration = Duration::from_secs(20);

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .build()
        .expect("scheduler starts")
}

struct Worker;

#[process]
impl Worker {
    /// Fails with `error`, or finishes if it is empty.
    #[entry]
    fn work(&mut self, error: String) -> Result<(), BoxError> {
        if error.is_empty() {
            Ok(())
        } else {
            Err(error.into())
        }
    }
}

struct Boss;

#[process]
impl Boss {
    /// Starts a linked worker and waits for a message that never comes: a failing
    /// worker takes it down.
    #[entry]
    fn fragile(&mut self, error: String) -> Result<(), BoxError> {
        this::spawn_linked(Worker, "work", (error,))?;
        recv!(u32)?;
        Ok(())
    }

    /// Traps exits, starts a linked worker with the `Spawn` command, and returns the
    /// reason in its `Exit`.
    #[entry]
    fn robust(&mut self, error: String) -> Result<ExitReason, BoxError> {
        this::trap_exits(true);
        let worker = yield_cmd!(Spawn::linked(Worker, "work", (error,)))?;
        let exit = recv!(Exit)?;
        assert_eq!(exit.pid, worker);
        Ok(exit.reason)
    }
}

#[test]
fn a_failing_linked_worker_takes_its_boss_down() {
    let s = scheduler();
    let boss = s
        .spawn(Boss, "fragile", ("out of paper".to_string(),))
        .unwrap();
    let error = s.wait_timeout(boss, WAIT).unwrap_err();
    match error.process_error() {
        Some(ProcessError::Linked { reason, .. }) => assert_eq!(
            **reason,
            ExitReason::Error {
                message: "out of paper".into()
            }
        ),
        other => panic!("expected a linked failure, got {other:?}"),
    }
    s.shutdown(WAIT);
}

#[test]
fn a_boss_that_traps_exits_is_told_instead() {
    let s = scheduler();
    for (error, reason) in [
        (
            "out of ink",
            ExitReason::Error {
                message: "out of ink".into(),
            },
        ),
        ("", ExitReason::Normal),
    ] {
        let boss = s.spawn(Boss, "robust", (error.to_string(),)).unwrap();
        let got = s.wait_timeout(boss, WAIT).unwrap();
        assert_eq!(got.downcast::<ExitReason>().unwrap(), reason);
    }
    s.shutdown(WAIT);
}

#[test]
fn the_harness_plays_links_step_by_step() {
    // Not trapping: the worker's failure stops the boss.
    let mut boss = TestProcess::start(Boss, "fragile", ("jam".to_string(),)).unwrap();
    let worker = boss.take_spawned().remove(0);
    assert_eq!(boss.links(), vec![worker.pid]);
    assert!(!boss.traps_exits());
    let worker_pid = worker.pid;
    let worker = TestProcess::from_spawned(worker);
    assert!(worker.is_ended());
    let reason = worker.expect_error().exit_reason();
    assert!(boss.linked_exit(worker_pid, reason));
    match boss.expect_error() {
        ProcessError::Linked { pid, reason } => {
            assert_eq!(*pid, worker_pid);
            assert_eq!(
                **reason,
                ExitReason::Error {
                    message: "jam".into()
                }
            );
        }
        other => panic!("{other}"),
    }

    // Trapping: an Exit message, received like any other.
    let mut boss = TestProcess::start(Boss, "robust", ("jam".to_string(),)).unwrap();
    assert!(boss.traps_exits());
    let (tag, spawn) = boss.take_yield::<Spawn>();
    let worker = boss.from_spawn_command(spawn);
    boss.complete(tag, worker.pid());
    assert_eq!(boss.links(), vec![worker.pid()]);
    assert!(boss.linked_exit(worker.pid(), ExitReason::Killed));
    assert_eq!(boss.result::<ExitReason>(), ExitReason::Killed);
}
