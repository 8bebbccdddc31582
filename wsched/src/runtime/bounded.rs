//! Bounded mailboxes: a capacity, chosen at spawn, on the messages a process has
//! been sent and not yet taken into a step, and what a send does when it is reached.
//!
//! # What counts
//!
//! Only messages sent to the process count against its capacity: sends from
//! outside ([`Handle::send`](crate::Handle::send)), from processes
//! ([`Context::send`](crate::Context::send), [`this::send`](crate::this::send)), to
//! its name, and timed messages when they fall due. Completions of its commands,
//! cancels, and the signals the runtime sends — a monitor's
//! [`Down`](crate::Down), a link's [`Exit`](crate::Exit) — are queued past a full
//! mailbox and take no room: a full mailbox never holds up a completion the process
//! waits for, nor tells a watcher late that something ended.
//!
//! A step takes everything queued, so the room comes back as soon as the process
//! steps. A [`#[process]`](crate::process) process takes its messages into its own
//! machine at each step, where those that no `recv!` asked for yet wait (see
//! [`this::mailbox_len`](crate::this::mailbox_len)): the capacity bounds what waits
//! for the next step, not that buffer.
//!
//! # When it is full
//!
//! * [`Overflow::Reject`]: the send fails with
//!   [`SendErrorKind::MailboxFull`](crate::SendErrorKind::MailboxFull) and the
//!   message comes back in the error (for a send to a name,
//!   [`SendNamedErrorKind::MailboxFull`](crate::SendNamedErrorKind::MailboxFull)).
//!   A timed message has no sender to give it back to: it becomes a dead letter
//!   ([`DeadLetterReason::MailboxFull`](crate::DeadLetterReason::MailboxFull)), and
//!   an interval goes on with its next period. Counted in
//!   [`Metrics::rejected_messages`](crate::Metrics::rejected_messages).
//! * [`Overflow::DropOldest`]: the send succeeds; the oldest message still queued
//!   is taken out to make room and becomes a dead letter
//!   ([`DeadLetterReason::DroppedOldest`](crate::DeadLetterReason::DroppedOldest)):
//!   it goes to the [`on_dead_letter`](crate::Builder::on_dead_letter) hook, on the
//!   sending thread (under no runtime lock), and is counted both in
//!   [`Metrics::dead_letters`](crate::Metrics::dead_letters) and in
//!   [`Metrics::dropped_messages`](crate::Metrics::dropped_messages). Never silently.
//!
//! Each process's own counts are in
//! [`ProcessInfo::bounded_mailbox`](crate::ProcessInfo::bounded_mailbox).
//!
//! # Cost
//!
//! An unbounded mailbox (the default) is unchanged: the mailbox's first slot says
//! whether it is bounded, so a send to an unbounded one takes the branch it already
//! took on that slot. A bounded mailbox keeps its events in a ring of its own, each
//! marked whether it counts; all of it under the mailbox lock, like every push, so no
//! new synchronisation is involved.

use std::collections::VecDeque;
use std::fmt;
// Statistics, not synchronisation (see `metrics.rs`).
use std::sync::atomic::{AtomicU64, Ordering};

use crate::process::{Event, Message};

/// What a send to a full bounded mailbox does. See
/// [`SpawnOptions::bounded_mailbox`](crate::SpawnOptions::bounded_mailbox).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Overflow {
    /// The send fails with [`SendErrorKind::MailboxFull`](crate::SendErrorKind::MailboxFull),
    /// and the error hands the message back: the sender decides (retry later, shed
    /// the load, go elsewhere).
    Reject,
    /// The send succeeds, and the oldest message still queued is dropped to make
    /// room: counted, and handed to the dead-letter hook (see
    /// [`DeadLetterReason::DroppedOldest`](crate::DeadLetterReason::DroppedOldest)).
    /// For processes that only care about the latest news.
    DropOldest,
}

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Reject => "reject",
            Self::DropOldest => "drop oldest",
        })
    }
}

/// A bounded mailbox as
/// [`ProcessInfo::bounded_mailbox`](crate::ProcessInfo::bounded_mailbox) lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MailboxInfo {
    /// How many messages it holds at most.
    pub capacity: usize,
    /// What a send to it does when it is full.
    pub overflow: Overflow,
    /// Messages queued now, not yet taken into a step.
    pub queued: usize,
    /// Messages dropped to make room ([`Overflow::DropOldest`]).
    pub dropped: u64,
    /// Messages refused because it was full ([`Overflow::Reject`]).
    pub rejected: u64,
}

impl fmt::Display for MailboxInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "mailbox {}/{} ({} when full",
            self.queued, self.capacity, self.overflow
        )?;
        match self.overflow {
            Overflow::Reject => write!(f, ", {} rejected)", self.rejected),
            Overflow::DropOldest => write!(f, ", {} dropped)", self.dropped),
        }
    }
}

/// What a push of a message into a mailbox did.
pub(crate) enum Pushed {
    /// Queued. `woke`: the caller woke the process and must schedule it.
    Queued { woke: bool },
    /// Queued, and the oldest message was dropped to make room: it is in the caller's
    /// slot now, to be handed to the dead letters outside every lock.
    Displaced { woke: bool },
    /// Not queued: the process has ended. The message is left in the slot.
    Closed,
    /// Not queued: the bounded mailbox is full and rejects. The message is left in
    /// the slot.
    Full,
}

/// A bounded mailbox's events, in arrival order, and its bound. Boxed in the
/// mailbox's first slot (see `cell/mod.rs`), so unbounded cells carry nothing more.
pub(crate) struct Bounded {
    capacity: usize,
    overflow: Overflow,
    events: VecDeque<Queued>,
    /// How many of `events` count against the capacity.
    messages: usize,
    dropped: u64,
    rejected: u64,
}

struct Queued {
    event: Event,
    /// A message that counts against the capacity (not a signal, a completion or a
    /// cancel).
    counted: bool,
}

/// A drained ring bigger than this is freed rather than kept (as an unbounded
/// mailbox's burst buffer is).
const KEEP: usize = 16;

impl Bounded {
    pub(crate) fn new(capacity: usize, overflow: Overflow) -> Self {
        Self {
            capacity,
            overflow,
            events: VecDeque::new(),
            messages: 0,
            dropped: 0,
            rejected: 0,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Queues an event that takes no room (a completion, a cancel, a signal).
    pub(crate) fn push_uncounted(&mut self, event: Event) {
        self.events.push_back(Queued {
            event,
            counted: false,
        });
    }

    /// Queues `message`, as a counted message unless `signal`. `Ok(None)`: queued;
    /// `Ok(Some(oldest))`: queued, and `oldest` was dropped to make room; `Err`: full,
    /// rejected, the message handed back. Out of line: unbounded sends never come
    /// here.
    #[inline(never)]
    pub(crate) fn push_message(
        &mut self,
        message: Message,
        signal: bool,
    ) -> Result<Option<Message>, Message> {
        if signal {
            self.push_uncounted(Event::Message(message));
            return Ok(None);
        }
        if self.messages < self.capacity {
            self.messages += 1;
            self.events.push_back(Queued {
                event: Event::Message(message),
                counted: true,
            });
            return Ok(None);
        }
        match self.overflow {
            Overflow::Reject => {
                self.rejected += 1;
                Err(message)
            }
            Overflow::DropOldest => {
                // The capacity is at least 1 (checked at spawn), so a full mailbox
                // holds a counted message; usually the first, signals being rare.
                let at = self
                    .events
                    .iter()
                    .position(|queued| queued.counted)
                    .expect("a full mailbox holds a counted message");
                let Some(Queued {
                    event: Event::Message(oldest),
                    ..
                }) = self.events.remove(at)
                else {
                    unreachable!("only messages are counted")
                };
                self.events.push_back(Queued {
                    event: Event::Message(message),
                    counted: true,
                });
                self.dropped += 1;
                Ok(Some(oldest))
            }
        }
    }

    /// The queued events, oldest first.
    pub(crate) fn events(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().map(|queued| &queued.event)
    }

    /// Moves every event, oldest first, to the end of `buffer`: the room comes back.
    pub(crate) fn drain_into(&mut self, buffer: &mut Vec<Event>) {
        buffer.extend(self.events.drain(..).map(|queued| queued.event));
        self.messages = 0;
        if self.events.capacity() > KEEP {
            self.events = VecDeque::new();
        }
    }

    pub(crate) fn info(&self) -> MailboxInfo {
        MailboxInfo {
            capacity: self.capacity,
            overflow: self.overflow,
            queued: self.messages,
            dropped: self.dropped,
            rejected: self.rejected,
        }
    }
}

/// The scheduler-wide overflow counts, for [`Metrics`](crate::Metrics).
#[derive(Default)]
pub(crate) struct OverflowCounts {
    dropped: AtomicU64,
    rejected: AtomicU64,
}

impl OverflowCounts {
    pub(crate) fn count_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::payload::Payload;
    use crate::process::{Completion, Tag};

    fn message(n: u32) -> Message {
        Message {
            from: None,
            payload: Payload::new(n),
        }
    }

    /// What the drained events were: numbers for messages, 0 for anything else.
    fn drained(bounded: &mut Bounded) -> Vec<u32> {
        let mut buffer = Vec::new();
        bounded.drain_into(&mut buffer);
        buffer
            .into_iter()
            .map(|event| match event {
                Event::Message(m) => *m.payload.downcast_ref::<u32>().unwrap(),
                _ => 0,
            })
            .collect()
    }

    #[test]
    fn dropping_the_oldest_skips_what_takes_no_room() {
        let mut bounded = Bounded::new(2, Overflow::DropOldest);
        // A signal and a completion first: neither counts, neither is dropped.
        assert!(bounded.push_message(message(100), true).unwrap().is_none());
        bounded.push_uncounted(Event::Completion(Completion {
            tag: Tag(1),
            result: Ok(Payload::unit()),
        }));
        assert!(bounded.push_message(message(1), false).unwrap().is_none());
        assert!(bounded.push_message(message(2), false).unwrap().is_none());
        let oldest = bounded.push_message(message(3), false).unwrap().unwrap();
        assert_eq!(oldest.payload.downcast::<u32>().unwrap(), 1);
        assert_eq!(bounded.info().queued, 2);
        assert_eq!(bounded.info().dropped, 1);
        assert_eq!(drained(&mut bounded), [100, 0, 2, 3]);
        // The room is back.
        assert_eq!(bounded.info().queued, 0);
        assert!(bounded.push_message(message(4), false).unwrap().is_none());
    }

    #[test]
    fn rejecting_hands_the_message_back_and_signals_still_get_in() {
        let mut bounded = Bounded::new(1, Overflow::Reject);
        assert!(bounded.push_message(message(1), false).unwrap().is_none());
        let refused = bounded.push_message(message(2), false).unwrap_err();
        assert_eq!(refused.payload.downcast::<u32>().unwrap(), 2);
        assert!(bounded.push_message(message(100), true).unwrap().is_none());
        assert_eq!((bounded.info().queued, bounded.info().rejected), (1, 1));
        assert_eq!(drained(&mut bounded), [1, 100]);
    }
}
