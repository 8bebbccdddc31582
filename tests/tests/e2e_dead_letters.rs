//! `#[process]` processes and dead letters: a message a typed `recv!` skipped, still
//! in the machine's buffer when the entry returns, reaches the dead-letter hook with
//! its sender; so does one that came in the step where the entry panicked.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use wsched::prelude::*;
use wsched::{DeadLetter, Scheduler};

const WAIT: Duration = Duration::from_secs(20);

struct Picky;

#[process]
impl Picky {
    /// Receives one `u32` and returns it; anything else stays unread.
    #[entry]
    fn take_number(&mut self) -> Result<u32, BoxError> {
        Ok(recv!(u32)?)
    }
}

/// A scheduler of `workers` workers whose dead letters arrive on the receiver.
fn collecting_dead_letters(workers: usize) -> (Scheduler, mpsc::Receiver<DeadLetter>) {
    let (tx, letters) = mpsc::channel::<DeadLetter>();
    let tx = Mutex::new(tx);
    let s = Scheduler::builder()
        .workers(workers)
        .on_dead_letter(move |letter| {
            let _ = tx.lock().unwrap().send(letter);
        })
        .build()
        .unwrap();
    (s, letters)
}

#[test]
fn a_message_recv_skipped_is_a_dead_letter() {
    let (s, letters) = collecting_dead_letters(2);
    let pid = s.spawn(Picky, "take_number", ()).unwrap();
    s.send(pid, "not a number".to_string()).unwrap();
    s.send(pid, 42_u32).unwrap();
    assert_eq!(
        s.wait_timeout(pid, WAIT)
            .unwrap()
            .downcast::<u32>()
            .unwrap(),
        42
    );
    let letter = letters.recv_timeout(WAIT).expect("a dead letter");
    assert_eq!((letter.to, letter.from), (pid, None));
    assert_eq!(letter.payload.downcast::<String>().unwrap(), "not a number");
    assert_eq!(s.metrics().dead_letters, 1);
    drop(s);
    assert!(letters.try_recv().is_err(), "exactly one");
}

/// Panics in its first step, before any `recv!`.
struct Hasty;

#[process]
impl Hasty {
    #[entry]
    fn run(&mut self) {
        panic!("on purpose, before any recv!");
    }
}

/// Spawns a `Hasty` and sends it a message within the same step: on one worker, the
/// message is among the events of `Hasty`'s first step.
struct Launcher;

#[process]
impl Launcher {
    #[entry]
    fn run(&mut self) -> Result<Pid, BoxError> {
        let hasty = this::spawn_detached(Hasty, "run", ())?;
        this::send(hasty, 7_u32)?;
        Ok(hasty)
    }
}

#[test]
fn a_message_in_the_step_where_the_entry_panics_is_a_dead_letter() {
    // The step hands its first message to the entry's receive straight from its
    // events; an entry that panics before any receive must still leave it to the
    // dead letters, as it would have from the machine's buffer.
    let (s, letters) = collecting_dead_letters(1);
    let launcher = s.spawn(Launcher, "run", ()).unwrap();
    let hasty = s
        .wait_timeout(launcher, WAIT)
        .unwrap()
        .downcast::<Pid>()
        .unwrap();
    let letter = letters.recv_timeout(WAIT).expect("a dead letter");
    assert_eq!((letter.to, letter.from), (hasty, Some(launcher)));
    assert_eq!(letter.payload.downcast::<u32>().unwrap(), 7);
    drop(s);
    assert!(letters.try_recv().is_err(), "exactly one");
}
