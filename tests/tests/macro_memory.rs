//! What an idle `#[process]` takes in memory, counted exactly: the size of the one
//! allocation a spawn makes, its cell (process, state machine and bookkeeping
//! together). The benchmark suite measures resident memory per idle process against
//! a target of 400 bytes; that figure follows from this size (and the allocator's
//! rounding), so a field added to every machine shows up here first, as a failure,
//! rather than as a drift in a benchmark table.
//!
//! One test in this binary: the recording allocator is global.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use wsched::prelude::*;
use wsched::{BoxError, Scheduler};

struct Recording;

thread_local! {
    /// Whether this thread's allocations are recorded.
    static RECORDED: Cell<bool> = const { Cell::new(false) };
}

static COUNT: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if RECORDED.with(Cell::get) {
            COUNT.fetch_add(1, Ordering::Relaxed);
            LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        // SAFETY: the caller upholds `alloc`'s contract, passed through as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Recording = Recording;

/// The shape the suite's memory workload measures: waits for one message.
struct Idle;

#[process]
impl Idle {
    #[entry]
    fn run(&mut self) -> Result<u64, BoxError> {
        let value = recv!(u64)?;
        Ok(value)
    }
}

/// The size the cell of [`Idle`] had when this test was written (rustc 1.95): with
/// glibc's 16-byte rounding and the PID table's slot it is about 400 bytes resident
/// per idle process. Lower it when a change makes cells smaller.
const IDLE_CELL_BYTES: usize = 360;

#[test]
fn an_idle_process_is_one_allocation_of_at_most_its_measured_size() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    // The first spawn grows the global queue (once per scheduler).
    let first = scheduler.spawn(Idle, "run", ()).unwrap();
    scheduler.send(first, 1_u64).unwrap();
    scheduler.wait(first).unwrap();
    RECORDED.with(|r| r.set(true));
    let pid = scheduler.spawn(Idle, "run", ()).unwrap();
    RECORDED.with(|r| r.set(false));
    let (count, largest) = (
        COUNT.load(Ordering::Relaxed),
        LARGEST.load(Ordering::Relaxed),
    );
    assert_eq!(
        count, 1,
        "a spawn from outside allocates its cell and nothing else"
    );
    // A workspace build turns `sim` on (the examples ask for it), whose history
    // capture takes a slot in every cell; `cargo test -p wsched-tests --test
    // macro_memory` alone checks the default build's bound (CI runs both).
    let bound = IDLE_CELL_BYTES + wsched::__private::CELL_BYTES_OF_FEATURES;
    assert!(
        largest <= bound,
        "the cell of an idle #[process] grew to {largest} bytes (it was {bound}): \
         every process pays for what was added to the machine or the cell header; keep it \
         out of them (or behind a pointer), or measure the memory per idle process with \
         the suite and update the target and this bound together"
    );
    scheduler.send(pid, 7_u64).unwrap();
    assert_eq!(scheduler.wait(pid).unwrap().downcast::<u64>().unwrap(), 7);
    let _ = scheduler.shutdown(Duration::from_secs(5));
}
