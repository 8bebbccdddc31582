//! TCP sockets as processes, the Erlang way.
//!
//! A [`Listener`] is a process that accepts connections and spawns a process for
//! each, handing it the connection, a [`TcpConn`], as its entry's argument. The
//! process owns the connection: the socket lives as long as the process (or
//! wherever the process moves it) and is closed when the process ends, however it
//! ends — finished, failed, killed, or stopped by the scheduler's shutdown.
//!
//! * **Reading is flow-controlled**, as Erlang's `{active, once}`: nothing is read
//!   until the owner asks. [`TcpConn::active_once`] lets the connection read one
//!   chunk, which arrives as a [`TcpEvent::Data`] message; the peer's close arrives
//!   as [`TcpEvent::Closed`], a read error as [`TcpEvent::Error`]. A slow process is
//!   never flooded: at most as many chunks are in its mailbox as it asked for.
//! * **Writing is a command**: `yield_cmd!(conn.write(bytes))` ([`TcpWrite`])
//!   suspends the process until every byte is written; `yield_cmd!(conn.shutdown())`
//!   ([`TcpShutdown`]) closes the write side. Their handlers are built in.
//! * **Connecting is a command**: `yield_cmd!(TcpConnect::new(addr))` gives a
//!   [`TcpConn`] owned by the process that yielded it.
//! * **Timeouts** are the scheduler's own: `recv!(TcpEvent, timeout = d)`.
//!
//! All of it runs on the scheduler's I/O runtime (see
//! [`Builder::io_threads`](crate::Builder::io_threads)): the accept loop of each
//! listener and the reader of each connection are tokio tasks, writes are futures
//! of the built-in async handlers. Processes never block.
//!
//! For UDP sockets, see [`udp`](super::udp).
//!
//! # Example
//!
//! An echo server: a process per connection, reading a chunk at a time and writing
//! it back until the client closes.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::time::Duration;
//! use wsched::io::tcp::{Listener, TcpConn, TcpEvent};
//! use wsched::prelude::*;
//! use wsched::Scheduler;
//!
//! struct Echo;
//!
//! #[process]
//! impl Echo {
//!     #[entry]
//!     fn serve(&mut self, conn: TcpConn) -> Result<(), BoxError> {
//!         loop {
//!             conn.active_once(); // one more chunk, please
//!             match recv!(TcpEvent)? {
//!                 TcpEvent::Data { bytes, .. } => yield_cmd!(conn.write(bytes))?,
//!                 TcpEvent::Closed { .. } => return Ok(()),
//!                 TcpEvent::Error { error, .. } => return Err(error.into()),
//!             }
//!         }
//!     }
//! }
//!
//! let scheduler = Scheduler::builder().workers(2).build()?;
//! let listener = Listener::bind(&scheduler.handle(), "127.0.0.1:0", |_peer| Echo, Echo::SERVE)?;
//!
//! let mut client = std::net::TcpStream::connect(listener.local_addr())?;
//! client.set_read_timeout(Some(Duration::from_secs(10)))?;
//! client.write_all(b"ping")?;
//! let mut echoed = [0; 4];
//! client.read_exact(&mut echoed)?;
//! assert_eq!(&echoed, b"ping");
//!
//! listener.close(); // no new connections; the one open goes on
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::io::AsyncWrite;
use tokio::net::{TcpListener as TokioListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use super::active::Active;
use super::handler::{AsyncOptions, AsyncRegistration, IoContext};
use crate::engine::context::Context;
use crate::engine::handle::Handle;
use crate::engine::process::{
    panic_message, Command, Event, Events, IntoProcess, Process, Status, StepOutput,
};
use crate::entry::Entry;
use crate::error::{InitError, StepError, YieldError};
use crate::payload::{Payload, Payloads};
use crate::pid::Pid;

pub use super::active::DEFAULT_READ_CHUNK;

/// How long a listener stops accepting after an error that is not one
/// connection's (out of file descriptors, of memory): accepting again at once
/// would only fail again, in a busy loop.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

// ===== ConnId =====

/// A small identifier of a connection, unique in the program: what tells apart the
/// [`TcpEvent`]s of several connections in one mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(u64);

impl ConnId {
    fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The identifier as a number (connections are numbered from 1, in the order
    /// they were accepted or connected).
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

// ===== TcpEvent =====

/// What a connection sends its owner: one message per [`TcpConn::active_once`].
///
/// Receive it with `recv!(TcpEvent)` (or an arm of `recv! { … }`), and match:
///
/// ```
/// # use wsched::io::tcp::TcpEvent;
/// # fn handle(event: TcpEvent) {
/// match event {
///     TcpEvent::Data { conn, bytes } => println!("{conn}: {} bytes", bytes.len()),
///     TcpEvent::Closed { conn } => println!("{conn}: the peer closed"),
///     TcpEvent::Error { conn, error } => println!("{conn}: {error}"),
/// }
/// # }
/// ```
#[derive(Debug)]
pub enum TcpEvent {
    /// A chunk read from the connection: at least one byte, at most its
    /// [read chunk](TcpConn::set_read_chunk).
    Data {
        /// The connection.
        conn: ConnId,
        /// What was read. Its capacity may exceed its length: a small buffer a
        /// write of the connection gave back is reused (at most 1 KiB).
        bytes: Vec<u8>,
    },
    /// The peer closed its side (the read found the end of the stream). Nothing
    /// more will be read; writing may still work, if the peer only shut down its
    /// write side.
    Closed {
        /// The connection.
        conn: ConnId,
    },
    /// Reading failed (the peer reset the connection, for example). Nothing more
    /// will be read.
    Error {
        /// The connection.
        conn: ConnId,
        /// Why.
        error: io::Error,
    },
}

impl TcpEvent {
    /// The connection the event is about.
    pub fn conn(&self) -> ConnId {
        match self {
            Self::Data { conn, .. } | Self::Closed { conn } | Self::Error { conn, .. } => *conn,
        }
    }
}

// ===== Conn: what a connection's parts share =====

/// One connection, shared by its [`TcpConn`], its reader task and the commands
/// that write to it.
struct Conn {
    id: ConnId,
    /// The socket, until the connection is closed. The reader and the writes hold
    /// the lock for one poll or one system call at a time, never across an await, so
    /// that closing takes the socket out — and closes it — at once, on the thread
    /// that closes, wherever the tasks are.
    stream: RwLock<Option<TcpStream>>,
    /// Set once `Closed` or `Error` was sent: nothing more is read.
    ended: AtomicBool,
    /// The `{active, once}` protocol with the owner (see `active.rs`).
    active: Active,
    /// Taken by each write and shutdown for its whole length, so that two of them
    /// never interleave their bytes.
    writing: Arc<tokio::sync::Mutex<()>>,
}

impl Conn {
    fn close(&self) {
        let stream = self.stream.write().take();
        drop(stream);
    }

    fn closed(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotConnected,
            format!(
                "{} is closed: its TcpConn was dropped, or its owner could not be sent \
                 what it read",
                self.id
            ),
        )
    }

    /// Reads one chunk: `None` when the connection was closed on this side, an
    /// empty chunk at the end of the stream.
    async fn read_chunk(&self) -> Option<io::Result<Vec<u8>>> {
        loop {
            // Tried before waiting: the reader has just seen the socket readable.
            match self.try_read_chunk()? {
                // The readiness was stale: wait again.
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                read => return Some(read),
            }
            let ready = poll_fn(|cx| match &*self.stream.read() {
                Some(stream) => stream.poll_read_ready(cx).map(Some),
                None => Poll::Ready(None),
            })
            .await?;
            if let Err(error) = ready {
                return Some(Err(error));
            }
        }
    }

    /// Reads one chunk if the socket has one now, without waiting (`WouldBlock`
    /// if not): `None` when the connection was closed on this side, an empty chunk
    /// at the end of the stream. Reads into this thread's scratch buffer and
    /// copies what came into a vector of its size, so that neither an idle
    /// connection nor a small read holds a chunk-sized allocation.
    fn try_read_chunk(&self) -> Option<io::Result<Vec<u8>>> {
        let read = self.active.read_scratch(|buffer| {
            let stream = self.stream.read();
            stream
                .as_ref()
                .map(|stream| read_draining(stream, buffer).map(|n| (n, ())))
        })?;
        Some(read.map(|(bytes, ())| bytes))
    }

    /// The event a read makes, noting the end of reading when it is one.
    fn event(&self, read: io::Result<Vec<u8>>) -> TcpEvent {
        let conn = self.id;
        let event = match read {
            Ok(bytes) if bytes.is_empty() => TcpEvent::Closed { conn },
            Ok(bytes) => TcpEvent::Data { conn, bytes },
            Err(error) => TcpEvent::Error { conn, error },
        };
        if !matches!(event, TcpEvent::Data { .. }) {
            self.ended.store(true, Ordering::Release);
        }
        event
    }

    /// Sends `event` to `owner`; a chunk that cannot be delivered closes the
    /// connection. Returns whether it was delivered.
    fn send(&self, owner: Pid, event: TcpEvent) -> bool {
        if self.active.handle.send(owner, event).is_err() {
            // A byte stream with a hole in it is worth nothing: the connection is
            // closed, as Erlang closes a socket whose controlling process ended.
            self.close();
            return false;
        }
        true
    }

    /// Writes all of `bytes`, in the turn `turn` if the fast path already took it
    /// (and wrote the bytes before these).
    async fn write_all(
        &self,
        bytes: &[u8],
        turn: Option<tokio::sync::OwnedMutexGuard<()>>,
    ) -> io::Result<()> {
        let _turn = match turn {
            Some(turn) => turn,
            None => self.writing.clone().lock_owned().await,
        };
        let mut written = 0;
        while written < bytes.len() {
            poll_fn(|cx| match &*self.stream.read() {
                Some(stream) => stream.poll_write_ready(cx),
                None => Poll::Ready(Err(self.closed())),
            })
            .await?;
            let wrote = match &*self.stream.read() {
                Some(stream) => stream.try_write(&bytes[written..]),
                None => Err(self.closed()),
            };
            match wrote {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Writes what the socket takes of `write.bytes` now, on the worker that
    /// dispatches the write: `Some` when it took all of them (or failed), `None`
    /// when the rest must wait for the socket; the bytes written are then gone
    /// from `write.bytes`, and the write keeps its turn, so that no other write
    /// can slip in between.
    fn try_write_now(&self, write: &mut TcpWrite) -> Option<io::Result<()>> {
        let turn = self.writing.clone().try_lock_owned().ok()?;
        let mut written = 0;
        let outcome = {
            let stream = self.stream.read();
            let Some(stream) = &*stream else {
                return Some(Err(self.closed()));
            };
            loop {
                if written == write.bytes.len() {
                    break Some(Ok(()));
                }
                match stream.try_write(&write.bytes[written..]) {
                    Ok(0) => break Some(Err(io::ErrorKind::WriteZero.into())),
                    Ok(n) => written += n,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break None,
                    Err(error) => break Some(Err(error)),
                }
            }
        };
        match outcome {
            None => {
                write.bytes.drain(..written);
                write.turn = Some(turn);
            }
            Some(Ok(())) => self.active.give_back(std::mem::take(&mut write.bytes)),
            Some(Err(_)) => {}
        }
        outcome
    }

    /// Shuts the write side down, after the writes already under way.
    async fn shutdown(&self) -> io::Result<()> {
        let _turn = self.writing.lock().await;
        poll_fn(|cx| match &mut *self.stream.write() {
            Some(stream) => Pin::new(stream).poll_shutdown(cx),
            None => Poll::Ready(Err(self.closed())),
        })
        .await
    }
}

/// Whether a read that leaves room in its buffer drained the socket, so that its
/// readiness may be cleared: with the edge-triggered selectors (epoll, kqueue),
/// where data arriving later sets it again. tokio's own `poll_read` does the same
/// (tokio-rs/tokio#5866).
const SHORT_READ_DRAINS: bool = cfg!(any(
    target_os = "android",
    target_os = "illumos",
    target_os = "linux",
    target_os = "redox",
    target_os = "dragonfly",
    target_os = "freebsd",
    target_os = "ios",
    target_os = "macos",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "tvos",
    target_os = "visionos",
    target_os = "watchos",
));

/// `try_read`, clearing the socket's readiness after a short read (see
/// [`SHORT_READ_DRAINS`]): the next wait for data then waits, where a stale
/// readiness cost a system call that found nothing (per round trip of a
/// conversation). The readiness cleared is the one seen before the read, so an
/// event that came since is kept.
fn read_draining(stream: &TcpStream, buffer: &mut [u8]) -> io::Result<usize> {
    let mut drained = 0;
    let len = buffer.len();
    let read = stream.try_io(tokio::io::Interest::READABLE, || {
        let n = stream.try_read(buffer)?;
        if SHORT_READ_DRAINS && 0 < n && n < len {
            drained = n;
            // What makes `try_io` clear the readiness; the bytes are kept.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    });
    match read {
        Err(error) if error.kind() == io::ErrorKind::WouldBlock && drained > 0 => Ok(drained),
        read => read,
    }
}

/// A connection's reader: one chunk per permit, sent to the owner.
///
/// It waits for the socket to be readable first, and for a permit after. A
/// process that asks for its next chunk once the data is there (the common case
/// of a conversation) reads it itself ([`TcpConn::active_once`]), and the permit
/// it gives when there is nothing yet finds this task waiting on the socket, not
/// on the permit, so giving it wakes no thread: only the data wakes the task,
/// which then sends it on. The wait is on the readiness alone (no peek): reads
/// clear it when they drain the socket ([`read_draining`]), so it is rarely
/// stale, and a stale one only makes the next permit wake this task, whose read
/// then clears it.
async fn read_loop(conn: Arc<Conn>) {
    let mut owners = conn.active.subscribe();
    loop {
        let there = poll_fn(|cx| match &*conn.stream.read() {
            // An error is the read's to report.
            Some(stream) => stream.poll_read_ready(cx).map(|_| true),
            None => Poll::Ready(false),
        })
        .await;
        if !there {
            return; // closed on this side
        }
        conn.active.permit().await;
        let Some(read) = conn.read_chunk().await else {
            return;
        };
        let event = conn.event(read);
        let last = !matches!(event, TcpEvent::Data { .. });
        let to = Active::owner(&mut owners).await;
        let sent = conn.send(to, event);
        // Only once the chunk is sent: see `active.rs`.
        conn.active.delivered();
        if !sent || last {
            return;
        }
    }
}

// ===== TcpConn =====

/// A TCP connection, owned by a process.
///
/// A [`Listener`] spawns a process with each connection it accepts; a process that
/// yields [`TcpConnect`] gets one. The connection sends its owner a [`TcpEvent`]
/// for each chunk it was allowed to read ([`active_once`](Self::active_once)), and
/// is written with commands ([`write`](Self::write), [`shutdown`](Self::shutdown)).
///
/// It is `Send`, so it can be handed to another process in a message (then call
/// [`set_owner`](Self::set_owner) first), but not `Clone`: one process owns it.
/// Dropping it closes the socket at once, and the peer reads the end of the stream;
/// since the process's state and its entry's locals are dropped when it ends, the
/// socket is closed when its process ends, however it ends.
pub struct TcpConn {
    conn: Arc<Conn>,
    reader: AbortHandle,
    peer_addr: SocketAddr,
    local_addr: SocketAddr,
}

impl TcpConn {
    /// Wraps `stream`, starting its reader on the current runtime (the I/O
    /// runtime: this runs in its tasks).
    fn start(stream: TcpStream, handle: Handle, owner: Option<Pid>) -> io::Result<Self> {
        let peer_addr = stream.peer_addr()?;
        let local_addr = stream.local_addr()?;
        let conn = Arc::new(Conn {
            id: ConnId::next(),
            stream: RwLock::new(Some(stream)),
            ended: AtomicBool::new(false),
            active: Active::new(handle, owner),
            writing: Arc::new(tokio::sync::Mutex::new(())),
        });
        let reader = tokio::spawn(read_loop(conn.clone())).abort_handle();
        Ok(Self {
            conn,
            reader,
            peer_addr,
            local_addr,
        })
    }

    /// The connection's identifier, as its [`TcpEvent`]s carry it.
    pub fn id(&self) -> ConnId {
        self.conn.id
    }

    /// The address of the other end.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// The address of this end.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Lets the connection read one chunk (up to its
    /// [read chunk](Self::set_read_chunk)) and send it to the owner as a
    /// [`TcpEvent`]: [`Data`](TcpEvent::Data), or [`Closed`](TcpEvent::Closed) at
    /// the end of the stream, or [`Error`](TcpEvent::Error). It returns at once;
    /// the message comes when there is something to read.
    ///
    /// Nothing is read that was not asked for, so the peer is slowed down by TCP's
    /// own flow control when the process falls behind, and its mailbox holds at
    /// most as many chunks as it asked for. Calls add up: two calls, two chunks.
    /// After `Closed` or `Error`, nothing more is read and calls do nothing.
    ///
    /// When no chunk asked for is outstanding, the connection first tries to read
    /// one right here, without waiting: if the socket has data, the message is in
    /// the owner's mailbox when this returns, and no thread was woken. Otherwise
    /// the connection's reader waits for the data.
    pub fn active_once(&self) {
        let conn = &self.conn;
        if conn.ended.load(Ordering::Acquire) {
            return;
        }
        conn.active.ask(
            || conn.try_read_chunk(),
            |owner, read| {
                let event = conn.event(read);
                conn.send(owner, event);
            },
        );
    }

    /// How much one [`active_once`](Self::active_once) reads at most, from the next
    /// read on (at least 1; default [`DEFAULT_READ_CHUNK`], 64 KiB).
    pub fn set_read_chunk(&self, bytes: usize) {
        self.conn.active.set_read_chunk(bytes);
    }

    /// How much one [`active_once`](Self::active_once) reads at most.
    pub fn read_chunk(&self) -> usize {
        self.conn.active.read_chunk()
    }

    /// Makes `pid` the owner: the process the connection's [`TcpEvent`]s go to from
    /// now on (Erlang's `controlling_process`). Call it before handing the
    /// connection to that process. A chunk already sent stays with the old owner:
    /// hand it over when no chunk is asked for and not yet received.
    ///
    /// If a chunk cannot be sent to the owner (it has ended, or its bounded mailbox
    /// refuses it), the connection is closed: a byte stream with a hole in it would
    /// be worth nothing.
    pub fn set_owner(&self, pid: Pid) {
        self.conn.active.set_owner(pid);
    }

    /// The process the connection's [`TcpEvent`]s go to. A listener sets it right
    /// after it spawned the process, which may see `None` in its first steps (a
    /// chunk it asks for then waits for the owner, and comes to it).
    pub fn owner(&self) -> Option<Pid> {
        self.conn.active.current_owner()
    }

    /// The command that writes `bytes`, all of them:
    /// `yield_cmd!(conn.write(bytes))?`. See [`TcpWrite`].
    pub fn write(&self, bytes: impl Into<Vec<u8>>) -> TcpWrite {
        TcpWrite {
            conn: self.conn.clone(),
            bytes: bytes.into(),
            turn: None,
        }
    }

    /// The command that shuts the write side down, after the writes under way:
    /// `yield_cmd!(conn.shutdown())?`. The peer reads the end of the stream; this
    /// side can still read. See [`TcpShutdown`].
    pub fn shutdown(&self) -> TcpShutdown {
        TcpShutdown {
            conn: self.conn.clone(),
        }
    }

    /// Sets `TCP_NODELAY`: whether small writes go out at once rather than being
    /// gathered (Nagle's algorithm, on by default, gathers them).
    ///
    /// # Errors
    /// The system's, or an error of kind [`NotConnected`](io::ErrorKind::NotConnected)
    /// if the connection is closed.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        match &*self.conn.stream.read() {
            Some(stream) => stream.set_nodelay(nodelay),
            None => Err(self.conn.closed()),
        }
    }
}

impl Drop for TcpConn {
    fn drop(&mut self) {
        self.reader.abort();
        self.conn.close();
    }
}

impl fmt::Debug for TcpConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpConn")
            .field("id", &self.conn.id)
            .field("peer_addr", &self.peer_addr)
            .field("local_addr", &self.local_addr)
            .field("owner", &self.owner())
            .finish()
    }
}

// ===== Commands =====

/// Writes bytes to a connection (made by [`TcpConn::write`]); its output is `()`
/// once every byte is handed to the system.
///
/// An I/O error fails the yield with [`YieldError::Failed`], whose source is the
/// [`io::Error`]. Writes yielded one after another go out in that order; writes
/// yielded together (`yield_all!`) do not interleave, but go out in any order. If
/// the process gives the write up (it ends, or the yield is withdrawn), the write
/// stops where it is.
pub struct TcpWrite {
    conn: Arc<Conn>,
    bytes: Vec<u8>,
    /// The connection's write turn, when the worker wrote part of `bytes` at once
    /// and the rest waits for the socket.
    turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Command for TcpWrite {
    type Output = ();
}

impl fmt::Debug for TcpWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpWrite")
            .field("conn", &self.conn.id)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// Shuts a connection's write side down (made by [`TcpConn::shutdown`]); its
/// output is `()`. The peer then reads the end of the stream; this side can still
/// read, and a later write fails. An I/O error fails the yield with
/// [`YieldError::Failed`], whose source is the [`io::Error`].
pub struct TcpShutdown {
    conn: Arc<Conn>,
}

impl Command for TcpShutdown {
    type Output = ();
}

impl fmt::Debug for TcpShutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpShutdown")
            .field("conn", &self.conn.id)
            .finish()
    }
}

/// Connects to a server; its output is the [`TcpConn`], owned by the process that
/// yielded the command.
///
/// ```
/// use std::net::SocketAddr;
/// use wsched::io::tcp::{TcpConn, TcpConnect, TcpEvent};
/// use wsched::prelude::*;
///
/// struct Client;
///
/// #[process]
/// impl Client {
///     /// Sends `request`, returns the first chunk of the answer.
///     #[entry]
///     fn ask(&mut self, server: SocketAddr, request: String) -> Result<Vec<u8>, BoxError> {
///         let conn: TcpConn = yield_cmd!(TcpConnect::new(server))?;
///         yield_cmd!(conn.write(request))?;
///         conn.active_once();
///         match recv!(TcpEvent)? {
///             TcpEvent::Data { bytes, .. } => Ok(bytes),
///             other => Err(format!("no answer: {other:?}").into()),
///         }
///     }
/// }
/// ```
///
/// A failed connect fails the yield with [`YieldError::Failed`], whose source is
/// the [`io::Error`] (of kind [`ConnectionRefused`](io::ErrorKind::ConnectionRefused)
/// when nothing listens there), its message naming the address. A connect that
/// nothing answers fails when the system gives up (minutes); to give up sooner,
/// connect from a helper process and kill it when the wait for it
/// (`recv!(…, timeout = d)`) times out: its connect is dropped with it.
pub struct TcpConnect {
    target: Target,
}

enum Target {
    Addr(SocketAddr),
    Host(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Addr(addr) => addr.fmt(f),
            Self::Host(host) => host.fmt(f),
        }
    }
}

impl TcpConnect {
    /// Connects to `addr` (a `SocketAddr`, or anything that converts into one,
    /// such as `([127, 0, 0, 1], 8080)`).
    pub fn new(addr: impl Into<SocketAddr>) -> Self {
        Self {
            target: Target::Addr(addr.into()),
        }
    }

    /// Connects to `host_and_port` (`"example.com:80"`), resolved on the I/O runtime;
    /// each address it resolves to is tried in turn, until one connects.
    pub fn host(host_and_port: impl Into<String>) -> Self {
        Self {
            target: Target::Host(host_and_port.into()),
        }
    }

    async fn connect(self, context: IoContext) -> io::Result<TcpConn> {
        let connected = match &self.target {
            Target::Addr(addr) => TcpStream::connect(*addr).await,
            Target::Host(host) => TcpStream::connect(host.as_str()).await,
        };
        // The kind stays (ConnectionRefused, TimedOut…); the message names the address.
        let stream = connected.map_err(|error| {
            io::Error::new(
                error.kind(),
                format!("cannot connect to {}: {error}", self.target),
            )
        })?;
        TcpConn::start(stream, context.handle().clone(), Some(context.pid()))
    }
}

impl Command for TcpConnect {
    type Output = TcpConn;
}

impl fmt::Debug for TcpConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpConnect")
            .field("target", &format_args!("{}", self.target))
            .finish()
    }
}

/// The built-in async handlers of the TCP commands (a registration of the user's
/// for the same command replaces one).
pub(crate) fn registrations() -> Vec<AsyncRegistration> {
    vec![
        AsyncRegistration::new(AsyncOptions::new(), |connect: TcpConnect, context| {
            connect.connect(context)
        })
        .builtin(),
        // Tried on the worker first: a write the socket takes whole (the usual case
        // for a small answer) completes at once, with no hand-off to the runtime.
        AsyncRegistration::with_fast_path(
            AsyncOptions::new(),
            |write: &mut TcpWrite| write.conn.clone().try_write_now(write),
            |write: TcpWrite, _| async move {
                let TcpWrite { conn, bytes, turn } = write;
                conn.write_all(&bytes, turn).await?;
                conn.active.give_back(bytes);
                Ok(())
            },
        )
        .builtin(),
        AsyncRegistration::new(AsyncOptions::new(), |shutdown: TcpShutdown, _| async move {
            shutdown.conn.shutdown().await
        })
        .builtin(),
    ]
}

// ===== Listener =====

/// A listening socket as a process: it accepts connections, and spawns a process
/// for each, giving it the [`TcpConn`].
///
/// The listener has a PID ([`pid`](Self::pid)): it can be monitored, linked to
/// and killed like any process. It runs until [`close`](Self::close)d, killed, or
/// stopped by the scheduler's shutdown (a cancel ends it), and whichever way it
/// ends, the listening socket is closed with it: new connections are refused.
/// Connections already accepted are their processes' and go on. Dropping a
/// `Listener` changes nothing: it is a handle, as a [`Pid`] is (and `Clone`).
///
/// Accepting runs on the scheduler's I/O runtime. An accepted connection whose
/// process cannot be spawned (the scheduler is shutting down, its `init` fails)
/// is closed. An accept error that concerns one connection (reset or aborted
/// before it was accepted) is skipped; any other (out of file descriptors, say)
/// pauses accepting for 100 ms, on the scheduler's timers. If `make` panics, the
/// listener fails with the panic's message.
///
/// ```
/// use std::io::Read;
/// use std::time::Duration;
/// use wsched::io::tcp::{Listener, TcpConn};
/// use wsched::prelude::*;
/// use wsched::Scheduler;
///
/// /// Greets whoever connects, then hangs up.
/// struct Greeter {
///     greeting: String,
/// }
///
/// #[process]
/// impl Greeter {
///     #[entry]
///     fn greet(&mut self, conn: TcpConn) -> Result<(), BoxError> {
///         let text = format!("{}, {}\n", self.greeting, conn.peer_addr().ip());
///         yield_cmd!(conn.write(text))?;
///         Ok(()) // the connection closes with the process
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(2).build()?;
/// let listener = Listener::bind(
///     &scheduler.handle(),
///     "127.0.0.1:0", // any free port: `local_addr` says which
///     |_peer| Greeter { greeting: "hello".into() },
///     Greeter::GREET,
/// )?;
///
/// let mut client = std::net::TcpStream::connect(listener.local_addr())?;
/// client.set_read_timeout(Some(Duration::from_secs(10)))?;
/// let mut answer = String::new();
/// client.read_to_string(&mut answer)?; // up to the end of the stream
/// assert_eq!(answer, "hello, 127.0.0.1\n");
///
/// let down = scheduler.monitor(listener.pid());
/// listener.close();
/// assert!(down.wait_timeout(Duration::from_secs(10)).is_some());
/// assert!(std::net::TcpStream::connect(listener.local_addr()).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Listener {
    pid: Pid,
    local_addr: SocketAddr,
    socket: Arc<Socket>,
    handle: Handle,
}

impl Listener {
    /// Binds a listening socket to `addr` at once, and starts its process, which
    /// spawns `make(peer)` on its `entry` for every connection accepted, with the
    /// [`TcpConn`] as the entry's argument (`#[entry] fn serve(&mut self, conn:
    /// TcpConn)` gives the `entry` `Self::SERVE`). The processes are detached:
    /// monitor them to learn how they end.
    ///
    /// `addr` is anything [`std::net::TcpListener::bind`] takes; port 0 picks a free
    /// port, which [`local_addr`](Self::local_addr) tells.
    ///
    /// # Errors
    /// The system's (address in use, permission denied…), or an error of kind
    /// [`Other`](io::ErrorKind::Other) when the scheduler has shut down or its I/O
    /// runtime cannot be used.
    pub fn bind<P, F>(
        handle: &Handle,
        addr: impl ToSocketAddrs,
        make: F,
        entry: Entry<P, (TcpConn,)>,
    ) -> io::Result<Listener>
    where
        P: IntoProcess,
        F: FnMut(SocketAddr) -> P + Send + 'static,
    {
        let runtime = handle.shared().io().handle()?.clone();
        let bound = std::net::TcpListener::bind(addr)?;
        bound.set_nonblocking(true)?;
        let local_addr = bound.local_addr()?;
        let listener = {
            let _context = runtime.enter();
            // A borrowed runtime built without its I/O driver panics here.
            catch_unwind(AssertUnwindSafe(|| TokioListener::from_std(bound))).map_err(
                |panic| {
                    io::Error::other(format!(
                        "the I/O runtime cannot serve sockets (build it with `enable_io`): {}",
                        panic_message(&*panic)
                    ))
                },
            )??
        };
        let socket = Arc::new(Socket {
            listener: Mutex::new(Some(listener)),
            accept: Mutex::new(Accept::Starting),
            resume: Notify::new(),
        });
        let process = Listening {
            socket: socket.clone(),
            local_addr,
        };
        let pid = handle
            .spawn_detached(process, Listening::ACCEPT, ())
            .map_err(io::Error::other)?;
        let task = runtime.spawn(accept_loop(
            socket.clone(),
            handle.clone(),
            pid,
            make,
            entry,
        ));
        socket.accepting(task.abort_handle());
        Ok(Listener {
            pid,
            local_addr,
            socket,
            handle: handle.clone(),
        })
    }

    /// The listener's process.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The address it listens on (with the port the system chose, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops listening: the socket is closed when this returns (new connections are
    /// refused), and the listener's process ends normally. Connections already
    /// accepted go on. Closing a closed listener does nothing.
    pub fn close(&self) {
        self.socket.close();
        // Fails only if it has ended already.
        let _ = self.handle.send(self.pid, Close);
    }
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("pid", &self.pid)
            .field("local_addr", &self.local_addr)
            .finish()
    }
}

/// The listening socket, shared by the listener's process, its accept task and the
/// [`Listener`] handles.
struct Socket {
    /// The socket, until it is closed. The accept task holds the lock for one poll
    /// at a time, so closing takes it out — and closes it — at once.
    listener: Mutex<Option<TokioListener>>,
    accept: Mutex<Accept>,
    /// Wakes the accept task after a pause ([`Resume`]).
    resume: Notify,
}

/// Where the accept task stands.
enum Accept {
    /// Not spawned yet.
    Starting,
    Running(AbortHandle),
    Closed,
}

impl Socket {
    /// Gives the socket its accept task, aborted at once if the socket closed
    /// meanwhile.
    fn accepting(&self, task: AbortHandle) {
        let mut accept = self.accept.lock();
        match *accept {
            Accept::Closed => task.abort(),
            _ => *accept = Accept::Running(task),
        }
    }

    fn close(&self) {
        let listener = self.listener.lock().take();
        drop(listener);
        let accept = std::mem::replace(&mut *self.accept.lock(), Accept::Closed);
        if let Accept::Running(task) = accept {
            task.abort();
        }
    }
}

/// "Stop listening": from [`Listener::close`].
struct Close;
/// "Accept again": the end of a pause, sent on the scheduler's timers.
struct Resume;
/// "`make` panicked with this message": from the accept task, which stopped.
struct MakePanicked(String);

/// The accept task of one listener.
async fn accept_loop<P, F>(
    socket: Arc<Socket>,
    handle: Handle,
    listener: Pid,
    mut make: F,
    entry: Entry<P, (TcpConn,)>,
) where
    P: IntoProcess,
    F: FnMut(SocketAddr) -> P + Send + 'static,
{
    loop {
        let accepted = poll_fn(|cx| match &*socket.listener.lock() {
            Some(listener) => listener.poll_accept(cx).map(Some),
            None => Poll::Ready(None),
        })
        .await;
        let (stream, peer) = match accepted {
            None => return, // closed
            Some(Ok(accepted)) => accepted,
            Some(Err(error)) if concerns_one_connection(&error) => continue,
            Some(Err(_)) => {
                if handle.send_after(listener, Resume, ACCEPT_PAUSE).is_err() {
                    return; // the listener has ended
                }
                socket.resume.notified().await;
                continue;
            }
        };
        // It can fail only if the peer is gone already: nothing to serve.
        let Ok(conn) = TcpConn::start(stream, handle.clone(), None) else {
            continue;
        };
        let shared = conn.conn.clone();
        let process = match catch_unwind(AssertUnwindSafe(|| make(peer))) {
            Ok(process) => process,
            Err(panic) => {
                let _ = handle.send(listener, MakePanicked(panic_message(&*panic)));
                return;
            }
        };
        // A failed spawn drops the connection with the process, closing it.
        if let Ok(pid) = handle.spawn_detached(process, entry, (conn,)) {
            // Unless the process has already handed the connection on.
            shared.active.set_owner_if_unset(pid);
        }
    }
}

/// Whether an accept error concerns one connection only (which the next accept
/// does not see), as opposed to the listener's state.
fn concerns_one_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// The listener's process: it waits for [`Close`], and closes the socket when it
/// ends, however it ends.
struct Listening {
    socket: Arc<Socket>,
    local_addr: SocketAddr,
}

impl Listening {
    const ACCEPT: Entry<Listening, ()> = Entry::new("accept");
}

impl Process for Listening {
    fn init(&mut self, _: Context, method: &str, _: Payloads) -> Result<(), InitError> {
        if method == Self::ACCEPT.name() {
            Ok(())
        } else {
            Err(InitError::unknown_method(method, &[Self::ACCEPT.name()]))
        }
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        for event in events {
            match event {
                Event::Message(message) => {
                    let payload = message.payload;
                    if payload.is::<Close>() {
                        out.set_status(Status::Done(Payload::unit()));
                        return Ok(());
                    } else if payload.is::<Resume>() {
                        self.socket.resume.notify_one();
                    } else if let Ok(MakePanicked(message)) = payload.downcast() {
                        return Err(StepError::new(format!(
                            "the listener on {} stopped: its `make` closure panicked: {message}",
                            self.local_addr
                        )));
                    }
                    // Anything else is not for a listener: dropped.
                }
                // Ends as cancelled, as a `#[process]` does.
                Event::Cancel => return Err(StepError::new(YieldError::Cancelled)),
                Event::Completion(_) => {}
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }

    fn close(&mut self) {
        self.socket.close();
    }
}
