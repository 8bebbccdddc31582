//! What a frame between two nodes holds, and its bytes.
//!
//! Every frame starts with a header: the format's version, the frame's kind, the
//! sender's identity (name and incarnation), the incarnation of the node it is for
//! (0 for a broadcast) and its sequence number on the sender's stream to that node
//! (0 for a broadcast). Sequence numbers start at 1 for each pair of incarnations
//! and go up by one, heartbeats included, so the receiver sees a lost frame as a
//! gap: the connection is then broken, and the peer declared down (see `node.rs`).
//!
//! A PID crosses in one of three forms, from the sender's view: its own process
//! (tag 0), one of the receiver's (tag 1), or a third node's (tag 2, with that
//! node's identity); the receiver turns each into its own view (see [`PidView`]).
//! Numbers are little-endian, strings a `u32` length and UTF-8 bytes.

use std::fmt;
use std::sync::Arc;

use crate::cluster::nodes::{self, NodeId};
use crate::error::Phase;
use crate::exit::ExitReason;
use crate::pid::{Pid, LOCAL_MASK};

/// The format's version: a frame of another is refused.
const VERSION: u8 = 1;

/// The kind of a [`Body::Refused`] frame, which a receiver reads before anything
/// else.
pub(crate) const REFUSED: u8 = 2;

/// The header of a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) from: NodeId,
    /// The incarnation of the node it is for; 0 for a broadcast.
    pub(crate) to_incarnation: u64,
    /// Its number on the sender's stream to that node; 0 for a broadcast.
    pub(crate) seq: u64,
}

/// Why a call to a remote process got no answer from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// The callee dropped the reply unanswered.
    Dropped,
    /// The answer's type has no codec on the callee's node.
    NotEncodable,
}

/// What a frame says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    /// "This node is here" (broadcast, for discovery).
    Announce,
    /// "Still here", on the ordered stream to one node.
    Heartbeat,
    /// "This incarnation is leaving": declare it down now, without waiting for its
    /// silence.
    Leave,
    /// "Your incarnation `incarnation` is down to me": its frames are refused.
    Refused { incarnation: u64 },
    /// A message for `to`. `codec` names the codec its text is for.
    Message {
        to: Pid,
        from: Option<Pid>,
        codec: String,
        text: String,
        signal: bool,
    },
    /// The sender's monitor `id` on `target`.
    Monitor { id: u64, target: Pid },
    /// The sender removed its monitor `id` on `target`.
    Demonitor { id: u64, target: Pid },
    /// The receiver's monitor `id` on `target` fired.
    Down {
        id: u64,
        target: Pid,
        reason: ExitReason,
    },
    /// `from` (the sender's) linked to `to` (the receiver's).
    Link { from: Pid, to: Pid },
    /// `from` unlinked from `to`.
    Unlink { from: Pid, to: Pid },
    /// The link signal of `from`'s end, for `to`.
    Exit {
        from: Pid,
        to: Pid,
        reason: ExitReason,
    },
    /// Cancel (`kill`: kill) `to`.
    Stop { to: Pid, kill: bool },
    /// A call: the request for `to`, answered by a `Reply` with the same `id`.
    Call {
        id: u64,
        to: Pid,
        from: Option<Pid>,
        codec: String,
        text: String,
    },
    /// The answer to the sender's call `id`: the value's codec and text.
    Reply {
        id: u64,
        answer: Result<(String, String), NoAnswer>,
    },
    /// Spawn a process of the entry registered as `entry`, with its arguments'
    /// text; answered by `Spawned` with the same `id`.
    Spawn {
        id: u64,
        entry: String,
        args: String,
    },
    /// The answer to spawn request `id`: the new process, or why not.
    Spawned {
        id: u64,
        result: Result<Pid, String>,
    },
}

/// How PIDs translate between the sender's view and the receiver's.
pub(crate) struct PidView<'a> {
    /// This node.
    pub(crate) me: &'a NodeId,
    /// The slot here of the other node of the frame (its receiver when encoding,
    /// its sender when decoding).
    pub(crate) peer_slot: u16,
}

/// A frame could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed frame: {}", self.0)
    }
}

// ---- writing -----------------------------------------------------------------------

/// Builds a frame's bytes.
pub(crate) struct Writer<'a> {
    bytes: Vec<u8>,
    view: Option<PidView<'a>>,
}

impl<'a> Writer<'a> {
    fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.bytes.extend_from_slice(
            &u32::try_from(s.len())
                .expect("a frame's string fits in 4 GiB")
                .to_le_bytes(),
        );
        self.bytes.extend_from_slice(s.as_bytes());
    }

    fn node(&mut self, id: &NodeId) {
        self.str(id.name());
        self.u64(id.incarnation());
    }

    fn pid(&mut self, pid: Pid) {
        let view = self
            .view
            .as_ref()
            .expect("a frame with PIDs has a receiver");
        let bits = pid.as_u64() & LOCAL_MASK;
        match pid.node_slot() {
            0 => {
                self.u8(0);
                self.u64(bits);
            }
            slot if slot == view.peer_slot => {
                self.u8(1);
                self.u64(bits);
            }
            slot => {
                // A third node's process: named in full. A slot always has a node.
                let node = nodes::node_of_slot(slot).expect("a PID's slot names a node");
                self.u8(2);
                self.node(&node);
                self.u64(bits);
            }
        }
    }

    fn option_pid(&mut self, pid: Option<Pid>) {
        match pid {
            None => self.u8(0),
            Some(pid) => {
                self.u8(1);
                self.pid(pid);
            }
        }
    }

    fn reason(&mut self, reason: &ExitReason) {
        match reason {
            ExitReason::Normal => self.u8(0),
            ExitReason::Error { message } => {
                self.u8(1);
                self.str(message);
            }
            ExitReason::Panicked { phase, message } => {
                self.u8(2);
                self.u8(match phase {
                    Phase::Init => 0,
                    Phase::Step => 1,
                    Phase::Close => 2,
                });
                self.str(message);
            }
            ExitReason::Cancelled => self.u8(3),
            ExitReason::Killed => self.u8(4),
            ExitReason::Linked { pid, reason } => {
                self.u8(5);
                self.pid(*pid);
                self.reason(reason);
            }
            ExitReason::NoSuchProcess => self.u8(6),
            ExitReason::NoConnection => self.u8(7),
        }
    }
}

/// The bytes of a frame: `header`, then `body`. `view` translates the body's PIDs
/// (needed unless the body has none: announces, heartbeats, refusals).
pub(crate) fn encode(header: &Header, body: &Body, view: Option<PidView<'_>>) -> Vec<u8> {
    let mut w = Writer {
        // The header and a small message's body: one allocation, no growth.
        bytes: Vec::with_capacity(HEADER_GUESS + header.from.name().len() + body_guess(body)),
        view,
    };
    w.u8(VERSION);
    w.u8(kind_of(body));
    w.node(&header.from);
    w.u64(header.to_incarnation);
    w.u64(header.seq);
    match body {
        Body::Announce | Body::Heartbeat | Body::Leave => {}
        Body::Refused { incarnation } => w.u64(*incarnation),
        Body::Message {
            to,
            from,
            codec,
            text,
            signal,
        } => {
            w.pid(*to);
            w.option_pid(*from);
            w.str(codec);
            w.str(text);
            w.u8(u8::from(*signal));
        }
        Body::Monitor { id, target } | Body::Demonitor { id, target } => {
            w.u64(*id);
            w.pid(*target);
        }
        Body::Down { id, target, reason } => {
            w.u64(*id);
            w.pid(*target);
            w.reason(reason);
        }
        Body::Link { from, to } | Body::Unlink { from, to } => {
            w.pid(*from);
            w.pid(*to);
        }
        Body::Exit { from, to, reason } => {
            w.pid(*from);
            w.pid(*to);
            w.reason(reason);
        }
        Body::Stop { to, kill } => {
            w.pid(*to);
            w.u8(u8::from(*kill));
        }
        Body::Call {
            id,
            to,
            from,
            codec,
            text,
        } => {
            w.u64(*id);
            w.pid(*to);
            w.option_pid(*from);
            w.str(codec);
            w.str(text);
        }
        Body::Reply { id, answer } => {
            w.u64(*id);
            match answer {
                Ok((codec, text)) => {
                    w.u8(0);
                    w.str(codec);
                    w.str(text);
                }
                Err(NoAnswer::Dropped) => w.u8(1),
                Err(NoAnswer::NotEncodable) => w.u8(2),
            }
        }
        Body::Spawn { id, entry, args } => {
            w.u64(*id);
            w.str(entry);
            w.str(args);
        }
        Body::Spawned { id, result } => {
            w.u64(*id);
            match result {
                Ok(pid) => {
                    w.u8(0);
                    w.pid(*pid);
                }
                Err(why) => {
                    w.u8(1);
                    w.str(why);
                }
            }
        }
    }
    w.bytes
}

/// A header's bytes but the sender's name.
const HEADER_GUESS: usize = 2 + 4 + 8 + 8 + 8;

/// About how many bytes `body` takes: exactly for the fixed parts, plus its
/// strings.
fn body_guess(body: &Body) -> usize {
    const PIDS: usize = 2 * 9 + 1;
    match body {
        Body::Message { codec, text, .. } | Body::Call { codec, text, .. } => {
            PIDS + 8 + 8 + codec.len() + text.len() + 1
        }
        Body::Reply {
            answer: Ok((codec, text)),
            ..
        } => 8 + 1 + 8 + codec.len() + text.len(),
        Body::Spawn { entry, args, .. } => 8 + 8 + entry.len() + args.len(),
        _ => 64,
    }
}

fn kind_of(body: &Body) -> u8 {
    match body {
        Body::Announce => 0,
        Body::Heartbeat => 1,
        Body::Refused { .. } => REFUSED,
        Body::Message { .. } => 3,
        Body::Monitor { .. } => 4,
        Body::Demonitor { .. } => 5,
        Body::Down { .. } => 6,
        Body::Link { .. } => 7,
        Body::Unlink { .. } => 8,
        Body::Exit { .. } => 9,
        Body::Stop { .. } => 10,
        Body::Call { .. } => 11,
        Body::Reply { .. } => 12,
        Body::Spawn { .. } => 13,
        Body::Spawned { .. } => 14,
        Body::Leave => 15,
    }
}

// ---- reading -----------------------------------------------------------------------

/// Reads a frame's bytes.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < n {
            return Err(Malformed("it ends too soon"));
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }

    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("eight bytes"),
        ))
    }

    fn str(&mut self) -> Result<&'a str, Malformed> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().expect("four bytes"));
        std::str::from_utf8(self.take(len as usize)?)
            .map_err(|_| Malformed("a string is not UTF-8"))
    }

    fn string(&mut self) -> Result<String, Malformed> {
        self.str().map(str::to_owned)
    }

    fn node(&mut self) -> Result<NodeId, Malformed> {
        let name: Arc<str> = self.str()?.into();
        Ok(NodeId::new(name, self.u64()?))
    }

    fn pid(&mut self, view: &PidView<'_>) -> Result<Pid, Malformed> {
        let tag = self.u8()?;
        let (slot, bits) = match tag {
            0 => (view.peer_slot, self.u64()?),
            1 => (0, self.u64()?),
            2 => {
                let node = self.node()?;
                let slot = if &node == view.me {
                    0
                } else {
                    nodes::slot_of(&node)
                        .map_err(|_| Malformed("this process has met too many nodes"))?
                };
                (slot, self.u64()?)
            }
            _ => return Err(Malformed("a PID's form is unknown")),
        };
        if bits == 0 || bits & !LOCAL_MASK != 0 {
            return Err(Malformed("a PID's number is out of range"));
        }
        Ok(Pid::from_raw(bits).with_node_slot(slot))
    }

    fn option_pid(&mut self, view: &PidView<'_>) -> Result<Option<Pid>, Malformed> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.pid(view).map(Some),
            _ => Err(Malformed("an optional PID's tag is unknown")),
        }
    }

    fn reason(&mut self, view: &PidView<'_>) -> Result<ExitReason, Malformed> {
        Ok(match self.u8()? {
            0 => ExitReason::Normal,
            1 => ExitReason::Error {
                message: self.string()?,
            },
            2 => {
                let phase = match self.u8()? {
                    0 => Phase::Init,
                    1 => Phase::Step,
                    2 => Phase::Close,
                    _ => return Err(Malformed("a panic's phase is unknown")),
                };
                ExitReason::Panicked {
                    phase,
                    message: self.string()?,
                }
            }
            3 => ExitReason::Cancelled,
            4 => ExitReason::Killed,
            5 => {
                let pid = self.pid(view)?;
                ExitReason::Linked {
                    pid,
                    reason: Box::new(self.reason(view)?),
                }
            }
            6 => ExitReason::NoSuchProcess,
            7 => ExitReason::NoConnection,
            _ => return Err(Malformed("an exit reason's kind is unknown")),
        })
    }
}

/// Reads a frame's header, and the reader positioned at its body (with its kind).
pub(crate) fn decode_header(bytes: &[u8]) -> Result<(Header, u8, Reader<'_>), Malformed> {
    let mut r = Reader { bytes };
    if r.u8()? != VERSION {
        return Err(Malformed("it is of another version of the format"));
    }
    let kind = r.u8()?;
    let from = r.node()?;
    let to_incarnation = r.u64()?;
    let seq = r.u64()?;
    Ok((
        Header {
            from,
            to_incarnation,
            seq,
        },
        kind,
        r,
    ))
}

/// Reads a frame's body of kind `kind`, translating its PIDs through `view`.
pub(crate) fn decode_body(
    kind: u8,
    mut r: Reader<'_>,
    view: &PidView<'_>,
) -> Result<Body, Malformed> {
    let body = match kind {
        0 => Body::Announce,
        1 => Body::Heartbeat,
        2 => Body::Refused {
            incarnation: r.u64()?,
        },
        3 => Body::Message {
            to: r.pid(view)?,
            from: r.option_pid(view)?,
            codec: r.string()?,
            text: r.string()?,
            signal: r.u8()? != 0,
        },
        4 => Body::Monitor {
            id: r.u64()?,
            target: r.pid(view)?,
        },
        5 => Body::Demonitor {
            id: r.u64()?,
            target: r.pid(view)?,
        },
        6 => Body::Down {
            id: r.u64()?,
            target: r.pid(view)?,
            reason: r.reason(view)?,
        },
        7 => Body::Link {
            from: r.pid(view)?,
            to: r.pid(view)?,
        },
        8 => Body::Unlink {
            from: r.pid(view)?,
            to: r.pid(view)?,
        },
        9 => Body::Exit {
            from: r.pid(view)?,
            to: r.pid(view)?,
            reason: r.reason(view)?,
        },
        10 => Body::Stop {
            to: r.pid(view)?,
            kill: r.u8()? != 0,
        },
        11 => Body::Call {
            id: r.u64()?,
            to: r.pid(view)?,
            from: r.option_pid(view)?,
            codec: r.string()?,
            text: r.string()?,
        },
        12 => {
            let id = r.u64()?;
            let answer = match r.u8()? {
                0 => Ok((r.string()?, r.string()?)),
                1 => Err(NoAnswer::Dropped),
                2 => Err(NoAnswer::NotEncodable),
                _ => return Err(Malformed("a reply's form is unknown")),
            };
            Body::Reply { id, answer }
        }
        13 => Body::Spawn {
            id: r.u64()?,
            entry: r.string()?,
            args: r.string()?,
        },
        14 => {
            let id = r.u64()?;
            let result = match r.u8()? {
                0 => Ok(r.pid(view)?),
                1 => Err(r.string()?),
                _ => return Err(Malformed("a spawn's answer is unknown")),
            };
            Body::Spawned { id, result }
        }
        15 => Body::Leave,
        _ => return Err(Malformed("its kind is unknown")),
    };
    if !r.bytes.is_empty() {
        return Err(Malformed("bytes follow its end"));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes `body` from `a` to `b` and decodes it at `b`.
    fn cross(a: &NodeId, b: &NodeId, body: &Body) -> (Header, Body) {
        let (a_at_b, b_at_a) = (nodes::slot_of(a).unwrap(), nodes::slot_of(b).unwrap());
        let header = Header {
            from: a.clone(),
            to_incarnation: b.incarnation(),
            seq: 7,
        };
        let bytes = encode(
            &header,
            body,
            Some(PidView {
                me: a,
                peer_slot: b_at_a,
            }),
        );
        let (read, kind, r) = decode_header(&bytes).unwrap();
        let view = PidView {
            me: b,
            peer_slot: a_at_b,
        };
        (read, decode_body(kind, r, &view).unwrap())
    }

    #[test]
    fn pids_cross_into_the_receivers_view() {
        let (a, b, c) = (
            NodeId::new("wire-a".into(), 1),
            NodeId::new("wire-b".into(), 4),
            NodeId::new("wire-c".into(), 2),
        );
        let (a_slot, c_slot) = (nodes::slot_of(&a).unwrap(), nodes::slot_of(&c).unwrap());
        let b_slot = nodes::slot_of(&b).unwrap();
        let mine = Pid::from_raw((3 << 32) | 12);
        let theirs = Pid::from_raw(5).with_node_slot(b_slot);
        let third = Pid::from_raw(9).with_node_slot(c_slot);
        let body = Body::Exit {
            from: mine,
            to: theirs,
            reason: ExitReason::Linked {
                pid: third,
                reason: Box::new(ExitReason::Panicked {
                    phase: Phase::Step,
                    message: "boom".into(),
                }),
            },
        };
        let (header, read) = cross(&a, &b, &body);
        assert_eq!(header.from, a);
        assert_eq!((header.to_incarnation, header.seq), (4, 7));
        assert_eq!(
            read,
            Body::Exit {
                from: mine.with_node_slot(a_slot),
                to: Pid::from_raw(5),
                reason: ExitReason::Linked {
                    pid: third,
                    reason: Box::new(ExitReason::Panicked {
                        phase: Phase::Step,
                        message: "boom".into()
                    }),
                },
            }
        );
    }

    #[test]
    fn every_body_round_trips() {
        let (a, b) = (
            NodeId::new("wire-d".into(), 1),
            NodeId::new("wire-e".into(), 1),
        );
        let b_slot = nodes::slot_of(&b).unwrap();
        let at_b = Pid::from_raw(2).with_node_slot(b_slot);
        let bodies = [
            Body::Announce,
            Body::Heartbeat,
            Body::Refused { incarnation: 3 },
            Body::Message {
                to: at_b,
                from: None,
                codec: "u32".into(),
                text: "7".into(),
                signal: true,
            },
            Body::Monitor {
                id: 1,
                target: at_b,
            },
            Body::Demonitor {
                id: 1,
                target: at_b,
            },
            Body::Link {
                from: Pid::from_raw(1),
                to: at_b,
            },
            Body::Stop {
                to: at_b,
                kill: true,
            },
            Body::Reply {
                id: 4,
                answer: Err(NoAnswer::Dropped),
            },
            Body::Reply {
                id: 5,
                answer: Ok(("String".into(), "hi".into())),
            },
            Body::Spawned {
                id: 6,
                result: Err("no entry".into()),
            },
        ];
        for body in bodies {
            let (_, read) = cross(&a, &b, &body);
            // PIDs of `b` come back local to `b`; compare kinds and plain fields.
            assert_eq!(kind_of(&read), kind_of(&body), "{body:?}");
        }
    }

    #[test]
    fn malformed_frames_are_refused_with_a_reason() {
        assert!(decode_header(&[]).is_err());
        assert_eq!(
            decode_header(&[9, 0]).err(),
            Some(Malformed("it is of another version of the format"))
        );
        let a = NodeId::new("wire-f".into(), 1);
        let mut bytes = encode(
            &Header {
                from: a.clone(),
                to_incarnation: 0,
                seq: 0,
            },
            &Body::Announce,
            None,
        );
        bytes.push(0);
        let (_, kind, r) = decode_header(&bytes).unwrap();
        let view = PidView {
            me: &a,
            peer_slot: 0,
        };
        assert_eq!(
            decode_body(kind, r, &view),
            Err(Malformed("bytes follow its end"))
        );
    }
}
