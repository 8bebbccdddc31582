//! Inboxes: a thread's mailbox with a PID. Processes send to it; the thread
//! receives by type, by pattern or the oldest, with a timeout; it monitors, is
//! monitored, links; dropping it ends it normally and makes dead letters of what it
//! never received; a shutdown closes it.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::Echo;
use wsched::{DeadLetter, DeadLetterReason, Down, Exit, ExitReason, InboxError, Pid, Scheduler};

/// A hang guard, never a wait for something to happen.
const PATIENCE: Duration = Duration::from_secs(20);

fn scheduler() -> Scheduler {
    Scheduler::builder().workers(2).build().unwrap()
}

#[test]
fn messages_are_received_by_type_by_pattern_or_oldest_and_the_rest_stay_in_order() {
    let s = scheduler();
    let inbox = s.inbox().unwrap();
    for n in 1..=5_u32 {
        s.send(inbox.pid(), n).unwrap();
    }
    s.send(inbox.pid(), "five").unwrap();
    assert_eq!(inbox.recv::<&str>(PATIENCE).unwrap(), "five");
    assert_eq!(
        inbox
            .recv_matching(PATIENCE, |n: &u32| n.is_multiple_of(2))
            .unwrap(),
        2,
        "the first that matches"
    );
    // A pattern nothing matches leaves every message where it was.
    assert_eq!(
        inbox.recv_matching(Duration::from_millis(1), |n: &u32| *n > 100),
        Err(InboxError::Timeout)
    );
    assert_eq!(
        inbox.recv::<String>(Duration::ZERO),
        Err(InboxError::Timeout)
    );
    let rest: Vec<u32> = (0..4)
        .map(|_| {
            inbox
                .recv_message(PATIENCE)
                .unwrap()
                .payload
                .downcast()
                .unwrap()
        })
        .collect();
    assert_eq!(rest, [1, 3, 4, 5]);
    assert!(inbox.is_empty());
    assert_eq!(inbox.try_recv::<u32>(), None);
}

#[test]
fn a_receive_of_one_of_several_types_takes_the_oldest_of_them_and_leaves_the_rest() {
    let s = scheduler();
    let inbox = s.inbox().unwrap();
    s.send(inbox.pid(), 1_u32).unwrap();
    s.send(inbox.pid(), "text").unwrap();
    s.send(inbox.pid(), 2_u64).unwrap();
    s.send(inbox.pid(), 3_u32).unwrap();
    let u64_or_str = |m: &wsched::Message| m.payload.is::<u64>() || m.payload.is::<&str>();
    let first = inbox.recv_message_where(PATIENCE, u64_or_str).unwrap();
    assert_eq!(first.payload.downcast::<&str>().unwrap(), "text");
    let second = inbox.recv_message_where(PATIENCE, u64_or_str).unwrap();
    assert_eq!(second.payload.downcast::<u64>().unwrap(), 2);
    // Nothing of either type is left: the `u32`s stay, in order.
    assert_eq!(
        inbox
            .recv_message_where(Duration::from_millis(1), u64_or_str)
            .map(|m| m.from),
        Err(InboxError::Timeout)
    );
    assert_eq!(inbox.recv::<u32>(PATIENCE).unwrap(), 1);
    assert_eq!(inbox.recv::<u32>(PATIENCE).unwrap(), 3);
}

#[test]
fn a_receive_waits_for_the_message_a_process_sends_later() {
    let s = scheduler();
    let inbox = s.inbox().unwrap();
    let echo = s.spawn(Echo::new(), "serve", ()).unwrap();
    // Sent from the inbox: the echo answers to the inbox's PID.
    inbox.send(echo, 42_u64).unwrap();
    let answer = inbox.recv_message(PATIENCE).unwrap();
    assert_eq!(answer.from, Some(echo));
    assert_eq!(answer.payload.downcast::<u64>().unwrap(), 42);
}

#[test]
fn an_inbox_monitors_and_links_and_is_monitored() {
    let s = scheduler();
    let inbox = s.inbox().unwrap();
    let echo = s.spawn(Echo::new(), "serve", ()).unwrap();
    let watch = inbox.monitor(echo);
    inbox.trap_exits(true);
    inbox.link(echo);
    s.send(echo, "stop").unwrap();
    let down = inbox
        .recv_matching(PATIENCE, |d: &Down| d.monitor == watch)
        .unwrap();
    assert_eq!((down.pid, down.reason), (echo, ExitReason::Normal));
    let exit = inbox.recv::<Exit>(PATIENCE).unwrap();
    assert_eq!((exit.pid, exit.reason), (echo, ExitReason::Normal));

    // Monitored like a process: dropping it is a normal end.
    let watched = s.monitor(inbox.pid());
    drop(inbox);
    assert_eq!(
        watched.wait_timeout(PATIENCE).expect("it ended").reason,
        ExitReason::Normal
    );
}

#[test]
fn messages_never_received_become_dead_letters_when_it_is_dropped() {
    let letters: Arc<Mutex<Vec<(Pid, u32, DeadLetterReason)>>> = Arc::default();
    let seen = letters.clone();
    let s = Scheduler::builder()
        .workers(2)
        .on_dead_letter(move |letter: DeadLetter| {
            let n = letter.payload.downcast::<u32>().unwrap();
            seen.lock().unwrap().push((letter.to, n, letter.reason));
        })
        .build()
        .unwrap();
    let inbox = s.inbox().unwrap();
    let pid = inbox.pid();
    for n in 1..=3_u32 {
        s.send(pid, n).unwrap();
    }
    assert_eq!(inbox.recv::<u32>(PATIENCE).unwrap(), 1);
    // Wait until the others reached the thread's side, as the listing shows.
    let deadline = std::time::Instant::now() + PATIENCE;
    while inbox.len() < 2 {
        assert!(std::time::Instant::now() < deadline);
        std::thread::yield_now();
    }
    let listed = s
        .processes()
        .into_iter()
        .find(|p| p.pid == pid)
        .expect("listed");
    assert_eq!(listed.entry, wsched::Inbox::ENTRY);
    let down = s.monitor(pid);
    drop(inbox);
    down.wait_timeout(PATIENCE).expect("it ended");
    let mut letters = letters.lock().unwrap().clone();
    letters.sort_by_key(|l| l.1);
    let reasons: Vec<_> = letters.iter().map(|l| (l.0, l.1)).collect();
    assert_eq!(reasons, [(pid, 2), (pid, 3)]);
}

#[test]
fn a_shutdown_closes_the_inbox_and_its_waits_say_so() {
    let s = scheduler();
    let inbox = s.inbox().unwrap();
    s.send(inbox.pid(), 1_u32).unwrap();
    let waiting = std::thread::spawn({
        let pid = inbox.pid();
        move || {
            (
                pid,
                inbox.recv::<String>(PATIENCE),
                inbox.recv::<u32>(PATIENCE),
            )
        }
    });
    s.shutdown(PATIENCE);
    let (_, string, number) = waiting.join().unwrap();
    assert_eq!(string, Err(InboxError::Closed));
    assert_eq!(
        number,
        Ok(1),
        "what came before the end can still be received"
    );
}
