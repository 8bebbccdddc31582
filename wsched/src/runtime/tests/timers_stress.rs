//! Several threads arm and cancel timers — by yield, by process, near, far and never
//! due — while the timer thread fires them: every timer is fired once or released
//! once, never both and never neither, and nothing stays pending.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::process::Tag;
use crate::time::timer::{TimerItem, TimerList, Timers};

const THREADS: usize = 4;
const TIMERS_EACH: usize = 4_000;
/// Processes per thread, whose timers it arms.
const PROCESSES_EACH: usize = 50;

/// What happened to each timer, by id.
struct Outcomes {
    fired: Vec<AtomicU32>,
    released: Vec<AtomicU32>,
}

struct Tracked {
    id: usize,
    owner: Arc<TimerList>,
    tag: Tag,
    outcomes: Arc<Outcomes>,
}

impl TimerItem for Tracked {
    type Scratch = ();

    fn owner(&self) -> &TimerList {
        &self.owner
    }

    fn tag(&self) -> Tag {
        self.tag
    }

    fn fire(due: &mut Vec<Self>, _: &mut ()) {
        for timer in due.drain(..) {
            timer.outcomes.fired[timer.id].fetch_add(1, Ordering::SeqCst);
        }
    }

    fn release(self) {
        self.outcomes.released[self.id].fetch_add(1, Ordering::SeqCst);
    }
}

/// xorshift64: reproducible choices per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What one arming thread did: how many timers its cancels released.
#[derive(Default)]
struct Cancels {
    by_yield: usize,
    by_process: usize,
    /// Ids whose `cancel` said it cancelled them.
    cancelled: Vec<usize>,
}

fn arm_and_cancel(
    thread: usize,
    timers: &Arc<Timers<Tracked>>,
    outcomes: &Arc<Outcomes>,
) -> Cancels {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (thread as u64 + 1));
    let mut cancels = Cancels::default();
    let processes: Vec<Arc<TimerList>> = (0..PROCESSES_EACH)
        .map(|_| Arc::new(TimerList::new()))
        .collect();
    // Timer i belongs to process i % PROCESSES_EACH, tag i.
    let owner = |i: usize| (&processes[i % PROCESSES_EACH], Tag(i as u64));
    // Timers that would not fire within the test: cancelled at the end.
    let mut never = Vec::new();
    for i in 0..TIMERS_EACH {
        let (process, tag) = owner(i);
        let duration = match rng.below(10) {
            0..=5 => Duration::from_micros(rng.below(4_000)),
            6 => Duration::ZERO,
            7 => Duration::from_secs(3600),
            _ => Duration::MAX,
        };
        if duration >= Duration::from_secs(3600) {
            never.push(i);
        }
        let timer = Tracked {
            id: thread * TIMERS_EACH + i,
            owner: process.clone(),
            tag,
            outcomes: outcomes.clone(),
        };
        if timers.arm(duration, timer).is_err() {
            panic!("the timer thread starts");
        }
        // Cancel an earlier timer of this thread now and then: pending, firing right
        // now or fired already.
        if rng.below(3) == 0 {
            let j = rng.below(i as u64 + 1) as usize;
            let (process, tag) = owner(j);
            if timers.cancel(process, tag) {
                cancels.by_yield += 1;
                cancels.cancelled.push(thread * TIMERS_EACH + j);
            }
        }
        // And end a "process" now and then.
        if i % 500 == 499 {
            let process = &processes[rng.below(PROCESSES_EACH as u64) as usize];
            cancels.by_process += timers.cancel_process(process);
        }
        if i % 64 == 0 {
            std::thread::yield_now();
        }
    }
    for i in never {
        let (process, tag) = owner(i);
        if timers.cancel(process, tag) {
            cancels.by_yield += 1;
            cancels.cancelled.push(thread * TIMERS_EACH + i);
        }
    }
    cancels
}

#[test]
fn every_timer_fires_once_or_is_cancelled_once() {
    let total = THREADS * TIMERS_EACH;
    let outcomes = Arc::new(Outcomes {
        fired: (0..total).map(|_| AtomicU32::new(0)).collect(),
        released: (0..total).map(|_| AtomicU32::new(0)).collect(),
    });
    let timers = Timers::<Tracked>::new("wsched-stress-timer".to_owned());
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (timers, outcomes) = (timers.clone(), outcomes.clone());
            std::thread::spawn(move || arm_and_cancel(thread, &timers, &outcomes))
        })
        .collect();
    let cancels: Vec<Cancels> = threads.into_iter().map(|t| t.join().unwrap()).collect();

    // The rest are short: wait (boundedly) for them to fire.
    let deadline = Instant::now() + Duration::from_secs(20);
    while timers.pending() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} timers never fired",
            timers.pending()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The timer thread takes a batch out of the wheel (`pending` falls) under the
    // lock and fires it after letting go: its last batch may still be firing.
    // Shutting the service down joins the thread, so every fire has returned
    // (and, nothing being pending, releases nothing more).
    timers.shutdown();

    let (mut fired, mut released) = (0, 0);
    for id in 0..total {
        let f = outcomes.fired[id].load(Ordering::SeqCst);
        let r = outcomes.released[id].load(Ordering::SeqCst);
        assert_eq!(
            f + r,
            1,
            "timer {id} fired {f} times and was released {r} times"
        );
        fired += f as usize;
        released += r as usize;
    }
    let cancelled: usize = cancels.iter().map(|c| c.by_yield + c.by_process).sum();
    assert_eq!(released, cancelled, "what the cancels counted was released");
    for id in cancels.iter().flat_map(|c| &c.cancelled) {
        assert_eq!(
            outcomes.released[*id].load(Ordering::SeqCst),
            1,
            "timer {id}"
        );
    }
    assert!(
        fired > 0 && released > 0,
        "{fired} fired, {released} released"
    );
    assert_eq!(timers.pending(), 0);
}
