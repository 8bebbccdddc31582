//! Timers under load: how late sleepers wake, wsched's `Sleep` against
//! `tokio::time::sleep`.
//!
//! * `timer_burst`: 100,000 processes (tasks), spawned from outside at once, each
//!   sleeping once for a seeded random 0–50 ms.
//! * `timer_repeat`: 1,000 processes each sleeping 100 times in a row, each sleep a
//!   seeded random 0–5 ms.
//!
//! A sleeper reads the clock just before it sleeps (`t0`) and as soon as it runs
//! again; its *lateness* is that second reading minus `t0 + d`, the instant it asked
//! to be woken at. Both sides round a deadline up to their timer's 1 ms tick, so a
//! lateness is never negative and is usually under a millisecond plus the time to
//! get the woken process (task) run. Each sleeper writes its lateness into its own
//! slot and counts a latch down; the bench thread waits for the latch.
//!
//! Each repetition runs both sides once with the same seed (a new seed per
//! repetition), in alternating order, each on a fresh runtime (tokio's with its time
//! driver on: `enable_time`). Per repetition: p50 and p99 over that run's samples;
//! the report gives the medians of those over the repetitions and the median of the
//! per-repetition ratios wsched ÷ tokio (target for p99: at most 1). Checks: every
//! sleeper woke (the latch reaches zero, every slot is written) and none woke early
//! (lateness ≥ −[`TOLERANCE`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wsched::prelude::*;

use crate::harness::{fmt_secs, median, percentile, Report};
use crate::latch::{self, Latch};
use crate::wsched_side::{self, WAIT};

/// How early a wake-up may seem to be before it counts as early: the clock readings
/// of `t0` and of the wake-up are the same monotonic clock, so nothing but rounding.
const TOLERANCE: Duration = Duration::from_micros(10);

/// A slot no sleeper wrote.
const UNWRITTEN: i64 = i64::MIN;

/// One timer case: `processes` sleepers, each sleeping `sleeps` times for up to
/// `max` (uniform, microsecond steps, `0..=max`).
#[derive(Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub processes: usize,
    pub sleeps: usize,
    pub max: Duration,
}

/// What the sleepers share: the lateness slots and the latch.
pub struct Record {
    late: Box<[AtomicI64]>,
    latch: Arc<Latch>,
}

impl Record {
    fn new(case: &Case) -> (Arc<Self>, std::sync::mpsc::Receiver<()>) {
        let (latch, done) = Latch::new(case.processes);
        let late = (0..case.processes * case.sleeps)
            .map(|_| AtomicI64::new(UNWRITTEN))
            .collect();
        (Arc::new(Self { late, latch }), done)
    }

    fn write(&self, slot: usize, asked: Instant, woke: Instant) {
        let late = if woke >= asked {
            (woke - asked).as_nanos() as i64
        } else {
            -((asked - woke).as_nanos() as i64)
        };
        self.late[slot].store(late, Ordering::Relaxed);
    }

    /// The samples in seconds, sorted; an error if one is missing or early.
    fn samples(&self) -> Result<Vec<f64>, String> {
        let mut out = Vec::with_capacity(self.late.len());
        for (slot, late) in self.late.iter().enumerate() {
            let late = late.load(Ordering::Acquire);
            if late == UNWRITTEN {
                return Err(format!("sleep {slot} never woke"));
            }
            if late < -(TOLERANCE.as_nanos() as i64) {
                return Err(format!("sleep {slot} woke {late} ns early"));
            }
            out.push(late as f64 * 1e-9);
        }
        out.sort_by(f64::total_cmp);
        Ok(out)
    }
}

/// The duration of sleep `j` of sleeper `i` in the run seeded `seed`: the same on
/// both sides.
pub fn duration(seed: u64, i: usize, j: usize, max: Duration) -> Duration {
    // splitmix64 of the three.
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i as u64) << 20 | j as u64)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    Duration::from_micros(z % (max.as_micros() as u64 + 1))
}

// ---------------------------------------------------------------- wsched

/// Sleeps `sleeps` times (`yield_cmd!(Sleep(d))`), writing each lateness.
pub struct Sleeper {
    record: Arc<Record>,
    index: usize,
    seed: u64,
    sleeps: usize,
    max: Duration,
}

#[process]
impl Sleeper {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        for j in 0..self.sleeps {
            let d = duration(self.seed, self.index, j, self.max);
            let t0 = Instant::now();
            yield_cmd!(Sleep(d))?;
            self.record
                .write(self.index * self.sleeps + j, t0 + d, Instant::now());
        }
        self.record.latch.count_down();
        Ok(())
    }
}

fn run_wsched(workers: usize, case: &Case, seed: u64) -> Result<(Vec<f64>, Duration), String> {
    let s = wsched_side::scheduler(workers);
    let (record, done) = Record::new(case);
    let started = Instant::now();
    for index in 0..case.processes {
        let sleeper = Sleeper {
            record: record.clone(),
            index,
            seed,
            sleeps: case.sleeps,
            max: case.max,
        };
        s.spawn_detached(sleeper, "run", ())
            .map_err(|e| e.to_string())?;
    }
    latch::wait(&done, WAIT)?;
    let wall = started.elapsed();
    wsched_side::finish(s)?;
    Ok((record.samples()?, wall))
}

// ---------------------------------------------------------------- tokio

fn run_tokio(workers: usize, case: &Case, seed: u64) -> Result<(Vec<f64>, Duration), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    let (record, done) = Record::new(case);
    let started = Instant::now();
    for index in 0..case.processes {
        let (record, sleeps, max) = (record.clone(), case.sleeps, case.max);
        drop(rt.spawn(async move {
            for j in 0..sleeps {
                let d = duration(seed, index, j, max);
                let t0 = Instant::now();
                tokio::time::sleep(d).await;
                record.write(index * sleeps + j, t0 + d, Instant::now());
            }
            record.latch.count_down();
        }));
    }
    latch::wait(&done, WAIT)?;
    let wall = started.elapsed();
    drop(rt);
    Ok((record.samples()?, wall))
}

// ---------------------------------------------------------------- the case

const SIDES: [&str; 2] = ["tokio", "wsched"];

/// Per side, per repetition: p50, p99, max and the wall time until the last woke.
#[derive(Default)]
struct Runs {
    p50: Vec<f64>,
    p99: Vec<f64>,
    max: Vec<f64>,
    wall: Vec<f64>,
}

pub fn run(report: &mut Report, workers: usize, case: Case, reps: usize) {
    eprint!("{:<24} ", case.name);
    let started = Instant::now();
    let mut runs = [Runs::default(), Runs::default()];
    let one = |side: usize, seed: u64| match side {
        0 => run_tokio(workers, &case, seed),
        _ => run_wsched(workers, &case, seed),
    };
    // Warm-up (results still checked), then the repetitions, alternating the order.
    for rep in 0..=reps {
        let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            match one(side, rep as u64) {
                Ok((samples, wall)) if rep > 0 => {
                    let r = &mut runs[side];
                    r.p50.push(percentile(&samples, 50.0));
                    r.p99.push(percentile(&samples, 99.0));
                    r.max.push(*samples.last().expect("samples"));
                    r.wall.push(wall.as_secs_f64());
                }
                Ok(_) => {}
                Err(e) => {
                    eprintln!();
                    report.fail(case.name, &format!("{}: {e}", SIDES[side]));
                    return;
                }
            }
        }
        eprint!("{}", if rep == 0 { "w" } else { "." });
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());

    let ratios = |f: fn(&Runs) -> &Vec<f64>| -> (f64, f64, f64) {
        let mut r: Vec<f64> = f(&runs[1])
            .iter()
            .zip(f(&runs[0]))
            .map(|(w, t)| w / t.max(1e-9))
            .collect();
        let (lo, hi) = r.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
        (median(&mut r), lo, hi)
    };
    let (p50_ratio, _, _) = ratios(|r| &r.p50);
    let (p99_ratio, p99_lo, p99_hi) = ratios(|r| &r.p99);
    let med = |v: &Vec<f64>| median(&mut v.clone());
    let mut md = format!(
        "**{}**: {} sleepers × {} sleep{} of a seeded random 0–{} ms each, lateness (woke − \
         asked) per repetition, medians over {reps} repetitions\n\n\
         | side | p50 | p99 | max | all woke after |\n|---|---|---|---|---|",
        case.name,
        thousands(case.processes),
        case.sleeps,
        if case.sleeps == 1 { "" } else { "s" },
        case.max.as_millis(),
    );
    for (side, name) in SIDES.iter().enumerate() {
        let r = &runs[side];
        md += &format!(
            "\n| {name} | {} | {} | {} | {} |",
            fmt_secs(med(&r.p50)),
            fmt_secs(med(&r.p99)),
            fmt_secs(med(&r.max)),
            fmt_secs(med(&r.wall)),
        );
    }
    let verdict = if p99_ratio <= 1.0 {
        "≤ 1.0 met"
    } else {
        "≤ 1.0 **not met**"
    };
    md += &format!(
        "\n\nwsched ÷ tokio (median of per-repetition ratios): p50 **{p50_ratio:.2}**, \
         p99 **{p99_ratio:.2}** ({p99_lo:.2}–{p99_hi:.2}; target {verdict})"
    );
    report.section(md);
}

/// `n` with a comma every three digits.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The sizes of case `name` (`timer_burst` or `timer_repeat`): the issue's, or for
/// `--quick` ten times fewer sleepers (and sleeps).
pub fn case(name: &str, quick: bool) -> Case {
    let scale = if quick { 10 } else { 1 };
    match name {
        "timer_burst" => Case {
            name: "timer_burst",
            processes: 100_000 / scale,
            sleeps: 1,
            max: Duration::from_millis(50),
        },
        _ => Case {
            name: "timer_repeat",
            processes: 1_000 / scale,
            sleeps: 100 / scale,
            max: Duration::from_millis(5),
        },
    }
}
