//! What the scheduler's timers carry: a `Sleep`'s completer, a timed message, a
//! call's timeout; the time layer's wheel (`time/timer.rs`) holds them.

use crate::engine::cell::CellRef;
use crate::engine::completion::RawCompleter;
use crate::engine::shared::Shared;
use crate::error::YieldError;
use crate::payload::Payload;
use crate::services::calls::CallTimer;
use crate::services::in_flight::{Claim, Work};
use crate::services::timed::TimedMessage;
use crate::tag::Tag;
use crate::time::timer::{TimerItem, TimerList};
use std::sync::Arc;
use std::time::Duration;

impl Shared {
    /// The scheduler's timer service.
    #[inline(always)]
    pub(crate) fn timers(&self) -> &Arc<Timers> {
        self.part()
    }
}

/// The scheduler's timer service.
pub(crate) type Timers = crate::time::timer::Timers<Timer>;

/// What the scheduler's timers carry.
pub(crate) enum Timer {
    /// A `Sleep` (or a receive timeout): firing completes the yield.
    Wake(RawCompleter),
    /// A timed message: firing sends it (see `timed.rs`). Boxed, so that a `Sleep`'s
    /// entry does not grow to a message's size.
    Message(Box<TimedMessage>),
    /// A process's call (see `calls.rs`): firing times the call out;
    /// released, it closes the call. Boxed as a message is.
    Call(Box<CallTimer>),
    /// The deadline of a yield's work in flight (an async handler's timeout, set to
    /// the duration it carries): firing fails the yield as timed out and aborts the
    /// work, unless the work ended first. Released (the yield withdrawn, the
    /// process ended, the work done), it does nothing.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    Deadline(Arc<Work>, Duration),
}

impl TimerItem for Timer {
    type Scratch = Vec<CellRef>;

    fn owner(&self) -> &TimerList {
        match self {
            Self::Wake(completer) => completer.cell().timers(),
            Self::Message(message) => message.timers(),
            Self::Call(call) => call.cell().timers(),
            Self::Deadline(work, _) => work.cell().timers(),
        }
    }

    fn tag(&self) -> Tag {
        match self {
            Self::Wake(completer) => completer.tag(),
            // Found by its own list, never by tag.
            Self::Message(_) => Tag(0),
            Self::Call(call) => call.tag(),
            Self::Deadline(work, _) => work.tag(),
        }
    }

    fn fire(due: &mut Vec<Self>, woken: &mut Vec<CellRef>) {
        for timer in due.drain(..) {
            match timer {
                Self::Wake(completer) => completer.deliver_deferred(Ok(Payload::unit()), woken),
                // Sent at once (each wakes its target through the usual send path): a
                // message's target is found by PID, not through a cell at hand.
                Self::Message(message) => message.fire(),
                Self::Call(call) => call.fire(),
                Self::Deadline(work, after) => {
                    if work.claim(Claim::Deadline) {
                        let cell = work.cell();
                        cell.handle().shared().in_flight().remove(&work);
                        let command = work.command_name();
                        RawCompleter::new(cell.clone(), work.tag(), || "")
                            .deliver_deferred(Err(YieldError::TimedOut { command, after }), woken);
                    }
                }
            }
        }
        if let Some(first) = woken.first() {
            let handle = first.handle().clone();
            handle.shared().schedule_batch(woken);
        }
    }

    fn release(self) {
        match self {
            Self::Wake(completer) => completer.release(),
            Self::Message(message) => message.release(),
            Self::Call(call) => call.release(),
            Self::Deadline(..) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_pending_timer_entry_is_72_bytes() {
        // A `Sleep`'s completer alone made it 64: the timed-message variant (one
        // pointer) costs the `Option` its niche, which is 8 bytes more.
        assert_eq!(std::mem::size_of::<RawCompleter>(), 32);
        assert_eq!(crate::time::timer::entry_size::<Timer>(), 72);
    }
}
