//! What the cluster keeps in the transport's key-value store: node incarnations
//! (`incarnation.<node>`) and cluster-wide names (`name.<hex of the name>`).

use std::sync::mpsc;
use std::time::Duration;

use crate::cluster::transport::{KeyValue, KvError};
use crate::cluster::ClusterError;

fn incarnation_key(node: &str) -> String {
    format!("incarnation.{node}")
}

/// The key of the cluster-wide name `name`: hex, since names may hold any
/// character and keys may not.
pub(crate) fn name_key(name: &str) -> String {
    let mut key = String::with_capacity(5 + name.len() * 2);
    key.push_str("name.");
    for byte in name.bytes() {
        key.push_str(&format!("{byte:02x}"));
    }
    key
}

/// Bumps `node`'s incarnation in the store (creating it at 1), retrying lost
/// races; calls `done` with the new one, or `None` if the store failed.
pub(crate) fn next_incarnation(kv: &dyn KeyValue, node: &str, done: impl FnOnce(Option<u64>)) {
    // Synchronously, on this thread: the store's callbacks may run anywhere.
    let result = take(kv, node, Duration::from_secs(10)).ok();
    done(result);
}

/// Takes the next incarnation of `node`, waiting at most `timeout` for the store.
pub(crate) fn take_incarnation(
    kv: &dyn KeyValue,
    node: &str,
    timeout: Duration,
) -> Result<u64, ClusterError> {
    take(kv, node, timeout)
}

fn take(kv: &dyn KeyValue, node: &str, timeout: Duration) -> Result<u64, ClusterError> {
    let key = incarnation_key(node);
    // A lost race means another start of the same name wrote meanwhile: read again.
    for _ in 0..64 {
        let current = wait(timeout, |done| kv.get(&key, done))?;
        let written = match &current {
            None => wait(timeout, |done| kv.create(&key, b"1".to_vec(), done)).map(|_| 1),
            Some(entry) => {
                let last: u64 = std::str::from_utf8(&entry.value)
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .unwrap_or(0);
                let next = last + 1;
                wait(timeout, |done| {
                    kv.update(&key, next.to_string().into_bytes(), entry.revision, done)
                })
                .map(|_| next)
            }
        };
        match written {
            Ok(incarnation) => return Ok(incarnation),
            Err(ClusterError::Store(KvError::Conflict)) => continue,
            Err(other) => return Err(other),
        }
    }
    Err(ClusterError::Store(KvError::Unavailable(format!(
        "the incarnation of `{node}` kept changing under this node: are many nodes starting under that name?"
    ))))
}

/// Runs a store operation and waits for its answer.
pub(crate) fn wait<T: Send + 'static>(
    timeout: Duration,
    operation: impl FnOnce(Box<dyn FnOnce(Result<T, KvError>) + Send>),
) -> Result<T, ClusterError> {
    let (sender, answer) = mpsc::channel();
    operation(Box::new(move |result| {
        let _ = sender.send(result);
    }));
    match answer.recv_timeout(timeout) {
        Ok(result) => result.map_err(ClusterError::Store),
        Err(_) => Err(ClusterError::Store(KvError::Unavailable(format!(
            "no answer from the key-value store within {timeout:?}"
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::memory::MemoryFabric;
    use crate::cluster::transport::Transport;

    #[test]
    fn each_start_of_a_node_takes_a_larger_incarnation() {
        let fabric = MemoryFabric::new();
        let t = fabric.transport();
        let first = take_incarnation(t.kv(), "a", Duration::from_secs(1)).unwrap();
        let second = take_incarnation(t.kv(), "a", Duration::from_secs(1)).unwrap();
        assert_eq!((first, second), (1, 2));
        assert_eq!(
            take_incarnation(t.kv(), "b", Duration::from_secs(1)).unwrap(),
            1
        );
        assert_eq!(name_key("a b"), "name.612062");
    }
}
