//! The timer service behind [`Sleep`](crate::command::Sleep), timed messages
//! (`send_after`, `send_interval`: see `timed.rs`) and the deadlines of processes'
//! calls (see `services/calls.rs`): a two-level timing wheel whose
//! timers can be cancelled in O(1), and one thread, started by the first timer.
//!
//! # The wheel
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
//! fires early; it fires within about a millisecond after, plus wake-up latency. A
//! deadline too far away to be represented (`Sleep(Duration::MAX)`) never comes: such
//! a timer sits in no slot and never fires (nor starts the thread), but is linked to
//! its process like the others, so it is released when the process ends or withdraws
//! it.
//!
//! # Cancelling
//!
//! Timers live in a slab: a vector of entries with a free list. Slots hold entry
//! indices, and each entry records where it sits (its level and its index in its
//! slot), so removing it is a `swap_remove` plus a fix of the entry moved into its
//! place. Every timer gets a fresh 64-bit generation, so a stale key is a no-op.
//!
//! The far heap deletes lazily: cancelling a far timer frees its entry (and what it
//! holds) at once and leaves a small record in the heap, skipped when it surfaces;
//! once stale records are more than half the heap, it is rebuilt without them, so it
//! stays within twice its live timers at an amortised O(1) per cancel. A third wheel
//! level would not remove the heap (deadlines can lie centuries ahead), and far timers
//! are few and cheap to push (a later deadline stays near the leaves), so the heap
//! stays.
//!
//! The service finds timers by owner: each process's pending timers are linked in a
//! list through their entries, newest first, whose head ([`TimerList`]) lives in the
//! process's cell. (A timed message is an owner of its own: its list, holding its one
//! pending timer, lives in the state it shares with its `TimerRef`, so cancelling it
//! is the same O(1) unlink.) Arming, firing and cancelling a timer touch only its
//! entry, its neighbours and that cell — which firing touches anyway, to deliver the
//! completion — so they stay O(1) with no hash lookup (a global (PID, tag) hash
//! table, tried first, cost two cache misses per arm and per fire and made both 2–3
//! times slower). Withdrawing one yield walks the process's own pending timers,
//! newest first: O(1) for a receive timeout (the newest), O(timers that process has
//! pending) at worst; releasing them all when the process ends is O(released). The
//! head also tells, without the lock, whether a process has timers at all, so
//! processes that never sleep never take the lock for them. Everything else happens
//! under the one lock.
//!
//! A pending timer costs its entry (72 bytes for the scheduler's timers: the item, a
//! `Sleep`'s completer, a boxed timed message or a boxed call (see
//! `services/timers.rs`), and the wheel's bookkeeping) and a 4-byte slot index. Storage grows to the peak of pending timers and is reused; once no
//! timer is pending, storage grown by a burst is given back to the allocator.
//!
//! # The thread
//!
//! The thread is started by the first timer armed, so a scheduler that never sleeps
//! has none. It fires due timers outside the lock, then plans its next wake-up — the
//! next non-empty tick — and records it in `sleeping_until` before waiting, under the
//! lock. Arming a timer due before that notifies it (and lowers `sleeping_until`, so
//! that arms of timers due later still do not notify again). Because planning and
//! arming hold the same lock and the wait releases it atomically, no earlier timer
//! can slip in unnoticed. The lock, condition variable and thread come from
//! `crate::sync` and the time from a [`Clock`], so `runtime/tests/loom_timers.rs`
//! model-checks that handshake, and cancelling racing firing, on this very code.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::buggify::{buggify, Buggify};
use crate::engine::process::Tag;
use crate::sync::{thread, AtomicU32, Condvar, Mutex, Ordering};
use crate::time::clock;

/// The wheel's size in 1 ms ticks: its horizon is about a second.
const SLOTS: u64 = 1024;
const TICK: Duration = Duration::from_millis(1);
/// How many empty ticks `expire` walks before it looks for the next one that needs
/// a look instead (a scan of up to two levels of slots).
const SKIP_AFTER: u64 = 64;
/// "No entry": the end of a list.
const NIL: u32 = u32::MAX;
/// Storage for at least this many timers is given back once none is pending; below
/// that it is kept, so a few timers coming and going do not reallocate.
const KEEP_ENTRIES: usize = 1024;

/// What a timer carries: the completer of a `Sleep` at run time, probes in tests.
pub(crate) trait TimerItem: Sized + Send + 'static {
    /// Reused across batches by [`fire`](Self::fire).
    type Scratch: Default;

    /// The list of its process's pending timers.
    fn owner(&self) -> &TimerList;

    /// The tag of the yield it completes.
    fn tag(&self) -> Tag;

    /// Completes a batch of due timers, on the timer thread, outside the lock.
    /// Leaves `due` empty.
    fn fire(due: &mut Vec<Self>, scratch: &mut Self::Scratch);

    /// Drops a timer that will not fire, without completing it: its process ended or
    /// withdrew the yield.
    fn release(self);
}

/// A process's pending timers: the head of their list through the wheel's entries
/// (`NIL`: none). Kept in the process's cell; changed only under the service's lock.
#[derive(Debug)]
pub(crate) struct TimerList {
    head: AtomicU32,
}

impl TimerList {
    pub(crate) fn new() -> Self {
        Self {
            head: AtomicU32::new(NIL),
        }
    }

    /// Whether the process may have pending timers, read without the lock. A
    /// process's timers are armed only by the `Sleep` handler on the worker that
    /// stepped the process, before anything the process does next, so that worker —
    /// or any that later steps or ends the process — sees every timer armed for it:
    /// `false` means none is pending. (`true` may be stale: one may have fired since.)
    /// Timed messages are not linked here but in lists of their own, which are
    /// armed from any thread and always searched under the lock.
    pub(crate) fn may_have_pending(&self) -> bool {
        self.head.load(Ordering::Acquire) != NIL
    }

    fn head(&self) -> u32 {
        self.head.load(Ordering::Relaxed)
    }

    fn set_head(&self, index: u32) {
        self.head.store(index, Ordering::Release);
    }
}

/// A timer could not be armed because the timer thread could not be started.
#[derive(Debug)]
pub(crate) struct ThreadStartError(std::io::Error);

impl fmt::Display for ThreadStartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the timer thread could not be started: {}", self.0)
    }
}

impl std::error::Error for ThreadStartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Its message is in ours (as for every error of the crate: see `error.rs`).
        self.0.source()
    }
}

/// Why [`Timers::arm_at`] did not arm a timer; the timer comes back.
pub(crate) enum Refused<T> {
    /// The timer thread is not running and could not be started (the next timer
    /// tries again).
    NoThread(T, ThreadStartError),
    /// The service has shut down: every process has ended.
    ShutDown(T),
}

impl<T> Refused<T> {
    /// The timer, and the error when it was refused for want of a thread.
    pub(crate) fn into_parts(self) -> (T, Option<ThreadStartError>) {
        match self {
            Self::NoThread(item, error) => (item, Some(error)),
            Self::ShutDown(item) => (item, None),
        }
    }
}

impl ThreadStartError {
    /// The OS error.
    pub(crate) fn into_io(self) -> std::io::Error {
        self.0
    }
}

/// Where the service reads the time.
#[derive(Clone, Debug)]
pub(crate) enum Clock {
    /// `Instant::now`.
    System,
    /// A clock that moves one tick forward every time it is read, starting at its
    /// creation: time that passes without anyone waiting for it, so a model can arm
    /// a timer "due now" and know the timer thread will find it due once it looks.
    #[cfg(test)]
    Stepping(Arc<SteppingClock>),
}

#[cfg(test)]
#[derive(Debug)]
pub(crate) struct SteppingClock {
    origin: Instant,
    // A plain std atomic even under loom: reading the clock is no synchronisation,
    // and keeping it out of loom's view keeps the models small.
    reads: std::sync::atomic::AtomicU64,
}

impl Clock {
    /// A [`Stepping`](Self::Stepping) clock.
    #[cfg(test)]
    pub(crate) fn stepping() -> Self {
        Self::Stepping(Arc::new(SteppingClock {
            origin: Instant::now(),
            reads: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    fn now(&self) -> Instant {
        match self {
            Self::System => clock::now(),
            #[cfg(test)]
            Self::Stepping(clock) => {
                let reads = clock
                    .reads
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                clock.origin + TICK * u32::try_from(reads).expect("a short test")
            }
        }
    }
}

// ---- the wheel ------------------------------------------------------------------

/// Where an entry of the slab is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Free: `pos` links the free list.
    Vacant,
    /// In `level0[tick % SLOTS]`, at `pos`.
    Level0,
    /// In `level1[tick / SLOTS % SLOTS]`, at `pos`.
    Level1,
    /// In the far heap.
    Far,
    /// Nowhere: its deadline never comes.
    Never,
}

struct Entry<T> {
    item: Option<T>,
    tick: u64,
    generation: u64,
    /// The index in its slot (level 0 or 1), or the next free entry (vacant).
    pos: u32,
    /// The neighbours in its process's list of timers.
    prev: u32,
    next: u32,
    place: Place,
}

/// Names one armed timer; stale once it fired or was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerKey {
    index: u32,
    generation: u64,
}

/// A far timer's record in the heap (stale once its entry moved on).
struct FarRef {
    tick: u64,
    /// Unique, and increasing in arming order, so equal ticks fire in that order.
    generation: u64,
    index: u32,
}

impl PartialEq for FarRef {
    fn eq(&self, other: &Self) -> bool {
        (self.tick, self.generation) == (other.tick, other.generation)
    }
}

impl Eq for FarRef {}

impl PartialOrd for FarRef {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for FarRef {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest tick first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.tick, other.generation).cmp(&(self.tick, self.generation))
    }
}

/// The timing wheel and its slab, generic over what a timer carries.
struct Wheel<T> {
    origin: Instant,
    /// The next tick to fire.
    next_tick: u64,
    entries: Vec<Entry<T>>,
    /// The first free entry.
    free: u32,
    next_generation: u64,
    /// Timers of the current epoch (`next_tick / SLOTS`), by `tick % SLOTS`.
    level0: Box<[Vec<u32>]>,
    /// Timers of the next `SLOTS - 1` epochs, by `epoch % SLOTS`.
    level1: Box<[Vec<u32>]>,
    /// Timers of later epochs, and records of cancelled ones.
    far: BinaryHeap<FarRef>,
    /// How many of `far`'s records are stale.
    far_stale: usize,
    /// Timers pending.
    len: usize,
    /// Timers pending with a deadline (not [`Place::Never`]): what the thread wakes for.
    scheduled: usize,
}

/// The size of one wheel entry holding a `T` (for the size test of the scheduler's
/// timers).
#[cfg(test)]
pub(crate) const fn entry_size<T>() -> usize {
    std::mem::size_of::<Entry<T>>()
}

fn slots() -> Box<[Vec<u32>]> {
    (0..SLOTS).map(|_| Vec::new()).collect()
}

impl<T: TimerItem> Wheel<T> {
    fn new(origin: Instant) -> Self {
        Self {
            origin,
            next_tick: 0,
            entries: Vec::new(),
            free: NIL,
            next_generation: 0,
            level0: slots(),
            level1: slots(),
            far: BinaryHeap::new(),
            far_stale: 0,
            len: 0,
            scheduled: 0,
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

    /// When `tick` begins, if an `Instant` can say so.
    fn instant_of(&self, tick: u64) -> Option<Instant> {
        let nanos = u128::from(tick) * TICK.as_nanos();
        self.origin
            .checked_add(Duration::from_nanos(u64::try_from(nanos).ok()?))
    }

    fn item(&self, index: u32) -> &T {
        self.entries[index as usize]
            .item
            .as_ref()
            .expect("indexed entries are live")
    }

    /// Adds a timer that fires at `tick` (`None`: never).
    fn insert(&mut self, tick: Option<u64>, item: T) -> TimerKey {
        let generation = self.next_generation;
        self.next_generation += 1;
        let entry = Entry {
            item: Some(item),
            tick: 0,
            generation,
            pos: 0,
            prev: NIL,
            next: NIL,
            place: Place::Never,
        };
        let index = if self.free != NIL {
            let index = self.free;
            let vacant = &mut self.entries[index as usize];
            self.free = vacant.pos;
            *vacant = entry;
            index
        } else {
            let index = u32::try_from(self.entries.len())
                .ok()
                .filter(|&index| index != NIL)
                .expect("fewer than 2^32 - 1 timers pending");
            self.entries.push(entry);
            index
        };
        self.link(index);
        self.len += 1;
        if let Some(tick) = tick {
            self.scheduled += 1;
            self.schedule(index, tick);
        }
        TimerKey { index, generation }
    }

    /// Puts entry `index` where `tick` belongs (the next tick, if that has passed).
    fn schedule(&mut self, index: u32, tick: u64) {
        let tick = tick.max(self.next_tick);
        let (epoch, current) = (tick / SLOTS, self.next_tick / SLOTS);
        let entry = &mut self.entries[index as usize];
        entry.tick = tick;
        let (place, slot) = if epoch == current {
            (Place::Level0, &mut self.level0[(tick % SLOTS) as usize])
        } else if epoch < current + SLOTS {
            (Place::Level1, &mut self.level1[(epoch % SLOTS) as usize])
        } else {
            entry.place = Place::Far;
            self.far.push(FarRef {
                tick,
                generation: entry.generation,
                index,
            });
            return;
        };
        entry.place = place;
        entry.pos = slot.len() as u32;
        slot.push(index);
    }

    /// Puts live entry `index` at the head of its process's list.
    fn link(&mut self, index: u32) {
        let old = {
            let list = self.item(index).owner();
            let old = list.head();
            list.set_head(index);
            old
        };
        if old != NIL {
            self.entries[old as usize].prev = index;
        }
        self.entries[index as usize].next = old;
    }

    /// Takes live entry `index` out of its process's list.
    fn unlink(&mut self, index: u32) {
        let entry = &self.entries[index as usize];
        let (prev, next) = (entry.prev, entry.next);
        if prev == NIL {
            self.item(index).owner().set_head(next);
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }

    /// Unlinks live entry `index` from its process's list and frees it. The caller has
    /// taken it out of its slot or heap.
    fn free(&mut self, index: u32) -> T {
        self.unlink(index);
        let entry = &mut self.entries[index as usize];
        let item = entry.item.take().expect("a live entry holds its timer");
        entry.place = Place::Vacant;
        entry.pos = self.free;
        self.free = index;
        self.len -= 1;
        item
    }

    /// Takes live entry `index` out of wherever it is, and frees it.
    fn remove(&mut self, index: u32) -> T {
        let entry = &self.entries[index as usize];
        let (place, tick, pos) = (entry.place, entry.tick, entry.pos);
        let slot = match place {
            Place::Level0 => Some(&mut self.level0[(tick % SLOTS) as usize]),
            Place::Level1 => Some(&mut self.level1[(tick / SLOTS % SLOTS) as usize]),
            Place::Far => {
                self.far_stale += 1;
                None
            }
            Place::Never => None,
            Place::Vacant => unreachable!("only live entries are removed"),
        };
        if let Some(slot) = slot {
            slot.swap_remove(pos as usize);
            if let Some(&moved) = slot.get(pos as usize) {
                self.entries[moved as usize].pos = pos;
            }
        }
        if place != Place::Never {
            self.scheduled -= 1;
        }
        let item = self.free(index);
        if self.far_stale * 2 > self.far.len() {
            // Mostly stale: rebuild without the stale records (O(heap), paid for by
            // the cancels that made them).
            let entries = &self.entries;
            self.far.retain(|far| is_live_far(entries, far));
            self.far_stale = 0;
        }
        self.release_storage_if_idle();
        item
    }

    /// Cancels the timer `key` names; `None` if it fired or was cancelled already.
    /// (The service finds timers by owner; keys serve the wheel's own tests.)
    #[cfg(test)]
    fn cancel(&mut self, key: TimerKey) -> Option<T> {
        let entry = self.entries.get(key.index as usize)?;
        if entry.place == Place::Vacant || entry.generation != key.generation {
            return None;
        }
        Some(self.remove(key.index))
    }

    /// Cancels the timers of `list`'s process tagged `tag` (one, unless the process
    /// reused the tag), walking its timers newest first.
    fn cancel_tag(&mut self, list: &TimerList, tag: Tag, released: &mut Released<T>) {
        let mut index = list.head();
        while index != NIL {
            let next = self.entries[index as usize].next;
            if self.item(index).tag() == tag {
                released.push(self.remove(index));
            }
            index = next;
        }
    }

    /// Cancels one timer of `list`'s process, if it has any.
    fn cancel_first(&mut self, list: &TimerList) -> Option<T> {
        let index = list.head();
        (index != NIL).then(|| self.remove(index))
    }

    /// Moves every timer due by `now` into `due`.
    fn expire(&mut self, now: Instant, due: &mut Vec<T>) {
        let now_tick = self.tick_of(now);
        while self.next_tick <= now_tick {
            if self.scheduled == 0 {
                // Nothing pending anywhere: jump instead of walking empty ticks. The
                // heap can only hold stale records.
                self.next_tick = now_tick.saturating_add(1);
                self.far.clear();
                self.far_stale = 0;
                break;
            }
            let slot = (self.next_tick % SLOTS) as usize;
            // (Only when the walk ahead is long: a short one is cheaper than the look.)
            if self.level0[slot].is_empty() && now_tick - self.next_tick >= SKIP_AFTER {
                // Skip the empty ticks up to the next that needs a look (a
                // simulation jumping an hour would otherwise walk 3.6 million). No
                // epoch is entered on the way but the one the skip lands on the
                // start of: the ones in between have nothing to cascade, or that
                // tick would have come first.
                let wake = self.next_wake_tick().unwrap_or(u64::MAX);
                let to = wake.min(now_tick.saturating_add(1));
                if to > self.next_tick {
                    let crossed = to / SLOTS > self.next_tick / SLOTS;
                    self.next_tick = to;
                    if crossed && to.is_multiple_of(SLOTS) {
                        self.enter_epoch();
                    }
                    continue;
                }
            }
            // Taken out while its entries are freed, then put back to keep its
            // capacity for the next epoch.
            let mut fired = std::mem::take(&mut self.level0[slot]);
            self.scheduled -= fired.len();
            for &index in &fired {
                let item = self.free(index);
                due.push(item);
            }
            fired.clear();
            self.level0[slot] = fired;
            self.next_tick += 1;
            if self.next_tick.is_multiple_of(SLOTS) {
                self.enter_epoch();
            }
        }
        self.release_storage_if_idle();
    }

    /// The wheel just entered a new epoch: spread its level-1 bucket over level 0
    /// and bring heap timers that came within level 1's reach.
    fn enter_epoch(&mut self) {
        let epoch = self.next_tick / SLOTS;
        let bucket = std::mem::take(&mut self.level1[(epoch % SLOTS) as usize]);
        for index in bucket {
            let entry = &mut self.entries[index as usize];
            debug_assert_eq!(entry.tick / SLOTS, epoch);
            let slot = &mut self.level0[(entry.tick % SLOTS) as usize];
            entry.place = Place::Level0;
            entry.pos = slot.len() as u32;
            slot.push(index);
        }
        while let Some(far) = self.far.peek() {
            if !is_live_far(&self.entries, far) {
                self.far.pop();
                self.far_stale -= 1;
                continue;
            }
            if far.tick / SLOTS >= epoch + SLOTS {
                break;
            }
            let far = self.far.pop().expect("peeked");
            self.schedule(far.index, far.tick);
        }
    }

    /// The tick at which the thread must next wake up, if any timer can fire.
    fn next_wake_tick(&mut self) -> Option<u64> {
        if self.scheduled == 0 {
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
        // bucket then cascades), or when heap timers come within level 1's reach,
        // whichever is first (`expire` skipping empty ticks enters no epoch on the
        // way, so a heap timer's must not be passed over).
        let level1 = (epoch + 1..epoch + SLOTS)
            .find(|e| !self.level1[(e % SLOTS) as usize].is_empty())
            .map(|e| e * SLOTS);
        // Cancelled records on top would wake the thread for nothing.
        while self
            .far
            .peek()
            .is_some_and(|far| !is_live_far(&self.entries, far))
        {
            self.far.pop();
            self.far_stale -= 1;
        }
        let far = self.far.peek().map(|far| {
            (far.tick / SLOTS + 1)
                .saturating_sub(SLOTS)
                .max(epoch + 1)
                .saturating_mul(SLOTS)
        });
        match (level1, far) {
            (Some(level1), Some(far)) => Some(level1.min(far)),
            (level1, far) => level1.or(far),
        }
    }

    /// With no timer pending, gives storage grown by a burst back to the allocator.
    fn release_storage_if_idle(&mut self) {
        if self.len > 0 || self.entries.len() < KEEP_ENTRIES {
            return;
        }
        // Generations carry on, so keys from before stay stale.
        self.entries = Vec::new();
        self.free = NIL;
        self.far = BinaryHeap::new();
        self.far_stale = 0;
        for slot in self.level0.iter_mut().chain(self.level1.iter_mut()) {
            if slot.capacity() > 0 {
                *slot = Vec::new();
            }
        }
    }

    /// Takes every pending timer out (the service is shutting down).
    fn take_all(&mut self) -> Vec<T> {
        let items = self
            .entries
            .iter_mut()
            .filter_map(|entry| entry.item.take())
            .collect();
        *self = Self {
            next_generation: self.next_generation,
            ..Self::new(self.origin)
        };
        items
    }
}

fn is_live_far<T>(entries: &[Entry<T>], far: &FarRef) -> bool {
    entries
        .get(far.index as usize)
        .is_some_and(|entry| entry.place == Place::Far && entry.generation == far.generation)
}

// ---- the service ----------------------------------------------------------------

/// Starts the timer thread: `(name, body)`.
pub(crate) type Spawner =
    fn(String, Box<dyn FnOnce() + Send>) -> std::io::Result<thread::JoinHandle<()>>;

fn spawn_thread(
    name: String,
    body: Box<dyn FnOnce() + Send>,
) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new().name(name).spawn(body)
}

struct State<T> {
    wheel: Wheel<T>,
    /// The tick the thread sleeps until (`None`: until notified), so arming a timer
    /// knows in O(1) whether it must wake the thread earlier.
    sleeping_until: Option<u64>,
    /// `None` until the first timer with a deadline is armed.
    thread: Option<thread::JoinHandle<()>>,
    spawner: Spawner,
    shutdown: bool,
    /// Fired by a simulation that owns the clock, never by a thread of its own.
    #[cfg(feature = "sim")]
    driven: bool,
}

/// The timer service: see the [module docs](self).
pub(crate) struct Timers<T: TimerItem> {
    state: Mutex<State<T>>,
    condvar: Condvar,
    clock: Clock,
    thread_name: String,
    /// Timed messages dropped undelivered (counted by `timed.rs`), for the metrics. A
    /// plain std atomic even under loom: a statistic, not synchronisation.
    undelivered: std::sync::atomic::AtomicU64,
}

/// Timers taken out under the lock, released after it: one needs no allocation.
struct Released<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T: TimerItem> Released<T> {
    fn new() -> Self {
        Self {
            first: None,
            rest: Vec::new(),
        }
    }

    fn push(&mut self, item: T) {
        match self.first {
            None => self.first = Some(item),
            Some(_) => self.rest.push(item),
        }
    }

    /// Releases them all; returns how many there were.
    fn release(self) -> usize {
        let count = usize::from(self.first.is_some()) + self.rest.len();
        self.first.into_iter().chain(self.rest).for_each(T::release);
        count
    }
}

impl<T: TimerItem> Timers<T> {
    /// A service on the system clock. Its thread, named `thread_name`, starts with
    /// the first timer.
    pub(crate) fn new(thread_name: String) -> Arc<Self> {
        Self::with_clock(thread_name, Clock::System)
    }

    pub(crate) fn with_clock(thread_name: String, clock: Clock) -> Arc<Self> {
        let origin = clock.now();
        Arc::new(Self {
            state: Mutex::new(State {
                wheel: Wheel::new(origin),
                // The thread looks at the wheel before its first sleep: no arm
                // needs to wake it until it has planned one.
                sleeping_until: Some(0),
                thread: None,
                spawner: spawn_thread,
                shutdown: false,
                #[cfg(feature = "sim")]
                driven: false,
            }),
            condvar: Condvar::new(),
            clock,
            thread_name,
            undelivered: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Replaces how the thread is started (tests make it fail).
    #[cfg(test)]
    pub(crate) fn set_spawner(&self, spawner: Spawner) {
        self.state.lock().spawner = spawner;
    }

    /// Fires `item` after `duration`. A deadline too far away to represent never
    /// comes: the timer waits, without a thread, until it is cancelled.
    ///
    /// # Errors
    /// Gives `item` back when the timer thread is not running and cannot be started
    /// (the next timer tries again).
    pub(crate) fn arm(
        self: &Arc<Self>,
        duration: Duration,
        item: T,
    ) -> Result<(), (T, ThreadStartError)> {
        match self.arm_at(self.clock.now().checked_add(duration), item) {
            Ok(()) => Ok(()),
            Err(Refused::NoThread(item, error)) => Err((item, error)),
            Err(Refused::ShutDown(item)) => {
                item.release(); // its process has ended: nobody waits for it
                Ok(())
            }
        }
    }

    /// Fires `item` at `deadline` (`None`: never; it waits, without a thread, until
    /// it is cancelled).
    ///
    /// # Errors
    /// Gives `item` back when the timer thread is not running and cannot be started,
    /// or the service has shut down.
    pub(crate) fn arm_at(
        self: &Arc<Self>,
        deadline: Option<Instant>,
        item: T,
    ) -> Result<(), Refused<T>> {
        let mut state = self.state.lock();
        if state.shutdown {
            return Err(Refused::ShutDown(item));
        }
        let tick = deadline.map(|deadline| state.wheel.tick_at_or_after(deadline));
        #[cfg(feature = "sim")]
        let threaded = !state.driven;
        #[cfg(not(feature = "sim"))]
        let threaded = true;
        if threaded && tick.is_some() && state.thread.is_none() {
            let runner = self.clone();
            let spawned = (state.spawner)(self.thread_name.clone(), Box::new(move || runner.run()));
            match spawned {
                Ok(handle) => state.thread = Some(handle),
                Err(error) => return Err(Refused::NoThread(item, ThreadStartError(error))),
            }
        }
        let wake_earlier =
            tick.is_some_and(|tick| state.sleeping_until.is_none_or(|until| tick < until));
        state.wheel.insert(tick, item);
        if wake_earlier {
            // Keep later arms from notifying again before the thread re-plans.
            state.sleeping_until = tick;
        }
        drop(state);
        if wake_earlier {
            self.condvar.notify_one();
        }
        Ok(())
    }

    /// Cancels the timer of the yield `tag` of `list`'s process (every one, should
    /// the process have reused the tag). Returns whether there was one; a timer
    /// firing right now is not stopped, its completion arrives.
    pub(crate) fn cancel(&self, list: &TimerList, tag: Tag) -> bool {
        let mut released = Released::new();
        self.state.lock().wheel.cancel_tag(list, tag, &mut released);
        // A rare path a simulation takes on purpose: the timer fired just before
        // the cancel reached it (its process must ignore what it delivers).
        if released.first.is_some() && buggify(Buggify::TimerBeforeCancel) {
            let mut due: Vec<T> = released.first.into_iter().chain(released.rest).collect();
            T::fire(&mut due, &mut T::Scratch::default());
            return true;
        }
        released.release() > 0
    }

    /// Cancels every timer of `list`'s process (it has ended). Returns how many
    /// there were.
    pub(crate) fn cancel_process(&self, list: &TimerList) -> usize {
        let mut released = Released::new();
        {
            let mut state = self.state.lock();
            while let Some(item) = state.wheel.cancel_first(list) {
                released.push(item);
            }
        }
        released.release()
    }

    /// Timers armed and not yet fired, cancelled or released.
    pub(crate) fn pending(&self) -> usize {
        self.state.lock().wheel.len
    }

    /// When a timer armed for `deadline` fires: the start of the first tick at or
    /// after it.
    pub(crate) fn fires_at(&self, deadline: Instant) -> Instant {
        let wheel = &self.state.lock().wheel;
        let tick = wheel.tick_at_or_after(deadline);
        wheel.instant_of(tick).unwrap_or(deadline)
    }

    /// The service's time, which deadlines passed to [`arm_at`](Self::arm_at) are
    /// measured against.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Counts a timed message dropped undelivered.
    pub(crate) fn count_undelivered(&self) {
        self.undelivered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Timed messages dropped undelivered so far.
    pub(crate) fn undelivered(&self) -> u64 {
        self.undelivered.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the timer thread has been started (and not yet stopped).
    #[cfg(test)]
    pub(crate) fn has_thread(&self) -> bool {
        self.state.lock().thread.is_some()
    }

    fn run(&self) {
        let mut due = Vec::new();
        let mut scratch = T::Scratch::default();
        let mut state = self.state.lock();
        loop {
            if state.shutdown {
                break;
            }
            state.wheel.expire(self.clock.now(), &mut due);
            if !due.is_empty() {
                drop(state);
                T::fire(&mut due, &mut scratch);
                state = self.state.lock();
                continue;
            }
            let wake = state.wheel.next_wake_tick();
            state.sleeping_until = wake;
            match wake.and_then(|tick| state.wheel.instant_of(tick)) {
                Some(instant) => {
                    self.condvar.wait_until(&mut state, instant);
                }
                None => self.condvar.wait(&mut state),
            }
        }
    }

    /// A service fired by whoever runs the simulation on this thread (see
    /// [`fire_due`](Self::fire_due)): no thread is ever started.
    #[cfg(feature = "sim")]
    pub(crate) fn driven(thread_name: String) -> Arc<Self> {
        let timers = Self::new(thread_name);
        timers.state.lock().driven = true;
        timers
    }

    /// When the next timer may fire (an instant at which the wheel must be looked
    /// at, which may fire nothing when it only moves timers closer), if any is
    /// pending.
    #[cfg(feature = "sim")]
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let mut state = self.state.lock();
        let tick = state.wheel.next_wake_tick()?;
        state.wheel.instant_of(tick)
    }

    /// Fires, on this thread, every timer due by the service's clock; returns how
    /// many fired.
    #[cfg(feature = "sim")]
    pub(crate) fn fire_due(&self) -> usize {
        let mut due = Vec::new();
        let mut scratch = T::Scratch::default();
        let mut fired = 0;
        loop {
            self.state.lock().wheel.expire(self.clock.now(), &mut due);
            if due.is_empty() {
                return fired;
            }
            fired += due.len();
            T::fire(&mut due, &mut scratch);
        }
    }

    /// Stops the thread and releases the timers still pending (their processes have
    /// ended).
    pub(crate) fn shutdown(&self) {
        let thread = {
            let mut state = self.state.lock();
            state.shutdown = true;
            state.thread.take()
        };
        self.condvar.notify_all();
        // Shut down from the timer thread itself (a timed message it dropped owned
        // the last `Scheduler`): it sees `shutdown` and exits once this returns;
        // joining it here would be joining this very thread.
        if let Some(thread) =
            thread.filter(|t| t.thread().id() != crate::sync::thread::current().id())
        {
            let _ = thread.join();
        }
        let left = self.state.lock().wheel.take_all();
        left.into_iter().for_each(T::release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_start_error_says_its_cause_once() {
        let cause = std::io::Error::other(crate::error::tests::ReadConfig(std::io::Error::other(
            "disk on fire",
        )));
        crate::error::tests::assert_each_message_once(&crate::time::timer::ThreadStartError(cause));
    }

    /// A timer as the wheel tests see it: a process's list, a tag and a number.
    struct Fake {
        owner: Arc<TimerList>,
        tag: Tag,
        id: u64,
    }

    impl fmt::Debug for Fake {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Fake({})", self.id)
        }
    }

    impl TimerItem for Fake {
        type Scratch = ();

        fn owner(&self) -> &TimerList {
            &self.owner
        }

        fn tag(&self) -> Tag {
            self.tag
        }

        fn fire(due: &mut Vec<Self>, _: &mut ()) {
            due.clear();
        }

        fn release(self) {}
    }

    /// A process's timer list.
    fn process() -> Arc<TimerList> {
        Arc::new(TimerList::new())
    }

    /// Timer `id` of `process`, tagged `id`.
    fn timer(process: &Arc<TimerList>, id: u64) -> Fake {
        Fake {
            owner: process.clone(),
            tag: Tag(id),
            id,
        }
    }

    /// Timer `id` of a process of its own.
    fn fake(id: u64) -> Fake {
        timer(&process(), id)
    }

    fn wheel() -> Wheel<Fake> {
        Wheel::new(Instant::now())
    }

    /// Walks the wheel as the thread does (jumping to each wake-up) until `until`,
    /// returning `(id, tick fired at)` in firing order.
    fn run_until(wheel: &mut Wheel<Fake>, until: u64) -> Vec<(u64, u64)> {
        let mut fired = Vec::new();
        let mut due = Vec::new();
        let mut now = wheel.next_tick;
        while now <= until {
            match wheel.next_wake_tick() {
                Some(wake) => now = wake.max(now),
                None => break,
            }
            if now > until {
                break;
            }
            wheel.expire(wheel.instant_of(now).unwrap(), &mut due);
            fired.extend(due.drain(..).map(|t| (t.id, now)));
            now += 1;
        }
        fired
    }

    /// Arms one timer per tick in `ticks` (id = its position) and fires them all,
    /// recording `(tick, fired at)`.
    fn fire_ticks(ticks: &[u64], until: u64) -> Vec<(u64, u64)> {
        let mut wheel = wheel();
        for (i, &tick) in ticks.iter().enumerate() {
            wheel.insert(Some(tick), fake(i as u64));
        }
        assert_eq!(wheel.len, ticks.len());
        let fired = run_until(&mut wheel, until);
        assert_eq!(wheel.len, 0);
        fired
            .into_iter()
            .map(|(id, at)| (ticks[id as usize], at))
            .collect()
    }

    const FAR: u64 = SLOTS * SLOTS + 3;

    #[test]
    fn timers_fire_at_their_tick_on_every_level() {
        let ticks = [
            0,
            5,
            SLOTS - 1,
            SLOTS,         // next epoch: level 1
            3 * SLOTS + 7, // level 1
            FAR,           // beyond level 1: the heap
            5,             // a second timer on one tick
        ];
        let fired = fire_ticks(&ticks, FAR + 10);
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
        let mut wheel = wheel();
        let mut due = Vec::new();
        wheel.expire(wheel.instant_of(10).unwrap(), &mut due);
        wheel.insert(Some(3), fake(1));
        assert_eq!(wheel.next_wake_tick(), Some(11));
        wheel.expire(wheel.instant_of(11).unwrap(), &mut due);
        assert_eq!(due.len(), 1);
    }

    #[test]
    fn deadlines_round_up_so_timers_never_fire_early() {
        let wheel = wheel();
        let deadline = wheel.origin + Duration::from_micros(1_500);
        let tick = wheel.tick_at_or_after(deadline);
        assert_eq!(tick, 2);
        assert!(wheel.instant_of(tick).unwrap() >= deadline);
        assert_eq!(wheel.tick_at_or_after(wheel.instant_of(4).unwrap()), 4);
    }

    #[test]
    fn cancelled_timers_on_every_level_do_not_fire() {
        let mut wheel = wheel();
        let ticks = [5, 6, SLOTS + 1, 3 * SLOTS, FAR, FAR + 1];
        let keys: Vec<TimerKey> = ticks
            .iter()
            .enumerate()
            .map(|(i, &t)| wheel.insert(Some(t), fake(i as u64)))
            .collect();
        // Cancel every other one: level 0, level 1, far.
        for i in [0, 2, 4] {
            assert_eq!(wheel.cancel(keys[i]).map(|t| t.id), Some(i as u64));
        }
        assert_eq!(wheel.len, 3);
        let fired: Vec<u64> = run_until(&mut wheel, FAR + 10)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(fired, vec![1, 3, 5]);
        assert_eq!((wheel.len, wheel.scheduled), (0, 0));
    }

    #[test]
    fn cancelling_fixes_the_entry_moved_into_the_hole() {
        let mut wheel = wheel();
        // Four timers in one slot; cancelling the first moves the last into its place.
        let keys: Vec<TimerKey> = (0..4).map(|i| wheel.insert(Some(7), fake(i))).collect();
        assert_eq!(wheel.cancel(keys[0]).map(|t| t.id), Some(0));
        // The moved one (3) can be cancelled through its key: its position was fixed.
        assert_eq!(wheel.cancel(keys[3]).map(|t| t.id), Some(3));
        assert_eq!(wheel.cancel(keys[1]).map(|t| t.id), Some(1));
        let fired: Vec<u64> = run_until(&mut wheel, 10)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(fired, vec![2]);
        // Same on level 1 (the slot is the epoch's bucket).
        let keys: Vec<TimerKey> = (0..3)
            .map(|i| wheel.insert(Some(5 * SLOTS + i), fake(10 + i)))
            .collect();
        assert_eq!(wheel.cancel(keys[0]).map(|t| t.id), Some(10));
        assert_eq!(wheel.cancel(keys[2]).map(|t| t.id), Some(12));
        let fired: Vec<u64> = run_until(&mut wheel, 6 * SLOTS)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(fired, vec![11]);
    }

    #[test]
    fn stale_keys_are_no_ops() {
        let mut wheel = wheel();
        let first = wheel.insert(Some(3), fake(1));
        assert!(wheel.cancel(first).is_some());
        assert!(wheel.cancel(first).is_none(), "cancelled twice");
        // The entry is reused by the next timer: the old key must not reach it.
        let second = wheel.insert(Some(3), fake(2));
        assert_eq!(second.index, first.index);
        assert!(wheel.cancel(first).is_none());
        assert_eq!(wheel.len, 1);
        let fired = run_until(&mut wheel, 5);
        assert_eq!(fired, vec![(2, 3)]);
        assert!(wheel.cancel(second).is_none(), "fired already");
        // Far and never timers too.
        let far = wheel.insert(Some(FAR), fake(3));
        let never = wheel.insert(None, fake(4));
        assert!(wheel.cancel(far).is_some() && wheel.cancel(never).is_some());
        assert!(wheel.cancel(far).is_none() && wheel.cancel(never).is_none());
        assert_eq!(wheel.len, 0);
    }

    #[test]
    fn cancelled_far_timers_do_not_pile_up_in_the_heap() {
        let mut wheel = wheel();
        // A few live far timers, and many armed and cancelled around them, like a
        // receive loop with a long timeout.
        for i in 0..3 {
            wheel.insert(Some(FAR + i), fake(i));
        }
        for i in 0..10_000 {
            let key = wheel.insert(Some(FAR + 10 + i), fake(i));
            assert!(wheel.cancel(key).is_some());
            assert!(wheel.far.len() <= 2 * 3 + 1, "{} records", wheel.far.len());
        }
        assert!(wheel.entries.len() <= 4, "entries are reused");
        let fired: Vec<u64> = run_until(&mut wheel, FAR + 20)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(fired, vec![0, 1, 2]);
    }

    #[test]
    fn timers_that_never_fire_wait_without_waking_the_thread() {
        let mut wheel = wheel();
        let never = process();
        wheel.insert(None, timer(&never, 1));
        assert_eq!(wheel.len, 1);
        assert_eq!(wheel.next_wake_tick(), None);
        assert!(run_until(&mut wheel, 10 * SLOTS).is_empty());
        assert_eq!(wheel.cancel_first(&never).map(|t| t.id), Some(1));
        assert_eq!(wheel.len, 0);
    }

    fn cancel_tag(wheel: &mut Wheel<Fake>, list: &TimerList, tag: u64) -> Vec<u64> {
        let mut released = Released::new();
        wheel.cancel_tag(list, Tag(tag), &mut released);
        released
            .first
            .into_iter()
            .chain(released.rest)
            .map(|t| t.id)
            .collect()
    }

    #[test]
    fn timers_are_found_by_process_and_tag() {
        let mut wheel = wheel();
        let (one, two, three) = (process(), process(), process());
        // Process one: tags 1..=5 on every level, and one that never fires; process
        // two reuses a tag.
        for tag in 1..=5 {
            wheel.insert(Some(tag * SLOTS * 300), timer(&one, tag));
        }
        wheel.insert(None, timer(&one, 6));
        wheel.insert(Some(9), timer(&two, 1));
        wheel.insert(Some(10), timer(&two, 1));
        assert_eq!(wheel.len, 8);
        assert!(one.may_have_pending() && !three.may_have_pending());
        // One yield of process one, from the middle of its list.
        assert_eq!(cancel_tag(&mut wheel, &one, 3), vec![3]);
        assert!(cancel_tag(&mut wheel, &one, 3).is_empty());
        assert!(cancel_tag(&mut wheel, &three, 1).is_empty());
        // The newest and the oldest.
        assert_eq!(cancel_tag(&mut wheel, &one, 6), vec![6]);
        assert_eq!(cancel_tag(&mut wheel, &one, 1), vec![1]);
        // All of process one.
        let mut ids = Vec::new();
        while let Some(t) = wheel.cancel_first(&one) {
            ids.push(t.id);
        }
        ids.sort_unstable();
        assert_eq!(ids, vec![2, 4, 5]);
        assert!(!one.may_have_pending());
        // Process two's reused tag names both its timers.
        assert_eq!(cancel_tag(&mut wheel, &two, 1).len(), 2);
        assert_eq!(wheel.len, 0);
        assert!(!two.may_have_pending());
    }

    #[test]
    fn firing_unlinks_timers_from_their_process() {
        let mut wheel = wheel();
        let processes = [process(), process(), process()];
        for id in 0..50 {
            wheel.insert(Some(id % 7 + 1), timer(&processes[id as usize % 3], id));
        }
        let keep = wheel.insert(Some(SLOTS * 5), timer(&processes[1], 99));
        run_until(&mut wheel, 10);
        assert_eq!(wheel.len, 1);
        assert!(!processes[0].may_have_pending() && !processes[2].may_have_pending());
        assert!(wheel.cancel_first(&processes[0]).is_none());
        assert_eq!(wheel.cancel_first(&processes[1]).map(|t| t.id), Some(99));
        assert!(wheel.cancel(keep).is_none());
        assert!(!processes[1].may_have_pending());
    }

    #[test]
    fn storage_is_given_back_once_nothing_is_pending() {
        let mut wheel = wheel();
        let keys: Vec<TimerKey> = (0..10_000)
            .map(|i| wheel.insert(Some(i % (3 * SLOTS)), fake(i)))
            .collect();
        let last = keys[keys.len() - 1];
        for key in &keys[..keys.len() - 1] {
            assert!(wheel.cancel(*key).is_some());
        }
        assert!(
            wheel.entries.capacity() >= 10_000,
            "kept while one is pending"
        );
        assert!(wheel.cancel(last).is_some());
        assert_eq!(wheel.entries.capacity(), 0);
        assert!(wheel.level0.iter().all(|s| s.capacity() == 0));
        // Keys from before stay stale, and the wheel works on.
        assert!(wheel.cancel(keys[0]).is_none());
        let key = wheel.insert(Some(SLOTS * 4), fake(1));
        assert_eq!(key.index, 0);
        assert!(wheel.cancel(keys[0]).is_none());
        assert_eq!(run_until(&mut wheel, SLOTS * 5), vec![(1, SLOTS * 4)]);
    }

    // ---- the service ------------------------------------------------------------

    #[test]
    fn the_thread_starts_with_the_first_timer_that_can_fire() {
        let timers = Timers::<Fake>::new("wsched-test-timer".into());
        let sleeper = process();
        assert!(!timers.has_thread());
        timers.arm(Duration::MAX, timer(&sleeper, 1)).unwrap();
        assert!(
            !timers.has_thread(),
            "a timer that never fires needs no thread"
        );
        timers
            .arm(Duration::from_secs(60), timer(&sleeper, 2))
            .unwrap();
        assert!(timers.has_thread());
        assert_eq!(timers.pending(), 2);
        assert!(timers.cancel(&sleeper, Tag(2)));
        assert!(!timers.cancel(&sleeper, Tag(2)));
        assert_eq!(timers.cancel_process(&sleeper), 1);
        assert!(!sleeper.may_have_pending());
        timers.shutdown();
        assert!(!timers.has_thread());
    }

    #[test]
    fn a_thread_that_cannot_start_gives_the_timer_back() {
        fn refuse(
            _: String,
            _: Box<dyn FnOnce() + Send>,
        ) -> std::io::Result<thread::JoinHandle<()>> {
            Err(std::io::Error::other("no threads today"))
        }
        let timers = Timers::<Fake>::new("wsched-test-timer".into());
        timers.set_spawner(refuse);
        let (back, error) = timers
            .arm(Duration::from_millis(1), fake(1))
            .expect_err("no thread");
        assert_eq!(back.id, 1);
        assert_eq!(
            error.to_string(),
            "the timer thread could not be started: no threads today"
        );
        assert_eq!(timers.pending(), 0);
        // The next timer tries again.
        timers.set_spawner(spawn_thread);
        timers.arm(Duration::from_secs(60), fake(1)).unwrap();
        assert!(timers.has_thread());
        timers.shutdown();
        assert_eq!(timers.pending(), 0);
    }

    #[test]
    fn a_stepping_clock_moves_a_tick_per_read() {
        let clock = Clock::stepping();
        let (a, b) = (clock.now(), clock.now());
        assert_eq!(b - a, TICK);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        /// What a test does to the wheel.
        #[derive(Debug, Clone)]
        enum Op {
            /// Arms a timer `ahead` ticks after the current one.
            Arm(u64),
            /// Cancels the n-th pending timer (modulo how many there are).
            Cancel(usize),
            /// Expires everything due `ahead` ticks on.
            Expire(u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            // Near ticks, epochs ahead, and beyond level 1 (the heap); jumps short
            // and long, so that `expire` both walks and skips.
            let ahead = prop_oneof![0..8u64, 0..3 * SLOTS, 0..(SLOTS * SLOTS * 2)];
            prop_oneof![
                3 => ahead.clone().prop_map(Op::Arm),
                1 => any::<usize>().prop_map(Op::Cancel),
                2 => prop_oneof![0..4u64, 0..(SLOTS * 3), 0..(SLOTS * SLOTS * 3)].prop_map(Op::Expire),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            /// Whatever is armed, cancelled and expired, in whatever jumps, each
            /// `expire` fires exactly the timers due by then and nothing else.
            #[test]
            fn expire_fires_exactly_what_is_due(ops in proptest::collection::vec(op(), 1..120)) {
                let mut wheel = wheel();
                // id -> (its tick, its process's list)
                let mut pending: BTreeMap<u64, (u64, Arc<TimerList>)> = BTreeMap::new();
                let mut now = 0u64;
                let mut due = Vec::new();
                for (id, op) in ops.into_iter().enumerate() {
                    let id = id as u64;
                    match op {
                        Op::Arm(ahead) => {
                            let tick = now + 1 + ahead;
                            let list = process();
                            wheel.insert(Some(tick), timer(&list, id));
                            pending.insert(id, (tick, list));
                        }
                        Op::Cancel(n) if !pending.is_empty() => {
                            let id = *pending.keys().nth(n % pending.len()).unwrap();
                            let (_, list) = pending.remove(&id).unwrap();
                            let mut released = Released::new();
                            wheel.cancel_tag(&list, Tag(id), &mut released);
                            prop_assert_eq!(released.release(), 1);
                        }
                        Op::Cancel(_) => {}
                        Op::Expire(ahead) => {
                            now += ahead;
                            wheel.expire(wheel.instant_of(now).unwrap(), &mut due);
                            let mut fired: Vec<u64> = due.drain(..).map(|t: Fake| t.id).collect();
                            fired.sort_unstable();
                            let expected: Vec<u64> = pending
                                .iter()
                                .filter(|(_, (tick, _))| *tick <= now)
                                .map(|(id, _)| *id)
                                .collect();
                            prop_assert_eq!(&fired, &expected, "at tick {}", now);
                            for id in expected {
                                pending.remove(&id);
                            }
                        }
                    }
                    prop_assert_eq!(wheel.len, pending.len());
                }
            }
        }
    }
}
