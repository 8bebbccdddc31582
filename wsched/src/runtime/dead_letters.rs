//! Dead letters: messages still unread when their process ends, handed to a hook
//! instead of disappearing.
//!
//! # What counts as a dead letter
//!
//! Every [`Message`] a process was sent and never took in:
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

use super::drop_quietly;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::process::{Event, Message};

/// A message its process never read: it was still unread when the process ended.
/// Given to the hook set by [`Builder::on_dead_letter`](crate::Builder::on_dead_letter),
/// which owns it.
#[non_exhaustive]
pub struct DeadLetter {
    /// The process it was sent to, which ended without reading it.
    pub to: Pid,
    /// The sending process, or `None` when sent from outside any process.
    pub from: Option<Pid>,
    /// What was sent.
    pub payload: Payload,
}

impl fmt::Debug for DeadLetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadLetter")
            .field("to", &self.to)
            .field("from", &self.from)
            .field("payload", &self.payload)
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
                Event::Message(message) => self.one(to, message),
                other => drop_quietly(other),
            }
        }
    }

    /// Hands over messages a `#[process]` machine took in and never received.
    #[cold]
    #[inline(never)]
    pub(crate) fn unreceived(&self, to: Pid, messages: impl IntoIterator<Item = Message>) {
        for message in messages {
            self.one(to, message);
        }
    }

    fn one(&self, to: Pid, Message { from, payload }: Message) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let letter = DeadLetter { to, from, payload };
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
