//! Observability's side of the engine's [`Instrument`] hooks: each event goes to the
//! recorder (when on), to step timing (when on) and to `tracing` (with the feature).

use crate::engine::cell::{CellRef, Owned};
use crate::engine::dead_letters::DeadLetterReason;
use crate::engine::hooks::{Instrument, Layers};
use crate::engine::process::{Event, Status, Yield};
use crate::engine::shared::Shared;
use crate::engine::worker::Caller;
use crate::entry_name::EntryName;
use crate::error::ProcessError;
use crate::observe::recorder::Recorder;
use crate::observe::timing::Timing;
use crate::observe::trace::{self, Entered, SpanSlot};
use crate::payload::Payload;
use crate::pid::Pid;

#[cfg(feature = "sim")]
use crate::observe::history::{self, Capture, HistoryState, Marks};
#[cfg(feature = "sim")]
use std::sync::Arc;

/// What the instruments keep in each process's cell: its `tracing` span, and with
/// the `sim` feature its history's capture (see `history.rs`).
#[cfg(not(feature = "sim"))]
type ProcessMarks = SpanSlot;
#[cfg(feature = "sim")]
type ProcessMarks = Marks;

/// Observability's state: the optional recorder and step timing (and with the
/// `sim` feature, recorded histories).
pub(crate) struct Observers {
    pub(crate) recorder: Option<Box<Recorder>>,
    pub(crate) timing: Option<Box<Timing>>,
    #[cfg(feature = "sim")]
    pub(crate) history: Box<HistoryState>,
}

impl Shared {
    /// The recorder, when [`Builder::record`](crate::Builder::record) turned it on.
    #[inline(always)]
    pub(crate) fn recorder(&self) -> Option<&Recorder> {
        self.part::<Observers>().recorder.as_deref()
    }

    /// Step timing, when [`Builder::step_timing`](crate::Builder::step_timing)
    /// turned it on.
    #[inline(always)]
    pub(crate) fn timing(&self) -> Option<&Timing> {
        self.part::<Observers>().timing.as_deref()
    }
}

/// What a step's instruments carry: its `tracing` span, entered, and its start for
/// step timing.
pub(crate) struct StepMarks {
    /// Keeps the process's span entered until the step is over.
    span: Entered,
    started: Option<u64>,
    /// The process's capture, if its history is recorded.
    #[cfg(feature = "sim")]
    history: Option<Arc<Capture>>,
}

impl Instrument for Layers {
    type ProcessSpan = ProcessMarks;
    type Step = StepMarks;

    #[inline(always)]
    fn no_span() -> ProcessMarks {
        #[cfg(feature = "sim")]
        return Marks::new(SpanSlot::none());
        #[cfg(not(feature = "sim"))]
        SpanSlot::none()
    }

    #[inline(always)]
    fn process_span(pid: Pid, entry: &EntryName, parent: Option<Pid>) -> ProcessMarks {
        #[cfg(feature = "sim")]
        return Marks::new(SpanSlot::process(pid, entry, parent));
        #[cfg(not(feature = "sim"))]
        SpanSlot::process(pid, entry, parent)
    }

    #[cfg(feature = "sim")]
    #[inline(always)]
    fn history_begins(
        shared: &Shared,
        span: &mut Marks,
        process_type: &'static str,
        entry: &str,
        input: &crate::payload::Payloads,
        requested: bool,
    ) {
        shared
            .part::<Observers>()
            .history
            .begins(span, process_type, entry, input, requested);
    }

    #[inline(always)]
    fn timing_steps(shared: &Shared) -> bool {
        shared.timing().is_some()
    }

    #[inline(always)]
    fn initialised(owned: &Owned<'_>) {
        trace::spawned(owned);
    }

    #[inline(always)]
    fn spawned(shared: &Shared, caller: Caller, cell: &CellRef) {
        if let Some(r) = shared.recorder() {
            r.spawned(caller, cell.pid(), cell.process_type(), cell.entry());
        }
        #[cfg(feature = "sim")]
        shared.part::<Observers>().history.spawned(cell);
    }

    #[inline(always)]
    fn runnable(shared: &Shared, worker: usize, pid: Pid) {
        if let Some(r) = shared.recorder() {
            r.runnable(worker, pid);
        }
    }

    #[inline(always)]
    fn runnable_outside(shared: &Shared, pid: Pid) {
        if let Some(r) = shared.recorder() {
            r.runnable_outside(pid);
        }
    }

    #[inline(always)]
    fn runnable_batch(shared: &Shared, cells: &[CellRef]) {
        if let Some(r) = shared.recorder() {
            r.runnable_batch(cells);
        }
    }

    #[inline(always)]
    fn idle(shared: &Shared, worker: usize) {
        if let Some(r) = shared.recorder() {
            r.idle(shared, worker);
        }
    }

    #[inline(always)]
    fn stole(shared: &Shared, worker: usize, victim: usize, taken: usize, lifo: bool) {
        if let Some(r) = shared.recorder() {
            r.steal(worker, victim, taken);
        }
        trace::steal(worker, victim, taken, lifo);
    }

    #[inline(always)]
    fn parked(shared: &Shared, worker: usize) {
        trace::park(worker);
        if let Some(r) = shared.recorder() {
            r.park(worker);
        }
    }

    #[inline(always)]
    fn unparked(shared: &Shared, worker: usize, timed_out: bool) {
        if timed_out {
            if let Some(r) = shared.recorder() {
                r.unpark(shared, worker);
            }
            trace::unpark(worker, true);
        } else {
            trace::unpark(worker, false);
            if let Some(r) = shared.recorder() {
                r.unpark(shared, worker);
            }
        }
    }

    #[inline(always)]
    fn step_begins(
        shared: &Shared,
        worker: usize,
        task: &CellRef,
        owned: &Owned<'_>,
        events: &[Event],
        woken: &mut bool,
    ) -> StepMarks {
        if let Some(r) = shared.recorder() {
            r.step_start(shared, worker, task.pid());
        }
        let span = trace::step(owned, events);
        let started = shared
            .timing()
            .map(|timing| timing.step_begins(worker, task.pid(), std::mem::take(woken)));
        StepMarks {
            span,
            started,
            #[cfg(feature = "sim")]
            history: history::step_begins(owned, events),
        }
    }

    #[inline(always)]
    fn step_returned(shared: &Shared, worker: usize, task: &CellRef, step: &StepMarks) {
        // `started` is there only with step timing on: no second look at it when off.
        if let Some(started) = step.started {
            if let Some(timing) = shared.timing() {
                task.add_busy(timing.step_ends(worker, started));
            }
        }
    }

    #[inline(always)]
    fn step_ended(shared: &Shared, worker: usize, pid: Pid, ok: bool, status: Option<&Status>) {
        if let Some(r) = shared.recorder() {
            r.step_end(worker, pid, ok, status);
        }
    }

    #[inline(always)]
    fn yielded(step: &StepMarks, yields: &[Yield]) {
        trace::yields(&step.span, yields);
        #[cfg(feature = "sim")]
        if let Some(capture) = &step.history {
            capture.yielded(yields);
        }
    }

    #[inline(always)]
    unsafe fn yields_watched(span: &ProcessMarks) -> bool {
        // SAFETY: forwarded from the caller.
        #[cfg(feature = "sim")]
        if unsafe { span.is_captured() } {
            return true;
        }
        // SAFETY: forwarded from the caller.
        unsafe { trace::yields_traced(span) }
    }

    #[inline(always)]
    fn exited(owned: &Owned<'_>, result: &Result<Payload, ProcessError>) {
        trace::exited(owned, result);
        #[cfg(feature = "sim")]
        history::exited(owned, result);
    }

    #[inline(always)]
    fn dead_letter(to: Pid, from: Option<Pid>, payload: &Payload, reason: DeadLetterReason) {
        trace::dead_letter(to, from, payload, reason);
    }
}
