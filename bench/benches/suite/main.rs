//! The side-by-side benchmark suite (issue 8): every workload for wsched and for its
//! fairest tokio (or crossbeam-deque) equivalent, and where they have one for the
//! actor frameworks ractor and kameo, Erlang and Go, on the same number of workers,
//! interleaved, with every result checked. See `BENCHMARKS.md` at the repository root.
//!
//! ```text
//! cargo bench -p wsched-bench --bench suite -- [--workers N] [--reps N] [--only A,B] [--quick]
//!     [--no-peers] [--list] [--compare-commit REV] [--contended]
//! ```
//!
//! `--features sim` adds `sim_steps` (a separate build: see `bench/Cargo.toml`);
//! `--features cluster` adds `cluster_rtt` and `cluster_throughput`.
//!
//! | module | concern |
//! |---|---|
//! | `harness` | interleaved repetitions, statistics, the report |
//! | `sys` | process CPU time (`getrusage`) and resident memory |
//! | `workloads` | the catalogue: sizes, variants, expected results |
//! | `wsched_side` | the `#[process]` forms |
//! | `wsched_hand` | the hand-written `Process` forms |
//! | `tokio_side` | the tokio peers |
//! | `ractor_side` | the ractor peers |
//! | `kameo_side` | the kameo peers |
//! | `external` | the Erlang and Go peers (child processes) |
//! | `compare` | `--compare-commit`: this tree's wsched against another commit's |
//! | `contend` | `--contended`: one core kept busy by a spinning child process |
//! | `latch` | the count-down both sides signal completion with |
//! | `deque` | our per-worker deque against crossbeam-deque |
//! | `memory` | memory per idle process (in child processes) |
//! | `latency` | wake-up latency and idle CPU |
//! | `async_io` | an async handler's round trip (the `tokio` feature) |
//! | `tcp_echo` | a 1,000-connection echo over loopback |
//! | `timers` | sleepers' lateness under a burst, against `tokio::time::sleep` |
//! | `sim` | the simulated scheduler's steps per second (`--features sim`) |
//! | `cluster` | two nodes over NATS against bare NATS and Erlang (`--features cluster`) |

mod async_io;
#[cfg(feature = "cluster")]
mod cluster;
mod compare;
mod contend;
mod deque;
mod external;
mod harness;
mod kameo_side;
mod latch;
mod latency;
mod memory;
mod ractor_side;
#[cfg(feature = "sim")]
mod sim;
mod sys;
mod tcp_echo;
mod timers;
mod tokio_side;
mod workloads;
mod wsched_hand;
mod wsched_side;

use std::process::ExitCode;
use std::time::Instant;

use external::Tools;
use harness::Report;
use workloads::{Peers, Sizes, NAMES};

struct Options {
    workers: usize,
    reps: usize,
    only: Option<Vec<String>>,
    quick: bool,
    /// `--no-peers`: no ractor, kameo, Erlang or Go (the baselines still run).
    no_peers: bool,
    /// `--compare-commit REV`.
    compare: Option<String>,
    /// `--single NAME --variant I` (what `--compare-commit` runs in each build).
    single: Option<(String, usize)>,
    /// `--contended`: one core kept busy by another process throughout.
    contended: bool,
}

const USAGE: &str = "usage: cargo bench -p wsched-bench --bench suite -- \
[--workers N (default 2)] [--reps N (default 10, at least 10 unless --quick; six times that for workloads with a target or short repetitions)] \
[--only NAME[,NAME...]] [--quick] [--no-peers] [--list] [--compare-commit REV] [--contended]";

fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut options = Options {
        workers: 2,
        reps: 0,
        only: None,
        quick: false,
        no_peers: false,
        compare: None,
        single: None,
        contended: false,
    };
    let mut variant = None;
    let mut args = args.iter();
    let number = |value: Option<&String>, flag: &str| -> Result<usize, String> {
        value
            .ok_or_else(|| format!("{flag} needs a value"))?
            .parse::<usize>()
            .map_err(|e| format!("{flag}: {e}"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // `cargo bench` passes `--bench` to harness-less targets.
            "--bench" => {}
            "--workers" => options.workers = number(args.next(), "--workers")?,
            "--reps" => options.reps = number(args.next(), "--reps")?,
            "--only" => {
                let list = args.next().ok_or("--only needs a value")?;
                let names: Vec<String> = list.split(',').map(|s| s.trim().to_owned()).collect();
                for name in &names {
                    if !NAMES.contains(&name.as_str()) {
                        return Err(format!(
                            "unknown workload `{name}`; the workloads are: {}",
                            NAMES.join(", ")
                        ));
                    }
                }
                #[cfg(not(feature = "sim"))]
                if names.iter().any(|n| n == "sim_steps") {
                    return Err("sim_steps needs the bench crate's `sim` feature: \
                                cargo bench -p wsched-bench --features sim --bench suite"
                        .into());
                }
                options.only = Some(names);
            }
            "--quick" => options.quick = true,
            "--no-peers" => options.no_peers = true,
            "--contended" => options.contended = true,
            "--compare-commit" => {
                let rev = args.next().ok_or("--compare-commit needs a commit")?;
                options.compare = Some(rev.clone());
            }
            "--single" => {
                let name = args.next().ok_or("--single needs a workload")?;
                options.single = Some((name.clone(), 1));
            }
            "--variant" => variant = Some(number(args.next(), "--variant")?),
            "--list" => {
                for name in NAMES {
                    println!("{name}");
                }
                return Ok(None);
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if options.workers == 0 {
        return Err("--workers must be at least 1".into());
    }
    if let (Some((_, index)), Some(v)) = (&mut options.single, variant) {
        *index = v;
    }
    if options.reps == 0 {
        options.reps = if options.quick { 2 } else { 10 };
    }
    if options.reps < 10 && !options.quick {
        return Err("--reps must be at least 10 (or pass --quick)".into());
    }
    Ok(Some(options))
}

/// `--child-memory FORM N --workers W`: one memory measurement (see `memory.rs`).
fn child(args: &[String]) -> ExitCode {
    let (Some(form), Some(n), Some(workers)) = (
        args.get(1),
        args.get(2).and_then(|n| n.parse::<usize>().ok()),
        args.get(4).and_then(|w| w.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: --child-memory FORM N --workers W");
        return ExitCode::from(2);
    };
    match memory::child(form, n, workers) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child-memory") {
        return child(&args);
    }
    if args.first().map(String::as_str) == Some("--spin") {
        contend::spin(args.get(1).and_then(|cpu| cpu.parse().ok()));
    }
    let options = match parse(&args) {
        Ok(Some(options)) => options,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let sizes = if options.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    if let Some((name, variant)) = &options.single {
        return match compare::single(name, *variant, options.workers, &sizes) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    // Held to the end of `main` (and dropped on a panic): kills the spinner.
    let contention = if options.contended {
        match contend::Contention::start() {
            Ok(contention) => Some(contention),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    if let Some(rev) = &options.compare {
        let request = compare::Request {
            rev,
            only: options.only.as_deref(),
            workers: options.workers,
            reps: options.reps,
            quick: options.quick,
        };
        let compared = compare::compare(&request);
        if let Some(contention) = &contention {
            println!("\n{}.", contention.describe());
        }
        return match compared {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                println!("\n{e}");
                ExitCode::FAILURE
            }
        };
    }
    let selected = |name: &str| {
        options
            .only
            .as_ref()
            .is_none_or(|only| only.iter().any(|n| n == name))
    };
    let w = options.workers;
    eprintln!(
        "wsched benchmark suite: {w} workers, {} repetitions (interleaved; {} for \
         workloads with a target or repetitions under 10 ms), {} sizes{}",
        options.reps,
        harness::target_reps(options.reps),
        if options.quick { "quick" } else { "full" },
        if options.contended {
            ", contended (one core kept busy by a spinning process)"
        } else {
            ""
        }
    );

    let peers = if options.no_peers {
        Peers::none()
    } else {
        Peers {
            frameworks: true,
            tools: Tools::find(),
        }
    };
    if ["skynet", "ping_pong", "ring"].iter().any(|n| selected(n)) {
        peers.tools.announce();
    }

    let load_before = sys::load_average();
    eprintln!("machine: {}; load average {load_before}", sys::machine());
    let started = Instant::now();
    let mut report = Report::default();
    for &name in NAMES {
        if !selected(name) {
            continue;
        }
        if let Some(workload) = workloads::workload(name, w, &sizes, &peers) {
            let reps = workload.reps(options.reps);
            let outcome = harness::run(workload, reps);
            report.add(&outcome);
            continue;
        }
        match name {
            "memory_idle" => memory::run(&mut report, &sizes.memory, w, peers.frameworks),
            "wakeup_latency" => {
                latency::wakeup(&mut report, w, sizes.latency_samples, options.reps)
            }
            "idle_cpu" => latency::idle_cpu(&mut report, w, sizes.idle),
            // A target (p99 no worse than tokio's): as many repetitions as the
            // other workloads with one.
            "timer_burst" | "timer_repeat" => timers::run(
                &mut report,
                w,
                timers::case(name, options.quick),
                harness::target_reps(options.reps),
            ),
            "async_yield" => {
                async_io::async_yield(&mut report, w, sizes.async_yield_trips, options.reps)
            }
            "tcp_echo" => tcp_echo::tcp_echo(
                &mut report,
                w,
                sizes.tcp_conns,
                sizes.tcp_rounds,
                options.reps,
            ),
            #[cfg(feature = "sim")]
            "sim_steps" => sim::sim_steps(
                &mut report,
                sizes.sim_rounds,
                sizes.sim_leaves,
                options.reps,
            ),
            #[cfg(not(feature = "sim"))]
            "sim_steps" => eprintln!("{name:<24} skipped (needs `--features sim`)"),
            #[cfg(feature = "cluster")]
            "cluster_rtt" | "cluster_throughput" => {
                let case = cluster::Case::new(w, options.reps, options.quick, !options.no_peers);
                match name {
                    "cluster_rtt" => cluster::cluster_rtt(&mut report, &case),
                    _ => cluster::cluster_throughput(&mut report, &case),
                }
            }
            #[cfg(not(feature = "cluster"))]
            "cluster_rtt" | "cluster_throughput" => {
                eprintln!("{name:<24} skipped (needs `--features cluster`)")
            }
            other => unreachable!("workload {other} has no runner"),
        }
    }
    let elapsed = started.elapsed();

    println!(
        "\n## Results ({w} workers, {} repetitions, {} for workloads with a target or \
         repetitions under 10 ms{})\n",
        options.reps,
        harness::target_reps(options.reps),
        if options.contended { ", contended" } else { "" }
    );
    println!(
        "Machine: {}. Load average (1, 5, 15 min) before: {load_before}; after: {}.\n",
        sys::machine(),
        sys::load_average()
    );
    if let Some(contention) = &contention {
        println!("{}.\n", contention.describe());
    }
    print!("{}", report.render());
    println!("\nThe suite took {:.1} s.", elapsed.as_secs_f64());
    if report.failures.is_empty() {
        println!("Every result checked out.");
        ExitCode::SUCCESS
    } else {
        println!("\n{} FAILED:", report.failures.len());
        for failure in &report.failures {
            println!("- {failure}");
        }
        ExitCode::FAILURE
    }
}
