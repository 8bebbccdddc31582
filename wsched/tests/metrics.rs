//! The always-on metrics count exactly on deterministic scenarios: overflows of a
//! full deque, steals from a worker held inside a step, remote schedules, the
//! depth of a deque, and what waits in a mailbox.

mod support;

use std::time::{Duration, Instant};

use support::{robbed_worker, until_a_message, HeldInStep, Scripted};
use wsched::{Payload, Pid, ProcessState, Scheduler, Status};

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("scheduler starts")
}

/// A process that ends in its first step.
fn quick() -> Scripted {
    Scripted::new(|_, _, out| {
        out.set_status(Status::Done(Payload::unit()));
        Ok(())
    })
}

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

/// Waits until `condition` holds of the scheduler's metrics, or fails after
/// [`PATIENCE`].
fn wait_until(s: &Scheduler, what: &str, condition: impl Fn(&wsched::Metrics) -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition(&s.metrics()) {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::yield_now();
    }
}

#[test]
fn a_full_deque_overflows_half_into_the_global_queue_once_and_it_is_counted() {
    // One worker: the spawner's 300 children go to its LIFO slot one after the
    // other, each pushing the previous one to the deque (299 pushes). The 257th push
    // finds the 256 slots full and moves the older half plus the pushed process
    // (129) to the global queue; the remaining 42 pushes fit.
    let s = scheduler(1);
    let spawner = s
        .spawn(
            Scripted::new(|ctx, _, out| {
                for _ in 0..300 {
                    ctx.spawn_detached(quick(), "run", ()).unwrap();
                }
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    s.wait(spawner).unwrap();
    wait_until(&s, "every child ended", |m| m.finished == 301);
    let m = s.metrics();
    let worker = m.workers[0];
    assert_eq!(
        (worker.overflows, worker.overflowed),
        (1, 129),
        "{worker:?}"
    );
    assert_eq!(m.remote_schedules, 1, "only the spawner came from outside");
    assert_eq!(worker.local_queue, 0);
    assert_eq!(m.total().overflows, 1);
}

#[test]
fn processes_spawned_or_woken_from_outside_are_remote_schedules() {
    let s = scheduler(2);
    let pids: Vec<Pid> = (0..5)
        .map(|_| s.spawn(quick(), "run", ()).unwrap())
        .collect();
    for pid in pids {
        s.wait(pid).unwrap();
    }
    assert_eq!(s.metrics().remote_schedules, 5);
}

#[test]
fn a_worker_held_in_a_step_is_robbed_by_halves_and_then_of_its_lifo_slot() {
    let s = scheduler(2);
    let queued = robbed_worker(&s);
    assert!(
        queued == [99, 0] || queued == [0, 99],
        "the holder's deque has 99 children: {queued:?}"
    );

    // Each steal takes half (rounded up) of what is left: 50, 25, 12, 6, 3, 2, 1;
    // then the child in the LIFO slot of the worker stuck in its step.
    let total = s.metrics().total();
    assert_eq!(
        (total.steals, total.stolen, total.lifo_steals),
        (8, 100, 1),
        "{total:?}"
    );
}

#[test]
fn messages_queued_for_a_process_inside_a_long_step_are_listed_by_type() {
    let s = scheduler(1);
    let held = HeldInStep::new();
    let pid = s.spawn(held.process, "run", ()).unwrap();
    held.started.recv().unwrap();
    for i in 0..3_u32 {
        s.send(pid, i).unwrap();
    }
    s.send(pid, "a".to_string()).unwrap();
    s.send(pid, 4_u32).unwrap();
    let info = s
        .processes()
        .into_iter()
        .find(|p| p.pid == pid)
        .expect("listed");
    assert_eq!(info.state, ProcessState::Running);
    assert_eq!(info.mailbox, 5);
    let summary: Vec<(&str, usize)> = info
        .waiting_messages
        .iter()
        .map(|m| (m.type_name, m.count))
        .collect();
    assert_eq!(summary, [("u32", 4), ("alloc::string::String", 1)]);
    assert_eq!(info.outstanding_yields(), 0);
    held.release.send(()).unwrap();
    s.wait(pid).unwrap();
}

#[test]
fn time_in_state_covers_the_wait_and_busy_time_stays_within_wall_time() {
    let built = Instant::now();
    let s = scheduler(2);
    let pid = s
        .spawn(until_a_message(|| Status::WaitingForMessage), "run", ())
        .unwrap();
    wait_until(&s, "the process has stepped once", |m| m.total().steps >= 1);
    let waited_from = Instant::now();
    // Not a wait for something to happen: time spent waiting is the point.
    std::thread::sleep(Duration::from_millis(30));
    // Read before the listing, so that a preemption between the two cannot make the
    // time in state look short.
    let waited_at_least = waited_from.elapsed();
    let info = s
        .processes()
        .into_iter()
        .find(|p| p.pid == pid)
        .expect("listed");
    let since_built = built.elapsed();
    assert_eq!(info.state, ProcessState::WaitingForMessage);
    // Bounds that hold whatever the machine's speed: it has waited at least since
    // `waited_from` (less one millisecond of rounding), at most since the build.
    assert!(
        info.time_in_state + Duration::from_millis(1) >= waited_at_least,
        "{:?} < {waited_at_least:?}",
        info.time_in_state,
    );
    assert!(info.time_in_state <= since_built + Duration::from_millis(1));
    s.send(pid, ()).unwrap();
    s.wait(pid).unwrap();
    let m = s.metrics();
    let wall = built.elapsed();
    for worker in &m.workers {
        assert!(worker.busy <= wall, "{:?} > {wall:?}", worker.busy);
    }
    assert!(m.total().busy > Duration::ZERO);
}

#[test]
fn messages_queued_in_a_bounded_mailbox_are_listed_too() {
    let s = scheduler(1);
    let held = HeldInStep::new();
    let pid = s
        .spawn_with(
            held.process,
            "run",
            (),
            wsched::SpawnOptions::new().bounded_mailbox(4, wsched::Overflow::Reject),
        )
        .unwrap();
    held.started.recv().unwrap();
    s.send(pid, 1_u8).unwrap();
    s.send(pid, 2_u8).unwrap();
    let info = s
        .processes()
        .into_iter()
        .find(|p| p.pid == pid)
        .expect("listed");
    assert_eq!(info.mailbox, 2);
    assert_eq!(info.waiting_messages[0].type_name, "u8");
    assert_eq!(info.bounded_mailbox.expect("bounded").queued, 2);
    assert!(info.to_string().contains("2 messages waiting"), "{info}");
    held.release.send(()).unwrap();
    s.wait(pid).unwrap();
}

#[test]
fn top_ranks_the_busy_process_first_now_and_over_a_window() {
    use wsched::top::{TopBy, TopError};
    let s = Scheduler::builder()
        .workers(2)
        .step_timing(true)
        .build()
        .unwrap();
    // Steps until told to stop, by a message.
    let busy = s
        .spawn(until_a_message(|| Status::Continue), "run", ())
        .unwrap();
    let idle: Vec<Pid> = (0..3)
        .map(|_| {
            s.spawn(until_a_message(|| Status::WaitingForMessage), "run", ())
                .unwrap()
        })
        .collect();
    wait_until(&s, "the busy process has stepped a while", |m| {
        m.total().steps > 1_000
    });
    let now = s.top(TopBy::Steps, 2).unwrap();
    assert_eq!(now[0].pid, busy);
    assert_eq!(now.len(), 2);
    assert_eq!(s.top(TopBy::Busy, 1).unwrap()[0].pid, busy);
    // The busy process steps in a window only if its worker got the CPU during it,
    // which a loaded machine need not grant in 20 ms: windows are taken until one
    // saw it step. The idle ones step in none.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let window = s
            .top_window(TopBy::Steps, 4, Duration::from_millis(20))
            .unwrap();
        assert!(window[1..].iter().all(|e| e.steps == 0), "{window:?}");
        if window[0].steps > 0 {
            assert_eq!(window[0].info.pid, busy);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never stepped in a window: {window:?}"
        );
    }

    let untimed = scheduler(1);
    assert_eq!(untimed.top(TopBy::Busy, 1), Err(TopError::StepTimingOff));
    for pid in idle.into_iter().chain([busy]) {
        s.send(pid, ()).unwrap();
        s.wait(pid).unwrap();
    }
}
