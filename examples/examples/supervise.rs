//! Restarting what panics: first by hand — a parent process spawns children, joins
//! them and restarts the ones that panicked — then with `wsched::supervisor`, a small
//! supervision tree crashed on purpose and shut down in order.
//!
//! `cargo run -p wsched-examples --example supervise`
//!
//! The tree:
//!
//! ```text
//! app (one-for-one, 3 restarts in 5 s)
//! ├── db          a worker
//! └── web (rest-for-one)
//!     ├── listener
//!     └── session    depends on the listener: restarted with it
//! ```

use std::time::Duration;

use wsched::prelude::*;
use wsched::supervisor::{ChildSpec, Strategy, Supervisor, SupervisorHandle};
use wsched::Scheduler;

const WAIT: Duration = Duration::from_secs(10);

/// A job that panics on its first attempt when its number is a multiple of three.
struct Job;

#[process]
impl Job {
    #[entry]
    fn run(&mut self, n: u32, attempt: u32) -> u32 {
        assert!(
            !n.is_multiple_of(3) || attempt > 1,
            "job {n} panicked on attempt {attempt}"
        );
        n * 10
    }
}

/// Spawns the jobs, joins them all at once, and spawns again the ones that panicked,
/// until every job has a result or one has panicked `max_attempts` times.
struct Parent;

#[process]
impl Parent {
    #[entry]
    fn run(&mut self, jobs: u32, max_attempts: u32) -> Result<Vec<u32>, BoxError> {
        let mut results = vec![None; jobs as usize];
        let mut todo: Vec<u32> = (0..jobs).collect();
        for attempt in 1..=max_attempts {
            let spawns = todo.iter().map(|&n| Spawn::new(Job, "run", (n, attempt)));
            let children = yield_all!(spawns)
                .into_iter()
                .collect::<Result<Vec<Pid>, _>>()?;
            let joined = yield_all!(children.iter().map(|&child| Join(child)));
            let mut again = Vec::new();
            for ((n, child), outcome) in todo.into_iter().zip(children).zip(joined) {
                match outcome? {
                    Ok(result) => results[n as usize] = Some(result.downcast::<u32>()?),
                    Err(e) if matches!(e.exit_reason(), Some(ExitReason::Panicked { .. })) => {
                        println!("  job {n} ({child}) panicked: restarting it");
                        again.push(n);
                    }
                    Err(e) => return Err(e.into()), // a failure, not a panic: give up
                }
            }
            todo = again;
            if todo.is_empty() {
                break;
            }
        }
        if !todo.is_empty() {
            return Err(format!("jobs {todo:?} kept panicking").into());
        }
        Ok(results.into_iter().flatten().collect())
    }
}

/// Serves until told to crash; says so when it is asked to stop.
struct Server {
    name: &'static str,
}

#[process]
impl Server {
    #[entry]
    fn serve(&mut self) -> Result<(), BoxError> {
        loop {
            match recv!(&str) {
                Ok("crash") => panic!("{} crashed", self.name),
                Ok(_) => {}
                Err(e) => {
                    println!("  {} stops ({e})", self.name);
                    return Err(e.into());
                }
            }
        }
    }
}

fn server(name: &'static str) -> ChildSpec {
    ChildSpec::new(name, move || Server { name }, Server::SERVE, ())
        .shutdown(Duration::from_secs(1))
}

fn show(title: &str, view: &SupervisorHandle) {
    println!("{title}: {:?}, {} restarts", view.state(), view.restarts());
    // One line a child: its id, its process (or that it is not running), how often
    // it was restarted, and its restart kind and kind.
    for child in view.children() {
        let pid = child
            .pid
            .map_or_else(|| "not running".to_owned(), |pid| pid.to_string());
        println!(
            "  {:<8} {pid:<8} restarts {} ({:?}, {:?})",
            child.id, child.restarts, child.restart, child.kind
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder().workers(2).build()?;

    // The scheduler catches the panics below; the standard hook would still print
    // each one, with a backtrace if RUST_BACKTRACE is set. One line is enough here.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("  (panic: {})", info.payload_as_str().unwrap_or("?"));
    }));
    println!("by hand: a parent spawns 7 jobs, joins them, restarts the ones that panic");
    let parent = scheduler.spawn(Parent, "run", (7_u32, 3_u32))?;
    let results = scheduler.wait(parent)?.downcast::<Vec<u32>>()?;
    println!("  all jobs done: {results:?}\n");

    println!("with wsched::supervisor:");
    // ANCHOR: tree
    let app = Supervisor::new(Strategy::OneForOne)
        .intensity(3, Duration::from_secs(5))
        .child(server("db"))
        .child(ChildSpec::supervisor("web", || {
            Supervisor::new(Strategy::RestForOne)
                .child(server("listener"))
                .child(server("session"))
        }));
    let view = app.handle();
    let app_pid = scheduler.spawn(app, Supervisor::ENTRY, ())?;
    // ANCHOR_END: tree
    let running = |view: &SupervisorHandle| {
        view.wait_for(WAIT, |children| {
            children.iter().map(|c| c.pid).collect::<Option<Vec<Pid>>>()
        })
        .expect("the children run")
    };
    running(&view);
    // The subtree's own handle, reached through its parent's.
    let web = view.supervisor("web").ok_or("web runs")?;
    let listener = running(&web)[0];
    show("app", &view);
    show("web", &web);

    println!("\ncrashing the listener: rest-for-one restarts it and the session");
    let down = scheduler.monitor(listener);
    scheduler.send(listener, "crash")?;
    println!(
        "  listener ended: {}",
        down.wait_timeout(WAIT).ok_or("no Down")?.reason
    );
    web.wait_for(WAIT, |c| {
        (c[1].restarts == 1 && c[1].pid.is_some()).then_some(())
    })
    .ok_or("no restart")?;
    show("web", &web);

    println!("\nshutting the tree down: children stop in reverse start order");
    let app_down = scheduler.monitor(app_pid);
    scheduler.cancel(app_pid)?;
    println!(
        "app ended: {}",
        app_down.wait_timeout(WAIT).ok_or("no Down")?.reason
    );
    scheduler.shutdown(WAIT);
    Ok(())
}
