//! A small supervision tree, crashed on purpose and shut down in order.
//!
//! `cargo run -p wsched-examples --example supervise`
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
                Ok("crash") => return Err(format!("{} crashed", self.name).into()),
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
    ChildSpec::new(name, move || Server { name }, "serve", ()).shutdown(Duration::from_secs(1))
}

fn show(title: &str, view: &SupervisorHandle) {
    println!("{title}: {:?}, {} restarts", view.state(), view.restarts());
    for child in view.children() {
        println!(
            "  {:<8} {:?} restarts {} ({:?}, {:?})",
            child.id, child.pid, child.restarts, child.restart, child.kind
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder().workers(2).build()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let app = Supervisor::new(Strategy::OneForOne)
        .intensity(3, Duration::from_secs(5))
        .child(server("db"))
        .child(ChildSpec::supervisor("web", move || {
            let web = Supervisor::new(Strategy::RestForOne)
                .child(server("listener"))
                .child(server("session"));
            // Each web supervisor started hands its view out.
            let _ = tx.send(web.handle());
            web
        }));
    let view = app.handle();
    let app_pid = scheduler.spawn(app, Supervisor::ENTRY, ())?;
    let web = rx.recv_timeout(WAIT)?;
    let running = |view: &SupervisorHandle| {
        view.wait_for(WAIT, |children| {
            children.iter().map(|c| c.pid).collect::<Option<Vec<Pid>>>()
        })
        .expect("the children run")
    };
    running(&view);
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
