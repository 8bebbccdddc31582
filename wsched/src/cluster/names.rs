//! Cluster-wide names, kept in the transport's key-value store.
//!
//! A name's key holds its holder's PID, written whole (`node#incarnation/number`).
//! Taking a name is a create that fails if the key has a value: the store's
//! revisions are the fence, so two nodes never both take one. A name is freed by
//! its holder's end (the node watches its holders through its own monitors) with a
//! delete conditional on the revision it wrote — so a name taken over since is
//! left alone. A holder whose node is down frees nothing; the next node to want
//! the name deletes the stale entry (conditionally, again) and takes it, and
//! lookups skip it.
//!
//! A node that takes a new incarnation (it was declared down and refused, and
//! rejoined) writes each name its processes hold again, with their new PIDs,
//! conditional on the revision it wrote: unless another node took the name while
//! the old incarnation was down, the name goes on naming the same process.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::cluster::codec;
use crate::cluster::node::Node;
use crate::cluster::store::{self, name_key};
use crate::cluster::transport::KvError;
use crate::cluster::ClusterError;
use crate::pid::Pid;

/// How long a name operation waits for the store.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);

/// A cluster-wide name could not be registered or looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// Another live process holds the name.
    Taken {
        /// The name.
        name: String,
        /// Its holder.
        holder: Pid,
    },
    /// Only a process of this node can be registered by it.
    NotLocal(Pid),
    /// The key-value store failed or did not answer (its text).
    Store(String),
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Taken { name, holder } => write!(
                f,
                "the cluster-wide name `{name}` is held by {holder}; unregister it there, or wait for it to end"
            ),
            Self::NotLocal(pid) => write!(
                f,
                "{pid} lives on another node: register a process under a cluster-wide name from its own node"
            ),
            Self::Store(why) => write!(f, "the cluster's key-value store failed: {why}"),
        }
    }
}

impl Error for NameError {}

fn store_error(error: ClusterError) -> NameError {
    NameError::Store(error.to_string())
}

/// The holder written in an entry, in this node's view; `None` if unreadable.
fn holder_of(node: &Node, value: &[u8]) -> Option<Pid> {
    let text = std::str::from_utf8(value).ok()?;
    codec::with_context(&node.me(), || codec::pid_from_text(text)).ok()
}

/// Whether `pid`'s node is up (or it is local and live).
fn holder_alive(node: &Node, pid: Pid) -> bool {
    if pid.is_local() {
        return node.shared().is_some_and(|shared| shared.is_live(pid));
    }
    crate::cluster::nodes::node_of_slot(pid.node_slot()).is_some_and(|id| {
        node.peer_by_name(id.name())
            .is_some_and(|peer| peer.id == id)
    })
}

pub(crate) fn register(node: &Node, name: &str, pid: Pid) -> Result<(), NameError> {
    if !pid.is_local() {
        return Err(NameError::NotLocal(pid));
    }
    let key = name_key(name);
    let kv = node.kv();
    let me = node.me();
    let value = codec::with_context(&me, || codec::pid_text(pid)).expect("a context is set");
    for _ in 0..8 {
        match store::wait(STORE_TIMEOUT, |done| {
            kv.create(&key, value.clone().into_bytes(), done)
        }) {
            Ok(revision) => {
                node.names_held().hold(node, pid, name.to_owned(), revision);
                return Ok(());
            }
            Err(ClusterError::Store(KvError::Conflict)) => {}
            Err(other) => return Err(store_error(other)),
        }
        let Some(entry) =
            store::wait(STORE_TIMEOUT, |done| kv.get(&key, done)).map_err(store_error)?
        else {
            continue;
        };
        match holder_of(node, &entry.value) {
            Some(holder) if holder_alive(node, holder) => {
                return Err(NameError::Taken {
                    name: name.to_owned(),
                    holder,
                })
            }
            // A stale holder: free it (if nobody did meanwhile) and try again.
            _ => match store::wait(STORE_TIMEOUT, |done| kv.delete(&key, entry.revision, done)) {
                Ok(()) | Err(ClusterError::Store(KvError::Conflict)) => {}
                Err(other) => return Err(store_error(other)),
            },
        }
    }
    Err(NameError::Store(format!(
        "the name `{name}` kept changing hands while this node tried to take it"
    )))
}

pub(crate) fn whereis(node: &Node, name: &str) -> Result<Option<Pid>, NameError> {
    let kv = node.kv();
    let key = name_key(name);
    let entry = store::wait(STORE_TIMEOUT, |done| kv.get(&key, done)).map_err(store_error)?;
    Ok(entry
        .and_then(|entry| holder_of(node, &entry.value))
        .filter(|pid| holder_alive(node, *pid)))
}

pub(crate) fn unregister(node: &Node, name: &str, pid: Pid) -> Result<bool, NameError> {
    let kv = node.kv();
    let key = name_key(name);
    let Some(entry) = store::wait(STORE_TIMEOUT, |done| kv.get(&key, done)).map_err(store_error)?
    else {
        return Ok(false);
    };
    if holder_of(node, &entry.value) != Some(pid) {
        return Ok(false);
    }
    match store::wait(STORE_TIMEOUT, |done| kv.delete(&key, entry.revision, done)) {
        Ok(()) => Ok(true),
        Err(ClusterError::Store(KvError::Conflict)) => Ok(false),
        Err(other) => Err(store_error(other)),
    }
}
