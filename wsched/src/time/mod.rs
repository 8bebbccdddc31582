//! Time: the timer wheel and the thread that drives it, generic over what a timer
//! carries (the services give it sleeps' completers, timed messages and calls'
//! timeouts: `services/timers.rs`).
//!
//! May use: the crate root.
//!
//! | file | concern |
//! |---|---|
//! | `timer.rs` | the hierarchical timer wheel and the thread that fires it |

pub(crate) mod timer;
