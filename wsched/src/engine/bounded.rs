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
//! The capacity bounds every message sent to the process and not yet received by
//! it, whichever buffer holds it. A hand-written process receives what a step takes
//! in, so the room comes back as soon as the process steps. A
//! [`#[process]`](crate::process) process takes its messages into its own machine
//! at each step, where those that no `recv!` asked for yet wait (see
//! [`this::mailbox_len`](crate::this::mailbox_len)): those keep counting until a
//! `recv!` takes them.
//!
//! # A `#[process]`'s own buffer
//!
//! Only the process's owner may touch its machine's buffer, so the mailbox keeps a
//! count of it instead ([`Bounded::held`]): a step moves the queued count there
//! when it takes the messages in, and at its end the machine reports how many it
//! still holds ([`Bounded::report_held`]), which releases what its receives took.
//! Between the two the count is high by what the step received, never low: a send
//! during a step may be refused (or drop a message) that would have found room a
//! moment later, as if it came before the receives. The runtime learns that a
//! process holds messages when it gives it the bounded mailbox, before it runs
//! ([`Process::__bounded_mailbox`](crate::Process::__bounded_mailbox)); an
//! unbounded mailbox, and a hand-written process, never pay for any of this.
//!
//! Dropping the oldest message when it sits in the machine's buffer is the owner's
//! to do: the send counts it as dropped (so the bound holds at once), owes the
//! owner the drop ([`Bounded::owed`]) and wakes the process, whose next step finds
//! a [`DropOwed`] among its events and drops its oldest unreceived messages to the
//! dead letters before anything can receive them. A step that received the
//! messages meanwhile voids what it can no longer drop when it reports: that send
//! came after the receives, and found room.
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
//! * [`Overflow::DropOldest`]: the send succeeds; the oldest message not yet
//!   received is taken out to make room and becomes a dead letter
//!   ([`DeadLetterReason::DroppedOldest`](crate::DeadLetterReason::DroppedOldest)):
//!   it goes to the [`on_dead_letter`](crate::Builder::on_dead_letter) hook, on the
//!   sending thread (under no runtime lock) if it was still queued, or on the
//!   process's own worker at its next step if its machine had taken it in, and is
//!   counted both in
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
//! new synchronisation is involved. A `#[process]` pays one branch a step for
//! knowing whether its mailbox is bounded; a bounded one, one more pass of the
//! mailbox lock after each step that took messages in or received some (to report
//! what it holds), and a look at its buffer then (as listings already take).

use std::collections::VecDeque;
use std::fmt;
use std::mem;
// Statistics, not synchronisation (see `metrics.rs`).
use std::sync::atomic::{AtomicU64, Ordering};

use crate::buggify::{buggify, Buggify};
use crate::engine::handle::Handle;
use crate::engine::process::{Completion, Event, Message, Tag};
use crate::payload::Payload;
use crate::pid::Pid;

/// What a send to a full bounded mailbox does. See
/// [`SpawnOptions::bounded_mailbox`](crate::SpawnOptions::bounded_mailbox).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Overflow {
    /// The send fails with [`SendErrorKind::MailboxFull`](crate::SendErrorKind::MailboxFull),
    /// and the error hands the message back: the sender decides (retry later, shed
    /// the load, go elsewhere).
    Reject,
    /// The send succeeds, and the oldest message not yet received is dropped to
    /// make room: counted, and handed to the dead-letter hook (see
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
    /// Messages sent and not yet received, which count against the capacity:
    /// those queued, and those a `#[process]` took into its own buffer and no
    /// `recv!` took yet.
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
///
/// The count against the capacity is `queued + held`; see the module docs.
pub(crate) struct Bounded {
    capacity: usize,
    overflow: Overflow,
    /// Whether the process keeps messages it took in without receiving them (a
    /// `#[process]` machine): then `held` counts them.
    holds: bool,
    events: VecDeque<Queued>,
    /// How many of `events` count against the capacity.
    queued: usize,
    /// Counted messages the process took in and has not received (as far as it
    /// reported), less those it owes dropping: always `holds` or 0.
    held: usize,
    /// Messages in the process's own buffer that sends dropped to make room, which
    /// the process has not been told of yet (see [`DropOwed`]).
    owed: usize,
    dropped: u64,
    rejected: u64,
}

/// Among a `#[process]`'s events: drop your `owed` oldest unreceived messages,
/// which full sends dropped to make room (see the module docs), and hand them to
/// `owner`'s dead letters (`None` only for cells without a scheduler). A late
/// completion to anything else (tag 0 is no yield's), so a process that does not
/// know it drops it, and a user cannot make one.
pub(crate) struct DropOwed {
    pub(crate) owed: usize,
    pub(crate) owner: Option<(Pid, Handle)>,
}

/// What [`Bounded::push_message`] did.
pub(crate) enum Push {
    /// Queued.
    Queued,
    /// Queued, and the oldest message, still queued, was dropped to make room.
    Displaced(Message),
    /// Queued, and the oldest message, in the process's own buffer, was counted
    /// dropped: the process must step to drop it (see [`DropOwed`]).
    Owed,
    /// Full, rejected: the message handed back.
    Full(Message),
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
            holds: false,
            events: VecDeque::new(),
            queued: 0,
            held: 0,
            owed: 0,
            dropped: 0,
            rejected: 0,
        }
    }

    /// Says that the process keeps messages it took in until it receives them (a
    /// `#[process]` machine), which then count until it reports them received.
    pub(crate) fn holding(mut self, holds: bool) -> Self {
        self.holds = holds;
        self
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

    /// Queues `message`, as a counted message unless `signal` (or a payload made a
    /// signal, which stays one when forwarded: the process's own buffer tells them
    /// apart by that mark). Out of line: unbounded sends never come here.
    #[inline(never)]
    pub(crate) fn push_message(&mut self, message: Message, signal: bool) -> Push {
        if signal || message.payload.is_signal() {
            self.push_uncounted(Event::Message(message));
            return Push::Queued;
        }
        let used = self.queued + self.held;
        // A rare path a simulation takes on purpose: the last free place was taken
        // by another sender first (only where the sender gets its message back).
        let edge = used + 1 == self.capacity
            && self.overflow == Overflow::Reject
            && buggify(Buggify::MailboxEdge);
        if used < self.capacity && !edge {
            self.push_counted(message);
            return Push::Queued;
        }
        match self.overflow {
            Overflow::Reject => {
                self.rejected += 1;
                Push::Full(message)
            }
            Overflow::DropOldest if self.held > 0 => {
                // The oldest unreceived message is in the process's own buffer
                // (it arrived before anything queued): counted as dropped now,
                // dropped by the process at its next step.
                self.held -= 1;
                self.owed += 1;
                self.push_counted(message);
                Push::Owed
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
                Push::Displaced(oldest)
            }
        }
    }

    fn push_counted(&mut self, message: Message) {
        self.queued += 1;
        self.events.push_back(Queued {
            event: Event::Message(message),
            counted: true,
        });
    }

    /// The queued events, oldest first.
    pub(crate) fn events(&self) -> impl Iterator<Item = &Event> {
        self.events.iter().map(|queued| &queued.event)
    }

    /// Moves every event, oldest first, to the end of `buffer`: the room comes back,
    /// unless the process holds what it takes in (then it counts as held, and the
    /// drops owed to the process follow, as a [`DropOwed`]).
    ///
    /// Out of line: the drain of an unbounded mailbox, on every run of a process,
    /// stays as small as it was.
    #[inline(never)]
    pub(crate) fn drain_into(
        &mut self,
        buffer: &mut Vec<Event>,
        pid: Pid,
        handle: Option<&Handle>,
    ) {
        buffer.extend(self.events.drain(..).map(|queued| queued.event));
        if self.holds {
            self.held += self.queued;
            if self.owed > 0 {
                // Dropped for sure now: the process drops them as it takes this in,
                // before anything can receive them (see `report_held`).
                self.dropped += self.owed as u64;
                let owed = DropOwed {
                    owed: mem::take(&mut self.owed),
                    owner: handle.map(|handle| (pid, handle.clone())),
                };
                buffer.push(Event::Completion(Completion {
                    tag: Tag(0),
                    result: Ok(Payload::new(owed)),
                }));
            }
        }
        self.queued = 0;
        if self.events.capacity() > KEEP {
            self.events = VecDeque::new();
        }
    }

    /// The process, at the end of a step, holds `held` counted messages it took in
    /// and did not receive (those it owes dropping among them): what it received
    /// since it last reported is released. Drops owed that it can no longer make
    /// (it received the messages meanwhile: the sends count as coming after the
    /// receives, and found room) are void. So the drops owed never exceed what it
    /// holds until its next step takes them in, before any receive.
    pub(crate) fn report_held(&mut self, held: usize) {
        debug_assert!(self.holds, "only a process that holds messages reports");
        self.owed = self.owed.min(held);
        self.held = held - self.owed;
    }

    pub(crate) fn info(&self) -> MailboxInfo {
        MailboxInfo {
            capacity: self.capacity,
            overflow: self.overflow,
            queued: self.queued + self.held,
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

    fn message(n: u32) -> Message {
        Message {
            from: None,
            payload: Payload::new(n),
        }
    }

    fn queued(push: Push) -> bool {
        matches!(push, Push::Queued)
    }

    fn displaced(push: Push) -> u32 {
        match push {
            Push::Displaced(m) => m.payload.downcast::<u32>().unwrap(),
            _ => panic!("not displaced"),
        }
    }

    /// What the drained events were: numbers for messages, `DropOwed(n)` as
    /// 1000 + n, 0 for anything else.
    fn drained(bounded: &mut Bounded) -> Vec<u32> {
        let mut buffer = Vec::new();
        bounded.drain_into(&mut buffer, Pid::from_raw(1), None);
        buffer
            .into_iter()
            .map(|event| match event {
                Event::Message(m) => *m.payload.downcast_ref::<u32>().unwrap(),
                Event::Completion(c) => c
                    .result
                    .unwrap()
                    .downcast_ref::<DropOwed>()
                    .map_or(0, |owed| 1000 + owed.owed as u32),
                Event::Cancel => 0,
            })
            .collect()
    }

    #[test]
    fn dropping_the_oldest_skips_what_takes_no_room() {
        let mut bounded = Bounded::new(2, Overflow::DropOldest);
        // A signal and a completion first: neither counts, neither is dropped.
        assert!(queued(bounded.push_message(message(100), true)));
        bounded.push_uncounted(Event::Completion(Completion {
            tag: Tag(1),
            result: Ok(Payload::unit()),
        }));
        assert!(queued(bounded.push_message(message(1), false)));
        assert!(queued(bounded.push_message(message(2), false)));
        assert_eq!(displaced(bounded.push_message(message(3), false)), 1);
        assert_eq!(bounded.info().queued, 2);
        assert_eq!(bounded.info().dropped, 1);
        assert_eq!(drained(&mut bounded), [100, 0, 2, 3]);
        // The room is back.
        assert_eq!(bounded.info().queued, 0);
        assert!(queued(bounded.push_message(message(4), false)));
    }

    #[test]
    fn rejecting_hands_the_message_back_and_signals_still_get_in() {
        let mut bounded = Bounded::new(1, Overflow::Reject);
        assert!(queued(bounded.push_message(message(1), false)));
        let Push::Full(refused) = bounded.push_message(message(2), false) else {
            panic!("not refused")
        };
        assert_eq!(refused.payload.downcast::<u32>().unwrap(), 2);
        assert!(queued(bounded.push_message(message(100), true)));
        assert_eq!((bounded.info().queued, bounded.info().rejected), (1, 1));
        assert_eq!(drained(&mut bounded), [1, 100]);
    }

    #[test]
    fn what_a_holding_process_took_in_counts_until_it_reports_it_received() {
        let mut bounded = Bounded::new(2, Overflow::Reject).holding(true);
        assert!(queued(bounded.push_message(message(1), false)));
        assert!(queued(bounded.push_message(message(2), false)));
        assert_eq!(drained(&mut bounded), [1, 2]);
        // Taken in, not received: still full.
        assert_eq!(bounded.info().queued, 2);
        assert!(matches!(
            bounded.push_message(message(3), false),
            Push::Full(_)
        ));
        // A signal takes no room, and nor does a forwarded one.
        assert!(queued(bounded.push_message(message(100), true)));
        let forwarded = Message {
            from: None,
            payload: Payload::signal(101_u32),
        };
        assert!(queued(bounded.push_message(forwarded, false)));
        // One received: room for one.
        bounded.report_held(1);
        assert_eq!(bounded.info().queued, 1);
        assert!(queued(bounded.push_message(message(4), false)));
        assert!(matches!(
            bounded.push_message(message(5), false),
            Push::Full(_)
        ));
        assert_eq!(drained(&mut bounded), [100, 101, 4]);
        assert_eq!(bounded.info().queued, 2);
    }

    #[test]
    fn dropping_the_oldest_reaches_into_a_holding_processs_buffer_through_the_process() {
        let mut bounded = Bounded::new(2, Overflow::DropOldest).holding(true);
        assert!(queued(bounded.push_message(message(1), false)));
        assert!(queued(bounded.push_message(message(2), false)));
        assert_eq!(drained(&mut bounded), [1, 2]);
        // 1 and 2 are in the process's buffer: dropping them is owed to it.
        assert!(matches!(
            bounded.push_message(message(3), false),
            Push::Owed
        ));
        assert!(matches!(
            bounded.push_message(message(4), false),
            Push::Owed
        ));
        // Nothing held any more: the oldest is queued, and dropped here.
        assert_eq!(displaced(bounded.push_message(message(5), false)), 3);
        assert_eq!(bounded.info().queued, 2);
        assert_eq!(bounded.info().dropped, 1);
        // The next step takes in 4 and 5, and is told to drop two.
        assert_eq!(drained(&mut bounded), [4, 5, 1002]);
        assert_eq!(bounded.info().dropped, 3);
        bounded.report_held(2);
        assert_eq!(bounded.info().queued, 2);
        // A drop owed to a step that received everything meanwhile is void.
        assert!(matches!(
            bounded.push_message(message(6), false),
            Push::Owed
        ));
        bounded.report_held(0);
        assert_eq!(bounded.info().queued, 1);
        assert_eq!(drained(&mut bounded), [6]);
        assert_eq!(bounded.info().dropped, 3);
    }
}
