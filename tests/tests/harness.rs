//! `#[process]` entries driven step by step with `wsched::testing`: no threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wsched::prelude::*;
use wsched::testing::{self, TestProcess, TestStatus};
use wsched::{
    Context, Event, Events, InitError, Payloads, Process, ProcessError, Status, StepError,
    StepOutput, SuspendKind,
};

// ---------------------------------------------------------------- commands

#[derive(Debug, Clone, PartialEq)]
struct Fetch(String);
impl Command for Fetch {
    type Output = String;
}

#[derive(Debug, Clone, PartialEq)]
struct Add(u32, u32);
impl Command for Add {
    type Output = u32;
}

#[derive(Debug)]
struct Flush(&'static str);
impl Command for Flush {
    type Output = ();
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------- control flow

#[derive(Default)]
struct Crawler {
    pages: Vec<String>,
    errors: u32,
}

#[derive(Debug)]
struct TooManyErrors(u32);
impl std::fmt::Display for TooManyErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} fetches failed", self.0)
    }
}
impl std::error::Error for TooManyErrors {}

#[process]
impl Crawler {
    /// Loops, `match`, `?`, early return, and borrows of `self` and of locals that
    /// live across suspension points.
    #[entry]
    fn crawl(&mut self, urls: Vec<String>, max_errors: u32) -> Result<usize, BoxError> {
        let pages = &mut self.pages; // a borrow of self held across yields
        let mut seen = Vec::new();
        for url in &urls {
            // a borrow of a local held across the yield
            if url.is_empty() {
                continue;
            }
            match yield_cmd!(Fetch(url.clone())) {
                Ok(page) if page == "STOP" => return Ok(pages.len()),
                Ok(page) => {
                    seen.push(url.as_str());
                    pages.push(page);
                }
                Err(YieldError::Cancelled) => break,
                Err(_) => {
                    self.errors += 1;
                    if self.errors > max_errors {
                        return Err(TooManyErrors(self.errors).into());
                    }
                    break;
                }
            }
        }
        let total = yield_cmd!(Add(seen.len() as u32, 100))?;
        Ok(total as usize)
    }
}

fn urls(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn loops_and_borrows_across_yields() {
    let mut t = TestProcess::start(
        Crawler::default(),
        "crawl",
        (urls(&["/a", "", "/b"]), 0_u32),
    )
    .unwrap();
    let (tag, f) = t.expect_yield::<Fetch>();
    assert_eq!((tag, f), (Tag(1), &Fetch("/a".into())));
    t.complete(tag, "A".to_string());
    let (tag, f) = t.expect_yield::<Fetch>();
    assert_eq!((tag, f), (Tag(2), &Fetch("/b".into())));
    t.complete(tag, "B".to_string());
    let (tag, add) = t.expect_yield::<Add>();
    assert_eq!((tag, add), (Tag(3), &Add(2, 100)));
    t.complete(tag, 102_u32);
    assert_eq!(t.result::<usize>(), 102);
}

#[test]
fn early_return_from_a_loop() {
    let mut t =
        TestProcess::start(Crawler::default(), "crawl", (urls(&["/a", "/b"]), 0_u32)).unwrap();
    t.complete(Tag(1), "STOP".to_string());
    assert!(t.is_done());
    assert_eq!(t.result::<usize>(), 0);
}

#[test]
fn a_duplicate_completion_of_a_lone_yield_in_the_same_step_is_ignored() {
    // A yield made when no other is outstanding gets its completion without a slot;
    // the second one, in the same step, must still be seen as a duplicate.
    let mut t =
        TestProcess::start(Crawler::default(), "crawl", (urls(&["/a", "/b"]), 0_u32)).unwrap();
    t.step_with([
        testing::completion(Tag(1), "A".to_string()),
        testing::completion(Tag(1), "again".to_string()),
    ]);
    let (tag, f) = t.expect_yield::<Fetch>();
    assert_eq!((tag, f), (Tag(2), &Fetch("/b".into())));
    // A late one, after the window moved on, too.
    t.step_with([
        testing::completion(Tag(1), "late".to_string()),
        testing::completion(Tag(2), "B".to_string()),
    ]);
    let (tag, add) = t.expect_yield::<Add>();
    assert_eq!((tag, add), (Tag(3), &Add(2, 100)));
    t.complete(tag, 102_u32);
    assert_eq!(t.result::<usize>(), 102);
}

#[test]
fn question_mark_and_err_end_the_process_with_the_error() {
    let mut t = TestProcess::start(Crawler::default(), "crawl", (urls(&["/a"]), 0_u32)).unwrap();
    t.fail(
        Tag(1),
        YieldError::Failed {
            command: "Fetch",
            source: "404".into(),
        },
    );
    assert_eq!(t.status(), TestStatus::Failed);
    let err = t.expect_error();
    assert!(matches!(err, ProcessError::Failed(_)));
    assert_eq!(err.to_string(), "process failed: 1 fetches failed");

    // `?` on a failed yield.
    let mut t = TestProcess::start(Crawler::default(), "crawl", (urls(&[]), 0_u32)).unwrap();
    t.fail(Tag(1), YieldError::NoHandler { command: "Add" });
    assert!(t
        .expect_error()
        .to_string()
        .contains("no handler is registered for command `Add`"));
}

// ---------------------------------------------------------------- several outstanding yields

struct Joiner;

#[process]
impl Joiner {
    #[entry]
    fn pair(&mut self) -> (String, u32) {
        let (page, sum) = yield_cmd!(Fetch("/x".into()), Add(1, 2));
        (page.unwrap(), sum.unwrap())
    }

    #[entry]
    fn all(&mut self, n: u32) -> Vec<u32> {
        let results = yield_all!((0..n).map(|i| Add(i, i)));
        results.into_iter().map(Result::unwrap).collect()
    }

    #[entry]
    fn none(&mut self) -> usize {
        yield_all!(Vec::<Add>::new()).len()
    }
}

#[test]
fn several_outstanding_yields_complete_in_any_order() {
    let mut t = TestProcess::start(Joiner, "pair", ()).unwrap();
    assert_eq!(t.last_yields(), &[Tag(1), Tag(2)]);
    let sp = t.suspend_point().unwrap();
    assert!(
        matches!(sp.kind, SuspendKind::Yield { count: 2, command } if command.ends_with("Fetch")),
        "{sp}"
    );
    t.complete(Tag(2), 3_u32);
    assert_eq!(t.status(), TestStatus::WaitingForYields);
    assert_eq!(t.yields().len(), 1);
    t.complete(Tag(1), "X".to_string());
    assert_eq!(t.result::<(String, u32)>(), ("X".to_string(), 3));
}

#[test]
fn yield_all_dispatches_in_one_step_and_keeps_order() {
    let mut t = TestProcess::start(Joiner, "all", (4_u32,)).unwrap();
    assert_eq!(t.last_yields(), &[Tag(1), Tag(2), Tag(3), Tag(4)]);
    // Complete all in one step, in reverse order.
    t.step_with(
        (1..=4)
            .rev()
            .map(|i| testing::completion(Tag(i), (i as u32 - 1) * 2)),
    );
    assert_eq!(t.result::<Vec<u32>>(), vec![0, 2, 4, 6]);

    let mut t = TestProcess::start(Joiner, "none", ()).unwrap();
    assert_eq!(t.result::<usize>(), 0);
}

#[test]
fn tags_are_deterministic() {
    let run = || {
        let mut t = TestProcess::start(Joiner, "all", (3_u32,)).unwrap();
        let tags: Vec<Tag> = t.yields().iter().map(|y| y.tag()).collect();
        let cmds: Vec<Add> = t
            .yields()
            .iter()
            .map(|y| y.command::<Add>().unwrap().clone())
            .collect();
        t.step_with(tags.iter().map(|t| testing::completion(*t, 0_u32)));
        (tags, cmds, t.result::<Vec<u32>>())
    };
    assert_eq!(run(), run());
}

// ---------------------------------------------------------------- entries by name

struct Multi {
    log: Vec<&'static str>,
}

#[process]
impl Multi {
    #[entry]
    fn first(&mut self) -> &'static str {
        self.log.push("first");
        this::entry()
    }

    #[entry(name = "second")]
    fn the_second_one(&mut self, a: u8, b: String) -> String {
        format!("{} {a} {b}", this::entry())
    }

    #[entry]
    fn third(&mut self, (x, y): (i32, i32)) -> i32 {
        x * y
    }
}

#[test]
fn three_entries_started_by_name() {
    let mut t = TestProcess::start(Multi { log: vec![] }, "first", ()).unwrap();
    assert_eq!(t.entry(), "first");
    assert_eq!(t.result::<&str>(), "first");
    let mut t =
        TestProcess::start(Multi { log: vec![] }, "second", (7_u8, "x".to_string())).unwrap();
    assert_eq!(t.result::<String>(), "second 7 x");
    let mut t = TestProcess::start(Multi { log: vec![] }, "third", ((6, 7),)).unwrap();
    assert_eq!(t.result::<i32>(), 42);
}

#[test]
fn unknown_entry_lists_the_entries() {
    let err = TestProcess::start(Multi { log: vec![] }, "the_second_one", ()).unwrap_err();
    assert!(
        matches!(&err, InitError::UnknownMethod { available, .. } if available == &["first", "second", "third"])
    );
    assert_eq!(
        err.to_string(),
        "no entry named `the_second_one`; available entries: `first`, `second`, `third`"
    );
}

#[test]
fn bad_arguments_name_the_entry_argument_and_types() {
    let err = TestProcess::start(Multi { log: vec![] }, "second", (7_u8,)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "entry `second` takes 2 arguments but was started with 1 input payload"
    );
    let err = TestProcess::start(Multi { log: vec![] }, "second", (7_u8, "x")).unwrap_err();
    match &err {
        InitError::ArgumentType {
            entry,
            argument,
            position,
            expected,
            actual,
        } => {
            assert_eq!(
                (entry.as_str(), argument.as_str(), *position),
                ("second", "b", 1)
            );
            assert_eq!((*expected, *actual), ("alloc::string::String", "&str"));
        }
        other => panic!("{other:?}"),
    }
    let err = TestProcess::start(Multi { log: vec![] }, "third", ((1_u8, 2_u8),)).unwrap_err();
    assert!(
        err.to_string()
            .contains("argument `(x, y)` (position 0) is a `(i32, i32)`"),
        "{err}"
    );
}

// ---------------------------------------------------------------- cancellation

struct Janitor {
    ticks: u32,
}

#[process]
impl Janitor {
    #[entry]
    fn run(&mut self) -> Result<String, BoxError> {
        loop {
            match yield_cmd!(Sleep(ms(100))) {
                Ok(()) => self.ticks += 1,
                Err(YieldError::Cancelled) => break,
                Err(e) => return Err(e.into()),
            }
        }
        assert!(this::is_cancelled());
        // Clean up with more yields, which work normally after the cancel.
        let (a, b) = yield_cmd!(Flush("a"), Flush("b"));
        a?;
        b?;
        yield_cmd!(Flush("last"))?;
        Ok(format!("cleaned up after {} ticks", self.ticks))
    }

    #[entry]
    fn listen(&mut self) -> String {
        match recv!(String) {
            Err(RecvError::Cancelled) => {}
            other => return format!("unexpected {other:?}"),
        }
        // A second receive works normally.
        recv!(String).unwrap_or_default()
    }

    #[entry]
    fn pair(&mut self) -> String {
        let (a, b) = yield_cmd!(Add(1, 1), Add(2, 2));
        format!("{a:?} {}", matches!(b, Err(YieldError::Cancelled)))
    }
}

#[test]
fn cancel_reaches_the_pending_yield_and_cleanup_yields_work() {
    let mut t = TestProcess::start(Janitor { ticks: 0 }, "run", ()).unwrap();
    t.complete(Tag(1), ());
    t.cancel();
    assert_eq!(t.status(), TestStatus::WaitingForYields);
    assert_eq!(t.last_yields(), &[Tag(3), Tag(4)]);
    // The abandoned timer (#2) is withdrawn (the scheduler would cancel it), but
    // stays listed until the test completes it; the process ignores its late
    // completion.
    assert_eq!(t.withdrawn(), &[Tag(2)]);
    t.complete(Tag(2), ());
    assert_eq!(t.status(), TestStatus::WaitingForYields);
    t.complete(Tag(4), ()).complete(Tag(3), ());
    let (tag, flush) = t.expect_yield::<Flush>();
    assert_eq!((tag, flush.0), (Tag(5), "last"));
    t.complete(tag, ());
    assert_eq!(t.result::<String>(), "cleaned up after 1 ticks");
}

#[test]
fn a_result_already_there_wins_over_a_cancel_in_the_same_step() {
    let mut t = TestProcess::start(Janitor { ticks: 0 }, "run", ()).unwrap();
    t.step_with([testing::completion(Tag(1), ()), Event::Cancel]);
    // The tick was counted; the cancel hit the next sleep, then cleanup began.
    assert_eq!(t.last_yields(), &[Tag(2), Tag(3), Tag(4)]);
    t.complete(Tag(3), ())
        .complete(Tag(4), ())
        .complete(Tag(5), ());
    assert_eq!(t.result::<String>(), "cleaned up after 1 ticks");
}

#[test]
fn cancel_before_the_first_step() {
    let mut t = TestProcess::init(Janitor { ticks: 0 }, "run", ()).unwrap();
    assert_eq!(t.status(), TestStatus::NotStepped);
    t.step_with([Event::Cancel]);
    // The first sleep was yielded and reported the cancel in the same step, which
    // withdrew it too.
    assert_eq!(t.last_yields(), &[Tag(1), Tag(2), Tag(3)]);
    assert_eq!(t.withdrawn(), &[Tag(1)]);
}

#[test]
fn cancel_reaches_a_pending_receive() {
    let mut t = TestProcess::start(Janitor { ticks: 0 }, "listen", ()).unwrap();
    assert_eq!(t.status(), TestStatus::WaitingForMessage);
    t.cancel();
    assert_eq!(t.status(), TestStatus::WaitingForMessage);
    t.send("bye".to_string());
    assert_eq!(t.result::<String>(), "bye");
}

#[test]
fn cancel_keeps_the_results_that_arrived() {
    let mut t = TestProcess::start(Janitor { ticks: 0 }, "pair", ()).unwrap();
    t.complete(Tag(1), 2_u32);
    t.cancel();
    // Only the yield still waiting is withdrawn.
    assert_eq!(t.withdrawn(), &[Tag(2)]);
    assert_eq!(t.result::<String>(), "Ok(2) true");
}

// ---------------------------------------------------------------- receiving

struct Inbox;

#[process]
impl Inbox {
    #[entry]
    fn any(&mut self) -> (Option<Pid>, String) {
        let m = recv!().unwrap();
        (m.from, m.payload.downcast::<String>().unwrap())
    }

    /// Selective receive: other types stay queued, in order.
    #[entry]
    fn selective(&mut self) -> Vec<String> {
        let n = recv!(u32).unwrap();
        let mut out = vec![
            format!("u32 {n}"),
            format!("queued {}", this::mailbox_len()),
        ];
        while let Ok(m) = recv!(timeout = Duration::ZERO) {
            out.push(format!("{:?}", m.payload));
            if let Some(s) = m.payload.downcast_ref::<String>() {
                out.push(s.clone());
            }
        }
        out
    }

    #[entry]
    fn with_timeout(&mut self, wait: Duration) -> String {
        match recv!(String, timeout = wait) {
            Ok(s) => format!("got {s}"),
            Err(e) => e.to_string(),
        }
    }

    #[entry]
    fn timeout_then_more(&mut self) -> String {
        let first = recv!(u8, timeout = ms(5));
        let next = yield_cmd!(Add(1, 1));
        format!("{first:?} {next:?}")
    }
}

#[test]
fn untyped_receive_gives_the_sender() {
    let mut t = TestProcess::start(Inbox, "any", ()).unwrap();
    let sp = t.suspend_point().unwrap();
    assert_eq!(sp.kind, SuspendKind::Receive { message_type: None });
    assert!(
        sp.to_string()
            .starts_with("receive at tests/tests/harness.rs:"),
        "{sp}"
    );
    t.send_from(Some(Pid::from_raw(9)), "hi".to_string());
    assert_eq!(
        t.result::<(Option<Pid>, String)>(),
        (Some(Pid::from_raw(9)), "hi".into())
    );
}

#[test]
fn typed_receive_leaves_other_messages_queued_in_order() {
    let mut t = TestProcess::start(Inbox, "selective", ()).unwrap();
    assert_eq!(
        t.suspend_point().unwrap().kind,
        SuspendKind::Receive {
            message_type: Some("u32")
        }
    );
    t.send("one".to_string());
    assert_eq!(t.status(), TestStatus::WaitingForMessage);
    t.send(2.5_f64);
    t.step_with([
        testing::message(None, "three".to_string()),
        testing::message(None, 4_u32),
        testing::message(None, 5_u32),
    ]);
    assert_eq!(
        t.result::<Vec<String>>(),
        vec![
            "u32 4",
            "queued 4",
            "Payload<alloc::string::String>",
            "one",
            "Payload<f64>",
            "Payload<alloc::string::String>",
            "three",
            "Payload<u32>",
        ]
    );
}

/// How many times `Sifter`'s guard looked at a message.
static SIFTER_LOOKS: AtomicUsize = AtomicUsize::new(0);

fn looked_at() -> bool {
    SIFTER_LOOKS.fetch_add(1, Ordering::Relaxed);
    true
}

/// Receives even numbers twice, by an arm whose guard counts its looks, then the
/// rest in order.
struct Sifter;

#[process]
impl Sifter {
    #[entry]
    fn run(&mut self) -> Vec<u32> {
        let mut got = Vec::new();
        for _ in 0..2 {
            got.push(recv! { n: u32 if looked_at() && n % 2 == 0 => n }.unwrap());
        }
        while let Ok(n) = recv!(u32, timeout = Duration::ZERO) {
            got.push(n);
        }
        got
    }
}

#[test]
fn a_step_s_first_message_refused_stays_oldest_and_each_message_is_looked_at_once() {
    // The step's first message reaches the waiting receive straight from the
    // step's events when nothing is held; refused, it must still come before the
    // messages of the same step, and be offered to the receive only once.
    let mut t = TestProcess::start(Sifter, "run", ()).unwrap();
    t.step_with([
        testing::message(None, 1_u32),
        testing::message(None, 3_u32),
        testing::message(None, 4_u32),
    ]);
    // 1, 3 and 4 looked at once each for the first receive (4 taken), 1 and 3
    // again for the second, which waits.
    assert_eq!(SIFTER_LOOKS.load(Ordering::Relaxed), 5);
    assert_eq!(t.status(), TestStatus::WaitingForMessage);
    t.send(6_u32);
    assert_eq!(SIFTER_LOOKS.load(Ordering::Relaxed), 8);
    assert_eq!(t.result::<Vec<u32>>(), [4, 6, 1, 3]);
}

#[test]
fn receive_times_out_with_a_sleep_yield() {
    let mut t = TestProcess::start(Inbox, "with_timeout", (ms(50),)).unwrap();
    let (tag, sleep) = t.expect_yield::<Sleep>();
    assert_eq!((tag, *sleep), (Tag(1), Sleep(ms(50))));
    t.send(1_u8); // another type: stays queued, the receive goes on waiting
    assert_eq!(t.status(), TestStatus::WaitingForMessage);
    t.complete(tag, ());
    assert!(
        t.withdrawn().is_empty(),
        "a timer that fired is not withdrawn"
    );
    assert_eq!(t.result::<String>(), "timed out waiting for a message");
}

#[test]
fn a_message_and_the_timer_in_the_same_step_the_message_wins() {
    let mut t = TestProcess::start(Inbox, "with_timeout", (ms(50),)).unwrap();
    let (tag, _) = t.expect_yield::<Sleep>();
    // The timer's completion comes first, the message after it: the receive looks
    // at the mailbox first, and gives up on the timer whose completion is there
    // (so it is not withdrawn).
    t.step_with([
        testing::completion(tag, ()),
        testing::message(None, "hi".to_string()),
    ]);
    assert!(t.withdrawn().is_empty(), "{:?}", t.withdrawn());
    assert_eq!(t.result::<String>(), "got hi");
    // The other way round.
    let mut t = TestProcess::start(Inbox, "with_timeout", (ms(50),)).unwrap();
    t.step_with([
        testing::message(None, "hi".to_string()),
        testing::completion(tag, ()),
    ]);
    assert!(t.withdrawn().is_empty(), "{:?}", t.withdrawn());
    assert_eq!(t.result::<String>(), "got hi");
}

#[test]
fn a_message_before_the_timer_wins_and_the_late_timer_is_ignored() {
    let mut t = TestProcess::start(Inbox, "timeout_then_more", ()).unwrap();
    t.send(7_u8);
    // The message won: the timer is withdrawn, so the scheduler cancels it.
    assert_eq!(t.withdrawn(), &[Tag(1)]);
    let (tag, add) = t.expect_yield::<Add>();
    assert_eq!((tag, add), (Tag(2), &Add(1, 1)));
    // The timer's late completion (#1) is ignored: the process still waits for #2.
    t.complete(Tag(1), ());
    assert_eq!(t.status(), TestStatus::WaitingForYields);
    t.complete(Tag(2), 2_u32);
    assert_eq!(t.result::<String>(), "Ok(7) Ok(2)");
}

#[test]
fn a_zero_timeout_never_suspends_and_a_failed_timer_is_reported() {
    let mut t = TestProcess::start(Inbox, "with_timeout", (Duration::ZERO,)).unwrap();
    assert_eq!(t.steps(), 1);
    assert!(t.yields().is_empty());
    assert_eq!(t.result::<String>(), "timed out waiting for a message");

    let mut t = TestProcess::start(Inbox, "with_timeout", (ms(1),)).unwrap();
    t.fail(Tag(1), YieldError::NoHandler { command: "Sleep" });
    assert!(t
        .result::<String>()
        .starts_with("the receive timeout's timer failed"));
}

// ---------------------------------------------------------------- the running process

struct Ping;
struct Pong;

#[process]
impl Ping {
    #[entry]
    fn run(&mut self, rounds: u32) -> Result<u32, BoxError> {
        let pong = this::spawn(Pong, "run", (this::pid(),))?;
        let mut total = 0;
        for i in 0..rounds {
            this::send(pong, i)?;
            total += recv!(u32)?;
        }
        this::send(pong, "stop")?;
        Ok(total)
    }
}

#[process]
impl Pong {
    #[entry]
    fn run(&mut self, ping: Pid) -> Result<(), BoxError> {
        loop {
            let m = recv!()?;
            match m.payload.downcast::<u32>() {
                Ok(n) => this::send(ping, n * 10)?,
                Err(_) => return Ok(()),
            }
        }
    }
}

#[test]
fn ping_pong_between_two_test_processes() {
    let mut ping = TestProcess::start(Ping, "run", (3_u32,)).unwrap();
    let child = ping.take_spawned().pop().unwrap();
    assert_eq!(
        (child.pid, child.parent, child.method.as_str()),
        (Pid::from_raw(2), Some(Pid::from_raw(1)), "run")
    );
    let mut pong = TestProcess::from_spawned(child);
    loop {
        for m in ping.take_sent() {
            assert_eq!(m.to, pong.pid());
            pong.send_from(m.from, m.payload);
        }
        if pong.is_done() {
            break;
        }
        for m in pong.take_sent() {
            ping.send_from(m.from, m.payload);
        }
    }
    assert_eq!(ping.result::<u32>(), 30);
    pong.result::<()>();
}

struct Spawner;

#[process]
impl Spawner {
    #[entry]
    fn run(&mut self) -> Result<String, BoxError> {
        let child = yield_cmd!(Spawn::new(
            Multi { log: vec![] },
            "second",
            (1_u8, "c".to_string())
        ))?;
        let result = yield_cmd!(Join(child))??;
        Ok(result.downcast::<String>()?)
    }
}

#[test]
fn spawn_and_join_commands() {
    let mut t = TestProcess::start(Spawner, "run", ()).unwrap();
    let (tag, spawn) = t.take_yield::<Spawn>();
    assert_eq!(spawn.method(), "second");
    let mut child = t.from_spawn_command(spawn);
    t.complete(tag, child.pid());
    let (tag, join) = t.expect_yield::<Join>();
    assert_eq!(join.0, child.pid());
    let result: Result<Payload, wsched::JoinError> = Ok(child.result_payload());
    t.complete(tag, result);
    assert_eq!(t.result::<String>(), "second 1 c");
}

#[test]
fn spawning_with_a_bad_entry_fails_like_on_the_scheduler() {
    struct BadSpawner;
    #[process]
    impl BadSpawner {
        #[entry]
        fn run(&mut self) -> String {
            match this::spawn(Multi { log: vec![] }, "nope", ()) {
                Err(e) => e.to_string(),
                Ok(pid) => pid.to_string(),
            }
        }
    }
    let mut t = TestProcess::start(BadSpawner, "run", ()).unwrap();
    assert_eq!(
        t.result::<String>(),
        "cannot spawn: no entry named `nope`; available entries: `first`, `second`, `third`"
    );
}

// ---------------------------------------------------------------- failures

struct Faulty;

macro_rules! await_it {
    ($e:expr) => {
        $e.await
    };
}

#[process]
impl Faulty {
    #[entry]
    fn panics(&mut self, when: u32) -> u32 {
        if when == 0 {
            panic!("boom at start");
        }
        yield_cmd!(Add(1, 2)).unwrap()
    }

    #[entry]
    fn awaits_a_foreign_future(&mut self) {
        // Hidden from the macro inside another macro: caught at run time.
        await_it!(std::future::pending::<()>());
    }

    #[entry]
    fn wrong_type(&mut self) -> String {
        match yield_cmd!(Add(1, 1)) {
            Err(e) => e.to_string(),
            Ok(n) => n.to_string(),
        }
    }
}

#[test]
fn a_panicking_entry_is_caught_and_reported() {
    let t = TestProcess::start(Faulty, "panics", (0_u32,)).unwrap();
    assert_eq!(t.status(), TestStatus::Failed);
    assert_eq!(t.expect_error().panic_message(), Some("boom at start"));

    let mut t = TestProcess::start(Faulty, "panics", (1_u32,)).unwrap();
    // `complete` would refuse the wrong type: a hand-made event gets through.
    t.step_with([testing::completion(Tag(1), "not a u32".to_string())]);
    assert!(t.expect_error().to_string().starts_with(
        "process panicked in step: called `Result::unwrap()` on an `Err` value: WrongOutputType"
    ));
}

#[test]
fn awaiting_a_foreign_future_fails_the_step_instead_of_hanging() {
    let t = TestProcess::start(Faulty, "awaits_a_foreign_future", ()).unwrap();
    let err = t.expect_error().to_string();
    assert!(
        err.contains("entry `awaits_a_foreign_future` awaited a future that is not a wsched suspension point"),
        "{err}"
    );
}

#[test]
fn a_completion_of_the_wrong_type_is_an_error_at_the_yield() {
    let mut t = TestProcess::start(Faulty, "wrong_type", ()).unwrap();
    t.step_with([testing::completion(Tag(1), 1_i64)]);
    assert_eq!(
        t.result::<String>(),
        "completion holds an `i64`, not the command's output type `u32`"
    );
}

#[test]
#[should_panic(
    expected = "expected an outstanding yield of `Fetch`, but the process is process <1> (entry `pair`) waiting for yields, suspended at the yield of 2 commands (first `Add`) at tests/tests/harness.rs:"
)]
fn harness_failures_say_where_the_process_waits() {
    let t = TestProcess::start(Janitor { ticks: 0 }, "pair", ()).unwrap();
    t.expect_yield::<Fetch>();
}

#[test]
#[should_panic(expected = "cannot complete #1 with an `i32`: its command `Add` outputs a `u32`")]
fn completing_with_another_type_than_the_output_panics_at_complete() {
    let mut t = TestProcess::start(Faulty, "wrong_type", ()).unwrap();
    t.complete(Tag(1), 25);
}

#[test]
#[should_panic(
    expected = "cannot complete #1 with a `Vec<String>`: its command `Fetch` outputs a `String`"
)]
fn completing_a_taken_yield_checks_the_type_too() {
    let mut t = TestProcess::start(Joiner, "pair", ()).unwrap();
    let (tag, _) = t.take_yield::<Fetch>();
    t.complete(tag, vec![String::from("page")]);
}

#[test]
fn a_ready_made_payload_of_the_output_type_completes() {
    let mut t = TestProcess::start(Faulty, "wrong_type", ()).unwrap();
    t.complete(Tag(1), wsched::Payload::new(7_u32));
    assert_eq!(t.result::<String>(), "7");
}

#[test]
#[should_panic(expected = "cannot complete #7: no outstanding yield has that tag")]
fn completing_an_unknown_tag_is_a_test_error() {
    let mut t = TestProcess::start(Janitor { ticks: 0 }, "pair", ()).unwrap();
    t.complete(Tag(7), ());
}

#[test]
fn a_step_without_events_is_harmless() {
    let mut t = TestProcess::start(Janitor { ticks: 0 }, "pair", ()).unwrap();
    let before = t.suspend_point();
    t.step().step();
    assert_eq!(t.suspend_point(), before);
    assert_eq!(t.yields().len(), 2);
    assert!(t.last_yields().is_empty());
}

// ---------------------------------------------------------------- helpers

struct Helpers {
    calls: u32,
}

#[process]
impl Helpers {
    #[suspend]
    fn add(&mut self, a: u32, b: u32) -> Result<u32, YieldError> {
        self.calls += 1;
        yield_cmd!(Add(a, b))
    }

    #[suspend]
    fn sum<I: IntoIterator<Item = u32> + Send>(&mut self, items: I) -> Result<u32, YieldError> {
        let mut total = 0;
        for i in items {
            total = self.add(total, i).await?;
        }
        Ok(total)
    }

    #[entry]
    fn run(&mut self) -> Result<(u32, u32), BoxError> {
        let total = self.sum(vec![1, 2, 3]).await?;
        Ok((total, self.calls))
    }
}

#[test]
fn suspend_helpers_can_be_awaited_and_nested() {
    let mut t = TestProcess::start(Helpers { calls: 0 }, "run", ()).unwrap();
    for (tag, sum) in [(1, 1_u32), (2, 3), (3, 6)] {
        let (got, add) = t.expect_yield::<Add>();
        assert_eq!(got, Tag(tag));
        assert_eq!(add.0 + add.1, sum);
        t.complete(got, sum);
    }
    assert_eq!(t.result::<(u32, u32)>(), (6, 3));
}

// ---------------------------------------------------------------- hand-written processes

struct Manual {
    closes: Arc<AtomicUsize>,
    ctx: Option<Context>,
}

impl Process for Manual {
    fn init(&mut self, ctx: Context, method: &str, input: Payloads) -> Result<(), InitError> {
        if method != "go" {
            return Err(InitError::unknown_method(method, &["go"]));
        }
        assert!(input.is_empty());
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let mut got = None;
        for e in events {
            if let Event::Completion(c) = e {
                got = Some(c.result.map_err(StepError::new)?);
            }
        }
        match got {
            None => {
                out.yield_command(Tag(10), Add(2, 2));
                out.set_status(Status::WaitingForYields);
            }
            Some(p) => out.set_status(Status::Done(p)),
        }
        Ok(())
    }

    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn hand_written_processes_work_too_and_close_once() {
    let closes = Arc::new(AtomicUsize::new(0));
    let mut t = TestProcess::start(
        Manual {
            closes: closes.clone(),
            ctx: None,
        },
        "go",
        (),
    )
    .unwrap();
    assert_eq!(t.expect_yield::<Add>(), (Tag(10), &Add(2, 2)));
    assert!(t.suspend_point().is_none());
    t.complete(Tag(10), 4_u32);
    assert_eq!(t.result::<u32>(), 4);
    drop(t);
    assert_eq!(closes.load(Ordering::SeqCst), 1);

    // Dropping an unfinished process closes it too.
    let t = TestProcess::start(
        Manual {
            closes: closes.clone(),
            ctx: None,
        },
        "go",
        (),
    )
    .unwrap();
    drop(t);
    assert_eq!(closes.load(Ordering::SeqCst), 2);
}

struct DropCounter(Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Owner {
    guard: DropCounter,
}

#[process]
impl Owner {
    #[entry]
    fn run(&mut self) -> usize {
        let _ = recv!();
        self.guard.0.load(Ordering::SeqCst)
    }
}

#[test]
fn the_struct_is_dropped_when_the_process_ends_or_is_closed() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut t = TestProcess::start(
        Owner {
            guard: DropCounter(drops.clone()),
        },
        "run",
        (),
    )
    .unwrap();
    t.send(());
    assert_eq!(t.result::<usize>(), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    let t = TestProcess::start(
        Owner {
            guard: DropCounter(drops.clone()),
        },
        "run",
        (),
    )
    .unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(t);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

struct Stopper;

#[process]
impl Stopper {
    #[entry]
    fn stop(&mut self, targets: Vec<Pid>) -> Result<usize, BoxError> {
        for &target in &targets {
            this::cancel(target)?;
        }
        Ok(targets.len())
    }
}

#[test]
fn cancel_requests_made_through_the_context_are_recorded() {
    let targets = vec![Pid::from_raw(7), Pid::from_raw(9)];
    let mut t = TestProcess::start(Stopper, "stop", (targets.clone(),)).unwrap();
    assert_eq!(t.result::<usize>(), 2);
    assert_eq!(t.take_cancel_requests(), targets);
    assert!(t.take_cancel_requests().is_empty(), "taken once");
}
