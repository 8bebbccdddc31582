//! Spinning, parking and waking workers.
//!
//! A worker that finds no work spins a little, then yields its thread, then parks
//! (see `worker.rs` for the rounds). This file owns the handshake between parking
//! workers and producers of new work, whose one job is: **no wake-up is lost** — a
//! worker never sleeps while work it should run sits in a queue with nobody awake to
//! take it — and **new work wakes one worker, not all**.
//!
//! One atomic word counts the workers that are *unparked* (not asleep) and those that
//! are *searching* (looking for work to steal). The handshake is Dekker's:
//!
//! * A producer pushes its work, issues a SeqCst fence, then reads the word. If a
//!   worker is searching, that worker will find the work (or, as the last searcher
//!   to park, re-check the queues — below), so nobody is woken. If every worker is
//!   unparked, each will look at the queues before it parks. Otherwise the producer
//!   wakes one sleeper, handing it the *searching* role.
//! * A parking worker registers as a sleeper and decrements the counts (one SeqCst
//!   read-modify-write, under the sleepers lock), issues a SeqCst fence, and then
//!   re-checks every queue. If there is work it takes itself off the sleepers list
//!   again (or, if a producer already took it off, accepts that producer's wake-up).
//!
//! Either the producer's read comes after the worker's decrement in the SeqCst order,
//! and then it sees a sleeper and wakes it; or it comes before, and then the worker's
//! re-check, which follows its fence, sees the pushed work.
//!
//! At most half the workers search at once (at least one), so a burst of idle
//! workers does not hammer every victim's queue at the same moment.
//!
//! # Watching LIFO slots
//!
//! A process a step wakes (or spawns) goes to its worker's LIFO slot, to run next
//! on that worker as soon as the step ends. Waking another worker for it would
//! cost a system call per wake-up in a ping-pong, and the woken worker would find
//! nothing to do in the usual case, a short step. But a long step must not strand
//! the process while every other worker sleeps. So a worker that goes to sleep
//! while another worker's LIFO slot is occupied *watches*: it sleeps with a timeout
//! (backing off from tens of microseconds to milliseconds while it finds nothing)
//! and, woken by the timeout, searches like any idle worker, which takes a LIFO
//! slot whose worker stayed in one step throughout a grace period (`worker.rs`).
//! Filling an empty LIFO slot then wakes nobody if a worker watches, or searches,
//! or every worker is awake ([`Idle::notify_lifo_filled`]); otherwise it wakes one
//! as new work does. A worker also watches, slot empty or not, while another worker
//! is awake ([`Idle::others_awake`]): a busy worker fills and empties its slot on
//! every message, and a sleeper that parked in the instant the slot was empty was
//! woken (a system call on the busy worker's path) by the next fill, found nothing
//! and parked again, thousands of times a second in a ping-pong on two workers.
//! The handshake is Dekker's again: the filler writes the slot, fences and reads
//! the counts; the sleeper registers, fences, reads the slots, and
//! only then counts itself as a watcher. Either the sleeper sees the slot occupied
//! (and watches), or the filler sees it asleep and not watching (and wakes it).

use std::time::Duration;

use crate::sync::{fence, AtomicUsize, Condvar, Mutex, Ordering};

const SEARCHING_MASK: usize = 0xFFFF;
const UNPARKED_SHIFT: usize = 16;
const ONE_UNPARKED: usize = 1 << UNPARKED_SHIFT;

fn searching(word: usize) -> usize {
    word & SEARCHING_MASK
}

fn unparked(word: usize) -> usize {
    word >> UNPARKED_SHIFT
}

pub(crate) struct Idle {
    workers: usize,
    state: AtomicUsize,
    /// Sleepers that watch LIFO slots (parked with a timeout, see the module docs).
    watchers: AtomicUsize,
    /// Indices of parked workers. Registration and the count update happen together
    /// under this lock, so a producer that sees a parked count also finds its sleeper.
    sleepers: Mutex<Vec<usize>>,
    parkers: Box<[Parker]>,
}

/// One worker's bed: a flag and a condition variable.
struct Parker {
    notified: Mutex<bool>,
    condvar: Condvar,
}

/// What became of a worker that registered to park but then found work.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unregister {
    /// It took itself off the list: it is awake and not searching.
    Awake,
    /// A producer already woke it (and made it a searcher): it must consume that
    /// wake-up by parking, which returns at once.
    AlreadyWoken,
}

impl Idle {
    pub(crate) fn new(workers: usize) -> Self {
        assert!(workers < SEARCHING_MASK, "too many workers");
        Self {
            workers,
            state: AtomicUsize::new(workers << UNPARKED_SHIFT),
            watchers: AtomicUsize::new(0),
            sleepers: Mutex::new(Vec::with_capacity(workers)),
            parkers: (0..workers)
                .map(|_| Parker {
                    notified: Mutex::new(false),
                    condvar: Condvar::new(),
                })
                .collect(),
        }
    }

    /// Called by a producer after it pushed work others may run. Wakes one parked
    /// worker unless someone is already searching or nobody is parked.
    pub(crate) fn notify_one(&self) -> bool {
        fence(Ordering::SeqCst);
        if !self.should_wake(self.state.load(Ordering::SeqCst)) {
            return false;
        }
        let worker = {
            let mut sleepers = self.sleepers.lock();
            // Re-check under the lock: another producer may have woken someone.
            if !self.should_wake(self.state.load(Ordering::SeqCst)) {
                return false;
            }
            // The woken worker starts out searching: it was woken to find work.
            self.state.fetch_add(ONE_UNPARKED + 1, Ordering::SeqCst);
            sleepers
                .pop()
                .expect("the parked count says a worker sleeps, so one is registered")
        };
        self.parkers[worker].unpark();
        true
    }

    /// Called by a step that filled its worker's empty LIFO slot. Wakes a parked
    /// worker only if nobody would otherwise look at the slot while the step runs:
    /// no worker watches, searches, or is awake (see the module docs).
    pub(crate) fn notify_lifo_filled(&self) -> bool {
        fence(Ordering::SeqCst);
        if !self.should_wake(self.state.load(Ordering::SeqCst)) {
            return false;
        }
        if self.watchers.load(Ordering::SeqCst) > 0 {
            return false;
        }
        self.notify_one()
    }

    fn should_wake(&self, word: usize) -> bool {
        searching(word) == 0 && unparked(word) < self.workers
    }

    /// A worker that found nothing asks to search (steal). At most half the workers
    /// search at once; beyond that, returns false and the worker does not steal.
    pub(crate) fn try_start_searching(&self) -> bool {
        // One CAS for check and increment: two workers checking, then adding
        // separately, could both pass the bound (a loom model caught it).
        let mut word = self.state.load(Ordering::SeqCst);
        loop {
            if 2 * searching(word) >= self.workers.max(2) {
                return false;
            }
            match self
                .state
                .compare_exchange(word, word + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(actual) => word = actual,
            }
        }
    }

    /// Whether some worker is searching for work.
    pub(crate) fn someone_searching(&self) -> bool {
        searching(self.state.load(Ordering::SeqCst)) > 0
    }

    /// A searching worker found work. Returns true if it was the last searcher: it
    /// should then wake another worker, in case more work is waiting (the chain that
    /// keeps parallelism up when a burst arrives).
    pub(crate) fn stop_searching(&self) -> bool {
        let previous = self.state.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(searching(previous) > 0);
        searching(previous) == 1
    }

    /// Registers worker `index` as a sleeper. The caller must then re-check every
    /// queue and either [`unregister`](Self::unregister) or [`park`](Self::park).
    pub(crate) fn register_sleeper(&self, index: usize, was_searching: bool) {
        let mut sleepers = self.sleepers.lock();
        let decrement = ONE_UNPARKED + usize::from(was_searching);
        self.state.fetch_sub(decrement, Ordering::SeqCst);
        sleepers.push(index);
        drop(sleepers);
        // Pairs with the fence in `notify_one`: the caller's re-check of the queues
        // comes after this.
        fence(Ordering::SeqCst);
    }

    /// Whether a worker other than the registered caller is awake: running steps
    /// (or about to park), so it may fill its LIFO slot at any moment.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn others_awake(&self) -> bool {
        unparked(self.state.load(Ordering::SeqCst)) > 0
    }

    /// The registered worker found work after all.
    pub(crate) fn unregister(&self, index: usize) -> Unregister {
        let mut sleepers = self.sleepers.lock();
        match sleepers.iter().position(|&w| w == index) {
            Some(position) => {
                sleepers.swap_remove(position);
                self.state.fetch_add(ONE_UNPARKED, Ordering::SeqCst);
                Unregister::Awake
            }
            None => Unregister::AlreadyWoken,
        }
    }

    /// Sleeps until a producer (or shutdown) wakes worker `index`. On return the
    /// worker is counted as unparked and searching (unless shutting down).
    pub(crate) fn park(&self, index: usize) {
        self.parkers[index].park();
    }

    /// Like [`park`](Self::park), for a registered worker that saw another worker's
    /// LIFO slot occupied after registering: sleeps at most `timeout`, counted as a
    /// watcher meanwhile. Returns true if a producer woke it (it is then searching,
    /// as after `park`); false if it timed out, and is then awake and not searching.
    pub(crate) fn park_watching(&self, index: usize, timeout: Duration) -> bool {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        let woken = self.parkers[index].park_timeout(timeout);
        self.watchers.fetch_sub(1, Ordering::SeqCst);
        if woken {
            return true;
        }
        match self.unregister(index) {
            Unregister::Awake => false,
            // A producer took it off the list as the timeout ran out: its wake-up
            // is pending; consume it (this returns at once).
            Unregister::AlreadyWoken => {
                self.parkers[index].park();
                true
            }
        }
    }

    /// Wakes every worker (shutdown). Counts are no longer meaningful afterwards.
    pub(crate) fn unpark_all(&self) {
        for parker in self.parkers.iter() {
            parker.unpark();
        }
    }
}

impl Parker {
    fn park(&self) {
        let mut notified = self.notified.lock();
        while !*notified {
            self.condvar.wait(&mut notified);
        }
        *notified = false;
    }

    /// Sleeps until woken or `timeout` passes; true if woken (the wake-up is then
    /// consumed). Under loom, which cannot time out, it only looks whether it was
    /// woken: a timeout may come at any moment, including at once, and the models
    /// explore what follows it.
    fn park_timeout(&self, timeout: Duration) -> bool {
        let mut notified = self.notified.lock();
        #[cfg(not(loom))]
        if !*notified {
            let _ = self.condvar.wait_for(&mut notified, timeout);
        }
        #[cfg(loom)]
        let _ = timeout;
        std::mem::replace(&mut *notified, false)
    }

    fn unpark(&self) {
        let mut notified = self.notified.lock();
        *notified = true;
        drop(notified);
        self.condvar.notify_one();
    }
}
