//! Bounded mailboxes: a full one that rejects hands the message back in a clear
//! error; one that drops the oldest counts it and hands it to the dead-letter hook;
//! the room comes back as the process steps; `Down`s, `Exit`s, completions and
//! cancels get through a full mailbox; senders racing from threads and processes
//! never overfill it and lose nothing; names and timed messages meet the bound too;
//! the options reach processes spawned by `Context` and the `Spawn` command; the
//! unbounded default is unchanged.
//!
//! Mailboxes are filled while their process is held inside a step (blocked on a
//! channel the test releases): nothing drains them meanwhile, so every count here
//! is exact, with no timing involved.

mod support;

use std::collections::HashSet;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use support::{Echo, Scripted, Stubborn};
use wsched::command::{Completer, Spawn};
use wsched::{
    Command, DeadLetter, DeadLetterReason, Down, Event, Exit, Handle, JoinError, MailboxInfo,
    Overflow, Payload, Pid, Scheduler, SendErrorKind, SendNamedErrorKind, SpawnError, SpawnOptions,
    Status, Tag,
};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

/// Sent to a [`Held`] process: its step blocks until the test releases it.
struct Hold;

/// A process whose step blocks on each [`Hold`] message until `release` says so,
/// which reports the `u64` messages of each step, in order, on `got`, and finishes
/// on a cancel.
struct Held {
    pid: Pid,
    /// Told when a step starts holding.
    held: Receiver<()>,
    release: Sender<()>,
    got: Receiver<Vec<u64>>,
}

impl Held {
    fn spawn(s: &Scheduler, options: SpawnOptions) -> Self {
        let (held_tx, held) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let (got_tx, got) = mpsc::channel();
        let release_rx = Mutex::new(release_rx);
        let process = Scripted::new(move |_, events, out| {
            let mut numbers = Vec::new();
            let mut cancelled = false;
            for event in events {
                match event {
                    Event::Message(m) if m.payload.is::<Hold>() => {
                        held_tx.send(()).unwrap();
                        release_rx.lock().unwrap().recv_timeout(PATIENCE).unwrap();
                    }
                    Event::Message(m) => numbers.push(m.payload.downcast::<u64>().unwrap()),
                    Event::Cancel => cancelled = true,
                    Event::Completion(_) => {}
                }
            }
            if !numbers.is_empty() {
                got_tx.send(numbers).unwrap();
            }
            out.set_status(if cancelled {
                Status::Done(Payload::unit())
            } else {
                Status::WaitingForMessage
            });
            Ok(())
        });
        let pid = s.spawn_with(process, "run", (), options).unwrap();
        Self {
            pid,
            held,
            release,
            got,
        }
    }

    /// Sends a `Hold` and returns once the process's step holds: its mailbox is empty
    /// and stays undrained until [`release`](Self::release).
    fn hold(&self, s: &Scheduler) {
        s.send(self.pid, Hold).unwrap();
        self.held.recv_timeout(PATIENCE).expect("the step holds");
    }

    fn release(&self) {
        self.release.send(()).unwrap();
    }

    /// The `u64` messages of its next step that had any.
    fn next_step(&self) -> Vec<u64> {
        self.got
            .recv_timeout(PATIENCE)
            .expect("a step with messages")
    }
}

fn mailbox_of(s: &Scheduler, pid: Pid) -> Option<MailboxInfo> {
    s.processes()
        .into_iter()
        .find(|info| info.pid == pid)
        .expect("listed")
        .bounded_mailbox
}

fn collecting(workers: usize) -> (Scheduler, Receiver<DeadLetter>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let s = Scheduler::builder()
        .workers(workers)
        .on_dead_letter(move |letter| {
            let _ = tx.lock().unwrap().send(letter);
        })
        .build()
        .unwrap();
    (s, rx)
}

#[test]
fn a_full_rejecting_mailbox_hands_the_message_back_and_frees_room_as_the_process_steps() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let options = SpawnOptions::new().bounded_mailbox(3, Overflow::Reject);
    let p = Held::spawn(&s, options);
    p.hold(&s);
    for n in 1..=3_u64 {
        s.send(p.pid, n).unwrap();
    }
    let refused = s.send(p.pid, 4_u64).unwrap_err();
    assert_eq!(
        (refused.to(), refused.kind()),
        (p.pid, SendErrorKind::MailboxFull)
    );
    assert_eq!(refused.message_type(), "u64");
    assert_eq!(
        refused.to_string(),
        format!(
            "cannot send a `u64` to {}: its bounded mailbox is full; send again once the \
             process has taken in its messages, shed the load, or spawn the process with \
             a larger capacity (the message is returned in this error)",
            p.pid
        )
    );
    assert_eq!(refused.into_payload().downcast::<u64>().unwrap(), 4);

    let info = mailbox_of(&s, p.pid).expect("bounded");
    assert_eq!(
        (
            info.capacity,
            info.overflow,
            info.queued,
            info.rejected,
            info.dropped
        ),
        (3, Overflow::Reject, 3, 1, 0)
    );
    let metrics = s.metrics();
    assert_eq!(
        (
            metrics.rejected_messages,
            metrics.dropped_messages,
            metrics.dead_letters
        ),
        (1, 0, 0)
    );

    // The step takes all three, and the room is back.
    p.release();
    assert_eq!(p.next_step(), [1, 2, 3]);
    s.send(p.pid, 4_u64).unwrap();
    assert_eq!(p.next_step(), [4]);
    p.hold(&s);
    for n in 5..=7_u64 {
        s.send(p.pid, n).unwrap();
    }
    assert_eq!(
        s.send(p.pid, 8_u64).unwrap_err().kind(),
        SendErrorKind::MailboxFull
    );
    p.release();
    assert_eq!(p.next_step(), [5, 6, 7]);
    s.cancel(p.pid).unwrap();
    s.wait_timeout(p.pid, PATIENCE).unwrap();
    assert_eq!(s.metrics().rejected_messages, 2);
}

#[test]
fn a_full_drop_oldest_mailbox_hands_the_oldest_to_the_dead_letter_hook_and_counts_it() {
    let (s, letters) = collecting(2);
    let options = SpawnOptions::new().bounded_mailbox(2, Overflow::DropOldest);
    let p = Held::spawn(&s, options);
    p.hold(&s);
    for n in 1..=5_u64 {
        s.send(p.pid, n)
            .expect("a dropping mailbox takes every send");
    }
    // Handed over on the sending thread, before its send returned.
    let dropped: Vec<(Pid, Option<Pid>, u64, DeadLetterReason)> = letters
        .try_iter()
        .map(|l| (l.to, l.from, l.payload.downcast().unwrap(), l.reason))
        .collect();
    let oldest = |n| (p.pid, None, n, DeadLetterReason::DroppedOldest);
    assert_eq!(dropped, [oldest(1), oldest(2), oldest(3)]);
    let info = mailbox_of(&s, p.pid).expect("bounded");
    assert_eq!(
        (
            info.capacity,
            info.overflow,
            info.queued,
            info.dropped,
            info.rejected
        ),
        (2, Overflow::DropOldest, 2, 3, 0)
    );
    let metrics = s.metrics();
    assert_eq!(
        (
            metrics.dropped_messages,
            metrics.dead_letters,
            metrics.rejected_messages
        ),
        (3, 3, 0)
    );
    p.release();
    assert_eq!(p.next_step(), [4, 5]);

    // From a process: the dead letter names it as the sender.
    p.hold(&s);
    let to = p.pid;
    let sender = s
        .spawn(
            Scripted::new(move |ctx, _, out| {
                for n in 6..=8_u64 {
                    ctx.send(to, n).unwrap();
                }
                out.set_status(Status::Done(Payload::new(ctx.pid())));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    s.wait_timeout(sender, PATIENCE).unwrap();
    let letter = letters.recv_timeout(PATIENCE).unwrap();
    assert_eq!((letter.to, letter.from), (p.pid, Some(sender)));
    assert_eq!(letter.payload.downcast::<u64>().unwrap(), 6);
    p.release();
    assert_eq!(p.next_step(), [7, 8]);
    s.cancel(p.pid).unwrap();
    s.wait_timeout(p.pid, PATIENCE).unwrap();
    assert_eq!(s.metrics().dropped_messages, 4);
    drop(s);
    assert!(letters.try_recv().is_err(), "no other dead letter");
}

/// Completes when the test completes it.
struct Gate;

impl Command for Gate {
    type Output = ();
}

#[test]
fn downs_exits_and_completions_get_through_a_full_mailbox() {
    let (gates_tx, gates) = mpsc::channel::<Completer<Gate>>();
    let gates_tx = Mutex::new(gates_tx);
    let s = Scheduler::builder()
        .workers(2)
        .handler(move |Gate, done: Completer<Gate>| {
            gates_tx.lock().unwrap().send(done).unwrap();
        })
        .build()
        .unwrap();
    let target = s.spawn(Echo::new(), "serve", ()).unwrap();
    let (ready_tx, ready) = mpsc::channel();
    let mut first = true;
    let watcher = Scripted::new(move |ctx, events, out| {
        if first {
            first = false;
            ctx.trap_exits(true);
            ctx.link(target);
            ctx.monitor(target);
            out.yield_command(Tag(1), Gate);
            ready_tx.send(()).unwrap();
            out.set_status(Status::WaitingForYields);
            return Ok(());
        }
        // Waits for yields: only the gate's completion wakes it, so everything else
        // sits in its full mailbox until then, and comes in this one step.
        let seen: Vec<String> = events
            .into_iter()
            .map(|event| match event {
                Event::Message(m) if m.payload.is::<Exit>() => "exit".to_owned(),
                Event::Message(m) if m.payload.is::<Down>() => "down".to_owned(),
                Event::Message(m) => format!("message {}", m.payload.downcast::<u64>().unwrap()),
                Event::Completion(c) => format!("completion {}", c.result.is_ok()),
                Event::Cancel => "cancel".to_owned(),
            })
            .collect();
        out.set_status(Status::Done(Payload::new(seen)));
        Ok(())
    });
    let options = SpawnOptions::new().bounded_mailbox(1, Overflow::Reject);
    let watcher = s.spawn_with(watcher, "run", (), options).unwrap();
    ready.recv_timeout(PATIENCE).unwrap();
    // Set after the watcher's own monitor: an end signals its links, then its
    // monitors in the order they were set, so once this one's `Down` is here, the
    // watcher's `Exit` and `Down` are in its mailbox.
    let mine = s.monitor(target);

    s.send(watcher, 1_u64).unwrap();
    let full = s.send(watcher, 2_u64).unwrap_err();
    assert_eq!(full.kind(), SendErrorKind::MailboxFull);
    s.send(target, "stop").unwrap();
    mine.wait_timeout(PATIENCE).expect("the target's Down");
    // The signals took no room: still exactly as full.
    let still = s.send(watcher, 3_u64).unwrap_err();
    assert_eq!(still.kind(), SendErrorKind::MailboxFull);
    assert_eq!(mailbox_of(&s, watcher).unwrap().queued, 1);

    gates.recv_timeout(PATIENCE).unwrap().complete(());
    let seen: Vec<String> = s
        .wait_timeout(watcher, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    assert_eq!(seen, ["message 1", "exit", "down", "completion true"]);
}

#[test]
fn a_cancel_gets_through_a_full_mailbox() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let p = Held::spawn(&s, SpawnOptions::new().bounded_mailbox(1, Overflow::Reject));
    p.hold(&s);
    s.send(p.pid, 1_u64).unwrap();
    assert_eq!(
        s.send(p.pid, 2_u64).unwrap_err().kind(),
        SendErrorKind::MailboxFull
    );
    s.cancel(p.pid).unwrap();
    p.release();
    assert_eq!(p.next_step(), [1]);
    s.wait_timeout(p.pid, PATIENCE).unwrap();
}

/// Sends `ids` to `to` from a process (through its `Context`), in its first step;
/// finishes with the ids that came back in errors.
fn sending_process(to: Pid, ids: Vec<u64>) -> Scripted {
    let mut ids = Some(ids);
    Scripted::new(move |ctx, _, out| {
        let mut returned = Vec::new();
        for id in ids.take().expect("one step") {
            if let Err(refused) = ctx.send(to, id) {
                assert_eq!(refused.kind(), SendErrorKind::MailboxFull);
                returned.push(refused.into_payload().downcast::<u64>().unwrap());
            }
        }
        out.set_status(Status::Done(Payload::new(returned)));
        Ok(())
    })
}

/// Sends `ids` to `to` from this thread; returns the ids that came back in errors.
/// Checks, every so often, that the mailbox never holds more than `capacity`.
fn send_from_thread(s: &Handle, to: Pid, ids: Vec<u64>, capacity: usize) -> Vec<u64> {
    let mut returned = Vec::new();
    for (i, id) in ids.into_iter().enumerate() {
        if let Err(refused) = s.send(to, id) {
            assert_eq!(refused.kind(), SendErrorKind::MailboxFull);
            returned.push(refused.into_payload().downcast::<u64>().unwrap());
        }
        if i % 97 == 0 {
            if let Some(info) = s.processes().iter().find(|info| info.pid == to) {
                let queued = info.bounded_mailbox.expect("bounded").queued;
                assert!(
                    queued <= capacity,
                    "{queued} queued over a capacity of {capacity}"
                );
            }
        }
    }
    returned
}

/// Two threads and two processes send to one bounded mailbox at once. Every message
/// is received, handed back in an error, or dropped to the dead-letter hook: exactly
/// one of these, counted exactly; no step ever gets more than the capacity; and each
/// sender's messages arrive in the order it sent them.
fn racing_senders(overflow: Overflow) {
    const CAPACITY: usize = 8;
    const PER_SENDER: u64 = 3_000;
    let (s, letters) = collecting(3);
    let p = Held::spawn(&s, SpawnOptions::new().bounded_mailbox(CAPACITY, overflow));
    p.hold(&s);
    let range = |sender: u64| (sender * PER_SENDER..(sender + 1) * PER_SENDER).collect();

    // Held while the first thread sends its first messages, so the mailbox overflows
    // for sure; released then, so senders also race the receiving steps.
    let (overflowed_tx, overflowed) = mpsc::channel();
    let threads: Vec<_> = (0..2_u64)
        .map(|sender| {
            let handle = s.handle();
            let ids: Vec<u64> = range(sender);
            let overflowed = overflowed_tx.clone();
            let to = p.pid;
            thread::spawn(move || {
                let (first, rest) = ids.split_at(CAPACITY + 1);
                let mut returned = send_from_thread(&handle, to, first.to_vec(), CAPACITY);
                let _ = overflowed.send(());
                returned.extend(send_from_thread(&handle, to, rest.to_vec(), CAPACITY));
                returned
            })
        })
        .collect();
    let processes: Vec<Pid> = (2..4_u64)
        .map(|sender| {
            s.spawn(sending_process(p.pid, range(sender)), "run", ())
                .unwrap()
        })
        .collect();
    overflowed.recv_timeout(PATIENCE).unwrap();
    p.release();

    let mut returned: Vec<u64> = Vec::new();
    for thread in threads {
        returned.extend(thread.join().unwrap());
    }
    for pid in processes {
        let back: Vec<u64> = s.wait_timeout(pid, PATIENCE).unwrap().downcast().unwrap();
        returned.extend(back);
    }
    // Queued behind every message sent: the process takes them all, then ends.
    s.cancel(p.pid).unwrap();
    s.wait_timeout(p.pid, PATIENCE).unwrap();

    let mut received = Vec::new();
    for step in p.got.try_iter() {
        assert!(step.len() <= CAPACITY, "a step got {} messages", step.len());
        received.extend(step);
    }
    let dropped: Vec<u64> = letters
        .try_iter()
        .map(|letter| {
            assert_eq!(letter.reason, DeadLetterReason::DroppedOldest);
            letter.payload.downcast::<u64>().unwrap()
        })
        .collect();
    let metrics = s.metrics();
    match overflow {
        Overflow::Reject => {
            assert!(!returned.is_empty(), "the held mailbox overflowed");
            assert!(dropped.is_empty());
            assert_eq!(metrics.rejected_messages, returned.len() as u64);
            assert_eq!(metrics.dropped_messages, 0);
        }
        Overflow::DropOldest => {
            assert!(returned.is_empty(), "a dropping mailbox takes every send");
            assert!(!dropped.is_empty(), "the held mailbox overflowed");
            assert_eq!(metrics.dropped_messages, dropped.len() as u64);
            assert_eq!(metrics.dead_letters, dropped.len() as u64);
            assert_eq!(metrics.rejected_messages, 0);
        }
        _ => unreachable!(),
    }
    // Each sender's messages arrive in the order it sent them.
    for sender in 0..4 {
        let own: Vec<u64> = received
            .iter()
            .copied()
            .filter(|id| id / PER_SENDER == sender)
            .collect();
        assert!(
            own.windows(2).all(|w| w[0] < w[1]),
            "sender {sender} out of order"
        );
    }
    // Exactly one fate each.
    let total = received.len() + returned.len() + dropped.len();
    assert_eq!(total as u64, 4 * PER_SENDER, "nothing lost, nothing twice");
    let all: HashSet<u64> = received
        .iter()
        .chain(&returned)
        .chain(&dropped)
        .copied()
        .collect();
    assert_eq!(all, (0..4 * PER_SENDER).collect::<HashSet<_>>());
}

#[test]
fn racing_senders_on_a_rejecting_mailbox_never_overfill_it_and_lose_nothing() {
    racing_senders(Overflow::Reject);
}

#[test]
fn racing_senders_on_a_dropping_mailbox_never_overfill_it_and_lose_nothing() {
    racing_senders(Overflow::DropOldest);
}

#[test]
fn a_zero_capacity_is_refused_with_a_clear_error() {
    let s = Scheduler::builder().workers(1).build().unwrap();
    let options = SpawnOptions::new().bounded_mailbox(0, Overflow::Reject);
    let refused = s.spawn_with(Stubborn, "run", (), options).unwrap_err();
    assert!(matches!(refused, SpawnError::ZeroMailboxCapacity));
    assert_eq!(
        refused.to_string(),
        "cannot spawn: a bounded mailbox needs a capacity of at least 1 message; give \
         `SpawnOptions::bounded_mailbox` a capacity >= 1, or leave the mailbox unbounded"
    );
    let metrics = s.metrics();
    assert_eq!((metrics.spawned, metrics.live), (0, 0));
}

#[test]
fn a_send_to_a_name_reports_a_full_mailbox_and_hands_the_message_back() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let p = Held::spawn(&s, SpawnOptions::new().bounded_mailbox(1, Overflow::Reject));
    s.register("sink", p.pid).unwrap();
    p.hold(&s);
    s.send_named("sink", 1_u64).unwrap();
    let refused = s.send_named("sink", 2_u64).unwrap_err();
    assert_eq!(refused.kind(), SendNamedErrorKind::MailboxFull(p.pid));
    assert_eq!(
        refused.to_string(),
        format!(
            "cannot send a `u64` to the name `sink`: its holder {} has a full bounded \
             mailbox; send again once the process has taken in its messages, shed the \
             load, or spawn the process with a larger capacity (the message is returned \
             in this error)",
            p.pid
        )
    );
    assert_eq!(refused.into_payload().downcast::<u64>().unwrap(), 2);
    p.release();
    assert_eq!(p.next_step(), [1]);
}

#[test]
fn timed_messages_a_full_rejecting_mailbox_refuses_become_dead_letters_and_intervals_go_on() {
    let (s, letters) = collecting(2);
    let p = Held::spawn(&s, SpawnOptions::new().bounded_mailbox(1, Overflow::Reject));
    p.hold(&s);
    s.send(p.pid, 1_u64).unwrap();
    s.send_after(p.pid, 2_u64, Duration::from_millis(1))
        .unwrap();
    let letter = letters
        .recv_timeout(PATIENCE)
        .expect("the refused timed message");
    assert_eq!((letter.to, letter.from), (p.pid, None));
    assert_eq!(letter.reason, DeadLetterReason::MailboxFull);
    assert_eq!(letter.payload.downcast::<u64>().unwrap(), 2);

    // An interval goes on after a refusal (a full mailbox is no end of its process).
    let ticks = s
        .send_interval(p.pid, 3_u64, Duration::from_millis(1))
        .unwrap();
    for _ in 0..2 {
        let letter = letters.recv_timeout(PATIENCE).expect("a refused tick");
        assert_eq!(letter.reason, DeadLetterReason::MailboxFull);
        assert_eq!(letter.payload.downcast::<u64>().unwrap(), 3);
    }
    assert!(ticks.is_active());
    ticks.cancel();
    assert!(s.metrics().rejected_messages >= 3);
    assert_eq!(s.metrics().undelivered_timed_messages, 0);
    p.release();
    assert_eq!(p.next_step()[0], 1);
}

#[test]
fn timed_messages_to_a_full_dropping_mailbox_drop_the_oldest() {
    let (s, letters) = collecting(2);
    let p = Held::spawn(
        &s,
        SpawnOptions::new().bounded_mailbox(1, Overflow::DropOldest),
    );
    p.hold(&s);
    s.send(p.pid, 1_u64).unwrap();
    s.send_after(p.pid, 2_u64, Duration::from_millis(1))
        .unwrap();
    let letter = letters.recv_timeout(PATIENCE).expect("the dropped message");
    assert_eq!(letter.reason, DeadLetterReason::DroppedOldest);
    assert_eq!(letter.payload.downcast::<u64>().unwrap(), 1);
    p.release();
    assert_eq!(p.next_step(), [2]);
}

#[test]
fn the_unbounded_default_takes_every_message() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let p = Held::spawn(&s, SpawnOptions::new());
    assert_eq!(mailbox_of(&s, p.pid), None, "unbounded");
    p.hold(&s);
    for n in 0..5_000_u64 {
        s.send(p.pid, n).unwrap();
    }
    p.release();
    assert_eq!(p.next_step(), (0..5_000).collect::<Vec<_>>());
    let metrics = s.metrics();
    assert_eq!(
        (metrics.rejected_messages, metrics.dropped_messages),
        (0, 0)
    );
}

#[test]
fn processes_spawn_with_options_through_their_context_and_the_spawn_command() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let bounded = SpawnOptions::new().bounded_mailbox(5, Overflow::DropOldest);
    let mut first = true;
    let (mut by_context, mut by_command) = (None, None);
    let parent = Scripted::new(move |ctx, events, out| {
        if first {
            first = false;
            let child = ctx
                .spawn_with(Stubborn, "run", (), bounded.detached())
                .unwrap();
            out.yield_command(
                Tag(1),
                Spawn::new(Stubborn, "run", ()).with_options(bounded),
            );
            ctx.send(ctx.pid(), child).unwrap();
        }
        for event in events {
            match event {
                Event::Completion(c) => {
                    by_command = Some(c.result.unwrap().downcast::<Pid>().unwrap());
                }
                Event::Message(m) => by_context = Some(m.payload.downcast::<Pid>().unwrap()),
                Event::Cancel => {}
            }
        }
        out.set_status(match (by_context, by_command) {
            (Some(context), Some(command)) => Status::Done(Payload::new((context, command))),
            (_, None) => Status::WaitingForYields,
            (None, Some(_)) => Status::WaitingForMessage,
        });
        Ok(())
    });
    let parent = s.spawn(parent, "run", ()).unwrap();
    let (by_context, by_command): (Pid, Pid) = s
        .wait_timeout(parent, PATIENCE)
        .unwrap()
        .downcast()
        .unwrap();
    for child in [by_context, by_command] {
        let info = mailbox_of(&s, child).expect("bounded");
        assert_eq!((info.capacity, info.overflow), (5, Overflow::DropOldest));
    }
    assert!(matches!(
        s.wait_timeout(by_context, PATIENCE),
        Err(JoinError::Detached(_))
    ));
    // The command's child is joinable: its options did not detach it.
    assert!(matches!(
        s.wait_timeout(by_command, Duration::ZERO),
        Err(JoinError::TimedOut(_))
    ));
}
