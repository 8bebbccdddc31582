//! `cluster_rtt` and `cluster_throughput` (the bench crate's `cluster` feature):
//! two wsched nodes over the NATS transport, against a bare `async-nats`
//! request/reply on the same server and against two Erlang nodes over Erlang
//! distribution, all on loopback.
//!
//! * **The server.** Each case starts its own `nats-server -js` on a free loopback
//!   port with a fresh store (the tests' harness, `wsched/tests/support/
//!   nats_server.rs`), and kills it at the end. Without `nats-server` on the PATH
//!   the case is SKIPPED (`apt-get install nats-server`); without `escript` only
//!   the Erlang peer is (`apt-get install erlang-base`).
//! * **wsched**: two schedulers in this process, nodes `a` and `b` of `--workers`
//!   workers each, each joined through its own [`NatsTransport`] (its own
//!   connection and thread). A run spawns a fresh `#[process]` on `a`, which
//!   spawns its partner on `b` with `yield_cmd!(SpawnOn)` (untimed), then:
//!   round trips: `this::send(pong, Ping { n, reply_to })`, `recv!(Pong)`, each
//!   timed with `Instant`; throughput: `this::send(counter, i)` for `i` in
//!   `0..M` (plain `u64`s), and the counter on `b`, which checks each is the next,
//!   answers once after the last; timed from the first send to the answer.
//! * **bare NATS**: two `async-nats` clients (as the transport makes them: one
//!   connection each, a current-thread tokio runtime on a thread of its own).
//!   Round trips: `client_a.request("bench.rtt", 8 bytes)`, a responder task on
//!   client b publishing the payload back to the reply subject. Throughput: client
//!   a publishes `0..M` as 8-byte messages to a subscriber task on client b that
//!   checks each is the next and publishes the count back once.
//! * **Erlang**: `bench/erlang/dist_pingpong.erl`, an escript that starts itself
//!   distributed and a second node with `peer:start_link`, both with `--workers`
//!   schedulers, and then runs the same two protocols between a process on each
//!   node on command, timing itself (start-up excluded).
//!
//! The peers are started once per case (untimed; a wsched node joins in well under
//! a second, an Erlang peer node starts in about 0.3 s); each run spawns fresh
//! processes (tasks, subscriptions) on them. One untimed warm-up run per peer,
//! then `reps` runs interleaved (A B C, C B A, …), every result checked.

#[path = "../../../wsched/tests/support/nats_server.rs"]
mod nats_server;

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use async_nats::{Client, ConnectOptions, RequestErrorKind};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use wsched::cluster::{Cluster, ClusterConfig, NatsTransport, NodeEvent, SpawnOn};
use wsched::prelude::*;
use wsched::{Inbox, Scheduler};

use crate::harness::{fmt_secs, median, percentile, Report};
use crate::wsched_side::{finish, wait, WAIT};
use nats_server::NatsServer;

/// How a case runs: the suite's options.
pub struct Case {
    workers: usize,
    reps: usize,
    sizes: Sizes,
    /// Whether to run the Erlang peer (not with `--no-peers`).
    erlang: bool,
}

impl Case {
    pub fn new(workers: usize, reps: usize, quick: bool, erlang: bool) -> Self {
        Self {
            workers,
            reps,
            sizes: Sizes::new(quick),
            erlang,
        }
    }
}

/// How many round trips and messages a run makes. A throughput run stays below
/// 65,536 messages, the most frames the NATS transport queues for the broker
/// (`NatsOptions::max_queued`) and the most messages async-nats holds for one
/// subscription before it drops them as a slow consumer's: a burst the sending
/// transport cannot hand on as fast as it comes overflows the first, one the
/// receiving client cannot take overflows the second, and either way the receiver
/// sees a gap and declares the sender down (`LostFrames`), so the run fails. Such
/// bursts are no steady state either: wsched's remote sends have no backpressure,
/// Erlang's sender is suspended while the distribution buffer is busy (see
/// BENCHMARKS.md).
struct Sizes {
    round_trips: u64,
    messages: u64,
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                round_trips: 500,
                messages: 10_000,
            }
        } else {
            Self {
                round_trips: 10_000,
                messages: 50_000,
            }
        }
    }
}

/// How long a process waits for a message before its run fails (shorter than the
/// bench thread's [`WAIT`], so that the process's own error is what is reported).
const PATIENCE: Duration = Duration::from_secs(30);

/// The escript of the Erlang peer.
fn escript() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("erlang/dist_pingpong.erl")
}

fn on_path(binary: &str) -> bool {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .any(|dir| dir.join(binary).is_file())
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

// ---------------------------------------------------------------- the measurements

/// One run of round trips: percentiles over its round trips, in seconds.
#[derive(Clone, Copy, Debug)]
struct Rtt {
    p50: f64,
    p99: f64,
}

impl Rtt {
    fn of(mut nanos: Vec<u64>, expected: u64) -> Result<Self, String> {
        crate::harness::check("round trips", nanos.len() as u64, expected)?;
        nanos.sort_unstable();
        let seconds: Vec<f64> = nanos.iter().map(|&ns| ns as f64 * 1e-9).collect();
        Ok(Self {
            p50: percentile(&seconds, 50.0),
            p99: percentile(&seconds, 99.0),
        })
    }
}

/// One side of the comparison, started once per case.
trait Side {
    fn label(&self) -> String;
    /// `n` sequential round trips; each one's latency.
    fn rtt(&mut self, n: u64) -> Result<Rtt, String>;
    /// `m` messages one way and one answer: the time from the first send to the
    /// answer.
    fn throughput(&mut self, m: u64) -> Result<Duration, String>;
    /// Stops it; whether it stopped cleanly.
    fn finish(self: Box<Self>) -> Result<(), String> {
        Ok(())
    }
}

// ---------------------------------------------------------------- wsched

/// A round trip's request; `n == STOP` ends the ponger.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Ping {
    n: u64,
    reply_to: Pid,
}

const STOP: u64 = u64::MAX;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Pong(u64);

/// The counter's one answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Counted {
    All(u64),
    OutOfOrder { got: u64, expected: u64 },
}

/// On `a`: spawns a [`Ponger`] on `b`, then makes `n` round trips to it.
struct Pinger;

#[process]
impl Pinger {
    #[entry]
    fn run(&mut self, n: u64) -> Result<Vec<u64>, BoxError> {
        let pong = yield_cmd!(SpawnOn::new("b", Ponger::SERVE, ()))??;
        let me = this::pid();
        let mut latencies = Vec::with_capacity(n as usize);
        for i in 0..n {
            let started = Instant::now();
            this::send(pong, Ping { n: i, reply_to: me })?;
            let Pong(got) = recv!(Pong, timeout = PATIENCE)?;
            latencies.push(started.elapsed().as_nanos() as u64);
            if got != i {
                return Err(format!("round trip {i} got the pong of {got}").into());
            }
        }
        this::send(
            pong,
            Ping {
                n: STOP,
                reply_to: me,
            },
        )?;
        Ok(latencies)
    }
}

/// On `b`: answers each ping with its number.
struct Ponger;

#[process]
impl Ponger {
    #[entry]
    fn serve(&mut self) -> Result<(), BoxError> {
        loop {
            let ping = recv!(Ping, timeout = PATIENCE)?;
            if ping.n == STOP {
                return Ok(());
            }
            this::send(ping.reply_to, Pong(ping.n))?;
        }
    }
}

/// On `a`: spawns a [`Counter`] on `b`, sends it `0..m`, waits for its answer;
/// the nanoseconds from the first send to the answer.
struct Sender;

#[process]
impl Sender {
    #[entry]
    fn run(&mut self, m: u64) -> Result<u64, BoxError> {
        let counter = yield_cmd!(SpawnOn::new("b", Counter::COUNT, (m, this::pid())))??;
        let started = Instant::now();
        for i in 0..m {
            this::send(counter, i)?;
        }
        let counted = recv!(Counted, timeout = PATIENCE)?;
        let wall = started.elapsed().as_nanos() as u64;
        match counted {
            Counted::All(count) if count == m => Ok(wall),
            other => Err(format!("the counter answered {other:?}, expected All({m})").into()),
        }
    }
}

/// On `b`: receives `total` `u64`s, each the next, and answers once.
struct Counter;

#[process]
impl Counter {
    #[entry]
    fn count(&mut self, total: u64, report: Pid) -> Result<(), BoxError> {
        for expected in 0..total {
            let got = recv!(u64, timeout = PATIENCE)?;
            if got != expected {
                this::send(report, Counted::OutOfOrder { got, expected })?;
                return Ok(());
            }
        }
        this::send(report, Counted::All(total))?;
        Ok(())
    }
}

struct Wsched {
    workers: usize,
    a: Option<Scheduler>,
    b: Option<Scheduler>,
    transports: Vec<Arc<NatsTransport>>,
    /// On each node, an inbox watching the nodes come and go (for a failure's
    /// explanation).
    events: Vec<Inbox>,
}

impl Wsched {
    fn node(
        url: &str,
        name: &str,
        workers: usize,
    ) -> Result<(Scheduler, Arc<NatsTransport>), String> {
        let transport = Arc::new(
            NatsTransport::connect(url, "bench").map_err(|e| format!("node {name}: {e}"))?,
        );
        let config = ClusterConfig::new(name, transport.clone())
            .register::<Ping>("BenchPing")
            .register::<Pong>("BenchPong")
            .register::<Counted>("BenchCounted")
            .spawnable(Ponger::SERVE, || Ponger)
            .spawnable(Counter::COUNT, || Counter);
        let scheduler = Scheduler::builder()
            .workers(workers)
            .cluster(config)
            .build()
            .map_err(|e| format!("node {name}: {e}"))?;
        Ok((scheduler, transport))
    }

    fn start(url: &str, workers: usize) -> Result<Self, String> {
        let (a, ta) = Self::node(url, "a", workers)?;
        let (b, tb) = Self::node(url, "b", workers)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        let sees = |from: &Scheduler, peer: &str| {
            Cluster::of(&from.handle()).is_some_and(|c| c.nodes().iter().any(|n| n.name() == peer))
        };
        while !(sees(&a, "b") && sees(&b, "a")) {
            if Instant::now() > deadline {
                return Err("nodes a and b did not see each other within 20 s".into());
            }
            thread::sleep(Duration::from_millis(2));
        }
        let mut events = Vec::new();
        for node in [&a, &b] {
            let inbox = node.inbox().map_err(err)?;
            if let Some(cluster) = Cluster::of(&node.handle()) {
                cluster.watch_nodes(inbox.pid());
            }
            events.push(inbox);
        }
        Ok(Self {
            workers,
            a: Some(a),
            b: Some(b),
            transports: vec![ta, tb],
            events,
        })
    }

    fn a(&self) -> &Scheduler {
        self.a.as_ref().expect("running")
    }

    /// Why a run failed: with the nodes' events since the start, each node's view
    /// of its peers, and what the transports dropped.
    fn explain(&self, e: String) -> String {
        let mut why = e;
        let nodes = [self.a.as_ref(), self.b.as_ref()];
        for ((node, inbox), transport) in nodes.iter().zip(&self.events).zip(&self.transports) {
            let Some(cluster) = node.and_then(|n| Cluster::of(&n.handle())) else {
                continue;
            };
            let metrics = cluster.metrics();
            let mut events = Vec::new();
            while let Some(event) = inbox.try_recv::<NodeEvent>() {
                events.push(format!("{event:?}"));
            }
            let peers: Vec<String> = metrics
                .peers
                .iter()
                .map(|p| {
                    format!(
                        "{}#{}: {} messages out, {} in",
                        p.node, p.incarnation, p.messages_out, p.messages_in
                    )
                })
                .collect();
            why += &format!(
                "; node {}#{}: peers up [{}], frames queued {}, dropped by its transport {}, \
                 node events [{}]",
                metrics.node,
                metrics.incarnation,
                peers.join(", "),
                metrics.queued_frames,
                transport.dropped(),
                events.join(", ")
            );
        }
        why
    }
}

impl Side for Wsched {
    fn label(&self) -> String {
        format!(
            "wsched over NATS ({} worker{} a node)",
            self.workers,
            if self.workers == 1 { "" } else { "s" }
        )
    }

    fn rtt(&mut self, n: u64) -> Result<Rtt, String> {
        let a = self.a();
        let pinger = a.spawn(Pinger, Pinger::RUN, (n,)).map_err(err)?;
        let latencies = wait::<Vec<u64>>(a, pinger).map_err(|e| self.explain(e))?;
        Rtt::of(latencies, n)
    }

    fn throughput(&mut self, m: u64) -> Result<Duration, String> {
        let a = self.a();
        let sender = a.spawn(Sender, Sender::RUN, (m,)).map_err(err)?;
        let nanos = wait::<u64>(a, sender).map_err(|e| self.explain(e))?;
        Ok(Duration::from_nanos(nanos))
    }

    fn finish(mut self: Box<Self>) -> Result<(), String> {
        self.events.clear();
        let a = self.a.take().map(finish).unwrap_or(Ok(()));
        let b = self.b.take().map(finish).unwrap_or(Ok(()));
        a.map_err(|e| format!("node a: {e}"))?;
        b.map_err(|e| format!("node b: {e}"))
    }
}

// ---------------------------------------------------------------- bare NATS

/// A current-thread tokio runtime driven by a thread of its own, as the NATS
/// transport runs its client.
struct Driver {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Driver {
    fn start(name: &str) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(err)?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .map_err(err)?;
        Ok(Self {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Runs `future` on the runtime and waits for it (at most [`WAIT`]).
    fn run<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T, String>> + Send + 'static,
    ) -> Result<T, String> {
        let (tx, rx) = mpsc::sync_channel(1);
        drop(self.handle.spawn(async move {
            let _ = tx.send(future.await);
        }));
        rx.recv_timeout(WAIT)
            .map_err(|_| format!("no result within {WAIT:?}"))?
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The messages a subscription of the bare peer may hold before the client drops
/// them as a slow consumer's (async-nats's default is 65,536): more than a run
/// sends, so that the bare peer, like wsched's unbounded mailboxes, never drops.
const SUBSCRIPTION_CAPACITY: usize = 1 << 20;

/// One client on its own runtime.
struct NatsClient {
    client: Client,
    driver: Driver,
}

impl NatsClient {
    fn connect(url: &str, name: &str) -> Result<Self, String> {
        let driver = Driver::start(name)?;
        let url = url.to_owned();
        let client = driver.run(async move {
            ConnectOptions::new()
                .client_capacity(2048)
                .subscription_capacity(SUBSCRIPTION_CAPACITY)
                .connect(url.as_str())
                .await
                .map_err(err)
        })?;
        Ok(Self { client, driver })
    }

    /// Subscribes to `subject`, live once this returns: as the transport does, a
    /// request nobody answers makes the server answer "no responders" once it has
    /// handled everything this connection sent before (`flush` only writes out).
    fn subscribe(&self, subject: &'static str) -> Result<async_nats::Subscriber, String> {
        let client = self.client.clone();
        self.driver.run(async move {
            let subscriber = client.subscribe(subject).await.map_err(err)?;
            match client.request(client.new_inbox(), Bytes::new()).await {
                Err(e) if e.kind() == RequestErrorKind::NoResponders => Ok(subscriber),
                Err(e) => Err(format!("subscribing to {subject}: {e}")),
                Ok(_) => Err(format!("subscribing to {subject}: an answer from nobody")),
            }
        })
    }
}

struct BareNats {
    a: NatsClient,
    b: NatsClient,
}

impl BareNats {
    fn start(url: &str) -> Result<Self, String> {
        Ok(Self {
            a: NatsClient::connect(url, "bench-nats-a")?,
            b: NatsClient::connect(url, "bench-nats-b")?,
        })
    }
}

impl Side for BareNats {
    fn label(&self) -> String {
        "bare NATS (async-nats)".to_owned()
    }

    fn rtt(&mut self, n: u64) -> Result<Rtt, String> {
        const SUBJECT: &str = "bench.rtt";
        let mut requests = self.b.subscribe(SUBJECT)?;
        let b = self.b.client.clone();
        let responder = self.b.driver.handle.spawn(async move {
            let mut answered = 0;
            while answered < n {
                let Some(request) = requests.next().await else {
                    break;
                };
                let Some(reply) = request.reply else { continue };
                b.publish(reply, request.payload).await.map_err(err)?;
                answered += 1;
            }
            requests.unsubscribe().await.map_err(err)?;
            Ok::<u64, String>(answered)
        });
        let a = self.a.client.clone();
        let latencies = self.a.driver.run(async move {
            let mut latencies = Vec::with_capacity(n as usize);
            for i in 0..n {
                let payload = Bytes::copy_from_slice(&i.to_le_bytes());
                let started = Instant::now();
                let reply = a.request(SUBJECT, payload.clone()).await.map_err(err)?;
                latencies.push(started.elapsed().as_nanos() as u64);
                if reply.payload != payload {
                    return Err(format!(
                        "round trip {i}: the reply differs from the request"
                    ));
                }
            }
            Ok(latencies)
        })?;
        let answered = self
            .a
            .driver
            .run(async move { responder.await.map_err(err)? })?;
        crate::harness::check("requests answered", answered, n)?;
        Rtt::of(latencies, n)
    }

    fn throughput(&mut self, m: u64) -> Result<Duration, String> {
        const SUBJECT: &str = "bench.tput";
        const DONE: &str = "bench.tput.done";
        let mut messages = self.b.subscribe(SUBJECT)?;
        let mut done = self.a.subscribe(DONE)?;
        let b = self.b.client.clone();
        let counter = self.b.driver.handle.spawn(async move {
            let mut answer = m;
            for expected in 0..m {
                let Some(message) = messages.next().await else {
                    answer = u64::MAX;
                    break;
                };
                let got = <[u8; 8]>::try_from(&message.payload[..])
                    .ok()
                    .map(u64::from_le_bytes);
                if got != Some(expected) {
                    answer = expected;
                    break;
                }
            }
            b.publish(DONE, Bytes::copy_from_slice(&answer.to_le_bytes()))
                .await
                .map_err(err)?;
            messages.unsubscribe().await.map_err(err)
        });
        let a = self.a.client.clone();
        let (wall, answer) = self.a.driver.run(async move {
            let started = Instant::now();
            for i in 0..m {
                a.publish(SUBJECT, Bytes::copy_from_slice(&i.to_le_bytes()))
                    .await
                    .map_err(err)?;
            }
            let answer = done.next().await.ok_or("the done subscription ended")?;
            let wall = started.elapsed();
            done.unsubscribe().await.map_err(err)?;
            let answer = <[u8; 8]>::try_from(&answer.payload[..])
                .map(u64::from_le_bytes)
                .map_err(err)?;
            Ok((wall, answer))
        })?;
        self.a
            .driver
            .run(async move { counter.await.map_err(err)? })?;
        if answer != m {
            return Err(format!(
                "the subscriber counted in order up to {answer} of {m} (u64::MAX: its \
                 subscription ended)"
            ));
        }
        Ok(wall)
    }
}

// ---------------------------------------------------------------- Erlang

/// The escript, answering commands on its stdin.
struct Erlang {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// Its `ready` line: the OTP release and schedulers.
    ready: String,
}

impl Erlang {
    fn start(workers: usize) -> Result<Self, String> {
        let script = escript();
        let mut child = Command::new("escript")
            .arg(&script)
            .arg(workers.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("escript {}: {e}", script.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        thread::Builder::new()
            .name("bench-erlang-out".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { return };
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            })
            .map_err(err)?;
        let mut erlang = Self {
            child,
            stdin,
            lines,
            ready: String::new(),
        };
        let ready = erlang.line(Duration::from_secs(60))?;
        match ready.strip_prefix("ready ") {
            Some(ready) => erlang.ready = ready.to_owned(),
            None => return Err(format!("the escript said {ready:?}, not `ready ...`")),
        }
        Ok(erlang)
    }

    fn line(&mut self, within: Duration) -> Result<String, String> {
        self.lines.recv_timeout(within).map_err(|_| {
            let exited = self.child.try_wait().ok().flatten();
            format!("no answer from the Erlang escript within {within:?} (exited: {exited:?})")
        })
    }

    /// Sends `command`, returns the fields of its `ok` answer.
    fn ask(&mut self, command: &str) -> Result<Vec<(String, u64)>, String> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("writing to the escript: {e}"))?;
        let answer = self.line(WAIT)?;
        let verb = command.split(' ').next().unwrap_or_default();
        let fields = answer
            .strip_prefix(&format!("{verb} ok "))
            .ok_or_else(|| format!("the Erlang peer answered {answer:?}"))?;
        fields
            .split(' ')
            .map(|field| {
                let (key, value) = field
                    .split_once('=')
                    .ok_or_else(|| format!("bad field {field:?} in {answer:?}"))?;
                Ok((key.to_owned(), value.parse::<u64>().map_err(err)?))
            })
            .collect()
    }
}

fn field(fields: &[(String, u64)], key: &str) -> Result<u64, String> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
        .ok_or_else(|| format!("the Erlang peer's answer has no {key}"))
}

impl Side for Erlang {
    fn label(&self) -> String {
        // "otp=25 schedulers=2 peer=..."
        let otp = self
            .ready
            .split(' ')
            .find_map(|f| f.strip_prefix("otp="))
            .unwrap_or("?");
        let schedulers = self
            .ready
            .split(' ')
            .find_map(|f| f.strip_prefix("schedulers="))
            .unwrap_or("?");
        let plural = if schedulers == "1" { "" } else { "s" };
        format!("Erlang distribution (OTP {otp}, {schedulers} scheduler{plural} a node)")
    }

    fn rtt(&mut self, n: u64) -> Result<Rtt, String> {
        let fields = self.ask(&format!("rtt {n}"))?;
        crate::harness::check("round trips", field(&fields, "n")?, n)?;
        Ok(Rtt {
            p50: field(&fields, "p50_ns")? as f64 * 1e-9,
            p99: field(&fields, "p99_ns")? as f64 * 1e-9,
        })
    }

    fn throughput(&mut self, m: u64) -> Result<Duration, String> {
        let fields = self.ask(&format!("tput {m}"))?;
        crate::harness::check("messages counted", field(&fields, "n")?, m)?;
        Ok(Duration::from_nanos(field(&fields, "wall_ns")?))
    }

    fn finish(mut self: Box<Self>) -> Result<(), String> {
        let _ = writeln!(self.stdin, "quit").and_then(|()| self.stdin.flush());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!("the Erlang escript exited with {status}"))
                };
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err("the Erlang escript did not quit within 10 s".into())
    }
}

impl Drop for Erlang {
    fn drop(&mut self) {
        // After `finish` it has exited; on a failure path, it must not outlive us.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------- the cases

/// Every side, in the order of the report: bare NATS, wsched, Erlang (if
/// `escript` is there). The server is dropped (killed) after them.
struct Setup {
    sides: Vec<Box<dyn Side>>,
    erlang_skipped: Option<String>,
    server: NatsServer,
}

enum Start {
    Skipped(String),
    Failed(String),
}

impl Setup {
    fn start(workers: usize, erlang: bool) -> Result<Self, Start> {
        if !on_path("nats-server") {
            return Err(Start::Skipped(
                "nats-server is not on the PATH: apt-get install nats-server".into(),
            ));
        }
        let server = std::panic::catch_unwind(NatsServer::start)
            .map_err(|_| Start::Failed("nats-server did not start (see above)".into()))?;
        let url = server.url();
        let mut sides: Vec<Box<dyn Side>> = vec![
            Box::new(BareNats::start(&url).map_err(Start::Failed)?),
            Box::new(Wsched::start(&url, workers).map_err(Start::Failed)?),
        ];
        let erlang_skipped = if !erlang {
            Some("--no-peers".to_owned())
        } else if on_path("escript") {
            sides.push(Box::new(Erlang::start(workers).map_err(Start::Failed)?));
            None
        } else {
            Some("escript is not on the PATH: apt-get install erlang-base".to_owned())
        };
        Ok(Self {
            sides,
            erlang_skipped,
            server,
        })
    }

    /// A warm-up run of each side, then `reps` interleaved runs; each side's
    /// samples.
    fn interleave<S>(
        &mut self,
        reps: usize,
        once: impl Fn(&mut dyn Side) -> Result<S, String>,
    ) -> Result<Vec<Vec<S>>, String> {
        let mut samples: Vec<Vec<S>> = self.sides.iter().map(|_| Vec::new()).collect();
        for side in &mut self.sides {
            let label = side.label();
            once(side.as_mut()).map_err(|e| format!("warm-up, {label}: {e}"))?;
        }
        eprint!("w");
        for rep in 0..reps {
            let order: Vec<usize> = if rep % 2 == 0 {
                (0..self.sides.len()).collect()
            } else {
                (0..self.sides.len()).rev().collect()
            };
            for i in order {
                let side = &mut self.sides[i];
                let sample = once(side.as_mut())
                    .map_err(|e| format!("repetition {}, {}: {e}", rep + 1, side.label()))?;
                samples[i].push(sample);
            }
            eprint!(".");
        }
        Ok(samples)
    }

    /// Stops every side, then the server.
    fn finish(self) -> Result<(), String> {
        let mut result = Ok(());
        for side in self.sides {
            let label = side.label();
            if let Err(e) = side.finish() {
                result = result.and(Err(format!("stopping {label}: {e}")));
            }
        }
        drop(self.server);
        result
    }
}

/// What a case measured: each side's label and samples (in the order of
/// [`Setup::sides`]), and why the Erlang peer was skipped, if it was.
struct Measured<S> {
    labels: Vec<String>,
    samples: Vec<Vec<S>>,
    erlang_skipped: Option<String>,
}

/// Starts the sides, runs `once` interleaved; what was measured, or `None` once
/// reported (skipped or failed).
fn run_case<S>(
    report: &mut Report,
    name: &str,
    case: &Case,
    once: impl Fn(&mut dyn Side) -> Result<S, String>,
) -> Option<Measured<S>> {
    eprint!("{name:<24} ");
    let started = Instant::now();
    let mut setup = match Setup::start(case.workers, case.erlang) {
        Ok(setup) => setup,
        Err(Start::Skipped(why)) => {
            eprintln!("SKIPPED: {why}");
            report.section(format!("**{name}**: SKIPPED: {why}."));
            return None;
        }
        Err(Start::Failed(e)) => {
            eprintln!();
            report.fail(name, &e);
            return None;
        }
    };
    let labels: Vec<String> = setup.sides.iter().map(|s| s.label()).collect();
    let erlang_skipped = setup.erlang_skipped.clone();
    let result = setup.interleave(case.reps, once);
    let finished = setup.finish();
    eprintln!(" {:.1} s", started.elapsed().as_secs_f64());
    if let Some(why) = &erlang_skipped {
        eprintln!("  Erlang peer SKIPPED: {why}");
    }
    match result.and_then(|samples| finished.map(|()| samples)) {
        Ok(samples) => Some(Measured {
            labels,
            samples,
            erlang_skipped,
        }),
        Err(e) => {
            report.fail(name, &e);
            None
        }
    }
}

/// The median, min and max of `f` over `samples`.
fn spread<S>(samples: &[S], f: impl Fn(&S) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = samples.iter().map(f).collect();
    let (lo, hi) = (
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(0.0, f64::max),
    );
    (median(&mut v), lo, hi)
}

/// The median, min and max of the per-repetition ratios `f(a) ÷ f(b)`.
fn ratios<S>(a: &[S], b: &[S], f: impl Fn(&S) -> f64) -> (f64, f64, f64) {
    let r: Vec<f64> = a.iter().zip(b).map(|(a, b)| f(a) / f(b)).collect();
    spread(&r, |&x| x)
}

const NATS: usize = 0;
const WSCHED: usize = 1;
const ERLANG: usize = 2;

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

/// `cluster_rtt`: `n` sequential round trips a run.
pub fn cluster_rtt(report: &mut Report, case: &Case) {
    let (n, reps) = (case.sizes.round_trips, case.reps);
    let Some(Measured {
        labels,
        samples,
        erlang_skipped,
    }) = run_case(report, "cluster_rtt", case, |side| side.rtt(n))
    else {
        return;
    };
    let mut md = format!(
        "**Remote ping-pong round trip** (`cluster_rtt`), {n} sequential round trips a run \
         between two nodes on loopback ({reps} runs interleaved after a warm-up; p50 and p99 \
         over each run's round trips, then the median over the runs, with min–max)\n\n\
         | peer | p50 | p50 min–max | p99 | p99 min–max |\n|---|---|---|---|---|"
    );
    for (label, s) in labels.iter().zip(&samples) {
        let (p50, p50_lo, p50_hi) = spread(s, |r| r.p50);
        let (p99, p99_lo, p99_hi) = spread(s, |r| r.p99);
        md += &format!(
            "\n| {label} | {} | {}–{} | {} | {}–{} |",
            fmt_secs(p50),
            fmt_secs(p50_lo),
            fmt_secs(p50_hi),
            fmt_secs(p99),
            fmt_secs(p99_lo),
            fmt_secs(p99_hi),
        );
    }
    md += "\n\n| ratio (median of per-run, min–max) | p50 | p99 |\n|---|---|---|";
    let (p50, lo, hi) = ratios(&samples[WSCHED], &samples[NATS], |r| r.p50);
    let (p99, lo99, hi99) = ratios(&samples[WSCHED], &samples[NATS], |r| r.p99);
    md += &format!(
        "\n| wsched ÷ bare NATS (target ≤ 1.5) | **{p50:.2}** ({lo:.2}–{hi:.2}), {} | \
         {p99:.2} ({lo99:.2}–{hi99:.2}) |",
        met(p50 <= 1.5)
    );
    match &erlang_skipped {
        None => {
            let (p50, lo, hi) = ratios(&samples[WSCHED], &samples[ERLANG], |r| r.p50);
            let (p99, lo99, hi99) = ratios(&samples[WSCHED], &samples[ERLANG], |r| r.p99);
            md += &format!(
                "\n| wsched ÷ Erlang (information) | {p50:.2} ({lo:.2}–{hi:.2}) | \
                 {p99:.2} ({lo99:.2}–{hi99:.2}) |"
            );
        }
        Some(why) => md += &format!("\n| wsched ÷ Erlang | SKIPPED: {why} | |"),
    }
    report.section(md);
}

/// `cluster_throughput`: `m` messages one way a run.
pub fn cluster_throughput(report: &mut Report, case: &Case) {
    let (m, reps) = (case.sizes.messages, case.reps);
    let Some(Measured {
        labels,
        samples,
        erlang_skipped,
    }) = run_case(report, "cluster_throughput", case, |side| {
        side.throughput(m)
    })
    else {
        return;
    };
    let per_sec = |wall: &Duration| m as f64 / wall.as_secs_f64();
    let mut md = format!(
        "**One-way throughput** (`cluster_throughput`), {m} `u64` messages a run from a \
         process on one node to one on the other, which checks their order and answers \
         once ({reps} runs interleaved after a warm-up; median over the runs, with \
         min–max)\n\n\
         | peer | messages/s | min–max | time a run |\n|---|---|---|---|"
    );
    for (label, s) in labels.iter().zip(&samples) {
        let (rate, lo, hi) = spread(s, per_sec);
        let (wall, _, _) = spread(s, Duration::as_secs_f64);
        md += &format!(
            "\n| {label} | {rate:.0} | {lo:.0}–{hi:.0} | {} |",
            fmt_secs(wall)
        );
    }
    md += "\n\n| ratio (median of per-run, min–max) | messages/s |\n|---|---|";
    match &erlang_skipped {
        None => {
            let (r, lo, hi) = ratios(&samples[WSCHED], &samples[ERLANG], per_sec);
            md += &format!(
                "\n| wsched ÷ Erlang (target ≥ 1.0) | **{r:.2}** ({lo:.2}–{hi:.2}), {} |",
                met(r >= 1.0)
            );
        }
        Some(why) => md += &format!("\n| wsched ÷ Erlang | SKIPPED: {why} |"),
    }
    let (r, lo, hi) = ratios(&samples[WSCHED], &samples[NATS], per_sec);
    md += &format!("\n| wsched ÷ bare NATS (information) | {r:.2} ({lo:.2}–{hi:.2}) |");
    report.section(md);
}
