//! `#[process]` processes with monitors (`this::monitor`, `this::demonitor`,
//! `recv!(Down)`), on the real scheduler and step by step in the testing harness.

use std::time::Duration;

use wsched::prelude::*;
use wsched::testing::TestProcess;
use wsched::{Phase, Scheduler};

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
    /// Waits for an order: "ok" finishes, anything else fails, "panic" panics.
    #[entry]
    fn work(&mut self) -> Result<(), BoxError> {
        match recv!(&str)? {
            "ok" => Ok(()),
            "panic" => panic!("worker panicked on purpose"),
            other => Err(format!("bad order {other:?}").into()),
        }
    }
}

struct Overseer;

#[process]
impl Overseer {
    /// Monitors `worker`, orders it, and returns the reason in its `Down`. Selective
    /// receive: a `String` already in the mailbox stays for later, and comes after.
    #[entry]
    fn oversee(
        &mut self,
        worker: Pid,
        order: &'static str,
    ) -> Result<(ExitReason, String), BoxError> {
        let monitor = this::monitor(worker);
        this::send(this::pid(), "a note to self".to_string())?;
        this::send(worker, order)?;
        let down = recv!(Down)?;
        assert_eq!((down.pid, down.monitor), (worker, monitor));
        let note = recv!(String)?;
        Ok((down.reason, note))
    }

    /// Monitors `worker` and demonitors at once; returns whether that stopped it.
    #[entry]
    fn give_up(&mut self, worker: Pid) -> Result<bool, BoxError> {
        let monitor = this::monitor(worker);
        Ok(this::demonitor(monitor))
    }

    /// Monitors a PID that never existed.
    #[entry]
    fn watch_nobody(&mut self) -> Result<ExitReason, BoxError> {
        let nobody = Pid::from_raw(u64::MAX);
        this::monitor(nobody);
        Ok(recv!(Down)?.reason)
    }
}

fn oversee(s: &Scheduler, order: &'static str) -> (ExitReason, String) {
    let worker = s.spawn(Worker, "work", ()).unwrap();
    let overseer = s.spawn(Overseer, "oversee", (worker, order)).unwrap();
    s.wait_timeout(overseer, WAIT)
        .unwrap()
        .downcast::<(ExitReason, String)>()
        .unwrap()
}

#[test]
fn an_overseer_receives_the_down_of_its_worker_with_the_reason() {
    let s = scheduler();
    let (reason, note) = oversee(&s, "ok");
    assert_eq!(
        (reason, note.as_str()),
        (ExitReason::Normal, "a note to self")
    );
    assert_eq!(
        oversee(&s, "dance").0,
        ExitReason::Error {
            message: "bad order \"dance\"".into()
        }
    );
    assert_eq!(
        oversee(&s, "panic").0,
        ExitReason::Panicked {
            phase: Phase::Step,
            message: "worker panicked on purpose".into()
        }
    );
    let nobody = s.spawn(Overseer, "watch_nobody", ()).unwrap();
    let reason = s.wait_timeout(nobody, WAIT).unwrap();
    assert_eq!(
        reason.downcast::<ExitReason>().unwrap(),
        ExitReason::NoSuchProcess
    );
    s.shutdown(WAIT);
}

#[test]
fn a_demonitor_before_the_end_stops_the_down() {
    let s = scheduler();
    let worker = s.spawn(Worker, "work", ()).unwrap();
    let overseer = s.spawn(Overseer, "give_up", (worker,)).unwrap();
    let stopped = s.wait_timeout(overseer, WAIT).unwrap();
    assert!(
        stopped.downcast::<bool>().unwrap(),
        "the worker is still waiting"
    );
    s.send(worker, "ok").unwrap();
    s.wait_timeout(worker, WAIT).unwrap();
    s.shutdown(WAIT);
}

#[test]
fn the_harness_plays_a_down_step_by_step() {
    let worker = Pid::from_raw(42);
    let mut t = TestProcess::start(Overseer, "oversee", (worker, "ok")).unwrap();
    let monitored = t.take_monitors();
    assert_eq!(monitored.len(), 1);
    assert_eq!(
        (monitored[0].watcher, monitored[0].target),
        (t.pid(), worker)
    );
    assert!(t.is_monitoring(monitored[0].monitor));
    // The note and the order went out (the harness records sends, even to self).
    let mut sent = t.take_sent();
    assert_eq!(sent.len(), 2);
    let note = sent.remove(0);
    assert_eq!(note.to, t.pid());
    t.send_from(note.from, note.payload);
    assert!(
        !t.is_ended(),
        "waits for its Down, the note left in its mailbox"
    );
    // Another message first: selective receive keeps waiting for the Down.
    t.send_from(Some(worker), "chatter");
    assert!(!t.is_ended());
    t.send_from(Some(worker), monitored[0].down(ExitReason::Killed));
    let (reason, note) = t.result::<(ExitReason, String)>();
    assert_eq!(
        (reason, note.as_str()),
        (ExitReason::Killed, "a note to self")
    );

    let mut t = TestProcess::start(Overseer, "give_up", (worker,)).unwrap();
    let monitored = t.take_monitors().remove(0);
    assert!(t.result::<bool>());
    assert!(!t.is_monitoring(monitored.monitor), "demonitored");
}
