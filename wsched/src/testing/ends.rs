//! The harness's side of supervision: kills a process made, and playing the end of
//! another process as the scheduler would signal it (its links and monitors), so a
//! supervisor — or any process that watches others — can be tested step by step.
//! Kept apart from the rest of the harness.

use super::{link_key, Recorder, TestProcess};
use crate::exit::ExitReason;
use crate::pid::Pid;
use crate::runtime::{Down, Exit};

impl Recorder {
    /// The monitors `watcher` holds on `target`, not demonitored, in the order they
    /// were set.
    fn monitors_on(&self, watcher: Pid, target: Pid) -> Vec<crate::runtime::MonitorRef> {
        let mut monitors: Vec<_> = self
            .active_monitors
            .lock()
            .iter()
            .filter(|(monitor, by)| **by == watcher && monitor.target() == target)
            .map(|(monitor, _)| *monitor)
            .collect();
        monitors.sort();
        monitors
    }
}

impl TestProcess {
    /// Takes the kills this process made through its context
    /// ([`Context::kill`](crate::Context::kill)), the PIDs in order. Like cancels,
    /// they always succeed in the harness; the test plays the killed process's end
    /// (with [`ExitReason::Killed`]) if it matters.
    pub fn take_kills(&mut self) -> Vec<Pid> {
        let mut kills = self.recorder.kills.lock();
        let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut *kills)
            .into_iter()
            .partition(|(by, _)| *by == self.pid);
        *kills = others;
        mine.into_iter().map(|(_, pid)| pid).collect()
    }

    /// Plays the end of process `pid` with `reason`, as the scheduler would signal it
    /// to this process, in one step: a link between them goes, and becomes an
    /// [`Exit`] message if this process traps exits (or stops it, for a failure, if it
    /// does not — see [`linked_exit`](Self::linked_exit)); every monitor this process
    /// holds on `pid` is removed and delivers its [`Down`]. Returns how many signals
    /// reached the process: its `Exit` and `Down` messages, or 1 when the link
    /// stopped it. 0 when it neither linked to nor monitored `pid`, or only linked to
    /// it without trapping exits and `reason` is normal (the link is then removed,
    /// and nothing else happens, as on the scheduler).
    ///
    /// A supervisor's child ending, a restart, and the shutdown of a child that
    /// ignores its cancel, step by step:
    ///
    /// ```
    /// use std::time::Duration;
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
    /// let sup = Supervisor::new(Strategy::OneForOne)
    ///     .child(ChildSpec::new("a", || Worker, "serve", ()).shutdown(Duration::from_secs(1)));
    /// let mut t = TestProcess::start(sup, Supervisor::ENTRY, ()).unwrap();
    /// assert!(t.traps_exits());
    /// let first = t.take_spawned().remove(0);
    /// assert_eq!((first.method.as_str(), t.links()), ("serve", vec![first.pid]));
    ///
    /// // The child panics: the supervisor restarts it (a fresh spawn, linked).
    /// let boom = ExitReason::Panicked { phase: wsched::Phase::Step, message: "boom".into() };
    /// assert_eq!(t.play_end(first.pid, boom), 1);
    /// let second = t.take_spawned().remove(0);
    /// assert_ne!(second.pid, first.pid);
    /// assert_eq!(t.links(), vec![second.pid]);
    ///
    /// // Shutdown: the child is unlinked, monitored and cancelled, with a timer for
    /// // its timeout; when the timer fires, it is killed.
    /// t.cancel();
    /// assert_eq!(t.take_cancel_requests(), vec![second.pid]);
    /// assert!(t.links().is_empty());
    /// let mut timeout = t.take_timed().remove(0);
    /// assert_eq!(timeout.delay, Duration::from_secs(1));
    /// let message = timeout.fire().expect("armed");
    /// t.send_from(timeout.from, message);
    /// assert_eq!(t.take_kills(), vec![second.pid]);
    /// t.play_end(second.pid, ExitReason::Killed);
    /// assert_eq!(t.expect_error().exit_reason(), ExitReason::Cancelled);
    /// ```
    ///
    /// # Panics
    /// If this process has ended.
    #[track_caller]
    pub fn play_end(&mut self, pid: Pid, reason: ExitReason) -> usize {
        assert!(!self.is_ended(), "the process has ended: it is {self}");
        let mut signals = 0;
        let linked = self
            .recorder
            .links
            .lock()
            .contains(&link_key(self.pid, pid));
        if linked {
            if self.traps_exits() {
                self.recorder.links.lock().remove(&link_key(self.pid, pid));
                self.events.push(super::message(
                    Some(pid),
                    Exit {
                        pid,
                        reason: reason.clone(),
                    },
                ));
                signals += 1;
            } else if !reason.is_normal() {
                // Stopped by the link: no step, no Downs to read.
                self.linked_exit(pid, reason);
                return 1;
            } else {
                self.recorder.links.lock().remove(&link_key(self.pid, pid));
            }
        }
        for monitor in self.recorder.monitors_on(self.pid, pid) {
            self.recorder.active_monitors.lock().remove(&monitor);
            self.events.push(super::message(
                Some(pid),
                Down {
                    pid,
                    reason: reason.clone(),
                    monitor,
                },
            ));
            signals += 1;
        }
        if signals > 0 {
            self.step();
        }
        signals
    }
}

#[cfg(test)]
mod tests {
    use crate::error::ProcessError;
    use crate::exit::ExitReason;
    use crate::pid::Pid;
    use crate::runtime::{Down, Exit};
    use crate::testing::{TestProcess, TestStatus};
    use crate::{process, recv, this, BoxError};

    struct Watcher;

    #[process]
    impl Watcher {
        /// Monitors `target` twice and links to `linked`; returns the Downs.
        #[entry]
        fn watch(&mut self, target: Pid, linked: Pid) -> Result<Vec<Down>, BoxError> {
            this::monitor(target);
            this::monitor(target);
            this::link(linked);
            Ok(vec![recv!(Down)?, recv!(Down)?])
        }

        /// Traps exits, links to `linked`, kills `victim`, returns the `Exit`.
        #[entry]
        fn trap(&mut self, linked: Pid, victim: Pid) -> Result<Exit, BoxError> {
            this::trap_exits(true);
            this::link(linked);
            this::kill(victim)?;
            Ok(recv!(Exit)?)
        }
    }

    #[test]
    fn play_end_delivers_a_down_per_monitor_and_plays_the_link() {
        let (target, linked, stranger) = (Pid::from_raw(50), Pid::from_raw(51), Pid::from_raw(52));
        let mut t = TestProcess::start(Watcher, "watch", (target, linked)).unwrap();
        assert_eq!(t.play_end(stranger, ExitReason::Killed), 0);
        // A normal end of a linked process, not trapped: the link goes, nothing else.
        assert_eq!(t.play_end(linked, ExitReason::Normal), 0);
        assert!(t.links().is_empty());
        assert_eq!(t.status(), TestStatus::WaitingForMessage);
        assert_eq!(t.play_end(target, ExitReason::Killed), 2);
        let downs = t.result::<Vec<Down>>();
        assert!(downs
            .iter()
            .all(|d| d.pid == target && d.reason == ExitReason::Killed));
        assert_ne!(downs[0].monitor, downs[1].monitor);
        assert!(
            !t.is_monitoring(downs[0].monitor),
            "a Down ends its monitor"
        );

        // A failure of a linked process stops one that does not trap exits.
        let mut t = TestProcess::start(Watcher, "watch", (target, linked)).unwrap();
        assert_eq!(t.play_end(linked, ExitReason::Cancelled), 1);
        assert!(matches!(
            t.expect_error(),
            ProcessError::Linked { pid, .. } if *pid == linked
        ));
    }

    #[test]
    fn kills_are_recorded_and_a_trapped_end_is_an_exit() {
        let (linked, victim) = (Pid::from_raw(60), Pid::from_raw(61));
        let mut t = TestProcess::start(Watcher, "trap", (linked, victim)).unwrap();
        assert_eq!(t.take_kills(), vec![victim]);
        assert!(t.take_kills().is_empty(), "taken once");
        assert_eq!(t.play_end(linked, ExitReason::Normal), 1);
        let exit = t.result::<Exit>();
        assert_eq!((exit.pid, exit.reason), (linked, ExitReason::Normal));
        assert!(t.links().is_empty());
    }
}
