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

/// Everything an entry's suspension points read and write.
#[derive(Default)]
pub(crate) struct Io {
    pub(crate) ctx: Option<Context>,
    pub(crate) entry: &'static str,
    /// The last tag handed out; tags start at 1.
    last_tag: u64,
    /// The state of the tags `last_tag + 1 - slots.len() ..= last_tag`, oldest first;
    /// every older tag is [`Slot::Done`]. Tags are handed out in sequence, so a tag's
    /// slot is found by subtracting: delivering, taking and abandoning are O(1), where
    /// searching lists of tags made a `yield_all!` of n commands cost O(n²). Done
    /// slots are popped off the front, so only the window of outstanding tags is kept.
    slots: VecDeque<Slot>,
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
            Event::Completion(c) => match self.slot_mut(c.tag) {
                Some(slot @ Slot::Waiting) => {
                    *slot = Slot::Ready(c.result);
                    None
                }
                _ => c.result.ok(),
            },
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

    /// Where `tag`'s slot is in the window, if it is there (older tags are all done).
    fn offset(&self, tag: Tag) -> Option<usize> {
        let base = self.last_tag + 1 - self.slots.len() as u64;
        let offset = usize::try_from(tag.0.checked_sub(base)?).ok()?;
        (offset < self.slots.len()).then_some(offset)
    }

    fn slot_mut(&mut self, tag: Tag) -> Option<&mut Slot> {
        let offset = self.offset(tag)?;
        self.slots.get_mut(offset)
    }

    /// Pops the done slots off the front of the window.
    fn trim(&mut self) {
        while matches!(self.slots.front(), Some(Slot::Done)) {
            self.slots.pop_front();
        }
    }

    /// Yields `command` with the next tag.
    pub(crate) fn dispatch<C: Command>(&mut self, command: C) -> Tag {
        self.last_tag += 1;
        let tag = Tag(self.last_tag);
        self.slots.push_back(Slot::Waiting);
        self.outgoing.push(Yield::new(tag, command));
        tag
    }

    /// Whether the completion of `tag` arrived and was not consumed yet.
    pub(crate) fn is_ready(&self, tag: Tag) -> bool {
        let slot = self.offset(tag).and_then(|offset| self.slots.get(offset));
        matches!(slot, Some(Slot::Ready(_)))
    }

    /// Takes the completion of `tag` if it arrived.
    pub(crate) fn take(&mut self, tag: Tag) -> Option<Result<Payload, YieldError>> {
        let slot = self.slot_mut(tag)?;
        if !matches!(slot, Slot::Ready(_)) {
            return None;
        }
        let Slot::Ready(result) = mem::replace(slot, Slot::Done) else {
            unreachable!("checked above")
        };
        self.trim();
        Some(result)
    }

    /// Gives up on `tag`: its completion, now or later, is ignored, and if it has not
    /// arrived the yield is withdrawn. Returns a completion that had already arrived,
    /// to be dropped outside any borrow.
    pub(crate) fn abandon(&mut self, tag: Tag) -> Option<Result<Payload, YieldError>> {
        let previous = self
            .slot_mut(tag)
            .map(|slot| mem::replace(slot, Slot::Done));
        self.trim();
        match previous {
            Some(Slot::Ready(result)) => Some(result),
            _ => {
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::command::Sleep;
    use crate::testing::completion;
    use std::time::Duration;

    fn io_with(tags: u64) -> Io {
        let mut io = Io::default();
        for _ in 0..tags {
            io.dispatch(Sleep(Duration::ZERO));
        }
        io.outgoing.clear();
        io
    }

    fn value(result: Option<Result<Payload, YieldError>>) -> Option<u32> {
        result.map(|r| r.unwrap().downcast::<u32>().unwrap())
    }

    #[test]
    fn completions_are_taken_once_by_tag_in_any_order() {
        let mut io = io_with(3);
        assert!(io.deliver(completion(Tag(3), 30_u32)).is_none());
        assert!(io.deliver(completion(Tag(1), 10_u32)).is_none());
        assert!(io.is_ready(Tag(3)) && io.is_ready(Tag(1)) && !io.is_ready(Tag(2)));
        assert_eq!(value(io.take(Tag(2))), None);
        assert_eq!(value(io.take(Tag(3))), Some(30));
        assert_eq!(value(io.take(Tag(3))), None);
        assert_eq!(value(io.take(Tag(1))), Some(10));
        // Tag 2 still waits, so the window keeps it (and tag 3, done, behind it).
        assert_eq!(io.slots.len(), 2);
        assert!(io.deliver(completion(Tag(2), 20_u32)).is_none());
        assert_eq!(value(io.take(Tag(2))), Some(20));
        assert!(io.slots.is_empty());
        assert!(io.withdrawn.is_empty());
    }

    #[test]
    fn duplicate_unknown_and_consumed_completions_are_handed_back() {
        let mut io = io_with(2);
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
        let mut io = io_with(3);
        assert!(io.deliver(completion(Tag(2), 2_u32)).is_none());
        assert_eq!(value(io.abandon(Tag(2))), Some(2));
        assert!(io.withdrawn.is_empty());
        assert_eq!(value(io.abandon(Tag(1))), None);
        assert_eq!(io.withdrawn, [Tag(1)]);
        // Completions of abandoned tags are ignored from now on.
        assert!(io.deliver(completion(Tag(1), 1_u32)).is_some());
        assert!(io.deliver(completion(Tag(2), 2_u32)).is_some());
        assert_eq!(value(io.take(Tag(1))), None);
        // Only tag 3 is left in the window.
        assert_eq!(io.slots.len(), 1);
        assert!(io.deliver(completion(Tag(3), 3_u32)).is_none());
        assert_eq!(value(io.take(Tag(3))), Some(3));
        assert!(io.slots.is_empty());
    }
}
