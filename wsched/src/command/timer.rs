//! The timer service behind [`Sleep`](crate::command::Sleep): one thread and a
//! two-level timing wheel.
//!
//! Time is cut into 1 ms ticks counted from the service's start, and ticks into
//! *epochs* of [`SLOTS`] ticks (about a second). Level 0 has one slot per tick of the
//! current epoch; level 1 one bucket per epoch for the next [`SLOTS`] epochs (about
//! 17 minutes); timers further out wait in a binary heap. When the wheel enters a
//! new epoch, that epoch's level-1 bucket is spread over the level-0 slots and heap
//! timers that came within reach move to level 1. Arming and firing are O(1) for
//! all but very long sleeps; profiling a single binary heap showed its `pop` (a
//! cache miss per level over a million entries) taking two thirds of the time.
//!
//! A timer's tick is its deadline rounded *up* to the next millisecond, so it never
//! fires early; it fires within about a millisecond after, plus wake-up latency.
//! Timers of processes that have ended are not searched for and removed: they fire
//! into a closed mailbox and are ignored, which is cheaper than cancelling.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::completer::RawCompleter;
use crate::payload::Payload;

/// The wheel's size in 1 ms ticks: its horizon is about a second.
const SLOTS: u64 = 1024;
const TICK: Duration = Duration::from_millis(1);

struct Timer<T> {
    tick: u64,
    item: T,
}

/// A timer beyond the horizon, ordered for the far heap.
struct FarTimer<T> {
    tick: u64,
    seq: u64,
    timer: Timer<T>,
}

impl<T> PartialEq for FarTimer<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.tick, self.seq) == (other.tick, other.seq)
    }
}

impl<T> Eq for FarTimer<T> {}

impl<T> PartialOrd for FarTimer<T> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for FarTimer<T> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest tick first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.tick, other.seq).cmp(&(self.tick, self.seq))
    }
}

/// The timing wheel, generic over what a timer carries (completers at run time,
/// numbers in the tests).
struct Wheel<T> {
    origin: Instant,
    /// The next tick to fire.
    next_tick: u64,
    /// Timers of the current epoch (`next_tick / SLOTS`), by `tick % SLOTS`.
    level0: Box<[Vec<Timer<T>>]>,
    /// Timers of the next `SLOTS - 1` epochs, by `epoch % SLOTS`.
    level1: Box<[Vec<Timer<T>>]>,
    /// Timers of later epochs.
    far: BinaryHeap<FarTimer<T>>,
    next_seq: u64,
    len: usize,
    /// The tick the timer thread sleeps until (`None`: until notified), so arming a
    /// timer knows in O(1) whether it must wake the thread earlier.
    sleeping_until: Option<u64>,
    shutdown: bool,
}

fn slots<T>() -> Box<[Vec<Timer<T>>]> {
    (0..SLOTS).map(|_| Vec::new()).collect()
}

impl<T> Wheel<T> {
    fn new() -> Self {
        Self {
            origin: Instant::now(),
            next_tick: 0,
            level0: slots(),
            level1: slots(),
            far: BinaryHeap::new(),
            next_seq: 0,
            len: 0,
            sleeping_until: Some(0),
            shutdown: false,
        }
    }

    /// The first tick at or after `deadline`.
    fn tick_at_or_after(&self, deadline: Instant) -> u64 {
        let since = deadline.saturating_duration_since(self.origin);
        u64::try_from(since.as_nanos().div_ceil(TICK.as_nanos())).unwrap_or(u64::MAX)
    }

    /// The last tick that has fully begun by `now`.
    fn tick_of(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin);
        u64::try_from(since.as_nanos() / TICK.as_nanos()).unwrap_or(u64::MAX)
    }

    fn instant_of(&self, tick: u64) -> Instant {
        let nanos = u128::from(tick) * TICK.as_nanos();
        self.origin + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    fn insert(&mut self, timer: Timer<T>) {
        self.len += 1;
        let tick = timer.tick.max(self.next_tick);
        let timer = Timer { tick, ..timer };
        let (epoch, current) = (tick / SLOTS, self.next_tick / SLOTS);
        if epoch == current {
            self.level0[(tick % SLOTS) as usize].push(timer);
        } else if epoch < current + SLOTS {
            self.level1[(epoch % SLOTS) as usize].push(timer);
        } else {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.far.push(FarTimer { tick, seq, timer });
        }
    }

    /// Moves every timer due by `now` into `due`.
    fn expire(&mut self, now: Instant, due: &mut Vec<Timer<T>>) {
        let now_tick = self.tick_of(now);
        while self.next_tick <= now_tick {
            if self.len == 0 {
                // Nothing pending anywhere: jump instead of walking empty ticks.
                self.next_tick = now_tick + 1;
                return;
            }
            let slot = &mut self.level0[(self.next_tick % SLOTS) as usize];
            self.len -= slot.len();
            due.append(slot);
            self.next_tick += 1;
            if self.next_tick % SLOTS == 0 {
                self.enter_epoch();
            }
        }
    }

    /// The wheel just entered a new epoch: spread its level-1 bucket over level 0
    /// and bring heap timers that came within level 1's reach.
    fn enter_epoch(&mut self) {
        let epoch = self.next_tick / SLOTS;
        let bucket = std::mem::take(&mut self.level1[(epoch % SLOTS) as usize]);
        for timer in bucket {
            debug_assert_eq!(timer.tick / SLOTS, epoch);
            self.level0[(timer.tick % SLOTS) as usize].push(timer);
        }
        while self
            .far
            .peek()
            .is_some_and(|f| f.tick / SLOTS < epoch + SLOTS)
        {
            let far = self.far.pop().expect("peeked");
            self.len -= 1;
            self.insert(far.timer);
        }
    }

    /// The tick at which the thread must next wake up, if anything is pending.
    fn next_wake_tick(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let epoch = self.next_tick / SLOTS;
        let epoch_end = (epoch + 1) * SLOTS;
        if let Some(tick) = (self.next_tick..epoch_end)
            .find(|tick| !self.level0[(tick % SLOTS) as usize].is_empty())
        {
            return Some(tick);
        }
        // Nothing more this epoch: wake when the next non-empty epoch begins (its
        // bucket then cascades), or when heap timers come within level 1's reach.
        if let Some(e) =
            (epoch + 1..epoch + SLOTS).find(|e| !self.level1[(e % SLOTS) as usize].is_empty())
        {
            return Some(e * SLOTS);
        }
        self.far
            .peek()
            .map(|f| (f.tick / SLOTS + 1).saturating_sub(SLOTS).max(epoch + 1) * SLOTS)
    }
}

pub(crate) struct Timers {
    wheel: Mutex<Wheel<RawCompleter>>,
    condvar: Condvar,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Timers {
    pub(crate) fn start(thread_name: String) -> std::io::Result<Arc<Self>> {
        let timers = Arc::new(Self {
            wheel: Mutex::new(Wheel::new()),
            condvar: Condvar::new(),
            thread: Mutex::new(None),
        });
        let runner = timers.clone();
        let handle = std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || runner.run())?;
        *timers.thread.lock() = Some(handle);
        Ok(timers)
    }

    /// Completes `completer` with `()` after `duration`.
    pub(crate) fn sleep(&self, duration: Duration, completer: RawCompleter) {
        let deadline = Instant::now() + duration;
        let mut wheel = self.wheel.lock();
        if wheel.shutdown {
            return; // dropping the completer reports it; the process is gone anyway
        }
        let tick = wheel.tick_at_or_after(deadline);
        let wake_earlier = wheel.sleeping_until.is_none_or(|until| tick < until);
        wheel.insert(Timer {
            tick,
            item: completer,
        });
        if wake_earlier {
            // Keep later arms from notifying again before the thread re-plans.
            wheel.sleeping_until = Some(tick);
        }
        drop(wheel);
        if wake_earlier {
            self.condvar.notify_one();
        }
    }

    /// Timers not yet fired.
    pub(crate) fn pending(&self) -> usize {
        self.wheel.lock().len
    }

    fn run(&self) {
        let mut due = Vec::new();
        let mut woken = Vec::new();
        let mut wheel = self.wheel.lock();
        loop {
            if wheel.shutdown {
                break;
            }
            wheel.expire(Instant::now(), &mut due);
            if !due.is_empty() {
                drop(wheel);
                let handle = due[0].item.handle().clone();
                for timer in due.drain(..) {
                    timer.item.deliver_deferred(Ok(Payload::unit()), &mut woken);
                }
                handle.shared().schedule_batch(&mut woken);
                wheel = self.wheel.lock();
                continue;
            }
            match wheel.next_wake_tick() {
                Some(tick) => {
                    wheel.sleeping_until = Some(tick);
                    let wake = wheel.instant_of(tick);
                    self.condvar.wait_until(&mut wheel, wake);
                }
                None => {
                    wheel.sleeping_until = None;
                    self.condvar.wait(&mut wheel);
                }
            }
        }
        let abandoned = (
            std::mem::replace(&mut wheel.level0, slots()),
            std::mem::replace(&mut wheel.level1, slots()),
        );
        let far = std::mem::take(&mut wheel.far);
        wheel.len = 0;
        drop(wheel);
        drop(abandoned);
        drop(far);
    }

    /// Stops the thread; pending timers are dropped (their processes have ended).
    pub(crate) fn shutdown(&self) {
        self.wheel.lock().shutdown = true;
        self.condvar.notify_all();
        if let Some(handle) = self.thread.lock().take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arms timers at `ticks` and walks the wheel tick by tick, recording the tick at
    /// which each fired.
    fn fire_ticks(ticks: &[u64], until: u64) -> Vec<(u64, u64)> {
        let mut wheel = Wheel::new();
        for (i, &tick) in ticks.iter().enumerate() {
            wheel.insert(Timer {
                tick,
                item: i as u64,
            });
        }
        assert_eq!(wheel.len, ticks.len());
        let mut fired = Vec::new();
        let mut due = Vec::new();
        let mut now = 0;
        while now <= until {
            // Jump straight to the next wake-up, as the thread does.
            match wheel.next_wake_tick() {
                Some(wake) => now = wake.max(now),
                None => break,
            }
            wheel.expire(wheel.instant_of(now), &mut due);
            fired.extend(due.drain(..).map(|t| (ticks[t.item as usize], now)));
            now += 1;
        }
        assert_eq!(wheel.len, 0);
        fired
    }

    #[test]
    fn timers_fire_at_their_tick_on_every_level() {
        let ticks = [
            0,
            5,
            SLOTS - 1,
            SLOTS,             // next epoch: level 1
            3 * SLOTS + 7,     // level 1
            SLOTS * SLOTS + 3, // beyond level 1: the heap
            5,                 // a second timer on one tick
        ];
        let fired = fire_ticks(&ticks, SLOTS * SLOTS + 10);
        assert_eq!(fired.len(), ticks.len());
        for (tick, at) in &fired {
            assert_eq!(tick, at, "a timer fires exactly at its tick");
        }
        let order: Vec<u64> = fired.iter().map(|(t, _)| *t).collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted, "in deadline order");
    }

    #[test]
    fn a_timer_armed_in_the_past_fires_at_the_next_tick() {
        let mut wheel = Wheel::new();
        let mut due = Vec::new();
        wheel.expire(wheel.instant_of(10), &mut due);
        wheel.insert(Timer { tick: 3, item: () });
        assert_eq!(wheel.next_wake_tick(), Some(11));
        wheel.expire(wheel.instant_of(11), &mut due);
        assert_eq!(due.len(), 1);
    }

    #[test]
    fn deadlines_round_up_so_timers_never_fire_early() {
        let wheel: Wheel<()> = Wheel::new();
        let deadline = wheel.origin + Duration::from_micros(1_500);
        let tick = wheel.tick_at_or_after(deadline);
        assert_eq!(tick, 2);
        assert!(wheel.instant_of(tick) >= deadline);
        assert_eq!(wheel.tick_at_or_after(wheel.instant_of(4)), 4);
    }
}
