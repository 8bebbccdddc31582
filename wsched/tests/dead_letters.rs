//! Dead letters: messages still unread when their process ends reach
//! `Builder::on_dead_letter` (with the PID, the sender and the payload, which the
//! hook keeps) in arrival order and are counted; without a hook they are counted and
//! dropped; a message sent after the end still comes back to its sender; a panicking
//! hook does not take a worker down.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{quiet_expected_panics, Scripted};
use wsched::{DeadLetter, Event, Payload, Pid, Scheduler, SendErrorKind, Status};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

fn collecting(workers: usize) -> (Scheduler, Receiver<DeadLetter>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let s = Scheduler::builder()
        .workers(workers)
        .on_dead_letter(move |letter| {
            let _ = tx.lock().unwrap().send(letter);
        })
        .build()
        .expect("scheduler starts");
    (s, rx)
}

/// On its first message, tells `started` and blocks its step until `release` says
/// so, then finishes: whatever was sent meanwhile is left unread.
fn busy_then_done(started: Sender<()>, release: Receiver<()>) -> Scripted {
    let release = Mutex::new(release);
    Scripted::new(move |_, events, out| {
        if events.iter().any(|e| matches!(e, Event::Message(_))) {
            started.send(()).unwrap();
            release.lock().unwrap().recv_timeout(PATIENCE).unwrap();
            out.set_status(Status::Done(Payload::unit()));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    })
}

/// Counts its drops.
struct Tracked(Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn messages_unread_at_the_end_reach_the_hook_in_order_with_their_senders() {
    let (s, letters) = collecting(2);
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let pid = s
        .spawn(busy_then_done(started_tx, release_rx), "run", ())
        .unwrap();
    s.send(pid, "go").unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    // Sent while its last step runs: never read.
    s.send(pid, 1_u32).unwrap();
    s.send(pid, 2_u32).unwrap();
    // One from a process, to check the sender.
    let sender = s
        .spawn(
            Scripted::new(move |ctx, _, out| {
                ctx.send(pid, 3_u32).unwrap();
                out.set_status(Status::Done(Payload::new(ctx.pid())));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    let sender_pid: Pid = s
        .wait_timeout(sender, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    release.send(()).unwrap();
    s.wait_timeout(pid, PATIENCE).unwrap();

    let mut got = Vec::new();
    for _ in 0..3 {
        let letter = letters.recv_timeout(PATIENCE).expect("a dead letter");
        assert_eq!(letter.to, pid);
        got.push((letter.from, letter.payload.downcast::<u32>().unwrap()));
    }
    assert_eq!(got, [(None, 1), (None, 2), (Some(sender_pid), 3)]);
    assert_eq!(s.metrics().dead_letters, 3);
    // After the end, a send is refused and gives its message back: no dead letter.
    let refused = s.send(pid, 4_u32).unwrap_err();
    assert_eq!(refused.kind(), SendErrorKind::Finished);
    assert_eq!(s.metrics().dead_letters, 3);
    drop(s);
    assert!(letters.try_recv().is_err());
}

#[test]
fn without_a_hook_dead_letters_are_counted_and_dropped() {
    let s = Scheduler::builder().workers(1).build().unwrap();
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let pid = s
        .spawn(busy_then_done(started_tx, release_rx), "run", ())
        .unwrap();
    s.send(pid, "go").unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    s.send(pid, Tracked(drops.clone())).unwrap();
    release.send(()).unwrap();
    s.wait_timeout(pid, PATIENCE).unwrap();
    // The result is published after the leftovers were handed off.
    assert_eq!(s.metrics().dead_letters, 1);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn the_hook_may_keep_the_payload() {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let keep = kept.clone();
    let s = Scheduler::builder()
        .workers(1)
        .on_dead_letter(move |letter| keep.lock().unwrap().push(letter.payload))
        .build()
        .unwrap();
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let pid = s
        .spawn(busy_then_done(started_tx, release_rx), "run", ())
        .unwrap();
    s.send(pid, "go").unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    s.send(pid, Tracked(drops.clone())).unwrap();
    release.send(()).unwrap();
    s.wait_timeout(pid, PATIENCE).unwrap();
    drop(s);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "the hook kept it");
    kept.lock().unwrap().clear();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_panicking_hook_does_not_take_a_worker_down() {
    quiet_expected_panics("dead letters test");
    let s = Scheduler::builder()
        .workers(1)
        .on_dead_letter(|_| panic!("dead letters test: the hook panics"))
        .build()
        .unwrap();
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let pid = s
        .spawn(busy_then_done(started_tx, release_rx), "run", ())
        .unwrap();
    s.send(pid, "go").unwrap();
    started.recv_timeout(PATIENCE).unwrap();
    s.send(pid, 1_u32).unwrap();
    s.send(pid, 2_u32).unwrap();
    release.send(()).unwrap();
    assert!(
        s.wait_timeout(pid, PATIENCE).is_ok(),
        "its end was not disturbed"
    );
    assert_eq!(s.metrics().dead_letters, 2, "each letter reached the hook");
    // The one worker still runs processes.
    let next = s
        .spawn(
            Scripted::new(|_, _, out| {
                out.set_status(Status::Done(Payload::new(5_u8)));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    assert_eq!(
        s.wait_timeout(next, PATIENCE)
            .unwrap()
            .downcast::<u8>()
            .unwrap(),
        5
    );
}
