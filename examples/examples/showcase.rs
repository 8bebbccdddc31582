//! A tour of wsched: processes written as plain structs with `#[process]`, commands
//! answered by handlers (one of them blocking), timers, messages between processes,
//! spawning and joining, the live process listing, metrics and a graceful shutdown.
//!
//! `cargo run -p wsched-examples --example showcase`

use std::time::Duration;

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::Scheduler;

/// Fetch a page. Its handler blocks (it pretends to do network I/O), so it runs on
/// the blocking pool and the workers keep stepping other processes meanwhile.
struct Fetch {
    url: String,
}

impl Command for Fetch {
    type Output = String;
}

/// What a crawler reports to the collector when it is done.
struct Summary {
    site: String,
    bytes: usize,
}

/// Fetches every page of one site at once, then reports to the collector.
struct Crawler {
    collector: Pid,
}

#[process]
impl Crawler {
    #[entry]
    fn crawl(&mut self, site: String, pages: u32) -> Result<usize, BoxError> {
        // All fetches are outstanding together; completions come back in any order
        // and are matched to their yields by tag.
        let fetches = (0..pages).map(|i| Fetch {
            url: format!("https://{site}/page/{i}"),
        });
        let mut bytes = 0;
        for page in yield_all!(fetches) {
            bytes += page?.len();
        }
        // Be polite: pause before reporting.
        yield_cmd!(Sleep(Duration::from_millis(5)))?;
        this::send(self.collector, Summary { site, bytes })?;
        Ok(bytes)
    }
}

/// Collects summaries until it has `expected` of them, or ten seconds pass without
/// one (the crawlers report within milliseconds; the timeout only keeps a lost one
/// from hanging the program).
#[derive(Default)]
struct Collector {
    sites: Vec<(String, usize)>,
}

#[process]
impl Collector {
    #[entry]
    fn collect(&mut self, expected: usize) -> Vec<(String, usize)> {
        while self.sites.len() < expected {
            match recv!(Summary, timeout = Duration::from_secs(10)) {
                Ok(summary) => self.sites.push((summary.site, summary.bytes)),
                Err(RecvError::Timeout) => break,
                Err(other) => {
                    eprintln!("collector gives up: {other}");
                    break;
                }
            }
        }
        self.sites.sort();
        std::mem::take(&mut self.sites)
    }
}

// ANCHOR: coordinator
/// Spawns one crawler per site, joins them all, and sums their byte counts. (Not a
/// `wsched::supervisor::Supervisor`: it restarts nothing; it fans out and in.)
struct Coordinator;

#[process]
impl Coordinator {
    #[entry(name = "run")]
    fn supervise(&mut self, sites: Vec<String>, collector: Pid) -> Result<usize, BoxError> {
        let mut crawlers = Vec::new();
        for site in sites {
            crawlers.push(yield_cmd!(Spawn::new(
                Crawler { collector },
                "crawl",
                (site, 8_u32)
            ))?);
        }
        let mut total = 0;
        for result in yield_all!(crawlers.into_iter().map(Join)) {
            total += result??.downcast::<usize>()?;
        }
        Ok(total)
    }
}
// ANCHOR_END: coordinator

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder()
        .blocking_handler(|fetch: Fetch, done: Completer<Fetch>| {
            std::thread::sleep(Duration::from_millis(2)); // the "network"
            done.complete(format!("<html>{}</html>", fetch.url));
        })
        .build()?;

    let sites: Vec<String> = ["alpha.test", "beta.test", "gamma.test", "delta.test"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let collector = scheduler.spawn(Collector::default(), "collect", (sites.len(),))?;
    let coordinator = scheduler.spawn(Coordinator, "run", (sites, collector))?;

    // A listing: each process's label (type, entry and PID), where it is (queued, running, or
    // waiting and at which suspension point) and what waits in its mailbox.
    println!("live processes right after spawning (type::entry pid, state, mailbox):");
    for info in scheduler.processes() {
        println!("  {info}");
    }

    let total = scheduler.wait(coordinator)?.downcast::<usize>()?;
    let collected = scheduler
        .wait(collector)?
        .downcast::<Vec<(String, usize)>>()?;
    println!("\nthe coordinator's crawlers fetched {total} bytes; the collector heard from:");
    for (site, bytes) in &collected {
        println!("  {site:<12} {bytes:>6} bytes");
    }
    assert_eq!(total, collected.iter().map(|(_, b)| b).sum::<usize>());

    // The scheduler's counters: how the work spread over the workers.
    let metrics = scheduler.metrics();
    let all = metrics.total();
    println!(
        "\n{} processes, {} steps on {} workers ({} stolen in {} steals, {} parks)",
        metrics.spawned,
        all.steps,
        metrics.workers.len(),
        all.stolen,
        all.steals,
        all.parks
    );

    let report = scheduler.shutdown(Duration::from_secs(1));
    println!(
        "shutdown: {} finished while shutting down, {} stopped, in {:?}",
        report.finished,
        report.stopped.len(),
        report.elapsed
    );
    Ok(())
}
