//! What a process asks of its cluster, as commands (`yield_cmd!`): names and
//! spawns wait for the key-value store or another node, so they run on the
//! blocking pool and complete the yield when the answer comes, never blocking a
//! worker. Threads use the blocking methods of [`Cluster`](super::Cluster).

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use crate::cluster::names::{self, NameError};
use crate::cluster::node::Node;
use crate::cluster::{Cluster, RemoteSpawnError};
use crate::engine::process::Command;
use crate::entry::Entry;
use crate::pid::Pid;
use crate::runtime::Builder;

/// Registers a process under a cluster-wide name, from a process:
/// `yield_cmd!(RegisterName::new("leader", this::pid()))?`. See
/// [`Cluster::register`].
#[derive(Clone, Debug)]
pub struct RegisterName {
    name: String,
    pid: Pid,
}

impl RegisterName {
    /// Registers `pid` (a process of this node) under `name`.
    pub fn new(name: impl Into<String>, pid: Pid) -> Self {
        Self {
            name: name.into(),
            pid,
        }
    }
}

impl Command for RegisterName {
    type Output = Result<(), NameError>;
}

/// Looks a cluster-wide name up, from a process:
/// `yield_cmd!(WhereIs::new("leader"))?`. See [`Cluster::whereis`].
#[derive(Clone, Debug)]
pub struct WhereIs {
    name: String,
}

impl WhereIs {
    /// Looks up `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

impl Command for WhereIs {
    type Output = Result<Option<Pid>, NameError>;
}

/// Spawns on the named node, waiting up to the timeout (the entry and its
/// arguments inside).
type SpawnFn = Box<dyn FnOnce(&Cluster, &str, Duration) -> Result<Pid, RemoteSpawnError> + Send>;

/// Spawns a process on another node, from a process:
/// `yield_cmd!(SpawnOn::new("b", Worker::RUN, (7,)))?`. See
/// [`Cluster::spawn_on`].
pub struct SpawnOn {
    node: String,
    /// The entry's key and its arguments' encoder (run where PIDs translate).
    spawn: SpawnFn,
    timeout: Duration,
}

impl SpawnOn {
    /// Spawns `entry` with `args` on node `node`, waiting up to 10 s for it.
    pub fn new<P: 'static, A>(node: impl Into<String>, entry: Entry<P, A>, args: A) -> Self
    where
        A: serde::Serialize + Send + 'static,
    {
        Self {
            node: node.into(),
            spawn: Box::new(move |cluster, node, timeout| {
                cluster.spawn_on(node, entry, args, timeout)
            }),
            timeout: Duration::from_secs(10),
        }
    }

    /// How long to wait for the node's answer.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl fmt::Debug for SpawnOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpawnOn")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Command for SpawnOn {
    type Output = Result<Pid, RemoteSpawnError>;
}

/// Where the commands' handlers find the node, once it has joined.
pub(crate) type NodeSlot = Arc<OnceLock<Weak<Node>>>;

fn cluster_of(slot: &NodeSlot) -> Option<Cluster> {
    slot.get()
        .and_then(Weak::upgrade)
        .map(|node| Cluster { node })
}

/// The store failed, as a name error: the node is gone.
fn gone() -> NameError {
    NameError::Store("this node has left its cluster".to_owned())
}

/// Registers the commands' handlers on `builder`.
pub(crate) fn register(builder: Builder, slot: &NodeSlot) -> Builder {
    let (a, b, c) = (slot.clone(), slot.clone(), slot.clone());
    builder
        .blocking_handler::<RegisterName, _>(move |cmd, done| {
            done.complete(match cluster_of(&a) {
                Some(cluster) => names::register(&cluster.node, &cmd.name, cmd.pid),
                None => Err(gone()),
            });
        })
        .blocking_handler::<WhereIs, _>(move |cmd, done| {
            done.complete(match cluster_of(&b) {
                Some(cluster) => names::whereis(&cluster.node, &cmd.name),
                None => Err(gone()),
            });
        })
        .blocking_handler::<SpawnOn, _>(move |cmd, done| {
            done.complete(match cluster_of(&c) {
                Some(cluster) => (cmd.spawn)(&cluster, &cmd.node, cmd.timeout),
                None => Err(RemoteSpawnError::NodeDown(cmd.node)),
            });
        })
}

/// A supervisor's child that runs on node `node`: spawned there by `entry` with a
/// clone of `args` at every start, then linked to the supervisor (see
/// [`Cluster::spawn_on_linked`]). Its supervisor restarts it as any child when it
/// ends — with [`ExitReason::NoConnection`](crate::ExitReason::NoConnection) when
/// its node goes down, and then on that node again once it is back: a start
/// while the node is down fails, and the supervisor's restart intensity decides.
///
/// The start waits for the node's answer (at most 10 s) inside the supervisor's
/// step, as Erlang's supervisors wait for `start_link`.
pub fn remote_child<P: 'static, A>(
    id: impl Into<String>,
    node: impl Into<String>,
    entry: Entry<P, A>,
    args: A,
) -> crate::supervisor::ChildSpec
where
    A: serde::Serialize + Clone + Send + 'static,
{
    let node = node.into();
    crate::supervisor::ChildSpec::with_start(id, entry.name(), move |ctx, _options| {
        let cluster = ctx
            .scheduler()
            .and_then(|handle| Cluster::of(&handle))
            .ok_or_else(|| {
                crate::error::SpawnError::Remote("this scheduler is in no cluster".into())
            })?;
        cluster
            .spawn_on_linked(
                &node,
                entry,
                args.clone(),
                Some(ctx.pid()),
                Duration::from_secs(10),
            )
            .map_err(|e| crate::error::SpawnError::Remote(e.to_string()))
    })
}
