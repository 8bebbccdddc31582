//! One scheduler's membership of a cluster: its identity, its peers, the ordered
//! streams to them, failure detection, and what arrives from them.
//!
//! # Streams and failure
//!
//! Every frame to a peer carries the next number of this node's stream to it
//! (`Peer::out`), assigned and handed to the transport under the peer's lock, so
//! the transport's order is the stream's. The receiver expects each number once,
//! in order: a gap means a frame was lost, and the peer is declared down at once
//! (a later frame must not be delivered over a lost one — a `Down` could overtake
//! the message before it). Heartbeats travel on the same stream, so silence and
//! loss are both seen.
//!
//! A peer is declared down after `silence` without a frame from it (counted only
//! while this node is connected to the broker), after a gap, when a newer
//! incarnation of it appears, or when it leaves. Declaring it down refuses its
//! incarnation forever: every monitor and link on its processes fires with
//! [`ExitReason::NoConnection`], its monitors and links on ours are dropped, and a
//! frame it sends later is answered with a refusal — on which it takes a new
//! incarnation (see [`Node::renew`]), so both sides agree it is a new node.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::cluster::codec;
use crate::cluster::nodes::{self, NodeId};
use crate::cluster::transport::{FrameSink, KvError, Transport};
use crate::cluster::wire::{self, Body, Header, PidView};
use crate::cluster::{ClusterError, ClusterMetrics, NodeDownReason, NodeEvent, PeerMetrics};
use crate::engine::shared::Shared;
use crate::error::{CancelError, SendError, SendErrorKind};
use crate::exit::ExitReason;
use crate::observe::codecs::Codecs;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::services::monitors::{Down, MonitorRef};
use crate::services::remote::RemoteNodes;

/// A cluster event for `tracing` subscribers (the `tracing` feature; nothing
/// without it), under the target `wsched::cluster`.
macro_rules! cluster_event {
    ($level:ident, $($arg:tt)*) => {
        #[cfg(feature = "tracing")]
        tracing::$level!(target: "wsched::cluster", $($arg)*);
    };
}

/// How a node is tuned (see [`ClusterConfig`](super::ClusterConfig)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    pub(crate) silence: Duration,
    pub(crate) heartbeat: Duration,
    /// Frames waiting in the transport past which user messages are refused.
    pub(crate) max_queued_frames: usize,
}

/// One peer incarnation that is up.
pub(crate) struct Peer {
    pub(crate) id: NodeId,
    /// Its slot in PIDs (see `nodes.rs`).
    pub(crate) slot: u16,
    /// The number of the last frame sent to it; the lock orders sends.
    out: Mutex<u64>,
    /// The number of the last frame received from it.
    received: Mutex<u64>,
    /// When a frame from it last arrived, in milliseconds since the node started.
    last_heard: AtomicU64,
    messages_out: AtomicU64,
    bytes_out: AtomicU64,
    messages_in: AtomicU64,
    bytes_in: AtomicU64,
    /// The latest heartbeat round trip, in microseconds (0: none yet).
    round_trip_us: AtomicU64,
    /// When the heartbeat whose echo measures the round trip went out.
    ping_sent: Mutex<Option<(u64, Instant)>>,
}

/// Who is told of peers coming and going.
enum NodeWatch {
    /// Every `NodeUp` and `NodeDown`, to a process.
    All(Pid),
    /// One `NodeDown` of the node named so, to a process (`monitor_node`).
    Once(Pid, Arc<str>),
}

pub(crate) struct Node {
    /// Itself, for what outlives a call (a forwarded reply).
    this: Weak<Node>,
    name: Arc<str>,
    me: RwLock<NodeId>,
    transport: Arc<dyn Transport>,
    shared: Weak<Shared>,
    timing: Timing,
    pub(crate) codecs: Codecs,
    started: Instant,
    /// Up peers by name, and by slot (the send path's lookup).
    peers: RwLock<HashMap<Arc<str>, Arc<Peer>>>,
    by_slot: RwLock<HashMap<u16, Arc<Peer>>>,
    /// Incarnations declared down: their frames are refused.
    down: Mutex<HashSet<NodeId>>,
    watchers: Mutex<Vec<NodeWatch>>,
    connected: AtomicBool,
    closed: AtomicBool,
    renewing: AtomicBool,
    /// Wakes the detector early (to stop).
    wake: (Mutex<()>, Condvar),
    next_id: AtomicU64,
    /// Messages from other nodes that could not be decoded (no codec here, or bad
    /// text): counted, and dropped.
    undecodable: AtomicU64,
    pub(crate) calls: super::calls::Calls,
    pub(crate) spawns: super::spawn::Spawns,
    held: NamesHeld,
}

/// The cluster-wide names this node's processes hold, by the number of the
/// monitor the node keeps on each holder (its `Down` frees the name): the holder,
/// the name, and the revision this node wrote it at.
#[derive(Default)]
pub(crate) struct NamesHeld {
    by_monitor: Mutex<HashMap<u64, (Pid, String, super::transport::Revision)>>,
}

/// How long a renewal waits for the store to write one held name again.
const RENAME_TIMEOUT: Duration = Duration::from_secs(5);

impl NamesHeld {
    /// `pid` took `name` at `revision`: watch it, to free the name when it ends.
    pub(crate) fn hold(
        &self,
        node: &Node,
        pid: Pid,
        name: String,
        revision: super::transport::Revision,
    ) {
        let Some(shared) = node.shared() else { return };
        let id = node.next_id();
        self.by_monitor.lock().insert(id, (pid, name, revision));
        // Slot 0: this node itself; its `Down` comes back through `RemoteNodes::down`.
        shared.monitors().monitor_for_node(&shared, pid, 0, id);
    }

    /// The holder watched by monitor `id` ended: frees its name, unless it changed
    /// hands meanwhile (the revision is the fence). Does not wait for the store.
    fn release(&self, node: &Node, id: u64) {
        let Some((_, name, revision)) = self.by_monitor.lock().remove(&id) else {
            return;
        };
        node.kv()
            .delete(&super::store::name_key(&name), revision, Box::new(|_| {}));
    }

    /// The node took a new incarnation: its holders' PIDs are new to the cluster,
    /// and the names still name their PIDs of the old, refused incarnation. Writes
    /// each name again with its holder's new PID, conditional on the revision this
    /// node wrote it at: a name another node took meanwhile (free to take, since
    /// its holder's node was down) stays theirs, and is no longer held here. Waits
    /// for the store, a bounded time for each name.
    fn renew(&self, node: &Node) {
        let me = node.me();
        let held: Vec<(u64, Pid, String, super::transport::Revision)> = self
            .by_monitor
            .lock()
            .iter()
            .map(|(id, (pid, name, revision))| (*id, *pid, name.clone(), *revision))
            .collect();
        for (id, pid, name, revision) in held {
            let Some(text) = codec::with_context(&me, || codec::pid_text(pid)) else {
                continue;
            };
            let key = super::store::name_key(&name);
            let kv = node.kv();
            let written = super::store::wait(RENAME_TIMEOUT, |done| {
                kv.update(&key, text.into_bytes(), revision, done)
            });
            let mut held = self.by_monitor.lock();
            match written {
                Ok(new) => match held.get_mut(&id) {
                    Some(entry) if entry.2 == revision => entry.2 = new,
                    Some(_) => {}
                    None => {
                        // The holder ended meanwhile, and its release missed the
                        // revision just written: free the name at this one.
                        drop(held);
                        kv.delete(&key, new, Box::new(|_| {}));
                    }
                },
                Err(ClusterError::Store(KvError::Conflict)) => {
                    held.remove(&id);
                }
                // The store did not answer: the name keeps naming the old PID, which
                // resolves to nothing, until the holder ends or another node takes
                // the name.
                Err(_) => {}
            }
        }
    }
}

impl Node {
    /// Joins: takes an incarnation from the store, opens the transport, announces
    /// itself and starts the failure detector.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn join(
        shared: &Arc<Shared>,
        name: &str,
        transport: Arc<dyn Transport>,
        timing: Timing,
        codecs: Codecs,
        spawns: super::spawn::Spawns,
        calls: super::calls::Calls,
        join_timeout: Duration,
    ) -> Result<Arc<Node>, ClusterError> {
        let name: Arc<str> = name.into();
        let incarnation = super::store::take_incarnation(transport.kv(), &name, join_timeout)?;
        let me = NodeId::new(name.clone(), incarnation);
        let node = Arc::new_cyclic(|this| Node {
            this: this.clone(),
            name: name.clone(),
            me: RwLock::new(me),
            transport: transport.clone(),
            shared: Arc::downgrade(shared),
            timing,
            codecs: codec::cluster_codecs(codecs),
            started: Instant::now(),
            peers: RwLock::default(),
            by_slot: RwLock::default(),
            down: Mutex::default(),
            watchers: Mutex::default(),
            connected: AtomicBool::new(true),
            closed: AtomicBool::new(false),
            renewing: AtomicBool::new(false),
            wake: (Mutex::new(()), Condvar::new()),
            next_id: AtomicU64::new(1),
            undecodable: AtomicU64::new(0),
            calls,
            spawns,
            held: NamesHeld::default(),
        });
        let sink: Arc<dyn FrameSink> = Arc::new(Receiver(Arc::downgrade(&node)));
        transport
            .open(&name, sink)
            .map_err(|e| ClusterError::Transport(Box::new(e)))?;
        node.announce();
        let detector = Arc::downgrade(&node);
        thread::Builder::new()
            .name(format!("wsched-cluster-{name}"))
            .spawn(move || detect(&detector))
            .map_err(ClusterError::Thread)?;
        Ok(node)
    }

    /// This node's identity now.
    pub(crate) fn me(&self) -> NodeId {
        self.me.read().clone()
    }

    /// The scheduler, while it lives.
    pub(crate) fn shared(&self) -> Option<Arc<Shared>> {
        self.shared.upgrade()
    }

    pub(crate) fn me_weak(&self) -> Weak<Node> {
        self.this.clone()
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn millis(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The up peers.
    pub(crate) fn peers(&self) -> Vec<NodeId> {
        let mut peers: Vec<NodeId> = self.peers.read().values().map(|p| p.id.clone()).collect();
        peers.sort();
        peers
    }

    pub(crate) fn peer_by_name(&self, name: &str) -> Option<Arc<Peer>> {
        self.peers.read().get(name).cloned()
    }

    /// The up peer that `pid` lives on, if its incarnation is up.
    fn peer_of(&self, pid: Pid) -> Option<Arc<Peer>> {
        self.by_slot.read().get(&pid.node_slot()).cloned()
    }

    pub(crate) fn metrics(&self) -> Vec<PeerMetrics> {
        let now = self.millis();
        let mut list: Vec<PeerMetrics> = self
            .peers
            .read()
            .values()
            .map(|p| PeerMetrics {
                node: p.id.name().to_owned(),
                incarnation: p.id.incarnation(),
                messages_out: p.messages_out.load(Ordering::Relaxed),
                bytes_out: p.bytes_out.load(Ordering::Relaxed),
                messages_in: p.messages_in.load(Ordering::Relaxed),
                bytes_in: p.bytes_in.load(Ordering::Relaxed),
                round_trip: match p.round_trip_us.load(Ordering::Relaxed) {
                    0 => None,
                    us => Some(Duration::from_micros(us)),
                },
                last_heard: Duration::from_millis(
                    now.saturating_sub(p.last_heard.load(Ordering::Relaxed)),
                ),
            })
            .collect();
        list.sort_by(|a, b| a.node.cmp(&b.node));
        list
    }

    pub(crate) fn cluster_metrics(&self) -> ClusterMetrics {
        let me = self.me();
        ClusterMetrics {
            node: me.name().to_owned(),
            incarnation: me.incarnation(),
            peers: self.metrics(),
            queued_frames: self.transport.queued(),
            undecodable: self.undecodable.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn names_held(&self) -> &NamesHeld {
        &self.held
    }

    pub(crate) fn kv(&self) -> &dyn super::transport::KeyValue {
        self.transport.kv()
    }

    // ---- sending -----------------------------------------------------------------

    /// Sends `body` on the stream to `peer`. `messages`: whether it counts as a
    /// message in the metrics.
    pub(crate) fn send_to(&self, peer: &Peer, body: &Body) {
        let me = self.me();
        let view = PidView {
            me: &me,
            peer_slot: peer.slot,
        };
        let mut out = peer.out.lock();
        *out += 1;
        let header = Header {
            from: me.clone(),
            to_incarnation: peer.id.incarnation(),
            seq: *out,
        };
        let bytes = wire::encode(&header, body, Some(view));
        if !matches!(body, Body::Heartbeat) {
            peer.messages_out.fetch_add(1, Ordering::Relaxed);
        }
        peer.bytes_out
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        // Under the lock: the transport's order is the stream's.
        self.transport.send(peer.id.name(), bytes);
    }

    /// Sends `body` to the node of `pid` if it is up; `false` if not.
    pub(crate) fn send_to_node_of(&self, pid: Pid, body: &Body) -> bool {
        match self.peer_of(pid) {
            Some(peer) => {
                self.send_to(&peer, body);
                true
            }
            None => false,
        }
    }

    fn announce(&self) {
        let header = Header {
            from: self.me(),
            to_incarnation: 0,
            seq: 0,
        };
        self.transport
            .broadcast(wire::encode(&header, &Body::Announce, None));
    }

    /// Tells `to` (an incarnation declared down here) that its frames are refused.
    fn refuse(&self, to: &NodeId) {
        let header = Header {
            from: self.me(),
            to_incarnation: to.incarnation(),
            seq: 0,
        };
        let body = Body::Refused {
            incarnation: to.incarnation(),
        };
        self.transport
            .send(to.name(), wire::encode(&header, &body, None));
    }

    // ---- membership --------------------------------------------------------------

    /// `id` was heard from: its peer, added (and announced to the watchers) if it
    /// is new; `None` if its incarnation is refused or older than the one up.
    fn peer_heard(&self, id: &NodeId) -> Option<Arc<Peer>> {
        if let Some(peer) = self.peers.read().get(id.name()) {
            if peer.id == *id {
                return Some(peer.clone());
            }
        }
        if self.down.lock().contains(id) {
            self.refuse(id);
            return None;
        }
        let replaced = {
            let peers = self.peers.read();
            match peers.get(id.name()) {
                Some(peer) if peer.id.incarnation() > id.incarnation() => return None,
                Some(peer) if peer.id == *id => return Some(peer.clone()),
                Some(peer) => Some(peer.clone()),
                None => None,
            }
        };
        if let Some(old) = replaced {
            self.declare_down(&old.id, NodeDownReason::Restarted);
        }
        let slot = nodes::slot_of(id).ok()?;
        let peer = Arc::new(Peer {
            id: id.clone(),
            slot,
            out: Mutex::new(0),
            received: Mutex::new(0),
            last_heard: AtomicU64::new(self.millis()),
            messages_out: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            messages_in: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            round_trip_us: AtomicU64::new(0),
            ping_sent: Mutex::new(None),
        });
        {
            let mut peers = self.peers.write();
            if let Some(existing) = peers.get(id.name()) {
                // Another thread added it meanwhile.
                if existing.id == *id {
                    return Some(existing.clone());
                }
            }
            peers.insert(id.name_arc().clone(), peer.clone());
            self.by_slot.write().insert(slot, peer.clone());
        }
        cluster_event!(info, node = %id, me = %self.me(), "node up");
        // A first frame on the stream, so the peer learns of this node at once.
        self.send_to(&peer, &Body::Heartbeat);
        self.tell_watchers(&NodeEvent::Up(id.clone()));
        Some(peer)
    }

    /// Declares the incarnation `id` down (if it is up): see the module docs.
    pub(crate) fn declare_down(&self, id: &NodeId, reason: NodeDownReason) {
        let peer = {
            let mut peers = self.peers.write();
            match peers.get(id.name()) {
                Some(peer) if peer.id == *id => {
                    let peer = peers.remove(id.name()).expect("just found");
                    self.by_slot.write().remove(&peer.slot);
                    peer
                }
                _ => return,
            }
        };
        cluster_event!(warn, node = %id, me = %self.me(), reason = %reason, "node down");
        if reason != NodeDownReason::Refused {
            // Refused for ever. Not when this node is the one renewing: the peer
            // is fine, and meets the new incarnation as it is.
            self.down.lock().insert(id.clone());
        }
        if let Some(shared) = self.shared.upgrade() {
            let mut kills = Vec::new();
            shared
                .monitors()
                .node_down(&shared, peer.slot, &ExitReason::NoConnection, &mut kills);
            shared.stop_linked(kills);
        }
        self.calls.node_down(peer.slot);
        self.spawns.node_down(id);
        self.tell_watchers(&NodeEvent::Down(id.clone(), reason));
    }

    fn tell_watchers(&self, event: &NodeEvent) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut to = Vec::new();
        self.watchers.lock().retain(|watch| match watch {
            NodeWatch::All(pid) => {
                to.push(*pid);
                true
            }
            NodeWatch::Once(pid, name) => match event {
                NodeEvent::Down(id, _) if id.name() == &**name => {
                    to.push(*pid);
                    false
                }
                _ => true,
            },
        });
        for pid in to {
            if shared
                .send_signal(None, pid, Payload::signal(event.clone()))
                .is_err()
            {
                // Its process ended: forget it.
                self.watchers.lock().retain(
                    |w| !matches!(w, NodeWatch::All(p) | NodeWatch::Once(p, _) if *p == pid),
                );
            }
        }
    }

    /// Sends `pid` every `NodeUp` and `NodeDown` from now on.
    pub(crate) fn watch_nodes(&self, pid: Pid) {
        self.watchers.lock().push(NodeWatch::All(pid));
    }

    /// Sends `pid` one `NodeDown` when the node named `name` goes down — at once if
    /// it is not up now.
    pub(crate) fn monitor_node(&self, pid: Pid, name: &str) {
        let up = self.peers.read().contains_key(name);
        if up {
            self.watchers.lock().push(NodeWatch::Once(pid, name.into()));
            // It may have gone down meanwhile, before the watch was there.
            if self.peers.read().contains_key(name) {
                return;
            }
        }
        if let Some(shared) = self.shared.upgrade() {
            let id = NodeId::new(name.into(), 0);
            let event = NodeEvent::Down(id, NodeDownReason::NotUp);
            let _ = shared.send_signal(None, pid, Payload::signal(event));
        }
        self.watchers
            .lock()
            .retain(|w| !matches!(w, NodeWatch::Once(p, n) if *p == pid && &**n == name));
    }

    /// This node's current incarnation was refused by a peer: it was declared
    /// down there. Every peer is declared down here too (they will drop what they
    /// held of the old incarnation), and the node takes a new incarnation and
    /// announces it. Its processes go on; their PIDs are new to the cluster, and the
    /// cluster-wide names they hold are written again with the new PIDs.
    fn renew(self: &Arc<Self>) {
        if self.renewing.swap(true, Ordering::AcqRel) {
            return;
        }
        cluster_event!(warn, me = %self.me(), "refused by a peer: taking a new incarnation");
        let peers: Vec<NodeId> = self.peers.read().values().map(|p| p.id.clone()).collect();
        for id in peers {
            self.declare_down(&id, NodeDownReason::Refused);
        }
        let node = self.clone();
        // Off the transport's thread: the store may answer on it.
        let renewal = thread::Builder::new()
            .name(format!("wsched-cluster-{}-renew", self.name))
            .spawn(move || {
                let mut renewed = false;
                super::store::next_incarnation(node.transport.kv(), &node.name, |incarnation| {
                    if let Some(incarnation) = incarnation {
                        *node.me.write() = NodeId::new(node.name.clone(), incarnation);
                        renewed = true;
                    }
                });
                if renewed {
                    // Before the announcement: a peer that meets the new incarnation
                    // finds its processes under their names.
                    node.held.renew(&node);
                }
                node.renewing.store(false, Ordering::Release);
                node.announce();
            });
        if renewal.is_err() {
            self.renewing.store(false, Ordering::Release);
        }
    }

    // ---- receiving ---------------------------------------------------------------

    fn receive(self: &Arc<Self>, bytes: &[u8]) {
        let Ok((header, kind, reader)) = wire::decode_header(bytes) else {
            self.undecodable.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if header.from.name() == &*self.name {
            return;
        }
        let me = self.me();
        if header.to_incarnation != 0 && header.to_incarnation != me.incarnation() {
            // For an earlier incarnation of this node.
            return;
        }
        if kind == wire::REFUSED {
            // Outside the stream, and whoever sends it: a refusal from a node this
            // one has declared down too must still be heard, or neither would
            // ever renew.
            let view = PidView {
                me: &me,
                peer_slot: 0,
            };
            if let Ok(Body::Refused { incarnation }) = wire::decode_body(kind, reader, &view) {
                if incarnation == me.incarnation() {
                    self.renew();
                }
            }
            return;
        }
        if self.renewing.load(Ordering::Acquire) {
            return;
        }
        let Some(peer) = self.peer_heard(&header.from) else {
            return;
        };
        if header.seq != 0 {
            let mut received = peer.received.lock();
            if header.seq != *received + 1 {
                cluster_event!(warn, node = %peer.id, expected = *received + 1, got = header.seq, "frames lost");
                drop(received);
                self.declare_down(&peer.id, NodeDownReason::LostFrames);
                self.refuse(&peer.id);
                return;
            }
            *received = header.seq;
        }
        peer.last_heard.store(self.millis(), Ordering::Relaxed);
        peer.bytes_in
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let view = PidView {
            me: &me,
            peer_slot: peer.slot,
        };
        let Ok(body) = wire::decode_body(kind, reader, &view) else {
            self.undecodable.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if !matches!(body, Body::Heartbeat | Body::Announce) {
            peer.messages_in.fetch_add(1, Ordering::Relaxed);
        }
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        self.dispatch(&shared, &peer, &me, body);
    }

    fn dispatch(&self, shared: &Arc<Shared>, peer: &Peer, me: &NodeId, body: Body) {
        match body {
            Body::Announce | Body::Refused { .. } => {}
            Body::Leave => self.declare_down(&peer.id, NodeDownReason::Left),
            Body::Heartbeat => {
                // Every fourth heartbeat carries a ping: the echo is this node's next
                // heartbeat to it; the round trip is measured on the peer's side.
                let mut ping = peer.ping_sent.lock();
                if let Some((_, sent)) = ping.take() {
                    peer.round_trip_us
                        .store(sent.elapsed().as_micros().max(1) as u64, Ordering::Relaxed);
                }
            }
            Body::Message {
                to,
                from,
                codec,
                text,
                signal,
            } => match codec::decode(&self.codecs, me, &codec, &text) {
                Ok(payload) => {
                    let sent = if signal {
                        shared.send_signal(from, to, payload)
                    } else {
                        shared.send_message(from, to, payload)
                    };
                    if let Err(error) = sent {
                        shared.dead_letter_from_node(to, from, error.into_payload());
                    }
                }
                Err(why) => {
                    self.undecodable.fetch_add(1, Ordering::Relaxed);
                    let undecodable = super::Undecodable {
                        codec,
                        text,
                        why: why.to_string(),
                    };
                    shared.dead_letter_from_node(to, from, Payload::new(undecodable));
                }
            },
            Body::Monitor { id, target } => {
                shared
                    .monitors()
                    .monitor_for_node(shared, target, peer.slot, id);
            }
            Body::Demonitor { id, target } => {
                shared.monitors().demonitor_for_node(target, peer.slot, id);
            }
            Body::Down { id, target, reason } => {
                shared
                    .monitors()
                    .remote_down(shared, MonitorRef::new(id, target), reason);
            }
            Body::Link { from, to } => shared.monitors().link_from_node(shared, to, from),
            Body::Unlink { from, to } => shared.monitors().unlink_here(to, from),
            Body::Exit { from, to, reason } => {
                let mut kills = Vec::new();
                shared
                    .monitors()
                    .signal_link(shared, to, from, &reason, &mut kills);
                shared.stop_linked(kills);
            }
            Body::Stop { to, kill } => {
                let _ = if kill {
                    shared.kill(to)
                } else {
                    shared.cancel(to)
                };
            }
            Body::Call {
                id,
                to,
                from,
                codec,
                text,
            } => super::calls::incoming(self, shared, peer, me, id, to, from, &codec, &text),
            Body::Reply { id, answer } => self.calls.answer(self, me, id, answer),
            Body::Spawn { id, entry, args } => {
                super::spawn::incoming(self, shared, peer, me, id, &entry, &args);
            }
            Body::Spawned { id, result } => self.spawns.answer(id, result),
        }
    }

    /// Leaves: tells the peers, stops the detector and closes the transport.
    pub(crate) fn leave(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let peers: Vec<Arc<Peer>> = self.peers.read().values().cloned().collect();
        for peer in peers {
            self.send_to(&peer, &Body::Leave);
        }
        {
            let _guard = self.wake.0.lock();
            self.wake.1.notify_all();
        }
        self.transport.close();
    }
}

/// The transport's end: frames to the node, while it lives.
struct Receiver(Weak<Node>);

impl FrameSink for Receiver {
    fn frame(&self, frame: &[u8]) {
        if let Some(node) = self.0.upgrade() {
            if !node.closed.load(Ordering::Acquire) {
                node.receive(frame);
            }
        }
    }

    fn connected(&self, connected: bool) {
        if let Some(node) = self.0.upgrade() {
            node.connected.store(connected, Ordering::Release);
            if connected {
                // Silence while disconnected does not count against the peers.
                let now = node.millis();
                for peer in node.peers.read().values() {
                    peer.last_heard.store(now, Ordering::Relaxed);
                }
                node.announce();
            }
        }
    }
}

/// The failure detector: every heartbeat interval, announces this node, sends
/// each peer a heartbeat and declares down the peers silent for too long.
fn detect(node: &Weak<Node>) {
    let mut round: u64 = 0;
    loop {
        let Some(node) = node.upgrade() else { return };
        if node.closed.load(Ordering::Acquire) {
            return;
        }
        {
            let mut guard = node.wake.0.lock();
            if !node.closed.load(Ordering::Acquire) {
                node.wake.1.wait_for(&mut guard, node.timing.heartbeat);
            }
        }
        if node.closed.load(Ordering::Acquire) {
            return;
        }
        round += 1;
        node.announce();
        let now = node.millis();
        let connected = node.connected.load(Ordering::Acquire);
        let peers: Vec<Arc<Peer>> = node.peers.read().values().cloned().collect();
        for peer in peers {
            if !connected {
                peer.last_heard.store(now, Ordering::Relaxed);
                continue;
            }
            let silent = now.saturating_sub(peer.last_heard.load(Ordering::Relaxed));
            if silent > node.timing.silence.as_millis() as u64 {
                node.declare_down(&peer.id, NodeDownReason::Silent);
                continue;
            }
            if round.is_multiple_of(4) {
                *peer.ping_sent.lock() = Some((round, Instant::now()));
            }
            node.send_to(&peer, &Body::Heartbeat);
        }
    }
}

impl RemoteNodes for Node {
    fn send(
        &self,
        _shared: &Shared,
        from: Option<Pid>,
        to: Pid,
        payload: Payload,
        signal: bool,
    ) -> Result<(), SendError> {
        let Some(peer) = self.peer_of(to) else {
            return Err(SendError::new(to, to.unreachable_kind(), payload));
        };
        if !signal && self.transport.queued() >= self.timing.max_queued_frames {
            return Err(SendError::new(to, SendErrorKind::NodeBusy, payload));
        }
        let payload = match super::calls::outgoing(self, &peer, from, to, payload) {
            Ok(sent) => return sent,
            Err(payload) => payload,
        };
        let me = self.me();
        let Some((codec, text)) = codec::encode(&self.codecs, &me, &payload) else {
            return Err(SendError::new(to, SendErrorKind::NotEncodable, payload));
        };
        self.send_to(
            &peer,
            &Body::Message {
                to,
                from,
                codec,
                text,
                signal,
            },
        );
        Ok(())
    }

    fn stop(&self, _shared: &Shared, pid: Pid, kill: bool) -> Result<(), CancelError> {
        if self.send_to_node_of(pid, &Body::Stop { to: pid, kill }) {
            Ok(())
        } else {
            Err(CancelError::new(pid, pid.unreachable_kind()))
        }
    }

    fn monitor(&self, shared: &Shared, reference: MonitorRef) {
        let body = Body::Monitor {
            id: reference.id,
            target: reference.target,
        };
        if !self.send_to_node_of(reference.target, &body) {
            let reason = reference.target.unreachable_reason();
            shared.monitors().remote_down(shared, reference, reason);
        }
    }

    fn demonitor(&self, _shared: &Shared, reference: MonitorRef) {
        let body = Body::Demonitor {
            id: reference.id,
            target: reference.target,
        };
        self.send_to_node_of(reference.target, &body);
    }

    fn link(&self, shared: &Shared, me: Pid, other: Pid) {
        if !self.send_to_node_of(
            other,
            &Body::Link {
                from: me,
                to: other,
            },
        ) {
            let mut kills = Vec::new();
            shared.monitors().signal_link(
                shared,
                me,
                other,
                &other.unreachable_reason(),
                &mut kills,
            );
            shared.stop_linked(kills);
        }
    }

    fn unlink(&self, _shared: &Shared, me: Pid, other: Pid) {
        self.send_to_node_of(
            other,
            &Body::Unlink {
                from: me,
                to: other,
            },
        );
    }

    fn exit(&self, _shared: &Shared, to: Pid, from: Pid, reason: &ExitReason) {
        self.send_to_node_of(
            to,
            &Body::Exit {
                from,
                to,
                reason: reason.clone(),
            },
        );
    }

    fn down(&self, _shared: &Shared, node: u16, id: u64, down: Down) {
        if node == 0 {
            self.held.release(self, id);
            return;
        }
        let Some(peer) = self.by_slot.read().get(&node).cloned() else {
            return;
        };
        self.send_to(
            &peer,
            &Body::Down {
                id,
                target: down.pid,
                reason: down.reason,
            },
        );
    }

    fn close(&self, _shared: &Shared) {
        self.leave();
    }

    fn metrics(&self) -> ClusterMetrics {
        self.cluster_metrics()
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}
