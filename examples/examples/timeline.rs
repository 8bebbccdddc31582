//! What work stealing looks like: a tree of processes on four workers, recorded, and
//! written out as a Perfetto timeline and an SVG picture.
//!
//! `cargo run --release -p wsched-examples --example timeline [output-dir]`
//!
//! The root spawns a few children on its worker; they spawn more; the leaves compute
//! for a while. Every spawn lands on the spawning worker's queues, so the other
//! workers, idle at first, have to steal: the red arrows in `timeline.svg`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use wsched::prelude::*;
use wsched::recorder::SvgOptions;
use wsched::{RecordOptions, Scheduler};

/// How many children each inner node spawns, and how deep the tree is.
const FAN_OUT: u32 = 4;
const DEPTH: u32 = 3;
/// How long each leaf computes, in one step.
const LEAF_WORK: Duration = Duration::from_micros(200);

struct Node;

#[process]
impl Node {
    /// Counts the leaves under this node: a leaf computes, an inner node spawns its
    /// children and adds up what they report.
    #[entry]
    fn run(&mut self, parent: Option<Pid>, depth: u32) -> Result<u64, BoxError> {
        let leaves = if depth == 0 {
            spin(LEAF_WORK);
            1
        } else {
            for _ in 0..FAN_OUT {
                this::spawn_detached(Node, "run", (Some(this::pid()), depth - 1))?;
            }
            let mut sum = 0;
            for _ in 0..FAN_OUT {
                sum += recv!(u64)?;
            }
            sum
        };
        if let Some(parent) = parent {
            this::send(parent, leaves)?;
        }
        Ok(leaves)
    }
}

/// Busy for `time`, as a computation would be.
fn spin(time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        std::hint::spin_loop();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".to_owned()));
    std::fs::create_dir_all(&dir)?;

    // ANCHOR: record
    let scheduler = Scheduler::builder()
        .workers(4)
        .record(RecordOptions::new().capacity_per_worker(1 << 14))
        .build()?;
    let root = scheduler.spawn(Node, "run", (None::<Pid>, DEPTH))?;
    let leaves = scheduler.wait(root)?.downcast::<u64>()?;
    assert_eq!(leaves, u64::from(FAN_OUT.pow(DEPTH)));

    let recording = scheduler.recording().expect("the recorder is on");
    let json = dir.join("timeline.json");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&json)?);
    recording.write_chrome_json(&mut out)?;
    drop(out);
    let svg = dir.join("timeline.svg");
    std::fs::write(&svg, recording.to_svg_with(&SvgOptions::new().width(1200)))?;
    // ANCHOR_END: record

    println!("{leaves} leaves; {} steals", recording.steals().len());
    println!("{}", recording.to_terminal(100));
    println!("wrote {} and {}", json.display(), svg.display());
    println!(
        "open the JSON in Perfetto: https://ui.perfetto.dev, \"Open trace file\" (or chrome://tracing)"
    );
    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}
