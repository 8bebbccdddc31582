//! Unobserved failures: a process that fails where nobody can learn of it is
//! reported, not lost.
//!
//! # Failures
//!
//! A process fails when it ends with [`ExitReason::Error`], [`ExitReason::Panicked`]
//! or [`ExitReason::Linked`] (a linked process's failure stopped it). Finishing
//! normally, being cancelled (it was asked to) and being killed by shutdown (the
//! shutdown report lists those) are not failures.
//!
//! # Who observes one
//!
//! A failure is observed when somebody is told of it or can still ask:
//!
//! * a **join**: a joinable process (not spawned detached) keeps its result for
//!   whoever joins it, so its failure is not reported when it ends. If the result is
//!   still unclaimed when the [`Scheduler`](crate::Scheduler) is dropped, and no
//!   monitor or link observed the failure either, it is reported then, with
//!   [`FailureReport::unclaimed`] set (the only moment "never claimed" is known);
//! * a **monitor** on it (from a process or a [`Monitor`](crate::Monitor) of a
//!   thread) still set when it ends: the `Down` carries the reason;
//! * a **link** still set when it ends: the linked process receives an
//!   [`Exit`](crate::Exit) (trapping) or is stopped with
//!   [`ExitReason::Linked`]; that stop is a failure of its own, reported by the same
//!   rule, so a chain of linked processes that nobody watches is reported once, by
//!   its last member, with the root reason inside.
//!
//! A detached process with neither a monitor nor a link at its end is therefore
//! unobserved: its failure goes to the hook set by
//! [`Builder::on_unobserved_failure`](crate::Builder::on_unobserved_failure), once,
//! and is counted in [`Metrics::unobserved_failures`](crate::Metrics). The default
//! hook prints one line to stderr with the PID, the entry and the reason.
//!
//! # When and where the hook runs
//!
//! On the thread that ends the process (usually a worker), after the result is
//! published and the watchers were told, under no runtime lock and guarded: a
//! panicking hook is caught and the worker carries on. Unclaimed results are
//! reported by the thread that drops the scheduler, after its workers stopped.
//!
//! # Cost
//!
//! Nothing on the path of a process that finishes: the check sits in the branch
//! that counts a failure, which finishing processes never take.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
// Statistics, not synchronisation (see `metrics.rs`).
use std::sync::atomic::{AtomicU64, Ordering};

use crate::exit::ExitReason;
use crate::pid::Pid;
use crate::runtime::drop_quietly;
use crate::type_name::ProcessLabel;

/// A failure nobody observed (see
/// [`Builder::on_unobserved_failure`](crate::Builder::on_unobserved_failure)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailureReport {
    /// The process that failed.
    pub pid: Pid,
    /// The entry it ran.
    pub entry: String,
    /// The type it ran, in full (see
    /// [`ProcessInfo::process_type`](crate::ProcessInfo::process_type)).
    pub process_type: &'static str,
    /// Why it ended.
    pub reason: ExitReason,
    /// `true` for a joinable process whose result nobody claimed before the
    /// scheduler was dropped; `false` for a detached process that nobody monitored
    /// or linked to, reported when it ended.
    pub unclaimed: bool,
}

impl fmt::Display for FailureReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "process {} {}; ",
            ProcessLabel::new(self.process_type, &self.entry, self.pid),
            self.reason
        )?;
        if self.unclaimed {
            f.write_str(
                "nobody claimed its result before the scheduler was dropped \
                 (join it, or spawn it detached and monitor or link to it)",
            )
        } else {
            f.write_str(
                "nobody joined, monitored or linked to it \
                 (monitor or link to it to handle its failures)",
            )
        }
    }
}

/// Whether a process that ended for `reason` failed (see the module docs).
pub(crate) fn is_failure(reason: &ExitReason) -> bool {
    matches!(
        reason,
        ExitReason::Error { .. } | ExitReason::Panicked { .. } | ExitReason::Linked { .. }
    )
}

/// The hook a builder may set.
pub(crate) type FailureHook = Box<dyn Fn(&FailureReport) + Send + Sync>;

/// Where unobserved failures go: the count, and the hook (the default prints).
pub(crate) struct UnobservedFailures {
    hook: Option<FailureHook>,
    count: AtomicU64,
}

impl UnobservedFailures {
    /// `None`: the default hook, which prints to stderr.
    pub(crate) fn new(hook: Option<FailureHook>) -> Self {
        Self {
            hook,
            count: AtomicU64::new(0),
        }
    }

    /// How many failures were reported.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Reports `report`: counts it and runs the hook, guarded.
    #[cold]
    #[inline(never)]
    pub(crate) fn report(&self, report: FailureReport) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let ran = catch_unwind(AssertUnwindSafe(|| match &self.hook {
            Some(hook) => hook(&report),
            None => eprintln!("wsched: {report}"),
        }));
        if let Err(panic) = ran {
            drop_quietly(panic);
        }
        drop_quietly(report);
    }
}
