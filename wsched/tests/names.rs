//! Names: registering a process under a name, finding it, sending to it, and the name
//! freed when the process ends — from outside (`Scheduler`/`Handle`) and from
//! hand-written processes (`Context`), including the races: two registrations of one
//! name at once, lookups and sends racing the end of the holder, a name registered
//! again right after its holder ended.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::{Scripted, Stubborn};
use wsched::{
    Event, JoinError, Payload, Pid, ProcessError, RegisterError, Scheduler, SendErrorKind,
    SendNamedErrorKind, Status, StepError,
};

/// How long something that should happen at once may take on a loaded machine
/// before a test gives up (a hang guard, never a wait for something to happen).
const PATIENCE: Duration = Duration::from_secs(20);

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("scheduler starts")
}

/// Waits for messages; finishes with how many `u64`s it got on the string "stop",
/// fails on "fail", panics on "panic", finishes on a cancel.
fn holder() -> Scripted {
    let mut got = 0_u64;
    Scripted::new(move |_, events, out| {
        for event in events {
            match event {
                Event::Message(m) if m.payload.is::<u64>() => got += 1,
                Event::Message(m) => match m.payload.downcast::<&str>() {
                    Ok("stop") => {
                        out.set_status(Status::Done(Payload::new(got)));
                        return Ok(());
                    }
                    Ok("fail") => return Err(StepError::new("told to fail")),
                    Ok("panic") => panic!("told to panic"),
                    _ => {}
                },
                Event::Cancel => {
                    out.set_status(Status::Done(Payload::new(got)));
                    return Ok(());
                }
                Event::Completion(_) => {}
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn a_name_finds_and_reaches_its_process_from_outside() {
    let s = scheduler(2);
    let pid = s.spawn(holder(), "run", ()).unwrap();
    assert_eq!(s.whereis("counter"), None);
    s.register("counter", pid).unwrap();
    s.register("counter", pid).unwrap(); // again, by its holder: no change
    s.register("tally", pid).unwrap(); // a second name
    assert_eq!(s.whereis("counter"), Some(pid));
    assert_eq!(s.handle().whereis("tally"), Some(pid));
    s.send_named("counter", 1_u64).unwrap();
    s.handle().send_named("tally", 2_u64).unwrap();
    s.send_named("counter", "stop").unwrap();
    let got = s
        .wait_timeout(pid, PATIENCE)
        .unwrap()
        .downcast::<u64>()
        .unwrap();
    assert_eq!(got, 2, "both names reached it");
    assert_eq!(s.whereis("counter"), None);
    assert_eq!(s.whereis("tally"), None);
    assert!(s.shutdown(PATIENCE).stopped.is_empty());
}

#[test]
fn registering_a_taken_name_or_a_process_that_is_not_alive_says_why() {
    let s = scheduler(1);
    let first = s.spawn(holder(), "run", ()).unwrap();
    let second = s.spawn(holder(), "run", ()).unwrap();
    s.register("db", first).unwrap();
    let taken = s.register("db", second).unwrap_err();
    assert_eq!(
        taken,
        RegisterError::Taken {
            name: "db".to_owned(),
            holder: first
        }
    );
    assert_eq!(taken.name(), "db");
    assert_eq!(
        taken.to_string(),
        format!(
            "cannot register the name `db`: {first} holds it (unregister it first, or wait \
             for {first} to end)"
        )
    );
    assert_eq!(s.whereis("db"), Some(first), "the holder keeps it");

    let never = Pid::from_raw(1_000_000);
    let unknown = s.register("ghost", never).unwrap_err();
    assert_eq!(
        unknown,
        RegisterError::NotAlive {
            name: "ghost".to_owned(),
            pid: never,
            kind: SendErrorKind::NoSuchProcess
        }
    );
    assert_eq!(
        unknown.to_string(),
        "cannot register <1000000> as `ghost`: no such process"
    );
    s.send(second, "stop").unwrap();
    s.wait_timeout(second, PATIENCE).unwrap();
    let finished = s.register("late", second).unwrap_err();
    assert_eq!(
        finished.to_string(),
        format!("cannot register {second} as `late`: the process has finished")
    );
    assert_eq!(s.whereis("ghost"), None);
    assert_eq!(s.whereis("late"), None);
    s.send(first, "stop").unwrap();
    s.wait_timeout(first, PATIENCE).unwrap();
    s.shutdown(PATIENCE);
}

#[test]
fn sending_to_a_name_nobody_holds_hands_the_message_back() {
    let s = scheduler(1);
    let error = s.send_named("nobody", String::from("hello")).unwrap_err();
    assert_eq!(error.name(), "nobody");
    assert_eq!(error.kind(), SendNamedErrorKind::NotRegistered);
    assert_eq!(error.message_type(), "alloc::string::String");
    assert_eq!(
        error.to_string(),
        "cannot send a `String` to the name `nobody`: no live process is \
         registered under it (the message is returned in this error)"
    );
    assert_eq!(error.into_payload().downcast::<String>().unwrap(), "hello");
    s.shutdown(PATIENCE);
}

#[test]
fn unregistering_frees_a_name_and_says_who_held_it() {
    let s = scheduler(1);
    let first = s.spawn(holder(), "run", ()).unwrap();
    let second = s.spawn(holder(), "run", ()).unwrap();
    s.register("svc", first).unwrap();
    s.register("other", first).unwrap();
    assert_eq!(s.unregister("svc"), Some(first));
    assert_eq!(s.unregister("svc"), None, "already free");
    assert_eq!(s.whereis("svc"), None);
    assert_eq!(s.whereis("other"), Some(first), "its other name stays");
    s.register("svc", second).unwrap();
    assert_eq!(s.whereis("svc"), Some(second));
    for pid in [first, second] {
        s.send(pid, "stop").unwrap();
        s.wait_timeout(pid, PATIENCE).unwrap();
    }
    assert_eq!(s.whereis("other"), None);
    assert_eq!(s.unregister("other"), None, "its holder ended");
    s.shutdown(PATIENCE);
}

#[test]
fn a_name_is_freed_however_its_holder_ends() {
    support::quiet_expected_panics("told to panic");
    let s = scheduler(2);
    for (how, message) in [
        ("finished", Some("stop")),
        ("failed", Some("fail")),
        ("panicked", Some("panic")),
        ("cancelled", None),
    ] {
        let pid = s.spawn(holder(), "run", ()).unwrap();
        let name = format!("holder-{how}");
        s.register(&name, pid).unwrap();
        match message {
            Some(message) => s.send_named(&name, message).unwrap(),
            None => s.cancel(pid).unwrap(),
        }
        let result = s.wait_timeout(pid, PATIENCE);
        match how {
            "failed" => assert!(matches!(
                result,
                Err(JoinError::Failed {
                    error: ProcessError::Failed(_),
                    ..
                })
            )),
            "panicked" => assert!(matches!(
                result,
                Err(JoinError::Failed {
                    error: ProcessError::Panicked { .. },
                    ..
                })
            )),
            _ => assert!(result.is_ok(), "{how}: {result:?}"),
        }
        assert_eq!(s.whereis(&name), None, "{how}");
        let next = s.spawn(holder(), "run", ()).unwrap();
        s.register(&name, next).unwrap();
        s.send(next, "stop").unwrap();
        s.wait_timeout(next, PATIENCE).unwrap();
    }

    // A detached holder: nobody can wait for its result, so the test waits for its
    // name to go (its end is the only thing that frees it).
    let detached = s.spawn_detached(holder(), "run", ()).unwrap();
    s.register("detached", detached).unwrap();
    s.send(detached, "stop").unwrap();
    let deadline = Instant::now() + PATIENCE;
    while s.whereis("detached").is_some() {
        assert!(
            Instant::now() < deadline,
            "the detached holder's name stayed"
        );
        thread::yield_now();
    }
    let next = s.spawn(holder(), "run", ()).unwrap();
    s.register("detached", next).unwrap();

    // A holder stopped by shutdown.
    let stubborn = s.spawn(Stubborn, "run", ()).unwrap();
    s.register("stubborn", stubborn).unwrap();
    let report = s.shutdown(Duration::ZERO);
    assert!(report.stopped.contains(&stubborn), "{report:?}");
    assert_eq!(s.whereis("stubborn"), None);
    assert_eq!(s.whereis("detached"), None);
}

#[test]
fn a_name_can_be_registered_again_as_soon_as_its_holder_has_ended() {
    let s = scheduler(2);
    let mut previous = None;
    for round in 0..500 {
        let pid = s.spawn(holder(), "run", ()).unwrap();
        // The name of the holder that ended a moment ago is free: no retry, no wait.
        s.register("leader", pid).unwrap_or_else(|e| {
            panic!("round {round}: {e} (the previous holder was {previous:?})")
        });
        s.send_named("leader", "stop").unwrap();
        s.wait_timeout(pid, PATIENCE).unwrap();
        previous = Some(pid);
    }
    assert_eq!(s.whereis("leader"), None);
    s.shutdown(PATIENCE);
}

/// Registers itself under `name` in its first step (once both contenders have
/// started, or after a moment), records what that said and where the name pointed
/// right after, and finishes on a message: both stay live while both try.
fn contender(name: String, race: Arc<Race>) -> Scripted {
    let mut tried = false;
    Scripted::new(move |ctx, events, out| {
        if !tried {
            tried = true;
            race.started.fetch_add(1, SeqCst);
            let deadline = Instant::now() + Duration::from_millis(50);
            while race.started.load(SeqCst) < 2 && Instant::now() < deadline {
                std::hint::spin_loop();
            }
            let registered = ctx.register(&name, ctx.pid());
            let found = ctx.whereis(&name);
            race.outcomes
                .lock()
                .unwrap()
                .push((ctx.pid(), registered, found));
        }
        if events.iter().any(|e| matches!(e, Event::Message(_))) {
            out.set_status(Status::Done(Payload::unit()));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    })
}

/// A contender, what its registration said, and where the name pointed right after.
type Outcome = (Pid, Result<(), RegisterError>, Option<Pid>);

#[derive(Default)]
struct Race {
    started: AtomicUsize,
    outcomes: Mutex<Vec<Outcome>>,
}

#[test]
fn two_processes_registering_one_name_at_once_exactly_one_wins() {
    const ROUNDS: usize = 300;
    let s = scheduler(2);
    for round in 0..ROUNDS {
        let name = format!("contested-{round}");
        let race = Arc::new(Race::default());
        let pids = [(); 2].map(|()| {
            s.spawn(contender(name.clone(), race.clone()), "run", ())
                .unwrap()
        });
        let deadline = Instant::now() + PATIENCE;
        while race.outcomes.lock().unwrap().len() < 2 {
            assert!(Instant::now() < deadline, "round {round}: they never tried");
            thread::yield_now();
        }
        let outcomes = std::mem::take(&mut *race.outcomes.lock().unwrap());
        let winners: Vec<Pid> = outcomes
            .iter()
            .filter(|(_, registered, _)| registered.is_ok())
            .map(|(pid, _, _)| *pid)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {outcomes:?}");
        let winner = winners[0];
        assert_eq!(s.whereis(&name), Some(winner));
        for (pid, registered, found) in &outcomes {
            assert_eq!(*found, Some(winner), "round {round}: both see the winner");
            if *pid != winner {
                assert_eq!(
                    *registered,
                    Err(RegisterError::Taken {
                        name: name.clone(),
                        holder: winner
                    })
                );
            }
        }
        for pid in pids {
            s.send(pid, ()).unwrap();
            s.wait_timeout(pid, PATIENCE).unwrap();
        }
        assert_eq!(s.whereis(&name), None, "round {round}: both ended");
    }

    // Two outside threads registering two live processes under one name.
    let a = s.spawn(holder(), "run", ()).unwrap();
    let b = s.spawn(holder(), "run", ()).unwrap();
    for round in 0..ROUNDS {
        let name = format!("outside-{round}");
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let racers: Vec<_> = [a, b]
            .into_iter()
            .map(|pid| {
                let (handle, name, barrier) = (s.handle(), name.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    handle.register(&name, pid).map(|()| pid)
                })
            })
            .collect();
        let results: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        let won: Vec<Pid> = results.iter().filter_map(|r| r.clone().ok()).collect();
        assert_eq!(won.len(), 1, "round {round}: {results:?}");
        assert_eq!(s.whereis(&name), Some(won[0]));
        let lost = results.iter().find_map(|r| r.clone().err()).unwrap();
        assert_eq!(
            lost,
            RegisterError::Taken {
                name,
                holder: won[0]
            }
        );
    }
    for pid in [a, b] {
        s.send(pid, "stop").unwrap();
        s.wait_timeout(pid, PATIENCE).unwrap();
    }
    assert!(s.shutdown(PATIENCE).stopped.is_empty());
}

/// A message that knows whether it was received, handed back or dropped unread.
struct Token {
    id: u64,
    ledger: Arc<Ledger>,
    accounted: bool,
}

#[derive(Default)]
struct Ledger {
    received: Mutex<Vec<u64>>,
    dropped_unread: Mutex<Vec<u64>>,
}

impl Drop for Token {
    fn drop(&mut self) {
        if !self.accounted {
            self.ledger.dropped_unread.lock().unwrap().push(self.id);
        }
    }
}

/// Receives tokens; ends after `quota` of them.
fn token_holder(quota: usize) -> Scripted {
    let mut got = 0;
    Scripted::new(move |_, events, out| {
        for event in events {
            if let Event::Message(m) = event {
                let mut token = m.payload.downcast::<Token>().unwrap();
                token.accounted = true;
                token.ledger.received.lock().unwrap().push(token.id);
                got += 1;
                if got == quota {
                    // Tokens still in this step's events are dropped unread.
                    out.set_status(Status::Done(Payload::unit()));
                    return Ok(());
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn a_message_sent_to_a_name_while_its_holder_ends_is_delivered_or_handed_back() {
    const ROUNDS: u64 = 40;
    /// The sender stops after this many sends failed (the holder had ended).
    const FAILURES: usize = 20;
    let s = scheduler(2);
    for round in 0..ROUNDS {
        let ledger = Arc::new(Ledger::default());
        // The holder ends somewhere in the middle of the stream.
        let quota = 50 + (round as usize * 37) % 300;
        let pid = s.spawn(token_holder(quota), "run", ()).unwrap();
        s.register("sink", pid).unwrap();
        let sender = {
            let (handle, ledger) = (s.handle(), ledger.clone());
            thread::spawn(move || {
                let (mut accepted, mut returned) = (Vec::new(), Vec::new());
                let deadline = Instant::now() + PATIENCE;
                for id in 0.. {
                    if returned.len() == FAILURES {
                        break;
                    }
                    assert!(Instant::now() < deadline, "the holder never ended");
                    let token = Token {
                        id,
                        ledger: ledger.clone(),
                        accounted: false,
                    };
                    match handle.send_named("sink", token) {
                        Ok(()) => accepted.push(id),
                        Err(error) => {
                            match error.kind() {
                                SendNamedErrorKind::NotRegistered => {}
                                SendNamedErrorKind::HolderFinished(holder) => {
                                    assert_eq!(holder, pid)
                                }
                                other => panic!("{other:?}"),
                            }
                            let mut token = error.into_payload().downcast::<Token>().unwrap();
                            assert_eq!(token.id, id, "the message handed back is the one sent");
                            token.accounted = true;
                            returned.push(id);
                        }
                    }
                }
                (accepted, returned)
            })
        };
        let (accepted, returned) = sender.join().unwrap();
        s.wait_timeout(pid, PATIENCE).unwrap();
        let received = ledger.received.lock().unwrap().clone();
        let dropped = ledger.dropped_unread.lock().unwrap().clone();
        assert_eq!(received.len(), quota, "round {round}");
        // Every message the send accepted reached the holder's mailbox: it read it,
        // or it ended with it unread; every other one came back to the sender.
        let reached: BTreeSet<u64> = received.iter().chain(&dropped).copied().collect();
        assert_eq!(reached.len(), received.len() + dropped.len(), "each once");
        assert_eq!(reached, accepted.iter().copied().collect(), "round {round}");
        assert_eq!(returned.len(), FAILURES);
        let sent: BTreeSet<u64> = accepted.iter().chain(&returned).copied().collect();
        assert_eq!(sent.len(), accepted.len() + returned.len(), "each once");
        assert_eq!(s.whereis("sink"), None);
    }
    assert!(s.shutdown(PATIENCE).stopped.is_empty());
}

#[test]
fn a_lookup_racing_the_end_of_the_holder_finds_it_or_nothing_and_then_nothing() {
    let s = scheduler(2);
    for round in 0..200 {
        let pid = s.spawn(holder(), "run", ()).unwrap();
        s.register("racer", pid).unwrap();
        let looker = {
            let handle = s.handle();
            thread::spawn(move || {
                let mut seen = Vec::new();
                let deadline = Instant::now() + PATIENCE;
                loop {
                    let found = handle.whereis("racer");
                    seen.push(found);
                    if found.is_none() || Instant::now() > deadline {
                        return seen;
                    }
                }
            })
        };
        s.send(pid, "stop").unwrap();
        s.wait_timeout(pid, PATIENCE).unwrap();
        assert_eq!(s.whereis("racer"), None, "round {round}: freed at its end");
        let seen = looker.join().unwrap();
        assert_eq!(seen.last(), Some(&None), "round {round}");
        assert!(
            seen[..seen.len() - 1].iter().all(|f| *f == Some(pid)),
            "round {round}: only the holder, then nothing"
        );
    }
    s.shutdown(PATIENCE);
}

/// A hand-written process that registers itself, finds a peer by name and sends it
/// its own PID, and finishes when the peer answers.
fn greeter() -> Scripted {
    let mut started = false;
    Scripted::new(move |ctx, events, out| {
        if !started {
            started = true;
            ctx.register("greeter", ctx.pid()).map_err(StepError::new)?;
            assert_eq!(ctx.whereis("greeter"), Some(ctx.pid()));
            let taken = ctx.register("echo", ctx.pid()).unwrap_err();
            assert!(matches!(taken, RegisterError::Taken { .. }), "{taken}");
            ctx.send_named("echo", ctx.pid()).map_err(StepError::new)?;
            let missing = ctx.send_named("nobody", 1_u8).unwrap_err();
            assert_eq!(missing.kind(), SendNamedErrorKind::NotRegistered);
        }
        for event in events {
            if let Event::Message(m) = event {
                assert_eq!(ctx.unregister("greeter"), Some(ctx.pid()));
                out.set_status(Status::Done(m.payload));
                return Ok(());
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

/// Answers the first PID it is sent with "hello", to the name "greeter".
fn echo() -> Scripted {
    Scripted::new(move |ctx, events, out| {
        for event in events {
            if let Event::Message(m) = event {
                let from = m.payload.downcast::<Pid>().unwrap();
                assert_eq!(ctx.whereis("greeter"), Some(from));
                ctx.send_named("greeter", "hello").map_err(StepError::new)?;
                out.set_status(Status::Done(Payload::unit()));
                return Ok(());
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn names_work_the_same_from_hand_written_processes() {
    let s = scheduler(2);
    let echo = s.spawn(echo(), "run", ()).unwrap();
    s.register("echo", echo).unwrap();
    let greeter = s.spawn(greeter(), "run", ()).unwrap();
    let said = s
        .wait_timeout(greeter, PATIENCE)
        .unwrap()
        .downcast::<&str>()
        .unwrap();
    assert_eq!(said, "hello");
    s.wait_timeout(echo, PATIENCE).unwrap();
    assert_eq!((s.whereis("echo"), s.whereis("greeter")), (None, None));
    assert!(s.shutdown(PATIENCE).stopped.is_empty());
}
