//! Timed messages: `send_after` and `send_interval` from outside and from
//! hand-written processes — never before their deadline, in deadline order,
//! cancellable, dropped and counted when their target has ended, released at
//! shutdown.
//!
//! Timing is asserted one way only: a message never arrives before its deadline.
//! Upper bounds are hang guards ([`PATIENCE`]); every wait is for the message itself.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::Scripted;
use wsched::command::Completer;
use wsched::{
    Command, Event, Payload, Pid, Scheduler, SendErrorKind, Status, StepError, TimedSendErrorKind,
    TimerRef,
};

const PATIENCE: Duration = Duration::from_secs(20);
const HOUR: Duration = Duration::from_secs(3600);
const MS: Duration = Duration::from_millis(1);

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .build()
        .expect("scheduler starts")
}

/// A message as a forwarder saw it.
#[derive(Debug)]
struct Arrival {
    /// The message, if it was a `&'static str`.
    label: &'static str,
    from: Option<Pid>,
    at: Instant,
}

/// Tells the test about every message it gets, as it gets it; finishes after a step
/// that brought the message "end" or a cancel. It reads the whole step's events even
/// then: a hand-written step's unread events are dropped with it, and would be
/// neither told about nor dead letters.
fn forwarder(tx: mpsc::Sender<Arrival>) -> Scripted {
    Scripted::new(move |_, events, out| {
        let mut done = false;
        for event in events {
            match event {
                Event::Message(m) => {
                    let label = m.payload.downcast_ref::<&str>().copied().unwrap_or("?");
                    let _ = tx.send(Arrival {
                        label,
                        from: m.from,
                        at: Instant::now(),
                    });
                    done |= label == "end";
                }
                Event::Cancel => done = true,
                Event::Completion(_) => {}
            }
        }
        out.set_status(if done {
            Status::Done(Payload::unit())
        } else {
            Status::WaitingForMessage
        });
        Ok(())
    })
}

fn next(rx: &mpsc::Receiver<Arrival>) -> Arrival {
    rx.recv_timeout(PATIENCE).expect("the message arrives")
}

/// Arrivals up to and including the one labelled `last`.
fn until(rx: &mpsc::Receiver<Arrival>, last: &str) -> Vec<Arrival> {
    let mut seen = Vec::new();
    loop {
        let arrival = next(rx);
        let done = arrival.label == last;
        seen.push(arrival);
        if done {
            return seen;
        }
    }
}

fn labels(arrivals: &[Arrival]) -> Vec<&'static str> {
    arrivals.iter().map(|a| a.label).collect()
}

/// Waits, boundedly, until `condition` holds (for state the timer thread changes
/// with no message to wait for).
#[track_caller]
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting until {what}");
        std::thread::yield_now();
    }
}

#[test]
fn messages_sent_after_a_delay_arrive_in_deadline_order_and_never_early() {
    let s = scheduler(2);
    let (tx, rx) = mpsc::channel();
    let pid = s.spawn(forwarder(tx), "run", ()).unwrap();
    // Armed out of order, due 10 ms apart. A deadline is "now + delay" when
    // `send_after` is called, so each lies between `armed + delay` and
    // `armed + window + delay`; a preemption of this thread while arming them can
    // swap two whose delays differ by less than that window.
    let delays = [("c", 30), ("a", 10), ("d", 40), ("b", 20)];
    let armed = Instant::now();
    for (label, ms) in delays {
        s.send_after(pid, label, ms * MS).unwrap();
    }
    let window = armed.elapsed();
    let seen: Vec<Arrival> = (0..delays.len()).map(|_| next(&rx)).collect();
    let delay = |label: &str| delays.iter().find(|(l, _)| *l == label).unwrap().1 * MS;
    for arrival in &seen {
        assert!(
            arrival.at.duration_since(armed) >= delay(arrival.label),
            "{arrival:?} arrived before its {:?}",
            delay(arrival.label)
        );
        assert_eq!(arrival.from, None, "sent from outside");
    }
    let order = labels(&seen);
    let position = |label: &str| order.iter().position(|l| *l == label).unwrap();
    for (later, _) in delays {
        for (sooner, _) in delays {
            // `sooner`'s deadline is surely at least a tick before `later`'s.
            if delay(later) >= delay(sooner) + window + MS {
                assert!(
                    position(sooner) < position(later),
                    "{sooner} after {later}, armed within {window:?}: {order:?}"
                );
            }
        }
    }
    if window < 9 * MS {
        // The usual case, and the one the check above reduces to.
        assert_eq!(order, ["a", "b", "c", "d"]);
    }
    s.send(pid, "end").unwrap();
    until(&rx, "end");
    s.wait_timeout(pid, PATIENCE).unwrap();
    let metrics = s.metrics();
    assert_eq!(
        (metrics.pending_timers, metrics.undelivered_timed_messages),
        (0, 0)
    );
    assert!(s.shutdown(PATIENCE).stopped.is_empty());
}

/// Runs `attempt` until it returns `Some`, for at most [`PATIENCE`]. An attempt
/// returns `None` when this thread was held up (by a loaded machine) for longer than a
/// timed message's delay at a moment the test needs it not to have fallen due yet;
/// the attempt checks, before giving up, what the program guarantees in that case.
#[track_caller]
fn until_not_held_up<T>(what: &str, mut attempt: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(done) = attempt() {
            return done;
        }
        assert!(Instant::now() < deadline, "{what}: held up every time");
    }
}

#[test]
fn a_cancelled_message_is_never_sent_and_cancel_says_whether_it_stopped_it() {
    let s = scheduler(2);
    let (tx, rx) = mpsc::channel();
    let pid = s.spawn(forwarder(tx), "run", ()).unwrap();
    let (cancelled, next_one) = until_not_held_up("cancelling before the deadline", || {
        let armed = Instant::now();
        let cancelled = s.send_after(pid, "cancelled", 10 * MS).unwrap();
        // Due after the cancelled one: had that been sent, it would arrive first.
        let next_one = s.send_after(pid, "next", 30 * MS).unwrap();
        if !cancelled.cancel() {
            // It fell due first: only possible once its delay had passed.
            assert!(armed.elapsed() >= 10 * MS, "fired early");
            assert_eq!(labels(&until(&rx, "next")), ["cancelled", "next"]);
            assert!(!cancelled.is_active());
            return None;
        }
        Some((cancelled, next_one))
    });
    assert!(!cancelled.is_active());
    assert!(!cancelled.clone().cancel(), "nothing left to stop");
    // Unlinked at once: at most the "next" message's timer is left.
    assert!(s.metrics().pending_timers <= 1, "unlinked at once");
    assert_eq!(labels(&until(&rx, "next")), ["next"]);
    assert!(!next_one.is_active());
    assert!(!next_one.cancel(), "it had fired");
    assert_eq!(s.metrics().pending_timers, 0);
    s.send(pid, "end").unwrap();
    until(&rx, "end");
    s.wait_timeout(pid, PATIENCE).unwrap();
    assert_eq!(s.metrics().undelivered_timed_messages, 0);
    s.shutdown(PATIENCE);
}

#[test]
fn an_interval_sends_on_whole_periods_and_nothing_once_cancel_returns() {
    const PERIOD: Duration = Duration::from_millis(5);
    let s = scheduler(2);
    let (tx, rx) = mpsc::channel();
    let pid = s.spawn(forwarder(tx), "run", ()).unwrap();
    let armed = Instant::now();
    let ticks = s.send_interval(pid, "tick", PERIOD).unwrap();
    for k in 1..=5 {
        let tick = next(&rx);
        assert_eq!(tick.label, "tick");
        assert!(
            tick.at.duration_since(armed) >= PERIOD * k,
            "tick {k} arrived at {:?}, before {k} periods",
            tick.at.duration_since(armed)
        );
    }
    assert!(ticks.is_active());
    assert!(ticks.cancel());
    // Whatever the interval sent before `cancel` returned is in the mailbox ahead of
    // this marker; nothing may follow it in the next ten periods.
    s.send(pid, "marker").unwrap();
    s.send_after(pid, "end", PERIOD * 10).unwrap();
    let seen = until(&rx, "end");
    let marker = seen.iter().position(|a| a.label == "marker").unwrap();
    assert_eq!(
        labels(&seen[marker..]),
        ["marker", "end"],
        "a tick after the cancel returned"
    );
    assert!(seen[..marker].iter().all(|a| a.label == "tick"));
    assert!(!ticks.cancel() && !ticks.is_active());
    s.wait_timeout(pid, PATIENCE).unwrap();
    let metrics = s.metrics();
    assert_eq!(
        (metrics.pending_timers, metrics.undelivered_timed_messages),
        (0, 0)
    );
    s.shutdown(PATIENCE);
}

/// A message holding a reference that tells when every copy of it is gone.
#[derive(Clone)]
struct Probe(#[allow(dead_code)] Arc<()>);

/// What became of one timed message sent to a process that had been told to end:
/// `Some(())` if it fell due after its target had ended (dropped and counted), `None`
/// if this thread was held up past its delay and it reached the mailbox first (read,
/// or unread and a dead letter) — checked either way. `send_to` arms it, with
/// `delay`.
fn due_after_the_end(
    s: &Scheduler,
    delay: Duration,
    send_to: impl FnOnce(Pid) -> TimerRef,
) -> Option<()> {
    let (tx, rx) = mpsc::channel();
    let pid = s.spawn(forwarder(tx), "run", ()).unwrap();
    let before = s.metrics();
    let armed = Instant::now();
    let timer = send_to(pid);
    if let Err(error) = s.send(pid, "end") {
        // Only if the message came first and failed its reader (a panicking drop).
        assert_eq!(error.kind(), SendErrorKind::Finished);
    }
    let ended = s.wait_timeout(pid, PATIENCE);
    // The target has ended: whatever it read, it has told.
    let read = rx.try_iter().filter(|a| a.label != "end").count() as u64;
    // The timer thread counts an undelivered message just after the timer stops
    // being active, and a message left unread becomes a dead letter as its target's
    // end is tidied up: wait until it is accounted for, one way or another.
    let accounted = || {
        let now = s.metrics();
        let undelivered = now.undelivered_timed_messages - before.undelivered_timed_messages;
        (undelivered, now.dead_letters - before.dead_letters)
    };
    wait_until("the message is accounted for", || {
        let (undelivered, dead) = accounted();
        undelivered + dead + read > 0
    });
    assert!(!timer.is_active());
    assert!(!timer.cancel(), "it fell due: nothing to cancel");
    assert_eq!(s.metrics().pending_timers, 0);
    let (undelivered, dead) = accounted();
    if undelivered == 1 {
        assert_eq!((dead, read), (0, 0));
        ended.expect("the target ended as told");
        return Some(());
    }
    assert!(armed.elapsed() >= delay, "fell due early");
    assert_eq!((undelivered, dead + read), (0, 1), "counted once");
    None
}

#[test]
fn a_message_due_after_its_target_ended_is_dropped_and_counted() {
    let s = scheduler(2);
    let alive = Arc::new(());
    until_not_held_up("ending before the message falls due", || {
        due_after_the_end(&s, 20 * MS, |pid| {
            s.send_after(pid, Probe(alive.clone()), 20 * MS).unwrap()
        })
    });
    assert_eq!(Arc::strong_count(&alive), 1, "the message was dropped");
    s.shutdown(PATIENCE);
}

#[test]
fn an_interval_stops_by_itself_when_its_target_has_ended() {
    let s = scheduler(2);
    let (tx, rx) = mpsc::channel();
    let pid = s.spawn(forwarder(tx), "run", ()).unwrap();
    let alive = Arc::new(());
    let ticks = s.send_interval(pid, Probe(alive.clone()), 2 * MS).unwrap();
    for _ in 0..3 {
        assert_eq!(next(&rx).label, "?", "a probe");
    }
    s.send(pid, "end").unwrap();
    until(&rx, "end");
    s.wait_timeout(pid, PATIENCE).unwrap();
    wait_until("the interval stops", || !ticks.is_active());
    assert!(!ticks.cancel(), "it had stopped by itself");
    let metrics = s.metrics();
    assert_eq!(
        metrics.undelivered_timed_messages, 1,
        "the one message that found its target gone"
    );
    assert_eq!(metrics.pending_timers, 0, "not re-armed");
    // The interval's own copy went with it; the messages delivered were dropped by
    // the forwarder or with its mailbox.
    assert_eq!(Arc::strong_count(&alive), 1);
    s.shutdown(PATIENCE);
}

#[test]
fn arming_for_a_missing_or_ended_target_fails_and_hands_the_message_back() {
    let s = scheduler(1);
    let never = Pid::from_raw(1_000_000);
    let error = s.send_after(never, String::from("hi"), MS).unwrap_err();
    assert_eq!(
        (error.to(), error.kind()),
        (never, TimedSendErrorKind::NoSuchProcess)
    );
    assert_eq!(
        error.to_string(),
        "cannot send a `String` to <1000000> later: no such process (the \
         message is returned in this error)"
    );
    assert_eq!(error.into_payload().downcast::<String>().unwrap(), "hi");

    let (tx, _rx) = mpsc::channel();
    let pid = s.spawn(forwarder(tx), "run", ()).unwrap();
    s.send(pid, "end").unwrap();
    s.wait_timeout(pid, PATIENCE).unwrap();
    let error = s.send_interval(pid, 7_u32, MS).unwrap_err();
    assert_eq!(error.kind(), TimedSendErrorKind::Finished);
    assert_eq!(error.message_type(), "u32");
    assert_eq!(error.into_payload().downcast::<u32>().unwrap(), 7);

    s.shutdown(PATIENCE);
    let error = s.send_after(pid, 1_u8, MS).unwrap_err();
    assert_eq!(error.kind(), TimedSendErrorKind::Finished, "after shutdown");
    assert_eq!(
        s.metrics().undelivered_timed_messages,
        0,
        "nothing was armed"
    );
}

/// A command whose handler does nothing: registering it gives the scheduler a
/// handler that holds `FreedFlag`, which tells when the scheduler was freed.
struct Nothing;

impl Command for Nothing {
    type Output = ();
}

struct FreedFlag(Arc<AtomicBool>);

impl Drop for FreedFlag {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

#[test]
fn shutdown_releases_pending_timed_messages_and_nothing_keeps_the_scheduler() {
    let freed = Arc::new(AtomicBool::new(false));
    let flag = FreedFlag(freed.clone());
    let s = Scheduler::builder()
        .workers(1)
        .handler(move |_: Nothing, done: Completer<Nothing>| {
            let _alive = &flag;
            done.complete(());
        })
        .build()
        .unwrap();
    let (tx, _rx) = mpsc::channel();
    let pid = s.spawn(forwarder(tx), "run", ()).unwrap();
    let alive = Arc::new(());
    let mut refs: Vec<TimerRef> = (0..3)
        .map(|_| s.send_after(pid, Probe(alive.clone()), HOUR).unwrap())
        .collect();
    refs.push(s.send_interval(pid, Probe(alive.clone()), HOUR).unwrap());
    refs.push(
        s.send_after(pid, Probe(alive.clone()), Duration::MAX)
            .unwrap(),
    );
    assert_eq!(s.metrics().pending_timers, 5);
    assert!(s.shutdown(PATIENCE).stopped.is_empty());
    let metrics = s.metrics();
    assert_eq!(metrics.pending_timers, 0);
    assert_eq!(
        metrics.undelivered_timed_messages, 5,
        "counted as undelivered"
    );
    assert_eq!(Arc::strong_count(&alive), 1, "every message was dropped");
    for timer in &refs {
        assert!(!timer.is_active() && !timer.cancel());
    }
    drop(s);
    assert!(
        freed.load(SeqCst),
        "the refs still held do not keep the scheduler alive"
    );
}

/// A message whose clone panics after `clones` clones, and whose drop panics if it is
/// `doomed` (clones are not).
struct Nasty {
    clones: Arc<AtomicUsize>,
    doomed: bool,
}

impl Clone for Nasty {
    fn clone(&self) -> Self {
        if self.clones.fetch_sub(1, SeqCst) == 0 {
            panic!("nasty clone");
        }
        Self {
            clones: self.clones.clone(),
            doomed: false,
        }
    }
}

impl Drop for Nasty {
    fn drop(&mut self) {
        if self.doomed && !std::thread::panicking() {
            panic!("nasty drop");
        }
    }
}

#[test]
fn panicking_clones_and_drops_of_timed_messages_spare_the_timer_thread() {
    support::quiet_expected_panics("nasty");
    let s = scheduler(1);
    let (tx, rx) = mpsc::channel();
    let pid = s.spawn(forwarder(tx), "run", ()).unwrap();
    // Two clones go out, then the third clone panics and stops the interval.
    let ticks = s
        .send_interval(
            pid,
            Nasty {
                clones: Arc::new(AtomicUsize::new(2)),
                doomed: false,
            },
            MS,
        )
        .unwrap();
    next(&rx);
    next(&rx);
    wait_until("the interval stops", || !ticks.is_active());
    assert_eq!(s.metrics().undelivered_timed_messages, 1);
    // A message whose drop panics, due after its target ended.
    until_not_held_up("ending before the message falls due", || {
        due_after_the_end(&s, 20 * MS, |gone| {
            let nasty = Nasty {
                clones: Arc::new(AtomicUsize::new(0)),
                doomed: true,
            };
            s.send_after(gone, nasty, 20 * MS).unwrap()
        })
    });
    // The timer thread lives on.
    s.send_after(pid, "end", MS).unwrap();
    assert_eq!(labels(&until(&rx, "end")).last(), Some(&"end"));
    s.shutdown(PATIENCE);
}

/// Ticks itself every millisecond through its context; after three ticks cancels
/// the interval and asks for one last message, then finishes with what it saw.
fn self_ticker() -> Scripted {
    let mut ticking: Option<TimerRef> = None;
    let mut seen: Vec<&'static str> = Vec::new();
    Scripted::new(move |ctx, events, out| {
        if ticking.is_none() {
            let never = Pid::from_raw(1_000_000);
            let refused = ctx.send_after(never, "x", MS).unwrap_err();
            assert_eq!(refused.kind(), TimedSendErrorKind::NoSuchProcess);
            ticking = Some(
                ctx.send_interval(ctx.pid(), "tick", MS)
                    .map_err(StepError::new)?,
            );
        }
        for event in events {
            if let Event::Message(m) = event {
                assert_eq!(m.from, Some(ctx.pid()), "sent by itself");
                let label = m.payload.downcast::<&str>().unwrap();
                seen.push(label);
                match label {
                    "tick" if seen.len() == 3 => {
                        let cancelled = ticking.as_ref().unwrap().cancel();
                        assert!(cancelled, "it was running");
                        ctx.send_after(ctx.pid(), "last", 2 * MS)
                            .map_err(StepError::new)?;
                    }
                    "last" => {
                        out.set_status(Status::Done(Payload::new(std::mem::take(&mut seen))));
                        return Ok(());
                    }
                    _ => {}
                }
            }
        }
        out.set_status(Status::WaitingForMessage);
        Ok(())
    })
}

#[test]
fn timed_messages_work_the_same_from_hand_written_processes() {
    let s = scheduler(2);
    let pid = s.spawn(self_ticker(), "run", ()).unwrap();
    let seen = s
        .wait_timeout(pid, PATIENCE)
        .unwrap()
        .downcast::<Vec<&str>>()
        .unwrap();
    // Ticks the interval sent before the cancel (in this same step's events) may
    // follow the third; none comes after "last" was asked for.
    assert_eq!(seen[..3], ["tick", "tick", "tick"]);
    assert_eq!(seen.last(), Some(&"last"));
    assert!(seen[..seen.len() - 1].iter().all(|l| *l == "tick"));
    let metrics = s.metrics();
    assert_eq!(
        (metrics.pending_timers, metrics.undelivered_timed_messages),
        (0, 0)
    );
    s.shutdown(PATIENCE);
}
