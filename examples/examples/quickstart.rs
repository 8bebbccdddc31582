//! The README's quick start, whole: a handler registered, a process spawned by entry
//! name, a message sent, the result waited for and printed.
//!
//! `cargo run --example quickstart`

use std::time::Duration;

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::Scheduler;

/// A command: "fetch this page". The process only asks; a handler does it.
struct Fetch {
    url: String,
}

impl Command for Fetch {
    type Output = String; // what the handler hands back
}

/// The process's state: a plain struct.
struct Greeter {
    greeted: u32,
}

#[process]
impl Greeter {
    /// Started by name ("greet"), with one argument.
    #[entry]
    fn greet(&mut self, name: String) -> Result<String, BoxError> {
        let url = format!("/users/{name}");
        let page = yield_cmd!(Fetch { url })?; // suspends until the handler answers
        let ack = recv!(String)?; // suspends until a String message arrives
        self.greeted += 1;
        Ok(format!("{page} {ack} (greeted {})", self.greeted))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder()
        .workers(2)
        // Runs on a worker right after the step that yielded a Fetch; it must not
        // block (a blocking one goes to `blocking_handler`).
        .handler(|fetch: Fetch, done: Completer<Fetch>| {
            done.complete(format!("<h1>{}</h1>", fetch.url));
        })
        .build()?;

    let pid = scheduler.spawn(Greeter { greeted: 0 }, "greet", ("ada".to_string(),))?;
    println!("spawned {pid}, running entry \"greet\"");
    scheduler.send(pid, "welcome back!".to_string())?;
    let text = scheduler.wait(pid)?.downcast::<String>()?;
    println!("{pid} finished: {text}");

    let report = scheduler.shutdown(Duration::from_secs(1));
    println!("shut down in {:?}", report.elapsed);
    Ok(())
}
