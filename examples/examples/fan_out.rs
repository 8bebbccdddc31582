//! Fan-out: one process yields 100 commands at once with `yield_all!`; a "service"
//! thread completes them in a shuffled order; the process gets every result back in
//! the order of its commands, matched by tag.
//!
//! `cargo run --example fan_out`

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::Scheduler;

const JOBS: u64 = 100;

/// "Square this number", answered by the service thread.
struct Square(u64);

impl Command for Square {
    type Output = u64;
}

// ANCHOR: process
struct Fanner;

#[process]
impl Fanner {
    #[entry]
    fn fan_out(&mut self, n: u64) -> Result<Vec<u64>, BoxError> {
        // One step yields all `n` commands, tagged Tag(1)..=Tag(n) in this order; the
        // process wakes as completions arrive and resumes when the last is in.
        let results = yield_all!((1..=n).map(Square));
        // Each element is its own Result, in the commands' order, however they
        // completed.
        Ok(results.into_iter().collect::<Result<_, _>>()?)
    }
}
// ANCHOR_END: process

/// A tiny deterministic generator (xorshift64), so the shuffle is the same on every
/// run without a `rand` dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Fisher–Yates.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The handler only forwards each command and its completer to the service
    // thread: a completer can be completed from anywhere, at any time.
    let (to_service, inbox) = mpsc::channel::<(Square, Completer<Square>)>();
    let service = thread::spawn(move || {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        // Wait for the whole batch, so the shuffle decides the completion order.
        let mut batch: Vec<_> = inbox.iter().take(JOBS as usize).collect();
        rng.shuffle(&mut batch);
        let mut order = Vec::with_capacity(batch.len());
        for (Square(n), done) in batch {
            order.push(done.tag());
            done.complete(n * n);
        }
        order
    });

    let scheduler = Scheduler::builder()
        .workers(2)
        .handler(move |cmd: Square, done: Completer<Square>| {
            to_service.send((cmd, done)).expect("the service runs");
        })
        .build()?;

    let pid = scheduler.spawn(Fanner, "fan_out", (JOBS,))?;
    let results = scheduler.wait(pid)?.downcast::<Vec<u64>>()?;
    let order = service.join().expect("the service thread");

    let first: Vec<String> = order.iter().take(8).map(|t| t.to_string()).collect();
    println!(
        "the service completed {} commands in shuffled order: {}, ...",
        order.len(),
        first.join(", ")
    );
    assert_ne!(
        order,
        (1..=JOBS).map(Tag).collect::<Vec<_>>(),
        "the completions came out of order"
    );
    // By tag, back in order: result i is the square of i + 1.
    assert!(results.iter().zip(1..).all(|(&r, n)| r == n * n));
    println!(
        "{pid} got {} results back in its own order: {:?} ... {:?}",
        results.len(),
        &results[..5],
        &results[results.len() - 2..]
    );
    println!("sum of squares 1..={JOBS}: {}", results.iter().sum::<u64>());

    scheduler.shutdown(Duration::from_secs(1));
    Ok(())
}
