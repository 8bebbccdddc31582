//! A run's trace: what happened, in order, folded into a hash that two runs share
//! only if they did the same things at the same virtual times.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::pid::Pid;

/// How many of the last events every run keeps, for a failure's report.
const KEPT_TAIL: usize = 32;

/// One thing a simulation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceEvent {
    /// The process stepped.
    Step,
    /// The process was killed before its step (a crash fault).
    Crash,
    /// The process was made to wait before stepping.
    Delay(Duration),
    /// A simulated command it yielded was failed on purpose.
    Fail,
    /// A simulated command it yielded was done, and its answer lost.
    LostAnswer,
    /// A simulated command it yielded will never complete.
    Hang,
    /// A simulated command it yielded was completed a second time.
    Duplicate,
}

/// One entry of a trace: when, which process, what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceEntry {
    /// Virtual time since the start of the run.
    pub at: Duration,
    /// The process concerned.
    pub pid: Pid,
    /// What happened.
    pub event: TraceEvent,
}

impl fmt::Display for TraceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>12?}  {}  {:?}", self.at, self.pid, self.event)
    }
}

/// A run's trace: its hash, its last entries and, when asked for, all of them.
#[derive(Clone, Debug)]
pub(crate) struct Trace {
    hash: u64,
    len: u64,
    tail: VecDeque<TraceEntry>,
    all: Option<Vec<TraceEntry>>,
}

impl Trace {
    pub(crate) fn new(keep_all: bool) -> Self {
        Self {
            hash: FNV_OFFSET,
            len: 0,
            tail: VecDeque::with_capacity(KEPT_TAIL),
            all: keep_all.then(Vec::new),
        }
    }

    pub(crate) fn note(&mut self, at: Duration, pid: Pid, event: TraceEvent) {
        let (kind, detail) = match event {
            TraceEvent::Step => (1, 0),
            TraceEvent::Crash => (2, 0),
            TraceEvent::Delay(d) => (3, d.as_nanos() as u64),
            TraceEvent::Fail => (4, 0),
            TraceEvent::Hang => (5, 0),
            TraceEvent::Duplicate => (6, 0),
            TraceEvent::LostAnswer => (7, 0),
        };
        for word in [kind, at.as_nanos() as u64, pid.as_u64(), detail] {
            self.hash = mix(self.hash, word);
        }
        self.len += 1;
        let entry = TraceEntry { at, pid, event };
        if self.tail.len() == KEPT_TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(entry);
        if let Some(all) = &mut self.all {
            all.push(entry);
        }
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn tail(&self) -> Vec<TraceEntry> {
        self.tail.iter().copied().collect()
    }

    pub(crate) fn all(&self) -> Option<&[TraceEntry]> {
        self.all.as_deref()
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Folds `word` into `hash` (FxHash's step, a word at a time: a trace note costs a
/// few instructions): stable across builds and platforms, so a hash printed by
/// one machine is checked on another.
fn mix(hash: u64, word: u64) -> u64 {
    (hash.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_depends_on_every_field_and_the_order() {
        let pid = |n| Pid::from_raw(n);
        let run = |entries: &[(u64, u64, TraceEvent)]| {
            let mut trace = Trace::new(false);
            for &(at, p, event) in entries {
                trace.note(Duration::from_nanos(at), pid(p), event);
            }
            trace.hash()
        };
        let base = run(&[(1, 1, TraceEvent::Step), (2, 2, TraceEvent::Step)]);
        assert_eq!(
            base,
            run(&[(1, 1, TraceEvent::Step), (2, 2, TraceEvent::Step)])
        );
        assert_ne!(
            base,
            run(&[(2, 2, TraceEvent::Step), (1, 1, TraceEvent::Step)])
        );
        assert_ne!(
            base,
            run(&[(1, 1, TraceEvent::Step), (3, 2, TraceEvent::Step)])
        );
        assert_ne!(
            base,
            run(&[(1, 1, TraceEvent::Step), (2, 2, TraceEvent::Crash)])
        );
    }

    #[test]
    fn the_tail_keeps_the_last_entries() {
        let mut trace = Trace::new(false);
        for n in 0..100 {
            trace.note(Duration::from_nanos(n), Pid::from_raw(1), TraceEvent::Step);
        }
        let tail = trace.tail();
        assert_eq!(tail.len(), KEPT_TAIL);
        assert_eq!(tail.last().unwrap().at, Duration::from_nanos(99));
        assert_eq!(trace.len(), 100);
        assert!(trace.all().is_none());
    }
}
