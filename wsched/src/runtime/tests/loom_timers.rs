//! loom models of the timer service, run on the real [`Timers`] code: its lock,
//! condition variable and thread come from `crate::sync`, so under loom they are
//! loom's. Only the timer's payload is a probe ([`Probe`]: firing it logs its tag) and
//! the clock a stepping one (a tick per read), so a timer armed "due now" is due by
//! the time the thread next looks.
//!
//! Under loom a timed wait cannot time out (`sync::Condvar::wait_until` is a plain
//! wait): the timer thread wakes only when notified. So a due timer whose wake-up is
//! lost never fires, the model's main thread waits for it forever, and loom reports a
//! deadlock.

use std::time::Duration;

use crate::engine::process::Tag;
use crate::sync::{Arc, Condvar, Mutex};
use crate::time::timer::{Clock, TimerItem, TimerList, Timers};

/// The tags of the probes fired, in firing order.
#[derive(Default)]
struct Log {
    fired: Mutex<Vec<Tag>>,
    changed: Condvar,
}

impl Log {
    /// Blocks until `count` probes have fired; returns their tags.
    fn wait_for(&self, count: usize) -> Vec<Tag> {
        let mut fired = self.fired.lock();
        while fired.len() < count {
            self.changed.wait(&mut fired);
        }
        fired.clone()
    }

    fn fired(&self) -> Vec<Tag> {
        self.fired.lock().clone()
    }
}

/// A timer of the process whose timers `owner` lists: firing it logs its tag.
struct Probe {
    owner: Arc<TimerList>,
    tag: Tag,
    log: Arc<Log>,
}

/// The model's one process and its log.
struct World {
    process: Arc<TimerList>,
    log: Arc<Log>,
}

impl World {
    fn new() -> Self {
        Self {
            process: Arc::new(TimerList::new()),
            log: Arc::new(Log::default()),
        }
    }

    fn probe(&self, tag: u64) -> Probe {
        Probe {
            owner: self.process.clone(),
            tag: Tag(tag),
            log: self.log.clone(),
        }
    }
}

impl TimerItem for Probe {
    type Scratch = ();

    fn owner(&self) -> &TimerList {
        &self.owner
    }

    fn tag(&self) -> Tag {
        self.tag
    }

    fn fire(due: &mut Vec<Self>, _: &mut ()) {
        for probe in due.drain(..) {
            probe.log.fired.lock().push(probe.tag);
            probe.log.changed.notify_all();
        }
    }

    fn release(self) {}
}

fn timers() -> std::sync::Arc<Timers<Probe>> {
    Timers::with_clock("timer".to_owned(), Clock::stepping())
}

fn arm(timers: &std::sync::Arc<Timers<Probe>>, duration: Duration, probe: Probe) {
    if let Err((_, error)) = timers.arm(duration, probe) {
        panic!("{error}");
    }
}

/// Far enough that the stepping clock never reaches it in a model (a read per look).
const LATER: Duration = Duration::from_millis(500);

#[test]
fn a_timer_due_before_the_planned_wake_up_wakes_the_thread() {
    loom::model(|| {
        let timers = timers();
        let world = Arc::new(World::new());
        // Starts the thread, which plans to sleep until this timer's tick.
        arm(&timers, LATER, world.probe(1));
        // Due at once, before that plan: whether the thread is still looking at the
        // wheel, planning, or asleep, it must fire this one.
        arm(&timers, Duration::ZERO, world.probe(2));
        assert_eq!(world.log.wait_for(1), vec![Tag(2)]);
        assert_eq!(timers.pending(), 1);
        timers.shutdown();
        assert_eq!(timers.pending(), 0);
        assert_eq!(
            world.log.fired(),
            vec![Tag(2)],
            "the later timer was released"
        );
    });
}

#[test]
fn timers_armed_from_two_threads_while_the_thread_sleeps_both_fire() {
    loom::model(|| {
        let timers = timers();
        let world = Arc::new(World::new());
        arm(&timers, LATER, world.probe(1));
        let other = {
            let (timers, world) = (timers.clone(), world.clone());
            loom::thread::spawn(move || arm(&timers, Duration::ZERO, world.probe(2)))
        };
        arm(&timers, Duration::ZERO, world.probe(3));
        other.join().unwrap();
        let mut fired = world.log.wait_for(2);
        fired.sort_unstable();
        assert_eq!(fired, vec![Tag(2), Tag(3)]);
        timers.shutdown();
    });
}

#[test]
fn a_timer_cancelled_while_it_fires_is_delivered_at_most_once() {
    loom::model(|| {
        let timers = timers();
        let world = Arc::new(World::new());
        arm(&timers, Duration::ZERO, world.probe(1));
        // A second timer due just after, so the thread walks past the first's slot
        // whether or not the first was cancelled.
        arm(&timers, Duration::ZERO, world.probe(2));
        let cancelled = timers.cancel(&world.process, Tag(1));
        // What was not cancelled fires (nothing is lost).
        let fired = world.log.wait_for(if cancelled { 1 } else { 2 });
        assert_eq!(timers.pending(), 0);
        timers.shutdown();
        assert_eq!(world.log.fired(), fired, "nothing fires twice");
        let expected = if cancelled {
            vec![Tag(2)]
        } else {
            vec![Tag(1), Tag(2)]
        };
        assert_eq!(fired, expected, "fired once or cancelled, never both");
    });
}

#[test]
fn ending_a_process_while_its_timer_fires_releases_the_rest() {
    loom::model(|| {
        let timers = timers();
        let world = Arc::new(World::new());
        arm(&timers, Duration::ZERO, world.probe(1));
        arm(&timers, Duration::MAX, world.probe(2));
        let released = timers.cancel_process(&world.process);
        assert!(released >= 1, "the timer that never fires is released");
        if released == 1 {
            assert_eq!(world.log.wait_for(1), vec![Tag(1)]);
        }
        assert_eq!(timers.pending(), 0);
        timers.shutdown();
        assert_eq!(world.log.fired().len(), 2 - released);
    });
}
