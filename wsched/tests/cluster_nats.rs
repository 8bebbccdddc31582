//! The cluster over a real `nats-server`, its nodes separate OS processes (the `nats`
//! feature): `cargo test -p wsched --features nats --test cluster_nats`.
//!
//! Each test starts its own server (a free loopback port, a fresh store), is node
//! `a` itself, and runs its other nodes as child processes: this test binary run
//! again on the test [`child_node`] alone, told by environment variables which node
//! to be and where the server is (without them, `child_node` returns at once and
//! passes). A child joins, spawns an `Echo` and a `Collector`, registers them under
//! cluster-wide names (`echo-<node>`, `collector-<node>`), says `ready`, and then
//! answers commands, one line each on its stdin, with one line on its stdout; the
//! end of its stdin shuts it down. A [`NodeProcess`] kills its child if the test
//! fails.
//!
//! Nothing sleeps to let something happen: each step waits for what it needs (a
//! message, a `Down`, a node seen up, a child's answer) up to `PATIENCE`, a hang
//! guard.

#[path = "support/nats_server.rs"]
mod nats_server;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use nats_server::NatsServer;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use wsched::cluster::{Cluster, ClusterConfig, NatsTransport, NodeDownReason, NodeEvent};
use wsched::prelude::*;
use wsched::{ExitReason, Scheduler, SendErrorKind};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

/// The failure detector of every node: declared down after a second of silence,
/// heartbeats four times a second.
const SILENCE: Duration = Duration::from_secs(1);
const HEARTBEAT: Duration = Duration::from_millis(250);

/// The cluster's name (each test has a server of its own).
const CLUSTER: &str = "natsit";

/// What tells a run of this binary that it is a child node: the node's name, and
/// the server's URL.
const NODE_VAR: &str = "WSCHED_NATSIT_NODE";
const URL_VAR: &str = "WSCHED_NATSIT_URL";

/// What starts the child's answers to the parent; the rest of its output (the test
/// harness's) is kept only to show on a failure.
const ANSWER: &str = "NATSIT ";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Ping {
    n: u64,
    reply_to: Pid,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Pong(u64);

/// Answers pings with pongs, and `u64` calls with their double.
struct Echo;

#[process]
impl Echo {
    #[entry]
    fn serve(&mut self) -> Result<(), BoxError> {
        loop {
            let ping = recv! {
                ping: Ping => Some(ping),
                call: Request<u64, u64> => {
                    call.reply.send(call.request * 2);
                    None
                },
            }?;
            if let Some(ping) = ping {
                this::send(ping.reply_to, Pong(ping.n))?;
            }
        }
    }
}

/// What a [`Collector`] has seen, shared with its node's main thread.
#[derive(Debug, Default)]
struct Collected {
    /// How many `u64`s came.
    count: u64,
    /// One more than the largest so far: with no hole, `count`.
    next: u64,
    /// The first that came out of order or twice (not larger than every one
    /// before it), and `next` then.
    first_wrong: Option<(u64, u64)>,
}

/// Takes the `u64`s sent to it (0, 1, 2, ...), checking that each is larger than
/// every one before it (a hole shows as `next > count`); answers a `u64` call with
/// how many came.
struct Collector {
    seen: Arc<Mutex<Collected>>,
}

enum Collect {
    Number(u64),
    Asked(Request<u64, u64>),
}

#[process]
impl Collector {
    #[entry]
    fn collect(&mut self) -> Result<(), BoxError> {
        loop {
            let next = recv! {
                n: u64 => Collect::Number(n),
                call: Request<u64, u64> => Collect::Asked(call),
            }?;
            let mut seen = self.seen.lock();
            match next {
                Collect::Number(n) if seen.first_wrong.is_none() => {
                    if n >= seen.next {
                        seen.count += 1;
                        seen.next = n + 1;
                    } else {
                        seen.first_wrong = Some((n, seen.next));
                    }
                }
                Collect::Number(_) => {}
                Collect::Asked(call) => {
                    call.reply.send(seen.count);
                }
            }
        }
    }
}

/// Connects to the server at `url`. A server that has just started (and takes
/// connections: `NatsServer::start` waited for that) has been seen to refuse the
/// first connection of a client now and then — about once in a thousand starts
/// here, with two tests starting servers at once — and to take the next at once:
/// a refused connection is tried again, within `PATIENCE`.
fn connect(name: &str, url: &str) -> NatsTransport {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match NatsTransport::connect(url, CLUSTER) {
            Ok(transport) => return transport,
            Err(err) if Instant::now() < deadline => {
                eprintln!("node {name}: cannot reach NATS at {url} ({err}); trying again");
                thread::sleep(Duration::from_millis(10));
            }
            Err(err) => panic!("node {name} cannot reach NATS at {url}: {err}"),
        }
    }
}

fn config(name: &str, url: &str) -> ClusterConfig {
    ClusterConfig::new(name, Arc::new(connect(name, url)))
        .silence(SILENCE)
        .heartbeat(HEARTBEAT)
        .register::<Ping>("Ping")
        .register::<Pong>("Pong")
        .register_call::<u64, u64>()
        .spawnable(Echo::SERVE, || Echo)
}

/// A node in this process (one worker, as every child).
fn node(name: &str, url: &str) -> Scheduler {
    Scheduler::builder()
        .workers(1)
        .cluster(config(name, url))
        .build()
        .expect("the node joins")
}

fn cluster(node: &Scheduler) -> Cluster {
    Cluster::of(&node.handle()).expect("in a cluster")
}

/// Waits (bounded) until `check` holds.
fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// The process registered under the cluster-wide `name`, once `node` sees it (its
/// node up).
fn find(node: &Scheduler, name: &str) -> Pid {
    let c = cluster(node);
    let mut found = None;
    until(&format!("`{name}` resolves"), || {
        found = c.whereis(name).expect("the store answers");
        found.is_some()
    });
    found.expect("found")
}

/// Whether `node` sees a peer named `name` with incarnation `incarnation` up.
fn sees(node: &Scheduler, name: &str, incarnation: u64) -> bool {
    cluster(node)
        .nodes()
        .iter()
        .any(|n| n.name() == name && n.incarnation() == incarnation)
}

// ---- the child node --------------------------------------------------------------

/// Not a test of its own: a child node, when this binary is run as one (see the
/// module docs). Returns at once otherwise.
#[test]
fn child_node() {
    let (Ok(name), Ok(url)) = (std::env::var(NODE_VAR), std::env::var(URL_VAR)) else {
        return;
    };
    let node = node(&name, &url);
    let c = cluster(&node);
    let seen = Arc::new(Mutex::new(Collected::default()));
    let echo = node.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let collector = node
        .spawn_detached(Collector { seen: seen.clone() }, Collector::COLLECT, ())
        .unwrap();
    c.register(&format!("echo-{name}"), echo).unwrap();
    c.register(&format!("collector-{name}"), collector).unwrap();
    let say = |line: String| println!("{ANSWER}{line}");
    say(format!("ready {}", c.me().incarnation()));
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin is text");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            // Registers this node's echo (or collector) under `name`.
            ["register", name, which] => {
                let pid = if *which == "collector" {
                    collector
                } else {
                    echo
                };
                say(match c.register(name, pid) {
                    Ok(()) => "registered ok".to_owned(),
                    Err(wsched::cluster::NameError::Taken { holder, .. }) => {
                        format!("registered taken {holder}")
                    }
                    Err(err) => format!("registered error {err}"),
                });
            }
            // Calls the process registered under `name` with 21.
            ["call", name] => say(match c.whereis(name) {
                Ok(Some(pid)) => match node.call::<u64, u64>(pid, 21, PATIENCE) {
                    Ok(answer) => format!("called {answer}"),
                    Err(err) => format!("called error {err}"),
                },
                Ok(None) => "called nobody".to_owned(),
                Err(err) => format!("called error {err}"),
            }),
            ["report"] => {
                let seen = seen.lock();
                say(match seen.first_wrong {
                    None => format!("collected {} {} in-order", seen.count, seen.next),
                    Some((got, due)) => format!(
                        "collected {} {} WRONG: got {got} when {due} or more was due",
                        seen.count, seen.next
                    ),
                });
            }
            ["me"] => {
                let peers: Vec<String> = c.nodes().iter().map(ToString::to_string).collect();
                say(format!("me {} {}", c.me().incarnation(), peers.join(",")));
            }
            _ => say(format!("unknown command {line:?}")),
        }
    }
    node.shutdown(PATIENCE);
}

/// A child node: this binary, run as node `name`. Killed on drop unless it has
/// exited.
struct NodeProcess {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    answers: mpsc::Receiver<String>,
    /// Everything it printed, to show when something goes wrong.
    output: Arc<Mutex<Vec<String>>>,
    /// Its incarnation when it said it was ready.
    incarnation: u64,
}

impl NodeProcess {
    /// Starts node `name` and waits until it is ready.
    fn start(name: &str, url: &str) -> Self {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args(["child_node", "--exact", "--nocapture", "--test-threads=1"])
            .env(NODE_VAR, name)
            .env(URL_VAR, url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start node {name}: {err}"));
        let stdout = child.stdout.take().expect("piped");
        let output = Arc::new(Mutex::new(Vec::new()));
        let (to_parent, answers) = mpsc::channel();
        {
            let output = output.clone();
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    // The harness's `test child_node ... ` may start the line.
                    if let Some(at) = line.find(ANSWER) {
                        let _ = to_parent.send(line[at + ANSWER.len()..].to_owned());
                    }
                    output.lock().push(line);
                }
            });
        }
        let stdin = child.stdin.take();
        let mut node = Self {
            name: name.to_owned(),
            child,
            stdin,
            answers,
            output,
            incarnation: 0,
        };
        let ready = node.answer("ready");
        node.incarnation = ready.parse().expect("an incarnation");
        node
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Sends it one command line.
    fn tell(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("its stdin is open");
        writeln!(stdin, "{command}")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|err| panic!("node {} took no command: {err}", self.name));
    }

    /// Its next answer, which must start with `word`; the rest of it.
    fn answer(&mut self, word: &str) -> String {
        let line = self.answers.recv_timeout(PATIENCE).unwrap_or_else(|_| {
            panic!(
                "node {} gave no answer ({word}) within {PATIENCE:?}; it printed:\n{}",
                self.name,
                self.output.lock().join("\n")
            )
        });
        match line.strip_prefix(word) {
            Some(rest) => rest.trim().to_owned(),
            None => panic!("node {}: expected `{word} ...`, got {line:?}", self.name),
        }
    }

    fn ask(&mut self, command: &str, word: &str) -> String {
        self.tell(command);
        self.answer(word)
    }

    /// How many numbers its collector took, and one more than the largest (the
    /// same with no hole); fails the test if one came out of order or twice.
    fn collected(&mut self) -> (u64, u64) {
        let report = self.ask("report", "collected");
        let numbers = report
            .strip_suffix("in-order")
            .unwrap_or_else(|| panic!("node {}'s collector: {report}", self.name));
        let mut numbers = numbers
            .split_whitespace()
            .map(|n| n.parse().expect("a number"));
        (
            numbers.next().expect("a count"),
            numbers.next().expect("the next due"),
        )
    }

    /// Its incarnation now, and the peers it sees up (`name#incarnation`).
    fn me(&mut self) -> (u64, Vec<String>) {
        let me = self.ask("me", "me");
        let (incarnation, peers) = me.split_once(' ').unwrap_or((&me, ""));
        (
            incarnation.parse().expect("an incarnation"),
            peers
                .split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    /// Sends it a signal (`-KILL`, `-STOP`, `-CONT`).
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {}: {status}", self.pid());
    }

    /// Closes its stdin, so that it shuts down, and checks that it exits cleanly.
    fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        loop {
            match self.child.try_wait().expect("its status") {
                Some(status) => {
                    assert!(
                        status.success(),
                        "node {} exited with {status}; it printed:\n{}",
                        self.name,
                        self.output.lock().join("\n")
                    );
                    return;
                }
                None if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                None => panic!("node {} did not exit within {PATIENCE:?}", self.name),
            }
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

// ---- the tests -------------------------------------------------------------------

#[test]
fn ping_pong_between_two_node_processes() {
    let server = NatsServer::start();
    let a = node("a", &server.url());
    let mut b = NodeProcess::start("b", &server.url());
    let echo = find(&a, "echo-b");
    assert!(echo.to_string().ends_with("@b>"), "{echo}");
    let inbox = a.inbox().unwrap();
    let started = Instant::now();
    for n in 1..=100 {
        inbox
            .send(
                echo,
                Ping {
                    n,
                    reply_to: inbox.pid(),
                },
            )
            .unwrap();
        let pong = inbox.recv_message(PATIENCE).unwrap();
        assert_eq!(pong.from, Some(echo));
        assert_eq!(pong.payload.downcast::<Pong>().unwrap(), Pong(n));
    }
    eprintln!("100 ping-pongs a -> b -> a took {:?}", started.elapsed());
    // The other way, a call from the child to a process of this node.
    let here = a.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    cluster(&a).register("echo-a", here).unwrap();
    assert_eq!(b.ask("call echo-a", "called"), "42");
    // And a process spawned on the child by typed entry.
    let spawned = cluster(&a)
        .spawn_on("b", Echo::SERVE, (), PATIENCE)
        .unwrap();
    assert_eq!(a.call::<u64, u64>(spawned, 5, PATIENCE).unwrap(), 10);
    b.finish();
    a.shutdown(PATIENCE);
}

#[test]
fn ten_thousand_messages_arrive_in_order_and_none_is_lost() {
    let server = NatsServer::start();
    let a = node("a", &server.url());
    let mut b = NodeProcess::start("b", &server.url());
    let collector = find(&a, "collector-b");
    let sender = a.inbox().unwrap();
    let started = Instant::now();
    for n in 0..10_000_u64 {
        sender.send(collector, n).unwrap();
    }
    // The call travels on the same stream, after the numbers: its answer counts
    // them all.
    let counted: u64 = a.call(collector, 0_u64, PATIENCE).unwrap();
    eprintln!("10,000 messages a -> b took {:?}", started.elapsed());
    assert_eq!(counted, 10_000);
    assert_eq!(b.collected(), (10_000, 10_000), "all, and no hole");
    b.finish();
    a.shutdown(PATIENCE);
}

#[test]
fn a_remote_monitor_fires_noconnection_soon_after_a_kill_9() {
    let server = NatsServer::start();
    let a = node("a", &server.url());
    let b = NodeProcess::start("b", &server.url());
    let echo = find(&a, "echo-b");
    let events = a.inbox().unwrap();
    cluster(&a).monitor_node(events.pid(), "b");
    let monitor = a.monitor(echo);
    // A round trip: `b` has the monitor (it went first on the same stream).
    assert_eq!(a.call::<u64, u64>(echo, 1, PATIENCE).unwrap(), 2);
    let killed = Instant::now();
    b.signal("-KILL");
    let down = monitor.wait_timeout(PATIENCE).expect("the Down comes");
    let took = killed.elapsed();
    let bound = 2 * SILENCE + HEARTBEAT;
    eprintln!("kill -9 to Down: {took:?} (bound {bound:?})");
    assert_eq!(down.pid, echo);
    assert_eq!(down.reason, ExitReason::NoConnection);
    assert!(took < bound, "the Down took {took:?}, more than {bound:?}");
    match events.recv::<NodeEvent>(PATIENCE).unwrap() {
        NodeEvent::Down(id, NodeDownReason::Silent) => {
            assert_eq!((id.name(), id.incarnation()), ("b", b.incarnation));
        }
        other => panic!("expected b down for silence, got {other:?}"),
    }
    assert_eq!(
        a.send(echo, Pong(1)).unwrap_err().kind(),
        SendErrorKind::NoConnection
    );
    drop(b);
    a.shutdown(PATIENCE);
}

#[test]
fn a_stopped_node_is_declared_down_and_comes_back_as_a_new_incarnation() {
    let server = NatsServer::start();
    let a = node("a", &server.url());
    let mut b = NodeProcess::start("b", &server.url());
    let first = b.incarnation;
    let old = find(&a, "echo-b");
    let events = a.inbox().unwrap();
    cluster(&a).watch_nodes(events.pid());
    let monitor = a.monitor(old);
    assert_eq!(a.call::<u64, u64>(old, 1, PATIENCE).unwrap(), 2);

    let stopped = Instant::now();
    b.signal("-STOP");
    let down = monitor.wait_timeout(PATIENCE).expect("the Down comes");
    eprintln!("SIGSTOP to Down: {:?}", stopped.elapsed());
    assert_eq!(down.reason, ExitReason::NoConnection);
    match events.recv::<NodeEvent>(PATIENCE).unwrap() {
        NodeEvent::Down(id, NodeDownReason::Silent) => {
            assert_eq!((id.name(), id.incarnation()), ("b", first));
        }
        other => panic!("expected b down for silence, got {other:?}"),
    }

    let continued = Instant::now();
    b.signal("-CONT");
    // `a` refuses the stopped incarnation when it hears from it again; `b` learns it
    // and comes back as the next one. (`b` may have declared `a` down too, for the
    // same silence, and `a` then renews as well: its own events tell of that.)
    let deadline = Instant::now() + PATIENCE;
    let back = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv::<NodeEvent>(left) {
            Ok(NodeEvent::Up(id)) if id.name() == "b" => break id,
            Ok(_) => {}
            Err(err) => panic!("b did not come back up: {err}"),
        }
    };
    assert_eq!(back.incarnation(), first + 1, "b came back as {back}");
    eprintln!("SIGCONT to b up again: {:?}", continued.elapsed());
    until("a sees b's new incarnation up, and b sees a's", || {
        let (incarnation, peers) = b.me();
        let a_now = cluster(&a).me().to_string();
        incarnation == first + 1 && sees(&a, "b", first + 1) && peers.contains(&a_now)
    });
    // The old PID names the refused incarnation: refused for ever.
    let error = a.send(old, Pong(1)).unwrap_err();
    assert_eq!(error.kind(), SendErrorKind::NoConnection);
    // Its name followed it: the same process, under its new incarnation's PID,
    // answers.
    let again = cluster(&a)
        .whereis("echo-b")
        .unwrap()
        .expect("`echo-b` resolves");
    assert_ne!(again, old);
    assert_eq!(a.call::<u64, u64>(again, 4, PATIENCE).unwrap(), 8);
    assert_eq!(
        a.send(old, Pong(2)).unwrap_err().kind(),
        SendErrorKind::NoConnection
    );
    b.finish();
    a.shutdown(PATIENCE);
}

#[test]
fn a_cluster_name_raced_by_two_node_processes_has_exactly_one_owner() {
    let server = NatsServer::start();
    let a = node("a", &server.url());
    let mut b = NodeProcess::start("b", &server.url());
    let mut c = NodeProcess::start("c", &server.url());
    // Both see each other, so that each knows the other's holder is alive.
    until("b and c see each other", || {
        b.me().1.iter().any(|p| p.starts_with("c#")) && c.me().1.iter().any(|p| p.starts_with("b#"))
    });
    for round in 0..5 {
        let name = format!("leader-{round}");
        // Both commands go out before either answer is read: the two registers race.
        let command = format!("register {name} echo");
        if round % 2 == 0 {
            b.tell(&command);
            c.tell(&command);
        } else {
            c.tell(&command);
            b.tell(&command);
        }
        let (at_b, at_c) = (b.answer("registered"), c.answer("registered"));
        let (winner, loser) = match (at_b.as_str(), at_c.as_str()) {
            ("ok", taken) if taken.starts_with("taken ") => ("b", taken),
            (taken, "ok") if taken.starts_with("taken ") => ("c", taken),
            _ => panic!("{name}: not exactly one owner: b {at_b:?}, c {at_c:?}"),
        };
        // The loser was told the winner's process; every node resolves it so.
        assert!(loser.ends_with(&format!("@{winner}>")), "{name}: {loser}");
        let holder = find(&a, &name);
        assert!(
            holder.to_string().ends_with(&format!("@{winner}>")),
            "{name}: {holder}, won by {winner}"
        );
    }
    b.finish();
    c.finish();
    a.shutdown(PATIENCE);
}

/// How the stream across a server restart ended.
#[derive(Debug)]
enum Outcome {
    /// Every message sent arrived, in order.
    AllArrived { sent: u64 },
    /// Those that arrived came in order, and the loss of the others (`holes` of
    /// them before the last that arrived) was reported as `NoConnection`.
    LossReported { sent: u64, arrived: u64, holes: u64 },
}

#[test]
fn a_server_restart_mid_run_loses_no_process_and_no_message_silently() {
    let mut server = NatsServer::start();
    let a = node("a", &server.url());
    let mut b = NodeProcess::start("b", &server.url());
    let echo_a = a.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    cluster(&a).register("echo-a", echo_a).unwrap();
    let events = a.inbox().unwrap();
    cluster(&a).watch_nodes(events.pid());
    let collector = find(&a, "collector-b");
    let monitor = a.monitor(collector);
    assert_eq!(a.call::<u64, u64>(collector, 0, PATIENCE).unwrap(), 0);

    // A stream of numbers to the collector, until stopped or refused.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (handle, stop, sent) = (a.handle(), stop.clone(), sent.clone());
        thread::spawn(move || {
            for n in 0_u64.. {
                if stop.load(Ordering::Acquire) {
                    return false;
                }
                match handle.send(collector, n) {
                    Ok(()) => sent.store(n + 1, Ordering::Release),
                    Err(err) => {
                        assert_eq!(err.kind(), SendErrorKind::NoConnection, "{err}");
                        return true;
                    }
                }
                // Paced (at most some 20,000 a second), so that the restart falls
                // in the middle of the run.
                if n % 20 == 19 {
                    thread::sleep(Duration::from_millis(1));
                }
            }
            unreachable!()
        })
    };
    until("the stream flows", || b.collected().0 >= 500);
    let restarted = Instant::now();
    server.restart();
    let sent_by_then = sent.load(Ordering::Acquire);
    eprintln!(
        "server restarted in {:?}, {sent_by_then} numbers sent by then",
        restarted.elapsed()
    );
    // A number sent after the restart arrives, or the loss is reported.
    until("the stream resumes, or is reported cut", || {
        monitor.try_down().is_some() || b.collected().1 > sent_by_then
    });
    stop.store(true, Ordering::Release);
    let refused = sender.join().expect("the sender");
    let sent = sent.load(Ordering::Acquire);

    // Never a reordering, never a silent loss: the collector fails on a number out
    // of order or twice (`collected`), and every number sent arrives unless a
    // `NoConnection` tells that some may not. Then the numbers that arrived may
    // have a hole: the sender goes on after the `Down`, and once the nodes have met
    // again (one of them as a new incarnation) its numbers arrive again, as they
    // would in Erlang.
    let deadline = Instant::now() + PATIENCE;
    let outcome = loop {
        let (arrived, next) = b.collected();
        assert!(next <= sent, "number {} arrived, of {sent} sent", next - 1);
        if let Some(down) = monitor.try_down() {
            assert_eq!(down.reason, ExitReason::NoConnection);
            let holes = next - arrived;
            break Outcome::LossReported {
                sent,
                arrived,
                holes,
            };
        }
        if arrived == sent && !refused {
            break Outcome::AllArrived { sent };
        }
        assert!(
            Instant::now() < deadline,
            "a silent loss: {arrived} of {sent} numbers arrived (the last {}), and no \
             NoConnection was reported within {PATIENCE:?}",
            next.saturating_sub(1)
        );
        thread::sleep(Duration::from_millis(5));
    };
    eprintln!("across the restart: {outcome:?}");
    // Frames from `b` lost in the restart show as a gap at the first frame from `b`
    // that `a` gets once it has subscribed again (it had before the numbers that
    // went out after the restart reached `b`): wait for one, so that such a loss,
    // if any, has been reported before the nodes are checked.
    let from_b = || {
        cluster(&a)
            .metrics()
            .peers
            .into_iter()
            .find(|peer| peer.node == "b")
            .map(|peer| (peer.incarnation, peer.bytes_in))
    };
    if let Some((b_then, bytes_then)) = from_b() {
        until("a hears from b again, or declares it down", || {
            from_b().is_none_or(|(b_now, bytes_now)| b_now != b_then || bytes_now > bytes_then)
        });
    }

    // No process was lost: once the two nodes see each other again (as new
    // incarnations if a loss was reported), each one's processes answer the other,
    // found under the names they took before the restart.
    until("a and b see each other again", || {
        let (incarnation, peers) = b.me();
        sees(&a, "b", incarnation) && peers.contains(&cluster(&a).me().to_string())
    });
    assert_eq!(b.ask("call echo-a", "called"), "42");
    let mut seen = Vec::new();
    while let Some(event) = events.try_recv::<NodeEvent>() {
        seen.push(event);
    }
    eprintln!("a's node events: {seen:?}");
    let echo_b = find(&a, "echo-b");
    assert_eq!(a.call::<u64, u64>(echo_b, 3, PATIENCE).unwrap(), 6);
    let collector_b = find(&a, "collector-b");
    let (arrived, next) = b.collected();
    assert_eq!(
        a.call::<u64, u64>(collector_b, 0, PATIENCE).unwrap(),
        arrived
    );
    match outcome {
        Outcome::AllArrived { sent } => assert_eq!((arrived, next), (sent, sent)),
        // A hole stays: what arrives later is larger than all before it.
        Outcome::LossReported {
            sent,
            arrived: by_then,
            holes,
        } => assert!(by_then <= arrived && next <= sent && next - arrived >= holes),
    }
    b.finish();
    a.shutdown(PATIENCE);
}
