//! A timed message's reference ([`TimerRef`]) and what it shares with the message
//! in the wheel: its phase, its timer list and what it sends. The message itself,
//! and how it is sent, are the services' (`services/timed.rs`).

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::payload::Payload;
use crate::sync::Mutex;
use crate::time::timer::{TimerItem, TimerList, Timers};

/// A wheel a [`TimerRef`] unlinks its timer from: the scheduler's timer service, its
/// item type erased (a cancel through a ref is rare; its one indirect call buys
/// the ref its independence from what the wheel holds).
pub(crate) trait CancelList: Send + Sync {
    /// Releases the timers linked in `list` (see [`Timers::cancel_process`]).
    fn cancel_list(&self, list: &TimerList);
}

impl<T: TimerItem> CancelList for Timers<T> {
    fn cancel_list(&self, list: &TimerList) {
        self.cancel_process(list);
    }
}

/// The shortest interval period: the timer's resolution. Shorter periods are
/// rounded up to it.
pub(crate) const SHORTEST_PERIOD: Duration = Duration::from_millis(1);

/// Cancels a timed message: returned by `send_after` and `send_interval` (on
/// [`Handle`](crate::Handle), [`Context`](crate::Context) and in
/// [`this`](crate::this)). Cheap to clone; every clone cancels the same timer.
///
/// Dropping it does not cancel anything: a `send_after` whose ref was dropped still
/// sends its message, and an interval runs until its target ends.
///
/// ```
/// use std::time::Duration;
/// use wsched::Scheduler;
/// # use wsched::{Context, Events, InitError, Payloads, Process, Status, StepError, StepOutput};
/// # /// Finishes with the first message it gets, a `&str`.
/// # struct First;
/// # impl Process for First {
/// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
/// #     fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
/// #         for event in events {
/// #             if let wsched::Event::Message(m) = event {
/// #                 out.set_status(Status::Done(m.payload));
/// #                 return Ok(());
/// #             }
/// #         }
/// #         out.set_status(Status::WaitingForMessage);
/// #         Ok(())
/// #     }
/// # }
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let pid = scheduler.spawn(First, "run", ())?;
/// let late = scheduler.send_after(pid, "late", Duration::from_secs(3600))?;
/// let soon = scheduler.send_after(pid, "soon", Duration::from_millis(5))?;
/// assert!(late.cancel(), "cancelled before it fired");
/// assert!(!late.cancel(), "a second cancel finds nothing to stop");
/// assert_eq!(scheduler.wait(pid)?.downcast::<&str>()?, "soon");
/// assert!(!soon.is_active(), "it fired");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct TimerRef {
    state: Arc<TimedState>,
    /// The service whose wheel holds the timer; `None` for the testing harness's
    /// recorded timers, which no wheel holds.
    timers: Option<Arc<dyn CancelList>>,
}

impl TimerRef {
    /// A ref to a timer armed in `timers`' wheel.
    pub(crate) fn armed(state: Arc<TimedState>, timers: Arc<dyn CancelList>) -> Self {
        Self {
            state,
            timers: Some(timers),
        }
    }

    /// A ref to a timer the testing harness recorded.
    pub(crate) fn recorded(state: Arc<TimedState>) -> Self {
        Self {
            state,
            timers: None,
        }
    }

    /// Stops the timer. Returns `true` if it was still armed and this call stopped
    /// it: a `send_after` whose message had not been sent, an interval that was still
    /// running. Returns `false` if there was nothing left to stop: the message was
    /// sent (or dropped because its target had ended), the interval had stopped by
    /// itself (its target ended), the scheduler shut down, or it was cancelled
    /// already.
    ///
    /// Either way, once `cancel` returns the timer sends nothing more: a message
    /// being sent at that very moment is in the target's mailbox before `cancel`
    /// returns (and `cancel` then stops the interval's next one). What the timer
    /// would have sent is dropped on the calling thread.
    pub fn cancel(&self) -> bool {
        let stopped = {
            let mut phase = self.state.phase.lock();
            let armed = *phase == Phase::Armed;
            if armed {
                *phase = Phase::Cancelled;
            }
            armed
        };
        if stopped {
            if let Some(timers) = &self.timers {
                // Unlinks it from the wheel now, not at its deadline. If the timer
                // thread has it in hand, this finds nothing, and the thread drops it
                // on seeing it cancelled.
                timers.cancel_list(&self.state.list);
            }
        }
        stopped
    }

    /// Whether the timer is still armed: not fired (`send_after`), not stopped
    /// (intervals), not cancelled. A snapshot: it may fire right after.
    pub fn is_active(&self) -> bool {
        *self.state.phase.lock() == Phase::Armed
    }
}

impl fmt::Debug for TimerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerRef")
            .field("phase", &*self.state.phase.lock())
            .finish()
    }
}

/// What a timed message shares with its [`TimerRef`]s.
pub(crate) struct TimedState {
    /// Where the wheel links the message's pending timer (one at most).
    pub(crate) list: TimerList,
    pub(crate) phase: Mutex<Phase>,
}

impl TimedState {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            list: TimerList::new(),
            phase: Mutex::new(Phase::Armed),
        })
    }

    /// The testing harness firing a recorded timer by hand: the message `repeat`
    /// sends now, if the timer is armed (a `send_after` is then over).
    pub(crate) fn fire_by_hand(&self, repeat: &mut Repeat) -> Option<Payload> {
        let mut phase = self.phase.lock();
        if *phase != Phase::Armed {
            return None;
        }
        match repeat {
            Repeat::Once(message) => {
                *phase = Phase::Over;
                Some(std::mem::replace(message, Payload::unit()))
            }
            Repeat::Every { message, clone, .. } => Some(clone(message)),
        }
    }

    /// Whether the timer was cancelled through a [`TimerRef`].
    pub(crate) fn is_cancelled(&self) -> bool {
        *self.phase.lock() == Phase::Cancelled
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// It will send (again).
    Armed,
    /// It sent its message, or stopped by itself (target ended, shutdown).
    Over,
    /// A [`TimerRef`] cancelled it.
    Cancelled,
}

/// What a timed message sends, and how often.
pub(crate) enum Repeat {
    /// This message, once.
    Once(Payload),
    /// A clone of `message` every `period`.
    Every {
        message: Payload,
        /// Clones `message` (made for its type by [`Repeat::every`]).
        clone: fn(&Payload) -> Payload,
        period: Duration,
    },
}

impl Repeat {
    pub(crate) fn once<T: Any + Send>(message: T) -> Self {
        Self::Once(Payload::new(message))
    }

    /// A clone of `message` every `period` (at least a millisecond).
    pub(crate) fn every<T: Any + Send + Clone>(message: T, period: Duration) -> Self {
        Self::Every {
            message: Payload::new(message),
            clone: clone_payload::<T>,
            period: period.max(SHORTEST_PERIOD),
        }
    }

    /// The interval's period (`None`: sent once).
    pub(crate) fn period(&self) -> Option<Duration> {
        match self {
            Self::Once(_) => None,
            Self::Every { period, .. } => Some(*period),
        }
    }

    /// The message, taken back (an interval's original, which it sends clones of).
    pub(crate) fn into_payload(self) -> Payload {
        match self {
            Self::Once(message) | Self::Every { message, .. } => message,
        }
    }
}

fn clone_payload<T: Any + Send + Clone>(payload: &Payload) -> Payload {
    let message = payload
        .downcast_ref::<T>()
        .expect("an interval's message keeps its type");
    Payload::new(message.clone())
}
