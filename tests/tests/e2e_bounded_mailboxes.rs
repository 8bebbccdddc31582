//! `#[process]` code and bounded mailboxes: a process spawns a child with a bounded
//! mailbox (`this::spawn_with`) and floods it (`this::send`) in one step, which on a
//! single worker runs before the child's first step, so the counts are exact. A
//! rejecting mailbox hands the overflow back to the sender's code; a dropping one
//! keeps the newest messages and hands the oldest, with their sender, to the
//! dead-letter hook.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use wsched::prelude::*;
use wsched::{DeadLetter, DeadLetterReason, Scheduler, SendErrorKind};

const WAIT: Duration = Duration::from_secs(20);

struct Sink;

#[process]
impl Sink {
    /// Receives `n` numbers and returns them in arrival order.
    #[entry]
    fn collect(&mut self, n: u64) -> Result<Vec<u64>, BoxError> {
        let mut got = Vec::new();
        for _ in 0..n {
            got.push(recv!(u64)?);
        }
        Ok(got)
    }
}

struct Flood;

/// What a flood saw: the numbers its sends delivered, those handed back, and what
/// the sink received.
type Seen = (Vec<u64>, Vec<u64>, Vec<u64>);

#[process]
impl Flood {
    /// Spawns a sink whose mailbox holds 4, sends it 1 to 10, and joins it.
    #[entry]
    fn flood(&mut self, reject: bool) -> Result<Seen, BoxError> {
        let overflow = if reject {
            Overflow::Reject
        } else {
            Overflow::DropOldest
        };
        let options = SpawnOptions::new().bounded_mailbox(4, overflow);
        let sink = this::spawn_with(Sink, "collect", (4_u64,), options)?;
        let (mut sent, mut back) = (Vec::new(), Vec::new());
        for n in 1..=10_u64 {
            match this::send(sink, n) {
                Ok(()) => sent.push(n),
                Err(full) if full.kind() == SendErrorKind::MailboxFull => {
                    back.push(full.into_payload().downcast::<u64>()?);
                }
                Err(other) => return Err(other.into()),
            }
        }
        let got = yield_cmd!(Join(sink))??.downcast::<Vec<u64>>()?;
        Ok((sent, back, got))
    }
}

fn one_worker() -> (Scheduler, mpsc::Receiver<DeadLetter>) {
    let (tx, letters) = mpsc::channel();
    let tx = Mutex::new(tx);
    let s = Scheduler::builder()
        .workers(1)
        .on_dead_letter(move |letter| {
            let _ = tx.lock().unwrap().send(letter);
        })
        .build()
        .unwrap();
    (s, letters)
}

#[test]
fn a_rejecting_mailbox_hands_the_overflow_back_to_the_senders_code() {
    let (s, letters) = one_worker();
    let pid = s.spawn(Flood, "flood", (true,)).unwrap();
    let (sent, back, got): Seen = s.wait_timeout(pid, WAIT).unwrap().downcast().unwrap();
    assert_eq!(sent, [1, 2, 3, 4]);
    assert_eq!(back, [5, 6, 7, 8, 9, 10]);
    assert_eq!(got, [1, 2, 3, 4]);
    let metrics = s.metrics();
    assert_eq!(
        (metrics.rejected_messages, metrics.dropped_messages),
        (6, 0)
    );
    drop(s);
    assert!(letters.try_recv().is_err(), "nothing was dropped");
}

#[test]
fn a_dropping_mailbox_keeps_the_newest_and_dead_letters_the_oldest() {
    let (s, letters) = one_worker();
    let pid = s.spawn(Flood, "flood", (false,)).unwrap();
    let (sent, back, got): Seen = s.wait_timeout(pid, WAIT).unwrap().downcast().unwrap();
    assert_eq!(sent, (1..=10).collect::<Vec<_>>());
    assert!(back.is_empty());
    assert_eq!(got, [7, 8, 9, 10]);
    let dropped: Vec<u64> = letters
        .try_iter()
        .map(|letter| {
            assert_eq!(letter.from, Some(pid));
            assert_eq!(letter.reason, DeadLetterReason::DroppedOldest);
            letter.payload.downcast().unwrap()
        })
        .collect();
    assert_eq!(dropped, [1, 2, 3, 4, 5, 6]);
    let metrics = s.metrics();
    assert_eq!(
        (
            metrics.dropped_messages,
            metrics.dead_letters,
            metrics.rejected_messages
        ),
        (6, 6, 0)
    );
}

/// What [`Picky`] waits for first: never sent, so it waits until cancelled.
struct Go;

struct Picky;

#[process]
impl Picky {
    /// Waits for a `Go` (which never comes: a cancel ends the wait), then receives
    /// `n` numbers and returns them.
    #[entry]
    fn wait_then_collect(&mut self, n: u64) -> Result<Vec<u64>, BoxError> {
        let cancelled = recv!(Go).err().is_some_and(|e| e.is_cancelled());
        assert!(cancelled, "only a cancel ends the wait");
        let mut got = Vec::new();
        for _ in 0..n {
            got.push(recv!(u64)?);
        }
        Ok(got)
    }
}

/// Waits until `pid` waits for a message: every message sent to it before this
/// call is then in its machine's own buffer (a message sent to a process waiting
/// for one makes it runnable, and one that arrives during a step makes it run
/// again), not in its mailbox's queue.
fn wait_until_receiving(s: &Scheduler, pid: wsched::Pid) -> wsched::ProcessInfo {
    wait_until(s, pid, |_| true)
}

/// [`wait_until_receiving`], until the listing also says `ready`.
fn wait_until(
    s: &Scheduler,
    pid: wsched::Pid,
    ready: impl Fn(&wsched::ProcessInfo) -> bool,
) -> wsched::ProcessInfo {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let info = s.processes().into_iter().find(|p| p.pid == pid).unwrap();
        if info.state == wsched::ProcessState::WaitingForMessage && ready(&info) {
            return info;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never waited: {info:?}"
        );
        std::thread::yield_now();
    }
}

/// Spawns a [`Picky`] with a bounded mailbox of 4, sends it 1 to 4, which it takes
/// into its own buffer, then 5 to 10 while it still waits in `recv!(Go)`.
/// Returns the PID and what the sends of 5 to 10 handed back.
fn flood_picky(s: &Scheduler, overflow: Overflow, n: u64) -> (wsched::Pid, Vec<u64>) {
    let options = SpawnOptions::new().bounded_mailbox(4, overflow);
    let pid = s
        .spawn_with(Picky, "wait_then_collect", (n,), options)
        .unwrap();
    for k in 1..=4_u64 {
        s.send(pid, k).unwrap();
    }
    let info = wait_until_receiving(s, pid);
    // Taken in, not received: they still count, in the listing too.
    assert_eq!(info.mailbox, 4);
    assert_eq!(info.bounded_mailbox.unwrap().queued, 4);
    let mut back = Vec::new();
    for k in 5..=10_u64 {
        if let Err(refused) = s.send(pid, k) {
            assert_eq!(refused.kind(), SendErrorKind::MailboxFull);
            back.push(refused.into_payload().downcast::<u64>().unwrap());
        }
    }
    (pid, back)
}

#[test]
fn a_rejecting_mailbox_bounds_what_a_process_blocked_in_a_typed_recv_took_in() {
    let (s, letters) = one_worker();
    let (pid, back) = flood_picky(&s, Overflow::Reject, 4);
    assert_eq!(
        back,
        [5, 6, 7, 8, 9, 10],
        "four unreceived fill the mailbox"
    );
    let info = wait_until_receiving(&s, pid);
    assert_eq!(info.mailbox, 4);
    let mailbox = info.bounded_mailbox.unwrap();
    assert_eq!((mailbox.queued, mailbox.rejected), (4, 6));
    s.cancel(pid).unwrap();
    let got: Vec<u64> = s.wait_timeout(pid, WAIT).unwrap().downcast().unwrap();
    assert_eq!(got, [1, 2, 3, 4]);
    assert_eq!(s.metrics().rejected_messages, 6);
    drop(s);
    assert!(letters.try_recv().is_err(), "nothing was dropped");
}

#[test]
fn receiving_frees_the_room_of_what_a_process_took_in() {
    let (s, _letters) = one_worker();
    // Receives 5: the four it holds, then one more, for which there is room again.
    let (pid, back) = flood_picky(&s, Overflow::Reject, 5);
    assert_eq!(back.len(), 6);
    s.cancel(pid).unwrap();
    // It received its four and waits for the fifth: the room is back.
    let info = wait_until_receiving(&s, pid);
    assert_eq!(info.bounded_mailbox.unwrap().queued, 0);
    assert_eq!(info.mailbox, 0);
    s.send(pid, 11_u64).unwrap();
    let got: Vec<u64> = s.wait_timeout(pid, WAIT).unwrap().downcast().unwrap();
    assert_eq!(got, [1, 2, 3, 4, 11]);
}

#[test]
fn a_dropping_mailbox_drops_the_oldest_message_a_process_took_in_and_did_not_receive() {
    let (s, letters) = one_worker();
    let (pid, back) = flood_picky(&s, Overflow::DropOldest, 4);
    assert!(back.is_empty(), "a dropping mailbox takes every send");
    // 1 to 4 waited in the process's own buffer, 5 and 6 maybe in its queue: the
    // six oldest are dropped, whichever buffer held them.
    let mut dropped: Vec<u64> = (0..6)
        .map(|_| {
            let letter = letters.recv_timeout(WAIT).expect("a dropped message");
            assert_eq!((letter.to, letter.from), (pid, None));
            assert_eq!(letter.reason, DeadLetterReason::DroppedOldest);
            letter.payload.downcast().unwrap()
        })
        .collect();
    dropped.sort_unstable();
    assert_eq!(dropped, [1, 2, 3, 4, 5, 6]);
    let info = wait_until_receiving(&s, pid);
    assert_eq!(info.mailbox, 4);
    let mailbox = info.bounded_mailbox.unwrap();
    assert_eq!((mailbox.queued, mailbox.dropped), (4, 6));
    s.cancel(pid).unwrap();
    let got: Vec<u64> = s.wait_timeout(pid, WAIT).unwrap().downcast().unwrap();
    assert_eq!(got, [7, 8, 9, 10]);
    let metrics = s.metrics();
    assert_eq!((metrics.dropped_messages, metrics.dead_letters), (6, 6));
    drop(s);
    assert!(letters.try_recv().is_err(), "no other dead letter");
}

/// Completed by the test.
struct Gate;

impl Command for Gate {
    type Output = ();
}

struct Gated;

#[process]
impl Gated {
    /// Takes messages in while it waits for a `Go` (until cancelled), then waits
    /// for a `Gate` with them unreceived, then receives four numbers.
    #[entry]
    fn hold_through_a_yield(&mut self) -> Result<Vec<u64>, BoxError> {
        assert!(recv!(Go).err().is_some_and(|e| e.is_cancelled()));
        yield_cmd!(Gate)?;
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(recv!(u64)?);
        }
        Ok(got)
    }
}

#[test]
fn a_process_waiting_for_a_yield_drops_the_oldest_it_took_in_at_once() {
    let (gates_tx, gates) = mpsc::channel::<wsched::command::Completer<Gate>>();
    let gates_tx = Mutex::new(gates_tx);
    let (letters_tx, letters) = mpsc::channel();
    let letters_tx = Mutex::new(letters_tx);
    let s = Scheduler::builder()
        .workers(1)
        .handler(move |Gate, done| gates_tx.lock().unwrap().send(done).unwrap())
        .on_dead_letter(move |letter: DeadLetter| {
            let _ = letters_tx.lock().unwrap().send(letter);
        })
        .build()
        .unwrap();
    let options = SpawnOptions::new().bounded_mailbox(4, Overflow::DropOldest);
    let pid = s
        .spawn_with(Gated, "hold_through_a_yield", (), options)
        .unwrap();
    for k in 1..=4_u64 {
        s.send(pid, k).unwrap();
    }
    wait_until_receiving(&s, pid);
    s.cancel(pid).unwrap();
    // Waiting for its `Gate`, 1 to 4 in its own buffer: a message does not wake
    // it, but a drop it owes does.
    let gate = gates.recv_timeout(WAIT).expect("the gate");
    for k in 5..=6_u64 {
        s.send(pid, k).unwrap();
    }
    let dropped: Vec<u64> = (0..2)
        .map(|_| {
            let letter = letters.recv_timeout(WAIT).expect("dropped before the gate");
            assert_eq!(letter.reason, DeadLetterReason::DroppedOldest);
            letter.payload.downcast().unwrap()
        })
        .collect();
    assert_eq!(dropped, [1, 2]);
    gate.complete(());
    let got: Vec<u64> = s.wait_timeout(pid, WAIT).unwrap().downcast().unwrap();
    assert_eq!(got, [3, 4, 5, 6]);
    assert_eq!(s.metrics().dropped_messages, 2);
}

struct Watcher;

#[process]
impl Watcher {
    /// Monitors `target`, waits for a `Go` (until cancelled), then receives the
    /// `Down` and one number.
    #[entry]
    fn watch(&mut self, target: wsched::Pid) -> Result<u64, BoxError> {
        this::monitor(target);
        assert!(recv!(Go).err().is_some_and(|e| e.is_cancelled()));
        recv!(wsched::Down)?;
        Ok(recv!(u64)?)
    }
}

#[test]
fn a_down_a_process_took_in_takes_no_room() {
    let (s, _letters) = one_worker();
    let target = s.spawn(Sink, "collect", (1_u64,)).unwrap();
    let options = SpawnOptions::new().bounded_mailbox(1, Overflow::Reject);
    let pid = s.spawn_with(Watcher, "watch", (target,), options).unwrap();
    wait_until_receiving(&s, pid);
    s.send(target, 7_u64).unwrap();
    s.wait_timeout(target, WAIT).unwrap();
    // The `Down` (sent after the target's result is out) comes into the watcher's
    // own buffer, unreceived, where it takes no room.
    let info = wait_until(&s, pid, |info| info.mailbox == 1);
    assert_eq!(info.bounded_mailbox.unwrap().queued, 0);
    s.send(pid, 1_u64).unwrap();
    wait_until_receiving(&s, pid);
    let full = s.send(pid, 2_u64).unwrap_err();
    assert_eq!(full.kind(), SendErrorKind::MailboxFull);
    s.cancel(pid).unwrap();
    assert_eq!(
        s.wait_timeout(pid, WAIT)
            .unwrap()
            .downcast::<u64>()
            .unwrap(),
        1
    );
}
