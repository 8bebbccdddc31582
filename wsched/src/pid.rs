//! Process identifiers.

use std::fmt;
use std::num::NonZeroU64;

/// The identifier of a process: unique for the lifetime of the scheduler that issued
/// it and never reused, so a stale PID can only ever name the process it was issued
/// for (and then reports that process as finished).
///
/// Printed as `<N>`, or as `<N.G>` for the `G`-th later process to reuse the place
/// `N` of an ended one in the scheduler's PID table (`<3.1>` follows `<3>`): the
/// number behind it ([`as_u64`](Self::as_u64)) packs both, and would print as a
/// ten-digit number. A PID of a process on another node of a cluster (the
/// `cluster` feature) prints with the node's name, `<3@b>`, and its `Debug` form
/// with the node's incarnation too, `Pid<3@b#2>`: a PID of an old incarnation and
/// the same place under the new one are different processes.
///
/// # The number
///
/// From the low bits up: 32 bits of place, 20 bits of generation, and 12 bits
/// naming the node — zero for this scheduler's own processes, so
/// whether a PID is local is one comparison, and a remote PID never matches a
/// local slot (its generation bits differ), which keeps the send path's lookup as
/// it is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(NonZeroU64);

/// Bits of a PID's number that count the reuses of its place (see [`Pid`]).
pub(crate) const GENERATION_BITS: u32 = 20;

/// Bits of a PID's number that name its node (see [`Pid`]): 0 is this scheduler's
/// own; others index the process-wide table of nodes met in a cluster.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) const NODE_BITS: u32 = 12;

/// Where the node bits start.
pub(crate) const NODE_SHIFT: u32 = 32 + GENERATION_BITS;

/// The largest generation a place reaches before it is retired.
pub(crate) const MAX_GENERATION: u32 = (1 << GENERATION_BITS) - 1;

/// What the layer that reaches other nodes (the cluster) tells this file about
/// remote PIDs: set once, when a scheduler first joins a cluster, so that the
/// crate root needs nothing from the layers above it.
pub(crate) struct RemotePids {
    /// The name and incarnation of the node of slot `slot`, if it has one.
    pub(crate) node_of: fn(u16) -> Option<(std::sync::Arc<str>, u64)>,
    /// A PID written whole, if a cluster is encoding on this thread.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) to_text: fn(Pid) -> Option<String>,
    /// A PID read back from its whole form.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) from_text: fn(&str) -> Result<Pid, crate::error::BoxError>,
}

/// See [`RemotePids`].
pub(crate) static REMOTE_PIDS: std::sync::OnceLock<RemotePids> = std::sync::OnceLock::new();

/// The bits of a PID's number that say where on its node it lives.
pub(crate) const LOCAL_MASK: u64 = (1 << NODE_SHIFT) - 1;

impl Pid {
    /// Builds a PID from its number. PIDs normally come from the scheduler or the
    /// [`testing`](crate::testing) harness; this exists for tests and diagnostics.
    ///
    /// # Panics
    /// If `n` is zero: PID numbers start at 1.
    pub fn from_raw(n: u64) -> Self {
        Self(NonZeroU64::new(n).expect("PID numbers start at 1"))
    }

    /// What a process's cell holds before the process is spawned (never issued).
    pub(crate) const UNSPAWNED: Pid = Pid(NonZeroU64::MAX);

    /// The PID's number.
    pub fn as_u64(self) -> u64 {
        self.0.get()
    }

    /// Whether the process lives on this scheduler: `false` only for PIDs of
    /// processes on other nodes of a cluster (the `cluster` feature).
    #[inline(always)]
    pub fn is_local(self) -> bool {
        self.0.get() >> NODE_SHIFT == 0
    }

    /// The slot of the node the process lives on (0: this scheduler).
    #[inline(always)]
    pub(crate) fn node_slot(self) -> u16 {
        (self.0.get() >> NODE_SHIFT) as u16
    }

    /// Why a remote PID cannot be reached when its node is not up: a PID of a node
    /// this process has met names a process that may still live there (no
    /// connection); any other (made up, or of no cluster) names no process.
    pub(crate) fn unreachable_kind(self) -> crate::error::SendErrorKind {
        let known = REMOTE_PIDS
            .get()
            .is_some_and(|hooks| (hooks.node_of)(self.node_slot()).is_some());
        if known {
            crate::error::SendErrorKind::NoConnection
        } else {
            crate::error::SendErrorKind::NoSuchProcess
        }
    }

    /// [`unreachable_kind`](Self::unreachable_kind) as a monitor's or link's reason.
    pub(crate) fn unreachable_reason(self) -> crate::exit::ExitReason {
        match self.unreachable_kind() {
            crate::error::SendErrorKind::NoConnection => crate::exit::ExitReason::NoConnection,
            _ => crate::exit::ExitReason::NoSuchProcess,
        }
    }

    /// This PID's place and generation with node slot `slot`: how a PID is
    /// translated between nodes.
    #[inline]
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn with_node_slot(self, slot: u16) -> Pid {
        Pid::from_raw((self.0.get() & LOCAL_MASK) | (u64::from(slot) << NODE_SHIFT))
    }
}

impl Pid {
    /// Writes `N` or `N.G` (see the type's docs), then `@node` for a remote PID
    /// (`@node#incarnation` if `incarnation`).
    fn write_number(self, f: &mut fmt::Formatter<'_>, incarnation: bool) -> fmt::Result {
        let raw = self.0.get();
        let (place, generation) = (raw & u64::from(u32::MAX), (raw & LOCAL_MASK) >> 32);
        if generation == 0 {
            write!(f, "{place}")?;
        } else {
            write!(f, "{place}.{generation}")?;
        }
        match self.node_slot() {
            0 => Ok(()),
            slot => match REMOTE_PIDS.get().and_then(|hooks| (hooks.node_of)(slot)) {
                Some((name, n)) if incarnation => write!(f, "@{name}#{n}"),
                Some((name, _)) => write!(f, "@{name}"),
                None => write!(f, "@node{slot}"),
            },
        }
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<")?;
        self.write_number(f, false)?;
        f.write_str(">")
    }
}

impl fmt::Debug for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pid<")?;
        self.write_number(f, true)?;
        f.write_str(">")
    }
}

/// As its number, or — while a cluster encodes a message that crosses nodes (the
/// `cluster` feature) — whole, with its node's name and incarnation, so that it
/// names the same process on the other side.
#[cfg(feature = "serde")]
impl serde::Serialize for Pid {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Some(text) = REMOTE_PIDS.get().and_then(|hooks| (hooks.to_text)(*self)) {
            return serializer.serialize_str(&text);
        }
        serializer.serialize_u64(self.as_u64())
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Pid {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Pid;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a PID: its number, or `node#incarnation/number`")
            }

            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Pid, E> {
                std::num::NonZeroU64::new(n)
                    .map(Pid)
                    .ok_or_else(|| E::custom("PID numbers start at 1"))
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Pid, E> {
                match REMOTE_PIDS.get() {
                    Some(hooks) => (hooks.from_text)(text).map_err(E::custom),
                    None => Err(E::custom(
                        "a PID of another node, and this process is in no cluster",
                    )),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_printable_and_round_trip() {
        let (p1, p2) = (Pid::from_raw(1), Pid::from_raw(2));
        assert!(p1 < p2);
        assert_eq!(p1.to_string(), "<1>");
        assert_eq!(format!("{p2:?}"), "Pid<2>");
        assert_eq!(Pid::from_raw(p2.as_u64()), p2);
    }

    #[test]
    fn a_reused_place_prints_with_its_generation_not_as_one_big_number() {
        let reused = Pid::from_raw((1 << 32) | 3);
        assert_eq!(reused.to_string(), "<3.1>");
        assert_eq!(format!("{reused:?}"), "Pid<3.1>");
        assert_eq!(Pid::from_raw((7 << 32) | 12).to_string(), "<12.7>");
    }

    #[test]
    fn the_node_bits_say_whether_a_pid_is_local_and_translate_alone() {
        let local = Pid::from_raw((7 << 32) | 12);
        assert!(local.is_local());
        assert_eq!(local.node_slot(), 0);
        let remote = local.with_node_slot(5);
        assert!(!remote.is_local());
        assert_eq!(remote.node_slot(), 5);
        assert_eq!(remote.with_node_slot(0), local, "place and generation kept");
        assert!(Pid::from_raw(u64::from(MAX_GENERATION) << 32 | 1).is_local());
    }
}
