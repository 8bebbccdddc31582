//! `sim_steps` (issue 24, `--features sim`): how fast the deterministic simulation
//! steps processes, against the real scheduler on one worker.
//!
//! Two workloads, each with three variants run interleaved (the harness's order):
//!
//! * **ping-pong**: `wsched_side::Ping` bounces `rounds` numbers off its `Pong`.
//! * **skynet**: `wsched_side::Skynet`, a 10-ary tree of spawns summing `leaves`
//!   leaves (`yield_all!` of `Spawn`, then of `Join`).
//!
//! The variants: the real [`Scheduler`] with one worker (the baseline), a
//! [`Simulation`] with [`Faults::none`], and a [`Simulation`] with [`faults`] (a
//! fixed moderate plan). Each run builds its runtime untimed, times from the spawn
//! until the result is in hand, and counts the steps taken by then: the real
//! worker's `Metrics::workers[0].steps`, the simulation's `Simulation::steps`. The
//! section reports steps per second and the ratio simulated ÷ real, each the median
//! of the per-repetition values, and the time ratio of the same work: skynet takes
//! fewer steps simulated (a parent picked at random often finds several children
//! done) than on the real worker (its LIFO slot runs a woken parent at once).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use wsched::sim::{Faults, Simulation};
use wsched::{Handle, Pid, SpawnError};

use crate::harness::{self, check, fmt_secs, median, Measured, Report, Stopwatch, Variant};
use crate::wsched_side::{self, finish, wait, Ping, Skynet};

/// The simulations' seed: the same run, step for step, in every repetition.
const SEED: u64 = 1;

/// The fault plan of the third variant: one runnable process in ten waits up to a
/// millisecond of virtual time, buggify points at 1 %, handler latency up to 5 ms.
/// No crashes, so the results still check. These workloads yield no handled
/// command and meet no buggify point, so the delays are what the plan adds here
/// (scheduled releases, jumps of virtual time).
pub fn faults() -> Faults {
    Faults::none()
        .delay(0.1, Duration::from_millis(1))
        .latency(Duration::ZERO..Duration::from_millis(5))
        .buggify(0.01)
}

#[derive(Clone, Copy)]
enum Shape {
    PingPong { rounds: u32 },
    Skynet { leaves: u64 },
}

impl Shape {
    fn expected(self) -> u64 {
        let triangle = |n: u64| n * n.saturating_sub(1) / 2;
        match self {
            Self::PingPong { rounds } => triangle(u64::from(rounds) + 1),
            Self::Skynet { leaves } => triangle(leaves),
        }
    }

    fn spawn(self, handle: &Handle) -> Result<Pid, SpawnError> {
        match self {
            Self::PingPong { rounds } => handle.spawn(Ping, "run", (rounds,)),
            Self::Skynet { leaves } => handle.spawn(Skynet, "run", (0_u64, leaves)),
        }
    }
}

/// One run: its result, its steps, its time.
type Run = Result<(u64, u64, Measured), String>;

fn real(shape: Shape) -> Run {
    let s = wsched_side::scheduler(1);
    let handle = s.handle();
    let clock = Stopwatch::start();
    let pid = shape.spawn(&handle).map_err(|e| e.to_string())?;
    let sum = wait::<u64>(&s, pid)?;
    let m = clock.stop();
    let steps = s.metrics().workers.iter().map(|w| w.steps).sum();
    finish(s)?;
    Ok((sum, steps, m))
}

fn simulated(shape: Shape, faults: Faults) -> Run {
    let mut sim = Simulation::builder()
        .seed(SEED)
        .faults(faults)
        .build()
        .map_err(|e| e.to_string())?;
    let clock = Stopwatch::start();
    let pid = shape.spawn(sim.handle()).map_err(|e| e.to_string())?;
    let sum = sim
        .wait(pid)
        .map_err(|e| e.to_string())?
        .downcast::<u64>()
        .map_err(|e| e.to_string())?;
    let m = clock.stop();
    let steps = sim.steps();
    // Winding down (untimed).
    drop(sim);
    Ok((sum, steps, m))
}

const LABELS: [&str; 3] = ["real, 1 worker", "simulated", "simulated, faults"];

/// Runs one workload; its outcome and the steps of every run, per variant (the
/// warm-up run first).
fn measure(name: &'static str, shape: Shape, reps: usize) -> (harness::Outcome, Vec<Vec<u64>>) {
    let steps: Vec<Rc<RefCell<Vec<u64>>>> = (0..LABELS.len()).map(|_| Rc::default()).collect();
    let variant = |i: usize, run: Box<dyn Fn() -> Run>| {
        let steps = steps[i].clone();
        Variant::new(LABELS[i], move || {
            let (sum, n, measured) = run()?;
            check("result", sum, shape.expected())?;
            steps.borrow_mut().push(n);
            Ok(measured)
        })
    };
    let workload = harness::Workload {
        name,
        variants: vec![
            variant(0, Box::new(move || real(shape))),
            variant(1, Box::new(move || simulated(shape, Faults::none()))),
            variant(2, Box::new(move || simulated(shape, faults()))),
        ],
        comparisons: Vec::new(),
        skipped: Vec::new(),
    };
    let outcome = harness::run(workload, reps);
    let steps = steps.iter().map(|s| s.borrow().clone()).collect();
    (outcome, steps)
}

/// Runs `sim_steps`: ping-pong of `rounds` round trips, skynet of `leaves` leaves.
pub fn sim_steps(report: &mut Report, rounds: u32, leaves: u64, reps: usize) {
    let mut md = format!(
        "**Deterministic simulation**, steps per second of the simulated scheduler \
         (seed {SEED}) against the real one on 1 worker ({reps} runs interleaved; \
         rates and ratios are medians of the per-run values; \"faults\": 10 % of \
         runnable processes delayed up to 1 ms of virtual time; \"time ÷ real\": \
         the same work's wall time, as the two may take different numbers of steps)\n\n\
         | workload | scheduler | steps a run | median time | steps/s | time per step | \
         steps/s ÷ real (median of per-rep) | min–max | time ÷ real |\n\
         |---|---|---|---|---|---|---|---|---|"
    );
    let workloads = [
        (
            "sim_steps ping-pong",
            format!("ping-pong, {rounds} round trips"),
            Shape::PingPong { rounds },
        ),
        (
            "sim_steps skynet",
            format!("skynet, {leaves} leaves"),
            Shape::Skynet { leaves },
        ),
    ];
    for (name, what, shape) in workloads {
        let (outcome, steps) = measure(name, shape, reps);
        report.add(&outcome);
        if outcome.error.is_some() {
            return;
        }
        // Steps per second of each timed run (the warm-up's count skipped).
        let rates: Vec<Vec<f64>> = outcome
            .samples
            .iter()
            .zip(&steps)
            .map(|(samples, steps)| {
                samples
                    .iter()
                    .zip(&steps[1..])
                    .map(|(m, &n)| n as f64 / m.wall.as_secs_f64())
                    .collect()
            })
            .collect();
        for v in 0..LABELS.len() {
            let mut wall: Vec<f64> = outcome.samples[v]
                .iter()
                .map(|m| m.wall.as_secs_f64())
                .collect();
            let rate = median(&mut rates[v].clone());
            let mut counts: Vec<f64> = steps[v][1..].iter().map(|&n| n as f64).collect();
            let ratio = if v == 0 {
                "— | — | —".to_owned()
            } else {
                let mut ratios: Vec<f64> =
                    rates[v].iter().zip(&rates[0]).map(|(s, r)| s / r).collect();
                let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = ratios.iter().copied().fold(0.0, f64::max);
                let time = outcome.row(v, 0).ratio;
                format!(
                    "**{:.2}** | {lo:.2}–{hi:.2} | {time:.2}",
                    median(&mut ratios)
                )
            };
            md += &format!(
                "\n| {what} | {} | {:.0} | {} | {:.2} M | {} | {ratio} |",
                LABELS[v],
                median(&mut counts),
                fmt_secs(median(&mut wall)),
                rate / 1e6,
                fmt_secs(1.0 / rate),
            );
        }
    }
    report.section(md);
}
