//! The supervisor as a process: a hand-written [`Process`] that traps exits, starts
//! its children linked to itself, and reacts to their `Exit` messages.
//!
//! It is an event loop over three states: running (children up, ends handled as
//! they come), stopping (children stopped one at a time, reverse start order, each
//! unlinked, monitored, cancelled and, after its timeout, killed; then either a group
//! restart or the end) and ended. A cancel in a step wins over the other events of
//! that step, so a supervisor being shut down does not first restart children.

use std::collections::VecDeque;
use std::time::Duration;

use super::spec::ChildSpec;
use crate::buggify::{buggify, Buggify};
use crate::command::TimerRef;
use crate::engine::context::Context;
use crate::engine::process::{Event, Events, Message, Process, Status, StepOutput};
use crate::error::{InitError, SpawnError, StepError, YieldError};
use crate::exit::ExitReason;
use crate::payload::Payloads;
use crate::pid::Pid;
use crate::runtime::{Down, Exit, MonitorRef, Reply, Request};

use super::dynamic::{
    ChildError, DeleteChild, DynamicRequest, RestartChild, StartChild, TerminateChild,
};
use super::pool::{Handled, Resize};
use super::spec::Restart;
use super::{ChildInfo, Children, Supervisor, SupervisorError, SupervisorState, WhichChildren};

/// The message a supervisor sends itself when a child it stops has had its shutdown
/// timeout: the child is killed if its monitor is still the one awaited.
#[derive(Debug)]
pub(super) struct StopTimeout(MonitorRef);

/// Where the supervisor stands.
pub(super) enum Phase {
    /// Not stepped yet: the first step starts the children.
    Starting,
    Running,
    Stopping(Stopping),
    Ended,
}

/// Children being stopped one at a time, and what comes after.
pub(super) struct Stopping {
    /// Children still to stop, in start order: the last is stopped next.
    queue: Vec<usize>,
    current: Option<Current>,
    then: Then,
}

/// The child being stopped now.
struct Current {
    index: usize,
    pid: Pid,
    monitor: MonitorRef,
    timer: Option<TimerRef>,
}

enum Then {
    /// Start these children again, in this (start) order.
    Restart(Vec<usize>),
    /// A [`TerminateChild`] request: answer it, the child stopped.
    Terminate(Reply<Result<(), ChildError>>),
    /// End the supervisor: cancelled (`None`) or failed.
    End(Option<SupervisorError>),
}

impl Supervisor {
    fn ctx(&self) -> &Context {
        self.ctx.as_ref().expect("init stored the context")
    }

    /// The first step: trap exits, start every child in order.
    fn start_all(&mut self) {
        self.ctx().trap_exits(true);
        self.phase = Phase::Running;
        self.publish_state();
        for index in 0..self.children.len() {
            if !self.start_child(index, false) {
                return;
            }
        }
    }

    /// Starts child `index` (`again`: a restart, counted). A restart whose spawn
    /// fails counts as another restart, retried until it works or the intensity is
    /// exceeded. Returns `false` if the supervisor began to shut down instead.
    fn start_child(&mut self, index: usize, again: bool) -> bool {
        loop {
            let ctx = self.ctx.clone().expect("init stored the context");
            let child = &mut self.children[index];
            debug_assert!(child.pid.is_none(), "a running child is not started again");
            match child.spec.start(&ctx) {
                Ok(pid) => {
                    child.pid = Some(pid);
                    child.start_error = None;
                    if again {
                        child.restarts += 1;
                        // A rare path a simulation takes on purpose: the restarted
                        // child crashes at once, pushing the intensity to its limit.
                        if buggify(Buggify::CrashAfterRestart) {
                            let _ = ctx.kill(pid);
                        }
                    }
                    self.publish_child(index);
                    return true;
                }
                Err(SpawnError::ShuttingDown) => {
                    // The scheduler is shutting down: its cancel is on its way.
                    self.begin_shutdown(None);
                    return false;
                }
                Err(error) if !again => {
                    let message = error.to_string();
                    child.start_error = Some(message.clone());
                    let error = SupervisorError::StartFailed {
                        child: child.spec.id().to_owned(),
                        message,
                    };
                    // Shown at once, not when the others have stopped.
                    self.publish_child(index);
                    self.begin_shutdown(Some(error));
                    return false;
                }
                Err(error) => {
                    child.start_error = Some(error.to_string());
                    self.publish_child(index);
                    if !self.count_restart(index) {
                        return false;
                    }
                }
            }
        }
    }

    /// Counts a restart of child `index` against the intensity; if it exceeds it,
    /// begins the shutdown that ends the supervisor, and returns `false`.
    fn count_restart(&mut self, index: usize) -> bool {
        let now = (self.clock)();
        if self.log.record(self.intensity, now) {
            self.restarts += 1;
            let restarts = self.restarts;
            self.publish(|view| view.restarts = restarts);
            return true;
        }
        let error = SupervisorError::Intensity {
            child: self.children[index].spec.id().to_owned(),
            restarts: self.log.in_window(),
            period: self.intensity.period,
        };
        self.begin_shutdown(Some(error));
        false
    }

    /// Child `index` ended with `reason` while the supervisor runs.
    fn child_ended(&mut self, index: usize, reason: ExitReason) {
        let restart = self.children[index].spec.restart_kind();
        let pid = self.children[index].pid.take();
        if let (Some(pool), Some(pid)) = (&mut self.pool, pid) {
            pool.jobs.forget(pid);
            if let Some(at) = pool.retired.iter().position(|&p| p == pid) {
                // A pool worker told to retire: forgotten, however it ended.
                pool.retired.swap_remove(at);
                self.children[index].removed = true;
                self.publish_child(index);
                return;
            }
        }
        if !restart.restarts_after(&reason) {
            if restart == Restart::Temporary {
                self.children[index].removed = true;
            }
            self.publish_child(index);
            return;
        }
        // Published before the restart is counted: a refused restart ends the
        // supervisor, and the view must not keep showing the dead child's PID.
        self.publish_child(index);
        if !self.count_restart(index) {
            return;
        }
        let group = self.strategy.group(index, self.children.len());
        if group.len() == 1 {
            self.start_child(index, true);
            return;
        }
        let mut stop = Vec::new();
        let mut again = Vec::new();
        for j in group {
            let child = &self.children[j];
            if child.removed || child.terminated {
                continue;
            }
            if j != index && child.pid.is_some() {
                stop.push(j);
            }
            let restarts = match child.spec.restart_kind() {
                Restart::Permanent => true,
                Restart::Transient => j == index || child.pid.is_some(),
                Restart::Temporary => false,
            };
            if restarts {
                again.push(j);
            }
        }
        self.phase = Phase::Stopping(Stopping {
            queue: stop,
            current: None,
            then: Then::Restart(again),
        });
        self.publish_state();
    }

    /// Begins stopping every running child to end the supervisor (`error`: failed;
    /// `None`: cancelled). A shutdown already under way keeps its first reason; a
    /// group restart under way becomes this shutdown.
    ///
    /// The error is published at once, before the children are stopped (which may
    /// take their shutdown timeouts).
    fn begin_shutdown(&mut self, error: Option<SupervisorError>) {
        let running: Vec<usize> = (0..self.children.len())
            .filter(|&i| self.children[i].pid.is_some())
            .collect();
        match &self.phase {
            Phase::Stopping(Stopping {
                then: Then::End(_), ..
            })
            | Phase::Ended => {}
            _ => {
                let published = error.clone();
                self.publish(|view| view.error = published);
            }
        }
        match &mut self.phase {
            Phase::Stopping(Stopping {
                then: Then::End(_), ..
            })
            | Phase::Ended => {}
            Phase::Stopping(stopping) => {
                let current = stopping.current.as_ref().map(|c| c.index);
                stopping.queue = running
                    .into_iter()
                    .filter(|&i| Some(i) != current)
                    .collect();
                if let Then::Terminate(reply) =
                    std::mem::replace(&mut stopping.then, Then::End(error))
                {
                    reply.send(Err(ChildError::ShuttingDown));
                }
            }
            Phase::Starting | Phase::Running => {
                self.phase = Phase::Stopping(Stopping {
                    queue: running,
                    current: None,
                    then: Then::End(error),
                });
            }
        }
        self.publish_state();
    }

    /// Starts stopping child `index`: unlinked (its end then comes as the monitor's
    /// `Down`, or as an `Exit` sent before the unlink), monitored, then cancelled
    /// with a timer for its timeout, or killed at once for a zero timeout.
    fn stop_child(&mut self, index: usize, pid: Pid) -> Current {
        let ctx = self.ctx().clone();
        let timeout = self.children[index].spec.shutdown_timeout();
        ctx.unlink(pid);
        let monitor = ctx.monitor(pid);
        let mut timer = None;
        if timeout.is_zero() {
            let _ = ctx.kill(pid);
        } else {
            let _ = ctx.cancel(pid);
            if timeout != Duration::MAX {
                timer = ctx
                    .send_after(ctx.pid(), StopTimeout(monitor), timeout)
                    .ok();
            }
        }
        Current {
            index,
            pid,
            monitor,
            timer,
        }
    }

    /// The child being stopped has ended.
    fn stopped(&mut self, current: Current) {
        if let Some(timer) = current.timer {
            timer.cancel();
        }
        // If its `Exit` came first, its `Down` may follow: unknown monitors are
        // ignored.
        self.ctx().demonitor(current.monitor);
        let child = &mut self.children[current.index];
        child.pid = None;
        if child.spec.restart_kind() == Restart::Temporary {
            child.removed = true;
        }
        self.publish_child(current.index);
    }

    /// Moves the state machine on as far as it goes without a new event.
    fn advance(&mut self) {
        loop {
            match &mut self.phase {
                Phase::Stopping(stopping) => {
                    if stopping.current.is_some() {
                        return;
                    }
                    if let Some(index) = stopping.queue.pop() {
                        if let Some(pid) = self.children[index].pid {
                            let current = self.stop_child(index, pid);
                            if let Phase::Stopping(stopping) = &mut self.phase {
                                stopping.current = Some(current);
                            }
                            return;
                        }
                        continue;
                    }
                    let Phase::Stopping(stopping) =
                        std::mem::replace(&mut self.phase, Phase::Running)
                    else {
                        unreachable!("matched above")
                    };
                    match stopping.then {
                        Then::Restart(again) => {
                            self.publish_state();
                            for index in again {
                                if !matches!(self.phase, Phase::Running) {
                                    break;
                                }
                                self.start_child(index, true);
                            }
                        }
                        Then::Terminate(reply) => {
                            self.publish_state();
                            reply.send(Ok(()));
                        }
                        Then::End(error) => {
                            self.refuse_requests();
                            self.phase = Phase::Ended;
                            let published = error.clone();
                            self.publish(|view| view.error = published);
                            self.outcome = Some(error);
                            self.publish_state();
                            return;
                        }
                    }
                }
                Phase::Running => {
                    if let Some((index, reason)) = self.pending.pop_front() {
                        self.child_ended(index, reason);
                    } else if let Some(request) = self.requests.pop_front() {
                        self.serve(request);
                    } else {
                        return;
                    }
                }
                Phase::Starting | Phase::Ended => return,
            }
        }
    }

    fn on_message(&mut self, message: Message) {
        let Message { from, payload } = message;
        let payload = match payload.downcast::<Exit>() {
            Ok(exit) => return self.on_exit(exit),
            Err(other) => other.into_payload(),
        };
        let payload = match payload.downcast::<Down>() {
            Ok(down) => return self.on_down(down),
            Err(other) => other.into_payload(),
        };
        let payload = match payload.downcast::<StopTimeout>() {
            Ok(StopTimeout(monitor)) => return self.on_timeout(monitor),
            Err(other) => other.into_payload(),
        };
        let payload = match DynamicRequest::from_payload(payload) {
            Ok(request) => return self.on_request(request),
            Err(other) => other,
        };
        let payload = match &mut self.pool {
            Some(pool) => match pool.jobs.handle(from, payload, &mut pool.retiring) {
                Ok(handled) => {
                    if let Handled::Retired(pid) = handled {
                        pool.retired.push(pid);
                    }
                    return self.publish_pool();
                }
                Err(other) => other,
            },
            None => payload,
        };
        if payload.is::<WhichChildren>() {
            if let Some(from) = from {
                let children = Children(self.view.state.lock().children());
                let _ = self.ctx().send(from, children);
            }
        }
        // Anything else is not for a supervisor: dropped.
    }

    fn child_index(&self, pid: Pid) -> Option<usize> {
        self.children.iter().position(|c| c.pid == Some(pid))
    }

    fn on_exit(&mut self, Exit { pid, reason }: Exit) {
        let index = self.child_index(pid);
        match (&mut self.phase, index) {
            (Phase::Running, Some(index)) => self.child_ended(index, reason),
            (Phase::Running, None) => {
                // A linked process that is not a child (whoever spawned the
                // supervisor linked, say) failed: what the link would do to a
                // process that does not trap exits, done in order.
                if !reason.is_normal() {
                    self.begin_shutdown(Some(SupervisorError::LinkedExit { pid, reason }));
                }
            }
            (Phase::Stopping(stopping), Some(index)) => {
                if stopping.current.as_ref().is_some_and(|c| c.pid == pid) {
                    let current = stopping.current.take().expect("checked");
                    self.stopped(current);
                } else if let Some(at) = stopping.queue.iter().position(|&i| i == index) {
                    // It ended by itself before its turn: as good as stopped.
                    stopping.queue.remove(at);
                    let child = &mut self.children[index];
                    child.pid = None;
                    child.removed |= child.spec.restart_kind() == Restart::Temporary;
                    self.publish_child(index);
                } else if matches!(stopping.then, Then::End(_)) {
                    self.children[index].pid = None;
                    self.publish_child(index);
                } else {
                    // Outside the group being restarted: dealt with afterwards.
                    self.children[index].pid = None;
                    self.pending.push_back((index, reason));
                }
            }
            (Phase::Stopping(stopping), None) => {
                if !reason.is_normal() && !matches!(stopping.then, Then::End(_)) {
                    self.begin_shutdown(Some(SupervisorError::LinkedExit { pid, reason }));
                }
            }
            (Phase::Starting | Phase::Ended, _) => {}
        }
    }

    fn on_down(&mut self, down: Down) {
        if let Phase::Stopping(stopping) = &mut self.phase {
            if stopping
                .current
                .as_ref()
                .is_some_and(|c| c.monitor == down.monitor)
            {
                let current = stopping.current.take().expect("checked");
                self.stopped(current);
            }
        }
    }

    fn on_timeout(&mut self, monitor: MonitorRef) {
        if let Phase::Stopping(Stopping {
            current: Some(current),
            ..
        }) = &mut self.phase
        {
            if current.monitor == monitor {
                current.timer = None;
                let pid = current.pid;
                let _ = self.ctx().kill(pid);
            }
        }
    }

    fn publish_child(&self, index: usize) {
        self.publish_pool();
        let child = &self.children[index];
        let info = (!child.removed).then(|| ChildInfo {
            id: child.spec.id().to_owned(),
            pid: child.pid,
            restarts: child.restarts,
            restart: child.spec.restart_kind(),
            kind: child.spec.kind(),
            start_error: child.start_error.clone(),
        });
        self.publish(|view| view.children[index] = info);
    }

    fn publish_state(&self) {
        let state = match &self.phase {
            Phase::Starting => SupervisorState::Starting,
            // Stopping one child on request: running all the same.
            Phase::Running
            | Phase::Stopping(Stopping {
                then: Then::Terminate(_),
                ..
            }) => SupervisorState::Running,
            Phase::Stopping(Stopping {
                then: Then::Restart(_),
                ..
            }) => SupervisorState::Restarting,
            Phase::Stopping(Stopping {
                then: Then::End(_), ..
            }) => SupervisorState::ShuttingDown,
            Phase::Ended => SupervisorState::Ended,
        };
        self.publish(|view| view.state = state);
    }
}

/// Dynamic supervision (see `dynamic.rs`).
impl Supervisor {
    /// A request arrived: served now while running, after the group restart or
    /// termination under way, or refused once shutting down.
    fn on_request(&mut self, request: DynamicRequest) {
        match &self.phase {
            Phase::Running => self.serve(request),
            Phase::Starting
            | Phase::Stopping(Stopping {
                then: Then::Restart(_) | Then::Terminate(_),
                ..
            }) => self.requests.push_back(request),
            Phase::Stopping(Stopping {
                then: Then::End(_), ..
            })
            | Phase::Ended => request.refuse(),
        }
    }

    /// Refuses every request not served yet (the supervisor is ending).
    fn refuse_requests(&mut self) {
        for request in std::mem::take(&mut self.requests) {
            request.refuse();
        }
    }

    /// Serves `request` while running.
    fn serve(&mut self, request: DynamicRequest) {
        match request {
            DynamicRequest::Start(Request {
                request: StartChild(spec),
                reply,
                ..
            }) => {
                let answer = self.add_and_start(spec);
                reply.send(answer);
            }
            DynamicRequest::Terminate(Request {
                request: TerminateChild(id),
                reply,
                ..
            }) => self.terminate(&id, reply),
            DynamicRequest::Restart(Request {
                request: RestartChild(id),
                reply,
                ..
            }) => {
                let answer = self.restart_stopped(&id);
                reply.send(answer);
            }
            DynamicRequest::Delete(Request {
                request: DeleteChild(id),
                reply,
                ..
            }) => {
                let answer = self.delete(&id);
                reply.send(answer);
            }
            DynamicRequest::Resize(Request {
                request: Resize(size),
                reply,
                ..
            }) => {
                let answer = self.resize(size);
                reply.send(answer);
            }
        }
    }

    /// Resizes a pool to `size` workers (see `pool.rs`).
    fn resize(&mut self, size: usize) -> Result<usize, ChildError> {
        let Some(pool) = &self.pool else {
            return Err(ChildError::NotAPool);
        };
        let listed = self.children.iter().filter(|c| !c.removed).count();
        let current = listed - pool.retired.len() - pool.retiring;
        if size > current {
            for _ in current..size {
                let pool = self.pool.as_mut().expect("checked");
                let spec = pool.next_spec();
                self.add_and_start(spec)?;
            }
        } else {
            let pool = self.pool.as_mut().expect("checked");
            let fewer = current - size;
            let told = pool.jobs.retire_idle(fewer);
            pool.retiring += fewer - told.len();
            pool.retired.extend(told);
            self.publish_pool();
        }
        Ok(size)
    }

    /// The index of the listed child `id`.
    fn find(&self, id: &str) -> Result<usize, ChildError> {
        self.children
            .iter()
            .position(|c| !c.removed && c.spec.id() == id)
            .ok_or_else(|| ChildError::NotFound { id: id.to_owned() })
    }

    /// Spawns child `index` for a dynamic request, without the restart rules: a
    /// failure is the request's answer, not the supervisor's end.
    fn start_dynamic(&mut self, index: usize) -> Result<Pid, ChildError> {
        let ctx = self.ctx().clone();
        let child = &mut self.children[index];
        match child.spec.start(&ctx) {
            Ok(pid) => {
                child.pid = Some(pid);
                child.terminated = false;
                child.start_error = None;
                self.publish_child(index);
                Ok(pid)
            }
            Err(SpawnError::ShuttingDown) => {
                // The scheduler's shutdown: its cancel is on its way.
                self.begin_shutdown(None);
                Err(ChildError::ShuttingDown)
            }
            Err(error) => {
                let message = error.to_string();
                child.start_error = Some(message.clone());
                let id = child.spec.id().to_owned();
                self.publish_child(index);
                Err(ChildError::StartFailed { id, message })
            }
        }
    }

    fn add_and_start(&mut self, spec: ChildSpec) -> Result<Pid, ChildError> {
        if self.find(spec.id()).is_ok() {
            return Err(ChildError::AlreadyPresent {
                id: spec.id().to_owned(),
            });
        }
        let index = self.children.len();
        self.push_child(spec);
        self.start_dynamic(index).inspect_err(|_| {
            // Never ran: forgotten, as if never added.
            self.children[index].removed = true;
            self.publish_child(index);
        })
    }

    fn terminate(&mut self, id: &str, reply: Reply<Result<(), ChildError>>) {
        let index = match self.find(id) {
            Ok(index) => index,
            Err(error) => {
                reply.send(Err(error));
                return;
            }
        };
        self.children[index].terminated = true;
        if self.children[index].pid.is_none() {
            let child = &mut self.children[index];
            child.removed |= child.spec.restart_kind() == Restart::Temporary;
            self.publish_child(index);
            reply.send(Ok(()));
            return;
        }
        self.phase = Phase::Stopping(Stopping {
            queue: vec![index],
            current: None,
            then: Then::Terminate(reply),
        });
        self.publish_state();
    }

    fn restart_stopped(&mut self, id: &str) -> Result<Pid, ChildError> {
        let index = self.find(id)?;
        if let Some(pid) = self.children[index].pid {
            return Err(ChildError::Running {
                id: id.to_owned(),
                pid,
            });
        }
        let pid = self.start_dynamic(index)?;
        self.children[index].restarts += 1;
        self.publish_child(index);
        Ok(pid)
    }

    fn delete(&mut self, id: &str) -> Result<(), ChildError> {
        let index = self.find(id)?;
        if let Some(pid) = self.children[index].pid {
            return Err(ChildError::Running {
                id: id.to_owned(),
                pid,
            });
        }
        self.children[index].removed = true;
        self.publish_child(index);
        Ok(())
    }
}

impl Process for Supervisor {
    fn init(&mut self, ctx: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        if method != Self::ENTRY.name() {
            return Err(InitError::unknown_method(method, &[Self::ENTRY.name()]));
        }
        if !input.is_empty() {
            return Err(InitError::failed(format!(
                "`{}` takes no arguments (the children are in the Supervisor)",
                Self::ENTRY.name()
            )));
        }
        for (i, child) in self.children.iter().enumerate() {
            if self.children[..i]
                .iter()
                .any(|other| other.spec.id() == child.spec.id())
            {
                return Err(InitError::failed(format!(
                    "two children have the id `{}`",
                    child.spec.id()
                )));
            }
        }
        let pid = ctx.pid();
        self.publish(|view| view.pid = Some(pid));
        self.ctx = Some(ctx);
        if let Some(pool) = &mut self.pool {
            pool.pid = Some(pid);
            let specs: Vec<ChildSpec> = (0..pool.initial).map(|_| pool.next_spec()).collect();
            for spec in specs {
                self.push_child(spec);
            }
            self.publish_pool();
        }
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if matches!(self.phase, Phase::Starting) {
            self.start_all();
        }
        let mut cancelled = false;
        let mut messages = Vec::new();
        for event in events {
            match event {
                Event::Cancel => cancelled = true,
                Event::Message(message) => messages.push(message),
                Event::Completion(_) => {}
            }
        }
        if cancelled {
            self.begin_shutdown(None);
        }
        for message in messages {
            self.on_message(message);
            self.advance();
        }
        self.advance();
        match self.outcome.take() {
            None => {
                out.set_status(Status::WaitingForMessage);
                Ok(())
            }
            Some(None) => Err(StepError::new(YieldError::Cancelled)),
            Some(Some(error)) => Err(StepError::new(error)),
        }
    }

    /// However it ended (also killed, or stopped by shutdown): handles see it ended,
    /// and requests it had not served yet are refused.
    fn close(&mut self) {
        if let Phase::Stopping(Stopping {
            then: Then::Terminate(reply),
            ..
        }) = std::mem::replace(&mut self.phase, Phase::Ended)
        {
            reply.send(Err(ChildError::ShuttingDown));
        }
        self.refuse_requests();
        self.publish_state();
    }
}

/// The child failures held back while a group restart ran.
pub(super) type Pending = VecDeque<(usize, ExitReason)>;
