//! What a `#[process]` allocates in steady state, counted with a wrapping global
//! allocator (a behaviour check, not a timing one): the macro's machinery must not
//! add allocations per message or per yield to what the payloads themselves need.
//!
//! One test in this binary: the count is global, so nothing else may run meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::{
    Context, Event, Events, InitError, IntoPayloads, IntoProcess, Payload, Payloads, Process,
    Scheduler, Status, StepError, StepOutput, Tag,
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

/// Completed at once by its handler, on the worker; nothing to box.
struct Nop;
impl Command for Nop {
    type Output = ();
}

/// Completed at once with its number plus one: a boxed command and a boxed output.
struct Inc(u64);
impl Command for Inc {
    type Output = u64;
}

/// Spawns its `Pong`, bounces `rounds` numbers off it.
struct Ping;

#[process]
impl Ping {
    #[entry]
    fn run(&mut self, rounds: u32) -> Result<u64, BoxError> {
        let pong = this::spawn_detached(Pong, "run", (this::pid(),))?;
        let mut sum = 0;
        for i in 0..rounds {
            this::send(pong, i)?;
            sum += u64::from(recv!(u32)?);
        }
        this::send(pong, u32::MAX)?;
        Ok(sum)
    }
}

struct Pong;

#[process]
impl Pong {
    #[entry]
    fn run(&mut self, ping: Pid) -> Result<(), BoxError> {
        loop {
            let n = recv!(u32)?;
            if n == u32::MAX {
                return Ok(());
            }
            this::send(ping, n + 1)?;
        }
    }
}

/// Returns at once.
struct Quick;

#[process]
impl Quick {
    #[entry]
    fn run(&mut self) {}
}

struct Yielder;

#[process]
impl Yielder {
    #[entry]
    fn nops(&mut self, n: u32) -> Result<u64, BoxError> {
        let mut done = 0;
        for _ in 0..n {
            yield_cmd!(Nop)?;
            done += 1;
        }
        Ok(done)
    }

    #[entry]
    fn incs(&mut self, n: u64) -> Result<u64, BoxError> {
        let mut sum = 0;
        for i in 0..n {
            sum += yield_cmd!(Inc(i))?;
        }
        Ok(sum)
    }
}

/// One node of the skynet tree (as in the benchmark suite): spawns ten children with
/// `yield_all!` of `Spawn`, joins them with `yield_all!` of `Join`, returns the sum.
struct Skynet;

#[process]
impl Skynet {
    #[entry]
    fn run(&mut self, num: u64, size: u64) -> Result<u64, BoxError> {
        if size == 1 {
            return Ok(num);
        }
        let child = size / 10;
        let spawned =
            yield_all!((0..10).map(|i| Spawn::new(Skynet, "run", (num + i * child, child))));
        let mut pids = Vec::with_capacity(10);
        for pid in spawned {
            pids.push(pid?);
        }
        let mut sum = 0;
        for result in yield_all!(pids.into_iter().map(Join)) {
            sum += result??.downcast::<u64>()?;
        }
        Ok(sum)
    }
}

// ---------------------------------------------------------------- the hand-written forms

/// The one argument of entry `run`.
fn arg<T: 'static>(input: Payloads) -> Result<T, InitError> {
    match input.into_vec().pop() {
        Some(p) => p.downcast::<T>().map_err(InitError::failed),
        None => Ok(unreachable_arg()),
    }
}

fn unreachable_arg<T>() -> T {
    panic!("every hand-written process here takes one argument")
}

fn message<T: 'static>(event: Event) -> Result<T, StepError> {
    match event {
        Event::Message(m) => m.payload.downcast::<T>().map_err(StepError::new),
        other => Err(StepError::new(format!("unexpected {other:?}"))),
    }
}

#[derive(Default)]
struct HandPing {
    ctx: Option<Context>,
    pong: Option<Pid>,
    rounds: u32,
    sent: u32,
    sum: u64,
}

impl Process for HandPing {
    fn init(&mut self, ctx: Context, _: &str, input: Payloads) -> Result<(), InitError> {
        self.rounds = arg(input)?;
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.ctx.as_ref().expect("initialised");
        let pong = match self.pong {
            Some(pong) => pong,
            None => {
                let pong = ctx
                    .spawn_detached(HandPong(ctx.pid(), None), "run", ())
                    .map_err(StepError::new)?;
                self.pong = Some(pong);
                pong
            }
        };
        for event in events {
            self.sum += u64::from(message::<u32>(event)?);
        }
        if self.sent < self.rounds {
            ctx.send(pong, self.sent).map_err(StepError::new)?;
            self.sent += 1;
            out.set_status(Status::WaitingForMessage);
        } else {
            ctx.send(pong, u32::MAX).map_err(StepError::new)?;
            out.set_status(Status::Done(Payload::new(self.sum)));
        }
        Ok(())
    }
}

struct HandPong(Pid, Option<Context>);

impl Process for HandPong {
    fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        self.1 = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let ctx = self.1.as_ref().expect("initialised");
        for event in events {
            let n = message::<u32>(event)?;
            if n == u32::MAX {
                out.set_status(Status::Done(Payload::unit()));
                return Ok(());
            }
            ctx.send(self.0, n + 1).map_err(StepError::new)?;
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    }
}

/// Yields `Nop`s (or `Inc`s) one at a time.
#[derive(Default)]
struct HandYielder {
    incs: bool,
    left: u64,
    tag: u64,
    sum: u64,
}

impl Process for HandYielder {
    fn init(&mut self, _: Context, entry: &str, input: Payloads) -> Result<(), InitError> {
        self.incs = entry == "incs";
        self.left = if self.incs {
            arg::<u64>(input)?
        } else {
            u64::from(arg::<u32>(input)?)
        };
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        for event in events {
            let Event::Completion(c) = event else {
                return Err(StepError::new("unexpected event"));
            };
            let result = c.result.map_err(StepError::new)?;
            if self.incs {
                self.sum += result.downcast::<u64>().map_err(StepError::new)?;
            }
        }
        if self.left == 0 {
            out.set_status(Status::Done(Payload::new(self.sum)));
        } else {
            self.left -= 1;
            self.tag += 1;
            if self.incs {
                out.yield_command(Tag(self.tag), Inc(self.tag - 1));
            } else {
                out.yield_command(Tag(self.tag), Nop);
            }
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    }
}

/// Returns at once. Not zero-sized (as the machine is not), so that boxing it
/// allocates as boxing the machine does.
#[derive(Default)]
struct HandQuick(#[allow(dead_code)] u8);

impl Process for HandQuick {
    fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        out.set_status(Status::Done(Payload::unit()));
        Ok(())
    }
}

// ---------------------------------------------------------------- counting

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(1)
        .handler(|_: Nop, done: Completer<Nop>| done.complete(()))
        .handler(|Inc(n): Inc, done: Completer<Inc>| done.complete(n + 1))
        .build()
        .unwrap()
}

/// Allocations made by running `process` to its end.
fn allocations<P: IntoProcess>(
    s: &Scheduler,
    process: P,
    entry: &str,
    input: impl IntoPayloads,
) -> u64 {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    let pid = s.spawn(process, entry, input).unwrap();
    s.wait(pid).unwrap();
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// The least of three counts of `run`: a worker reuses the memory of cells it
/// freed, so a process spawned on a worker allocates its cell or not depending on
/// which thread dropped an earlier cell last (a worker, or the test's thread in
/// `wait`). The least count is the one where the cell was reused; recycling only
/// ever removes allocations, so it hides none that the macro adds.
fn least_of_three(mut run: impl FnMut() -> u64) -> u64 {
    (0..3).map(|_| run()).min().expect("three runs")
}

/// Allocations the work of `units` more units made: the difference between runs of
/// `units` and `2 * units`, after a warm-up (so buffers the scheduler reuses have
/// grown already). An allocation per unit shows as `units`; what happens once per
/// run cancels out, give or take [`RUN_EDGES`].
fn per_unit<P: IntoProcess>(
    s: &Scheduler,
    make: impl Fn() -> P,
    entry: &str,
    input: impl Fn(u32) -> Box<dyn FnOnce() -> wsched::Payloads>,
    units: u32,
) -> (i64, u32) {
    allocations(s, make(), entry, input(units)());
    let once = least_of_three(|| allocations(s, make(), entry, input(units)()));
    let twice = least_of_three(|| allocations(s, make(), entry, input(2 * units)()));
    (twice as i64 - once as i64, units)
}

/// How far apart two runs' once-per-run allocations may be: a worker's table of the
/// processes it sends to holds the cells of a run's last processes until later PIDs
/// take their entries, so whether the next run's cells reuse their memory (and skip
/// an allocation) varies by one or two.
const RUN_EDGES: i64 = 2;

/// Whether `more` (from [`per_unit`]) is no allocation per unit.
fn none_per_unit(more: i64) -> bool {
    more.abs() <= RUN_EDGES
}

#[test]
fn the_macro_form_allocates_what_the_hand_written_form_does() {
    let s = scheduler();
    let args = |n: u32| -> Box<dyn FnOnce() -> wsched::Payloads> {
        Box::new(move || (n,).into_payloads())
    };
    let args64 = |n: u32| -> Box<dyn FnOnce() -> wsched::Payloads> {
        Box::new(move || (u64::from(n),).into_payloads())
    };

    // A whole process that returns at once: the macro adds no allocation of its own
    // (the entry's coroutine lives in the machine itself, as its state does).
    allocations(&s, Quick, "run", ());
    allocations(&s, HandQuick::default(), "run", ());
    let macro_form = least_of_three(|| allocations(&s, Quick, "run", ()));
    let hand = least_of_three(|| allocations(&s, HandQuick::default(), "run", ()));
    assert_eq!(macro_form, hand, "a process that returns at once");

    // A ping-pong round trip: nothing at all (small messages sit inline in their
    // payloads).
    let (macro_form, rounds) = per_unit(&s, || Ping, "run", args, 10_000);
    let (hand, _) = per_unit(&s, HandPing::default, "run", args, 10_000);
    assert!(
        none_per_unit(macro_form) && none_per_unit(hand),
        "ping-pong, {rounds} round trips: {macro_form} more allocations (#[process]), {hand} (hand-written)"
    );

    // A `yield_cmd!` of a command completed at once: nothing to box for a `Nop`
    // (a zero-sized command and output)...
    let (macro_form, yields) = per_unit(&s, || Yielder, "nops", args, 10_000);
    let (hand, _) = per_unit(&s, HandYielder::default, "nops", args, 10_000);
    assert!(
        none_per_unit(macro_form) && none_per_unit(hand),
        "{yields} yields of Nop: {macro_form} more allocations (#[process]), {hand} (hand-written)"
    );
    // ... nor for an `Inc(u64)`, whose command and output sit inline in their
    // payloads.
    let (macro_form, yields) = per_unit(&s, || Yielder, "incs", args64, 10_000);
    let (hand, _) = per_unit(&s, HandYielder::default, "incs", args64, 10_000);
    assert!(
        none_per_unit(macro_form) && none_per_unit(hand),
        "{yields} yields of Inc: {macro_form} more allocations (#[process]), {hand} (hand-written)"
    );

    // A skynet tree of 10,000 leaves (11,111 processes), after a warm-up. 7.11 per
    // process while the process, its cell and its coroutine were three allocations,
    // the `Spawn` command a fourth, and a `yield_all!` grew its vectors one doubling
    // at a time; 3.44 now: the cell (with the process and its coroutine inside), the
    // input payloads, `Join`'s boxed result, and a parent's few per ten children.
    let leaves = 10_000_u64;
    allocations(&s, Skynet, "run", (0_u64, leaves));
    let skynet = allocations(&s, Skynet, "run", (0_u64, leaves));
    let per_process = skynet as f64 / 11_111.0;
    assert!(
        per_process < 3.5,
        "skynet: {per_process:.2} allocations per process"
    );
}
