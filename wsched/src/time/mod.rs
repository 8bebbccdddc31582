//! Time: the timer wheel and the thread that drives it, generic over what a timer
//! carries (the services give it sleeps' completers, timed messages and calls'
//! timeouts: `services/timers.rs`).
//!
//! May use: the crate root.
//!
//! | file | concern |
//! |---|---|
//! | `clock.rs` | the clock the runtime reads (a seam: one source, the OS clock, static) |
//! | `timer.rs` | the hierarchical timer wheel and the thread that fires it |
//! | `timed_ref.rs` | a timed message's [`TimerRef`](crate::TimerRef) and the state it shares with the message |

pub(crate) mod clock;
pub(crate) mod timed_ref;
pub(crate) mod timer;
