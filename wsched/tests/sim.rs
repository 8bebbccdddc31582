//! Deterministic simulation (`--features sim`): the same seed gives the same run,
//! virtual time, simulated handlers and their faults, crashes, liveness, the
//! check driver.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::sim::{check, Faults, SimBuildError, SimError, SimHandler, SimulatedFault, Simulation};
use wsched::supervisor::{ChildSpec, Strategy, Supervisor};
use wsched::{Down, ExitReason, Request, Scheduler, YieldError};

/// A command a store answers.
struct Lookup(u64);
impl Command for Lookup {
    type Output = u64;
}

/// A server: answers `Request<u64, u64>` calls, looking each key up first.
struct Store;

#[process]
impl Store {
    #[entry]
    fn serve(&mut self) -> Result<(), BoxError> {
        loop {
            let Request { request, reply, .. } = recv!(Request<u64, u64>)?;
            let value = yield_cmd!(Lookup(request)).unwrap_or(0);
            reply.send(value);
        }
    }
}

/// A client: calls the store `rounds` times with a timeout, sleeping between calls;
/// returns how many calls got an answer.
struct Client;

#[process]
impl Client {
    #[entry]
    fn run(&mut self, store: Pid, rounds: u64) -> Result<u64, BoxError> {
        let mut answered = 0;
        for key in 0..rounds {
            let reply: Result<u64, _> = call!(store, key, timeout = Duration::from_millis(50));
            if reply.is_ok() {
                answered += 1;
            }
            yield_cmd!(Sleep(Duration::from_millis(this::random() % 10)))?;
        }
        Ok(answered)
    }
}

fn system(seed: u64, faults: Faults) -> Simulation {
    let mut sim = Simulation::builder()
        .seed(seed)
        .faults(faults)
        .handler(
            SimHandler::new(|Lookup(key)| Ok(key * 2))
                .latency(Duration::from_millis(1)..Duration::from_millis(80)),
        )
        .build()
        .expect("the simulation builds");
    let store = sim.spawn(Store, Store::SERVE, ()).unwrap();
    sim.protect(store);
    for _ in 0..4 {
        sim.spawn(Client, Client::RUN, (store, 20_u64)).unwrap();
    }
    sim
}

/// Runs the system to its end; the trace hash.
fn run_system(seed: u64, faults: Faults) -> u64 {
    let mut sim = system(seed, faults);
    sim.run_until_idle().expect("the run ends");
    sim.trace_hash()
}

#[test]
fn one_seed_gives_one_trace_and_seeds_give_different_ones() {
    let faults = Faults::none()
        .handler_failure(0.1)
        .delay(0.2, Duration::from_millis(5));
    let first = run_system(7, faults.clone());
    for _ in 0..100 {
        assert_eq!(run_system(7, faults.clone()), first);
    }
    let hashes: BTreeSet<u64> = (0..20)
        .map(|seed| run_system(seed, faults.clone()))
        .collect();
    assert_eq!(hashes.len(), 20, "every seed runs differently");
}

#[test]
fn every_fault_kind_is_repeatable_from_its_seed() {
    for seed in 0..30 {
        let faults = Faults::from_seed(seed);
        assert_eq!(
            run_system(seed, faults.clone()),
            run_system(seed, faults),
            "seed {seed}"
        );
    }
}

/// Times out 24 × 60 times, a minute each.
struct Ticker;

#[process]
impl Ticker {
    #[entry]
    fn run(&mut self) -> Result<(u32, Duration), BoxError> {
        let start = this::now();
        let mut timeouts = 0;
        for _ in 0..(24 * 60) {
            if recv!(u32, timeout = Duration::from_secs(60)).is_err() {
                timeouts += 1;
            }
        }
        Ok((timeouts, this::now() - start))
    }
}

#[test]
fn a_simulated_day_of_timeouts_runs_in_virtual_time() {
    let mut sim = Simulation::builder().seed(1).build().unwrap();
    let pids: Vec<Pid> = (0..10)
        .map(|_| sim.spawn(Ticker, Ticker::RUN, ()).unwrap())
        .collect();
    let started = Instant::now();
    for pid in pids {
        let (timeouts, took) = sim
            .wait(pid)
            .unwrap()
            .downcast::<(u32, Duration)>()
            .unwrap();
        assert_eq!(timeouts, 24 * 60);
        assert!(took >= Duration::from_secs(24 * 3600), "{took:?}");
    }
    assert!(sim.elapsed() >= Duration::from_secs(24 * 3600));
    // Informational: the benchmark suite measures speed.
    eprintln!(
        "a simulated day of 10 × 1440 timeouts: {} steps in {:?}",
        sim.steps(),
        started.elapsed()
    );
}

struct Shouter;
impl Command for Shouter {
    type Output = ();
}

#[test]
fn a_command_with_a_real_handler_and_no_simulated_one_is_refused() {
    let app = Scheduler::builder()
        .handler(|_: Lookup, done: Completer<Lookup>| done.complete(0))
        .blocking_handler(|_: Shouter, done: Completer<Shouter>| done.complete(()));
    let error = Simulation::builder()
        .scheduler(app)
        .build()
        .expect_err("two commands have no simulated handler");
    let SimBuildError::Unsimulated(commands) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(commands.len(), 2);
    let text = error.to_string();
    assert!(
        text.contains("sim::Lookup") && text.contains("sim::Shouter"),
        "{text}"
    );
    assert!(text.contains("SimHandler"), "{text}");

    // Keeping a worker-side handler is allowed; a blocking one is not.
    let app = Scheduler::builder()
        .handler(|_: Lookup, done: Completer<Lookup>| done.complete(0))
        .blocking_handler(|_: Shouter, done: Completer<Shouter>| done.complete(()));
    let error = Simulation::builder()
        .scheduler(app)
        .keep::<Lookup>()
        .keep::<Shouter>()
        .build()
        .expect_err("a blocking handler cannot be kept");
    assert!(error.to_string().contains("cannot be kept"), "{error}");

    let app =
        Scheduler::builder().handler(|Lookup(k), done: Completer<Lookup>| done.complete(k + 1));
    let mut sim = Simulation::builder()
        .scheduler(app)
        .keep::<Lookup>()
        .build()
        .unwrap();
    let pid = sim.spawn(Asker, Asker::ASK, (1_u32,)).unwrap();
    let answers = sim
        .wait(pid)
        .unwrap()
        .downcast::<Vec<Result<u64, String>>>()
        .unwrap();
    assert_eq!(answers, vec![Ok(1)]);
}

#[test]
fn a_second_simulation_on_one_thread_is_refused() {
    let _first = Simulation::builder().build().unwrap();
    let error = Simulation::builder().build().unwrap_err();
    assert!(matches!(error, SimBuildError::AlreadyRunning), "{error}");
}

#[test]
fn invalid_plans_are_refused_with_the_reason() {
    let error = Simulation::builder()
        .faults(Faults::none().crash(2.0))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("`crash` is 2"), "{error}");
    let error = Simulation::builder()
        .handler(SimHandler::new(|Lookup(k)| Ok(k)).failure(-1.0))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("failure -1"), "{error}");
}

/// Asks `Lookup(n)` `count` times; each answer or error.
struct Asker;

#[process]
impl Asker {
    #[entry]
    fn ask(&mut self, count: u32) -> Result<Vec<Result<u64, String>>, BoxError> {
        let mut answers = Vec::new();
        for n in 0..count {
            answers.push(match yield_cmd!(Lookup(u64::from(n))) {
                Ok(v) => Ok(v),
                Err(YieldError::Failed { source, .. }) if source.is::<SimulatedFault>() => {
                    Err("injected".to_owned())
                }
                Err(other) => Err(other.to_string()),
            });
        }
        Ok(answers)
    }
}

fn ask(handler: SimHandler<Lookup>, count: u32) -> (Vec<Result<u64, String>>, Simulation) {
    let mut sim = Simulation::builder()
        .seed(3)
        .handler(handler)
        .build()
        .unwrap();
    let pid = sim.spawn(Asker, Asker::ASK, (count,)).unwrap();
    let answers = sim
        .wait(pid)
        .unwrap()
        .downcast::<Vec<Result<u64, String>>>()
        .unwrap();
    (answers, sim)
}

#[test]
fn simulated_handlers_answer_after_their_latency_or_fail_on_purpose() {
    let latency = Duration::from_millis(10)..Duration::from_millis(20);
    let (answers, sim) = ask(SimHandler::new(|Lookup(k)| Ok(k * 3)).latency(latency), 5);
    assert_eq!(answers, (0..5).map(|k| Ok(k * 3)).collect::<Vec<_>>());
    assert!(
        sim.elapsed() >= Duration::from_millis(50) && sim.elapsed() < Duration::from_millis(100)
    );
    drop(sim); // one simulation at a time on a thread

    let (answers, sim) = ask(SimHandler::new(|Lookup(k)| Ok(k)).failure(1.0), 4);
    assert_eq!(answers, vec![Err("injected".to_owned()); 4]);
    assert_eq!(sim.fault_counts().failed, 4);
    drop(sim);

    // The handler's own error reaches the yield as it would in production.
    let (answers, _) = ask(SimHandler::new(|Lookup(_)| Err("no such key".into())), 1);
    assert!(
        answers[0].as_ref().unwrap_err().contains("no such key"),
        "{answers:?}"
    );
}

#[test]
fn a_second_completion_is_ignored() {
    let (answers, sim) = ask(SimHandler::new(|Lookup(k)| Ok(k + 100)).duplicate(1.0), 6);
    assert_eq!(answers, (0..6).map(|k| Ok(k + 100)).collect::<Vec<_>>());
    assert_eq!(sim.fault_counts().duplicated, 6);
}

/// Calls the store once, waiting at most a minute.
struct Patient;

#[process]
impl Patient {
    #[entry]
    fn run(&mut self, store: Pid) -> Result<String, BoxError> {
        let answer: Result<u64, _> = call!(store, 1_u64, timeout = Duration::from_secs(60));
        Ok(match answer {
            Ok(_) => "answered".to_owned(),
            Err(_) => "gave up".to_owned(),
        })
    }
}

#[test]
fn a_hanging_command_never_completes() {
    let mut sim = Simulation::builder()
        .handler(SimHandler::new(|Lookup(k)| Ok(k)).hang(1.0))
        .build()
        .unwrap();
    let pid = sim.spawn(Asker, Asker::ASK, (1_u32,)).unwrap();
    let error = sim.wait(pid).unwrap_err();
    assert!(matches!(error, SimError::Idle { .. }), "{error}");
    assert!(error.to_string().contains("went idle"), "{error}");
    assert_eq!(sim.fault_counts().hung, 1);
    drop(sim);

    let mut sim = Simulation::builder()
        .handler(SimHandler::new(|Lookup(k)| Ok(k)).hang(1.0))
        .build()
        .unwrap();
    let store = sim.spawn(Store, Store::SERVE, ()).unwrap();
    let pid = sim.spawn(Patient, Patient::RUN, (store,)).unwrap();
    assert_eq!(
        sim.wait(pid).unwrap().downcast::<String>().unwrap(),
        "gave up"
    );
    assert!(sim.elapsed() >= Duration::from_secs(60));
}

/// Monitors `watched` and reports how it ended.
struct Watcher;

#[process]
impl Watcher {
    #[entry]
    fn watch(&mut self, watched: Pid) -> Result<ExitReason, BoxError> {
        this::monitor(watched);
        let down = recv!(Down)?;
        Ok(down.reason)
    }
}

/// Sleeps for ever, a second at a time.
struct Sleeper;

#[process]
impl Sleeper {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        loop {
            yield_cmd!(Sleep(Duration::from_secs(1)))?;
        }
    }
}

#[test]
fn a_crash_ends_a_process_killed_and_its_monitors_see_it() {
    let mut sim = Simulation::builder()
        .seed(11)
        .faults(Faults::none().crash(0.2))
        .build()
        .unwrap();
    let sleeper = sim.spawn(Sleeper, Sleeper::RUN, ()).unwrap();
    let watcher = sim.spawn(Watcher, Watcher::WATCH, (sleeper,)).unwrap();
    sim.protect(watcher);
    let reason = sim.wait(watcher).unwrap().downcast::<ExitReason>().unwrap();
    assert_eq!(reason, ExitReason::Killed);
    assert_eq!(sim.fault_counts().crashed, 1);
}

#[test]
fn a_supervisor_restarts_crashed_children_in_virtual_time() {
    let starts = Arc::new(AtomicU64::new(0));
    let counted = starts.clone();
    let tree = Supervisor::new(Strategy::OneForOne)
        .intensity(1_000, Duration::from_secs(1))
        .child(ChildSpec::new(
            "sleeper",
            move || {
                counted.fetch_add(1, Ordering::SeqCst);
                Sleeper
            },
            "run",
            (),
        ));
    let mut sim = Simulation::builder()
        .seed(5)
        .faults(Faults::none().crash(0.05))
        .build()
        .unwrap();
    let root = sim.spawn(tree, Supervisor::ENTRY, ()).unwrap();
    sim.protect(root);
    sim.run_for(Duration::from_secs(3600)).unwrap();
    assert!(!sim.has_ended(root));
    let crashed = sim.fault_counts().crashed;
    assert!(crashed > 10, "{crashed}");
    assert_eq!(starts.load(Ordering::SeqCst), crashed + 1);
}

#[test]
fn a_liveness_run_reaches_its_goal_once_faults_stop() {
    let faults = Faults::none()
        .handler_failure(1.0)
        .liveness(Duration::from_secs(10));
    let mut sim = Simulation::builder()
        .faults(faults)
        .handler(SimHandler::new(|Lookup(k)| Ok(k)))
        .build()
        .unwrap();
    let pid = sim.spawn(Retrier, Retrier::RUN, ()).unwrap();
    sim.run_until(|sim| sim.has_ended(pid), Duration::from_secs(30))
        .unwrap();
    let tries = sim.wait(pid).unwrap().downcast::<u32>().unwrap();
    assert!(tries >= 10, "every try failed for ten seconds: {tries}");
    drop(sim);

    // A system that never gets there fails the run instead of hiding.
    let mut sim = Simulation::builder()
        .handler(SimHandler::new(|Lookup(k)| Ok(k)))
        .build()
        .unwrap();
    let sleeper = sim.spawn(Sleeper, Sleeper::RUN, ()).unwrap();
    let error = sim
        .run_until(|sim| sim.has_ended(sleeper), Duration::from_secs(30))
        .unwrap_err();
    assert!(matches!(error, SimError::GoalNotReached { .. }), "{error}");
    assert!(sim.elapsed() >= Duration::from_secs(30));
}

/// Retries a lookup every second until one succeeds; how many tries it took.
struct Retrier;

#[process]
impl Retrier {
    #[entry]
    fn run(&mut self) -> Result<u32, BoxError> {
        let mut tries = 0;
        loop {
            tries += 1;
            if yield_cmd!(Lookup(1)).is_ok() {
                return Ok(tries);
            }
            yield_cmd!(Sleep(Duration::from_secs(1)))?;
        }
    }
}

/// A counter with a planted bug: it loses an increment when a lookup fails.
struct Tally {
    total: Arc<AtomicU64>,
}

#[process]
impl Tally {
    #[entry]
    fn run(&mut self, rounds: u64) -> Result<(), BoxError> {
        for _ in 0..rounds {
            // The bug: `?` gives up on a failed lookup, skipping the increment.
            let _ = yield_cmd!(Lookup(1))?;
            self.total.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// The tally's simulation for `seed`, faults drawn from it.
fn tally_simulation(seed: u64) -> wsched::sim::SimBuilder {
    Simulation::builder()
        .seed(seed)
        .faults(Faults::from_seed(seed))
        .handler(SimHandler::new(|Lookup(k)| Ok(k)))
}

/// Runs a tally of 20 to its end; the total it reached.
fn run_tally(sim: &mut Simulation) -> Result<u64, String> {
    let total = Arc::new(AtomicU64::new(0));
    let tally = Tally {
        total: total.clone(),
    };
    let pid = sim
        .spawn(tally, Tally::RUN, (20_u64,))
        .map_err(|e| e.to_string())?;
    let _ = sim.wait(pid);
    Ok(total.load(Ordering::SeqCst))
}

#[test]
fn the_check_driver_finds_a_failing_seed_and_reports_how_to_reproduce_it() {
    let dir = std::env::temp_dir().join(format!("wsched-sim-check-{}", std::process::id()));
    let failure = check(tally_simulation)
        .seeds(0..1_000)
        .timeline_dir(&dir)
        .name("sim::planted")
        .run(|sim| match run_tally(sim)? {
            20 => Ok(()),
            n => Err(format!("the tally is {n}, not 20")),
        })
        .expect_err("a seed with handler failures breaks the tally");
    let report = failure.to_string();
    assert!(failure.reproduced, "{report}");
    assert!(
        report.contains(&format!("seed {}", failure.seed)),
        "{report}"
    );
    assert!(report.contains("the tally is"), "{report}");
    assert!(report.contains("handlers fail"), "{report}");
    assert!(
        report.contains("Tally::run <1>"),
        "the tail names the process: {report}"
    );
    assert_eq!(
        failure.reproduce(),
        format!(
            "WSCHED_SIM_SEED={} cargo test -- --exact sim::planted",
            failure.seed
        )
    );
    let Some(Ok((json, svg))) = &failure.timeline else {
        panic!("{report}");
    };
    assert!(std::fs::read_to_string(json)
        .unwrap()
        .starts_with("{\"traceEvents\":["));
    assert!(std::fs::read_to_string(svg).unwrap().contains("<svg"));
    let _ = std::fs::remove_dir_all(&dir);

    // The seed it printed fails again on its own, with the same trace.
    let mut sim = tally_simulation(failure.seed).build().unwrap();
    assert_ne!(run_tally(&mut sim).unwrap(), 20);
    assert_eq!(sim.trace_hash(), failure.trace_hash);
}

#[test]
fn a_passing_check_reports_what_it_ran() {
    let report = check(|seed| {
        Simulation::builder()
            .seed(seed)
            .faults(Faults::from_seed(seed))
            .handler(
                SimHandler::new(|Lookup(k)| Ok(k * 2))
                    .latency(Duration::ZERO..Duration::from_millis(80)),
            )
    })
    .seeds(0..200)
    .assert(|sim| {
        let store = sim
            .spawn(Store, Store::SERVE, ())
            .map_err(|e| e.to_string())?;
        sim.protect(store);
        let client = sim
            .spawn(Client, Client::RUN, (store, 5_u64))
            .map_err(|e| e.to_string())?;
        match sim.wait(client) {
            Ok(answered) => {
                let answered = answered.downcast::<u64>().map_err(|e| e.to_string())?;
                if answered <= 5 {
                    Ok(())
                } else {
                    Err(format!("{answered} answers to 5 calls"))
                }
            }
            // A crash fault may kill the client.
            Err(SimError::Join(_)) => Ok(()),
            Err(other) => Err(other.to_string()),
        }
    });
    assert_eq!(report.seeds, 200);
    assert!(report.distinct_traces > 190, "{report}");
    assert!(report.steps > 0);
}

#[test]
fn processes_read_virtual_time_and_seeded_randomness() {
    let run = |seed| {
        let mut sim = Simulation::builder().seed(seed).build().unwrap();
        let pid = sim.spawn(Dice, Dice::ROLL, ()).unwrap();
        sim.wait(pid)
            .unwrap()
            .downcast::<(Vec<u64>, Duration)>()
            .unwrap()
    };
    let (rolls, took) = run(9);
    assert_eq!(took, Duration::from_secs(5));
    assert_eq!(run(9).0, rolls);
    assert_ne!(run(10).0, rolls);
}

struct Dice;

#[process]
impl Dice {
    #[entry]
    fn roll(&mut self) -> Result<(Vec<u64>, Duration), BoxError> {
        let start = this::now();
        let mut rolls = Vec::new();
        for _ in 0..5 {
            rolls.push(this::random() % 6);
            yield_cmd!(Sleep(Duration::from_secs(1)))?;
        }
        Ok((rolls, this::now() - start))
    }
}

/// Takes `count` messages, then ends with their sum.
struct Collector;

#[process]
impl Collector {
    #[entry]
    fn take(&mut self, count: u32) -> Result<u32, BoxError> {
        let mut sum = 0;
        for _ in 0..count {
            sum += recv!(u32)?;
        }
        Ok(sum)
    }

    /// Waits for one message, at most a minute.
    #[entry]
    fn take_one(&mut self) -> Result<u32, BoxError> {
        Ok(recv!(u32, timeout = Duration::from_secs(60))?)
    }
}

#[test]
fn buggify_rejects_a_send_to_a_mailbox_with_one_free_place() {
    let mut sim = Simulation::builder()
        .faults(Faults::none().buggify(1.0))
        .build()
        .unwrap();
    let options = wsched::SpawnOptions::new().bounded_mailbox(2, wsched::Overflow::Reject);
    let pid = sim
        .spawn_with(Collector, Collector::TAKE, (1_u32,), options)
        .unwrap();
    sim.send(pid, 1_u32).expect("the first of two places");
    let error = sim
        .send(pid, 2_u32)
        .expect_err("the last place, taken on purpose");
    assert_eq!(error.kind(), wsched::SendErrorKind::MailboxFull);
    assert_eq!(
        error.into_payload().downcast::<u32>().unwrap(),
        2,
        "handed back"
    );
    assert_eq!(sim.wait(pid).unwrap().downcast::<u32>().unwrap(), 1);
    assert_eq!(sim.buggified()[0], 1);
}

#[test]
fn buggify_fires_a_timer_before_its_cancel_and_the_process_ignores_it() {
    let mut sim = Simulation::builder()
        .faults(Faults::none().buggify(1.0))
        .build()
        .unwrap();
    let pid = sim.spawn(Collector, Collector::TAKE_ONE, ()).unwrap();
    sim.run_for(Duration::from_secs(1)).unwrap();
    sim.send(pid, 7_u32).unwrap();
    assert_eq!(sim.wait(pid).unwrap().downcast::<u32>().unwrap(), 7);
    assert_eq!(
        sim.buggified()[2],
        1,
        "the receive's timer fired at its cancel"
    );
}

#[test]
fn buggify_crashes_restarted_children_until_the_intensity_gives_out() {
    let tree = Supervisor::new(Strategy::OneForOne)
        .intensity(3, Duration::from_secs(60))
        .child(ChildSpec::new("sleeper", || Sleeper, "run", ()));
    let mut sim = Simulation::builder()
        .faults(Faults::none().buggify(1.0))
        .build()
        .unwrap();
    let root = sim.spawn(tree, Supervisor::ENTRY, ()).unwrap();
    sim.run_for(Duration::from_secs(1)).unwrap();
    let child = sim
        .processes()
        .into_iter()
        .find(|p| p.pid != root)
        .unwrap()
        .pid;
    sim.kill(child).unwrap();
    let error = sim.wait(root).expect_err("the supervisor gives up");
    let SimError::Join(join) = &error else {
        panic!("{error}");
    };
    assert!(format!("{join}").contains("restart"), "{join}");
    assert!(sim.buggified()[1] >= 3, "{:?}", sim.buggified());
}

/// Counts what it is told, answering calls with the count; registered as "hub".
struct Hub {
    seen: u64,
}

#[process]
impl Hub {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        this::register("hub", this::pid())?;
        loop {
            let Request { request, reply, .. } = recv!(Request<u64, u64>)?;
            self.seen += request;
            reply.send(self.seen);
        }
    }
}

/// Ticks on an interval, calls the hub by name on each tick, watches a peer, and
/// stops after `ticks`.
struct Member;

#[process]
impl Member {
    #[entry]
    fn run(&mut self, ticks: u32) -> Result<u32, BoxError> {
        let timer = this::send_interval(this::pid(), "tick", Duration::from_millis(100))?;
        let mut answered = 0;
        for n in 0..ticks {
            let _ = recv!(&str)?;
            let Some(hub) = this::whereis("hub") else {
                continue;
            };
            if n % 3 == 0 {
                this::monitor(hub);
            }
            let reply: Result<u64, _> = call!(hub, 1_u64, timeout = Duration::from_millis(30));
            answered += u32::from(reply.is_ok());
        }
        timer.cancel();
        Ok(answered)
    }
}

/// A supervised hub, members linked to a coordinator, names, monitors, calls,
/// timed messages and a bounded mailbox: the whole toolbox under one seed.
fn whole_system(seed: u64) -> (u64, u64) {
    let mut sim = Simulation::builder()
        .seed(seed)
        .faults(Faults::from_seed(seed))
        .build()
        .unwrap();
    let tree = Supervisor::new(Strategy::OneForOne)
        .intensity(100, Duration::from_secs(1))
        .child(ChildSpec::new("hub", || Hub { seen: 0 }, "run", ()));
    let root = sim.spawn(tree, Supervisor::ENTRY, ()).unwrap();
    sim.protect(root);
    let options = wsched::SpawnOptions::new().bounded_mailbox(4, wsched::Overflow::DropOldest);
    for _ in 0..5 {
        sim.spawn_with(Member, Member::RUN, (20_u32,), options)
            .unwrap();
    }
    sim.run_for(Duration::from_secs(10)).unwrap();
    (sim.trace_hash(), sim.steps())
}

#[test]
fn the_whole_toolbox_runs_the_same_under_one_seed() {
    for seed in 0..20 {
        let (hash, steps) = whole_system(seed);
        assert!(steps > 100, "seed {seed}: {steps} steps");
        assert_eq!(whole_system(seed), (hash, steps), "seed {seed}");
    }
}

/// Fails after `period`.
struct Flaky;

#[process]
impl Flaky {
    #[entry]
    fn run(&mut self, period: Duration) -> Result<(), BoxError> {
        yield_cmd!(Sleep(period))?;
        Err("worn out".into())
    }
}

/// A supervisor allowing 3 restarts a minute, over a child failing every `period`;
/// whether it still runs after an hour, and the virtual time it lasted.
fn intensity_over(period: Duration) -> (bool, Duration) {
    let tree = Supervisor::new(Strategy::OneForOne)
        .intensity(3, Duration::from_secs(60))
        .child(ChildSpec::new("flaky", || Flaky, "run", (period,)));
    let mut sim = Simulation::builder().build().unwrap();
    let root = sim.spawn(tree, Supervisor::ENTRY, ()).unwrap();
    sim.run_until(|sim| sim.has_ended(root), Duration::from_secs(3600))
        .map_or((true, sim.elapsed()), |()| (false, sim.elapsed()))
}

#[test]
fn a_supervisors_restart_window_runs_in_virtual_time() {
    // Six failures a minute: the fourth restart within the minute gives up.
    let (alive, lasted) = intensity_over(Duration::from_secs(10));
    assert!(!alive);
    assert!(
        lasted >= Duration::from_secs(40) && lasted < Duration::from_secs(60),
        "{lasted:?}"
    );
    // Two a minute: within the intensity for the whole hour.
    let (alive, lasted) = intensity_over(Duration::from_secs(30));
    assert!(alive);
    assert!(lasted >= Duration::from_secs(3600));
}

#[test]
fn blocking_on_the_simulations_thread_is_refused_with_what_to_do() {
    let sim = Simulation::builder().build().unwrap();
    let store = sim.spawn(Store, Store::SERVE, ()).unwrap();
    let handle = sim.handle().clone();
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.wait(store)));
    let message = panic_text(waited.expect_err("a wait that would block for ever"));
    assert!(message.contains("Simulation::wait"), "{message}");
    let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handle.call::<u64, u64>(store, 1, Duration::from_secs(1))
    }));
    let message = panic_text(called.expect_err("a call that would block for ever"));
    assert!(message.contains("call!"), "{message}");
}

fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// A hand-written process: looks up each number it receives (tag = the count so
/// far), sums the answers, and ends with the sum at a 0.
#[derive(Default)]
struct HandSummer {
    waiting: Option<wsched::Tag>,
    queued: std::collections::VecDeque<u64>,
    sum: u64,
    asked: u64,
    done: bool,
}

impl wsched::Process for HandSummer {
    fn init(
        &mut self,
        _ctx: wsched::Context,
        method: &str,
        _input: wsched::Payloads,
    ) -> Result<(), wsched::InitError> {
        match method {
            "sum" => Ok(()),
            other => Err(wsched::InitError::unknown_method(other, &["sum"])),
        }
    }

    fn step(
        &mut self,
        events: wsched::Events<'_>,
        out: &mut wsched::StepOutput,
    ) -> Result<(), wsched::StepError> {
        for event in events {
            match event {
                wsched::Event::Completion(done) if Some(done.tag) == self.waiting => {
                    self.waiting = None;
                    self.sum += done
                        .result
                        .map_err(wsched::StepError::new)?
                        .downcast::<u64>()
                        .unwrap();
                }
                // Completions of tags not outstanding (a simulated second answer) are
                // ignored, as the `Process` contract says.
                wsched::Event::Completion(_) => {}
                wsched::Event::Message(message) => {
                    let n = message.payload.downcast::<u64>().unwrap();
                    if n == 0 {
                        self.done = true;
                    } else {
                        self.queued.push_back(n);
                    }
                }
                wsched::Event::Cancel => return Err(wsched::StepError::new(YieldError::Cancelled)),
            }
        }
        if self.waiting.is_none() {
            if let Some(n) = self.queued.pop_front() {
                self.asked += 1;
                let tag = wsched::Tag(self.asked);
                out.yield_command(tag, Lookup(n));
                self.waiting = Some(tag);
            } else if self.done {
                out.set_status(wsched::Status::Done(wsched::Payload::new(self.sum)));
                return Ok(());
            }
        }
        out.set_status(if self.waiting.is_some() {
            wsched::Status::WaitingForYields
        } else {
            wsched::Status::WaitingForMessage
        });
        Ok(())
    }
}

#[test]
fn hand_written_processes_run_in_a_simulation_too() {
    let run = |seed| {
        let mut sim = Simulation::builder()
            .seed(seed)
            .faults(
                Faults::none()
                    .handler_duplicate(0.5)
                    .delay(0.5, Duration::from_millis(3)),
            )
            .handler(
                SimHandler::new(|Lookup(k)| Ok(k * 10))
                    .latency(Duration::ZERO..Duration::from_millis(9)),
            )
            .build()
            .unwrap();
        let pid = sim.spawn(HandSummer::default(), "sum", ()).unwrap();
        for n in [1_u64, 2, 3, 4, 0] {
            sim.send(pid, n).unwrap();
        }
        let sum = sim.wait(pid).unwrap().downcast::<u64>().unwrap();
        (sum, sim.trace_hash(), sim.fault_counts().duplicated)
    };
    let (sum, hash, duplicated) = run(21);
    assert_eq!(sum, 100, "every duplicate ignored");
    assert!(duplicated > 0);
    assert_eq!(run(21), (sum, hash, duplicated));
}

#[test]
fn a_lost_answer_does_the_work_and_fails_the_yield() {
    let applied = Arc::new(AtomicU64::new(0));
    let counted = applied.clone();
    let handler = SimHandler::new(move |Lookup(k)| {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok(k)
    })
    .lost_answer(1.0);
    let mut sim = Simulation::builder().handler(handler).build().unwrap();
    let pid = sim.spawn(Asker, Asker::ASK, (3_u32,)).unwrap();
    let answers = sim
        .wait(pid)
        .unwrap()
        .downcast::<Vec<Result<u64, String>>>()
        .unwrap();
    assert_eq!(answers, vec![Err("injected".to_owned()); 3]);
    assert_eq!(
        applied.load(Ordering::SeqCst),
        3,
        "the work was done each time"
    );
    assert_eq!(sim.fault_counts().lost, 3);
}

/// Yields one lookup; how it went.
struct Once;

#[process]
impl Once {
    #[entry]
    fn run(&mut self) -> Result<String, BoxError> {
        Ok(match yield_cmd!(Lookup(1)) {
            Ok(v) => format!("answered {v}"),
            Err(YieldError::TimedOut { after, .. }) => format!("timed out after {after:?}"),
            Err(other) => format!("{other}"),
        })
    }
}

#[test]
fn a_simulated_timeout_fails_a_slow_or_hanging_command_at_its_deadline() {
    let run = |handler: SimHandler<Lookup>| {
        let mut sim = Simulation::builder().handler(handler).build().unwrap();
        let pid = sim.spawn(Once, Once::RUN, ()).unwrap();
        let said = sim.wait(pid).unwrap().downcast::<String>().unwrap();
        (said, sim.elapsed())
    };
    let slow = SimHandler::new(|Lookup(k)| Ok(k))
        .latency(Duration::from_secs(5)..Duration::from_secs(6))
        .timeout(Duration::from_secs(1));
    assert_eq!(
        run(slow),
        ("timed out after 1s".to_owned(), Duration::from_secs(1))
    );
    let hanging = SimHandler::new(|Lookup(k)| Ok(k))
        .hang(1.0)
        .timeout(Duration::from_secs(2));
    assert_eq!(
        run(hanging),
        ("timed out after 2s".to_owned(), Duration::from_secs(2))
    );
    let quick = SimHandler::new(|Lookup(k)| Ok(k + 1))
        .latency(Duration::from_millis(10)..Duration::from_millis(11))
        .timeout(Duration::from_secs(1));
    assert_eq!(run(quick).0, "answered 2");
}

/// Calls the store once with a 50 ms timeout: whether the reply came.
struct OneCall;

#[process]
impl OneCall {
    #[entry]
    fn run(&mut self, store: Pid) -> Result<bool, BoxError> {
        let reply: Result<u64, _> = call!(store, 1_u64, timeout = Duration::from_millis(50));
        Ok(reply.is_ok())
    }
}

#[test]
fn buggify_makes_a_reply_race_its_calls_timeout_and_either_wins() {
    let mut outcomes = BTreeSet::new();
    for seed in 0..40 {
        let mut sim = Simulation::builder()
            .seed(seed)
            .faults(Faults::none().buggify(1.0))
            .handler(SimHandler::new(|Lookup(k)| Ok(k)))
            .build()
            .unwrap();
        let store = sim.spawn(Store, Store::SERVE, ()).unwrap();
        let caller = sim.spawn(OneCall, OneCall::RUN, (store,)).unwrap();
        let replied = sim.wait(caller).unwrap().downcast::<bool>().unwrap();
        assert!(
            sim.elapsed() >= Duration::from_millis(50),
            "the callee ran at the deadline"
        );
        assert_eq!(sim.buggified()[3], 1);
        outcomes.insert(replied);
    }
    assert_eq!(
        outcomes.len(),
        2,
        "the reply won in some seeds and the timeout in others"
    );
}

#[test]
fn a_simulated_timeout_comes_before_a_late_failure_too() {
    let mut sim = Simulation::builder()
        .handler(
            SimHandler::new(|Lookup(k)| Ok(k))
                .failure(1.0)
                .latency(Duration::from_secs(3)..Duration::from_secs(4))
                .timeout(Duration::from_secs(1)),
        )
        .build()
        .unwrap();
    let pid = sim.spawn(Once, Once::RUN, ()).unwrap();
    let said = sim.wait(pid).unwrap().downcast::<String>().unwrap();
    assert_eq!(said, "timed out after 1s");
}

#[test]
fn an_inbox_on_the_simulations_thread_takes_what_arrived_and_refuses_to_wait() {
    let mut sim = Simulation::builder().build().unwrap();
    let inbox = sim.handle().inbox().unwrap();
    sim.send(inbox.pid(), 5_u32).unwrap();
    sim.run_until_idle().unwrap();
    assert_eq!(inbox.try_recv::<u32>(), Some(5));
    assert_eq!(inbox.try_recv::<u32>(), None);
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        inbox.recv::<u32>(Duration::from_secs(1))
    }));
    let message = panic_text(waited.expect_err("a wait nothing would end"));
    assert!(message.contains("try_recv"), "{message}");
}

#[test]
fn a_history_recorded_in_a_simulation_replays_in_the_harness() {
    let mut sim = Simulation::builder()
        .seed(4)
        .faults(Faults::none().delay(0.5, Duration::from_millis(5)))
        .build()
        .unwrap();
    let options = wsched::SpawnOptions::new().record_history();
    let pid = sim
        .spawn_with(Collector, Collector::TAKE, (3_u32,), options)
        .unwrap();
    for n in [4_u32, 5, 6] {
        sim.send(pid, n).unwrap();
    }
    assert_eq!(sim.wait(pid).unwrap().downcast::<u32>().unwrap(), 15);
    let history = sim.handle().take_history(pid).expect("recorded");
    let codecs = wsched::sim::history::Codecs::new();
    let report = wsched::sim::history::replay(&history, Collector, &codecs).expect("no divergence");
    assert_eq!(report.steps(), history.steps.len());
}

/// Spawns a recorded `Collector` with the `Spawn` command, feeds it, joins it.
struct RecordingParent;

#[process]
impl RecordingParent {
    #[entry]
    fn run(&mut self) -> Result<Pid, BoxError> {
        let options = wsched::SpawnOptions::new().record_history();
        let spawn = wsched::command::Spawn::new(Collector, Collector::TAKE, (1_u32,));
        let child = yield_cmd!(spawn.with_options(options))?;
        this::send(child, 9_u32)?;
        yield_cmd!(wsched::command::Join(child))??;
        Ok(child)
    }
}

#[test]
fn a_process_spawned_by_the_spawn_command_is_recorded_as_asked() {
    let mut sim = Simulation::builder().build().unwrap();
    let parent = sim
        .spawn(RecordingParent, RecordingParent::RUN, ())
        .unwrap();
    let child = sim.wait(parent).unwrap().downcast::<Pid>().unwrap();
    let history = sim.handle().take_history(child).expect("recorded");
    let codecs = wsched::sim::history::Codecs::new();
    wsched::sim::history::replay(&history, Collector, &codecs).expect("no divergence");
}

/// Spawns `n` detached `Collector`s waiting for nothing (they take 0 values) with
/// one `yield_all!`.
struct Fanner;

#[process]
impl Fanner {
    #[entry]
    fn run(&mut self, n: u32) -> Result<u32, BoxError> {
        let mut spawned = 0;
        for pid in yield_all!((0..n).map(|_| wsched::command::Spawn::detached(
            Collector,
            Collector::TAKE,
            (0_u32,)
        ))) {
            pid?;
            spawned += 1;
        }
        Ok(spawned)
    }
}

#[test]
fn a_recorded_yield_all_of_spawns_keeps_each_spawn_as_a_yield_and_replays() {
    // A process whose history is recorded yields its `Spawn`s for the handler,
    // after the step, as the history must show them; unrecorded, it would spawn
    // each child as it is yielded, in one step.
    let mut sim = Simulation::builder().build().unwrap();
    let options = wsched::SpawnOptions::new().record_history();
    let pid = sim
        .spawn_with(Fanner, Fanner::RUN, (3_u32,), options)
        .unwrap();
    assert_eq!(sim.wait(pid).unwrap().downcast::<u32>().unwrap(), 3);
    let history = sim.handle().take_history(pid).expect("recorded");
    assert_eq!(history.steps.len(), 2, "the entry waited for its spawns");
    let codecs = wsched::sim::history::Codecs::new();
    let report = wsched::sim::history::replay(&history, Fanner, &codecs).expect("no divergence");
    assert_eq!(report.steps(), 2);
}
