//! The runtime core with hand-written processes: the Process contract, messages,
//! results, errors, shutdown and observation.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use support::{collect_completions, Answer, Echo, Scripted, Stubborn};
use wsched::command::Completer;
use wsched::{
    BuildError, Command, Event, InitError, JoinError, Payload, Phase, ProcessError, ProcessState,
    Scheduler, SendErrorKind, SpawnError, Status, StepError, Tag,
};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("scheduler starts")
}

/// A command answered with its own number, on the worker.
struct Number(u64);
impl Command for Number {
    type Output = u64;
}

#[test]
fn echo_answers_messages_from_another_process() {
    let s = scheduler(2);
    let echo = s.spawn(Echo::new(), "serve", ()).unwrap();
    let mut sent = false;
    let mut received = Vec::new();
    let client = s
        .spawn(
            Scripted::new(move |ctx, events, out| {
                if !sent {
                    for i in 0..10_u32 {
                        ctx.send(echo, i).unwrap();
                    }
                    sent = true;
                }
                for event in events {
                    if let Event::Message(m) = event {
                        assert_eq!(m.from, Some(echo));
                        received.push(m.payload.downcast::<u32>().unwrap());
                    }
                }
                if received.len() == 10 {
                    ctx.send(echo, "stop").unwrap();
                    out.set_status(Status::Done(Payload::new(received.clone())));
                } else {
                    out.set_status(Status::WaitingForMessage);
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let received = s.wait(client).unwrap().downcast::<Vec<u32>>().unwrap();
    assert_eq!(
        received,
        (0..10).collect::<Vec<_>>(),
        "one sender's messages keep their order"
    );
    assert_eq!(s.wait(echo).unwrap().downcast::<u64>().unwrap(), 10);
}

#[test]
fn yields_complete_by_tag_whether_answered_on_the_worker_or_another_thread() {
    struct Later(u64);
    impl Command for Later {
        type Output = u64;
    }
    let s = Scheduler::builder()
        .workers(2)
        .handler(|Number(n), done: Completer<Number>| done.complete(n * 10))
        .handler(|Later(n), done: Completer<Later>| {
            std::thread::spawn(move || done.complete(n * 100));
        })
        .build()
        .unwrap();
    let mut next = 1_u64;
    let mut seen = Vec::new();
    let pid = s
        .spawn(
            Scripted::new(move |_, events, out| {
                for event in events {
                    let Event::Completion(c) = event else {
                        continue;
                    };
                    let value = c.result.unwrap().downcast::<u64>().unwrap();
                    seen.push((c.tag, value));
                }
                if next > 6 {
                    out.set_status(Status::Done(Payload::new(seen.clone())));
                    return Ok(());
                }
                if next % 2 == 1 {
                    out.yield_command(Tag(next), Number(next));
                } else {
                    out.yield_command(Tag(next), Later(next));
                }
                next += 1;
                out.set_status(Status::WaitingForYields);
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let seen = s.wait(pid).unwrap().downcast::<Vec<(Tag, u64)>>().unwrap();
    assert_eq!(
        seen,
        vec![
            (Tag(1), 10),
            (Tag(2), 200),
            (Tag(3), 30),
            (Tag(4), 400),
            (Tag(5), 50),
            (Tag(6), 600)
        ]
    );
}

#[test]
fn several_outstanding_yields_complete_in_any_order() {
    struct Parked(#[allow(dead_code)] u64);
    impl Command for Parked {
        type Output = u64;
    }
    let (tx, rx) = mpsc::channel::<Completer<Parked>>();
    let tx = parking_lot::Mutex::new(tx);
    let s = Scheduler::builder()
        .workers(2)
        .handler(move |_: Parked, done: Completer<Parked>| tx.lock().send(done).unwrap())
        .build()
        .unwrap();
    let pid = s
        .spawn(
            collect_completions(
                |out| {
                    for t in 1..=5 {
                        out.yield_command(Tag(t), Parked(t));
                    }
                },
                |c| c.result.unwrap().downcast::<u64>().unwrap(),
            ),
            "run",
            (),
        )
        .unwrap();
    let mut completers: Vec<_> = (0..5).map(|_| rx.recv().unwrap()).collect();
    let tags: Vec<u64> = completers.iter().map(|c| c.tag().0).collect();
    assert_eq!(tags, vec![1, 2, 3, 4, 5], "dispatched in yield order");
    // Complete in reverse, from this thread.
    while let Some(done) = completers.pop() {
        let t = done.tag().0;
        assert_eq!(done.pid(), pid);
        done.complete(t * 7);
    }
    let got = s.wait(pid).unwrap().downcast::<Vec<(u64, u64)>>().unwrap();
    let mut by_tag = got.clone();
    by_tag.sort_unstable();
    assert_eq!(by_tag, (1..=5).map(|t| (t, t * 7)).collect::<Vec<_>>());
}

#[test]
fn unknown_entry_lists_the_available_ones_and_closes_the_process() {
    let s = scheduler(1);
    let process = Scripted::new(|_, _, _| unreachable!("never stepped"));
    let closes = process.closes();
    let err = s.spawn(process, "nope", ()).unwrap_err();
    match &err {
        SpawnError::Init(InitError::UnknownMethod { method, available }) => {
            assert_eq!(method, "nope");
            assert_eq!(available, &["run".to_owned()]);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "cannot spawn: no entry named `nope`; available entries: `run`"
    );
    assert_eq!(
        closes.load(Ordering::SeqCst),
        1,
        "close runs once after a failed init"
    );
    let err = s.spawn(Answer(0), "run", ("not a number",)).unwrap_err();
    assert!(err.to_string().contains("`&str`"), "{err}");
}

#[test]
fn sends_to_unknown_or_finished_processes_give_the_message_back() {
    let s = scheduler(1);
    let unknown = wsched::Pid::from_raw(1_000_000);
    let err = s.send(unknown, String::from("lost?")).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::NoSuchProcess);
    assert_eq!(err.to(), unknown);
    assert!(err.to_string().contains("no such process"), "{err}");
    assert_eq!(err.into_payload().downcast::<String>().unwrap(), "lost?");

    let pid = s.spawn(Answer(5), "run", ()).unwrap();
    assert_eq!(s.wait(pid).unwrap().downcast::<u64>().unwrap(), 5);
    let err = s.send(pid, 9_u8).unwrap_err();
    assert_eq!(err.kind(), SendErrorKind::Finished);
    assert_eq!(err.into_payload().downcast::<u8>().unwrap(), 9);

    // Finished but its result not yet claimed: still "finished".
    let pid = s.spawn(Answer(6), "run", ()).unwrap();
    let waiter = s.spawn(Echo::new(), "serve", ()).unwrap();
    while s.processes().iter().any(|p| p.pid == pid) {
        std::thread::yield_now();
    }
    assert_eq!(
        s.send(pid, 1_u8).unwrap_err().kind(),
        SendErrorKind::Finished
    );
    assert_eq!(s.wait(pid).unwrap().downcast::<u64>().unwrap(), 6);
    s.send(waiter, "stop").unwrap();
}

/// A worker remembers the processes its steps send to often, holding their cells:
/// a send to one that has since ended still comes back as "finished", with its
/// message, and one to a live one still arrives.
#[test]
fn a_send_to_a_process_sent_to_before_that_has_ended_comes_back() {
    let s = scheduler(1);
    let echo = s.spawn(Echo::new(), "serve", ()).unwrap();
    let other = s.spawn(Echo::new(), "serve", ()).unwrap();
    let mut started = false;
    let sender = s
        .spawn(
            Scripted::new(move |ctx, events, out| {
                if !started {
                    // Often enough to be remembered.
                    for i in 0..3_u32 {
                        ctx.send(echo, i).unwrap();
                        ctx.send(other, i).unwrap();
                    }
                    ctx.send(echo, "stop").unwrap();
                    started = true;
                }
                let go = events.iter().any(|e| {
                    matches!(e, Event::Message(m) if m.payload.downcast_ref::<&str>() == Some(&"go"))
                });
                if go {
                    let refused = ctx.send(echo, 7_u8).unwrap_err();
                    ctx.send(other, "stop").unwrap();
                    let kind = refused.kind();
                    let payload = refused.into_payload().downcast::<u8>().unwrap();
                    out.set_status(Status::Done(Payload::new((kind, payload))));
                } else {
                    out.set_status(Status::WaitingForMessage);
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    assert_eq!(s.wait(echo).unwrap().downcast::<u64>().unwrap(), 3);
    s.send(sender, "go").unwrap();
    let (kind, payload) = s
        .wait(sender)
        .unwrap()
        .downcast::<(SendErrorKind, u8)>()
        .unwrap();
    assert_eq!((kind, payload), (SendErrorKind::Finished, 7));
    assert_eq!(s.wait(other).unwrap().downcast::<u64>().unwrap(), 3);
}

#[test]
fn a_result_is_claimed_exactly_once() {
    let s = scheduler(2);
    let pid = s.spawn(Answer(1), "run", ()).unwrap();
    assert_eq!(s.wait(pid).unwrap().downcast::<u64>().unwrap(), 1);
    assert!(matches!(s.wait(pid), Err(JoinError::AlreadyClaimed(p)) if p == pid));
    let unknown = wsched::Pid::from_raw(999_999);
    assert!(matches!(s.wait(unknown), Err(JoinError::NoSuchProcess(p)) if p == unknown));

    let detached = s.spawn_detached(Echo::new(), "serve", ()).unwrap();
    assert!(matches!(s.wait(detached), Err(JoinError::Detached(p)) if p == detached));
    s.send(detached, "stop").unwrap();
}

#[test]
fn wait_timeout_times_out_and_the_result_stays_claimable() {
    let s = scheduler(1);
    let pid = s.spawn(Echo::new(), "serve", ()).unwrap();
    let err = s.wait_timeout(pid, Duration::from_millis(20)).unwrap_err();
    assert!(matches!(err, JoinError::TimedOut(p) if p == pid));
    s.send(pid, "stop").unwrap();
    assert_eq!(s.wait(pid).unwrap().downcast::<u64>().unwrap(), 0);
}

#[test]
fn failures_and_panics_end_only_their_process() {
    struct PanicIn(Phase);
    impl wsched::Process for PanicIn {
        fn init(
            &mut self,
            _: wsched::Context,
            _: &str,
            _: wsched::Payloads,
        ) -> Result<(), InitError> {
            if self.0 == Phase::Init {
                panic!("boom in init");
            }
            Ok(())
        }
        fn step(
            &mut self,
            _: wsched::Events<'_>,
            out: &mut wsched::StepOutput,
        ) -> Result<(), StepError> {
            if self.0 == Phase::Step {
                panic!("boom in step {}", 7);
            }
            out.set_status(Status::Done(Payload::unit()));
            Ok(())
        }
        fn close(&mut self) {
            if self.0 == Phase::Close {
                panic!("boom in close");
            }
        }
    }
    // One worker: if a panic took it down, nothing after it would run.
    let s = scheduler(1);
    match s.spawn(PanicIn(Phase::Init), "x", ()) {
        Err(SpawnError::InitPanicked { message }) => assert_eq!(message, "boom in init"),
        other => panic!("unexpected {other:?}"),
    }
    let step = s.spawn(PanicIn(Phase::Step), "x", ()).unwrap();
    let close = s.spawn(PanicIn(Phase::Close), "x", ()).unwrap();
    let failing = s.spawn(Answer(0), "fail", ()).unwrap();
    let no_status = s.spawn(Scripted::new(|_, _, _| Ok(())), "run", ()).unwrap();
    let fine = s.spawn(Answer(3), "run", ()).unwrap();

    let err = s.wait(step).unwrap_err();
    match err.process_error() {
        Some(ProcessError::Panicked {
            phase: Phase::Step,
            message,
        }) => {
            assert_eq!(message, "boom in step 7")
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = s.wait(close).unwrap_err();
    assert!(
        matches!(
            err.process_error(),
            Some(ProcessError::Panicked {
                phase: Phase::Close,
                ..
            })
        ),
        "{err}"
    );
    let err = s.wait(failing).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{failing} ended with an error: process failed: told to fail")
    );
    let err = s.wait(no_status).unwrap_err();
    assert!(err.to_string().contains("without a status"), "{err}");
    assert_eq!(s.wait(fine).unwrap().downcast::<u64>().unwrap(), 3);
    let m = s.metrics();
    assert_eq!((m.finished, m.failed), (1, 4));
}

#[test]
fn close_runs_exactly_once_however_the_process_ends() {
    let s = scheduler(2);
    let done = Scripted::new(|_, _, out| {
        out.set_status(Status::Done(Payload::unit()));
        Ok(())
    });
    let failed = Scripted::new(|_, _, _| Err(StepError::new("no")));
    let panicked = Scripted::new(|_, _, _| panic!("whoops"));
    let stopped = Scripted::new(|_, _, out| {
        out.set_status(Status::WaitingForMessage);
        Ok(())
    });
    let counters: Vec<_> = [&done, &failed, &panicked, &stopped]
        .iter()
        .map(|p| p.closes())
        .collect();
    let pids: Vec<_> = [done, failed, panicked]
        .into_iter()
        .map(|p| s.spawn(p, "run", ()).unwrap())
        .collect();
    let stopped = s.spawn(stopped, "run", ()).unwrap();
    for pid in pids {
        let _ = s.wait(pid);
    }
    let report = s.shutdown(Duration::from_millis(10));
    assert_eq!(report.stopped, vec![stopped]);
    for counter in counters {
        assert_eq!(counter.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn commands_without_handlers_dropped_completers_and_panicking_handlers_report_errors() {
    struct Unhandled;
    impl Command for Unhandled {
        type Output = ();
    }
    struct Forgotten;
    impl Command for Forgotten {
        type Output = ();
    }
    struct Explodes;
    impl Command for Explodes {
        type Output = ();
    }
    struct Refused;
    impl Command for Refused {
        type Output = ();
    }
    let s = Scheduler::builder()
        .workers(1)
        .handler(|_: Forgotten, done: Completer<Forgotten>| drop(done))
        .handler(|_: Explodes, _done: Completer<Explodes>| panic!("handler blew up"))
        .handler(|_: Refused, done: Completer<Refused>| done.fail("not today"))
        .build()
        .unwrap();
    let pid = s
        .spawn(
            collect_completions(
                |out| {
                    out.yield_command(Tag(1), Unhandled);
                    out.yield_command(Tag(2), Forgotten);
                    out.yield_command(Tag(3), Explodes);
                    out.yield_command(Tag(4), Refused);
                },
                |c| c.result.unwrap_err().to_string(),
            ),
            "run",
            (),
        )
        .unwrap();
    let mut errors = s
        .wait(pid)
        .unwrap()
        .downcast::<Vec<(u64, String)>>()
        .unwrap();
    errors.sort();
    // Messages name types without their module paths.
    let expected = [
        "no handler is registered for command `Unhandled`; register one on the scheduler builder",
        "the handler of `Forgotten` dropped its completer without completing it",
        "the handler of `Explodes` panicked: handler blew up",
        "command `Refused` failed: not today",
    ];
    let expected: Vec<(u64, String)> = (1..).zip(expected.map(String::from)).collect();
    assert_eq!(errors, expected);
    // The one worker survived the handler's panic.
    let after = s.spawn(Answer(8), "run", ()).unwrap();
    assert_eq!(s.wait(after).unwrap().downcast::<u64>().unwrap(), 8);
}

#[test]
fn a_completion_after_the_process_ended_is_ignored() {
    struct Slow;
    impl Command for Slow {
        type Output = u8;
    }
    let (tx, rx) = mpsc::channel::<Completer<Slow>>();
    let tx = parking_lot::Mutex::new(tx);
    let s = Scheduler::builder()
        .workers(1)
        .handler(move |_: Slow, done: Completer<Slow>| tx.lock().send(done).unwrap())
        .build()
        .unwrap();
    let pid = s
        .spawn(
            Scripted::new(|_, _, out| {
                out.yield_command(Tag(1), Slow);
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    s.wait(pid).unwrap();
    let done = rx.recv().unwrap();
    assert!(!done.is_process_alive());
    done.complete(1);
    let after = s.spawn(Answer(2), "run", ()).unwrap();
    assert_eq!(s.wait(after).unwrap().downcast::<u64>().unwrap(), 2);
}

#[test]
fn a_blocking_handler_does_not_block_the_only_worker() {
    /// Blocks until the other process's command arrives.
    struct WaitForSignal;
    impl Command for WaitForSignal {
        type Output = bool;
    }
    struct Signal;
    impl Command for Signal {
        type Output = ();
    }
    let (tx, rx) = mpsc::channel::<()>();
    let rx = parking_lot::Mutex::new(rx);
    let tx = parking_lot::Mutex::new(tx);
    let s = Scheduler::builder()
        .workers(1)
        .blocking_handler(move |_: WaitForSignal, done: Completer<WaitForSignal>| {
            // If the worker were blocked here, `Signal` below could never be
            // dispatched and this would time out (a failure, not a hang).
            let got = rx.lock().recv_timeout(Duration::from_secs(60)).is_ok();
            done.complete(got);
        })
        .handler(move |_: Signal, done: Completer<Signal>| {
            tx.lock().send(()).unwrap();
            done.complete(());
        })
        .build()
        .unwrap();
    let waiter = s
        .spawn(
            collect_completions(
                |out| out.yield_command(Tag(1), WaitForSignal),
                |c| c.result.unwrap().downcast::<bool>().unwrap(),
            ),
            "run",
            (),
        )
        .unwrap();
    let signaller = s
        .spawn(
            collect_completions(
                |out| out.yield_command(Tag(1), Signal),
                |c| c.result.is_ok(),
            ),
            "run",
            (),
        )
        .unwrap();
    let signalled = s.wait(signaller).unwrap().downcast::<Vec<(u64, bool)>>();
    assert_eq!(signalled.unwrap(), vec![(1, true)]);
    let waited = s.wait(waiter).unwrap().downcast::<Vec<(u64, bool)>>();
    assert_eq!(
        waited.unwrap(),
        vec![(1, true)],
        "the blocking handler got the signal"
    );
}

#[test]
fn builder_rejects_zero_workers_and_duplicate_handlers() {
    assert!(matches!(
        Scheduler::builder().workers(0).build(),
        Err(BuildError::NoWorkers)
    ));
    let err = Scheduler::builder()
        .workers(1)
        .handler(|_: Number, d: Completer<Number>| d.complete(0))
        .handler(|_: Number, d: Completer<Number>| d.complete(1))
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::DuplicateHandler { command } if command.ends_with("Number")));
    assert!(err.to_string().contains("register each command type once"));
}

// Cleaning up after a cancel and being stopped at the timeout are two tests: a
// cleanup has to finish within the timeout, which takes a generous one on a loaded
// machine, and a process that ignores its cancel holds shutdown for all of it.

#[test]
fn shutdown_cancels_and_lets_cleanup_yields_run() {
    let s = Scheduler::builder()
        .workers(2)
        .handler(|Number(n), done: Completer<Number>| {
            std::thread::spawn(move || done.complete(n));
        })
        .build()
        .unwrap();
    // Cleans up by yielding a command after the cancel, then finishes.
    let mut cleaning = false;
    let polite = s
        .spawn(
            Scripted::new(move |_, events, out| {
                for event in events {
                    match event {
                        Event::Cancel => {
                            out.yield_command(Tag(1), Number(42));
                            cleaning = true;
                        }
                        Event::Completion(c) if cleaning => {
                            out.set_status(Status::Done(c.result.unwrap()));
                            return Ok(());
                        }
                        _ => {}
                    }
                }
                out.set_status(if cleaning {
                    Status::WaitingForYields
                } else {
                    Status::WaitingForMessage
                });
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    // A hang guard: shutdown returns as soon as the cleanup is done.
    let report = s.shutdown(PATIENCE);
    assert_eq!(report.finished, 1);
    assert!(report.stopped.is_empty(), "{report:?}");
    assert_eq!(s.wait(polite).unwrap().downcast::<u64>().unwrap(), 42);
}

#[test]
fn shutdown_stops_what_is_left_when_its_timeout_has_passed() {
    let s = scheduler(2);
    let stubborn = s.spawn(Stubborn, "run", ()).unwrap();
    let report = s.shutdown(Duration::from_millis(50));
    assert_eq!(report.finished, 0);
    assert_eq!(report.stopped, vec![stubborn]);
    assert!(report.elapsed >= Duration::from_millis(50));
    let err = s.wait(stubborn).unwrap_err();
    assert!(
        matches!(err.process_error(), Some(ProcessError::Stopped)),
        "{err}"
    );
    // Twice is harmless and reports the same; spawning afterwards fails.
    assert_eq!(s.shutdown(Duration::ZERO), report);
    assert!(matches!(
        s.spawn(Answer(1), "run", ()),
        Err(SpawnError::ShuttingDown)
    ));
}

#[test]
fn listing_shows_live_processes_and_metrics_count_work() {
    let s = scheduler(2);
    let echo = s.spawn(Echo::new(), "serve", ()).unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    let running = s
        .spawn(
            Scripted::new(move |_, _, out| {
                b.wait(); // listed while running
                b.wait();
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    barrier.wait();
    let list = s.processes();
    let echo_info = list.iter().find(|p| p.pid == echo).unwrap();
    assert_eq!(echo_info.entry, "serve");
    assert!(echo_info.process_type.ends_with("::Echo"));
    assert_eq!(echo_info.label(), format!("Echo::serve {echo}"));
    let running_info = list.iter().find(|p| p.pid == running).unwrap();
    assert_eq!(running_info.state, ProcessState::Running);
    assert_eq!(running_info.entry, "run");
    barrier.wait();
    s.wait(running).unwrap();
    // The echo has stepped once and now waits for a message.
    let waiting = loop {
        let info = s.processes().into_iter().find(|p| p.pid == echo).unwrap();
        if info.state == ProcessState::WaitingForMessage {
            break info;
        }
        std::thread::yield_now();
    };
    assert_eq!(waiting.steps, 1);
    assert!(waiting.to_string().starts_with(&format!(
        "Echo::serve {echo} [waiting for a message] after 1 step"
    )));
    s.send(echo, "stop").unwrap();
    s.wait(echo).unwrap();
    let m = s.metrics();
    assert_eq!(m.workers.len(), 2);
    assert_eq!(m.total().steps, 3);
    assert_eq!((m.spawned, m.finished, m.live), (2, 2, 0));
}

#[test]
fn processes_spawned_by_processes_and_joined() {
    let s = scheduler(2);
    let counter = Arc::new(AtomicUsize::new(0));
    let c = counter.clone();
    let mut child = None;
    let parent = s
        .spawn(
            Scripted::new(move |ctx, events, out| {
                if child.is_none() {
                    child = Some(ctx.spawn(Answer(11), "run", ()).unwrap());
                    c.fetch_add(1, Ordering::SeqCst);
                    out.yield_command(Tag(1), wsched::command::Join(child.unwrap()));
                    out.set_status(Status::WaitingForYields);
                    return Ok(());
                }
                for event in events {
                    if let Event::Completion(c) = event {
                        let joined = c
                            .result
                            .unwrap()
                            .downcast::<Result<Payload, JoinError>>()
                            .unwrap();
                        out.set_status(Status::Done(joined.unwrap()));
                        return Ok(());
                    }
                }
                out.set_status(Status::WaitingForYields);
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    assert_eq!(s.wait(parent).unwrap().downcast::<u64>().unwrap(), 11);
    assert_eq!(counter.load(Ordering::SeqCst), 1);
}

#[test]
fn one_worker_survives_many_messages_between_many_processes() {
    let s = scheduler(1);
    let echoes: Vec<_> = (0..50)
        .map(|_| s.spawn(Echo::new(), "serve", ()).unwrap())
        .collect();
    for (i, &e) in echoes.iter().enumerate() {
        for _ in 0..i {
            s.send(e, 0_u8).unwrap();
        }
        s.send(e, "stop").unwrap();
    }
    for (i, e) in echoes.into_iter().enumerate() {
        assert_eq!(s.wait(e).unwrap().downcast::<u64>().unwrap(), i as u64);
    }
}

#[test]
fn the_listing_names_each_process_parent() {
    let s = scheduler(2);
    let (tx, rx) = mpsc::channel();
    let tx = parking_lot::Mutex::new(tx);
    let parent = s
        .spawn(
            Scripted::new(move |ctx, _, out| {
                let child = ctx.spawn(Echo::new(), "serve", ()).unwrap();
                tx.lock().send(child).unwrap();
                out.set_status(Status::WaitingForMessage);
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let child = rx.recv().unwrap();
    let list = s.processes();
    let info = |pid| list.iter().find(|p| p.pid == pid).unwrap();
    assert_eq!(info(child).parent, Some(parent));
    assert_eq!(info(parent).parent, None);
}

#[test]
fn a_cancel_request_reaches_one_process_and_errors_name_the_pid() {
    let s = scheduler(2);
    let echo = s.spawn(Echo::new(), "serve", ()).unwrap();
    let bystander = s.spawn(Echo::new(), "serve", ()).unwrap();
    s.send(echo, 1_u8).unwrap();
    s.cancel(echo).unwrap();
    // Echo finishes on a cancel with the number of messages it answered.
    assert_eq!(s.wait(echo).unwrap().downcast::<u64>().unwrap(), 1);
    let err = s.cancel(echo).unwrap_err();
    assert_eq!((err.pid(), err.kind()), (echo, SendErrorKind::Finished));
    assert_eq!(
        err.to_string(),
        format!("cannot cancel {echo}: the process has finished")
    );
    let unknown = wsched::Pid::from_raw(424_242);
    assert_eq!(
        s.cancel(unknown).unwrap_err().kind(),
        SendErrorKind::NoSuchProcess
    );
    // The other process was not touched.
    let listed = s.processes();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].pid, bystander);
    s.send(bystander, "stop").unwrap();
    assert_eq!(s.wait(bystander).unwrap().downcast::<u64>().unwrap(), 0);
}
