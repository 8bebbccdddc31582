//! The `Process` contract: what the scheduler asks of every process, macro-made or
//! hand-written, and the buffers it passes in and out.

use std::any::{Any, TypeId};
use std::fmt;
use std::marker::PhantomData;
use std::panic::Location;
use std::ptr::NonNull;

use crate::engine::context::Context;
use crate::error::{InitError, SpawnError, StepError, YieldError};
use crate::payload::{Meta, Payload, Payloads};
use crate::pid::Pid;
pub use crate::tag::Tag;
use crate::type_name::Short;

/// A typed request a process yields; a handler registered for its type performs it
/// and completes the yield with an [`Output`](Command::Output).
///
/// # Example
///
/// A command, a process that yields it, and the handler that performs it:
///
/// ```
/// use wsched::command::Completer;
/// use wsched::prelude::*;
/// use wsched::Scheduler;
///
/// struct Fetch {
///     url: String,
/// }
///
/// impl Command for Fetch {
///     type Output = String;
/// }
///
/// struct Page;
///
/// #[process]
/// impl Page {
///     #[entry]
///     fn size(&mut self, url: String) -> Result<usize, BoxError> {
///         let body: String = yield_cmd!(Fetch { url })?; // a Fetch's Output
///         Ok(body.len())
///     }
/// }
///
/// let scheduler = Scheduler::builder()
///     .handler(|fetch: Fetch, done: Completer<Fetch>| done.complete(format!("<{}>", fetch.url)))
///     .build()?;
/// let pid = scheduler.spawn(Page, "size", ("a.test".to_string(),))?;
/// assert_eq!(scheduler.wait(pid)?.downcast::<usize>()?, 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a command: only a `Command` can be yielded",
    label = "not a `Command`",
    note = "a command is a type of your own with `impl Command for MyCommand {{ type Output = …; }}` \
            (what its completion carries), performed by a handler registered for it on the \
            scheduler's builder"
)]
pub trait Command: Send + 'static {
    /// What the command's completion carries on success.
    type Output: Send + 'static;
}

impl Payload {
    /// Wraps a yielded command, remembering its output type (see
    /// [`Meta::output`](crate::payload::Meta)).
    pub(crate) fn command<C: Command>(command: C) -> Self {
        Self::with_output::<C, C::Output>(command)
    }

    /// What [`command`](Self::command) stores of a `C` (see
    /// [`Payload::meta_with_output`]).
    #[inline(always)]
    pub(crate) fn command_meta<C: Command>() -> &'static crate::payload::Meta {
        Self::meta_with_output::<C, C::Output>()
    }
}

/// A lightweight state machine run by being stepped with [`Event`]s.
///
/// The scheduler calls [`init`](Process::init) once, then [`step`](Process::step)
/// whenever events arrive (or the process asked to [`Continue`](Status::Continue)),
/// until a step reports [`Status::Done`] or fails; then [`close`](Process::close),
/// exactly once, however the process ended — also after a failed `init`, a panic or a
/// shutdown that stopped it.
///
/// A step must not block: to wait for the outside world the process *yields* a
/// [`Command`] with a [`Tag`] into the [`StepOutput`] and reports
/// [`Status::WaitingForYields`]; the command's handler completes it later and the
/// process is stepped with an [`Event::Completion`] carrying the same tag.
pub trait Process: Send + 'static {
    /// Prepares to run the entry `method` with the `input` arguments.
    ///
    /// An unknown `method` must fail with [`InitError::UnknownMethod`] listing the
    /// available ones; wrong arguments with [`InitError::ArgumentCount`] or
    /// [`InitError::ArgumentType`]. `ctx` gives the process its PID and lets it send
    /// messages and spawn processes; keep it if the steps need it.
    fn init(&mut self, ctx: Context, method: &str, input: Payloads) -> Result<(), InitError>;

    /// Advances the state machine with `events` (possibly none: a step with no events
    /// must be harmless) and writes the new [`Status`] and any yields into `out`.
    ///
    /// `out` arrives cleared. Returning an error ends the process with
    /// [`ProcessError::Failed`](crate::ProcessError::Failed).
    ///
    /// A completion whose tag is not outstanding — a second completion of a tag
    /// (a simulation delivers some on purpose), one for a withdrawn tag, or one for
    /// a tag never yielded — must be ignored, as `#[process]` machines do.
    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError>;

    /// Releases resources. Called exactly once, after the last step.
    fn close(&mut self) {}

    /// Not part of the API, and nothing to implement: the runners (the scheduler and
    /// [`testing`](crate::testing)) call it just before `init` to promise that the
    /// process stays where it is until it is closed. A `#[process]` machine keeps its
    /// entry's coroutine inline, which must not move once it has run (it may borrow
    /// from itself), so it starts only after this promise.
    ///
    /// # Safety
    /// The process is not moved from this call until [`close`](Process::close) has
    /// returned (or, if it is never closed, until it is dropped).
    #[doc(hidden)]
    unsafe fn __stays_in_place(&mut self) {}

    /// Not part of the API, and nothing to implement: the runner calls it, before
    /// `init`, when it gives the process a bounded mailbox
    /// ([`SpawnOptions::bounded_mailbox`](crate::SpawnOptions::bounded_mailbox)). It
    /// returns whether the process keeps messages it took in without receiving
    /// them, which then count against the capacity until it reports them received:
    /// a `#[process]` machine does, for what its `recv!`s have not taken. Every
    /// other process receives what its steps take in.
    #[doc(hidden)]
    fn __bounded_mailbox(&mut self) -> bool {
        false
    }

    /// Not part of the API, and nothing to implement: the type listings and
    /// recordings name the process by (`Crawler` in `Crawler::run <5>`), as
    /// [`std::any::type_name`] spells it. The implementing type; a `#[process]`
    /// machine gives its struct's, not its own. Read once per process type, into
    /// a static the process's cell points to.
    #[doc(hidden)]
    fn __type_name() -> &'static str
    where
        Self: Sized,
    {
        std::any::type_name::<Self>()
    }
}

impl Process for Box<dyn Process> {
    fn init(&mut self, ctx: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        (**self).init(ctx, method, input)
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        (**self).step(events, out)
    }

    fn close(&mut self) {
        (**self).close()
    }

    unsafe fn __stays_in_place(&mut self) {
        // SAFETY: what the caller promises for the box holds for its contents: moving
        // the box leaves them where they are, and they are dropped where they are.
        unsafe { (**self).__stays_in_place() }
    }

    fn __bounded_mailbox(&mut self) -> bool {
        (**self).__bounded_mailbox()
    }
}

/// Anything that can be spawned as a process: every [`Process`], and the plain structs
/// whose `impl` block carries [`#[process]`](crate::process) (the macro implements this
/// trait for them, wrapping the struct into the state machine that runs its entries).
///
/// Spawning APIs take `impl IntoProcess`, so a user passes `MyProc { .. }` whichever
/// way its `Process` implementation was made. Mirrors `std`'s `IntoFuture`.
///
/// The process's type is not named (`impl Process`): the macro's is generic over the
/// type of its entries' coroutine, which has no name.
pub trait IntoProcess: Send + 'static {
    /// Converts `self` into the process to initialise and step.
    fn into_process(self) -> impl Process;
}

impl<P: Process> IntoProcess for P {
    fn into_process(self) -> impl Process {
        self
    }
}

/// Something that happened to a process, handed to [`Process::step`].
#[derive(Debug)]
pub enum Event {
    /// A yielded command completed (or failed).
    Completion(Completion),
    /// A message sent to the process's PID.
    Message(Message),
    /// The process is asked to stop (shutdown or an explicit cancel). It may keep
    /// running, and yielding, while it cleans up; it should then finish.
    Cancel,
}

/// The completion of the yield that carried `tag`.
#[derive(Debug)]
pub struct Completion {
    /// The tag of the yield this completes.
    pub tag: Tag,
    /// The command's output, or why there is none.
    pub result: Result<Payload, YieldError>,
}

/// A message delivered to a process.
#[derive(Debug)]
pub struct Message {
    /// The sending process, or `None` when sent from outside any process.
    pub from: Option<Pid>,
    /// What was sent.
    pub payload: Payload,
}

/// The events of one step, drained from the scheduler's reusable buffer.
///
/// Events not consumed by the step are dropped when the step returns (one by one,
/// a panic in one's `Drop` caught, so it neither fails the step nor aborts the
/// program by panicking again while the rest are dropped).
pub struct Events<'a> {
    // Two words, so a step receives its events in two registers: a larger iterator
    // (a `vec::Drain` is five words) is passed through memory that the caller has
    // just written and the step at once reads back with wider loads, a
    // store-forwarding stall on every step.
    //
    // Invariant: `buffer`'s length is 0 while this exists (so forgetting it leaks
    // events, never drops one twice); its elements `next..end` are live, owned by
    // this iterator, and the ones before `next` were moved out. `next` and `end`
    // share one word (`Cursor`): a pointer and one integer are a pair the ABI
    // passes in registers, where three fields would go through memory.
    buffer: &'a mut Vec<Event>,
    cursor: Cursor,
}

/// `next` in the low 32 bits, `end` in the high 32.
#[derive(Clone, Copy)]
struct Cursor(u64);

impl Cursor {
    fn new(end: u32) -> Self {
        Self(u64::from(end) << 32)
    }

    fn next(self) -> u32 {
        self.0 as u32
    }

    fn end(self) -> u32 {
        (self.0 >> 32) as u32
    }

    fn left(self) -> u32 {
        self.end() - self.next()
    }
}

impl Drop for Events<'_> {
    #[inline]
    fn drop(&mut self) {
        // Most steps consume every event: nothing to do then, and it is inlined
        // into every step.
        if self.cursor.left() != 0 {
            drop_all_quietly(self.by_ref());
        }
    }
}

impl<'a> Events<'a> {
    /// Drains `buffer` (which keeps its capacity for reuse).
    ///
    /// # Panics
    /// If `buffer` holds more than `u32::MAX` events.
    pub fn new(buffer: &'a mut Vec<Event>) -> Self {
        let end = u32::try_from(buffer.len()).expect("at most u32::MAX events per step");
        // SAFETY: shrinking the length leaves the elements in place, now owned by the
        // iterator (see the invariant).
        unsafe { buffer.set_len(0) };
        Self {
            buffer,
            cursor: Cursor::new(end),
        }
    }

    /// Takes the next event, left where it is in the buffer (see [`InPlace`]), if
    /// it is a completion that `accept` accepts, or else a message when `message`
    /// says one is wanted; leaves it otherwise. For the macro's step: the event
    /// is found once for both looks.
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    pub(crate) fn next_direct(
        &mut self,
        accept: impl FnOnce(&Completion) -> bool,
        message: impl FnOnce() -> bool,
    ) -> (
        Option<InPlace<'a, Completion>>,
        Option<InPlace<'a, Message>>,
    ) {
        if self.cursor.left() == 0 {
            return (None, None);
        }
        // `as_mut_ptr` makes no reference to the elements, so the pointer stays
        // valid while the iterator goes on reading the others.
        // SAFETY: element `next` is live and owned by the iterator (see the
        // invariant).
        let event = unsafe { &mut *self.buffer.as_mut_ptr().add(self.cursor.next() as usize) };
        // One kind at a time, the message's after `message`: a single match on
        // both kinds decoded the variant first, a longer way to the usual answer.
        if let Event::Completion(c) = event {
            if !accept(c) {
                return (None, None);
            }
            // The event is handed to the `InPlace`, which owns the part (all of the
            // event that owns anything: the variant's one field) from now on: past
            // `next`, the iterator no longer drops it (see the invariant). `next <
            // end`, so this cannot carry into `end`.
            self.cursor.0 += 1;
            return (Some(InPlace::new(c)), None);
        }
        if !message() {
            return (None, None);
        }
        let Event::Message(m) = event else {
            return (None, None);
        };
        // As above.
        self.cursor.0 += 1;
        (None, Some(InPlace::new(m)))
    }

    fn remaining(&self) -> &[Event] {
        // SAFETY: the elements `next..end` are live and in the buffer's allocation
        // (see the invariant); nothing moves them while `self` is borrowed.
        unsafe {
            std::slice::from_raw_parts(
                self.buffer.as_ptr().add(self.cursor.next() as usize),
                self.cursor.left() as usize,
            )
        }
    }
}

/// A completion or message in a step's event buffer, taken out of the [`Events`]
/// but not moved: it is read out once, by [`take`](Self::take), where it is
/// needed, or dropped where it is. Moving it to the step's stack and reading it
/// back from there made the machine's step load fields wider than it had stored
/// them (a store-forwarding stall, in one build out of two).
pub(crate) struct InPlace<'a, T> {
    /// Owned: see `Events::next_direct`.
    value: NonNull<T>,
    /// The buffer it lives in stays borrowed (nothing can move or overwrite it).
    _owns: PhantomData<&'a mut T>,
}

impl InPlace<'_, Completion> {
    /// The tag of the completion.
    #[inline(always)]
    pub(crate) fn tag(&self) -> Tag {
        // SAFETY: the completion is live and owned by `self` (see the fields).
        unsafe { self.value.as_ref() }.tag
    }
}

impl<'a, T> InPlace<'a, T> {
    /// The value's address: nonzero, so that `Option`s of these can be tested
    /// together by or-ing it (`macro_support/io.rs`).
    #[inline(always)]
    pub(crate) fn addr(&self) -> usize {
        self.value.as_ptr().addr()
    }

    /// Owns `value` from now on: the caller stops owning it (see
    /// `Events::next_direct`).
    #[inline(always)]
    fn new(value: &'a mut T) -> Self {
        Self {
            value: NonNull::from(value),
            _owns: PhantomData,
        }
    }

    /// Reads the value out.
    #[inline(always)]
    pub(crate) fn take(self) -> T {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the value is live and owned by `self`, which is forgotten: it is
        // read out once and never dropped in place.
        unsafe { std::ptr::read(this.value.as_ptr()) }
    }
}

impl<T> Drop for InPlace<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the value is live and owned by `self`, and never used again.
        unsafe { std::ptr::drop_in_place(self.value.as_ptr()) }
    }
}

impl Iterator for Events<'_> {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        if self.cursor.left() == 0 {
            return None;
        }
        // SAFETY: element `next` is live and owned by the iterator (see the
        // invariant); advancing `next` hands its ownership to the caller.
        let event = unsafe { self.buffer.as_ptr().add(self.cursor.next() as usize).read() };
        // `next < end`, so this cannot carry into `end`.
        self.cursor.0 += 1;
        Some(event)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.cursor.left() as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Events<'_> {}

impl fmt::Debug for Events<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Events").field(&self.remaining()).finish()
    }
}

/// Where a process stands after a step.
#[derive(Debug)]
pub enum Status {
    /// Finished with this result.
    Done(Payload),
    /// Suspended until a completion of one of its outstanding yields arrives (or a
    /// cancel). Messages that arrive meanwhile are queued and handed to the next step.
    WaitingForYields,
    /// Suspended until a message arrives. A completion or a cancel wakes it too.
    WaitingForMessage,
    /// Runnable again at once; used to give the worker back during long computations.
    Continue,
}

/// A command yielded by a step: the command value, type-erased, and its tag.
pub struct Yield {
    tag: Tag,
    /// A payload rather than a box: small commands are stored inline, unallocated.
    /// It also knows the command's type and type name.
    command: Payload,
}

impl Yield {
    /// A yield of `command` tagged `tag`.
    #[inline]
    pub fn new<C: Command>(tag: Tag, command: C) -> Self {
        Self {
            tag,
            command: Payload::command(command),
        }
    }

    /// The type of the command's output, which its completion must hold.
    pub(crate) fn output_type(&self) -> Option<crate::payload::OutputType> {
        self.command.output_type()
    }

    /// The tag its completion will carry.
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// The command's type name, as `std::any::type_name` spells it.
    pub fn command_name(&self) -> &'static str {
        self.command.type_name()
    }

    /// The command's `TypeId`: the key handlers are registered under.
    pub fn command_type(&self) -> TypeId {
        self.command.value_type_id()
    }

    /// Whether the command is a `C`.
    pub fn is<C: Command>(&self) -> bool {
        self.command.is::<C>()
    }

    /// Borrows the command as a `C`.
    pub fn command<C: Command>(&self) -> Option<&C> {
        self.command.downcast_ref::<C>()
    }

    /// Takes the command out as a `C`, or gives the yield back.
    pub fn into_command<C: Command>(self) -> Result<C, Self> {
        if self.is::<C>() {
            Ok(self
                .command
                .downcast::<C>()
                .unwrap_or_else(|_| unreachable!("type was checked")))
        } else {
            Err(self)
        }
    }

    /// The type-erased command (for recorded histories, which encode it).
    #[cfg(feature = "sim")]
    pub(crate) fn command_payload(&self) -> &Payload {
        &self.command
    }

    /// The type-erased command, in place.
    pub(crate) fn command_mut(&mut self) -> &mut Payload {
        &mut self.command
    }
}

impl fmt::Debug for Yield {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Yield({} {})", self.tag, self.command_name())
    }
}

/// Where a suspended process waits: the source location of the suspension point and
/// what it waits for. Shown in [`Scheduler::processes`](crate::Scheduler::processes)
/// and in the [`testing`](crate::testing) harness's messages.
#[derive(Clone, Copy, Debug, Eq)]
pub struct SuspendPoint {
    /// The source location (for the macro: the `yield_cmd!` / `recv!` call).
    pub location: &'static Location<'static>,
    /// What the process waits for there.
    pub kind: SuspendKind,
}

/// What a suspended process waits for.
#[derive(Clone, Copy, Debug, Eq)]
#[non_exhaustive]
pub enum SuspendKind {
    /// The completion of yielded commands; `command` names the (first) command type
    /// and `count` how many of those yielded together are still outstanding.
    Yield {
        /// The type name of the (first) yielded command.
        command: &'static str,
        /// How many commands the suspension point still waits for (a `#[process]`
        /// counts down as completions arrive in the order the commands were
        /// yielded; a hand-written process reports what it likes, ideally the
        /// same).
        count: usize,
    },
    /// A message; `message_type` is set when a specific type is awaited.
    Receive {
        /// The awaited message type, if the receive is typed.
        message_type: Option<&'static str>,
    },
}

// Equality as derived, but `&'static` pointers that are equal settle it first: the
// runtime compares every step's point with the previous one, and a process that
// waits at the same call site again hands in the same pointers, so it need not
// compare file and type names byte by byte.
impl PartialEq for SuspendPoint {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        (std::ptr::eq(self.location, other.location) || self.location == other.location)
            && self.kind == other.kind
    }
}

impl PartialEq for SuspendKind {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        fn same(a: &str, b: &str) -> bool {
            std::ptr::eq(a, b) || a == b
        }
        match (self, other) {
            (
                Self::Yield { command, count },
                Self::Yield {
                    command: other_command,
                    count: other_count,
                },
            ) => count == other_count && same(command, other_command),
            (
                Self::Receive { message_type },
                Self::Receive {
                    message_type: other_type,
                },
            ) => match (message_type, other_type) {
                (Some(a), Some(b)) => same(a, b),
                (a, b) => a.is_none() && b.is_none(),
            },
            _ => false,
        }
    }
}

impl fmt::Display for SuspendPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            SuspendKind::Yield { command, count: 1 } => write!(f, "yield of `{}`", Short(command))?,
            SuspendKind::Yield { command, count } => {
                write!(f, "yield of {count} commands (first `{}`)", Short(command))?
            }
            SuspendKind::Receive { message_type: None } => f.write_str("receive")?,
            SuspendKind::Receive {
                message_type: Some(t),
            } => write!(f, "receive of `{}`", Short(t))?,
        }
        write!(
            f,
            " at {}:{}:{}",
            self.location.file(),
            self.location.line(),
            self.location.column()
        )
    }
}

/// A [`SuspendPoint`] in three words instead of four, as a step's output and every
/// cell keep it: the location, the name the kind carries (a yielded command's type,
/// or a typed receive's message type; null for an untyped receive), and one word
/// with the name's length, the kind, and a yield's count (saturating at `u32::MAX`,
/// far beyond any `yield_all!` that fits in memory). Packed where the point is set,
/// where most of it is known when compiling, so that the step's end compares and
/// publishes it without packing.
#[derive(Clone, Copy)]
pub(crate) struct PackedPoint {
    location: &'static std::panic::Location<'static>,
    name: *const u8,
    /// Bits 0..32: the count; bits 32..63: the name's length; bit 63: a receive.
    word: u64,
}

// SAFETY: `name` points into a `&'static str` (or is null): shared, immutable data
// that any thread may read.
unsafe impl Send for PackedPoint {}

/// Compared word by word, the location by address: a derived comparison compared
/// the locations' file names byte by byte, a `memcmp` on every step. A point equal
/// by value but at another address only gets published again.
impl PartialEq for PackedPoint {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.location, other.location)
            && self.name == other.name
            && self.word == other.word
    }
}

const RECEIVE: u64 = 1 << 63;

impl PackedPoint {
    #[inline]
    pub(crate) fn pack(point: &SuspendPoint) -> Self {
        let (name, count, receive) = match point.kind {
            SuspendKind::Yield { command, count } => (Some(command), count, 0),
            SuspendKind::Receive { message_type } => (message_type, 0, RECEIVE),
        };
        let len = name.map_or(0, str::len) as u64;
        debug_assert!(len < 1 << 31, "type names are short");
        Self {
            location: point.location,
            name: name.map_or(std::ptr::null(), str::as_ptr),
            word: receive | (len << 32) | count.min(u32::MAX as usize) as u64,
        }
    }

    pub(crate) fn unpack(self) -> SuspendPoint {
        let len = ((self.word & !RECEIVE) >> 32) as usize;
        // SAFETY: `name` and `len` are those of a `&'static str` (see `pack`) unless
        // `name` is null.
        let name = (!self.name.is_null()).then(|| unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.name, len))
        });
        let kind = if self.word & RECEIVE != 0 {
            SuspendKind::Receive { message_type: name }
        } else {
            SuspendKind::Yield {
                command: name.unwrap_or_default(),
                count: (self.word as u32) as usize,
            }
        };
        SuspendPoint {
            location: self.location,
            kind,
        }
    }
}

impl fmt::Debug for PackedPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.unpack(), f)
    }
}

/// What a step writes: its status, the commands it yields, the earlier yields it
/// withdraws, and where it waits.
///
/// Owned by the scheduler and reused across steps, so its vectors keep their capacity:
/// steady-state stepping allocates nothing here.
#[derive(Debug, Default)]
pub struct StepOutput {
    status: Option<Status>,
    yields: Vec<Yield>,
    withdrawn: Vec<Tag>,
    suspended_at: Option<PackedPoint>,
}

impl StepOutput {
    /// An empty output.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the status (the last call wins).
    #[inline]
    pub fn set_status(&mut self, status: Status) {
        self.status = Some(status);
    }

    /// Sets a waiting status, as a `#[process]`'s suspension point does: the old
    /// status is not dropped (the compiler's check of it for a `Done` to drop was
    /// two instructions a suspension). It is none (the runners clear the output
    /// before a step, and a poll suspends once), and a waiting status owns
    /// nothing: forgetting one leaks nothing either.
    #[inline(always)]
    pub(crate) fn set_wait_status(&mut self, status: Status) {
        debug_assert!(matches!(
            status,
            Status::WaitingForYields | Status::WaitingForMessage
        ));
        debug_assert!(!matches!(self.status, Some(Status::Done(_))));
        std::mem::forget(self.status.replace(status));
    }

    /// The status set so far.
    pub fn status(&self) -> Option<&Status> {
        self.status.as_ref()
    }

    /// Takes the status out, leaving none.
    #[inline]
    pub fn take_status(&mut self) -> Option<Status> {
        // The variant is read on its own, and the payload only for `Done`: copying
        // the whole status out in wide loads, right after the step stored only a
        // variant, stalls on store forwarding.
        let status = match self.status {
            None => return None,
            Some(Status::Done(_)) => return self.status.take(),
            Some(Status::WaitingForYields) => Status::WaitingForYields,
            Some(Status::WaitingForMessage) => Status::WaitingForMessage,
            Some(Status::Continue) => Status::Continue,
        };
        self.status = None;
        Some(status)
    }

    /// Yields `command` with `tag`.
    #[inline]
    pub fn yield_command<C: Command>(&mut self, tag: Tag, command: C) {
        self.yields.reserve(1);
        let len = self.yields.len();
        // SAFETY: `reserve` made room for one more; the slot is written, then
        // counted. Built in place: `push` would build the yield first and copy it
        // after its capacity check, reading back what was just stored (a
        // store-forwarding stall on every yield).
        unsafe {
            self.yields
                .as_mut_ptr()
                .add(len)
                .write(Yield::new(tag, command));
            self.yields.set_len(len + 1);
        }
    }

    /// [`yield_command`](Self::yield_command) of a command that `meta` describes
    /// (`Payload::command_meta`, looked up where `C`'s bounds are known: see
    /// `Payload::from_parts`). (Written out twice on purpose: `yield_command` as a
    /// call of this with `Payload::command(command)` built the payload first and
    /// moved it, and a hand-written yield went from 26 to 30–33 ns on `step_cost`.)
    /// Wrapped after the room is made: a payload made before it was stored on the
    /// stack for the unwinding of a failed `reserve` to drop (two stores a
    /// `yield_cmd!`).
    ///
    /// # Safety
    /// As [`Payload::from_parts`]: `meta` describes a `C`.
    #[inline]
    pub(crate) unsafe fn yield_parts<C>(&mut self, tag: Tag, command: C, meta: &'static Meta) {
        self.yields.reserve(1);
        let len = self.yields.len();
        // SAFETY: `meta` describes a `C` (the contract).
        let command = unsafe { Payload::from_parts(command, meta) };
        // SAFETY: as in `yield_command`.
        unsafe {
            self.yields
                .as_mut_ptr()
                .add(len)
                .write(Yield { tag, command });
            self.yields.set_len(len + 1);
        }
    }

    /// Appends a ready-made yield.
    #[inline]
    pub fn push_yield(&mut self, y: Yield) {
        self.yields.push(y);
    }

    /// The yields written so far, in order.
    pub fn yields(&self) -> &[Yield] {
        &self.yields
    }

    /// Removes and returns the yields, in order (the buffer keeps its capacity).
    pub fn drain_yields(&mut self) -> std::vec::Drain<'_, Yield> {
        self.yields.drain(..)
    }

    /// Runs `f` on each yield in place, in order, then drops them (most left as
    /// unit payloads by handlers that took their commands).
    pub(crate) fn dispatch_yields(&mut self, mut f: impl FnMut(&mut Yield)) {
        for y in &mut self.yields {
            f(y);
        }
        self.yields.clear();
    }

    /// The yields buffer itself: the macro's suspension points write their yields
    /// straight into it, making room for a whole `yield_all!` at once.
    #[inline]
    pub(crate) fn yields_buffer(&mut self) -> &mut Vec<Yield> {
        &mut self.yields
    }

    /// Gives up on the completion of the earlier yield tagged `tag`.
    ///
    /// The runtime then releases what a built-in handler holds for it: a
    /// [`Sleep`](crate::command::Sleep)'s timer is cancelled and its memory freed at
    /// once, instead of at its deadline. (Other handlers are not told; their
    /// completion arrives as usual.) A completion already on its way may still
    /// arrive: a process that withdraws a tag must ignore completions carrying it.
    /// Withdrawing a tag that has completed, or was never yielded, does nothing.
    ///
    /// Withdrawals take effect after the step's yields are dispatched, so a yield of
    /// the same tag made in the same step is withdrawn too: give each yield a tag of
    /// its own. `recv!(.., timeout = …)` withdraws its timer when a message comes
    /// first, and a cancelled `yield_cmd!` withdraws the yields it gives up on.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wsched::command::Sleep;
    /// use wsched::{StepOutput, Tag};
    ///
    /// let mut out = StepOutput::new();
    /// // A step that got what it waited for gives up on its timeout.
    /// out.withdraw(Tag(1));
    /// out.yield_command(Tag(2), Sleep(Duration::from_secs(5)));
    /// assert_eq!(out.withdrawn(), &[Tag(1)]);
    /// out.clear();
    /// assert!(out.withdrawn().is_empty());
    /// ```
    #[inline]
    pub fn withdraw(&mut self, tag: Tag) {
        self.withdrawn.push(tag);
    }

    /// The tags withdrawn so far in this step, in order.
    pub fn withdrawn(&self) -> &[Tag] {
        &self.withdrawn
    }

    /// Removes and returns the withdrawn tags, in order (the buffer keeps its
    /// capacity).
    pub fn drain_withdrawn(&mut self) -> std::vec::Drain<'_, Tag> {
        self.withdrawn.drain(..)
    }

    /// Records where the process waits (for listings and diagnostics).
    #[inline]
    pub fn set_suspend_point(&mut self, point: SuspendPoint) {
        self.suspended_at = Some(PackedPoint::pack(&point));
    }

    /// Where the process said it waits (a yield's count saturates at `u32::MAX`, as
    /// in [`Scheduler::processes`](crate::Scheduler::processes)).
    pub fn suspend_point(&self) -> Option<SuspendPoint> {
        self.suspended_at.map(PackedPoint::unpack)
    }

    /// [`suspend_point`](Self::suspend_point), packed, by reference.
    pub(crate) fn packed_suspend_point(&self) -> &Option<PackedPoint> {
        &self.suspended_at
    }

    /// Clears everything for the next step, keeping the buffer's capacity.
    pub fn clear(&mut self) {
        self.status = None;
        self.yields.clear();
        self.withdrawn.clear();
        self.suspended_at = None;
    }
}

/// The message of a caught panic: its `&str` or `String` payload.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// Drops `value`, catching a panic in its `Drop`: user values (payloads, commands,
/// results) are dropped on worker, timer and blocking threads, which must survive
/// anything a user value does. The panic hook has already reported the panic.
pub(crate) fn drop_quietly<T>(value: T) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(value)));
}

/// Drops every item of `items`, each under its own `catch_unwind`. Dropping a
/// collection whole would drop the rest of it while unwinding from the first panic,
/// and a second panicking `Drop` would then abort the program.
pub(crate) fn drop_all_quietly<T>(items: impl IntoIterator<Item = T>) {
    for item in items {
        drop_quietly(item);
    }
}

/// Runs `init` as the contract requires of every runner (the scheduler and the
/// testing harness): a panic is caught, and a refused or panicking init closes the
/// process at once, since `close` runs exactly once however a process ends.
///
/// The caller must not move `process` from this call until it is closed or dropped
/// (the scheduler's cell and the harness keep it in a box): this function promises
/// so to the process ([`Process::__stays_in_place`]), and the soundness of the
/// macro's machine rests on it.
pub(crate) fn init_process(
    process: &mut dyn Process,
    ctx: Context,
    method: &str,
    input: Payloads,
) -> Result<(), SpawnError> {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let error = match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller keeps `process` where it is until it is closed (above).
        unsafe { process.__stays_in_place() };
        process.init(ctx, method, input)
    })) {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) => SpawnError::Init(e),
        Err(panic) => SpawnError::InitPanicked {
            message: panic_message(&*panic),
        },
    };
    let _ = catch_unwind(AssertUnwindSafe(|| process.close()));
    Err(error)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn messages(n: usize, drops: &Arc<AtomicUsize>) -> Vec<Event> {
        (0..n)
            .map(|_| {
                Event::Message(Message {
                    from: None,
                    payload: Payload::new(Counted(drops.clone())),
                })
            })
            .collect()
    }

    #[test]
    fn events_hand_out_each_event_once_and_drop_the_rest() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut buffer = messages(5, &drops);
        let capacity = buffer.capacity();
        let mut events = Events::new(&mut buffer);
        assert_eq!(events.len(), 5);
        let first = events.next().expect("five events");
        let second = events.next().expect("five events");
        assert_eq!(events.size_hint(), (3, Some(3)));
        assert!(format!("{events:?}").starts_with("Events(["));
        drop(events);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            3,
            "the three left are dropped"
        );
        drop((first, second));
        assert_eq!(drops.load(Ordering::SeqCst), 5, "each exactly once");
        assert!(buffer.is_empty());
        assert_eq!(buffer.capacity(), capacity, "the buffer is kept for reuse");
    }

    #[test]
    fn forgotten_events_leak_and_are_never_dropped_twice() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut buffer = messages(3, &drops);
        let mut events = Events::new(&mut buffer);
        drop(events.next());
        std::mem::forget(events);
        assert!(buffer.is_empty(), "the buffer no longer owns the events");
        drop(buffer);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "only the consumed one");
    }

    #[test]
    fn suspend_points_compare_by_value_whatever_the_pointers() {
        let here = Location::caller();
        let receive = |name: &'static str| SuspendPoint {
            location: here,
            kind: SuspendKind::Receive {
                message_type: Some(name),
            },
        };
        // The same text at two addresses.
        let owned: &'static str = Box::leak(String::from("u32").into_boxed_str());
        assert_eq!(receive("u32"), receive(owned));
        assert_ne!(receive("u32"), receive("u64"));
        let copy: &'static Location<'static> = Box::leak(Box::new(*here));
        assert_eq!(
            SuspendPoint {
                location: copy,
                ..receive("u32")
            },
            receive("u32")
        );
        let yield_of = |command, count| SuspendPoint {
            location: here,
            kind: SuspendKind::Yield { command, count },
        };
        assert_eq!(yield_of("Nop", 2), yield_of("Nop", 2));
        assert_ne!(yield_of("Nop", 2), yield_of("Nop", 3));
        assert_ne!(yield_of("Nop", 1), receive("Nop"));
        let untyped = SuspendPoint {
            location: here,
            kind: SuspendKind::Receive { message_type: None },
        };
        assert_ne!(untyped, receive("u32"));
        assert_eq!(untyped, untyped);
    }

    #[test]
    fn suspension_points_pack_and_unpack_unchanged() {
        let here = std::panic::Location::caller();
        for kind in [
            SuspendKind::Yield {
                command: "my_crate::Fetch",
                count: 10_000,
            },
            SuspendKind::Yield {
                command: "",
                count: 1,
            },
            SuspendKind::Receive { message_type: None },
            SuspendKind::Receive {
                message_type: Some("alloc::string::String"),
            },
        ] {
            let point = SuspendPoint {
                location: here,
                kind,
            };
            let unpacked = PackedPoint::pack(&point).unpack();
            assert_eq!(unpacked, point);
            assert_eq!(format!("{unpacked:?}"), format!("{point:?}"));
        }
        assert_eq!(std::mem::size_of::<Option<PackedPoint>>(), 24);
    }
}
