//! Spawns by typed entry name (`Worker::WORK`) through every API that starts a
//! process — the scheduler, a handle, a process's `this::spawn*`, the `Spawn`
//! command, a supervisor's `ChildSpec`, the harness — run the entry with the
//! arguments given, integer literals typed by the entry; and the string form keeps
//! working beside them.

use std::time::Duration;

use wsched::prelude::*;
use wsched::supervisor::{ChildSpec, Strategy, Supervisor};
use wsched::testing::TestProcess;
use wsched::{Entry, Scheduler};

const WAIT: Duration = Duration::from_secs(20);

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .on_unobserved_failure(|report| panic!("unobserved failure: {report:?}"))
        .build()
        .expect("scheduler starts")
}

/// Reports `n` to `coord`, tagged with how it was started, and returns `n * 2`.
struct Worker {
    how: &'static str,
}

#[process]
impl Worker {
    #[entry]
    fn work(&mut self, coord: Pid, n: u32) -> Result<u32, BoxError> {
        this::send(coord, (self.how, n))?;
        Ok(n * 2)
    }

    /// Waits for a message, then reports to `coord`: a supervised child.
    #[entry(name = "serve")]
    fn run_forever(&mut self, coord: Pid, n: u64) -> Result<(), BoxError> {
        this::send(coord, (self.how, n as u32))?;
        loop {
            recv!(())?;
        }
    }
}

/// Starts workers from inside a process: `this::spawn`, `this::spawn_linked`, the
/// `Spawn` command (joined), each typed.
struct Boss;

#[process]
impl Boss {
    #[entry]
    fn run(&mut self, coord: Pid) -> Result<u32, BoxError> {
        this::spawn_detached(
            Worker {
                how: "this::spawn_detached",
            },
            Worker::WORK,
            (coord, 1),
        )?;
        this::spawn_linked(
            Worker {
                how: "this::spawn_linked",
            },
            Worker::WORK,
            (coord, 2),
        )?;
        let child = yield_cmd!(Spawn::new(
            Worker { how: "Spawn" },
            Worker::WORK,
            (coord, 3)
        ))?;
        let result = yield_cmd!(Join(child))??;
        Ok(result.downcast::<u32>()?)
    }
}

#[test]
fn typed_spawns_start_their_entries_through_every_api() {
    let s = scheduler();
    let coord = s.inbox().unwrap();
    let handle = s.handle();

    let a = s
        .spawn(
            Worker {
                how: "Scheduler::spawn",
            },
            Worker::WORK,
            (coord.pid(), 10),
        )
        .unwrap();
    handle
        .spawn_detached(
            Worker {
                how: "Handle::spawn_detached",
            },
            Worker::WORK,
            (coord.pid(), 11),
        )
        .unwrap();
    let with = SpawnOptions::new().bounded_mailbox(4, Overflow::Reject);
    let c = handle
        .spawn_with(
            Worker {
                how: "Handle::spawn_with",
            },
            Worker::WORK,
            (coord.pid(), 12),
            with,
        )
        .unwrap();
    let boss = s.spawn(Boss, Boss::RUN, (coord.pid(),)).unwrap();
    // The string form, beside the typed one: the literal must be a `u32` there.
    let e = s
        .spawn(Worker { how: "by name" }, "work", (coord.pid(), 13_u32))
        .unwrap();
    // A supervisor's child, by its typed name: `serve`'s `u64` from `14`.
    let sup = Supervisor::new(Strategy::OneForOne).child(ChildSpec::new(
        "child",
        || Worker { how: "ChildSpec" },
        Worker::SERVE,
        (coord.pid(), 14),
    ));
    let view = sup.handle();
    let sup_pid = s.spawn(sup, Supervisor::ENTRY, ()).unwrap();

    assert_eq!(
        s.wait_timeout(a, WAIT).unwrap().downcast::<u32>().unwrap(),
        20
    );
    assert_eq!(
        s.wait_timeout(c, WAIT).unwrap().downcast::<u32>().unwrap(),
        24
    );
    assert_eq!(
        s.wait_timeout(e, WAIT).unwrap().downcast::<u32>().unwrap(),
        26
    );
    assert_eq!(
        s.wait_timeout(boss, WAIT)
            .unwrap()
            .downcast::<u32>()
            .unwrap(),
        6
    );
    let mut reports: Vec<(&str, u32)> = (0..8)
        .map(|_| coord.recv::<(&str, u32)>(WAIT).expect("a report"))
        .collect();
    reports.sort_by_key(|&(_, n)| n);
    assert_eq!(
        reports,
        vec![
            ("this::spawn_detached", 1),
            ("this::spawn_linked", 2),
            ("Spawn", 3),
            ("Scheduler::spawn", 10),
            ("Handle::spawn_detached", 11),
            ("Handle::spawn_with", 12),
            ("by name", 13),
            ("ChildSpec", 14),
        ]
    );
    assert!(view.child("child").unwrap().pid.is_some());
    let down = s.monitor(sup_pid);
    s.cancel(sup_pid).unwrap();
    assert_eq!(
        down.wait_timeout(WAIT).unwrap().reason,
        ExitReason::Cancelled
    );
    s.shutdown(WAIT);
}

#[test]
fn the_harness_starts_a_process_by_its_typed_name() {
    let coord = Pid::from_raw(7);
    let mut t = TestProcess::start(Worker { how: "harness" }, Worker::WORK, (coord, 21)).unwrap();
    let sent = t.take_sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].to, coord);
    assert_eq!(
        sent[0].payload.downcast_ref::<(&str, u32)>(),
        Some(&("harness", 21))
    );
    assert_eq!(t.result::<u32>(), 42);
    // The typed name is the entry's name, renamed or not.
    assert_eq!(Worker::WORK.name(), "work");
    assert_eq!(Worker::SERVE.name(), "serve");
    let serve: Entry<Worker, (Pid, u64)> = Worker::SERVE;
    assert_eq!(format!("{serve:?}"), "Entry<Worker, (Pid, u64)>(\"serve\")");
}
