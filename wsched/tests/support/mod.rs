//! Hand-written processes shared by the runtime's integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use wsched::{
    Context, Event, Events, InitError, Payload, Payloads, Process, Status, StepError, StepOutput,
};

/// What a scripted step gets: the context, this step's events, the output.
pub type StepFn =
    Box<dyn FnMut(&Context, Vec<Event>, &mut StepOutput) -> Result<(), StepError> + Send>;

/// A process whose single entry `run` is a closure over its events, counting how
/// many times `close` ran.
pub struct Scripted {
    ctx: Option<Context>,
    step: StepFn,
    pub closes: Arc<AtomicUsize>,
}

impl Scripted {
    pub fn new(
        step: impl FnMut(&Context, Vec<Event>, &mut StepOutput) -> Result<(), StepError>
            + Send
            + 'static,
    ) -> Self {
        Self {
            ctx: None,
            step: Box::new(step),
            closes: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn closes(&self) -> Arc<AtomicUsize> {
        self.closes.clone()
    }
}

impl Process for Scripted {
    fn init(&mut self, ctx: Context, method: &str, _input: Payloads) -> Result<(), InitError> {
        if method != "run" {
            return Err(InitError::unknown_method(method, &["run"]));
        }
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("init ran");
        (self.step)(ctx, events.collect(), out)
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
    }
}

/// Answers every message with the same payload, back to its sender; finishes with
/// the number of messages answered when it receives the string "stop".
pub struct Echo {
    ctx: Option<Context>,
    answered: u64,
}

impl Echo {
    pub fn new() -> Self {
        Self {
            ctx: None,
            answered: 0,
        }
    }
}

impl Process for Echo {
    fn init(&mut self, ctx: Context, method: &str, _input: Payloads) -> Result<(), InitError> {
        match method {
            "serve" => {
                self.ctx = Some(ctx);
                Ok(())
            }
            _ => Err(InitError::unknown_method(method, &["serve"])),
        }
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("init ran");
        for event in events {
            match event {
                Event::Message(m) if m.payload.downcast_ref::<&str>() == Some(&"stop") => {
                    out.set_status(Status::Done(Payload::new(self.answered)));
                    return Ok(());
                }
                Event::Message(m) => {
                    if let Some(from) = m.from {
                        ctx.send(from, m.payload).map_err(StepError::new)?;
                    }
                    self.answered += 1;
                }
                Event::Cancel => {
                    out.set_status(Status::Done(Payload::new(self.answered)));
                    return Ok(());
                }
                Event::Completion(_) => {}
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }
}

/// Never finishes on its own: ignores cancels and waits for messages forever.
pub struct Stubborn;

impl Process for Stubborn {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }
}

/// Finishes at once with its single `u64` input, or fails if told to.
pub struct Answer(pub u64);

impl Process for Answer {
    fn init(&mut self, _: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        match method {
            "run" => {
                if let Some(p) = input.into_iter().next() {
                    self.0 = p.downcast::<u64>().map_err(InitError::failed)?;
                }
                Ok(())
            }
            "fail" => {
                self.0 = u64::MAX;
                Ok(())
            }
            _ => Err(InitError::unknown_method(method, &["run", "fail"])),
        }
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if self.0 == u64::MAX {
            return Err(StepError::new("told to fail"));
        }
        out.set_status(Status::Done(Payload::new(self.0)));
        Ok(())
    }
}

/// A process whose first step runs `yield_all` (which writes any number of yields to
/// the output), and which then waits until every one of them has completed and
/// finishes with `Vec<(tag, map(completion))>` in the order the completions arrived.
pub fn collect_completions<T: Send + 'static>(
    yield_all: impl FnOnce(&mut StepOutput) + Send + 'static,
    mut map: impl FnMut(wsched::Completion) -> T + Send + 'static,
) -> Scripted {
    let mut yield_all = Some(yield_all);
    let mut expected = 0;
    let mut collected: Vec<(u64, T)> = Vec::new();
    Scripted::new(move |_, events, out| {
        if let Some(yield_all) = yield_all.take() {
            yield_all(out);
            expected = out.yields().len();
        }
        for event in events {
            if let Event::Completion(c) = event {
                collected.push((c.tag.0, map(c)));
            }
        }
        if collected.len() == expected {
            out.set_status(Status::Done(Payload::new(std::mem::take(&mut collected))));
        } else {
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    })
}

/// Keeps panics whose message contains `marker` (the ones a test makes on purpose,
/// thousands of them in the stress and soak tests) off stderr, and prints every
/// other one as usual. The first call installs the hook; later calls do nothing.
pub fn quiet_expected_panics(marker: &'static str) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied());
            if message.is_some_and(|m| m.contains(marker)) {
                return;
            }
            default(info);
        }));
    });
}

/// A process whose first step lasts until the test lets it go: it says when the
/// step has begun, then waits for the release and ends. What a test uses to hold a
/// worker, or to fill a mailbox that no step drains meanwhile.
pub struct HeldInStep {
    pub process: Scripted,
    /// Receives once the step has begun.
    pub started: std::sync::mpsc::Receiver<()>,
    /// Ends the step.
    pub release: std::sync::mpsc::Sender<()>,
}

impl HeldInStep {
    pub fn new() -> Self {
        let (started_tx, started) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = std::sync::Mutex::new(released);
        let process = Scripted::new(move |_, _, out| {
            started_tx.send(()).unwrap();
            released.lock().unwrap().recv().unwrap();
            out.set_status(Status::Done(Payload::unit()));
            Ok(())
        });
        Self {
            process,
            started,
            release,
        }
    }
}

/// A process that waits for one message, then ends; `first` is the status of its
/// first step (`WaitingForMessage`, or `Continue` to step until the message comes).
pub fn until_a_message(first: fn() -> Status) -> Scripted {
    Scripted::new(move |_, events, out| {
        out.set_status(if events.is_empty() {
            first()
        } else {
            Status::Done(Payload::unit())
        });
        Ok(())
    })
}

/// The exact-steal scenario, on a scheduler of two workers: one worker is held in a
/// step while a process on the other spawns 100 children (99 into its deque, the
/// last into its LIFO slot) and then stays in its step until they are all done, so
/// that the first worker, once released, can only run them by stealing: halves of
/// the deque (50, 25, 12, 6, 3, 2, 1), then the LIFO slot. Returns the deque depths
/// seen while both workers were held.
pub fn robbed_worker(s: &wsched::Scheduler) -> Vec<usize> {
    use std::sync::mpsc;
    let held = HeldInStep::new();
    let blocker = s.spawn(held.process, "run", ()).unwrap();
    held.started.recv().unwrap();
    let left = Arc::new(AtomicUsize::new(100));
    let (all_done, children_done) = mpsc::channel();
    let (spawned_tx, spawned) = mpsc::channel();
    let children_done = std::sync::Mutex::new(children_done);
    let holder = s
        .spawn(
            Scripted::new(move |ctx, _, out| {
                for _ in 0..100 {
                    let (left, all_done) = (left.clone(), all_done.clone());
                    let child = Scripted::new(move |_, _, out| {
                        if left.fetch_sub(1, Ordering::SeqCst) == 1 {
                            all_done.send(()).unwrap();
                        }
                        out.set_status(Status::Done(Payload::unit()));
                        Ok(())
                    });
                    ctx.spawn_detached(child, "run", ()).unwrap();
                }
                spawned_tx.send(()).unwrap();
                children_done.lock().unwrap().recv().unwrap();
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    spawned.recv().unwrap();
    let queued = s.metrics().workers.iter().map(|w| w.local_queue).collect();
    held.release.send(()).unwrap();
    s.wait(blocker).unwrap();
    s.wait(holder).unwrap();
    queued
}
