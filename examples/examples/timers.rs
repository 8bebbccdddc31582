//! A million pending timers: how long they take to arm and fire, how much memory
//! they hold, and how late they fire.
//!
//! `cargo run --release -p wsched-examples --example timers [processes] [timers_each]`
//!
//! Written against the `Process` trait by hand, to show that layer too.

use std::time::{Duration, Instant};

use wsched::command::Sleep;
use wsched::{
    Context, Event, Events, InitError, Payload, Payloads, Process, Scheduler, Status, StepError,
    StepOutput, Tag,
};

/// Arms `count` timers at once (deadlines spread over 1–2 s) and finishes with how
/// late each fired, in microseconds.
struct Sleeper {
    count: u64,
    seed: u64,
    deadlines: Vec<Instant>,
    lateness: Vec<u64>,
}

impl Process for Sleeper {
    fn init(&mut self, _: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        if method != "sleep" {
            return Err(InitError::unknown_method(method, &["sleep"]));
        }
        let mut input = input.into_iter();
        let mut next = || {
            input
                .next()
                .ok_or_else(|| InitError::failed("sleep takes (count, seed)"))?
                .downcast::<u64>()
                .map_err(InitError::failed)
        };
        self.count = next()?;
        self.seed = next()?;
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if self.deadlines.is_empty() {
            let now = Instant::now();
            for tag in 0..self.count {
                self.seed = self
                    .seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let duration = Duration::from_micros(1_000_000 + (self.seed >> 33) % 1_000_000);
                self.deadlines.push(now + duration);
                out.yield_command(Tag(tag), Sleep(duration));
            }
        }
        for event in events {
            if let Event::Completion(c) = event {
                c.result.map_err(StepError::new)?;
                let late =
                    Instant::now().saturating_duration_since(self.deadlines[c.tag.0 as usize]);
                self.lateness.push(late.as_micros() as u64);
            }
        }
        if self.lateness.len() as u64 == self.count {
            out.set_status(Status::Done(Payload::new(std::mem::take(
                &mut self.lateness,
            ))));
        } else {
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    }
}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let processes = args.next().transpose()?.unwrap_or(10_000);
    let each = args.next().transpose()?.unwrap_or(100);

    let scheduler = Scheduler::new()?;
    let rss_before = rss_kib();
    let started = Instant::now();
    let pids = (0..processes)
        .map(|seed| {
            let sleeper = Sleeper {
                count: each,
                seed,
                deadlines: Vec::new(),
                lateness: Vec::new(),
            };
            scheduler.spawn(sleeper, "sleep", (each, seed))
        })
        .collect::<Result<Vec<_>, _>>()?;
    while (scheduler.metrics().pending_timers as u64) < processes * each {
        if started.elapsed() > Duration::from_millis(900) {
            break;
        }
        std::thread::yield_now();
    }
    let armed = started.elapsed();
    let pending = scheduler.metrics().pending_timers;
    let rss_armed = rss_kib();

    let mut lateness = Vec::with_capacity((processes * each) as usize);
    for pid in pids {
        lateness.extend(scheduler.wait(pid)?.downcast::<Vec<u64>>()?);
    }
    let fired = started.elapsed();
    lateness.sort_unstable();
    let pct = |p: f64| lateness[((lateness.len() - 1) as f64 * p) as usize];

    println!(
        "{} timers in {processes} processes on {} workers",
        processes * each,
        scheduler.workers()
    );
    println!("armed {pending} pending timers in {armed:?}");
    if let (Some(before), Some(armed)) = (rss_before, rss_armed) {
        println!(
            "resident memory: {before} KiB before, {armed} KiB armed ({} bytes per timer)",
            (armed.saturating_sub(before) * 1024) / (processes * each).max(1)
        );
    }
    println!("all fired {fired:?} after the start");
    println!(
        "lateness: p50 {} µs, p99 {} µs, max {} µs",
        pct(0.5),
        pct(0.99),
        lateness.last().copied().unwrap_or(0)
    );
    // What to compare it with: the wheel rounds deadlines up to its 1 ms ticks (a
    // timer never fires early, and up to a tick late by design), and a plain thread
    // sleeping to a deadline on this machine is late too.
    let reference = thread_sleep_lateness(200);
    println!(
        "for reference: timers round up to 1 ms ticks (up to 1000 µs late by design); a \
         thread sleeping to a deadline here is late by p50 {} µs, p99 {} µs",
        reference[reference.len() / 2],
        reference[(reference.len() - 1) * 99 / 100]
    );
    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}

/// How late `samples` sleeps of a plain thread to deadlines 0–2 ms away wake, in
/// microseconds, sorted.
fn thread_sleep_lateness(samples: u64) -> Vec<u64> {
    let mut late: Vec<u64> = (0..samples)
        .map(|i| {
            let deadline = Instant::now() + Duration::from_micros(i * 7919 % 2000);
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            Instant::now().duration_since(deadline).as_micros() as u64
        })
        .collect();
    late.sort_unstable();
    late
}
