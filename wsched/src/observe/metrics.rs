//! Always-on counters, cheap enough to leave on, and the process listing.

use std::time::{Duration, Instant};

use crate::engine::bounded::MailboxInfo;
use crate::engine::counters::WorkerCounters;
use crate::engine::held::MessageCount;
use crate::engine::process::{SuspendKind, SuspendPoint};
use crate::engine::state::ProcessState;
use crate::observe::timing::StepTimingMetrics;
use crate::pid::Pid;
use crate::type_name::{plural, ProcessLabel, WaitingTypes};
impl WorkerCounters {
    /// `local_queue`: the worker's deque length now; `start`: the scheduler's start.
    pub(crate) fn snapshot(&self, local_queue: usize, start: Instant) -> WorkerMetrics {
        WorkerMetrics {
            steps: self.steps.get(),
            local_pops: self.local_pops.get(),
            lifo_pops: self.lifo_pops.get(),
            global_pops: self.global_pops.get(),
            steals: self.steals.get(),
            stolen: self.stolen.get(),
            lifo_steals: self.lifo_steals.get(),
            parks: self.parks.get(),
            noop_wakes: self.noop_wakes.get(),
            overflows: self.overflows.get(),
            overflowed: self.overflowed.get(),
            busy: self.busy.read(start),
            local_queue,
        }
    }
}

/// A snapshot of one worker's counters since the scheduler started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// Steps run.
    pub steps: u64,
    /// Processes taken from its own deque.
    pub local_pops: u64,
    /// Processes taken from its LIFO slot (woken by the previous step).
    pub lifo_pops: u64,
    /// Processes taken from the global queue (batches count once).
    pub global_pops: u64,
    /// Successful steals.
    pub steals: u64,
    /// Processes moved by those steals (including the one run at once).
    pub stolen: u64,
    /// Of those steals, the ones that took another worker's LIFO slot because that
    /// worker was stuck in a long step.
    pub lifo_steals: u64,
    /// Times it parked on its condition variable.
    pub parks: u64,
    /// Times it was woken from a park and parked again without running a step (a
    /// wake-up that found its work already taken by another worker).
    pub noop_wakes: u64,
    /// Times its deque was full and moved half its processes to the global queue.
    pub overflows: u64,
    /// Processes moved to the global queue by those overflows.
    pub overflowed: u64,
    /// Time spent awake, from waking up to parking again: running steps, and also
    /// spinning and searching for work (as tokio counts it), but not sleeping.
    /// Busy time over wall time is the worker's load.
    pub busy: Duration,
    /// Processes in its deque when the snapshot was taken (not counting its LIFO
    /// slot).
    pub local_queue: usize,
}

/// A snapshot of the scheduler's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// One entry per worker, by worker index.
    pub workers: Vec<WorkerMetrics>,
    /// Processes spawned (successfully initialised).
    pub spawned: u64,
    /// Processes that finished with a result.
    pub finished: u64,
    /// Processes that ended with an error (failure or panic), not counting stops.
    pub failed: u64,
    /// Processes stopped without finishing: by shutdown's timeout, or killed
    /// ([`Handle::kill`](crate::Handle::kill)).
    pub stopped: u64,
    /// Processes not yet ended.
    pub live: usize,
    /// Items waiting in the global queue.
    pub global_queue: usize,
    /// Processes queued from outside the workers (spawned or woken by another
    /// thread, a timer or the blocking pool): they go through the global queue.
    pub remote_schedules: u64,
    /// Step durations and wake latencies per worker, and the long steps found, if
    /// step timing is on ([`Builder::step_timing`](crate::Builder::step_timing)).
    pub step_timing: Option<StepTimingMetrics>,
    /// Timers armed and not yet fired or cancelled, including those whose deadline
    /// never comes: [`Sleep`](crate::command::Sleep)s (cancelled when their process
    /// ends or withdraws the yield) and timed messages
    /// ([`Handle::send_after`](crate::Handle::send_after),
    /// [`Handle::send_interval`](crate::Handle::send_interval); cancelled through
    /// their [`TimerRef`](crate::TimerRef)).
    pub pending_timers: usize,
    /// Timed messages dropped undelivered, though nobody cancelled them: messages
    /// that fell due after their target had ended (an interval counts the one that
    /// found its target gone, and stops), and those still pending when the scheduler
    /// shut down (their targets had all ended). Messages still unread in a mailbox
    /// when its process ends are not counted here, but in
    /// [`dead_letters`](Self::dead_letters).
    pub undelivered_timed_messages: u64,
    /// Threads of the blocking pool alive right now (idle ones retire after the
    /// keep-alive).
    pub blocking_threads: usize,
    /// Failures nobody joined, monitored or linked to, reported to the
    /// [`on_unobserved_failure`](crate::Builder::on_unobserved_failure) hook
    /// (see [`FailureReport`](crate::FailureReport) for the rule).
    pub unobserved_failures: u64,
    /// Messages handed to the [`on_dead_letter`](crate::Builder::on_dead_letter)
    /// hook (or dropped, without one): still unread when their process ended, or
    /// dropped by a full bounded mailbox (see [`DeadLetter`](crate::DeadLetter) and
    /// its [`reason`](crate::DeadLetter::reason)).
    pub dead_letters: u64,
    /// Messages full bounded mailboxes with
    /// [`Overflow::DropOldest`](crate::Overflow::DropOldest) dropped to make room
    /// for newer ones. Each is a dead letter too (so also in
    /// [`dead_letters`](Self::dead_letters)).
    pub dropped_messages: u64,
    /// Messages full bounded mailboxes with
    /// [`Overflow::Reject`](crate::Overflow::Reject) refused: sends that failed with
    /// [`SendErrorKind::MailboxFull`](crate::SendErrorKind::MailboxFull) (the
    /// message handed back), and timed messages that became dead letters.
    pub rejected_messages: u64,
    /// Handler work running away from the workers for yields (blocking handlers'
    /// jobs, async handlers' futures) right now.
    pub work_in_flight: usize,
    /// Handler work given up because nobody waited for its result any more (the
    /// yield withdrawn, the process ended, the scheduler stopped): async futures
    /// dropped, blocking jobs skipped or left to finish unread.
    pub aborted_work: u64,
    /// One entry per async handler (the `tokio` feature): the user's, in
    /// registration order, then the built-in ones of the TCP commands
    /// ([`wsched::io::tcp`](crate::io::tcp)) and of the UDP command
    /// ([`wsched::io::udp`](crate::io::udp)) that the user did not replace.
    #[cfg(feature = "tokio")]
    pub async_handlers: Vec<AsyncHandlerMetrics>,
    /// The scheduler's node in its cluster, if it joined one (the `cluster`
    /// feature): per peer, messages and bytes in and out, round trip, last heard.
    #[cfg(feature = "cluster")]
    pub cluster: Option<ClusterMetrics>,
}

/// One peer node, as [`ClusterMetrics`] reports it (the `cluster` feature).
#[cfg(feature = "cluster")]
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerMetrics {
    /// The peer's name.
    pub node: String,
    /// Its incarnation.
    pub incarnation: u64,
    /// Frames sent to it (heartbeats not counted).
    pub messages_out: u64,
    /// Bytes sent to it, heartbeats included.
    pub bytes_out: u64,
    /// Frames received from it (heartbeats not counted).
    pub messages_in: u64,
    /// Bytes received from it, heartbeats included.
    pub bytes_in: u64,
    /// The latest measured round trip of a heartbeat, if any yet.
    pub round_trip: Option<Duration>,
    /// How long ago a frame from it arrived.
    pub last_heard: Duration,
}

/// A node's cluster metrics ([`Metrics::cluster`], `wsched::cluster::Cluster::metrics`).
#[cfg(feature = "cluster")]
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterMetrics {
    /// This node's name.
    pub node: String,
    /// Its incarnation.
    pub incarnation: u64,
    /// Its peers that are up, by name.
    pub peers: Vec<PeerMetrics>,
    /// Frames handed to the transport and not yet to the broker.
    pub queued_frames: usize,
    /// Messages from other nodes that could not be decoded here (no codec, or bad
    /// text), dropped.
    pub undecodable: u64,
}

/// What one async handler has done, in [`Metrics::async_handlers`](crate::Metrics).
#[cfg(feature = "tokio")]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AsyncHandlerMetrics {
    /// The command's type name.
    pub command: &'static str,
    /// Futures running now.
    pub in_flight: u64,
    /// Yields waiting for a place (`WhenFull::Queue`).
    pub queued: u64,
    /// Futures that ended with the command's output, delivered.
    pub completed: u64,
    /// Yields that failed: the future's error, its panic, or a full handler
    /// (`WhenFull::Fail`).
    pub failed: u64,
    /// Yields whose timeout passed first.
    pub timed_out: u64,
    /// Futures dropped because nobody waited any more: the yield withdrawn, the
    /// process ended, the scheduler shut down.
    pub aborted: u64,
}

impl Metrics {
    /// The sum over all workers.
    pub fn total(&self) -> WorkerMetrics {
        self.workers
            .iter()
            .fold(WorkerMetrics::default(), |mut sum, w| {
                sum.steps += w.steps;
                sum.local_pops += w.local_pops;
                sum.lifo_pops += w.lifo_pops;
                sum.global_pops += w.global_pops;
                sum.steals += w.steals;
                sum.stolen += w.stolen;
                sum.lifo_steals += w.lifo_steals;
                sum.parks += w.parks;
                sum.noop_wakes += w.noop_wakes;
                sum.overflows += w.overflows;
                sum.overflowed += w.overflowed;
                sum.busy += w.busy;
                sum.local_queue += w.local_queue;
                sum
            })
    }
}

/// One line of [`Scheduler::processes`](crate::Scheduler::processes).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// The process.
    pub pid: Pid,
    /// The process that spawned it (`None`: spawned from outside any process).
    pub parent: Option<Pid>,
    /// Its state when listed.
    pub state: ProcessState,
    /// The entry it runs.
    pub entry: String,
    /// The type it runs, in full, as [`std::any::type_name`] spells it
    /// (`my_crate::crawl::Crawler`): the struct of a `#[process]` `impl` block, the
    /// implementing type of a hand-written [`Process`](crate::Process),
    /// [`Supervisor`](crate::supervisor::Supervisor) for a supervisor, [`Inbox`](crate::Inbox)
    /// for an inbox's process. Listings show it shortened, before the entry:
    /// `Crawler::run <5>` (see [`label`](Self::label)).
    pub process_type: &'static str,
    /// Steps taken so far.
    pub steps: u64,
    /// Where it last said it waits (for macro processes: the `yield_cmd!`/`recv!`
    /// call), if it is suspended and said so.
    pub suspended_at: Option<SuspendPoint>,
    /// Messages waiting for it: those in its mailbox not yet taken in by a step,
    /// and, for `#[process]` processes, those taken in that no `recv!` has received
    /// yet (of a type no receive asked for so far).
    pub mailbox: usize,
    /// The waiting messages by type, in order of first arrival: a message nobody
    /// receives shows up here.
    pub waiting_messages: Vec<MessageCount>,
    /// How long it has been in its state: since its current step began (running),
    /// since its last step (waiting, or queued again), or since it was spawned
    /// (never run yet). To the millisecond, from a clock the workers read when they
    /// wake and every 61 steps: so a process that just ended a long step counts
    /// that step too.
    pub time_in_state: Duration,
    /// The time its steps took in all, if step timing is on
    /// ([`Builder::step_timing`](crate::Builder::step_timing)).
    pub busy: Option<Duration>,
    /// Its mailbox's capacity, fill and overflow counts, if it was spawned with a
    /// bounded one ([`SpawnOptions::bounded_mailbox`](crate::SpawnOptions::bounded_mailbox));
    /// `None`: unbounded.
    pub bounded_mailbox: Option<MailboxInfo>,
    /// The processes on other nodes of a cluster it is linked to (the `cluster`
    /// feature; empty otherwise).
    pub remote_links: Vec<Pid>,
    /// The processes on other nodes of a cluster it monitors.
    pub remote_monitors: Vec<Pid>,
}

impl ProcessInfo {
    /// How listings, `top` and the recorder's pictures name the process: its type,
    /// shortened, its entry and its PID.
    ///
    /// ```
    /// use wsched::prelude::*;
    ///
    /// struct Crawler;
    ///
    /// #[process]
    /// impl Crawler {
    ///     #[entry]
    ///     fn run(&mut self) -> Result<(), BoxError> {
    ///         let _ = recv!(u32)?;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let scheduler = wsched::Scheduler::builder().workers(1).build()?;
    /// let pid = scheduler.spawn(Crawler, "run", ())?;
    /// let listing = scheduler.processes();
    /// let info = listing.iter().find(|p| p.pid == pid).expect("it waits for a message");
    /// assert!(info.process_type.ends_with("Crawler"));
    /// assert_eq!(info.label(), format!("Crawler::run {pid}"));
    /// scheduler.send(pid, 1_u32)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn label(&self) -> String {
        ProcessLabel::new(self.process_type, &self.entry, self.pid).to_string()
    }

    /// The commands it waits for, if it is suspended at a yield, from its
    /// suspension point: a `#[process]` counts down as the completions of a
    /// `yield_all!` arrive, in the order the commands were yielded (one that arrives
    /// ahead of an earlier one counts once the earlier one is in). 0 when it is not
    /// suspended at a yield.
    pub fn outstanding_yields(&self) -> usize {
        match self.suspended_at {
            Some(SuspendPoint {
                kind: SuspendKind::Yield { count, .. },
                ..
            }) => count,
            _ => 0,
        }
    }
}

impl std::fmt::Display for ProcessInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} [{}] after {}",
            ProcessLabel::new(self.process_type, &self.entry, self.pid),
            self.state,
            plural(self.steps, "step")
        )?;
        if let Some(point) = &self.suspended_at {
            write!(f, ", at {point}")?;
        }
        match self.mailbox {
            0 => {}
            1 => f.write_str(", 1 message waiting")?,
            n => write!(f, ", {n} messages waiting")?,
        }
        let receives = match self.suspended_at {
            Some(SuspendPoint {
                kind: SuspendKind::Receive { message_type },
                ..
            }) => message_type,
            _ => None,
        };
        let types = self.waiting_messages.iter();
        let types = types.map(|m| (m.type_name, m.count));
        write!(f, "{}", WaitingTypes { types, receives })?;
        if let Some(mailbox) = &self.bounded_mailbox {
            write!(f, ", {mailbox}")?;
        }
        Ok(())
    }
}
