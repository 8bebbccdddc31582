//! [`Completer`]: the typed face of a yield's return path (see
//! `engine/completion.rs` for the path itself).

use std::fmt;
use std::marker::PhantomData;

use crate::engine::cell::CellRef;
use crate::engine::completion::RawCompleter;
use crate::engine::handle::Handle;
use crate::engine::process::Command;
use crate::error::BoxError;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::tag::Tag;

/// Completes one yielded command of type `C`, from any thread, now or later.
///
/// It carries the process's PID (never reused, so it doubles as the incarnation) and
/// the yield's tag. Completing consumes it, so a yield completes at most once.
/// Dropping it without completing delivers [`YieldError::Dropped`](crate::YieldError::Dropped), so no process
/// waits forever on a forgotten completion. Completing after the process has ended
/// does nothing.
///
/// # Example
///
/// A handler hands each completer to a worker thread, which completes it later — or
/// fails it:
///
/// ```
/// use std::sync::mpsc;
/// use std::thread;
/// use wsched::command::Completer;
/// use wsched::prelude::*;
/// use wsched::Scheduler;
///
/// struct Resize(u32);
/// impl Command for Resize {
///     type Output = u32;
/// }
///
/// struct Editor;
///
/// #[process]
/// impl Editor {
///     #[entry]
///     fn edit(&mut self) -> Result<(u32, String), BoxError> {
///         let small = yield_cmd!(Resize(640))?;
///         let refused = yield_cmd!(Resize(0)).unwrap_err();
///         Ok((small, refused.to_string()))
///     }
/// }
///
/// let (jobs, inbox) = mpsc::channel::<(Resize, Completer<Resize>)>();
/// let resizer = thread::spawn(move || {
///     for (Resize(width), done) in inbox {
///         // The completer knows which yield it answers.
///         assert!(done.is_process_alive());
///         if width == 0 {
///             done.fail("width must be positive");
///         } else {
///             done.complete(width / 2);
///         }
///     }
/// });
///
/// let scheduler = Scheduler::builder()
///     .handler(move |cmd: Resize, done: Completer<Resize>| {
///         jobs.send((cmd, done)).expect("the resizer runs");
///     })
///     .build()?;
/// let pid = scheduler.spawn(Editor, "edit", ())?;
/// let (small, refused) = scheduler.wait(pid)?.downcast::<(u32, String)>()?;
/// assert_eq!(small, 320);
/// assert!(refused.contains("width must be positive"), "{refused}");
/// drop(scheduler); // drops the handler's sender: the resizer thread ends
/// resizer.join().unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Completer<C: Command> {
    raw: RawCompleter,
    _command: PhantomData<fn(C)>,
}

impl<C: Command> Completer<C> {
    #[inline(always)]
    pub(crate) fn new(raw: RawCompleter) -> Self {
        Self {
            raw,
            _command: PhantomData,
        }
    }

    pub(crate) fn into_raw(self) -> RawCompleter {
        self.raw
    }

    /// Completes the yield with the command's output.
    #[inline]
    pub fn complete(self, output: C::Output) {
        self.raw.deliver_with(|| Ok(Payload::new(output)));
    }

    /// Completes the yield with an error: the process sees
    /// [`YieldError::Failed`](crate::YieldError::Failed) naming the command.
    pub fn fail(self, error: impl Into<BoxError>) {
        self.raw.fail(error);
    }

    /// The process that yielded the command.
    pub fn pid(&self) -> Pid {
        self.raw.cell().pid()
    }

    /// The yield's tag.
    pub fn tag(&self) -> Tag {
        self.raw.tag()
    }

    /// The scheduler, to spawn processes or send messages from the handler.
    pub fn handle(&self) -> &Handle {
        self.raw.handle()
    }

    /// The cell of the process that yielded.
    pub(crate) fn process_cell(&self) -> &CellRef {
        self.raw.cell()
    }

    /// Whether the process is still running (a long handler may give up early when
    /// it is not; completing a finished process's yield is harmless anyway).
    pub fn is_process_alive(&self) -> bool {
        !self.raw.cell().is_done()
    }

    /// Whether the process still waits for this result. In a handler registered
    /// with [`blocking_handler`](crate::Builder::blocking_handler), it turns false as
    /// soon as the process withdraws the yield (a `recv!` timeout or a pattern arm
    /// won, a cancelled `yield_cmd!` gave up) or ends, or the scheduler stops: a long
    /// job checks it between pieces of work and gives up early. Elsewhere it is
    /// [`is_process_alive`](Self::is_process_alive) (a handler on the worker
    /// completes at once or hands the completer on, so nothing tracks its
    /// withdrawal). A cheap check: a load or two, and one uncontended lock for a
    /// process that has had such work.
    ///
    /// Completing a yield nobody wants is harmless: the result is dropped.
    pub fn is_wanted(&self) -> bool {
        let cell = self.raw.cell();
        self.is_process_alive()
            && (!cell.has_work_out()
                || cell
                    .handle()
                    .shared()
                    .in_flight()
                    .is_wanted(cell.pid(), self.raw.tag()))
    }
}

impl<C: Command> fmt::Debug for Completer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("command", &self.raw.command_name())
            .field("pid", &self.pid())
            .field("tag", &self.raw.tag())
            .finish()
    }
}
