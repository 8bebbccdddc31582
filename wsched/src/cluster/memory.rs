//! The in-memory fabric: a [`Transport`] for several schedulers in one process, with
//! partitions and isolation on demand. For tests of distributed behaviour without a
//! broker; it keeps the guarantees the cluster layer asks of a transport (ordered
//! pipes, a key-value store with revisions).

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread;

use parking_lot::Mutex;

use crate::cluster::transport::{
    Done, FrameSink, KeyValue, KvEntry, KvError, Revision, Transport, TransportError,
};

/// A message broker in memory: every [`MemoryTransport`] made from one fabric
/// reaches the others. Each node receives on a thread of its own, in the order
/// frames were sent; a partition or an isolation drops frames as a network would.
///
/// ```
/// use wsched::cluster::{MemoryFabric, Transport};
///
/// let fabric = MemoryFabric::new();
/// let (a, b) = (fabric.transport(), fabric.transport());
/// # let _ = (a, b);
/// fabric.partition(&["a"], &["b"]); // a and b no longer hear each other
/// fabric.heal();
/// ```
#[derive(Clone, Default)]
pub struct MemoryFabric {
    inner: Arc<Fabric>,
}

#[derive(Default)]
struct Fabric {
    /// The open nodes: where their frames go.
    nodes: Mutex<HashMap<String, Sender<Vec<u8>>>>,
    /// Pairs of nodes that cannot hear each other (both orders are listed).
    cut: Mutex<HashSet<(String, String)>>,
    /// Nodes that hear nobody and nobody hears.
    isolated: Mutex<HashSet<String>>,
    kv: MemoryKv,
}

impl Fabric {
    fn reaches(&self, from: &str, to: &str) -> bool {
        let isolated = self.isolated.lock();
        if isolated.contains(from) || isolated.contains(to) {
            return false;
        }
        !self.cut.lock().contains(&(from.to_owned(), to.to_owned()))
    }
}

impl MemoryFabric {
    /// A fabric with no nodes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A transport on this fabric, for one node (give it to a scheduler's
    /// [`ClusterConfig`](super::ClusterConfig)).
    pub fn transport(&self) -> Arc<MemoryTransport> {
        Arc::new(MemoryTransport {
            fabric: self.inner.clone(),
            node: Mutex::new(None),
        })
    }

    /// From now on no frame crosses between a node of `side_a` and one of
    /// `side_b` (both ways), until [`heal`](Self::heal).
    pub fn partition(&self, side_a: &[&str], side_b: &[&str]) {
        let mut cut = self.inner.cut.lock();
        for a in side_a {
            for b in side_b {
                cut.insert(((*a).to_owned(), (*b).to_owned()));
                cut.insert(((*b).to_owned(), (*a).to_owned()));
            }
        }
    }

    /// From now on `node` hears nobody and nobody hears it (as if it froze, or its
    /// machine dropped off the network), until [`heal`](Self::heal).
    pub fn isolate(&self, node: &str) {
        self.inner.isolated.lock().insert(node.to_owned());
    }

    /// Ends every partition and isolation.
    pub fn heal(&self) {
        self.inner.cut.lock().clear();
        self.inner.isolated.lock().clear();
    }
}

/// One node's end of a [`MemoryFabric`].
pub struct MemoryTransport {
    fabric: Arc<Fabric>,
    /// The node's name, once opened.
    node: Mutex<Option<String>>,
}

impl MemoryTransport {
    fn me(&self) -> Option<String> {
        self.node.lock().clone()
    }
}

impl Transport for MemoryTransport {
    fn open(&self, node: &str, sink: Arc<dyn FrameSink>) -> Result<(), TransportError> {
        let mut me = self.node.lock();
        if me.is_some() {
            return Err(TransportError::new(
                "this transport is open already: make one per node",
            ));
        }
        let mut nodes = self.fabric.nodes.lock();
        if nodes.contains_key(node) {
            return Err(TransportError::new(format!(
                "a node named `{node}` is open on this fabric already: give each node its own name"
            )));
        }
        let (sender, frames) = mpsc::channel::<Vec<u8>>();
        thread::Builder::new()
            .name(format!("wsched-fabric-{node}"))
            .spawn(move || {
                // Ends when the sender is dropped (close), after the frames before it.
                for frame in frames {
                    sink.frame(&frame);
                }
            })
            .map_err(|e| TransportError::with_source("could not start the fabric's thread", e))?;
        nodes.insert(node.to_owned(), sender);
        *me = Some(node.to_owned());
        Ok(())
    }

    fn send(&self, to: &str, frame: Vec<u8>) {
        let Some(me) = self.me() else { return };
        if !self.fabric.reaches(&me, to) {
            return;
        }
        if let Some(node) = self.fabric.nodes.lock().get(to) {
            let _ = node.send(frame);
        }
    }

    fn broadcast(&self, frame: Vec<u8>) {
        let Some(me) = self.me() else { return };
        for (name, node) in self.fabric.nodes.lock().iter() {
            if *name != me && self.fabric.reaches(&me, name) {
                let _ = node.send(frame.clone());
            }
        }
    }

    fn kv(&self) -> &dyn KeyValue {
        &self.fabric.kv
    }

    fn close(&self) {
        if let Some(me) = self.node.lock().take() {
            self.fabric.nodes.lock().remove(&me);
        }
    }
}

impl Drop for MemoryTransport {
    fn drop(&mut self) {
        self.close();
    }
}

/// The fabric's key-value store: answers on the calling thread.
#[derive(Default)]
struct MemoryKv {
    state: Mutex<KvState>,
}

#[derive(Default)]
struct KvState {
    entries: HashMap<String, KvEntry>,
    last: Revision,
}

impl KvState {
    fn write(&mut self, key: &str, value: Vec<u8>) -> Revision {
        self.last += 1;
        let revision = self.last;
        self.entries
            .insert(key.to_owned(), KvEntry { value, revision });
        revision
    }
}

impl KeyValue for MemoryKv {
    fn get(&self, key: &str, done: Done<Option<KvEntry>>) {
        let entry = self.state.lock().entries.get(key).cloned();
        done(Ok(entry));
    }

    fn create(&self, key: &str, value: Vec<u8>, done: Done<Revision>) {
        let result = {
            let mut state = self.state.lock();
            if state.entries.contains_key(key) {
                Err(KvError::Conflict)
            } else {
                Ok(state.write(key, value))
            }
        };
        done(result);
    }

    fn update(&self, key: &str, value: Vec<u8>, revision: Revision, done: Done<Revision>) {
        let result = {
            let mut state = self.state.lock();
            match state.entries.get(key) {
                Some(entry) if entry.revision == revision => Ok(state.write(key, value)),
                _ => Err(KvError::Conflict),
            }
        };
        done(result);
    }

    fn delete(&self, key: &str, revision: Revision, done: Done<()>) {
        let result = {
            let mut state = self.state.lock();
            match state.entries.get(key) {
                None => Ok(()),
                Some(entry) if entry.revision == revision => {
                    state.entries.remove(key);
                    Ok(())
                }
                Some(_) => Err(KvError::Conflict),
            }
        };
        done(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_keeps_one_winner_and_refuses_stale_writes() {
        let fabric = MemoryFabric::new();
        let t = fabric.transport();
        let kv = t.kv();
        let result = |f: &dyn Fn(Done<Revision>)| {
            let (tx, rx) = mpsc::channel();
            f(Box::new(move |r| tx.send(r).unwrap()));
            rx.recv().unwrap()
        };
        let first = result(&|done| kv.create("k", b"1".to_vec(), done)).unwrap();
        assert_eq!(
            result(&|done| kv.create("k", b"2".to_vec(), done)),
            Err(KvError::Conflict)
        );
        let second = result(&|done| kv.update("k", b"3".to_vec(), first, done)).unwrap();
        assert!(second > first);
        assert_eq!(
            result(&|done| kv.update("k", b"4".to_vec(), first, done)),
            Err(KvError::Conflict)
        );
    }
}
