//! Run queues: the per-worker deque and LIFO slot, and the global injection queue.

pub(crate) mod inject;
pub(crate) mod lifo;
pub(crate) mod local;
