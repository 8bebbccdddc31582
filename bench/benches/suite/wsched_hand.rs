//! The wsched side written by hand against the `Process` trait: what `#[process]`
//! saves a user from writing, and the floor its generated code is measured against.
//! Each is the counterpart of a `#[process]` struct in `wsched_side.rs`, with the same
//! entry name and input.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use wsched::{
    Context, Event, Events, InitError, Payload, Payloads, Pid, Process, Status, StepError,
    StepOutput, Tag,
};

use crate::wsched_side::Nop;

/// Checks the entry name and decodes a single argument.
fn one_arg<T: Any>(method: &str, input: Payloads) -> Result<T, InitError> {
    if method != "run" {
        return Err(InitError::unknown_method(method, &["run"]));
    }
    let mut input = input.into_vec();
    if input.len() != 1 {
        return Err(InitError::failed("run takes one argument"));
    }
    input
        .pop()
        .expect("one argument")
        .downcast::<T>()
        .map_err(InitError::failed)
}

fn no_args(method: &str, input: &Payloads) -> Result<(), InitError> {
    if method != "run" {
        return Err(InitError::unknown_method(method, &["run"]));
    }
    if !input.is_empty() {
        return Err(InitError::failed("run takes no argument"));
    }
    Ok(())
}

/// A message's payload as a `T`, failing the step on anything else.
fn message<T: Any>(event: Event) -> Result<T, StepError> {
    match event {
        Event::Message(m) => m.payload.downcast::<T>().map_err(StepError::new),
        Event::Cancel => Err(StepError::new("cancelled")),
        Event::Completion(c) => Err(StepError::new(format!("unexpected completion {}", c.tag))),
    }
}

// ---------------------------------------------------------------- ping-pong

/// Hand-written `Ping`: spawns its pong on the first step, then sends `i`, waits for
/// the answer, `rounds` times.
#[derive(Default)]
pub struct HandPing {
    ctx: Option<Context>,
    pong: Option<Pid>,
    rounds: u32,
    sent: u32,
    sum: u64,
}

impl Process for HandPing {
    fn init(&mut self, ctx: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        self.rounds = one_arg::<u32>(method, input)?;
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("initialised");
        let pong = match self.pong {
            Some(pong) => pong,
            None => {
                let pong = ctx
                    .spawn_detached(
                        HandPong {
                            ping: ctx.pid(),
                            ctx: None,
                        },
                        "run",
                        (),
                    )
                    .map_err(StepError::new)?;
                self.pong = Some(pong);
                if self.rounds > 0 {
                    ctx.send(pong, 0_u32).map_err(StepError::new)?;
                    self.sent = 1;
                }
                pong
            }
        };
        for event in events {
            self.sum += u64::from(message::<u32>(event)?);
            if self.sent < self.rounds {
                ctx.send(pong, self.sent).map_err(StepError::new)?;
                self.sent += 1;
            } else {
                ctx.send(pong, u32::MAX).map_err(StepError::new)?;
                out.set_status(Status::Done(Payload::new(self.sum)));
                return Ok(());
            }
        }
        if self.rounds == 0 {
            ctx.send(pong, u32::MAX).map_err(StepError::new)?;
            out.set_status(Status::Done(Payload::new(self.sum)));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    }
}

/// Hand-written `Pong`: answers `n` with `n + 1` until it receives `u32::MAX`.
pub struct HandPong {
    ping: Pid,
    ctx: Option<Context>,
}

impl Process for HandPong {
    fn init(&mut self, ctx: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        no_args(method, &input)?;
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("initialised");
        for event in events {
            let n = message::<u32>(event)?;
            if n == u32::MAX {
                out.set_status(Status::Done(Payload::unit()));
                return Ok(());
            }
            ctx.send(self.ping, n + 1).map_err(StepError::new)?;
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }
}

// ---------------------------------------------------------------- yielding

/// Hand-written `Yielder::run`: yields `Nop` `n` times, one at a time.
#[derive(Default)]
pub struct HandYielder {
    left: u32,
    done: u64,
    tag: u64,
}

impl Process for HandYielder {
    fn init(&mut self, _: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        self.left = one_arg::<u32>(method, input)?;
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        for event in events {
            match event {
                Event::Completion(c) => {
                    c.result.map_err(StepError::new)?;
                    self.done += 1;
                }
                other => {
                    message::<()>(other)?;
                }
            }
        }
        if self.left == 0 {
            out.set_status(Status::Done(Payload::new(self.done)));
        } else {
            self.left -= 1;
            self.tag += 1;
            out.yield_command(Tag(self.tag), Nop);
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    }
}

/// Gives the worker back with `Status::Continue` `n` times: the cheapest way a
/// process can let others run, and the closest thing to tokio's `yield_now`.
#[derive(Default)]
pub struct HandContinue {
    left: u32,
    done: u64,
}

impl Process for HandContinue {
    fn init(&mut self, _: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        self.left = one_arg::<u32>(method, input)?;
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if self.left == 0 {
            out.set_status(Status::Done(Payload::new(self.done)));
        } else {
            self.left -= 1;
            self.done += 1;
            out.set_status(Status::Continue);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- wake-up latency

/// Hand-written `LatencySink`: takes the time first thing in the step.
pub struct HandLatencySink {
    pub ack: Arc<AtomicUsize>,
    pub latencies: Vec<u64>,
    pub samples: u64,
}

impl Process for HandLatencySink {
    fn init(&mut self, _: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        self.samples = one_arg::<u64>(method, input)?;
        self.latencies.reserve(self.samples as usize);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let now = Instant::now();
        for event in events {
            let sent = message::<Instant>(event)?;
            self.latencies
                .push(now.saturating_duration_since(sent).as_nanos() as u64);
            self.ack.fetch_add(1, Ordering::Release);
        }
        if self.latencies.len() as u64 == self.samples {
            let latencies = std::mem::take(&mut self.latencies);
            out.set_status(Status::Done(Payload::new(latencies)));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- idle processes

/// Hand-written `IdleProc`: waits for one `u64`.
#[derive(Default)]
pub struct HandIdle {
    started: bool,
}

impl Process for HandIdle {
    fn init(&mut self, _: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        no_args(method, &input)
    }

    fn step(&mut self, mut events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if !self.started {
            self.started = true;
            crate::memory::started();
        }
        if let Some(event) = events.next() {
            crate::memory::received(message::<u64>(event)?);
            out.set_status(Status::Done(Payload::unit()));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    }
}
