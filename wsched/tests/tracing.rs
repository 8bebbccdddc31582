//! The `tracing` feature, seen by a subscriber: each process's span (its fields, a
//! root whatever the spawner is in, entered once per step, closed at the end), the
//! events of steps, spawns, ends, failures, panics and dead letters, in their
//! process's span and at their levels, and the workers' steals and parks, counted
//! against the metrics.
//!
//! Workers are threads of their own, so the subscriber is the global default, one
//! for the whole binary; the tests take turns (the worker events name no scheduler)
//! and each starts from an empty record.
//!
//! `cargo test -p wsched --features tracing --test tracing`

mod support;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use support::{robbed_worker, HeldInStep, Scripted};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event as TracingEvent, Level, Metadata, Subscriber};
use wsched::command::{Command, Completer};
use wsched::{Event, Payload, Pid, Scheduler, Status, StepError, Tag};

// ---- the subscriber --------------------------------------------------------------

/// A span as the subscriber saw it.
#[derive(Clone, Debug)]
struct SpanRecord {
    name: &'static str,
    level: Level,
    fields: HashMap<&'static str, String>,
    /// Made with an explicit `parent: None`.
    root: bool,
    /// Made with no explicit parent (so a child of whatever span was current).
    contextual: bool,
    enters: usize,
    exits: usize,
    /// Handles alive (`clone_span` adds one, `try_close` takes one away).
    handles: usize,
    closed: bool,
}

/// An event as the subscriber saw it.
#[derive(Clone, Debug)]
struct EventRecord {
    level: Level,
    target: &'static str,
    fields: HashMap<&'static str, String>,
    /// Its span: the explicit parent, or else the span current on its thread.
    span: Option<u64>,
}

impl EventRecord {
    fn message(&self) -> &str {
        self.field("message").unwrap_or_default()
    }

    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Default)]
struct Log {
    spans: HashMap<u64, SpanRecord>,
    events: Vec<EventRecord>,
}

static LOG: Mutex<Option<Log>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The spans entered on this thread, innermost last.
    static STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

fn log() -> MutexGuard<'static, Option<Log>> {
    LOG.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Fields(HashMap<&'static str, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_owned());
    }
}

/// Records every span and event (everything is enabled) into `LOG`.
struct Collector;

impl Subscriber for Collector {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut fields = Fields(HashMap::new());
        attributes.record(&mut fields);
        let record = SpanRecord {
            name: attributes.metadata().name(),
            level: *attributes.metadata().level(),
            fields: fields.0,
            root: attributes.is_root(),
            contextual: attributes.is_contextual(),
            enters: 0,
            exits: 0,
            handles: 1,
            closed: false,
        };
        if let Some(log) = log().as_mut() {
            log.spans.insert(id, record);
        }
        Id::from_u64(id)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &TracingEvent<'_>) {
        let mut fields = Fields(HashMap::new());
        event.record(&mut fields);
        let span = if event.is_root() {
            None
        } else if let Some(parent) = event.parent() {
            Some(parent.into_u64())
        } else {
            STACK.with(|stack| stack.borrow().last().copied())
        };
        if let Some(log) = log().as_mut() {
            log.events.push(EventRecord {
                level: *event.metadata().level(),
                target: event.metadata().target(),
                fields: fields.0,
                span,
            });
        }
    }

    fn enter(&self, span: &Id) {
        STACK.with(|stack| stack.borrow_mut().push(span.into_u64()));
        if let Some(record) = log()
            .as_mut()
            .and_then(|l| l.spans.get_mut(&span.into_u64()))
        {
            record.enters += 1;
        }
    }

    fn exit(&self, span: &Id) {
        STACK.with(|stack| {
            let popped = stack.borrow_mut().pop();
            assert_eq!(popped, Some(span.into_u64()), "spans exit in order");
        });
        if let Some(record) = log()
            .as_mut()
            .and_then(|l| l.spans.get_mut(&span.into_u64()))
        {
            record.exits += 1;
        }
    }

    fn clone_span(&self, span: &Id) -> Id {
        if let Some(record) = log()
            .as_mut()
            .and_then(|l| l.spans.get_mut(&span.into_u64()))
        {
            record.handles += 1;
        }
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let mut log = log();
        let Some(record) = log.as_mut().and_then(|l| l.spans.get_mut(&span.into_u64())) else {
            return false;
        };
        record.handles -= 1;
        record.closed = record.handles == 0;
        record.closed
    }
}

/// Installs the collector (once), waits for the other tests to finish, and starts
/// an empty record. Hold the guard for the whole test.
fn start() -> MutexGuard<'static, ()> {
    static INSTALL: Once = Once::new();
    static TURN: Mutex<()> = Mutex::new(());
    INSTALL.call_once(|| {
        tracing::subscriber::set_global_default(Collector).expect("the only global subscriber");
    });
    let turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    *log() = Some(Log::default());
    turn
}

/// The spans and events recorded so far.
fn recorded() -> (HashMap<u64, SpanRecord>, Vec<EventRecord>) {
    let log = log();
    let log = log.as_ref().expect("started");
    (log.spans.clone(), log.events.clone())
}

/// The id and record of the `process` span of `pid`.
fn span_of(spans: &HashMap<u64, SpanRecord>, pid: Pid) -> (u64, SpanRecord) {
    let pid = pid.as_u64().to_string();
    let mut found = spans
        .iter()
        .filter(|(_, s)| s.name == "process" && s.fields.get("pid") == Some(&pid));
    let (id, span) = found.next().expect("the process has a span");
    assert!(found.next().is_none(), "one span per process");
    (*id, span.clone())
}

/// The events with `message` inside span `span`.
fn events_in<'a>(events: &'a [EventRecord], span: u64, message: &str) -> Vec<&'a EventRecord> {
    events
        .iter()
        .filter(|e| e.span == Some(span) && e.message() == message)
        .collect()
}

/// Waits until `condition` holds of the record, or fails after 10 s.
fn wait_for(what: &str, condition: impl Fn(&[EventRecord]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition(&recorded().1) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

// ---- processes -------------------------------------------------------------------

/// Completed at once by its handler, on the worker: the yielding step runs again
/// directly.
struct Nop;

impl Command for Nop {
    type Output = ();
}

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .handler(|_: Nop, done: Completer<Nop>| done.complete(()))
        .build()
        .expect("the scheduler starts")
}

/// Yields `Nop` `n` times, then finishes: `n + 1` steps, all in one run.
fn yielder(n: u64) -> Scripted {
    let mut left = n;
    Scripted::new(move |_, events, out| {
        for event in events {
            if let Event::Completion(c) = event {
                c.result.map_err(StepError::new)?;
            }
        }
        if left == 0 {
            out.set_status(Status::Done(Payload::unit()));
        } else {
            left -= 1;
            out.yield_command(Tag(left), Nop);
            out.set_status(Status::WaitingForYields);
        }
        Ok(())
    })
}

/// Finishes in its first step.
fn quick() -> Scripted {
    Scripted::new(|_, _, out| {
        out.set_status(Status::Done(Payload::unit()));
        Ok(())
    })
}

// ---- spans -----------------------------------------------------------------------

#[test]
fn each_process_has_a_root_span_with_its_pid_entry_and_parent_entered_once_per_step() {
    let _turn = start();
    let s = scheduler(2);
    let (child_tx, child_rx) = mpsc::channel();
    // The parent spawns the child from inside its step (in the parent's span), then
    // finishes.
    let mut child_tx = Some(child_tx);
    let parent_process = Scripted::new(move |ctx, _, out| {
        let child = ctx.spawn(yielder(3), "run", ()).map_err(StepError::new)?;
        child_tx.take().expect("one step").send(child).unwrap();
        out.set_status(Status::Done(Payload::unit()));
        Ok(())
    });
    // Spawned from inside a span of the test's own.
    let parent = {
        let _outer = tracing::info_span!("outer").entered();
        s.spawn(parent_process, "run", ()).unwrap()
    };
    let child = child_rx.recv().unwrap();
    s.wait(child).unwrap();
    s.wait(parent).unwrap();
    // Every worker has left every step (and dropped its copies of the spans).
    drop(s);

    let (spans, events) = recorded();
    let (parent_id, parent_span) = span_of(&spans, parent);
    let (child_id, child_span) = span_of(&spans, child);
    for span in [&parent_span, &child_span] {
        assert_eq!(span.level, Level::DEBUG);
        assert_eq!(span.fields.get("entry").map(String::as_str), Some("run"));
        assert!(
            span.root && !span.contextual,
            "a root, not a child of the spawner's span: {span:?}"
        );
        assert!(span.closed, "closed once the process ended: {span:?}");
    }
    assert_eq!(
        parent_span.fields.get("parent"),
        None,
        "spawned from outside"
    );
    assert_eq!(
        child_span.fields.get("parent"),
        Some(&parent.as_u64().to_string())
    );
    // The parent ran one step; the child four (three yields completed at once, each
    // stepped again directly, and the last step).
    assert_eq!((parent_span.enters, parent_span.exits), (1, 1));
    assert_eq!((child_span.enters, child_span.exits), (4, 4));

    // The child's yields and their completions, inside its span, at TRACE.
    let yields = events_in(&events, child_id, "yield");
    let completions = events_in(&events, child_id, "completion");
    assert_eq!(yields.len(), 3, "{events:?}");
    assert_eq!(completions.len(), 3, "{events:?}");
    for event in yields.iter().chain(&completions) {
        assert_eq!((event.level, event.target), (Level::TRACE, "wsched"));
    }
    let tags: Vec<&str> = yields.iter().filter_map(|e| e.field("tag")).collect();
    assert_eq!(tags, ["2", "1", "0"]);
    assert!(
        yields[0].field("command").unwrap().ends_with("Nop"),
        "{:?}",
        yields[0]
    );
    assert!(completions.iter().all(|e| e.field("ok") == Some("true")));

    // Spawned and exited, at DEBUG, in their own spans.
    for (id, pid) in [(parent_id, parent), (child_id, child)] {
        let [spawned] = events_in(&events, id, "spawned")[..] else {
            panic!("one spawn event for {pid}: {events:?}")
        };
        assert_eq!(spawned.level, Level::DEBUG);
        assert_eq!(spawned.field("pid"), Some(&*pid.as_u64().to_string()));
        let [exited] = events_in(&events, id, "exited")[..] else {
            panic!("one exit event for {pid}: {events:?}")
        };
        assert_eq!(exited.level, Level::DEBUG);
        assert_eq!(exited.field("reason"), Some("finished normally"));
    }
    assert_eq!(
        events_in(&events, child_id, "spawned")[0].field("parent"),
        Some(&*parent.as_u64().to_string())
    );
}

#[test]
fn messages_and_cancels_a_step_receives_are_traced_in_its_span() {
    let _turn = start();
    let s = scheduler(1);
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let mut first = true;
    // Held in its first step while the test sends to it; then ends at the cancel.
    let pid = s
        .spawn(
            Scripted::new(move |_, events, out| {
                if std::mem::take(&mut first) {
                    started_tx.send(()).unwrap();
                    released.recv().unwrap();
                    out.set_status(Status::WaitingForMessage);
                } else if events.iter().any(|e| matches!(e, Event::Cancel)) {
                    out.set_status(Status::Done(Payload::unit()));
                } else {
                    out.set_status(Status::WaitingForMessage);
                }
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    started.recv().unwrap();
    s.send(pid, 7_u32).unwrap();
    s.send(pid, "text".to_string()).unwrap();
    s.cancel(pid).unwrap();
    release.send(()).unwrap();
    s.wait(pid).unwrap();
    drop(s);

    let (spans, events) = recorded();
    let (id, span) = span_of(&spans, pid);
    assert_eq!((span.enters, span.exits), (2, 2));
    let messages = events_in(&events, id, "message");
    let payloads: Vec<&str> = messages.iter().filter_map(|e| e.field("payload")).collect();
    assert_eq!(payloads, ["u32", "alloc::string::String"]);
    assert!(messages
        .iter()
        .all(|e| e.level == Level::TRACE && e.field("from").is_none()));
    let [cancel] = events_in(&events, id, "cancel")[..] else {
        panic!("one cancel event: {events:?}")
    };
    assert_eq!(cancel.level, Level::TRACE);
}

// ---- warnings --------------------------------------------------------------------

#[test]
fn failures_and_panics_are_warnings_in_their_processes_spans() {
    let _turn = start();
    let s = scheduler(1);
    let failing = s
        .spawn(
            Scripted::new(|_, _, _| Err(StepError::new("disk full"))),
            "run",
            (),
        )
        .unwrap();
    let panicking = s
        .spawn(
            Scripted::new(|_, _, _| -> Result<(), StepError> { panic!("boom") }),
            "run",
            (),
        )
        .unwrap();
    let fine = s.spawn(quick(), "run", ()).unwrap();
    assert!(s.wait(failing).is_err());
    assert!(s.wait(panicking).is_err());
    s.wait(fine).unwrap();
    drop(s);

    let (spans, events) = recorded();
    let (failing_id, _) = span_of(&spans, failing);
    let (panicking_id, _) = span_of(&spans, panicking);
    let (fine_id, _) = span_of(&spans, fine);

    let [failed] = events_in(&events, failing_id, "process failed")[..] else {
        panic!("one failure event: {events:?}")
    };
    assert_eq!(failed.level, Level::WARN);
    assert_eq!(failed.field("reason"), Some("failed: disk full"));
    assert_eq!(failed.field("pid"), Some(&*failing.as_u64().to_string()));

    let [panicked] = events_in(&events, panicking_id, "process panicked")[..] else {
        panic!("one panic event: {events:?}")
    };
    assert_eq!(panicked.level, Level::WARN);
    assert_eq!(panicked.field("panic"), Some("boom"));
    assert_eq!(panicked.field("phase"), Some("step"));
    assert!(events_in(&events, panicking_id, "process failed").is_empty());

    assert!(
        events
            .iter()
            .filter(|e| e.span == Some(fine_id))
            .all(|e| e.level > Level::WARN),
        "a normal end warns of nothing"
    );
    assert_eq!(
        events_in(&events, panicking_id, "exited")[0].field("reason"),
        Some("panicked in step: boom")
    );
}

#[test]
fn a_message_left_unread_at_the_end_is_a_dead_letter_warning() {
    let _turn = start();
    let s = scheduler(1);
    let held = HeldInStep::new();
    let pid = s.spawn(held.process, "run", ()).unwrap();
    held.started.recv().unwrap();
    s.send(pid, 5_u64).unwrap();
    held.release.send(()).unwrap();
    s.wait(pid).unwrap();
    drop(s);

    let (_, events) = recorded();
    let letters: Vec<_> = events
        .iter()
        .filter(|e| e.message() == "dead letter")
        .collect();
    let [letter] = letters[..] else {
        panic!("one dead letter: {events:?}")
    };
    assert_eq!((letter.level, letter.target), (Level::WARN, "wsched"));
    assert_eq!(letter.field("to"), Some(&*pid.as_u64().to_string()));
    assert_eq!(letter.field("payload"), Some("u64"));
    assert_eq!(letter.field("reason"), Some("ProcessEnded"));
    assert_eq!(letter.field("from"), None, "sent from outside");
}

// ---- workers ---------------------------------------------------------------------

/// The worker events with `message`.
fn worker_events<'a>(events: &'a [EventRecord], message: &str) -> Vec<&'a EventRecord> {
    events
        .iter()
        .filter(|e| e.target == "wsched::worker" && e.message() == message)
        .collect()
}

#[test]
fn each_steal_is_a_worker_event_as_the_metrics_count_it() {
    let _turn = start();
    // The scenario of the metrics test: one worker held in a step while the other
    // spawns 100 children and stays in its step until they are done, which only the
    // first worker, once released, can run by stealing them.
    let s = scheduler(2);
    robbed_worker(&s);
    let total = s.metrics().total();
    drop(s);

    let (_, events) = recorded();
    let steals = worker_events(&events, "steal");
    assert_eq!(steals.len() as u64, total.steals, "{steals:?}");
    let taken: u64 = steals
        .iter()
        .map(|e| e.field("taken").unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(taken, total.stolen);
    let lifo = steals.iter().filter(|e| e.field("lifo") == Some("true"));
    assert_eq!(lifo.count() as u64, total.lifo_steals);
    // 50, 25, 12, 6, 3, 2, 1 from the deque, then the LIFO slot (see the metrics
    // test).
    assert_eq!((total.steals, total.stolen, total.lifo_steals), (8, 100, 1));
    for steal in &steals {
        assert_eq!(steal.level, Level::TRACE);
        assert_ne!(steal.field("worker"), steal.field("victim"));
        assert_eq!(steal.span, None, "between steps: in no process's span");
    }
}

#[test]
fn a_worker_traces_each_park_and_wake_up() {
    let _turn = start();
    let s = scheduler(1);
    // Idle: the worker parks (with one worker there is no LIFO slot to watch, so it
    // sleeps until woken).
    wait_for("the idle worker to park", |e| {
        !worker_events(e, "park").is_empty()
    });
    let pid = s.spawn(quick(), "run", ()).unwrap();
    s.wait(pid).unwrap();
    // Woken for the process, it runs it and parks again.
    wait_for("the worker to park again", |e| {
        worker_events(e, "park").len() == 2
    });
    let parks = s.metrics().total().parks;
    let (_, events) = recorded();
    assert_eq!(worker_events(&events, "park").len() as u64, parks);
    let unparks = worker_events(&events, "unpark");
    let [unpark] = unparks[..] else {
        panic!("one wake-up: {unparks:?}")
    };
    assert_eq!(unpark.field("timed_out"), Some("false"));
    assert_eq!(unpark.field("worker"), Some("0"));
    // In order: park, unpark, the process's step, park.
    let order: Vec<&str> = events
        .iter()
        .filter(|e| e.target == "wsched::worker")
        .map(|e| e.message())
        .collect();
    assert_eq!(order, ["park", "unpark", "park"]);
    drop(s);
}

#[test]
fn the_long_step_detector_warns_of_a_step_while_it_runs() {
    let _turn = start();
    let s = Scheduler::builder()
        .workers(1)
        .long_step_threshold(Duration::from_millis(4))
        // Counted and traced; nothing printed.
        .on_long_step(|_| {})
        .build()
        .expect("the scheduler starts");
    let (release, released) = mpsc::channel::<()>();
    // Runs until the warning has been seen: no guessing how long is long enough.
    let pid = s
        .spawn(
            Scripted::new(move |_, _, out| {
                released.recv().unwrap();
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }),
            "run",
            (),
        )
        .unwrap();
    wait_for("the long step warning", |events| {
        events.iter().any(|e| e.message() == "long step")
    });
    release.send(()).unwrap();
    s.wait(pid).unwrap();
    drop(s);

    let (_, events) = recorded();
    let warnings: Vec<_> = events
        .iter()
        .filter(|e| e.message() == "long step")
        .collect();
    let [warning] = warnings[..] else {
        panic!("one warning per long step: {warnings:?}")
    };
    assert_eq!((warning.level, warning.target), (Level::WARN, "wsched"));
    assert_eq!(warning.field("pid"), Some(&*pid.as_u64().to_string()));
    assert_eq!(warning.field("entry"), Some("run"));
    assert_eq!(warning.field("point"), None, "its first step");
    assert!(warning.field("elapsed").is_some());
    assert_eq!(warning.span, None, "on the detector's thread");
}

/// Spawns `n` `Leaf`s with one `yield_all!`.
struct Fan;

#[wsched::process]
impl Fan {
    #[entry]
    fn run(&mut self, n: u32) -> Result<u32, wsched::BoxError> {
        let mut spawned = 0;
        for pid in
            wsched::yield_all!((0..n).map(|_| wsched::command::Spawn::detached(Leaf, "run", ())))
        {
            pid?;
            spawned += 1;
        }
        Ok(spawned)
    }
}

struct Leaf;

#[wsched::process]
impl Leaf {
    #[entry]
    fn run(&mut self) {}
}

#[test]
fn a_traced_yield_all_of_spawns_is_traced_yield_by_yield() {
    // Untraced, a `yield_all!` of spawns spawns each child as it is yielded and
    // never suspends; traced at TRACE, each `Spawn` is a yield and a completion
    // in the spawner's span, as any other command's.
    let _turn = start();
    let s = scheduler(1);
    let pid = s.spawn(Fan, "run", (3_u32,)).unwrap();
    assert_eq!(s.wait(pid).unwrap().downcast::<u32>().unwrap(), 3);
    drop(s);

    let (spans, events) = recorded();
    let (id, span) = span_of(&spans, pid);
    let yields = events_in(&events, id, "yield");
    assert_eq!(yields.len(), 3, "{events:?}");
    assert!(
        yields
            .iter()
            .all(|e| e.field("command").unwrap().ends_with("Spawn")),
        "{yields:?}"
    );
    assert_eq!(events_in(&events, id, "completion").len(), 3);
    assert_eq!(span.enters, 2, "the entry waited for its spawns");
}
