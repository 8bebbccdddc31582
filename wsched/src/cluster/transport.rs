//! The seam under the cluster: what a message broker must do for wsched's nodes.
//!
//! A [`Transport`] moves opaque frames between named nodes and keeps a small
//! key-value store with revisions. The cluster layer puts everything else on top
//! (what a frame holds, sequence numbers, heartbeats, failure detection, names), so
//! a transport is only a pipe and a table:
//!
//! * **Ordered pipes.** Frames one transport sends to one node arrive in the order
//!   they were sent, or not at all (a later frame may arrive after an earlier one
//!   was lost: the cluster numbers its frames and treats a gap as a broken
//!   connection). Nothing is duplicated.
//! * **Broadcast**, for discovery: a frame to every node that has opened the same
//!   cluster, the sender included or not.
//! * **A key-value store with revisions** ([`KeyValue`]): each write gives the key a
//!   new revision, larger than every earlier one; a write may be made conditional on
//!   the revision it read (compare-and-set), so two nodes can never both win a key.
//!   Node incarnations and cluster-wide names are kept there.
//!
//! Two transports come with wsched: the in-memory fabric
//! ([`MemoryFabric`](super::MemoryFabric)), for tests with several schedulers in one
//! process (and partitions on demand), and NATS (`NatsTransport`, with the `nats`
//! feature), over a `nats-server` with JetStream for the key-value store.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Where a transport hands what it receives: the cluster layer implements it.
pub trait FrameSink: Send + Sync + 'static {
    /// A frame arrived: sent to this node, or broadcast. Frames from one sender
    /// come in the order it sent them. Called from the transport's own thread(s);
    /// must not block for long.
    fn frame(&self, frame: &[u8]);

    /// The transport lost (`false`) or regained (`true`) its connection to the
    /// broker. While it is lost the cluster does not count peers' silence against
    /// them: it cannot tell them from the broker.
    fn connected(&self, connected: bool) {
        let _ = connected;
    }
}

/// A message broker as the cluster layer uses it. See the module docs for what
/// each operation must guarantee.
pub trait Transport: Send + Sync + 'static {
    /// Starts receiving for node `node`: frames sent to it and broadcasts go to
    /// `sink` until [`close`](Self::close). Called once, before any other method
    /// but [`kv`](Self::kv).
    ///
    /// # Errors
    /// When the broker cannot be reached, or refuses the subscription.
    fn open(&self, node: &str, sink: Arc<dyn FrameSink>) -> Result<(), TransportError>;

    /// Sends `frame` to node `to`. Returns at once (the frame may be queued);
    /// ordered after every frame this transport sent to `to` before. Lost,
    /// quietly, if `to` is not there.
    fn send(&self, to: &str, frame: Vec<u8>);

    /// Sends `frame` to every node that opened this cluster.
    fn broadcast(&self, frame: Vec<u8>);

    /// The cluster's key-value store.
    fn kv(&self) -> &dyn KeyValue;

    /// Frames accepted by [`send`](Self::send) or [`broadcast`](Self::broadcast)
    /// and not yet handed to the broker (a gauge, for metrics).
    fn queued(&self) -> usize {
        0
    }

    /// Stops receiving and sending; frames still queued are flushed if the broker
    /// can take them quickly. Idempotent.
    fn close(&self);
}

/// A revision of a key: larger than every earlier revision of that key.
pub type Revision = u64;

/// A value as read from the store, with its revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvEntry {
    /// The value's bytes.
    pub value: Vec<u8>,
    /// Its revision.
    pub revision: Revision,
}

/// What a key-value operation calls when it is done. It may be called on the
/// calling thread before the operation returns (the in-memory fabric does), or on
/// a transport's thread: hold no lock across an operation that the callback takes.
pub type Done<T> = Box<dyn FnOnce(Result<T, KvError>) + Send + 'static>;

/// A key-value store with revisions. Keys are made of ASCII letters, digits, `-`,
/// `_`, `=` and `.` (the cluster layer encodes names into that alphabet).
pub trait KeyValue: Send + Sync {
    /// The key's value and revision, or `None` if it has none (never written, or
    /// deleted).
    fn get(&self, key: &str, done: Done<Option<KvEntry>>);

    /// Writes `value` only if the key has no value now; the new revision.
    /// [`KvError::Conflict`] if it has one.
    fn create(&self, key: &str, value: Vec<u8>, done: Done<Revision>);

    /// Writes `value` only if the key's revision is still `revision`; the new
    /// revision. [`KvError::Conflict`] if somebody wrote (or deleted) it since.
    fn update(&self, key: &str, value: Vec<u8>, revision: Revision, done: Done<Revision>);

    /// Deletes the key's value, only if its revision is still `revision`.
    /// [`KvError::Conflict`] if somebody wrote it since; deleting a key without a
    /// value is not an error.
    fn delete(&self, key: &str, revision: Revision, done: Done<()>);
}

/// Why a key-value operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KvError {
    /// A conditional write lost: the key was written (or created) by somebody else
    /// since the revision given.
    Conflict,
    /// The store could not be reached or answered with an error (its text).
    Unavailable(String),
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Conflict => f.write_str(
                "the key was written by another node since it was read (a conditional write lost)",
            ),
            Self::Unavailable(why) => {
                write!(f, "the cluster's key-value store is unavailable: {why}")
            }
        }
    }
}

impl Error for KvError {}

/// A transport could not be opened.
#[derive(Debug)]
pub struct TransportError {
    message: String,
    source: Option<Box<dyn Error + Send + Sync>>,
}

impl TransportError {
    /// An error saying `message` (what failed, and what to do about it).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// An error saying `message`, caused by `source`.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn Error + Send + Sync>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for TransportError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}
