//! UDP sockets as processes, the Erlang way.
//!
//! A [`UdpSocket`] is bound at once ([`UdpSocket::bind`]) and owned by a process,
//! the one [`set_owner`](UdpSocket::set_owner) names. The socket lives as long as
//! its `UdpSocket` (which the owner keeps in its state or its entry's locals) and is
//! closed when it is dropped: when its process ends, however it ends.
//!
//! * **Receiving is flow-controlled**, as Erlang's `{active, once}`: nothing is
//!   received until the owner asks. [`UdpSocket::active_once`] lets the socket
//!   receive one datagram, which arrives as a [`UdpEvent::Datagram`] message (a
//!   receive error as [`UdpEvent::Error`]). At most as many datagrams are in the
//!   owner's mailbox as it asked for; the rest wait in the system's buffer (and are
//!   dropped by the system when it is full, as UDP does).
//! * **Sending is a command**: `yield_cmd!(socket.send_to(bytes, addr))`
//!   ([`UdpSend`]) suspends the process until the datagram is handed to the system.
//!   Its handler is built in.
//! * **Timeouts** are the scheduler's own: `recv!(UdpEvent, timeout = d)`. UDP loses
//!   datagrams; a process that waits for an answer should say how long.
//!
//! All of it runs on the scheduler's I/O runtime (see
//! [`Builder::io_threads`](crate::Builder::io_threads)): the receiver of each socket
//! is a tokio task, a send that cannot go out at once is a future of the built-in
//! async handler. Processes never block.
//!
//! # Example
//!
//! A process that answers each datagram with the same bytes in upper case, and a
//! second socket, owned by another process, that asks it.
//!
//! ```
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use wsched::io::udp::{UdpEvent, UdpSocket};
//! use wsched::prelude::*;
//! use wsched::{Handle, Scheduler};
//!
//! struct Upper;
//!
//! #[process]
//! impl Upper {
//!     /// Answers one datagram.
//!     #[entry]
//!     fn serve(&mut self, socket: UdpSocket) -> Result<(), BoxError> {
//!         socket.set_owner(this::pid()); // its datagrams come here
//!         socket.active_once(); // one datagram, please
//!         match recv!(UdpEvent)? {
//!             UdpEvent::Datagram { from, bytes, .. } => {
//!                 yield_cmd!(socket.send_to(bytes.to_ascii_uppercase(), from))?;
//!                 Ok(())
//!             }
//!             UdpEvent::Error { error, .. } => Err(error.into()),
//!         }
//!     }
//! }
//!
//! struct Ask {
//!     handle: Handle,
//! }
//!
//! #[process]
//! impl Ask {
//!     /// Sends `question` to `server`, returns the answer.
//!     #[entry]
//!     fn ask(&mut self, server: SocketAddr, question: String) -> Result<Vec<u8>, BoxError> {
//!         let socket = UdpSocket::bind(&self.handle, "127.0.0.1:0")?;
//!         socket.set_owner(this::pid());
//!         yield_cmd!(socket.send_to(question, server))?;
//!         socket.active_once();
//!         match recv!(UdpEvent, timeout = Duration::from_secs(10))? {
//!             UdpEvent::Datagram { bytes, .. } => Ok(bytes),
//!             UdpEvent::Error { error, .. } => Err(error.into()),
//!         }
//!     }
//! }
//!
//! let scheduler = Scheduler::builder().workers(2).build()?;
//! let server = UdpSocket::bind(&scheduler.handle(), "127.0.0.1:0")?;
//! let server_addr = server.local_addr();
//! let upper = scheduler.spawn(Upper, Upper::SERVE, (server,))?;
//! let ask = Ask { handle: scheduler.handle() };
//! let ask = scheduler.spawn(ask, Ask::ASK, (server_addr, "ping".to_string()))?;
//! let answer = scheduler.wait_timeout(ask, Duration::from_secs(10))?;
//! assert_eq!(answer.downcast::<Vec<u8>>().unwrap(), b"PING");
//! scheduler.wait_timeout(upper, Duration::from_secs(10))?; // its socket is closed
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;

use parking_lot::RwLock;
use tokio::net::UdpSocket as TokioSocket;
use tokio::task::AbortHandle;

use super::active::Active;
use super::handler::{AsyncOptions, AsyncRegistration};
use crate::engine::handle::Handle;
use crate::engine::process::{panic_message, Command};
use crate::pid::Pid;

pub use super::active::DEFAULT_READ_CHUNK;

// ===== SocketId =====

/// A small identifier of a UDP socket, unique in the program: what tells apart the
/// [`UdpEvent`]s of several sockets in one mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SocketId(u64);

impl SocketId {
    fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The identifier as a number (sockets are numbered from 1, in the order they
    /// were bound).
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for SocketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "udp#{}", self.0)
    }
}

// ===== UdpEvent =====

/// What a socket sends its owner: one message per [`UdpSocket::active_once`].
///
/// Receive it with `recv!(UdpEvent)` (or an arm of `recv! { … }`), and match:
///
/// ```
/// # use wsched::io::udp::UdpEvent;
/// # fn handle(event: UdpEvent) {
/// match event {
///     UdpEvent::Datagram { socket, from, bytes } => {
///         println!("{socket}: {} bytes from {from}", bytes.len())
///     }
///     UdpEvent::Error { socket, error } => println!("{socket}: {error}"),
/// }
/// # }
/// ```
#[derive(Debug)]
pub enum UdpEvent {
    /// One datagram, whole if it fits in the socket's
    /// [read chunk](UdpSocket::set_read_chunk): the rest of a longer one is lost
    /// (most systems drop it; some report an [`Error`](Self::Error) instead). It
    /// may be empty: UDP has empty datagrams.
    Datagram {
        /// The socket that received it.
        socket: SocketId,
        /// Who sent it.
        from: SocketAddr,
        /// What it carried. Its capacity may exceed its length: a small buffer a
        /// send of the socket gave back is reused (at most 1 KiB).
        bytes: Vec<u8>,
    },
    /// Receiving failed. The socket goes on: the next
    /// [`active_once`](UdpSocket::active_once) receives again (some systems report
    /// an earlier send's failure, such as an unreachable port, this way).
    Error {
        /// The socket.
        socket: SocketId,
        /// Why.
        error: io::Error,
    },
}

impl UdpEvent {
    /// The socket the event is about.
    pub fn socket(&self) -> SocketId {
        match self {
            Self::Datagram { socket, .. } | Self::Error { socket, .. } => *socket,
        }
    }
}

// ===== Shared: what a socket's parts share =====

/// One socket, shared by its [`UdpSocket`], its receiver task and the sends.
struct Shared {
    id: SocketId,
    /// The socket, until it is closed. The receiver and the sends hold the lock for
    /// one poll or one system call at a time, never across an await, so that
    /// closing takes the socket out — and closes it — at once, wherever the tasks
    /// are.
    socket: RwLock<Option<TokioSocket>>,
    /// The `{active, once}` protocol with the owner (see `active.rs`).
    active: Active,
}

impl Shared {
    fn close(&self) {
        let socket = self.socket.write().take();
        drop(socket);
    }

    fn closed(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotConnected,
            format!("{} is closed: its UdpSocket was dropped", self.id),
        )
    }

    /// Receives one datagram if the socket has one now, without waiting
    /// (`WouldBlock` if not): `None` when the socket was closed. Receives into this
    /// thread's scratch buffer and copies the datagram into a vector of its size,
    /// so that neither an idle socket nor a small datagram holds a chunk-sized
    /// allocation.
    fn try_recv(&self) -> Option<io::Result<(Vec<u8>, SocketAddr)>> {
        self.active.read_scratch(|buffer| {
            let socket = self.socket.read();
            socket.as_ref().map(|socket| socket.try_recv_from(buffer))
        })
    }

    /// Receives one datagram, waiting for it: `None` when the socket was closed.
    async fn recv(&self) -> Option<io::Result<(Vec<u8>, SocketAddr)>> {
        loop {
            let ready = poll_fn(|cx| match &*self.socket.read() {
                Some(socket) => socket.poll_recv_ready(cx).map(Some),
                None => Poll::Ready(None),
            })
            .await?;
            if let Err(error) = ready {
                return Some(Err(error));
            }
            match self.try_recv()? {
                // The readiness was stale: wait again.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                received => return Some(received),
            }
        }
    }

    fn event(&self, received: io::Result<(Vec<u8>, SocketAddr)>) -> UdpEvent {
        let socket = self.id;
        match received {
            Ok((bytes, from)) => UdpEvent::Datagram {
                socket,
                from,
                bytes,
            },
            Err(error) => UdpEvent::Error { socket, error },
        }
    }

    /// Sends `event` to `owner`. One that cannot be delivered (the owner has ended,
    /// or its bounded mailbox refuses it) is dropped, as the network may drop a
    /// datagram: unlike a byte stream's, the next datagrams are worth as much.
    fn send(&self, owner: Pid, event: UdpEvent) {
        let _ = self.active.handle.send(owner, event);
    }

    /// Sends `send.bytes` now if the socket takes it, on the worker that dispatches
    /// the send: `None` when it must wait for the socket.
    fn try_send_now(&self, send: &UdpSend) -> Option<io::Result<usize>> {
        let sent = match &*self.socket.read() {
            Some(socket) => socket.try_send_to(&send.bytes, send.to),
            None => return Some(Err(self.closed())),
        };
        match sent {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => None,
            sent => Some(sent.map_err(|error| send.failed(error))),
        }
    }

    /// Sends `send.bytes`, waiting for the socket to take it.
    async fn send_to(&self, send: &UdpSend) -> io::Result<usize> {
        loop {
            poll_fn(|cx| match &*self.socket.read() {
                Some(socket) => socket.poll_send_ready(cx),
                None => Poll::Ready(Err(self.closed())),
            })
            .await?;
            let sent = match &*self.socket.read() {
                Some(socket) => socket
                    .try_send_to(&send.bytes, send.to)
                    .map_err(|error| send.failed(error)),
                None => Err(self.closed()),
            };
            match sent {
                // The readiness was stale: wait again.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                sent => return sent,
            }
        }
    }
}

/// A socket's receiver: one datagram per permit, sent to the owner.
///
/// It waits for a datagram to be there first, and for a permit after, as a TCP
/// connection's reader does: a process that asks for its next datagram once it is
/// there receives it itself ([`UdpSocket::active_once`]), and the permit it gives
/// when nothing is there yet finds this task waiting on the socket, not on the
/// permit, so giving it wakes no thread.
///
/// The wait is a peek of the sender's address (`poll_peek_sender`), not the
/// socket's readiness (`poll_recv_ready`): readiness stays set after a receive
/// that emptied the socket until a receive finds nothing, so after the owner
/// received on the spot it would be stale, and this task would go on to wait on
/// the permit and be woken by the next one for nothing. The peek makes the system
/// call, which clears a stale readiness and waits for a new datagram. It receives
/// nothing (the datagram stays for the receive), and any answer — an address, or
/// an error the receive will report — means there is something to receive.
async fn recv_loop(shared: Arc<Shared>) {
    let mut owners = shared.active.subscribe();
    loop {
        let there = poll_fn(|cx| match &*shared.socket.read() {
            Some(socket) => socket.poll_peek_sender(cx).map(|_| true),
            None => Poll::Ready(false),
        })
        .await;
        if !there {
            return; // closed
        }
        shared.active.permit().await;
        let Some(received) = shared.recv().await else {
            return;
        };
        let event = shared.event(received);
        let to = Active::owner(&mut owners).await;
        shared.send(to, event);
        // Only once the datagram is sent on: see `active.rs`.
        shared.active.delivered();
    }
}

// ===== UdpSocket =====

/// A UDP socket, owned by a process.
///
/// The socket sends its owner a [`UdpEvent`] for each datagram it was allowed to
/// receive ([`active_once`](Self::active_once)), and sends datagrams with a command
/// ([`send_to`](Self::send_to)).
///
/// It is `Send`, so it can be handed to a process as its entry's argument or in a
/// message (call [`set_owner`](Self::set_owner) for it), but not `Clone`: one
/// process owns it. Dropping it closes the socket at once (its port is free again);
/// since the process's state and its entry's locals are dropped when it ends, the
/// socket is closed when its process ends, however it ends.
pub struct UdpSocket {
    shared: Arc<Shared>,
    receiver: AbortHandle,
    local_addr: SocketAddr,
}

impl UdpSocket {
    /// Binds a socket to `addr` at once, and starts its receiver on the scheduler's
    /// I/O runtime.
    ///
    /// `addr` is anything [`std::net::UdpSocket::bind`] takes; port 0 picks a free
    /// port, which [`local_addr`](Self::local_addr) tells. The socket has no owner
    /// until [`set_owner`](Self::set_owner), even when a process binds it
    /// (`socket.set_owner(this::pid())` then); it can send before.
    ///
    /// # Errors
    /// The system's (address in use, permission denied…), or an error of kind
    /// [`Other`](io::ErrorKind::Other) when the scheduler has shut down or its I/O
    /// runtime cannot be used.
    pub fn bind(handle: &Handle, addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let runtime = handle.shared().io().handle()?.clone();
        let bound = std::net::UdpSocket::bind(addr)?;
        bound.set_nonblocking(true)?;
        let local_addr = bound.local_addr()?;
        let socket = {
            let _context = runtime.enter();
            // A borrowed runtime built without its I/O driver panics here.
            catch_unwind(AssertUnwindSafe(|| TokioSocket::from_std(bound))).map_err(|panic| {
                io::Error::other(format!(
                    "the I/O runtime cannot serve sockets (build it with `enable_io`): {}",
                    panic_message(&*panic)
                ))
            })??
        };
        let shared = Arc::new(Shared {
            id: SocketId::next(),
            socket: RwLock::new(Some(socket)),
            active: Active::new(handle.clone(), None),
        });
        let receiver = runtime.spawn(recv_loop(shared.clone())).abort_handle();
        Ok(UdpSocket {
            shared,
            receiver,
            local_addr,
        })
    }

    /// The socket's identifier, as its [`UdpEvent`]s carry it.
    pub fn id(&self) -> SocketId {
        self.shared.id
    }

    /// The address it is bound to (with the port the system chose, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Lets the socket receive one datagram (up to its
    /// [read chunk](Self::set_read_chunk)) and send it to the owner as a
    /// [`UdpEvent`]: [`Datagram`](UdpEvent::Datagram), or
    /// [`Error`](UdpEvent::Error). It returns at once; the message comes when a
    /// datagram does.
    ///
    /// Nothing is received that was not asked for, so the owner's mailbox holds at
    /// most as many datagrams as it asked for; the others wait in the system's
    /// buffer, which drops what does not fit. Calls add up: two calls, two
    /// datagrams.
    ///
    /// When no datagram asked for is outstanding, the socket first tries to receive
    /// one right here, without waiting: if one is there, the message is in the
    /// owner's mailbox when this returns, and no thread was woken. Otherwise the
    /// socket's receiver waits for it.
    pub fn active_once(&self) {
        let shared = &self.shared;
        shared.active.ask(
            || shared.try_recv(),
            |owner, received| shared.send(owner, shared.event(received)),
        );
    }

    /// How much one [`active_once`](Self::active_once) receives at most, from the
    /// next datagram on (at least 1; default [`DEFAULT_READ_CHUNK`], 64 KiB). The
    /// rest of a longer datagram is lost.
    pub fn set_read_chunk(&self, bytes: usize) {
        self.shared.active.set_read_chunk(bytes);
    }

    /// How much one [`active_once`](Self::active_once) receives at most.
    pub fn read_chunk(&self) -> usize {
        self.shared.active.read_chunk()
    }

    /// Makes `pid` the owner: the process the socket's [`UdpEvent`]s go to from
    /// now on (Erlang's `controlling_process`). Call it before handing the socket
    /// to that process in a message; a process that bound the socket, or was given
    /// it as its entry's argument (its PID not known before the spawn), calls
    /// `socket.set_owner(this::pid())` itself. A datagram already sent on stays
    /// with the old owner: hand the socket over when no datagram is asked for and
    /// not yet received.
    ///
    /// A datagram that cannot be sent to the owner (it has ended, or its bounded
    /// mailbox refuses it) is dropped, as the network might have dropped it.
    pub fn set_owner(&self, pid: Pid) {
        self.shared.active.set_owner(pid);
    }

    /// The process the socket's [`UdpEvent`]s go to: the last
    /// [`set_owner`](Self::set_owner)'s; `None` before (a datagram asked for then
    /// waits for the owner, and comes to it).
    pub fn owner(&self) -> Option<Pid> {
        self.shared.active.current_owner()
    }

    /// The command that sends `bytes` as one datagram to `to`:
    /// `yield_cmd!(socket.send_to(bytes, addr))?` gives the number of bytes sent.
    /// See [`UdpSend`].
    pub fn send_to(&self, bytes: impl Into<Vec<u8>>, to: impl Into<SocketAddr>) -> UdpSend {
        UdpSend {
            shared: self.shared.clone(),
            bytes: bytes.into(),
            to: to.into(),
        }
    }

    /// Sets `SO_BROADCAST`: whether datagrams may be sent to a broadcast address.
    ///
    /// # Errors
    /// The system's, or an error of kind [`NotConnected`](io::ErrorKind::NotConnected)
    /// if the socket is closed.
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        match &*self.shared.socket.read() {
            Some(socket) => socket.set_broadcast(on),
            None => Err(self.shared.closed()),
        }
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        self.receiver.abort();
        self.shared.close();
    }
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket")
            .field("id", &self.shared.id)
            .field("local_addr", &self.local_addr)
            .field("owner", &self.owner())
            .finish()
    }
}

// ===== UdpSend =====

/// Sends one datagram (made by [`UdpSocket::send_to`]); its output is the number of
/// bytes sent, once the system has taken the datagram (which says nothing of its
/// arrival: UDP does not tell).
///
/// It is tried at once, on the worker that dispatches it; only a send the socket
/// cannot take now (its buffer is full) waits on the I/O runtime.
///
/// An I/O error fails the yield with [`YieldError::Failed`](crate::YieldError::Failed),
/// whose source is the [`io::Error`] (its kind the system's, its message naming the
/// address): an address the socket cannot send to (of another family, a broadcast
/// address without [`set_broadcast`](UdpSocket::set_broadcast)), a datagram too
/// long, no route. A send through a socket that was dropped meanwhile fails with
/// [`NotConnected`](io::ErrorKind::NotConnected).
pub struct UdpSend {
    shared: Arc<Shared>,
    bytes: Vec<u8>,
    to: SocketAddr,
}

impl UdpSend {
    /// The system's `error`, its message naming the address.
    fn failed(&self, error: io::Error) -> io::Error {
        io::Error::new(error.kind(), format!("cannot send to {}: {error}", self.to))
    }
}

impl Command for UdpSend {
    type Output = usize;
}

impl fmt::Debug for UdpSend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSend")
            .field("socket", &self.shared.id)
            .field("to", &self.to)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// The built-in async handler of the UDP command (a registration of the user's for
/// the same command replaces it).
pub(crate) fn registrations() -> Vec<AsyncRegistration> {
    vec![
        // Tried on the worker first: a datagram the socket takes (the usual case)
        // is sent at once, with no hand-off to the runtime.
        // A sent datagram's buffer is kept for the socket's next read to copy into,
        // as TCP's writes are: a conversation's reads then allocate nothing.
        AsyncRegistration::with_fast_path(
            AsyncOptions::new(),
            |send: &mut UdpSend| {
                let sent = send.shared.try_send_now(send);
                if let Some(Ok(_)) = sent {
                    send.shared
                        .active
                        .give_back(std::mem::take(&mut send.bytes));
                }
                sent
            },
            |send: UdpSend, _| async move {
                let sent = send.shared.send_to(&send).await?;
                send.shared.active.give_back(send.bytes);
                Ok(sent)
            },
        )
        .builtin(),
    ]
}
