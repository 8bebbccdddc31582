//! Node identities, and the process-wide table that gives each a slot in PIDs.
//!
//! A PID names its node in [`NODE_BITS`](crate::pid::NODE_BITS) bits (see
//! [`Pid`]): 0 for the scheduler's own processes, and otherwise a slot of this
//! table, which maps to a node's name and incarnation. The table is shared by every
//! scheduler of the OS process (several nodes may live in one, as in tests on the
//! in-memory fabric), so a slot means the same node to all of them, and a PID prints
//! with its node's name. A slot is never reused: a PID of an old incarnation keeps
//! naming that incarnation, which is refused, rather than its successor.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock};

use parking_lot::RwLock;

use crate::pid::NODE_BITS;

/// One start of one node: its name and its incarnation, a number the cluster's
/// key-value store gives each start, larger than every earlier one. A PID of a
/// process carries its node's identity, so a message for a previous incarnation is
/// refused, never delivered to the new one.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    name: Arc<str>,
    incarnation: u64,
}

impl NodeId {
    pub(crate) fn new(name: Arc<str>, incarnation: u64) -> Self {
        Self { name, incarnation }
    }

    /// The node's name, as it joined the cluster.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// Which start of the node this is (1 for the first).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.name, self.incarnation)
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({self})")
    }
}

/// The largest slot: the node bits hold `0..=MAX_SLOT`, and 0 is "here".
const MAX_SLOT: usize = (1 << NODE_BITS) - 1;

#[derive(Default)]
struct Table {
    /// `by_slot[s - 1]` is slot `s`'s node.
    by_slot: Vec<NodeId>,
    by_id: HashMap<NodeId, u16>,
}

static TABLE: LazyLock<RwLock<Table>> = LazyLock::new(RwLock::default);

/// The table is full: this OS process has met [`MAX_SLOT`] node incarnations.
#[derive(Debug)]
pub(crate) struct TableFull;

/// The slot of `id`, given it now if it has none.
pub(crate) fn slot_of(id: &NodeId) -> Result<u16, TableFull> {
    if let Some(&slot) = TABLE.read().by_id.get(id) {
        return Ok(slot);
    }
    let mut table = TABLE.write();
    if let Some(&slot) = table.by_id.get(id) {
        return Ok(slot);
    }
    if table.by_slot.len() >= MAX_SLOT {
        return Err(TableFull);
    }
    table.by_slot.push(id.clone());
    let slot = table.by_slot.len() as u16;
    table.by_id.insert(id.clone(), slot);
    Ok(slot)
}

/// The node of slot `slot`, if it has one (0, "here", has none).
pub(crate) fn node_of_slot(slot: u16) -> Option<NodeId> {
    let index = usize::from(slot).checked_sub(1)?;
    TABLE.read().by_slot.get(index).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_keeps_its_slot_and_each_incarnation_has_its_own() {
        let first = NodeId::new("nodes-test".into(), 1);
        let again = NodeId::new("nodes-test".into(), 1);
        let second = NodeId::new("nodes-test".into(), 2);
        let slot = slot_of(&first).unwrap();
        assert_ne!(slot, 0);
        assert_eq!(slot_of(&again).unwrap(), slot);
        let next = slot_of(&second).unwrap();
        assert_ne!(
            next, slot,
            "a new incarnation is a new slot: old PIDs stay old"
        );
        assert_eq!(node_of_slot(slot), Some(first));
        assert_eq!(node_of_slot(next), Some(second));
        assert_eq!(node_of_slot(0), None);
        assert_eq!(NodeId::new("b".into(), 3).to_string(), "b#3");
    }
}
