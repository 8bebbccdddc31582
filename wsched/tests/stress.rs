//! Many processes on real threads: everything finishes with the right result, panics
//! stay inside their process, shutdown is exact.

mod support;

use std::time::Duration;

use support::{Echo, Stubborn};
use wsched::command::Completer;
use wsched::{
    Command, Context, Event, Events, InitError, Payload, Payloads, Phase, Process, ProcessError,
    Scheduler, Status, StepError, StepOutput, Tag,
};

const MARKER: &str = "deliberate stress panic";

struct Double(u64);
impl Command for Double {
    type Output = u64;
}

/// Yields `Double(n)`, sends the answer to itself as a message, receives it, and
/// finishes with it plus one; every tenth panics when the message arrives.
struct Worker {
    ctx: Option<Context>,
    n: u64,
    stage: u8,
}

impl Process for Worker {
    fn init(&mut self, ctx: Context, _: &str, input: Payloads) -> Result<(), InitError> {
        self.n = input.into_iter().next().unwrap().downcast::<u64>().unwrap();
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().unwrap();
        match self.stage {
            0 => {
                out.yield_command(Tag(1), Double(self.n));
                self.stage = 1;
                out.set_status(Status::WaitingForYields);
            }
            1 => {
                for event in events {
                    if let Event::Completion(c) = event {
                        assert_eq!(c.tag, Tag(1));
                        let doubled = c.result.unwrap().downcast::<u64>().unwrap();
                        ctx.send(ctx.pid(), doubled).unwrap();
                        self.stage = 2;
                    }
                }
                out.set_status(if self.stage == 2 {
                    Status::WaitingForMessage
                } else {
                    Status::WaitingForYields
                });
            }
            _ => {
                for event in events {
                    if let Event::Message(m) = event {
                        if self.n.is_multiple_of(10) {
                            panic!("{MARKER} {}", self.n);
                        }
                        assert_eq!(m.from, Some(ctx.pid()));
                        let doubled = m.payload.downcast::<u64>().unwrap();
                        out.set_status(Status::Done(Payload::new(doubled + 1)));
                        return Ok(());
                    }
                }
                out.set_status(Status::WaitingForMessage);
            }
        }
        Ok(())
    }
}

#[test]
fn a_hundred_thousand_processes_with_yields_messages_and_panics() {
    support::quiet_expected_panics(MARKER);
    const N: u64 = 100_000;
    // Half the yields complete at once on the worker, half later from another thread.
    let (later, completions) = std::sync::mpsc::channel::<(Completer<Double>, u64)>();
    let completing = std::thread::spawn(move || {
        for (done, n) in completions {
            done.complete(n * 2);
        }
    });
    let s = Scheduler::builder()
        .workers(4)
        .handler(move |Double(n), done: Completer<Double>| {
            if n % 2 == 0 {
                done.complete(n * 2);
            } else {
                later.send((done, n)).unwrap();
            }
        })
        .build()
        .unwrap();
    let pids: Vec<_> = (0..N)
        .map(|n| {
            s.spawn(
                Worker {
                    ctx: None,
                    n,
                    stage: 0,
                },
                "run",
                (n,),
            )
            .unwrap()
        })
        .collect();
    let mut panicked = 0;
    for (n, pid) in (0..N).zip(pids) {
        match s.wait(pid) {
            Ok(p) => {
                assert_ne!(n % 10, 0);
                assert_eq!(p.downcast::<u64>().unwrap(), 2 * n + 1);
            }
            Err(e) => {
                assert_eq!(n % 10, 0, "process {n} failed: {e}");
                match e.process_error() {
                    Some(ProcessError::Panicked {
                        phase: Phase::Step,
                        message,
                    }) => {
                        assert_eq!(message, &format!("{MARKER} {n}"));
                    }
                    other => panic!("unexpected {other:?}"),
                }
                panicked += 1;
            }
        }
    }
    assert_eq!(panicked, N / 10);
    let m = s.metrics();
    assert_eq!(
        (m.spawned, m.finished, m.failed, m.live),
        (N, N - N / 10, N / 10, 0)
    );
    assert_eq!(m.total().steps, 3 * N);
    // Every worker thread is still there to be joined (a dead one would re-raise its
    // panic here), and nothing was left to stop.
    let report = s.shutdown(Duration::from_secs(5));
    assert!(report.stopped.is_empty());
    drop(s); // drops the handler, and with it the channel's sender
    completing.join().unwrap();
}

#[test]
fn shutdown_with_a_hundred_thousand_live_processes_and_one_that_never_finishes() {
    const N: usize = 100_000;
    let s = Scheduler::builder().workers(2).build().unwrap();
    for _ in 0..N {
        s.spawn_detached(Echo::new(), "serve", ()).unwrap();
    }
    let stubborn = s.spawn(Stubborn, "run", ()).unwrap();
    let timeout = Duration::from_secs(3);
    let report = s.shutdown(timeout);
    // Every echo ends: on its cancel, or, on a machine too slow to step 100,000
    // cancels within the timeout (a loaded CI runner, AddressSanitizer), stopped with
    // the stubborn one when it runs out. None is lost, none counted twice.
    assert!(report.stopped.contains(&stubborn), "{:?}", report.stopped);
    assert_eq!(
        report.finished + report.stopped.len(),
        N + 1,
        "every process ended once: {} finished, {} stopped",
        report.finished,
        report.stopped.len()
    );
    assert!(report.elapsed >= timeout, "it waited for the stubborn one");
    // Generous: shutdown must not hang past its timeout, however slow the machine.
    assert!(
        report.elapsed < timeout + Duration::from_secs(30),
        "took {:?}",
        report.elapsed
    );
    assert_eq!(s.metrics().live, 0);
}
