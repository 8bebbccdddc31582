//! Async I/O (issue 23): what an async handler's round trip costs.
//!
//! **async_yield**: one process yields `n` commands, one after the other, each
//! performed by an async handler whose future is ready at once
//! (`async move { Ok(x) }`): each round trip is the worker handing the future to the
//! I/O runtime (a tokio runtime the scheduler owns), a tokio thread running it, and
//! the completion waking the process on a worker. Its peer is the same hand-off done
//! by hand with tokio alone, driven from the bench thread (not a runtime thread):
//! `handle.spawn(async move { tx.send(x) })` then `rx.blocking_recv()` on a
//! `oneshot`, `n` times. Both are two cross-thread hand-offs per round trip, and both
//! go through the same kind of tokio runtime (multi-threaded, I/O and time drivers
//! on, as the scheduler builds its own): what the wsched side adds is what a yield,
//! the bookkeeping of work in flight and a process wake-up cost on top.
//!
//! The report adds, below the usual row, a table of the time per round trip.

use std::convert::Infallible;
use std::sync::Arc;

use tokio::sync::oneshot;
use wsched::prelude::*;
use wsched::Scheduler;

use crate::harness::{self, check, fmt_secs, Measured, Report, Stopwatch, Variant};
use crate::wsched_side::{finish, wait};

/// A command an async handler answers at once, with its own number.
pub struct Echo(pub u64);

impl Command for Echo {
    type Output = u64;
}

/// Yields `n` `Echo`s one after the other and sums the answers.
pub struct AsyncAsker;

#[process]
impl AsyncAsker {
    #[entry]
    fn run(&mut self, n: u64) -> Result<u64, BoxError> {
        let mut sum = 0;
        for i in 0..n {
            sum += yield_cmd!(Echo(i))?;
        }
        Ok(sum)
    }
}

/// A scheduler with `workers` workers, `io_threads` I/O threads and the `Echo`
/// handler, its I/O runtime already started (by one untimed round trip: the
/// scheduler builds it with the first future).
fn async_scheduler(workers: usize, io_threads: usize) -> Result<Scheduler, String> {
    let s = Scheduler::builder()
        .workers(workers)
        .io_threads(io_threads)
        .async_handler(|Echo(x): Echo| async move { Ok::<_, Infallible>(x) })
        .build()
        .map_err(|e| e.to_string())?;
    let pid = s
        .spawn(AsyncAsker, AsyncAsker::RUN, (1,))
        .map_err(|e| e.to_string())?;
    wait::<u64>(&s, pid)?;
    Ok(s)
}

/// `n` async yields by one process.
pub fn wsched_round_trips(
    workers: usize,
    io_threads: usize,
    n: u64,
) -> Result<(u64, Measured), String> {
    let s = async_scheduler(workers, io_threads)?;
    let clock = Stopwatch::start();
    let pid = s
        .spawn(AsyncAsker, AsyncAsker::RUN, (n,))
        .map_err(|e| e.to_string())?;
    let sum = wait::<u64>(&s, pid)?;
    let m = clock.stop();
    finish(s)?;
    Ok((sum, m))
}

/// The tokio runtime of the peer, as the scheduler builds its I/O runtime: one
/// thread is a current-thread runtime driven by a thread of its own (stopped when
/// the returned sender is dropped), more a multi-threaded one.
fn io_runtime(threads: usize) -> (Arc<tokio::runtime::Runtime>, Option<oneshot::Sender<()>>) {
    if threads > 1 {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .expect("the runtime starts");
        return (Arc::new(rt), None);
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the runtime starts"),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let driver = rt.clone();
    std::thread::spawn(move || {
        let _ = driver.block_on(stopped);
    });
    (rt, Some(stop))
}

/// One spawn + `oneshot` round trip from the bench thread.
fn tokio_round_trip(handle: &tokio::runtime::Handle, x: u64) -> Result<u64, String> {
    let (tx, rx) = oneshot::channel();
    drop(handle.spawn(async move {
        let _ = tx.send(x);
    }));
    rx.blocking_recv().map_err(|e| e.to_string())
}

/// `n` spawn + `oneshot` round trips driven from the bench thread.
pub fn tokio_round_trips(threads: usize, n: u64) -> Result<(u64, Measured), String> {
    let (rt, stop) = io_runtime(threads);
    let handle = rt.handle().clone();
    // Untimed, as the wsched side's first round trip.
    tokio_round_trip(&handle, 0)?;
    let clock = Stopwatch::start();
    let mut sum = 0;
    for i in 0..n {
        sum += tokio_round_trip(&handle, i)?;
    }
    let m = clock.stop();
    drop(stop);
    drop(rt);
    Ok((sum, m))
}

/// The I/O threads of the pairs compared: the scheduler's default (one), then two.
fn io_thread_counts() -> Vec<usize> {
    vec![1, 2]
}

/// Runs `async_yield`: for each I/O thread count, tokio on that many threads then
/// wsched with that many I/O threads (and `workers` workers); the usual rows (every
/// variant against the first), each pair's own ratio, then the time per round trip.
pub fn async_yield(report: &mut Report, workers: usize, n: u64, reps: usize) {
    let sum = n * n.saturating_sub(1) / 2;
    let expect = move |run: Box<dyn Fn() -> Result<(u64, Measured), String>>| {
        move || {
            let (got, measured) = run()?;
            check("result", got, sum)?;
            Ok(measured)
        }
    };
    let counts = io_thread_counts();
    let labels: &[[&'static str; 2]] = &[
        ["tokio, 2 threads", "#[process], 2 I/O threads"],
        ["tokio, 1 thread", "#[process], 1 I/O thread"],
    ];
    let mut variants = Vec::new();
    let mut comparisons = Vec::new();
    for &io in &counts {
        let [tokio_label, wsched_label] = labels[if io == 1 { 1 } else { 0 }];
        if !variants.is_empty() {
            comparisons.push(harness::Comparison {
                a: variants.len() + 1,
                b: variants.len(),
                what: "async yield vs spawn + oneshot, same I/O threads",
                target: None,
            });
        }
        variants.push(Variant::new(
            tokio_label,
            expect(Box::new(move || tokio_round_trips(io, n))),
        ));
        variants.push(Variant::new(
            wsched_label,
            expect(Box::new(move || wsched_round_trips(workers, io, n))),
        ));
    }
    let workload = harness::Workload {
        name: "async_yield",
        variants,
        comparisons,
        skipped: Vec::new(),
    };
    let outcome = harness::run(workload, reps);
    report.add(&outcome);
    if outcome.error.is_some() {
        return;
    }
    let mut md = format!(
        "**Async round trip**, a process's `yield_cmd!` of a command an async handler \
         answers at once, against tokio's `spawn` + `oneshot` from the bench thread \
         ({n} round trips a run, {reps} runs interleaved; wsched with {workers} worker{}; \
         the tokio runtimes with their drivers on, as the scheduler's own)\n\n\
         | I/O threads | tokio per round trip | wsched per round trip | wsched ÷ tokio (median of per-rep) | min–max |\n\
         |---|---|---|---|---|",
        if workers == 1 { "" } else { "s" }
    );
    for (pair, io) in counts.iter().enumerate() {
        let (peer, form) = (2 * pair, 2 * pair + 1);
        let r = outcome.row(form, peer);
        md += &format!(
            "\n| {io} | {} | {} | **{:.2}** | {:.2}–{:.2} |",
            fmt_secs(r.base_median / n as f64),
            fmt_secs(r.median / n as f64),
            r.ratio,
            r.ratio_min,
            r.ratio_max,
        );
    }
    report.section(md);
}
