//! A job spread over three nodes, each a separate OS process, joined through a NATS
//! server (the cluster layer's `nats` feature): one node loses its worker mid-job to
//! a `kill -9`, and the job completes anyway.
//!
//! * the **launcher** (this program run without arguments) starts `nats-server` on a
//!   free loopback port, with JetStream in a scratch directory, and three nodes: this
//!   program run again as `cluster node NAME URL`;
//! * **node1** waits until it sees node2 and node3 up, starts a worker on each by
//!   typed entry (`Cluster::spawn_on`, the entry offered there with
//!   `ClusterConfig::spawnable`), and runs the **coordinator**: it hands out the
//!   items 1..=40 round-robin (`Work` messages across nodes), monitors both workers
//!   and collects their squares;
//! * as soon as node3's first result arrives, the launcher `kill -9`s node3. After
//!   a second of silence its worker's monitor fires with `noconnection`, and the
//!   coordinator hands the items node3 left unfinished to the worker that is left;
//! * the coordinator returns the sum of the squares, which node1 checks against
//!   n(n+1)(2n+1)/6.
//!
//! `cargo run -p wsched-examples --features nats --example cluster` (needs
//! `nats-server` on the PATH: `apt-get install nats-server`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use std::{env, fs, thread};

use serde::{Deserialize, Serialize};
use wsched::cluster::{Cluster, ClusterConfig, NatsTransport};
use wsched::command::Sleep;
use wsched::prelude::*;
use wsched::{Down, Scheduler};

/// The items: 1..=ITEMS, squared and summed.
const ITEMS: u64 = 40;

/// How long a worker takes over one item (a stand-in for real work).
const WORK: Duration = Duration::from_millis(50);

/// A node silent this long is declared down (the default is 2 s).
const SILENCE: Duration = Duration::from_secs(1);

/// A hang guard for every wait, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(30);

/// The cluster's name: its NATS subjects and its JetStream bucket.
const CLUSTER: &str = "example";

// ---- across nodes: the messages, the worker, the coordinator -----------------------

/// "Square this item and tell `reply_to`."
#[derive(Debug, Serialize, Deserialize)]
struct Work {
    item: u64,
    reply_to: Pid,
}

/// A worker's answer.
#[derive(Debug, Serialize, Deserialize)]
struct Squared {
    item: u64,
    square: u64,
    worker: Pid,
}

/// Squares the items it is sent, one at a time.
struct Worker;

#[process]
impl Worker {
    #[entry]
    fn work(&mut self) -> Result<(), BoxError> {
        loop {
            let work = recv!(Work)?;
            yield_cmd!(Sleep(WORK))?;
            let squared = Squared {
                item: work.item,
                square: work.item * work.item,
                worker: this::pid(),
            };
            this::send(work.reply_to, squared)?;
        }
    }
}

/// Hands out the items, collects the squares, and re-dispatches the items of a
/// worker that goes down.
struct Coordinator;

enum Event {
    Done(Squared),
    Down(Down),
}

#[process]
impl Coordinator {
    #[entry]
    fn run(&mut self, workers: Vec<Pid>, items: u64) -> Result<u64, BoxError> {
        let mut live = workers.clone();
        let mut unfinished: HashMap<Pid, BTreeSet<u64>> = HashMap::new();
        for &worker in &workers {
            // A remote monitor: its `Down` comes when the worker ends, or with
            // `noconnection` when its node is declared down.
            this::monitor(worker);
            unfinished.insert(worker, BTreeSet::new());
        }
        for item in 1..=items {
            let worker = workers[(item as usize - 1) % workers.len()];
            send_work(worker, item)?;
            unfinished.get_mut(&worker).expect("a worker").insert(item);
        }
        println!(
            "coordinator: handed out items 1..={items} round-robin to {}; monitoring them",
            names(&workers)
        );

        let mut squares: BTreeMap<u64, u64> = BTreeMap::new();
        let mut done_by: HashMap<Pid, u64> = HashMap::new();
        let mut redispatched = 0;
        while (squares.len() as u64) < items {
            let event = recv! {
                done: Squared => Event::Done(done),
                down: Down => Event::Down(down),
            }?;
            match event {
                Event::Done(done) => {
                    if done.square != done.item * done.item {
                        return Err(format!("{} squared {} wrong", done.worker, done.item).into());
                    }
                    if let Some(items) = unfinished.get_mut(&done.worker) {
                        items.remove(&done.item);
                    }
                    let count = done_by.entry(done.worker).or_default();
                    *count += 1;
                    if *count == 1 {
                        println!(
                            "coordinator: first result from {}: {}² = {}",
                            done.worker, done.item, done.square
                        );
                    }
                    // Never twice: once its node is declared down, nothing more
                    // comes from a lost worker (its node's incarnation is refused
                    // for ever), so a re-dispatched item is squared only once.
                    if squares.insert(done.item, done.square).is_some() {
                        return Err(format!("item {} was squared twice", done.item).into());
                    }
                }
                Event::Down(down) => {
                    live.retain(|&worker| worker != down.pid);
                    let left = unfinished.remove(&down.pid).unwrap_or_default();
                    println!("coordinator: {down}");
                    if live.is_empty() {
                        return Err("every worker is down".into());
                    }
                    println!(
                        "coordinator: {} items it held were unfinished; handing them to {}",
                        left.len(),
                        names(&live)
                    );
                    redispatched += left.len();
                    for (i, item) in left.into_iter().enumerate() {
                        let worker = live[i % live.len()];
                        send_work(worker, item)?;
                        unfinished
                            .get_mut(&worker)
                            .expect("a live worker")
                            .insert(item);
                    }
                }
            }
        }
        let by: Vec<String> = workers
            .iter()
            .map(|worker| format!("{} by {worker}", done_by.get(worker).unwrap_or(&0)))
            .collect();
        println!(
            "coordinator: all {items} items squared, each once: {} ({redispatched} re-dispatched)",
            by.join(", "),
        );
        Ok(squares.values().sum())
    }
}

fn send_work(worker: Pid, item: u64) -> Result<(), BoxError> {
    let reply_to = this::pid();
    // A send to a worker whose node is already known to be down fails at once;
    // its `Down` is on its way, and re-dispatches the item.
    match this::send(worker, Work { item, reply_to }) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == wsched::SendErrorKind::NoConnection => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn names(workers: &[Pid]) -> String {
    let names: Vec<String> = workers.iter().map(Pid::to_string).collect();
    names.join(" and ")
}

// ---- a node: this program run as `cluster node NAME URL` ---------------------------

fn node(name: &str, url: &str) -> Result<(), Box<dyn std::error::Error>> {
    // A server that has just started has been seen to refuse a first connection
    // now and then, and to take the next: try again for a while.
    let deadline = Instant::now() + Duration::from_secs(10);
    let transport = loop {
        match NatsTransport::connect(url, CLUSTER) {
            Ok(transport) => break transport,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(e.into()),
        }
    };
    let config = ClusterConfig::new(name, Arc::new(transport))
        .silence(SILENCE)
        .register::<Work>("Work")
        .register::<Squared>("Squared")
        // Other nodes may start a `Worker` here, by its typed entry.
        .spawnable(Worker::WORK, || Worker);
    let scheduler = Scheduler::builder().workers(1).cluster(config).build()?;
    let cluster = Cluster::of(&scheduler.handle()).expect("in a cluster");
    if name != "node1" {
        // Serves until the launcher closes its stdin (or kills it).
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        scheduler.shutdown(PATIENCE);
        return Ok(());
    }

    println!(
        "node1: joined as {}; waiting for node2 and node3",
        cluster.me()
    );
    let deadline = Instant::now() + PATIENCE;
    while ["node2", "node3"]
        .iter()
        .any(|peer| !cluster.nodes().iter().any(|n| n.name() == *peer))
    {
        if Instant::now() > deadline {
            return Err(format!("node2 and node3 did not come up within {PATIENCE:?}").into());
        }
        thread::sleep(Duration::from_millis(10));
    }
    let workers = ["node2", "node3"]
        .iter()
        .map(|peer| cluster.spawn_on(peer, Worker::WORK, (), PATIENCE))
        .collect::<Result<Vec<Pid>, _>>()?;
    println!(
        "node1: started a worker on each with Cluster::spawn_on: {}",
        names(&workers)
    );
    let coordinator = scheduler.spawn(Coordinator, Coordinator::RUN, (workers, ITEMS))?;
    let sum = scheduler
        .wait_timeout(coordinator, PATIENCE)?
        .downcast::<u64>()?;
    let expected = ITEMS * (ITEMS + 1) * (2 * ITEMS + 1) / 6;
    if sum != expected {
        return Err(format!("the sum of squares is {sum}, not {expected}").into());
    }
    println!("node1: the sum of the squares of 1..={ITEMS} is {sum}, as n(n+1)(2n+1)/6 says");
    scheduler.shutdown(PATIENCE);
    Ok(())
}

// ---- the launcher ------------------------------------------------------------------

/// A child process, killed on drop unless it has exited.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Starts `nats-server` with JetStream on a free loopback port, storing in `dir`;
/// waits until it says it is ready (its log) and takes connections.
fn start_server(dir: &Path) -> Result<(Guard, String), Box<dyn std::error::Error>> {
    // Another program may bind the free port first: then try another.
    for _ in 0..3 {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let log_path = dir.join("server.log");
        let log = fs::File::create(&log_path)?;
        let server = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(dir.join("store"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    "nats-server is not on the PATH: install it: apt-get install nats-server"
                        .to_string()
                }
                _ => format!("cannot run nats-server: {e}"),
            })?;
        let mut server = Guard(server);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = fs::read_to_string(&log_path).unwrap_or_default();
            // Its own word first: the port alone could be another program's.
            if log.contains("Server is ready")
                && TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok()
            {
                return Ok((server, format!("nats://127.0.0.1:{port}")));
            }
            let exited = server.0.try_wait()?.is_some();
            if exited && log.contains("address already in use") {
                break;
            }
            if exited || Instant::now() > deadline {
                return Err(format!("nats-server did not come up:\n{log}").into());
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
    Err("nats-server found no free port in 3 tries".into())
}

fn launch() -> Result<(), Box<dyn std::error::Error>> {
    let scratch =
        Scratch(env::temp_dir().join(format!("wsched-example-cluster-{}", std::process::id())));
    fs::create_dir_all(&scratch.0)?;
    let (_server, url) = start_server(&scratch.0)?;
    println!("launcher: nats-server with JetStream at {url}");

    let exe = env::current_exe()?;
    // Each node's lines, then `None` when its output ends.
    let (lines, relayed) = mpsc::channel::<(String, Option<String>)>();
    let mut nodes: BTreeMap<String, Guard> = BTreeMap::new();
    for name in ["node1", "node2", "node3"] {
        let mut child = Command::new(&exe)
            .args(["node", name, &url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().expect("piped");
        let (lines, name) = (lines.clone(), name.to_owned());
        nodes.insert(name.clone(), Guard(child));
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send((name.clone(), Some(line)));
            }
            let _ = lines.send((name, None));
        });
    }
    drop(lines);
    let pids: Vec<String> = nodes
        .iter()
        .map(|(name, node)| format!("{name} (pid {})", node.0.id()))
        .collect();
    println!("launcher: started {}", pids.join(", "));

    // Relays what the nodes print, until node1 is done; kills node3 once its first
    // result is in (it holds unfinished items then: each takes a while).
    let mut killed = false;
    loop {
        let (name, line) = relayed
            .recv_timeout(PATIENCE)
            .map_err(|_| format!("node1 did not finish within {PATIENCE:?}"))?;
        let Some(line) = line else {
            if name == "node1" {
                break;
            }
            continue;
        };
        println!("  {name} | {line}");
        if !killed && line.contains("first result from") && line.contains("@node3>") {
            let node3 = &nodes["node3"].0;
            println!(
                "launcher: kill -9 node3 (pid {}) in the middle of its work",
                node3.id()
            );
            let status = Command::new("kill")
                .args(["-KILL", &node3.id().to_string()])
                .status()?;
            if !status.success() {
                return Err("kill -9 node3 failed".into());
            }
            killed = true;
        }
    }
    let mut node1 = nodes.remove("node1").expect("node1");
    let status = node1.0.wait()?;
    if !status.success() || !killed {
        return Err(format!("node1 ended with {status} (node3 killed: {killed})").into());
    }
    // Closing node2's stdin shuts it down.
    let mut node2 = nodes.remove("node2").expect("node2");
    drop(node2.0.stdin.take());
    let status = node2.0.wait()?;
    println!("launcher: node1 finished and node2 shut down ({status}); stopping the server");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => launch(),
        [role, name, url] if role == "node" => node(name, url),
        _ => Err("usage: cluster (the launcher) or cluster node NAME URL".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
