//! Regression tests for the holes a hostile review found: each of these failed (or
//! hung, which the bounded waits below turn into a failure) before its fix.

mod support;

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use support::{collect_completions, Answer, Scripted};
use wsched::command::{Completer, Sleep};
use wsched::{
    Command, Context, Event, Events, InitError, JoinError, Payload, Payloads, Process,
    ProcessError, ProcessState, Scheduler, SpawnError, Status, StepError, StepOutput, Tag,
};

/// How long a test waits for something that should happen at once before calling
/// it a failure (a hang would otherwise block the whole suite).
const PATIENCE: Duration = Duration::from_secs(30);

/// A value whose drop panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("a Bomb was dropped");
    }
}

impl Command for Bomb {
    type Output = ();
}

/// A scheduler that is not dropped if the test fails midway: before the fixes, the
/// drop of a broken scheduler hung, turning a failure into a hang.
fn scheduler(workers: usize) -> ManuallyDrop<Scheduler> {
    ManuallyDrop::new(
        Scheduler::builder()
            .workers(workers)
            .build()
            .expect("scheduler starts"),
    )
}

/// Runs `f` on another thread and returns its result, failing the test if it does
/// not return within [`PATIENCE`].
fn within_patience<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("{what} did not return within {PATIENCE:?}"))
}

/// The only worker still steps processes, and shutdown still ends.
fn assert_worker_alive_and_shutdown_ends(s: ManuallyDrop<Scheduler>) {
    let pid = s.spawn(Answer(7), "run", (7_u64,)).unwrap();
    let answer = s.wait_timeout(pid, PATIENCE);
    assert_eq!(
        answer
            .expect("a process spawned afterwards runs")
            .downcast::<u64>()
            .unwrap(),
        7
    );
    let s = ManuallyDrop::into_inner(s);
    let report = within_patience("shutdown", move || s.shutdown(Duration::from_secs(1)));
    assert!(report.stopped.is_empty(), "{report:?}");
}

#[test]
fn a_panicking_drop_of_a_detached_result_does_not_kill_the_worker() {
    let s = scheduler(1);
    s.spawn_detached(
        Scripted::new(|_, _, out| {
            out.set_status(Status::Done(Payload::new(Bomb)));
            Ok(())
        }),
        "run",
        (),
    )
    .unwrap();
    assert_worker_alive_and_shutdown_ends(s);
}

#[test]
fn a_panicking_drop_of_a_command_nobody_handles_does_not_kill_the_worker() {
    let s = scheduler(1);
    let pid = s
        .spawn(
            collect_completions(|out| out.yield_command(Tag(1), Bomb), |c| c.result.is_err()),
            "run",
            (),
        )
        .unwrap();
    let failed = s.wait_timeout(pid, PATIENCE).unwrap();
    assert_eq!(
        failed.downcast::<Vec<(u64, bool)>>().unwrap(),
        vec![(1, true)],
        "the yield failed with NoHandler"
    );
    assert_worker_alive_and_shutdown_ends(s);
}

#[test]
fn a_panicking_drop_of_the_yields_of_a_failed_step_does_not_kill_the_worker() {
    let s = scheduler(1);
    let pid = s
        .spawn(
            Scripted::new(|_, _, out| {
                out.yield_command(Tag(1), Bomb);
                Err(StepError::new("failed after yielding"))
            }),
            "run",
            (),
        )
        .unwrap();
    let error = s.wait_timeout(pid, PATIENCE).unwrap_err();
    assert!(
        matches!(
            error.process_error(),
            Some(ProcessError::Failed(e)) if e.to_string().contains("failed after yielding")
        ),
        "{error}"
    );
    assert_worker_alive_and_shutdown_ends(s);
}

/// Waits for a message, then finishes without looking at the events of that step.
struct IgnoresEvents {
    steps: u32,
}

impl Process for IgnoresEvents {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, _unread: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        self.steps += 1;
        if self.steps == 1 {
            out.set_status(Status::WaitingForMessage);
        } else {
            out.set_status(Status::Done(Payload::unit()));
        }
        Ok(())
    }
}

#[test]
fn a_panicking_drop_of_an_unread_message_does_not_kill_the_worker() {
    let s = scheduler(1);
    let pid = s.spawn(IgnoresEvents { steps: 0 }, "run", ()).unwrap();
    wait_for_state(&s, pid, ProcessState::WaitingForMessage);
    // Both arrive while the only worker is held in another step, so that one step
    // gets both: sent to a free worker, the first could wake the process and end it
    // before the second is sent (which then comes back, a `Bomb` in its error).
    let held = support::HeldInStep::new();
    let blocker = s.spawn(held.process, "run", ()).unwrap();
    held.started.recv_timeout(PATIENCE).unwrap();
    s.send(pid, Bomb).unwrap();
    s.send(pid, Bomb).unwrap();
    held.release.send(()).unwrap();
    s.wait_timeout(blocker, PATIENCE).unwrap();
    // The unread events are dropped with the step's `Events`, each on its own (two
    // panicking drops in one go would abort the program).
    s.wait_timeout(pid, PATIENCE).unwrap();
    // Messages still queued when a process ends are dropped by the runtime.
    let pid = s.spawn(support::Stubborn, "run", ()).unwrap();
    wait_for_state(&s, pid, ProcessState::WaitingForMessage);
    let report = {
        let handle = s.handle();
        for _ in 0..3 {
            handle.send(pid, Bomb).unwrap();
        }
        let s = ManuallyDrop::into_inner(s);
        within_patience("shutdown", move || s.shutdown(Duration::ZERO))
    };
    assert_eq!(report.stopped, vec![pid]);
}

#[test]
fn a_panicking_drop_of_a_completion_for_an_ended_process_does_not_kill_the_worker() {
    /// Its handler keeps the completer for later.
    struct Stash;
    impl Command for Stash {
        type Output = Bomb;
    }
    /// Its handler completes the stashed completer, on the worker.
    struct Fire;
    impl Command for Fire {
        type Output = ();
    }
    let stash: Arc<Mutex<Option<Completer<Stash>>>> = Arc::default();
    let s = ManuallyDrop::new({
        let (keep, fire) = (stash.clone(), stash.clone());
        Scheduler::builder()
            .workers(1)
            .handler(move |_: Stash, done: Completer<Stash>| *keep.lock() = Some(done))
            .handler(move |_: Fire, done: Completer<Fire>| {
                let stashed = fire.lock().take().expect("stashed");
                // Its process has ended: the completion comes back and is dropped.
                stashed.complete(Bomb);
                done.complete(());
            })
            .build()
            .unwrap()
    });
    let stasher = s
        .spawn(
            Scripted::new(|_, events, out| {
                if events.iter().any(|e| matches!(e, Event::Cancel)) {
                    out.set_status(Status::Done(Payload::unit()));
                } else {
                    out.yield_command(Tag(1), Stash);
                    out.set_status(Status::WaitingForYields);
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    wait_for_state(&s, stasher, ProcessState::WaitingForYields);
    s.cancel(stasher).unwrap();
    s.wait_timeout(stasher, PATIENCE).unwrap();
    let firer = s
        .spawn(
            collect_completions(|out| out.yield_command(Tag(1), Fire), |c| c.result.is_ok()),
            "run",
            (),
        )
        .unwrap();
    let fired = s.wait_timeout(firer, PATIENCE).unwrap();
    assert_eq!(
        fired.downcast::<Vec<(u64, bool)>>().unwrap(),
        vec![(1, true)]
    );
    assert_worker_alive_and_shutdown_ends(s);
}

/// Waits (bounded) until `pid` is listed in `state`.
fn wait_for_state(s: &Scheduler, pid: wsched::Pid, state: ProcessState) {
    let deadline = Instant::now() + PATIENCE;
    while !s
        .processes()
        .iter()
        .any(|info| info.pid == pid && info.state == state)
    {
        assert!(Instant::now() < deadline, "{pid} never reached {state}");
        thread::yield_now();
    }
}

/// A process whose `init` tells the test it started and then waits to be let go.
struct GatedInit {
    entered: mpsc::Sender<()>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Process for GatedInit {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        self.entered.send(()).unwrap();
        let (open, opened) = &*self.gate;
        let mut open = open.lock();
        let deadline = Instant::now() + PATIENCE;
        while !*open {
            if opened.wait_until(&mut open, deadline).timed_out() {
                return Err(InitError::failed("the test never opened the gate"));
            }
        }
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        out.set_status(Status::Done(Payload::new(1_u64)));
        Ok(())
    }
}

#[test]
fn a_spawn_racing_shutdown_is_refused_or_runs_or_is_reported_stopped() {
    let s = scheduler(1);
    let handle = s.handle();
    let (entered_tx, entered) = mpsc::channel();
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let spawner = {
        let (handle, gate) = (handle.clone(), gate.clone());
        thread::spawn(move || {
            handle.spawn(
                GatedInit {
                    entered: entered_tx,
                    gate,
                },
                "run",
                (),
            )
        })
    };
    entered.recv_timeout(PATIENCE).expect("init started");
    // Shut down while that spawn is inside `init`.
    let (report_tx, report_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    thread::spawn(move || {
        let s = ManuallyDrop::into_inner(s);
        let report = s.shutdown(Duration::ZERO);
        let _ = report_tx.send(report);
        // Results stay claimable after shutdown, until the scheduler is dropped.
        let _ = release_rx.recv();
        drop(s);
    });
    let deadline = Instant::now() + PATIENCE;
    while !matches!(
        handle.spawn(Answer(0), "run", ()),
        Err(SpawnError::ShuttingDown)
    ) {
        assert!(Instant::now() < deadline, "shutdown never began");
    }
    // Give shutdown the chance to finish without us (it did, before the fix, and
    // left the spawn behind). Whether it has or not, the outcome below must hold.
    let early_report = report_rx.recv_timeout(Duration::from_millis(300)).ok();
    {
        let (open, opened) = &*gate;
        *open.lock() = true;
        opened.notify_all();
    }
    let spawned = spawner.join().unwrap();
    let report = early_report.unwrap_or_else(|| {
        report_rx
            .recv_timeout(PATIENCE)
            .expect("shutdown ends once the spawn is through")
    });
    match spawned {
        Err(SpawnError::ShuttingDown) => {}
        Ok(pid) => {
            let waited = {
                let handle = handle.clone();
                within_patience("wait", move || handle.wait(pid))
            };
            match waited {
                Ok(result) => assert_eq!(result.downcast::<u64>().unwrap(), 1),
                Err(JoinError::Failed {
                    error: ProcessError::Stopped,
                    ..
                }) => assert!(
                    report.stopped.contains(&pid),
                    "{pid} stopped but not reported"
                ),
                Err(other) => panic!("{pid}: {other}"),
            }
        }
        Err(other) => panic!("unexpected spawn error: {other}"),
    }
    assert_eq!(handle.metrics().live, 0, "nothing is left live");
    release_tx.send(()).unwrap();
}

#[test]
fn two_blocking_jobs_queued_together_run_at_once_on_separate_threads() {
    /// Waits for `Signal` to run; completes with whether it did.
    struct WaitForSignal;
    impl Command for WaitForSignal {
        type Output = bool;
    }
    struct Signal;
    impl Command for Signal {
        type Output = ();
    }
    struct Warm;
    impl Command for Warm {
        type Output = ();
    }
    let (tx, rx) = mpsc::channel::<()>();
    let (tx, rx) = (Mutex::new(tx), Mutex::new(rx));
    let s = Scheduler::builder()
        .workers(1)
        .blocking_threads(8)
        .blocking_handler(|_: Warm, done: Completer<Warm>| done.complete(()))
        .blocking_handler(move |_: WaitForSignal, done: Completer<WaitForSignal>| {
            let got = rx.lock().recv_timeout(Duration::from_secs(10)).is_ok();
            done.complete(got);
        })
        .blocking_handler(move |_: Signal, done: Completer<Signal>| {
            tx.lock().send(()).unwrap();
            done.complete(());
        })
        .build()
        .unwrap();
    // One blocking thread exists and goes idle; then both jobs arrive back to back.
    let mut phase = 0;
    let pid = s
        .spawn(
            Scripted::new(move |_, events, out| {
                let mut waited = None;
                for event in events {
                    if let Event::Completion(c) = event {
                        if c.tag == Tag(3) {
                            waited = Some(c.result.unwrap().downcast::<bool>().unwrap());
                        }
                    }
                }
                match phase {
                    0 => out.yield_command(Tag(1), Warm),
                    // Give the thread time to go idle: it did before the fix too, and
                    // then both jobs went to it alone.
                    1 => out.yield_command(Tag(2), Sleep(Duration::from_millis(50))),
                    2 => {
                        out.yield_command(Tag(3), WaitForSignal);
                        out.yield_command(Tag(4), Signal);
                    }
                    _ => {}
                }
                phase += 1;
                match waited {
                    Some(got) => out.set_status(Status::Done(Payload::new(got))),
                    None => out.set_status(Status::WaitingForYields),
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let got = s.wait_timeout(pid, PATIENCE).unwrap();
    assert!(
        got.downcast::<bool>().unwrap(),
        "the waiting job saw the signal: the second job ran on another thread"
    );
    assert!(s.metrics().blocking_threads >= 2);
}

#[test]
fn dropping_the_last_scheduler_inside_a_process_shuts_it_down_elsewhere() {
    let slot: Arc<Mutex<Option<Scheduler>>> = Arc::default();
    let returned = Arc::new(AtomicBool::new(false));
    let s = ManuallyDrop::into_inner(scheduler(2));
    let handle = s.handle();
    *slot.lock() = Some(s);
    {
        let (slot, returned) = (slot.clone(), returned.clone());
        handle
            .spawn(
                Scripted::new(move |_, _, out| {
                    drop(slot.lock().take());
                    returned.store(true, Ordering::SeqCst);
                    out.set_status(Status::Done(Payload::unit()));
                    Ok(())
                }),
                "run",
                (),
            )
            .unwrap();
    }
    // The drop returned (it livelocked before: the shutdown it ran waited for the
    // dropping process itself), and the scheduler shut down all the same.
    let deadline = Instant::now() + PATIENCE;
    while !returned.load(Ordering::SeqCst)
        || !matches!(
            handle.spawn(Answer(0), "run", ()),
            Err(SpawnError::ShuttingDown)
        )
        || handle.metrics().live > 0
    {
        assert!(
            Instant::now() < deadline,
            "the scheduler was never shut down"
        );
        thread::yield_now();
    }
}

#[test]
fn shutdown_called_inside_a_process_panics_with_a_clear_message() {
    let slot: Arc<Mutex<Option<Arc<Scheduler>>>> = Arc::default();
    let s = Arc::new(ManuallyDrop::into_inner(scheduler(1)));
    *slot.lock() = Some(s.clone());
    let pid = s
        .spawn(
            Scripted::new(move |_, _, out| {
                let s = slot.lock().take().unwrap();
                s.shutdown(Duration::ZERO);
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let error = s.wait_timeout(pid, PATIENCE).unwrap_err();
    let message = match error.process_error() {
        Some(ProcessError::Panicked { message, .. }) => message.clone(),
        _ => panic!("{error}"),
    };
    assert!(
        message.contains("inside one of its own processes"),
        "{message}"
    );
    let s = Arc::try_unwrap(s).expect("the process let go of it");
    assert_worker_alive_and_shutdown_ends(ManuallyDrop::new(s));
}

#[test]
fn a_process_woken_during_a_long_step_runs_on_an_idle_worker() {
    let woken_ran = Arc::new(AtomicBool::new(false));
    let s = scheduler(2);
    let sleeper = {
        let woken_ran = woken_ran.clone();
        s.spawn(
            Scripted::new(move |_, events, out| {
                if events.iter().any(|e| matches!(e, Event::Message(_))) {
                    woken_ran.store(true, Ordering::SeqCst);
                    out.set_status(Status::Done(Payload::unit()));
                } else {
                    out.set_status(Status::WaitingForMessage);
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap()
    };
    wait_for_state(&s, sleeper, ProcessState::WaitingForMessage);
    let long = {
        let woken_ran = woken_ran.clone();
        s.spawn(
            // Wakes the sleeper (into this worker's LIFO slot), then keeps its worker
            // busy until the sleeper has run — which needs another worker to take it.
            Scripted::new(move |ctx, _, out| {
                ctx.send(sleeper, ()).unwrap();
                let deadline = Instant::now() + PATIENCE;
                while !woken_ran.load(Ordering::SeqCst) && Instant::now() < deadline {
                    std::hint::spin_loop();
                }
                out.set_status(Status::Done(Payload::new(woken_ran.load(Ordering::SeqCst))));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap()
    };
    let ran_during_the_step = s.wait_timeout(long, PATIENCE * 2).unwrap();
    assert!(
        ran_during_the_step.downcast::<bool>().unwrap(),
        "the woken process waited behind the long step"
    );
    assert!(s.metrics().total().lifo_steals >= 1);
    drop(ManuallyDrop::into_inner(s));
}

// ---- the last Scheduler, and thread-local destructors ---------------------------------

/// Runs `at_exit` in a thread-local destructor of a new thread, after the thread
/// ran `touch` (which reaches the scheduler's own thread-locals, so that they are
/// destroyed first: destructors run in reverse order of registration). Returns once
/// the thread is gone; before the fix, the scheduler's call in `at_exit` panicked
/// there, which aborts the whole test program.
fn at_thread_exit(at_exit: impl FnOnce() + Send + 'static, touch: impl FnOnce() + Send + 'static) {
    struct OnExit(Option<Box<dyn FnOnce()>>);
    impl Drop for OnExit {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    thread_local! {
        static ON_EXIT: std::cell::RefCell<Option<OnExit>> = const { std::cell::RefCell::new(None) };
    }
    let (done_tx, done) = mpsc::channel();
    thread::spawn(move || {
        ON_EXIT.with(|slot| {
            *slot.borrow_mut() = Some(OnExit(Some(Box::new(move || {
                at_exit();
                let _ = done_tx.send(());
            }))));
        });
        touch();
    });
    done.recv_timeout(PATIENCE)
        .expect("the thread-local destructor ran to its end");
}

/// A process that finishes with the first message it receives.
fn first_message() -> Scripted {
    Scripted::new(|_, events, out| {
        for event in events {
            if let Event::Message(m) = event {
                out.set_status(Status::Done(m.payload));
                return Ok(());
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn a_send_from_a_thread_local_destructor_is_delivered() {
    let s = scheduler(1);
    let pid = s.spawn(first_message(), "run", ()).unwrap();
    let (handle, touching) = (s.handle(), s.handle());
    at_thread_exit(
        move || handle.send(pid, 7_u32).expect("delivered"),
        move || {
            let _ = touching.send(wsched::Pid::from_raw(u64::MAX >> 8), ());
        },
    );
    let got = s.wait_timeout(pid, PATIENCE).unwrap();
    assert_eq!(got.downcast::<u32>().unwrap(), 7);
    ManuallyDrop::into_inner(s);
}

#[test]
fn a_completer_dropped_in_a_thread_local_destructor_completes_with_dropped() {
    struct Held;
    impl Command for Held {
        type Output = ();
    }
    let (completers_tx, completers) = mpsc::channel::<Completer<Held>>();
    let completers_tx = std::sync::Mutex::new(completers_tx);
    let s = ManuallyDrop::new(
        Scheduler::builder()
            .workers(1)
            .handler(move |Held, done: Completer<Held>| {
                completers_tx.lock().unwrap().send(done).unwrap();
            })
            .build()
            .unwrap(),
    );
    let pid = s
        .spawn(
            collect_completions(|out| out.yield_command(Tag(1), Held), |c| c.result.is_ok()),
            "run",
            (),
        )
        .unwrap();
    let completer = completers.recv_timeout(PATIENCE).unwrap();
    let touching = s.handle();
    at_thread_exit(
        move || drop(completer),
        move || {
            let _ = touching.send(wsched::Pid::from_raw(u64::MAX >> 8), ());
        },
    );
    let results = s.wait_timeout(pid, PATIENCE).unwrap();
    let results: Vec<(u64, bool)> = results.downcast().unwrap();
    assert_eq!(results, [(1, false)], "dropped, not completed");
    ManuallyDrop::into_inner(s);
}

#[test]
fn the_last_scheduler_dropped_in_a_thread_local_destructor_shuts_down() {
    let s = ManuallyDrop::into_inner(scheduler(2));
    let handle = s.handle();
    let pid = s.spawn(first_message(), "run", ()).unwrap();
    let down = s.monitor(pid);
    let touching = s.handle();
    at_thread_exit(
        move || drop(s),
        move || {
            let _ = touching.send(wsched::Pid::from_raw(u64::MAX >> 8), ());
        },
    );
    assert!(
        down.wait_timeout(PATIENCE).is_some(),
        "its process was stopped"
    );
    assert!(matches!(
        handle.spawn(Answer(0), "run", ()),
        Err(SpawnError::ShuttingDown)
    ));
    assert_eq!(handle.metrics().live, 0);
}

#[test]
fn killing_the_process_that_holds_the_last_scheduler_returns_and_shuts_down() {
    let s = ManuallyDrop::into_inner(scheduler(2));
    let handle = s.handle();
    let held = Some(s);
    let holder = Scripted::new(move |_, _, out| {
        // The body owns the last Scheduler: it is dropped with the body.
        assert!(held.is_some());
        out.set_status(Status::WaitingForMessage);
        Ok(())
    });
    let pid = handle.spawn(holder, "run", ()).unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !handle
        .processes()
        .iter()
        .any(|p| p.pid == pid && p.state == ProcessState::WaitingForMessage)
    {
        assert!(Instant::now() < deadline, "the holder never waited");
        thread::yield_now();
    }
    let killer = handle.clone();
    let (killed_tx, killed) = mpsc::channel();
    // On a thread of its own: before the fix, this kill never returned.
    thread::spawn(move || {
        killer.kill(pid).unwrap();
        let _ = killed_tx.send(());
    });
    killed.recv_timeout(PATIENCE).expect("the kill returned");
    let deadline = Instant::now() + PATIENCE;
    while !matches!(
        handle.spawn(Answer(0), "run", ()),
        Err(SpawnError::ShuttingDown)
    ) || handle.metrics().live > 0
    {
        assert!(
            Instant::now() < deadline,
            "the scheduler was never shut down"
        );
        thread::yield_now();
    }
}

#[test]
fn the_last_scheduler_dropped_on_its_timer_thread_finishes_its_release() {
    /// A timed message that owns the last Scheduler.
    struct Owner(#[allow(dead_code)] Scheduler);
    struct Block;
    impl Command for Block {
        type Output = ();
    }
    let s = Scheduler::builder()
        .workers(1)
        .blocking_threads(1)
        // The blocking thread stays until the scheduler's release stops it.
        .blocking_keep_alive(Duration::from_secs(3600))
        .blocking_handler(|Block, done: Completer<Block>| done.complete(()))
        .build()
        .unwrap();
    let handle = s.handle();
    // A blocking thread exists, idle: only the release's end stops it.
    let job = s
        .spawn(
            collect_completions(|out| out.yield_command(Tag(1), Block), |c| c.result.is_ok()),
            "run",
            (),
        )
        .unwrap();
    s.wait_timeout(job, PATIENCE).unwrap();
    assert_eq!(handle.metrics().blocking_threads, 1);

    let target = s.spawn(first_message(), "run", ()).unwrap();
    let down = s.monitor(target);
    handle
        .send_after(target, Owner(s), Duration::from_millis(50))
        .unwrap();
    // The target ends before the timer fires: the timer thread drops the message,
    // and the last Scheduler with it.
    handle.send(target, "end").unwrap();
    down.wait_timeout(PATIENCE).expect("the target ended");
    let deadline = Instant::now() + PATIENCE;
    while handle.metrics().blocking_threads > 0 || handle.metrics().pending_timers > 0 {
        assert!(
            Instant::now() < deadline,
            "the release stopped short: {:?}",
            handle.metrics()
        );
        thread::sleep(Duration::from_millis(1));
    }
    assert!(matches!(
        handle.spawn(Answer(0), "run", ()),
        Err(SpawnError::ShuttingDown)
    ));
}
