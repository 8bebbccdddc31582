//! Time: the timer wheel and its thread, and timed messages.
//!
//! May use: `engine`, the crate root.
//!
//! | file | concern |
//! |---|---|
//! | `timer.rs` | the hierarchical timer wheel and the thread that fires it |
//! | `timed.rs` | timed messages: `send_after`, `send_interval`, their [`TimerRef`](crate::TimerRef) |

pub(crate) mod timed;
pub(crate) mod timer;
