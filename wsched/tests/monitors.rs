//! Monitors: one `Down` per monitor when the target ends, with its reason — from
//! outside (`Handle::monitor`) and from hand-written processes (`Context::monitor`),
//! for targets that end later, have ended, are ending or never existed; several
//! monitors on one target; `demonitor` before and after the end.

mod support;

use std::time::Duration;

use support::{quiet_expected_panics, Scripted, Stubborn};
use wsched::{
    Down, Event, ExitReason, MonitorRef, Payload, Phase, Pid, Scheduler, Status, StepError,
};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("scheduler starts")
}

/// Waits for a message: finishes on "stop", fails on "fail", panics on "panic".
fn target() -> Scripted {
    Scripted::new(|_, events, out| {
        for event in events {
            if let Event::Message(m) = event {
                match m.payload.downcast::<&str>() {
                    Ok("stop") => {
                        out.set_status(Status::Done(Payload::new(1_u32)));
                        return Ok(());
                    }
                    Ok("fail") => return Err(StepError::new("told to fail")),
                    Ok("panic") => panic!("monitors test: told to panic"),
                    _ => {}
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn an_outside_monitor_gets_one_down_with_the_reason() {
    quiet_expected_panics("monitors test");
    let s = scheduler(2);
    for (told, reason) in [
        ("stop", ExitReason::Normal),
        (
            "fail",
            ExitReason::Error {
                message: "told to fail".into(),
            },
        ),
        (
            "panic",
            ExitReason::Panicked {
                phase: Phase::Step,
                message: "monitors test: told to panic".into(),
            },
        ),
    ] {
        let pid = s.spawn(target(), "run", ()).unwrap();
        let monitor = s.monitor(pid);
        assert_eq!(monitor.reference().target(), pid);
        assert_eq!(monitor.try_down(), None, "{pid} is still running");
        s.send(pid, told).unwrap();
        let down = monitor.wait_timeout(PATIENCE).expect("a Down comes");
        assert_eq!(
            down,
            Down {
                pid,
                reason,
                monitor: monitor.reference()
            }
        );
        assert_eq!(monitor.try_down(), Some(down.clone()), "the Down stays");
        // A timeout too long for a deadline is no error.
        assert_eq!(monitor.wait_timeout(Duration::MAX), Some(down));
        assert!(!monitor.demonitor(), "it had fired");
    }
    s.shutdown(PATIENCE);
}

#[test]
fn a_process_that_ended_or_never_existed_gives_no_such_process_at_once() {
    let s = scheduler(1);
    let pid = s.spawn(target(), "run", ()).unwrap();
    s.send(pid, "stop").unwrap();
    s.wait(pid).unwrap();
    for gone in [pid, Pid::from_raw(1_000_000)] {
        let monitor = s.monitor(gone);
        let down = monitor.try_down().expect("delivered during the call");
        assert_eq!((down.pid, down.reason), (gone, ExitReason::NoSuchProcess));
    }
    s.shutdown(PATIENCE);
}

#[test]
fn several_monitors_on_one_target_each_get_their_own_down() {
    let s = scheduler(2);
    let pid = s.spawn(target(), "run", ()).unwrap();
    let monitors: Vec<_> = (0..3).map(|_| s.monitor(pid)).collect();
    s.send(pid, "fail").unwrap();
    let mut seen: Vec<MonitorRef> = monitors
        .iter()
        .map(|m| m.wait_timeout(PATIENCE).expect("a Down comes").monitor)
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3, "three distinct monitors, three Downs");
    s.shutdown(PATIENCE);
}

/// Monitors the PID of its first message (twice), tells `set` it did, and finishes
/// with the `Down`s it got, as (from, down), once it has two.
fn watcher(set: std::sync::mpsc::Sender<()>) -> Scripted {
    let mut downs: Vec<(Option<Pid>, Down)> = Vec::new();
    Scripted::new(move |ctx, events, out| {
        for event in events {
            if let Event::Message(m) = event {
                let from = m.from;
                match m.payload.downcast::<Pid>() {
                    Ok(target) => {
                        ctx.monitor(target);
                        ctx.monitor(target);
                        let _ = set.send(());
                    }
                    Err(payload) => {
                        let down = payload
                            .into_payload()
                            .downcast::<Down>()
                            .expect("only Downs and PIDs");
                        downs.push((from, down));
                    }
                }
            }
        }
        if downs.len() == 2 {
            out.set_status(Status::Done(Payload::new(std::mem::take(&mut downs))));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    })
}

#[test]
fn a_process_gets_each_down_as_a_message_from_the_target_after_its_result() {
    let s = scheduler(2);
    let target_pid = s.spawn(target(), "run", ()).unwrap();
    let (set, monitors_set) = std::sync::mpsc::channel();
    let watcher_pid = s.spawn(watcher(set), "run", ()).unwrap();
    s.send(watcher_pid, target_pid).unwrap();
    monitors_set.recv_timeout(PATIENCE).unwrap();
    s.send(target_pid, "stop").unwrap();
    let downs = s.wait(watcher_pid).unwrap();
    let downs = downs.downcast::<Vec<(Option<Pid>, Down)>>().unwrap();
    assert_eq!(downs.len(), 2);
    assert_ne!(downs[0].1.monitor, downs[1].1.monitor);
    for (from, down) in downs {
        assert_eq!(from, Some(target_pid));
        assert_eq!((down.pid, down.reason), (target_pid, ExitReason::Normal));
    }
    // The result was published before the Downs were sent.
    assert_eq!(
        s.wait_timeout(target_pid, Duration::ZERO)
            .unwrap()
            .downcast::<u32>()
            .unwrap(),
        1
    );
    s.shutdown(PATIENCE);
}

#[test]
fn a_process_monitoring_a_dead_pid_gets_no_such_process_as_a_message() {
    let s = scheduler(1);
    let (set, _) = std::sync::mpsc::channel();
    let watcher_pid = s.spawn(watcher(set), "run", ()).unwrap();
    s.send(watcher_pid, Pid::from_raw(999_999)).unwrap();
    let downs = s.wait(watcher_pid).unwrap();
    let downs = downs.downcast::<Vec<(Option<Pid>, Down)>>().unwrap();
    assert_eq!(downs.len(), 2);
    for (_, down) in downs {
        assert_eq!(down.reason, ExitReason::NoSuchProcess);
    }
    s.shutdown(PATIENCE);
}

enum Demonitoring {
    Watch(Pid),
    Report,
}

/// On `Watch(t)`: monitors `t` twice, demonitors the first (which must succeed) and
/// sends the kept monitor to the test; on `Report`: finishes with the `Down`s it got.
fn demonitoring(test: std::sync::mpsc::Sender<MonitorRef>) -> Scripted {
    let mut downs: Vec<MonitorRef> = Vec::new();
    Scripted::new(move |ctx, events, out| {
        for event in events {
            if let Event::Message(m) = event {
                match m.payload.downcast::<Demonitoring>() {
                    Ok(Demonitoring::Watch(t)) => {
                        let dropped = ctx.monitor(t);
                        let kept = ctx.monitor(t);
                        assert!(ctx.demonitor(dropped), "not fired yet");
                        assert!(!ctx.demonitor(dropped), "stopped already");
                        test.send(kept).unwrap();
                    }
                    Ok(Demonitoring::Report) => {
                        out.set_status(Status::Done(Payload::new(std::mem::take(&mut downs))));
                        return Ok(());
                    }
                    Err(payload) => {
                        downs.push(payload.into_payload().downcast::<Down>().unwrap().monitor)
                    }
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn a_demonitored_monitor_sends_nothing() {
    let s = scheduler(2);
    let target_pid = s.spawn(target(), "run", ()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher_pid = s.spawn(demonitoring(tx), "run", ()).unwrap();
    s.send(watcher_pid, Demonitoring::Watch(target_pid))
        .unwrap();
    let kept = rx.recv_timeout(PATIENCE).unwrap();
    // Set after the watcher's: the target's end sends the Downs in the order the
    // monitors were set, so once this one came, the watcher's did too.
    let last = s.monitor(target_pid);
    s.send(target_pid, "stop").unwrap();
    last.wait_timeout(PATIENCE).expect("the target ends");
    s.send(watcher_pid, Demonitoring::Report).unwrap();
    let downs = s.wait(watcher_pid).unwrap();
    assert_eq!(downs.downcast::<Vec<MonitorRef>>().unwrap(), vec![kept]);
    s.shutdown(PATIENCE);
}

#[test]
fn an_outside_monitor_demonitored_or_dropped_gets_nothing() {
    let s = scheduler(1);
    let pid = s.spawn(target(), "run", ()).unwrap();
    let stopped = s.monitor(pid);
    let dropped = s.monitor(pid);
    let kept = s.monitor(pid);
    assert!(stopped.demonitor(), "not fired yet");
    drop(dropped);
    s.send(pid, "stop").unwrap();
    let down = kept.wait_timeout(PATIENCE).unwrap();
    assert_eq!(down.reason, ExitReason::Normal);
    s.shutdown(PATIENCE);
}

#[test]
fn a_process_stopped_by_shutdown_is_down_as_killed() {
    let s = scheduler(1);
    let pid = s.spawn(Stubborn, "run", ()).unwrap();
    let monitor = s.monitor(pid);
    let report = s.shutdown(Duration::ZERO);
    assert_eq!(report.stopped, vec![pid]);
    let down = monitor.wait_timeout(PATIENCE).unwrap();
    assert_eq!(down.reason, ExitReason::Killed);
}
