//! Links: a failure takes linked processes down (`ProcessError::Linked`), or reaches
//! the ones that trap exits as `Exit` messages; links are both ways, idempotent,
//! removable; linking to a dead or unknown PID signals at once; `spawn_linked` links
//! before the child runs; chains of links are walked without recursion; both sides
//! failing at once end each once.

mod support;

use std::time::Duration;

use support::{quiet_expected_panics, Scripted};
use wsched::{
    Down, Event, Exit, ExitReason, JoinError, Payload, Pid, ProcessError, Scheduler, Status,
    StepError,
};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("scheduler starts")
}

/// What a test tells a [`linker`].
enum Do {
    Link(Pid),
    Unlink(Pid),
    Trap(bool),
    /// Spawns a linked linker and sends its PID to the channel.
    SpawnLinked(std::sync::mpsc::Sender<Pid>),
    /// Acknowledges (so a test knows the commands before it were done).
    Ack(std::sync::mpsc::Sender<()>),
    Fail,
    Panic,
    /// Finishes with the `Exit`s it got.
    Stop,
}

/// Does what it is told; keeps the `Exit` messages it gets.
fn linker() -> Scripted {
    let mut exits: Vec<Exit> = Vec::new();
    Scripted::new(move |ctx, events, out| {
        for event in events {
            let Event::Message(m) = event else { continue };
            let payload = match m.payload.downcast::<Exit>() {
                Ok(exit) => {
                    exits.push(exit);
                    continue;
                }
                Err(other) => other.into_payload(),
            };
            match payload.downcast::<Do>().expect("a Do or an Exit") {
                Do::Link(pid) => ctx.link(pid),
                Do::Unlink(pid) => ctx.unlink(pid),
                Do::Trap(on) => ctx.trap_exits(on),
                Do::SpawnLinked(to) => {
                    let child = ctx.spawn_linked(linker(), "run", ()).unwrap();
                    to.send(child).unwrap();
                }
                Do::Ack(to) => to.send(()).unwrap(),
                Do::Fail => return Err(StepError::new("told to fail")),
                Do::Panic => panic!("links test: told to panic"),
                Do::Stop => {
                    out.set_status(Status::Done(Payload::new(std::mem::take(&mut exits))));
                    return Ok(());
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

/// Tells `pid` to do `what`, and waits until it did.
fn tell(s: &Scheduler, pid: Pid, what: Do) {
    let (tx, rx) = std::sync::mpsc::channel();
    s.send(pid, what).unwrap();
    s.send(pid, Do::Ack(tx)).unwrap();
    rx.recv_timeout(PATIENCE).expect("it acknowledges");
}

fn linked_failure(error: &JoinError) -> (Pid, ExitReason) {
    match error.process_error() {
        Some(ProcessError::Linked { pid, reason }) => (*pid, (**reason).clone()),
        other => panic!("expected a linked failure, got {other:?}"),
    }
}

fn exits_of(s: &Scheduler, pid: Pid) -> Vec<Exit> {
    s.send(pid, Do::Stop).unwrap();
    s.wait_timeout(pid, PATIENCE)
        .unwrap()
        .downcast::<Vec<Exit>>()
        .unwrap()
}

fn told_to_fail() -> ExitReason {
    ExitReason::Error {
        message: "told to fail".into(),
    }
}

#[test]
fn a_failure_stops_the_linked_process_both_ways() {
    let s = scheduler(2);
    for failing_side_linked in [true, false] {
        let a = s.spawn(linker(), "run", ()).unwrap();
        let b = s.spawn(linker(), "run", ()).unwrap();
        // Either side makes the link; it works both ways.
        let (linker_pid, other) = if failing_side_linked { (b, a) } else { (a, b) };
        tell(&s, linker_pid, Do::Link(other));
        s.send(b, Do::Fail).unwrap();
        let error = s.wait_timeout(a, PATIENCE).unwrap_err();
        assert_eq!(linked_failure(&error), (b, told_to_fail()));
        assert_eq!(
            error.exit_reason(),
            Some(ExitReason::Linked {
                pid: b,
                reason: Box::new(told_to_fail())
            })
        );
        assert!(error.to_string().contains("trap exits"), "{error}");
    }
    s.shutdown(PATIENCE);
}

#[test]
fn a_normal_end_leaves_the_linked_process_running() {
    let s = scheduler(2);
    let a = s.spawn(linker(), "run", ()).unwrap();
    let b = s.spawn(linker(), "run", ()).unwrap();
    tell(&s, a, Do::Link(b));
    assert_eq!(exits_of(&s, b), vec![]);
    // Still running: it answers.
    tell(&s, a, Do::Trap(false));
    assert_eq!(exits_of(&s, a), vec![]);
    s.shutdown(PATIENCE);
}

#[test]
fn a_process_that_traps_exits_gets_messages_instead_even_for_normal_ends() {
    quiet_expected_panics("links test");
    let s = scheduler(2);
    let keeper = s.spawn(linker(), "run", ()).unwrap();
    tell(&s, keeper, Do::Trap(true));
    let mut expected = Vec::new();
    for (end, reason) in [
        (Do::Stop, ExitReason::Normal),
        (Do::Fail, told_to_fail()),
        (
            Do::Panic,
            ExitReason::Panicked {
                phase: wsched::Phase::Step,
                message: "links test: told to panic".into(),
            },
        ),
    ] {
        let worker = s.spawn(linker(), "run", ()).unwrap();
        tell(&s, keeper, Do::Link(worker));
        tell(&s, keeper, Do::Link(worker)); // idempotent: still one Exit
        let monitor = s.monitor(worker);
        s.send(worker, end).unwrap();
        monitor.wait_timeout(PATIENCE).expect("the worker ends");
        expected.push(Exit {
            pid: worker,
            reason,
        });
    }
    // The Exits were sent before the Downs (links are signalled first), so they are
    // in the keeper's mailbox before this.
    assert_eq!(exits_of(&s, keeper), expected);
    s.shutdown(PATIENCE);
}

#[test]
fn linking_to_a_dead_or_unknown_pid_signals_at_once() {
    let s = scheduler(2);
    let dead = s.spawn(linker(), "run", ()).unwrap();
    s.send(dead, Do::Stop).unwrap();
    s.wait_timeout(dead, PATIENCE).unwrap();
    for gone in [dead, Pid::from_raw(777_777)] {
        // Trapping: an Exit with "no such process".
        let keeper = s.spawn(linker(), "run", ()).unwrap();
        tell(&s, keeper, Do::Trap(true));
        tell(&s, keeper, Do::Link(gone));
        assert_eq!(
            exits_of(&s, keeper),
            vec![Exit {
                pid: gone,
                reason: ExitReason::NoSuchProcess
            }]
        );
        // Not trapping: stopped when the step that linked returns.
        let victim = s.spawn(linker(), "run", ()).unwrap();
        s.send(victim, Do::Link(gone)).unwrap();
        let error = s.wait_timeout(victim, PATIENCE).unwrap_err();
        assert_eq!(linked_failure(&error), (gone, ExitReason::NoSuchProcess));
    }
    s.shutdown(PATIENCE);
}

#[test]
fn an_unlinked_process_is_not_signalled() {
    let s = scheduler(2);
    let a = s.spawn(linker(), "run", ()).unwrap();
    let b = s.spawn(linker(), "run", ()).unwrap();
    tell(&s, a, Do::Link(b));
    tell(&s, b, Do::Unlink(a)); // from the other side: links are both ways
    let monitor = s.monitor(b);
    s.send(b, Do::Fail).unwrap();
    monitor.wait_timeout(PATIENCE).unwrap();
    assert_eq!(exits_of(&s, a), vec![]);
    s.shutdown(PATIENCE);
}

#[test]
fn a_chain_of_links_goes_down_in_a_loop_with_the_root_reason() {
    const LENGTH: usize = 2_000;
    let s = scheduler(2);
    let head = s.spawn(linker(), "run", ()).unwrap();
    let mut chain = vec![head];
    for _ in 1..LENGTH {
        let (tx, rx) = std::sync::mpsc::channel();
        s.send(*chain.last().unwrap(), Do::SpawnLinked(tx)).unwrap();
        chain.push(rx.recv_timeout(PATIENCE).unwrap());
    }
    let monitors: Vec<_> = chain.iter().map(|pid| s.monitor(*pid)).collect();
    s.send(*chain.last().unwrap(), Do::Fail).unwrap();
    let downs: Vec<Down> = monitors
        .iter()
        .map(|m| m.wait_timeout(PATIENCE).expect("the whole chain ends"))
        .collect();
    assert_eq!(downs[LENGTH - 1].reason, told_to_fail());
    for i in 0..LENGTH - 1 {
        assert_eq!(
            downs[i].reason,
            ExitReason::Linked {
                pid: chain[i + 1],
                reason: Box::new(told_to_fail())
            },
            "process {i} of the chain"
        );
    }
    s.shutdown(PATIENCE);
}

#[test]
fn both_sides_failing_at_once_end_once_each() {
    let s = scheduler(2);
    for _ in 0..500 {
        let a = s.spawn(linker(), "run", ()).unwrap();
        let b = s.spawn(linker(), "run", ()).unwrap();
        tell(&s, a, Do::Link(b));
        s.send(a, Do::Fail).unwrap();
        // Refused when `a`'s failure has taken `b` down already.
        let _ = s.send(b, Do::Fail);
        for pid in [a, b] {
            let error = s.wait_timeout(pid, PATIENCE).unwrap_err();
            let reason = error.exit_reason().unwrap();
            let other = if pid == a { b } else { a };
            assert!(
                reason == told_to_fail()
                    || reason
                        == ExitReason::Linked {
                            pid: other,
                            reason: Box::new(told_to_fail())
                        },
                "{pid}: {reason}"
            );
        }
    }
    s.shutdown(PATIENCE);
}

#[test]
fn processes_stopped_by_shutdown_are_reported_as_such_even_when_linked() {
    let s = scheduler(1);
    let a = s.spawn(support::Stubborn, "run", ()).unwrap();
    let b = s.spawn(linker(), "run", ()).unwrap();
    tell(&s, b, Do::Link(a));
    // Both ignore shutdown's cancel, so both are stopped when its timeout runs out.
    let report = s.shutdown(Duration::ZERO);
    assert_eq!(report.stopped, vec![a, b]);
    for pid in [a, b] {
        let error = s.wait_timeout(pid, PATIENCE).unwrap_err();
        assert_eq!(error.exit_reason(), Some(ExitReason::Killed));
    }
}
