//! Async handlers on tokio (the `tokio` feature): results, errors, limits, and the
//! futures dropped as soon as nobody waits for them — over real loopback sockets
//! where a dropped future must be seen from outside.

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use wsched::command::{Completer, Sleep};
use wsched::io::{AsyncOptions, WhenFull};
use wsched::prelude::*;
use wsched::{
    Context, Event, Events, InitError, Payload, Payloads, Process, ProcessError, Scheduler, Status,
    StepError, StepOutput, Tag, YieldError,
};

/// Bounded waits on real events: generous, so a loaded machine does not fail them.
const PATIENCE: Duration = Duration::from_secs(20);

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// The metrics of the test's own async handler (the built-in TCP and UDP ones are
/// listed too).
fn ours(metrics: &wsched::Metrics) -> wsched::io::AsyncHandlerMetrics {
    let mine: Vec<_> = metrics
        .async_handlers
        .iter()
        .filter(|h| !h.command.contains("::tcp::") && !h.command.contains("::udp::"))
        .collect();
    assert_eq!(mine.len(), 1, "one handler of the test's own: {metrics:?}");
    mine[0].clone()
}

// ---- results ---------------------------------------------------------------------

struct Double(u64);
impl Command for Double {
    type Output = u64;
}

struct Doubler;

#[process]
impl Doubler {
    #[entry]
    fn run(&mut self, base: u64) -> Result<Vec<u64>, BoxError> {
        let results = yield_all!((0..10).map(|i| Double(base + i)));
        Ok(results.into_iter().collect::<Result<_, _>>()?)
    }
}

#[test]
fn ten_thousand_concurrent_async_yields_from_a_thousand_processes_all_complete() {
    let scheduler = Scheduler::builder()
        .workers(2)
        .async_handler(|Double(n): Double| async move {
            // Suspends once, so the futures really are in flight together.
            tokio::task::yield_now().await;
            Ok::<_, std::io::Error>(n * 2)
        })
        .build()
        .unwrap();
    let pids: Vec<_> = (0..1000u64)
        .map(|p| scheduler.spawn(Doubler, Doubler::RUN, (p * 100,)).unwrap())
        .collect();
    for (p, pid) in pids.into_iter().enumerate() {
        let results = scheduler.wait(pid).unwrap().downcast::<Vec<u64>>().unwrap();
        let base = p as u64 * 100;
        assert_eq!(results, (0..10).map(|i| (base + i) * 2).collect::<Vec<_>>());
    }
    let metrics = scheduler.metrics();
    let handler = ours(&metrics);
    assert_eq!(handler.completed, 10_000);
    assert_eq!(
        (handler.failed, handler.aborted, handler.timed_out),
        (0, 0, 0)
    );
    assert_eq!((handler.in_flight, handler.queued), (0, 0));
    assert_eq!(metrics.work_in_flight, 0);
}

// ---- errors ----------------------------------------------------------------------

struct Open(String);
impl Command for Open {
    type Output = ();
}

struct Opener;

#[process]
impl Opener {
    #[entry]
    fn run(&mut self, what: String) -> Result<String, BoxError> {
        Ok(match yield_cmd!(Open(what)) {
            Ok(()) => "opened".to_owned(),
            Err(error) => {
                let kind = error.io_error().map(|e| format!("{:?}", e.kind()));
                format!("{error} | {kind:?}")
            }
        })
    }
}

#[test]
fn an_error_keeps_its_source_and_a_panic_gives_a_typed_error() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .async_handler(|Open(what): Open| async move {
            match what.as_str() {
                "missing" => Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file",
                )),
                "panic" => panic!("the driver fell over"),
                _ => Ok(()),
            }
        })
        .build()
        .unwrap();
    let run = |what: &str| {
        let pid = scheduler
            .spawn(Opener, Opener::RUN, (what.to_owned(),))
            .unwrap();
        scheduler.wait(pid).unwrap().downcast::<String>().unwrap()
    };
    assert_eq!(run("ok"), "opened");
    let missing = run("missing");
    assert!(missing.contains("no such file"), "{missing}");
    assert!(
        missing.ends_with("Some(\"NotFound\")"),
        "the io::Error is the source: {missing}"
    );
    let panicked = run("panic");
    assert!(
        panicked.contains("panicked: the driver fell over"),
        "{panicked}"
    );
    let handler = ours(&scheduler.metrics());
    assert_eq!((handler.completed, handler.failed), (1, 2));
    // The runtime survived the panic.
    assert_eq!(run("ok"), "opened");
}

// ---- cancellation reaches the future -----------------------------------------------

/// Connects to the address and holds the connection until the future is dropped.
struct Hold(SocketAddr);
impl Command for Hold {
    type Output = ();
}

/// A loopback server that accepts connections and reports each one's end (its
/// read returning 0 or failing) with the moment it came.
struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    closed: mpsc::Receiver<Instant>,
}

fn server() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let (tx, closed) = mpsc::channel();
    let count = accepted.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let tx = tx.clone();
            thread::spawn(move || {
                let mut byte = [0u8; 1];
                // The client never writes: this returns when it closes.
                let _ = stream.read(&mut byte);
                let _ = tx.send(Instant::now());
            });
        }
    });
    Server {
        addr,
        accepted,
        closed,
    }
}

fn holding_scheduler(drops: Arc<AtomicUsize>) -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .async_handler(move |Hold(addr): Hold| {
            let drops = drops.clone();
            async move {
                let _dropped = OnDrop(drops);
                let mut stream = tokio::net::TcpStream::connect(addr).await?;
                let mut byte = [0u8; 1];
                // The server never writes: pending until the future is dropped.
                let _read = stream.read(&mut byte).await?;
                Ok::<_, std::io::Error>(())
            }
        })
        .build()
        .unwrap()
}

/// Counts its drop: the future holding it was dropped.
struct OnDrop(Arc<AtomicUsize>);
impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Holder;

#[process]
impl Holder {
    #[entry]
    fn run(&mut self, addr: SocketAddr) -> Result<(), BoxError> {
        yield_cmd!(Hold(addr))?;
        Ok(())
    }
}

#[test]
fn killing_half_the_processes_closes_their_connections_at_once() {
    let server = server();
    let drops = Arc::new(AtomicUsize::new(0));
    let scheduler = holding_scheduler(drops.clone());
    let pids: Vec<_> = (0..100)
        .map(|_| {
            scheduler
                .spawn(Holder, Holder::RUN, (server.addr,))
                .unwrap()
        })
        .collect();
    wait_until("the server accepted 100 connections", || {
        server.accepted.load(Ordering::SeqCst) == 100
    });
    assert_eq!(ours(&scheduler.metrics()).in_flight, 100);

    let killed_at = Instant::now();
    for pid in &pids[..50] {
        scheduler.kill(*pid).unwrap();
    }
    let mut slowest = Duration::ZERO;
    for _ in 0..50 {
        let at = server
            .closed
            .recv_timeout(PATIENCE)
            .expect("a connection closed");
        slowest = slowest.max(at.saturating_duration_since(killed_at));
    }
    assert!(
        slowest < Duration::from_millis(100),
        "the last of the killed processes' connections closed {slowest:?} after the kills"
    );
    wait_until("50 futures were dropped", || {
        drops.load(Ordering::SeqCst) == 50
    });
    let metrics = scheduler.metrics();
    assert_eq!(ours(&metrics).aborted, 50);
    assert_eq!(ours(&metrics).in_flight, 50);
    assert_eq!(metrics.work_in_flight, 50);

    // The other half still hold theirs, until the shutdown aborts them.
    let report = scheduler.shutdown(Duration::ZERO);
    // Stopped, or ended by the cancel that came just before (its yield gave up).
    assert_eq!(report.stopped.len() + report.finished, 50);
    assert_eq!(report.aborted_work, 50);
    for _ in 0..50 {
        server
            .closed
            .recv_timeout(PATIENCE)
            .expect("a connection closed by the shutdown");
    }
    wait_until("100 futures were dropped", || {
        drops.load(Ordering::SeqCst) == 100
    });
}

#[test]
fn a_cancelled_yield_drops_its_future() {
    let server = server();
    let drops = Arc::new(AtomicUsize::new(0));
    let scheduler = holding_scheduler(drops.clone());
    let pid = scheduler
        .spawn(Holder, Holder::RUN, (server.addr,))
        .unwrap();
    wait_until("the server accepted", || {
        server.accepted.load(Ordering::SeqCst) == 1
    });
    scheduler.cancel(pid).unwrap();
    let error = scheduler.wait(pid).unwrap_err();
    assert!(error.to_string().contains("cancelled"), "{error}");
    server
        .closed
        .recv_timeout(PATIENCE)
        .expect("the connection closed");
    // The stream, declared after the counter, is dropped before it.
    wait_until("the future was dropped", || {
        drops.load(Ordering::SeqCst) == 1
    });
}

/// Yields a `Hold` (tag 1) and a `Sleep` (tag 2) together; when the sleep comes
/// first, withdraws the hold and finishes — as a `recv!` timeout that wins does.
struct Impatient {
    addr: Option<SocketAddr>,
}

impl Process for Impatient {
    fn init(&mut self, _: Context, _: &str, input: Payloads) -> Result<(), InitError> {
        let addr = input
            .into_iter()
            .next()
            .ok_or_else(|| InitError::failed("an address"))?;
        self.addr = Some(addr.downcast::<SocketAddr>().map_err(InitError::failed)?);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        let mut slept = false;
        let mut first = true;
        for event in events {
            first = false;
            match event {
                Event::Completion(done) if done.tag == Tag(2) => slept = true,
                Event::Completion(done) => {
                    return Err(StepError::new(format!(
                        "the hold completed: {:?}",
                        done.result
                    )))
                }
                Event::Message(_) => {}
                Event::Cancel => return Err(StepError::new(YieldError::Cancelled)),
            }
        }
        if let Some(addr) = self.addr.take().filter(|_| first) {
            out.yield_command(Tag(1), Hold(addr));
            out.yield_command(Tag(2), Sleep(Duration::from_millis(20)));
            out.set_status(Status::WaitingForYields);
        } else if slept {
            out.withdraw(Tag(1));
            out.set_status(Status::Done(Payload::unit()));
        } else {
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    }
}

#[test]
fn a_withdrawn_yield_drops_its_future() {
    let server = server();
    let drops = Arc::new(AtomicUsize::new(0));
    let scheduler = holding_scheduler(drops.clone());
    let pid = scheduler
        .spawn(Impatient { addr: None }, "run", (server.addr,))
        .unwrap();
    scheduler.wait(pid).unwrap();
    // The sleep may have won before the future connected: then it never did.
    wait_until("the future was dropped", || {
        drops.load(Ordering::SeqCst) == 1
    });
    if server.accepted.load(Ordering::SeqCst) == 1 {
        server
            .closed
            .recv_timeout(PATIENCE)
            .expect("the connection closed");
    }
    let metrics = scheduler.metrics();
    assert_eq!(ours(&metrics).aborted, 1);
    assert_eq!(metrics.work_in_flight, 0);
}

// ---- options -----------------------------------------------------------------------

struct Gate;
impl Command for Gate {
    type Output = ();
}

struct Gated;

#[process]
impl Gated {
    #[entry]
    fn run(&mut self) -> Result<String, BoxError> {
        Ok(match yield_cmd!(Gate) {
            Ok(()) => "passed".to_owned(),
            Err(error) => error.to_string(),
        })
    }
}

/// Futures that count how many run at once (and the most ever), and wait on a
/// gate the test opens.
struct Concurrency {
    now: AtomicUsize,
    most: AtomicUsize,
    gate: tokio::sync::Semaphore,
}

fn gated_scheduler(options: AsyncOptions, seen: Arc<Concurrency>) -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .async_handler_with(options, move |Gate, _cx| {
            let seen = seen.clone();
            async move {
                let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
                seen.most.fetch_max(now, Ordering::SeqCst);
                let permit = seen.gate.acquire().await.expect("never closed");
                permit.forget();
                seen.now.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(())
            }
        })
        .build()
        .unwrap()
}

fn concurrency() -> Arc<Concurrency> {
    Arc::new(Concurrency {
        now: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
        gate: tokio::sync::Semaphore::new(0),
    })
}

#[test]
fn max_in_flight_holds_the_concurrency_and_queues_the_rest() {
    let seen = concurrency();
    let scheduler = gated_scheduler(AsyncOptions::new().max_in_flight(8), seen.clone());
    let pids: Vec<_> = (0..100)
        .map(|_| scheduler.spawn(Gated, Gated::RUN, ()).unwrap())
        .collect();
    wait_until("8 run and 92 queue", || {
        let m = ours(&scheduler.metrics());
        m.in_flight == 8 && m.queued == 92
    });
    assert_eq!(seen.now.load(Ordering::SeqCst), 8);
    seen.gate.add_permits(100);
    for pid in pids {
        assert_eq!(
            scheduler.wait(pid).unwrap().downcast::<String>().unwrap(),
            "passed"
        );
    }
    assert_eq!(
        seen.most.load(Ordering::SeqCst),
        8,
        "never more than 8 at once"
    );
    let m = ours(&scheduler.metrics());
    assert_eq!((m.completed, m.in_flight, m.queued), (100, 0, 0));
}

#[test]
fn a_full_handler_that_fails_refuses_at_once() {
    let seen = concurrency();
    let options = AsyncOptions::new()
        .max_in_flight(2)
        .when_full(WhenFull::Fail);
    let scheduler = gated_scheduler(options, seen.clone());
    let running: Vec<_> = (0..2)
        .map(|_| scheduler.spawn(Gated, Gated::RUN, ()).unwrap())
        .collect();
    wait_until("2 run", || seen.now.load(Ordering::SeqCst) == 2);
    let refused = scheduler.spawn(Gated, Gated::RUN, ()).unwrap();
    let message = scheduler
        .wait(refused)
        .unwrap()
        .downcast::<String>()
        .unwrap();
    assert!(message.contains("already runs 2 at once"), "{message}");
    seen.gate.add_permits(2);
    for pid in running {
        assert_eq!(
            scheduler.wait(pid).unwrap().downcast::<String>().unwrap(),
            "passed"
        );
    }
    let m = ours(&scheduler.metrics());
    assert_eq!((m.completed, m.failed), (2, 1));
}

#[test]
fn a_timeout_fails_the_yield_and_drops_the_future() {
    let seen = concurrency();
    let options = AsyncOptions::new().timeout(Duration::from_millis(10));
    let scheduler = gated_scheduler(options, seen.clone());
    let pid = scheduler.spawn(Gated, Gated::RUN, ()).unwrap();
    let message = scheduler.wait(pid).unwrap().downcast::<String>().unwrap();
    assert!(message.contains("timed out after 10ms"), "{message}");
    // Dropped while waiting at the gate: it never got past it.
    wait_until("the future was dropped", || {
        ours(&scheduler.metrics()).in_flight == 0
    });
    let m = ours(&scheduler.metrics());
    assert_eq!((m.timed_out, m.completed, m.aborted), (1, 0, 0));
    assert_eq!(
        seen.now.load(Ordering::SeqCst),
        1,
        "it counted itself in, never out"
    );
    assert_eq!(scheduler.metrics().pending_timers, 0);
}

#[test]
fn a_completion_before_the_timeout_releases_the_timer() {
    let seen = concurrency();
    seen.gate.add_permits(1);
    let options = AsyncOptions::new().timeout(Duration::from_secs(3600));
    let scheduler = gated_scheduler(options, seen);
    let pid = scheduler.spawn(Gated, Gated::RUN, ()).unwrap();
    assert_eq!(
        scheduler.wait(pid).unwrap().downcast::<String>().unwrap(),
        "passed"
    );
    assert_eq!(scheduler.metrics().pending_timers, 0);
}

// ---- shutdown ----------------------------------------------------------------------

#[test]
fn a_shutdown_under_load_aborts_every_future_and_counts_them() {
    let seen = concurrency();
    let scheduler = gated_scheduler(AsyncOptions::new().max_in_flight(50), seen.clone());
    for _ in 0..300 {
        scheduler.spawn(Gated, Gated::RUN, ()).unwrap();
    }
    wait_until("50 run and 250 queue", || {
        let m = ours(&scheduler.metrics());
        m.in_flight == 50 && m.queued == 250
    });
    let report = scheduler.shutdown(Duration::from_secs(10));
    // The cancel reached each process at its yield, which gave up (the process
    // finished with the error as its result), withdrawing the yield.
    assert_eq!(report.finished, 300);
    assert!(report.stopped.is_empty());
    assert_eq!(report.aborted_work, 300);
    let metrics = scheduler.metrics();
    let m = ours(&metrics);
    assert_eq!((m.aborted, m.completed), (300, 0));
    assert_eq!(
        (m.in_flight, m.queued),
        (0, 0),
        "the owned runtime dropped them all"
    );
    assert_eq!(metrics.work_in_flight, 0);
}

#[test]
fn a_borrowed_runtime_is_left_running() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let seen = concurrency();
    let scheduler = Scheduler::builder()
        .workers(1)
        .io_runtime(runtime.handle().clone())
        .async_handler(move |Gate| {
            let seen = seen.clone();
            async move {
                seen.gate.acquire().await.expect("never closed").forget();
                Ok::<_, std::io::Error>(())
            }
        })
        .build()
        .unwrap();
    scheduler.spawn(Gated, Gated::RUN, ()).unwrap();
    wait_until("it runs", || ours(&scheduler.metrics()).in_flight == 1);
    let report = scheduler.shutdown(Duration::ZERO);
    assert_eq!(report.aborted_work, 1);
    // The application's runtime still runs tasks.
    assert_eq!(
        runtime.block_on(async { tokio::spawn(async { 7 }).await.unwrap() }),
        7
    );
    // And the scheduler spawns nothing more: a new yield would fail (no process
    // can be spawned after the shutdown anyway).
    assert!(scheduler.spawn(Gated, Gated::RUN, ()).is_err());
}

// ---- blocking handlers see it too ---------------------------------------------------

struct Crunch;
impl Command for Crunch {
    type Output = ();
}

struct Cruncher;

#[process]
impl Cruncher {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        yield_cmd!(Crunch)?;
        Ok(())
    }
}

#[test]
fn a_blocking_handler_sees_a_cancelled_yield_is_no_longer_wanted() {
    let (started_tx, started) = mpsc::channel();
    let (gave_up_tx, gave_up) = mpsc::channel();
    let scheduler = Scheduler::builder()
        .workers(1)
        .blocking_handler(move |Crunch, done: Completer<Crunch>| {
            started_tx.send(()).unwrap();
            let deadline = Instant::now() + PATIENCE;
            while done.is_wanted() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(1)); // a piece of the work
            }
            gave_up_tx.send(done.is_wanted()).unwrap();
        })
        .build()
        .unwrap();
    let pid = scheduler.spawn(Cruncher, Cruncher::RUN, ()).unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    scheduler.cancel(pid).unwrap();
    assert!(
        !gave_up.recv_timeout(PATIENCE).unwrap(),
        "it saw the withdrawal"
    );
    assert!(scheduler.wait(pid).is_err());
    assert_eq!(scheduler.metrics().aborted_work, 1);
    assert_eq!(scheduler.metrics().work_in_flight, 0);
}

#[test]
fn a_blocking_job_whose_process_ended_before_it_ran_is_skipped() {
    let ran = Arc::new(AtomicUsize::new(0));
    let (release_tx, release) = mpsc::channel::<()>();
    let release = Arc::new(parking_lot::Mutex::new(release));
    let counted = ran.clone();
    let scheduler = Scheduler::builder()
        .workers(1)
        .blocking_threads(1)
        .blocking_handler(move |Crunch, done: Completer<Crunch>| {
            counted.fetch_add(1, Ordering::SeqCst);
            // The first job holds the only thread until the test releases it.
            let _ = release.lock().recv_timeout(PATIENCE);
            done.complete(());
        })
        .build()
        .unwrap();
    let first = scheduler.spawn(Cruncher, Cruncher::RUN, ()).unwrap();
    wait_until("the first job runs", || ran.load(Ordering::SeqCst) == 1);
    let second = scheduler.spawn(Cruncher, Cruncher::RUN, ()).unwrap();
    wait_until("the second job is queued", || {
        scheduler.metrics().work_in_flight == 2
    });
    scheduler.kill(second).unwrap();
    assert!(matches!(
        scheduler.wait(second),
        Err(wsched::JoinError::Failed { .. })
    ));
    release_tx.send(()).unwrap();
    scheduler.wait(first).unwrap();
    // Give the pool a chance to take the second job: it must skip it.
    wait_until("the queue is empty", || {
        scheduler.metrics().work_in_flight == 0
    });
    drop(scheduler);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the killed process's job never ran"
    );
}

#[test]
fn a_process_error_from_a_killed_holder_is_a_kill() {
    // The kill reaches the process while its future is out: it ends as killed,
    // not with the future's error.
    let server = server();
    let drops = Arc::new(AtomicUsize::new(0));
    let scheduler = holding_scheduler(drops);
    let pid = scheduler
        .spawn(Holder, Holder::RUN, (server.addr,))
        .unwrap();
    wait_until("the server accepted", || {
        server.accepted.load(Ordering::SeqCst) == 1
    });
    scheduler.kill(pid).unwrap();
    match scheduler.wait(pid) {
        Err(wsched::JoinError::Failed { error, .. }) => {
            assert!(matches!(error, ProcessError::Stopped), "{error:?}")
        }
        other => panic!("expected a kill, got {other:?}"),
    }
}
