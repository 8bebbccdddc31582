//! `#[process]` processes with names (`this::register`, `this::whereis`,
//! `this::send_named`) and timed messages (`this::send_after`, `this::send_interval`),
//! on the real scheduler and step by step in the testing harness.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wsched::prelude::*;
use wsched::testing::TestProcess;
use wsched::{RegisterError, Scheduler, SendNamedErrorKind};

const WAIT: Duration = Duration::from_secs(20);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn scheduler() -> Scheduler {
    Scheduler::builder()
        .workers(2)
        .build()
        .expect("scheduler starts")
}

/// Waits, boundedly, until `condition` holds.
#[track_caller]
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting until {what}");
        std::thread::yield_now();
    }
}

// ---------------------------------------------------------------- a named server

enum Request {
    Put(String, u64),
    Get(String, Pid),
    Stop,
}

#[derive(Default)]
struct Kv {
    map: HashMap<String, u64>,
}

#[process]
impl Kv {
    /// Serves under `name` until told to stop; finishes with the number of keys.
    #[entry]
    fn serve(&mut self, name: String) -> Result<usize, BoxError> {
        this::register(&name, this::pid())?;
        loop {
            match recv!(Request)? {
                Request::Put(key, value) => {
                    self.map.insert(key, value);
                }
                Request::Get(key, reply) => this::send(reply, self.map.get(&key).copied())?,
                Request::Stop => return Ok(self.map.len()),
            }
        }
    }
}

struct Client;

#[process]
impl Client {
    /// Stores `value` under `key` with the server called `server` (by name), then
    /// reads it back (by PID).
    #[entry]
    fn run(&mut self, server: String, key: String, value: u64) -> Result<Option<u64>, BoxError> {
        let found = this::whereis(&server).ok_or("no server")?;
        this::send_named(&server, Request::Put(key.clone(), value))?;
        this::send(found, Request::Get(key, this::pid()))?;
        Ok(recv!(Option<u64>)?)
    }

    /// Sends to a name nobody holds and checks the message comes back.
    #[entry]
    fn lost(&mut self) -> Result<bool, BoxError> {
        let Err(error) = this::send_named("nobody", Request::Stop) else {
            return Err("a send to a free name succeeded".into());
        };
        let kind = error.kind();
        let back = error.into_payload().downcast::<Request>()?;
        Ok(kind == SendNamedErrorKind::NotRegistered && matches!(back, Request::Stop))
    }
}

#[test]
fn clients_find_and_reach_a_server_by_the_name_it_registered() {
    let s = scheduler();
    let server = s.spawn(Kv::default(), "serve", ("kv".to_owned(),)).unwrap();
    wait_until("the server registers", || s.whereis("kv") == Some(server));
    let clients: Vec<_> = (0..3_u64)
        .map(|i| {
            s.spawn(Client, "run", ("kv".to_owned(), format!("key{i}"), i * 10))
                .unwrap()
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        let read = s.wait_timeout(client, WAIT).unwrap();
        assert_eq!(read.downcast::<Option<u64>>().unwrap(), Some(i as u64 * 10));
    }
    let lost = s.spawn(Client, "lost", ()).unwrap();
    assert!(s
        .wait_timeout(lost, WAIT)
        .unwrap()
        .downcast::<bool>()
        .unwrap());

    s.send_named("kv", Request::Stop).unwrap();
    let keys = s.wait_timeout(server, WAIT).unwrap();
    assert_eq!(keys.downcast::<usize>().unwrap(), 3);
    assert_eq!(s.whereis("kv"), None, "freed when the server ended");
    // A new server takes the name at once.
    let next = s.spawn(Kv::default(), "serve", ("kv".to_owned(),)).unwrap();
    wait_until("the new server registers", || s.whereis("kv") == Some(next));
    s.send_named("kv", Request::Stop).unwrap();
    s.wait_timeout(next, WAIT).unwrap();
    assert!(s.shutdown(WAIT).stopped.is_empty());
}

// ---------------------------------------------------------------- two contenders

/// A contender, what its registration said, and where the name pointed right after.
type Outcome = (Pid, Result<(), RegisterError>, Option<Pid>);

#[derive(Default)]
struct Race {
    started: AtomicUsize,
    outcomes: Mutex<Vec<Outcome>>,
}

struct Contender {
    race: Arc<Race>,
}

#[process]
impl Contender {
    /// Registers itself under `name` once both contenders run (or after a moment),
    /// records the outcome, and stays live until it gets a message.
    #[entry]
    fn run(&mut self, name: String) -> Result<(), BoxError> {
        self.race.started.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + ms(50);
        while self.race.started.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
            std::hint::spin_loop();
        }
        let registered = this::register(&name, this::pid());
        let found = this::whereis(&name);
        self.race
            .outcomes
            .lock()
            .unwrap()
            .push((this::pid(), registered, found));
        recv!()?;
        Ok(())
    }
}

#[test]
fn two_process_entries_registering_one_name_at_once_exactly_one_wins() {
    let s = scheduler();
    for round in 0..200 {
        let name = format!("leader-{round}");
        let race = Arc::new(Race::default());
        let pids = [(); 2].map(|()| {
            s.spawn(Contender { race: race.clone() }, "run", (name.clone(),))
                .unwrap()
        });
        wait_until("both tried", || race.outcomes.lock().unwrap().len() == 2);
        let outcomes = std::mem::take(&mut *race.outcomes.lock().unwrap());
        let winner = match outcomes.iter().filter(|o| o.1.is_ok()).collect::<Vec<_>>()[..] {
            [(winner, _, _)] => *winner,
            _ => panic!("round {round}: not exactly one winner: {outcomes:?}"),
        };
        for (pid, registered, found) in &outcomes {
            assert_eq!(*found, Some(winner));
            if *pid != winner {
                let expected = RegisterError::Taken {
                    name: name.clone(),
                    holder: winner,
                };
                assert_eq!(registered.as_ref().unwrap_err(), &expected);
            }
        }
        for pid in pids {
            s.send(pid, ()).unwrap();
            s.wait_timeout(pid, WAIT).unwrap();
        }
        assert_eq!(s.whereis(&name), None);
    }
    s.shutdown(WAIT);
}

// ---------------------------------------------------------------- timed messages

#[derive(Clone)]
struct Tick;

struct Finish;

struct Ticker;

#[process]
impl Ticker {
    /// Ticks itself every `period`; after three ticks, cancels the interval and asks
    /// for one more message a period later. Finishes with when each came.
    #[entry]
    fn run(&mut self, period: Duration) -> Result<Vec<Duration>, BoxError> {
        let start = Instant::now();
        let ticking = this::send_interval(this::pid(), Tick, period)?;
        let mut at = Vec::new();
        while at.len() < 3 {
            recv!(Tick)?;
            at.push(start.elapsed());
        }
        if !ticking.cancel() {
            return Err("the interval had stopped".into());
        }
        this::send_after(this::pid(), Finish, period)?;
        recv!(Finish)?;
        at.push(start.elapsed());
        Ok(at)
    }
}

#[test]
fn a_process_ticks_itself_with_an_interval_and_a_timed_message() {
    const PERIOD: Duration = Duration::from_millis(3);
    let s = scheduler();
    let pid = s.spawn(Ticker, "run", (PERIOD,)).unwrap();
    let at = s
        .wait_timeout(pid, WAIT)
        .unwrap()
        .downcast::<Vec<Duration>>()
        .unwrap();
    for (k, arrived) in at[..3].iter().enumerate() {
        assert!(
            *arrived >= PERIOD * (k as u32 + 1),
            "tick {} came at {arrived:?}",
            k + 1
        );
    }
    assert!(
        at[3] - at[2] >= PERIOD,
        "the last message came early: {at:?}"
    );
    let metrics = s.metrics();
    assert_eq!(
        (metrics.pending_timers, metrics.undelivered_timed_messages),
        (0, 0)
    );
    s.shutdown(WAIT);
}

// ---------------------------------------------------------------- step by step

#[test]
fn the_harness_plays_the_names_a_client_uses() {
    let server = Pid::from_raw(99);
    let mut client =
        TestProcess::init(Client, "run", ("kv".to_owned(), "a".to_owned(), 5_u64)).unwrap();
    client.register("kv", server).unwrap();
    client.step();
    let sent = client.take_sent();
    assert_eq!(sent.len(), 2);
    assert!(sent
        .iter()
        .all(|s| s.to == server && s.from == Some(client.pid())));
    assert!(matches!(
        sent[0].payload.downcast_ref::<Request>(),
        Some(Request::Put(key, 5)) if key == "a"
    ));
    client.send_from(Some(server), Some(5_u64));
    assert_eq!(client.result::<Option<u64>>(), Some(5));

    let mut lost = TestProcess::start(Client, "lost", ()).unwrap();
    assert!(lost.result::<bool>());
}

#[test]
fn the_harness_keeps_a_server_s_name_until_it_ends() {
    let mut server = TestProcess::start(Kv::default(), "serve", ("kv".to_owned(),)).unwrap();
    let pid = server.pid();
    assert_eq!(server.whereis("kv"), Some(pid));
    assert_eq!(
        server.register("kv", Pid::from_raw(7)),
        Err(RegisterError::Taken {
            name: "kv".to_owned(),
            holder: pid
        })
    );
    server.send(Request::Stop);
    assert_eq!(server.result::<usize>(), 0);
    assert_eq!(server.whereis("kv"), None, "freed when it ended");
    assert!(
        server.register("kv", pid).is_err(),
        "an ended process cannot take a name"
    );

    // A server whose name is taken fails, saying who holds it.
    let mut late = TestProcess::init(Kv::default(), "serve", ("kv".to_owned(),)).unwrap();
    late.register("kv", Pid::from_raw(7)).unwrap();
    late.step();
    assert_eq!(
        late.expect_error().to_string(),
        "process failed: cannot register the name `kv`: <7> holds it (unregister it first, \
         or wait for <7> to end)"
    );
}

#[test]
fn the_harness_fires_timed_messages_when_the_test_says() {
    let mut ticker = TestProcess::start(Ticker, "run", (ms(1000),)).unwrap();
    let mut timed = ticker.take_timed();
    assert_eq!(timed.len(), 1);
    let mut interval = timed.remove(0);
    assert_eq!(
        (interval.to, interval.delay, interval.period),
        (ticker.pid(), ms(1000), Some(ms(1000)))
    );
    assert_eq!(interval.message_type(), std::any::type_name::<Tick>());
    for _ in 0..3 {
        let tick = interval.fire().expect("running");
        ticker.send_from(interval.from, tick);
    }
    assert!(interval.is_cancelled(), "cancelled after the third tick");
    assert!(interval.fire().is_none());
    let mut finish = ticker.take_timed().remove(0);
    assert_eq!((finish.delay, finish.period), (ms(1000), None));
    let message = finish.fire().expect("armed");
    assert!(finish.fire().is_none(), "sent once");
    ticker.send_from(finish.from, message);
    assert_eq!(ticker.result::<Vec<Duration>>().len(), 4);
}
