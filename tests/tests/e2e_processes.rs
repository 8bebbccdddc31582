//! `#[process]` processes on the real scheduler: worker threads, handlers completing
//! from other threads, timers, spawn/join, shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::testing::TestProcess;
use wsched::{InitError, JoinError, ProcessError, Scheduler, SpawnError, SuspendKind};

const WAIT: Duration = Duration::from_secs(20);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------- commands and handlers

struct Fetch(String);
impl Command for Fetch {
    type Output = String;
}

/// Completed from another thread after `.0` milliseconds, with `.1`.
struct Delayed(u64, u32);
impl Command for Delayed {
    type Output = u32;
}

struct Flush(&'static str);
impl Command for Flush {
    type Output = ();
}

struct Gate;
impl Command for Gate {
    type Output = ();
}

fn scheduler(workers: usize, flushed: Arc<Mutex<Vec<&'static str>>>) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .handler(|cmd: Fetch, done: Completer<Fetch>| done.complete(format!("page of {}", cmd.0)))
        .handler(|cmd: Delayed, done: Completer<Delayed>| {
            thread::spawn(move || {
                thread::sleep(ms(cmd.0));
                done.complete(cmd.1);
            });
        })
        .handler(move |cmd: Flush, done: Completer<Flush>| {
            flushed.lock().unwrap().push(cmd.0);
            done.complete(());
        })
        .build()
        .expect("scheduler starts")
}

fn plain_scheduler() -> Scheduler {
    scheduler(2, Arc::default())
}

// ---------------------------------------------------------------- loops, match, ?, borrows

#[derive(Default)]
struct Crawler {
    pages: Vec<String>,
}

#[process]
impl Crawler {
    #[entry]
    fn crawl(&mut self, urls: Vec<String>) -> Result<String, BoxError> {
        let pages = &mut self.pages;
        for (i, url) in urls.iter().enumerate() {
            if url.is_empty() {
                continue;
            }
            let page = match yield_cmd!(Fetch(url.clone())) {
                Ok(p) if p.ends_with("/stop") => return Ok(format!("stopped after {i}")),
                Ok(p) => p,
                Err(e) => return Err(e.into()),
            };
            yield_cmd!(Sleep(ms(1)))?;
            pages.push(page);
        }
        Ok(self.pages.join(", "))
    }
}

fn urls(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn loops_with_real_handlers_and_timers() {
    let sched = plain_scheduler();
    let pid = sched
        .spawn(Crawler::default(), "crawl", (urls(&["/a", "", "/b"]),))
        .unwrap();
    let stop = sched
        .spawn(Crawler::default(), "crawl", (urls(&["/a", "/stop", "/c"]),))
        .unwrap();
    let result = sched.wait_timeout(pid, WAIT).unwrap();
    assert_eq!(
        result.downcast::<String>().unwrap(),
        "page of /a, page of /b"
    );
    let result = sched.wait_timeout(stop, WAIT).unwrap();
    assert_eq!(result.downcast::<String>().unwrap(), "stopped after 1");
    sched.shutdown(WAIT);
}

#[test]
fn the_same_process_step_by_step_gives_the_same_result() {
    let mut t = TestProcess::start(Crawler::default(), "crawl", (urls(&["/a"]),)).unwrap();
    let (tag, _) = t.expect_yield::<Fetch>();
    t.complete(tag, "page of /a".to_string());
    let (tag, _) = t.expect_yield::<Sleep>();
    t.complete(tag, ());
    let by_hand = t.result::<String>();

    let sched = plain_scheduler();
    let pid = sched
        .spawn(Crawler::default(), "crawl", (urls(&["/a"]),))
        .unwrap();
    let on_scheduler = sched
        .wait_timeout(pid, WAIT)
        .unwrap()
        .downcast::<String>()
        .unwrap();
    assert_eq!(by_hand, on_scheduler);
    sched.shutdown(WAIT);
}

// ---------------------------------------------------------------- out-of-order completions

struct Gatherer;

#[process]
impl Gatherer {
    #[entry]
    fn gather(&mut self, n: u32) -> Result<Vec<u32>, BoxError> {
        // Later commands complete first: delays decrease.
        let results = yield_all!((0..n).map(|i| Delayed(u64::from(n - i) * 3, i)));
        let (a, b) = yield_cmd!(Delayed(20, 100), Delayed(1, 200));
        let mut out = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        out.push(a?);
        out.push(b?);
        Ok(out)
    }
}

#[test]
fn several_outstanding_yields_completed_out_of_order_from_other_threads() {
    let sched = scheduler(3, Arc::default());
    let pids: Vec<Pid> = (0..20)
        .map(|_| sched.spawn(Gatherer, "gather", (8_u32,)).unwrap())
        .collect();
    for pid in pids {
        let got = sched
            .wait_timeout(pid, WAIT)
            .unwrap()
            .downcast::<Vec<u32>>()
            .unwrap();
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 6, 7, 100, 200]);
    }
    sched.shutdown(WAIT);
}

// ---------------------------------------------------------------- ping-pong

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
        let pong_result = yield_cmd!(Join(pong))??;
        Ok(total + pong_result.downcast::<u32>()?)
    }
}

#[process]
impl Pong {
    #[entry]
    fn run(&mut self, ping: Pid) -> Result<u32, BoxError> {
        let mut served = 0;
        loop {
            let m = recv!()?;
            assert_eq!(m.from, Some(ping));
            match m.payload.downcast::<u32>() {
                Ok(n) => {
                    served += 1;
                    this::send(ping, n * 10)?;
                }
                Err(_) => return Ok(served),
            }
        }
    }
}

#[test]
fn ping_pong_between_processes() {
    let sched = plain_scheduler();
    let pids: Vec<Pid> = (0..10)
        .map(|_| sched.spawn(Ping, "run", (50_u32,)).unwrap())
        .collect();
    for pid in pids {
        let total = sched
            .wait_timeout(pid, WAIT)
            .unwrap()
            .downcast::<u32>()
            .unwrap();
        assert_eq!(total, (0..50).map(|i| i * 10).sum::<u32>() + 50);
    }
    sched.shutdown(WAIT);
}

// ---------------------------------------------------------------- entries by name

struct Multi;

#[process]
impl Multi {
    #[entry]
    fn hello(&mut self) -> String {
        format!("hello from {}", this::entry())
    }

    #[entry(name = "add")]
    fn add_numbers(&mut self, a: u32, b: u32) -> u32 {
        a + b
    }

    #[entry]
    fn fetch(&mut self, url: String) -> Result<String, BoxError> {
        Ok(yield_cmd!(Fetch(url))?)
    }
}

#[test]
fn three_entries_started_by_name_and_init_errors() {
    let sched = plain_scheduler();
    let a = sched.spawn(Multi, "hello", ()).unwrap();
    let b = sched.spawn(Multi, "add", (2_u32, 3_u32)).unwrap();
    let c = sched.spawn(Multi, "fetch", ("/x".to_string(),)).unwrap();
    assert_eq!(
        sched
            .wait_timeout(a, WAIT)
            .unwrap()
            .downcast::<String>()
            .unwrap(),
        "hello from hello"
    );
    assert_eq!(
        sched
            .wait_timeout(b, WAIT)
            .unwrap()
            .downcast::<u32>()
            .unwrap(),
        5
    );
    assert_eq!(
        sched
            .wait_timeout(c, WAIT)
            .unwrap()
            .downcast::<String>()
            .unwrap(),
        "page of /x"
    );

    match sched.spawn(Multi, "add_numbers", ()) {
        Err(SpawnError::Init(InitError::UnknownMethod { available, .. })) => {
            assert_eq!(available, ["hello", "add", "fetch"]);
        }
        other => panic!("{other:?}"),
    }
    match sched.spawn(Multi, "add", (2_u32, "3")) {
        Err(SpawnError::Init(e @ InitError::ArgumentType { .. })) => assert_eq!(
            e.to_string(),
            "entry `add`: argument `b` (position 1) is a `u32`, but its input payload holds a `&str`"
        ),
        other => panic!("{other:?}"),
    }
    sched.shutdown(WAIT);
}

// ---------------------------------------------------------------- cancellation on shutdown

struct Janitor;

#[process]
impl Janitor {
    #[entry]
    fn run(&mut self, name: &'static str) -> Result<String, BoxError> {
        let mut ticks = 0;
        loop {
            match yield_cmd!(Sleep(ms(2))) {
                Ok(()) => ticks += 1,
                Err(YieldError::Cancelled) => break,
                Err(e) => return Err(e.into()),
            }
        }
        // Clean up, yielding more commands, after the cancel.
        let (a, b) = yield_cmd!(Flush(name), Delayed(5, 1));
        a?;
        b?;
        yield_cmd!(Sleep(ms(1)))?;
        // How many ticks passed depends on timing; the cleanup does not.
        assert!(ticks < 1_000_000);
        Ok(format!("{name} cleaned up"))
    }

    #[entry]
    fn listen(&mut self, name: &'static str) -> Result<&'static str, BoxError> {
        match recv!() {
            Err(RecvError::Cancelled) => {}
            other => panic!("unexpected {other:?}"),
        }
        yield_cmd!(Flush(name))?;
        Ok(name)
    }
}

#[test]
fn shutdown_cancels_and_lets_processes_clean_up_with_yields() {
    let flushed = Arc::new(Mutex::new(Vec::new()));
    let sched = scheduler(2, flushed.clone());
    let a = sched.spawn(Janitor, "run", ("a",)).unwrap();
    let b = sched.spawn(Janitor, "listen", ("b",)).unwrap();
    // Let both reach a suspension point, so that the cancel interrupts a wait.
    while sched.processes().iter().filter(|p| p.steps > 0).count() < 2 {
        thread::yield_now();
    }
    let report = sched.shutdown(WAIT);
    assert!(report.stopped.is_empty(), "{report:?}");
    let mut flushed = flushed.lock().unwrap().clone();
    flushed.sort();
    assert_eq!(flushed, ["a", "b"]);
    assert_eq!(
        sched.wait(a).unwrap().downcast::<String>().unwrap(),
        "a cleaned up"
    );
    assert_eq!(sched.wait(b).unwrap().downcast::<&str>().unwrap(), "b");
}

/// Cancels another process from inside an entry.
struct Canceller;

#[process]
impl Canceller {
    #[entry]
    fn run(&mut self, target: Pid) -> Result<(), BoxError> {
        this::cancel(target)?;
        Ok(())
    }
}

#[test]
fn a_cancel_request_reaches_the_entry_which_cleans_up() {
    let flushed = Arc::new(Mutex::new(Vec::new()));
    let sched = scheduler(2, flushed.clone());
    let from_outside = sched.spawn(Janitor, "run", ("outside",)).unwrap();
    let from_process = sched.spawn(Janitor, "listen", ("process",)).unwrap();
    sched.cancel(from_outside).unwrap();
    let canceller = sched.spawn(Canceller, "run", (from_process,)).unwrap();
    sched.wait_timeout(canceller, WAIT).unwrap();
    assert_eq!(
        sched
            .wait_timeout(from_outside, WAIT)
            .unwrap()
            .downcast::<String>()
            .unwrap(),
        "outside cleaned up"
    );
    assert_eq!(
        sched
            .wait_timeout(from_process, WAIT)
            .unwrap()
            .downcast::<&str>()
            .unwrap(),
        "process"
    );
    let mut flushed = flushed.lock().unwrap().clone();
    flushed.sort();
    assert_eq!(flushed, ["outside", "process"]);
    // Cancelling a finished process is an error that says so.
    let err = sched.cancel(from_outside).unwrap_err();
    assert_eq!(err.kind(), wsched::SendErrorKind::Finished);
}

// ---------------------------------------------------------------- panics

struct Faulty;

#[process]
impl Faulty {
    #[entry]
    fn explode(&mut self, after: u32) -> u32 {
        for _ in 0..after {
            yield_cmd!(Sleep(ms(1))).unwrap();
        }
        panic!("exploded after {after} sleeps");
    }
}

#[test]
fn a_panicking_entry_fails_alone() {
    let sched = plain_scheduler();
    let bad: Vec<Pid> = (0..3)
        .map(|i| sched.spawn(Faulty, "explode", (i as u32,)).unwrap())
        .collect();
    let good: Vec<Pid> = (0..10)
        .map(|_| sched.spawn(Gatherer, "gather", (3_u32,)).unwrap())
        .collect();
    for (i, pid) in bad.into_iter().enumerate() {
        match sched.wait_timeout(pid, WAIT) {
            Err(JoinError::Failed {
                error: ProcessError::Panicked { message, .. },
                ..
            }) => assert_eq!(message, format!("exploded after {i} sleeps")),
            other => panic!("{other:?}"),
        }
    }
    for pid in good {
        assert!(sched.wait_timeout(pid, WAIT).is_ok());
    }
    sched.shutdown(WAIT);
}

// ---------------------------------------------------------------- inspection and receive timeouts

struct Waiter;

#[process]
impl Waiter {
    #[entry]
    fn gate(&mut self) -> Result<(), BoxError> {
        yield_cmd!(Gate)?;
        Ok(())
    }

    #[entry]
    fn wait_for_text(&mut self, wait_ms: u64) -> String {
        match recv!(String, timeout = ms(wait_ms)) {
            Ok(s) => s,
            Err(e) => e.to_string(),
        }
    }
}

#[test]
fn the_process_listing_shows_the_entry_and_where_it_waits() {
    let gates: Arc<Mutex<Vec<Completer<Gate>>>> = Arc::default();
    let held = gates.clone();
    let sched = Scheduler::builder()
        .workers(1)
        .handler(move |_: Gate, done: Completer<Gate>| held.lock().unwrap().push(done))
        .build()
        .unwrap();
    let gate = sched.spawn(Waiter, "gate", ()).unwrap();
    let text = sched.spawn(Waiter, "wait_for_text", (60_000_u64,)).unwrap();
    let deadline = Instant::now() + WAIT;
    let listed = loop {
        let listed = sched.processes();
        if listed.iter().all(|p| p.suspended_at.is_some()) && listed.len() == 2 {
            break listed;
        }
        assert!(
            Instant::now() < deadline,
            "never both suspended: {listed:?}"
        );
        thread::yield_now();
    };
    let info = |pid| listed.iter().find(|p| p.pid == pid).expect("listed");
    let g = info(gate);
    assert_eq!(g.entry, "gate");
    let point = g.suspended_at.expect("suspended");
    assert!(
        matches!(point.kind, SuspendKind::Yield { count: 1, command } if command.ends_with("Gate"))
    );
    assert!(
        point.location.file().ends_with("e2e_processes.rs"),
        "{point}"
    );
    let t = info(text);
    assert_eq!(t.entry, "wait_for_text");
    assert_eq!(
        t.suspended_at.expect("suspended").kind,
        SuspendKind::Receive {
            message_type: Some("alloc::string::String")
        }
    );

    sched.send(text, 5_u8).unwrap(); // another type: stays queued
    sched.send(text, "hi".to_string()).unwrap();
    assert_eq!(
        sched
            .wait_timeout(text, WAIT)
            .unwrap()
            .downcast::<String>()
            .unwrap(),
        "hi"
    );
    for done in gates.lock().unwrap().drain(..) {
        done.complete(());
    }
    assert!(sched.wait_timeout(gate, WAIT).is_ok());
    sched.shutdown(WAIT);
}

#[test]
fn receive_times_out_on_the_scheduler_timer() {
    let sched = plain_scheduler();
    let pid = sched.spawn(Waiter, "wait_for_text", (5_u64,)).unwrap();
    assert_eq!(
        sched
            .wait_timeout(pid, WAIT)
            .unwrap()
            .downcast::<String>()
            .unwrap(),
        "timed out waiting for a message"
    );
    sched.shutdown(WAIT);
}

// ---------------------------------------------------------------- many processes

struct Counter {
    steps: Arc<AtomicUsize>,
}

#[process]
impl Counter {
    #[entry]
    fn run(&mut self, n: u32) -> Result<u32, BoxError> {
        let mut sum = 0;
        for i in 0..n {
            sum += yield_cmd!(Delayed(0, i))?;
            self.steps.fetch_add(1, Ordering::Relaxed);
        }
        Ok(sum)
    }
}

#[test]
fn many_processes_move_between_workers() {
    let sched = scheduler(2, Arc::default());
    let steps = Arc::new(AtomicUsize::new(0));
    let pids: Vec<Pid> = (0..300)
        .map(|_| {
            sched
                .spawn(
                    Counter {
                        steps: steps.clone(),
                    },
                    "run",
                    (5_u32,),
                )
                .unwrap()
        })
        .collect();
    for pid in pids {
        assert_eq!(
            sched
                .wait_timeout(pid, WAIT)
                .unwrap()
                .downcast::<u32>()
                .unwrap(),
            10
        );
    }
    assert_eq!(steps.load(Ordering::Relaxed), 1500);
    sched.shutdown(WAIT);
}
