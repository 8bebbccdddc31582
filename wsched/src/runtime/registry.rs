//! The PID table: which processes exist, for routing messages and claiming results.
//!
//! Sharded so that spawns, sends and finishes on different workers rarely meet on a
//! lock. A cell stays in the table from spawn until its result is handed out (to a
//! join or wait) or, for detached processes, until it finishes.

use std::collections::HashMap;

use super::cell::ProcessCell;
use crate::fast_hash::FastHash;
use crate::pid::Pid;
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::sync::Mutex;

const SHARDS: usize = 64;

type Shard = HashMap<Pid, Arc<ProcessCell>, FastHash>;

pub(crate) struct Registry {
    /// Padded: neighbouring shards on one cache line would make workers touching
    /// different processes contend anyway.
    shards: Box<[CachePadded<Mutex<Shard>>]>,
}

impl Registry {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
        }
    }

    fn shard(&self, pid: Pid) -> &Mutex<Shard> {
        &self.shards[(pid.as_u64() as usize) % SHARDS]
    }

    pub(crate) fn insert(&self, cell: Arc<ProcessCell>) {
        self.shard(cell.pid()).lock().insert(cell.pid(), cell);
    }

    pub(crate) fn get(&self, pid: Pid) -> Option<Arc<ProcessCell>> {
        self.shard(pid).lock().get(&pid).cloned()
    }

    /// Runs `f` on `pid`'s cell under its shard's lock, sparing the reference-count
    /// traffic of [`get`](Self::get) on the hot path of sends. `f` must be short and
    /// must not touch the registry.
    pub(crate) fn with<R>(&self, pid: Pid, f: impl FnOnce(&Arc<ProcessCell>) -> R) -> Option<R> {
        self.shard(pid).lock().get(&pid).map(f)
    }

    pub(crate) fn remove(&self, pid: Pid) {
        // Dropped outside the lock: the cell's last reference may go here.
        let removed = self.shard(pid).lock().remove(&pid);
        drop(removed);
    }

    /// Every cell in the table, shard by shard (not an atomic snapshot).
    pub(crate) fn cells(&self) -> Vec<Arc<ProcessCell>> {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            all.extend(shard.lock().values().cloned());
        }
        all
    }

    /// Forgets every cell (the scheduler is gone).
    pub(crate) fn clear(&self) {
        for shard in self.shards.iter() {
            let removed = std::mem::take(&mut *shard.lock());
            drop(removed);
        }
    }
}
