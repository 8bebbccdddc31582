//! `top`: the processes that do the most, now or over a window of time, as Erlang's
//! recon ranks them with `proc_count` and `proc_window`.
//!
//! Both are built on [`Handle::processes`](crate::Handle::processes) listings, so
//! they cost nothing until asked for: [`Handle::top`] ranks one listing by totals
//! (steps since spawn, busy time since spawn, messages waiting now), and
//! [`Handle::top_window`] takes one listing, waits, takes another, and ranks by what
//! changed in between (steps and busy time in the window, mailbox growth). A process
//! spawned during the window counts from zero; one that ended during it is not
//! listed. [`rank_window`] ranks two listings a caller took itself, for a display
//! that refreshes on its own clock.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::engine::handle::Handle;
use crate::observe::metrics::ProcessInfo;
use crate::pid::Pid;
use crate::type_name::{plural, ProcessLabel};

/// What [`Handle::top`] and [`Handle::top_window`] rank processes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TopBy {
    /// Steps taken: what keeps a worker busy most often (Erlang's reductions).
    Steps,
    /// Time spent in steps: needs step timing
    /// ([`Builder::step_timing`](crate::Builder::step_timing)).
    Busy,
    /// Messages waiting: a process that falls behind, or one that never receives
    /// what it is sent.
    Mailbox,
}

impl fmt::Display for TopBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Steps => "steps",
            Self::Busy => "busy time",
            Self::Mailbox => "mailbox",
        })
    }
}

/// Why a ranking could not be made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopError {
    /// [`TopBy::Busy`] without step timing: no process has a busy time.
    StepTimingOff,
}

impl fmt::Display for TopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::StepTimingOff => f.write_str(
                "cannot rank by busy time: step timing is off; build the scheduler with \
                 Builder::step_timing(true), or rank by steps",
            ),
        }
    }
}

impl Error for TopError {}

/// One line of a ranking over a window ([`Handle::top_window`], [`rank_window`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WindowEntry {
    /// The process as the second listing saw it.
    pub info: ProcessInfo,
    /// Steps it took in the window.
    pub steps: u64,
    /// Time its steps took in the window (`None` without step timing).
    pub busy: Option<Duration>,
    /// How many more messages wait for it than at the window's start (fewer:
    /// negative).
    pub mailbox_growth: i64,
}

impl fmt::Display for WindowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}]: {}",
            ProcessLabel::new(self.info.process_type, &self.info.entry, self.info.pid),
            self.info.state,
            plural(self.steps, "step")
        )?;
        if let Some(busy) = self.busy {
            write!(f, ", busy {busy:?}")?;
        }
        write!(
            f,
            ", {} waiting ({:+})",
            self.info.mailbox, self.mailbox_growth
        )
    }
}

/// The `n` processes of `listing` with the most of `by`, most first (ties by PID).
///
/// # Errors
/// [`TopError::StepTimingOff`] for [`TopBy::Busy`] on a listing without busy times.
pub fn rank(
    mut listing: Vec<ProcessInfo>,
    by: TopBy,
    n: usize,
) -> Result<Vec<ProcessInfo>, TopError> {
    if by == TopBy::Busy && listing.iter().any(|p| p.busy.is_none()) {
        return Err(TopError::StepTimingOff);
    }
    listing.sort_by_key(|p| {
        let score = match by {
            TopBy::Steps => u128::from(p.steps),
            TopBy::Busy => p.busy.unwrap_or_default().as_nanos(),
            TopBy::Mailbox => p.mailbox as u128,
        };
        (Reverse(score), p.pid)
    });
    listing.truncate(n);
    Ok(listing)
}

/// The `n` processes of `after` that did the most of `by` since `before` (two
/// listings of one scheduler, `before` taken first), most first (ties by PID).
///
/// # Errors
/// [`TopError::StepTimingOff`] for [`TopBy::Busy`] on listings without busy times.
pub fn rank_window(
    before: &[ProcessInfo],
    after: Vec<ProcessInfo>,
    by: TopBy,
    n: usize,
) -> Result<Vec<WindowEntry>, TopError> {
    if by == TopBy::Busy && after.iter().any(|p| p.busy.is_none()) {
        return Err(TopError::StepTimingOff);
    }
    let before: HashMap<Pid, &ProcessInfo> = before.iter().map(|p| (p.pid, p)).collect();
    let mut entries: Vec<WindowEntry> = after
        .into_iter()
        .map(|info| {
            let start = before.get(&info.pid);
            let steps = info.steps - start.map_or(0, |p| p.steps.min(info.steps));
            let busy = info
                .busy
                .map(|busy| busy.saturating_sub(start.and_then(|p| p.busy).unwrap_or_default()));
            let mailbox_growth = info.mailbox as i64 - start.map_or(0, |p| p.mailbox as i64);
            WindowEntry {
                info,
                steps,
                busy,
                mailbox_growth,
            }
        })
        .collect();
    entries.sort_by_key(|e| {
        let score = match by {
            TopBy::Steps => i128::from(e.steps),
            TopBy::Busy => e.busy.unwrap_or_default().as_nanos() as i128,
            TopBy::Mailbox => i128::from(e.mailbox_growth),
        };
        (Reverse(score), e.info.pid)
    });
    entries.truncate(n);
    Ok(entries)
}

impl Handle {
    /// The `n` live processes with the most of `by` since they were spawned (for
    /// [`TopBy::Mailbox`]: waiting now), most first. Like recon's `proc_count`.
    ///
    /// ```
    /// use wsched::top::TopBy;
    /// use wsched::Scheduler;
    ///
    /// let scheduler = Scheduler::builder().build()?;
    /// for p in scheduler.handle().top(TopBy::Mailbox, 10)? {
    ///     println!("{p}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`TopError::StepTimingOff`] for [`TopBy::Busy`] without step timing.
    pub fn top(&self, by: TopBy, n: usize) -> Result<Vec<ProcessInfo>, TopError> {
        if by == TopBy::Busy && self.shared().timing().is_none() {
            return Err(TopError::StepTimingOff);
        }
        rank(self.processes(), by, n)
    }

    /// The `n` processes that did the most of `by` during the next `window` (for
    /// [`TopBy::Mailbox`]: whose mailboxes grew the most), most first. Blocks the
    /// calling thread for `window`; call it from outside the scheduler. Like recon's
    /// `proc_window`.
    ///
    /// # Errors
    /// [`TopError::StepTimingOff`] for [`TopBy::Busy`] without step timing.
    pub fn top_window(
        &self,
        by: TopBy,
        n: usize,
        window: Duration,
    ) -> Result<Vec<WindowEntry>, TopError> {
        if by == TopBy::Busy && self.shared().timing().is_none() {
            return Err(TopError::StepTimingOff);
        }
        let before = self.processes();
        std::thread::sleep(window);
        rank_window(&before, self.processes(), by, n)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::runtime::ProcessState;

    fn info(pid: u64, steps: u64, busy: Option<u64>, mailbox: usize) -> ProcessInfo {
        ProcessInfo {
            pid: Pid::from_raw(pid),
            parent: None,
            state: ProcessState::WaitingForMessage,
            entry: "run".into(),
            process_type: "my::Crawler",
            steps,
            suspended_at: None,
            mailbox,
            waiting_messages: Vec::new(),
            time_in_state: Duration::ZERO,
            busy: busy.map(Duration::from_micros),
            bounded_mailbox: None,
            remote_links: Vec::new(),
            remote_monitors: Vec::new(),
        }
    }

    fn pids<'a>(list: impl IntoIterator<Item = &'a ProcessInfo>) -> Vec<u64> {
        list.into_iter().map(|p| p.pid.as_u64()).collect()
    }

    #[test]
    fn a_listing_ranks_by_totals_most_first_ties_by_pid() {
        let listing = vec![
            info(1, 10, Some(5), 0),
            info(2, 30, Some(1), 7),
            info(3, 10, Some(9), 2),
            info(4, 20, Some(2), 7),
        ];
        assert_eq!(
            pids(&rank(listing.clone(), TopBy::Steps, 3).unwrap()),
            [2, 4, 1]
        );
        assert_eq!(
            pids(&rank(listing.clone(), TopBy::Busy, 2).unwrap()),
            [3, 1]
        );
        assert_eq!(
            pids(&rank(listing.clone(), TopBy::Mailbox, 9).unwrap()),
            [2, 4, 3, 1]
        );
        let untimed = vec![info(1, 1, None, 0)];
        assert_eq!(rank(untimed, TopBy::Busy, 1), Err(TopError::StepTimingOff));
        assert!(TopError::StepTimingOff
            .to_string()
            .contains("step_timing(true)"));
    }

    #[test]
    fn a_window_ranks_by_what_changed_and_counts_newcomers_from_zero() {
        let before = vec![info(1, 100, None, 5), info(2, 10, None, 0)];
        // 1 took 5 steps and drained 3 messages; 2 took 50 and got 4; 3 is new.
        let after = vec![
            info(1, 105, None, 2),
            info(2, 60, None, 4),
            info(3, 20, None, 1),
        ];
        let by_steps = rank_window(&before, after.clone(), TopBy::Steps, 3).unwrap();
        assert_eq!(pids(by_steps.iter().map(|e| &e.info)), [2, 3, 1]);
        assert_eq!(
            by_steps.iter().map(|e| e.steps).collect::<Vec<_>>(),
            [50, 20, 5]
        );
        let by_mailbox = rank_window(&before, after, TopBy::Mailbox, 3).unwrap();
        assert_eq!(
            by_mailbox
                .iter()
                .map(|e| (e.info.pid.as_u64(), e.mailbox_growth))
                .collect::<Vec<_>>(),
            [(2, 4), (3, 1), (1, -3)]
        );
        assert!(
            by_mailbox[2].to_string().contains("(-3)"),
            "{}",
            by_mailbox[2]
        );
    }
}
