//! The per-process I/O state shared between a [`Machine`](super::Machine)'s `step` and
//! the suspension-point futures its entry awaits.
//!
//! # How the futures reach it
//!
//! The state ([`Io`]) is owned by the machine, not shared: no `Arc`, no lock. For the
//! duration of one poll, `step` lends it, the process's [`Context`] and the step's
//! [`StepOutput`] as pointers in a [`Lent`] on its stack, and takes them back
//! afterwards (also when the poll unwinds). Nothing moves. The suspension points
//! polled by the entry reach the `Lent` through the poll's waker
//! ([`with_step_in`]), which the compiler sees through when the coroutine is inlined
//! into the step (and as long as no function that is not inlined is handed the
//! poll's context: see `YieldOne::poll_again`); `yield_cmd!`'s dispatch, which runs before its future is polled,
//! and `wsched::this` reach it through a thread-local slot that `step` points at it
//! ([`install`]; one store, and one to restore). Either way it is lent out under a
//! busy flag ([`with_step`], [`with`] for the state alone): a re-entrant access
//! (say, a `Drop` impl that calls `wsched::this::pid()` while the runtime holds the
//! state) panics with a clear message instead of aliasing. `wsched::this` reaches
//! the context through [`with_context`] by reference, without cloning it.
//!
//! The completion of a yield made alone (one `yield_cmd!` at a time) skips the
//! state's bookkeeping of tags: the step leaves it in its event buffer
//! ([`Direct`], lent with the rest) for the suspension point that waits for it,
//! which reads it from there without a closure being lent the state, and only
//! moves it into the state if anything else looks there first. So does the step's
//! first message when no message is held: a `recv!` waiting for it takes it from
//! the event buffer instead of the buffer of held messages.
//!
//! The suspension points write their yields, withdrawals and where they wait
//! straight into the output: the state holds only what lasts between steps, which
//! keeps an idle process small, and the yields land in the runner's reused buffer
//! instead of a per-process one that grows anew in every fresh process.
//!
//! Consequences: the future stays `Send` (it holds no reference to the state), and the
//! suspension points work only while their own process is being stepped, which is the
//! only time the generated code polls them.

use std::cell::{Cell, UnsafeCell};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop};
use std::ptr;
use std::task::{Context as TaskCx, RawWaker, RawWakerVTable, Waker};

use super::suspend::{find_after_first, take_message, Filter};
use crate::command::Command;
use crate::engine::context::Context;
use crate::engine::process::{
    Completion, Event, InPlace, Message, Status, StepOutput, SuspendKind, SuspendPoint, Tag,
};
use crate::error::YieldError;
use crate::payload::{Meta, Payload};
use crate::runtime::DropOwed;

/// Where one yielded tag stands.
enum Slot {
    /// Yielded; its completion has not arrived.
    Waiting,
    /// Its completion arrived and was not consumed yet.
    Ready(Result<Payload, YieldError>),
    /// Consumed or abandoned: completions for it (late timers of a receive that got
    /// its message, yields given up on cancel, duplicates) are ignored.
    Done,
}

/// Everything an entry's suspension points keep between steps. Fields are ordered
/// so that the small ones share one word.
pub(crate) struct Io {
    /// The name the entry was started by: an element of the struct's static list of
    /// entries (one thin pointer, not a `&str`), `""` before `init`.
    pub(crate) entry: &'static &'static str,
    /// The last tag handed out; tags start at 1.
    last_tag: u64,
    /// The state of the tags `last_tag + 1 - slots.len() ..= last_tag`, oldest
    /// first; every older tag is [`Slot::Done`], but for the yield waiting alone
    /// (see below). Tags are handed out in sequence, so a tag's slot is found by
    /// subtracting: delivering, taking and abandoning are O(1), where searching
    /// lists of tags made a `yield_all!` of n commands cost O(n²). Emptied (in
    /// bulk, O(1) a tag) by the first yield after no slot is live any more, which
    /// is each time a suspension point completes: only the pending one has
    /// outstanding tags, and it consumes or abandons all of them before
    /// completing.
    ///
    /// A yield made when no other is outstanding (one `yield_cmd!` at a time, the
    /// usual case) gets no slot: while `slots` is empty and `live` is 1, the tag
    /// `last_tag` waits *alone*. Its completion goes straight to its suspension
    /// point within the step that brings it ([`Direct`]), and only into a
    /// slot of its own (`slots[0]`) if anything else looks first. The state needs
    /// no field for this, so an idle process is no larger for it.
    ///
    /// Dropped by `Io`'s own `Drop`, only if it ever allocated (as `mailbox`).
    slots: ManuallyDrop<Vec<Slot>>,
    /// Messages not received yet, in arrival order.
    pub(crate) mailbox: ManuallyDrop<VecDeque<Message>>,
    /// How many of `slots` are not [`Slot::Done`]. 32 bits: 2³² outstanding yields
    /// would take over 400 GB of slots and yields.
    live: u32,
    /// A cancel arrived and no suspension point has reported it yet.
    cancel_pending: bool,
    /// A cancel arrived at some point (sticky).
    pub(crate) cancelled: bool,
    /// What the runner told the machine ([`IN_PLACE`], [`BOUNDED`]) and what the
    /// step must report about the held messages ([`DROPPED`], [`HELD_CHANGED`],
    /// [`HELD_SHOWN`]): one byte for all, so the state is no larger for them.
    runner: u8,
}

/// In [`Io::runner`]: the runner promised to keep the process in place until it is
/// closed ([`Process::__stays_in_place`](crate::Process::__stays_in_place)): the
/// machine starts its coroutine only then.
const IN_PLACE: u8 = 1;
/// In [`Io::runner`]: the process has a bounded mailbox
/// ([`Process::__bounded_mailbox`](crate::Process::__bounded_mailbox)), which
/// counts what the buffer holds: the machine reports it after each step that
/// changed it.
const BOUNDED: u8 = 2;
/// In [`Io::runner`]: the step took in a [`DropOwed`] and dropped messages.
const DROPPED: u8 = 4;
/// In [`Io::runner`]: messages went into the buffer of held messages or out of it
/// since the step last reported it. A flag set where the buffer changes, so that a
/// step that touched no message (a yield's) tests one bit instead of comparing
/// lengths kept across the poll.
const HELD_CHANGED: u8 = 8;
/// In [`Io::runner`]: the buffer last reported held messages. As the buffer does not
/// change between steps, this says whether it held any when the step began.
const HELD_SHOWN: u8 = 16;

impl Default for Io {
    fn default() -> Self {
        Self {
            entry: &"",
            last_tag: 0,
            slots: ManuallyDrop::new(Vec::new()),
            mailbox: ManuallyDrop::new(VecDeque::new()),
            live: 0,
            cancel_pending: false,
            cancelled: false,
            runner: 0,
        }
    }
}

/// Most processes never yield two commands at once nor buffer a message: their
/// `slots` and `mailbox` never allocate, and the generic drops of an empty `Vec`
/// and `VecDeque` were about 3 % of the instructions of a process that spawns
/// one child and ends (callgrind, `step_cost chain`). One check each instead.
impl Drop for Io {
    // Inlined, the drops out of line: as one function, its frame (registers saved
    // for the drops' unwinding) cost 30 instructions a process that allocated
    // nothing.
    #[inline]
    fn drop(&mut self) {
        if self.slots.capacity() != 0 || self.mailbox.capacity() != 0 {
            self.drop_buffers();
        }
    }
}

impl Io {
    /// Drops the tag slots and the buffer of held messages, for `Drop`.
    #[cold]
    #[inline(never)]
    fn drop_buffers(&mut self) {
        // Taken out as locals: if one's drop panics, the unwinding still drops the
        // other.
        // SAFETY: each is taken once, here, and only by `Drop`, after which `self`
        // is never used again.
        let (_slots, _mailbox) = unsafe {
            (
                ManuallyDrop::take(&mut self.slots),
                ManuallyDrop::take(&mut self.mailbox),
            )
        };
    }
}

impl Io {
    /// Takes in one event of a step, after the direct completion if the step has
    /// one (see [`Direct`]). Returns what must be dropped outside any borrow (a
    /// late completion nobody waits for).
    // Inlined into the step's loop over its events (a message's way in): as a
    // call per event, a message round trip took 50 more instructions.
    #[inline(always)]
    pub(crate) fn take_in(&mut self, event: Event, direct: &mut Direct<'_>) -> Option<Payload> {
        match event {
            Event::Completion(c) => {
                // A completion after the direct one: a duplicate must find it in its
                // slot.
                if let Some(first) = direct.completion.take() {
                    self.settle(first.take());
                }
                self.complete(c)
            }
            Event::Message(m) => {
                self.mailbox.push_back(m);
                self.runner |= HELD_CHANGED;
                None
            }
            Event::Cancel => {
                self.cancel_pending = true;
                self.cancelled = true;
                None
            }
        }
    }

    /// A completion nobody waits for, handed back to be dropped; unless it tells
    /// the process to drop its oldest unreceived messages, which a full bounded
    /// mailbox dropped to make room (see `engine/bounded.rs`): they go to the dead
    /// letters now, as the step takes in its events, before any `recv!` can take
    /// them. Out of line: a late completion is rare.
    #[cold]
    #[inline(never)]
    fn take_in_late(&mut self, late: Result<Payload, YieldError>) -> Option<Payload> {
        let DropOwed { owed, owner } = match late.ok()?.take::<DropOwed>() {
            Ok(owed) => owed,
            Err(other) => return Some(other),
        };
        let mut dropped = Vec::with_capacity(owed);
        while dropped.len() < owed {
            // The oldest counted message: signals take no room, so are not dropped.
            let Some(at) = self.mailbox.iter().position(|m| !m.payload.is_signal()) else {
                debug_assert!(false, "owed a drop of a message it does not hold");
                break;
            };
            dropped.extend(self.mailbox.remove(at));
        }
        // The step reports the change (see `Machine::report_bounded`).
        self.runner |= DROPPED | HELD_CHANGED;
        match owner {
            Some((to, handle)) => {
                for message in dropped {
                    handle.shared().drop_oldest(to, message);
                }
            }
            None => crate::runtime::drop_all_quietly(dropped),
        }
        None
    }

    /// Whether [`take_in_late`](Self::take_in_late) dropped messages since this was
    /// last asked.
    pub(crate) fn take_dropped(&mut self) -> bool {
        let dropped = self.runner & DROPPED != 0;
        self.runner &= !DROPPED;
        dropped
    }

    /// Receives the oldest held message `filter` takes, converted; taking it counts
    /// as a change of the held messages (see [`HELD_CHANGED`]).
    #[inline]
    pub(crate) fn receive<F: Filter>(&mut self, filter: &mut F) -> Option<F::Output> {
        let message = take_message(filter, &mut self.mailbox)?;
        self.runner |= HELD_CHANGED;
        Some(message)
    }

    /// Whether the step must look at the held messages to report them: they
    /// changed, or the mailbox is bounded (see `Machine::publish_held`).
    #[inline(always)]
    pub(crate) fn held_to_report(&self) -> bool {
        self.runner & (HELD_CHANGED | BOUNDED) != 0
    }

    /// [`receive`](Self::receive), offered first the step's direct message (see
    /// [`Direct`]), the oldest: taken without passing through the buffer if the
    /// receive takes it, which leaves the held messages as they were; put at the
    /// buffer's front otherwise, where it is still the oldest.
    #[inline(always)]
    pub(crate) fn receive_direct<F: Filter>(
        &mut self,
        filter: &mut F,
        direct: &mut Option<InPlace<'_, Message>>,
    ) -> Option<F::Output> {
        // Looked at before it is taken: the usual `None` is not written back.
        if direct.is_none() {
            return self.receive(filter);
        }
        let message = direct.take()?;
        match filter.try_convert(message.take()) {
            Ok(value) => Some(value),
            Err(refused) => self.refused_direct(filter, refused),
        }
    }

    /// The rest of [`receive_direct`](Self::receive_direct) when the receive
    /// refused the direct message: it is held, and the receive looks at the rest
    /// (each message tried once, as `receive` would have). Out of line: a
    /// selective receive passing a message over is the rare case.
    #[cold]
    #[inline(never)]
    fn refused_direct<F: Filter>(&mut self, filter: &mut F, refused: Message) -> Option<F::Output> {
        self.settle_message(refused);
        let message = find_after_first(filter, &mut self.mailbox)?;
        self.runner |= HELD_CHANGED;
        Some(message)
    }

    /// Holds the step's direct message (see [`Direct`]), which no receive took, in
    /// the buffer: at its front, as everything the buffer holds came in later (it
    /// was empty when the step began).
    #[cold]
    #[inline(never)]
    pub(crate) fn settle_message(&mut self, message: Message) {
        self.mailbox.push_front(message);
        self.runner |= HELD_CHANGED;
    }

    /// Whether the step may hand its first message to a receive directly (see
    /// [`Direct`]): the buffer holds none (so it is the oldest) and the mailbox is
    /// not bounded (a bounded one counts what a step takes in until the step
    /// reports the buffer, which it does only when the buffer changed).
    #[inline(always)]
    pub(crate) fn takes_direct_message(&self) -> bool {
        self.mailbox.is_empty() && self.runner & BOUNDED == 0
    }

    /// Whether the held messages changed since the step last reported them,
    /// forgetting it: the step is reporting them now.
    pub(crate) fn take_held_changed(&mut self) -> bool {
        let changed = self.runner & HELD_CHANGED != 0;
        self.runner &= !HELD_CHANGED;
        changed
    }

    /// Whether the held messages, as they are now, must be published: they changed
    /// and hold messages now or did when last published (a change from empty to
    /// empty shows nothing new). Notes what is published.
    pub(crate) fn show_held(&mut self, changed: bool) -> bool {
        let holds = !self.mailbox.is_empty();
        if !changed || (!holds && self.runner & HELD_SHOWN == 0) {
            return false;
        }
        if holds {
            self.runner |= HELD_SHOWN;
        } else {
            self.runner &= !HELD_SHOWN;
        }
        true
    }

    /// [`take_in`](Self::take_in) without a direct completion (for the unit tests,
    /// which loom builds leave out).
    #[cfg(all(test, not(loom)))]
    fn deliver(&mut self, event: Event) -> Option<Payload> {
        self.take_in(event, &mut Direct::default())
    }

    /// Takes in a completion: into its slot if it waits, else handed back.
    #[inline]
    fn complete(&mut self, c: Completion) -> Option<Payload> {
        if self.waits_alone(c.tag) {
            self.open_ready_slot(c.result);
            return None;
        }
        match self.slot_mut(c.tag) {
            Some(slot @ Slot::Waiting) => {
                *slot = Slot::Ready(c.result);
                None
            }
            _ => self.take_in_late(c.result),
        }
    }

    /// Where `tag`'s slot is in `slots`, if it is there (older tags are all done).
    #[inline]
    fn offset(&self, tag: Tag) -> Option<usize> {
        let len = self.slots.len();
        // The tag of `slots[0]`; a `tag` below it wraps around to a huge offset.
        let base = self.last_tag + 1 - len as u64;
        let offset = tag.0.wrapping_sub(base);
        (offset < len as u64).then_some(offset as usize)
    }

    #[inline]
    fn slot_mut(&mut self, tag: Tag) -> Option<&mut Slot> {
        let offset = self.offset(tag)?;
        self.slots.get_mut(offset)
    }

    /// Whether `tag` is the yield waiting alone, without a slot (see `slots`).
    #[inline(always)]
    pub(crate) fn waits_alone(&self, tag: Tag) -> bool {
        self.slots.is_empty() && self.live == 1 && tag.0 == self.last_tag
    }

    /// Gives the yield waiting alone its slot, holding its completion `result`. Out
    /// of line: the step hands such a completion over directly, and `take_in`
    /// stays small enough to be inlined into it.
    #[inline(never)]
    fn open_ready_slot(&mut self, result: Result<Payload, YieldError>) {
        // The slot of `last_tag`, since the window ends there.
        self.slots.extend(std::iter::once(Slot::Ready(result)));
    }

    /// Takes in a direct completion (see [`Direct`]) as any other completion, for
    /// whatever looks at the slots rather than at the step's direct completion:
    /// the yield waiting alone gets its slot, holding it.
    #[cold]
    #[inline(never)]
    pub(crate) fn settle(&mut self, c: Completion) {
        // Kept when it waited alone, which nothing has changed since: every use of
        // the state settles it first (a yield, which reads no slot, may not, but
        // gives the yield its slot if another is made). So it is not late, and
        // nothing is dropped here, under a borrow.
        let late = self.complete(c);
        debug_assert!(late.is_none(), "a direct completion is never late");
        drop(late);
    }

    /// Takes the completion of the yield waiting alone, which the step handed over
    /// directly: the yield is done, and no slot was involved.
    #[inline(always)]
    pub(crate) fn take_alone(
        &mut self,
        result: Result<Payload, YieldError>,
    ) -> Result<Payload, YieldError> {
        debug_assert!(self.slots.is_empty() && self.live == 1);
        self.live = 0;
        result
    }

    /// Makes room for `count` more yields in this step: the slots and the output's
    /// buffer grow at most once for a `yield_all!`, not once per doubling.
    pub(crate) fn reserve(&mut self, out: &mut StepOutput, count: usize) {
        if self.live == 0 {
            // What `dispatch` would do first: start a new window (see there).
            self.slots.clear();
        }
        self.slots.reserve(count);
        out.yields_buffer().reserve(count);
    }

    /// Yields `command` with the next tag, into the step's output.
    // Inlined into each suspension point (the usual case is a few instructions): as
    // a call, its prologue and epilogue were a sixth of a `yield_cmd!`'s own time.
    #[inline(always)]
    pub(crate) fn dispatch<C: Command>(&mut self, out: &mut StepOutput, command: C) -> Tag {
        let tag = self.next_tag();
        // In place (see `StepOutput::yield_command`).
        out.yield_command(tag, command);
        tag
    }

    /// [`dispatch`](Self::dispatch) of a command that `meta` describes (see
    /// `StepOutput::yield_parts`).
    ///
    /// # Safety
    /// As [`Payload::from_parts`]: `meta` describes a `C`.
    #[inline(always)]
    pub(crate) unsafe fn dispatch_parts<C>(
        &mut self,
        out: &mut StepOutput,
        command: C,
        meta: &'static Meta,
    ) -> Tag {
        let tag = self.next_tag();
        // SAFETY: `meta` describes a `C` (the contract).
        unsafe { out.yield_parts(tag, command, meta) };
        tag
    }

    /// Hands out the next tag for a yield done at once, in the step that makes it
    /// (see `suspend::yield_all`): its result goes straight to the suspension
    /// point, so its slot, if the window needs one, is done already.
    pub(crate) fn tag_done_at_once(&mut self) -> Tag {
        let tag = self.next_tag();
        // Without others outstanding it waits alone, with no slot.
        if let Some(slot) = self.slot_mut(tag) {
            *slot = Slot::Done;
        }
        self.live -= 1;
        tag
    }

    /// Hands out the next tag, its slot waiting.
    #[inline(always)]
    fn next_tag(&mut self) -> Tag {
        self.last_tag += 1;
        if self.live == 0 {
            // The usual case, one yield at a time: it waits alone, without a slot.
            // Every slot is done, so the window is emptied (here rather than when
            // the last one retired, so that taking a completion moves nothing but
            // it).
            // SAFETY: 0 is within the capacity, and the slots given up are all
            // `Slot::Done` (`live == 0`), which owns nothing: skipping their drop
            // leaks nothing.
            unsafe { self.slots.set_len(0) };
        } else {
            self.open_slot();
        }
        self.live += 1;
        Tag(self.last_tag)
    }

    /// Appends the slot of a new tag while others are outstanding.
    #[inline(never)]
    fn open_slot(&mut self) {
        // Not `push`: it built the 40-byte slot on the stack before its capacity
        // check and copied it over, a load wider than the store just made (a
        // store-forwarding stall, most of this function's time). `extend`
        // reserves first and writes the slot in place.
        if self.slots.is_empty() {
            // The previous tag waits alone (`live` is 1): it gets its slot first.
            self.slots.extend(std::iter::once(Slot::Waiting));
        }
        self.slots.extend(std::iter::once(Slot::Waiting));
    }

    /// Whether the completion of `tag` arrived and was not consumed yet.
    pub(crate) fn is_ready(&self, tag: Tag) -> bool {
        let slot = self.offset(tag).map(|offset| &self.slots[offset]);
        matches!(slot, Some(Slot::Ready(_)))
    }

    /// Takes the completion of `tag` if it arrived.
    #[inline]
    pub(crate) fn take(&mut self, tag: Tag) -> Option<Result<Payload, YieldError>> {
        let offset = self.offset(tag)?;
        let slot = &mut self.slots[offset];
        if !matches!(slot, Slot::Ready(_)) {
            return None;
        }
        self.live -= 1;
        match mem::replace(slot, Slot::Done) {
            Slot::Ready(result) => Some(result),
            _ => unreachable!("checked above"),
        }
    }

    /// Gives up on `tag`: its completion, now or later, is ignored, and if it has not
    /// arrived the yield is withdrawn in `out`. Returns a completion that had already
    /// arrived, to be dropped outside any borrow.
    pub(crate) fn abandon(
        &mut self,
        out: &mut StepOutput,
        tag: Tag,
    ) -> Option<Result<Payload, YieldError>> {
        if self.waits_alone(tag) {
            // Not arrived: it would have a slot.
            self.live = 0;
            out.withdraw(tag);
            return None;
        }
        let slot = self.offset(tag).map(|offset| &mut self.slots[offset]);
        let previous = match slot {
            Some(slot) if !matches!(slot, Slot::Done) => {
                self.live -= 1;
                mem::replace(slot, Slot::Done)
            }
            _ => Slot::Done,
        };
        match previous {
            Slot::Ready(result) => Some(result),
            _ => {
                out.withdraw(tag);
                None
            }
        }
    }

    /// Whether a cancel waits to be reported.
    #[inline]
    pub(crate) fn cancel_pending(&self) -> bool {
        self.cancel_pending
    }

    /// Consumes a pending cancel: the suspension point asking reports it.
    #[inline]
    pub(crate) fn take_cancel(&mut self) -> bool {
        // Looked at before it is cleared: the usual `false` is not written back.
        if !self.cancel_pending {
            return false;
        }
        self.cancel_pending = false;
        true
    }

    /// Records where the entry waits after this poll, and the status that follows
    /// from it: decided here, where the kind of point is known when compiling,
    /// rather than by the step reading back the point just written.
    #[inline]
    pub(crate) fn suspend(&mut self, out: &mut StepOutput, point: SuspendPoint) {
        let status = match point.kind {
            SuspendKind::Receive { .. } => Status::WaitingForMessage,
            SuspendKind::Yield { .. } => Status::WaitingForYields,
        };
        out.set_suspend_point(point);
        // What tells the step that the entry suspended (see `Machine::step`).
        out.set_wait_status(status);
    }

    /// Whether the runner promised to keep the process in place (see [`IN_PLACE`]).
    pub(crate) fn in_place(&self) -> bool {
        self.runner & IN_PLACE != 0
    }

    pub(crate) fn set_in_place(&mut self) {
        self.runner |= IN_PLACE;
    }

    /// Whether the process has a bounded mailbox (see [`BOUNDED`]).
    #[inline(always)]
    pub(crate) fn bounded(&self) -> bool {
        self.runner & BOUNDED != 0
    }

    pub(crate) fn set_bounded(&mut self) {
        self.runner |= BOUNDED;
    }

    /// How many tags the process has handed out so far.
    pub(crate) fn tags_issued(&self) -> u64 {
        self.last_tag
    }

    /// How many yields are outstanding (not taken, not given up on).
    pub(crate) fn outstanding(&self) -> usize {
        self.live as usize
    }

    /// How many tag slots are kept.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }
}

/// What a step hands its suspension points without the state's bookkeeping: both
/// stay in the step's event buffer until a suspension point takes them, and move
/// into the state only if anything else looks there first ([`settle`]).
#[derive(Default)]
pub(crate) struct Direct<'a> {
    /// The completion of the yield waiting alone (see `Io::slots`), when it is the
    /// first event of the step.
    pub(crate) completion: Option<InPlace<'a, Completion>>,
    /// The step's first message (after the direct completion, if any) when the
    /// buffer of held messages is empty ([`Io::takes_direct_message`]): the usual
    /// case of a process waiting in a `recv!`, whose receive takes it from here
    /// ([`Io::receive_direct`]) without pushing it into the buffer and popping it
    /// out again.
    pub(crate) message: Option<InPlace<'a, Message>>,
}

impl Direct<'_> {
    /// Whether both are `None`: one test of their words or-ed together, where
    /// testing each took a branch and a flag more.
    #[inline(always)]
    fn is_empty(&self) -> bool {
        let completion = self.completion.as_ref().map_or(0, InPlace::addr);
        let message = self.message.as_ref().map_or(0, InPlace::addr);
        completion | message == 0
    }
}

/// Moves what the step holds directly into the state, for a use of the state that
/// looks at the slots or the held messages: two branches when there is nothing.
#[inline(always)]
fn settle(io: &mut Io, direct: &mut Direct<'_>) {
    // Each looked at before it is taken: the usual `None` is not written back.
    if direct.completion.is_some() {
        if let Some(c) = direct.completion.take() {
            io.settle(c.take());
        }
    }
    if direct.message.is_some() {
        if let Some(m) = direct.message.take() {
            io.settle_message(m.take());
        }
    }
}

/// What a step lends out: pointers into the machine being stepped, the step's
/// direct events, and the flag that refuses a second borrow while one is lent. It
/// lives on the stack of the step (or of the drop of the coroutine), which reaches it
/// to the suspension points through the poll's waker and to everything else through
/// the thread-local slot.
pub(crate) struct Lent<'a> {
    /// The state.
    io: *mut Io,
    /// The machine's context, `None` before `init`: the option itself, so that
    /// lending it is one address, not a check.
    ctx: *const Option<Context>,
    /// The step's output, or null while the machine drops its coroutine (when no
    /// suspension point can run).
    out: *mut StepOutput,
    /// The step's direct completion and message (see [`Direct`]): taken by the
    /// suspension point that waits for them, settled into the state by every
    /// other use of it, and by the `Lent`'s drop if still there. Held here rather
    /// than pointed to: one pointer fewer to store, and none to load back in the
    /// drop (the `Lent`'s address is in the thread-local slot, so every field is
    /// read back from memory after a call). Changed through a shared `Lent`
    /// (the views, `with`), under the busy flag: hence the cell. Not dropped by
    /// the glue: the drop settles both and leaves nothing to drop.
    ///
    /// The lifetime of the event buffer they point into is the `Lent`'s own
    /// (`new` shortens it): they are only ever read out, or dropped, during the
    /// step that lent them, while the buffer is borrowed by the step's `Events`.
    direct: ManuallyDrop<UnsafeCell<Direct<'a>>>,
    /// Set while [`with`] or [`with_step`] lends the state out: a re-entrant use is
    /// refused.
    busy: Cell<bool>,
    /// The borrows the pointers stand for.
    _lent: PhantomData<(&'a mut Io, &'a Option<Context>, &'a mut StepOutput)>,
}

impl<'a> Lent<'a> {
    /// Lends `io`, `ctx` and `out` for as long as the result lives.
    #[inline]
    pub(crate) fn new(
        io: &'a mut Io,
        ctx: &'a Option<Context>,
        out: Option<&'a mut StepOutput>,
        direct: Direct<'a>,
    ) -> Self {
        Self {
            io,
            ctx: ptr::from_ref(ctx),
            out: out.map_or(ptr::null_mut(), ptr::from_mut),
            direct: ManuallyDrop::new(UnsafeCell::new(direct)),
            busy: Cell::new(false),
            _lent: PhantomData,
        }
    }

    /// The step's direct events, with the lifetime of their buffer erased (see
    /// `direct`): a `Lent` reached through the thread-local slot has none.
    #[inline(always)]
    fn direct(&self) -> *mut Direct<'static> {
        self.direct.get().cast()
    }

    /// What the poll's waker carries to the suspension points (see [`View`]).
    #[inline]
    pub(crate) fn view(&self) -> View<'_> {
        View {
            busy: &self.busy,
            io: self.io,
            out: self.out,
            direct: self.direct(),
        }
    }

    /// The state, after the checks every use makes.
    #[inline]
    #[track_caller]
    fn io(&self, what: &'static str) -> *mut Io {
        if self.busy.get() {
            refuse_busy(what)
        }
        self.io
    }

    /// Lends the state and the output to `f` under the busy flag.
    #[inline(always)]
    #[track_caller]
    fn lend_step<R>(&self, what: &'static str, f: impl FnOnce(&mut Io, &mut StepOutput) -> R) -> R {
        let io = self.io(what);
        let out = self.out;
        if out.is_null() {
            refuse_outside(what)
        }
        self.busy.set(true);
        let _busy = Busy(&self.busy);
        // SAFETY: `Lent::new` made the pointers from distinct `&mut` borrows that
        // the `Lent` keeps (it outlives this call: it is further up this thread's
        // stack, in the step), and `busy` makes these the only references made from
        // them until `f` returns: every other user of the `Lent` refuses while it
        // is set, and `install` panics.
        let (io, out) = unsafe { (&mut *io, &mut *out) };
        // SAFETY: as above.
        settle(io, unsafe { &mut *self.direct() });
        f(io, out)
    }
}

/// What the poll left of the step's direct events goes into the state as the `Lent`
/// is dropped, before the step looks at the state: a message no receive took (its
/// entry did not reach one, or the poll panicked) into the buffer of held messages,
/// also when unwinding, so that a process that panicked hands it to the dead
/// letters with the rest as it closes rather than dropping it with its event
/// buffer; a completion no suspension point took (the entry awaited something
/// else, an error) into its slot, as any completion would be. One look for both
/// when there is neither.
impl Drop for Lent<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let direct = self.direct.get_mut();
        // Looked at before they are taken: the usual `None`s are not written back.
        if !direct.is_empty() {
            // SAFETY: `Lent::new` made the pointer from a `&mut` borrow that the
            // `Lent` keeps while it lives, and nothing else uses it now: the guards
            // of every use (`Busy`, `Installed`) and the views of the poll were made
            // after it and are gone before it.
            settle_left(unsafe { &mut *self.io }, direct);
        }
        // Both `None` now: the `ManuallyDrop` has nothing left to drop.
    }
}

/// [`settle`], out of line, for the `Lent`'s drop.
#[cold]
#[inline(never)]
fn settle_left(io: &mut Io, direct: &mut Direct<'_>) {
    settle(io, direct);
}

/// A [`Lent`] as the suspension points polled by the step see it, through the
/// poll's waker ([`with_step_in`]): copies of its pointers, in a value whose address
/// goes nowhere but into the waker. When the entry's coroutine is inlined into the
/// step, as it usually is, the compiler sees through the waker to the state and the
/// output, known from the step's arguments: no thread-local loads, no null checks,
/// no reloads. (The `Lent` itself cannot be seen through: its address is in the
/// thread-local slot.)
pub(crate) struct View<'a> {
    /// The `Lent`'s busy flag.
    busy: &'a Cell<bool>,
    io: *mut Io,
    out: *mut StepOutput,
    direct: *mut Direct<'static>,
}

impl View<'_> {
    /// The waker of a poll that lends this.
    #[inline]
    pub(crate) fn waker(&self) -> Waker {
        // SAFETY: the vtable's functions never read the data pointer, and a clone
        // is a waker without it (so no copy of the pointer outlives the poll); the
        // pointer is read only by `with_step_in`, which checks the vtable first,
        // while the poll that got this waker runs (the `View` outlives it: see
        // `Machine::step`).
        unsafe { Waker::from_raw(RawWaker::new(ptr::from_ref(self).cast(), &LENDING)) }
    }

    /// [`Lent::lend_step`], with the pointers known; `f` gets the direct
    /// completion too, as it is (see [`Direct`]).
    #[inline(always)]
    #[track_caller]
    fn lend_step<R>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut Io, &mut StepOutput, &mut Direct<'_>) -> R,
    ) -> R {
        let busy = self.busy;
        if busy.get() {
            refuse_busy(what)
        }
        // Never null: the step lends its output.
        let (io, out, direct) = (self.io, self.out, self.direct);
        busy.set(true);
        let _busy = Busy(busy);
        // SAFETY: as in `Lent::lend_step`: these are copies of the `Lent`'s
        // pointers, lent under its busy flag.
        f(unsafe { &mut *io }, unsafe { &mut *out }, unsafe {
            &mut *direct
        })
    }

    /// Lends the state and the step's direct events to `f`, as to a suspension
    /// point: for the step, to take in the rest of its events through the `Lent`
    /// that holds the direct ones (see `Machine::step`).
    #[inline(always)]
    pub(crate) fn lend_direct<R>(&self, f: impl FnOnce(&mut Io, &mut Direct<'_>) -> R) -> R {
        self.lend_step("the step", |io, _, direct| f(io, direct))
    }

    /// The completion of the yield `tag` if the step brought it directly (see
    /// [`Direct`]), taken: the yield waited alone, and is done now.
    #[inline(always)]
    #[track_caller]
    fn take_direct(&self, what: &'static str, tag: Tag) -> Option<Result<Payload, YieldError>> {
        if self.busy.get() {
            refuse_busy(what)
        }
        // SAFETY: as in `lend_step`; the busy flag need not be set, as no other code
        // runs before these references are gone.
        let direct = unsafe { &mut *self.direct };
        // The direct completion is the one of the yield waiting alone: `tag`'s if
        // the tags match (as they do: only the pending suspension point has tags
        // outstanding).
        if direct.completion.as_ref().is_none_or(|c| c.tag() != tag) {
            return None;
        }
        let completion = direct.completion.take()?.take();
        // SAFETY: as above.
        let io = unsafe { &mut *self.io };
        Some(io.take_alone(completion.result))
    }
}

/// The waker of a poll: no-ops, its data a `View` (see [`View::waker`]).
static LENDING: RawWakerVTable = RawWakerVTable::new(clone_lending, noop, noop, noop);

/// A clone does not keep the pointer to the lent state.
static CLONED: RawWakerVTable = RawWakerVTable::new(clone_cloned, noop, noop, noop);

fn clone_lending(_: *const ()) -> RawWaker {
    RawWaker::new(ptr::null(), &CLONED)
}

fn clone_cloned(_: *const ()) -> RawWaker {
    RawWaker::new(ptr::null(), &CLONED)
}

fn noop(_: *const ()) {}

thread_local! {
    // A plain `Cell` without a destructor: an access is a TLS offset, with no lazy
    // initialisation or destructor-registration check.
    static CURRENT: Cell<*const Lent<'static>> = const { Cell::new(ptr::null()) };
}

/// Puts `lent` in the thread-local slot until the guard drops (also on unwinding),
/// for `wsched::this` and the suspension points polled without its waker. Nests: the
/// previous occupant is restored afterwards.
///
/// # Panics
/// From inside [`with`] (a process stepped from inside a suspension point).
#[inline]
pub(crate) fn install<'a>(lent: &'a Lent<'_>) -> Installed<'a> {
    let previous = CURRENT.replace(ptr::from_ref(lent).cast());
    // SAFETY: a non-null occupant is a `Lent` that its own guard keeps in the slot
    // only while it lives (see `Installed`), further up this thread's stack.
    if !previous.is_null() && unsafe { &*previous }.busy.get() {
        CURRENT.set(previous);
        panic!("wsched: a process was stepped from inside a suspension point");
    }
    Installed {
        previous,
        _lent: PhantomData,
    }
}

/// Takes the lent state back when dropped.
pub(crate) struct Installed<'a> {
    previous: *const Lent<'static>,
    /// The `Lent` the slot points to.
    _lent: PhantomData<&'a ()>,
}

impl Drop for Installed<'_> {
    #[inline]
    fn drop(&mut self) {
        CURRENT.set(self.previous);
    }
}

/// Clears the busy flag when dropped (also when the closure lent to unwinds).
struct Busy<'a>(&'a Cell<bool>);

impl Drop for Busy<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// Panics for a use while the state is lent out; out of line, so the checks stay
/// small.
#[cold]
#[inline(never)]
#[track_caller]
fn refuse_busy(what: &'static str) -> ! {
    panic!("wsched: {what} was used re-entrantly (from a `Drop` impl or a callback run by the runtime)")
}

/// Panics for a use outside a step.
#[cold]
#[inline(never)]
#[track_caller]
fn refuse_outside(what: &'static str) -> ! {
    let instead = if what.starts_with("wsched::this::") {
        "; from a thread, call the `Scheduler`'s or a `Handle`'s method of the same name \
         instead"
    } else {
        ""
    };
    panic!(
        "wsched: {what} can only be used while a `#[process]` process is being stepped \
         (inside an #[entry] or #[suspend] method, or code they call){instead}"
    )
}

/// What the thread-local slot holds, checked to be there.
#[inline(always)]
#[track_caller]
fn installed(what: &'static str) -> &'static Lent<'static> {
    let lent = CURRENT.get();
    if lent.is_null() {
        refuse_outside(what)
    }
    // SAFETY: a non-null pointer in the slot is a `Lent` that its guard keeps there
    // only while it lives, further up this thread's stack than any caller of this
    // (which uses it before returning).
    unsafe { &*lent }
}

/// Runs `f` on the state of the process being stepped on this thread.
///
/// # Panics
/// Outside a step of a `#[process]` process (or the drop of its struct), or
/// re-entrantly.
#[inline(always)]
#[track_caller]
pub(crate) fn with<R>(what: &'static str, f: impl FnOnce(&mut Io) -> R) -> R {
    let lent = installed(what);
    let io = lent.io(what);
    lent.busy.set(true);
    let _busy = Busy(&lent.busy);
    // SAFETY: `Lent::new` made the pointers from `&mut` borrows that the `Lent`
    // keeps while it lives (further up this thread's stack), and `busy` makes
    // these the only references made from them until `f` returns: every other
    // user of the `Lent` refuses while it is set, and `install` panics.
    let (io, direct) = unsafe { (&mut *io, &mut *lent.direct()) };
    settle(io, direct);
    f(io)
}

/// Runs `f` on the state of the process being stepped on this thread and on the
/// step's output: what the suspension points use outside a poll.
///
/// # Panics
/// Outside a step of a `#[process]` process, or re-entrantly.
#[inline(always)]
#[track_caller]
pub(crate) fn with_step<R>(what: &'static str, f: impl FnOnce(&mut Io, &mut StepOutput) -> R) -> R {
    installed(what).lend_step(what, f)
}

/// [`with_step`] for a suspension point dropped while it waited (a user's select
/// that dropped the loser): `None`, and `f` not run, where `with_step` panics.
/// That is outside a step, or while the machine drops its coroutine (when the
/// process ends, which releases everything it waited for anyway), or re-entrantly
/// (a drop run by the runtime under a borrow of the state, which does not drop
/// suspension points). A drop must not panic: it may run while unwinding.
#[cold]
#[inline(never)]
pub(crate) fn try_with_step<R>(f: impl FnOnce(&mut Io, &mut StepOutput) -> R) -> Option<R> {
    // SAFETY: as in `installed`.
    let lent = unsafe { CURRENT.get().as_ref() }?;
    if lent.busy.get() || lent.out.is_null() {
        return None;
    }
    Some(lent.lend_step("a suspension point's drop", f))
}

/// [`with_step`] for a suspension point being polled with `cx`: the state is found
/// through the poll's waker when the machine's step made it, else (a poll by
/// something else) through the thread-local slot.
#[inline(always)]
#[track_caller]
pub(crate) fn with_step_in<R>(
    cx: &TaskCx<'_>,
    what: &'static str,
    f: impl FnOnce(&mut Io, &mut StepOutput) -> R,
) -> R {
    lend_in::<true, R>(cx, what, f)
}

/// [`with_step_in`] for a use that reads neither the slots nor the held messages
/// (a yield): what the step holds directly may stay where it is, which spares the
/// checks. Whatever reads them later settles it.
#[inline(always)]
#[track_caller]
pub(crate) fn with_step_in_unsettled<R>(
    cx: &TaskCx<'_>,
    what: &'static str,
    f: impl FnOnce(&mut Io, &mut StepOutput) -> R,
) -> R {
    lend_in::<false, R>(cx, what, f)
}

/// The two above: `SETTLE` says whether what the step holds directly is settled
/// into the state first (a constant, so each compiles to its own straight line).
#[inline(always)]
#[track_caller]
fn lend_in<const SETTLE: bool, R>(
    cx: &TaskCx<'_>,
    what: &'static str,
    f: impl FnOnce(&mut Io, &mut StepOutput) -> R,
) -> R {
    lend_direct_in(
        cx,
        what,
        #[inline(always)]
        |io, out, direct| {
            if SETTLE {
                settle(io, direct);
            }
            f(io, out)
        },
    )
}

/// [`with_step_in_unsettled`] for a receive: `f` also gets the step's direct
/// message, if any (see [`Direct`]), to offer to the receive first
/// ([`Io::receive_direct`]). A poll by something other than the machine's step
/// finds it settled into the buffer.
#[inline(always)]
#[track_caller]
pub(crate) fn receive_in<R>(
    cx: &TaskCx<'_>,
    what: &'static str,
    f: impl FnOnce(&mut Io, &mut StepOutput, &mut Option<InPlace<'_, Message>>) -> R,
) -> R {
    lend_direct_in(
        cx,
        what,
        #[inline(always)]
        |io, out, direct| f(io, out, &mut direct.message),
    )
}

/// Lends the state, the output and what the step holds directly (see [`Direct`])
/// to `f`, found through the poll's waker when the machine's step made it; else
/// through the thread-local slot, where `with_step` settles what the step holds
/// directly first, and `f` finds nothing there.
#[inline(always)]
#[track_caller]
fn lend_direct_in<R>(
    cx: &TaskCx<'_>,
    what: &'static str,
    f: impl FnOnce(&mut Io, &mut StepOutput, &mut Direct<'_>) -> R,
) -> R {
    let waker = cx.waker();
    if ptr::eq(waker.vtable(), &LENDING) {
        // SAFETY: a waker with this vtable was made by `View::waker`, whose data is
        // a `View` that outlives the poll this runs in (see there).
        // Inlined by force, as the closures it wraps (see `YieldOne::poll_first`).
        unsafe { &*waker.data().cast::<View<'_>>() }.lend_step(what, f)
    } else {
        with_step(what, |io, out| f(io, out, &mut Direct::default()))
    }
}

/// The completion of the yield `tag` if the step brought it directly (see
/// [`Direct`]), taken: the yield waited alone, and is done now. `None` otherwise
/// (also for a poll by something other than the machine's step), the direct
/// completion, if any, left for [`with_step_in`] to settle. No closure is lent the
/// state: the usual end of a `yield_cmd!` is straight-line code.
#[inline(always)]
#[track_caller]
pub(crate) fn take_direct(
    cx: &TaskCx<'_>,
    what: &'static str,
    tag: Tag,
) -> Option<Result<Payload, YieldError>> {
    let waker = cx.waker();
    if !ptr::eq(waker.vtable(), &LENDING) {
        return None;
    }
    // SAFETY: as in `with_step_in`.
    unsafe { &*waker.data().cast::<View<'_>>() }.take_direct(what, tag)
}

/// Runs `f` on the context of the process being stepped on this thread, without
/// cloning it (a clone is an atomic increment and decrement of a reference count).
/// Nothing is lent out while `f` runs, so `f` may send, spawn and use
/// `wsched::this` again, as with a clone.
///
/// # Panics
/// Where [`with`] does; also when the process was not initialised.
#[inline]
#[track_caller]
pub(crate) fn with_context<R>(what: &'static str, f: impl FnOnce(&Context) -> R) -> R {
    let lent = installed(what);
    lent.io(what);
    // SAFETY: the pointer was made by `Lent::new` from a `&Option<Context>` that
    // the `Lent` keeps borrowed while it lives, which outlasts this call: the step
    // is further up this thread's stack, and a nested `install` only replaces the
    // pointer in the slot. Nothing writes to the context meanwhile, and it is apart
    // from the `Io` that `with` lends out mutably.
    let Some(ctx) = (unsafe { &*lent.ctx }) else {
        panic!("wsched: the process was stepped before init")
    };
    f(ctx)
}

/// Like [`with_context`], but `None` where that panics.
pub(crate) fn try_with_context<R>(f: impl FnOnce(&Context) -> R) -> Option<R> {
    let lent = CURRENT.get();
    // SAFETY: as in `installed`.
    let lent = unsafe { lent.as_ref() }.filter(|lent| !lent.busy.get())?;
    // SAFETY: as in `with_context`.
    unsafe { &*lent.ctx }.as_ref().map(f)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::command::Sleep;
    use crate::testing::completion;
    use std::time::Duration;

    /// A state with `tags` yields made, and the output they went to (cleared).
    fn io_with(tags: u64) -> (Io, StepOutput) {
        let mut io = Io::default();
        let mut out = StepOutput::new();
        for _ in 0..tags {
            io.dispatch(&mut out, Sleep(Duration::ZERO));
        }
        out.clear();
        (io, out)
    }

    fn value(result: Option<Result<Payload, YieldError>>) -> Option<u32> {
        result.map(|r| r.unwrap().downcast::<u32>().unwrap())
    }

    #[test]
    fn completions_are_taken_once_by_tag_in_any_order() {
        let (mut io, out) = io_with(3);
        assert!(io.deliver(completion(Tag(3), 30_u32)).is_none());
        assert!(io.deliver(completion(Tag(1), 10_u32)).is_none());
        assert!(io.is_ready(Tag(3)) && io.is_ready(Tag(1)) && !io.is_ready(Tag(2)));
        assert_eq!(value(io.take(Tag(2))), None);
        assert_eq!(value(io.take(Tag(3))), Some(30));
        assert_eq!(value(io.take(Tag(3))), None);
        assert_eq!(value(io.take(Tag(1))), Some(10));
        // Tag 2 still waits.
        assert_eq!(io.live, 1);
        assert!(io.deliver(completion(Tag(2), 20_u32)).is_none());
        assert_eq!(value(io.take(Tag(2))), Some(20));
        assert_eq!(io.live, 0);
        assert!(out.withdrawn().is_empty());
    }

    #[test]
    fn duplicate_unknown_and_consumed_completions_are_handed_back() {
        let (mut io, _) = io_with(2);
        assert!(io.deliver(completion(Tag(1), 1_u32)).is_none());
        // A second completion for a tag whose first is there is ignored.
        assert_eq!(
            io.deliver(completion(Tag(1), 2_u32))
                .map(|p| p.downcast::<u32>().unwrap()),
            Some(2)
        );
        assert_eq!(value(io.take(Tag(1))), Some(1));
        // Consumed, never yielded (too old, too new) and tag 0.
        for tag in [1, 3, 99, 0] {
            assert!(
                io.deliver(completion(Tag(tag), 7_u32)).is_some(),
                "tag {tag}"
            );
        }
        assert!(!io.is_ready(Tag(3)));
        assert_eq!(io.tags_issued(), 2);
    }

    #[test]
    fn abandoning_returns_an_arrived_completion_or_withdraws_the_yield() {
        let (mut io, mut out) = io_with(3);
        assert!(io.deliver(completion(Tag(2), 2_u32)).is_none());
        assert_eq!(value(io.abandon(&mut out, Tag(2))), Some(2));
        assert!(out.withdrawn().is_empty());
        assert_eq!(value(io.abandon(&mut out, Tag(1))), None);
        assert_eq!(out.withdrawn(), [Tag(1)]);
        // Completions of abandoned tags are ignored from now on.
        assert!(io.deliver(completion(Tag(1), 1_u32)).is_some());
        assert!(io.deliver(completion(Tag(2), 2_u32)).is_some());
        assert_eq!(value(io.take(Tag(1))), None);
        // Only tag 3 is left.
        assert_eq!(io.live, 1);
        assert!(io.deliver(completion(Tag(3), 3_u32)).is_none());
        assert_eq!(value(io.take(Tag(3))), Some(3));
        assert_eq!(io.live, 0);
    }

    #[test]
    fn a_yield_made_alone_takes_no_slot_until_its_completion_needs_one() {
        let (mut io, mut out) = io_with(1);
        assert!(io.slots.is_empty() && io.waits_alone(Tag(1)));
        assert!(!io.is_ready(Tag(1)));
        assert!(io.deliver(completion(Tag(1), 1_u32)).is_none());
        assert_eq!(io.slots.len(), 1);
        assert!(
            io.deliver(completion(Tag(1), 2_u32)).is_some(),
            "a duplicate"
        );
        assert_eq!(value(io.take(Tag(1))), Some(1));
        assert_eq!(io.live, 0);
        // The next yield waits alone again, in an emptied window.
        io.dispatch(&mut out, Sleep(Duration::ZERO));
        assert!(io.slots.is_empty() && io.waits_alone(Tag(2)));
        // A second yield while it waits gives it its slot first.
        io.dispatch(&mut out, Sleep(Duration::ZERO));
        assert_eq!(io.slots.len(), 2);
        assert!(!io.waits_alone(Tag(2)) && !io.waits_alone(Tag(3)));
        assert!(io.deliver(completion(Tag(2), 2_u32)).is_none());
        assert_eq!(value(io.take(Tag(2))), Some(2));
        assert_eq!(value(io.abandon(&mut out, Tag(3))), None);
        assert_eq!(out.withdrawn(), [Tag(3)]);
        assert_eq!(io.live, 0);
    }

    #[test]
    fn a_yield_done_at_once_takes_the_next_tag_and_leaves_nothing_outstanding() {
        let mut io = Io::default();
        let mut out = StepOutput::new();
        // Nothing else outstanding: no slot.
        assert_eq!(io.tag_done_at_once(), Tag(1));
        assert_eq!(io.tag_done_at_once(), Tag(2));
        assert!(io.slots.is_empty() && io.live == 0);
        assert!(
            out.yields().is_empty(),
            "nothing for the runner to dispatch"
        );
        // The next yield takes the tag after them, and waits alone.
        io.dispatch(&mut out, Sleep(Duration::ZERO));
        assert!(io.waits_alone(Tag(3)));
        // While it waits, yields done at once keep the window in sequence: their
        // slots are done, and a late completion for one of them is handed back.
        assert_eq!(io.tag_done_at_once(), Tag(4));
        io.dispatch(&mut out, Sleep(Duration::ZERO));
        assert_eq!(io.live, 2);
        assert!(
            io.deliver(completion(Tag(4), 4_u32)).is_some(),
            "done already"
        );
        assert!(io.deliver(completion(Tag(5), 5_u32)).is_none());
        assert!(io.deliver(completion(Tag(3), 3_u32)).is_none());
        assert_eq!(value(io.take(Tag(3))), Some(3));
        assert_eq!(value(io.take(Tag(5))), Some(5));
        assert_eq!(io.live, 0);
    }

    #[test]
    fn abandoning_the_yield_waiting_alone_withdraws_it() {
        let (mut io, mut out) = io_with(1);
        assert_eq!(value(io.abandon(&mut out, Tag(1))), None);
        assert_eq!(out.withdrawn(), [Tag(1)]);
        assert_eq!(io.live, 0);
        assert!(
            io.deliver(completion(Tag(1), 1_u32)).is_some(),
            "ignored from then on"
        );
    }

    #[test]
    fn a_batch_of_known_size_grows_the_buffers_once() {
        let mut io = Io::default();
        let mut out = StepOutput::new();
        io.reserve(&mut out, 10);
        let buffers = |io: &Io, out: &mut StepOutput| {
            (
                io.slots.as_ptr(),
                io.slots.capacity(),
                out.yields_buffer().as_ptr(),
                out.yields_buffer().capacity(),
            )
        };
        let reserved = buffers(&io, &mut out);
        assert_eq!((reserved.1, reserved.3), (10, 10));
        for _ in 0..10 {
            io.dispatch(&mut out, Sleep(Duration::ZERO));
        }
        assert_eq!(buffers(&io, &mut out), reserved);
        for tag in 1..=10 {
            assert!(io.deliver(completion(Tag(tag), ())).is_none());
            assert!(io.take(Tag(tag)).is_some());
        }
        // The next batch starts a new window in the same slots.
        out.clear();
        io.reserve(&mut out, 10);
        assert_eq!(io.slots.len(), 0);
        assert_eq!(buffers(&io, &mut out), reserved);
    }
}
