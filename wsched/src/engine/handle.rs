//! [`Handle`]: a reference to a scheduler, from any thread. The engine's part of it
//! is here (sending, cancelling, killing, waiting for results); the layers above add
//! theirs (spawning, names, calls, monitors, timed messages, observation) in `impl
//! Handle` blocks of their own.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::engine::shared::Shared;
use crate::error::{CancelError, JoinError, SendError};
use crate::payload::Payload;
use crate::pid::Pid;
use crate::sync::UnsafeCell;

/// A cheap, cloneable reference to a scheduler, usable from any thread (handlers get
/// one through [`Completer::handle`](crate::command::Completer::handle)).
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl Handle {
    pub(crate) fn from_shared(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Sends `message` to `to` (with no sender PID). A process waiting for a message
    /// is woken; one waiting for yields gets it at its next step.
    ///
    /// To a process with a full bounded mailbox (see
    /// [`SpawnOptions::bounded_mailbox`](crate::SpawnOptions::bounded_mailbox)), the send fails with
    /// [`SendErrorKind::MailboxFull`](crate::SendErrorKind::MailboxFull) if the mailbox
    /// rejects, or succeeds and drops the oldest queued message if it drops (to the
    /// dead-letter hook, on this thread).
    ///
    /// # Errors
    /// [`SendError`] when `to` never existed or has finished, or its bounded mailbox
    /// is full and rejects; it gives the message back.
    pub fn send<T: Any + Send>(&self, to: Pid, message: T) -> Result<(), SendError> {
        self.shared.send_message(None, to, Payload::new(message))
    }

    /// Asks `pid` to stop, as shutdown does for every process: it receives
    /// [`Event::Cancel`](crate::Event::Cancel) — woken whatever it waits for — and
    /// may clean up, even by yielding more commands, before it finishes. Nothing
    /// forces it to finish.
    ///
    /// # Errors
    /// [`CancelError`] when `pid` never existed or has finished.
    pub fn cancel(&self, pid: Pid) -> Result<(), CancelError> {
        self.shared.cancel(pid)
    }

    /// Stops `pid` without another step, as shutdown stops the processes still live
    /// at its timeout: at once if it waits or sits in a queue, when its current step
    /// returns if it is running (a step cannot be interrupted). It gets no cancel and
    /// no say; its `close` runs, its result is [`ProcessError::Stopped`](crate::ProcessError::Stopped),
    /// and monitors and links learn [`ExitReason::Killed`](crate::ExitReason::Killed).
    /// Use [`cancel`](Self::cancel) first and kill what did not finish in time: a
    /// [`Supervisor`](crate::supervisor::Supervisor)'s shutdown does exactly that.
    ///
    /// A kill is not a failure (like a cancel, somebody decided it), so it is not
    /// reported as unobserved, and shutdown's report does not list it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wsched::{ExitReason, Scheduler};
    /// # use wsched::{Context, Events, InitError, Payloads, Process, Status, StepError, StepOutput};
    /// # /// Ignores everything, cancels included.
    /// # struct Stubborn;
    /// # impl Process for Stubborn {
    /// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
    /// #         out.set_status(Status::WaitingForMessage);
    /// #         Ok(())
    /// #     }
    /// # }
    ///
    /// let scheduler = Scheduler::builder().workers(1).build()?;
    /// let pid = scheduler.spawn_detached(Stubborn, "run", ())?;
    /// let down = scheduler.monitor(pid);
    /// scheduler.cancel(pid)?;
    /// assert!(down.wait_timeout(Duration::from_millis(20)).is_none(), "it ignores its cancel");
    /// scheduler.kill(pid)?;
    /// let reason = down.wait_timeout(Duration::from_secs(20)).expect("killed").reason;
    /// assert_eq!(reason, ExitReason::Killed);
    /// assert_eq!(scheduler.metrics().stopped, 1);
    /// assert!(scheduler.shutdown(Duration::from_secs(1)).stopped.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`CancelError`] when `pid` never existed or has finished.
    pub fn kill(&self, pid: Pid) -> Result<(), CancelError> {
        self.shared.kill(pid)
    }

    /// Blocks until `pid` finishes and returns its result (claiming it: a result is
    /// handed out once).
    ///
    /// # Errors
    /// [`JoinError::Failed`] when the process ended with an error; otherwise why the
    /// result cannot be had (no such process, already claimed, detached).
    pub fn wait(&self, pid: Pid) -> Result<Payload, JoinError> {
        self.shared.wait(pid, None)
    }

    /// Like [`wait`](Self::wait), giving up after `timeout` with
    /// [`JoinError::TimedOut`] (the result can then still be claimed later).
    ///
    /// # Errors
    /// As [`wait`](Self::wait), plus [`JoinError::TimedOut`].
    pub fn wait_timeout(&self, pid: Pid, timeout: Duration) -> Result<Payload, JoinError> {
        self.shared.wait(pid, Some(timeout))
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle").finish_non_exhaustive()
    }
}

/// Handles a worker keeps for the cells it makes, at most.
pub(crate) const KEPT_HANDLES: usize = 64;
/// Counts parked or taken back at once (see [`ParkedHandles`]).
pub(crate) const HANDLE_BATCH: usize = KEPT_HANDLES / 2;

/// Counts of a scheduler's shared state (`Arc<Shared>`) that its workers keep for
/// the cells they make, each worker its own: a worker that ends a process keeps the
/// count its cell's handle held, and the next cell it makes takes it instead of
/// cloning a handle. A clone is a locked increment of the `Arc`'s count (and a
/// cell's end a locked decrement) on the one line every worker writes; a worker
/// that spawns and ends processes reuses the counts instead. A worker with more
/// than [`KEPT_HANDLES`] parks a batch ([`ParkedHandles`]); one with none takes a
/// batch back from there, or clones.
///
/// A kept count is a number, not a `Vec<Handle>` in the worker's thread-local: a
/// spawn and an end found it through that thread-local (a lazily checked access
/// and two `RefCell` borrows), ~90 instructions a process, where the caller's
/// index reaches this in a few.
///
/// The counts live in the state they count, so they keep it alive: each worker
/// gives back its own as it leaves ([`give_back`](Self::give_back)).
pub(crate) struct KeptHandles {
    /// `counts[w]` is reached only by the thread of worker `w`, through the methods
    /// below, whose callers pass the index of the worker they run on.
    counts: Box<[CachePadded<UnsafeCell<usize>>]>,
}

// SAFETY: `counts[w]` is reached only by the thread of worker `w` (see the field),
// so no two threads access one count.
unsafe impl Sync for KeptHandles {}
// SAFETY: the counts are plain numbers; which thread drops them does not matter.
unsafe impl Send for KeptHandles {}

impl KeptHandles {
    pub(crate) fn new(workers: usize) -> Self {
        Self {
            counts: (0..workers)
                .map(|_| CachePadded::new(UnsafeCell::new(0)))
                .collect(),
        }
    }

    /// A handle for a new cell of `like`'s scheduler (`like` is any handle of it):
    /// a count worker `worker` kept or took back from `parked`, else a clone.
    ///
    /// # Safety
    /// The caller runs on the thread of worker `worker` of `like`'s scheduler, and
    /// `self` and `parked` are that scheduler's.
    #[inline]
    pub(crate) unsafe fn lend(
        &self,
        worker: usize,
        like: &Handle,
        parked: &ParkedHandles,
    ) -> Handle {
        // SAFETY: only this worker's thread reaches its count (the contract).
        let adopted = self.counts[worker].with_mut(|kept| unsafe {
            let kept = &mut *kept;
            if *kept == 0 {
                *kept = parked.take(HANDLE_BATCH);
            }
            if *kept == 0 {
                return false;
            }
            *kept -= 1;
            true
        });
        if adopted {
            // SAFETY: the count taken off `kept` above was a strong count of
            // `like`'s state that a forgotten handle left (in `keep`, or parked).
            unsafe { adopt(Arc::as_ptr(&like.shared)) }
        } else {
            like.clone()
        }
    }

    /// Keeps one strong count of the scheduler's state, which the caller hands
    /// over (a handle it forgot), for a later [`lend`](Self::lend) by worker
    /// `worker`, parking a batch in `parked` when it keeps [`KEPT_HANDLES`].
    ///
    /// # Safety
    /// As for [`lend`](Self::lend); the caller owns the count it hands over.
    #[inline]
    pub(crate) unsafe fn keep(&self, worker: usize, parked: &ParkedHandles) {
        // SAFETY: only this worker's thread reaches its count (the contract).
        self.counts[worker].with_mut(|kept| unsafe {
            let kept = &mut *kept;
            if *kept == KEPT_HANDLES {
                parked.park(HANDLE_BATCH);
                *kept -= HANDLE_BATCH;
            }
            *kept += 1;
        });
    }

    /// Gives worker `worker`'s kept counts back (drops them): called by the worker
    /// as it leaves, with its own handle as `like`, which keeps the state alive
    /// meanwhile.
    ///
    /// # Safety
    /// As for [`lend`](Self::lend), and the worker keeps nothing after this.
    pub(crate) unsafe fn give_back(&self, worker: usize, like: &Handle) {
        // SAFETY: only this worker's thread reaches its count (the contract).
        let kept = self.counts[worker].with_mut(|kept| unsafe { std::mem::take(&mut *kept) });
        let shared = Arc::as_ptr(&like.shared);
        for _ in 0..kept {
            // SAFETY: every count taken off the number above was a strong count of
            // this state that a forgotten handle left.
            drop(unsafe { adopt(shared) });
        }
    }
}

/// Counts of a scheduler's shared state (`Arc<Shared>`) that no [`Handle`] owns,
/// parked by a worker that kept more than it keeps ([`KeptHandles`]) and taken back,
/// a batch at once, by a worker that has none. In a burst of spawns where one
/// worker spawns and another ends what it spawned, the first cloned a handle per
/// cell and the second dropped one per cell, two locked instructions per process on
/// the one line every worker writes; parking moves them a batch at a time.
///
/// The counts live in the state they count, so they keep it alive: each worker
/// gives back what is parked as it leaves ([`give_back`](Self::give_back)), and
/// only a worker of the scheduler parks, so nothing is parked once the last has
/// left.
///
/// One atomic word, every transfer a single read-modify-write of it: no state
/// for loom to explore beyond what the word's modification order gives. The tests
/// below check the counts on real threads and the state's release at the end.
pub(crate) struct ParkedHandles(std::sync::atomic::AtomicUsize);

impl ParkedHandles {
    pub(crate) const fn new() -> Self {
        Self(std::sync::atomic::AtomicUsize::new(0))
    }

    /// Parks `counts` strong counts of this scheduler's state, each left by a
    /// forgotten handle, owned by the counter from now on.
    pub(crate) fn park(&self, counts: usize) {
        // Relaxed: a count carries no data; the `Arc`'s own operations order the
        // last drop after every use.
        self.0
            .fetch_add(counts, std::sync::atomic::Ordering::Relaxed);
    }

    /// Takes up to `most` parked counts, owned by the caller from now on.
    pub(crate) fn take(&self, most: usize) -> usize {
        use std::sync::atomic::Ordering::Relaxed;
        match self.0.fetch_update(Relaxed, Relaxed, |parked| {
            (parked > 0).then(|| parked - parked.min(most))
        }) {
            Ok(parked) => parked.min(most),
            Err(_) => 0,
        }
    }

    /// Gives every parked count back (drops it): called by each worker as it
    /// leaves, with its own handle as `like`, which keeps the state alive meanwhile.
    pub(crate) fn give_back(&self, like: &Handle) {
        let parked = self.0.swap(0, std::sync::atomic::Ordering::Relaxed);
        let shared = Arc::as_ptr(&like.shared);
        for _ in 0..parked {
            // SAFETY: every count the swap took off the counter was parked: a
            // strong count of this state that a forgotten handle left, owned by
            // nobody else now.
            drop(unsafe { adopt(shared) });
        }
    }
}

/// A handle owning one strong count of the state at `shared`.
///
/// # Safety
/// The caller owns one strong count of the `Arc` whose data is at `shared` (a
/// count a forgotten handle kept), and hands it to the handle.
unsafe fn adopt(shared: *const Shared) -> Handle {
    // SAFETY: the caller's count is what `Arc::from_raw` takes over, as for a
    // pointer from `Arc::into_raw`.
    Handle::from_shared(unsafe { Arc::from_raw(shared) })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{process, this, BoxError, Scheduler};

    fn strong(handle: &Handle) -> usize {
        Arc::strong_count(&handle.shared)
    }

    /// A scheduler (kept alive by the caller), a handle to it and its count now.
    fn counted_handle() -> (Scheduler, Handle, usize) {
        let scheduler = Scheduler::builder().workers(1).build().expect("builds");
        let handle = scheduler.handle();
        let before = strong(&handle);
        (scheduler, handle, before)
    }

    /// `n` strong counts of `handle`'s state, as forgotten handles leave them.
    fn forget_clones(handle: &Handle, n: usize) -> usize {
        for _ in 0..n {
            std::mem::forget(handle.clone());
        }
        n
    }

    #[test]
    fn parked_counts_are_taken_in_batches_and_all_given_back() {
        let (_scheduler, handle, before) = counted_handle();
        let parked = ParkedHandles::new();
        parked.park(forget_clones(&handle, 5));
        assert_eq!(strong(&handle), before + 5, "parking keeps the counts");
        assert_eq!(parked.take(3), 3);
        assert_eq!(strong(&handle), before + 5, "taking passes them on");
        for _ in 0..3 {
            // SAFETY: each is one of the three counts taken above.
            drop(unsafe { adopt(Arc::as_ptr(&handle.shared)) });
        }
        assert_eq!(strong(&handle), before + 2);
        parked.give_back(&handle);
        assert_eq!(strong(&handle), before);
        assert_eq!(parked.take(3), 0, "nothing is left to take");
        assert_eq!(strong(&handle), before);
    }

    #[test]
    fn threads_parking_and_taking_at_once_lose_and_double_no_count() {
        let (_scheduler, handle, before) = counted_handle();
        let parked = ParkedHandles::new();
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let (parked, handle) = (&parked, &handle);
                scope.spawn(move || {
                    let mut kept = 0;
                    for round in 0..20_000 {
                        // A third of the rounds take a batch back, as a spawning
                        // worker does; the others keep a count, as an ending worker
                        // does, and park half when sixteen are kept.
                        if (round + thread) % 3 == 0 {
                            kept += parked.take(7);
                        } else {
                            kept += forget_clones(handle, 1);
                            if kept >= 16 {
                                parked.park(8);
                                kept -= 8;
                            }
                        }
                        while kept > 32 {
                            // SAFETY: one of the counts this thread holds.
                            drop(unsafe { adopt(Arc::as_ptr(&handle.shared)) });
                            kept -= 1;
                        }
                    }
                    parked.park(kept);
                });
            }
        });
        parked.give_back(&handle);
        assert_eq!(
            strong(&handle),
            before,
            "every count came back exactly once"
        );
    }

    #[test]
    fn kept_counts_are_lent_parked_past_the_limit_and_given_back() {
        let (_scheduler, handle, before) = counted_handle();
        let (kept, parked) = (KeptHandles::new(2), ParkedHandles::new());
        // SAFETY: this test's thread stands for both workers, one at a time; the
        // counts are this scheduler's.
        unsafe {
            for _ in 0..KEPT_HANDLES + 1 {
                kept.keep(1, &parked);
            }
            forget_clones(&handle, KEPT_HANDLES + 1);
            assert_eq!(
                strong(&handle),
                before + KEPT_HANDLES + 1,
                "kept, not dropped"
            );
            assert_eq!(
                parked.take(usize::MAX),
                HANDLE_BATCH,
                "a batch parked past the limit"
            );
            parked.park(HANDLE_BATCH);
            // Worker 0 keeps none: it takes a batch from the parked ones.
            let lent = kept.lend(0, &handle, &parked);
            assert_eq!(
                strong(&handle),
                before + KEPT_HANDLES + 1,
                "lent from a kept count"
            );
            drop(lent);
            assert_eq!(parked.take(usize::MAX), 0, "the batch went to worker 0");
            kept.give_back(0, &handle);
            kept.give_back(1, &handle);
            assert_eq!(strong(&handle), before, "every count came back once");
            // Nothing kept and nothing parked: a clone.
            let cloned = kept.lend(1, &handle, &parked);
            assert_eq!(strong(&handle), before + 1);
            drop(cloned);
        }
    }

    /// Spawns `n` children that end at once, so that the other worker steals and
    /// ends many of them: it parks their handles, and the spawner takes them back.
    struct Burst;

    // The macro works inside the runtime crate too (`extern crate self as wsched`).
    #[process]
    impl Burst {
        #[entry]
        fn run(&mut self, n: u32) -> Result<(), BoxError> {
            for _ in 0..n {
                this::spawn_detached(Child, "run", ())?;
            }
            Ok(())
        }
    }

    struct Child;

    #[process]
    impl Child {
        #[entry]
        fn run(&mut self) {}
    }

    #[test]
    fn a_scheduler_whose_workers_parked_handles_is_freed_when_dropped() {
        let scheduler = Scheduler::builder().workers(2).build().expect("builds");
        let state = Arc::downgrade(&scheduler.handle().shared);
        for _ in 0..4 {
            let pid = scheduler
                .spawn(Burst, "run", (10_000_u32,))
                .expect("spawns");
            scheduler.wait(pid).expect("ends");
        }
        drop(scheduler);
        assert!(
            state.upgrade().is_none(),
            "a count parked by a worker outlived the scheduler"
        );
    }
}
