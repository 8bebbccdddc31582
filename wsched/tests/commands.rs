//! Built-in commands from hand-written processes: timers, spawn and join.

mod support;

use std::time::{Duration, Instant};

use support::{collect_completions, Answer, Scripted};
use wsched::command::{Completer, Join, Sleep, Spawn};
use wsched::{
    Command, Context, Event, Events, InitError, JoinError, Payload, Payloads, Process, Scheduler,
    SpawnError, Status, StepError, StepOutput, Tag, YieldError,
};

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .build()
        .expect("scheduler starts")
}

/// Yields `count` sleeps at once, of 1..=count milliseconds in reverse order, and
/// finishes with the tags in the order their completions arrived.
fn sleeper(count: u64) -> Scripted {
    let mut started = false;
    let mut order = Vec::new();
    Scripted::new(move |_, events, out| {
        if !started {
            for t in 1..=count {
                let millis = count + 1 - t;
                out.yield_command(Tag(t), Sleep(Duration::from_millis(millis)));
            }
            started = true;
        }
        for event in events {
            if let Event::Completion(c) = event {
                c.result.expect("a sleep completes");
                order.push(c.tag.0);
            }
        }
        if order.len() as u64 == count {
            out.set_status(Status::Done(Payload::new(order.clone())));
        } else {
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    })
}

#[test]
fn sleep_completes_after_its_duration() {
    let s = scheduler();
    let started = Instant::now();
    let pid = s
        .spawn(
            {
                let mut slept = false;
                Scripted::new(move |_, events, out| {
                    if !slept {
                        out.yield_command(Tag(1), Sleep(Duration::from_millis(30)));
                        slept = true;
                        out.set_status(Status::WaitingForYields);
                        return Ok(());
                    }
                    assert!(events
                        .into_iter()
                        .any(|e| matches!(e, Event::Completion(c) if c.tag == Tag(1))));
                    out.set_status(Status::Done(Payload::unit()));
                    Ok(())
                })
            },
            "run",
            (),
        )
        .unwrap();
    s.wait(pid).unwrap();
    // A lower bound only: a timer never fires early.
    assert!(started.elapsed() >= Duration::from_millis(30));
}

/// Completed by its handler, on the worker that dispatches it, with the time it ran.
struct Stamp;

impl Command for Stamp {
    type Output = Instant;
}

#[test]
fn timers_fire_in_deadline_order() {
    const COUNT: u64 = 20;
    const SPACING: Duration = Duration::from_millis(5);
    let s = Scheduler::builder()
        .workers(2)
        .handler(|_: Stamp, done: Completer<Stamp>| done.complete(Instant::now()))
        .build()
        .expect("scheduler starts");
    // Tag t sleeps (COUNT + 1 - t) × SPACING: the highest tag has the shortest sleep.
    // A timer's deadline is "now + duration" when its handler arms it, after the
    // step; the handlers run in yield order on the worker, so every timer is armed
    // between `begun` (read in the step) and the stamp (yielded last). On a loaded
    // machine the worker can be preempted while arming them, so two deadlines
    // SPACING apart may swap; two whose durations differ by more than that window
    // (plus the 1 ms tick) cannot, and those must fire in deadline order.
    let duration = |t: u64| SPACING * (COUNT + 1 - t) as u32;
    let mut begun = None;
    let mut armed_by = None;
    let mut order = Vec::new();
    let pid = s
        .spawn(
            Scripted::new(move |_, events, out| {
                if begun.is_none() {
                    begun = Some(Instant::now());
                    for t in 1..=COUNT {
                        out.yield_command(Tag(t), Sleep(duration(t)));
                    }
                    out.yield_command(Tag(0), Stamp);
                }
                for event in events {
                    if let Event::Completion(c) = event {
                        let result = c.result.expect("a completion");
                        if c.tag == Tag(0) {
                            armed_by = Some(result.downcast::<Instant>().unwrap());
                        } else {
                            order.push(c.tag.0);
                        }
                    }
                }
                match armed_by {
                    Some(armed_by) if order.len() as u64 == COUNT => {
                        let window = armed_by.duration_since(begun.unwrap());
                        out.set_status(Status::Done(Payload::new((order.clone(), window))));
                    }
                    _ => out.set_status(Status::WaitingForYields),
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let (order, window) = s
        .wait(pid)
        .unwrap()
        .downcast::<(Vec<u64>, Duration)>()
        .unwrap();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=COUNT).collect::<Vec<_>>(), "each fired once");
    let position = |t: u64| order.iter().position(|&o| o == t).unwrap();
    let mut ordered_pairs = 0;
    for a in 1..=COUNT {
        for b in 1..=COUNT {
            // `b`'s deadline is surely at least a tick before `a`'s.
            if duration(a) >= duration(b) + window + Duration::from_millis(1) {
                ordered_pairs += 1;
                assert!(
                    position(b) < position(a),
                    "{b} (sleeping {:?}) fired after {a} (sleeping {:?}), armed within \
                     {window:?}: {order:?}",
                    duration(b),
                    duration(a)
                );
            }
        }
    }
    // Unloaded, the window is well under SPACING and every pair is checked.
    eprintln!(
        "armed within {window:?}: {ordered_pairs} of {} pairs had to keep their order",
        COUNT * (COUNT - 1) / 2
    );
}

#[test]
fn a_hundred_thousand_outstanding_timers_all_fire() {
    let s = scheduler();
    let pids: Vec<_> = (0..1_000)
        .map(|_| s.spawn(sleeper(100), "run", ()).unwrap())
        .collect();
    for pid in pids {
        let order = s.wait(pid).unwrap().downcast::<Vec<u64>>().unwrap();
        assert_eq!(order.len(), 100);
    }
    assert_eq!(s.metrics().pending_timers, 0);
}

#[test]
fn a_sleeping_process_is_stopped_without_waiting_for_its_timer() {
    let s = scheduler();
    let pid = s
        .spawn(
            Scripted::new(|_, _, out| {
                out.yield_command(Tag(1), Sleep(Duration::from_secs(3600)));
                out.set_status(Status::WaitingForYields);
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    while s.metrics().pending_timers == 0 {
        std::thread::yield_now();
    }
    let report = s.shutdown(Duration::ZERO);
    assert_eq!(report.stopped, vec![pid]);
}

/// Spawns two children of depth - 1 (through the `Spawn` command), joins both, and
/// finishes with the size of its subtree.
struct Tree {
    depth: u32,
    children: Vec<wsched::Pid>,
    sizes: u64,
    joined: usize,
}

impl Tree {
    fn new() -> Self {
        Self {
            depth: 0,
            children: Vec::new(),
            sizes: 0,
            joined: 0,
        }
    }
}

impl Process for Tree {
    fn init(&mut self, _: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        if method != "grow" {
            return Err(InitError::unknown_method(method, &["grow"]));
        }
        let depth = input
            .into_iter()
            .next()
            .ok_or_else(|| InitError::failed("grow takes a depth"))?;
        self.depth = depth.downcast::<u32>().map_err(InitError::failed)?;
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if self.depth == 0 {
            out.set_status(Status::Done(Payload::new(1_u64)));
            return Ok(());
        }
        if self.children.is_empty() && self.joined == 0 {
            out.yield_command(Tag(1), Spawn::new(Tree::new(), "grow", (self.depth - 1,)));
            out.yield_command(Tag(2), Spawn::new(Tree::new(), "grow", (self.depth - 1,)));
            self.joined = usize::MAX; // spawning
        }
        for event in events {
            let Event::Completion(c) = event else {
                continue;
            };
            let payload = c.result.map_err(StepError::new)?;
            match c.tag.0 {
                1 | 2 => {
                    let child = payload.downcast::<wsched::Pid>().map_err(StepError::new)?;
                    self.children.push(child);
                    out.yield_command(Tag(2 + self.children.len() as u64), Join(child));
                }
                _ => {
                    let joined = payload
                        .downcast::<Result<Payload, JoinError>>()
                        .map_err(StepError::new)?
                        .map_err(StepError::new)?;
                    self.sizes += joined.downcast::<u64>().map_err(StepError::new)?;
                    self.joined = if self.joined == usize::MAX {
                        1
                    } else {
                        self.joined + 1
                    };
                }
            }
        }
        if self.joined == 2 {
            out.set_status(Status::Done(Payload::new(self.sizes + 1)));
        } else {
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    }
}

#[test]
fn spawn_and_join_build_a_tree_of_processes() {
    let s = scheduler();
    let root = s.spawn(Tree::new(), "grow", (9_u32,)).unwrap();
    assert_eq!(
        s.wait(root).unwrap().downcast::<u64>().unwrap(),
        (1 << 10) - 1
    );
    assert_eq!(s.metrics().spawned, (1 << 10) - 1);
}

#[test]
fn spawn_and_join_report_their_errors() {
    let s = scheduler();
    let finished = s.spawn(Answer(1), "run", ()).unwrap();
    s.wait(finished).unwrap();
    let pid = s
        .spawn(
            collect_completions(
                move |out| {
                    out.yield_command(Tag(1), Spawn::new(Answer(0), "missing", ()));
                    out.yield_command(Tag(2), Join(wsched::Pid::from_raw(77_777)));
                    out.yield_command(Tag(3), Join(finished));
                },
                |c| match c.result {
                    Err(YieldError::Failed { source, .. }) => source
                        .downcast_ref::<SpawnError>()
                        .expect("a SpawnError")
                        .to_string(),
                    Ok(p) => p
                        .downcast::<Result<Payload, JoinError>>()
                        .unwrap()
                        .unwrap_err()
                        .to_string(),
                    Err(other) => panic!("unexpected {other}"),
                },
            ),
            "run",
            (),
        )
        .unwrap();
    let mut results = s
        .wait(pid)
        .unwrap()
        .downcast::<Vec<(u64, String)>>()
        .unwrap();
    results.sort();
    assert_eq!(
        results,
        vec![
            (
                1,
                "cannot spawn: no entry named `missing`; available entries: `run`, `fail`"
                    .to_owned()
            ),
            (2, "cannot join <77777>: no such process".to_owned()),
            (
                3,
                format!(
                    "cannot join {finished}: its result was already claimed by another join or \
                     wait (or it was spawned detached and has finished: a detached process's \
                     result is not kept)"
                ),
            ),
        ]
    );
}

#[test]
fn blocking_pool_threads_are_bounded_and_retire_when_idle() {
    struct Block(std::sync::Arc<std::sync::Barrier>);
    impl wsched::Command for Block {
        type Output = ();
    }
    let s = Scheduler::builder()
        .workers(1)
        .blocking_threads(2)
        .blocking_keep_alive(Duration::from_millis(20))
        .blocking_handler(|Block(barrier), done: wsched::command::Completer<Block>| {
            barrier.wait();
            done.complete(());
        })
        .build()
        .unwrap();
    // Four blocking jobs, two threads: the barrier of three (two jobs + this thread)
    // releases the first pair, then the second.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(3));
    let pids: Vec<_> = (0..4)
        .map(|_| {
            let b = barrier.clone();
            s.spawn(
                collect_completions(
                    move |out| out.yield_command(Tag(1), Block(b)),
                    |c| c.result.unwrap(),
                ),
                "run",
                (),
            )
            .unwrap()
        })
        .collect();
    barrier.wait();
    assert!(s.metrics().blocking_threads <= 2);
    barrier.wait();
    for pid in pids {
        s.wait(pid).unwrap();
    }
    // Idle threads retire after the keep-alive; poll for it with a generous bound.
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.metrics().blocking_threads > 0 {
        assert!(Instant::now() < deadline, "blocking threads never retired");
        std::thread::sleep(Duration::from_millis(5));
    }
}
