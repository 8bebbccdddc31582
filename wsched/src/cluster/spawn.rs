//! Spawning a process on another node, by typed entry.
//!
//! The node that runs it lists what it may be asked to spawn
//! ([`ClusterConfig::spawnable`](super::ClusterConfig::spawnable)): an entry of a
//! process type, a function that makes the process, and the entry's arguments'
//! codec (`serde`, as JSON). The asking node sends the arguments' text in a `Spawn`
//! frame and waits for `Spawned`, with the new process's PID or why not.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cluster::node::{Node, Peer};
use crate::cluster::nodes::NodeId;
use crate::cluster::wire::Body;
use crate::cluster::RemoteSpawnError;
use crate::engine::process::IntoProcess;
use crate::engine::shared::Shared;
use crate::entry::Entry;
use crate::payload::IntoPayloads;
use crate::pid::Pid;

/// Spawns one registered entry from its arguments' text.
type SpawnFn = dyn Fn(&Arc<Shared>, &NodeId, &str) -> Result<Pid, String> + Send + Sync;

/// Where the answer to one spawn goes, and the node asked.
type Waiting = (NodeId, mpsc::Sender<Result<Pid, RemoteSpawnError>>);

/// The key an entry is registered and asked for under.
pub(crate) fn entry_key<P, A>(entry: Entry<P, A>) -> String {
    format!(
        "{}::{}",
        crate::type_name::Short(std::any::type_name::<P>()),
        entry.name()
    )
}

/// What this node may be asked to spawn, and the spawns it waits on.
#[derive(Default)]
pub(crate) struct Spawns {
    entries: HashMap<String, Arc<SpawnFn>>,
    waiting: Mutex<HashMap<u64, Waiting>>,
}

impl Spawns {
    /// Lets other nodes spawn `entry` of processes made by `make`.
    pub(crate) fn register<P, A>(
        &mut self,
        entry: Entry<P, A>,
        make: impl Fn() -> P + Send + Sync + 'static,
    ) where
        P: IntoProcess + 'static,
        A: IntoPayloads + serde::de::DeserializeOwned + 'static,
    {
        let name = entry.name();
        let spawn = move |shared: &Arc<Shared>, me: &NodeId, text: &str| {
            let args: A = super::codec::with_context(me, || serde_json::from_str(text))
                .map_err(|e| format!("its arguments did not decode: {e}"))?;
            let handle = crate::engine::handle::Handle::from_shared(shared.clone());
            let pid = handle
                .spawn_detached(make(), name, args)
                .map_err(|e| e.to_string())?;
            Ok(pid)
        };
        self.entries.insert(entry_key(entry), Arc::new(spawn));
    }

    /// The answer to spawn `id` came back.
    pub(crate) fn answer(&self, id: u64, result: Result<Pid, String>) {
        if let Some((_, sender)) = self.waiting.lock().remove(&id) {
            let _ = sender.send(result.map_err(RemoteSpawnError::Refused));
        }
    }

    /// Node `node` is down: its spawns fail.
    pub(crate) fn node_down(&self, node: &NodeId) {
        self.waiting.lock().retain(|_, (on, sender)| {
            if on == node {
                let _ = sender.send(Err(RemoteSpawnError::NodeDown(node.name().to_owned())));
                false
            } else {
                true
            }
        });
    }
}

/// Asks `peer` to spawn the entry `key` with `args`; the answer comes on the
/// returned receiver.
pub(crate) fn ask(
    node: &Node,
    peer: &Peer,
    key: String,
    args: String,
) -> mpsc::Receiver<Result<Pid, RemoteSpawnError>> {
    let (sender, answer) = mpsc::channel();
    let id = node.next_id();
    node.spawns
        .waiting
        .lock()
        .insert(id, (peer.id.clone(), sender));
    node.send_to(
        peer,
        &Body::Spawn {
            id,
            entry: key,
            args,
        },
    );
    answer
}

/// A spawn request from another node arrived.
#[allow(clippy::too_many_arguments)]
pub(crate) fn incoming(
    node: &Node,
    shared: &Arc<Shared>,
    peer: &Peer,
    me: &NodeId,
    id: u64,
    entry: &str,
    args: &str,
) {
    let result = match node.spawns.entries.get(entry) {
        Some(spawn) => spawn(shared, me, args),
        None => Err(format!(
            "node `{}` does not offer `{entry}`: register it there with ClusterConfig::spawnable",
            me.name()
        )),
    };
    node.send_to(peer, &Body::Spawned { id, result });
}
