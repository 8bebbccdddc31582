//! The layers put together: the state the engine keeps for them, and the engine's
//! [`Hooks`] into them (see `engine/hooks.rs`).

use std::sync::Arc;

use crate::command::blocking::BlockingPool;
use crate::command::handler::Handlers;
use crate::engine::cell::{CellRef, ProcessCell};
use crate::engine::counters::process_totals;
use crate::engine::hooks::{Hooks, Layers};
use crate::engine::process::Yield;
use crate::engine::shared::Shared;
use crate::error::{CancelError, ProcessError, SendError};
use crate::exit::ExitReason;
use crate::observe::instrument::Observers;
use crate::observe::metrics::{Metrics, ProcessInfo};
use crate::payload::Payload;
use crate::pid::Pid;
use crate::services::in_flight::InFlight;
use crate::services::monitors::Monitors;
use crate::services::names::Names;
use crate::services::remote::Remote;
use crate::services::timers::Timers;
use crate::tag::Tag;

/// The state of the layers above the engine, kept in [`Shared`].
pub(crate) struct State {
    pub(crate) handlers: Handlers,
    pub(crate) blocking: Arc<BlockingPool>,
    pub(crate) names: Names,
    /// Monitors and links.
    pub(crate) monitors: Monitors,
    pub(crate) timers: Arc<Timers>,
    pub(crate) in_flight: InFlight,
    pub(crate) observers: Observers,
    /// The cluster, if the scheduler joined one.
    pub(crate) remote: Remote,
    /// The tokio runtime that async handlers and sockets run on.
    #[cfg(feature = "tokio")]
    pub(crate) io: crate::io::IoRuntime,
}

/// `shared.part::<T>()` for each part.
macro_rules! parts {
    ($($field:ident: $part:ty),* $(,)?) => {
        $(impl AsRef<$part> for State {
            #[inline(always)]
            fn as_ref(&self) -> &$part {
                &self.$field
            }
        })*
    };
}

parts! {
    handlers: Handlers,
    blocking: Arc<BlockingPool>,
    names: Names,
    monitors: Monitors,
    timers: Arc<Timers>,
    in_flight: InFlight,
    observers: Observers,
    remote: Remote,
}

#[cfg(feature = "tokio")]
parts! {
    io: crate::io::IoRuntime,
}

impl Hooks for Layers {
    type State = State;

    #[inline(always)]
    fn dispatch(shared: &Shared, task: &CellRef, yielded: &mut Yield) {
        shared.handlers().dispatch(shared, task, yielded);
    }

    #[inline]
    fn withdraw(shared: &Shared, task: &CellRef, tag: Tag) {
        if task.timers().may_have_pending() {
            shared.timers().cancel(task.timers(), tag);
        }
        if task.has_work_out() {
            shared.in_flight().withdraw(task.pid(), tag);
        }
    }

    #[inline(always)]
    fn after_run() {
        crate::services::calls::unwound::settle();
    }

    #[inline]
    fn link_spawned(shared: &Shared, parent: Pid, child: Pid) {
        shared.monitors().link_spawned(parent, child);
    }

    #[inline(always)]
    fn watched(shared: &Shared) -> bool {
        shared.monitors().used()
    }

    #[inline]
    fn release_pending(shared: &Shared, cell: &ProcessCell) {
        if cell.timers().may_have_pending() {
            shared.timers().cancel_process(cell.timers());
        }
        if cell.has_work_out() {
            shared.in_flight().release(cell.pid());
        }
    }

    #[inline(always)]
    fn released(shared: &Shared, pid: Pid) {
        // One relaxed load until a name is first registered.
        let names = shared.names();
        if names.used() {
            names.release(pid);
        }
    }

    #[inline]
    fn take_kill(shared: &Shared, pid: Pid) -> Option<ProcessError> {
        shared.monitors().take_kill(pid)
    }

    #[inline]
    fn tell_watchers(
        shared: &Shared,
        pid: Pid,
        reason: &ExitReason,
        kills: &mut Vec<CellRef>,
    ) -> bool {
        shared.monitors().process_ended(shared, pid, reason, kills)
    }

    #[inline(never)]
    fn send_remote(
        shared: &Shared,
        from: Option<Pid>,
        to: Pid,
        payload: Payload,
        signal: bool,
    ) -> Result<(), SendError> {
        shared.send_to_node(from, to, payload, signal)
    }

    #[inline(never)]
    fn stop_remote(shared: &Shared, pid: Pid, kill: bool) -> Result<(), CancelError> {
        shared.stop_on_node(pid, kill)
    }

    fn release(shared: &Shared) {
        if let Some(nodes) = shared.remote() {
            nodes.close(shared);
        }
        shared.timers().shutdown();
        shared.blocking().shutdown();
        shared.in_flight().abort_all();
        #[cfg(feature = "tokio")]
        shared.io().shutdown();
    }
}

/// What the scheduler reports of itself: the engine's counts and each layer's.
impl Shared {
    pub(crate) fn metrics(&self) -> Metrics {
        let totals = process_totals(self.counters.iter().map(|c| &**c), &self.outside_counts);
        Metrics {
            workers: self
                .counters
                .iter()
                .zip(self.stealers.iter())
                .map(|(c, deque)| c.snapshot(deque.len(), self.clock.start()))
                .collect(),
            spawned: totals.spawned,
            finished: totals.finished,
            failed: totals.failed,
            stopped: totals.stopped,
            live: self.live(),
            global_queue: self.inject.len(),
            remote_schedules: self.inject.remote_pushes(),
            step_timing: self.timing().map(|t| t.metrics()),
            pending_timers: self.timers().pending(),
            undelivered_timed_messages: self.timers().undelivered(),
            blocking_threads: self.blocking().threads(),
            unobserved_failures: self.unobserved.count(),
            dead_letters: self.dead_letters.count(),
            dropped_messages: self.overflows.dropped(),
            rejected_messages: self.overflows.rejected(),
            work_in_flight: self.in_flight().len(),
            aborted_work: self.in_flight().aborted(),
            #[cfg(feature = "tokio")]
            async_handlers: self.io().metrics(),
            #[cfg(feature = "cluster")]
            cluster: self.remote().map(|nodes| nodes.metrics()),
        }
    }

    pub(crate) fn processes(&self) -> Vec<ProcessInfo> {
        let mut list: Vec<ProcessInfo> = self
            .cells()
            .into_iter()
            .filter(|cell| !cell.is_done())
            .map(|cell| {
                let (remote_links, remote_monitors) = if self.monitors().used() {
                    self.monitors().remote_ties(cell.pid())
                } else {
                    (Vec::new(), Vec::new())
                };
                let mut waiting_messages = cell.waiting_messages();
                self.held.add_to(cell.pid(), &mut waiting_messages);
                ProcessInfo {
                    pid: cell.pid(),
                    parent: cell.parent(),
                    state: cell.state(),
                    entry: cell.entry().to_owned(),
                    process_type: cell.process_type(),
                    steps: cell.steps(),
                    suspended_at: cell.suspend_point(),
                    mailbox: waiting_messages.iter().map(|m| m.count).sum(),
                    waiting_messages,
                    time_in_state: self.clock.since(cell.changed_at()),
                    busy: self.timing().map(|t| t.busy(cell.busy_ticks())),
                    bounded_mailbox: cell.mailbox_info(),
                    remote_links,
                    remote_monitors,
                }
            })
            .collect();
        list.sort_unstable_by_key(|info| info.pid);
        list
    }
}
