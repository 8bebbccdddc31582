//! The name table: processes registered under names, so that others can find them
//! and send to them without knowing their PIDs.
//!
//! # Rules
//!
//! * A name is held by one process at a time; a process may hold several names.
//!   Registering a name that a live process holds fails
//!   ([`RegisterError::Taken`], naming the holder); registering it again for the
//!   process that holds it succeeds and changes nothing. Only a live process can be
//!   registered ([`RegisterError::NotAlive`]); a process is live from its first step
//!   (not during its `init`) until it ends.
//! * A name is freed when its holder ends: from the moment the process is done (its
//!   result is published, or discarded if it is detached) lookups no longer find it
//!   and it can be registered again. A holder that is ending — its mailbox closed, its
//!   result not yet published — still holds its names; a message sent to one of them
//!   then fails and is handed back, as a send to its PID would.
//! * Any process, or outside code, may unregister any name.
//!
//! # Ending a process costs nothing until names are used
//!
//! [`Shared::finish`](super::shared::Shared::finish) frees the names of the process it
//! ends, after publishing its result, but only once a name has ever been registered:
//! until then its only cost is a relaxed load of [`Names::used`] and a branch that
//! always goes the same way. Afterwards it takes the lock of one shard of the
//! holder-to-names index (PIDs are spread over [`SHARDS`] of them, so ends on
//! different workers rarely meet) and looks the PID up there.
//!
//! # A registration racing the end of its process
//!
//! The end reads `used` without a lock; a registration of another process's PID (one
//! registering itself is running, so it cannot be ending) may race it. Neither may
//! leave a name held by a process that has ended. What orders them is the process's
//! mailbox lock:
//!
//! * The end marks the process done and publishes its result under its mailbox lock
//!   (`ProcessCell::end_with`), then reads `used`.
//! * A registration sets `used`, then takes and releases the process's mailbox lock
//!   (reading its suspension point is a way to do that), then, under the table's
//!   locks, checks that the process is not done before it records the name.
//!
//! If the registration's pass through the mailbox lock comes first, its `used = true`
//! happens before the end's read, so the end looks in the table: under the shard
//! lock, either it comes after the registration recorded the name (and removes it),
//! or before — and then the registration, taking that shard lock after it, sees the
//! process done and refuses. If the end's pass comes first, its "done" happens before
//! the registration's check, which refuses. `runtime/tests/loom_names.rs` checks this
//! on the real scheduler (and fails without the pass through the mailbox lock).
//!
//! Between the end marking its process done and removing its names, the table still
//! lists them; every lookup and registration therefore checks that the holder it
//! finds is live, and treats a name whose holder is done as free.
//!
//! Lock order: the name map, then a shard, then the PID table's shard (to check a
//! holder). The end never holds two of them at once.

use std::collections::HashMap;
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::engine::shared::Shared;
use crate::error::{RegisterError, SendErrorKind, SendNamedError, SendNamedErrorKind};
use crate::fast_hash::FastHash;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::sync::{AtomicBool, Mutex, Ordering, RwLock};

impl Shared {
    /// The name table.
    #[inline(always)]
    pub(crate) fn names(&self) -> &Names {
        self.part()
    }
}

/// Shards of the holder-to-names index.
const SHARDS: usize = if cfg!(loom) { 2 } else { 16 };

pub(crate) struct Names {
    /// Set by the first registration and never cleared: until then ends skip the
    /// table. Read-mostly: written once.
    used: CachePadded<AtomicBool>,
    /// Each name's holder.
    holders: RwLock<HashMap<Arc<str>, Pid>>,
    /// Each holder's names, sharded by PID.
    held: Box<[CachePadded<Mutex<Held>>]>,
}

type Held = HashMap<Pid, Vec<Arc<str>>, FastHash>;

impl Names {
    pub(crate) fn new() -> Self {
        Self {
            used: CachePadded::new(AtomicBool::new(false)),
            holders: RwLock::new(HashMap::new()),
            held: (0..SHARDS).map(|_| Default::default()).collect(),
        }
    }

    fn shard(&self, pid: Pid) -> &Mutex<Held> {
        // PIDs of live processes differ in their low bits (their slot numbers).
        &self.held[pid.as_u64() as usize % SHARDS]
    }

    /// Whether any name was ever registered: if not, an end has no names to free.
    #[inline]
    pub(crate) fn used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }

    /// Registers `pid` under `name`. See the module docs.
    pub(crate) fn register(
        &self,
        shared: &Shared,
        name: &str,
        pid: Pid,
    ) -> Result<(), RegisterError> {
        if !self.used() {
            self.used.store(true, Ordering::Relaxed);
        }
        let not_alive = |kind| RegisterError::NotAlive {
            name: name.to_owned(),
            pid,
            kind,
        };
        let cell = shared.live_cell(pid).map_err(not_alive)?;
        // Only for its lock: orders this registration against the end of `pid` (see
        // the module docs).
        let _ = cell.suspend_point();
        let mut holders = self.holders.write();
        let mut held = self.shard(pid).lock();
        if cell.is_done() {
            return Err(not_alive(SendErrorKind::Finished));
        }
        if let Some(&holder) = holders.get(name) {
            if holder == pid {
                return Ok(());
            }
            if shared.is_live(holder) {
                return Err(RegisterError::Taken {
                    name: name.to_owned(),
                    holder,
                });
            }
            // Its holder is done; its own end removes it from `held`.
        }
        let name: Arc<str> = Arc::from(name);
        holders.insert(name.clone(), pid);
        held.entry(pid).or_default().push(name);
        Ok(())
    }

    /// Frees `name`; returns the live process that held it.
    pub(crate) fn unregister(&self, shared: &Shared, name: &str) -> Option<Pid> {
        let mut holders = self.holders.write();
        let (name, holder) = holders.remove_entry(name)?;
        let mut held = self.shard(holder).lock();
        if let Some(names) = held.get_mut(&holder) {
            names.retain(|held| *held != name);
            if names.is_empty() {
                held.remove(&holder);
            }
        }
        drop(held);
        drop(holders);
        shared.is_live(holder).then_some(holder)
    }

    /// The live process registered under `name`.
    pub(crate) fn whereis(&self, shared: &Shared, name: &str) -> Option<Pid> {
        let holder = *self.holders.read().get(name)?;
        shared.is_live(holder).then_some(holder)
    }

    /// Sends `payload` from `from` to the process registered under `name`.
    pub(crate) fn send(
        &self,
        shared: &Shared,
        from: Option<Pid>,
        name: &str,
        payload: Payload,
    ) -> Result<(), SendNamedError> {
        let Some(holder) = self.whereis(shared, name) else {
            return Err(SendNamedError::new(
                name,
                SendNamedErrorKind::NotRegistered,
                payload,
            ));
        };
        shared.send_message(from, holder, payload).map_err(|error| {
            let kind = match error.kind() {
                SendErrorKind::MailboxFull => SendNamedErrorKind::MailboxFull(holder),
                _ => SendNamedErrorKind::HolderFinished(holder),
            };
            SendNamedError::new(name, kind, error.into_payload())
        })
    }

    /// Frees the names of `pid`, which has ended. Out of line: ends of processes
    /// without names should not carry it.
    #[inline(never)]
    pub(crate) fn release(&self, pid: Pid) {
        let Some(names) = self.shard(pid).lock().remove(&pid) else {
            return;
        };
        let mut holders = self.holders.write();
        for name in names {
            // Registered again since this process was done: the new holder keeps it.
            if holders.get(&name) == Some(&pid) {
                holders.remove(&name);
            }
        }
    }

    /// How many names are registered (held by live or ended processes; for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.holders.read().len()
    }

    /// How many processes hold names in the index (for tests).
    #[cfg(test)]
    pub(crate) fn holders(&self) -> usize {
        self.held.iter().map(|shard| shard.lock().len()).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use crate::runtime::tests::Inert;
    use crate::Scheduler;

    #[test]
    fn ends_skip_the_table_until_a_name_is_registered() {
        let s = Scheduler::builder().workers(2).build().unwrap();
        let handle = s.handle();
        let names = &handle.shared().names();
        for _ in 0..100 {
            let pid = s.spawn(Inert, "run", ()).unwrap();
            let _ = s.wait(pid);
        }
        assert!(!names.used(), "no end looked at the table");
        let pid = s.spawn(Inert, "run", ()).unwrap();
        let _ = s.register("first", pid);
        assert!(names.used(), "tried once: every end looks from now on");
        s.shutdown(Duration::from_secs(20));
    }

    /// The loom model's race (`runtime/tests/loom_names.rs`) on real threads, many
    /// times: another thread registers each process as it starts, while it ends at
    /// its first step; no name and no index entry may be left behind.
    #[test]
    fn registrations_racing_ends_leave_nothing_behind() {
        const ROUNDS: usize = 5_000;
        let s = Scheduler::builder().workers(2).build().unwrap();
        let handle = s.handle();
        let (tx, rx) = std::sync::mpsc::channel();
        let registered = std::thread::scope(|scope| {
            let handle = &handle;
            let registrar = scope.spawn(move || {
                rx.iter()
                    .filter(|(i, pid)| handle.register(&format!("p{i}"), *pid).is_ok())
                    .count()
            });
            for i in 0..ROUNDS {
                let pid = s.spawn(Inert, "run", ()).unwrap();
                tx.send((i, pid)).unwrap();
            }
            drop(tx);
            registrar.join().unwrap()
        });
        s.shutdown(Duration::from_secs(20));
        let names = &handle.shared().names();
        assert_eq!(
            (names.len(), names.holders()),
            (0, 0),
            "{registered} of {ROUNDS} registrations got in before their process ended"
        );
    }
}
