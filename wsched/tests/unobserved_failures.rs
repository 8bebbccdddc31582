//! Unobserved failures: a detached process that fails with nothing monitoring or
//! linked to it reaches `Builder::on_unobserved_failure` once (and the metrics);
//! observed failures (joined, monitored, linked, trapped) and non-failures (normal
//! ends, cancellations) do not; a joinable failure never claimed (nor monitored or
//! linked) is reported when the scheduler is dropped; a panicking hook does not take a worker down.

mod support;

use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use support::{quiet_expected_panics, Scripted};
use wsched::{Event, ExitReason, FailureReport, Payload, Phase, Pid, Scheduler, Status, StepError};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

/// A scheduler whose reports arrive on the returned channel.
fn reporting(workers: usize) -> (Scheduler, Receiver<FailureReport>) {
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let s = Scheduler::builder()
        .workers(workers)
        .on_unobserved_failure(move |report| {
            let _ = tx.lock().unwrap().send(report.clone());
        })
        .build()
        .expect("scheduler starts");
    (s, rx)
}

/// Waits for a message: finishes on "stop", fails on "fail", panics on "panic".
fn target() -> Scripted {
    Scripted::new(|_, events, out| {
        for event in events {
            if let Event::Message(m) = event {
                match m.payload.downcast::<&str>() {
                    Ok("stop") => {
                        out.set_status(Status::Done(Payload::unit()));
                        return Ok(());
                    }
                    Ok("fail") => return Err(StepError::new("told to fail")),
                    Ok("panic") => panic!("unobserved test: told to panic"),
                    _ => {}
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

fn failed(message: &str) -> ExitReason {
    ExitReason::Error {
        message: message.into(),
    }
}

/// Waits until `done` holds of the metrics (a hang guard, not a sleep).
fn until(s: &Scheduler, done: impl Fn(&wsched::Metrics) -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !done(&s.metrics()) {
        assert!(std::time::Instant::now() < deadline, "timed out waiting");
        std::thread::yield_now();
    }
}

#[test]
fn a_detached_failure_nobody_watches_is_reported_once_with_pid_entry_and_reason() {
    quiet_expected_panics("unobserved test");
    let (s, reports) = reporting(2);
    for (order, reason) in [
        ("fail", failed("told to fail")),
        (
            "panic",
            ExitReason::Panicked {
                phase: Phase::Step,
                message: "unobserved test: told to panic".into(),
            },
        ),
    ] {
        let pid = s.spawn_detached(target(), "run", ()).unwrap();
        s.send(pid, order).unwrap();
        let report = reports.recv_timeout(PATIENCE).expect("a report comes");
        assert_eq!((report.pid, &*report.entry), (pid, "run"));
        assert_eq!(report.reason, reason);
        assert!(!report.unclaimed);
        let text = report.to_string();
        assert!(
            text.starts_with(&format!("process Scripted::run {pid} ")),
            "{text}"
        );
    }
    assert_eq!(s.metrics().unobserved_failures, 2);
    drop(s);
    assert!(reports.try_recv().is_err(), "each failure is reported once");
}

#[test]
fn normal_ends_cancellations_and_shutdown_kills_are_not_failures() {
    let (s, reports) = reporting(1);
    let done = s.spawn_detached(target(), "run", ()).unwrap();
    s.send(done, "stop").unwrap();
    until(&s, |m| m.finished == 1);
    let cancelled = s
        .spawn_detached(
            Scripted::new(|_, events, out| {
                if events.iter().any(|e| matches!(e, Event::Cancel)) {
                    return Err(StepError::new(wsched::RecvError::Cancelled));
                }
                out.set_status(Status::WaitingForMessage);
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    s.cancel(cancelled).unwrap();
    until(&s, |m| m.failed == 1);
    // Still waiting when shutdown's timeout runs out: killed.
    let _killed = s.spawn_detached(support::Stubborn, "run", ()).unwrap();
    let report = s.shutdown(Duration::ZERO);
    assert_eq!(report.stopped.len(), 1);
    assert_eq!(s.metrics().unobserved_failures, 0);
    drop(s);
    assert!(reports.try_recv().is_err());
}

#[test]
fn monitored_and_joined_failures_are_observed() {
    let (s, reports) = reporting(2);
    let watched = s.spawn_detached(target(), "run", ()).unwrap();
    let monitor = s.monitor(watched);
    s.send(watched, "fail").unwrap();
    assert_eq!(
        monitor.wait_timeout(PATIENCE).expect("a Down").reason,
        failed("told to fail")
    );
    let joined = s.spawn(target(), "run", ()).unwrap();
    s.send(joined, "fail").unwrap();
    assert!(s.wait_timeout(joined, PATIENCE).is_err());
    drop(s);
    assert!(reports.try_recv().is_err(), "both were observed");
}

#[test]
fn a_demonitored_failure_is_reported() {
    let (s, reports) = reporting(2);
    let pid = s.spawn_detached(target(), "run", ()).unwrap();
    drop(s.monitor(pid)); // dropping a thread's monitor demonitors
    s.send(pid, "fail").unwrap();
    let report = reports.recv_timeout(PATIENCE).expect("a report comes");
    assert_eq!(report.pid, pid);
}

/// Spawns a detached child linked to it (trapping exits if `trap`), tells the
/// child to fail, and then waits: finishes on the child's `Exit`.
fn linking_parent(trap: bool) -> Scripted {
    let mut child = None;
    Scripted::new(move |ctx, events, out| {
        if child.is_none() {
            ctx.trap_exits(trap);
            let pid = ctx.spawn_linked(target(), "run", ()).unwrap();
            ctx.send(pid, "fail").unwrap();
            child = Some(pid);
        }
        for event in events {
            if let Event::Message(m) = event {
                if let Ok(exit) = m.payload.downcast::<wsched::Exit>() {
                    out.set_status(Status::Done(Payload::new(exit.pid)));
                    return Ok(());
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn a_failure_trapped_by_a_link_is_observed() {
    let (s, reports) = reporting(2);
    let parent = s.spawn(linking_parent(true), "run", ()).unwrap();
    let child: Pid = s
        .wait_timeout(parent, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    assert_ne!(child, parent);
    drop(s);
    assert!(reports.try_recv().is_err(), "the Exit observed the failure");
}

#[test]
fn a_chain_of_links_nobody_watches_is_reported_once_by_its_last_member() {
    let (s, reports) = reporting(2);
    // The parent does not trap: the child's failure stops it; nothing watches the
    // parent (detached), so its linked stop is reported, carrying the root reason.
    let parent = s.spawn_detached(linking_parent(false), "run", ()).unwrap();
    let report = reports.recv_timeout(PATIENCE).expect("a report comes");
    assert_eq!(report.pid, parent);
    match &report.reason {
        ExitReason::Linked { reason, .. } => assert_eq!(**reason, failed("told to fail")),
        other => panic!("{other:?}"),
    }
    drop(s);
    assert!(
        reports.try_recv().is_err(),
        "the child's failure was observed by its link"
    );
}

#[test]
fn a_joinable_failure_never_claimed_is_reported_when_the_scheduler_is_dropped() {
    let (s, reports) = reporting(2);
    let pid = s.spawn(target(), "run", ()).unwrap();
    s.send(pid, "fail").unwrap();
    // A monitored one is observed by its `Down`: not reported at drop.
    let watched = s.spawn(target(), "run", ()).unwrap();
    let monitor = s.monitor(watched);
    s.send(watched, "fail").unwrap();
    monitor.wait_timeout(PATIENCE).expect("it ended");
    until(&s, |m| m.failed == 2);
    // Joinable: its result waits to be claimed; nothing is reported yet...
    let finished_ok = s.spawn(target(), "run", ()).unwrap();
    s.send(finished_ok, "stop").unwrap();
    until(&s, |m| m.finished == 1);
    assert!(reports.try_recv().is_err());
    // ...until the scheduler is dropped with the failure unclaimed (the unclaimed
    // success is not a failure).
    drop(s);
    let report = reports.try_recv().expect("reported at drop");
    assert_eq!((report.pid, report.unclaimed), (pid, true));
    assert_eq!(report.reason, failed("told to fail"));
    assert!(report.to_string().contains("claimed"));
    assert!(reports.try_recv().is_err());
}

#[test]
fn a_panicking_hook_does_not_take_a_worker_down() {
    quiet_expected_panics("unobserved test");
    let s = Scheduler::builder()
        .workers(1)
        .on_unobserved_failure(|_| panic!("unobserved test: the hook panics"))
        .build()
        .unwrap();
    for _ in 0..3 {
        let pid = s.spawn_detached(target(), "run", ()).unwrap();
        s.send(pid, "fail").unwrap();
    }
    until(&s, |m| m.unobserved_failures == 3);
    // The one worker still runs processes.
    let pid = s.spawn(target(), "run", ()).unwrap();
    s.send(pid, "stop").unwrap();
    assert!(s.wait_timeout(pid, PATIENCE).is_ok());
}

#[test]
fn the_default_report_is_counted() {
    // The default hook prints to stderr; what can be checked here is the count.
    let s = Scheduler::builder().workers(1).build().unwrap();
    let pid = s.spawn_detached(target(), "run", ()).unwrap();
    s.send(pid, "fail").unwrap();
    until(&s, |m| m.unobserved_failures == 1);
}
