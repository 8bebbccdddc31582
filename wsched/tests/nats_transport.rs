//! The NATS transport against a real `nats-server -js` on loopback (the `nats`
//! feature): `cargo test -p wsched --features nats --test nats_transport`.
//!
//! Each test starts its own server (a free port, a fresh store). Nothing sleeps:
//! each step waits for what it needs (frames in a sink, a connection event, a
//! callback) up to `PATIENCE`, a hang guard.

#[path = "support/nats_server.rs"]
mod nats_server;

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use nats_server::NatsServer;
use parking_lot::{Condvar, Mutex};
use wsched::cluster::{Done, FrameSink, KvEntry, KvError, NatsOptions, NatsTransport, Transport};

const PATIENCE: Duration = Duration::from_secs(20);

/// A sink that keeps what it is given.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Seen>,
    changed: Condvar,
}

#[derive(Default)]
struct Seen {
    frames: Vec<Vec<u8>>,
    connected: Vec<bool>,
    threads: Vec<Option<String>>,
}

impl FrameSink for Recorder {
    fn frame(&self, frame: &[u8]) {
        let mut seen = self.seen.lock();
        seen.frames.push(frame.to_vec());
        if seen.threads.is_empty() {
            seen.threads
                .push(thread::current().name().map(str::to_owned));
        }
        self.changed.notify_all();
    }

    fn connected(&self, connected: bool) {
        self.seen.lock().connected.push(connected);
        self.changed.notify_all();
    }
}

impl Recorder {
    /// Waits until `done` holds of what it has seen; panics naming `what` at the
    /// hang guard.
    fn wait_until(&self, what: &str, mut done: impl FnMut(&Seen) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = self.seen.lock();
        while !done(&seen) {
            if self.changed.wait_until(&mut seen, deadline).timed_out() && !done(&seen) {
                panic!(
                    "waited {PATIENCE:?} for {what}: {} frames, connection events {:?}",
                    seen.frames.len(),
                    seen.connected
                );
            }
        }
    }

    fn frames(&self) -> Vec<Vec<u8>> {
        self.seen.lock().frames.clone()
    }

    fn connected(&self) -> Vec<bool> {
        self.seen.lock().connected.clone()
    }
}

fn numbered(n: u32) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

fn number(frame: &[u8]) -> u32 {
    u32::from_le_bytes(frame.try_into().expect("a numbered frame has 4 bytes"))
}

/// A transport for `node` of `cluster`, open, with its sink.
fn open(server: &NatsServer, cluster: &str, node: &str) -> (NatsTransport, Arc<Recorder>) {
    let transport = NatsTransport::connect(&server.url(), cluster)
        .unwrap_or_else(|err| panic!("connect to {}: {err}", server.url()));
    let sink = Arc::new(Recorder::default());
    transport
        .open(node, sink.clone())
        .unwrap_or_else(|err| panic!("open {node}: {err}"));
    (transport, sink)
}

/// Runs a key-value operation and waits for its callback.
fn kv<T: Send + 'static>(operation: impl FnOnce(Done<T>)) -> Result<T, KvError> {
    let (tx, rx) = mpsc::channel();
    operation(Box::new(move |result| {
        let _ = tx.send(result);
    }));
    rx.recv_timeout(PATIENCE)
        .expect("the key-value callback was called")
}

/// Polls until `done` holds; panics naming `what` at the hang guard.
fn poll_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "waited {PATIENCE:?} for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn frames_to_a_node_arrive_all_and_in_order() {
    const FRAMES: u32 = 10_000;
    let server = NatsServer::start();
    let (a, a_sink) = open(&server, "order", "a");
    let (b, b_sink) = open(&server, "order", "b");

    let started = Instant::now();
    for n in 0..FRAMES {
        a.send("b", numbered(n));
        b.send("a", numbered(n));
    }
    for (sink, to) in [(&b_sink, "b"), (&a_sink, "a")] {
        sink.wait_until(&format!("{FRAMES} frames at {to}"), |seen| {
            seen.frames.len() >= FRAMES as usize
        });
        let frames = sink.frames();
        assert_eq!(frames.len(), FRAMES as usize, "nothing duplicated");
        for (expected, frame) in (0..FRAMES).zip(&frames) {
            assert_eq!(number(frame), expected, "frames to {to} in order");
        }
    }
    eprintln!(
        "{FRAMES} frames each way on one server: {:?}",
        started.elapsed()
    );
    poll_until("both queues empty", || a.queued() == 0 && b.queued() == 0);
    assert_eq!((a.dropped(), b.dropped()), (0, 0));
    // Called on the transport's own thread.
    let threads = b_sink.seen.lock().threads.clone();
    assert_eq!(threads, [Some("wsched-nats".to_owned())]);
    assert!(a_sink.connected().is_empty() && b_sink.connected().is_empty());
}

#[test]
fn a_broadcast_reaches_every_node_of_the_cluster_only() {
    let server = NatsServer::start();
    let (a, a_sink) = open(&server, "bcast", "a");
    let (_b, b_sink) = open(&server, "bcast", "b");
    let (other, other_sink) = open(&server, "other", "c");

    a.broadcast(b"hello".to_vec());
    // The sender hears its own broadcast too (the seam allows either).
    for (sink, node) in [(&a_sink, "a"), (&b_sink, "b")] {
        sink.wait_until(&format!("the broadcast at {node}"), |seen| {
            !seen.frames.is_empty()
        });
        assert_eq!(sink.frames(), [b"hello".to_vec()]);
    }
    // Another cluster on the same server hears nothing of it: its own broadcast
    // is the first thing it gets.
    other.broadcast(b"mine".to_vec());
    other_sink.wait_until("its own broadcast", |seen| !seen.frames.is_empty());
    assert_eq!(other_sink.frames(), [b"mine".to_vec()]);
}

#[test]
fn names_are_checked_and_errors_say_what_to_do() {
    let server = NatsServer::start();
    for (cluster, complaint) in [("a.b", "'.'"), ("", "empty"), ("a b", "' '"), ("a>", "'>'")] {
        let err = NatsTransport::connect(&server.url(), cluster).expect_err(cluster);
        let text = err.to_string();
        assert!(text.contains(complaint), "{cluster:?}: {text}");
    }

    let transport = NatsTransport::connect(&server.url(), "names").expect("connect");
    for (node, complaint) in [("x.y", "'.'"), ("x*", "'*'"), ("x y", "' '"), ("", "empty")] {
        let err = transport
            .open(node, Arc::new(Recorder::default()))
            .expect_err(node);
        let text = err.to_string();
        assert!(text.contains(complaint), "{node:?}: {text}");
    }
    transport.send("x.y", b"lost".to_vec());
    assert_eq!(transport.dropped(), 1, "a frame to a name no node can have");
    transport
        .open("n", Arc::new(Recorder::default()))
        .expect("a valid name after invalid ones");
    let again = transport
        .open("m", Arc::new(Recorder::default()))
        .expect_err("a second open");
    assert!(again.to_string().contains("already open"), "{again}");

    // Nobody listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    let err = NatsTransport::connect(&url, "names").expect_err("no server");
    let text = err.to_string();
    assert!(
        text.contains(&url) && text.contains("nats-server -js"),
        "{text}"
    );
}

#[test]
fn the_key_value_store_keeps_its_conditions() {
    let server = NatsServer::start();
    let transport = NatsTransport::connect(&server.url(), "kv").expect("connect");
    let store = transport.kv();

    assert_eq!(kv(|done| store.get("missing", done)), Ok(None));
    let first = kv(|done| store.create("k", b"one".to_vec(), done)).expect("create");
    assert_eq!(
        kv(|done| store.create("k", b"two".to_vec(), done)),
        Err(KvError::Conflict),
        "create of a key with a value"
    );
    assert_eq!(
        kv(|done| store.get("k", done)),
        Ok(Some(KvEntry {
            value: b"one".to_vec(),
            revision: first
        }))
    );

    let second = kv(|done| store.update("k", b"two".to_vec(), first, done)).expect("update");
    assert!(second > first);
    assert_eq!(
        kv(|done| store.update("k", b"stale".to_vec(), first, done)),
        Err(KvError::Conflict),
        "update with a stale revision"
    );
    assert_eq!(
        kv(|done| store.delete("k", first, done)),
        Err(KvError::Conflict),
        "delete with a stale revision"
    );
    assert_eq!(
        kv(|done| store.get("k", done)).map(|entry| entry.map(|e| e.value)),
        Ok(Some(b"two".to_vec()))
    );

    assert_eq!(kv(|done| store.delete("k", second, done)), Ok(()));
    assert_eq!(kv(|done| store.get("k", done)), Ok(None), "a deleted key");
    assert_eq!(
        kv(|done| store.delete("k", second, done)),
        Ok(()),
        "deleting a key without a value"
    );
    assert_eq!(
        kv(|done| store.delete("never", 1, done)),
        Ok(()),
        "deleting a key never written"
    );
    assert_eq!(
        kv(|done| store.update("k", b"late".to_vec(), second, done)),
        Err(KvError::Conflict),
        "update of a key deleted since"
    );
    let third = kv(|done| store.create("k", b"three".to_vec(), done)).expect("create again");
    assert!(third > second);
    assert_eq!(
        kv(|done| store.get("k", done)),
        Ok(Some(KvEntry {
            value: b"three".to_vec(),
            revision: third
        }))
    );

    // The cluster layer's alphabet: letters, digits, `-`, `_`, `=` and `.`.
    let name = "names.x=y_z-1";
    let revision = kv(|done| store.create(name, b"pid".to_vec(), done)).expect("create");
    assert_eq!(
        kv(|done| store.get(name, done)),
        Ok(Some(KvEntry {
            value: b"pid".to_vec(),
            revision
        }))
    );
    assert!(revision > third, "revisions grow across keys");

    // Callbacks run on the transport's thread.
    let (tx, rx) = mpsc::channel();
    store.get(
        "k",
        Box::new(move |_| {
            let _ = tx.send(thread::current().name().map(str::to_owned));
        }),
    );
    let thread = rx.recv_timeout(PATIENCE).expect("the callback was called");
    assert_eq!(thread.as_deref(), Some("wsched-nats"));

    assert_eq!(
        kv(|done| store.get("not valid", done))
            .map_err(|err| matches!(err, KvError::Unavailable(_))),
        Err(true),
        "a key NATS refuses"
    );

    transport.close();
    transport.close();
    assert!(matches!(
        kv(|done| store.get("k", done)),
        Err(KvError::Unavailable(_))
    ));
}

#[test]
fn of_two_racing_creates_exactly_one_wins() {
    const ROUNDS: usize = 20;
    let server = NatsServer::start();
    let transports: Vec<NatsTransport> = (0..2)
        .map(|_| NatsTransport::connect(&server.url(), "race").expect("connect"))
        .collect();
    let transports = Arc::new(transports);

    for round in 0..ROUNDS {
        let key = format!("key-{}", round / 2);
        // Odd rounds race on a key that was deleted: the two-step path.
        if round % 2 == 1 {
            let store = transports[0].kv();
            let entry = kv(|done| store.get(&key, done))
                .expect("get")
                .expect("the even round's winner");
            assert_eq!(kv(|done| store.delete(&key, entry.revision, done)), Ok(()));
        }
        let barrier = Arc::new(Barrier::new(2));
        let racers: Vec<_> = (0..2u8)
            .map(|i| {
                let (transports, barrier, key) = (transports.clone(), barrier.clone(), key.clone());
                thread::spawn(move || {
                    let store = transports[usize::from(i)].kv();
                    barrier.wait();
                    kv(|done| store.create(&key, vec![i], done))
                })
            })
            .collect();
        let results: Vec<_> = racers
            .into_iter()
            .map(|racer| racer.join().expect("a racer"))
            .collect();
        let winners: Vec<_> = (0..2u8)
            .zip(&results)
            .filter_map(|(i, result)| result.as_ref().ok().map(|revision| (i, *revision)))
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert!(results.contains(&Err(KvError::Conflict)), "{results:?}");
        let (winner, revision) = winners[0];
        assert_eq!(
            kv(|done| transports[1].kv().get(&key, done)),
            Ok(Some(KvEntry {
                value: vec![winner],
                revision
            }))
        );
    }
}

#[test]
fn close_flushes_what_was_queued_and_is_idempotent() {
    const FRAMES: u32 = 1_000;
    let server = NatsServer::start();
    let (_a, a_sink) = open(&server, "close", "a");
    let (b, _b_sink) = open(&server, "close", "b");
    for n in 0..FRAMES {
        b.send("a", numbered(n));
    }
    b.close();
    a_sink.wait_until("the frames sent before the close", |seen| {
        seen.frames.len() >= FRAMES as usize
    });
    assert!((0..FRAMES).eq(a_sink.frames().iter().map(|f| number(f))));
    b.close();
    b.send("a", numbered(FRAMES));
    b.broadcast(numbered(FRAMES));
    assert_eq!(b.dropped(), 2, "frames after the close");
    drop(b);
}

#[test]
fn a_server_restart_is_reported_and_survived() {
    const BEFORE: u32 = 100;
    // More than the client's own buffer (2,048 messages) holds while it is away.
    const DURING: u32 = 5_000;
    const AFTER: u32 = 100;
    let mut server = NatsServer::start();
    // A short timeout for the key-value request made during the outage.
    let a = NatsOptions::new()
        .kv_timeout(Duration::from_secs(2))
        .connect(&server.url(), "restart")
        .expect("connect");
    let a_sink = Arc::new(Recorder::default());
    a.open("a", a_sink.clone()).expect("open");
    let (_b, b_sink) = open(&server, "restart", "b");
    let revision = kv(|done| a.kv().create("kept", b"value".to_vec(), done)).expect("create");

    for n in 0..BEFORE {
        a.send("b", numbered(n));
    }
    b_sink.wait_until("the frames before the restart", |seen| {
        seen.frames.len() >= BEFORE as usize
    });

    let stopped = Instant::now();
    server.stop();
    for sink in [&a_sink, &b_sink] {
        sink.wait_until("the loss of the connection", |seen| {
            seen.connected == [false]
        });
    }
    for n in BEFORE..BEFORE + DURING {
        a.send("b", numbered(n));
    }
    let sent_during = Instant::now();
    let get_during = kv(|done| a.kv().get("kept", done));
    assert!(
        matches!(get_during, Err(KvError::Unavailable(_))),
        "{get_during:?}"
    );
    // Measured, not asserted: what the client does not take waits in the queue.
    let (queued_during, queued_after) = (a.queued(), sent_during.elapsed());

    server.restart();
    let restarted = Instant::now();
    for sink in [&a_sink, &b_sink] {
        sink.wait_until("the connection back", |seen| {
            seen.connected == [false, true]
        });
    }
    let reconnected = restarted.elapsed();
    poll_until("the outage's backlog handed to the client", || {
        a.queued() == 0
    });
    for n in BEFORE + DURING..BEFORE + DURING + AFTER {
        a.send("b", numbered(n));
    }
    b_sink.wait_until("the frames after the restart", |seen| {
        seen.frames
            .last()
            .is_some_and(|frame| number(frame) == BEFORE + DURING + AFTER - 1)
    });
    let received: Vec<u32> = b_sink.frames().iter().map(|f| number(f)).collect();
    if let Some(pair) = received.windows(2).find(|pair| pair[0] >= pair[1]) {
        panic!(
            "frames out of order or duplicated: {} then {}",
            pair[0], pair[1]
        );
    }
    for n in (0..BEFORE).chain(BEFORE + DURING..BEFORE + DURING + AFTER) {
        assert!(
            received.contains(&n),
            "frame {n} (sent while connected) arrived"
        );
    }
    let during = received
        .iter()
        .filter(|&&n| (BEFORE..BEFORE + DURING).contains(&n))
        .count();
    eprintln!(
        "server down for {:?}; reconnected {reconnected:?} after the restart; of the \
         {DURING} frames sent during the outage, {queued_during} were still queued \
         {queued_after:?} later and {during} arrived",
        restarted - stopped,
    );

    // The store survived the restart (a request may have to wait for the
    // reconnection of the key-value path: retried while unavailable).
    let deadline = Instant::now() + PATIENCE;
    let kept = loop {
        match kv(|done| a.kv().get("kept", done)) {
            Err(KvError::Unavailable(why)) if Instant::now() < deadline => {
                eprintln!("after the restart: {why}");
            }
            other => break other,
        }
    };
    assert_eq!(
        kept,
        Ok(Some(KvEntry {
            value: b"value".to_vec(),
            revision
        }))
    );
    assert_eq!(
        kv(|done| a.kv().create("kept", b"again".to_vec(), done)),
        Err(KvError::Conflict)
    );
}

#[test]
fn options_bound_the_queue() {
    let server = NatsServer::start();
    let transport = NatsOptions::new()
        .connect_timeout(Duration::from_secs(2))
        .kv_timeout(Duration::from_secs(2))
        .max_reconnect_delay(Duration::from_millis(200))
        .max_queued(0)
        .connect(&server.url(), "opts")
        .expect("connect");
    transport.broadcast(b"x".to_vec());
    assert_eq!(transport.dropped(), 1, "nothing may be queued");
}
