//! The Erlang-style services built on the engine: names, monitors, links, calls,
//! timed messages and inboxes.
//!
//! May use: `observe`, `engine`, `time`, the crate root.
//!
//! | file | concern |
//! |---|---|
//! | `context.rs` | what a process's `Context` does on a scheduler |
//! | `names.rs` | the name table: processes registered under names |
//! | `monitors.rs` | monitors: `Down` messages when a watched process ends; the table monitors and links share |
//! | `links.rs` | links: processes that end together, or trap the other's end as `Exit` messages |
//! | `calls.rs` | request/reply calls: `Request`, `Reply`, `CallError`, the blocking `Handle::call`, the built-in `Call` command and its timer |
//! | `timed.rs` | timed messages: `send_after`, `send_interval`, their [`TimerRef`](crate::TimerRef) |
//! | `timers.rs` | what the scheduler's timers carry: sleeps' completers, timed messages, calls' timeouts |
//! | `in_flight.rs` | work in flight for yields (blocking jobs, async futures), so that a withdrawal, an end or a shutdown reaches it |
//! | `inbox.rs` | inboxes: a mailbox with a PID for a thread outside the scheduler |
//! | `remote.rs` | the seam to other nodes: what monitors, links, sends and stops do with a remote PID |

pub(crate) mod calls;
pub(crate) mod context;
pub(crate) mod in_flight;
pub(crate) mod inbox;
pub(crate) mod links;
pub(crate) mod monitors;
pub(crate) mod names;
pub(crate) mod remote;
pub(crate) mod timed;
pub(crate) mod timers;
