//! Monitors: a process (or an outside thread) asks to be told, once, when another
//! process ends, and why.
//!
//! # Rules
//!
//! * [`Context::monitor`](crate::Context::monitor) (and
//!   [`this::monitor`](crate::this::monitor)) returns a [`MonitorRef`] and later
//!   delivers exactly one [`Down`] message to the watching process, when the target
//!   ends, carrying its [`ExitReason`]. The `Down` is an ordinary message, sent as
//!   coming from the target: it is received like any other (`recv!(Down)`, or as a
//!   [`Message`](crate::Message) payload in a hand-written process).
//! * A target that has ended (or is ending: its mailbox is closed) when the monitor is
//!   set, or a PID that never existed, gives a `Down` with
//!   [`ExitReason::NoSuchProcess`] at once — still exactly one.
//! * Monitors are independent: several monitors on one target (from one watcher or
//!   many) each get their own `Down`.
//! * [`demonitor`](crate::Context::demonitor) stops a monitor: once it returns, no
//!   `Down` for it will be sent. A `Down` sent before (already in the mailbox) stays
//!   there; `demonitor` returns `false` in that case, so a process that cares can
//!   receive it (Erlang's `flush` option, done by hand).
//! * From outside, [`Handle::monitor`](crate::Handle::monitor) returns a [`Monitor`]
//!   that a thread can wait on; dropping it demonitors.
//! * The `Down` comes after the target's result is published: a watcher that joins
//!   the target on its `Down` finds the result there.
//!
//! # Where monitors live, and what a process without any pays
//!
//! Nothing in the process cell: a table sharded by PID ([`SHARDS`] shards) maps a
//! process to its [`Entry`]: the monitors on it (its watchers) and the monitors it
//! holds on others (what it watches). A process appears in it only while it has
//! either; an idle process without monitors costs no memory.
//!
//! [`Shared::finish`](super::shared::Shared::finish) looks in the table only once a
//! monitor has ever been set: until then its cost is one relaxed load of
//! [`Monitors::used`] (a read-mostly flag, set once) and one branch that always goes
//! the same way. Monitors add nothing to spawning (links add one branch on a bit of
//! the new cell: see `links.rs`).
//!
//! # Cleaning up at both ends
//!
//! The end of a process removes the monitors it held from their targets' entries,
//! and its own monitors from their watchers' entries, then takes its entry out of the
//! table and sends its `Down`s (so a `Down` finds the table clean of that end). So a
//! target never keeps monitors of watchers that have ended, and a long-lived watcher
//! never keeps monitors that have fired. `demonitor` cleans both sides too.
//!
//! # A monitor racing the end of its target
//!
//! The end reads `used` without a lock while a monitor may be being set on the
//! process. Exactly one `Down` must come of it: the end must not miss a monitor that
//! was recorded, and the monitor must not be recorded after the end looked. The
//! target's mailbox lock orders them:
//!
//! * The end closes the mailbox (under its lock), then reads `used`; if set, it takes
//!   its shard's lock (after publishing the result) and removes the entry.
//! * Setting a monitor sets `used`, then, holding the target's shard lock, takes the
//!   target's mailbox lock and checks whether it is closed: open, it records the
//!   monitor (still under the shard lock); closed, it records nothing and sends the
//!   `Down` with [`ExitReason::NoSuchProcess`] itself.
//!
//! If the monitor's pass through the mailbox lock comes first, its `used = true`
//! happens before the end's read, so the end looks in the table; and it takes the
//! shard lock after the monitor took it (the monitor holds it across its pass), so
//! after the monitor was recorded: the end finds it. If the end's close comes first,
//! the monitor sees the mailbox closed and records nothing. Either way one `Down`.
//! `runtime/tests/loom_monitors.rs` checks this (it fails without the closed check).
//!
//! # `demonitor` racing the end
//!
//! The end sends the `Down`s while it holds the shard lock, and `demonitor` removes
//! the monitor under the same lock: either it removes it first (no `Down` will come,
//! it returns `true`), or the `Down` is already in the watcher's mailbox (it returns
//! `false`). The loom model checks this too (and fails if the `Down`s are sent after
//! the lock is released).
//!
//! The same table holds links (see `links.rs`): one flag, one lookup per end.
//!
//! Lock order: a shard, then a process's mailbox (checking it is open), or a shard,
//! then the PID table and a watcher's mailbox (sending a `Down`). No two shards are
//! ever held at once.

use std::collections::HashMap;
use std::fmt;
use std::mem;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::engine::cell::CellRef;
pub(crate) use crate::engine::context::MonitorRef;
use crate::engine::handle::Handle;
use crate::engine::shared::Shared;
use crate::exit::ExitReason;
use crate::fast_hash::FastHash;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::services::calls::{Answer, CallSlot};
use crate::sync::{AtomicBool, AtomicU64, Condvar, Mutex, Ordering};
use crate::time::clock;

impl Shared {
    /// The monitors and links.
    #[inline(always)]
    pub(crate) fn monitors(&self) -> &Monitors {
        self.part()
    }
}

/// Shards of the monitor table.
const SHARDS: usize = if cfg!(loom) { 2 } else { 16 };

/// The message a monitor delivers, once, when the process it watches ends.
///
/// It arrives as an ordinary message from `pid`, so `recv!(Down)` receives it, and
/// selective receive works around it. See [`Context::monitor`](crate::Context::monitor).
///
/// ```
/// use wsched::prelude::*;
/// use wsched::{Down, ExitReason};
///
/// struct Watcher;
///
/// #[process]
/// impl Watcher {
///     /// Watches `worker` and returns why it ended.
///     #[entry]
///     fn watch(&mut self, worker: Pid) -> Result<ExitReason, BoxError> {
///         let monitor = this::monitor(worker);
///         let down = recv!(Down)?;
///         assert_eq!((down.pid, down.monitor), (worker, monitor));
///         Ok(down.reason)
///     }
/// }
///
/// // Step by step in the harness: the test plays the worker's end.
/// let mut t = wsched::testing::TestProcess::start(Watcher, "watch", (Pid::from_raw(9),)).unwrap();
/// let monitored = t.take_monitors().remove(0);
/// t.send_from(Some(monitored.target), monitored.down(ExitReason::Killed));
/// assert_eq!(t.result::<ExitReason>(), ExitReason::Killed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Down {
    /// The process that ended (or did not exist).
    pub pid: Pid,
    /// Why it ended.
    pub reason: ExitReason,
    /// The monitor this is for (what `monitor` returned).
    pub monitor: MonitorRef,
}

impl fmt::Display for Down {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is down: {}", self.pid, self.reason)
    }
}

/// A monitor set from outside the scheduler ([`Handle::monitor`]): a thread waits on
/// it for the [`Down`]. Dropping it demonitors.
///
/// ```
/// use std::time::Duration;
/// use wsched::{ExitReason, Scheduler};
/// # use wsched::{Context, Events, InitError, Payloads, Process, Status, StepError, StepOutput};
/// # /// Fails on its first message.
/// # struct Fragile;
/// # impl Process for Fragile {
/// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
/// #     fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
/// #         if events.into_iter().next().is_some() {
/// #             return Err(StepError::new("broken"));
/// #         }
/// #         out.set_status(Status::WaitingForMessage);
/// #         Ok(())
/// #     }
/// # }
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let pid = scheduler.spawn(Fragile, "run", ())?;
/// let monitor = scheduler.monitor(pid);
/// scheduler.send(pid, ())?;
/// let down = monitor.wait_timeout(Duration::from_secs(20)).expect("it ends");
/// assert_eq!(down.reason, ExitReason::Error { message: "broken".into() });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Monitor {
    reference: MonitorRef,
    slot: Arc<DownSlot>,
    handle: Handle,
}

impl Monitor {
    /// What names this monitor (also in its `Down`).
    pub fn reference(&self) -> MonitorRef {
        self.reference
    }

    /// The `Down`, if it has come.
    pub fn try_down(&self) -> Option<Down> {
        self.slot.down.lock().clone()
    }

    /// Blocks until the `Down` comes or `timeout` runs out (`None`). The `Down` stays:
    /// later calls return it again.
    ///
    /// Shutting the scheduler down (or dropping it) ends every process still running,
    /// and each end sends its `Down` as any end does. A `Down` only fails to come
    /// while the target runs on: use a timeout that fits how long it may.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Down> {
        // A timeout too long to represent waits for as long as it takes.
        let deadline = clock::now().checked_add(timeout);
        let mut down = self.slot.down.lock();
        while down.is_none() {
            match deadline {
                Some(deadline) => {
                    if self.slot.filled.wait_until(&mut down, deadline).timed_out() {
                        break;
                    }
                }
                None => self.slot.filled.wait(&mut down),
            }
        }
        down.clone()
    }

    /// Stops the monitor. `true`: it was stopped before its `Down` was sent, and none
    /// will come; `false`: the `Down` had come already (see [`try_down`](Self::try_down)).
    pub fn demonitor(self) -> bool {
        self.handle
            .shared()
            .monitors()
            .demonitor(self.handle.shared(), self.reference)
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        // A no-op once demonitored or fired.
        self.handle
            .shared()
            .monitors()
            .demonitor(self.handle.shared(), self.reference);
    }
}

impl fmt::Debug for Monitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor")
            .field("reference", &self.reference)
            .field("down", &self.try_down())
            .finish()
    }
}

/// Where an outside monitor's `Down` lands.
#[derive(Default)]
struct DownSlot {
    down: Mutex<Option<Down>>,
    filled: Condvar,
}

impl DownSlot {
    fn fill(&self, down: Down) {
        let mut slot = self.down.lock();
        assert!(slot.is_none(), "a monitor delivers one Down");
        *slot = Some(down);
        drop(slot);
        self.filled.notify_all();
    }
}

/// Who is told when a monitored process ends.
#[derive(Clone)]
enum Watcher {
    Process(Pid),
    Thread(Arc<DownSlot>),
    /// A call waiting on the target (see `calls.rs`): its death fails the call.
    Call(Arc<CallSlot>),
    /// Another node of the cluster (its slot), for one of its monitors (its own
    /// number for it): the `Down` crosses to it (see `remote.rs`).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    Node {
        node: u16,
        id: u64,
    },
}

/// The bit that sets the ids of other nodes' monitors apart from this scheduler's
/// own in a target's entry (ids count up from 1 and never get near it), so that a
/// local `demonitor` never removes another node's monitor with the same number.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
const NODE_WATCH: u64 = 1 << 63;

/// Where another node's slot sits in the id of its monitor here.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
const NODE_WATCH_SHIFT: u32 = 44;

/// The id in this table of node `node`'s monitor `id`.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
fn node_watch_id(node: u16, id: u64) -> u64 {
    debug_assert!(
        id < 1 << NODE_WATCH_SHIFT,
        "monitor ids stay far below 2^44"
    );
    NODE_WATCH | (u64::from(node) << NODE_WATCH_SHIFT) | (id & ((1 << NODE_WATCH_SHIFT) - 1))
}

/// One monitor, as its target's entry keeps it.
struct Watch {
    id: u64,
    watcher: Watcher,
}

/// What the table keeps about one process.
#[derive(Default)]
pub(super) struct Entry {
    /// Monitors on this process.
    watchers: Vec<Watch>,
    /// Monitors this process holds on others.
    watching: Vec<MonitorRef>,
    /// The processes linked to this one (see `links.rs`).
    pub(super) links: Vec<Pid>,
    /// Whether link signals come to it as `Exit` messages.
    pub(super) traps_exits: bool,
    /// A link's failure ended it: which process, and why that one ended. Read by its
    /// end, which reports it instead of a plain stop.
    pub(super) killed_by: Option<(Pid, ExitReason)>,
}

impl Entry {
    pub(super) fn is_empty(&self) -> bool {
        self.watchers.is_empty()
            && self.watching.is_empty()
            && self.links.is_empty()
            && !self.traps_exits
            && self.killed_by.is_none()
    }
}

pub(super) type Shard = HashMap<Pid, Entry, FastHash>;

pub(crate) struct Monitors {
    /// Set by the first monitor and never cleared: until then ends skip the table.
    used: CachePadded<AtomicBool>,
    next_id: AtomicU64,
    shards: Box<[CachePadded<Mutex<Shard>>]>,
}

impl Monitors {
    pub(crate) fn new() -> Self {
        Self {
            used: CachePadded::new(AtomicBool::new(false)),
            next_id: AtomicU64::new(1),
            shards: (0..SHARDS).map(|_| Default::default()).collect(),
        }
    }

    pub(super) fn shard(&self, pid: Pid) -> &Mutex<Shard> {
        // PIDs of live processes differ in their low bits (their slot numbers).
        &self.shards[pid.as_u64() as usize % SHARDS]
    }

    /// Whether a monitor was ever set: if not, an end has nothing to look up.
    #[inline]
    pub(crate) fn used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }

    /// Marks the table in use: from now on every end looks in it.
    pub(super) fn set_used(&self) {
        if !self.used() {
            self.used.store(true, Ordering::Relaxed);
        }
    }

    /// A process `watcher` monitors `target`.
    pub(crate) fn monitor_from_process(
        &self,
        shared: &Shared,
        watcher: Pid,
        target: Pid,
    ) -> MonitorRef {
        self.monitor(shared, target, Watcher::Process(watcher))
    }

    /// An outside thread monitors `target`.
    pub(crate) fn monitor_from_thread(&self, handle: &Handle, target: Pid) -> Monitor {
        let slot = Arc::new(DownSlot::default());
        let reference = self.monitor(handle.shared(), target, Watcher::Thread(slot.clone()));
        Monitor {
            reference,
            slot,
            handle: handle.clone(),
        }
    }

    /// A call monitors its callee `target` (see `calls.rs`).
    pub(crate) fn monitor_for_call(
        &self,
        shared: &Shared,
        target: Pid,
        slot: Arc<CallSlot>,
    ) -> MonitorRef {
        self.monitor(shared, target, Watcher::Call(slot))
    }

    /// Records a monitor on `target`, or sends its `Down` at once if `target` is not
    /// live. See the module docs for the ordering against `target`'s end.
    fn monitor(&self, shared: &Shared, target: Pid, watcher: Watcher) -> MonitorRef {
        self.set_used();
        let reference = MonitorRef::new(self.next_id.fetch_add(1, Ordering::Relaxed), target);
        // In the watcher's entry first, so that the target's end, which removes it
        // from there, never runs before it is there.
        if let Watcher::Process(pid) = watcher {
            self.shard(pid)
                .lock()
                .entry(pid)
                .or_default()
                .watching
                .push(reference);
        }
        if !target.is_local() {
            return self.monitor_remote(shared, reference, watcher);
        }
        self.watch_live(shared, reference, watcher);
        reference
    }

    /// Records `watcher`'s monitor `reference` on its local target if the target
    /// is live, or sends its `Down` (no such process) at once.
    fn watch_live(&self, shared: &Shared, reference: MonitorRef, watcher: Watcher) {
        let target = reference.target;
        let recorded = shared.live_cell(target).is_ok_and(|cell| {
            let mut shard = self.shard(target).lock();
            // The pass through the target's mailbox lock that orders this against
            // its end (see the module docs).
            if cell.is_closing() {
                return false;
            }
            shard.entry(target).or_default().watchers.push(Watch {
                id: reference.id,
                watcher: watcher.clone(),
            });
            true
        });
        if !recorded {
            self.fire_unrecorded(shared, reference, &watcher, ExitReason::NoSuchProcess);
        }
    }

    /// Sends the `Down` of a monitor that could not be recorded, taking it back
    /// from its watcher's entry.
    fn fire_unrecorded(
        &self,
        shared: &Shared,
        reference: MonitorRef,
        watcher: &Watcher,
        reason: ExitReason,
    ) {
        if let Watcher::Process(pid) = watcher {
            self.forget_watching(*pid, reference);
        }
        let down = Down {
            pid: reference.target,
            reason,
            monitor: reference,
        };
        deliver(shared, watcher, down);
    }

    /// A monitor on a process of another node: recorded in the process's stand-in
    /// entry here, then its node is asked to report its end (see `remote.rs`).
    fn monitor_remote(
        &self,
        shared: &Shared,
        reference: MonitorRef,
        watcher: Watcher,
    ) -> MonitorRef {
        let Some(nodes) = shared.remote() else {
            let reason = reference.target.unreachable_reason();
            self.fire_unrecorded(shared, reference, &watcher, reason);
            return reference;
        };
        self.shard(reference.target)
            .lock()
            .entry(reference.target)
            .or_default()
            .watchers
            .push(Watch {
                id: reference.id,
                watcher,
            });
        nodes.monitor(shared, reference);
        reference
    }

    /// Node `node` monitors the local process `target` with its monitor `id`; if
    /// `target` is not live, its `Down` goes back at once.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn monitor_for_node(&self, shared: &Shared, target: Pid, node: u16, id: u64) {
        self.set_used();
        let reference = MonitorRef::new(node_watch_id(node, id), target);
        self.watch_live(shared, reference, Watcher::Node { node, id });
    }

    /// Node `node` removed its monitor `id` on the local process `target`.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn demonitor_for_node(&self, target: Pid, node: u16, id: u64) {
        self.remove_watch(MonitorRef::new(node_watch_id(node, id), target));
    }

    /// The remote process `reference.target` ended (its node said so, or the node
    /// is down): the monitor's `Down`, once — unless it was removed meanwhile.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn remote_down(&self, shared: &Shared, reference: MonitorRef, reason: ExitReason) {
        if let Some(removed) = self.remove_watch(reference) {
            self.fire_unrecorded(shared, reference, &removed.watcher, reason);
        }
    }

    /// Node `node` is down (`reason`: no connection): every remote process of it
    /// that anything here watches or links to ends, as far as this scheduler is
    /// concerned, and its monitors on local processes are forgotten. Processes that
    /// links stop are added to `kills`.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn node_down(
        &self,
        shared: &Shared,
        node: u16,
        reason: &ExitReason,
        kills: &mut Vec<CellRef>,
    ) {
        let mut stand_ins = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.retain(|pid, entry| {
                if pid.node_slot() == node {
                    stand_ins.push(*pid);
                    return true;
                }
                entry
                    .watchers
                    .retain(|w| !matches!(w.watcher, Watcher::Node { node: n, .. } if n == node));
                !entry.is_empty()
            });
        }
        for pid in stand_ins {
            self.process_ended(shared, pid, reason, kills);
        }
    }

    /// The processes of other nodes that `pid` is linked to, and those it monitors
    /// (for the process listing).
    pub(crate) fn remote_ties(&self, pid: Pid) -> (Vec<Pid>, Vec<Pid>) {
        let shard = self.shard(pid).lock();
        let Some(entry) = shard.get(&pid) else {
            return (Vec::new(), Vec::new());
        };
        let links = entry
            .links
            .iter()
            .copied()
            .filter(|p| !p.is_local())
            .collect();
        let monitors = entry
            .watching
            .iter()
            .map(|r| r.target)
            .filter(|p| !p.is_local())
            .collect();
        (links, monitors)
    }

    /// Removes the monitor `reference` from its target's watchers; what it was.
    fn remove_watch(&self, reference: MonitorRef) -> Option<Watch> {
        let removed = {
            let mut shard = self.shard(reference.target).lock();
            let entry = shard.get_mut(&reference.target)?;
            let at = entry.watchers.iter().position(|w| w.id == reference.id)?;
            let removed = entry.watchers.swap_remove(at);
            if entry.is_empty() {
                shard.remove(&reference.target);
            }
            removed
        };
        if let Watcher::Process(pid) = removed.watcher {
            self.forget_watching(pid, reference);
        }
        Some(removed)
    }

    /// Stops the monitor `reference`; `true` if it had not fired.
    pub(crate) fn demonitor(&self, shared: &Shared, reference: MonitorRef) -> bool {
        if self.remove_watch(reference).is_none() {
            return false;
        }
        if !reference.target.is_local() {
            if let Some(nodes) = shared.remote() {
                nodes.demonitor(shared, reference);
            }
        }
        true
    }

    /// `pid` has ended with `reason` (its result published): signals its links (the
    /// processes a signal is to stop are added to `kills`, for the caller to stop
    /// outside every lock), removes the monitors it held and its watchers' records of
    /// their monitors on it, then sends the `Down`s — last, so that whoever gets one
    /// finds the table already clean. Returns whether anything observed the end (a
    /// link was signalled or a `Down` sent: see `unobserved.rs`). Out of line: ends of processes without monitors
    /// should not carry it.
    #[inline(never)]
    pub(crate) fn process_ended(
        &self,
        shared: &Shared,
        pid: Pid,
        reason: &ExitReason,
        kills: &mut Vec<CellRef>,
    ) -> bool {
        let (links, watching, watchers) = {
            let mut shard = self.shard(pid).lock();
            let Some(entry) = shard.get_mut(&pid) else {
                return false;
            };
            let watchers: Vec<(Pid, MonitorRef)> = entry
                .watchers
                .iter()
                .filter_map(|watch| match watch.watcher {
                    Watcher::Process(watcher) => Some((watcher, MonitorRef::new(watch.id, pid))),
                    Watcher::Thread(_) | Watcher::Call(_) | Watcher::Node { .. } => None,
                })
                .collect();
            (
                mem::take(&mut entry.links),
                mem::take(&mut entry.watching),
                watchers,
            )
        };
        let linked = !links.is_empty();
        for other in links {
            self.signal_link(shared, other, pid, reason, kills);
        }
        // One shard at a time. No monitor can be added on `pid` meanwhile (its
        // mailbox is closed); one removed meanwhile by `demonitor` is not sent.
        for reference in watching {
            self.forget_watcher(reference);
            if !reference.target.is_local() {
                if let Some(nodes) = shared.remote() {
                    nodes.demonitor(shared, reference);
                }
            }
        }
        for (watcher, reference) in watchers {
            self.forget_watching(watcher, reference);
        }
        let mut shard = self.shard(pid).lock();
        let Some(entry) = shard.remove(&pid) else {
            return linked;
        };
        // Observed when a link was signalled or a `Down` goes out (see
        // `unobserved.rs`).
        let observed = linked || !entry.watchers.is_empty();
        // Sent under the shard lock: `demonitor` either removed a monitor before, or
        // finds its `Down` sent (see the module docs).
        for watch in entry.watchers {
            let down = Down {
                pid,
                reason: reason.clone(),
                monitor: MonitorRef::new(watch.id, pid),
            };
            deliver(shared, &watch.watcher, down);
        }
        observed
    }

    /// Removes `reference` from what `watcher` watches.
    fn forget_watching(&self, watcher: Pid, reference: MonitorRef) {
        let mut shard = self.shard(watcher).lock();
        if let Some(entry) = shard.get_mut(&watcher) {
            entry.watching.retain(|r| *r != reference);
            if entry.is_empty() {
                shard.remove(&watcher);
            }
        }
    }

    /// Removes the monitor `reference` from its target's watchers (its watcher ended).
    fn forget_watcher(&self, reference: MonitorRef) {
        let mut shard = self.shard(reference.target).lock();
        if let Some(entry) = shard.get_mut(&reference.target) {
            entry.watchers.retain(|w| w.id != reference.id);
            if entry.is_empty() {
                shard.remove(&reference.target);
            }
        }
    }

    /// How many processes have an entry (for tests: 0 once every monitor fired or was
    /// removed).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().len()).sum()
    }
}

/// Hands `down` to its watcher. A watcher process that has ended meanwhile does not
/// get it (its own end removes its monitors); nothing in a `Down` is user data, so
/// dropping it runs no user code.
fn deliver(shared: &Shared, watcher: &Watcher, down: Down) {
    match watcher {
        Watcher::Process(to) => {
            // A signal: it takes no room in a bounded mailbox (see `bounded.rs`).
            let _ = shared.send_signal(Some(down.pid), *to, Payload::signal(down));
        }
        Watcher::Thread(slot) => slot.fill(down),
        Watcher::Call(slot) => {
            slot.answer(Answer::CalleeDied(down.reason));
        }
        Watcher::Node { node, id } => {
            if let Some(nodes) = shared.remote() {
                nodes.down(shared, *node, *id, down);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use crate::engine::process::{Event, Status};
    use crate::runtime::tests::Inert;
    use crate::services::monitors::ExitReason;
    use crate::{Context, Events, InitError, Payload, Payloads, Pid, Process, Scheduler};
    use crate::{StepError, StepOutput};

    const PATIENCE: Duration = Duration::from_secs(20);

    #[test]
    fn ends_skip_the_table_until_a_monitor_is_set() {
        let s = Scheduler::builder().workers(2).build().unwrap();
        let handle = s.handle();
        let monitors = &handle.shared().monitors();
        for _ in 0..100 {
            let pid = s.spawn(Inert, "run", ()).unwrap();
            let _ = s.wait(pid);
        }
        assert!(!monitors.used(), "no end looked at the table");
        drop(s.monitor(Pid::from_raw(12345)));
        assert!(monitors.used(), "set once: every end looks from now on");
        assert_eq!(monitors.entries(), 0);
        s.shutdown(PATIENCE);
    }

    /// Waits for messages forever.
    struct Waiting;

    impl Process for Waiting {
        fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
            Ok(())
        }

        fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
            out.set_status(Status::WaitingForMessage);
            Ok(())
        }
    }

    /// Monitors its targets in its first step, then finishes on a `&str` message.
    struct Holder {
        ctx: Option<Context>,
        targets: Vec<Pid>,
    }

    impl Process for Holder {
        fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
            self.ctx = Some(ctx);
            Ok(())
        }

        fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
            let ctx = self.ctx.as_ref().unwrap();
            for target in self.targets.drain(..) {
                ctx.monitor(target);
            }
            for event in events {
                if let Event::Message(m) = event {
                    if m.payload.is::<&str>() {
                        out.set_status(Status::Done(Payload::unit()));
                        return Ok(());
                    }
                }
            }
            out.set_status(Status::WaitingForMessage);
            Ok(())
        }
    }

    #[test]
    fn a_watcher_that_ends_first_leaves_no_monitor_on_its_targets() {
        let s = Scheduler::builder().workers(2).build().unwrap();
        let handle = s.handle();
        let monitors = &handle.shared().monitors();
        let target = s.spawn(Waiting, "run", ()).unwrap();
        let holder = Holder {
            ctx: None,
            targets: vec![target, target],
        };
        let watcher = s.spawn(holder, "run", ()).unwrap();
        let outside = s.monitor(watcher);
        // Wait for the holder's monitors: they are set in its first step, and the
        // holder and the target then have entries.
        let deadline = std::time::Instant::now() + PATIENCE;
        while monitors.entries() < 2 {
            assert!(std::time::Instant::now() < deadline, "monitors never set");
            std::thread::yield_now();
        }
        s.send(watcher, "end").unwrap();
        let down = outside.wait_timeout(PATIENCE).unwrap();
        assert_eq!(down.reason, ExitReason::Normal);
        // Its end removed its monitors from the target, which still runs: the
        // table forgets both.
        assert_eq!(monitors.entries(), 0, "the target kept a dead watcher");
        assert!(s.handle().shared().is_live(target));
        s.shutdown(Duration::ZERO);
    }

    /// The loom model's race (`runtime/tests/loom_monitors.rs`) on real threads, many
    /// times: another thread monitors each process as it ends at its first step (an
    /// `Inert` step fails: it sets no status); each monitor gets exactly one `Down`
    /// (a second would trip `DownSlot::fill`), and nothing is left in the table.
    #[test]
    fn monitors_racing_ends_get_one_down_each() {
        const ROUNDS: usize = 5_000;
        let s = Scheduler::builder().workers(2).build().unwrap();
        let handle = s.handle();
        let (tx, rx) = std::sync::mpsc::channel();
        let reasons = std::thread::scope(|scope| {
            let handle = &handle;
            let watching = scope.spawn(move || {
                let monitors: Vec<_> = rx.iter().map(|pid| handle.monitor(pid)).collect();
                monitors
                    .iter()
                    .map(|m| m.wait_timeout(PATIENCE).expect("one Down").reason)
                    .collect::<Vec<_>>()
            });
            for _ in 0..ROUNDS {
                let pid = s.spawn(Inert, "run", ()).unwrap();
                tx.send(pid).unwrap();
            }
            drop(tx);
            watching.join().unwrap()
        });
        assert_eq!(reasons.len(), ROUNDS);
        let odd = reasons
            .iter()
            .find(|r| !matches!(r, ExitReason::Error { .. } | ExitReason::NoSuchProcess));
        assert_eq!(odd, None);
        s.shutdown(PATIENCE);
        assert_eq!(handle.shared().monitors().entries(), 0);
    }
}
