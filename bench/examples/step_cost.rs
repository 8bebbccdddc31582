//! What one scheduler operation costs, in nanoseconds, on one worker: a yield of a
//! command completed at once (hand-written and `#[process]`), a `Status::Continue`,
//! a ping-pong round trip (hand-written and `#[process]`), a spawn from inside a
//! process (a chain of processes, each spawning the next and ending), and one
//! process of a skynet tree (spawned by `yield_all!` of `Spawn`, joined by its
//! parent's `yield_all!` of `Join`), and one of 10,000 children a process spawns at
//! once, by one `yield_all!` of `Spawn` (`fan`) or by `this::spawn_detached` in a
//! loop (`fan_direct`), spawned, run and ended (the suite's `spawn_many_inside`).
//!
//! ```sh
//! cargo run --release -p wsched-bench --example step_cost [-- ROUNDS [CASE...]]
//! ```
//!
//! A profiling aid for the hot paths, not a comparison (the suite is that): one
//! worker, so no stealing or waking is involved (`STEP_COST_WORKERS=2` in the
//! environment runs them on two; `STEP_COST_TIMING=1` turns step timing on, to see
//! what it costs), and the minimum of 9 runs, which is steady on a
//! noisy machine where medians are not (`STEP_COST_RECORD=bounded` or `ring` turns
//! the recorder on, `STEP_COST_CLOCK_EVERY=N` sets its clock interval). Run it under
//! `perf record` to see where a step's time goes; name cases (`yield`,
//! `macro_yield`, `continue`, `ping`, `macro_ping`, `chain`, `skynet`, `fan`,
//! `fan_direct`) to run only those.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
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

/// Spawns the next link (detached) until `left` is 0, then raises `done`.
struct Chain;

#[process]
impl Chain {
    #[entry]
    fn run(&mut self, left: u32, done: Arc<AtomicBool>) -> Result<(), BoxError> {
        if left > 0 {
            this::spawn_detached(Chain, "run", (left - 1, done))?;
        } else {
            done.store(true, Ordering::Release);
        }
        Ok(())
    }
}

/// What the children of a `Fan` count down; the last one wakes the waiting thread.
struct Children {
    left: AtomicUsize,
    waiter: std::thread::Thread,
}

/// Counts its `Children` down and ends.
struct CountDown(Arc<Children>);

#[process]
impl CountDown {
    #[entry]
    fn run(&mut self) {
        if self.0.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.waiter.unpark();
        }
    }
}

/// Spawns `n` `CountDown`s (detached), by one `yield_all!` of `Spawn` or by a loop of
/// `this::spawn_detached` calls.
struct Fan;

#[process]
impl Fan {
    #[entry]
    fn all(&mut self, n: u32, left: Arc<Children>) -> Result<(), BoxError> {
        for pid in yield_all!((0..n).map(|_| Spawn::detached(CountDown(left.clone()), "run", ()))) {
            pid?;
        }
        Ok(())
    }

    #[entry]
    fn direct(&mut self, n: u32, left: Arc<Children>) -> Result<(), BoxError> {
        for _ in 0..n {
            this::spawn_detached(CountDown(left.clone()), "run", ())?;
        }
        Ok(())
    }
}

/// Nanoseconds per child of `Fan`s spawning about `children` in all, 10,000 each (as
/// the suite's `spawn_many_inside`), one `Fan` after another.
fn fan_per_child(s: &Scheduler, entry: &str, children: u32) -> f64 {
    const EACH: u32 = 10_000;
    let fans = (children / EACH).max(1);
    let left = Arc::new(Children {
        left: AtomicUsize::new(0),
        waiter: std::thread::current(),
    });
    let start = Instant::now();
    for _ in 0..fans {
        left.left.store(EACH as usize, Ordering::Relaxed);
        s.spawn_detached(Fan, entry, (EACH, left.clone()))
            .expect("spawns");
        // Parked, not spinning: a thread polling the count would pull its line
        // away from the children at every count-down (and from the spawner's
        // clone of the `Arc`, on the same line), which made most of a child's
        // cost in this case.
        while left.left.load(Ordering::Acquire) != 0 {
            std::thread::park();
        }
    }
    start.elapsed().as_nanos() as f64 / f64::from(fans * EACH)
}

/// One node of a skynet tree: ten children by `yield_all!` of `Spawn`, joined by
/// `yield_all!` of `Join`, the sum of their results returned.
struct Skynet;

#[process]
impl Skynet {
    #[entry]
    fn run(&mut self, num: u64, size: u64) -> Result<u64, BoxError> {
        if size == 1 {
            return Ok(num);
        }
        let child = size / 10;
        let spawned =
            yield_all!((0..10).map(|i| Spawn::new(Skynet, "run", (num + i * child, child))));
        let mut pids = Vec::with_capacity(10);
        for pid in spawned {
            pids.push(pid?);
        }
        let mut sum = 0;
        for result in yield_all!(pids.into_iter().map(Join)) {
            sum += result??.downcast::<u64>()?;
        }
        Ok(sum)
    }
}

/// Nanoseconds per process of a skynet tree of about `processes` processes (its
/// leaves a power of ten), its sum checked.
fn skynet_per_process(s: &Scheduler, processes: u32) -> f64 {
    let mut leaves = 10_u64;
    while leaves * 10 <= u64::from(processes) {
        leaves *= 10;
    }
    let count = (leaves * 10 - 1) / 9;
    let start = Instant::now();
    let pid = s.spawn(Skynet, "run", (0_u64, leaves)).expect("spawns");
    let sum = s
        .wait(pid)
        .expect("finishes")
        .downcast::<u64>()
        .expect("a u64");
    let elapsed = start.elapsed().as_nanos() as f64 / count as f64;
    assert_eq!(sum, leaves * (leaves - 1) / 2, "skynet's sum");
    elapsed
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

/// Nanoseconds per unit of `count` processes made by `make`, each given `input`
/// and run at once (their steps interleaved, as in the suite's `yield_many`), until
/// all have finished.
fn per_unit_many<P: IntoProcess, I: IntoPayloads + Clone>(
    s: &Scheduler,
    make: impl Fn() -> P,
    input: I,
    count: u32,
    units: u32,
) -> f64 {
    let start = Instant::now();
    let pids: Vec<_> = (0..count)
        .map(|_| s.spawn(make(), "run", input.clone()).expect("spawns"))
        .collect();
    for pid in pids {
        s.wait(pid).expect("finishes");
    }
    start.elapsed().as_nanos() as f64 / f64::from(units)
}

/// Nanoseconds per link of a chain of `links` processes, until the last one ends.
fn chain_per_link(s: &Scheduler, links: u32) -> f64 {
    let done = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    s.spawn_detached(Chain, "run", (links, done.clone()))
        .expect("spawns");
    // A load of a line only the last link writes: polling the scheduler's metrics
    // here would contend with the worker's own counters.
    while !done.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    start.elapsed().as_nanos() as f64 / f64::from(links)
}

/// The measurements, by name.
const CASES: [&str; 11] = [
    "yield",
    "macro_yield",
    "yield_200",
    "macro_yield_200",
    "continue",
    "ping",
    "macro_ping",
    "chain",
    "skynet",
    "fan",
    "fan_direct",
];

/// The number in environment variable `name`, if set; `what` says what it counts
/// for the panic when it is not a number.
fn env_number<T: std::str::FromStr>(name: &str, what: &str) -> Option<T> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name} is {what}, not `{value}`")),
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args
        .next()
        .map(|a| a.parse().expect("ROUNDS is a number"))
        .unwrap_or(2_000_000);
    // Names after ROUNDS restrict the run to those cases (to profile one alone).
    let only: Vec<String> = args.collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    // One worker unless `STEP_COST_WORKERS` says otherwise (to see what a second
    // worker adds to a case, e.g. skynet's parallel overhead).
    let workers = env_number("STEP_COST_WORKERS", "a number of workers").unwrap_or(1);
    // `STEP_COST_RECORD=bounded` (or `ring`) turns the recorder on with its default
    // capacity, to see what recording costs; `STEP_COST_RECORD_CAPACITY` sets its
    // capacity, and `STEP_COST_CLOCK_EVERY=N` has it read the clock at one step in N
    // (to tell the clock's cost from the events').
    let record = std::env::var("STEP_COST_RECORD")
        .ok()
        .map(|mode| match mode.as_str() {
            "bounded" => wsched::RecordOptions::new().ring(false),
            "ring" => wsched::RecordOptions::new().ring(true),
            other => panic!("STEP_COST_RECORD is `bounded` or `ring`, not `{other}`"),
        })
        .map(
            |options| match env_number("STEP_COST_RECORD_CAPACITY", "a number of events") {
                Some(events) => options.capacity_per_worker(events),
                None => options,
            },
        )
        .map(
            |options| match env_number("STEP_COST_CLOCK_EVERY", "a number of steps") {
                Some(steps) => options.clock_every(steps),
                None => options,
            },
        );
    let builder = Scheduler::builder()
        .workers(workers)
        .step_timing(std::env::var_os("STEP_COST_TIMING").is_some());
    let builder = match record {
        Some(options) => builder.record(options),
        None => builder,
    };
    let s = builder
        .handler(|_: Nop, done: Completer<Nop>| done.complete(()))
        .build()
        .expect("the scheduler starts");
    let run = |name: &str| -> f64 {
        match name {
            "yield" => per_unit(&s, HandYield(n), (), n),
            "macro_yield" => per_unit(&s, MacroYield, (n,), n),
            "yield_200" => per_unit_many(&s, || HandYield(n / 200), (), 200, n),
            "macro_yield_200" => per_unit_many(&s, || MacroYield, (n / 200,), 200, n),
            "continue" => per_unit(&s, HandContinue(n), (), n),
            "ping" => per_unit(
                &s,
                HandPing {
                    left: n,
                    ctx: None,
                    pong: None,
                },
                (),
                n,
            ),
            "macro_ping" => per_unit(&s, MacroPing, (n,), n),
            "chain" => chain_per_link(&s, n / 4),
            "skynet" => skynet_per_process(&s, n / 4),
            "fan" => fan_per_child(&s, "all", n / 4),
            "fan_direct" => fan_per_child(&s, "direct", n / 4),
            other => unreachable!("no case {other}"),
        }
    };
    let mut best = [f64::NAN; CASES.len()];
    for _ in 0..9 {
        for (best, name) in best.iter_mut().zip(CASES) {
            if wanted(name) {
                *best = best.min(run(name));
            }
        }
    }
    let [hand_yield, macro_yield, hand_yield_200, macro_yield_200, continue_, hand_ping, macro_ping, chain, skynet, fan, fan_direct] =
        best;
    println!("{workers} worker(s), {n} units, minimum of 9 runs (ns per unit; NaN: not run):");
    println!(
        "  yield of a command completed at once: hand-written {hand_yield:.1}, #[process] {macro_yield:.1} ({:.2}x)",
        macro_yield / hand_yield
    );
    println!(
        "  the same, 200 processes yielding in turn: hand-written {hand_yield_200:.1}, #[process] {macro_yield_200:.1} ({:.2}x)",
        macro_yield_200 / hand_yield_200
    );
    println!("  Status::Continue: {continue_:.1}");
    println!(
        "  ping-pong round trip: hand-written {hand_ping:.1}, #[process] {macro_ping:.1} ({:.2}x)",
        macro_ping / hand_ping
    );
    println!("  spawn from inside, one link of a chain (spawn, run, end), #[process]: {chain:.1}");
    println!("  one process of a skynet tree (spawned, joined, summed), #[process]: {skynet:.1}");
    println!(
        "  one of 10,000 children spawned by one process (spawned, run, ended), #[process]: yield_all! of Spawn {fan:.1}, this::spawn_detached {fan_direct:.1}"
    );
}
