//! Commands and handlers: how a process's yields reach the outside world and come
//! back.
//!
//! A process yields a [`Command`] with a [`Tag`](crate::Tag). After the step, the
//! worker hands each yield, in order, to the handler registered for its type on the
//! [`Builder`](crate::Builder), together with a [`Completer`]. The handler completes
//! it — at once on the worker, or later from any thread — and the process is stepped
//! with an [`Event::Completion`](crate::Event::Completion) carrying the same tag.
//!
//! * A handler that completes at once gets the process stepped again soon, on the
//!   same worker (the wake-up flag rule); one that completes later wakes it through
//!   its mailbox.
//! * Handlers registered with
//!   [`blocking_handler`](crate::Builder::blocking_handler) run on a separate, bounded
//!   pool of threads, so a worker never blocks on them.
//! * A yield with no handler completes with
//!   [`YieldError::NoHandler`](crate::YieldError::NoHandler); a panicking handler
//!   with [`YieldError::HandlerPanicked`](crate::YieldError::HandlerPanicked); a
//!   dropped completer with [`YieldError::Dropped`](crate::YieldError::Dropped).
//!
//! The scheduler handles four built-in commands itself: [`Sleep`], [`Spawn`],
//! [`Join`] and [`Call`] (a request/reply call of another process). Its timer service also sends timed messages (`send_after`,
//! `send_interval`, cancelled through a [`TimerRef`]).

/// A typed request a process yields; a handler registered for its type performs it
/// and completes the yield with an [`Output`](Command::Output).
///
/// # Example
///
/// A command, a process that yields it, and the handler that performs it:
///
/// ```
/// use wsched::command::Completer;
/// use wsched::prelude::*;
/// use wsched::Scheduler;
///
/// struct Fetch {
///     url: String,
/// }
///
/// impl Command for Fetch {
///     type Output = String;
/// }
///
/// struct Page;
///
/// #[process]
/// impl Page {
///     #[entry]
///     fn size(&mut self, url: String) -> Result<usize, BoxError> {
///         let body: String = yield_cmd!(Fetch { url })?; // a Fetch's Output
///         Ok(body.len())
///     }
/// }
///
/// let scheduler = Scheduler::builder()
///     .handler(|fetch: Fetch, done: Completer<Fetch>| done.complete(format!("<{}>", fetch.url)))
///     .build()?;
/// let pid = scheduler.spawn(Page, "size", ("a.test".to_string(),))?;
/// assert_eq!(scheduler.wait(pid)?.downcast::<usize>()?, 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a command: only a `Command` can be yielded",
    label = "not a `Command`",
    note = "a command is a type of your own with `impl Command for MyCommand {{ type Output = …; }}` \
            (what its completion carries), performed by a handler registered for it on the \
            scheduler's builder"
)]
pub trait Command: Send + 'static {
    /// What the command's completion carries on success.
    type Output: Send + 'static;
}

pub(crate) mod blocking;
mod builtin;
mod completer;
pub(crate) mod handler;
pub(crate) mod timed;
pub(crate) mod timer;

pub use crate::runtime::calls::{Call, CallAnswer};
pub(crate) use builtin::registrations as builtin_registrations;
pub use builtin::{Join, Sleep, Spawn};
pub(crate) use completer::dispatch_direct;
pub use completer::Completer;
pub(crate) use completer::RawCompleter;
pub use timed::TimerRef;
