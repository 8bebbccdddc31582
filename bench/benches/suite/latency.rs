//! Wake-up latency and idle CPU.
//!
//! **Wake-up latency**: one process (task) waits for a message; the bench thread
//! sends it the current `Instant` and the process records, as soon as it runs, how
//! long that took. The bench thread then waits for its acknowledgement and pauses
//! `PAUSE`, long enough for every worker to go idle (spin, yield, park), so each
//! sample is a wake-up of an idle runtime by an outside event. The samples are taken
//! in blocks, one fresh runtime per block, the forms interleaved block by block
//! (forward, then backward); p50 and p99 are over all samples of a form.
//!
//! **Idle CPU**: a runtime that has run one process to completion is left alone for
//! the idle window; the CPU time the whole process used meanwhile is what the
//! runtime's threads burn doing nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::unbounded_channel;

use crate::harness::{check, fmt_secs, percentile, Report};
use crate::sys::cpu_time;
use crate::{tokio_side, wsched_hand, wsched_side};

const PAUSE: Duration = Duration::from_micros(200);

/// Sends `samples` `Instant`s through `send`, one at a time, each after the previous
/// one was acknowledged and a pause.
fn drive(
    samples: usize,
    ack: &AtomicUsize,
    send: impl Fn(Instant) -> Result<(), String>,
) -> Result<(), String> {
    for i in 0..samples {
        thread::sleep(PAUSE);
        send(Instant::now())?;
        let deadline = Instant::now() + wsched_side::WAIT;
        while ack.load(Ordering::Acquire) <= i {
            if Instant::now() > deadline {
                return Err(format!("sample {i} was never received"));
            }
            thread::sleep(Duration::from_micros(20));
        }
    }
    Ok(())
}

const FORMS: &[&str] = &["tokio", "#[process]", "hand-written"];

fn block(form: usize, workers: usize, samples: usize) -> Result<Vec<u64>, String> {
    let ack = Arc::new(AtomicUsize::new(0));
    let n = samples as u64;
    let latencies = match FORMS[form] {
        "tokio" => {
            let rt = tokio_side::runtime(workers);
            let (tx, rx) = unbounded_channel::<Instant>();
            let sink = rt.spawn(tokio_side::latency_sink(rx, ack.clone(), n));
            drive(samples, &ack, |t| tx.send(t).map_err(|e| e.to_string()))?;
            rt.block_on(sink).map_err(|e| e.to_string())?
        }
        "#[process]" => {
            let s = wsched_side::scheduler(workers);
            let sink = wsched_side::LatencySink { ack: ack.clone() };
            let pid = s.spawn(sink, "run", (n,)).map_err(|e| e.to_string())?;
            drive(samples, &ack, |t| s.send(pid, t).map_err(|e| e.to_string()))?;
            let latencies = wsched_side::wait::<Vec<u64>>(&s, pid)?;
            wsched_side::finish(s)?;
            latencies
        }
        _ => {
            let s = wsched_side::scheduler(workers);
            let sink = wsched_hand::HandLatencySink {
                ack: ack.clone(),
                latencies: Vec::new(),
                samples: 0,
            };
            let pid = s.spawn(sink, "run", (n,)).map_err(|e| e.to_string())?;
            drive(samples, &ack, |t| s.send(pid, t).map_err(|e| e.to_string()))?;
            let latencies = wsched_side::wait::<Vec<u64>>(&s, pid)?;
            wsched_side::finish(s)?;
            latencies
        }
    };
    check("samples recorded", latencies.len(), samples)?;
    Ok(latencies)
}

pub fn wakeup(report: &mut Report, workers: usize, samples: usize, blocks: usize) {
    eprint!("{:<24} ", "wakeup_latency");
    let started = Instant::now();
    let per_block = samples.div_ceil(blocks).max(1);
    let mut pooled: Vec<Vec<f64>> = FORMS.iter().map(|_| Vec::new()).collect();
    for b in 0..blocks {
        let order: Vec<usize> = if b % 2 == 0 {
            (0..FORMS.len()).collect()
        } else {
            (0..FORMS.len()).rev().collect()
        };
        for form in order {
            match block(form, workers, per_block) {
                Ok(l) => pooled[form].extend(l.into_iter().map(|ns| ns as f64 * 1e-9)),
                Err(e) => {
                    eprintln!();
                    report.fail("wakeup_latency", &format!("{}: {e}", FORMS[form]));
                    return;
                }
            }
        }
        eprint!(".");
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
    for p in &mut pooled {
        p.sort_by(f64::total_cmp);
    }
    let (t50, t99) = (percentile(&pooled[0], 50.0), percentile(&pooled[0], 99.0));
    let mut md = format!(
        "**Wake-up latency**, outside send → the process runs ({} samples per form, {} blocks, {} pause)\n\n\
         | form | p50 | p99 | p50 ÷ tokio | p99 ÷ tokio |\n|---|---|---|---|---|",
        pooled[0].len(),
        blocks,
        fmt_secs(PAUSE.as_secs_f64()),
    );
    for (f, name) in FORMS.iter().enumerate() {
        let (p50, p99) = (percentile(&pooled[f], 50.0), percentile(&pooled[f], 99.0));
        md += &format!(
            "\n| {name} | {} | {} | {:.2} | {:.2} |",
            fmt_secs(p50),
            fmt_secs(p99),
            p50 / t50,
            p99 / t99
        );
    }
    report.section(md);
}

/// CPU used by a runtime left idle for `window`, after one process ran on it.
fn idle_cpu_of(form: &str, workers: usize, window: Duration) -> Result<Duration, String> {
    let settle = Duration::from_millis(50);
    match form {
        "tokio" => {
            let rt = tokio_side::runtime(workers);
            rt.block_on(rt.spawn(async { 1_u64 }))
                .map_err(|e| e.to_string())?;
            thread::sleep(settle);
            let before = cpu_time();
            thread::sleep(window);
            let used = cpu_time().saturating_sub(before);
            drop(rt);
            Ok(used)
        }
        _ => {
            let s = wsched_side::scheduler(workers);
            let pid = s
                .spawn(wsched_side::Yielder, "run", (0_u32,))
                .map_err(|e| e.to_string())?;
            wsched_side::wait::<u64>(&s, pid)?;
            thread::sleep(settle);
            let before = cpu_time();
            thread::sleep(window);
            let used = cpu_time().saturating_sub(before);
            wsched_side::finish(s)?;
            Ok(used)
        }
    }
}

pub fn idle_cpu(report: &mut Report, workers: usize, window: Duration) {
    eprint!("{:<24} ", "idle_cpu");
    let started = Instant::now();
    let mut md = format!(
        "**Idle CPU**: a built runtime ({workers} workers) left idle for {}\n\n\
         | runtime | CPU time used | share of one core |\n|---|---|---|",
        fmt_secs(window.as_secs_f64())
    );
    for form in ["tokio", "wsched"] {
        match idle_cpu_of(form, workers, window) {
            Ok(used) => {
                md += &format!(
                    "\n| {form} | {} | {:.2} % |",
                    fmt_secs(used.as_secs_f64()),
                    100.0 * used.as_secs_f64() / window.as_secs_f64()
                );
            }
            Err(e) => {
                eprintln!();
                report.fail("idle_cpu", &format!("{form}: {e}"));
                return;
            }
        }
        eprint!(".");
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
    report.section(md);
}
