//! Processes on several nodes (the `cluster` feature): remote PIDs, sends, calls,
//! monitors, links, cluster-wide names and spawns, and node failure as Erlang
//! reports it.
//!
//! May use: `macro_support`, `supervisor`, `runtime`, `services`, `observe`, `engine`, the crate root.
//!
//! A scheduler joins a cluster when it is built with a [`ClusterConfig`] (a node
//! name and a [`Transport`]: [`MemoryFabric`] in one process, `NatsTransport` with
//! the `nats` feature). From then on a PID may name a process on another node, and
//! every API that takes a PID takes it: `send`, `call!`, `monitor`, `link`,
//! `cancel`, `kill`.
//!
//! # What is guaranteed
//!
//! * **Order, at most once.** Messages (and calls, `Down`s, link signals) from one
//!   node to another travel on one ordered stream: from one process to another they
//!   arrive in the order sent, each at most once. A `Down` never overtakes the last
//!   message of the process it reports.
//! * **No silent loss.** Every frame is numbered; a receiver that sees a gap (a
//!   frame lost in the broker, e.g. across a broker restart) declares the sender
//!   down, so every monitor and link between the two fires with
//!   [`ExitReason::NoConnection`](crate::ExitReason::NoConnection): a message can be
//!   lost only together with such a signal, as in Erlang.
//! * **Failure detection.** A peer silent for [`ClusterConfig::silence`] (2 s by
//!   default) while this node is connected to the broker is declared down. A
//!   declared-down incarnation is refused for ever: if it was only slow (a pause, a
//!   partition), it learns it was refused and takes a new incarnation — the same
//!   node name, new PIDs; a PID of its old incarnation stays refused
//!   ([`SendErrorKind::NoConnection`](crate::SendErrorKind::NoConnection)).
//! * **Partitions.** Each side declares the other down; when the partition heals,
//!   the nodes meet again, at least one of them as a new incarnation. Names:
//!   - *Cluster-wide names* live in the broker's key-value store. To a node, a name
//!     whose holder's node it sees down resolves to nothing
//!     ([`Cluster::whereis`] gives `None`) and is free to be taken, with a fence
//!     (the store's revision), so two nodes never both hold it. A node that takes
//!     a new incarnation writes its processes' names again under their new PIDs
//!     (unless another node took one meanwhile: then that one keeps it).
//!   - *Local names* ([`Handle::register`](crate::Handle::register)) belong to one
//!     scheduler and are untouched by the cluster.
//! * **A remote send is asynchronous.** It returns `Ok` once the message is on its
//!   way; it fails at once only when the target's node is not up (or the PID is of
//!   an old incarnation), or the message's type has no codec
//!   ([`SendErrorKind::NotEncodable`](crate::SendErrorKind::NotEncodable)), with the
//!   message handed back. A message that arrives for a process that has ended is a
//!   dead letter on the receiving node
//!   ([`DeadLetterReason::FromAnotherNode`](crate::DeadLetterReason::FromAnotherNode)),
//!   and so is one whose codec the receiving node lacks (as an [`Undecodable`],
//!   with its codec's name and text).
//!
//! | file | concern |
//! |---|---|
//! | `transport.rs` | the seam under the cluster: ordered pipes and a key-value store |
//! | `memory.rs` | the in-memory fabric, with partitions and isolation |
//! | `nodes.rs` | node identities and their slots in PIDs |
//! | `wire.rs` | frames and their bytes |
//! | `codec.rs` | messages' codecs, and PIDs inside messages |
//! | `node.rs` | membership, streams, failure detection, what arrives |
//! | `calls.rs` | calls to remote processes |
//! | `spawn.rs` | spawning on another node by typed entry |
//! | `store.rs` | incarnations and names in the key-value store |
//! | `names.rs` | cluster-wide names |
//! | `commands.rs` | names and spawns from processes, as commands; supervisors' remote children |
//! | `nats.rs` | the NATS transport (the `nats` feature) |

mod calls;
mod codec;
mod commands;
mod memory;
mod names;
#[cfg(feature = "nats")]
mod nats;
mod node;
pub(crate) mod nodes;
mod spawn;
mod store;
mod transport;
mod wire;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::handle::Handle;
use crate::engine::process::IntoProcess;
use crate::engine::shared::Shared;
use crate::entry::Entry;
use crate::observe::codecs::Codecs;
use crate::payload::IntoPayloads;
use crate::pid::Pid;
use crate::services::remote::RemoteNodes;

pub use crate::observe::metrics::{ClusterMetrics, PeerMetrics};
pub use commands::{remote_child, RegisterName, SpawnOn, WhereIs};
pub use memory::{MemoryFabric, MemoryTransport};
pub use names::NameError;
#[cfg(feature = "nats")]
pub use nats::{NatsOptions, NatsTransport};
pub use nodes::NodeId;
pub use transport::{
    Done, FrameSink, KeyValue, KvEntry, KvError, Revision, Transport, TransportError,
};

use node::{Node, Timing};

/// Tells the crate root how remote PIDs print and cross (see `pid.rs`).
fn install_remote_pids() {
    let _ = crate::pid::REMOTE_PIDS.set(crate::pid::RemotePids {
        node_of: |slot| {
            nodes::node_of_slot(slot).map(|node| (node.name_arc().clone(), node.incarnation()))
        },
        to_text: codec::pid_text,
        from_text: codec::pid_from_text,
    });
}

impl crate::Builder {
    /// Joins a cluster once built (the `cluster` feature): the scheduler becomes
    /// node `config`'s name, and PIDs of processes on other nodes work wherever a
    /// PID does (see [`wsched::cluster`](crate::cluster)). `build` fails with
    /// [`BuildError::Join`](crate::BuildError::Join) if the transport or its
    /// key-value store cannot be reached.
    ///
    /// Also registers the handlers of the cluster's commands ([`RegisterName`],
    /// [`WhereIs`], [`SpawnOn`]), on the blocking pool.
    pub fn cluster(self, config: ClusterConfig) -> Self {
        let slot = commands::NodeSlot::default();
        let builder = commands::register(self, &slot);
        builder.on_build(Box::new(move |shared| {
            let node = config
                .join(shared)
                .map_err(|e| Box::new(e) as Box<dyn Error + Send + Sync>)?;
            let _ = slot.set(Arc::downgrade(&node));
            Ok(())
        }))
    }
}

/// How a scheduler joins a cluster: its node name, its transport, and what may
/// cross. Given to [`Builder::cluster`](crate::Builder::cluster).
///
/// ```
/// use std::time::Duration;
/// use wsched::cluster::{ClusterConfig, MemoryFabric};
/// use wsched::Scheduler;
///
/// let fabric = MemoryFabric::new();
/// let a = Scheduler::builder()
///     .workers(1)
///     .cluster(ClusterConfig::new("a", fabric.transport()).register::<String>("String"))
///     .build()?;
/// # a.shutdown(Duration::from_secs(5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ClusterConfig {
    name: String,
    transport: Arc<dyn Transport>,
    silence: Duration,
    heartbeat: Option<Duration>,
    join_timeout: Duration,
    max_queued_frames: usize,
    codecs: Codecs,
    calls: HashMap<TypeId, calls::CallType>,
    spawns: spawn::Spawns,
}

impl ClusterConfig {
    /// Joins as node `name` (unique in the cluster) over `transport`. Knows the
    /// standard codecs (`()`, `bool`, integers, `char`, `String`, [`Pid`],
    /// `Duration`; not `&'static str`, which could only be decoded by leaking);
    /// register the application's message types with [`register`](Self::register).
    pub fn new(name: &str, transport: Arc<dyn Transport>) -> Self {
        Self {
            name: name.to_owned(),
            transport,
            silence: Duration::from_secs(2),
            heartbeat: None,
            join_timeout: Duration::from_secs(10),
            max_queued_frames: 1 << 19,
            codecs: Codecs::new(),
            calls: HashMap::new(),
            spawns: spawn::Spawns::default(),
        }
    }

    /// How long a peer may stay silent before it is declared down (default 2 s).
    /// Heartbeats go out four times in that time unless set with
    /// [`heartbeat`](Self::heartbeat).
    pub fn silence(mut self, silence: Duration) -> Self {
        self.silence = silence;
        self
    }

    /// How often this node tells its peers it is alive (default: a quarter of the
    /// silence).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = Some(every);
        self
    }

    /// How many frames may wait in the transport to leave for the broker before a
    /// send of a message to a remote process fails with
    /// [`SendErrorKind::NodeBusy`](crate::SendErrorKind::NodeBusy), the message
    /// handed back (default 524,288): a burst then meets backpressure instead of
    /// overflowing the transport, whose overflow loses frames (and so the
    /// connection). Signals (`Down`s, link signals) and heartbeats are never
    /// refused.
    pub fn max_queued_frames(mut self, frames: usize) -> Self {
        self.max_queued_frames = frames;
        self
    }

    /// How long joining waits for the key-value store (default 10 s).
    pub fn join_timeout(mut self, timeout: Duration) -> Self {
        self.join_timeout = timeout;
        self
    }

    /// Lets messages of type `T` cross nodes, as JSON through `serde`, under the
    /// stable name `name` — the same on every node. Sending a message of a type
    /// without a codec to a remote PID fails at once with
    /// [`SendErrorKind::NotEncodable`](crate::SendErrorKind::NotEncodable), the
    /// message handed back.
    ///
    /// # Panics
    /// If `name` already names another type's codec.
    #[track_caller]
    pub fn register<T>(mut self, name: &str) -> Self
    where
        T: serde::Serialize + serde::de::DeserializeOwned + Any + Send,
    {
        self.codecs.register::<T>(name);
        self
    }

    /// Replaces the codecs wholesale (e.g. the ones a history recorder uses, with
    /// codecs written by hand through [`Codecs::register_with`]).
    pub fn codecs(mut self, codecs: Codecs) -> Self {
        self.codecs = codecs;
        self
    }

    /// Lets calls with request `Q` and answer `R` (`Request<Q, R>`) cross nodes.
    /// `Q` and `R` need codecs of their own ([`register`](Self::register), or the
    /// standard ones); register the pair on every node.
    pub fn register_call<Q, R>(mut self) -> Self
    where
        Q: Any + Send,
        R: Any + Send,
    {
        let name = format!(
            "{}->{}",
            crate::type_name::Short(std::any::type_name::<Q>()),
            crate::type_name::Short(std::any::type_name::<R>())
        );
        let (type_id, call_type) = calls::CallType::of::<Q, R>(name);
        self.calls.insert(type_id, call_type);
        self
    }

    /// Lets other nodes spawn `entry` of processes made by `make` here
    /// ([`Cluster::spawn_on`]); its arguments cross as JSON through `serde`.
    pub fn spawnable<P, A>(
        mut self,
        entry: Entry<P, A>,
        make: impl Fn() -> P + Send + Sync + 'static,
    ) -> Self
    where
        P: IntoProcess + 'static,
        A: IntoPayloads + serde::de::DeserializeOwned + 'static,
    {
        self.spawns.register(entry, make);
        self
    }

    pub(crate) fn join(self, shared: &Arc<Shared>) -> Result<Arc<Node>, ClusterError> {
        install_remote_pids();
        for call in self.calls.values() {
            if let Some(missing) = call.missing_codec(&self.codecs) {
                return Err(ClusterError::Codec(format!(
                    "`register_call` for `{}` needs a codec for `{missing}`: register it with \
                     `ClusterConfig::register::<{}>(name)` on every node",
                    call.name,
                    crate::type_name::Short(missing)
                )));
            }
        }
        if self.name.is_empty() || self.name.contains(['.', ' ', '*', '>', '#', '/']) {
            return Err(ClusterError::BadName(self.name));
        }
        let heartbeat = self
            .heartbeat
            .unwrap_or(self.silence / 4)
            .max(Duration::from_millis(1));
        let node = Node::join(
            shared,
            &self.name,
            self.transport,
            Timing {
                silence: self.silence,
                heartbeat,
                max_queued_frames: self.max_queued_frames,
            },
            self.codecs,
            self.spawns,
            calls::Calls::new(self.calls),
            self.join_timeout,
        )?;
        shared
            .part::<crate::services::remote::Remote>()
            .set(node.clone() as Arc<dyn RemoteNodes>);
        Ok(node)
    }
}

impl fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("name", &self.name)
            .field("silence", &self.silence)
            .field("codecs", &self.codecs)
            .finish_non_exhaustive()
    }
}

/// A scheduler's node in its cluster: who is up, metrics, names and spawns. Got
/// from a handle with [`Cluster::of`], or from a process with
/// [`Cluster::current`].
#[derive(Clone)]
pub struct Cluster {
    node: Arc<Node>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("me", &self.me())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// The cluster of the scheduler behind `handle`, if it joined one.
    pub fn of(handle: &Handle) -> Option<Cluster> {
        Self::of_shared(handle.shared())
    }

    fn of_shared(shared: &Shared) -> Option<Cluster> {
        let any = shared.part::<crate::services::remote::Remote>().any()?;
        let node = any.downcast::<Node>().ok()?;
        Some(Cluster { node })
    }

    /// The cluster of the scheduler the calling process runs on.
    ///
    /// # Panics
    /// Outside a process's step (or in the testing harness).
    pub fn current() -> Option<Cluster> {
        crate::__private::io::with_context("wsched::cluster::Cluster::current()", |ctx| {
            ctx.scheduler().and_then(|handle| Self::of(&handle))
        })
    }

    /// This node's identity (its incarnation changes if the cluster declared it
    /// down and it rejoined).
    pub fn me(&self) -> NodeId {
        self.node.me()
    }

    /// The peers up now.
    pub fn nodes(&self) -> Vec<NodeId> {
        self.node.peers()
    }

    /// Sends `pid` a [`NodeEvent`] each time a node comes up or goes down.
    pub fn watch_nodes(&self, pid: Pid) {
        self.node.watch_nodes(pid);
    }

    /// Sends `pid` one [`NodeEvent::Down`] when the node named `node` goes down —
    /// at once (reason [`NodeDownReason::NotUp`]) if it is not up now. Erlang's
    /// `monitor_node`.
    pub fn monitor_node(&self, pid: Pid, node: &str) {
        self.node.monitor_node(pid, node);
    }

    /// Per peer: messages and bytes in and out, round trip, last heard; and the
    /// frames queued in the transport.
    pub fn metrics(&self) -> ClusterMetrics {
        self.node.cluster_metrics()
    }

    /// Registers `pid` under the cluster-wide `name`: exactly one process in the
    /// cluster holds a name. Freed when the process ends; a name whose holder's
    /// node is down may be taken. Blocks until the key-value store answers.
    ///
    /// # Errors
    /// [`NameError::Taken`] with the holder, or the store's failure.
    pub fn register(&self, name: &str, pid: Pid) -> Result<(), NameError> {
        names::register(&self.node, name, pid)
    }

    /// The process registered under the cluster-wide `name`, if any (and its node
    /// is not known to be down). Blocks until the key-value store answers.
    ///
    /// # Errors
    /// The store's failure.
    pub fn whereis(&self, name: &str) -> Result<Option<Pid>, NameError> {
        names::whereis(&self.node, name)
    }

    /// Frees the cluster-wide `name` if `pid` holds it; whether it did.
    ///
    /// # Errors
    /// The store's failure.
    pub fn unregister(&self, name: &str, pid: Pid) -> Result<bool, NameError> {
        names::unregister(&self.node, name, pid)
    }

    /// Spawns a process of `entry` on node `node` (which must offer it:
    /// [`ClusterConfig::spawnable`]), with `args`; its PID. Blocks until the node
    /// answers, at most `timeout`.
    ///
    /// # Errors
    /// [`RemoteSpawnError`]: the node is not up, does not offer the entry, the
    /// arguments cannot cross, or no answer came in time.
    pub fn spawn_on<P, A>(
        &self,
        node: &str,
        entry: Entry<P, A>,
        args: A,
        timeout: Duration,
    ) -> Result<Pid, RemoteSpawnError>
    where
        A: serde::Serialize,
    {
        self.spawn_on_linked(node, entry, args, None, timeout)
    }

    /// [`spawn_on`](Self::spawn_on), then links the new process to `link` (a
    /// process of this node) — what a supervisor of remote children needs. As in
    /// Erlang's `spawn` then `link`: a child that ends before the link is made
    /// signals `link` with "no such process".
    ///
    /// # Errors
    /// As [`spawn_on`](Self::spawn_on).
    pub fn spawn_on_linked<P, A>(
        &self,
        node: &str,
        entry: Entry<P, A>,
        args: A,
        link: Option<Pid>,
        timeout: Duration,
    ) -> Result<Pid, RemoteSpawnError>
    where
        A: serde::Serialize,
    {
        let peer = self
            .node
            .peer_by_name(node)
            .ok_or_else(|| RemoteSpawnError::NodeDown(node.to_owned()))?;
        let me = self.node.me();
        let args = codec::with_context(&me, || serde_json::to_string(&args))
            .map_err(|e| RemoteSpawnError::Encode(e.to_string()))?;
        let answer = spawn::ask(&self.node, &peer, spawn::entry_key(entry), args);
        let pid = answer
            .recv_timeout(timeout)
            .map_err(|_| RemoteSpawnError::Timeout(timeout))??;
        if let Some(link) = link {
            // Linked as any local process links to a remote one: if the child ended
            // already, the link signals `link` at once (no such process).
            let shared = self.node_shared()?;
            shared.monitors().link(&shared, link, pid);
        }
        Ok(pid)
    }

    fn node_shared(&self) -> Result<Arc<Shared>, RemoteSpawnError> {
        self.node
            .shared()
            .ok_or_else(|| RemoteSpawnError::NodeDown(self.node.name().to_owned()))
    }
}

/// A node came up or went down (see [`Cluster::watch_nodes`],
/// [`Cluster::monitor_node`]). Received like any message: `recv!(NodeEvent)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeEvent {
    /// The node is up (a new incarnation, if it was up before).
    Up(NodeId),
    /// The node is down, and why. Every monitor and link on its processes has
    /// fired with `NoConnection`.
    Down(NodeId, NodeDownReason),
}

/// Why a node was declared down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeDownReason {
    /// Nothing came from it for longer than the silence allowed.
    Silent,
    /// A frame from it was lost (a gap in its stream).
    LostFrames,
    /// A newer incarnation of it appeared: it restarted.
    Restarted,
    /// It left (its scheduler shut down).
    Left,
    /// It refused this node's incarnation, which rejoined as a new one: every peer
    /// of the old incarnation is down to it.
    Refused,
    /// It was not up when it was monitored.
    NotUp,
}

impl fmt::Display for NodeDownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Silent => "it was silent for longer than the cluster's silence allows",
            Self::LostFrames => "a frame from it was lost",
            Self::Restarted => "a newer incarnation of it appeared",
            Self::Left => "it left the cluster",
            Self::Refused => {
                "this node was declared down by a peer and rejoined as a new incarnation"
            }
            Self::NotUp => "it was not up",
        })
    }
}

/// Joining a cluster failed (see [`Builder::cluster`](crate::Builder::cluster)).
#[derive(Debug)]
#[non_exhaustive]
pub enum ClusterError {
    /// The node name is empty or holds `.`, ` `, `*`, `>`, `#` or `/`.
    BadName(String),
    /// The transport could not be opened.
    Transport(Box<TransportError>),
    /// The key-value store failed or did not answer.
    Store(KvError),
    /// The failure detector's thread could not be started.
    Thread(std::io::Error),
    /// The configuration is incomplete: a call type whose request or answer has
    /// no codec (the text says which, and what to register).
    Codec(String),
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadName(name) => write!(
                f,
                "`{name}` cannot name a node: use a non-empty name without `.`, spaces, `*`, `>`, `#` or `/`"
            ),
            Self::Transport(e) => write!(f, "could not open the cluster's transport: {e}"),
            Self::Store(e) => write!(f, "could not take an incarnation: {e}"),
            Self::Thread(e) => write!(f, "could not start the cluster's thread: {e}"),
            Self::Codec(why) => f.write_str(why),
        }
    }
}

impl Error for ClusterError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Transport(e) => Some(&**e),
            Self::Store(e) => Some(e),
            Self::Thread(e) => Some(e),
            Self::BadName(_) | Self::Codec(_) => None,
        }
    }
}

/// A message from another node that this node could not decode (its type has no
/// codec here, or the text did not decode): handed to the dead letters
/// ([`DeadLetterReason::FromAnotherNode`](crate::DeadLetterReason::FromAnotherNode))
/// as it came, so nothing is lost without a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Undecodable {
    /// The name of the codec the sender used.
    pub codec: String,
    /// The text it made.
    pub text: String,
    /// Why it did not decode here.
    pub why: String,
}

/// Spawning on another node failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteSpawnError {
    /// The node (named) is not up.
    NodeDown(String),
    /// The node refused: it does not offer the entry, the arguments did not decode
    /// there, or its spawn failed (the text says which).
    Refused(String),
    /// The arguments could not be encoded.
    Encode(String),
    /// No answer came in time.
    Timeout(Duration),
}

impl fmt::Display for RemoteSpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NodeDown(node) => write!(f, "cannot spawn on `{node}`: it is not up"),
            Self::Refused(why) => write!(f, "the node refused the spawn: {why}"),
            Self::Encode(why) => write!(f, "the entry's arguments could not be encoded: {why}"),
            Self::Timeout(t) => write!(f, "no answer to the spawn within {t:?}"),
        }
    }
}

impl Error for RemoteSpawnError {}
