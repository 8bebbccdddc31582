//! The `tracing` integration: every hook the runtime calls, behind the `tracing`
//! cargo feature (off by default). Without the feature each hook is an empty inline
//! function and [`SpanSlot`] is zero-sized: nothing is compiled in, and the cell
//! does not grow.
//!
//! # What is traced
//!
//! One span per process, `process` at DEBUG (target `wsched`) with the fields `pid`,
//! `entry` and `parent` (the PIDs as numbers; `parent` absent for a process spawned
//! from outside). It is made once, when the process is spawned, as an explicit root:
//! never a child of whatever span the spawner is in (a process outlives its spawner's
//! step, and a process tree would otherwise nest one level per generation). It is
//! entered once per step, on the stepping worker (a step run again at once after its
//! completions is a step of its own), and closed when the process ends (or when the
//! step it ended in returns). `init` runs on the spawner's thread, in the spawner's
//! context, before the span is first entered.
//!
//! Events, target `wsched` (those of one process inside its span):
//!
//! | level | message | fields |
//! |---|---|---|
//! | TRACE | `message` | `from`, `payload` (the type): a message the step receives |
//! | TRACE | `completion` | `tag`, `ok`: a completion the step receives |
//! | TRACE | `cancel` | a cancel the step receives |
//! | TRACE | `yield` | `tag`, `command` (the type): a command the step yielded |
//! | DEBUG | `spawned` | `pid`, `entry`, `parent` |
//! | DEBUG | `exited` | `pid`, `entry`, `reason` (an [`ExitReason`](crate::ExitReason)'s text) |
//! | WARN | `process failed` | `pid`, `entry`, `reason`: a failure (an error, or a link's) |
//! | WARN | `process panicked` | `pid`, `entry`, `phase`, `panic` (the message) |
//! | WARN | `dead letter` | `to`, `from`, `payload`, `reason` (a [`DeadLetterReason`]) |
//! | WARN | `long step` | `pid`, `entry`, `point`, `elapsed` |
//!
//! and, target `wsched::worker`, TRACE, with the `worker`'s index: `steal` (`victim`,
//! `taken`, `lifo`: whether it was the victim's LIFO slot), `park` and `unpark`
//! (`timed_out`: a watch over other workers' LIFO slots ran out, see `idle.rs`).
//!
//! # Cost
//!
//! With the feature on and no subscriber (or none interested in the span), a step
//! tests its disabled span, and its guard writes and tests a flag (about a dozen
//! instructions a step, counted with callgrind on `step_cost`); a spawn makes a
//! disabled span, and an end moves it out and makes one relaxed load of `tracing`'s
//! global maximum level; other events cost that load each. Event fields are worked
//! out only once a subscriber wants the event, out of line.

use std::time::Duration;

use crate::engine::cell::Owned;
use crate::engine::process::{Event, SuspendPoint, Yield};
use crate::entry_name::EntryName;
use crate::error::ProcessError;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::runtime::DeadLetterReason;

#[cfg(feature = "tracing")]
use tracing::{Level, Span};

/// Where a process's span lives: in its cell's header, made when it is spawned and
/// taken out when it ends. Zero-sized without the feature.
///
/// Only the process's owner touches it (whoever holds its RUNNING state, or the
/// spawner before the cell is shared): the same discipline as the body's, which
/// is what makes the unsynchronised cell sound (see [`Owned`]).
pub(crate) struct SpanSlot {
    #[cfg(feature = "tracing")]
    span: std::cell::UnsafeCell<Span>,
}

/// What a step holds while its process's span is entered: dropping it leaves the
/// span. A flag: the entered span itself waits in [`STEPPING`], so that a step
/// without a subscriber writes and tests one byte (a guard holding the span, or
/// an `Option` of one, cost several instructions a step to write and a call to
/// drop).
#[cfg(feature = "tracing")]
pub(crate) struct Entered(bool);

#[cfg(feature = "tracing")]
std::thread_local! {
    /// The spans of the steps running on this thread (one, as steps do not nest),
    /// entered, with a handle of their own: the step may end its process, which
    /// takes the span out of the cell and drops it.
    static STEPPING: std::cell::RefCell<Vec<tracing::span::EnteredSpan>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(feature = "tracing")]
impl Entered {
    /// Enters `span` until the returned guard is dropped.
    fn enter(span: &Span) -> Self {
        let entered = span.clone().entered();
        STEPPING.with(|stepping| stepping.borrow_mut().push(entered));
        Self(true)
    }

    /// Leaves the span entered last.
    #[cold]
    #[inline(never)]
    fn leave() {
        drop(STEPPING.with(|stepping| stepping.borrow_mut().pop()));
    }
}

#[cfg(feature = "tracing")]
impl Drop for Entered {
    #[inline(always)]
    fn drop(&mut self) {
        if self.0 {
            Self::leave();
        }
    }
}

/// What a step holds while its process's span is entered: nothing without the
/// feature (a unit struct rather than `()`, which a `let` would be linted for).
#[cfg(not(feature = "tracing"))]
pub(crate) struct Entered;

impl SpanSlot {
    /// No span: the slot of a cell not spawned yet.
    #[inline(always)]
    pub(crate) const fn none() -> Self {
        Self {
            #[cfg(feature = "tracing")]
            span: std::cell::UnsafeCell::new(Span::none()),
        }
    }

    /// The span of process `pid` running `entry`, spawned by `parent`: a root
    /// span, whatever span the spawner is in. The entry is read only if the span is
    /// enabled (reading it checks UTF-8: a cost without the feature, where an
    /// argument `&str` was made and not used).
    #[inline(always)]
    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
    pub(crate) fn process(pid: Pid, entry: &EntryName, parent: Option<Pid>) -> Self {
        Self {
            #[cfg(feature = "tracing")]
            span: std::cell::UnsafeCell::new(tracing::span!(
                target: "wsched",
                parent: None,
                Level::DEBUG,
                "process",
                pid = pid.as_u64(),
                entry = entry.as_str(),
                parent = parent.map(Pid::as_u64),
            )),
        }
    }

    /// The span.
    ///
    /// # Safety
    /// The caller owns the process (see the type's docs): nobody takes the span out
    /// meanwhile.
    #[cfg(feature = "tracing")]
    #[inline(always)]
    unsafe fn get(&self) -> &Span {
        // SAFETY: forwarded from the caller.
        unsafe { &*self.span.get() }
    }

    /// Takes the span out, leaving none.
    ///
    /// # Safety
    /// The caller owns the process and holds no reference from [`get`](Self::get).
    #[cfg(feature = "tracing")]
    #[inline(always)]
    unsafe fn take(&self) -> Span {
        // SAFETY: forwarded from the caller.
        unsafe { std::mem::replace(&mut *self.span.get(), Span::none()) }
    }
}

/// Whether the yields of the process whose span this is are traced one by one (its
/// span is enabled and TRACE events are on): then each must go through the
/// dispatch that traces it.
///
/// # Safety
/// The caller owns the process (see [`SpanSlot::get`]).
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) unsafe fn yields_traced(slot: &SpanSlot) -> bool {
    #[cfg(feature = "tracing")]
    {
        // SAFETY: forwarded from the caller.
        let span = unsafe { slot.get() };
        !span.is_disabled() && tracing::level_enabled!(Level::TRACE)
    }
    #[cfg(not(feature = "tracing"))]
    false
}

/// A process was spawned (its `init` succeeded): the DEBUG event `spawned`, in its
/// span. Called by the spawner, which owns the process until it is published.
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn spawned(owned: &Owned<'_>) {
    #[cfg(feature = "tracing")]
    if tracing::level_enabled!(Level::DEBUG) {
        // SAFETY: `owned` proves the caller owns the process.
        let span = unsafe { owned.span().get() };
        let cell = owned.cell();
        tracing::debug!(
            target: "wsched",
            parent: span,
            pid = cell.pid().as_u64(),
            entry = cell.entry(),
            parent = cell.parent().map(Pid::as_u64),
            "spawned"
        );
    };
}

/// A step begins with `events`: enters the process's span until the returned guard
/// is dropped, and traces what the step receives. A step whose span is disabled (no
/// subscriber wanted it when the process was spawned) is not traced at all: the
/// TRACE events of steps come with their span.
#[cfg(feature = "tracing")]
#[inline(always)]
pub(crate) fn step(owned: &Owned<'_>, events: &[Event]) -> Entered {
    // SAFETY: `owned` proves the caller owns the process.
    let span = unsafe { owned.span().get() };
    // Without a subscriber, all a step pays: a load and a branch here, a byte
    // written and tested by the guard, and a test of it if the step yields.
    if span.is_disabled() {
        return Entered(false);
    }
    traced_step(span, events)
}

/// [`step`] when there is something to trace.
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn traced_step(span: &Span, events: &[Event]) -> Entered {
    let entered = Entered::enter(span);
    if tracing::level_enabled!(Level::TRACE) {
        received(events);
    }
    entered
}

/// A step begins with `events` (nothing to trace without the feature).
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn step(_: &Owned<'_>, _: &[Event]) -> Entered {
    Entered
}

/// The TRACE events of what a step receives.
#[cfg(feature = "tracing")]
fn received(events: &[Event]) {
    for event in events {
        match event {
            Event::Message(message) => tracing::trace!(
                target: "wsched",
                from = message.from.map(Pid::as_u64),
                payload = message.payload.type_name(),
                "message"
            ),
            Event::Completion(completion) => tracing::trace!(
                target: "wsched",
                tag = completion.tag.0,
                ok = completion.result.is_ok(),
                "completion"
            ),
            Event::Cancel => tracing::trace!(target: "wsched", "cancel"),
        }
    }
}

/// The step `step` yielded `yields` (about to be dispatched, inside its span).
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn yields(step: &Entered, yields: &[Yield]) {
    #[cfg(feature = "tracing")]
    if step.0 {
        yielded(yields);
    };
}

/// The TRACE events of a step's yields.
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn yielded(yields: &[Yield]) {
    if !tracing::level_enabled!(Level::TRACE) {
        return;
    }
    for y in yields {
        tracing::trace!(
            target: "wsched",
            tag = y.tag().0,
            command = y.command_name(),
            "yield"
        );
    }
}

/// The process ends with `result` (the final one: after a link's verdict and a
/// panicking `close`). Takes its span out of the cell, and closes it, once the step
/// it may be ending in returns; the DEBUG event `exited`, and a WARN event for a
/// failure or a panic, in the span.
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn exited(owned: &Owned<'_>, result: &Result<Payload, ProcessError>) {
    #[cfg(feature = "tracing")]
    {
        // SAFETY: `owned` proves the caller owns the process, and no reference
        // from `get` outlives the hook that made it.
        let span = unsafe { owned.span().take() };
        if tracing::level_enabled!(Level::WARN) {
            exit_events(owned, &span, result);
        }
    }
}

/// The events of [`exited`].
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn exit_events(owned: &Owned<'_>, span: &Span, result: &Result<Payload, ProcessError>) {
    use crate::exit::ExitReason;

    let cell = owned.cell();
    let (pid, entry) = (cell.pid().as_u64(), cell.entry());
    let reason = ExitReason::of(result);
    match result {
        Err(ProcessError::Panicked { phase, message }) => tracing::warn!(
            target: "wsched",
            parent: span,
            pid,
            entry,
            phase = %phase,
            panic = message.as_str(),
            "process panicked"
        ),
        Err(_) if crate::engine::unobserved::is_failure(&reason) => tracing::warn!(
            target: "wsched",
            parent: span,
            pid,
            entry,
            reason = %reason,
            "process failed"
        ),
        _ => {}
    }
    tracing::debug!(
        target: "wsched",
        parent: span,
        pid,
        entry,
        reason = %reason,
        "exited"
    );
}

/// A message became a dead letter (see `dead_letters.rs`): the WARN event
/// `dead letter`, where it happened (the ending process's step, or the sender's).
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn dead_letter(to: Pid, from: Option<Pid>, payload: &Payload, reason: DeadLetterReason) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "wsched",
        to = to.as_u64(),
        from = from.map(Pid::as_u64),
        payload = payload.type_name(),
        reason = ?reason,
        "dead letter"
    );
}

/// For the long-step detector (`timing.rs`): process `pid` running `entry` has run
/// for `elapsed` in one step, which it began at `point` (where it was suspended;
/// `None` for its first step). Emits the WARN event `long step` (target `wsched`),
/// on the detector's thread: in no process's span.
#[inline]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn trace_long_step(
    pid: Pid,
    entry: &str,
    point: Option<&SuspendPoint>,
    elapsed: Duration,
) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "wsched",
        pid = pid.as_u64(),
        entry,
        point = point.map(tracing::field::display),
        elapsed = ?elapsed,
        "long step"
    );
}

/// Worker `worker` stole `taken` processes from worker `victim`'s deque, or (`lifo`)
/// the one in its LIFO slot.
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn steal(worker: usize, victim: usize, taken: usize, lifo: bool) {
    #[cfg(feature = "tracing")]
    tracing::trace!(
        target: "wsched::worker",
        worker,
        victim,
        taken,
        lifo,
        "steal"
    );
}

/// Worker `worker` is going to sleep.
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn park(worker: usize) {
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "wsched::worker", worker, "park");
}

/// Worker `worker` woke up: woken by a producer, or (`timed_out`) at the end of a
/// watch over other workers' LIFO slots.
#[inline(always)]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn unpark(worker: usize, timed_out: bool) {
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "wsched::worker", worker, timed_out, "unpark");
}

#[cfg(all(test, not(loom)))]
#[test]
fn the_slot_costs_the_cell_nothing_without_the_feature() {
    #[cfg(not(feature = "tracing"))]
    assert_eq!(std::mem::size_of::<SpanSlot>(), 0);
    #[cfg(feature = "tracing")]
    assert_eq!(std::mem::size_of::<SpanSlot>(), std::mem::size_of::<Span>());
}

#[cfg(all(test, feature = "tracing", not(loom)))]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event as TracingEvent, Metadata, Subscriber};

    /// An event's level and fields, as text.
    type Recorded = (Level, Vec<(String, String)>);

    /// Keeps each event.
    #[derive(Clone, Default)]
    struct Events(Arc<Mutex<Vec<Recorded>>>);

    struct Fields(Vec<(String, String)>);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push((field.name().to_owned(), format!("{value:?}")));
        }

        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.push((field.name().to_owned(), value.to_owned()));
        }
    }

    impl Subscriber for Events {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &TracingEvent<'_>) {
            let mut fields = Fields(Vec::new());
            event.record(&mut fields);
            let level = *event.metadata().level();
            self.0.lock().unwrap().push((level, fields.0));
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn a_long_step_is_a_warning_with_where_and_how_long() {
        let events = Events::default();
        let point = SuspendPoint {
            location: std::panic::Location::caller(),
            kind: crate::SuspendKind::Receive { message_type: None },
        };
        tracing::subscriber::with_default(events.clone(), || {
            trace_long_step(
                Pid::from_raw(7),
                "serve",
                Some(&point),
                Duration::from_millis(12),
            );
        });
        let recorded = events.0.lock().unwrap();
        let [(level, fields)] = &recorded[..] else {
            panic!("one event: {recorded:?}", recorded = recorded.len())
        };
        assert_eq!(*level, Level::WARN);
        let text = |name: &str| {
            fields
                .iter()
                .find(|(field, _)| field == name)
                .map(|(_, value)| value.clone())
        };
        assert_eq!(text("message").as_deref(), Some("long step"));
        assert_eq!(text("pid").as_deref(), Some("7"));
        assert_eq!(text("entry").as_deref(), Some("serve"));
        assert_eq!(text("elapsed").as_deref(), Some("12ms"));
        assert_eq!(text("point"), Some(point.to_string()));
    }
}
