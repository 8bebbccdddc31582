//! An etop-like live view of a busy scheduler: once a second, how busy each worker
//! was, and the processes that took the most steps in that second, with their busy
//! time and what waits in their mailboxes.
//!
//! `cargo run --release -p wsched-examples --example top [seconds] [busy|steps|mailbox]`
//! (default: 5 seconds, ranked by busy time)
//!
//! The workload: ping-pong pairs (many short steps), a process whose steps each
//! spin for a while (few steps, much busy time), and a consumer that receives only
//! numbers while it is also sent strings, which pile up in its mailbox (the
//! waiting column names them). Every process ends quietly when shutdown cancels
//! it.

use std::time::{Duration, Instant};

use wsched::command::Sleep;
use wsched::prelude::*;
use wsched::top::{TopBy, WindowEntry};
use wsched::{Metrics, Scheduler};

struct Ping;

#[process]
impl Ping {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        let pong = this::spawn_linked(Pong, "run", (this::pid(),))?;
        // Until shutdown cancels the receive.
        while this::send(pong, 1_u64).is_ok() && recv!(u64).is_ok() {}
        Ok(())
    }
}

struct Pong;

#[process]
impl Pong {
    #[entry]
    fn run(&mut self, ping: Pid) -> Result<(), BoxError> {
        while let Ok(n) = recv!(u64) {
            if this::send(ping, n + 1).is_err() {
                break;
            }
        }
        Ok(())
    }
}

/// Spins 2 ms in each step, then sleeps 1 ms: few steps, much busy time.
struct Hog;

#[process]
impl Hog {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        loop {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(2) {
                std::hint::spin_loop();
            }
            if yield_cmd!(Sleep(Duration::from_millis(1))).is_err() {
                return Ok(());
            }
        }
    }
}

/// Receives numbers only.
struct Picky;

#[process]
impl Picky {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        while recv!(u64).is_ok() {}
        Ok(())
    }
}

/// Sends `Picky` a number and a string every millisecond.
struct Pest;

#[process]
impl Pest {
    #[entry]
    fn run(&mut self, picky: Pid) -> Result<(), BoxError> {
        loop {
            let sent = this::send(picky, 7_u64).and(this::send(picky, "unwanted".to_string()));
            if sent.is_err() || yield_cmd!(Sleep(Duration::from_millis(1))).is_err() {
                return Ok(());
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let by = match args.next().as_deref() {
        None | Some("busy") => TopBy::Busy,
        Some("steps") => TopBy::Steps,
        Some("mailbox") => TopBy::Mailbox,
        Some(other) => return Err(format!("rank by busy, steps or mailbox, not {other:?}").into()),
    };
    println!(
        "the load: 4 ping-pong pairs (Ping and Pong: many short steps, the top rows by \
         steps), a Hog that spins 2 ms a step (few steps, the most busy time), and a \
         Picky consumer that receives only numbers while a Pest also sends it strings \
         (its mailbox grows, the top row by mailbox). Every process's entry is `run`, so \
         each row names its process by type and entry, `Ping::run <3>`; a table a second \
         for {seconds} s, ranked by {by}."
    );
    let scheduler = Scheduler::builder().step_timing(true).build()?;
    for _ in 0..4 {
        scheduler.spawn_detached(Ping, "run", ())?;
    }
    scheduler.spawn_detached(Hog, "run", ())?;
    let picky = scheduler.spawn_detached(Picky, "run", ())?;
    scheduler.spawn_detached(Pest, "run", (picky,))?;

    // ANCHOR: window
    let mut metrics = scheduler.metrics();
    let mut listing = scheduler.processes();
    let mut at = Instant::now();
    for second in 1..=seconds {
        std::thread::sleep(Duration::from_secs(1));
        let (metrics_now, listing_now, now) =
            (scheduler.metrics(), scheduler.processes(), Instant::now());
        let top = wsched::top::rank_window(&listing, listing_now.clone(), by, 8)?;
        print_table(second, now - at, &metrics, &metrics_now, by, &top);
        (metrics, listing, at) = (metrics_now, listing_now, now);
    }
    // ANCHOR_END: window
    scheduler.shutdown(Duration::from_secs(5));
    Ok(())
}

fn print_table(
    second: u64,
    window: Duration,
    before: &Metrics,
    after: &Metrics,
    by: TopBy,
    top: &[WindowEntry],
) {
    let busy: Vec<String> = before
        .workers
        .iter()
        .zip(&after.workers)
        .map(|(b, a)| {
            let share = (a.busy - b.busy).as_secs_f64() / window.as_secs_f64();
            format!("{:>3.0}%", share * 100.0)
        })
        .collect();
    let steps = after.total().steps - before.total().steps;
    println!(
        "\n== second {second}: workers busy [{}], {:.0} steps/s, {} live, {} in the global queue; by {by}",
        busy.join(" "),
        steps as f64 / window.as_secs_f64(),
        after.live,
        after.global_queue,
    );
    println!(
        "{:<16} {:<21} {:>10} {:>9} {:>8}  waiting",
        "process", "state", "steps/s", "busy ms", "mailbox"
    );
    for entry in top {
        let info = &entry.info;
        let waiting: Vec<String> = info
            .waiting_messages
            .iter()
            .map(|m| format!("{}×{}", m.count, m.type_name))
            .collect();
        println!(
            "{:<16} {:<21} {:>10.0} {:>9.1} {:>5} {:+}  {}",
            info.label(),
            info.state.to_string(),
            entry.steps as f64 / window.as_secs_f64(),
            entry.busy.unwrap_or_default().as_secs_f64() * 1e3,
            info.mailbox,
            entry.mailbox_growth,
            waiting.join(", "),
        );
    }
}
