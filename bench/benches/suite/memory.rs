//! Memory per idle process: `n` processes (tasks) that wait for a message, resident
//! memory after minus before, divided by `n`.
//!
//! Each measurement runs in a fresh child process (this bench binary re-executed
//! with `--child-memory FORM N`), so memory freed by earlier workloads and kept by the
//! allocator cannot hide the growth. The child builds the runtime and a
//! `Vec::with_capacity(n)` of handles first (8 bytes each: a `Pid`, an
//! `UnboundedSender` or a ractor `ActorRef`; a kameo `ActorRef` is 24), reads `VmRSS`,
//! spawns the `n` idle processes (actors) from outside,
//! waits until every one has started and is waiting, reads `VmRSS` again; then sends
//! each one its index, checks that all of them received (count and sum) and shuts
//! down.

use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{channel, unbounded_channel};

use crate::harness::{check, fmt_secs, Report};
use crate::sys::rss_bytes;
use crate::{kameo_side, ractor_side, tokio_side, wsched_hand, wsched_side};

static STARTED: AtomicUsize = AtomicUsize::new(0);
static RECEIVED: AtomicUsize = AtomicUsize::new(0);
static SUM: AtomicU64 = AtomicU64::new(0);

/// Called by an idle process when it starts (before it waits).
pub fn started() {
    STARTED.fetch_add(1, Ordering::Relaxed);
}

/// Called by an idle process with the value it received.
pub fn received(value: u64) {
    SUM.fetch_add(value, Ordering::Relaxed);
    RECEIVED.fetch_add(1, Ordering::Release);
}

fn wait_for(counter: &AtomicUsize, n: usize, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + wsched_side::WAIT;
    while counter.load(Ordering::Acquire) < n {
        if Instant::now() > deadline {
            return Err(format!(
                "{what}: {} of {n} after {:?}",
                counter.load(Ordering::Acquire),
                wsched_side::WAIT
            ));
        }
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// The forms measured: (argument, label). The first is what the others are divided
/// by; the actor frameworks' forms are left out by `--no-peers`.
const FORMS: &[(&str, &str)] = &[
    ("tokio", "tokio task in `mpsc::UnboundedReceiver::recv`"),
    (
        "tokio-bounded",
        "tokio task in `mpsc::Receiver::recv` (bounded, capacity 1)",
    ),
    ("process", "`#[process]` in `recv!()`"),
    ("hand", "hand-written `Process` waiting for a message"),
    ("ractor", "ractor actor waiting in its mailbox"),
    ("kameo", "kameo actor waiting in its (unbounded) mailbox"),
];

/// The actor frameworks' forms.
const FRAMEWORKS: &[&str] = &["ractor", "kameo"];

/// The child's side: measures one form at one count and prints one line.
pub fn child(form: &str, n: usize, workers: usize) -> Result<(), String> {
    let expected_sum = (n as u64) * (n as u64 - 1) / 2;
    let (before, after, spawn_time) = match form {
        "process" | "hand" => {
            let s = wsched_side::scheduler(workers);
            let mut pids = Vec::with_capacity(n);
            let before = rss_bytes();
            let started = Instant::now();
            for _ in 0..n {
                let pid = if form == "hand" {
                    s.spawn_detached(wsched_hand::HandIdle::default(), "run", ())
                } else {
                    s.spawn_detached(wsched_side::IdleProc, "run", ())
                };
                pids.push(pid.map_err(|e| e.to_string())?);
            }
            wait_for(&STARTED, n, "processes started")?;
            let spawn_time = started.elapsed();
            let after = rss_bytes();
            for (i, &pid) in pids.iter().enumerate() {
                s.send(pid, i as u64).map_err(|e| e.to_string())?;
            }
            wait_for(&RECEIVED, n, "processes that received")?;
            wsched_side::finish(s)?;
            (before, after, spawn_time)
        }
        "tokio" | "tokio-bounded" => {
            let rt = tokio_side::runtime(workers);
            let mut unbounded = Vec::new();
            let mut bounded = Vec::new();
            if form == "tokio" {
                unbounded.reserve(n);
            } else {
                bounded.reserve(n);
            }
            let before = rss_bytes();
            let started = Instant::now();
            for _ in 0..n {
                if form == "tokio" {
                    let (tx, rx) = unbounded_channel::<u64>();
                    drop(rt.spawn(tokio_side::idle_task(rx)));
                    unbounded.push(tx);
                } else {
                    let (tx, rx) = channel::<u64>(1);
                    drop(rt.spawn(tokio_side::idle_task_bounded(rx)));
                    bounded.push(tx);
                }
            }
            wait_for(&STARTED, n, "tasks started")?;
            let spawn_time = started.elapsed();
            let after = rss_bytes();
            for (i, tx) in unbounded.iter().enumerate() {
                tx.send(i as u64).map_err(|e| e.to_string())?;
            }
            for (i, tx) in bounded.iter().enumerate() {
                tx.try_send(i as u64).map_err(|e| e.to_string())?;
            }
            wait_for(&RECEIVED, n, "tasks that received")?;
            drop(rt);
            (before, after, spawn_time)
        }
        "ractor" => {
            let rt = tokio_side::runtime(workers);
            let mut actors = Vec::with_capacity(n);
            let before = rss_bytes();
            let started = Instant::now();
            rt.block_on(async {
                for _ in 0..n {
                    let (actor, _) = ractor::Actor::spawn(None, ractor_side::Idle, ())
                        .await
                        .map_err(|e| e.to_string())?;
                    actors.push(actor);
                }
                Ok::<_, String>(())
            })?;
            wait_for(&STARTED, n, "actors started")?;
            let spawn_time = started.elapsed();
            let after = rss_bytes();
            for (i, actor) in actors.iter().enumerate() {
                actor.cast(i as u64).map_err(|e| e.to_string())?;
            }
            wait_for(&RECEIVED, n, "actors that received")?;
            drop(rt);
            (before, after, spawn_time)
        }
        "kameo" => {
            let rt = tokio_side::runtime(workers);
            let mut actors = Vec::with_capacity(n);
            let before = rss_bytes();
            let started = Instant::now();
            {
                let _context = rt.enter();
                for _ in 0..n {
                    actors.push(kameo_side::spawn_idle());
                }
            }
            wait_for(&STARTED, n, "actors started")?;
            let spawn_time = started.elapsed();
            let after = rss_bytes();
            for (i, actor) in actors.iter().enumerate() {
                actor.tell(i as u64).try_send().map_err(|e| e.to_string())?;
            }
            wait_for(&RECEIVED, n, "actors that received")?;
            drop(rt);
            (before, after, spawn_time)
        }
        other => return Err(format!("unknown form {other}")),
    };
    check("sum received", SUM.load(Ordering::Acquire), expected_sum)?;
    println!(
        "memory-child bytes={} spawn_secs={}",
        after.saturating_sub(before),
        spawn_time.as_secs_f64()
    );
    Ok(())
}

struct Measurement {
    bytes_per_process: f64,
    spawn_secs: f64,
}

fn measure(form: &str, n: usize, workers: usize) -> Result<Measurement, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = Command::new(exe)
        .args(["--child-memory", form, &n.to_string(), "--workers"])
        .arg(workers.to_string())
        .output()
        .map_err(|e| format!("starting the child: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "child {form} {n} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("memory-child "))
        .ok_or_else(|| format!("child {form} {n} printed no result"))?;
    let field = |name: &str| -> Result<f64, String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("child {form} {n}: no {name} in {line:?}"))
    };
    Ok(Measurement {
        bytes_per_process: field("bytes")? / n as f64,
        spawn_secs: field("spawn_secs")?,
    })
}

fn count_label(n: usize) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

pub fn run(report: &mut Report, counts: &[usize], workers: usize, frameworks: bool) {
    eprint!("{:<24} ", "memory_idle");
    let started = Instant::now();
    let forms: Vec<(&str, &str)> = FORMS
        .iter()
        .copied()
        .filter(|(form, _)| frameworks || !FRAMEWORKS.contains(form))
        .collect();
    let mut table: Vec<Vec<Measurement>> = forms.iter().map(|_| Vec::new()).collect();
    for &n in counts {
        for (f, (form, _)) in forms.iter().enumerate() {
            match measure(form, n, workers) {
                Ok(m) => table[f].push(m),
                Err(e) => {
                    eprintln!();
                    report.fail("memory_idle", &e);
                    return;
                }
            }
            eprint!(".");
        }
    }
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());

    let mut md = String::from(
        "**Memory per idle process** (RSS delta ÷ count, fresh child process each)\n\n| form |",
    );
    for &n in counts {
        md += &format!(
            " {0}: bytes each | {0}: ÷ tokio | {0}: spawn until all idle |",
            count_label(n)
        );
    }
    md += "\n|---|";
    md += &"---|---|---|".repeat(counts.len());
    for (f, (_, label)) in forms.iter().enumerate() {
        md += &format!("\n| {label} |");
        for (i, m) in table[f].iter().enumerate() {
            let ratio = m.bytes_per_process / table[0][i].bytes_per_process;
            md += &format!(
                " {:.0} | {:.2} | {} |",
                m.bytes_per_process,
                ratio,
                fmt_secs(m.spawn_secs)
            );
        }
    }
    // The `#[process]` form against the smaller of the actor frameworks.
    let index = |form: &str| forms.iter().position(|(f, _)| *f == form);
    if let Some(process) = index("process") {
        for (i, &n) in counts.iter().enumerate() {
            let smallest = FRAMEWORKS
                .iter()
                .filter_map(|form| index(form).map(|f| (*form, table[f][i].bytes_per_process)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((form, bytes)) = smallest {
                md += &format!(
                    "\n\nAt {}: `#[process]` ÷ the smaller of ractor and kameo ({form}): **{:.2}**.",
                    count_label(n),
                    table[process][i].bytes_per_process / bytes
                );
            }
        }
    }
    report.section(md);
}
