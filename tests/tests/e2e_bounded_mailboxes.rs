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
