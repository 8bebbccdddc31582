//! Messages a process took in but has not received, for listings.
//!
//! A `#[process]` moves the messages of each step out of its cell's mailbox into its
//! own buffer, from which `recv!` takes them. A message of a type no `recv!` asks
//! for stays in that buffer: the classic "why is my process stuck" message. The
//! buffer lives inside the process (only its owner may touch it), so the process
//! publishes a summary of it here, by type, for
//! [`Scheduler::processes`](crate::Scheduler::processes) to show.
//!
//! # Costs
//!
//! Nothing for a process whose buffer is empty after its steps (every process that
//! receives what it is sent): it publishes only when its buffer's contents changed
//! and are not empty, or became empty (see `Machine::publish_held`). A process that holds
//! messages publishes on the steps that change them: one lock of one of [`SHARDS`]
//! shards, picked by PID, so that processes on different workers rarely meet.
//! Not kept in the cell: every process would pay a word for what few use.
//!
//! The end of a process forgets its entry (whatever its last step left), at the
//! cost of a relaxed load until some process first publishes. Publishing and
//! forgetting are both done by the process's owner, in order, so they never race.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_utils::CachePadded;

use crate::fast_hash::FastHash;
use crate::pid::Pid;
use crate::sync::Mutex;

const SHARDS: usize = 16;

type Shard = HashMap<Pid, Box<[MessageCount]>, FastHash>;

pub(crate) struct HeldMessages {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    /// Whether anything was ever published: until then an end has nothing to
    /// forget. A statistic's flag, so a plain std atomic even under loom.
    used: CachePadded<AtomicBool>,
}

impl HeldMessages {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Default::default()).collect(),
            used: Default::default(),
        }
    }

    fn shard(&self, pid: Pid) -> &Mutex<Shard> {
        &self.shards[pid.as_u64() as usize % SHARDS]
    }

    /// Replaces what `pid` holds with `held`; an empty summary forgets the process.
    pub(crate) fn publish(&self, pid: Pid, held: Vec<MessageCount>) {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
        let mut shard = self.shard(pid).lock();
        if held.is_empty() {
            shard.remove(&pid);
        } else {
            shard.insert(pid, held.into_boxed_slice());
        }
    }

    /// Forgets `pid`, which ended.
    #[inline]
    pub(crate) fn forget(&self, pid: Pid) {
        if self.used.load(Ordering::Relaxed) {
            self.shard(pid).lock().remove(&pid);
        }
    }

    /// Adds what `pid` holds to `summary`.
    pub(crate) fn add_to(&self, pid: Pid, summary: &mut Vec<MessageCount>) {
        if let Some(held) = self.shard(pid).lock().get(&pid) {
            for count in held.iter() {
                add_messages(summary, count.type_name, count.count);
            }
        }
    }
}

/// How many waiting messages of one type a process has (see
/// [`ProcessInfo::waiting_messages`](crate::ProcessInfo::waiting_messages)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageCount {
    /// The messages' type, as [`Payload::type_name`](crate::Payload::type_name)
    /// names it.
    pub type_name: &'static str,
    /// How many there are.
    pub count: usize,
}

impl MessageCount {
    pub(crate) fn new(type_name: &'static str, count: usize) -> Self {
        Self { type_name, count }
    }
}

/// Counts `count` messages of type `type_name` in `summary` (types in order of first
/// appearance).
pub(crate) fn add_messages(summary: &mut Vec<MessageCount>, type_name: &'static str, count: usize) {
    match summary.iter_mut().find(|c| c.type_name == type_name) {
        Some(existing) => existing.count += count,
        None => summary.push(MessageCount::new(type_name, count)),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_summary_counts_by_type_in_order_of_first_appearance() {
        let mut summary = Vec::new();
        for name in ["u64", "String", "u64", "u64", "()"] {
            add_messages(&mut summary, name, 1);
        }
        assert_eq!(
            summary,
            [
                MessageCount::new("u64", 3),
                MessageCount::new("String", 1),
                MessageCount::new("()", 1)
            ]
        );
    }

    #[test]
    fn publishing_replaces_and_an_empty_summary_forgets() {
        let held = HeldMessages::new();
        let pid = Pid::from_raw(7);
        held.publish(pid, vec![MessageCount::new("u64", 2)]);
        held.publish(pid, vec![MessageCount::new("String", 1)]);
        let mut summary = vec![MessageCount::new("String", 4)];
        held.add_to(pid, &mut summary);
        assert_eq!(summary, [MessageCount::new("String", 5)]);
        held.publish(pid, Vec::new());
        let mut summary = Vec::new();
        held.add_to(pid, &mut summary);
        assert!(summary.is_empty());
    }
}
