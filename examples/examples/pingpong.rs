//! Message throughput: pairs of processes bouncing a counter back and forth.
//!
//! `cargo run --release -p wsched-examples --example pingpong [pairs] [rounds]`

use std::time::{Duration, Instant};

use wsched::prelude::*;
use wsched::Scheduler;

struct Ping;

#[process]
impl Ping {
    #[entry]
    fn run(&mut self, rounds: u32) -> Result<u32, BoxError> {
        let pong = this::spawn(Pong, "run", (this::pid(),))?;
        let mut last = 0;
        for i in 0..rounds {
            this::send(pong, i)?;
            last = recv!(u32)?;
        }
        this::send(pong, u32::MAX)?;
        Ok(last)
    }
}

struct Pong;

#[process]
impl Pong {
    #[entry]
    fn run(&mut self, ping: Pid) -> Result<(), BoxError> {
        loop {
            let n = recv!(u32)?;
            if n == u32::MAX {
                return Ok(());
            }
            this::send(ping, n + 1)?;
        }
    }
}

const USAGE: &str = "usage: pingpong [PAIRS] [ROUNDS]  (whole numbers; defaults 1000 and 1000)";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut number = |default: u32| match args.next() {
        None => default,
        Some(arg) => arg.parse().unwrap_or_else(|_| {
            eprintln!("pingpong: `{arg}` is not a whole number\n{USAGE}");
            std::process::exit(2)
        }),
    };
    let pairs = number(1_000);
    let rounds = number(1_000);

    let scheduler = Scheduler::new()?;
    let started = Instant::now();
    let pings = (0..pairs)
        .map(|_| scheduler.spawn(Ping, "run", (rounds,)))
        .collect::<Result<Vec<_>, _>>()?;
    for ping in pings {
        assert_eq!(scheduler.wait(ping)?.downcast::<u32>()?, rounds);
    }
    let elapsed = started.elapsed();
    let messages = u64::from(pairs) * u64::from(rounds) * 2;
    let m = scheduler.metrics().total();
    println!(
        "{pairs} pairs x {rounds} round trips on {} workers: {messages} messages in {elapsed:?} \
         ({:.2} M messages/s)",
        scheduler.workers(),
        messages as f64 / elapsed.as_secs_f64() / 1e6
    );
    println!(
        "steps {}, lifo {}, local {}, global {}, steals {} ({} stolen), parks {}",
        m.steps, m.lifo_pops, m.local_pops, m.global_pops, m.steals, m.stolen, m.parks
    );
    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}
