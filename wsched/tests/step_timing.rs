//! Opt-in step timing: step histograms that count every step, busy time per
//! process, wake latencies, and the long-step detector naming a step while it runs.

mod support;

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::{until_a_message, Scripted};
use wsched::{Event, LongStep, Payload, Scheduler, Status};

fn timed(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .step_timing(true)
        .build()
        .expect("scheduler starts")
}

/// Spins for `d`: a step that is at least that long, whatever the machine.
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn timing_is_off_by_default() {
    let s = Scheduler::builder().workers(1).build().unwrap();
    let pid = s
        .spawn(until_a_message(|| Status::WaitingForMessage), "run", ())
        .unwrap();
    assert!(s.metrics().step_timing.is_none());
    let listed = s.processes().into_iter().find(|p| p.pid == pid).unwrap();
    assert_eq!(listed.busy, None);
    s.send(pid, ()).unwrap();
    s.wait(pid).unwrap();
}

#[test]
fn every_step_is_timed_and_a_process_is_charged_for_its_own() {
    let s = timed(2);
    let mut left = 100;
    let counter = s
        .spawn(
            Scripted::new(move |_, _, out| {
                left -= 1;
                out.set_status(if left == 0 {
                    Status::Done(Payload::unit())
                } else {
                    Status::Continue
                });
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    // Spins 5 ms in its first step, then waits for a message.
    let spinner = s
        .spawn(
            Scripted::new(|_, events, out| {
                if events.is_empty() {
                    spin(Duration::from_millis(5));
                    out.set_status(Status::WaitingForMessage);
                } else {
                    out.set_status(Status::Done(Payload::unit()));
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    s.wait(counter).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let busy = loop {
        let listed = s.processes().into_iter().find(|p| p.pid == spinner);
        if let Some(busy) = listed.and_then(|p| p.busy).filter(|b| !b.is_zero()) {
            break busy;
        }
        assert!(Instant::now() < deadline, "the spinner never stepped");
        std::thread::yield_now();
    };
    assert!(busy >= Duration::from_millis(5), "{busy:?}");
    s.send(spinner, ()).unwrap();
    s.wait(spinner).unwrap();

    let m = s.metrics();
    let timing = m.step_timing.clone().expect("on");
    assert_eq!(timing.steps().count(), m.total().steps, "every step, once");
    assert_eq!(timing.steps().count(), 102);
    let longest = timing.steps().quantile(1.0).unwrap();
    assert!(longest >= Duration::from_millis(5), "{longest:?}");
    assert_eq!(timing.long_steps, 0, "no threshold, no detector");
}

#[test]
fn a_process_woken_by_a_step_waits_for_its_own_in_the_wake_histogram() {
    // One worker: every message between the two wakes its receiver into the
    // worker's LIFO slot, from where it runs next (when the slot's streak allows).
    let s = timed(1);
    let echo = s
        .spawn(
            Scripted::new(|ctx, events, out| {
                for event in events {
                    if let Event::Message(m) = event {
                        if m.payload.downcast_ref::<u32>() == Some(&u32::MAX) {
                            out.set_status(Status::Done(Payload::unit()));
                            return Ok(());
                        }
                        ctx.send(m.from.unwrap(), m.payload).unwrap();
                    }
                }
                out.set_status(Status::WaitingForMessage);
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let mut sent = 0_u32;
    let pinger = s
        .spawn(
            Scripted::new(move |ctx, _, out| {
                if sent == 100 {
                    ctx.send(echo, u32::MAX).unwrap();
                    out.set_status(Status::Done(Payload::unit()));
                } else {
                    sent += 1;
                    ctx.send(echo, sent).unwrap();
                    out.set_status(Status::WaitingForMessage);
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    s.wait(pinger).unwrap();
    s.wait(echo).unwrap();
    let latency = s.metrics().step_timing.unwrap().wake_latency();
    // 201 messages; a wake is measured when its receiver runs from the LIFO slot.
    assert!(
        (50..=201).contains(&latency.count()),
        "{} wakes measured",
        latency.count()
    );
}

#[test]
fn a_long_step_is_named_while_it_runs_and_reported_once() {
    let (found_tx, found) = mpsc::channel::<LongStep>();
    let found_tx = Mutex::new(found_tx);
    let s = Scheduler::builder()
        .workers(2)
        .long_step_threshold(Duration::from_millis(20))
        .on_long_step(move |step| found_tx.lock().unwrap().send(step.clone()).unwrap())
        .build()
        .unwrap();
    // Its first step lasts until the test has the report: no guessing how long.
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let pid = s
        .spawn(
            Scripted::new(move |_, _, out| {
                released.lock().unwrap().recv().unwrap();
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let step = found
        .recv_timeout(Duration::from_secs(20))
        .expect("reported");
    assert_eq!(step.pid, pid);
    assert_eq!(step.entry, "run");
    assert!(step.running_for >= Duration::from_millis(20), "{step}");
    assert!(step.resumed_from.is_none(), "its first step");
    assert!(step.to_string().contains("in its first step"), "{step}");
    release.send(()).unwrap();
    s.wait(pid).unwrap();
    s.shutdown(Duration::from_secs(10));
    assert!(found.try_recv().is_err(), "reported once");
    assert_eq!(s.metrics().step_timing.unwrap().long_steps, 1);
}

/// A command whose handler blocks the worker it runs on.
struct Stall;

impl wsched::Command for Stall {
    type Output = ();
}

#[test]
fn a_handler_that_blocks_its_worker_is_a_long_step_that_names_its_command() {
    let (found_tx, found) = mpsc::channel::<LongStep>();
    let found_tx = Mutex::new(found_tx);
    // The handler holds its worker until the test has the report.
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let s = Scheduler::builder()
        .workers(2)
        .long_step_threshold(Duration::from_millis(20))
        .on_long_step(move |step| found_tx.lock().unwrap().send(step.clone()).unwrap())
        .handler(move |Stall, done: wsched::command::Completer<Stall>| {
            released.lock().unwrap().recv().unwrap();
            done.complete(());
        })
        .build()
        .unwrap();
    let mut yielded = false;
    let pid = s
        .spawn(
            Scripted::new(move |_, _, out| {
                if yielded {
                    out.set_status(Status::Done(Payload::unit()));
                } else {
                    yielded = true;
                    out.yield_command(wsched::Tag(1), Stall);
                    out.set_status(Status::WaitingForYields);
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let step = found
        .recv_timeout(Duration::from_secs(20))
        .expect("the handler's time on the worker counts as the step's");
    assert_eq!(step.pid, pid);
    assert_eq!(step.command.as_deref(), Some("Stall"), "{step}");
    assert!(
        step.to_string()
            .contains("in the handler of `Stall` on the worker"),
        "{step}"
    );
    release.send(()).unwrap();
    s.wait(pid).unwrap();
    s.shutdown(Duration::from_secs(10));
    assert_eq!(s.metrics().step_timing.unwrap().long_steps, 1);
}
