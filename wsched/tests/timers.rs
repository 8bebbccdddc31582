//! The timer service's resources: timers of ended processes and withdrawn yields are
//! released at once, not at their deadlines; unrepresentable deadlines never fire and
//! break nothing.

mod support;

use std::time::{Duration, Instant};

use support::{Answer, Scripted};
use wsched::command::Sleep;
use wsched::{Event, Payload, ProcessState, Scheduler, Status, Tag};

const HOUR: Duration = Duration::from_secs(3600);
/// How long a condition that should hold at once (or within a few steps) may take
/// on a loaded machine before the test gives up.
const PATIENCE: Duration = Duration::from_secs(20);

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("scheduler starts")
}

/// Waits, boundedly, until `condition` holds; panics with `what` and the last value
/// seen otherwise.
#[track_caller]
fn wait_until<T: std::fmt::Debug>(
    what: &str,
    mut probe: impl FnMut() -> T,
    ok: impl Fn(&T) -> bool,
) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let seen = probe();
        if ok(&seen) {
            return;
        }
        if Instant::now() > deadline {
            panic!("gave up waiting until {what}: last saw {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Yields `Sleep(duration)` as tag 1, then finishes with "cancelled" on a cancel, or
/// with what the completion said if the timer fires first.
fn sleeper(duration: Duration) -> Scripted {
    let mut armed = false;
    Scripted::new(move |_, events, out| {
        if !armed {
            armed = true;
            out.yield_command(Tag(1), Sleep(duration));
        }
        for event in events {
            match event {
                Event::Cancel => {
                    out.set_status(Status::Done(Payload::new("cancelled".to_string())));
                    return Ok(());
                }
                Event::Completion(c) => {
                    let said = format!("completed: {:?}", c.result.map(|_| ()));
                    out.set_status(Status::Done(Payload::new(said)));
                    return Ok(());
                }
                Event::Message(_) => {}
            }
        }
        out.set_status(Status::WaitingForYields);
        Ok(())
    })
}

#[test]
fn timers_of_cancelled_sleepers_are_released_when_they_end() {
    const SLEEPERS: usize = 10_000;
    let s = scheduler(2);
    let pids: Vec<_> = (0..SLEEPERS)
        .map(|_| s.spawn(sleeper(HOUR), "run", ()).unwrap())
        .collect();
    wait_until(
        "every sleeper armed its timer",
        || s.metrics().pending_timers,
        |&n| n == SLEEPERS,
    );
    for &pid in &pids {
        s.cancel(pid).unwrap();
    }
    for pid in pids {
        let said = s.wait(pid).unwrap().downcast::<String>().unwrap();
        assert_eq!(said, "cancelled");
    }
    wait_until(
        "the ended sleepers' timers are released",
        || s.metrics().pending_timers,
        |&n| n == 0,
    );
    s.shutdown(PATIENCE);
}

#[test]
fn a_timer_is_released_when_its_process_finishes_on_its_own() {
    let s = scheduler(1);
    // Sleeps an hour and waits for a message; finishes on the first one.
    let mut armed = false;
    let pid = s
        .spawn(
            Scripted::new(move |_, events, out| {
                if !armed {
                    armed = true;
                    out.yield_command(Tag(1), Sleep(HOUR));
                }
                if events.iter().any(|e| matches!(e, Event::Message(_))) {
                    out.set_status(Status::Done(Payload::unit()));
                } else {
                    out.set_status(Status::WaitingForMessage);
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    wait_until(
        "the timer is armed",
        || s.metrics().pending_timers,
        |&n| n == 1,
    );
    s.send(pid, ()).unwrap();
    s.wait(pid).unwrap();
    wait_until(
        "the timer is released",
        || s.metrics().pending_timers,
        |&n| n == 0,
    );
    s.shutdown(PATIENCE);
}

#[test]
fn an_unrepresentable_deadline_never_fires_and_breaks_nothing() {
    // One worker: if arming the timer had killed or wedged it, nothing would run.
    let s = scheduler(1);
    let pid = s.spawn(sleeper(Duration::MAX), "run", ()).unwrap();
    wait_until(
        "the sleeper waits for its timer, which is armed",
        || {
            let state = s.processes().first().map(|p| p.state);
            (state, s.metrics().pending_timers)
        },
        |seen| *seen == (Some(ProcessState::WaitingForYields), 1),
    );
    s.cancel(pid).unwrap();
    let said = s.wait(pid).unwrap().downcast::<String>().unwrap();
    assert_eq!(said, "cancelled", "the timer must not have completed");
    wait_until(
        "the timer is released",
        || s.metrics().pending_timers,
        |&n| n == 0,
    );

    // The worker is alive: another process runs, and sleeps normally.
    let answer = s.spawn(Answer(7), "run", (7_u64,)).unwrap();
    assert_eq!(s.wait(answer).unwrap().downcast::<u64>().unwrap(), 7);
    let short = s
        .spawn(sleeper(Duration::from_millis(1)), "run", ())
        .unwrap();
    let said = s.wait(short).unwrap().downcast::<String>().unwrap();
    assert_eq!(said, "completed: Ok(())");
    assert_eq!(s.shutdown(PATIENCE).stopped, vec![]);
}

#[test]
fn a_withdrawn_sleep_is_released_while_its_process_runs_on() {
    let s = scheduler(1);
    // Yields a new sleep (tagged 1, 2, …) for each message, withdrawing the previous
    // one; finishes with the number of steps it saw a completion in.
    let mut tag = 0;
    let mut completions = 0_u64;
    let pid = s
        .spawn(
            Scripted::new(move |_, events, out| {
                let mut done = false;
                for event in events {
                    match event {
                        Event::Completion(_) => completions += 1,
                        Event::Message(m) => {
                            done = m.payload.downcast_ref::<&str>() == Some(&"stop")
                        }
                        Event::Cancel => done = true,
                    }
                }
                if done {
                    out.set_status(Status::Done(Payload::new(completions)));
                    return Ok(());
                }
                if tag > 0 {
                    out.withdraw(Tag(tag));
                }
                tag += 1;
                out.yield_command(Tag(tag), Sleep(HOUR));
                out.set_status(Status::WaitingForMessage);
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    for round in 0..100 {
        s.send(pid, round).unwrap();
        wait_until(
            "the previous sleep is released",
            || s.metrics().pending_timers,
            |&n| n <= 1,
        );
    }
    s.send(pid, "stop").unwrap();
    assert_eq!(
        s.wait(pid).unwrap().downcast::<u64>().unwrap(),
        0,
        "no sleep completed"
    );
    wait_until(
        "the last sleep is released",
        || s.metrics().pending_timers,
        |&n| n == 0,
    );
    s.shutdown(PATIENCE);
}

/// How many of this process's threads are called `name` (at most 15 bytes: the
/// kernel cuts longer names).
#[cfg(target_os = "linux")]
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("procfs")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

#[cfg(target_os = "linux")]
#[test]
fn the_timer_thread_starts_with_the_first_sleep() {
    let s = Scheduler::builder()
        .workers(1)
        .thread_name("lazytmr")
        .build()
        .unwrap();
    let pid = s.spawn(Answer(1), "run", (1_u64,)).unwrap();
    s.wait(pid).unwrap();
    assert_eq!(
        threads_named("lazytmr-timer"),
        0,
        "no sleep, no timer thread"
    );
    let pid = s
        .spawn(sleeper(Duration::from_millis(1)), "run", ())
        .unwrap();
    s.wait(pid).unwrap();
    assert_eq!(threads_named("lazytmr-timer"), 1);
    s.shutdown(PATIENCE);
    // Joined at shutdown. `join` returns once the kernel clears the thread's id,
    // a moment before it drops the thread from /proc/self/task: wait for that
    // bounded moment rather than read the list once (it raced under AddressSanitizer).
    wait_until(
        "the joined timer thread leaves /proc/self/task",
        || threads_named("lazytmr-timer"),
        |&left| left == 0,
    );
}
