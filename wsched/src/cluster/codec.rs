//! Messages across nodes: the codecs their types are registered with, and PIDs
//! inside them.
//!
//! A message crosses as its codec's name and the text the codec made (see
//! [`Codecs`]). A PID inside a message — a `Pid` sent alone, or a field of a
//! `serde` type — must mean the same process on the other side, so while the
//! cluster encodes or decodes on a thread it sets that thread's *PID context*
//! (this node's identity): a PID is then written whole, as `name#incarnation/number`,
//! and read back into the reader's view (its own processes local, others through
//! the node table). Outside a cluster's encoding, PIDs stay plain numbers.

use std::cell::RefCell;

use crate::cluster::nodes::{self, NodeId};
use crate::error::BoxError;
use crate::observe::codecs::Codecs;
use crate::payload::Payload;
use crate::pid::{Pid, LOCAL_MASK};

thread_local! {
    /// This thread's PID context: the node encoding or decoding now, if any.
    static CONTEXT: RefCell<Option<NodeId>> = const { RefCell::new(None) };
}

/// Runs `f` with `me` as this thread's PID context.
pub(crate) fn with_context<R>(me: &NodeId, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<NodeId>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONTEXT.with(|c| *c.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(CONTEXT.with(|c| c.borrow_mut().replace(me.clone())));
    f()
}

/// `pid` written whole, if a PID context is set on this thread.
pub(crate) fn pid_text(pid: Pid) -> Option<String> {
    CONTEXT.with(|c| {
        let c = c.borrow();
        let me = c.as_ref()?;
        let bits = pid.as_u64() & LOCAL_MASK;
        let node = match pid.node_slot() {
            0 => me.clone(),
            slot => nodes::node_of_slot(slot)?,
        };
        Some(format!("{}#{}/{}", node.name(), node.incarnation(), bits))
    })
}

/// Reads a PID written by [`pid_text`] (or a plain number) into this node's view.
pub(crate) fn pid_from_text(text: &str) -> Result<Pid, BoxError> {
    let text = text.trim().trim_matches('"');
    let Some((node, bits)) = text.rsplit_once('/') else {
        return Ok(Pid::from_raw(text.parse()?));
    };
    let (name, incarnation) = node
        .rsplit_once('#')
        .ok_or_else(|| format!("a PID's node `{node}` has no `#incarnation`"))?;
    let node = NodeId::new(name.into(), incarnation.parse()?);
    let bits: u64 = bits.parse()?;
    if bits == 0 || bits & !LOCAL_MASK != 0 {
        return Err(format!("a PID's number {bits} is out of range").into());
    }
    let is_me = CONTEXT.with(|c| c.borrow().as_ref() == Some(&node));
    let slot = if is_me {
        0
    } else {
        nodes::slot_of(&node).map_err(|_| "this process has met too many nodes")?
    };
    Ok(Pid::from_raw(bits).with_node_slot(slot))
}

/// The codecs a cluster starts with: the standard ones, with PIDs written whole.
pub(crate) fn cluster_codecs(mut codecs: Codecs) -> Codecs {
    // Decoding a `&'static str` leaks its text: fine for a replayed history, not
    // for every message a node receives.
    codecs.remove::<&'static str>();
    codecs.insert::<Pid>(
        "Pid",
        false,
        |pid| Some(pid_text(*pid).unwrap_or_else(|| pid.as_u64().to_string())),
        pid_from_text,
    );
    codecs
}

/// Encodes `payload` for the wire: its codec's name and text, or `None` if its type
/// has no codec (or the codec could not encode it).
pub(crate) fn encode(codecs: &Codecs, me: &NodeId, payload: &Payload) -> Option<(String, String)> {
    let codec = codecs.codec_of(payload)?;
    with_context(me, || codec.encode(payload)).map(|encoded| (encoded.codec, encoded.text))
}

/// Decodes a message's text with the codec named `codec`.
pub(crate) fn decode(
    codecs: &Codecs,
    me: &NodeId,
    codec: &str,
    text: &str,
) -> Result<Payload, BoxError> {
    let codec = codecs
        .named(codec)
        .ok_or_else(|| format!("no codec named `{codec}` is registered on this node"))?;
    with_context(me, || codec.decode(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_written_whole_in_a_context_and_read_into_the_readers_view() {
        let (a, b) = (
            NodeId::new("codec-a".into(), 1),
            NodeId::new("codec-b".into(), 2),
        );
        let mine = Pid::from_raw((2 << 32) | 5);
        let text = with_context(&a, || pid_text(mine)).unwrap();
        assert_eq!(text, format!("codec-a#1/{}", mine.as_u64()));
        // At `b`, it is `a`'s process; back at `a`, its own again.
        let at_b = with_context(&b, || pid_from_text(&text)).unwrap();
        assert!(!at_b.is_local());
        assert_eq!(at_b.with_node_slot(0), mine);
        let back = with_context(&b, || pid_text(at_b)).unwrap();
        assert_eq!(with_context(&a, || pid_from_text(&back)).unwrap(), mine);
        assert_eq!(pid_text(mine), None, "no context, no translation");
    }
}
