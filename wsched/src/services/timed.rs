//! Timed messages: a message sent once after a delay (`send_after`) or every period
//! until cancelled (`send_interval`), armed from a process or from outside, on the
//! timer service that `Sleep` uses (`timer.rs`) — its wheel, its thread, its O(1)
//! cancellation.
//!
//! # What happens when
//!
//! * **Arming** checks the target: a PID that never existed or whose process has
//!   finished fails at once ([`TimedSendError`], which hands the message back), as does
//!   a timer thread that cannot be started. Otherwise the message is armed and a
//!   [`TimerRef`] returned. A timer is not tied to the process that armed it: it
//!   outlives it.
//! * **Firing** sends the message as [`Handle::send`](crate::Handle::send) would, from
//!   the arming process (`None` from outside), never before its deadline and about a
//!   millisecond after it at most (plus wake-up latency). An interval's messages fall
//!   due at whole periods after it was armed (no drift); a period the timer thread
//!   missed entirely is skipped rather than made up in a burst. Each interval message
//!   is a fresh clone of the one given.
//! * **A target that has ended when its message falls due** does not get it: the
//!   message is dropped (its `Drop` runs on the timer thread, a panic there is caught)
//!   and counted in [`Metrics::undelivered_timed_messages`](crate::Metrics); an
//!   interval stops there by itself. (Until the deadline, a timed message to an ended
//!   process waits in the wheel like any other: nothing watches the target.)
//! * **Cancelling** ([`TimerRef::cancel`]) stops the timer and drops what it would
//!   have sent; it reports whether the timer was still armed. Once it returns, the
//!   timer sends nothing more.
//! * **Shutdown** stops the timer thread after every process has ended; the timed
//!   messages still pending are dropped then (nothing is left holding memory or the
//!   scheduler) and counted as undelivered, as their targets have all ended.
//!
//! # Cancelling racing firing
//!
//! Each timed message has a small lock of its own, shared with its [`TimerRef`],
//! holding its phase (armed, over, cancelled). The timer thread takes a due message
//! out of the wheel under the wheel's lock as usual; then, under the message's lock,
//! it checks that the message is still armed, puts it into the target's mailbox and,
//! for an interval, re-arms it in the wheel. A cancel takes the same lock to mark the
//! message cancelled, then (outside it) unlinks its timer from the wheel. So a cancel
//! comes either before the check (nothing is sent, and the timer thread drops what it
//! took out) or after the mailbox push and the re-arm (which its unlink then finds):
//! no message after a cancel, and no re-armed timer left behind. The locks nest one
//! way only — the message's lock, then the wheel's or a mailbox's — and no user code
//! runs under the message's lock (the interval's clone is made before it, drops
//! happen after it).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::process::Message;
use crate::error::{SendErrorKind, TimedSendError};
use crate::payload::Payload;
use crate::pid::Pid;
use crate::runtime::{drop_quietly, Handle};
use crate::services::timers::Timer;
use crate::time::timed_ref::{CancelList, Phase, Repeat, TimedState, TimerRef};
use crate::time::timer::TimerList;
use crate::DeadLetterReason;

/// A timed message in the wheel: [`Timer::Message`].
pub(crate) struct TimedMessage {
    state: Arc<TimedState>,
    /// The scheduler: to send the message, and to re-arm an interval.
    handle: Handle,
    from: Option<Pid>,
    to: Pid,
    /// When it was armed: an interval's messages fall due at whole periods after it.
    origin: Instant,
    repeat: Repeat,
}

/// Arms a timed message from `from` to `to`, first due after `delay`.
///
/// # Errors
/// As [`Handle::send_after`](crate::Handle::send_after).
pub(crate) fn arm(
    handle: &Handle,
    from: Option<Pid>,
    to: Pid,
    delay: Duration,
    repeat: Repeat,
) -> Result<TimerRef, TimedSendError> {
    let shared = handle.shared();
    // A remote target is checked when the message falls due: its node answers
    // only then (see `remote.rs`).
    if to.is_local() {
        if let Err(kind) = shared.live_cell(to) {
            return Err(TimedSendError::new(to, kind, repeat.into_payload()));
        }
    }
    let timers = shared.timers();
    let state = TimedState::new();
    let origin = timers.now();
    let message = TimedMessage {
        state: state.clone(),
        handle: handle.clone(),
        from,
        to,
        origin,
        repeat,
    };
    match timers.arm_at(origin.checked_add(delay), Timer::Message(Box::new(message))) {
        Ok(()) => Ok(TimerRef::armed(
            state,
            Arc::clone(timers) as Arc<dyn CancelList>,
        )),
        Err(refused) => {
            let (timer, error) = refused.into_parts();
            let payload = message_of(timer).repeat.into_payload();
            Err(match error {
                Some(error) => TimedSendError::no_timer_thread(to, error.into_io(), payload),
                // Shut down: every process has ended, the target too.
                None => TimedSendError::new(to, SendErrorKind::Finished, payload),
            })
        }
    }
}

/// The message a refused [`Timer`] holds: timed messages arm only messages.
fn message_of(timer: Timer) -> Box<TimedMessage> {
    match timer {
        Timer::Message(message) => message,
        Timer::Wake(_) | Timer::Call(_) | Timer::Deadline(..) => {
            unreachable!("the timer armed is given back")
        }
    }
}

impl TimedMessage {
    /// The list the wheel links this message's timer into.
    pub(crate) fn timers(&self) -> &TimerList {
        &self.state.list
    }

    /// Sends the message, on the timer thread, outside the wheel's lock; an interval
    /// re-arms itself. See the module docs for the lock that orders this against a
    /// cancel.
    pub(crate) fn fire(mut self: Box<Self>) {
        // Made before the message's lock is taken: a clone runs user code.
        let payload = match &mut self.repeat {
            Repeat::Once(message) => std::mem::replace(message, Payload::unit()),
            Repeat::Every { message, clone, .. } => {
                match catch_unwind(AssertUnwindSafe(|| clone(message))) {
                    Ok(payload) => payload,
                    // The interval cannot make its message: it stops, and the message
                    // it could not make counts as undelivered.
                    Err(panic) => {
                        drop_quietly(panic);
                        self.release();
                        return;
                    }
                }
            }
        };
        let state = self.state.clone();
        let mut phase = state.phase.lock();
        if *phase != Phase::Armed {
            // Cancelled while the timer thread had it in hand.
            drop(phase);
            drop_quietly(payload);
            drop_quietly(self);
            return;
        }
        let (from, to) = (self.from, self.to);
        // Pushed, not sent: a message a full mailbox drops (or refuses) goes to the
        // dead letters below, once this holds no lock, as their hook runs user code.
        let sent = self.handle.shared().push_message(from, to, payload, false);
        // Kept for that only: a delivery needs no handle once `self` is re-armed.
        let handle = (!matches!(sent, Ok(None))).then(|| self.handle.clone());
        // A full mailbox that rejects is no end of its process: an interval goes on.
        let full = matches!(&sent, Err(error) if error.kind() == SendErrorKind::MailboxFull);
        let mut over = Some(self);
        if sent.is_ok() || full {
            over = over.and_then(|message| message.rearm());
        }
        if over.is_some() {
            *phase = Phase::Over;
        }
        drop(phase);
        // What is left is dropped outside the lock: drops run user code.
        let undelivered =
            (sent.is_err() && !full) || over.as_ref().is_some_and(|m| m.is_interval());
        if let Some(message) = over {
            if undelivered {
                message.handle.shared().timers().count_undelivered();
            }
            drop_quietly(message);
        }
        match (sent, handle) {
            (Ok(Some(dropped)), Some(handle)) => handle.shared().drop_oldest(to, dropped),
            (Err(refused), Some(handle)) if full => {
                let message = Message {
                    from,
                    payload: refused.into_payload(),
                };
                handle
                    .shared()
                    .dead_letters
                    .one(to, message, DeadLetterReason::MailboxFull);
            }
            (other, _) => drop_quietly(other),
        }
    }

    fn is_interval(&self) -> bool {
        matches!(self.repeat, Repeat::Every { .. })
    }

    /// Puts an interval back into the wheel for its next period; gives back a message
    /// that is over (sent once, or an interval that cannot be re-armed because the
    /// service shut down).
    fn rearm(self: Box<Self>) -> Option<Box<Self>> {
        let Repeat::Every { period, .. } = self.repeat else {
            return Some(self);
        };
        let timers = self.handle.shared().timers().clone();
        let deadline = next_deadline(self.origin, period, timers.now());
        // The timer thread is running (it is this one), so only a shutdown refuses it.
        let refused = timers.arm_at(deadline, Timer::Message(self)).err()?;
        Some(message_of(refused.into_parts().0))
    }

    /// Drops a message that will not be sent: cancelled (nothing to count), or still
    /// armed when the scheduler shut down or an interval could not make its message
    /// (counted as undelivered).
    pub(crate) fn release(self: Box<Self>) {
        let armed = {
            let mut phase = self.state.phase.lock();
            let armed = *phase == Phase::Armed;
            if armed {
                *phase = Phase::Over;
            }
            armed
        };
        if armed {
            self.handle.shared().timers().count_undelivered();
        }
        drop_quietly(self);
    }
}

/// The first whole period after `origin` that ends after `now` (skipping the periods
/// that ended meanwhile); `None` if no `Instant` can say when.
fn next_deadline(origin: Instant, period: Duration, now: Instant) -> Option<Instant> {
    let period = period.as_nanos();
    let periods = now.saturating_duration_since(origin).as_nanos() / period + 1;
    let offset = u64::try_from(periods.checked_mul(period)?).ok()?;
    origin.checked_add(Duration::from_nanos(offset))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::time::timed_ref::SHORTEST_PERIOD;

    #[test]
    fn a_timer_ref_can_live_in_a_process_and_be_shared() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<TimerRef>();
    }

    #[test]
    fn intervals_fall_due_on_whole_periods_and_skip_the_missed_ones() {
        let origin = Instant::now();
        let period = Duration::from_millis(10);
        let at = |ms: u64| origin + Duration::from_millis(ms);
        // Fired on time (or a little late): the next period.
        assert_eq!(next_deadline(origin, period, at(10)), Some(at(20)));
        assert_eq!(next_deadline(origin, period, at(11)), Some(at(20)));
        // Fired more than a period late: the missed periods are skipped.
        assert_eq!(next_deadline(origin, period, at(35)), Some(at(40)));
        // Far beyond what an `Instant` can say: never.
        assert_eq!(next_deadline(origin, Duration::MAX, at(1)), None);
    }

    #[test]
    fn periods_are_at_least_a_millisecond_and_the_message_comes_back() {
        let repeat = Repeat::every(String::from("tick"), Duration::ZERO);
        assert_eq!(repeat.period(), Some(SHORTEST_PERIOD));
        let Repeat::Every { message, clone, .. } = &repeat else {
            unreachable!()
        };
        assert_eq!(
            clone(message).downcast::<String>().unwrap(),
            "tick",
            "a clone of the message"
        );
        assert_eq!(repeat.into_payload().downcast::<String>().unwrap(), "tick");
        assert_eq!(Repeat::once(3_u8).period(), None);
    }

    #[test]
    fn a_recorded_timer_fires_by_hand_until_cancelled() {
        let state = TimedState::new();
        let timer = TimerRef::recorded(state.clone());
        let mut once = Repeat::once(7_u32);
        assert_eq!(
            state
                .fire_by_hand(&mut once)
                .unwrap()
                .downcast::<u32>()
                .unwrap(),
            7
        );
        assert!(state.fire_by_hand(&mut once).is_none(), "sent once");
        assert!(!timer.cancel(), "it had fired");
        let state = TimedState::new();
        let timer = TimerRef::recorded(state.clone());
        let mut every = Repeat::every(1_u8, Duration::from_secs(1));
        assert!(state.fire_by_hand(&mut every).is_some());
        assert!(state.fire_by_hand(&mut every).is_some());
        assert!(timer.is_active());
        assert!(timer.clone().cancel());
        assert!(!timer.is_active() && state.is_cancelled());
        assert!(state.fire_by_hand(&mut every).is_none());
    }
}
