//! Supervisors: each strategy and restart kind, the restart intensity (escalating at
//! the `max + 1`-th restart within the period, not when restarts are spread wider),
//! trees escalating level by level, ordered shutdown with per-child timeouts (a child
//! that ignores its cancel is killed after its timeout), start failures, links from
//! outside, queries, the scheduler shutting down while a supervisor restarts
//! children, the kill that shutdown timeouts use, and a supervisor driven step by
//! step in the harness.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{quiet_expected_panics, Scripted};
use wsched::supervisor::{
    ChildError, ChildInfo, ChildKind, ChildSpec, Children, DeleteChild, Next, NextJob, Restart,
    RestartChild, StartChild, Strategy, Supervisor, SupervisorError, SupervisorHandle,
    SupervisorState, TerminateChild, WhichChildren,
};
use wsched::testing::TestProcess;
use wsched::{
    Context, Event, Events, ExitReason, InitError, Overflow, Payload, Payloads, Pid, Process,
    ProcessError, Scheduler, SendErrorKind, SpawnOptions, Status, StepError, StepOutput,
    YieldError,
};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

const MARKER: &str = "supervisors test: told to panic";

fn scheduler(workers: usize) -> Scheduler {
    quiet_expected_panics(MARKER);
    Scheduler::builder()
        .workers(workers)
        // Children fail on purpose; their supervisors observe every failure anyway.
        .on_unobserved_failure(|report| panic!("unobserved failure: {report:?}"))
        .build()
        .expect("scheduler starts")
}

/// What a worker did, in order, across all workers of a test.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Started(&'static str),
    Cancelled(&'static str),
    Closed(&'static str),
}

type Log = Arc<Mutex<Vec<Ev>>>;

fn take(log: &Log) -> Vec<Ev> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// How a worker answers a cancel, or whether it runs at all.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Ends (cancelled) when cancelled.
    Obedient,
    /// Ignores cancels: only a kill ends it.
    Stubborn,
    /// Fails in its first step.
    FailAtOnce,
}

/// What a test tells a worker.
enum Cmd {
    Fail,
    Panic,
    Finish,
}

struct Worker {
    id: &'static str,
    log: Log,
    mode: Mode,
}

impl Process for Worker {
    fn init(&mut self, _: Context, method: &str, _: Payloads) -> Result<(), InitError> {
        if method != "run" {
            return Err(InitError::unknown_method(method, &["run"]));
        }
        self.log.lock().unwrap().push(Ev::Started(self.id));
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if self.mode == Mode::FailAtOnce {
            return Err(StepError::new("failed at once"));
        }
        for event in events {
            match event {
                Event::Message(m) => match m.payload.downcast::<Cmd>() {
                    Ok(Cmd::Fail) => return Err(StepError::new("told to fail")),
                    Ok(Cmd::Panic) => panic!("{MARKER}"),
                    Ok(Cmd::Finish) => {
                        out.set_status(Status::Done(Payload::unit()));
                        return Ok(());
                    }
                    Err(_) => {}
                },
                Event::Cancel => {
                    self.log.lock().unwrap().push(Ev::Cancelled(self.id));
                    if self.mode != Mode::Stubborn {
                        return Err(StepError::new(YieldError::Cancelled));
                    }
                }
                Event::Completion(_) => {}
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }

    fn close(&mut self) {
        self.log.lock().unwrap().push(Ev::Closed(self.id));
    }
}

fn worker(id: &'static str, log: &Log, mode: Mode) -> ChildSpec {
    let log = log.clone();
    ChildSpec::new(
        id,
        move || Worker {
            id,
            log: log.clone(),
            mode,
        },
        "run",
        (),
    )
}

/// Waits until every child listed runs (and `check` holds); their PIDs in order.
fn running(view: &SupervisorHandle, check: impl Fn(&[ChildInfo]) -> bool) -> Vec<Pid> {
    view.wait_for(PATIENCE, |children| {
        (children.iter().all(|c| c.pid.is_some()) && check(children))
            .then(|| children.iter().map(|c| c.pid.unwrap()).collect())
    })
    .unwrap_or_else(|| panic!("children never ran as expected: {view:?}"))
}

fn restarts(view: &SupervisorHandle) -> Vec<u64> {
    view.children().iter().map(|c| c.restarts).collect()
}

/// Tells `pid` to do `cmd` and waits for it to end.
fn end_child(s: &Scheduler, pid: Pid, cmd: Cmd) -> ExitReason {
    let down = s.monitor(pid);
    s.send(pid, cmd).unwrap();
    down.wait_timeout(PATIENCE).expect("the child ends").reason
}

fn told_to_fail() -> ExitReason {
    ExitReason::Error {
        message: "told to fail".into(),
    }
}

/// Cancels the supervisor and returns how it ended.
fn stop(s: &Scheduler, sup: Pid) -> ExitReason {
    let down = s.monitor(sup);
    s.cancel(sup).unwrap();
    down.wait_timeout(PATIENCE).expect("it stops").reason
}

// ---- strategies --------------------------------------------------------------

#[test]
fn one_for_one_restarts_only_the_child_that_ended() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(10, PATIENCE)
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("b", &log, Mode::Obedient))
        .child(worker("c", &log, Mode::Obedient));
    let view = sup.handle();
    let pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let before = running(&view, |_| true);
    assert_eq!(view.pid(), Some(pid));
    assert_eq!(
        take(&log),
        vec![Ev::Started("a"), Ev::Started("b"), Ev::Started("c")]
    );

    assert_eq!(end_child(&s, before[1], Cmd::Fail), told_to_fail());
    let after = running(&view, |c| c[1].restarts == 1);
    assert_eq!((after[0], after[2]), (before[0], before[2]));
    assert_ne!(after[1], before[1]);
    assert_eq!(take(&log), vec![Ev::Closed("b"), Ev::Started("b")]);
    assert_eq!((restarts(&view), view.restarts()), (vec![0, 1, 0], 1));

    // A panic is a failure like any other.
    end_child(&s, after[0], Cmd::Panic);
    running(&view, |c| c[0].restarts == 1);
    assert_eq!(view.restarts(), 2);
    assert_eq!(stop(&s, pid), ExitReason::Cancelled);
    s.shutdown(PATIENCE);
}

#[test]
fn one_for_all_stops_the_others_in_reverse_order_and_restarts_all_in_order() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForAll)
        .intensity(10, PATIENCE)
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("b", &log, Mode::Obedient))
        .child(worker("c", &log, Mode::Obedient));
    let view = sup.handle();
    let pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let before = running(&view, |_| true);
    take(&log);

    end_child(&s, before[1], Cmd::Fail);
    let after = running(&view, |c| c.iter().all(|c| c.restarts == 1));
    assert!(after.iter().all(|pid| !before.contains(pid)));
    assert_eq!(
        take(&log),
        vec![
            Ev::Closed("b"),
            Ev::Cancelled("c"),
            Ev::Closed("c"),
            Ev::Cancelled("a"),
            Ev::Closed("a"),
            Ev::Started("a"),
            Ev::Started("b"),
            Ev::Started("c"),
        ]
    );
    assert_eq!(view.restarts(), 1, "a group restart counts once");
    assert_eq!(stop(&s, pid), ExitReason::Cancelled);
    s.shutdown(PATIENCE);
}

#[test]
fn rest_for_one_restarts_the_child_and_those_started_after_it() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::RestForOne)
        .intensity(10, PATIENCE)
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("b", &log, Mode::Obedient))
        .child(worker("c", &log, Mode::Obedient))
        .child(worker("d", &log, Mode::Obedient));
    let view = sup.handle();
    let pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let before = running(&view, |_| true);
    take(&log);

    end_child(&s, before[1], Cmd::Panic);
    let after = running(&view, |c| c[1].restarts == 1 && c[3].restarts == 1);
    assert_eq!(after[0], before[0]);
    assert!(after[1..].iter().all(|pid| !before.contains(pid)));
    assert_eq!(restarts(&view), vec![0, 1, 1, 1]);
    assert_eq!(
        take(&log),
        vec![
            Ev::Closed("b"),
            Ev::Cancelled("d"),
            Ev::Closed("d"),
            Ev::Cancelled("c"),
            Ev::Closed("c"),
            Ev::Started("b"),
            Ev::Started("c"),
            Ev::Started("d"),
        ]
    );
    // The last child's end restarts only itself.
    end_child(&s, after[3], Cmd::Fail);
    let last = running(&view, |c| c[3].restarts == 2);
    assert_eq!(&last[..3], &after[..3]);
    assert_eq!(stop(&s, pid), ExitReason::Cancelled);
    s.shutdown(PATIENCE);
}

// ---- restart kinds -------------------------------------------------------------

#[test]
fn restart_kinds_decide_by_how_the_child_ended() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(100, PATIENCE)
        .child(worker("permanent", &log, Mode::Obedient).restart(Restart::Permanent))
        .child(worker("transient", &log, Mode::Obedient).restart(Restart::Transient))
        .child(worker("temporary", &log, Mode::Obedient).restart(Restart::Temporary));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);

    // A permanent child is restarted even after finishing normally.
    assert_eq!(end_child(&s, pids[0], Cmd::Finish), ExitReason::Normal);
    running(&view, |c| c[0].restarts == 1);

    // A transient child is restarted after a failure...
    end_child(&s, pids[1], Cmd::Fail);
    let pids = running(&view, |c| c[1].restarts == 1);
    // ... not after a cancellation it passed on, nor a normal end.
    let down = s.monitor(pids[1]);
    s.cancel(pids[1]).unwrap();
    assert_eq!(
        down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Cancelled
    );
    assert!(view
        .wait_for(PATIENCE, |c| c[1].pid.is_none().then_some(()))
        .is_some());
    assert_eq!(view.child("transient").unwrap().restarts, 1);

    // A temporary child is never restarted, and is removed, even after a failure.
    end_child(&s, pids[2], Cmd::Panic);
    assert!(view
        .wait_for(PATIENCE, |c| (c.len() == 2).then_some(()))
        .is_some());
    assert_eq!(view.child("temporary"), None);
    assert_eq!(view.restarts(), 2);
    assert_eq!(stop(&s, sup_pid), ExitReason::Cancelled);
    s.shutdown(PATIENCE);
}

#[test]
fn a_transient_child_that_finishes_normally_is_not_restarted() {
    let s = scheduler(1);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("job", &log, Mode::Obedient).restart(Restart::Transient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);
    assert_eq!(end_child(&s, pids[0], Cmd::Finish), ExitReason::Normal);
    assert!(view
        .wait_for(PATIENCE, |c| c[0].pid.is_none().then_some(()))
        .is_some());
    assert_eq!(
        (view.restarts(), view.state()),
        (0, SupervisorState::Running)
    );
    assert_eq!(stop(&s, sup_pid), ExitReason::Cancelled);
    s.shutdown(PATIENCE);
}

// ---- intensity -------------------------------------------------------------------

#[test]
fn exceeding_the_intensity_stops_the_children_in_order_and_fails_naming_the_child() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(2, Duration::from_secs(3600))
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("flaky", &log, Mode::Obedient))
        .child(worker("c", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let sup_down = s.monitor(sup_pid);
    // Two restarts are within the intensity.
    for n in 1..=2 {
        let pids = running(&view, |c| c[1].restarts == n - 1);
        end_child(&s, pids[1], Cmd::Fail);
        running(&view, |c| c[1].restarts == n);
        assert_eq!(view.state(), SupervisorState::Running);
    }
    take(&log);
    // The third within the period is one too many.
    let pids = running(&view, |_| true);
    end_child(&s, pids[1], Cmd::Fail);
    let reason = sup_down.wait_timeout(PATIENCE).expect("it gives up").reason;
    let expected = SupervisorError::Intensity {
        child: "flaky".into(),
        restarts: 3,
        period: Duration::from_secs(3600),
    };
    assert_eq!(
        reason,
        ExitReason::Error {
            message: expected.to_string()
        }
    );
    assert!(expected.to_string().contains("`flaky`"), "{expected}");
    assert_eq!(
        take(&log),
        vec![
            Ev::Closed("flaky"),
            Ev::Cancelled("c"),
            Ev::Closed("c"),
            Ev::Cancelled("a"),
            Ev::Closed("a"),
        ],
        "no restart; the others stopped in reverse order"
    );
    assert_eq!(view.state(), SupervisorState::Ended);
    assert_eq!(view.restarts(), 2);
    assert_eq!(s.metrics().live, 0);
    s.shutdown(PATIENCE);
}

#[test]
fn restarts_spread_wider_than_the_period_never_escalate() {
    let s = scheduler(2);
    let log = Log::default();
    let now = Arc::new(Mutex::new(Instant::now()));
    let clock = now.clone();
    let period = Duration::from_secs(10);
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(2, period)
        .clock(move || *clock.lock().unwrap())
        .child(worker("flaky", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let sup_down = s.monitor(sup_pid);
    // Twenty restarts, two per period: never three within one.
    for n in 0..20 {
        let pids = running(&view, |c| c[0].restarts == n);
        if n % 2 == 0 {
            *now.lock().unwrap() += period + Duration::from_millis(1);
        }
        end_child(&s, pids[0], Cmd::Fail);
    }
    running(&view, |c| c[0].restarts == 20);
    assert_eq!(
        (view.state(), view.restarts()),
        (SupervisorState::Running, 20)
    );
    // Now three within one period: the third escalates.
    *now.lock().unwrap() += period + Duration::from_millis(1);
    for n in 20..22 {
        let pids = running(&view, |c| c[0].restarts == n);
        end_child(&s, pids[0], Cmd::Fail);
        *now.lock().unwrap() += period / 3;
    }
    let pids = running(&view, |c| c[0].restarts == 22);
    assert_eq!(view.state(), SupervisorState::Running);
    end_child(&s, pids[0], Cmd::Fail);
    let reason = sup_down.wait_timeout(PATIENCE).unwrap().reason;
    assert!(
        matches!(&reason, ExitReason::Error { message } if message.contains("would make 3 restarts within 10s")),
        "{reason}"
    );
    s.shutdown(PATIENCE);
}

#[test]
fn the_real_clock_forgets_restarts_older_than_the_period() {
    let s = scheduler(1);
    let log = Log::default();
    let period = Duration::from_millis(50);
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(1, period)
        .child(worker("flaky", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    for n in 0..3 {
        let pids = running(&view, |c| c[0].restarts == n);
        end_child(&s, pids[0], Cmd::Fail);
        running(&view, |c| c[0].restarts == n + 1);
        // Not a wait for something to happen: time passing is the point.
        std::thread::sleep(period + Duration::from_millis(10));
    }
    assert_eq!(view.state(), SupervisorState::Running);
    assert_eq!(stop(&s, sup_pid), ExitReason::Cancelled);
    s.shutdown(PATIENCE);
}

#[test]
fn zero_restarts_allowed_escalates_at_the_first_end() {
    let s = scheduler(1);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(0, PATIENCE)
        .child(worker("once", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let down = s.monitor(sup_pid);
    let pids = running(&view, |_| true);
    end_child(&s, pids[0], Cmd::Finish);
    let reason = down.wait_timeout(PATIENCE).unwrap().reason;
    assert!(matches!(reason, ExitReason::Error { .. }), "{reason}");
    s.shutdown(PATIENCE);
}

// ---- trees -----------------------------------------------------------------------

#[test]
fn trees_escalate_level_by_level() {
    let s = scheduler(2);
    let log = Log::default();
    let mids: Arc<Mutex<Vec<SupervisorHandle>>> = Arc::default();
    let (log2, mids2) = (log.clone(), mids.clone());
    let root = Supervisor::new(Strategy::OneForOne)
        .intensity(1, Duration::from_secs(3600))
        .child(worker("sibling", &log, Mode::Obedient))
        .child(ChildSpec::supervisor("mid", move || {
            // No restarts allowed: the first failure below escalates.
            let mid = Supervisor::new(Strategy::OneForOne)
                .intensity(0, Duration::from_secs(3600))
                .child(worker("leaf", &log2, Mode::Obedient));
            mids2.lock().unwrap().push(mid.handle());
            mid
        }));
    let view = root.handle();
    let root_pid = s.spawn(root, Supervisor::ENTRY, ()).unwrap();
    let root_down = s.monitor(root_pid);
    let first = running(&view, |_| true);
    assert_eq!(view.children()[1].kind, ChildKind::Supervisor);
    let mid = mids.lock().unwrap()[0].clone();
    let leaf = running(&mid, |_| true)[0];
    let mid_down = s.monitor(first[1]);

    // The leaf fails: the mid supervisor gives up, the root restarts it (a fresh
    // one, with a fresh leaf).
    end_child(&s, leaf, Cmd::Fail);
    let reason = mid_down.wait_timeout(PATIENCE).unwrap().reason;
    assert!(
        matches!(&reason, ExitReason::Error { message } if message.contains("child `leaf`")),
        "{reason}"
    );
    let second = running(&view, |c| c[1].restarts == 1);
    assert_eq!(second[0], first[0], "the sibling stays");
    let mid = mids.lock().unwrap()[1].clone();
    let leaf = running(&mid, |_| true)[0];

    // Again: now the root is over its own intensity, and fails in turn.
    end_child(&s, leaf, Cmd::Panic);
    let reason = root_down.wait_timeout(PATIENCE).unwrap().reason;
    assert!(
        matches!(&reason, ExitReason::Error { message } if message.contains("child `mid`")),
        "{reason}"
    );
    assert_eq!(s.metrics().live, 0, "the whole tree is down");
    let ends: Vec<Ev> = take(&log)
        .into_iter()
        .filter(|e| !matches!(e, Ev::Started(_)))
        .collect();
    assert_eq!(
        ends,
        vec![
            Ev::Closed("leaf"),
            Ev::Closed("leaf"),
            Ev::Cancelled("sibling"),
            Ev::Closed("sibling"),
        ]
    );
    s.shutdown(PATIENCE);
}

#[test]
fn a_tree_shuts_down_depth_first_in_reverse_order() {
    let s = scheduler(2);
    let log = Log::default();
    let log2 = log.clone();
    let root = Supervisor::new(Strategy::OneForOne)
        .child(worker("first", &log, Mode::Obedient))
        .child(ChildSpec::supervisor("mid", move || {
            Supervisor::new(Strategy::OneForAll)
                .child(worker("mid.a", &log2, Mode::Obedient))
                .child(worker("mid.b", &log2, Mode::Obedient))
        }))
        .child(worker("last", &log, Mode::Obedient));
    let view = root.handle();
    let root_pid = s.spawn(root, Supervisor::ENTRY, ()).unwrap();
    running(&view, |_| true);
    // The mid supervisor starts its children in its own first step.
    let deadline = Instant::now() + PATIENCE;
    while log.lock().unwrap().len() < 4 {
        assert!(Instant::now() < deadline, "the tree never started");
        std::thread::yield_now();
    }
    take(&log);
    assert_eq!(stop(&s, root_pid), ExitReason::Cancelled);
    let closes: Vec<Ev> = take(&log)
        .into_iter()
        .filter(|e| matches!(e, Ev::Closed(_)))
        .collect();
    assert_eq!(
        closes,
        vec![
            Ev::Closed("last"),
            Ev::Closed("mid.b"),
            Ev::Closed("mid.a"),
            Ev::Closed("first"),
        ]
    );
    s.shutdown(PATIENCE);
}

// ---- ordered shutdown with timeouts -------------------------------------------------

#[test]
fn a_child_that_ignores_its_cancel_is_killed_after_its_timeout() {
    let s = scheduler(2);
    let log = Log::default();
    let timeout = Duration::from_millis(200);
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("stubborn", &log, Mode::Stubborn).shutdown(timeout))
        .child(worker("c", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);
    take(&log);
    let stubborn_down = s.monitor(pids[1]);
    let started = Instant::now();
    assert_eq!(stop(&s, sup_pid), ExitReason::Cancelled);
    assert!(
        started.elapsed() >= timeout,
        "the timeout was given in full"
    );
    assert_eq!(
        stubborn_down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Killed
    );
    assert_eq!(
        take(&log),
        vec![
            Ev::Cancelled("c"),
            Ev::Closed("c"),
            Ev::Cancelled("stubborn"),
            Ev::Closed("stubborn"),
            Ev::Cancelled("a"),
            Ev::Closed("a"),
        ]
    );
    let m = s.metrics();
    assert_eq!((m.stopped, m.live), (1, 0));
    let report = s.shutdown(PATIENCE);
    assert!(report.stopped.is_empty(), "a kill is not shutdown's stop");
}

#[test]
fn a_zero_timeout_kills_without_a_cancel_and_max_waits_as_long_as_it_takes() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("patient", &log, Mode::Stubborn).shutdown(Duration::MAX))
        .child(worker("brutal", &log, Mode::Stubborn).shutdown(Duration::ZERO));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);
    take(&log);
    let sup_down = s.monitor(sup_pid);
    s.cancel(sup_pid).unwrap();
    // "brutal" is killed at once, "patient" is cancelled and waited for.
    let patient_cancelled = || log.lock().unwrap().contains(&Ev::Cancelled("patient"));
    let deadline = Instant::now() + PATIENCE;
    while !patient_cancelled() {
        assert!(Instant::now() < deadline, "patient was never cancelled");
        std::thread::yield_now();
    }
    assert_eq!(view.state(), SupervisorState::ShuttingDown);
    assert!(sup_down.wait_timeout(Duration::from_millis(100)).is_none());
    // Only its end lets the supervisor finish.
    s.kill(pids[0]).unwrap();
    assert_eq!(
        sup_down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Cancelled
    );
    assert_eq!(
        take(&log),
        vec![
            Ev::Closed("brutal"),
            Ev::Cancelled("patient"),
            Ev::Closed("patient")
        ]
    );
    s.shutdown(PATIENCE);
}

// ---- starting, links, queries ---------------------------------------------------------

#[test]
fn a_child_that_cannot_start_fails_the_supervisor_after_stopping_the_others() {
    let s = scheduler(1);
    let log = Log::default();
    let log2 = log.clone();
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("a", &log, Mode::Obedient))
        .child(ChildSpec::new(
            "bad",
            move || Worker {
                id: "bad",
                log: log2.clone(),
                mode: Mode::Obedient,
            },
            "no such entry",
            (),
        ))
        .child(worker("never", &log, Mode::Obedient));
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let error = s.wait_timeout(sup_pid, PATIENCE).unwrap_err();
    let reason = error.exit_reason().unwrap();
    assert!(
        matches!(&reason, ExitReason::Error { message } if message.contains("could not start child `bad`")),
        "{reason}"
    );
    // `bad`'s init refused its entry (and closed it, as every refused init is).
    assert_eq!(
        take(&log),
        vec![
            Ev::Started("a"),
            Ev::Closed("bad"),
            Ev::Cancelled("a"),
            Ev::Closed("a")
        ]
    );
    // Duplicate ids are refused at spawn.
    let log = Log::default();
    let dup = Supervisor::new(Strategy::OneForOne)
        .child(worker("x", &log, Mode::Obedient))
        .child(worker("x", &log, Mode::Obedient));
    let error = s.spawn(dup, Supervisor::ENTRY, ()).unwrap_err();
    assert!(
        error.to_string().contains("two children have the id `x`"),
        "{error}"
    );
    s.shutdown(PATIENCE);
}

/// Regression: the failure was published (`error()`) only once the others had
/// stopped, and the view never said which child failed, so a supervisor still
/// stopping a slow child showed nothing until the scheduler was dropped.
#[test]
fn a_child_that_cannot_start_shows_in_the_view_and_the_error_at_once() {
    let s = scheduler(1);
    let log = Log::default();
    let log2 = log.clone();
    let sup = Supervisor::new(Strategy::OneForOne)
        // Ignores its cancel, and is given all the time it takes: the supervisor
        // stays shutting down until it is killed.
        .child(worker("slow", &log, Mode::Stubborn).shutdown(Duration::MAX))
        .child(ChildSpec::new(
            "bad",
            move || Worker {
                id: "bad",
                log: log2.clone(),
                mode: Mode::Obedient,
            },
            "no such entry",
            (),
        ));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    assert!(
        view.wait_state(SupervisorState::ShuttingDown, PATIENCE),
        "{view:?}"
    );
    // While it still stops `slow`, it says why it ends, and which child failed.
    let error = view
        .error()
        .expect("the failure, before the supervisor ends");
    assert!(
        matches!(&error, SupervisorError::StartFailed { child, message }
            if child == "bad" && message.contains("no such entry")),
        "{error:?}"
    );
    let bad = view.child("bad").unwrap();
    assert_eq!(bad.pid, None);
    let why = bad
        .start_error
        .expect("the view shows why `bad` is not running");
    assert!(why.contains("no such entry"), "{why}");
    assert_eq!(view.child("slow").unwrap().start_error, None);
    // It ends as it said, once `slow` has.
    let slow = view.child("slow").unwrap().pid.expect("`slow` runs");
    let down = s.monitor(sup_pid);
    s.kill(slow).unwrap();
    let reason = down.wait_timeout(PATIENCE).expect("it ends").reason;
    assert_eq!(
        reason,
        ExitReason::Error {
            message: error.to_string()
        }
    );
    assert_eq!(view.state(), SupervisorState::Ended);
    assert_eq!(view.error(), Some(error));
    s.shutdown(PATIENCE);
}

#[test]
fn a_restart_that_cannot_start_counts_again_until_the_intensity_is_exceeded() {
    let s = scheduler(1);
    let log = Log::default();
    let made = Arc::new(AtomicU64::new(0));
    let (log2, made2) = (log.clone(), made.clone());
    // The factory works once, then panics: every restart fails to start.
    let flaky = ChildSpec::new(
        "flaky",
        move || {
            if made2.fetch_add(1, Ordering::SeqCst) > 0 {
                panic!("{MARKER}: the factory is broken");
            }
            Worker {
                id: "flaky",
                log: log2.clone(),
                mode: Mode::Obedient,
            }
        },
        "run",
        (),
    );
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(3, PATIENCE)
        .child(worker("a", &log, Mode::Obedient))
        .child(flaky);
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let down = s.monitor(sup_pid);
    let pids = running(&view, |_| true);
    end_child(&s, pids[1], Cmd::Fail);
    // The end is restart 1; the three failed starts are restarts 2, 3 and 4.
    let reason = down.wait_timeout(PATIENCE).unwrap().reason;
    let expected = SupervisorError::Intensity {
        child: "flaky".into(),
        restarts: 4,
        period: PATIENCE,
    };
    assert_eq!(
        reason,
        ExitReason::Error {
            message: expected.to_string()
        }
    );
    assert_eq!(view.error(), Some(expected));
    assert_eq!(
        made.load(Ordering::SeqCst),
        4,
        "one start, three failed restarts"
    );
    assert_eq!(view.child("flaky").unwrap().restarts, 0, "none succeeded");
    assert_eq!(view.restarts(), 3);
    // The view says why the restarts failed.
    let why = view.child("flaky").unwrap().start_error.unwrap_or_default();
    assert!(why.contains("the factory is broken"), "{why}");

    // At the first start, a panicking factory is a start failure.
    let broken = Supervisor::new(Strategy::OneForOne).child(ChildSpec::new(
        "broken",
        || -> Worker { panic!("{MARKER}: broken from the start") },
        "run",
        (),
    ));
    let view = broken.handle();
    let pid = s.spawn(broken, Supervisor::ENTRY, ()).unwrap();
    let error = s.wait_timeout(pid, PATIENCE).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("could not start child `broken`: cannot spawn: init panicked"),
        "{error}"
    );
    assert!(matches!(
        view.error(),
        Some(SupervisorError::StartFailed { child, .. }) if child == "broken"
    ));
    s.shutdown(PATIENCE);
}

#[test]
fn a_failing_linked_parent_takes_the_supervisor_down_in_order() {
    let s = scheduler(2);
    let log = Log::default();
    let log2 = log.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut sup = Some(
        Supervisor::new(Strategy::OneForOne)
            .child(worker("a", &log2, Mode::Obedient))
            .child(worker("b", &log2, Mode::Obedient)),
    );
    let view = sup.as_ref().unwrap().handle();
    // Spawns the supervisor linked, then fails when told.
    let parent = Scripted::new(move |ctx, events, out| {
        if let Some(sup) = sup.take() {
            tx.send(ctx.spawn_linked(sup, Supervisor::ENTRY, ()).unwrap())
                .unwrap();
        }
        if events.iter().any(|e| matches!(e, Event::Message(_))) {
            return Err(StepError::new("parent broke"));
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    });
    let parent = s.spawn_detached(parent, "run", ()).unwrap();
    let sup_pid = rx.recv_timeout(PATIENCE).unwrap();
    running(&view, |_| true);
    take(&log);
    let down = s.monitor(sup_pid);
    s.send(parent, ()).unwrap();
    let reason = down.wait_timeout(PATIENCE).unwrap().reason;
    let expected = SupervisorError::LinkedExit {
        pid: parent,
        reason: ExitReason::Error {
            message: "parent broke".into(),
        },
    };
    assert_eq!(
        reason,
        ExitReason::Error {
            message: expected.to_string()
        }
    );
    assert_eq!(
        take(&log),
        vec![
            Ev::Cancelled("b"),
            Ev::Closed("b"),
            Ev::Cancelled("a"),
            Ev::Closed("a")
        ]
    );
    s.shutdown(PATIENCE);
}

#[test]
fn children_get_their_spawn_options_and_are_always_linked_and_detached() {
    let s = scheduler(1);
    let log = Log::default();
    let options = SpawnOptions::new().bounded_mailbox(4, Overflow::Reject);
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("bounded", &log, Mode::Obedient).spawn_options(options));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let child = running(&view, |_| true)[0];
    let info = s
        .processes()
        .into_iter()
        .find(|p| p.pid == child)
        .expect("listed");
    assert_eq!(info.parent, Some(sup_pid));
    assert!(info.bounded_mailbox.is_some(), "{info:?}");
    // Detached: nothing to join.
    assert!(s.wait_timeout(child, Duration::from_millis(1)).is_err());
    assert_eq!(stop(&s, sup_pid), ExitReason::Cancelled);
    s.shutdown(PATIENCE);
}

#[test]
fn a_process_asks_which_children_and_gets_them() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("b", &log, Mode::Obedient).restart(Restart::Transient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);
    let mut asked = false;
    let asker = Scripted::new(move |ctx, events, out| {
        if !std::mem::replace(&mut asked, true) {
            ctx.send(sup_pid, WhichChildren).unwrap();
        }
        for event in events {
            if let Event::Message(m) = event {
                if let Ok(children) = m.payload.downcast::<Children>() {
                    out.set_status(Status::Done(Payload::new(children)));
                    return Ok(());
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    });
    let asker = s.spawn(asker, "run", ()).unwrap();
    let Children(children) = s
        .wait_timeout(asker, PATIENCE)
        .unwrap()
        .downcast::<Children>()
        .unwrap();
    assert_eq!(children, view.children());
    assert_eq!(
        children
            .iter()
            .map(|c| (c.id.as_str(), c.pid, c.restart))
            .collect::<Vec<_>>(),
        vec![
            ("a", Some(pids[0]), Restart::Permanent),
            ("b", Some(pids[1]), Restart::Transient)
        ]
    );
    assert_eq!(stop(&s, sup_pid), ExitReason::Cancelled);
    s.shutdown(PATIENCE);
}

#[test]
fn a_cancel_during_a_group_restart_ends_it_without_restarting() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForAll)
        .intensity(10, PATIENCE)
        .child(worker("slow", &log, Mode::Stubborn).shutdown(Duration::MAX))
        .child(worker("b", &log, Mode::Obedient))
        .child(worker("c", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);
    take(&log);
    // b fails: the group restart stops c, then waits on "slow", which ignores its
    // cancel.
    end_child(&s, pids[1], Cmd::Fail);
    let deadline = Instant::now() + PATIENCE;
    while !log.lock().unwrap().contains(&Ev::Cancelled("slow")) {
        assert!(Instant::now() < deadline, "slow was never cancelled");
        std::thread::yield_now();
    }
    assert_eq!(view.state(), SupervisorState::Restarting);
    // Now the supervisor is cancelled: the restart becomes its shutdown.
    let down = s.monitor(sup_pid);
    s.cancel(sup_pid).unwrap();
    assert!(view.wait_state(SupervisorState::ShuttingDown, PATIENCE));
    s.kill(pids[0]).unwrap();
    assert_eq!(
        down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Cancelled
    );
    assert_eq!(
        take(&log),
        vec![
            Ev::Closed("b"),
            Ev::Cancelled("c"),
            Ev::Closed("c"),
            Ev::Cancelled("slow"),
            Ev::Closed("slow"),
        ],
        "nothing started again"
    );
    assert_eq!(
        view.children().iter().filter(|c| c.pid.is_some()).count(),
        0
    );
    assert_eq!(s.metrics().live, 0);
    s.shutdown(PATIENCE);
}

// ---- the scheduler shutting down while supervisors restart ----------------------------

#[test]
fn the_scheduler_shuts_down_while_supervisors_restart_children() {
    for strategy in [
        Strategy::OneForOne,
        Strategy::OneForAll,
        Strategy::RestForOne,
    ] {
        let s = scheduler(2);
        let log = Log::default();
        let starts = Arc::new(AtomicU64::new(0));
        // Children that fail at once: the supervisors restart them without pause.
        let mut root = Supervisor::new(Strategy::OneForOne).intensity(u32::MAX, PATIENCE);
        for i in 0..4 {
            let (log, starts) = (log.clone(), starts.clone());
            root = root.child(ChildSpec::supervisor(format!("sup{i}"), move || {
                let mut sup = Supervisor::new(strategy).intensity(u32::MAX, PATIENCE);
                for j in 0..20 {
                    let (log, starts) = (log.clone(), starts.clone());
                    let mode = if j % 5 == 0 {
                        Mode::FailAtOnce
                    } else {
                        Mode::Obedient
                    };
                    sup = sup.child(ChildSpec::new(
                        format!("w{j}"),
                        move || {
                            starts.fetch_add(1, Ordering::Relaxed);
                            Worker {
                                id: "w",
                                log: log.clone(),
                                mode,
                            }
                        },
                        "run",
                        (),
                    ));
                }
                sup
            }));
        }
        let view = root.handle();
        let root_pid = s.spawn(root, Supervisor::ENTRY, ()).unwrap();
        let root_down = s.monitor(root_pid);
        // Wait until restarts are under way.
        let deadline = Instant::now() + PATIENCE;
        while starts.load(Ordering::Relaxed) < 2_000 {
            assert!(Instant::now() < deadline, "no restarts: {view:?}");
            std::thread::yield_now();
        }
        let report = s.shutdown(PATIENCE);
        assert!(
            report.stopped.is_empty(),
            "{strategy:?}: everything ended when asked: {report:?}"
        );
        assert_eq!(
            root_down.wait_timeout(PATIENCE).unwrap().reason,
            ExitReason::Cancelled
        );
        assert_eq!(s.metrics().live, 0);
        let log = take(&log);
        let started = log.iter().filter(|e| matches!(e, Ev::Started(_))).count();
        let closed = log.iter().filter(|e| matches!(e, Ev::Closed(_))).count();
        assert_eq!(started, closed, "{strategy:?}: every started worker ended");
    }
}

// ---- kill ---------------------------------------------------------------------------------

#[test]
fn kill_stops_a_process_without_a_step_and_is_not_shutdowns_stop() {
    let s = scheduler(1);
    let log = Log::default();
    let pid = s
        .spawn(
            Worker {
                id: "k",
                log: log.clone(),
                mode: Mode::Stubborn,
            },
            "run",
            (),
        )
        .unwrap();
    let down = s.monitor(pid);
    s.kill(pid).unwrap();
    assert_eq!(
        down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Killed
    );
    assert_eq!(take(&log), vec![Ev::Started("k"), Ev::Closed("k")]);
    let error = s.wait_timeout(pid, PATIENCE).unwrap_err();
    assert!(matches!(error.process_error(), Some(ProcessError::Stopped)));
    let again = s.kill(pid).unwrap_err();
    assert_eq!((again.pid(), again.kind()), (pid, SendErrorKind::Finished));
    let unknown = Pid::from_raw(1 << 40);
    let error = s.kill(unknown).unwrap_err();
    assert_eq!(
        (error.pid(), error.kind()),
        (unknown, SendErrorKind::NoSuchProcess)
    );
    assert_eq!(s.metrics().stopped, 1);
    assert!(s.shutdown(PATIENCE).stopped.is_empty());
}

// ---- step by step in the harness --------------------------------------------------------

#[test]
fn the_harness_plays_a_one_for_all_restart_step_by_step() {
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForAll)
        .intensity(1, PATIENCE)
        .child(worker("a", &log, Mode::Obedient).shutdown(Duration::from_secs(2)))
        .child(worker("b", &log, Mode::Obedient));
    let view = sup.handle();
    let mut t = TestProcess::start(sup, Supervisor::ENTRY, ()).unwrap();
    let spawned = t.take_spawned();
    let (a, b) = (spawned[0].pid, spawned[1].pid);
    assert_eq!(t.links(), vec![a, b]);
    drop(spawned);

    // b fails: a is stopped first (unlinked, monitored, cancelled, a timer armed).
    t.play_end(b, told_to_fail());
    assert_eq!(view.state(), SupervisorState::Restarting);
    assert_eq!(t.take_cancel_requests(), vec![a]);
    assert_eq!(t.links(), vec![]);
    let monitor = t.take_monitors().remove(0);
    assert_eq!(monitor.target, a);
    assert_eq!(t.take_timed()[0].delay, Duration::from_secs(2));
    assert!(
        t.take_spawned().is_empty(),
        "nothing restarts before a ended"
    );

    // a ends (its Down): both start again, in order.
    assert_eq!(t.play_end(a, ExitReason::Cancelled), 1);
    let again: Vec<(Pid, String)> = t
        .take_spawned()
        .into_iter()
        .map(|s| (s.pid, s.method.clone()))
        .collect();
    assert_eq!(again.len(), 2);
    assert_eq!(view.state(), SupervisorState::Running);
    assert_eq!(restarts(&view), vec![1, 1]);

    // Another failure is over the intensity: the supervisor stops a and fails.
    t.play_end(again[0].0, ExitReason::Killed);
    assert_eq!(t.take_cancel_requests(), vec![again[1].0]);
    t.play_end(again[1].0, ExitReason::Cancelled);
    let reason = t.expect_error().exit_reason();
    assert!(
        matches!(&reason, ExitReason::Error { message } if message.contains("child `a`") && message.contains("would make 2 restarts")),
        "{reason}"
    );
    assert_eq!(view.state(), SupervisorState::Ended);
}

// ---- the scheduler's shutdown ---------------------------------------------------------

#[test]
fn the_scheduler_shutdown_stops_supervised_children_in_order_each_once() {
    let s = scheduler(2);
    let log = Log::default();
    let timeout = Duration::from_millis(300);
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("b", &log, Mode::Stubborn).shutdown(timeout))
        .child(worker("c", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    // A process that is nobody's child: the shutdown cancels it as before.
    let loner_log = Log::default();
    let loner = s
        .spawn(
            Worker {
                id: "loner",
                log: loner_log.clone(),
                mode: Mode::Obedient,
            },
            "run",
            (),
        )
        .unwrap();
    let pids = running(&view, |_| true);
    take(&log);
    let sup_down = s.monitor(sup_pid);
    let b_down = s.monitor(pids[1]);
    let loner_down = s.monitor(loner);
    let report = s.shutdown(Duration::from_secs(30));
    assert!(report.stopped.is_empty(), "all ended in order: {report:?}");
    assert_eq!(
        take(&log),
        vec![
            Ev::Cancelled("c"),
            Ev::Closed("c"),
            Ev::Cancelled("b"),
            Ev::Closed("b"),
            Ev::Cancelled("a"),
            Ev::Closed("a"),
        ],
        "one at a time, in reverse start order, each cancelled once"
    );
    assert_eq!(
        b_down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Killed,
        "b ignored its cancel and was killed after its shutdown timeout"
    );
    assert_eq!(
        sup_down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Cancelled
    );
    assert_eq!(
        loner_down.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Cancelled
    );
    assert_eq!(
        take(&loner_log),
        vec![
            Ev::Started("loner"),
            Ev::Cancelled("loner"),
            Ev::Closed("loner")
        ]
    );
}

#[test]
fn a_supervisor_that_gives_up_shows_no_pid_for_the_child_that_crashed() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(0, Duration::from_secs(3600))
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("flaky", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let sup_down = s.monitor(sup_pid);
    let pids = running(&view, |_| true);
    end_child(&s, pids[1], Cmd::Fail);
    sup_down.wait_timeout(PATIENCE).expect("it gives up");
    assert_eq!(view.state(), SupervisorState::Ended);
    let children = view.children();
    assert!(
        children.iter().all(|c| c.pid.is_none()),
        "no child runs once the supervisor ended: {children:?}"
    );
    s.shutdown(PATIENCE);
}

// ---- dynamic supervision ------------------------------------------------------------

fn ids(view: &SupervisorHandle) -> Vec<String> {
    view.children().into_iter().map(|c| c.id).collect()
}

#[test]
fn children_are_added_stopped_started_again_and_deleted_at_run_time() {
    let s = scheduler(2);
    let h = s.handle();
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne).child(worker("a", &log, Mode::Obedient));
    let view = sup.handle();
    s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    running(&view, |_| true);

    let b = view
        .start_child(&h, worker("b", &log, Mode::Obedient), PATIENCE)
        .unwrap();
    assert_eq!(ids(&view), ["a", "b"]);
    assert_eq!(view.child("b").unwrap().pid, Some(b));
    assert_eq!(
        view.start_child(&h, worker("b", &log, Mode::Obedient), PATIENCE),
        Err(ChildError::AlreadyPresent { id: "b".into() })
    );
    assert_eq!(
        view.restart_child(&h, "b", PATIENCE),
        Err(ChildError::Running {
            id: "b".into(),
            pid: b
        })
    );
    assert_eq!(
        view.delete_child(&h, "b", PATIENCE),
        Err(ChildError::Running {
            id: "b".into(),
            pid: b
        })
    );
    take(&log);

    // Terminated: stopped as at shutdown, answered once it ended, not restarted.
    let b_down = s.monitor(b);
    view.terminate_child(&h, "b", PATIENCE).unwrap();
    assert_eq!(
        b_down
            .wait_timeout(Duration::ZERO)
            .expect("ended before the answer")
            .reason,
        ExitReason::Cancelled
    );
    assert_eq!(take(&log), [Ev::Cancelled("b"), Ev::Closed("b")]);
    assert_eq!(view.child("b").unwrap().pid, None);
    assert_eq!(view.state(), SupervisorState::Running);
    // Terminating a stopped child changes nothing.
    view.terminate_child(&h, "b", PATIENCE).unwrap();

    let b2 = view.restart_child(&h, "b", PATIENCE).unwrap();
    assert_ne!(b2, b);
    assert_eq!(view.child("b").unwrap().restarts, 1);
    assert_eq!(take(&log), [Ev::Started("b")]);

    view.terminate_child(&h, "b", PATIENCE).unwrap();
    view.delete_child(&h, "b", PATIENCE).unwrap();
    assert_eq!(ids(&view), ["a"]);
    for result in [
        view.restart_child(&h, "b", PATIENCE).map(|_| ()),
        view.terminate_child(&h, "b", PATIENCE),
        view.delete_child(&h, "b", PATIENCE),
    ] {
        assert_eq!(result, Err(ChildError::NotFound { id: "b".into() }));
    }
    // A deleted child's id is free again.
    view.start_child(&h, worker("b", &log, Mode::Obedient), PATIENCE)
        .unwrap();
    assert_eq!(ids(&view), ["a", "b"]);
    assert_eq!(view.restarts(), 0, "requests are not restarts");
    s.shutdown(PATIENCE);
}

#[test]
fn a_child_that_cannot_start_is_an_answer_not_the_supervisors_end() {
    let s = scheduler(2);
    let h = s.handle();
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne).child(worker("a", &log, Mode::Obedient));
    let view = sup.handle();
    s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    running(&view, |_| true);
    let log2 = log.clone();
    let wrong_entry = ChildSpec::new(
        "wrong",
        move || Worker {
            id: "wrong",
            log: log2.clone(),
            mode: Mode::Obedient,
        },
        "no_such_entry",
        (),
    );
    match view.start_child(&h, wrong_entry, PATIENCE) {
        Err(ChildError::StartFailed { id, message }) => {
            assert_eq!(id, "wrong");
            assert!(message.contains("no_such_entry"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ids(&view), ["a"], "a spec that never ran is not kept");
    assert_eq!(view.state(), SupervisorState::Running);
    s.shutdown(PATIENCE);
}

#[test]
fn a_terminated_child_is_left_out_of_group_restarts_and_shutdown() {
    let s = scheduler(2);
    let h = s.handle();
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForAll)
        .child(worker("a", &log, Mode::Obedient))
        .child(worker("b", &log, Mode::Obedient))
        .child(worker("c", &log, Mode::Obedient));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);
    view.terminate_child(&h, "b", PATIENCE).unwrap();
    take(&log);
    end_child(&s, pids[0], Cmd::Fail);
    view.wait_for(PATIENCE, |c| {
        (c[0].restarts == 1 && c[0].pid.is_some() && c[2].pid.is_some()).then_some(())
    })
    .expect("a and c restarted");
    assert_eq!(view.child("b").unwrap().pid, None, "b stays stopped");
    assert_eq!(
        take(&log),
        [
            Ev::Closed("a"),
            Ev::Cancelled("c"),
            Ev::Closed("c"),
            Ev::Started("a"),
            Ev::Started("c"),
        ]
    );
    assert_eq!(stop(&s, sup_pid), ExitReason::Cancelled);
    assert_eq!(s.metrics().live, 0);
}

#[test]
fn a_child_that_ignores_its_termination_is_killed_after_its_timeout() {
    let s = scheduler(2);
    let h = s.handle();
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("stubborn", &log, Mode::Stubborn).shutdown(Duration::from_millis(50)));
    let view = sup.handle();
    s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);
    let down = s.monitor(pids[0]);
    view.terminate_child(&h, "stubborn", PATIENCE).unwrap();
    assert_eq!(
        down.wait_timeout(Duration::ZERO)
            .expect("ended before the answer")
            .reason,
        ExitReason::Killed
    );
    s.shutdown(PATIENCE);
}

#[test]
fn requests_to_a_supervisor_shutting_down_or_gone_are_refused() {
    let s = scheduler(2);
    let h = s.handle();
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne)
        .child(worker("stubborn", &log, Mode::Stubborn).shutdown(Duration::MAX));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let pids = running(&view, |_| true);
    let sup_down = s.monitor(sup_pid);
    s.cancel(sup_pid).unwrap();
    assert!(view.wait_state(SupervisorState::ShuttingDown, PATIENCE));
    assert_eq!(
        view.start_child(&h, worker("late", &log, Mode::Obedient), PATIENCE),
        Err(ChildError::ShuttingDown)
    );
    assert_eq!(
        view.terminate_child(&h, "stubborn", PATIENCE),
        Err(ChildError::ShuttingDown)
    );
    s.kill(pids[0]).unwrap();
    sup_down.wait_timeout(PATIENCE).expect("it ended");
    match view.restart_child(&h, "stubborn", PATIENCE) {
        Err(ChildError::Unreachable { message }) => {
            assert!(message.contains("no such process"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_subtree_is_reached_and_changed_through_its_parents_handle() {
    let s = scheduler(2);
    let h = s.handle();
    let log = Log::default();
    let inner_log = log.clone();
    let root =
        Supervisor::new(Strategy::OneForOne).child(ChildSpec::supervisor("web", move || {
            Supervisor::new(Strategy::OneForOne).child(worker(
                "listener",
                &inner_log,
                Mode::Obedient,
            ))
        }));
    let view = root.handle();
    s.spawn(root, Supervisor::ENTRY, ()).unwrap();
    let web_pid = running(&view, |_| true)[0];
    assert!(view.supervisor("nope").is_none());
    let web = view.supervisor("web").expect("a child supervisor");
    assert_eq!(web.pid(), Some(web_pid));
    running(&web, |_| true);
    web.start_child(&h, worker("cache", &log, Mode::Obedient), PATIENCE)
        .unwrap();
    assert_eq!(ids(&web), ["listener", "cache"]);
    // Restarted, the subtree is a new supervisor: the handle follows it.
    let web_down = s.monitor(web_pid);
    s.kill(web_pid).unwrap();
    web_down.wait_timeout(PATIENCE).expect("web ended");
    let restarted = view
        .wait_for(PATIENCE, |c| {
            (c[0].restarts == 1).then_some(())?;
            c[0].pid
        })
        .expect("web restarted");
    let web = view.supervisor("web").unwrap();
    assert_eq!(web.pid(), Some(restarted));
    running(&web, |_| true);
    assert_eq!(ids(&web), ["listener"], "built afresh by its factory");
    s.shutdown(PATIENCE);
}

/// Adds and removes a child by calls from inside a process.
struct Manager {
    supervisor: Pid,
    log: Log,
}

#[wsched::process]
impl Manager {
    #[entry]
    fn run(&mut self) -> Result<Vec<String>, wsched::BoxError> {
        use wsched::prelude::*;
        let mut seen = Vec::new();
        let spec = worker("dyn", &self.log, Mode::Obedient);
        let started: Result<Pid, ChildError> = call!(self.supervisor, StartChild(spec))?;
        seen.push(format!("start {}", started.is_ok()));
        let again: Result<Pid, ChildError> = call!(
            self.supervisor,
            StartChild(worker("dyn", &self.log, Mode::Obedient))
        )?;
        seen.push(format!("{}", again.unwrap_err()));
        let stopped: Result<(), ChildError> = call!(self.supervisor, TerminateChild("dyn".into()))?;
        seen.push(format!("terminate {}", stopped.is_ok()));
        let deleted: Result<(), ChildError> = call!(self.supervisor, DeleteChild("dyn".into()))?;
        seen.push(format!("delete {}", deleted.is_ok()));
        let missing: Result<Pid, ChildError> = call!(self.supervisor, RestartChild("dyn".into()))?;
        seen.push(format!("{}", missing.unwrap_err()));
        Ok(seen)
    }
}

#[test]
fn a_process_manages_children_with_calls() {
    let s = scheduler(2);
    let log = Log::default();
    let sup = Supervisor::new(Strategy::OneForOne);
    let view = sup.handle();
    let supervisor = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();
    let manager = s
        .spawn(
            Manager {
                supervisor,
                log: log.clone(),
            },
            "run",
            (),
        )
        .unwrap();
    let seen: Vec<String> = s
        .wait_timeout(manager, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    assert_eq!(
        seen,
        [
            "start true".to_owned(),
            ChildError::AlreadyPresent { id: "dyn".into() }.to_string(),
            "terminate true".to_owned(),
            "delete true".to_owned(),
            ChildError::NotFound { id: "dyn".into() }.to_string(),
        ]
    );
    assert!(view.children().is_empty());
    s.shutdown(PATIENCE);
}

// ---- pools ----------------------------------------------------------------------------

/// A pool worker: takes jobs until told to retire, each job's result to `done`.
/// A job of `u64::MAX` makes it fail (holding that job).
struct PoolWorker {
    pool: Pid,
    done: std::sync::mpsc::Sender<(u64, Pid)>,
}

#[wsched::process]
impl PoolWorker {
    #[entry]
    fn run(&mut self) -> Result<(), wsched::BoxError> {
        use wsched::prelude::*;
        let me = this::pid();
        loop {
            match call!(self.pool, NextJob::<u64>::new())? {
                Next::Job(u64::MAX) => return Err("pool test: told to fail".into()),
                Next::Job(job) => {
                    // A suspension point mid-job: a resize or a retirement may come
                    // in between.
                    yield_cmd!(wsched::command::Sleep(Duration::from_micros(job % 50)))?;
                    self.done.send((job, me)).unwrap();
                }
                Next::Retire => return Ok(()),
            }
        }
    }
}

fn pool_of(size: usize, done: &std::sync::mpsc::Sender<(u64, Pid)>) -> Supervisor {
    let done = done.clone();
    Supervisor::pool::<u64>("worker", size, move |id, pool| {
        let done = done.clone();
        ChildSpec::new(
            id,
            move || PoolWorker {
                pool,
                done: done.clone(),
            },
            "run",
            (),
        )
    })
    .intensity(100, Duration::from_secs(3600))
}

#[test]
fn a_pool_grown_and_shrunk_while_jobs_run_loses_no_job() {
    let s = scheduler(2);
    let h = s.handle();
    let (done_tx, done) = std::sync::mpsc::channel();
    let pool = pool_of(4, &done_tx);
    let view = pool.handle();
    s.spawn(pool, Supervisor::ENTRY, ()).unwrap();
    const JOBS: u64 = 2_000;
    // Resized at jobs 150, 450, …, 1950.
    let sizes = [8, 2, 6, 1, 5, 0, 3];
    for job in 0..JOBS {
        view.submit(&h, job).unwrap();
        if job % 300 == 150 {
            let size = sizes[(job / 300) as usize];
            assert_eq!(view.resize(&h, size, PATIENCE), Ok(size));
        }
    }
    let mut seen = std::collections::HashSet::new();
    while seen.len() < JOBS as usize {
        let (job, _worker) = done.recv_timeout(PATIENCE).expect("every job is done");
        assert!(seen.insert(job), "job {job} done twice");
    }
    let info = view.pool().unwrap();
    assert_eq!((info.queued, info.size), (0, 3));
    // Retirements owed to busy workers are paid as they ask: once they all have,
    // the pool lists just its size.
    view.wait_for(PATIENCE, |c| {
        (c.len() == 3 && c.iter().all(|c| c.pid.is_some())).then_some(())
    })
    .unwrap_or_else(|| panic!("the pool settled at 3: {view:?}"));
    assert_eq!(view.pool().unwrap().retiring, 0);
    // Which workers retired is the machine's say: an owed retirement goes to
    // whichever worker asks next, new or old. Only how many run is the pool's.
    assert!(done.try_recv().is_err(), "no job done twice or invented");
    s.shutdown(PATIENCE);
}

#[test]
fn a_pool_worker_that_fails_is_restarted_and_only_pools_resize() {
    quiet_expected_panics(MARKER);
    let s = scheduler(2);
    let h = s.handle();
    let (done_tx, done) = std::sync::mpsc::channel();
    let pool = pool_of(2, &done_tx);
    let view = pool.handle();
    s.spawn(pool, Supervisor::ENTRY, ()).unwrap();
    let before = running(&view, |c| c.len() == 2);
    let deadline = Instant::now() + PATIENCE;
    while view_idle(&view) < 2 {
        assert!(
            Instant::now() < deadline,
            "the workers never asked: {view:?}"
        );
        std::thread::yield_now();
    }
    // One worker takes the failing job and is restarted; the pool stays whole.
    view.submit(&h, u64::MAX).unwrap();
    let after = running(&view, |c| c.iter().map(|c| c.restarts).sum::<u64>() == 1);
    assert_eq!(after.len(), 2);
    assert_ne!(before, after);
    view.submit(&h, 7_u64).unwrap();
    assert_eq!(done.recv_timeout(PATIENCE).unwrap().0, 7);

    let plain = Supervisor::new(Strategy::OneForOne);
    let plain_view = plain.handle();
    s.spawn(plain, Supervisor::ENTRY, ()).unwrap();
    assert_eq!(
        plain_view.resize(&h, 3, PATIENCE),
        Err(ChildError::NotAPool)
    );
    assert_eq!(plain_view.pool(), None);
    s.shutdown(PATIENCE);
}

fn view_idle(view: &SupervisorHandle) -> usize {
    view.pool().map_or(0, |p| p.idle)
}
