//! `#[process]` calls (`call!`): a reply, a timeout and the late reply dropped, a
//! callee dying mid-call (panicking, or stopped by a link) reported at once with its
//! reason, a dead or unknown callee (the request comes back), a reply dropped
//! unanswered, the caller cancelled mid-call; what a timeout says of the callee (a
//! receive of other types, with the callee's listing; busy; holding the request);
//! and the same played step by step in the testing harness (`take_call`, `request`).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use wsched::prelude::*;
use wsched::testing::{request, TestProcess};
use wsched::{CallError, Scheduler};

/// A hang guard, never a wait for something to happen.
const WAIT: Duration = Duration::from_secs(20);

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .build()
        .expect("scheduler starts")
}

/// What a caller asks the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Double(u32),
    /// Drops the reply unanswered.
    Ignore,
    /// Panics holding the request.
    Panic,
    /// Keeps the reply, tells the test (a channel), then waits for "late" (answers,
    /// and finishes with whether the answer was taken) or "crash" (spawns a linked
    /// child that fails, which stops the server while it holds the reply).
    Hold,
}

struct Server {
    holding: Option<mpsc::Sender<()>>,
}

#[process]
impl Server {
    #[entry]
    fn serve(&mut self) -> Result<bool, BoxError> {
        loop {
            let Request { request, reply, .. } = recv!(Request<Ask, u32>)?;
            match request {
                Ask::Double(n) => {
                    reply.send(n * 2);
                }
                Ask::Ignore => drop(reply),
                Ask::Panic => panic!("e2e calls: the callee panics"),
                Ask::Hold => {
                    if let Some(holding) = &self.holding {
                        holding.send(()).expect("the test listens");
                    }
                    match recv!(&str)? {
                        "late" => return Ok(reply.send(99)),
                        "crash" => {
                            this::spawn_linked(Bomb, "explode", ())?;
                            recv!()?; // stopped by the link before anything comes
                            unreachable!("the link stops the server");
                        }
                        other => return Err(format!("unexpected {other:?}").into()),
                    }
                }
            }
        }
    }
}

struct Bomb;

#[process]
impl Bomb {
    #[entry]
    fn explode(&mut self) -> Result<(), BoxError> {
        Err("the linked child fails".into())
    }
}

struct Caller;

#[process]
impl Caller {
    /// Calls `server` with each of `asks` in turn; the answers, or the errors as text.
    #[entry]
    fn ask_all(&mut self, server: Pid, asks: Vec<u32>) -> Result<Vec<u32>, BoxError> {
        let mut answers = Vec::new();
        for n in asks {
            let doubled: u32 = call!(server, Ask::Double(n), timeout = WAIT)?;
            answers.push(doubled);
        }
        Ok(answers)
    }

    /// One call, with `timeout` (`None`: none); its result and how long it took.
    #[entry]
    fn ask(
        &mut self,
        server: Pid,
        ask: Ask,
        timeout: Option<Duration>,
    ) -> (Result<u32, CallError<Ask>>, Duration) {
        let start = Instant::now();
        let answer = match timeout {
            Some(timeout) => call!(server, ask, timeout = timeout),
            None => call!(server, ask),
        };
        (answer, start.elapsed())
    }

    /// Calls `server`, then, whatever came of it, calls it again with a double.
    #[entry]
    fn ask_twice(&mut self, server: Pid, first: Ask) -> (CallError<Ask>, u32) {
        let first: Result<u32, _> = call!(server, first, timeout = WAIT);
        let second: u32 = call!(server, Ask::Double(4)).expect("the server lives on");
        (first.expect_err("the first call fails"), second)
    }
}

fn ask(
    s: &Scheduler,
    server: Pid,
    ask: Ask,
    timeout: Option<Duration>,
) -> Result<u32, CallError<Ask>> {
    let caller = s.spawn(Caller, "ask", (server, ask, timeout)).unwrap();
    s.wait_timeout(caller, WAIT)
        .unwrap()
        .downcast::<(Result<u32, CallError<Ask>>, Duration)>()
        .unwrap()
        .0
}

fn server(s: &Scheduler) -> Pid {
    s.spawn(Server { holding: None }, "serve", ()).unwrap()
}

/// A server that says when it holds a reply.
fn holding_server(s: &Scheduler) -> (Pid, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    let pid = s.spawn(Server { holding: Some(tx) }, "serve", ()).unwrap();
    (pid, rx)
}

#[test]
fn a_call_returns_the_reply() {
    let s = scheduler();
    let server = server(&s);
    let caller = s
        .spawn(Caller, "ask_all", (server, vec![1_u32, 2, 3, 50]))
        .unwrap();
    let answers: Vec<u32> = s.wait_timeout(caller, WAIT).unwrap().downcast().unwrap();
    assert_eq!(answers, [2, 4, 6, 100]);
    // Answered calls leave no timer and no monitor behind.
    assert_eq!(s.metrics().pending_timers, 0);
}

#[test]
fn a_timeout_comes_no_sooner_than_the_deadline_and_a_late_reply_is_dropped() {
    let s = scheduler();
    let (server, holding) = holding_server(&s);
    let timeout = Duration::from_millis(30);
    let caller = s
        .spawn(Caller, "ask", (server, Ask::Hold, Some(timeout)))
        .unwrap();
    let (answer, took) = s
        .wait_timeout(caller, WAIT)
        .unwrap()
        .downcast::<(Result<u32, CallError<Ask>>, Duration)>()
        .unwrap();
    let error = answer.expect_err("the server holds the reply");
    match &error {
        CallError::Timeout {
            pid,
            request_waiting,
            callee_at: Some(at),
            ..
        } => {
            assert_eq!(*pid, server);
            assert_eq!(*request_waiting, Some(false), "the server took the request");
            // It took the request, and waits for something else, holding the reply.
            assert_eq!(
                error.to_string(),
                format!(
                    "{server} did not reply within the timeout to the call's \
                     `Request<Ask, u32>` (the call expects a `u32` reply); it took the \
                     request but has not answered it, and waits at {at}; give it longer, \
                     or check that it answers with `reply.send(value)`"
                )
            );
            assert!(at.to_string().starts_with("receive of `&str` at "), "{at}");
        }
        other => panic!("{other:?}"),
    }
    assert!(took >= timeout, "not before the deadline: {took:?}");
    holding
        .recv_timeout(WAIT)
        .expect("the server holds the reply");
    s.send(server, "late").unwrap();
    let taken: bool = s.wait_timeout(server, WAIT).unwrap().downcast().unwrap();
    assert!(
        !taken,
        "the caller had given up: the reply was refused, and dropped"
    );
}

/// A call's request, answered (by [`Counter`]) with a `u64`.
#[derive(Debug)]
struct GetCount;

/// Starts the counting.
struct Start;

/// Receives `Request<GetCount, u64>`, once started.
struct Counter;

#[process]
impl Counter {
    #[entry]
    fn serve(&mut self) -> Result<(), BoxError> {
        recv!(Start)?;
        loop {
            let Request { reply, .. } = recv!(Request<GetCount, u64>)?;
            reply.send(7);
        }
    }
}

struct CountCaller;

#[process]
impl CountCaller {
    /// Calls `counter` expecting a `u32`, which it does not answer: the error.
    #[entry]
    fn ask(&mut self, counter: Pid) -> Option<CallError<GetCount>> {
        let answer: Result<u32, _> = call!(counter, GetCount, timeout = Duration::from_millis(30));
        answer.err()
    }
}

/// The call's timeout error, from a process (`call!`) or a thread (`Scheduler::call`).
fn count_as_u32(s: &Scheduler, counter: Pid, from_a_thread: bool) -> CallError<GetCount> {
    let error = if from_a_thread {
        s.call::<GetCount, u32>(counter, GetCount, Duration::from_millis(30))
            .err()
    } else {
        let caller = s.spawn(CountCaller, "ask", (counter,)).unwrap();
        s.wait_timeout(caller, WAIT)
            .unwrap()
            .downcast::<Option<CallError<GetCount>>>()
            .unwrap()
    };
    error.expect("nobody answers a `u32`")
}

/// Where `counter` waits, from its listing once it waits there; its listing's line.
fn listed_at(s: &Scheduler, counter: Pid, receives: &str) -> (String, String) {
    let deadline = Instant::now() + WAIT;
    loop {
        let info = s.processes().into_iter().find(|p| p.pid == counter);
        let info = info.expect("the counter is listed");
        if let Some(at) = info.suspended_at {
            if at
                .to_string()
                .starts_with(&format!("receive of `{receives}` at "))
            {
                return (at.to_string(), info.to_string());
            }
        }
        assert!(Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_call_whose_reply_type_differs_names_both_types_in_its_timeout_and_the_listing() {
    let s = scheduler();
    let counter = s.spawn(Counter, "serve", ()).unwrap();
    s.send(counter, Start).unwrap();
    let (at, _) = listed_at(&s, counter, "Request<GetCount, u64>");
    let mismatch = "a `Request<GetCount, u32>` is waiting but this process receives \
                    `Request<GetCount, u64>` (its caller expects a `u32` reply, the receive \
                    answers with a `u64`)";
    for from_a_thread in [false, true] {
        let error = count_as_u32(&s, counter, from_a_thread);
        match &error {
            CallError::Timeout {
                pid,
                reply,
                callee_at: Some(callee_at),
                request_waiting,
                ..
            } => {
                assert_eq!(*pid, counter);
                assert_eq!(*reply, "u32");
                assert_eq!(callee_at.to_string(), at);
                assert_eq!(*request_waiting, Some(true), "the request is not received");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            error.to_string(),
            format!(
                "{counter} did not reply within the timeout to the call's \
                 `Request<GetCount, u32>` (the call expects a `u32` reply); it waits at \
                 {at}, so the request stays in its mailbox: {mismatch}; make the call's \
                 types and the receive's agree"
            )
        );
    }
    // The callee's listing shows the requests it does not take, and why.
    let (_, line) = listed_at(&s, counter, "Request<GetCount, u64>");
    assert!(
        line.ends_with(&format!(
            ", at {at}, 2 messages waiting (2 `Request<GetCount, u32>`); {mismatch}"
        )),
        "{line}"
    );
    // The right types are answered, past the requests left waiting.
    assert_eq!(s.call::<GetCount, u64>(counter, GetCount, WAIT).unwrap(), 7);
}

#[test]
fn a_call_to_a_process_receiving_something_else_says_what_it_waits_for() {
    let s = scheduler();
    let counter = s.spawn(Counter, "serve", ()).unwrap();
    let (at, _) = listed_at(&s, counter, "Start");
    let error = count_as_u32(&s, counter, false);
    assert!(
        matches!(
            error,
            CallError::Timeout {
                request_waiting: Some(true),
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "{counter} did not reply within the timeout to the call's \
             `Request<GetCount, u32>` (the call expects a `u32` reply); it waits at {at}, \
             so the request stays in its mailbox: it must receive `Request<GetCount, u32>`"
        )
    );
    let (_, line) = listed_at(&s, counter, "Start");
    assert!(
        line.ends_with(", 1 message waiting (a `Request<GetCount, u32>`)"),
        "{line}"
    );
}

/// Sleeps a while before it receives anything.
struct Sleepy;

#[process]
impl Sleepy {
    #[entry]
    fn serve(&mut self) -> Result<(), BoxError> {
        yield_cmd!(wsched::command::Sleep(Duration::from_millis(300)))?;
        let Request { reply, .. } = recv!(Request<GetCount, u32>)?;
        reply.send(7);
        Ok(())
    }
}

#[test]
fn a_call_to_a_busy_process_says_the_request_is_not_received_yet() {
    let s = scheduler();
    let sleepy = s.spawn(Sleepy, "serve", ()).unwrap();
    let error = count_as_u32(&s, sleepy, false);
    let CallError::Timeout {
        callee_at: Some(at),
        request_waiting: Some(true),
        ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert!(at.to_string().starts_with("yield of `Sleep` at "), "{at}");
    assert_eq!(
        error.to_string(),
        format!(
            "{sleepy} did not reply within the timeout to the call's \
             `Request<GetCount, u32>` (the call expects a `u32` reply); the request is still \
             in its mailbox, not received yet (it is at {at}); give it longer, or check that \
             it receives `Request<GetCount, u32>`"
        )
    );
}

#[test]
fn a_callee_panicking_mid_call_is_an_error_at_once_with_its_reason() {
    let s = scheduler();
    let server = s
        .spawn_detached(Server { holding: None }, "serve", ())
        .unwrap();
    // No timeout at all: only the monitor can end this call.
    match ask(&s, server, Ask::Panic, None) {
        Err(CallError::CalleeDied { pid, reason }) => {
            assert_eq!(pid, server);
            assert!(
                matches!(&reason, ExitReason::Panicked { message, .. } if message.contains("the callee panics")),
                "{reason:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_callee_stopped_by_a_link_mid_call_is_an_error_at_once_with_its_reason() {
    let s = scheduler();
    let (server, holding) = holding_server(&s);
    let caller = s
        .spawn(Caller, "ask", (server, Ask::Hold, Some(WAIT)))
        .unwrap();
    holding
        .recv_timeout(WAIT)
        .expect("the server holds the reply");
    s.send(server, "crash").unwrap();
    let (answer, took) = s
        .wait_timeout(caller, WAIT)
        .unwrap()
        .downcast::<(Result<u32, CallError<Ask>>, Duration)>()
        .unwrap();
    match answer {
        Err(CallError::CalleeDied { pid, reason }) => {
            assert_eq!(pid, server);
            assert!(matches!(reason, ExitReason::Linked { .. }), "{reason:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(took < WAIT, "not a timeout");
}

#[test]
fn a_call_to_a_dead_or_unknown_process_gives_the_request_back() {
    let s = scheduler();
    let unknown = Pid::from_raw(u64::MAX);
    match ask(&s, unknown, Ask::Double(3), Some(WAIT)) {
        Err(CallError::NoSuchProcess { pid, request }) => {
            assert_eq!((pid, request), (unknown, Ask::Double(3)));
        }
        other => panic!("{other:?}"),
    }
    let dead = s.spawn(Bomb, "explode", ()).unwrap();
    assert!(s.wait_timeout(dead, WAIT).is_err());
    let error = ask(&s, dead, Ask::Double(5), None).unwrap_err();
    assert!(error.to_string().contains("no such process"), "{error}");
    assert_eq!(error.into_request(), Some(Ask::Double(5)));
}

#[test]
fn a_reply_dropped_unanswered_fails_the_call_at_once() {
    let s = scheduler();
    let server = server(&s);
    // No timeout: only the drop can end the first call.
    let caller = s.spawn(Caller, "ask_twice", (server, Ask::Ignore)).unwrap();
    let (first, second) = s
        .wait_timeout(caller, WAIT)
        .unwrap()
        .downcast::<(CallError<Ask>, u32)>()
        .unwrap();
    assert!(
        matches!(first, CallError::NoReply { pid } if pid == server),
        "{first:?}"
    );
    assert_eq!(second, 8);
}

#[test]
fn a_caller_cancelled_mid_call_stops_waiting_and_a_late_reply_is_dropped() {
    let s = scheduler();
    let (server, holding) = holding_server(&s);
    let caller = s
        .spawn(Caller, "ask", (server, Ask::Hold, None::<Duration>))
        .unwrap();
    holding
        .recv_timeout(WAIT)
        .expect("the server holds the reply");
    s.cancel(caller).unwrap();
    let (answer, _) = s
        .wait_timeout(caller, WAIT)
        .unwrap()
        .downcast::<(Result<u32, CallError<Ask>>, Duration)>()
        .unwrap();
    assert!(
        answer.as_ref().is_err_and(CallError::is_cancelled),
        "{answer:?}"
    );
    s.send(server, "late").unwrap();
    let taken: bool = s.wait_timeout(server, WAIT).unwrap().downcast().unwrap();
    assert!(!taken, "the caller had given up: the reply was refused");
    assert_eq!(s.metrics().pending_timers, 0);
}

#[test]
fn a_thread_can_call_a_process_server() {
    let s = scheduler();
    let server = server(&s);
    assert_eq!(
        s.call::<Ask, u32>(server, Ask::Double(21), WAIT).unwrap(),
        42
    );
    match s.call::<Ask, u32>(server, Ask::Ignore, WAIT) {
        Err(CallError::NoReply { pid }) => assert_eq!(pid, server),
        other => panic!("{other:?}"),
    }
}

// ---- the harness -------------------------------------------------------------------

/// Steps a caller to its call and hands it to `answer`; the caller's result.
fn harness_call(
    answer: impl FnOnce(&mut TestProcess, wsched::testing::CallMade<Ask, u32>),
) -> Result<u32, CallError<Ask>> {
    let callee = Pid::from_raw(42);
    let mut t = TestProcess::start(Caller, "ask", (callee, Ask::Double(5), Some(WAIT))).unwrap();
    let call = t.take_call::<Ask, u32>();
    assert_eq!(
        (call.callee, call.request, call.timeout),
        (callee, Ask::Double(5), Some(WAIT))
    );
    answer(&mut t, call);
    t.result::<(Result<u32, CallError<Ask>>, Duration)>().0
}

#[test]
fn the_harness_plays_each_answer_to_a_call() {
    assert_eq!(
        harness_call(|t, call| {
            t.complete(call.tag, call.reply(10));
        })
        .unwrap(),
        10
    );
    let died = harness_call(|t, call| {
        t.complete(call.tag, call.callee_died(ExitReason::Killed));
    });
    assert!(
        matches!(
            died,
            Err(CallError::CalleeDied {
                reason: ExitReason::Killed,
                ..
            })
        ),
        "{died:?}"
    );
    let none = harness_call(|t, call| {
        t.complete(call.tag, call.no_reply());
    });
    assert!(matches!(none, Err(CallError::NoReply { .. })), "{none:?}");
    let late = harness_call(|t, call| {
        t.complete(call.tag, call.timeout());
    });
    assert!(late.as_ref().is_err_and(CallError::is_timeout), "{late:?}");
    // Played by the harness: nothing is known of the callee.
    let late = late.unwrap_err();
    assert_eq!(
        late.to_string(),
        format!(
            "{} did not reply within the timeout to the call's `Request<Ask, u32>` (the call \
             expects a `u32` reply); give it longer, or check that it receives \
             `Request<Ask, u32>` and answers it",
            late.pid()
        )
    );
    let gone = harness_call(|t, call| {
        t.complete(call.tag, call.no_such_process());
    });
    assert_eq!(gone.unwrap_err().into_request(), Some(Ask::Double(5)));
    let cancelled = harness_call(|t, call| {
        t.cancel();
        assert_eq!(t.withdrawn(), [call.tag], "the call's yield is withdrawn");
    });
    assert!(
        cancelled.as_ref().is_err_and(CallError::is_cancelled),
        "{cancelled:?}"
    );
}

#[test]
#[should_panic(expected = "not with a `u8`")]
fn the_harness_names_the_types_of_a_call_taken_with_the_wrong_ones() {
    let mut t = TestProcess::start(
        Caller,
        "ask",
        (Pid::from_raw(42), Ask::Ignore, None::<Duration>),
    )
    .unwrap();
    t.take_call::<u8, u32>();
}

#[test]
fn the_harness_reads_what_a_callee_under_test_replied() {
    let mut t = TestProcess::start(Server { holding: None }, "serve", ()).unwrap();
    let (asked, probe) = request::<Ask, u32>(Ask::Double(21));
    t.send(asked);
    assert_eq!(probe.reply(), Some(42));

    let (asked, probe) = request::<Ask, u32>(Ask::Ignore);
    t.send(asked);
    assert!(probe.dropped_unanswered());

    // A caller that gave up: the callee's reply is refused.
    let (tx, holding) = mpsc::channel();
    let mut t = TestProcess::start(Server { holding: Some(tx) }, "serve", ()).unwrap();
    let (asked, probe) = request::<Ask, u32>(Ask::Hold);
    t.send(asked);
    holding.try_recv().expect("holding");
    probe.give_up();
    t.send("late");
    assert!(!t.result::<bool>());
    assert_eq!(probe.reply(), None);
}
