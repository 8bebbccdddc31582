//! Processes on several nodes (the `cluster` feature).

mod transport;

pub use transport::{
    Done, Entry, FrameSink, KeyValue, KvError, Revision, Transport, TransportError,
};
