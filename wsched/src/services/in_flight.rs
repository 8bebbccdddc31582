//! Work in flight: handler work started for a yield that its process can still give
//! up on, so that giving up reaches the work.
//!
//! A blocking handler's job and an async handler's future run away from the worker,
//! for as long as they take. Meanwhile the process that yielded may stop wanting the
//! result: it withdrew the yield (a `recv!` timeout or a pattern arm won, a
//! cancelled `yield_cmd!` gave up), it ended (finished, failed, killed, a linked
//! exit), or the scheduler shut down. Each such piece of work is registered here as a
//! [`Work`], under its process's PID and the yield's tag, and each of those events
//! *claims* it: a future is aborted (tokio drops it), a queued blocking job is
//! skipped, and a running one sees [`Work::is_wanted`] turn false.
//!
//! # Exactly one claim
//!
//! A piece of work ends exactly once, by whichever comes first of: its result (the
//! future's output, the handler's completion), its deadline (an async handler's
//! timeout, on the scheduler's timers), or its process giving up on it. Each
//! [`Work::claim`]s it under the work's own lock; only the winner acts (delivers
//! the result, delivers the timeout, or aborts), and the others do nothing. An abort
//! can be claimed before the future is spawned, so the abort handle is given to the
//! work afterwards ([`Work::set_abort`]), and runs at once if the claim came first.
//! `runtime/tests/loom_in_flight.rs` model-checks both races.
//!
//! # Finding the work
//!
//! The table maps a PID to the work of its process (a short vector: a process rarely
//! has more than a few yields out), in shards by PID, as the monitor table does.
//! Nothing is added to a process's cell but one sticky flag (`has_work_out`, set the
//! first time work is registered for it), so processes that never use such a
//! handler never look here: not when they withdraw a yield, not when they end, not
//! when a completion reaches them. An entry leaves the table when whoever runs the
//! work lets go of it (an async task that answered or was aborted, a blocking job
//! whose handler returned or that was skipped), and when its process ends.
//!
//! The shards are plain locks, not the model checker's: nothing inside them is a
//! scheduling point (a map operation, an `Arc` clone), so a loom model gains
//! nothing from them but states to explore; the protocol between the parties — who
//! claims the work — is each [`Work`]'s own lock, which the models check.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64 as StatCounter, Ordering as StatOrdering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::engine::cell::CellRef;
use crate::engine::shared::Shared;
use crate::fast_hash::FastHash;
use crate::pid::Pid;
use crate::sync::Mutex;
use crate::tag::Tag;

impl Shared {
    /// The work in flight for processes' yields.
    #[inline(always)]
    pub(crate) fn in_flight(&self) -> &InFlight {
        self.part()
    }
}

/// How the table is cut: by PID, whose low bits differ between live processes.
const SHARDS: usize = if cfg!(loom) { 2 } else { 16 };

type Shard = HashMap<Pid, Vec<Arc<Work>>, FastHash>;

/// The table of work in flight (see the module's documentation).
pub(crate) struct InFlight {
    shards: Box<[CachePadded<parking_lot::Mutex<Shard>>]>,
    /// Work claimed by its process giving up on it (or by the shutdown) before its
    /// result: futures aborted, blocking jobs skipped or left to finish unread. A
    /// statistic, so a plain std atomic even under loom.
    aborted: StatCounter,
}

impl InFlight {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Default::default()).collect(),
            aborted: StatCounter::new(0),
        }
    }

    fn shard(&self, pid: Pid) -> &parking_lot::Mutex<Shard> {
        &self.shards[pid.as_u64() as usize % SHARDS]
    }

    /// Registers work for the yield `tag` of `cell`'s process, reporting to `counts`
    /// (if given) when it is aborted or times out. Called on the worker that
    /// dispatches the yield, which owns the process, before the work can complete.
    pub(crate) fn start(
        &self,
        cell: &CellRef,
        tag: Tag,
        command: fn() -> &'static str,
        counts: Option<Arc<WorkCounts>>,
    ) -> Arc<Work> {
        let work = Arc::new(Work {
            cell: cell.clone(),
            tag,
            command,
            counts,
            state: Mutex::new(WorkState {
                claimed: false,
                abort: Abort::NotSet,
            }),
        });
        cell.set_work_out();
        self.shard(cell.pid())
            .lock()
            .entry(cell.pid())
            .or_default()
            .push(work.clone());
        work
    }

    /// The yield `tag` of `pid` was withdrawn: its work is aborted. Returns how many
    /// pieces were (more than one only if the process reused a tag).
    ///
    /// The work stays in the table, claimed, until whoever runs it lets go (the
    /// aborted future is dropped, the skipped or finished blocking job delivers or
    /// releases its completer) or the process ends, so that
    /// [`is_wanted`](Self::is_wanted) can tell a blocking handler it is not wanted.
    pub(crate) fn withdraw(&self, pid: Pid, tag: Tag) -> usize {
        let withdrawn: Vec<Arc<Work>> = match self.shard(pid).lock().get(&pid) {
            Some(list) => list.iter().filter(|w| w.tag == tag).cloned().collect(),
            None => return 0,
        };
        self.abort_each(withdrawn)
    }

    /// Whether the process `pid` still waits for the work of its yield `tag`: true
    /// unless that work is registered and was claimed (withdrawn, timed out); work
    /// that was never registered is not this table's to judge.
    pub(crate) fn is_wanted(&self, pid: Pid, tag: Tag) -> bool {
        let shard = self.shard(pid).lock();
        shard
            .get(&pid)
            .and_then(|list| list.iter().find(|w| w.tag == tag))
            .is_none_or(|work| work.is_wanted())
    }

    /// `pid` ended: all its work is aborted. Returns how many pieces were.
    pub(crate) fn release(&self, pid: Pid) -> usize {
        let released = self.shard(pid).lock().remove(&pid).unwrap_or_default();
        self.abort_each(released)
    }

    /// The scheduler stopped: whatever work is left is aborted. Returns how many
    /// pieces were.
    pub(crate) fn abort_all(&self) -> usize {
        let mut left = Vec::new();
        for shard in self.shards.iter() {
            left.extend(shard.lock().drain().flat_map(|(_, list)| list));
        }
        self.abort_each(left)
    }

    /// Takes `work` out of the table, if it is still there.
    pub(crate) fn remove(&self, work: &Arc<Work>) {
        let pid = work.cell.pid();
        let mut shard = self.shard(pid).lock();
        if let Some(list) = shard.get_mut(&pid) {
            list.retain(|other| !Arc::ptr_eq(other, work));
            if list.is_empty() {
                shard.remove(&pid);
            }
        }
    }

    fn abort_each(&self, works: Vec<Arc<Work>>) -> usize {
        let mut aborted = 0;
        for work in works {
            if work.abort() {
                aborted += 1;
            }
        }
        self.aborted
            .fetch_add(aborted as u64, StatOrdering::Relaxed);
        aborted
    }

    /// Pieces of work aborted so far.
    pub(crate) fn aborted(&self) -> u64 {
        self.aborted.load(StatOrdering::Relaxed)
    }

    /// Pieces of work in the table now.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().values().map(Vec::len).sum::<usize>())
            .sum()
    }
}

/// What ends a piece of work (see [`Work::claim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Its result is here, to deliver.
    Result,
    /// Its deadline passed: the yield fails as timed out and the work is aborted.
    Deadline,
    /// Its process gave up on it (or the scheduler stopped): the work is aborted.
    Abort,
}

/// One piece of work in flight for a yield.
pub(crate) struct Work {
    /// The process that yielded: kept alive while the work is out, so a deadline
    /// (a timer on its list) and a completion can reach it.
    cell: CellRef,
    tag: Tag,
    command: fn() -> &'static str,
    counts: Option<Arc<WorkCounts>>,
    state: Mutex<WorkState>,
}

struct WorkState {
    /// Whether something already ended the work (see [`Claim`]).
    claimed: bool,
    abort: Abort,
}

/// How to stop the work, once it is running somewhere.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
enum Abort {
    /// Not given yet (the future is not spawned yet).
    NotSet,
    /// Given, not used.
    Armed(Box<dyn FnOnce() + Send>),
    /// Used, or claimed before it was given: a handle given now runs at once.
    Fired,
    /// The work ended with its result: a handle given now is dropped.
    Done,
}

impl Work {
    /// The process that yielded.
    pub(crate) fn cell(&self) -> &CellRef {
        &self.cell
    }

    /// The yield's tag.
    pub(crate) fn tag(&self) -> Tag {
        self.tag
    }

    /// The command's type name.
    pub(crate) fn command_name(&self) -> &'static str {
        (self.command)()
    }

    /// Whether the process still waits for this work's result: nothing has ended it
    /// yet. A relaxed question: the answer may change right after.
    pub(crate) fn is_wanted(&self) -> bool {
        !self.state.lock().claimed
    }

    /// Ends the work for `claim`, if nothing ended it first. Returns whether this
    /// call did: only the winner acts. An [`Abort`](Claim::Abort) or a
    /// [`Deadline`](Claim::Deadline) that wins runs the abort handle (now, or when
    /// it is given).
    pub(crate) fn claim(&self, claim: Claim) -> bool {
        let abort = {
            let mut state = self.state.lock();
            if state.claimed {
                return false;
            }
            state.claimed = true;
            let next = if claim == Claim::Result {
                Abort::Done
            } else {
                Abort::Fired
            };
            std::mem::replace(&mut state.abort, next)
        };
        if let Abort::Armed(abort) = abort {
            if claim == Claim::Result {
                drop(abort);
            } else {
                abort();
            }
        }
        if let Some(counts) = &self.counts {
            match claim {
                Claim::Result => {}
                Claim::Deadline => counts.count(&counts.timed_out),
                Claim::Abort => counts.count(&counts.aborted),
            }
        }
        true
    }

    /// Gives the work the way to stop it. If it was already aborted, `abort` runs
    /// now; if it already ended with its result, `abort` is dropped.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn set_abort(&self, abort: Box<dyn FnOnce() + Send>) {
        let mut state = self.state.lock();
        match state.abort {
            Abort::NotSet => state.abort = Abort::Armed(abort),
            Abort::Fired => {
                drop(state);
                abort();
            }
            Abort::Done | Abort::Armed(_) => {}
        }
    }

    /// Claims the work for its process giving up on it. Returns whether it was
    /// still out.
    fn abort(&self) -> bool {
        self.claim(Claim::Abort)
    }
}

/// What happened to the work of one handler, counted as it happens (the metrics of
/// an async handler: see `io/handler.rs`). Statistics: plain std atomics.
#[derive(Debug, Default)]
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub(crate) struct WorkCounts {
    /// Running now.
    pub(crate) in_flight: StatCounter,
    /// Waiting for a free place (an async handler's `max_in_flight`).
    pub(crate) queued: StatCounter,
    pub(crate) completed: StatCounter,
    pub(crate) failed: StatCounter,
    pub(crate) timed_out: StatCounter,
    pub(crate) aborted: StatCounter,
}

#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
impl WorkCounts {
    pub(crate) fn count(&self, counter: &StatCounter) {
        counter.fetch_add(1, StatOrdering::Relaxed);
    }

    pub(crate) fn uncount(&self, counter: &StatCounter) {
        counter.fetch_sub(1, StatOrdering::Relaxed);
    }

    pub(crate) fn read(counter: &StatCounter) -> u64 {
        counter.load(StatOrdering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::runtime::tests::Inert;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn cell(pid: u64) -> CellRef {
        crate::engine::cell::ProcessCell::ready(Pid::from_raw(pid), None, "run", false, Inert)
    }

    fn name() -> &'static str {
        "Cmd"
    }

    fn counter_abort(count: &Arc<AtomicUsize>) -> Box<dyn FnOnce() + Send> {
        let count = count.clone();
        Box::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[test]
    fn a_withdrawn_tag_aborts_its_work_only() {
        let table = InFlight::new();
        let cell = cell(1);
        let aborts = Arc::new(AtomicUsize::new(0));
        let one = table.start(&cell, Tag(1), name, None);
        let two = table.start(&cell, Tag(2), name, None);
        one.set_abort(counter_abort(&aborts));
        two.set_abort(counter_abort(&aborts));
        assert!(cell.has_work_out());
        assert_eq!(table.withdraw(cell.pid(), Tag(1)), 1);
        assert_eq!(aborts.load(Ordering::SeqCst), 1);
        assert!(!one.is_wanted());
        assert!(two.is_wanted());
        assert!(!table.is_wanted(cell.pid(), Tag(1)));
        assert!(table.is_wanted(cell.pid(), Tag(2)));
        assert!(
            table.is_wanted(cell.pid(), Tag(3)),
            "not registered: not judged"
        );
        // Withdrawn, it stays until its runner lets go.
        assert_eq!(table.len(), 2);
        table.remove(&one);
        assert_eq!(table.len(), 1);
        assert_eq!(table.withdraw(cell.pid(), Tag(1)), 0);
        assert_eq!(table.release(cell.pid()), 1);
        assert_eq!(aborts.load(Ordering::SeqCst), 2);
        assert_eq!(table.len(), 0);
        assert_eq!(table.aborted(), 2);
    }

    #[test]
    fn an_abort_before_the_handle_runs_the_handle_when_given() {
        let table = InFlight::new();
        let cell = cell(2);
        let aborts = Arc::new(AtomicUsize::new(0));
        let work = table.start(&cell, Tag(5), name, None);
        assert_eq!(table.release(cell.pid()), 1);
        assert_eq!(aborts.load(Ordering::SeqCst), 0);
        work.set_abort(counter_abort(&aborts));
        assert_eq!(aborts.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_result_first_leaves_nothing_to_abort() {
        let table = InFlight::new();
        let cell = cell(3);
        let aborts = Arc::new(AtomicUsize::new(0));
        let counts = Arc::new(WorkCounts::default());
        let work = table.start(&cell, Tag(9), name, Some(counts.clone()));
        work.set_abort(counter_abort(&aborts));
        assert!(work.claim(Claim::Result));
        table.remove(&work);
        assert!(!work.claim(Claim::Deadline));
        assert_eq!(table.release(cell.pid()), 0);
        work.set_abort(counter_abort(&aborts));
        assert_eq!(aborts.load(Ordering::SeqCst), 0);
        assert_eq!(WorkCounts::read(&counts.timed_out), 0);
        assert_eq!(WorkCounts::read(&counts.aborted), 0);
        assert_eq!(table.aborted(), 0);
    }

    #[test]
    fn a_deadline_counts_as_timed_out_and_aborts() {
        let table = InFlight::new();
        let cell = cell(4);
        let aborts = Arc::new(AtomicUsize::new(0));
        let counts = Arc::new(WorkCounts::default());
        let work = table.start(&cell, Tag(1), name, Some(counts.clone()));
        work.set_abort(counter_abort(&aborts));
        assert!(work.claim(Claim::Deadline));
        table.remove(&work);
        assert!(!work.claim(Claim::Result));
        assert_eq!(aborts.load(Ordering::SeqCst), 1);
        assert_eq!(WorkCounts::read(&counts.timed_out), 1);
        assert_eq!(table.len(), 0);
    }
}
