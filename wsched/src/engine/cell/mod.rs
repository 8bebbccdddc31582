//! One process as the scheduler holds it: the body, the mailbox (its MPSC event
//! queue), its state word and the slot its result waits in until claimed, all in
//! one allocation made when the process is created (see [`ProcessCell`]).

use std::alloc::Layout;
use std::fmt;
use std::mem::{self, ManuallyDrop};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::engine::bounded::{Bounded, MailboxInfo, Push, Pushed};
use crate::engine::completion::RawCompleter;
use crate::engine::context::Context;
use crate::engine::handle::Handle;
use crate::engine::held::add_messages;
use crate::engine::held::MessageCount;
use crate::engine::hooks::{Instrument, Layers};
use crate::engine::process::{
    Event, Events, IntoProcess, Message, PackedPoint, Process, StepOutput, SuspendPoint,
};
use crate::engine::shared::Filler;
use crate::engine::state::{AfterStep, EventKind, ProcessState, State, StopRequest, Suspend};
use crate::engine::worker::Caller;
use crate::entry_name::EntryName;
use crate::error::{InitError, StepError};
use crate::error::{JoinError, ProcessError};
use crate::payload::{PackedPayloads, Payload, Payloads};
use crate::pid::Pid;
use crate::runtime::panic_message;
use crate::spin_lock::{MailboxGuard, MailboxLock};
use crate::sync::{AtomicU32, AtomicU64, Ordering, UnsafeCell};
use crate::time::timer::TimerList;

mod recycle;
mod reference;

/// The recycler's cache, for its loom model and its stress test.
#[cfg(test)]
pub(crate) use recycle::cache as block_cache;
pub(crate) use recycle::{give_back_spare_blocks, keep_blocks_on_this_thread};
pub(crate) use reference::{CellRef, RefStock, ThinCell};

/// Receives the answer to a claim of a process's result, exactly once. The two
/// claims the runtime makes are variants of their own, so a join or a wait does
/// not box a closure.
pub(crate) enum ResultWaiter {
    /// A `Join` command's completer: the answer completes it.
    Join(RawCompleter),
    /// A blocking `wait` on some thread.
    Wait(Filler),
    /// Anything else (the loom models).
    #[cfg_attr(not(loom), allow(dead_code))]
    Call(Box<dyn FnOnce(Result<Payload, JoinError>) + Send>),
}

impl ResultWaiter {
    pub(crate) fn answer(self, result: Result<Payload, JoinError>) {
        match self {
            Self::Join(done) => done.deliver_with(|| Ok(Payload::new(result))),
            Self::Wait(filler) => filler.fill(result),
            Self::Call(call) => call(result),
        }
    }
}

/// A process and everything the scheduler keeps about it, in one allocation: the
/// [`Header`] and, after it, the process itself (`B`, a concrete type when the cell
/// is made, `dyn Process` everywhere after). Spawning a process therefore allocates
/// once for the process and its bookkeeping, where a boxed process in a separate
/// cell took two allocations, two frees and a pointer chase on every step.
///
/// `repr(C)` puts the header at offset 0 whatever `B` is, so a thin pointer to the
/// cell is a valid pointer to its header, from which its [`CellType::to_fat`]
/// rebuilds the full (`dyn`) pointer: see [`CellRef::into_thin`].
#[repr(C)]
pub(crate) struct ProcessCell<B: ?Sized = dyn Process> {
    header: Header,
    /// Touched only through [`Owned`], i.e. by whoever holds the RUNNING state (or
    /// through `&mut` before the cell is published). Live while `header.body_live`.
    body: UnsafeCell<ManuallyDrop<B>>,
}

/// Everything about a process but the process itself.
///
/// `repr(C)`, in this order: what a message's sender and its receiver touch — the
/// state word, the reference count, the mailbox's lock and its first event — comes
/// first, in 64 bytes, so that a message handed between cores moves one or two
/// cache lines of the cell instead of three or four (they were spread over 108
/// bytes). The owner's own fields follow.
#[repr(C)]
pub(crate) struct Header {
    state: State,
    /// How many [`CellRef`]s (and their thin forms) there are: the cell's own
    /// reference count (see `reference.rs`). 32 bits, so that it shares a word with
    /// the state.
    refs: AtomicU32,
    /// The event queue. Producers (senders, completers, shutdown) push under the
    /// lock; the owner moves everything out in one go before a step, so a mailbox
    /// costs one short lock per event and per step. See [`Mailbox`] for why it
    /// allocates nothing in steady state and holds no buffer while idle. The mailbox
    /// is closed (its outcome leaves `Pending`, under the same lock) before the
    /// process is marked done: a producer that finds it open knows its event will be
    /// seen or dropped by the owner, never lost in a queue nobody reads without the
    /// producer being told.
    mailbox: MailboxLock<Mailbox>,
    /// When the process last began or ended a step (or was spawned), in
    /// milliseconds of the scheduler's coarse clock (see [`CoarseClock`]), wrapping:
    /// what listings show as the time in its current state. Written only by the
    /// owner; a statistic, so a plain std atomic even under loom.
    changed_at: std::sync::atomic::AtomicU32,
    /// The process's pending timers, linked by the timer service (under its lock).
    /// Withdrawing a yield or ending the process looks for timers only if there are
    /// some, so processes that never sleep never take the timer lock.
    timers: TimerList,
    /// Ticks of the scheduler's step-timing clock its steps took, if step timing is
    /// on (see `timing.rs`). Written only by the owner; a statistic, so a plain std
    /// atomic even under loom. (It fits in what the allocator rounds a cell up to:
    /// the memory per idle process did not change.)
    busy: std::sync::atomic::AtomicU64,
    /// The number of steps taken, and two flags in its top bits ([`BODY_LIVE`],
    /// [`DETACHED`]): one word where three fields took two. Written only by the owner
    /// (a plain load and store, no locked instruction), or before the cell is shared.
    steps: AtomicU64,
    pid: Pid,
    /// The scheduler running the process (`None` only for cells made by unit tests
    /// and loom models, and before spawning). Completers and the process's `Context`
    /// reach the scheduler through the cell, so a yield or a send touches the
    /// process's own reference count, never the scheduler's, which every worker
    /// would contend on.
    handle: Option<Handle>,
    parent: Option<Pid>,
    /// What the cell knows of its body's concrete type: the one place that
    /// remembers it. A pointer to a static per process type, one word, as the
    /// `to_fat` function pointer it replaced.
    cell_type: &'static CellType,
    entry: EntryName,
    /// Where the process waits, for listings. Only the owner writes it (through
    /// [`Owned`], and as it ends, in `end_with`), under the mailbox lock; others read
    /// it under that lock; the owner reads it without (no write can race with its
    /// reads). So a process suspending
    /// at the same place step after step — the common case — compares and takes no
    /// lock, and the point costs no lock and no second copy of its own.
    suspended_at: UnsafeCell<Option<PackedPoint>>,
    /// The instruments' span of the process (its `tracing` span, zero-sized
    /// without the `tracing` feature; see `hooks.rs`). Only the owner touches it,
    /// as the body.
    span: <Layers as Instrument>::ProcessSpan,
}

// SAFETY: `body` and `suspended_at` are the only fields that are not `Sync` by
// themselves. The body (and whether it is live) is accessed only through `Owned`, which
// exists only while its holder owns the RUNNING state (see the "one owner" invariant
// in `state.rs`), or through `&mut` before the cell is shared, so no two threads ever
// touch them at once, and the AcqRel CASes that pass ownership on order one owner's
// accesses before the next's. The body is `Send`, so moving that access between
// threads is sound. `suspended_at` is written only by the owner and under the
// mailbox lock, and read by others only under that lock (a `Copy` value). `span` is
// the owner's alone, as the body.
unsafe impl<B: ?Sized + Send> Sync for ProcessCell<B> {}
// SAFETY: as above; the rest of the header is `Sync`.
unsafe impl Sync for Header {}

impl std::ops::Deref for ProcessCell {
    type Target = Header;

    fn deref(&self) -> &Header {
        &self.header
    }
}

/// In [`Header::steps`]: the body holds a live process (it is dropped in place when
/// the process ends, while the cell lives on as long as references to it do).
const BODY_LIVE: u64 = 1 << 63;
/// In [`Header::steps`]: the process's result is discarded when it finishes. Set
/// when the cell is made, never changed.
const DETACHED: u64 = 1 << 62;
/// In [`Header::steps`]: the process is to be linked to its parent when it is
/// spawned (`spawn_linked`). Set before the cell is shared, read once by the spawn.
const LINK_PARENT: u64 = 1 << 61;
/// In [`Header::steps`]: the process is a supervisor's child, which the supervisor
/// stops in order when the scheduler shuts down (see `Shared::cancel_all`). Set
/// before the cell is shared, never changed.
const SUPERVISED: u64 = 1 << 60;
/// In [`Header::steps`]: work for one of the process's yields was registered as in
/// flight (a blocking or async handler's; see `services/in_flight.rs`), so
/// withdrawing a yield, ending the process and delivering a completion to it look
/// for that work. Sticky: set by the worker dispatching the yield, never cleared.
const WORK_OUT: u64 = 1 << 59;
/// In [`Header::steps`]: the process's history is to be recorded from its entry on
/// (`SpawnOptions::record_history`, the `sim` feature). Set before the cell is
/// shared, read once by the spawn: a flag in the cell, so that it survives a
/// `Spawn` command's stash, which must stay two words.
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
const RECORD_HISTORY: u64 = 1 << 58;
/// The step count's bits in [`Header::steps`].
const STEP_COUNT: u64 = RECORD_HISTORY - 1;

impl<B: ?Sized> Drop for ProcessCell<B> {
    /// A cell dropped with a live body is one whose process never ran to its end: it
    /// was never spawned (a `Spawn` command nobody handled) or the scheduler forgot
    /// it. Whoever may drop user data on a worker drops cells quietly.
    fn drop(&mut self) {
        let flags = self.header.steps.load(Ordering::Relaxed);
        self.header
            .steps
            .store(flags & !BODY_LIVE, Ordering::Relaxed);
        if flags & BODY_LIVE != 0 {
            // SAFETY: the body is live (just checked and cleared, so never dropped
            // twice), and `&mut self` excludes every other access.
            self.body
                .with_mut(|body| unsafe { ManuallyDrop::drop(&mut *body) });
        }
    }
}

/// Events in arrival order: the oldest in `first`, later ones in `rest` (which is
/// empty while `first` is). Most processes get one event between two steps, which
/// `first` holds without an allocation; `rest` grows only for a process that gets
/// bursts, and gives its memory back when a burst was large. (An earlier version
/// swapped the worker's step buffer into the mailbox, so each idle process held
/// some worker's old step buffer, of whatever size that worker's steps had grown
/// it to.)
///
/// The lock also guards the process's [`Outcome`] (taken rarely: to claim the result
/// and to publish it), so a cell carries one lock and its padding, not two.
///
/// `repr(C)`: the first event comes first, next to the lock (see [`Header`]).
#[repr(C)]
struct Mailbox {
    first: First,
    /// Boxed: a word in every cell rather than a `Vec`'s three, as most processes
    /// never get a burst.
    #[expect(
        clippy::box_collection,
        reason = "the box keeps the cell small; the extra allocation comes with the first burst only"
    )]
    rest: Option<Box<Vec<Event>>>,
    outcome: Outcome,
}

/// The oldest event, or why there is none. `Closed` and `Bounded` ride in the
/// event's spare variant values, so closing and bounding cost the mailbox no field
/// of their own, and a push to an unbounded mailbox no branch it did not take before.
enum First {
    Empty,
    /// The process has ended (or is ending): events are refused. Set under the lock
    /// before the process is marked done.
    Closed,
    Event(Event),
    /// A bounded mailbox (see `engine/bounded.rs`): every event is in there, and
    /// `rest` stays empty. Set before the cell is shared; replaced by `Closed`.
    Bounded(Box<Bounded>),
}

/// A burst buffer larger than this is freed when emptied rather than kept.
const MAILBOX_KEEP: usize = 16;

impl Mailbox {
    fn new(outcome: Outcome) -> Self {
        Self {
            first: First::Empty,
            rest: None,
            outcome,
        }
    }

    /// Whether the process has ended (or is ending): events are refused.
    fn is_closed(&self) -> bool {
        matches!(self.first, First::Closed)
    }

    /// Queues `event` in an open mailbox (as taking no room, if it is bounded).
    #[inline]
    fn push(&mut self, event: Event) {
        match &mut self.first {
            First::Empty => {
                debug_assert!(self.rest.as_ref().is_none_or(|rest| rest.is_empty()));
                // Without the drop glue of the `Empty` it overwrites (see
                // `Header::push_message`).
                mem::forget(mem::replace(&mut self.first, First::Event(event)));
            }
            First::Event(_) => self.rest.get_or_insert_default().push(event),
            First::Bounded(bounded) => bounded.push_uncounted(event),
            First::Closed => unreachable!("the caller checked that the mailbox is open"),
        }
    }

    /// The types of the queued messages, by type (for listings).
    fn message_types(&self) -> Vec<MessageCount> {
        let mut summary = Vec::new();
        let mut count = |event: &Event| {
            if let Event::Message(message) = event {
                add_messages(&mut summary, message.payload.type_name(), 1);
            }
        };
        match &self.first {
            First::Event(first) => {
                count(first);
                self.rest
                    .iter()
                    .flat_map(|rest| rest.iter())
                    .for_each(count);
            }
            First::Bounded(bounded) => bounded.events().for_each(count),
            First::Empty | First::Closed => {}
        }
        summary
    }

    /// Moves every event, oldest first, to the end of `buffer`, but for those of a
    /// burst buffer larger than [`MAILBOX_KEEP`]: that buffer is taken out whole
    /// and returned, for the caller to append to `buffer` once it has unlocked the
    /// mailbox ([`Burst::append_to`]). Copying a fan-in's hundreds of events and
    /// freeing their buffer under the lock kept every sender spinning meanwhile.
    /// `owner` is the process's header, for a bounded mailbox's
    /// [`DropOwed`](super::DropOwed).
    fn drain_into(&mut self, buffer: &mut Vec<Event>, owner: &Header) -> Burst {
        if let First::Event(_) = self.first {
            let First::Event(first) = mem::replace(&mut self.first, First::Empty) else {
                unreachable!("matched an event")
            };
            buffer.push(first);
            if let Some(rest) = &mut self.rest {
                if rest.capacity() > MAILBOX_KEEP {
                    return Burst(self.rest.take());
                }
                buffer.append(rest);
            }
        } else if let First::Bounded(bounded) = &mut self.first {
            bounded.drain_into(buffer, owner.pid, owner.handle.as_ref());
        }
        Burst(None)
    }
}

/// The events of a burst [`Mailbox::drain_into`] took out of the mailbox whole,
/// which follow those it moved into the caller's buffer.
#[must_use = "the burst's events follow those drained: append them"]
#[expect(
    clippy::box_collection,
    reason = "the mailbox's own box, moved out whole: no allocation of its own"
)]
struct Burst(Option<Box<Vec<Event>>>);

impl Burst {
    /// Appends the burst's events to `buffer`, outside the mailbox's lock, and frees
    /// their buffer.
    #[inline]
    fn append_to(self, buffer: &mut Vec<Event>) {
        if let Some(mut rest) = self.0 {
            buffer.append(&mut rest);
        }
    }
}

enum Outcome {
    /// A child a `Spawn` command carries, not spawned yet: its input (see
    /// [`StashedProcess`]).
    Unstarted(PackedPayloads),
    Pending {
        waiter: Option<ResultWaiter>,
    },
    Finished(Result<Payload, ProcessError>),
    /// Finished with a failure that a monitor or a link was told of: not reported
    /// as unclaimed when the scheduler is dropped (see `engine/unobserved.rs`).
    Observed(Result<Payload, ProcessError>),
    Claimed,
}

/// Proof that the holder owns the process's RUNNING state, and with it the body.
pub(crate) struct Owned<'a> {
    cell: &'a ProcessCell,
}

impl ProcessCell {
    /// A READY cell holding `body`, without a scheduler (for the loom models).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn ready<P: Process>(
        pid: Pid,
        parent: Option<Pid>,
        entry: &str,
        detached: bool,
        body: P,
    ) -> CellRef {
        let mut cell = Self::unspawned(|| body, entry, detached);
        let header = &mut CellRef::get_mut(&mut cell).expect("just made").header;
        header.pid = pid;
        header.parent = parent;
        header.state = State::new_ready();
        cell
    }

    /// A RUNNING cell holding `process`, owned by whoever made it; no PID or
    /// scheduler yet.
    fn unspawned<P: Process>(make: impl FnOnce() -> P, entry: &str, detached: bool) -> CellRef {
        // SAFETY: the closure writes both fields of the cell, body and header, in
        // place; only `make` may unwind, and it runs before anything is written.
        unsafe {
            CellRef::new_in_place(|cell: *mut ProcessCell<P>| {
                (&raw mut (*cell).body).write(UnsafeCell::new(ManuallyDrop::new(make())));
                (&raw mut (*cell).header).write(Header {
                    refs: AtomicU32::new(1),
                    changed_at: std::sync::atomic::AtomicU32::new(0),
                    busy: std::sync::atomic::AtomicU64::new(0),
                    pid: Pid::UNSPAWNED,
                    handle: None,
                    parent: None,
                    entry: EntryName::new(entry),
                    state: State::new_running(),
                    mailbox: MailboxLock::new(Mailbox::new(Outcome::Pending { waiter: None })),
                    steps: AtomicU64::new(BODY_LIVE | if detached { DETACHED } else { 0 }),
                    suspended_at: UnsafeCell::new(None),
                    timers: TimerList::new(),
                    cell_type: CellType::of::<P>(),
                    span: <Layers as Instrument>::no_span(),
                });
            })
        }
    }
}

impl Header {
    /// Marks `now` (of the scheduler's coarse clock) as when the process entered its
    /// current state. Called by the owner only (and by the spawner, before the cell
    /// is shared).
    #[inline]
    pub(crate) fn stamp(&self, now: u32) {
        self.changed_at
            .store(now, std::sync::atomic::Ordering::Relaxed);
    }

    /// Adds a step's `ticks` to its busy time (owner only).
    #[inline]
    pub(crate) fn add_busy(&self, ticks: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.busy.store(self.busy.load(Relaxed) + ticks, Relaxed);
    }

    /// Its busy time, in ticks.
    pub(crate) fn busy_ticks(&self) -> u64 {
        self.busy.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The last [`stamp`](Self::stamp).
    pub(crate) fn changed_at(&self) -> u32 {
        self.changed_at.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl ProcessCell {
    /// READY → RUNNING: the owner's token, and whether the mailbox may hold events
    /// for the process (see "Pending events" in `state.rs`).
    #[inline]
    pub(crate) fn start_running(&self) -> Option<(Owned<'_>, bool)> {
        let pending = self.state.start_running()?;
        Some((Owned { cell: self }, pending))
    }

    /// Shutdown stopping the process: `Some` when the caller took it over and must
    /// end it; `None` when it had ended or its worker will end it after its step (see
    /// [`State::request_stop`]). The caller reaches the cell through a reference of
    /// its own (a counted one, not a borrow from a table): a process claimed from
    /// waiting gives its waiting reference back here (see "The waiting reference" in
    /// `state.rs`), which is therefore never the last.
    pub(crate) fn request_stop(&self) -> Option<Owned<'_>> {
        match self.state.request_stop() {
            StopRequest::Claimed { waiting } => {
                if waiting {
                    // Release, as a drop.
                    let before = self.refs.fetch_sub(1, Ordering::Release);
                    debug_assert!(before > 1, "the claimer holds a reference of its own");
                }
                Some(Owned { cell: self })
            }
            StopRequest::Flagged | StopRequest::Done => None,
        }
    }

    /// Takes back a process whose owner's token was dropped by unwinding (see
    /// "Orphans" in `state.rs`), to end it.
    pub(crate) fn reclaim_orphan(&self) -> Option<Owned<'_>> {
        self.state.reclaim_orphan().then(|| Owned { cell: self })
    }
}

/// The `dyn` pointer to a cell whose body is a `P`, from the pointer to its header.
fn fat_cell<P: Process>(header: *const Header) -> *const ProcessCell {
    header.cast::<ProcessCell<P>>() as *const ProcessCell
}

/// What a cell keeps of its body's concrete type, in a static per process type
/// (see [`CellType::of`]), so that a cell holds one pointer for all of it.
pub(crate) struct CellType {
    /// Rebuilds the `dyn` pointer to the whole cell from a pointer to its header.
    pub(crate) to_fat: fn(*const Header) -> *const ProcessCell,
    /// The type listings and recordings name the process by
    /// ([`Process::__type_name`]): read only for them, never by a step.
    type_name: fn() -> &'static str,
    /// The whole cell's layout, which its block was allocated with: read from here
    /// when the cell is destroyed (`Layout::for_value` recomputed it from the
    /// vtable's size and alignment, ~20 instructions of every process's end).
    pub(crate) layout: Layout,
}

/// [`CellType`]'s static for a `P`: an associated constant, which `&` promotes to
/// a `'static` (Rust has no generic statics).
trait HasCellType: Process {
    const CELL_TYPE: CellType;
}

impl<P: Process> HasCellType for P {
    const CELL_TYPE: CellType = CellType {
        to_fat: fat_cell::<P>,
        type_name: <P as Process>::__type_name,
        layout: Layout::new::<ProcessCell<P>>(),
    };
}

impl CellType {
    /// The static of cells whose body is a `P`.
    fn of<P: Process>() -> &'static Self {
        &<P as HasCellType>::CELL_TYPE
    }
}

/// A process not spawned yet, already in the cell it will run in (so spawning it
/// allocates nothing more), with its entry and input.
pub(crate) struct NewProcess {
    cell: CellRef,
    /// Beside the cell, not in it: the cell would have to grow by the input's size
    /// for the whole life of the process.
    input: Payloads,
}

impl NewProcess {
    /// The unspawned process `process` (made into its cell's body in place: see
    /// [`CellRef::new_in_place`]) to run entry `entry` with `input`.
    pub(crate) fn new(
        process: impl IntoProcess,
        entry: &str,
        input: Payloads,
        detached: bool,
    ) -> Self {
        Self {
            cell: ProcessCell::unspawned(move || process.into_process(), entry, detached),
            input,
        }
    }

    /// Asks for its history to be recorded from its entry on (see
    /// `observe/history.rs`).
    #[cfg(feature = "sim")]
    pub(crate) fn record_history(&mut self) {
        let steps = &self.header_mut().steps;
        steps.store(
            steps.load(Ordering::Relaxed) | RECORD_HISTORY,
            Ordering::Relaxed,
        );
    }

    /// The entry it is to run.
    pub(crate) fn entry(&self) -> &str {
        self.cell.entry()
    }

    /// Whether its result will be discarded.
    pub(crate) fn is_detached(&self) -> bool {
        self.cell.is_detached()
    }

    /// Asks for the process to be linked to its parent as it is spawned, before it
    /// can run (see `services/links.rs`).
    pub(crate) fn link_to_parent(mut self) -> Self {
        let steps = &self.header_mut().steps;
        steps.store(
            steps.load(Ordering::Relaxed) | LINK_PARENT,
            Ordering::Relaxed,
        );
        self
    }

    /// Whether it is to be linked to its parent as it is spawned.
    #[inline]
    pub(crate) fn links_to_parent(&self) -> bool {
        self.cell.links_to_parent()
    }

    /// Marks it as a supervisor's child: the scheduler's shutdown leaves stopping
    /// it to its supervisor (see `Shared::cancel_all`).
    pub(crate) fn supervised(mut self) -> Self {
        let steps = &self.header_mut().steps;
        steps.store(
            steps.load(Ordering::Relaxed) | SUPERVISED,
            Ordering::Relaxed,
        );
        self
    }

    /// Discards its result when it finishes (see `SpawnOptions::detached`).
    pub(crate) fn detach(&mut self) {
        let steps = &self.header_mut().steps;
        steps.store(steps.load(Ordering::Relaxed) | DETACHED, Ordering::Relaxed);
    }

    /// Gives it the bounded mailbox `bounded` (see `engine/bounded.rs`), telling
    /// the process, which says whether it holds messages it takes in.
    pub(crate) fn bound_mailbox(&mut self, bounded: Bounded) {
        let holds = self.process_mut().__bounded_mailbox();
        let bounded = bounded.holding(holds);
        let mailbox = self.header_mut().mailbox.get_mut();
        debug_assert!(matches!(mailbox.first, First::Empty | First::Bounded(_)));
        mailbox.first = First::Bounded(Box::new(bounded));
    }

    /// Whether it was given a bounded mailbox of capacity 0, which no message could
    /// ever enter: the spawn refuses it.
    #[inline]
    pub(crate) fn has_zero_capacity(&mut self) -> bool {
        matches!(&self.header_mut().mailbox.get_mut().first, First::Bounded(b) if b.capacity() == 0)
    }

    fn header_mut(&mut self) -> &mut Header {
        &mut CellRef::get_mut(&mut self.cell)
            .expect("an unspawned process's cell is not shared")
            .header
    }

    /// Takes the input for `init` (empty the second time).
    pub(crate) fn take_input(&mut self) -> Payloads {
        mem::take(&mut self.input)
    }

    /// Moves the input into the cell, for a `Spawn` command: the command then
    /// stays one word pair, so it travels inline in its payload.
    pub(crate) fn stash(mut self) -> StashedProcess {
        let input = self.take_input().pack();
        self.header_mut().mailbox.get_mut().outcome = Outcome::Unstarted(input);
        StashedProcess { cell: self.cell }
    }

    /// The process itself, for the testing harness, which runs it outside any
    /// scheduler.
    pub(crate) fn process_mut(&mut self) -> &mut dyn Process {
        let cell =
            CellRef::get_mut(&mut self.cell).expect("an unspawned process's cell is not shared");
        assert!(
            cell.header.steps.load(Ordering::Relaxed) & BODY_LIVE != 0,
            "the process was dropped"
        );
        // SAFETY: `&mut` access to the whole cell, and the body is live.
        cell.body.with_mut(|body| unsafe { &mut **body })
    }

    /// Makes the process `pid` of `handle`'s scheduler, spawned by `caller`: `init`
    /// gets a reference to
    /// the cell (for the process's `Context`), the process, its entry and its input,
    /// and returns the error that refuses the spawn, if any (the process is then
    /// dropped, quietly). The cell is RUNNING, owned by this function, until `init`
    /// succeeds; it is returned READY, for the caller to register and queue, with a
    /// second reference for the PID table.
    pub(crate) fn spawn<E>(
        mut self,
        handle: &Handle,
        caller: Caller,
        pid: Pid,
        parent: Option<Pid>,
        init: impl FnOnce(CellRef, &mut dyn Process, &str, Payloads) -> Result<(), E>,
    ) -> Result<Spawned, E> {
        let input = self.take_input();
        let header = self.header_mut();
        #[cfg(feature = "sim")]
        let record_history = header.steps.load(Ordering::Relaxed) & RECORD_HISTORY != 0;
        header.pid = pid;
        header.handle = Some(crate::engine::worker::lend_handle(handle, caller));
        header.parent = parent;
        header.span = <Layers as Instrument>::process_span(pid, &header.entry, parent);
        // Before `init` consumes the input: the history's entry and arguments.
        #[cfg(feature = "sim")]
        <Layers as Instrument>::history_begins(
            handle.shared(),
            &mut header.span,
            (header.cell_type.type_name)(),
            header.entry.as_str(),
            &input,
            record_history,
        );
        // The counts of the `Context`'s reference and the PID table's, added with
        // plain loads and stores while this is the only reference (`header_mut`
        // checked): cloning it twice was two locked instructions per spawn.
        let refs = header.refs.load(Ordering::Relaxed);
        header.refs.store(refs + 2, Ordering::Relaxed);
        let cell = self.cell;
        // SAFETY: each owns one of the two counts added above.
        let (for_context, for_table) = unsafe { (CellRef::adopt(&cell), CellRef::adopt(&cell)) };
        let mut owned = Owned { cell: &cell };
        let initialised = owned
            .with_body(|body| init(for_context, body, cell.entry(), input))
            .expect("an unspawned process has its body");
        match initialised {
            Ok(()) => {
                <Layers as Instrument>::initialised(&owned);
                // Not published yet: nobody else can reach its state.
                owned.release().state.make_ready_unshared();
                Ok(Spawned { cell, for_table })
            }
            Err(error) => {
                drop(for_table);
                // Never published: nobody will look at it again. The body may hold
                // a `Context` (a reference to the cell): dropping it ends the cycle.
                let _ = owned.drop_body();
                owned.release();
                Err(error)
            }
        }
    }
}

/// A process [`NewProcess::spawn`] initialised: READY, not yet in the PID table.
pub(crate) struct Spawned {
    /// The reference that queues and runs it.
    pub(crate) cell: CellRef,
    /// The PID table's reference.
    pub(crate) for_table: CellRef,
}

/// A [`NewProcess`] whose input waits in its cell (see [`NewProcess::stash`]).
pub(crate) struct StashedProcess {
    cell: CellRef,
}

impl StashedProcess {
    /// The process with its input back beside the cell, to spawn.
    pub(crate) fn unstash(mut self) -> NewProcess {
        let cell =
            CellRef::get_mut(&mut self.cell).expect("an unspawned process's cell is not shared");
        let outcome = &mut cell.header.mailbox.get_mut().outcome;
        let input = match mem::replace(outcome, Outcome::Pending { waiter: None }) {
            Outcome::Unstarted(input) => input.unpack(),
            _ => unreachable!("a stashed process's input waits in its cell"),
        };
        NewProcess {
            cell: self.cell,
            input,
        }
    }

    /// The entry it is to run.
    pub(crate) fn entry(&self) -> &str {
        self.cell.entry()
    }

    /// Whether its result will be discarded.
    pub(crate) fn is_detached(&self) -> bool {
        self.cell.is_detached()
    }

    /// Whether it is to be linked to its parent as it is spawned.
    pub(crate) fn links_to_parent(&self) -> bool {
        self.cell.links_to_parent()
    }
}

impl fmt::Debug for NewProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewProcess")
            .field("entry", &self.entry())
            .field("detached", &self.is_detached())
            .finish_non_exhaustive()
    }
}

/// The testing harness runs spawned processes through this.
impl Process for NewProcess {
    fn init(&mut self, ctx: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        self.process_mut().init(ctx, method, input)
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        self.process_mut().step(events, out)
    }

    fn close(&mut self) {
        self.process_mut().close();
    }

    unsafe fn __stays_in_place(&mut self) {
        // SAFETY: the process lives in the cell's own allocation, which moving this
        // handle does not move; the caller's promise carries over.
        unsafe { self.process_mut().__stays_in_place() }
    }

    fn __bounded_mailbox(&mut self) -> bool {
        self.process_mut().__bounded_mailbox()
    }
}

impl Header {
    /// The scheduler running this process.
    pub(crate) fn handle(&self) -> &Handle {
        self.handle
            .as_ref()
            .expect("a process run by a scheduler has its handle")
    }

    /// Whether the instruments look at each of this process's yields (see
    /// [`Instrument::yields_watched`]).
    ///
    /// # Safety
    /// The caller owns the process: it runs in a step of it.
    #[inline]
    pub(crate) unsafe fn yields_watched(&self) -> bool {
        // SAFETY: forwarded from the caller; only the owner touches the span.
        unsafe { <Layers as Instrument>::yields_watched(&self.span) }
    }

    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    pub(crate) fn parent(&self) -> Option<Pid> {
        self.parent
    }

    pub(crate) fn entry(&self) -> &str {
        self.entry.as_str()
    }

    /// The type the process is named by in listings and recordings, in full, as
    /// [`std::any::type_name`] spells it: the struct of a `#[process]`, the
    /// implementing type of a hand-written process.
    pub(crate) fn process_type(&self) -> &'static str {
        (self.cell_type.type_name)()
    }

    /// The instruments' span of the process (see `hooks.rs`), for the spawner,
    /// which owns the cell until it is published (`Instrument::spawned`).
    #[cfg(feature = "sim")]
    pub(crate) fn unpublished_span(&self) -> &<Layers as Instrument>::ProcessSpan {
        &self.span
    }

    /// What rebuilds the `dyn` pointer from the header (see [`CellRef::from_thin`]).
    #[inline(always)]
    pub(crate) fn cell_type(&self) -> &'static CellType {
        self.cell_type
    }

    pub(crate) fn state(&self) -> ProcessState {
        self.state.snapshot()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state.is_done()
    }

    pub(crate) fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed) & STEP_COUNT
    }

    /// Whether the process's result is discarded when it finishes.
    pub(crate) fn is_detached(&self) -> bool {
        self.steps.load(Ordering::Relaxed) & DETACHED != 0
    }

    /// Whether the process is to be linked to its parent as it is spawned.
    #[inline]
    pub(crate) fn links_to_parent(&self) -> bool {
        self.steps.load(Ordering::Relaxed) & LINK_PARENT != 0
    }

    /// Whether the process is a supervisor's child (see `NewProcess::supervised`).
    pub(crate) fn is_supervised(&self) -> bool {
        self.steps.load(Ordering::Relaxed) & SUPERVISED != 0
    }

    /// Whether work for one of its yields was ever registered as in flight (see
    /// `services/in_flight.rs`).
    #[inline(always)]
    pub(crate) fn has_work_out(&self) -> bool {
        self.steps.load(Ordering::Relaxed) & WORK_OUT != 0
    }

    /// Notes that work for one of its yields is registered as in flight. Only on the
    /// thread that owns the process (the worker dispatching its yields), as every
    /// write of `steps`, and before the work can be withdrawn or complete.
    pub(crate) fn set_work_out(&self) {
        if !self.has_work_out() {
            self.steps.fetch_or(WORK_OUT, Ordering::Relaxed);
        }
    }

    /// The process's pending timers.
    pub(crate) fn timers(&self) -> &TimerList {
        &self.timers
    }

    pub(crate) fn suspend_point(&self) -> Option<SuspendPoint> {
        let _mailbox = self.mailbox.lock();
        // SAFETY: read under the mailbox lock, which every write holds.
        self.suspended_at
            .with(|point| unsafe { *point })
            .map(PackedPoint::unpack)
    }

    /// The messages queued in its mailbox (not yet taken in by a step), by type.
    pub(crate) fn waiting_messages(&self) -> Vec<MessageCount> {
        self.mailbox.lock().message_types()
    }

    /// Whether the mailbox is closed: the process has ended or is ending. Takes the
    /// mailbox lock, which is what orders a monitor against the end (see
    /// `monitors.rs`).
    pub(crate) fn is_closing(&self) -> bool {
        self.mailbox.lock().is_closed()
    }

    /// Queues `event`. `Ok(true)`: the caller woke the process and must schedule it.
    /// `Err(event)`: the process has finished; the event is handed back.
    pub(crate) fn push_event(&self, event: Event) -> Result<bool, Event> {
        let kind = match &event {
            Event::Completion(_) => EventKind::Completion,
            Event::Message(_) => EventKind::Message,
            Event::Cancel => EventKind::Cancel,
        };
        {
            let mut mailbox = self.mailbox.lock();
            if mailbox.is_closed() {
                return Err(event);
            }
            mailbox.push(event);
        }
        // After the push: see the "no lost wake-up" invariant in `state.rs`.
        Ok(self.state.notify(kind))
    }

    /// Queues the message in `message` (taking it out); see [`Pushed`] for what is
    /// left there. A `signal` (a `Down`, an `Exit`) takes no room in a bounded
    /// mailbox and is never refused for want of it.
    ///
    /// [`push_event`](Self::push_event) for the hot path of sends: the message moves
    /// once, into the mailbox, where an event built by the caller, passed in and
    /// handed back in a `Result` was copied through memory three times, stalling on
    /// wide reads of narrow writes each time (see `perf annotate` of a fan-in).
    #[inline]
    pub(crate) fn push_message(&self, message: &mut Option<Message>, signal: bool) -> Pushed {
        let Some(taken) = message.take() else {
            return Pushed::Closed;
        };
        let mut mailbox = self.mailbox.lock();
        match mailbox.first {
            First::Closed => {
                *message = Some(taken);
                return Pushed::Closed;
            }
            // `Mailbox::push` written out: one switch on the slot, where an unbounded
            // send tested it for `Closed`, then for `Empty`.
            First::Empty => {
                debug_assert!(mailbox.rest.as_ref().is_none_or(|rest| rest.is_empty()));
                // `Empty` owns nothing: overwriting it without its drop glue (which
                // the bounded variant made a call) is what an assignment would do.
                mem::forget(mem::replace(
                    &mut mailbox.first,
                    First::Event(Event::Message(taken)),
                ));
            }
            First::Event(_) => mailbox
                .rest
                .get_or_insert_default()
                .push(Event::Message(taken)),
            First::Bounded(_) => return self.push_bounded(mailbox, taken, message, signal),
        }
        drop(mailbox);
        // After the push: see the "no lost wake-up" invariant in `state.rs`.
        Pushed::Queued {
            woke: self.state.notify(EventKind::Message),
        }
    }

    /// [`push_message`](Self::push_message) into a bounded mailbox.
    #[cold]
    #[inline(never)]
    fn push_bounded(
        &self,
        mut mailbox: MailboxGuard<'_, Mailbox>,
        taken: Message,
        message: &mut Option<Message>,
        signal: bool,
    ) -> Pushed {
        let First::Bounded(bounded) = &mut mailbox.first else {
            unreachable!("called for a bounded mailbox")
        };
        let pushed = bounded.push_message(taken, signal);
        drop(mailbox);
        // After the push, as above.
        match pushed {
            Push::Queued => Pushed::Queued {
                woke: self.state.notify(EventKind::Message),
            },
            Push::Displaced(oldest) => {
                *message = Some(oldest);
                Pushed::Displaced {
                    woke: self.state.notify(EventKind::Message),
                }
            }
            // The process owes a drop from its own buffer: woken as a completion
            // would wake it, even while it waits for yields, so that it drops the
            // message at once (see `engine/bounded.rs`).
            Push::Owed => Pushed::Queued {
                woke: self.state.notify(EventKind::Completion),
            },
            Push::Full(refused) => {
                *message = Some(refused);
                Pushed::Full
            }
        }
    }

    /// A `#[process]` with a bounded mailbox reports, at the end of a step, how
    /// many counted messages it took in and holds unreceived (see
    /// `engine/bounded.rs`).
    pub(crate) fn set_held(&self, held: usize) {
        if let First::Bounded(bounded) = &mut self.mailbox.lock().first {
            bounded.report_held(held);
        }
    }

    /// The process's bounded mailbox as listed; `None`: unbounded.
    pub(crate) fn mailbox_info(&self) -> Option<MailboxInfo> {
        match &self.mailbox.lock().first {
            First::Bounded(bounded) => Some(bounded.info()),
            _ => None,
        }
    }

    /// Claims the result for `waiter`, which is called exactly once: now, with the
    /// result of a finished process or the reason the claim fails (detached, already
    /// claimed), or later, when the process finishes. A result is handed out once.
    /// Returns true when the result was handed out now (the PID table may forget the
    /// cell).
    pub(crate) fn claim_result(&self, waiter: ResultWaiter) -> bool {
        if self.is_detached() {
            waiter.answer(Err(JoinError::Detached(self.pid)));
            return false;
        }
        let mut mailbox = self.mailbox.lock();
        let outcome = &mut mailbox.outcome;
        match outcome {
            Outcome::Pending {
                waiter: slot @ None,
            } => {
                *slot = Some(waiter);
                false
            }
            Outcome::Unstarted(_) => unreachable!("only spawned processes are claimed"),
            Outcome::Pending { waiter: Some(_) } | Outcome::Claimed => {
                drop(mailbox);
                waiter.answer(Err(JoinError::AlreadyClaimed(self.pid)));
                false
            }
            Outcome::Finished(_) | Outcome::Observed(_) => {
                let (Outcome::Finished(result) | Outcome::Observed(result)) =
                    mem::replace(outcome, Outcome::Claimed)
                else {
                    unreachable!("matched Finished")
                };
                drop(mailbox);
                waiter.answer(self.joined(result));
                true
            }
        }
    }

    fn joined(&self, result: Result<Payload, ProcessError>) -> Result<Payload, JoinError> {
        result.map_err(|error| JoinError::Failed {
            pid: self.pid,
            error,
        })
    }

    /// Takes the error of a finished process whose result nobody claimed (the
    /// scheduler is being dropped: see `engine/unobserved.rs`). `None` when there
    /// is none: running, claimed, or finished with an output.
    pub(crate) fn take_unclaimed_error(&self) -> Option<ProcessError> {
        let mut mailbox = self.mailbox.lock();
        let outcome = &mut mailbox.outcome;
        if !matches!(outcome, Outcome::Finished(Err(_))) {
            return None;
        }
        match mem::replace(outcome, Outcome::Claimed) {
            Outcome::Finished(Err(error)) => Some(error),
            _ => unreachable!("matched Finished(Err)"),
        }
    }

    /// Marks a stored (unclaimed) result as observed by a monitor or a link.
    pub(crate) fn mark_observed(&self) {
        let mut mailbox = self.mailbox.lock();
        let outcome = &mut mailbox.outcome;
        if matches!(outcome, Outcome::Finished(_)) {
            let Outcome::Finished(result) = mem::replace(outcome, Outcome::Claimed) else {
                unreachable!("matched Finished")
            };
            *outcome = Outcome::Observed(result);
        }
    }

    /// Withdraws a registered waiter (a wait that timed out). Returns false when the
    /// result was already handed to it.
    pub(crate) fn withdraw_waiter(&self) -> bool {
        let mut mailbox = self.mailbox.lock();
        let outcome = &mut mailbox.outcome;
        match outcome {
            Outcome::Pending { waiter } => waiter.take().is_some(),
            Outcome::Unstarted(_) => unreachable!("only spawned processes are claimed"),
            _ => false,
        }
    }

    /// Marks the process done and stores the result, or hands it to the registered
    /// waiter (outside the lock). Returns true when the result has been handed out
    /// (or discarded, for a detached process), so the PID table no longer needs the
    /// cell. Called by the owner (whose token is spent): one pass through the
    /// mailbox lock clears the suspension point, marks the end and stores the result,
    /// where these were two.
    fn end_with(&self, result: Result<Payload, ProcessError>) -> bool {
        let waiter = {
            let mut mailbox = self.mailbox.lock();
            // SAFETY: the owner writes under the mailbox lock, which every other
            // reader holds (see `Header::suspended_at`).
            self.suspended_at.with_mut(|point| unsafe { *point = None });
            // Under the lock, so a registration passing through it after this sees
            // the process done (see `names.rs`).
            self.state.set_done();
            let outcome = &mut mailbox.outcome;
            match mem::replace(outcome, Outcome::Claimed) {
                Outcome::Pending { waiter: Some(w) } => Some(w),
                Outcome::Pending { waiter: None } if self.is_detached() => None,
                Outcome::Pending { waiter: None } => {
                    *outcome = Outcome::Finished(result);
                    return false;
                }
                Outcome::Unstarted(_)
                | Outcome::Finished(_)
                | Outcome::Observed(_)
                | Outcome::Claimed => {
                    unreachable!("a process finishes once")
                }
            }
        };
        match waiter {
            Some(w) => w.answer(self.joined(result)),
            // Detached: nobody wants the result. Its drop may run user code that
            // panics, on a worker that must survive it.
            // A value whose drop does nothing is forgotten, without the catch.
            None => match result {
                Ok(payload) if !payload.needs_drop() => mem::forget(payload),
                result => crate::runtime::drop_quietly(result),
            },
        }
        true
    }
}

impl<'a> Owned<'a> {
    pub(crate) fn cell(&self) -> &ProcessCell {
        self.cell
    }

    /// The process's span (see `hooks.rs`), which only the owner touches.
    #[cfg(any(feature = "tracing", feature = "sim"))]
    pub(crate) fn span(&self) -> &<Layers as Instrument>::ProcessSpan {
        &self.cell.span
    }

    /// Moves the queued events into `buffer` (the worker's, which keeps its
    /// capacity from step to step).
    pub(crate) fn take_events(&mut self, buffer: &mut Vec<Event>) {
        debug_assert!(buffer.is_empty());
        let burst = self.cell.mailbox.lock().drain_into(buffer, self.cell);
        burst.append_to(buffer);
    }

    /// Between two steps run back to back: appends to `buffer` whatever arrived in
    /// the mailbox meanwhile (nothing to do, and no lock, if no wake flag is set).
    /// Returns `false` if shutdown asked to stop the process: it must not step again.
    pub(crate) fn refill_events(&mut self, buffer: &mut Vec<Event>) -> bool {
        let (stop, woken) = self.cell.state.running_flags();
        if stop {
            return false;
        }
        if woken {
            self.cell.state.clear_wake_flags();
            let burst = self.cell.mailbox.lock().drain_into(buffer, self.cell);
            burst.append_to(buffer);
        }
        true
    }

    /// Runs `f` on the body; `None` once the process was closed.
    pub(crate) fn with_body<R>(&mut self, f: impl FnOnce(&mut dyn Process) -> R) -> Option<R> {
        // SAFETY (both blocks): `Owned` exists only while its holder owns the RUNNING
        // state, so no other thread can be inside this cell's body (see the Sync
        // impl above); the body is live, just checked.
        let live = self.cell.steps.load(Ordering::Relaxed) & BODY_LIVE != 0;
        live.then(|| self.cell.body.with_mut(|body| f(unsafe { &mut **body })))
    }

    /// Calls the body's `close`, then drops it in place, each under its own
    /// `catch_unwind` (a panicking drop after a panicking `close` must not abort).
    /// `Err`: the first panic's message. Nothing to do once the body is gone.
    pub(crate) fn close_body(&mut self) -> Result<(), String> {
        let Some(closed) = self.with_body(|body| catch_unwind(AssertUnwindSafe(|| body.close())))
        else {
            return Ok(());
        };
        let dropped = self.drop_body();
        closed.map_err(|panic| panic_message(&*panic)).and(dropped)
    }

    /// Drops the body in place, catching a panic (`Err`: its message). The cell's
    /// memory stays until the last reference to it goes.
    pub(crate) fn drop_body(&mut self) -> Result<(), String> {
        // Cleared before the drop, so a panicking drop leaves a body nobody drops
        // again. Only the owner writes these bits (see `Header::steps`).
        let flags = self.cell.steps.load(Ordering::Relaxed);
        if flags & BODY_LIVE == 0 {
            return Ok(());
        }
        self.cell.steps.store(flags & !BODY_LIVE, Ordering::Relaxed);
        self.cell
            .body
            .with_mut(|body| {
                // SAFETY: as in `with_body`; the body was live and is dropped once.
                catch_unwind(AssertUnwindSafe(|| unsafe {
                    ManuallyDrop::drop(&mut *body)
                }))
            })
            .map_err(|panic| panic_message(&*panic))
    }

    /// Counts a step and publishes where it left the process waiting. By reference:
    /// the comparison reads the point field by field, where a copy would load it
    /// whole right after the step stored it piecewise (a store-forwarding stall).
    pub(crate) fn record_step(&mut self, point: &Option<PackedPoint>) {
        let steps = &self.cell.steps;
        steps.store(steps.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        // SAFETY: the owner is the only writer, so its unlocked read races with no
        // write (see `Header::suspended_at`).
        let unchanged = self
            .cell
            .suspended_at
            .with(|published| unsafe { *published == *point });
        if !unchanged {
            self.publish_suspend_point(*point);
        }
    }

    fn publish_suspend_point(&mut self, point: Option<PackedPoint>) {
        let _mailbox = self.cell.mailbox.lock();
        // SAFETY: the owner writes under the mailbox lock, which every other reader
        // holds (see `Header::suspended_at`).
        self.cell
            .suspended_at
            .with_mut(|published| unsafe { *published = point });
    }

    /// Leaves RUNNING after a step: `Ok(true)` means READY again (queue it),
    /// `Ok(false)` waiting, and the caller's reference to the cell now belongs to the
    /// waiting process: the caller must forget it, not drop it (see "The waiting
    /// reference" in `state.rs`). `Err` hands the token back: shutdown asked to stop
    /// the process, end it.
    pub(crate) fn finish_step(self, suspend: Suspend) -> Result<bool, Self> {
        match self.cell.state.finish_step(suspend) {
            AfterStep::Ready => {
                self.release();
                Ok(true)
            }
            AfterStep::Waiting => {
                self.release();
                Ok(false)
            }
            AfterStep::Stop => Err(self),
        }
    }

    /// Gives up the token without the orphan mark of its `Drop`: the caller is about
    /// to make the transition that ends ownership.
    fn release(self) -> &'a ProcessCell {
        let cell = self.cell;
        std::mem::forget(self);
        cell
    }

    /// First half of ending the process: closes the mailbox, so later sends fail and
    /// get their message back. Returns the events nobody will read, to be dropped
    /// outside the lock.
    pub(crate) fn close_mailbox(&mut self) -> Vec<Event> {
        let mut leftovers = Vec::new();
        let mut mailbox = self.cell.mailbox.lock();
        if let First::Empty = mailbox.first {
            // Nothing queued (events after a first one only ever follow it): most
            // ends. Without the drop glue of the `Empty` it overwrites, nor the
            // drain's branches.
            mem::forget(mem::replace(&mut mailbox.first, First::Closed));
            return leftovers;
        }
        let burst = mailbox.drain_into(&mut leftovers, self.cell);
        mailbox.first = First::Closed;
        drop(mailbox);
        burst.append_to(&mut leftovers);
        leftovers
    }

    /// Second half: marks the process done and stores or hands out `result`. Returns
    /// whether the result was handed out (or discarded, for a detached process), so
    /// the PID table may forget the cell.
    pub(crate) fn finish(self, result: Result<Payload, ProcessError>) -> bool {
        self.release().end_with(result)
    }
}

impl Drop for Owned<'_> {
    /// Reached only when the owner unwinds before leaving RUNNING: mark the process so
    /// the worker that catches the panic can reclaim and end it.
    fn drop(&mut self) {
        self.cell.state.mark_orphaned();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Counts its drops in `drops`; `align(64)` so the body sits at another offset
    /// than a word-aligned one would.
    #[repr(align(64))]
    struct Counted {
        drops: Arc<AtomicUsize>,
        _bulk: [u8; 100],
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.drops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl Process for Counted {
        fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
            Ok(())
        }

        fn step(&mut self, _: Events<'_>, _: &mut StepOutput) -> Result<(), StepError> {
            Ok(())
        }
    }

    fn counted() -> (Counted, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        let body = Counted {
            drops: drops.clone(),
            _bulk: [7; 100],
        };
        (body, drops)
    }

    fn drops(counter: &AtomicUsize) -> usize {
        counter.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn a_stock_of_references_buys_in_bulk_and_gives_back_what_it_did_not_hand_out() {
        let (body, dropped) = counted();
        let cell = ProcessCell::ready(Pid::from_raw(3), None, "run", false, body);
        let (kept, back) = {
            let mut stock = RefStock::new(&cell);
            assert!(stock.is_for(&cell));
            let first = stock.take();
            // One batch bought: the count covers every reference it can hand out.
            let bought = CellRef::count(&cell);
            assert!(bought > 2, "a batch, not one by one ({bought})");
            let second = stock.take();
            let third = stock.take();
            assert_eq!(CellRef::count(&cell), bought, "taking touches no count");
            assert!(CellRef::ptr_eq(&first, &cell) && CellRef::ptr_eq(&third, &cell));
            stock.put_back(second);
            stock.put_back(third);
            assert_eq!(
                CellRef::count(&cell),
                bought,
                "putting back touches no count"
            );
            (first, bought)
        };
        // The stock gave back all but the one still handed out.
        assert!(back > 2);
        assert_eq!(CellRef::count(&cell), 2);
        drop(kept);
        assert_eq!(CellRef::count(&cell), 1);
        drop(cell);
        assert_eq!(
            drops(&dropped),
            1,
            "the cell is freed once, by its last reference"
        );
    }

    #[test]
    fn a_reference_that_outlives_the_stock_keeps_the_cell_alive() {
        let (body, dropped) = counted();
        let cell = ProcessCell::ready(Pid::from_raw(4), None, "run", false, body);
        let escaped = RefStock::new(&cell).take();
        drop(cell);
        assert_eq!(drops(&dropped), 0);
        assert_eq!(CellRef::count(&escaped), 1);
        drop(escaped);
        assert_eq!(drops(&dropped), 1);
    }

    #[test]
    fn a_thin_pointer_gives_back_the_same_cell_with_its_body() {
        let (body, dropped) = counted();
        let cell = ProcessCell::ready(Pid::from_raw(9), None, "run", false, body);
        let address = CellRef::as_ptr(&cell).cast::<u8>();
        let thin = CellRef::into_thin(cell);
        assert_eq!(thin.cast::<u8>().as_ptr().cast_const(), address);
        // SAFETY: `thin` came from `into_thin` just above, taken back once.
        let cell = unsafe { CellRef::from_thin(thin) };
        assert_eq!(cell.pid(), Pid::from_raw(9));
        assert_eq!(CellRef::count(&cell), 1);
        let (mut owned, _) = cell.start_running().expect("READY");
        let seen = owned.with_body(|body| {
            // The vtable is the body's: `Counted`'s alignment and size survive.
            (std::mem::align_of_val(body), std::mem::size_of_val(body))
        });
        assert_eq!(seen, Some((64, std::mem::size_of::<Counted>())));
        assert_eq!(owned.drop_body(), Ok(()));
        assert_eq!(drops(&dropped), 1);
        assert!(owned.with_body(|_| ()).is_none(), "the body is gone");
        assert_eq!(owned.drop_body(), Ok(()), "dropping twice does nothing");
        owned.release();
        drop(cell);
        assert_eq!(drops(&dropped), 1, "the cell does not drop a dropped body");
    }

    #[test]
    fn closing_and_bounding_a_mailbox_cost_no_room() {
        assert_eq!(
            std::mem::size_of::<First>(),
            std::mem::size_of::<Event>(),
            "`Closed` and `Bounded` ride in the event's spare values"
        );
    }

    #[test]
    fn a_burst_is_drained_in_order_and_only_a_large_ones_buffer_leaves_the_mailbox() {
        let (body, _) = counted();
        let cell = ProcessCell::ready(Pid::from_raw(1), None, "run", false, body);
        // One event in `first`, then `burst` in `rest`: a buffer of 16 is kept for
        // the next burst; one of 64 is taken out, to be appended after unlocking.
        for burst in [MAILBOX_KEEP as u64, 4 * MAILBOX_KEEP as u64] {
            let mut mailbox = Mailbox::new(Outcome::Pending { waiter: None });
            for n in 0..=burst {
                mailbox.push(Event::Message(Message {
                    from: None,
                    payload: Payload::new(n),
                }));
            }
            let mut buffer = Vec::new();
            let taken = mailbox.drain_into(&mut buffer, &cell);
            let large = burst > MAILBOX_KEEP as u64;
            assert_eq!(taken.0.is_some(), large, "burst of {burst}");
            assert_eq!(mailbox.rest.is_some(), !large, "burst of {burst}");
            assert!(matches!(mailbox.first, First::Empty));
            taken.append_to(&mut buffer);
            let received: Vec<u64> = buffer
                .into_iter()
                .map(|event| match event {
                    Event::Message(m) => m.payload.downcast::<u64>().expect("a u64"),
                    _ => panic!("only messages were pushed"),
                })
                .collect();
            assert_eq!(received, (0..=burst).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_cell_dropped_with_its_body_drops_the_body_once() {
        let (body, dropped) = counted();
        let cell = ProcessCell::ready(Pid::from_raw(1), None, "run", false, body);
        let other = cell.clone();
        assert_eq!(CellRef::count(&cell), 2);
        drop(cell);
        assert_eq!(drops(&dropped), 0, "another reference keeps it");
        assert_eq!(CellRef::count(&other), 1);
        drop(other);
        assert_eq!(drops(&dropped), 1);
    }

    #[test]
    fn a_dropped_cells_memory_is_reused_by_the_next_cell_of_its_type() {
        keep_blocks_on_this_thread();
        let (body, _) = counted();
        let cell = ProcessCell::ready(Pid::from_raw(1), None, "run", false, body);
        let address = CellRef::as_ptr(&cell).cast::<u8>();
        drop(cell);
        let (body, _) = counted();
        let next = ProcessCell::ready(Pid::from_raw(2), None, "run", false, body);
        assert_eq!(CellRef::as_ptr(&next).cast::<u8>(), address);
        assert_eq!(next.pid(), Pid::from_raw(2));
    }

    #[test]
    fn a_panicking_body_drop_still_frees_the_cell() {
        keep_blocks_on_this_thread();
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("boom");
            }
        }
        impl Process for Bomb {
            fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
                Ok(())
            }
            fn step(&mut self, _: Events<'_>, _: &mut StepOutput) -> Result<(), StepError> {
                Ok(())
            }
        }
        let cell = ProcessCell::ready(Pid::from_raw(1), None, "run", false, Bomb);
        let address = CellRef::as_ptr(&cell).cast::<u8>();
        let unwound = catch_unwind(AssertUnwindSafe(|| drop(cell)));
        assert!(unwound.is_err(), "the body's panic comes out of the drop");
        // The block went back to the recycler despite the panic.
        let again = ProcessCell::ready(Pid::from_raw(2), None, "run", false, Bomb);
        assert_eq!(CellRef::as_ptr(&again).cast::<u8>(), address);
        let (mut owned, _) = again.start_running().expect("READY");
        assert!(
            owned.drop_body().is_err(),
            "the second bomb goes off in a guarded drop"
        );
        owned.release();
    }

    #[test]
    fn a_process_whose_making_panics_gives_its_block_back() {
        keep_blocks_on_this_thread();
        struct Refuses;
        impl IntoProcess for Refuses {
            fn into_process(self) -> impl Process {
                if true {
                    panic!("cannot be made");
                }
                counted().0
            }
        }
        let (body, _) = counted();
        let address = CellRef::as_ptr(&ProcessCell::ready(
            Pid::from_raw(1),
            None,
            "run",
            false,
            body,
        ))
        .cast::<u8>();
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            NewProcess::new(Refuses, "run", Payloads::new(), false)
        }));
        assert!(unwound.is_err(), "the panic comes out of the spawn");
        // The block the cell was to be made in went back (unread), and is reused.
        let (body, dropped) = counted();
        let next = ProcessCell::ready(Pid::from_raw(2), None, "run", false, body);
        assert_eq!(CellRef::as_ptr(&next).cast::<u8>(), address);
        drop(next);
        assert_eq!(drops(&dropped), 1);
    }

    #[test]
    fn an_unspawned_process_keeps_its_entry_input_and_body_until_dropped() {
        let (body, dropped) = counted();
        let mut new = NewProcess::new(
            body,
            "serve",
            Payloads::from(vec![Payload::new(3_u8)]),
            true,
        );
        assert_eq!(new.entry(), "serve");
        assert!(new.is_detached());
        let input = new.take_input();
        assert_eq!(input.len(), 1);
        assert_eq!(input[0].downcast_ref::<u8>(), Some(&3));
        assert!(new.take_input().is_empty(), "the input is handed out once");
        let _: &mut dyn Process = new.process_mut();
        drop(new);
        assert_eq!(drops(&dropped), 1);
    }
}
