//! The wsched side, written as a user writes it: `#[process]` structs whose entries
//! use `yield_cmd!`, `yield_all!`, `recv!` and `wsched::this`, spawned and awaited
//! from the bench thread through the public API.
//!
//! Every run builds a fresh scheduler with `workers` workers (and the `Nop` handler,
//! which completes at once), times from just before the first spawn until the result
//! is in hand, then shuts the scheduler down untimed; processes still live at
//! shutdown are an error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::{Builder, IntoProcess, Scheduler};

use crate::harness::{Measured, Stopwatch};
use crate::latch::{self, Latch};

/// How long any wait may take before the run counts as hung.
pub const WAIT: Duration = Duration::from_secs(120);

/// A command whose handler completes it at once, on the worker.
pub struct Nop;

impl Command for Nop {
    type Output = ();
}

pub fn scheduler(workers: usize) -> Scheduler {
    scheduler_with(workers, |builder| builder)
}

/// [`scheduler`], configured further by `configure` (the observability costs).
pub fn scheduler_with(workers: usize, configure: impl FnOnce(Builder) -> Builder) -> Scheduler {
    configure(
        Scheduler::builder()
            .workers(workers)
            .handler(|_: Nop, done: Completer<Nop>| done.complete(())),
    )
    .build()
    .expect("the scheduler starts")
}

/// Shuts down; a process still live then is an error.
pub fn finish(scheduler: Scheduler) -> Result<(), String> {
    let report = scheduler.shutdown(Duration::from_secs(10));
    if report.stopped.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} processes were still live at shutdown",
            report.stopped.len()
        ))
    }
}

pub fn wait<T: 'static>(scheduler: &Scheduler, pid: Pid) -> Result<T, String> {
    scheduler
        .wait_timeout(pid, WAIT)
        .map_err(|e| format!("process {pid}: {e}"))?
        .downcast::<T>()
        .map_err(|e| format!("process {pid}: {e}"))
}

/// Waits for each of `pids` and sums their `u64` results.
pub fn wait_sum(scheduler: &Scheduler, pids: Vec<Pid>) -> Result<u64, String> {
    pids.into_iter()
        .try_fold(0, |sum, pid| Ok(sum + wait::<u64>(scheduler, pid)?))
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

// ---------------------------------------------------------------- skynet

/// One node of the skynet tree: spawns ten children with `yield_all!` of `Spawn`,
/// joins them with `yield_all!` of `Join`, returns the sum of their results.
pub struct Skynet;

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

/// Skynet spawning its children with `this::spawn` (a direct call, no yield) and
/// joining them with `yield_all!` of `Join`.
pub struct SkynetDirect;

#[process]
impl SkynetDirect {
    #[entry]
    fn run(&mut self, num: u64, size: u64) -> Result<u64, BoxError> {
        if size == 1 {
            return Ok(num);
        }
        let child = size / 10;
        let mut pids = Vec::with_capacity(10);
        for i in 0..10 {
            pids.push(this::spawn(SkynetDirect, "run", (num + i * child, child))?);
        }
        let mut sum = 0;
        for result in yield_all!(pids.into_iter().map(Join)) {
            sum += result??.downcast::<u64>()?;
        }
        Ok(sum)
    }
}

/// Skynet whose children are spawned detached and send their sum to their parent.
pub struct SkynetMsg;

#[process]
impl SkynetMsg {
    #[entry]
    fn run(&mut self, parent: Option<Pid>, num: u64, size: u64) -> Result<u64, BoxError> {
        let sum = if size == 1 {
            num
        } else {
            let me = this::pid();
            let child = size / 10;
            let spawned = yield_all!((0..10).map(|i| Spawn::detached(
                SkynetMsg,
                "run",
                (Some(me), num + i * child, child)
            )));
            for pid in spawned {
                pid?;
            }
            let mut sum = 0;
            for _ in 0..10 {
                sum += recv!(u64)?;
            }
            sum
        };
        if let Some(parent) = parent {
            this::send(parent, sum)?;
        }
        Ok(sum)
    }
}

/// Runs the tree rooted at `root` (a `Skynet` or a `SkynetDirect`).
pub fn skynet<P: IntoProcess>(
    workers: usize,
    root: P,
    leaves: u64,
) -> Result<(u64, Measured), String> {
    let s = scheduler(workers);
    let clock = Stopwatch::start();
    let pid = s.spawn(root, "run", (0_u64, leaves)).map_err(err)?;
    let sum = wait::<u64>(&s, pid)?;
    let m = clock.stop();
    finish(s)?;
    Ok((sum, m))
}

pub fn skynet_msg(workers: usize, leaves: u64) -> Result<(u64, Measured), String> {
    let s = scheduler(workers);
    let clock = Stopwatch::start();
    let pid = s
        .spawn(SkynetMsg, "run", (None::<Pid>, 0_u64, leaves))
        .map_err(err)?;
    let sum = wait::<u64>(&s, pid)?;
    let m = clock.stop();
    finish(s)?;
    Ok((sum, m))
}

// ---------------------------------------------------------------- ping-pong

/// Spawns its `Pong` (detached), bounces `rounds` numbers off it, sums the answers.
pub struct Ping;

#[process]
impl Ping {
    #[entry]
    fn run(&mut self, rounds: u32) -> Result<u64, BoxError> {
        let pong = this::spawn_detached(Pong, "run", (this::pid(),))?;
        let mut sum = 0;
        for i in 0..rounds {
            this::send(pong, i)?;
            sum += u64::from(recv!(u32)?);
        }
        this::send(pong, u32::MAX)?;
        Ok(sum)
    }
}

/// Answers `n` with `n + 1` until it receives `u32::MAX`.
pub struct Pong;

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

/// Spawns `pairs` pings (made by `ping`) from outside and sums their results.
pub fn ping_pong<P: IntoProcess>(
    workers: usize,
    pairs: u32,
    ping: impl Fn() -> P,
    input: impl Fn() -> u32,
) -> Result<(u64, Measured), String> {
    ping_pong_on(scheduler(workers), pairs, ping, input)
}

/// [`ping_pong`] on a scheduler built by the caller.
pub fn ping_pong_on<P: IntoProcess>(
    s: Scheduler,
    pairs: u32,
    ping: impl Fn() -> P,
    input: impl Fn() -> u32,
) -> Result<(u64, Measured), String> {
    let clock = Stopwatch::start();
    let pings = (0..pairs)
        .map(|_| s.spawn(ping(), "run", (input(),)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let sum = wait_sum(&s, pings)?;
    let m = clock.stop();
    finish(s)?;
    Ok((sum, m))
}

// ---------------------------------------------------------------- spawning

/// Counts the latch down and ends.
pub struct Countdown {
    latch: Arc<Latch>,
}

#[process]
impl Countdown {
    #[entry]
    fn run(&mut self) {
        self.latch.count_down();
    }
}

/// Spawns `n` `Countdown`s with one `yield_all!` of detached `Spawn` commands.
pub struct Spawner;

#[process]
impl Spawner {
    #[entry]
    fn run(&mut self, latch: Arc<Latch>, n: u64) -> Result<u64, BoxError> {
        let mut spawned = 0;
        for pid in yield_all!((0..n).map(|_| Spawn::detached(
            Countdown {
                latch: latch.clone()
            },
            "run",
            ()
        ))) {
            pid?;
            spawned += 1;
        }
        Ok(spawned)
    }
}

/// Spawns `n` `Countdown`s with `this::spawn_detached` in a loop (a direct call per
/// child, no yield), as a tokio task calls `tokio::spawn` in a loop.
pub struct SpawnerDirect;

#[process]
impl SpawnerDirect {
    #[entry]
    fn run(&mut self, latch: Arc<Latch>, n: u64) -> Result<u64, BoxError> {
        let mut spawned = 0;
        for _ in 0..n {
            this::spawn_detached(
                Countdown {
                    latch: latch.clone(),
                },
                "run",
                (),
            )?;
            spawned += 1;
        }
        Ok(spawned)
    }
}

/// `n` detached processes spawned from the bench thread; done when all have run.
pub fn spawn_many_outside(workers: usize, n: usize) -> Result<Measured, String> {
    let s = scheduler(workers);
    let (latch, done) = Latch::new(n);
    let clock = Stopwatch::start();
    for _ in 0..n {
        s.spawn_detached(
            Countdown {
                latch: latch.clone(),
            },
            "run",
            (),
        )
        .map_err(err)?;
    }
    latch::wait(&done, WAIT)?;
    let m = clock.stop();
    finish(s)?;
    crate::harness::check("count-down left", latch.left(), 0)?;
    Ok(m)
}

/// `n` detached processes spawned by one process's `yield_all!`.
pub fn spawn_many_inside(workers: usize, n: usize) -> Result<Measured, String> {
    spawn_many_inside_by(workers, n, Spawner)
}

/// [`spawn_many_inside`] with the children spawned by `this::spawn_detached` calls.
pub fn spawn_many_inside_direct(workers: usize, n: usize) -> Result<Measured, String> {
    spawn_many_inside_by(workers, n, SpawnerDirect)
}

fn spawn_many_inside_by<P: IntoProcess>(
    workers: usize,
    n: usize,
    spawner: P,
) -> Result<Measured, String> {
    let s = scheduler(workers);
    let (latch, done) = Latch::new(n);
    let clock = Stopwatch::start();
    let pid = s
        .spawn(spawner, "run", (latch.clone(), n as u64))
        .map_err(err)?;
    latch::wait(&done, WAIT)?;
    let spawned = wait::<u64>(&s, pid)?;
    let m = clock.stop();
    finish(s)?;
    crate::harness::check("processes spawned", spawned, n as u64)?;
    crate::harness::check("count-down left", latch.left(), 0)?;
    Ok(m)
}

/// Each link spawns the next (detached) until `left` is 0, which counts the latch down.
pub struct Chain;

#[process]
impl Chain {
    #[entry]
    fn run(&mut self, latch: Arc<Latch>, left: u64) -> Result<(), BoxError> {
        if left == 0 {
            latch.count_down();
        } else {
            this::spawn_detached(Chain, "run", (latch, left - 1))?;
        }
        Ok(())
    }
}

pub fn chained_spawn(workers: usize, n: usize) -> Result<Measured, String> {
    let s = scheduler(workers);
    let (latch, done) = Latch::new(1);
    let clock = Stopwatch::start();
    s.spawn_detached(Chain, "run", (latch.clone(), n as u64))
        .map_err(err)?;
    latch::wait(&done, WAIT)?;
    let m = clock.stop();
    finish(s)?;
    crate::harness::check("count-down left", latch.left(), 0)?;
    Ok(m)
}

// ---------------------------------------------------------------- yielding

/// Yields `Nop` commands (completed at once by their handler).
pub struct Yielder;

#[process]
impl Yielder {
    /// `n` separate `yield_cmd!`s.
    #[entry]
    fn run(&mut self, n: u32) -> Result<u64, BoxError> {
        let mut done = 0;
        for _ in 0..n {
            yield_cmd!(Nop)?;
            done += 1;
        }
        Ok(done)
    }

    /// `batches` `yield_all!`s of `per_batch` commands each.
    #[entry]
    fn batched(&mut self, batches: u32, per_batch: u32) -> Result<u64, BoxError> {
        let mut done = 0;
        for _ in 0..batches {
            for result in yield_all!((0..per_batch).map(|_| Nop)) {
                result?;
                done += 1;
            }
        }
        Ok(done)
    }
}

/// Spawns `count` processes (made by `make`) running `entry` with `input` from
/// outside; sums their `u64` results.
pub fn spawn_and_sum<P: IntoProcess, I: wsched::IntoPayloads>(
    workers: usize,
    count: usize,
    make: impl Fn() -> P,
    entry: &str,
    input: impl Fn() -> I,
) -> Result<(u64, Measured), String> {
    let s = scheduler(workers);
    let clock = Stopwatch::start();
    let pids = (0..count)
        .map(|_| s.spawn(make(), entry, input()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let sum = wait_sum(&s, pids)?;
    let m = clock.stop();
    finish(s)?;
    Ok((sum, m))
}

// ---------------------------------------------------------------- ring

/// A ring node: learns its successor, then forwards the token `laps` times (the first
/// node receives it once more, from outside, and returns the last value instead of
/// forwarding it).
pub struct RingNode;

#[process]
impl RingNode {
    #[entry]
    fn run(&mut self, laps: u64, first: bool) -> Result<u64, BoxError> {
        let next = recv!(Pid)?;
        let receives = if first { laps + 1 } else { laps };
        let mut last = 0;
        for lap in 0..receives {
            last = recv!(u64)?;
            if !(first && lap == laps) {
                this::send(next, last + 1)?;
            }
        }
        Ok(last)
    }
}

/// Returns the sum of every node's last token.
pub fn ring(workers: usize, nodes: usize, laps: u64) -> Result<(u64, Measured), String> {
    let s = scheduler(workers);
    let clock = Stopwatch::start();
    let pids = (0..nodes)
        .map(|i| s.spawn(RingNode, "run", (laps, i == 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    for (i, &pid) in pids.iter().enumerate() {
        s.send(pid, pids[(i + 1) % nodes]).map_err(err)?;
    }
    s.send(pids[0], 0_u64).map_err(err)?;
    let sum = wait_sum(&s, pids)?;
    let m = clock.stop();
    finish(s)?;
    Ok((sum, m))
}

// ---------------------------------------------------------------- fan-out / fan-in

/// Spawns `workers` `FanWorker`s, then for each round sends every worker the round
/// number and receives all their answers; returns the sum of the answers.
pub struct Coordinator;

#[process]
impl Coordinator {
    #[entry]
    fn run(&mut self, workers: u64, rounds: u64) -> Result<u64, BoxError> {
        let me = this::pid();
        let mut pids = Vec::with_capacity(workers as usize);
        for index in 0..workers {
            pids.push(this::spawn_detached(FanWorker, "run", (me, index))?);
        }
        let mut sum = 0;
        for round in 0..rounds {
            for &worker in &pids {
                this::send(worker, round)?;
            }
            for _ in 0..workers {
                sum += recv!(u64)?;
            }
        }
        for &worker in &pids {
            this::send(worker, u64::MAX)?;
        }
        Ok(sum)
    }
}

/// Answers round `r` with `r + index` until it receives `u64::MAX`.
pub struct FanWorker;

#[process]
impl FanWorker {
    #[entry]
    fn run(&mut self, coordinator: Pid, index: u64) -> Result<(), BoxError> {
        loop {
            let round = recv!(u64)?;
            if round == u64::MAX {
                return Ok(());
            }
            this::send(coordinator, round + index)?;
        }
    }
}

pub fn fan_out_in(workers: usize, fan: u64, rounds: u64) -> Result<(u64, Measured), String> {
    let s = scheduler(workers);
    let clock = Stopwatch::start();
    let pid = s.spawn(Coordinator, "run", (fan, rounds)).map_err(err)?;
    let sum = wait::<u64>(&s, pid)?;
    let m = clock.stop();
    finish(s)?;
    Ok((sum, m))
}

// ---------------------------------------------------------------- wake-up latency

/// Receives `samples` `Instant`s sent from outside and records how long each took to
/// reach it; acknowledges each through `ack`.
pub struct LatencySink {
    pub ack: Arc<AtomicUsize>,
}

#[process]
impl LatencySink {
    #[entry]
    fn run(&mut self, samples: u64) -> Result<Vec<u64>, BoxError> {
        let mut latencies = Vec::with_capacity(samples as usize);
        for _ in 0..samples {
            let sent = recv!(Instant)?;
            latencies.push(sent.elapsed().as_nanos() as u64);
            self.ack.fetch_add(1, Ordering::Release);
        }
        Ok(latencies)
    }
}

// ---------------------------------------------------------------- idle processes

/// Waits in `recv!` for one `u64`, which it hands to [`crate::memory::received`].
pub struct IdleProc;

#[process]
impl IdleProc {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        crate::memory::started();
        let value = recv!(u64)?;
        crate::memory::received(value);
        Ok(())
    }
}
