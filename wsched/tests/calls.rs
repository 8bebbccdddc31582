//! Calls from outside threads (`Handle::call`): a reply, a request given back for a
//! dead or unknown callee, a reply dropped unanswered, a callee that dies holding
//! the request, a timeout (never before its deadline) and a reply after it (dropped).
//! Calls from hand-written processes (a `Call` yield, its answer a completion): the
//! same outcomes, a caller that ends mid-call, and no timer left behind.

mod support;

use std::time::{Duration, Instant};

use support::{quiet_expected_panics, Scripted};
use wsched::command::{Call, CallAnswer};
use wsched::{
    CallError, Event, ExitReason, Overflow, Payload, Pid, Reply, Request, Scheduler, SpawnOptions,
    Status, Tag, YieldError,
};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

/// Serves `Request<u32, u32>`: 1..: doubles; 0: drops the reply; 99: panics; 7:
/// keeps the reply until a "late" message, then answers and finishes with whether
/// the answer was taken.
fn server() -> Scripted {
    let mut kept: Option<Reply<u32>> = None;
    Scripted::new(move |_, events, out| {
        for event in events {
            let Event::Message(m) = event else { continue };
            let payload = match m.payload.downcast::<Request<u32, u32>>() {
                Ok(Request { request, reply, .. }) => {
                    match request {
                        0 => drop(reply),
                        99 => panic!("calls test: the callee panics"),
                        7 => kept = Some(reply),
                        n => {
                            reply.send(n * 2);
                        }
                    }
                    continue;
                }
                Err(e) => e.into_payload(),
            };
            if payload.downcast::<&str>().ok() == Some("late") {
                let taken = kept.take().expect("kept").send(14);
                out.set_status(Status::Done(Payload::new(taken)));
                return Ok(());
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

fn scheduler() -> Scheduler {
    Scheduler::builder().workers(2).build().unwrap()
}

#[test]
fn a_call_returns_the_reply() {
    let s = scheduler();
    let pid = s.spawn_detached(server(), "run", ()).unwrap();
    for n in 8..=50_u32 {
        assert_eq!(s.call::<u32, u32>(pid, n, PATIENCE).unwrap(), n * 2);
    }
}

#[test]
fn a_call_to_a_dead_or_unknown_process_gives_the_request_back() {
    let s = scheduler();
    let unknown = Pid::from_raw(1_000_000);
    match s.call::<String, u32>(unknown, "keep me".into(), PATIENCE) {
        Err(CallError::NoSuchProcess { pid, request }) => {
            assert_eq!((pid, request.as_str()), (unknown, "keep me"));
        }
        other => panic!("{other:?}"),
    }
    let pid = s
        .spawn(
            Scripted::new(|_, _, out| {
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    s.wait_timeout(pid, PATIENCE).unwrap();
    let error = s.call::<u32, u32>(pid, 5, PATIENCE).unwrap_err();
    assert!(error.to_string().contains("no such process"), "{error}");
    assert_eq!(error.into_request(), Some(5));
}

#[test]
fn a_reply_dropped_unanswered_fails_the_call_at_once() {
    let s = scheduler();
    let pid = s.spawn_detached(server(), "run", ()).unwrap();
    let start = Instant::now();
    match s.call::<u32, u32>(pid, 0, PATIENCE) {
        Err(CallError::NoReply { pid: p }) => assert_eq!(p, pid),
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < PATIENCE, "not a timeout");
    // The server lives on.
    assert_eq!(s.call::<u32, u32>(pid, 4, PATIENCE).unwrap(), 8);
}

#[test]
fn a_callee_dying_during_the_call_is_an_error_with_its_reason() {
    quiet_expected_panics("calls test");
    let s = scheduler();
    let pid = s.spawn_detached(server(), "run", ()).unwrap();
    match s.call::<u32, u32>(pid, 99, PATIENCE) {
        Err(CallError::CalleeDied { pid: p, reason }) => {
            assert_eq!(p, pid);
            assert!(matches!(reason, ExitReason::Panicked { .. }), "{reason:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_timeout_comes_no_sooner_than_the_deadline_and_a_late_reply_is_dropped() {
    let s = scheduler();
    let pid = s.spawn(server(), "run", ()).unwrap();
    let timeout = Duration::from_millis(30);
    let start = Instant::now();
    match s.call::<u32, u32>(pid, 7, timeout) {
        Err(error @ CallError::Timeout { pid: p, .. }) => {
            assert_eq!(p, pid);
            // A hand-written callee says nowhere it waits; it took the request.
            assert_eq!(
                error.to_string(),
                format!(
                    "{pid} did not reply within the timeout to the call's `Request<u32, u32>` \
                     (the call expects a `u32` reply); it took the request but has not \
                     answered it; give it longer, or check that it answers with \
                     `reply.send(value)`"
                )
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() >= timeout, "not before the deadline");
    s.send(pid, "late").unwrap();
    let taken: bool = s.wait_timeout(pid, PATIENCE).unwrap().downcast().unwrap();
    assert!(!taken, "the caller had given up: the reply was dropped");
}

// ---- hand-written callers ------------------------------------------------------------

type Outcome = Result<u32, CallError<u32>>;

/// Calls `callee` with `request` (a `Call` yield, tag 1) and finishes with the
/// outcome; a "quit" message ends it at once, with the call outstanding.
fn caller(callee: Pid, request: u32, timeout: Option<Duration>) -> Scripted {
    let mut called = false;
    Scripted::new(move |_, events, out| {
        if !called {
            called = true;
            out.yield_command(Tag(1), Call::new::<u32, u32>(callee, request, timeout));
        }
        for event in events {
            match event {
                Event::Completion(c) => {
                    assert_eq!(c.tag, Tag(1));
                    let answer: CallAnswer = c.result.unwrap().downcast().unwrap();
                    assert_eq!(answer.callee(), callee);
                    let outcome: Outcome = answer.into_result();
                    out.set_status(Status::Done(Payload::new(outcome)));
                    return Ok(());
                }
                Event::Message(m) if m.payload.downcast_ref::<&str>() == Some(&"quit") => {
                    out.set_status(Status::Done(Payload::new("quit")));
                    return Ok(());
                }
                _ => {}
            }
        }
        out.set_status(Status::WaitingForYields);
        Ok(())
    })
}

fn process_call(s: &Scheduler, callee: Pid, request: u32, timeout: Option<Duration>) -> Outcome {
    let pid = s
        .spawn(caller(callee, request, timeout), "run", ())
        .unwrap();
    s.wait_timeout(pid, PATIENCE).unwrap().downcast().unwrap()
}

#[test]
fn a_process_call_completes_with_the_reply() {
    let s = scheduler();
    let server = s.spawn_detached(server(), "run", ()).unwrap();
    assert_eq!(process_call(&s, server, 21, Some(PATIENCE)).unwrap(), 42);
    assert_eq!(process_call(&s, server, 5, None).unwrap(), 10);
    // A timeout too long for a deadline waits as long as none does.
    assert_eq!(
        process_call(&s, server, 6, Some(Duration::MAX)).unwrap(),
        12
    );
    // Answered calls leave no timer behind.
    assert_eq!(s.metrics().pending_timers, 0);
}

#[test]
fn a_process_call_of_a_callee_dying_mid_call_fails_at_once_with_the_reason() {
    quiet_expected_panics("calls test");
    let s = scheduler();
    let server = s.spawn_detached(server(), "run", ()).unwrap();
    match process_call(&s, server, 99, None) {
        Err(CallError::CalleeDied { pid, reason }) => {
            assert_eq!(pid, server);
            assert!(matches!(reason, ExitReason::Panicked { .. }), "{reason:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_process_call_of_a_dead_or_unknown_process_gives_the_request_back() {
    let s = scheduler();
    let unknown = Pid::from_raw(1_000_000);
    let error = process_call(&s, unknown, 3, Some(PATIENCE)).unwrap_err();
    assert!(matches!(error, CallError::NoSuchProcess { pid, .. } if pid == unknown));
    assert_eq!(error.into_request(), Some(3));
}

#[test]
fn a_process_call_whose_reply_is_dropped_fails_at_once() {
    let s = scheduler();
    let server = s.spawn_detached(server(), "run", ()).unwrap();
    match process_call(&s, server, 0, None) {
        Err(CallError::NoReply { pid }) => assert_eq!(pid, server),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_process_call_times_out_and_the_late_reply_is_dropped() {
    let s = scheduler();
    let server = s.spawn(server(), "run", ()).unwrap();
    let timeout = Duration::from_millis(30);
    let start = Instant::now();
    match process_call(&s, server, 7, Some(timeout)) {
        Err(CallError::Timeout { pid, .. }) => assert_eq!(pid, server),
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() >= timeout, "not before the deadline");
    s.send(server, "late").unwrap();
    let taken: bool = s
        .wait_timeout(server, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    assert!(!taken, "the caller had given up: the reply was dropped");
}

#[test]
fn a_caller_that_ends_mid_call_refuses_the_late_reply() {
    let s = scheduler();
    let server = s.spawn(server(), "run", ()).unwrap();
    let pid = s.spawn(caller(server, 7, None), "run", ()).unwrap();
    s.send(pid, "quit").unwrap();
    let quit: &str = s.wait_timeout(pid, PATIENCE).unwrap().downcast().unwrap();
    assert_eq!(quit, "quit");
    s.send(server, "late").unwrap();
    let taken: bool = s
        .wait_timeout(server, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    assert!(!taken, "the caller had ended: the reply was dropped");
    assert_eq!(
        s.metrics().pending_timers,
        0,
        "the call's timer went with its caller"
    );
}

#[test]
fn an_answer_read_with_other_types_is_a_clear_error() {
    let s = scheduler();
    let server = s.spawn_detached(server(), "run", ()).unwrap();
    let pid = s
        .spawn(
            Scripted::new(move |_, events, out| {
                for event in events {
                    if let Event::Completion(c) = event {
                        let answer: CallAnswer = c.result.unwrap().downcast().unwrap();
                        let read: Result<String, CallError<u32>> = answer.into_result();
                        out.set_status(Status::Done(Payload::new(read.unwrap_err())));
                        return Ok(());
                    }
                }
                let call = Call::new::<u32, u32>(server, 2, None);
                assert_eq!(call.request::<u32, u32>(), Some(&2));
                assert_eq!(call.request::<u8, u32>(), None);
                assert_eq!((call.callee(), call.timeout()), (server, None));
                assert!(format!("{call:?}").contains("u32"), "{call:?}");
                out.yield_command(Tag(1), call);
                out.set_status(Status::WaitingForYields);
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let error: CallError<u32> = s.wait_timeout(pid, PATIENCE).unwrap().downcast().unwrap();
    assert!(
        matches!(
            error,
            CallError::Failed {
                error: YieldError::WrongOutputType { .. },
                ..
            }
        ),
        "{error:?}"
    );
    let said = error.to_string();
    assert!(
        said.contains("`String`") && said.contains("`u32`"),
        "{said}"
    );
}

// ---- a full mailbox, and replies dropped while panicking ------------------------------

/// A callee with a bounded mailbox of one that rejects, held inside its first step
/// (on a worker) until `release` is sent; then it doubles requests. `entered` tells
/// when it is held.
fn held_callee(s: &Scheduler) -> (Pid, std::sync::mpsc::Sender<()>) {
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
    let mut first = true;
    let callee = Scripted::new(move |_, events, out| {
        if std::mem::take(&mut first) {
            entered_tx.send(()).unwrap();
            gate.recv_timeout(PATIENCE).expect("released");
        }
        for event in events {
            if let Event::Message(m) = event {
                if let Ok(Request { request, reply, .. }) =
                    m.payload.downcast::<Request<u32, u32>>()
                {
                    reply.send(request * 2);
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    });
    let options = SpawnOptions::new().bounded_mailbox(1, Overflow::Reject);
    let pid = s.spawn_with(callee, "run", (), options).unwrap();
    entered.recv_timeout(PATIENCE).expect("the callee runs");
    // Its one place taken: every further message is refused while it is held.
    s.send(pid, "filler").unwrap();
    (pid, release)
}

#[test]
fn a_call_to_a_live_process_with_a_full_mailbox_says_so_and_gives_the_request_back() {
    let s = scheduler();
    let (callee, release) = held_callee(&s);
    let error = s.call::<u32, u32>(callee, 5, PATIENCE).unwrap_err();
    assert!(
        matches!(error, CallError::MailboxFull { pid, .. } if pid == callee),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("live") && message.contains("full"),
        "the error says the callee is alive and full: {message}"
    );
    assert_eq!(error.into_request(), Some(5));

    let error = process_call(&s, callee, 6, Some(PATIENCE)).unwrap_err();
    assert!(
        matches!(error, CallError::MailboxFull { pid, .. } if pid == callee),
        "{error:?}"
    );
    assert_eq!(error.into_request(), Some(6));

    release.send(()).unwrap();
    // Once it has taken its mailbox in, it answers.
    let deadline = Instant::now() + PATIENCE;
    loop {
        match s.call::<u32, u32>(callee, 7, PATIENCE) {
            Ok(answer) => break assert_eq!(answer, 14),
            Err(CallError::MailboxFull { .. }) if Instant::now() < deadline => {
                std::thread::yield_now();
            }
            Err(other) => panic!("{other:?}"),
        }
    }
}

/// A callee that hands each request's reply to a new thread, which panics holding it
/// (`on_thread`), or drops the reply inside a panic it catches itself in its step.
fn panicking_replier(on_thread: bool) -> Scripted {
    Scripted::new(move |_, events, out| {
        for event in events {
            let Event::Message(m) = event else { continue };
            let Ok(Request { reply, .. }) = m.payload.downcast::<Request<u32, u32>>() else {
                continue;
            };
            let drop_while_panicking = move || {
                let _held = reply;
                panic!("calls test: a reply's holder panics");
            };
            if on_thread {
                std::thread::spawn(drop_while_panicking);
            } else {
                let caught =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(drop_while_panicking));
                assert!(caught.is_err());
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn a_reply_dropped_by_a_panicking_thread_answers_no_reply() {
    quiet_expected_panics("calls test");
    let s = scheduler();
    for on_thread in [true, false] {
        let callee = s
            .spawn_detached(panicking_replier(on_thread), "run", ())
            .unwrap();
        // A missing answer would wait out the timeout and say `Timeout`.
        match s.call::<u32, u32>(callee, 1, PATIENCE) {
            Err(CallError::NoReply { pid }) => assert_eq!(pid, callee),
            other => panic!("on_thread {on_thread}: {other:?}"),
        }
        // Without a timeout, a missing answer would never come (the wait's guard
        // would fail the test).
        match process_call(&s, callee, 2, None) {
            Err(CallError::NoReply { pid }) => assert_eq!(pid, callee),
            other => panic!("on_thread {on_thread}: {other:?}"),
        }
        // The callee lives on: the panics were not its end.
        assert!(
            s.send(callee, "still there").is_ok(),
            "on_thread {on_thread}"
        );
    }
}
