//! The suspension points: the small futures that `yield_cmd!`, `yield_all!`,
//! `recv!` and `call!` await inside entries.
//!
//! Each one, when it cannot complete, writes its [`SuspendPoint`] and the status
//! that follows from it into the step's output, and returns `Pending`. A `Pending`
//! without a status in the output means the entry awaited something else, which
//! the step reports as an error.
//!
//! A pending cancel is reported by the first suspension point that would otherwise have
//! to wait; results that are already there are handed out first, so nothing is lost.
//!
//! A suspension point dropped while it waits (the loser of a select a user wrote,
//! say) gives up what it waited for as a cancel does: its outstanding yields are
//! withdrawn (which cancels their timers and calls) and their tags retired, so
//! their completions are ignored and their slots recycled ([`abandon_dropped`]).
//! Each future marks when it has nothing outstanding any more, so that the drop of
//! one that completed, the usual case, is a check the compiler folds away.

use std::any::{type_name, Any, TypeId};
use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context as TaskCx, Poll};
use std::time::Duration;

use super::io::{self, Io};
use crate::command::{Call, CallAnswer, Command, Sleep, Spawn};
use crate::engine::context::Context;
use crate::engine::process::{Message, StepOutput, SuspendKind, SuspendPoint, Tag};
use crate::error::{RecvError, YieldError};
use crate::payload::{same_type, Meta, Payload};
use crate::pid::Pid;
use crate::runtime::CallError;

#[inline]
fn output<T: Any + Send>(result: Result<Payload, YieldError>) -> Result<T, YieldError> {
    if TypeId::of::<T>() == TypeId::of::<Payload>() {
        // An output that is a payload itself: `downcast` hands it over as it is.
        return result?
            .downcast::<T>()
            .map_err(|_| unreachable!("T is Payload"));
    }
    result?
        .take_sent::<T>()
        .map_err(|payload| YieldError::WrongOutputType {
            expected: type_name::<T>(),
            actual: payload.type_name(),
        })
}

/// `yield_cmd!(command)`: the future that yields `command` with the next tag when
/// first polled, and then waits for its completion.
///
/// The macro awaits the future at once, so the command is yielded in program order
/// (tags follow it), as if it were yielded here. Yielding at the first poll rather
/// than here lets the yield reach the process's state through the poll's waker (see
/// `io::with_step_in`), which the compiler sees through, instead of the
/// thread-local slot.
// Inlined into the entry's coroutine: returned from a call, the future went through
// memory and was read back at once, wider than it was written (a store-forwarding
// stall on every `yield_cmd!`).
#[track_caller]
#[inline(always)]
pub fn yield_one<C: Command>(command: C) -> YieldOne<C::Output, C> {
    YieldOne {
        command: Some(command),
        meta: Payload::command_meta::<C>(),
        tag: Tag(0),
        location: Location::caller(),
        _types: PhantomData,
    }
}

/// `yield_cmd!(command)`: [`yield_one`], its place given by `at` (`||
/// Location::caller()` written by the macro, so the `yield_cmd!`'s own place),
/// which the future keeps as a type (see [`At`]).
#[inline(always)]
pub fn yield_one_at<C: Command, L: Fn() -> &'static Location<'static>>(
    command: C,
    at: L,
) -> YieldOne<C::Output, C, At<L>> {
    YieldOne {
        command: Some(command),
        meta: Payload::command_meta::<C>(),
        tag: Tag(0),
        location: At(at),
        _types: PhantomData,
    }
}

/// The completion of one yielded command, a `C` whose output is an `O`.
///
/// Its `Future` impl asks nothing of `C` (what the first poll needs to yield the
/// command, [`yield_one`] looked up): a value that is no command is reported once,
/// by `yield_one`, not again at the `.await`.
#[must_use = "a yield does nothing unless awaited"]
pub struct YieldOne<O, C, L = &'static Location<'static>> {
    /// Before the first poll: the command to yield.
    command: Option<C>,
    /// `Payload::command_meta::<C>()`, to wrap it.
    meta: &'static Meta,
    /// From the first poll until it completes (or gives up): the tag it was
    /// yielded with. `Tag(0)` otherwise, which no yield carries (tags start at 1).
    tag: Tag,
    location: L,
    _types: PhantomData<fn() -> (O, C)>,
}

impl<O, C, L> Unpin for YieldOne<O, C, L> {}

impl<O, C, L> Drop for YieldOne<O, C, L> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.tag.0 != 0 {
            abandon_dropped(self.tag.0, 1);
        }
    }
}

/// Gives up on the yields `first .. first + count` of a suspension point dropped
/// while it waited for them: those whose completion has not arrived are withdrawn
/// (their timers, calls and futures released), and every one's tag is retired, so
/// a late completion is ignored and the slots are recycled. Completions that had
/// arrived are dropped here, outside the borrow of the state. Nothing to do
/// outside a step (see `io::try_with_step`).
#[cold]
#[inline(never)]
fn abandon_dropped(first: u64, count: u64) {
    let arrived = io::try_with_step(|io, out| {
        (first..first + count)
            .filter_map(|tag| io.abandon(out, Tag(tag)))
            .collect::<Vec<_>>()
    });
    drop(arrived);
}

impl<O: Any + Send, C, L: Site> Future for YieldOne<O, C, L> {
    type Output = Result<O, YieldError>;

    // Inlined into the entry's coroutine.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // Looked at before it is taken: a later poll writes nothing back.
        if this.command.is_none() {
            return this.poll_again(cx);
        }
        match this.command.take() {
            Some(command) => this.poll_first(cx, command),
            None => this.poll_again(cx),
        }
    }
}

impl<O: Any + Send, C, L: Site> YieldOne<O, C, L> {
    /// Where a yield of a `C` made at `location` waits.
    #[inline]
    fn point(location: &'static Location<'static>) -> SuspendPoint {
        SuspendPoint {
            location,
            kind: SuspendKind::Yield {
                command: type_name::<C>(),
                count: 1,
            },
        }
    }

    /// The first poll: yields the command. Its completion cannot be there
    /// (completions arrive between steps), so the yield waits, unless a cancel is
    /// pending.
    #[inline(always)]
    fn poll_first(&mut self, cx: &TaskCx<'_>, command: C) -> Poll<Result<O, YieldError>> {
        let location = self.location.location();
        let meta = self.meta;
        // The closures lent the state are inlined by force: each `yield_cmd!` of
        // the same command type calls the same closure, which LLVM stopped inlining
        // from the third call site on (a call, and the state passed through memory,
        // on every yield of a process with several such sites).
        let (tag, cancelled) = io::with_step_in_unsettled(
            cx,
            "yield_cmd!",
            #[inline(always)]
            |io, out| {
                // SAFETY: `meta` is `command_meta::<C>()` (see `yield_one`).
                let tag = unsafe { io.dispatch_parts(out, command, meta) };
                if io.take_cancel() {
                    // Just yielded, so not arrived: nothing to drop.
                    let _ = io.abandon(out, tag);
                    return (tag, true);
                }
                io.suspend(out, Self::point(location));
                (tag, false)
            },
        );
        if cancelled {
            // Given up on already: nothing outstanding.
            Poll::Ready(Err(YieldError::Cancelled))
        } else {
            self.tag = tag;
            Poll::Pending
        }
    }

    /// A poll in a later step: the completion may be there.
    // Inlined into the coroutine, however many `yield_cmd!`s of a `C` there are:
    // the usual case, and the lending of the state for the rest, `poll_slots`.
    // No function that is not inlined gets `cx`: the waker would escape with it,
    // and the compiler could no longer see through it in the rest of the
    // coroutine (a look-up of the state through memory at every suspension point).
    #[inline(always)]
    fn poll_again(&mut self, cx: &TaskCx<'_>) -> Poll<Result<O, YieldError>> {
        // The usual case, the completion of a yield made alone.
        let got = match io::take_direct(cx, "yield_cmd!", self.tag) {
            Some(result) => Some(result),
            None => io::with_step_in(
                cx,
                "yield_cmd!",
                #[inline(always)]
                |io, out| self.poll_slots(io, out),
            ),
        };
        match got {
            Some(result) => {
                let output = output::<O>(result);
                // Taken (or given up on, for a cancel): nothing outstanding. Stored
                // last, next to the drop that reads it, so that the compiler folds
                // the two (nothing in between may write to the future).
                self.tag = Tag(0);
                Poll::Ready(output)
            }
            None => Poll::Pending,
        }
    }

    /// [`poll_again`](Self::poll_again) for a completion in the slots, if there.
    #[inline]
    fn poll_slots(
        &mut self,
        io: &mut Io,
        out: &mut StepOutput,
    ) -> Option<Result<Payload, YieldError>> {
        let tag = self.tag;
        if let Some(result) = io.take(tag) {
            return Some(result);
        }
        if io.take_cancel() {
            // Not arrived (checked above), so nothing to drop.
            let _ = io.abandon(out, tag);
            return Some(Err(YieldError::Cancelled));
        }
        io.suspend(out, Self::point(self.location.location()));
        None
    }
}

/// Yields commands of a [`CommandSet`] with the next tags.
pub struct Dispatcher<'a> {
    io: &'a mut Io,
    out: &'a mut StepOutput,
}

impl Dispatcher<'_> {
    /// Yields `command` with the next tag.
    pub fn dispatch<C: Command>(&mut self, command: C) -> Tag {
        self.io.dispatch(self.out, command)
    }
}

/// Several commands yielded together by `yield_cmd!(a, b, …)`: implemented for tuples
/// of up to eight commands (output: the tuple of their results).
pub trait CommandSet: Send + 'static {
    /// The results, in the commands' order.
    type Output;
    /// How many commands.
    const LEN: usize;
    #[doc(hidden)]
    fn first_name(&self) -> &'static str;
    #[doc(hidden)]
    fn dispatch(self, io: &mut Dispatcher<'_>);
    #[doc(hidden)]
    fn collect(results: Results) -> Self::Output;
}

macro_rules! command_tuple {
    ($($c:ident),+) => {
        impl<$($c: Command),+> CommandSet for ($($c,)+) {
            type Output = ($(Result<$c::Output, YieldError>,)+);
            const LEN: usize = [$(stringify!($c)),+].len();

            fn first_name(&self) -> &'static str {
                command_tuple!(@first $($c),+)
            }

            #[allow(non_snake_case)]
            fn dispatch(self, io: &mut Dispatcher<'_>) {
                let ($($c,)+) = self;
                $(io.dispatch($c);)+
            }

            fn collect(mut results: Results) -> Self::Output {
                ($(output::<$c::Output>(results.next().expect("one result per command")),)+)
            }
        }
    };
    (@first $first:ident $(, $rest:ident)*) => { type_name::<$first>() };
}

command_tuple!(A);
command_tuple!(A, B);
command_tuple!(A, B, C);
command_tuple!(A, B, C, D);
command_tuple!(A, B, C, D, E);
command_tuple!(A, B, C, D, E, F);
command_tuple!(A, B, C, D, E, F, G);
command_tuple!(A, B, C, D, E, F, G, H);

/// `yield_cmd!(a, b, …)`: yields all the commands in this step, tags in order, and
/// returns the future of all their results.
#[track_caller]
pub fn yield_many<S: CommandSet>(commands: S) -> YieldMany<S::Output> {
    let location = Location::caller();
    let first_name = commands.first_name();
    let first = io::with_step("yield_cmd!", |io, out| {
        io.reserve(out, S::LEN);
        let first = io.tags_issued() + 1;
        commands.dispatch(&mut Dispatcher { io, out });
        first
    });
    YieldMany::new(first, S::LEN as u64, first_name, location, S::collect)
}

/// `yield_all!(iterable)`: yields every command of the iterable in this step.
///
/// A `yield_all!` of [`Spawn`]s spawns each child as it is yielded, when the
/// scheduler allows it (see `Handlers::spawns_at_yield`): each yield is done at
/// once, with the result the built-in handler would have given it, and the
/// suspension point completes without suspending.
#[track_caller]
pub fn yield_all<C: Command>(commands: impl IntoIterator<Item = C>) -> YieldAll<C::Output> {
    let location = Location::caller();
    let commands = commands.into_iter();
    // Decided once, as nothing a step does changes it.
    if TypeId::of::<C>() == TypeId::of::<Spawn>()
        && io::with_context("yield_all!", Context::spawns_at_yield)
    {
        // `C` is `Spawn`, so its output is `Pid`: the same vector, under the
        // generic name.
        let results = same_type(spawn_all(commands))
            .unwrap_or_else(|_| unreachable!("a `Spawn` completes with a `Pid`"));
        return YieldAll::Done(Some(results));
    }
    let first = io::with_step("yield_cmd!", |io, out| {
        io.reserve(out, commands.size_hint().0);
        io.tags_issued() + 1
    });
    // One borrow of the state per command: the iterator runs user code, which must
    // not run while the state is borrowed (collecting the commands first, as this did
    // before, cost an allocation per `yield_all!`).
    let mut count = 0;
    for command in commands {
        let tag = io::with_step("yield_cmd!", |io, out| io.dispatch(out, command));
        debug_assert_eq!(tag.0, first + count, "the tags of a yield_all! follow on");
        count += 1;
    }
    YieldAll::Waiting(YieldMany::new(
        first,
        count,
        type_name::<C>(),
        location,
        collect_vec::<C>,
    ))
}

/// Spawns the child of each of `commands`, [`Spawn`]s, as it comes, each yield
/// taking its tag and done at once; returns what the built-in handler would have
/// completed them with. Each spawn runs the child's `init`, user code, and so does
/// the iterator: under no borrow of the state.
fn spawn_all<C: Command>(commands: impl Iterator<Item = C>) -> Vec<Result<Pid, YieldError>> {
    let mut results = Vec::with_capacity(commands.size_hint().0);
    for command in commands {
        let Ok(Spawn { process }) = same_type::<C, Spawn>(command) else {
            unreachable!("called for `Spawn` commands only")
        };
        let spawned = io::with_context("yield_all!", |ctx| ctx.spawn_process(process.unstash()));
        io::with("yield_all!", Io::tag_done_at_once);
        results.push(spawned.map_err(|error| YieldError::Failed {
            command: type_name::<Spawn>(),
            source: error.into(),
        }));
    }
    results
}

/// The results of a `yield_all!` of `C`s: one allocation, of the exact size.
fn collect_vec<C: Command>(results: Results) -> Vec<Result<C::Output, YieldError>> {
    results.map(output::<C::Output>).collect()
}

/// The future of a `yield_all!` whose commands have outputs `O`.
#[must_use = "a yield does nothing unless awaited"]
pub enum YieldAll<O> {
    /// The commands were yielded: their results come back as they complete.
    Waiting(YieldMany<Vec<Result<O, YieldError>>>),
    /// Every yield was done at once (a `yield_all!` of spawns): the results, until
    /// handed out.
    Done(Option<Vec<Result<O, YieldError>>>),
}

impl<O> Unpin for YieldAll<O> {}

impl<O> Future for YieldAll<O> {
    type Output = Vec<Result<O, YieldError>>;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Self::Waiting(many) => Pin::new(many).poll(cx),
            Self::Done(results) => Poll::Ready(
                results
                    .take()
                    .expect("a `yield_all!` future is not polled after it completed"),
            ),
        }
    }
}

/// The results of commands yielded together, once all have arrived or were given up
/// on (which gives [`YieldError::Cancelled`]), in order. Each is taken out of the
/// process's state under a borrow of its own, so that converting it (which may drop
/// a payload of the wrong type, user code) happens outside the borrow, without
/// collecting them into a vector first.
pub struct Results {
    next: u64,
    end: u64,
}

impl Iterator for Results {
    type Item = Result<Payload, YieldError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next == self.end {
            return None;
        }
        let tag = Tag(self.next);
        self.next += 1;
        let result = io::with("yield_cmd!", |io| io.take(tag));
        Some(result.unwrap_or(Err(YieldError::Cancelled)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.end - self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Results {}

/// The completion of several commands yielded together, whose results are a `T`.
///
/// Their tags are consecutive (`first`, `first + 1`, …), so the future holds only the
/// range. The completions stay in the process's state until all have arrived; each
/// poll moves a cursor over those that arrived in order, so a poll after some of them
/// arrived costs only what it advances, and the whole wait O(n), however the
/// completions are spread over steps.
#[must_use = "a yield does nothing unless awaited"]
pub struct YieldMany<T> {
    /// The tag of the first command.
    first: u64,
    /// How many commands were yielded; 0 once their results were handed out
    /// (nothing outstanding).
    count: u64,
    /// The first `arrived` completions are known to be there.
    arrived: u64,
    first_name: &'static str,
    location: &'static Location<'static>,
    collect: fn(Results) -> T,
}

impl<T> Unpin for YieldMany<T> {}

impl<T> Drop for YieldMany<T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.count != 0 {
            abandon_dropped(self.first, self.count);
        }
    }
}

impl<T> YieldMany<T> {
    fn new(
        first: u64,
        count: u64,
        first_name: &'static str,
        location: &'static Location<'static>,
        collect: fn(Results) -> T,
    ) -> Self {
        Self {
            first,
            count,
            arrived: 0,
            first_name,
            location,
            collect,
        }
    }
}

impl<T> Future for YieldMany<T> {
    type Output = T;

    // The state is lent here, inlined, and the rest may be a call: `cx` must not
    // escape (see `YieldOne::poll_again`).
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<T> {
        let this = self.get_mut();
        let done = io::with_step_in(
            cx,
            "yield_cmd!",
            #[inline(always)]
            |io, out| this.poll_lent(io, out),
        );
        if done {
            let results = Results {
                next: this.first,
                end: this.first + this.count,
            };
            // Handed out now: nothing outstanding.
            this.count = 0;
            Poll::Ready((this.collect)(results))
        } else {
            Poll::Pending
        }
    }
}

impl<T> YieldMany<T> {
    /// The poll, once the state is lent: whether all results are there (or given up
    /// on).
    fn poll_lent(&mut self, io: &mut Io, out: &mut StepOutput) -> bool {
        let (first, count) = (self.first, self.count);
        while self.arrived < count && io.is_ready(Tag(first + self.arrived)) {
            self.arrived += 1;
        }
        if self.arrived == count {
            return true;
        }
        if io.take_cancel() {
            // Completions already there are handed out; the others give up (not
            // arrived, so abandoning them returns nothing to drop).
            for tag in (first + self.arrived..first + count).map(Tag) {
                if !io.is_ready(tag) {
                    let _ = io.abandon(out, tag);
                }
            }
            return true;
        }
        io.suspend(
            out,
            SuspendPoint {
                location: self.location,
                kind: SuspendKind::Yield {
                    command: self.first_name,
                    // Those still outstanding, which listings show.
                    count: (count - self.arrived) as usize,
                },
            },
        );
        false
    }
}

/// Which messages a receive takes. The filters of `recv!()` and `recv!(T)` are
/// zero-sized; that of a `recv!` with arms holds its arms' patterns and guards.
pub trait Filter {
    /// What the receive evaluates to.
    type Output;
    /// Whether the message may be taken: a cheap look (its type) before
    /// [`try_convert`](Self::try_convert) takes it out of the mailbox.
    #[doc(hidden)]
    fn accepts(&mut self, message: &Message) -> bool;
    /// The message converted, if it is one to take; else the message back,
    /// unchanged, to stay where it was.
    #[doc(hidden)]
    fn try_convert(&mut self, message: Message) -> Result<Self::Output, Message>;
    /// What listings say the receive waits for.
    #[doc(hidden)]
    fn name(&self) -> Option<&'static str>;
}

/// Any message, as a [`Message`] (payload and sender).
pub struct AnyMessage;

impl Filter for AnyMessage {
    type Output = Message;
    fn accepts(&mut self, _: &Message) -> bool {
        true
    }
    fn try_convert(&mut self, message: Message) -> Result<Message, Message> {
        Ok(message)
    }
    fn name(&self) -> Option<&'static str> {
        None
    }
}

/// The oldest message holding a `T`, as the `T`.
pub struct Typed<T>(PhantomData<fn() -> T>);

impl<T> Typed<T> {
    /// The filter.
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for Typed<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Any> Filter for Typed<T> {
    type Output = T;
    fn accepts(&mut self, message: &Message) -> bool {
        message.payload.is::<T>()
    }
    // One type check (not `accepts`, then a downcast).
    #[inline]
    fn try_convert(&mut self, message: Message) -> Result<T, Message> {
        let Message { from, payload } = message;
        if TypeId::of::<T>() == TypeId::of::<Payload>() {
            return match payload.downcast::<T>() {
                Ok(value) => Ok(value),
                Err(_) => unreachable!("a payload is a payload"),
            };
        }
        payload
            .take::<T>()
            .map_err(|payload| Message { from, payload })
    }
    fn name(&self) -> Option<&'static str> {
        Some(type_name::<T>())
    }
}

/// The filter of a `recv!` with arms: the oldest message that an arm takes, by
/// type, pattern and guard, converted by `select` (the macro writes both
/// functions: `types` looks at a message's type only; `select` gives the message
/// back unchanged, its place kept, when no arm takes it).
pub struct Select<A, S> {
    types: A,
    select: S,
    name: &'static str,
}

impl<O, A, S> Filter for Select<A, S>
where
    A: FnMut(&Message) -> bool,
    S: FnMut(Message) -> Result<O, Message>,
{
    type Output = O;
    #[inline]
    fn accepts(&mut self, message: &Message) -> bool {
        (self.types)(message)
    }
    #[inline]
    fn try_convert(&mut self, message: Message) -> Result<O, Message> {
        if (self.types)(&message) {
            (self.select)(message)
        } else {
            Err(message)
        }
    }
    fn name(&self) -> Option<&'static str> {
        Some(self.name)
    }
}

/// One arm of a `recv!` with arms: `message` converted by `arm` if it holds a `T`
/// that the arm's pattern and guard take (`arm` gives the `T` back otherwise); else
/// the message back, as it was.
#[inline]
pub fn recv_arm<T: Any, R>(
    message: Message,
    arm: impl FnOnce(T) -> Result<R, T>,
) -> Result<R, Message> {
    let Message { from, payload } = message;
    payload
        .take_if(arm)
        .map_err(|payload| Message { from, payload })
}

/// A receive of a `F` (`recv!()`, `recv!(T)` and their `timeout = …` forms), made
/// at the caller's place.
#[inline]
#[track_caller]
pub fn recv<F: Filter + Default>(timeout: Option<Duration>) -> Recv<F> {
    Recv {
        location: Location::caller(),
        deadline: timeout.map_or(Deadline::None, Deadline::After),
        filter: F::default(),
    }
}

/// `recv!()`, `recv!(T)` and their `timeout = …` forms: [`recv`], its place given
/// by `at` (`|| Location::caller()` written by the macro, so the `recv!`'s own
/// place), which the future keeps as a type (see [`At`]).
#[inline]
pub fn recv_at<F: Filter + Default, L: Fn() -> &'static Location<'static>>(
    timeout: Option<Duration>,
    at: L,
) -> Recv<F, At<L>> {
    Recv {
        location: At(at),
        deadline: timeout.map_or(Deadline::None, Deadline::After),
        filter: F::default(),
    }
}

/// `recv!()` and `recv!(T)`: [`recv_at`] without a timeout, which the future
/// keeps as a type (see [`NoDeadline`]).
#[inline]
pub fn recv_untimed<F: Filter + Default, L: Fn() -> &'static Location<'static>>(
    at: L,
) -> Recv<F, At<L>, NoDeadline> {
    Recv {
        location: At(at),
        deadline: NoDeadline,
        filter: F::default(),
    }
}

/// Where a suspension point is, as its future keeps it.
pub trait Site {
    /// The place.
    fn location(&self) -> &'static Location<'static>;
}

impl Site for &'static Location<'static> {
    #[inline(always)]
    fn location(&self) -> &'static Location<'static> {
        self
    }
}

/// A place known when compiling: a closure of the call site that gives it, which
/// the future holds as a type, not a word. A word was written into the future as it
/// was made (into the coroutine: two instructions a `recv!`), and read back when it
/// suspended.
#[derive(Clone, Copy)]
pub struct At<L>(L);

impl<L: Fn() -> &'static Location<'static>> Site for At<L> {
    #[inline(always)]
    fn location(&self) -> &'static Location<'static> {
        (self.0)()
    }
}

/// A `recv!` with arms: `types` and `select` as [`Select`] has them, `name` for
/// listings (the arms' types).
#[inline]
#[track_caller]
pub fn recv_select<O, A, S>(
    timeout: Option<Duration>,
    name: &'static str,
    types: A,
    select: S,
) -> Recv<Select<A, S>>
where
    A: FnMut(&Message) -> bool,
    S: FnMut(Message) -> Result<O, Message>,
{
    Recv {
        location: Location::caller(),
        deadline: timeout.map_or(Deadline::None, Deadline::After),
        filter: Select {
            types,
            select,
            name,
        },
    }
}

/// A pending receive.
#[must_use = "a receive does nothing unless awaited"]
pub struct Recv<F, L = &'static Location<'static>, D: Deadlines = Deadline> {
    location: L,
    deadline: D,
    filter: F,
}

/// A receive's timeout: one word pair, as a `Duration` alone is (the timeout is not
/// needed once its timer runs), in every receive's state in the coroutine.
#[derive(Clone, Copy)]
pub enum Deadline {
    /// No timeout.
    None,
    /// Gives up after this long; no timer yet.
    After(Duration),
    /// The timer, a [`Sleep`] yield with this tag, runs.
    Timer(Tag),
}

/// What a receive keeps of its timeout: a [`Deadline`], or nothing for a receive
/// without one ([`NoDeadline`]).
pub trait Deadlines {
    /// The deadline as it stands.
    fn get(&self) -> Deadline;
    /// Changes it (never to `After`, nor, without a timeout, to a `Timer`).
    fn set(&mut self, deadline: Deadline);
}

impl Deadlines for Deadline {
    #[inline(always)]
    fn get(&self) -> Deadline {
        *self
    }

    #[inline(always)]
    fn set(&mut self, deadline: Deadline) {
        *self = deadline;
    }
}

/// The deadline of a receive without a timeout (`recv!()`, `recv!(T)`): always
/// [`Deadline::None`], known when compiling. Kept in the coroutine as a word, it
/// was written as the receive was made, written again as it took a message, and
/// tested at every poll, though it never changes (8 instructions a message round
/// trip's step).
#[derive(Clone, Copy)]
pub struct NoDeadline;

impl Deadlines for NoDeadline {
    #[inline(always)]
    fn get(&self) -> Deadline {
        Deadline::None
    }

    #[inline(always)]
    fn set(&mut self, deadline: Deadline) {
        // Only ever cleared: a timer is made only for a timeout.
        debug_assert!(matches!(deadline, Deadline::None));
    }
}

impl<F, L, D: Deadlines> Unpin for Recv<F, L, D> {}

impl Default for AnyMessage {
    fn default() -> Self {
        Self
    }
}

impl<F, L, D: Deadlines> Drop for Recv<F, L, D> {
    #[inline(always)]
    fn drop(&mut self) {
        // Every way out of a receive retires its timer: one still running means it
        // was dropped waiting.
        if let Deadline::Timer(timer) = self.deadline.get() {
            abandon_dropped(timer.0, 1);
        }
    }
}

/// Takes the oldest message `filter` takes out of `mailbox`, converted.
#[inline]
pub(crate) fn take_message<F: Filter>(
    filter: &mut F,
    mailbox: &mut VecDeque<Message>,
) -> Option<F::Output> {
    // A receive that is about to wait finds the mailbox empty: no call for that.
    if mailbox.is_empty() {
        None
    } else {
        find_message(filter, mailbox)
    }
}

fn find_message<F: Filter>(filter: &mut F, mailbox: &mut VecDeque<Message>) -> Option<F::Output> {
    // The oldest message is the usual match: popping it is cheaper than a removal
    // by index, and converting it checks its type once. A `recv!` arm's guard may
    // run here, under the borrow: it is user code, but it only reads the message.
    match filter.try_convert(mailbox.pop_front()?) {
        Ok(value) => Some(value),
        Err(first) => {
            mailbox.push_front(first);
            find_after_first(filter, mailbox)
        }
    }
}

/// [`find_message`] past the oldest message, which `filter` refused.
pub(crate) fn find_after_first<F: Filter>(
    filter: &mut F,
    mailbox: &mut VecDeque<Message>,
) -> Option<F::Output> {
    // A look at each type, and only a message of a wanted type is taken out to be
    // tried (put back in its place if a pattern or guard refuses it).
    let mut i = 1;
    while i < mailbox.len() {
        if filter.accepts(&mailbox[i]) {
            let candidate = mailbox.remove(i).expect("in range");
            match filter.try_convert(candidate) {
                Ok(value) => return Some(value),
                Err(refused) => mailbox.insert(i, refused),
            }
        }
        i += 1;
    }
    None
}

impl<F: Filter, L: Site, D: Deadlines> Recv<F, L, D> {
    /// Where the receive waits.
    #[inline]
    fn point(&self) -> SuspendPoint {
        SuspendPoint {
            location: self.location.location(),
            kind: SuspendKind::Receive {
                message_type: self.filter.name(),
            },
        }
    }

    /// Takes the tag of the running timer out, if one runs.
    #[inline]
    fn take_timer(&mut self) -> Option<Tag> {
        match self.deadline.get() {
            Deadline::Timer(timer) => {
                self.deadline.set(Deadline::None);
                Some(timer)
            }
            _ => None,
        }
    }

    /// The rest of a poll when no message is there for this receive: the timer's
    /// completion, a cancel, or waiting. A completion to drop (outside the borrow)
    /// goes to `dropped`.
    #[inline]
    fn no_message(
        &mut self,
        io: &mut Io,
        out: &mut StepOutput,
        dropped: &mut Option<Result<Payload, YieldError>>,
    ) -> Poll<Result<F::Output, RecvError>> {
        if let Deadline::Timer(timer) = self.deadline.get() {
            if let Some(result) = io.take(timer) {
                self.deadline.set(Deadline::None);
                return Poll::Ready(Err(match result {
                    Ok(unit) => {
                        *dropped = Some(Ok(unit));
                        RecvError::Timeout
                    }
                    Err(e) => RecvError::Timer(e),
                }));
            }
        }
        if io.take_cancel() {
            if let Some(timer) = self.take_timer() {
                *dropped = io.abandon(out, timer);
            }
            return Poll::Ready(Err(RecvError::Cancelled));
        }
        match self.deadline.get() {
            Deadline::After(d) if d.is_zero() => return Poll::Ready(Err(RecvError::Timeout)),
            Deadline::After(d) => self
                .deadline
                .set(Deadline::Timer(io.dispatch(out, Sleep(d)))),
            Deadline::None | Deadline::Timer(_) => {}
        }
        io.suspend(out, self.point());
        Poll::Pending
    }
}

/// What the common cases of a receive's poll come to: small, so that it comes back
/// in registers (building the whole poll result in a temporary and copying it
/// stalled on store forwarding, the hottest instruction of a message round trip).
enum Quick<T> {
    Message(T),
    Pending,
    /// A timer, a cancel or a timeout is involved: the full poll decides.
    Other,
}

impl<F: Filter, L: Site, D: Deadlines> Recv<F, L, D> {
    /// The full poll, for the cases [`Quick`] leaves out: the state is lent here,
    /// inlined, and the rest is a call (`cx` must not escape: see
    /// `YieldOne::poll_again`).
    #[inline(always)]
    fn poll_slow(&mut self, cx: &TaskCx<'_>) -> Poll<Result<F::Output, RecvError>> {
        let mut dropped = None;
        let poll = io::with_step_in(
            cx,
            "recv!",
            #[inline(always)]
            |io, out| self.poll_lent(io, out, &mut dropped),
        );
        drop(dropped);
        poll
    }

    /// [`poll_slow`](Self::poll_slow), once the state is lent. A completion to drop
    /// (outside the borrow) goes to `dropped`.
    #[inline(never)]
    fn poll_lent(
        &mut self,
        io: &mut Io,
        out: &mut StepOutput,
        dropped: &mut Option<Result<Payload, YieldError>>,
    ) -> Poll<Result<F::Output, RecvError>> {
        match io.receive(&mut self.filter) {
            Some(message) => {
                if let Some(timer) = self.take_timer() {
                    *dropped = io.abandon(out, timer);
                }
                Poll::Ready(Ok(message))
            }
            None => self.no_message(io, out, dropped),
        }
    }
}

impl<F: Filter, L: Site, D: Deadlines> Future for Recv<F, L, D> {
    type Output = Result<F::Output, RecvError>;

    // Inlined into the coroutine however many receives of an `F` there are: `cx`
    // must not escape (see `YieldOne::poll_again`).
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // Without a timer: a message is taken as `poll_slow` would; with none there,
        // no cancel and no timeout, the receive waits, as `poll_slow` would decide.
        // No timer: no slot is read.
        // Inlined by force (see `YieldOne::poll_first`).
        let quick = io::receive_in(
            cx,
            "recv!",
            #[inline(always)]
            |io, out, direct| {
                if matches!(this.deadline.get(), Deadline::Timer(_)) {
                    return Quick::Other;
                }
                if let Some(message) = io.receive_direct(&mut this.filter, direct) {
                    return Quick::Message(message);
                }
                if !matches!(this.deadline.get(), Deadline::None) || io.cancel_pending() {
                    return Quick::Other;
                }
                io.suspend(out, this.point());
                Quick::Pending
            },
        );
        match quick {
            Quick::Message(message) => {
                // No timer, as checked above; said again after the receive's calls,
                // so that the compiler folds the drop's check of it.
                this.deadline.set(Deadline::None);
                Poll::Ready(Ok(message))
            }
            Quick::Pending => Poll::Pending,
            Quick::Other => this.poll_slow(cx),
        }
    }
}

/// `call!(pid, request)` and `call!(pid, request, timeout = d)`: yields a
/// [`Call`](crate::command::Call) at once and returns the future of its answer.
#[track_caller]
#[inline]
pub fn call<Q: Any + Send, R: Any + Send>(
    callee: Pid,
    request: Q,
    timeout: Option<Duration>,
) -> CallFuture<Q, R> {
    CallFuture {
        callee,
        answer: yield_one(Call::new::<Q, R>(callee, request, timeout)),
        _types: PhantomData,
    }
}

/// A call's answer: the reply `R`, or why there was none (the request `Q` is given
/// back if it was never delivered).
#[must_use = "a call does nothing unless awaited"]
pub struct CallFuture<Q, R> {
    callee: Pid,
    answer: YieldOne<CallAnswer, Call>,
    _types: PhantomData<fn() -> (Q, R)>,
}

impl<Q, R> Unpin for CallFuture<Q, R> {}

impl<Q: Any, R: Any> Future for CallFuture<Q, R> {
    type Output = Result<R, CallError<Q>>;

    // `cx` must not escape (see `YieldOne::poll_again`).
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let pid = this.callee;
        match Pin::new(&mut this.answer).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(answer)) => Poll::Ready(answer.into_result()),
            // The yield was withdrawn, which releases the call's timer, closing it: a
            // reply after this is dropped.
            Poll::Ready(Err(YieldError::Cancelled)) => {
                Poll::Ready(Err(CallError::Cancelled { pid }))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(CallError::Failed { pid, error })),
        }
    }
}
