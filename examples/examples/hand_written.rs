//! A process written against the `Process` trait directly, without `#[process]`: the
//! quick start's greeter as an explicit state machine. It runs on a scheduler, then
//! the same process is stepped by hand with the `wsched::testing` harness.
//!
//! `cargo run --example hand_written`

use std::collections::VecDeque;
use std::time::Duration;

use wsched::command::Completer;
use wsched::testing::{TestProcess, TestStatus};
use wsched::{
    Command, Context, Event, Events, InitError, Payload, Payloads, Process, Scheduler, Status,
    StepError, StepOutput, Tag, YieldError,
};

/// The command, as in the quick start.
struct Fetch {
    url: String,
}

impl Command for Fetch {
    type Output = String;
}

/// Where the greeter stands: the states the macro would derive from the entry's
/// suspension points, written out.
enum State {
    /// Initialised, not stepped yet.
    Start,
    /// Waiting for the `Fetch` yielded with this tag.
    Fetching(Tag),
    /// Has the page; waiting for a `String` message.
    WaitingForAck(String),
    Done,
}

struct Greeter {
    name: String,
    state: State,
    /// `String` messages that came before they were wanted. (The macro's `recv!(T)`
    /// keeps every message of every type; this process keeps only what it will use
    /// and drops the rest.)
    early: VecDeque<String>,
}

impl Greeter {
    fn new() -> Self {
        Self {
            name: String::new(),
            state: State::Start,
            early: VecDeque::new(),
        }
    }
}

impl Process for Greeter {
    fn init(&mut self, _ctx: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        if method != "greet" {
            return Err(InitError::unknown_method(method, &["greet"]));
        }
        let name = input
            .into_iter()
            .next()
            .ok_or_else(|| InitError::failed("greet takes a name"))?;
        self.name = name.downcast::<String>().map_err(InitError::failed)?;
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        // Take in what arrived, whatever the state.
        for event in events {
            match event {
                Event::Completion(done) => {
                    if let State::Fetching(tag) = self.state {
                        if done.tag == tag {
                            let page = done.result.map_err(StepError::new)?;
                            let page = page.downcast::<String>().map_err(StepError::new)?;
                            self.state = State::WaitingForAck(page);
                        }
                    }
                }
                Event::Message(message) => {
                    if let Ok(text) = message.payload.downcast::<String>() {
                        self.early.push_back(text);
                    }
                }
                // Passing the cancellation on as this error ends the process with
                // `ExitReason::Cancelled`, as `?` on a suspension point would.
                Event::Cancel => return Err(StepError::new(YieldError::Cancelled)),
            }
        }
        // Then advance as far as it can without waiting.
        match &self.state {
            State::Start => {
                let tag = Tag(1); // any tag: the completion brings it back
                let url = format!("/users/{}", self.name);
                out.yield_command(tag, Fetch { url });
                self.state = State::Fetching(tag);
                out.set_status(Status::WaitingForYields); // messages queue meanwhile
            }
            State::Fetching(_) => out.set_status(Status::WaitingForYields),
            State::WaitingForAck(page) => match self.early.pop_front() {
                Some(ack) => {
                    let result = format!("{page} {ack}");
                    self.state = State::Done;
                    out.set_status(Status::Done(Payload::new(result)));
                }
                None => out.set_status(Status::WaitingForMessage),
            },
            State::Done => unreachable!("a finished process is not stepped"),
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // On a scheduler, exactly like a #[process] one.
    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(|fetch: Fetch, done: Completer<Fetch>| {
            done.complete(format!("<h1>{}</h1>", fetch.url));
        })
        .build()?;
    let pid = scheduler.spawn(Greeter::new(), "greet", ("ada".to_string(),))?;
    scheduler.send(pid, "welcome back!".to_string())?;
    let text = scheduler.wait(pid)?.downcast::<String>()?;
    println!("on the scheduler, {pid} finished: {text}");
    let wrong = scheduler.spawn(Greeter::new(), "greeet", ("ada".to_string(),));
    println!("spawning an unknown entry fails: {}", wrong.unwrap_err());
    scheduler.shutdown(Duration::from_secs(1));

    // Step by step, on this thread: no scheduler, no handler, no timing.
    println!("\nunder the test harness:");
    let mut t = TestProcess::start(Greeter::new(), "greet", ("bob".to_string(),))?;
    let (tag, fetch) = t.expect_yield::<Fetch>();
    println!(
        "  step {}: yielded Fetch {{ url: {:?} }} as {tag}",
        t.steps(),
        fetch.url
    );
    assert_eq!((tag, fetch.url.as_str()), (Tag(1), "/users/bob"));

    t.send("hello!".to_string()); // before the page: kept for later
    assert_eq!(t.status(), TestStatus::WaitingForYields);
    println!(
        "  step {}: a message came early; still {}",
        t.steps(),
        t.status()
    );

    t.complete(tag, "<h1>bob</h1>".to_string());
    let result = t.result::<String>();
    println!("  step {}: {} with {result:?}", t.steps(), t.status());
    assert_eq!(result, "<h1>bob</h1> hello!");

    let mut t = TestProcess::start(Greeter::new(), "greet", ("eve".to_string(),))?;
    t.cancel();
    println!("  cancelled while fetching: {}", t.expect_error());
    Ok(())
}
