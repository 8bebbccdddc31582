//! The Erlang-style services built on the engine: names, monitors, links, calls,
//! dead letters, unobserved failures, held messages and inboxes.
//!
//! May use: `command`, `time`, `engine`, the crate root.
//!
//! | file | concern |
//! |---|---|
//! | `names.rs` | the name table: processes registered under names |
//! | `monitors.rs` | monitors: `Down` messages when a watched process ends; the table monitors and links share |
//! | `links.rs` | links: processes that end together, or trap the other's end as `Exit` messages |
//! | `calls.rs` | request/reply calls: `Request`, `Reply`, `CallError`, the blocking `Handle::call`, the built-in `Call` command and its timer |
//! | `dead_letters.rs` | messages still unread when their process ends, to a hook and a count |
//! | `held.rs` | messages a process took in but has not received, for listings |
//! | `inbox.rs` | inboxes: a mailbox with a PID for a thread outside the scheduler |
//! | `unobserved.rs` | failures nobody joins, monitors or links to, to a hook (stderr by default) and a count |

pub(crate) mod calls;
pub(crate) mod dead_letters;
pub(crate) mod held;
pub(crate) mod inbox;
pub(crate) mod links;
pub(crate) mod monitors;
pub(crate) mod names;
pub(crate) mod unobserved;
