//! Dead letters: messages still unread when their process ends, or dropped by a
//! full bounded mailbox, handed to a hook instead of disappearing.
//!
//! # What counts as a dead letter
//!
//! Every [`Message`] a process was sent and never took in
//! ([`DeadLetterReason::ProcessEnded`]):
//!
//! * the messages still queued in its mailbox when it ends (the events
//!   [`Shared::finish`](super::shared::Shared::finish) finds when it closes the
//!   mailbox), and
//! * for a [`#[process]`](crate::process) process, the messages its machine took in
//!   but no `recv!` received (those a typed `recv!` skipped, or that arrived after its
//!   last receive), handed over by the machine's `close`.
//!
//! The machine's are handed over first (they arrived first), then the mailbox's, each
//! in arrival order. Other events (cancels, completions of yields nobody waits for)
//! are not messages and are dropped quietly as before.
//!
//! And, from a live process's bounded mailbox (see `bounded.rs`): the oldest
//! unreceived message a full [`Overflow::DropOldest`](crate::Overflow::DropOldest)
//! mailbox dropped to make room ([`DeadLetterReason::DroppedOldest`], handed over on
//! the sending thread, or on the process's worker at its next step when a
//! `#[process]` machine had taken it in), and a timed message that fell due on a full
//! [`Overflow::Reject`](crate::Overflow::Reject) mailbox, which has no sender to
//! go back to ([`DeadLetterReason::MailboxFull`], on the timer thread).
//!
//! Each dead letter is counted in [`Metrics::dead_letters`](crate::Metrics) and, if
//! the builder set one ([`Builder::on_dead_letter`](crate::Builder::on_dead_letter)),
//! given to the hook, which owns it and may keep it. Without a hook it is dropped
//! (under `catch_unwind`, as every user value the runtime drops).
//!
//! # A send racing the end
//!
//! A message is either a dead letter or comes back to its sender, never both and
//! never neither: the end closes the mailbox under its lock and takes what is in it;
//! a send pushes under the same lock only while the mailbox is open. A send that got
//! in first is among the leftovers (a dead letter); one that came after finds the
//! mailbox closed and returns its message in the [`SendError`](crate::SendError).
//! `runtime/tests/loom_dead_letters.rs` checks it.
//!
//! # Cost
//!
//! An end with nothing unread pays one branch on the (empty) leftovers it already
//! had; a `#[process]` machine pays one branch on its own (empty) buffer. The hook
//! and the counter are reached only when there is a dead letter. Hooks run on the
//! thread that ends the process (usually a worker), under no runtime lock, guarded:
//! a panicking hook is caught (the panic hook has reported it) and the worker
//! carries on.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
// Statistics, not synchronisation (see `metrics.rs`).
use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::hooks::{Instrument, Layers};
use crate::engine::process::{Event, Message};
use crate::payload::Payload;
use crate::pid::Pid;
use crate::runtime::drop_quietly;

/// A message its process never read: it was still unread when the process ended,
/// or a full bounded mailbox dropped it ([`reason`](Self::reason) says which). Given
/// to the hook set by [`Builder::on_dead_letter`](crate::Builder::on_dead_letter),
/// which owns it.
#[non_exhaustive]
pub struct DeadLetter {
    /// The process it was sent to, which never read it.
    pub to: Pid,
    /// The sending process, or `None` when sent from outside any process (or by a
    /// timer armed from outside).
    pub from: Option<Pid>,
    /// What was sent.
    pub payload: Payload,
    /// Why it was not read.
    pub reason: DeadLetterReason,
}

/// Why a [`DeadLetter`] was not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// It was still unread when its process ended.
    ProcessEnded,
    /// Its process's bounded mailbox was full, with
    /// [`Overflow::DropOldest`](crate::Overflow::DropOldest): it was the oldest message
    /// not yet received, dropped to make room for a newer one (also counted in
    /// [`Metrics::dropped_messages`](crate::Metrics::dropped_messages)).
    DroppedOldest,
    /// A timed message ([`Handle::send_after`](crate::Handle::send_after),
    /// [`Handle::send_interval`](crate::Handle::send_interval)) fell due while its
    /// process's bounded mailbox was full, with
    /// [`Overflow::Reject`](crate::Overflow::Reject): a send would have handed it back,
    /// but a timer has no sender to give it to (also counted in
    /// [`Metrics::rejected_messages`](crate::Metrics::rejected_messages)).
    MailboxFull,
    /// It came from a process on another node of a cluster (the `cluster` feature)
    /// for a process here that had ended, never existed, or whose bounded mailbox
    /// was full and rejects: the sender was told it was sent, as a remote send is
    /// asynchronous.
    FromAnotherNode,
}

impl fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ProcessEnded => "its process ended before reading it",
            Self::DroppedOldest => "its process's full mailbox dropped it for a newer message",
            Self::MailboxFull => "it fell due on its process's full mailbox, which rejects",
            Self::FromAnotherNode => {
                "it came from another node for a process that had ended, never existed, or was full"
            }
        })
    }
}

impl fmt::Debug for DeadLetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("to", &self.to)
            .field("from", &self.from)
            .field("payload", &self.payload)
            .field("reason", &self.reason)
            .finish()
    }
}

/// The hook a builder may set.
pub(crate) type DeadLetterHook = Box<dyn Fn(DeadLetter) + Send + Sync>;

/// Where dead letters go: the count, and the hook if there is one.
pub(crate) struct DeadLetters {
    hook: Option<DeadLetterHook>,
    count: AtomicU64,
}

impl DeadLetters {
    pub(crate) fn new(hook: Option<DeadLetterHook>) -> Self {
        Self {
            hook,
            count: AtomicU64::new(0),
        }
    }

    /// How many dead letters there have been.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Hands over the events `to` left unread (its mailbox's leftovers): messages
    /// become dead letters, the rest is dropped quietly. Out of line and cold: ends
    /// with nothing unread never come here.
    #[cold]
    #[inline(never)]
    pub(crate) fn leftovers(&self, to: Pid, events: Vec<Event>) {
        for event in events {
            match event {
                Event::Message(message) => self.one(to, message, DeadLetterReason::ProcessEnded),
                other => drop_quietly(other),
            }
        }
    }

    /// Hands over messages a `#[process]` machine took in and never received.
    #[cold]
    #[inline(never)]
    pub(crate) fn unreceived(&self, to: Pid, messages: impl IntoIterator<Item = Message>) {
        for message in messages {
            self.one(to, message, DeadLetterReason::ProcessEnded);
        }
    }

    /// Hands over one dead letter. Called under no runtime lock: the hook runs user
    /// code.
    pub(crate) fn one(
        &self,
        to: Pid,
        Message { from, payload }: Message,
        reason: DeadLetterReason,
    ) {
        self.count.fetch_add(1, Ordering::Relaxed);
        <Layers as Instrument>::dead_letter(to, from, &payload, reason);
        let letter = DeadLetter {
            to,
            from,
            payload,
            reason,
        };
        match &self.hook {
            Some(hook) => {
                // A panicking hook must not take the worker down (the panic hook has
                // reported it); its payload is dropped guarded too.
                if let Err(panic) = catch_unwind(AssertUnwindSafe(|| hook(letter))) {
                    drop_quietly(panic);
                }
            }
            None => drop_quietly(letter),
        }
    }
}
