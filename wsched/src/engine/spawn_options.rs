//! [`SpawnOptions`]: how a process is spawned, beyond what it runs.

use crate::engine::bounded::{Bounded, Overflow};
use crate::engine::cell::NewProcess;

/// How to spawn a process: its mailbox, and whether its result is kept. The default
/// (`SpawnOptions::new()`) spawns as [`Handle::spawn`](crate::Handle::spawn) does:
/// an unbounded mailbox, the result kept for a join.
///
/// Given to [`Handle::spawn_with`](crate::Handle::spawn_with) (and
/// [`Scheduler::spawn_with`](crate::Scheduler::spawn_with)),
/// [`Context::spawn_with`](crate::Context::spawn_with),
/// [`this::spawn_with`](crate::this::spawn_with) and the
/// [`Spawn`](crate::command::Spawn) command's
/// [`with_options`](crate::command::Spawn::with_options).
///
/// ```
/// use wsched::{Overflow, Scheduler, SendErrorKind, SpawnOptions};
/// # use wsched::{Context, Events, InitError, Payloads, Process, Status, StepError, StepOutput};
/// # /// Finishes with how many messages its first step got.
/// # struct Count;
/// # impl Process for Count {
/// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
/// #     fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
/// #         let n = events.filter(|e| matches!(e, wsched::Event::Message(_))).count();
/// #         out.set_status(if n == 0 { Status::WaitingForMessage } else { Status::Done(wsched::Payload::new(n)) });
/// #         Ok(())
/// #     }
/// # }
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let options = SpawnOptions::new().bounded_mailbox(100, Overflow::Reject);
/// let pid = scheduler.spawn_with(Count, "run", (), options)?;
/// // Sends to `pid` fail with `SendErrorKind::MailboxFull`, the message handed back,
/// // while 100 messages wait for it to receive them.
/// scheduler.send(pid, "hello")?;
/// # let _ = scheduler.wait(pid)?;
/// # let _ = SendErrorKind::MailboxFull;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpawnOptions {
    mailbox: Option<(usize, Overflow)>,
    detached: bool,
    #[cfg(feature = "sim")]
    record_history: bool,
}

impl SpawnOptions {
    /// The defaults: an unbounded mailbox, the result kept for a join.
    pub const fn new() -> Self {
        Self {
            mailbox: None,
            detached: false,
            #[cfg(feature = "sim")]
            record_history: false,
        }
    }

    /// Bounds the process's mailbox to `capacity` messages: once that many were sent
    /// to it and not yet received, a send does what `overflow` says (see
    /// [`Overflow`]):
    ///
    /// * [`Overflow::Reject`]: the send fails with
    ///   [`SendErrorKind::MailboxFull`](crate::SendErrorKind::MailboxFull), the
    ///   message handed back in the error. (A timed message has no sender to go back
    ///   to: it becomes a dead letter, [`DeadLetterReason::MailboxFull`](crate::DeadLetterReason::MailboxFull).)
    /// * [`Overflow::DropOldest`]: the send succeeds and the oldest message not yet
    ///   received is dropped, never silently: it goes to the
    ///   [`on_dead_letter`](crate::Builder::on_dead_letter) hook
    ///   ([`DeadLetterReason::DroppedOldest`](crate::DeadLetterReason::DroppedOldest)),
    ///   on the sending thread, or on the process's worker at its next step if the
    ///   process had taken it in, and is counted in
    ///   [`Metrics::dropped_messages`](crate::Metrics::dropped_messages).
    ///
    /// Only messages count: completions of its commands, cancels, and monitors'
    /// `Down`s and links' `Exit`s always get through, and take no room, so a full
    /// mailbox never holds up a completion or tells a watcher late. A hand-written
    /// process receives every message a step takes in, which frees the room. A
    /// `#[process]` process takes them into its machine at each step, where those no
    /// `recv!` asked for yet wait: they keep their room until a `recv!` takes them,
    /// so one blocked in `recv!(A)` while `B`s pour in is bounded all the same.
    ///
    /// The capacity must be at least 1: spawning with 0 fails with
    /// [`SpawnError::ZeroMailboxCapacity`](crate::SpawnError::ZeroMailboxCapacity).
    pub const fn bounded_mailbox(mut self, capacity: usize, overflow: Overflow) -> Self {
        self.mailbox = Some((capacity, overflow));
        self
    }

    /// Discards the result when the process finishes, as
    /// [`Handle::spawn_detached`](crate::Handle::spawn_detached) does.
    pub const fn detached(mut self) -> Self {
        self.detached = true;
        self
    }

    /// The mailbox's capacity and overflow policy; `None`: unbounded.
    pub const fn mailbox(&self) -> Option<(usize, Overflow)> {
        self.mailbox
    }

    /// Whether the result is discarded.
    pub const fn is_detached(&self) -> bool {
        self.detached
    }

    /// Records the process's history (the `sim` feature): its entry and arguments,
    /// and for each step the events it received and the commands it yielded, with
    /// their values where a codec is registered
    /// ([`Builder::history_codecs`](crate::Builder::history_codecs)). Take it with
    /// [`Handle::take_history`](crate::Handle::take_history) (or look at it so far
    /// with [`Handle::history`](crate::Handle::history)), and replay it in the
    /// test harness with [`sim::history::replay`](crate::sim::history::replay).
    ///
    /// The whole history is kept until it is taken: record the processes a test
    /// looks at, not every process of a long run (for those, see
    /// [`Builder::flight_recorder`](crate::Builder::flight_recorder)).
    #[cfg(feature = "sim")]
    pub const fn record_history(mut self) -> Self {
        self.record_history = true;
        self
    }

    /// Whether [`record_history`](Self::record_history) was asked for.
    #[cfg(feature = "sim")]
    pub const fn records_history(&self) -> bool {
        self.record_history
    }

    /// Applies these options to a process not spawned yet. Detaching adds to what
    /// the process was made with; it never makes a detached process joinable.
    pub(crate) fn apply(self, mut process: NewProcess) -> NewProcess {
        #[cfg(feature = "sim")]
        if self.record_history {
            process.record_history();
        }
        if self.detached {
            process.detach();
        }
        if let Some((capacity, overflow)) = self.mailbox {
            process.bound_mailbox(Bounded::new(capacity, overflow));
        }
        process
    }
}
