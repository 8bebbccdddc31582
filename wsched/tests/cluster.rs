//! The cluster on the in-memory fabric: several schedulers in this process as
//! nodes. Remote sends in order, codecs and their errors, remote monitors, links
//! and calls, node failure (isolation, partition, restart) reported as Erlang does,
//! incarnations refusing old PIDs, cluster-wide names, spawns on another node.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wsched::cluster::{Cluster, ClusterConfig, MemoryFabric, NameError, NodeDownReason, NodeEvent};
use wsched::prelude::*;
use wsched::{Down, Exit, ExitReason, Inbox, Scheduler, SendErrorKind};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

/// Short, so that failure detection is quick; the tests wait for the events
/// themselves, bounded by `PATIENCE`.
const SILENCE: Duration = Duration::from_millis(300);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Ping {
    n: u64,
    reply_to: Pid,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Pong(u64);

/// Registered with no codec.
#[derive(Debug, PartialEq)]
struct Secret(u32);

fn config(name: &str, fabric: &MemoryFabric) -> ClusterConfig {
    ClusterConfig::new(name, fabric.transport())
        .silence(SILENCE)
        .register::<Ping>("Ping")
        .register::<Pong>("Pong")
        .register_call::<u64, u64>()
        .spawnable(Echo::SERVE, || Echo)
}

fn node(name: &str, fabric: &MemoryFabric) -> Scheduler {
    Scheduler::builder()
        .workers(1)
        .cluster(config(name, fabric))
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
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until `node` sees every one of `peers` up.
fn until_up(node: &Scheduler, peers: &[&str]) {
    let c = cluster(node);
    until("the peers come up", || {
        let up = c.nodes();
        peers.iter().all(|p| up.iter().any(|n| n.name() == *p))
    });
}

/// `pid` (of `from`) as node `to` sees it: through a cluster-wide name, as a user
/// would find it.
fn across(from: &Scheduler, to: &Scheduler, pid: Pid, name: &str) -> Pid {
    cluster(from).register(name, pid).unwrap();
    cluster(to)
        .whereis(name)
        .unwrap()
        .expect("the name resolves")
}

/// Answers pings with pongs, and `u64` calls with their double; fails on a ping
/// of 0.
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
                if ping.n == 0 {
                    return Err("asked to fail".into());
                }
                this::send(ping.reply_to, Pong(ping.n))?;
            }
        }
    }
}

fn two_nodes() -> (MemoryFabric, Scheduler, Scheduler) {
    let fabric = MemoryFabric::new();
    let a = node("a", &fabric);
    let b = node("b", &fabric);
    until_up(&a, &["b"]);
    until_up(&b, &["a"]);
    (fabric, a, b)
}

#[test]
fn a_remote_send_round_trips_and_pids_cross_both_ways() {
    let (_fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-1");
    assert!(!echo_at_a.is_local());
    assert!(echo_at_a.to_string().ends_with("@b>"), "{echo_at_a}");
    let inbox = a.inbox().unwrap();
    // The inbox's PID crosses inside the ping, and the pong comes back to it.
    inbox
        .send(
            echo_at_a,
            Ping {
                n: 7,
                reply_to: inbox.pid(),
            },
        )
        .unwrap();
    let pong = inbox.recv_message(PATIENCE).unwrap();
    assert_eq!(
        pong.from,
        Some(echo_at_a),
        "the sender crosses as its remote PID"
    );
    assert_eq!(pong.payload.downcast::<Pong>().unwrap(), Pong(7));
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

/// Counts the `u64`s it gets, checking they come in order; answers the total.
struct Counter;

#[process]
impl Counter {
    #[entry]
    fn count(&mut self, total: u64, report: Pid) -> Result<(), BoxError> {
        for expected in 0..total {
            let n = recv!(u64)?;
            if n != expected {
                return Err(format!("got {n}, expected {expected}").into());
            }
        }
        this::send(report, Pong(total))?;
        Ok(())
    }
}

#[test]
fn ten_thousand_messages_arrive_in_order_and_none_is_lost() {
    let (_fabric, a, b) = two_nodes();
    let report = b.inbox().unwrap();
    let counter = b
        .spawn_detached(Counter, Counter::COUNT, (10_000, report.pid()))
        .unwrap();
    let counter_at_a = across(&b, &a, counter, "counter");
    let sender = a.inbox().unwrap();
    for n in 0..10_000_u64 {
        sender.send(counter_at_a, n).unwrap();
    }
    assert_eq!(report.recv::<Pong>(PATIENCE).unwrap(), Pong(10_000));
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_type_without_a_codec_is_refused_at_once_with_the_message_back() {
    let (_fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-2");
    let error = a.send(echo_at_a, Secret(42)).unwrap_err();
    assert_eq!(error.kind(), SendErrorKind::NotEncodable);
    assert!(error.message_type().ends_with("Secret"));
    assert!(
        error.to_string().contains("register it on every node"),
        "{error}"
    );
    assert_eq!(
        error.into_payload().downcast::<Secret>().unwrap(),
        Secret(42)
    );
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_remote_monitor_gets_the_real_reason_and_a_remote_call_answers() {
    let (_fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-3");
    let doubled: u64 = a.call(echo_at_a, 21_u64, PATIENCE).unwrap();
    assert_eq!(doubled, 42);
    let monitor = a.monitor(echo_at_a);
    let inbox = a.inbox().unwrap();
    inbox
        .send(
            echo_at_a,
            Ping {
                n: 0,
                reply_to: inbox.pid(),
            },
        )
        .unwrap();
    let down = monitor.wait_timeout(PATIENCE).expect("the Down comes");
    assert_eq!(down.pid, echo_at_a);
    assert_eq!(
        down.reason,
        ExitReason::Error {
            message: "asked to fail".into()
        }
    );
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

/// Links to a remote process and reports what reached it, trapping exits.
fn trapping_inbox(node: &Scheduler, other: Pid) -> Inbox {
    let inbox = node.inbox().unwrap();
    inbox.trap_exits(true);
    inbox.link(other);
    inbox
}

#[test]
fn a_link_across_nodes_carries_the_failure_both_ways() {
    let (_fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-4");
    let keeper = trapping_inbox(&a, echo_at_a);
    // A call round trip: the link frame went before it on the same stream.
    let _: u64 = a.call(echo_at_a, 1_u64, PATIENCE).unwrap();
    keeper
        .send(
            echo_at_a,
            Ping {
                n: 0,
                reply_to: keeper.pid(),
            },
        )
        .unwrap();
    let exit = keeper.recv::<Exit>(PATIENCE).unwrap();
    assert_eq!(exit.pid, echo_at_a);
    assert_eq!(
        exit.reason,
        ExitReason::Error {
            message: "asked to fail".into()
        }
    );

    // The other way: a process on `b` linked to one on `a` that fails.
    let victim = a.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let victim_at_b = across(&a, &b, victim, "victim");
    let watcher = trapping_inbox(&b, victim_at_b);
    let _: u64 = b.call(victim_at_b, 1_u64, PATIENCE).unwrap();
    a.send(
        victim,
        Ping {
            n: 0,
            reply_to: victim,
        },
    )
    .unwrap();
    let exit = watcher.recv::<Exit>(PATIENCE).unwrap();
    assert_eq!(exit.pid, victim_at_b);
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn an_isolated_node_is_declared_down_and_every_monitor_fires_noconnection() {
    let (fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-5");
    let events = a.inbox().unwrap();
    cluster(&a).monitor_node(events.pid(), "b");
    let monitor = a.monitor(echo_at_a);
    let linked = trapping_inbox(&a, echo_at_a);
    let _: u64 = a.call(echo_at_a, 1_u64, PATIENCE).unwrap();
    let cut = Instant::now();
    fabric.isolate("b");
    let down: Down = monitor.wait_timeout(PATIENCE).expect("the Down comes");
    assert_eq!(down.reason, ExitReason::NoConnection);
    // Declared down after the silence, well within twice that bound.
    assert!(cut.elapsed() >= SILENCE, "not before the silence ran out");
    assert_eq!(
        linked.recv::<Exit>(PATIENCE).unwrap().reason,
        ExitReason::NoConnection
    );
    match events.recv::<NodeEvent>(PATIENCE).unwrap() {
        NodeEvent::Down(node, NodeDownReason::Silent) => assert_eq!(node.name(), "b"),
        other => panic!("expected b down for silence, got {other:?}"),
    }
    // A send to it now fails at once, with the message back.
    let error = a.send(echo_at_a, Pong(1)).unwrap_err();
    assert_eq!(error.kind(), SendErrorKind::NoConnection);
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn after_a_partition_heals_the_nodes_meet_as_new_incarnations_and_old_pids_stay_refused() {
    let (fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-6");
    let (a_before, b_before) = (cluster(&a).me(), cluster(&b).me());
    fabric.partition(&["a"], &["b"]);
    until("each side sees the other down", || {
        cluster(&a).nodes().is_empty() && cluster(&b).nodes().is_empty()
    });
    fabric.heal();
    until("they meet again", || {
        cluster(&a).nodes().len() == 1 && cluster(&b).nodes().len() == 1
    });
    let (a_after, b_after) = (cluster(&a).me(), cluster(&b).me());
    assert!(
        a_after.incarnation() > a_before.incarnation()
            || b_after.incarnation() > b_before.incarnation(),
        "a side renewed its incarnation: {a_before} {a_after} {b_before} {b_after}"
    );
    // `echo` still runs on b, but the PID `a` held names b's old incarnation.
    if b_after.incarnation() > b_before.incarnation() {
        let error = a.send(echo_at_a, Pong(1)).unwrap_err();
        assert_eq!(error.kind(), SendErrorKind::NoConnection);
    }
    // The name it held is written again under its new PID: reachable through it.
    let mut fresh = None;
    until("the name resolves again", || {
        fresh = cluster(&a).whereis("echo-6").unwrap();
        fresh.is_some()
    });
    let fresh = fresh.unwrap();
    let doubled: u64 = a.call(fresh, 5_u64, PATIENCE).unwrap();
    assert_eq!(doubled, 10);
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_restarted_node_is_a_new_incarnation_and_its_old_pids_stay_dead() {
    let fabric = MemoryFabric::new();
    let a = node("a", &fabric);
    let b = node("b", &fabric);
    until_up(&a, &["b"]);
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let old = across(&b, &a, echo, "echo-7");
    let monitor = a.monitor(old);
    // A round trip: `b` has the monitor (it came first on the same stream).
    let _: u64 = a.call(old, 1_u64, PATIENCE).unwrap();
    let first = cluster(&b).me();
    b.shutdown(PATIENCE);
    // Its processes were cancelled by the shutdown, and their Downs crossed
    // before the node left.
    assert_eq!(
        monitor.wait_timeout(PATIENCE).unwrap().reason,
        ExitReason::Cancelled
    );
    let b = node("b", &fabric);
    let second = cluster(&b).me();
    assert_eq!(second.incarnation(), first.incarnation() + 1);
    // Its new incarnation, not the old one whose `Leave` may still be on its way.
    until("a sees b's new incarnation up", || {
        cluster(&a).nodes().contains(&second)
    });
    let error = a.send(old, Pong(1)).unwrap_err();
    assert_eq!(
        error.kind(),
        SendErrorKind::NoConnection,
        "never delivered to the new one"
    );
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_cluster_name_raced_by_two_nodes_has_one_owner_and_is_freed_by_its_end() {
    let (_fabric, a, b) = two_nodes();
    let on_a = a.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let on_b = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let (ca, cb) = (cluster(&a), cluster(&b));
    let (ra, rb) = std::thread::scope(|s| {
        let ta = s.spawn(|| ca.register("leader", on_a));
        let tb = s.spawn(|| cb.register("leader", on_b));
        (ta.join().unwrap(), tb.join().unwrap())
    });
    assert!(ra.is_ok() != rb.is_ok(), "exactly one wins: {ra:?} {rb:?}");
    let loser = if ra.is_ok() { rb } else { ra };
    assert!(matches!(loser, Err(NameError::Taken { .. })), "{loser:?}");
    let (winner_node, winner) = if ca.whereis("leader").unwrap() == Some(on_a) {
        (&a, on_a)
    } else {
        (&b, on_b)
    };
    winner_node.kill(winner).unwrap();
    until("the name is freed", || {
        ca.whereis("leader").unwrap().is_none()
    });
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_process_is_spawned_on_another_node_by_typed_entry() {
    let (_fabric, a, b) = two_nodes();
    let echo = cluster(&a)
        .spawn_on("b", Echo::SERVE, (), PATIENCE)
        .unwrap();
    assert!(!echo.is_local());
    let doubled: u64 = a.call(echo, 4_u64, PATIENCE).unwrap();
    assert_eq!(doubled, 8);
    let refused = cluster(&a)
        .spawn_on("b", Counter::COUNT, (1, echo), PATIENCE)
        .unwrap_err();
    assert!(refused.to_string().contains("does not offer"), "{refused}");
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

/// Finds a cluster-wide name and registers itself under another, through the
/// cluster's commands (no blocking in a step); then spawns an `Echo` on node `b`
/// and asks it to double `n`.
struct Seeker;

#[process]
impl Seeker {
    #[entry]
    fn seek(&mut self, name: String, n: u64) -> Result<(Option<Pid>, u64), BoxError> {
        let found = yield_cmd!(wsched::cluster::WhereIs::new(name))??;
        yield_cmd!(wsched::cluster::RegisterName::new("seeker", this::pid()))??;
        let echo = yield_cmd!(wsched::cluster::SpawnOn::new("b", Echo::SERVE, ()))??;
        let doubled: u64 = call!(echo, n, timeout = PATIENCE)?;
        Ok((found, doubled))
    }
}

#[test]
fn a_process_uses_names_and_spawns_through_commands_without_blocking_a_worker() {
    let (_fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    cluster(&b).register("echo-8", echo).unwrap();
    let seeker = a
        .spawn(Seeker, Seeker::SEEK, ("echo-8".to_owned(), 21))
        .unwrap();
    let (found, doubled) = a
        .wait_timeout(seeker, PATIENCE)
        .unwrap()
        .downcast::<(Option<Pid>, u64)>()
        .unwrap();
    assert_eq!(found, cluster(&a).whereis("echo-8").unwrap());
    assert!(found.is_some_and(|p| !p.is_local()));
    assert_eq!(doubled, 42);
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn metrics_and_the_process_listing_show_the_cluster() {
    let (_fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-9");
    let watcher = a.inbox().unwrap();
    watcher.link(echo_at_a);
    let _monitor = watcher.monitor(echo_at_a);
    let _: u64 = a.call(echo_at_a, 1_u64, PATIENCE).unwrap();
    let metrics = a.metrics().cluster.expect("a is in a cluster");
    assert_eq!(metrics.node, "a");
    let peer = metrics
        .peers
        .iter()
        .find(|p| p.node == "b")
        .expect("b is up");
    assert!(
        peer.messages_out >= 3,
        "the link, the monitor and the call: {peer:?}"
    );
    assert!(peer.messages_in >= 1 && peer.bytes_in > 0, "{peer:?}");
    let info = a
        .processes()
        .into_iter()
        .find(|p| p.pid == watcher.pid())
        .expect("the inbox is listed");
    assert_eq!(info.remote_links, vec![echo_at_a]);
    assert_eq!(info.remote_monitors, vec![echo_at_a]);
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_timed_message_reaches_a_remote_process() {
    let (_fabric, a, b) = two_nodes();
    let inbox = b.inbox().unwrap();
    let inbox_at_a = across(&b, &a, inbox.pid(), "inbox-10");
    a.send_after(inbox_at_a, Pong(3), Duration::from_millis(10))
        .unwrap();
    assert_eq!(inbox.recv::<Pong>(PATIENCE).unwrap(), Pong(3));
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_supervisor_restarts_its_child_on_another_node() {
    use wsched::supervisor::{Strategy, Supervisor};
    let (_fabric, a, b) = two_nodes();
    let sup = Supervisor::new(Strategy::OneForOne)
        .intensity(10, PATIENCE)
        .child(wsched::cluster::remote_child("echo", "b", Echo::SERVE, ()));
    let view = sup.handle();
    a.spawn_detached(sup, Supervisor::ENTRY, ()).unwrap();
    let first = view.wait_for(PATIENCE, |children| children[0].pid).unwrap();
    assert!(!first.is_local(), "the child runs on b: {first}");
    // It fails there; the link brings the failure back and it is restarted on b.
    a.send(
        first,
        Ping {
            n: 0,
            reply_to: first,
        },
    )
    .unwrap();
    let second = view
        .wait_for(PATIENCE, |children| children[0].pid.filter(|p| *p != first))
        .unwrap();
    assert!(!second.is_local());
    let doubled: u64 = a.call(second, 2_u64, PATIENCE).unwrap();
    assert_eq!(doubled, 4);
    assert_eq!(view.restarts(), 1);
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

/// Drops every request unanswered.
struct Mute;

#[process]
impl Mute {
    #[entry]
    fn serve(&mut self) -> Result<(), BoxError> {
        loop {
            drop(recv!(Request<u64, u64>)?);
        }
    }
}

#[test]
fn a_remote_reply_dropped_unanswered_fails_the_call_at_once() {
    let (_fabric, a, b) = two_nodes();
    let mute = b.spawn_detached(Mute, Mute::SERVE, ()).unwrap();
    let mute_at_a = across(&b, &a, mute, "mute");
    let started = Instant::now();
    let error = a.call::<u64, u64>(mute_at_a, 1, PATIENCE).unwrap_err();
    assert!(
        matches!(error, wsched::CallError::NoReply { .. }),
        "{error:?}"
    );
    assert!(started.elapsed() < PATIENCE, "not by timing out");
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_call_type_that_cannot_cross_is_refused_with_the_request_back() {
    let (_fabric, a, b) = two_nodes();
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-11");
    // `Request<u32, u32>` is not registered with `register_call`.
    let error = a.call::<u32, u32>(echo_at_a, 5, PATIENCE).unwrap_err();
    assert!(
        matches!(
            error,
            wsched::CallError::Unreachable {
                kind: SendErrorKind::NotEncodable,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("register_call"), "{error}");
    assert_eq!(error.into_request(), Some(5));
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

#[test]
fn a_call_type_without_codecs_is_a_clear_error_when_joining() {
    struct Opaque;
    let fabric = MemoryFabric::new();
    let error = Scheduler::builder()
        .workers(1)
        .cluster(ClusterConfig::new("lonely", fabric.transport()).register_call::<Opaque, u64>())
        .build()
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("needs a codec for") && text.contains("Opaque"),
        "{text}"
    );
}

#[test]
fn a_message_the_receiver_cannot_decode_is_a_dead_letter_there() {
    let fabric = MemoryFabric::new();
    let a = node("a", &fabric);
    let (letters, dead) = std::sync::mpsc::channel();
    let letters = std::sync::Mutex::new(letters);
    // `c` knows no `Pong`.
    let c = Scheduler::builder()
        .workers(1)
        .on_dead_letter(move |letter| {
            let _ = letters.lock().unwrap().send(letter);
        })
        .cluster(ClusterConfig::new("c", fabric.transport()).silence(SILENCE))
        .build()
        .unwrap();
    until_up(&a, &["c"]);
    let inbox = c.inbox().unwrap();
    let inbox_at_a = across(&c, &a, inbox.pid(), "inbox-12");
    a.send(inbox_at_a, Pong(9)).unwrap();
    let letter = dead.recv_timeout(PATIENCE).unwrap();
    assert_eq!(letter.to, inbox.pid());
    assert_eq!(letter.reason, wsched::DeadLetterReason::FromAnotherNode);
    let undecodable = letter
        .payload
        .downcast::<wsched::cluster::Undecodable>()
        .unwrap();
    assert_eq!(
        (undecodable.codec.as_str(), undecodable.text.as_str()),
        ("Pong", "9")
    );
    assert!(
        undecodable.why.contains("no codec named `Pong`"),
        "{}",
        undecodable.why
    );
    a.shutdown(PATIENCE);
    c.shutdown(PATIENCE);
}

#[test]
fn a_saturated_link_refuses_a_message_with_it_back_and_loses_nothing() {
    let fabric = MemoryFabric::new();
    // No frame may wait: every user message is refused, signals still cross.
    let a = Scheduler::builder()
        .workers(1)
        .cluster(config("a", &fabric).max_queued_frames(0))
        .build()
        .unwrap();
    let b = node("b", &fabric);
    until_up(&a, &["b"]);
    let echo = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let echo_at_a = across(&b, &a, echo, "echo-13");
    let error = a.send(echo_at_a, Pong(1)).unwrap_err();
    assert_eq!(error.kind(), SendErrorKind::NodeBusy);
    assert!(error.to_string().contains("send again"), "{error}");
    assert_eq!(error.into_payload().downcast::<Pong>().unwrap(), Pong(1));
    // A monitor is a signal: it still crosses, and its `Down` comes back (killed,
    // or no such process if the kill got there first).
    let monitor = a.monitor(echo_at_a);
    b.kill(echo).unwrap();
    let reason = monitor.wait_timeout(PATIENCE).unwrap().reason;
    assert!(
        matches!(reason, ExitReason::Killed | ExitReason::NoSuchProcess),
        "{reason}"
    );
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
}

/// Waits until every node sees every other up, as the incarnation it is now.
fn until_meshed(nodes: &[&Scheduler]) {
    until("every node sees every other's incarnation up", || {
        nodes.iter().all(|x| {
            let up = cluster(x).nodes();
            nodes
                .iter()
                .filter(|y| !std::ptr::eq(*x, **y))
                .all(|y| up.contains(&cluster(y).me()))
        })
    });
}

/// Regression: a node that took a new incarnation (refused after a partition)
/// left the names its processes held naming their PIDs of the refused
/// incarnation, so that they resolved nowhere once the partition had healed,
/// although their holders ran on.
#[test]
fn names_follow_their_holders_into_a_new_incarnation_unless_taken_meanwhile() {
    let fabric = MemoryFabric::new();
    let a = node("a", &fabric);
    let b = node("b", &fabric);
    let c = node("c", &fabric);
    until_meshed(&[&a, &b, &c]);
    let (before_a, before_b) = (cluster(&a).me(), cluster(&b).me());
    let on_a = a.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let on_b = b.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    let on_c = c.spawn_detached(Echo, Echo::SERVE, ()).unwrap();
    cluster(&a).register("kept-a", on_a).unwrap();
    cluster(&a).register("taken-from-a", on_a).unwrap();
    cluster(&b).register("kept-b", on_b).unwrap();

    fabric.partition(&["a"], &["b", "c"]);
    until("each side sees the other down", || {
        cluster(&a).nodes().is_empty()
            && cluster(&b).nodes().iter().all(|n| n.name() != "a")
            && cluster(&c).nodes().iter().all(|n| n.name() != "a")
    });
    // Its holder's node down, the name is free to take on this side.
    cluster(&c).register("taken-from-a", on_c).unwrap();
    fabric.heal();
    until_meshed(&[&a, &b, &c]);
    assert!(
        cluster(&a).me() != before_a || cluster(&b).me() != before_b,
        "a side of the partition took a new incarnation"
    );

    for (at, here) in [("a", &a), ("b", &b), ("c", &c)] {
        for (name, holder, home) in [("kept-a", on_a, &a), ("kept-b", on_b, &b)] {
            let pid = cluster(here)
                .whereis(name)
                .unwrap()
                .unwrap_or_else(|| panic!("`{name}` resolves at {at}"));
            if std::ptr::eq(here, home) {
                assert_eq!(pid, holder, "`{name}` at {at}");
            }
            let doubled: u64 = here.call(pid, 3_u64, PATIENCE).unwrap();
            assert_eq!(doubled, 6, "`{name}` at {at}");
        }
        let taker = cluster(here).whereis("taken-from-a").unwrap();
        let taker = taker.expect("`taken-from-a` resolves");
        assert!(taker.to_string().ends_with("@c>") || (at == "c" && taker == on_c));
    }
    a.shutdown(PATIENCE);
    b.shutdown(PATIENCE);
    c.shutdown(PATIENCE);
}
