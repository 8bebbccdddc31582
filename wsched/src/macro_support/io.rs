//! The per-process I/O state shared between a [`Machine`](super::Machine)'s `step` and
//! the suspension-point futures its entry awaits.
//!
//! # How the futures reach it
//!
//! The state ([`Io`]) is owned by the machine, not shared: no `Arc`, no lock. For the
//! duration of one poll, `step` *moves* it into a thread-local slot ([`install`]) and
//! moves it back afterwards (also when the poll unwinds). It lives in a `Box`, so the
//! move is a pointer, not the whole state (profiling showed memcpys of the unboxed
//! state costing 15 % of a message round trip). The futures created and
//! polled by the entry body during that poll reach it through [`with`], which borrows
//! the slot through a `RefCell`: a re-entrant access (say, a `Drop` impl that calls
//! `wsched::this::pid()` while the runtime holds the borrow) panics with a clear message
//! instead of aliasing. There is no `unsafe` code here at all.
//!
//! Consequences: the future stays `Send` (it holds no reference to the state), and the
//! suspension points work only while their own process is being stepped, which is the
//! only time the generated code polls them.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::mem;

use crate::command::Command;
use crate::context::Context;
use crate::error::YieldError;
use crate::payload::Payload;
use crate::process::{Event, Message, SuspendPoint, Tag, Yield};

/// Everything an entry's suspension points read and write.
#[derive(Default)]
pub(crate) struct Io {
    pub(crate) ctx: Option<Context>,
    pub(crate) entry: &'static str,
    /// The last tag handed out; tags start at 1.
    last_tag: u64,
    /// Tags yielded and neither consumed nor abandoned: completions for other tags
    /// (late timers of a receive that got its message, yields given up on cancel) are
    /// ignored.
    waiting: Vec<Tag>,
    /// Completions that arrived and were not consumed yet.
    ready: Vec<(Tag, Result<Payload, YieldError>)>,
    /// Messages not received yet, in arrival order.
    pub(crate) mailbox: VecDeque<Message>,
    /// A cancel arrived and no suspension point has reported it yet.
    cancel_pending: bool,
    /// A cancel arrived at some point (sticky).
    pub(crate) cancelled: bool,
    /// Yields written during the current poll, moved to the step's output after it.
    pub(crate) outgoing: Vec<Yield>,
    /// Tags abandoned during the current poll before their completion arrived, moved
    /// to the step's output after it ([`StepOutput::withdraw`]), so the runtime
    /// releases what their handlers hold (a receive timeout's timer).
    ///
    /// [`StepOutput::withdraw`]: crate::StepOutput::withdraw
    pub(crate) withdrawn: Vec<Tag>,
    /// Set by the suspension point that returned `Pending` during the current poll.
    pub(crate) suspended: Option<SuspendPoint>,
}

impl Io {
    /// Takes in one event of a step. Returns what must be dropped outside any borrow
    /// (a late completion nobody waits for).
    pub(crate) fn deliver(&mut self, event: Event) -> Option<Payload> {
        match event {
            Event::Completion(c) => {
                if self.waiting.contains(&c.tag) && !self.ready.iter().any(|(t, _)| *t == c.tag) {
                    self.ready.push((c.tag, c.result));
                    None
                } else {
                    c.result.ok()
                }
            }
            Event::Message(m) => {
                self.mailbox.push_back(m);
                None
            }
            Event::Cancel => {
                self.cancel_pending = true;
                self.cancelled = true;
                None
            }
        }
    }

    /// Yields `command` with the next tag.
    pub(crate) fn dispatch<C: Command>(&mut self, command: C) -> Tag {
        self.last_tag += 1;
        let tag = Tag(self.last_tag);
        self.waiting.push(tag);
        self.outgoing.push(Yield::new(tag, command));
        tag
    }

    /// Takes the completion of `tag` if it arrived.
    pub(crate) fn take(&mut self, tag: Tag) -> Option<Result<Payload, YieldError>> {
        let i = self.ready.iter().position(|(t, _)| *t == tag)?;
        self.waiting.retain(|t| *t != tag);
        Some(self.ready.swap_remove(i).1)
    }

    /// Gives up on `tag`: its completion, now or later, is ignored, and if it has not
    /// arrived the yield is withdrawn. Returns a completion that had already arrived,
    /// to be dropped outside any borrow.
    pub(crate) fn abandon(&mut self, tag: Tag) -> Option<Result<Payload, YieldError>> {
        self.waiting.retain(|t| *t != tag);
        match self.ready.iter().position(|(t, _)| *t == tag) {
            Some(i) => Some(self.ready.swap_remove(i).1),
            None => {
                self.withdrawn.push(tag);
                None
            }
        }
    }

    /// Consumes a pending cancel: the suspension point asking reports it.
    pub(crate) fn take_cancel(&mut self) -> bool {
        mem::take(&mut self.cancel_pending)
    }

    /// Records where the entry waits after this poll.
    pub(crate) fn suspend(&mut self, point: SuspendPoint) {
        self.suspended = Some(point);
    }

    /// How many tags the process has handed out so far.
    pub(crate) fn tags_issued(&self) -> u64 {
        self.last_tag
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Box<Io>>> = const { RefCell::new(None) };
}

/// Moves the state out of `slot` into the thread-local slot until the guard drops
/// (which moves it back, also on unwinding). Nests: the previous occupant is restored
/// afterwards.
pub(crate) fn install(slot: &mut Option<Box<Io>>) -> Installed<'_> {
    let io = slot
        .take()
        .expect("wsched: the process state is installed already");
    let previous = CURRENT.with(|c| {
        c.try_borrow_mut()
            .expect("wsched: a process was stepped from inside a suspension point")
            .replace(io)
    });
    Installed { slot, previous }
}

/// Puts the state back where it came from when dropped.
pub(crate) struct Installed<'a> {
    slot: &'a mut Option<Box<Io>>,
    previous: Option<Box<Io>>,
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        let io = CURRENT.with(|c| match c.try_borrow_mut() {
            Ok(mut cur) => mem::replace(&mut *cur, self.previous.take()),
            Err(_) => None,
        });
        if io.is_some() {
            *self.slot = io;
        }
    }
}

/// Runs `f` on the state of the process being stepped on this thread.
///
/// # Panics
/// Outside a step of a `#[process]` process, or re-entrantly.
#[track_caller]
pub(crate) fn with<R>(what: &str, f: impl FnOnce(&mut Io) -> R) -> R {
    CURRENT.with(|c| {
        let mut guard = c.try_borrow_mut().unwrap_or_else(|_| {
            panic!("wsched: {what} was used re-entrantly (from a `Drop` impl or a callback run by the runtime)")
        });
        match guard.as_mut() {
            Some(io) => f(io),
            None => panic!(
                "wsched: {what} can only be used while a `#[process]` process is being stepped \
                 (inside an #[entry] or #[suspend] method, or code they call)"
            ),
        }
    })
}

/// Like [`with`], but `None` outside a step instead of panicking.
pub(crate) fn try_with<R>(f: impl FnOnce(&mut Io) -> R) -> Option<R> {
    CURRENT.with(|c| c.try_borrow_mut().ok()?.as_deref_mut().map(f))
}
