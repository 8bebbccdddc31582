//! Worker pools: a supervisor of identical workers, built from one spec, that hands
//! jobs to whichever worker is idle, and grows and shrinks at run time (Erlang's
//! `simple_one_for_one`, with the job queue a pool usually adds by hand).
//!
//! Workers pull: a worker asks for its next job with a call
//! ([`NextJob`], answered with [`Next`]), and is idle while that call waits. A job
//! ([`Submit`]) goes to the worker that has been idle longest, or waits in the
//! pool's queue, in order, until one asks. So a job is never pushed to a busy
//! worker, and a worker holds at most the job it works on.
//!
//! Shrinking retires workers between jobs, never in the middle of one: idle workers
//! first, answered [`Next::Retire`] at once; then busy ones, answered so when they
//! next ask. A retiring worker returns from its entry, and the pool forgets it. So
//! a pool resized while jobs run loses none of them. Only a worker that fails (or is
//! killed) while it holds a job loses that job; the pool restarts it by its spec's
//! [`Restart`](super::Restart) kind, as any supervisor does.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;

use crate::payload::Payload;
use crate::pid::Pid;
use crate::runtime::{Reply, Request};

/// A job for a pool: send it to the pool's PID (`send(pool, Submit(job))`). It goes
/// to the worker idle longest, or waits in the pool's queue, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submit<J>(pub J);

/// A worker's request for its next job: call the pool with it
/// (`call!(pool, NextJob::<J>::new())`); the answer is a [`Next<J>`].
pub struct NextJob<J>(PhantomData<fn() -> J>);

impl<J> NextJob<J> {
    /// The request.
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<J> Default for NextJob<J> {
    fn default() -> Self {
        Self::new()
    }
}

impl<J> fmt::Debug for NextJob<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NextJob")
    }
}

/// The pool's answer to [`NextJob`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next<J> {
    /// Work on this.
    Job(J),
    /// The pool shrinks: return from the entry (finish normally), holding nothing.
    Retire,
}

/// Resizes a pool to this many workers: call the pool with it; the answer is
/// `Result<usize, ChildError>` (the new size). Growing starts the new workers
/// before it answers; shrinking retires idle workers at once and busy ones when they
/// next ask for a job, so the workers still running may outnumber the size until
/// then (see [pools](super#pools)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resize(pub usize);

/// What a pool's queue did with a message.
pub(super) enum Handled {
    /// A job or a request was dealt with.
    Done,
    /// A worker asked and was told to retire: the pool forgets it when it ends.
    Retired(Pid),
}

/// A pool's job queue, for jobs of one type: the supervisor is not generic, so it
/// holds this behind a trait object.
pub(super) trait Jobs: Send {
    /// Takes `payload` if it is this pool's [`Submit`] or [`NextJob`] call from
    /// `from`; gives it back otherwise.
    fn handle(
        &mut self,
        from: Option<Pid>,
        payload: Payload,
        retiring: &mut usize,
    ) -> Result<Handled, Payload>;

    /// Retires up to `n` idle workers at once; returns the PIDs told.
    fn retire_idle(&mut self, n: usize) -> Vec<Pid>;

    /// Forgets worker `pid`'s wait, if it waits (it ended).
    fn forget(&mut self, pid: Pid);

    /// Jobs waiting for a worker.
    fn queued(&self) -> usize;

    /// Workers waiting for a job.
    fn idle(&self) -> usize;
}

/// The queue of a pool of `J` jobs.
pub(super) struct JobQueue<J> {
    jobs: VecDeque<J>,
    /// Workers waiting for a job, longest first.
    idle: VecDeque<(Pid, Reply<Next<J>>)>,
}

impl<J> JobQueue<J> {
    pub(super) fn new() -> Self {
        Self {
            jobs: VecDeque::new(),
            idle: VecDeque::new(),
        }
    }
}

impl<J: Any + Send> JobQueue<J> {
    /// Hands `job` to the worker idle longest that still waits, else queues it.
    fn dispatch(&mut self, mut job: J) {
        while let Some((_, reply)) = self.idle.pop_front() {
            match reply.try_send(Next::Job(job)) {
                Ok(()) => return,
                // That worker gave up its wait (it ended): the next one.
                Err(Next::Job(back)) => job = back,
                Err(Next::Retire) => unreachable!("a job was sent"),
            }
        }
        self.jobs.push_back(job);
    }

    /// Worker `from` asks for its next job.
    fn ask(&mut self, from: Pid, reply: Reply<Next<J>>, retiring: &mut usize) -> Handled {
        if *retiring > 0 {
            *retiring -= 1;
            reply.send(Next::Retire);
            return Handled::Retired(from);
        }
        match self.jobs.pop_front() {
            Some(job) => {
                if let Err(Next::Job(job)) = reply.try_send(Next::Job(job)) {
                    // It gave up meanwhile: the job stays first in line.
                    self.jobs.push_front(job);
                }
            }
            None => self.idle.push_back((from, reply)),
        }
        Handled::Done
    }
}

impl<J: Any + Send> Jobs for JobQueue<J> {
    fn handle(
        &mut self,
        from: Option<Pid>,
        payload: Payload,
        retiring: &mut usize,
    ) -> Result<Handled, Payload> {
        let payload = match payload.downcast::<Submit<J>>() {
            Ok(Submit(job)) => {
                self.dispatch(job);
                return Ok(Handled::Done);
            }
            Err(other) => other.into_payload(),
        };
        let Request { reply, .. } = payload
            .downcast::<Request<NextJob<J>, Next<J>>>()
            .map_err(|other| other.into_payload())?;
        Ok(match from {
            Some(from) => self.ask(from, reply, retiring),
            // A thread asked: it is no worker of the pool, and cannot be retired.
            None => {
                match self.jobs.pop_front() {
                    Some(job) => {
                        if let Err(Next::Job(job)) = reply.try_send(Next::Job(job)) {
                            self.jobs.push_front(job);
                        }
                    }
                    None => drop(reply),
                }
                Handled::Done
            }
        })
    }

    fn retire_idle(&mut self, n: usize) -> Vec<Pid> {
        let mut told = Vec::new();
        while told.len() < n {
            let Some((pid, reply)) = self.idle.pop_front() else {
                break;
            };
            if reply.try_send(Next::Retire).is_ok() {
                told.push(pid);
            }
        }
        told
    }

    fn forget(&mut self, pid: Pid) {
        self.idle.retain(|(waiting, _)| *waiting != pid);
    }

    fn queued(&self) -> usize {
        self.jobs.len()
    }

    fn idle(&self) -> usize {
        self.idle.len()
    }
}
