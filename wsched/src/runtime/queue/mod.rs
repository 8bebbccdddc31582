//! Run queues: the per-worker deque and the global injection queue.

pub(crate) mod inject;
pub(crate) mod local;
