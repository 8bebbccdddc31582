//! Supervisors with `#[process]` code: `#[process]` workers restarted from fresh
//! values, a supervisor spawned, queried (`WhichChildren`), watched and cancelled
//! from a `#[process]` entry, and a tree whose root's handle is read from a thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wsched::prelude::*;
use wsched::supervisor::{ChildSpec, Children, Restart, Strategy, Supervisor, WhichChildren};
use wsched::Scheduler;

const WAIT: Duration = Duration::from_secs(20);

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .build()
        .expect("scheduler starts")
}

/// Counts the values made by the factory: a restart makes a fresh one.
struct Counter {
    generation: u64,
    seen: u64,
}

#[process]
impl Counter {
    /// Counts messages until told to crash.
    #[entry]
    fn count(&mut self, limit: u64) -> Result<u64, BoxError> {
        loop {
            match recv!(&str)? {
                "crash" => return Err(format!("crashed in generation {}", self.generation).into()),
                _ => {
                    self.seen += 1;
                    if self.seen == limit {
                        return Ok(self.seen);
                    }
                }
            }
        }
    }
}

fn counter(id: &str, generations: &Arc<AtomicU64>) -> ChildSpec {
    let generations = generations.clone();
    ChildSpec::new(
        id,
        move || Counter {
            generation: generations.fetch_add(1, Ordering::SeqCst),
            seen: 0,
        },
        "count",
        (100_u64,),
    )
}

struct Manager;

#[process]
impl Manager {
    /// Starts a supervisor, crashes its first child, checks the restart, then shuts
    /// the supervisor down and returns how it ended.
    #[entry]
    fn manage(&mut self) -> Result<(Vec<u64>, ExitReason), BoxError> {
        let generations = Arc::new(AtomicU64::new(0));
        let sup = Supervisor::new(Strategy::OneForOne)
            .intensity(5, Duration::from_secs(60))
            .child(counter("first", &generations))
            .child(counter("second", &generations).restart(Restart::Transient));
        let sup = this::spawn(sup, Supervisor::ENTRY, ())?;
        let watch = this::monitor(sup);

        this::send(sup, WhichChildren)?;
        let Children(before) = recv!(Children)?;
        let first = before[0].pid.ok_or("first is running")?;

        // Its end reaches the supervisor (a link) before this process's query, and a
        // one-for-one restart is made in the step that sees it.
        let crashed = this::monitor(first);
        this::send(first, "crash")?;
        let down = recv!(Down)?;
        assert_eq!(down.monitor, crashed);
        this::send(sup, WhichChildren)?;
        let Children(after) = recv!(Children)?;
        assert!(after.iter().all(|c| c.pid.is_some()));
        assert_ne!(after[0].pid, before[0].pid);
        assert_eq!(after[1].pid, before[1].pid);

        this::cancel(sup)?;
        let down = recv!(Down)?;
        assert_eq!(down.monitor, watch);
        // Two children made, then a fresh first one.
        assert_eq!(generations.load(Ordering::SeqCst), 3);
        Ok((after.iter().map(|c| c.restarts).collect(), down.reason))
    }
}

#[test]
fn a_process_runs_queries_and_stops_a_supervisor_of_process_workers() {
    let s = scheduler();
    let manager = s.spawn(Manager, "manage", ()).unwrap();
    let (restarts, reason) = s
        .wait_timeout(manager, WAIT)
        .unwrap()
        .downcast::<(Vec<u64>, ExitReason)>()
        .unwrap();
    assert_eq!(restarts, vec![1, 0]);
    assert_eq!(reason, ExitReason::Cancelled);
    assert_eq!(s.metrics().live, 0);
    s.shutdown(WAIT);
}

#[test]
fn a_transient_process_worker_that_finishes_stays_finished() {
    let s = scheduler();
    let generations = Arc::new(AtomicU64::new(0));
    let tree = Supervisor::new(Strategy::OneForOne).child(ChildSpec::supervisor("inner", {
        let generations = generations.clone();
        move || {
            Supervisor::new(Strategy::OneForAll).child(
                ChildSpec::new(
                    "job",
                    {
                        let generations = generations.clone();
                        move || Counter {
                            generation: generations.fetch_add(1, Ordering::SeqCst),
                            seen: 0,
                        }
                    },
                    "count",
                    (2_u64,),
                )
                .restart(Restart::Transient),
            )
        }
    }));
    let root = tree.handle();
    let root_pid = s.spawn(tree, Supervisor::ENTRY, ()).unwrap();
    let inner = root
        .wait_for(WAIT, |c| c[0].pid)
        .expect("the inner supervisor runs");
    // Ask the inner supervisor from outside: through a small process.
    struct Ask;
    #[process]
    impl Ask {
        #[entry]
        fn ask(&mut self, sup: Pid) -> Result<Children, BoxError> {
            this::send(sup, WhichChildren)?;
            Ok(recv!(Children)?)
        }
    }
    // Its first step starts the children before it reads any message: the answer
    // shows the job running.
    let asker = s.spawn(Ask, "ask", (inner,)).unwrap();
    let Children(children) = s
        .wait_timeout(asker, WAIT)
        .unwrap()
        .downcast::<Children>()
        .unwrap();
    let job = children[0].pid.expect("the job runs");
    let down = s.monitor(job);
    s.send(job, "one").unwrap();
    s.send(job, "two").unwrap();
    assert_eq!(down.wait_timeout(WAIT).unwrap().reason, ExitReason::Normal);
    let asker = s.spawn(Ask, "ask", (inner,)).unwrap();
    let Children(children) = s
        .wait_timeout(asker, WAIT)
        .unwrap()
        .downcast::<Children>()
        .unwrap();
    assert_eq!((children[0].pid, children[0].restarts), (None, 0));
    assert_eq!(generations.load(Ordering::SeqCst), 1);
    let root_down = s.monitor(root_pid);
    s.cancel(root_pid).unwrap();
    assert_eq!(
        root_down.wait_timeout(WAIT).unwrap().reason,
        ExitReason::Cancelled
    );
    s.shutdown(WAIT);
}
