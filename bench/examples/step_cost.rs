//! What one scheduler operation costs, in nanoseconds, on one worker: a yield of a
//! command completed at once (hand-written and `#[process]`), a `Status::Continue`,
//! and a ping-pong round trip (hand-written and `#[process]`).
//!
//! ```sh
//! cargo run --release -p wsched-bench --example step_cost [-- ROUNDS]
//! ```
//!
//! A profiling aid for the hot paths, not a comparison (the suite is that): one
//! worker, so no stealing or waking is involved, and the minimum of 9 runs, which
//! is steady on a noisy machine where medians are not. Run it under
//! `perf record` to see where a step's time goes.

use std::time::Instant;

use wsched::command::{Command, Completer};
use wsched::prelude::*;
use wsched::{
    Context, Event, Events, InitError, IntoPayloads, IntoProcess, Payload, Payloads, Process,
    Scheduler, Status, StepError, StepOutput, Tag,
};

/// Completed at once by its handler.
struct Nop;

impl Command for Nop {
    type Output = ();
}

/// Yields `Nop` `n` times, by hand.
struct HandYield(u32);

impl Process for HandYield {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        for event in events {
            if let Event::Completion(c) = event {
                c.result.map_err(StepError::new)?;
            }
        }
        if self.0 == 0 {
            out.set_status(Status::Done(Payload::unit()));
        } else {
            self.0 -= 1;
            out.yield_command(Tag(u64::from(self.0)), Nop);
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    }
}

/// Steps `n` times with `Status::Continue`.
struct HandContinue(u32);

impl Process for HandContinue {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if self.0 == 0 {
            out.set_status(Status::Done(Payload::unit()));
        } else {
            self.0 -= 1;
            out.set_status(Status::Continue);
        }
        Ok(())
    }
}

/// Yields `Nop` `n` times, as a user writes it.
struct MacroYield;

#[process]
impl MacroYield {
    #[entry]
    fn run(&mut self, n: u32) -> Result<(), BoxError> {
        for _ in 0..n {
            yield_cmd!(Nop)?;
        }
        Ok(())
    }
}

/// Bounces `n` numbers off a `MacroPong`.
struct MacroPing;

#[process]
impl MacroPing {
    #[entry]
    fn run(&mut self, n: u32) -> Result<(), BoxError> {
        let pong = this::spawn_detached(MacroPong, "run", (this::pid(),))?;
        for i in 0..n {
            this::send(pong, i)?;
            recv!(u32)?;
        }
        this::send(pong, u32::MAX)?;
        Ok(())
    }
}

struct MacroPong;

#[process]
impl MacroPong {
    #[entry]
    fn run(&mut self, ping: Pid) -> Result<(), BoxError> {
        loop {
            let n = recv!(u32)?;
            if n == u32::MAX {
                return Ok(());
            }
            this::send(ping, n)?;
        }
    }
}

/// Bounces `left` numbers off a `HandPong`, by hand.
struct HandPing {
    left: u32,
    ctx: Option<Context>,
    pong: Option<Pid>,
}

impl Process for HandPing {
    fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("initialised");
        let pong = match self.pong {
            Some(pong) => pong,
            None => {
                let pong = ctx
                    .spawn_detached(HandPong(ctx.pid(), None), "run", ())
                    .map_err(StepError::new)?;
                *self.pong.insert(pong)
            }
        };
        drop(events);
        if self.left == 0 {
            ctx.send(pong, u32::MAX).map_err(StepError::new)?;
            out.set_status(Status::Done(Payload::unit()));
        } else {
            self.left -= 1;
            ctx.send(pong, self.left).map_err(StepError::new)?;
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    }
}

struct HandPong(Pid, Option<Context>);

impl Process for HandPong {
    fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        self.1 = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.1.as_ref().expect("initialised");
        for event in events {
            let Event::Message(m) = event else { continue };
            let n = m.payload.downcast::<u32>().map_err(StepError::new)?;
            if n == u32::MAX {
                out.set_status(Status::Done(Payload::unit()));
                return Ok(());
            }
            ctx.send(self.0, n).map_err(StepError::new)?;
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }
}

/// Nanoseconds per unit of running `process` for `units` units.
fn per_unit<P: IntoProcess>(
    s: &Scheduler,
    process: P,
    input: impl IntoPayloads,
    units: u32,
) -> f64 {
    let start = Instant::now();
    let pid = s.spawn(process, "run", input).expect("spawns");
    s.wait(pid).expect("finishes");
    start.elapsed().as_nanos() as f64 / f64::from(units)
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("ROUNDS is a number"))
        .unwrap_or(2_000_000);
    let s = Scheduler::builder()
        .workers(1)
        .handler(|_: Nop, done: Completer<Nop>| done.complete(()))
        .build()
        .expect("the scheduler starts");
    let mut best = [f64::MAX; 5];
    for _ in 0..9 {
        let runs = [
            per_unit(&s, HandYield(n), (), n),
            per_unit(&s, MacroYield, (n,), n),
            per_unit(&s, HandContinue(n), (), n),
            per_unit(
                &s,
                HandPing {
                    left: n,
                    ctx: None,
                    pong: None,
                },
                (),
                n,
            ),
            per_unit(&s, MacroPing, (n,), n),
        ];
        for (best, run) in best.iter_mut().zip(runs) {
            *best = best.min(run);
        }
    }
    let [hand_yield, macro_yield, continue_, hand_ping, macro_ping] = best;
    println!("1 worker, {n} units, minimum of 9 runs (ns per unit):");
    println!("  yield of a command completed at once: hand-written {hand_yield:.1}, #[process] {macro_yield:.1} ({:.2}x)", macro_yield / hand_yield);
    println!("  Status::Continue: {continue_:.1}");
    println!(
        "  ping-pong round trip: hand-written {hand_ping:.1}, #[process] {macro_ping:.1} ({:.2}x)",
        macro_ping / hand_ping
    );
}
