//! How many steps, and how much bookkeeping, the suspension points cost: counted,
//! not timed. A `yield_all!` of n commands completed at once takes two steps
//! whatever n is; completions that arrive one by one cost O(1) each; the
//! `wsched::this` functions still refuse outside a step with the same messages.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wsched::command::{Completer, Spawn};
use wsched::prelude::*;
use wsched::testing::TestProcess;
use wsched::{IntoProcess, Process, Scheduler};

/// Completed at once by its handler, on the worker.
struct Nop;
impl Command for Nop {
    type Output = ();
}

/// Completed by the test, in the harness.
struct Numbered(#[allow(dead_code)] u32);
impl Command for Numbered {
    type Output = u32;
}

struct Batch;

#[process]
impl Batch {
    /// One `yield_all!` of `n` `Nop`s.
    #[entry]
    fn nops(&mut self, n: u32) -> Result<u32, BoxError> {
        let mut done = 0;
        for result in yield_all!((0..n).map(|_| Nop)) {
            result?;
            done += 1;
        }
        Ok(done)
    }

    /// One `yield_all!` spawning `n` `Leaf`s.
    #[entry]
    fn spawns(&mut self, n: u32) -> Result<u32, BoxError> {
        let mut spawned = 0;
        for pid in yield_all!((0..n).map(|_| Spawn::detached(Leaf, "run", ()))) {
            pid?;
            spawned += 1;
        }
        Ok(spawned)
    }

    /// One `yield_all!` spawning `n` `Leaf`s on an entry `Leaf` does not have: the
    /// errors, as text.
    #[entry]
    fn refused(&mut self, n: u32) -> Vec<String> {
        yield_all!((0..n).map(|_| Spawn::detached(Leaf, "nope", ())))
            .into_iter()
            .map(|result| result.expect_err("no such entry").to_string())
            .collect()
    }

    /// One `yield_all!` whose iterator panics after spawning `n` `Counted`s.
    #[entry]
    fn panics_after(&mut self, n: u32, ran: Arc<AtomicUsize>) -> usize {
        let spawns = (0..=n).map(|i| {
            assert!(i < n, "the iterator gives up after {n} spawns");
            Spawn::detached(Counted(ran.clone()), "run", ())
        });
        yield_all!(spawns).len()
    }

    /// One `yield_all!` of `n` `Numbered`s; their results in order.
    #[entry]
    fn numbered(&mut self, n: u32) -> Result<Vec<u32>, BoxError> {
        let mut results = Vec::new();
        for result in yield_all!((0..n).map(Numbered)) {
            results.push(result?);
        }
        Ok(results)
    }
}

/// Ends in its first step.
struct Leaf;

/// Counts itself and ends.
struct Counted(Arc<AtomicUsize>);

#[process]
impl Counted {
    #[entry]
    fn run(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[process]
impl Leaf {
    #[entry]
    fn run(&mut self) {}
}

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .handler(|_: Nop, done: Completer<Nop>| done.complete(()))
        .build()
        .unwrap()
}

/// Runs `entry` of a `Batch` with `n`; returns its result and the steps the
/// scheduler took meanwhile (nothing else runs on it).
fn steps(s: &Scheduler, entry: &str, n: u32) -> (u32, u64) {
    let before = s.metrics().total().steps;
    let pid = s.spawn(Batch, entry, (n,)).unwrap();
    let done = s.wait(pid).unwrap().downcast::<u32>().unwrap();
    // Detached children may still be queued: wait until every process has ended.
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.metrics().live > 0 {
        assert!(Instant::now() < deadline, "processes still live");
        std::thread::sleep(Duration::from_millis(1));
    }
    (done, s.metrics().total().steps - before)
}

#[test]
fn a_yield_all_of_commands_completed_at_once_takes_two_steps_whatever_their_number() {
    for workers in [1, 2] {
        let s = scheduler(workers);
        // Nothing to wait for: the entry runs to its end in its first step.
        assert_eq!(steps(&s, "nops", 0), (0, 1), "{workers} workers");
        // The handler completes each yield on the worker right after the step, so
        // all completions are there for the second step, which finishes. 200,000
        // also guards the bookkeeping: searching lists of tags per completion (as
        // it once did) would take minutes here.
        for n in [1, 100, 10_000, 200_000] {
            assert_eq!(
                steps(&s, "nops", n),
                (n, 2),
                "{workers} workers, {n} yields"
            );
        }
        // Spawns are done as they are yielded: the entry never suspends, and
        // each child takes its one step.
        for n in [1, 1_000] {
            let (spawned, taken) = steps(&s, "spawns", n);
            assert_eq!(spawned, n);
            assert_eq!(taken, 1 + u64::from(n), "{workers} workers, {n} spawns");
        }
    }
}

#[test]
fn spawns_go_to_the_handler_after_the_step_when_a_user_handler_replaces_the_builtin_or_steps_are_timed(
) {
    let handled = Arc::new(Mutex::new(0_u32));
    let counted = handled.clone();
    let replaced = Scheduler::builder()
        .workers(1)
        .handler(move |_: Spawn, done: Completer<Spawn>| {
            *counted.lock().unwrap() += 1;
            done.fail("this scheduler spawns nothing");
        })
        .build()
        .unwrap();
    let pid = replaced.spawn(Batch, "refused", (3_u32,)).unwrap();
    let errors = replaced
        .wait(pid)
        .unwrap()
        .downcast::<Vec<String>>()
        .unwrap();
    assert_eq!(
        *handled.lock().unwrap(),
        3,
        "the user's handler saw every Spawn"
    );
    assert!(
        errors
            .iter()
            .all(|e| e.contains("this scheduler spawns nothing")),
        "{errors:?}"
    );
    assert_eq!(
        replaced.metrics().total().steps,
        2,
        "the entry waited for them"
    );

    // Step timing times each handler's run: the spawns go through it.
    let timed = Scheduler::builder()
        .workers(1)
        .step_timing(true)
        .build()
        .unwrap();
    assert_eq!(steps(&timed, "spawns", 10), (10, 2 + 10));
}

#[test]
fn a_spawn_done_at_once_fails_as_its_handler_would_have_failed_it() {
    let refusals = |s: Scheduler| {
        let pid = s.spawn(Batch, "refused", (2_u32,)).unwrap();
        s.wait(pid).unwrap().downcast::<Vec<String>>().unwrap()
    };
    let at_once = refusals(scheduler(1));
    // With step timing on, the built-in handler spawns after the step.
    let by_handler = refusals(
        Scheduler::builder()
            .workers(1)
            .step_timing(true)
            .build()
            .unwrap(),
    );
    assert_eq!(at_once, by_handler);
    assert_eq!(at_once.len(), 2);
    assert!(
        at_once[0].contains("Spawn") && at_once[0].contains("nope"),
        "names the command and the unknown entry: {}",
        at_once[0]
    );
}

#[test]
fn children_spawned_before_the_iterator_panics_run() {
    let s = scheduler(2);
    let ran = Arc::new(AtomicUsize::new(0));
    let pid = s
        .spawn(Batch, "panics_after", (3_u32, ran.clone()))
        .unwrap();
    let failure = s.wait(pid).expect_err("the step panicked").to_string();
    assert!(failure.contains("gives up after 3 spawns"), "{failure}");
    // Once every process has ended, the count is final.
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.metrics().live > 0 {
        assert!(Instant::now() < deadline, "processes still live");
        std::thread::yield_now();
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        3,
        "spawned as yielded, not taken back"
    );
}

#[test]
fn the_test_harness_sees_a_yield_all_of_spawns_as_yields() {
    let t = TestProcess::start(Batch, "spawns", (3_u32,)).unwrap();
    assert_eq!(t.last_yields(), [Tag(1), Tag(2), Tag(3)]);
    assert!(!t.is_done());
}

#[test]
fn completions_of_a_yield_all_arriving_one_by_one_cost_a_step_each_and_keep_order() {
    const N: u32 = 2_000;
    let mut t = TestProcess::start(Batch, "numbered", (N,)).unwrap();
    let tags: Vec<_> = t.last_yields().to_vec();
    assert_eq!(tags.len(), N as usize);
    // In reverse: the oldest arrives last, so every step until then finds the
    // batch incomplete (each of those costs O(1): a cursor over the completions
    // that arrived in order, not a rescan of all n).
    for (i, &tag) in tags.iter().enumerate().rev() {
        assert!(!t.is_done(), "done before completion {i}");
        t.step_with([wsched::testing::completion(tag, i as u32 * 10)]);
    }
    assert_eq!(t.steps(), N as usize + 1);
    assert_eq!(
        t.result::<Vec<u32>>(),
        (0..N).map(|i| i * 10).collect::<Vec<_>>()
    );
}

/// Records what `wsched::this` says while it is dropped.
struct Probe(Arc<Mutex<Vec<String>>>);

impl Drop for Probe {
    fn drop(&mut self) {
        let mut seen = self.0.lock().unwrap();
        seen.push(format!(
            "context: {:?}",
            this::try_context().map(|c| c.pid())
        ));
        seen.push(format!("entry: {:?}", this::entry()));
        let pid = std::panic::catch_unwind(|| this::pid()).unwrap_err();
        seen.push(pid.downcast_ref::<&str>().unwrap().to_string());
    }
}

#[process]
impl Probe {
    #[entry]
    fn run(&mut self) {}
}

#[test]
fn this_refuses_outside_a_step_and_before_init_with_its_messages() {
    let outside = std::panic::catch_unwind(|| this::pid()).unwrap_err();
    assert_eq!(
        outside.downcast_ref::<String>().unwrap(),
        "wsched: wsched::this::pid() can only be used while a `#[process]` process \
         is being stepped (inside an #[entry] or #[suspend] method, or code they call); \
         from a thread, call the `Scheduler`'s or a `Handle`'s method of the same name \
         instead"
    );
    assert!(this::try_context().is_none());
    let send = std::panic::catch_unwind(|| this::send(Pid::from_raw(1), 1_u8)).unwrap_err();
    assert!(send
        .downcast_ref::<String>()
        .unwrap()
        .starts_with("wsched: wsched::this::send() can only be used while"));

    // Closed without init: dropping the struct still sees its (empty) state, but
    // no context.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut machine = Probe(seen.clone()).into_process();
    machine.close();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "context: None",
            "entry: \"\"",
            "wsched: the process was stepped before init"
        ]
    );
}

/// Records, when dropped, which process `wsched::this` reaches.
struct SeesItsProcess(Arc<Mutex<Option<Option<Pid>>>>);

impl Drop for SeesItsProcess {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(this::try_context().map(|c| c.pid()));
    }
}

#[process]
impl SeesItsProcess {
    #[entry]
    fn run(&mut self) -> u32 {
        7
    }
}

/// The struct of an entry that returns is dropped by the step that finishes it,
/// where `wsched::this` still reaches the process (as it is before and after init
/// in the test above): the machine does not drop it again, later, outside the step.
#[test]
fn a_struct_dropped_as_its_entry_returns_still_sees_its_process() {
    for form in ["scheduler", "harness"] {
        let seen = Arc::new(Mutex::new(None));
        let pid = if form == "scheduler" {
            let s = Scheduler::builder().workers(1).build().unwrap();
            let pid = s.spawn(SeesItsProcess(seen.clone()), "run", ()).unwrap();
            assert_eq!(s.wait(pid).unwrap().downcast::<u32>().unwrap(), 7);
            pid
        } else {
            let mut t = TestProcess::start(SeesItsProcess(seen.clone()), "run", ()).unwrap();
            assert_eq!(t.result::<u32>(), 7);
            t.pid()
        };
        assert_eq!(*seen.lock().unwrap(), Some(Some(pid)), "{form}");
    }
}

/// Hands out its own context, so that a test can initialise processes by hand.
struct ContextOut;

#[process]
impl ContextOut {
    #[entry]
    fn run(&mut self) -> wsched::Context {
        this::context()
    }
}

struct Adder;

#[process]
impl Adder {
    #[entry]
    fn add(&mut self, a: u32, b: u32) -> Result<u32, BoxError> {
        Ok(a + b + recv!(u32)?)
    }
}

#[test]
fn a_machine_starts_only_where_its_runner_keeps_it() {
    use wsched::__private::{recv, Machine, Typed};
    use wsched::{
        Event, Events, IntoPayloads, Message, Payload, Payloads, Status, StepError, StepOutput,
    };

    let ctx = TestProcess::start(ContextOut, "run", ())
        .unwrap()
        .result::<wsched::Context>();

    // By value, as `into_process` hands it out, it could be moved once its coroutine
    // has run (which may borrow from itself): it refuses to start.
    let mut loose = Adder.into_process();
    let refused = loose
        .init(ctx.clone(), "add", (1_u32, 2_u32).into_payloads())
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "init failed: a #[process] process is started by the scheduler or \
         wsched::testing, which keep it in place while its entry runs; it cannot be \
         initialised by hand"
    );
    loose.close();

    // In a box, promised to stay there, as the runners do: it runs, and the
    // machine's accessors follow it.
    let mut machine = Box::new(Machine::new(
        Adder,
        &["add"],
        |_: Adder, _: usize, _: Payloads| {
            Ok(async {
                let n = recv::<Typed<u32>>(None).await.map_err(StepError::new)?;
                Ok(Payload::new(n))
            })
        },
    ));
    assert_eq!(machine.entry(), None);
    // SAFETY: the box stays where it is until the end of the test.
    unsafe { machine.__stays_in_place() };
    machine.init(ctx, "add", ().into_payloads()).unwrap();
    assert_eq!(machine.entry(), Some("add"));
    let message = |payload| {
        Event::Message(Message {
            from: None,
            payload,
        })
    };
    let mut out = StepOutput::new();
    let mut events = vec![message(Payload::new("not a u32"))];
    machine.step(Events::new(&mut events), &mut out).unwrap();
    assert!(matches!(out.status(), Some(Status::WaitingForMessage)));
    assert_eq!((machine.mailbox_len(), machine.yields_made()), (1, 0));
    out.clear();
    let mut events = vec![message(Payload::new(7_u32))];
    machine.step(Events::new(&mut events), &mut out).unwrap();
    match out.take_status() {
        Some(Status::Done(result)) => assert_eq!(result.downcast::<u32>().unwrap(), 7),
        other => panic!("not done: {other:?}"),
    }
    assert_eq!(machine.mailbox_len(), 1);
    machine.close();
}

/// A hand-written select over two futures, as a user combinator would be written:
/// polls `$a`, then `$b`, and evaluates to `true` if `$b` finished first. The loser
/// is dropped still pending. Its `.await` is inside a macro of its own, which the
/// `#[process]` attribute does not look into.
macro_rules! second_wins {
    ($a:expr, $b:expr) => {{
        let mut a = std::pin::pin!($a);
        let mut b = std::pin::pin!($b);
        std::future::poll_fn(|cx| {
            use std::future::Future;
            use std::task::Poll;
            if a.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            b.as_mut().poll(cx).map(|_| true)
        })
        .await
    }};
}

/// Races an hour's `Sleep` against a `Nop` completed at once, `rounds` times: the
/// `Sleep` loses every round and is dropped pending.
struct Racer;

#[process]
impl Racer {
    #[suspend]
    fn nap() -> Result<(), YieldError> {
        yield_cmd!(Sleep(Duration::from_secs(3600)))
    }

    #[suspend]
    fn nop() -> Result<(), YieldError> {
        yield_cmd!(Nop)
    }

    /// How many rounds the `Nop` won; first waits for a `u64`, so that the test can
    /// look at the timers while the process is alive.
    #[entry]
    fn race(&mut self, rounds: u32) -> Result<u32, BoxError> {
        let mut won = 0;
        for _ in 0..rounds {
            if second_wins!(Self::nap(), Self::nop()) {
                won += 1;
            }
        }
        recv!(u64)?;
        Ok(won)
    }
}

#[test]
fn a_dropped_yield_is_withdrawn_and_its_timer_cancelled() {
    const ROUNDS: u32 = 500;
    let s = scheduler(1);
    let pid = s.spawn(Racer, "race", (ROUNDS,)).unwrap();
    // Parked in its `recv!`, after every round (the listing's state is published
    // after the step's withdrawals were handled).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = s.processes().into_iter().find(|p| p.pid == pid).unwrap();
        let receiving = matches!(
            info.suspended_at.map(|p| p.kind),
            Some(wsched::SuspendKind::Receive { .. })
        );
        if receiving && info.state == wsched::ProcessState::WaitingForMessage {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never reached its recv!: {info:?}"
        );
        std::thread::yield_now();
    }
    // Each abandoned `Sleep` was withdrawn, which cancelled its timer at once.
    assert_eq!(s.metrics().pending_timers, 0);
    s.send(pid, 1_u64).unwrap();
    assert_eq!(
        s.wait_timeout(pid, Duration::from_secs(20))
            .unwrap()
            .downcast::<u32>()
            .unwrap(),
        ROUNDS
    );
}

#[test]
fn dropping_a_pending_suspension_point_withdraws_it_and_frees_its_tag() {
    use std::future::Future;
    use std::pin::pin;
    use std::task::Poll;
    use wsched::__private::{recv, yield_one, Machine, Typed};
    use wsched::testing::completion;
    use wsched::{Events, IntoPayloads, Payload, Payloads, Status, StepOutput};

    const ROUNDS: u64 = 1_000;
    let ctx = TestProcess::start(ContextOut, "run", ())
        .unwrap()
        .result::<wsched::Context>();
    // Each round: an hour's `Sleep` and a `Nop` raced (the `Nop` wins), then a
    // `recv!` with a timeout raced against another `Nop` (the `Nop` wins, and the
    // receive's timer is dropped running).
    let mut machine = Box::new(Machine::new(
        Racer,
        &["race"],
        |_: Racer, _: usize, _: Payloads| {
            Ok(async {
                for _ in 0..ROUNDS {
                    // Each race in a block of its own: the loser is dropped at its end.
                    {
                        let mut slow = pin!(yield_one(Sleep(Duration::from_secs(3600))));
                        let mut quick = pin!(yield_one(Nop));
                        std::future::poll_fn(|cx| {
                            if slow.as_mut().poll(cx).is_ready() {
                                return Poll::Ready(());
                            }
                            quick.as_mut().poll(cx).map(drop)
                        })
                        .await;
                    }
                    {
                        let mut waiting = pin!(recv::<Typed<u64>>(Some(Duration::from_secs(3600))));
                        let mut quick = pin!(yield_one(Nop));
                        std::future::poll_fn(|cx| {
                            if waiting.as_mut().poll(cx).is_ready() {
                                return Poll::Ready(());
                            }
                            quick.as_mut().poll(cx).map(drop)
                        })
                        .await;
                    }
                }
                Ok(Payload::unit())
            })
        },
    ));
    // SAFETY: the box stays where it is until the end of the test.
    unsafe { machine.__stays_in_place() };
    machine.init(ctx, "race", ().into_payloads()).unwrap();
    let mut out = StepOutput::new();
    let mut events = Vec::new();
    machine.step(Events::new(&mut events), &mut out).unwrap();
    // Tags: the `Sleep` 4k+1, its `Nop` 4k+2, the receive's timer 4k+3, its `Nop`
    // 4k+4.
    assert_eq!(out.yields().len(), 2);
    for round in 0..ROUNDS {
        let base = 4 * round;
        // The first `Nop` wins: the `Sleep` is dropped, and withdrawn.
        out.clear();
        let mut events = vec![completion(Tag(base + 2), ())];
        machine.step(Events::new(&mut events), &mut out).unwrap();
        assert_eq!(out.withdrawn(), [Tag(base + 1)], "round {round}");
        assert_eq!(out.yields().len(), 2, "the timer and the next Nop");
        assert!(matches!(out.status(), Some(Status::WaitingForYields)));
        assert_eq!(machine.outstanding_yields(), 2, "round {round}");
        // The dropped `Sleep` completing after all is ignored.
        out.clear();
        let mut events = vec![completion(Tag(base + 1), ())];
        machine.step(Events::new(&mut events), &mut out).unwrap();
        assert!(out.yields().is_empty() && out.withdrawn().is_empty());
        // The second `Nop` wins: the receive is dropped, and its timer withdrawn.
        out.clear();
        let mut events = vec![completion(Tag(base + 4), ())];
        machine.step(Events::new(&mut events), &mut out).unwrap();
        assert_eq!(out.withdrawn(), [Tag(base + 3)], "round {round}");
        if round + 1 < ROUNDS {
            assert_eq!(out.yields().len(), 2);
            assert_eq!(machine.outstanding_yields(), 2, "round {round}");
        }
        // The tags' slots do not pile up: the window holds the live ones only.
        assert!(machine.tag_slots() <= 2, "{} slots", machine.tag_slots());
    }
    match out.take_status() {
        Some(Status::Done(_)) => {}
        other => panic!("not done: {other:?}"),
    }
    assert_eq!(machine.yields_made(), 4 * ROUNDS);
    assert_eq!(machine.outstanding_yields(), 0);
    machine.close();
}

#[test]
fn dropping_a_pending_yield_all_withdraws_every_yield_still_outstanding() {
    use std::future::Future;
    use std::pin::pin;
    use std::task::Poll;
    use wsched::__private::{yield_all, yield_one, Machine};
    use wsched::testing::completion;
    use wsched::{Events, IntoPayloads, Payload, Payloads, Status, StepOutput};

    let ctx = TestProcess::start(ContextOut, "run", ())
        .unwrap()
        .result::<wsched::Context>();
    // Three `Numbered` (tags 1 to 3) raced against a `Nop` (tag 4): the `Nop` wins
    // after the second `Numbered` completed.
    let mut machine = Box::new(Machine::new(
        Racer,
        &["race"],
        |_: Racer, _: usize, _: Payloads| {
            Ok(async {
                {
                    let mut batch = pin!(yield_all((1..=3).map(Numbered)));
                    let mut quick = pin!(yield_one(Nop));
                    std::future::poll_fn(|cx| {
                        if batch.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(());
                        }
                        quick.as_mut().poll(cx).map(drop)
                    })
                    .await;
                }
                // Parks, so that the test can look at the machine.
                yield_one(Nop).await.map_err(wsched::StepError::new)?;
                Ok(Payload::unit())
            })
        },
    ));
    // SAFETY: the box stays where it is until the end of the test.
    unsafe { machine.__stays_in_place() };
    machine.init(ctx, "race", ().into_payloads()).unwrap();
    let mut out = StepOutput::new();
    machine
        .step(Events::new(&mut Vec::new()), &mut out)
        .unwrap();
    assert_eq!(out.yields().len(), 4);
    out.clear();
    let mut events = vec![completion(Tag(2), 2_u32), completion(Tag(4), ())];
    machine.step(Events::new(&mut events), &mut out).unwrap();
    // Tags 1 and 3 were still outstanding; 2 had arrived (and is dropped).
    assert_eq!(out.withdrawn(), [Tag(1), Tag(3)]);
    assert_eq!(machine.outstanding_yields(), 1, "only the last Nop");
    out.clear();
    let mut events = vec![completion(Tag(5), ())];
    machine.step(Events::new(&mut events), &mut out).unwrap();
    assert!(matches!(out.take_status(), Some(Status::Done(_))));
    assert_eq!(machine.outstanding_yields(), 0);
    machine.close();
}
