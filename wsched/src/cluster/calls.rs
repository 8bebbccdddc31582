//! Calls to processes on other nodes: `call!` and `Handle::call` with a remote PID.
//!
//! The caller's side is the local machinery unchanged (its monitor on the callee,
//! its timer, its slot); only the request crosses differently. A request type
//! `Request<Q, R>` registered with
//! [`ClusterConfig::register_call`](super::ClusterConfig::register_call) is split
//! as it leaves: `Q` crosses through its codec in a `Call` frame, and the call's
//! slot waits here under the call's number. On the callee's node the request is
//! rebuilt with a reply that forwards its answer, which crosses back in a `Reply`
//! frame into the slot. The callee's death reaches the caller through its monitor,
//! on the same ordered stream, so a `Down` never overtakes the reply before it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cluster::codec;
use crate::cluster::node::{Node, Peer};
use crate::cluster::nodes::NodeId;
use crate::cluster::wire::{Body, NoAnswer};
use crate::engine::shared::Shared;
use crate::error::{BoxError, SendError, SendErrorKind};
use crate::exit::ExitReason;
use crate::observe::codecs::Codecs;
use crate::payload::Payload;
use crate::pid::Pid;
use crate::services::calls::{Answer, CallSlot, Request};

/// Splits a `Request<Q, R>` into its slot and its request's codec text.
type SplitFn = fn(Payload, &Codecs, &NodeId) -> Result<(Option<Arc<CallSlot>>, String), Payload>;

/// Rebuilds a request from its text, with a forwarding reply.
type BuildFn =
    fn(&Codecs, &NodeId, &str, Box<dyn FnOnce(Answer) + Send>) -> Result<Payload, BoxError>;

/// How a registered request type crosses.
#[derive(Clone)]
pub(crate) struct CallType {
    /// The name it crosses under: its request's and answer's codec names.
    pub(crate) name: String,
    /// Splits a `Request<Q, R>` into its slot and its request's codec text.
    split: SplitFn,
    /// Rebuilds the request from its text, with a forwarding reply.
    build: BuildFn,
    /// The request's and the answer's types, which need codecs.
    types: [(TypeId, &'static str); 2],
}

impl CallType {
    pub(crate) fn of<Q: Any + Send, R: Any + Send>(name: String) -> (TypeId, Self) {
        fn split<Q: Any + Send, R: Any + Send>(
            payload: Payload,
            codecs: &Codecs,
            me: &NodeId,
        ) -> Result<(Option<Arc<CallSlot>>, String), Payload> {
            let request = payload
                .downcast::<Request<Q, R>>()
                .map_err(|e| e.into_payload())?;
            let (question, slot) = request.into_parts();
            let question = Payload::new(question);
            match codec::encode(codecs, me, &question) {
                Some((_, text)) => Ok((slot, text)),
                None => {
                    // Cannot cross after all: the caller is answered "no reply".
                    if let Some(slot) = slot {
                        slot.answer(Answer::NoReply);
                    }
                    Err(Payload::unit())
                }
            }
        }
        fn build<Q: Any + Send, R: Any + Send>(
            codecs: &Codecs,
            me: &NodeId,
            text: &str,
            forward: Box<dyn FnOnce(Answer) + Send>,
        ) -> Result<Payload, BoxError> {
            let codec = codecs
                .codec_for::<Q>()
                .ok_or("the request type has no codec on this node")?;
            let question = codec::with_context(me, || codec.decode(text))?
                .downcast::<Q>()
                .map_err(|_| "the request's codec made another type")?;
            Ok(Payload::new(Request::<Q, R>::forwarded(question, forward)))
        }
        (
            TypeId::of::<Request<Q, R>>(),
            Self {
                name,
                split: split::<Q, R>,
                build: build::<Q, R>,
                types: [
                    (TypeId::of::<Q>(), std::any::type_name::<Q>()),
                    (TypeId::of::<R>(), std::any::type_name::<R>()),
                ],
            },
        )
    }
}

impl CallType {
    /// The request's or the answer's type, if `codecs` has no codec for it.
    pub(crate) fn missing_codec(&self, codecs: &Codecs) -> Option<&'static str> {
        self.types
            .iter()
            .find(|(type_id, _)| !codecs.has_type(*type_id))
            .map(|(_, name)| *name)
    }
}

/// The registered request types, and the calls waiting for answers from other
/// nodes.
#[derive(Default)]
pub(crate) struct Calls {
    pub(crate) types: HashMap<TypeId, CallType>,
    by_name: HashMap<String, CallType>,
    /// Calls waiting: their slot, and the slot of the node called.
    waiting: Mutex<HashMap<u64, (Arc<CallSlot>, u16)>>,
}

impl Calls {
    pub(crate) fn new(types: HashMap<TypeId, CallType>) -> Self {
        let by_name = types
            .values()
            .map(|t| (t.name.clone(), t.clone()))
            .collect();
        Self {
            types,
            by_name,
            waiting: Mutex::default(),
        }
    }

    /// The answer to call `id` came back.
    pub(crate) fn answer(
        &self,
        node: &Node,
        me: &NodeId,
        id: u64,
        answer: Result<(String, String), NoAnswer>,
    ) {
        let Some((slot, _)) = self.waiting.lock().remove(&id) else {
            return;
        };
        let answer = match answer {
            Ok((codec_name, text)) => match codec::decode(&node.codecs, me, &codec_name, &text) {
                Ok(value) => Answer::Replied(value),
                Err(_) => Answer::NoReply,
            },
            Err(NoAnswer::Dropped | NoAnswer::NotEncodable) => Answer::NoReply,
        };
        slot.answer(answer);
    }

    /// Node `node` is down: its calls fail (their monitors say so too; the first
    /// answer wins).
    pub(crate) fn node_down(&self, node: u16) {
        let failed: Vec<Arc<CallSlot>> = {
            let mut waiting = self.waiting.lock();
            let ids: Vec<u64> = waiting
                .iter()
                .filter(|(_, (_, n))| *n == node)
                .map(|(id, _)| *id)
                .collect();
            ids.into_iter()
                .filter_map(|id| waiting.remove(&id).map(|(slot, _)| slot))
                .collect()
        };
        for slot in failed {
            slot.answer(Answer::CalleeDied(ExitReason::NoConnection));
        }
    }
}

/// A message for a remote process: if it is a registered request, sends it as a
/// call (`Some` with how that went); `None` if it is not a request, with the
/// payload untouched.
pub(crate) fn outgoing(
    node: &Node,
    peer: &Peer,
    from: Option<Pid>,
    to: Pid,
    payload: Payload,
) -> Result<Result<(), SendError>, Payload> {
    let Some(call_type) = node.calls.types.get(&payload.value_type_id()) else {
        return Err(payload);
    };
    let me = node.me();
    let (slot, text) = match (call_type.split)(payload, &node.codecs, &me) {
        Ok(parts) => parts,
        Err(payload) => {
            return Ok(Err(SendError::new(
                to,
                SendErrorKind::NotEncodable,
                payload,
            )))
        }
    };
    let id = node.next_id();
    if let Some(slot) = slot {
        node.calls.waiting.lock().insert(id, (slot, peer.slot));
    }
    node.send_to(
        peer,
        &Body::Call {
            id,
            to,
            from,
            codec: call_type.name.clone(),
            text,
        },
    );
    Ok(Ok(()))
}

/// A call from another node arrived: rebuilds the request with a reply that
/// answers back, and delivers it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn incoming(
    node: &Node,
    shared: &Shared,
    peer: &Peer,
    me: &NodeId,
    id: u64,
    to: Pid,
    from: Option<Pid>,
    codec_name: &str,
    text: &str,
) {
    let Some(call_type) = node.calls.by_name.get(codec_name) else {
        node.send_to(
            peer,
            &Body::Reply {
                id,
                answer: Err(NoAnswer::NotEncodable),
            },
        );
        return;
    };
    let caller = peer.id.clone();
    let answerer = node.me_weak();
    let forward: Box<dyn FnOnce(Answer) + Send> = Box::new(move |answer| {
        let Some(node) = answerer.upgrade() else {
            return;
        };
        let Some(peer) = node.peer_by_name(caller.name()).filter(|p| p.id == caller) else {
            return;
        };
        let answer = match answer {
            Answer::Replied(value) => {
                codec::encode(&node.codecs, &node.me(), &value).ok_or(NoAnswer::NotEncodable)
            }
            _ => Err(NoAnswer::Dropped),
        };
        node.send_to(&peer, &Body::Reply { id, answer });
    });
    match (call_type.build)(&node.codecs, me, text, forward) {
        Ok(request) => {
            if let Err(error) = shared.send_message(from, to, request) {
                // Dropped here: its reply answers "no reply" (the caller's monitor
                // has said why already).
                drop(error);
            }
        }
        Err(_) => node.send_to(
            peer,
            &Body::Reply {
                id,
                answer: Err(NoAnswer::NotEncodable),
            },
        ),
    }
}
