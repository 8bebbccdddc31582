//! The seam between the services and the layer that reaches other nodes (the
//! cluster, `cluster/`): what monitors, links, sends and stops do when the PID they
//! are given is not local.
//!
//! The services know nothing of nodes, frames or brokers. A remote process stands in
//! the monitor table like a local one (a *stand-in* entry under its remote PID, with
//! the local watchers and links that reach it); the services tell the cluster what
//! crossed the node boundary through [`RemoteNodes`], and the cluster calls back
//! into the table when the other side answers (`Monitors::remote_down`,
//! `Monitors::signal_link`, `Monitors::node_down`). Without a cluster, a remote PID
//! cannot be reached: sends fail with
//! [`SendErrorKind::NoConnection`](crate::SendErrorKind::NoConnection), monitors and
//! links fire at once with [`ExitReason::NoConnection`] — or, for a PID of a node
//! never met (made up), with "no such process".

use std::sync::{Arc, OnceLock};

use crate::engine::shared::Shared;
use crate::error::{CancelError, SendError};
use crate::exit::ExitReason;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::services::monitors::{Down, MonitorRef};

/// What the cluster layer does for the services. Every method is called with no
/// lock of the services held, and may call back into them.
pub(crate) trait RemoteNodes: Send + Sync + 'static {
    /// Sends a message to the remote process `to`. `signal`: a runtime signal
    /// (`Down`, `Exit`) rather than a user's message.
    fn send(
        &self,
        shared: &Shared,
        from: Option<Pid>,
        to: Pid,
        payload: Payload,
        signal: bool,
    ) -> Result<(), SendError>;

    /// Cancels (`kill`: kills) the remote process `pid`.
    fn stop(&self, shared: &Shared, pid: Pid, kill: bool) -> Result<(), CancelError>;

    /// A monitor on the remote process `reference.target` was recorded here: asks
    /// its node to report its end (or reports `NoConnection` at once through
    /// `Monitors::remote_down` if the node is not up).
    fn monitor(&self, shared: &Shared, reference: MonitorRef);

    /// The monitor `reference` on a remote process was removed here.
    fn demonitor(&self, shared: &Shared, reference: MonitorRef);

    /// The local process `me` linked to the remote process `other` (recorded here
    /// on both sides).
    fn link(&self, shared: &Shared, me: Pid, other: Pid);

    /// The local process `me` unlinked from the remote process `other`.
    fn unlink(&self, shared: &Shared, me: Pid, other: Pid);

    /// The link signal of the local process `from`'s end, for the remote `to`.
    fn exit(&self, shared: &Shared, to: Pid, from: Pid, reason: &ExitReason);

    /// A monitor that node `node` holds on a local process fired: `id` is that
    /// node's own number for the monitor.
    fn down(&self, shared: &Shared, node: u16, id: u64, down: Down);

    /// The scheduler is shutting down: leave the cluster.
    fn close(&self, shared: &Shared);

    /// The node's metrics, for [`Metrics`](crate::Metrics).
    #[cfg(feature = "cluster")]
    fn metrics(&self) -> crate::observe::metrics::ClusterMetrics;

    /// Itself, for the cluster layer to find its own type again.
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync>;
}

/// The cluster, once one is joined: set once, when the scheduler is built.
#[derive(Default)]
pub(crate) struct Remote {
    nodes: OnceLock<Arc<dyn RemoteNodes>>,
}

impl Remote {
    /// Joins: from now on remote PIDs go to `nodes`.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn set(&self, nodes: Arc<dyn RemoteNodes>) {
        if self.nodes.set(nodes).is_err() {
            panic!("a scheduler joins one cluster, once");
        }
    }

    /// The cluster, if the scheduler joined one.
    #[inline]
    pub(crate) fn get(&self) -> Option<&dyn RemoteNodes> {
        self.nodes.get().map(|nodes| &**nodes)
    }

    /// The cluster as the cluster layer's own type.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn any(&self) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        self.nodes.get().map(|nodes| nodes.clone().as_any())
    }
}

impl Shared {
    /// The cluster, if the scheduler joined one.
    #[inline]
    pub(crate) fn remote(&self) -> Option<&dyn RemoteNodes> {
        self.part::<Remote>().get()
    }

    /// Sends to a remote process (see `Hooks::send_remote`).
    pub(crate) fn send_to_node(
        &self,
        from: Option<Pid>,
        to: Pid,
        payload: Payload,
        signal: bool,
    ) -> Result<(), SendError> {
        match self.remote() {
            Some(nodes) => nodes.send(self, from, to, payload, signal),
            None => Err(SendError::new(to, to.unreachable_kind(), payload)),
        }
    }

    /// A message from another node could not be delivered here: a dead letter.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn dead_letter_from_node(&self, to: Pid, from: Option<Pid>, payload: Payload) {
        self.dead_letters.one(
            to,
            crate::engine::process::Message { from, payload },
            crate::engine::dead_letters::DeadLetterReason::FromAnotherNode,
        );
    }

    /// Cancels or kills a remote process (see `Hooks::stop_remote`).
    pub(crate) fn stop_on_node(&self, pid: Pid, kill: bool) -> Result<(), CancelError> {
        match self.remote() {
            Some(nodes) => nodes.stop(self, pid, kill),
            None => Err(CancelError::new(pid, pid.unreachable_kind())),
        }
    }
}
