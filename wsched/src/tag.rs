//! [`Tag`]: what ties a yielded command to its completion.

use std::fmt;

/// Correlates a yielded command with its completion. Chosen by the process; the
/// macro numbers a process's yields 1, 2, 3… in program order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Tag(pub u64);

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}
