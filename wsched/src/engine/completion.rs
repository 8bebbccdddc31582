//! Completions: the one-shot return path from a handler to the process that
//! yielded. [`RawCompleter`] is the untyped completer (the typed
//! [`Completer`](crate::command::Completer) wraps it); [`dispatch_direct`] lets a
//! handler that completes at once, on the worker, skip the mailbox.

use std::cell::{Cell, RefCell};

use crate::engine::cell::{CellRef, RefStock};
use crate::engine::handle::Handle;
use crate::engine::process::{drop_quietly, Completion, Event};
use crate::error::YieldError;
use crate::payload::Payload;
use crate::tag::Tag;

/// The untyped completer behind [`Completer`].
pub(crate) struct RawCompleter {
    /// The process, and through it the scheduler (see `ProcessCell::handle`).
    cell: CellRef,
    tag: Tag,
    /// The command's type name, for errors; a function pointer is a word where the
    /// name itself would be two.
    command: fn() -> &'static str,
}

/// How many `catch_panics` are active on this thread, and how many completers their
/// unwinding handlers parked in [`PARKED`] (so the dispatcher can complete them with
/// the panic message instead of the less helpful "dropped"; when no `catch_panics`
/// is active, a completer dropped while unwinding reports "dropped" at once). Plain
/// `Cell`s, const-initialised and without a destructor, so reaching them is a fixed
/// offset from the thread pointer: entering and leaving a handler, on the path of
/// every yield, costs two such reads and writes and nothing else.
struct Unwinding {
    depth: Cell<u32>,
    parked: Cell<u32>,
}

#[cfg(not(loom))]
thread_local! {
    static UNWINDING: Unwinding = const {
        Unwinding {
            depth: Cell::new(0),
            parked: Cell::new(0),
        }
    };
    /// Touched only when a handler unwinds.
    static PARKED: RefCell<Vec<RawCompleter>> = const { RefCell::new(Vec::new()) };
}
// loom runs its threads on one OS thread: thread-locals must be its own.
#[cfg(loom)]
loom::thread_local! {
    static UNWINDING: Unwinding = Unwinding {
        depth: Cell::new(0),
        parked: Cell::new(0),
    };
    static PARKED: RefCell<Vec<RawCompleter>> = RefCell::new(Vec::new());
}

/// The process a worker is dispatching the yields of (through the worker's stock of
/// references to it), and the buffer its next step's events collect in (see
/// [`dispatch_direct`]).
struct Direct {
    /// The `RefStock` passed to `dispatch_direct`, lifetime erased: it outlives the
    /// call, which is as long as this `Direct` is reachable.
    stock: *mut RefStock<'static>,
    events: Vec<Event>,
}

impl Direct {
    /// Whether `cell` is the process being dispatched.
    #[inline]
    fn is_for(&self, cell: &CellRef) -> bool {
        // SAFETY: as in `stock`.
        unsafe { &*self.stock }.is_for(cell)
    }

    /// The stock of references to the process being dispatched.
    #[inline]
    fn stock(&mut self) -> &mut RefStock<'static> {
        // SAFETY: `stock` came from the `&mut` that `dispatch_direct` holds for the
        // whole time this `Direct` is reachable, and is reached only through it
        // (see there).
        unsafe { &mut *self.stock }
    }
}

// The `Direct` of the `dispatch_direct` running on this thread, or null: a raw
// pointer into that call's frame, so that reaching it costs no lazy-init check and
// no `RefCell` flag (see `dispatch_direct` for why it is valid).
#[cfg(not(loom))]
thread_local! {
    static DIRECT: Cell<*mut Direct> = const { Cell::new(std::ptr::null_mut()) };
}
#[cfg(loom)]
loom::thread_local! {
    static DIRECT: Cell<*mut Direct> = Cell::new(std::ptr::null_mut());
}

/// Runs `dispatch` (the handler calls for the yields of a step of the process of
/// `stock`, on the worker that owns it: it is RUNNING) so that completions made by
/// those handlers at once, on this thread, go straight into `events` instead of the
/// mailbox: no lock, no wake flag, no re-queueing. The worker then steps the process
/// again with them right away. Completions made on other threads, or later, take
/// the mailbox.
///
/// The completers made meanwhile take their references from `stock`, and the ones
/// completed straight into `events` give them back (see `RefStock`).
#[inline]
pub(crate) fn dispatch_direct<R>(
    stock: &mut RefStock<'_>,
    events: &mut Vec<Event>,
    dispatch: impl FnOnce() -> R,
) -> R {
    /// Owns the `Direct` that `DIRECT` points to while `dispatch` runs, and puts
    /// the previous pointer and the buffer back even if `dispatch` unwinds.
    struct Restore<'a> {
        events: &'a mut Vec<Event>,
        direct: Direct,
        previous: *mut Direct,
    }
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            DIRECT.with(|d| d.set(self.previous));
            *self.events = std::mem::take(&mut self.direct.events);
        }
    }
    let direct = Direct {
        stock: std::ptr::from_mut(stock).cast::<RefStock<'static>>(),
        events: std::mem::take(events),
    };
    let mut restore = Restore {
        events,
        direct,
        previous: std::ptr::null_mut(),
    };
    // `restore` stays in this frame, unmoved and untouched, until it is dropped, and
    // its drop clears the pointer before using `direct` again: while `DIRECT` holds
    // the pointer, `try_direct` is the only code that touches `direct`.
    let current = &raw mut restore.direct;
    restore.previous = DIRECT.with(|d| d.replace(current));
    dispatch()
}

impl RawCompleter {
    pub(crate) fn new(cell: CellRef, tag: Tag, command: fn() -> &'static str) -> Self {
        Self { cell, tag, command }
    }

    /// The completer of a yield of `cell` being dispatched: its reference comes from
    /// the worker's stock when `cell` is the process `dispatch_direct` runs for.
    #[inline]
    pub(crate) fn for_yield(cell: &CellRef, tag: Tag, command: fn() -> &'static str) -> Self {
        let current = DIRECT.with(|d| d.get());
        // SAFETY: as in `deliver_with`; nothing else runs while this reference lives.
        let cell = match unsafe { current.as_mut() } {
            Some(direct) if direct.is_for(cell) => direct.stock().take(),
            _ => cell.clone(),
        };
        Self::new(cell, tag, command)
    }

    /// Takes the completer apart without completing the yield (its `Drop` would).
    fn into_fields(self) -> (CellRef, Tag, fn() -> &'static str) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the cell's count is moved out exactly
        // once; the other fields are `Copy`.
        let cell = unsafe { std::ptr::read(&this.cell) };
        (cell, this.tag, this.command)
    }

    /// Delivers the completion event; ignored if the process has ended.
    pub(crate) fn deliver(self, result: Result<Payload, YieldError>) {
        self.deliver_with(|| result);
    }

    /// [`deliver`](Self::deliver) of what `result` makes, made where it goes: when
    /// the completion goes straight to the step being dispatched on this thread, the
    /// event is built in place in that step's buffer. (Built first and then moved,
    /// it was copied through memory and read back wider than it was written: a
    /// store-forwarding stall on every completion.)
    #[inline]
    pub(crate) fn deliver_with(self, result: impl FnOnce() -> Result<Payload, YieldError>) {
        let (cell, tag, _) = self.into_fields();
        let current = DIRECT.with(|d| d.get());
        // SAFETY: a non-null `DIRECT` points to the `Direct` of a `dispatch_direct`
        // running on this thread, alive until that call clears the pointer, and
        // touched by nobody else meanwhile (see there). `result` builds a payload or
        // an error and runs no code that could reach `DIRECT`, so this reference is
        // the only one while it lives.
        let direct = unsafe { current.as_mut() };
        if let Some(direct) = direct.filter(|direct| direct.is_for(&cell)) {
            let events = &mut direct.events;
            events.reserve(1);
            let len = events.len();
            // SAFETY: `reserve` made room for one more; the slot is written, then
            // counted.
            unsafe {
                events
                    .as_mut_ptr()
                    .add(len)
                    .write(Event::Completion(Completion {
                        tag,
                        result: result(),
                    }));
                events.set_len(len + 1);
            }
            direct.stock().put_back(cell);
            return;
        }
        let event = Event::Completion(Completion {
            tag,
            result: result(),
        });
        // A finished process hands the event back: dropping it is the documented
        // "completion after the process ended is ignored". It holds the handler's
        // output, whose drop may panic on whatever thread completes.
        if let Err(event) = cell.handle().shared().deliver(&cell, event) {
            drop_quietly(event);
        }
    }

    /// Like [`deliver`](Self::deliver), but a process this wakes is added to `woken`
    /// instead of being queued, so a batch of completions (timers firing together)
    /// is queued with one lock and one wake-up (`Shared::schedule_batch`).
    pub(crate) fn deliver_deferred(
        self,
        result: Result<Payload, YieldError>,
        woken: &mut Vec<CellRef>,
    ) {
        let (cell, tag, _) = self.into_fields();
        let event = Event::Completion(Completion { tag, result });
        match cell.push_event(event) {
            // SAFETY: this push woke it, so its waiting reference is ours, once (the
            // completer's own is dropped here).
            Ok(true) => woken.push(unsafe { CellRef::woken(&cell) }),
            Ok(false) => {}
            Err(event) => drop_quietly(event),
        }
    }

    pub(crate) fn handle(&self) -> &Handle {
        self.cell.handle()
    }
}

/// A completer dropped without completing its yield completes it as dropped (or,
/// while its handler unwinds, is parked for `catch_panics` to complete with the
/// panic's message). The consuming methods take it apart instead.
impl Drop for RawCompleter {
    fn drop(&mut self) {
        if std::thread::panicking() && UNWINDING.with(|u| u.depth.get()) > 0 {
            let parked = PARKED.with(|parked| match parked.try_borrow_mut() {
                Ok(mut parked) => {
                    parked.push(self.take());
                    true
                }
                Err(_) => false,
            });
            if parked {
                UNWINDING.with(|u| u.parked.set(u.parked.get() + 1));
                return;
            }
        }
        let command = (self.command)();
        self.take().deliver(Err(YieldError::Dropped { command }));
    }
}

impl RawCompleter {
    /// Takes the completer apart without completing the yield, giving back what it
    /// was made of (the caller makes a new completer from them).
    pub(crate) fn into_parts(self) -> (CellRef, Tag) {
        let (cell, tag, _) = self.into_fields();
        (cell, tag)
    }

    /// A copy of the completer, to complete in the place of `self` (which is being
    /// dropped).
    fn take(&mut self) -> RawCompleter {
        RawCompleter::new(self.cell.clone(), self.tag, self.command)
    }
}

/// Runs a handler call, turning a panic into [`YieldError::HandlerPanicked`] for the
/// completer(s) its unwinding dropped.
#[inline]
pub(crate) fn catch_panics(call: impl FnOnce()) {
    let mark = UNWINDING.with(|u| {
        u.depth.set(u.depth.get() + 1);
        u.parked.get()
    });
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
    let parked = UNWINDING.with(|u| {
        u.depth.set(u.depth.get() - 1);
        let parked = u.parked.get();
        u.parked.set(mark);
        parked
    });
    // Only a handler that unwound parked anything; the common case returns here,
    // having touched two thread-local `Cell`s.
    if let Err(panic) = outcome {
        settle_unwound(mark, parked, Some(&*panic));
    } else if parked > mark {
        settle_unwound(mark, parked, None);
    }
}

/// Completes the completers parked (`mark..parked` in `PARKED`) while a handler
/// unwound: with the panic's message if the handler panicked, else as dropped (some
/// inner code unwound and the handler caught it).
#[cold]
#[inline(never)]
fn settle_unwound(mark: u32, parked: u32, panic: Option<&(dyn std::any::Any + Send)>) {
    let unwound: Vec<RawCompleter> = if parked > mark {
        PARKED.with(|p| p.borrow_mut().drain(mark as usize..).collect())
    } else {
        Vec::new()
    };
    let message = panic.map(crate::runtime::panic_message);
    for completer in unwound {
        let command = (completer.command)();
        let error = match &message {
            Some(message) => YieldError::HandlerPanicked {
                command,
                message: message.clone(),
            },
            None => YieldError::Dropped { command },
        };
        completer.deliver(Err(error));
    }
}

// ---- for the timer service (time/timer.rs) ----------------------------------

impl RawCompleter {
    /// The process that yielded.
    pub(crate) fn cell(&self) -> &CellRef {
        &self.cell
    }

    /// The yield's tag.
    /// Completes the yield with an error: the process sees [`YieldError::Failed`]
    /// naming the command.
    pub(crate) fn fail(self, error: impl Into<crate::error::BoxError>) {
        let command = (self.command)();
        self.deliver(Err(YieldError::Failed {
            command,
            source: error.into(),
        }));
    }

    /// The name of the command whose yield this completes.
    pub(crate) fn command_name(&self) -> &'static str {
        (self.command)()
    }

    pub(crate) fn tag(&self) -> Tag {
        self.tag
    }

    /// Drops the completer without completing the yield: the process withdrew it or
    /// ended, so nobody waits for it.
    pub(crate) fn release(self) {
        drop(self.into_fields());
    }
}
