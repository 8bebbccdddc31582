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

// | file | concern |
// |---|---|
// | `mod.rs` | the `Command` trait |
// | `handler.rs` | the handler table: a command's type to the handler registered for it, and the one each thread found last |
// | `completer.rs` | `Completer`: how a handler answers a yield, at once or later, from any thread |
// | `blocking.rs` | the bounded pool of threads that runs blocking handlers |
// | `builtin.rs` | the built-in commands: `Sleep`, `Spawn`, `Join` (and `Call`'s handler) |
//
// May use: `services`, `observe`, `engine`, `time`, the crate root.
pub(crate) mod blocking;
pub(crate) mod builtin;
pub(crate) mod completer;
pub(crate) mod handler;

pub use crate::engine::process::Command;
pub use crate::services::calls::{Call, CallAnswer};
pub use crate::time::timed_ref::TimerRef;
pub(crate) use builtin::registrations as builtin_registrations;
pub use builtin::{Join, Sleep, Spawn};
pub use completer::Completer;
