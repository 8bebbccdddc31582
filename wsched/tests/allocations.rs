//! Stepping allocates nothing in steady state: the scheduler reuses its event and
//! output buffers. Measured by counting allocations with a wrapping global allocator
//! (a behaviour check, not a timing one).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use wsched::{
    Context, Events, InitError, Payload, Payloads, Process, Scheduler, Status, StepError,
    StepOutput,
};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract, passed through as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`/`dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Gives the worker back `remaining` times, then finishes.
struct Spinner {
    remaining: u64,
}

impl Process for Spinner {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        if self.remaining == 0 {
            out.set_status(Status::Done(Payload::unit()));
        } else {
            self.remaining -= 1;
            out.set_status(Status::Continue);
        }
        Ok(())
    }
}

fn allocations_for(scheduler: &Scheduler, steps: u64) -> u64 {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    let pid = scheduler
        .spawn(Spinner { remaining: steps }, "run", ())
        .unwrap();
    scheduler.wait(pid).unwrap();
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

#[test]
fn steps_do_not_allocate_in_steady_state() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    // Warm up the buffers.
    allocations_for(&scheduler, 1_000);
    let short = allocations_for(&scheduler, 10);
    let long = allocations_for(&scheduler, 100_000);
    // Spawning and waiting cost the same few allocations either way; 99,990 more
    // steps must not add any (a little slack for the test harness's own threads).
    assert!(
        long <= short + 4,
        "10 steps: {short} allocations, 100,000 steps: {long}"
    );
}
