//! Links: two processes that share their fate. When either ends with a reason other
//! than [`ExitReason::Normal`], the other is stopped too — unless it traps exits, in
//! which case it gets an [`Exit`] message instead.
//!
//! # Rules
//!
//! * [`Context::link`](crate::Context::link) links the calling process and another,
//!   both ways; linking again changes nothing; [`unlink`](crate::Context::unlink)
//!   removes the link, both ways. [`Context::spawn_linked`](crate::Context::spawn_linked)
//!   links the child before it can run, so not even a child that fails at once escapes
//!   its link.
//! * When a process ends, each process linked to it gets the signal:
//!   - one that traps exits ([`Context::trap_exits`](crate::Context::trap_exits)) gets
//!     an [`Exit { pid, reason }`](Exit) message, whatever the reason (normal ends
//!     too, as in Erlang);
//!   - one that does not, and only if the reason is not normal, is stopped as
//!     shutdown stops a process: at once if it is waiting or queued, when its current
//!     step returns if it is running (its `close` runs, and it gets no say). It ends
//!     with [`ProcessError::Linked`](crate::ProcessError::Linked), reason
//!     [`ExitReason::Linked`] `{ pid, reason }`: `pid` the linked process that ended,
//!     `reason` why the process whose failure started the chain ended (a reason that
//!     is itself `Linked` is passed on unwrapped, so reasons stay one level deep
//!     however long the chain).
//! * Linking to a process that has ended (or is ending), or never existed, signals the
//!   caller at once with [`ExitReason::NoSuchProcess`]: an `Exit` message if it traps
//!   exits; otherwise it is stopped when its current step returns.
//! * Once shutdown's timeout has run out and it stops every process, a process that a
//!   link stops is reported as stopped by shutdown ([`ExitReason::Killed`], listed in
//!   the shutdown report), like every other process stopped then.
//! * Once `unlink` returns, the link sends nothing more: a signal sent before it (an
//!   `Exit` already in the mailbox, or a stop already decided) stays.
//!
//! # Where links live
//!
//! In the monitor table's entries (see `monitors.rs`), under its one `used` flag: a
//! process without links, monitors or a trap flag has no entry and pays nothing;
//! `Shared::finish` pays one relaxed load and a branch until the first link or
//! monitor, and the spawn path one branch on a bit of the new cell
//! (`NewProcess::links_to_parent`).
//!
//! # Races
//!
//! *A link racing the other process's end* is ordered as a monitor is: the link is
//! recorded on the other side under its shard lock, after a pass through its mailbox
//! lock that finds the mailbox open; the end closes its mailbox before it reads the
//! flag and takes its links. Either the end finds the link, or the link finds the
//! mailbox closed and signals the caller itself (no such process): one signal.
//!
//! *Both sides ending at once.* An end takes its own links out of its entry (under
//! its shard lock), then, for each linked process, removes itself from that one's
//! links and signals it — only if it was still there. Both ends running together:
//! each takes its own links first or finds itself gone from the other's, so each
//! signal is sent at most once, and a signal is skipped only when its receiver is
//! ending already (its end took its links). A live process is never skipped: its
//! links stay in its entry until its own end.
//!
//! *A stop decided under a lock.* The process to stop is recorded (with why) in its
//! entry under its shard lock, and stopped after every lock is released, by the end
//! that decided it (`Shared::finish` keeps a list, so a chain of links is walked in a
//! loop, not by recursion). Its end reads the record, under the same lock, to report
//! `Linked` instead of `Stopped`; the record goes with its entry.
//!
//! `runtime/tests/loom_links.rs` checks a link racing the end, and both sides
//! failing at once.

use std::fmt;

use crate::engine::cell::CellRef;
use crate::engine::shared::Shared;
use crate::error::ProcessError;
use crate::exit::ExitReason;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::services::monitors::Monitors;

/// The message a process that traps exits gets when a process linked to it ends
/// (see [`Context::link`](crate::Context::link)). An ordinary message from `pid`:
/// `recv!(Exit)` receives it.
///
/// ```
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// /// Starts a worker linked to itself and reports how it ended.
/// struct Keeper;
///
/// #[process]
/// impl Keeper {
///     #[entry]
///     fn keep(&mut self, worker: Pid) -> Result<ExitReason, BoxError> {
///         this::trap_exits(true);
///         this::link(worker);
///         Ok(recv!(Exit)?.reason)
///     }
/// }
///
/// let worker = Pid::from_raw(5);
/// let mut t = TestProcess::start(Keeper, "keep", (worker,)).unwrap();
/// assert_eq!(t.links(), vec![worker]);
/// t.linked_exit(worker, ExitReason::Error { message: "broken".into() });
/// assert_eq!(t.result::<ExitReason>(), ExitReason::Error { message: "broken".into() });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The linked process that ended (or did not exist).
    pub pid: Pid,
    /// Why it ended.
    pub reason: ExitReason,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "linked process {} exited: {}", self.pid, self.reason)
    }
}

impl Monitors {
    /// Links the running process `me` and `other`. See the module docs.
    pub(crate) fn link(&self, shared: &Shared, me: Pid, other: Pid) {
        if me == other {
            return;
        }
        self.set_used();
        self.add_link(me, other);
        if !other.is_local() {
            return self.link_remote(shared, me, other);
        }
        let recorded = shared.live_cell(other).is_ok_and(|cell| {
            let mut shard = self.shard(other).lock();
            // The pass through `other`'s mailbox lock that orders this against its
            // end (see the module docs).
            if cell.is_closing() {
                return false;
            }
            let links = &mut shard.entry(other).or_default().links;
            if !links.contains(&me) {
                links.push(me);
            }
            true
        });
        if !recorded {
            let mut kills = Vec::new();
            self.signal_link(shared, me, other, &ExitReason::NoSuchProcess, &mut kills);
            // `me` is running: flagged, it ends when its step returns.
            shared.stop_linked(kills);
        }
    }

    /// Links the local `me` to the remote `other`: both sides recorded here (the
    /// remote one in its stand-in entry), then `other`'s node is told, which links
    /// there or signals back (see `remote.rs`).
    fn link_remote(&self, shared: &Shared, me: Pid, other: Pid) {
        let Some(nodes) = shared.remote() else {
            let mut kills = Vec::new();
            self.signal_link(shared, me, other, &other.unreachable_reason(), &mut kills);
            shared.stop_linked(kills);
            return;
        };
        self.add_link(other, me);
        nodes.link(shared, me, other);
    }

    /// A process `remote` of another node linked to the local `local`: recorded
    /// here on both sides, or, if `local` is not live, its link signal goes back.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn link_from_node(&self, shared: &Shared, local: Pid, remote: Pid) {
        self.set_used();
        self.add_link(remote, local);
        let recorded = shared.live_cell(local).is_ok_and(|cell| {
            let mut shard = self.shard(local).lock();
            if cell.is_closing() {
                return false;
            }
            let links = &mut shard.entry(local).or_default().links;
            if !links.contains(&remote) {
                links.push(remote);
            }
            true
        });
        if !recorded {
            let mut kills = Vec::new();
            self.signal_link(
                shared,
                remote,
                local,
                &ExitReason::NoSuchProcess,
                &mut kills,
            );
            shared.stop_linked(kills);
        }
    }

    /// Links `parent` (running) and `child` (spawned, not published yet, so it can
    /// neither run nor end before both sides are recorded).
    pub(crate) fn link_spawned(&self, parent: Pid, child: Pid) {
        self.set_used();
        self.add_link(parent, child);
        self.add_link(child, parent);
    }

    fn add_link(&self, at: Pid, to: Pid) {
        let mut shard = self.shard(at).lock();
        let links = &mut shard.entry(at).or_default().links;
        if !links.contains(&to) {
            links.push(to);
        }
    }

    /// Removes the link between `me` and `other`, both ways (telling `other`'s
    /// node if it is remote).
    pub(crate) fn unlink(&self, shared: &Shared, me: Pid, other: Pid) {
        self.unlink_here(me, other);
        if !other.is_local() {
            if let Some(nodes) = shared.remote() {
                nodes.unlink(shared, me, other);
            }
        }
    }

    /// Removes the link between `me` and `other` from this scheduler's table, both
    /// ways (the other node did, or will, remove its own).
    pub(crate) fn unlink_here(&self, me: Pid, other: Pid) {
        self.remove_link(me, other);
        self.remove_link(other, me);
    }

    fn remove_link(&self, at: Pid, to: Pid) {
        let mut shard = self.shard(at).lock();
        if let Some(entry) = shard.get_mut(&at) {
            entry.links.retain(|linked| *linked != to);
            if entry.is_empty() {
                shard.remove(&at);
            }
        }
    }

    /// Whether link signals come to `me` as `Exit` messages.
    pub(crate) fn trap_exits(&self, me: Pid, on: bool) {
        if on {
            self.set_used();
        }
        let mut shard = self.shard(me).lock();
        if on {
            shard.entry(me).or_default().traps_exits = true;
        } else if let Some(entry) = shard.get_mut(&me) {
            entry.traps_exits = false;
            if entry.is_empty() {
                shard.remove(&me);
            }
        }
    }

    /// What a link's failure left for `pid`'s end to report, if it stopped it.
    pub(crate) fn take_kill(&self, pid: Pid) -> Option<ProcessError> {
        let mut shard = self.shard(pid).lock();
        let (by, reason) = shard.get_mut(&pid)?.killed_by.take()?;
        Some(ProcessError::Linked {
            pid: by,
            reason: Box::new(reason),
        })
    }

    /// `from` ended (or does not exist) with `reason`: signals `to` if they were
    /// still linked (removing the link on `to`'s side). A process to stop is pushed to
    /// `kills`; see the module docs.
    pub(crate) fn signal_link(
        &self,
        shared: &Shared,
        to: Pid,
        from: Pid,
        reason: &ExitReason,
        kills: &mut Vec<CellRef>,
    ) {
        let mut shard = self.shard(to).lock();
        let Some(entry) = shard.get_mut(&to) else {
            return;
        };
        let Some(at) = entry.links.iter().position(|linked| *linked == from) else {
            // Unlinked, or `to` is ending and took its links.
            return;
        };
        entry.links.swap_remove(at);
        if !to.is_local() {
            // A stand-in: the signal crosses to `to`'s node, which applies it.
            if entry.is_empty() {
                shard.remove(&to);
            }
            drop(shard);
            if let Some(nodes) = shared.remote() {
                nodes.exit(shared, to, from, reason);
            }
            return;
        }
        if entry.traps_exits {
            // Under the lock, as a monitor's `Down`: `unlink` either came first or
            // finds the message sent.
            let exit = Exit {
                pid: from,
                reason: reason.clone(),
            };
            // A signal: it takes no room in a bounded mailbox (see `bounded.rs`).
            let _ = shared.send_signal(Some(from), to, Payload::signal(exit));
        } else if !reason.is_normal() {
            let root = match reason {
                ExitReason::Linked { reason, .. } => (**reason).clone(),
                other => other.clone(),
            };
            if entry.killed_by.is_none() {
                entry.killed_by = Some((from, root));
            }
            if let Ok(cell) = shared.live_cell(to) {
                kills.push(cell);
            }
        }
        if entry.is_empty() {
            shard.remove(&to);
        }
    }

    /// The processes linked to `pid` (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn links_of(&self, pid: Pid) -> Vec<Pid> {
        self.shard(pid)
            .lock()
            .get(&pid)
            .map_or_else(Vec::new, |entry| entry.links.clone())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use crate::engine::process::{Event, Status};
    use crate::{Context, Events, InitError, Payload, Payloads, Process, Scheduler};
    use crate::{StepError, StepOutput};

    const PATIENCE: Duration = Duration::from_secs(20);

    /// Spawns a linked child in its first step, then finishes on a message (with a
    /// unit) or fails on a cancel.
    struct Parent {
        ctx: Option<Context>,
        spawned: bool,
    }

    impl Process for Parent {
        fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
            self.ctx = Some(ctx);
            Ok(())
        }

        fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
            if !std::mem::replace(&mut self.spawned, true) {
                let child = Parent {
                    ctx: None,
                    spawned: true,
                };
                let ctx = self.ctx.as_ref().unwrap();
                let pid = ctx.spawn_linked(child, "run", ()).unwrap();
                ctx.send(ctx.pid(), pid).unwrap();
            }
            for event in events {
                match event {
                    Event::Message(m) if m.payload.is::<crate::Pid>() => {
                        let child = m.payload.downcast::<crate::Pid>().unwrap();
                        out.set_status(Status::Done(Payload::new(child)));
                        return Ok(());
                    }
                    Event::Message(_) => {
                        out.set_status(Status::Done(Payload::unit()));
                        return Ok(());
                    }
                    Event::Cancel => return Err(StepError::new("cancelled")),
                    Event::Completion(_) => {}
                }
            }
            out.set_status(Status::WaitingForMessage);
            Ok(())
        }
    }

    #[test]
    fn spawn_linked_records_both_sides_and_ends_leave_nothing() {
        let s = Scheduler::builder().workers(2).build().unwrap();
        let handle = s.handle();
        let monitors = &handle.shared().monitors();
        let parent = s
            .spawn(
                Parent {
                    ctx: None,
                    spawned: false,
                },
                "run",
                (),
            )
            .unwrap();
        let child = s.wait_timeout(parent, PATIENCE).unwrap();
        let child = child.downcast::<crate::Pid>().unwrap();
        // The parent ended normally: the child lives on, its link gone with the
        // parent's end.
        let down = s.monitor(child);
        // The end clears its links right after publishing the result that `wait`
        // returned: wait for that, not for a moment.
        let deadline = std::time::Instant::now() + PATIENCE;
        while !(monitors.links_of(parent).is_empty() && monitors.links_of(child).is_empty()) {
            assert!(std::time::Instant::now() < deadline, "the link stays");
            std::thread::yield_now();
        }
        s.cancel(child).unwrap();
        down.wait_timeout(PATIENCE).unwrap();
        drop(down);
        assert_eq!(monitors.entries(), 0);
        s.shutdown(PATIENCE);
    }

    #[test]
    fn link_and_unlink_are_both_ways_and_idempotent() {
        let s = Scheduler::builder().workers(1).build().unwrap();
        let handle = s.handle();
        let monitors = &handle.shared().monitors();
        // PIDs no process has: the table alone.
        let (x, y) = (crate::Pid::from_raw(1 << 40), crate::Pid::from_raw(1 << 41));
        monitors.link_spawned(x, y);
        monitors.link_spawned(x, y);
        assert_eq!(
            (monitors.links_of(x), monitors.links_of(y)),
            (vec![y], vec![x])
        );
        monitors.unlink_here(y, x);
        assert_eq!(
            (monitors.links_of(x), monitors.links_of(y)),
            (vec![], vec![])
        );
        assert_eq!(monitors.entries(), 0);
        s.shutdown(PATIENCE);
    }
}
