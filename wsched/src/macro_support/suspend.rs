//! The suspension points: the small futures that `yield_cmd!`, `yield_all!` and
//! `recv!` await inside entries.
//!
//! Each one, when it cannot complete, records a [`SuspendPoint`] in the process's
//! [`Io`](super::io::Io) (or, polled again, says it still waits there) and returns
//! `Pending`; the machine's `step` reads it to set the status. A `Pending` without a
//! recorded suspension point means the entry awaited something else, which the step
//! reports as an error.
//!
//! A pending cancel is reported by the first suspension point that would otherwise have
//! to wait; results that are already there are handed out first, so nothing is lost.

use std::any::{type_name, Any, TypeId};
use std::collections::VecDeque;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context as TaskCx, Poll};
use std::time::Duration;

use super::io::{self, Io};
use crate::command::{Command, Sleep};
use crate::error::YieldError;
use crate::payload::Payload;
use crate::process::{Message, SuspendKind, SuspendPoint, Tag};

#[inline]
fn output<T: Any>(result: Result<Payload, YieldError>) -> Result<T, YieldError> {
    result?
        .downcast::<T>()
        .map_err(|e| YieldError::WrongOutputType {
            expected: e.expected(),
            actual: e.actual(),
        })
}

/// `yield_cmd!(command)`: yields `command` with the next tag at once (tags follow
/// program order) and returns the future of its completion.
///
/// The macro awaits the future at once, and its first poll cannot find the
/// completion (completions arrive between steps): what that poll would do (report a
/// pending cancel, or record the suspension point) is done here, in the same borrow
/// of the process's state as the dispatch.
#[track_caller]
pub fn yield_one<C: Command>(command: C) -> YieldOne<C::Output> {
    let location = Location::caller();
    let command_name = type_name::<C>();
    let (tag, cancelled) = io::with("yield_cmd!", |io| {
        let tag = io.dispatch(command);
        if io.take_cancel() {
            // Just yielded, so not arrived: nothing to drop.
            let _ = io.abandon(tag);
            return (tag, true);
        }
        io.suspend(SuspendPoint {
            location,
            kind: SuspendKind::Yield {
                command: command_name,
                count: 1,
            },
        });
        (tag, false)
    });
    YieldOne {
        tag,
        first_poll: Some(cancelled),
        _output: PhantomData,
    }
}

/// The completion of one yielded command whose output is an `O`.
#[must_use = "a yield does nothing unless awaited"]
pub struct YieldOne<O> {
    tag: Tag,
    /// Before the first poll: whether [`yield_one`] found a cancel.
    first_poll: Option<bool>,
    _output: PhantomData<fn() -> O>,
}

impl<O> Unpin for YieldOne<O> {}

impl<O: Any> Future for YieldOne<O> {
    type Output = Result<O, YieldError>;

    // The first poll is a flag check: inlined into the entry's coroutine.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, _: &mut TaskCx<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.first_poll.take() {
            Some(true) => Poll::Ready(Err(YieldError::Cancelled)),
            Some(false) => Poll::Pending,
            None => this.poll_again(),
        }
    }
}

impl<O: Any> YieldOne<O> {
    /// A poll in a later step: the completion may be there.
    #[inline]
    fn poll_again(&mut self) -> Poll<Result<O, YieldError>> {
        let tag = self.tag;
        let got = io::with("yield_cmd!", |io| {
            if let Some(result) = io.take(tag) {
                return Some(result);
            }
            if io.take_cancel() {
                // Not arrived (checked above), so nothing to drop.
                let _ = io.abandon(tag);
                return Some(Err(YieldError::Cancelled));
            }
            io.suspend_again();
            None
        });
        match got {
            Some(result) => Poll::Ready(output::<O>(result)),
            None => Poll::Pending,
        }
    }
}

/// Yields commands of a [`CommandSet`] with the next tags.
pub struct Dispatcher<'a>(&'a mut Io);

impl Dispatcher<'_> {
    /// Yields `command` with the next tag.
    pub fn dispatch<C: Command>(&mut self, command: C) -> Tag {
        self.0.dispatch(command)
    }
}

/// Several commands yielded together: implemented for tuples of up to eight commands
/// (output: the tuple of their results) and for `Vec<C>` (output: the vector of
/// results, in order).
pub trait CommandSet: Send + 'static {
    /// The results, in the commands' order.
    type Output;
    #[doc(hidden)]
    fn first_name(&self) -> &'static str;
    #[doc(hidden)]
    fn dispatch(self, io: &mut Dispatcher<'_>);
    #[doc(hidden)]
    fn collect(results: Vec<Result<Payload, YieldError>>) -> Self::Output;
}

impl<C: Command> CommandSet for Vec<C> {
    type Output = Vec<Result<C::Output, YieldError>>;

    fn first_name(&self) -> &'static str {
        type_name::<C>()
    }

    fn dispatch(self, io: &mut Dispatcher<'_>) {
        for command in self {
            io.dispatch(command);
        }
    }

    fn collect(results: Vec<Result<Payload, YieldError>>) -> Self::Output {
        results.into_iter().map(output::<C::Output>).collect()
    }
}

macro_rules! command_tuple {
    ($($c:ident),+) => {
        impl<$($c: Command),+> CommandSet for ($($c,)+) {
            type Output = ($(Result<$c::Output, YieldError>,)+);

            fn first_name(&self) -> &'static str {
                command_tuple!(@first $($c),+)
            }

            #[allow(non_snake_case)]
            fn dispatch(self, io: &mut Dispatcher<'_>) {
                let ($($c,)+) = self;
                $(io.dispatch($c);)+
            }

            fn collect(results: Vec<Result<Payload, YieldError>>) -> Self::Output {
                let mut it = results.into_iter();
                ($(output::<$c::Output>(it.next().expect("one result per command")),)+)
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
    let (first, count) = io::with("yield_cmd!", |io| {
        let before = io.tags_issued();
        commands.dispatch(&mut Dispatcher(io));
        (before + 1, io.tags_issued() - before)
    });
    YieldMany {
        first,
        count,
        arrived: 0,
        first_name,
        location,
        collect: S::collect,
    }
}

/// `yield_all!(iterable)`: yields every command of the iterable in this step.
#[track_caller]
pub fn yield_all<C: Command>(
    commands: impl IntoIterator<Item = C>,
) -> YieldMany<Vec<Result<C::Output, YieldError>>> {
    // Collect first: the iterator runs user code, which must not run while the
    // process's state is borrowed.
    yield_many(commands.into_iter().collect::<Vec<C>>())
}

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
    /// How many commands were yielded.
    count: u64,
    /// The first `arrived` completions are known to be there.
    arrived: u64,
    first_name: &'static str,
    location: &'static Location<'static>,
    collect: fn(Vec<Result<Payload, YieldError>>) -> T,
}

impl<T> Unpin for YieldMany<T> {}

impl<T> Future for YieldMany<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, _: &mut TaskCx<'_>) -> Poll<T> {
        let this = self.get_mut();
        let (first, count) = (this.first, this.count);
        let results = io::with("yield_cmd!", |io| {
            while this.arrived < count && io.is_ready(Tag(first + this.arrived)) {
                this.arrived += 1;
            }
            if this.arrived == count {
                let results = (first..first + count)
                    .map(|tag| io.take(Tag(tag)).expect("arrived"))
                    .collect::<Vec<_>>();
                return Some(results);
            }
            if io.take_cancel() {
                // Completions already there are handed out; the others give up (not
                // arrived, so abandoning them returns nothing to drop).
                let results = (first..first + count)
                    .map(|tag| {
                        io.take(Tag(tag)).unwrap_or_else(|| {
                            let _ = io.abandon(Tag(tag));
                            Err(YieldError::Cancelled)
                        })
                    })
                    .collect::<Vec<_>>();
                return Some(results);
            }
            io.suspend(SuspendPoint {
                location: this.location,
                kind: SuspendKind::Yield {
                    command: this.first_name,
                    count: count as usize,
                },
            });
            None
        });
        match results {
            Some(results) => Poll::Ready((this.collect)(results)),
            None => Poll::Pending,
        }
    }
}

/// Why `recv!` returned no message.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecvError {
    /// The process is being cancelled (shutdown or a cancel request). Later
    /// suspension points work normally, so the entry can clean up.
    Cancelled,
    /// The timeout of `recv!(timeout = …)` ran out; no message was taken.
    Timeout,
    /// The timeout's timer (a [`Sleep`] yield) failed, e.g. no timer is available.
    Timer(YieldError),
}

impl RecvError {
    /// Whether this is [`Cancelled`](Self::Cancelled).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Cancelled)
    }

    /// Whether this is [`Timeout`](Self::Timeout).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout)
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cancelled => f.write_str("cancelled: the process is asked to stop"),
            Self::Timeout => f.write_str("timed out waiting for a message"),
            Self::Timer(e) => write!(f, "the receive timeout's timer failed: {e}"),
        }
    }
}

impl Error for RecvError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Timer(e) => Some(e),
            _ => None,
        }
    }
}

/// Which messages a receive takes.
pub trait Filter {
    /// What the receive evaluates to.
    type Output;
    #[doc(hidden)]
    fn accepts(message: &Message) -> bool;
    #[doc(hidden)]
    fn convert(message: Message) -> Self::Output;
    /// [`convert`](Self::convert) if it [`accepts`](Self::accepts) the message,
    /// else the message back.
    #[doc(hidden)]
    #[inline]
    fn try_convert(message: Message) -> Result<Self::Output, Message> {
        if Self::accepts(&message) {
            Ok(Self::convert(message))
        } else {
            Err(message)
        }
    }
    #[doc(hidden)]
    fn name() -> Option<&'static str>;
}

/// Any message, as a [`Message`] (payload and sender).
pub struct AnyMessage;

impl Filter for AnyMessage {
    type Output = Message;
    fn accepts(_: &Message) -> bool {
        true
    }
    fn convert(message: Message) -> Message {
        message
    }
    fn name() -> Option<&'static str> {
        None
    }
}

/// The oldest message holding a `T`, as the `T`.
pub struct Typed<T>(PhantomData<fn() -> T>);

impl<T: Any> Filter for Typed<T> {
    type Output = T;
    fn accepts(message: &Message) -> bool {
        message.payload.is::<T>()
    }
    fn convert(message: Message) -> T {
        match message.payload.downcast::<T>() {
            Ok(value) => value,
            Err(_) => unreachable!("the filter checked the type"),
        }
    }
    // One type check instead of two (`accepts`, then `convert`).
    #[inline]
    fn try_convert(message: Message) -> Result<T, Message> {
        let Message { from, payload } = message;
        if TypeId::of::<T>() == TypeId::of::<Payload>() {
            return Ok(Self::convert(Message { from, payload }));
        }
        payload
            .take::<T>()
            .map_err(|payload| Message { from, payload })
    }
    fn name() -> Option<&'static str> {
        Some(type_name::<T>())
    }
}

/// `recv!()`, `recv!(T)` and their `timeout = …` forms.
#[inline]
#[track_caller]
pub fn recv<F: Filter>(timeout: Option<Duration>) -> Recv<F> {
    Recv {
        location: Location::caller(),
        timeout,
        timer: None,
        _filter: PhantomData,
    }
}

/// A pending receive.
#[must_use = "a receive does nothing unless awaited"]
pub struct Recv<F> {
    location: &'static Location<'static>,
    timeout: Option<Duration>,
    timer: Option<Tag>,
    _filter: PhantomData<fn() -> F>,
}

impl<F> Unpin for Recv<F> {}

/// Takes the oldest message `F` accepts out of `mailbox`, converted.
#[inline]
fn take_message<F: Filter>(mailbox: &mut VecDeque<Message>) -> Option<F::Output> {
    // A receive that is about to wait finds the mailbox empty: no call for that.
    if mailbox.is_empty() {
        None
    } else {
        find_message::<F>(mailbox)
    }
}

fn find_message<F: Filter>(mailbox: &mut VecDeque<Message>) -> Option<F::Output> {
    // The oldest message is the usual match: popping it is cheaper than a removal
    // by index, and converting it checks its type once. Converting only moves the
    // value out of its box (no user code runs), so it may happen under the borrow.
    match F::try_convert(mailbox.pop_front()?) {
        Ok(value) => return Some(value),
        Err(first) => mailbox.push_front(first),
    }
    let i = (1..mailbox.len()).find(|&i| F::accepts(&mailbox[i]))?;
    mailbox.remove(i).map(F::convert)
}

impl<F: Filter> Recv<F> {
    /// The rest of a poll when no message is there for this receive: the timer's
    /// completion, a cancel, or waiting. A completion to drop (outside the borrow)
    /// goes to `dropped`.
    #[inline]
    fn no_message(
        &mut self,
        io: &mut Io,
        dropped: &mut Option<Result<Payload, YieldError>>,
    ) -> Poll<Result<F::Output, RecvError>> {
        if let Some(timer) = self.timer {
            if let Some(result) = io.take(timer) {
                self.timer = None;
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
            if let Some(timer) = self.timer.take() {
                *dropped = io.abandon(timer);
            }
            return Poll::Ready(Err(RecvError::Cancelled));
        }
        match self.timeout {
            Some(d) if d.is_zero() => return Poll::Ready(Err(RecvError::Timeout)),
            Some(d) if self.timer.is_none() => self.timer = Some(io.dispatch(Sleep(d))),
            _ => {}
        }
        io.suspend(SuspendPoint {
            location: self.location,
            kind: SuspendKind::Receive {
                message_type: F::name(),
            },
        });
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

impl<F: Filter> Recv<F> {
    /// The full poll, for the cases [`Quick`] leaves out.
    #[inline(never)]
    fn poll_slow(&mut self) -> Poll<Result<F::Output, RecvError>> {
        let mut dropped = None;
        let poll = io::with("recv!", |io| match take_message::<F>(&mut io.mailbox) {
            Some(message) => {
                if let Some(timer) = self.timer.take() {
                    dropped = io.abandon(timer);
                }
                Poll::Ready(Ok(message))
            }
            None => self.no_message(io, &mut dropped),
        });
        drop(dropped);
        poll
    }
}

impl<F: Filter> Future for Recv<F> {
    type Output = Result<F::Output, RecvError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, _: &mut TaskCx<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // Without a timer: a message is taken as `poll_slow` would; with none there,
        // no cancel and no timeout, the receive waits, as `poll_slow` would decide.
        let quick = io::with("recv!", |io| {
            if this.timer.is_some() {
                return Quick::Other;
            }
            if let Some(message) = take_message::<F>(&mut io.mailbox) {
                return Quick::Message(message);
            }
            if this.timeout.is_some() || io.cancel_pending() {
                return Quick::Other;
            }
            io.suspend(SuspendPoint {
                location: this.location,
                kind: SuspendKind::Receive {
                    message_type: F::name(),
                },
            });
            Quick::Pending
        });
        match quick {
            Quick::Message(message) => Poll::Ready(Ok(message)),
            Quick::Pending => Poll::Pending,
            Quick::Other => this.poll_slow(),
        }
    }
}
