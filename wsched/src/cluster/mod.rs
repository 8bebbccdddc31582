//! Processes on several nodes (the `cluster` feature).

mod codec;
mod memory;
pub(crate) mod nodes;
mod transport;
mod wire;

pub use memory::{MemoryFabric, MemoryTransport};
pub use nodes::NodeId;
pub use transport::{
    Done, FrameSink, KeyValue, KvEntry, KvError, Revision, Transport, TransportError,
};
