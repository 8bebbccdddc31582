//! Processes on several nodes (the `cluster` feature).

#[cfg(feature = "nats")]
mod nats;
mod transport;

#[cfg(feature = "nats")]
pub use nats::{NatsOptions, NatsTransport};
pub use transport::{
    Done, Entry, FrameSink, KeyValue, KvError, Revision, Transport, TransportError,
};
