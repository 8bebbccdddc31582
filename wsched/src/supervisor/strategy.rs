//! Restart strategies and the restart intensity: which children a failure restarts,
//! and when restarting too often makes the supervisor give up.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Which children are restarted when one of them ends and must be restarted.
///
/// Children are kept in start order (the order they were added). A group restart
/// first stops the other children of the group that are running, in reverse start
/// order (each as at shutdown: a cancel, then a kill after its timeout), then starts
/// the group again in start order. In a group restart a [`Temporary`](super::Restart::Temporary)
/// child is stopped and removed, not started again; a
/// [`Transient`](super::Restart::Transient) one is started again only if it was
/// running.
///
/// Rest-for-one, step by step in the [`testing`](crate::testing) harness:
///
/// ```
/// use wsched::prelude::*;
/// use wsched::supervisor::{ChildSpec, Strategy, Supervisor};
/// use wsched::testing::TestProcess;
///
/// struct Worker;
///
/// #[process]
/// impl Worker {
///     #[entry]
///     fn serve(&mut self) -> Result<(), BoxError> {
///         loop {
///             recv!(u32)?;
///         }
///     }
/// }
///
/// let sup = Supervisor::new(Strategy::RestForOne)
///     .child(ChildSpec::new("a", || Worker, "serve", ()))
///     .child(ChildSpec::new("b", || Worker, "serve", ()))
///     .child(ChildSpec::new("c", || Worker, "serve", ()));
/// let view = sup.handle();
/// let mut t = TestProcess::start(sup, Supervisor::ENTRY, ()).unwrap();
/// let [a, b, c] = <[Pid; 3]>::try_from(
///     t.take_spawned().iter().map(|s| s.pid).collect::<Vec<_>>(),
/// ).unwrap();
///
/// // b fails: c, started after it, is stopped first (a cancel, then its end)...
/// t.play_end(b, ExitReason::Error { message: "broken".into() });
/// assert_eq!(t.take_cancel_requests(), vec![c]);
/// t.play_end(c, ExitReason::Cancelled);
/// // ... then b and c start again, in that order, while a runs on.
/// assert_eq!(t.take_spawned().len(), 2);
/// let children = view.children();
/// assert_eq!(children[0].pid, Some(a));
/// assert_eq!(
///     children.iter().map(|c| c.restarts).collect::<Vec<_>>(),
///     vec![0, 1, 1]
/// );
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Only the child that ended (children independent of each other). The default.
    #[default]
    OneForOne,
    /// Every child (children that cannot work without each other).
    OneForAll,
    /// The child that ended and every child started after it (later children
    /// depend on earlier ones).
    RestForOne,
}

impl Strategy {
    /// The indices (in start order) of the children that the end of child `ended`
    /// restarts, among `count` children.
    pub(super) fn group(self, ended: usize, count: usize) -> std::ops::Range<usize> {
        match self {
            Self::OneForOne => ended..ended + 1,
            Self::OneForAll => 0..count,
            Self::RestForOne => ended..count,
        }
    }
}

/// The restart intensity: at most `max` restarts within any `period`. The restart
/// that would be the `max + 1`-th within `period` is not made: the supervisor stops
/// its children and fails instead, and its own supervisor decides what next (so
/// failures climb the tree until one level can cope). A restart exactly `period`
/// after an earlier one no longer counts that one.
///
/// Two restarts in 10 s allowed, with a clock the test moves:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, Instant};
/// use wsched::prelude::*;
/// use wsched::supervisor::{ChildSpec, Strategy, Supervisor, SupervisorError};
/// use wsched::testing::TestProcess;
///
/// struct Worker;
///
/// #[process]
/// impl Worker {
///     #[entry]
///     fn serve(&mut self) -> Result<(), BoxError> {
///         loop {
///             recv!(u32)?;
///         }
///     }
/// }
///
/// let now = Arc::new(Mutex::new(Instant::now()));
/// let clock = now.clone();
/// let sup = Supervisor::new(Strategy::OneForOne)
///     .intensity(2, Duration::from_secs(10))
///     .clock(move || *clock.lock().unwrap())
///     .child(ChildSpec::new("w", || Worker, "serve", ()));
/// let view = sup.handle();
/// let mut t = TestProcess::start(sup, Supervisor::ENTRY, ()).unwrap();
/// let mut worker = t.take_spawned().remove(0).pid;
/// let crash = || ExitReason::Error { message: "crash".into() };
///
/// for round in 0..3 {
///     // Two crashes within the period: both restarted.
///     for _ in 0..2 {
///         t.play_end(worker, crash());
///         worker = t.take_spawned().remove(0).pid;
///     }
///     if round < 2 {
///         // Ten seconds later the window is empty again.
///         *now.lock().unwrap() += Duration::from_secs(10);
///     }
/// }
/// assert_eq!(view.restarts(), 6);
/// // A third crash within the period is one too many: no restart, and it fails.
/// t.play_end(worker, crash());
/// assert!(t.take_spawned().is_empty());
/// let error = SupervisorError::Intensity {
///     child: "w".into(),
///     restarts: 3,
///     period: Duration::from_secs(10),
/// };
/// assert_eq!(t.expect_error().exit_reason(), ExitReason::Error { message: error.to_string() });
/// assert_eq!(view.error(), Some(error));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intensity {
    /// Restarts allowed within `period`.
    pub max: u32,
    /// The sliding window.
    pub period: Duration,
}

impl Default for Intensity {
    /// Erlang's default: 1 restart in 5 seconds.
    fn default() -> Self {
        Self {
            max: 1,
            period: Duration::from_secs(5),
        }
    }
}

/// The times of the restarts within the window.
#[derive(Debug, Default)]
pub(super) struct RestartLog {
    times: VecDeque<Instant>,
}

impl RestartLog {
    /// Records a restart at `now`; `false` if it exceeds `intensity` (more than
    /// `max` within the `period` ending at `now`), in which case the restart must not
    /// be made. Times are kept only while inside the window, at most `max + 1`.
    pub(super) fn record(&mut self, intensity: Intensity, now: Instant) -> bool {
        self.times.push_back(now);
        while let Some(&oldest) = self.times.front() {
            // A restart exactly `period` ago is outside the window.
            if now.saturating_duration_since(oldest) >= intensity.period {
                self.times.pop_front();
            } else {
                break;
            }
        }
        self.times.len() <= intensity.max as usize
    }

    /// Restarts recorded within the window (as of the last `record`).
    pub(super) fn in_window(&self) -> usize {
        self.times.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_the_strategy() {
        assert_eq!(Strategy::OneForOne.group(2, 5), 2..3);
        assert_eq!(Strategy::OneForAll.group(2, 5), 0..5);
        assert_eq!(Strategy::RestForOne.group(2, 5), 2..5);
        assert_eq!(Strategy::RestForOne.group(4, 5), 4..5);
    }

    #[test]
    fn the_log_allows_max_restarts_in_the_period_and_not_one_more() {
        let intensity = Intensity {
            max: 3,
            period: Duration::from_secs(10),
        };
        let t0 = Instant::now();
        let mut log = RestartLog::default();
        for i in 0..3 {
            assert!(log.record(intensity, t0 + Duration::from_secs(i)));
        }
        assert!(
            !log.record(intensity, t0 + Duration::from_secs(3)),
            "the 4th in 10 s"
        );

        // Spread out: the window slides past the old ones.
        let mut log = RestartLog::default();
        for i in 0..20 {
            assert!(log.record(intensity, t0 + Duration::from_secs(4 * i)));
            assert!(log.in_window() <= 3);
        }
        // Exactly one period apart is outside the window.
        let mut log = RestartLog::default();
        let one = Intensity {
            max: 1,
            period: Duration::from_secs(1),
        };
        assert!(log.record(one, t0));
        assert!(log.record(one, t0 + Duration::from_secs(1)));
        assert!(!log.record(one, t0 + Duration::from_millis(1500)));
        // No restarts allowed at all.
        let none = Intensity { max: 0, ..one };
        assert!(!RestartLog::default().record(none, t0));
    }
}
