//! The `{active, once}` protocol a socket's owner and its reader task share (TCP
//! and UDP alike): nothing is read until the owner asks, one chunk per ask.
//!
//! The owner asks with [`Active::ask`]. When nothing it asked for is outstanding
//! (`pending` is zero) the reader task is not reading — it reads only with a
//! permit, and only the owner gives permits, here — so the owner may read on the
//! spot: if the data is there, the message is in its mailbox when `ask` returns and
//! no thread was woken. Otherwise it counts one more outstanding read and gives the
//! reader a permit. The reader waits for data first (a peek), then for a permit
//! ([`Active::permit`]), reads, waits for an owner ([`Active::owner`]), sends, and
//! only then counts the read done ([`Active::delivered`]): until then the owner
//! cannot read on its own, so chunks reach it in the order they were read.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::{watch, Semaphore};

use crate::engine::handle::Handle;
use crate::pid::Pid;

/// How much one `active_once` reads at most (a TCP chunk, or the largest UDP
/// datagram taken whole: more than any over IPv4), unless the socket's
/// `set_read_chunk` says otherwise.
pub const DEFAULT_READ_CHUNK: usize = 64 * 1024;

/// The largest buffer a write gives back for the next read (see
/// [`Active::give_back`]): what an idle socket may hold at most.
const SPARE_MAX: usize = 1024;

/// What a socket's owner and its reader task share.
pub(super) struct Active {
    /// Reads the owner asked for and the reader has not made yet.
    permits: Semaphore,
    /// Reads asked of the reader and not yet sent on (its permits, given or taken).
    pending: AtomicUsize,
    /// The process the events go to; `None` until someone says (a read asked for
    /// before then waits for it).
    owner: watch::Sender<Option<Pid>>,
    read_chunk: AtomicUsize,
    /// A small buffer a write gave back (empty when none), for the next read to
    /// copy into (see [`give_back`](Self::give_back)).
    spare: Mutex<Vec<u8>>,
    /// Where events are sent.
    pub(super) handle: Handle,
}

impl Active {
    pub(super) fn new(handle: Handle, owner: Option<Pid>) -> Self {
        Self {
            permits: Semaphore::new(0),
            pending: AtomicUsize::new(0),
            owner: watch::Sender::new(owner),
            read_chunk: AtomicUsize::new(DEFAULT_READ_CHUNK),
            spare: Mutex::new(Vec::new()),
            handle,
        }
    }

    /// The owner asks for one read. `try_now` reads without waiting (`None`: the
    /// socket is closed, and nothing more is asked); what it reads goes to
    /// `deliver` with the owner. `WouldBlock` leaves the read to the reader task.
    pub(super) fn ask<T>(
        &self,
        try_now: impl FnOnce() -> Option<io::Result<T>>,
        deliver: impl FnOnce(Pid, io::Result<T>),
    ) {
        if self.pending.load(Ordering::Acquire) == 0 {
            if let Some(owner) = *self.owner.borrow() {
                match try_now() {
                    None => return,
                    Some(Err(error)) if error.kind() == io::ErrorKind::WouldBlock => {}
                    Some(read) => return deliver(owner, read),
                }
            }
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.permits.add_permits(1);
    }

    /// The reader waits for a permit (forever if none comes: the reader is aborted
    /// with its socket).
    pub(super) async fn permit(&self) {
        if let Ok(permit) = self.permits.acquire().await {
            permit.forget();
        }
    }

    /// The owner's changes, for the reader to wait on with [`owner`](Self::owner).
    pub(super) fn subscribe(&self) -> watch::Receiver<Option<Pid>> {
        self.owner.subscribe()
    }

    /// Waits until there is an owner, and gives it.
    pub(super) async fn owner(owners: &mut watch::Receiver<Option<Pid>>) -> Pid {
        let owner = owners.wait_for(Option::is_some).await.map(|owner| *owner);
        match owner {
            Ok(owner) => owner.expect("waited for an owner"),
            // The sender is the socket's own, dropped only with the socket, whose
            // drop aborts the reader first.
            Err(_) => std::future::pending().await,
        }
    }

    /// The reader has sent on what it read.
    pub(super) fn delivered(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }

    pub(super) fn set_owner(&self, pid: Pid) {
        self.owner.send_replace(Some(pid));
    }

    /// Makes `pid` the owner unless someone already named one (a listener setting
    /// the process it spawned, which may have handed its connection on).
    pub(super) fn set_owner_if_unset(&self, pid: Pid) {
        self.owner.send_if_modified(|owner| {
            let unset = owner.is_none();
            if unset {
                *owner = Some(pid);
            }
            unset
        });
    }

    pub(super) fn current_owner(&self) -> Option<Pid> {
        *self.owner.borrow()
    }

    pub(super) fn set_read_chunk(&self, bytes: usize) {
        self.read_chunk.store(bytes.max(1), Ordering::Relaxed);
    }

    pub(super) fn read_chunk(&self) -> usize {
        self.read_chunk.load(Ordering::Relaxed)
    }

    /// Reads with `read` into this thread's scratch buffer of the read chunk's size
    /// and copies what came (`read` says how much) into a vector of its size, so
    /// that neither an idle socket nor a small read holds a chunk-sized allocation.
    pub(super) fn read_scratch<X>(
        &self,
        read: impl FnOnce(&mut [u8]) -> Option<io::Result<(usize, X)>>,
    ) -> Option<io::Result<(Vec<u8>, X)>> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> =
                const { std::cell::RefCell::new(Vec::new()) };
        }
        let chunk = self.read_chunk();
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            if scratch.len() < chunk {
                scratch.resize(chunk, 0);
            }
            let read = read(&mut scratch[..chunk])?;
            Some(read.map(|(n, extra)| (self.copy(&scratch[..n]), extra)))
        })
    }

    /// `bytes` in a vector of their own: the spare buffer if there is one they
    /// fit in, else a new one.
    fn copy(&self, bytes: &[u8]) -> Vec<u8> {
        if let Some(mut spare) = self.spare.try_lock() {
            if spare.capacity() >= bytes.len() {
                let mut copy = std::mem::take(&mut *spare);
                copy.extend_from_slice(bytes);
                return copy;
            }
        }
        bytes.to_vec()
    }

    /// Takes the buffer of a finished write, if it is small and no other is kept,
    /// for the next read to copy into. A conversation's reads then allocate
    /// nothing, where a buffer allocated by the I/O thread and freed by a worker,
    /// once per round trip, cost both threads the allocator's slow paths.
    pub(super) fn give_back(&self, mut bytes: Vec<u8>) {
        if bytes.capacity() == 0 || bytes.capacity() > SPARE_MAX {
            return;
        }
        if let Some(mut spare) = self.spare.try_lock() {
            if spare.capacity() == 0 {
                bytes.clear();
                *spare = bytes;
            }
        }
    }
}
