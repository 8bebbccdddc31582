//! Commands: what a process asks of the outside world by yielding.

/// A typed request a process yields; a handler registered for its type performs it
/// and completes the yield with an [`Output`](Command::Output).
///
/// ```
/// use wsched::Command;
///
/// struct Fetch {
///     url: String,
/// }
///
/// impl Command for Fetch {
///     type Output = String;
/// }
/// ```
pub trait Command: Send + 'static {
    /// What the command's completion carries on success.
    type Output: Send + 'static;
}

mod builtin;

pub use builtin::{Join, Sleep, Spawn};
