//! The recorder: what a run records, its Chrome JSON (valid, slices nested per lane),
//! ring and bounded buffers, the SVG and text pictures, and the dump a shutdown that
//! times out makes.

use std::sync::mpsc;
use std::time::Duration;

use wsched::recorder::{Activity, EventKind, Lane, RecordedEvent, SliceKind, StepOutcome};
use wsched::{
    Context, Event, Events, InitError, Payload, Payloads, Pid, Process, RecordOptions, Recording,
    Scheduler, Status, StepError, StepOutput,
};

type StepFn = Box<dyn FnMut(&Context, Vec<Event>, &mut StepOutput) + Send>;

/// A process with any entry name, whose steps are a closure.
struct Script {
    ctx: Option<Context>,
    step: StepFn,
}

fn script(step: impl FnMut(&Context, Vec<Event>, &mut StepOutput) + Send + 'static) -> Script {
    Script {
        ctx: None,
        step: Box::new(step),
    }
}

impl Process for Script {
    fn init(&mut self, ctx: Context, _: &str, _: Payloads) -> Result<(), InitError> {
        self.ctx = Some(ctx);
        Ok(())
    }

    fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        (self.step)(self.ctx.as_ref().expect("init ran"), events.collect(), out);
        Ok(())
    }
}

/// Continues `n` times, then finishes.
fn counting(mut n: u32) -> Script {
    script(move |_, _, out| {
        if n == 0 {
            out.set_status(Status::Done(Payload::unit()));
        } else {
            n -= 1;
            out.set_status(Status::Continue);
        }
    })
}

/// Waits for one message, then finishes.
fn waiting() -> Script {
    script(|_, events, out| {
        if events.iter().any(|e| matches!(e, Event::Message(_))) {
            out.set_status(Status::Done(Payload::unit()));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
    })
}

fn recorded(workers: usize, options: RecordOptions) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .record(options)
        .build()
        .expect("builds")
}

fn steps(recording: &Recording, worker: usize) -> Vec<(Pid, Option<StepOutcome>)> {
    recording
        .worker_slices(worker)
        .into_iter()
        .filter_map(|s| match s.kind {
            SliceKind::Step { pid, outcome } => Some((pid, outcome)),
            _ => None,
        })
        .collect()
}

fn activities(recording: &Recording, pid: Pid) -> Vec<Activity> {
    recording
        .process_slices(pid)
        .into_iter()
        .map(|s| s.activity)
        .collect()
}

/// One worker, three processes, run one after another: the recording has exactly
/// their steps, in order, with their outcomes, and each process's lane goes through
/// runnable, running and waiting as it did.
#[test]
fn a_deterministic_run_records_exactly_its_steps() {
    // A clock reading at every step: with the default (one in four), a step's start
    // is spread over the interval between readings, and on a loaded machine it can
    // land before the outside thread's spawn that queued it, which reorders the
    // process's lane (seen once in five loaded runs).
    let scheduler = recorded(1, RecordOptions::new().clock_every(1));
    let a = scheduler.spawn(counting(2), "count", ()).unwrap();
    scheduler.wait(a).unwrap();
    // `b` waits; `c`, queued behind it on the one worker, wakes it.
    let b = scheduler.spawn(waiting(), "wait", ()).unwrap();
    let c = scheduler
        .spawn(
            script(move |ctx, _, out| {
                ctx.send(b, ()).unwrap();
                out.set_status(Status::Done(Payload::unit()));
            }),
            "poke",
            (),
        )
        .unwrap();
    scheduler.wait(b).unwrap();
    scheduler.wait(c).unwrap();
    let recording = scheduler.recording().expect("on");

    use StepOutcome::*;
    assert_eq!(
        steps(&recording, 0),
        [
            (a, Some(Continue)),
            (a, Some(Continue)),
            (a, Some(Done)),
            (b, Some(WaitingForMessage)),
            (c, Some(Done)),
            (b, Some(Done)),
        ]
    );
    assert_eq!(recording.entry(a), Some("count"));
    assert_eq!(recording.entry(b), Some("wait"));
    assert_eq!(recording.entry(c), Some("poke"));
    assert_eq!(
        recording.process_type(a),
        Some(std::any::type_name::<Script>())
    );
    assert_eq!(recording.label(b), format!("Script::wait {b}"));
    assert_eq!(recording.pids(), [a, b, c]);
    let slices = recording.worker_slices(0);
    for pair in slices.windows(2) {
        assert!(pair[0].end <= pair[1].start, "slices overlap: {pair:?}");
    }

    let running = Activity::Running { worker: 0 };
    use Activity::{Runnable, Waiting};
    assert_eq!(
        activities(&recording, a),
        [Runnable, running, Runnable, running, Runnable, running]
    );
    assert_eq!(
        activities(&recording, b),
        [Runnable, running, Waiting, Runnable, running]
    );
    assert_eq!(activities(&recording, c), [Runnable, running]);
    let spawns = recording
        .events(Lane::Outside)
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Spawned { .. }))
        .count();
    assert_eq!(
        spawns, 3,
        "spawned from outside, recorded in the outside lane"
    );
    assert!(
        recording.steals().is_empty(),
        "one worker steals from nobody"
    );
}

#[test]
fn without_the_option_nothing_is_recorded() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let pid = scheduler.spawn(counting(1), "count", ()).unwrap();
    scheduler.wait(pid).unwrap();
    assert!(scheduler.recording().is_none());
}

/// How many buffer slots the events took: a counters sample takes two, a step one
/// (its end is written into its start's slot).
fn slots(events: &[RecordedEvent]) -> u64 {
    events
        .iter()
        .map(|e| match e.kind {
            EventKind::Counters { .. } => 2,
            EventKind::StepEnd { .. } => 0,
            _ => 1,
        })
        .sum()
}

#[test]
fn ring_mode_keeps_the_last_events() {
    const CAPACITY: usize = 64;
    let scheduler = recorded(1, RecordOptions::new().capacity_per_worker(CAPACITY));
    let pid = scheduler.spawn(counting(1000), "count", ()).unwrap();
    scheduler.wait(pid).unwrap();
    scheduler.shutdown(Duration::from_secs(5));
    let recording = scheduler.recording().expect("on");
    let events = recording.events(Lane::Worker(0));
    // Full; one slot less if the cut split a counters sample (its half is lost).
    let kept = slots(events);
    assert!(
        kept == CAPACITY as u64 || kept == CAPACITY as u64 - 1,
        "{kept}"
    );
    // At least a slot per step of the 1000.
    assert!(recording.lost(Lane::Worker(0)) > 1000 - CAPACITY as u64);
    // The kept steps are the run's last ones: continues, then the final step.
    let kept_steps = steps(&recording, 0);
    assert!(kept_steps.len() >= 15, "{kept_steps:?}");
    let (last, before) = kept_steps.split_last().unwrap();
    assert_eq!(*last, (pid, Some(StepOutcome::Done)));
    assert!(before
        .iter()
        .all(|s| *s == (pid, Some(StepOutcome::Continue)) || *s == (pid, None)));
}

/// A live process whose spawn was overwritten is still named, from the PID table.
#[test]
fn a_live_process_keeps_its_entry_after_its_spawn_is_overwritten() {
    let scheduler = recorded(1, RecordOptions::new().capacity_per_worker(16));
    let (stepped, steps) = mpsc::channel();
    // Waits for ever: each message wakes it for one more step.
    let sleeper = scheduler
        .spawn(
            script(move |_, _, out| {
                let _ = stepped.send(());
                out.set_status(Status::WaitingForMessage);
            }),
            "sleeper",
            (),
        )
        .unwrap();
    steps.recv().unwrap();
    // Spawns from outside overwrite the outside lane, the sleeper's spawn with it.
    for _ in 0..40 {
        let pid = scheduler.spawn(counting(0), "quick", ()).unwrap();
        scheduler.wait(pid).unwrap();
    }
    scheduler.send(sleeper, ()).unwrap();
    steps.recv().unwrap();
    let recording = scheduler.recording().expect("on");
    assert!(recording.pids().contains(&sleeper), "its last step is kept");
    assert!(!recording
        .events(Lane::Outside)
        .iter()
        .any(|e| e.kind == EventKind::Spawned { pid: sleeper }));
    assert_eq!(recording.entry(sleeper), Some("sleeper"));
    assert_eq!(
        recording.label(sleeper),
        format!("Script::sleeper {sleeper}")
    );
}

#[test]
fn bounded_mode_keeps_the_first_events() {
    const CAPACITY: usize = 32;
    let scheduler = recorded(
        1,
        RecordOptions::new()
            .capacity_per_worker(CAPACITY)
            .ring(false),
    );
    let pid = scheduler.spawn(counting(1000), "count", ()).unwrap();
    scheduler.wait(pid).unwrap();
    let recording = scheduler.recording().expect("on");
    let events = recording.events(Lane::Worker(0));
    assert_eq!(slots(events), CAPACITY as u64);
    // At least a slot per step of the 1000.
    assert!(recording.lost(Lane::Worker(0)) > 1000 - CAPACITY as u64);
    // The first step of the process is there (after the worker's first look for
    // work, maybe), and the last is not.
    let first_step = events
        .iter()
        .position(|e| matches!(e.kind, EventKind::StepStart { .. }))
        .expect("a step is kept");
    assert_eq!(events[first_step].kind, EventKind::StepStart { pid });
    assert!(
        events[..first_step].iter().all(|e| matches!(
            e.kind,
            EventKind::Idle | EventKind::Counters { .. } | EventKind::Park | EventKind::Unpark
        )),
        "only the worker's wait for work comes before it: {events:?}"
    );
    assert!(steps(&recording, 0)
        .iter()
        .all(|s| s.1 != Some(StepOutcome::Done)));
}

// ---- JSON -------------------------------------------------------------------------

/// A JSON value, parsed by the small parser below (the test needs no dependency).
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// A number in the trace's microseconds, as whole nanoseconds.
    fn nanos(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            Json::Number(n) => Some((n * 1000.0).round() as i64),
            _ => None,
        }
    }
}

/// Parses one complete JSON document (RFC 8259), or says where it is not JSON.
fn parse_json(text: &str) -> Result<Json, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let value = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("trailing text at {}", p.i));
    }
    Ok(value)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at {}", c as char, self.i))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Json::Object(fields));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.eat(b':')?;
                    fields.push((key, self.value()?));
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Object(fields));
                        }
                        _ => return Err(format!("bad object at {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return Err(format!("bad array at {}", self.i)),
                    }
                }
            }
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b't') => self.word("true", Json::Bool(true)),
            Some(b'f') => self.word("false", Json::Bool(false)),
            Some(b'n') => self.word("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(format!("unexpected input at {}", self.i)),
        }
    }

    fn word(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(value)
        } else {
            Err(format!("bad literal at {}", self.i))
        }
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        if self.s[self.i] == b'-' {
            self.i += 1;
        }
        let digits = |p: &mut Self| {
            let from = p.i;
            while p.i < p.s.len() && p.s[p.i].is_ascii_digit() {
                p.i += 1;
            }
            p.i > from
        };
        if !digits(self) {
            return Err(format!("bad number at {start}"));
        }
        if self.s[start..self.i].starts_with(b"0") && self.i - start > 1
            || self.s[start..self.i].starts_with(b"-0") && self.i - start > 2
        {
            return Err(format!("leading zero at {start}"));
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            if !digits(self) {
                return Err(format!("bad fraction at {start}"));
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digits(self) {
                return Err(format!("bad exponent at {start}"));
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap();
        text.parse()
            .map(Json::Number)
            .map_err(|e| format!("{e} at {start}"))
    }

    fn string(&mut self) -> Result<String, String> {
        if self.s.get(self.i) != Some(&b'"') {
            return Err(format!("expected a string at {}", self.i));
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return Err("unterminated string".to_owned());
            };
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                b'\\' => {
                    let e = *self.s.get(self.i).ok_or("bad escape")?;
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let hex = std::str::from_utf8(&self.s[self.i..self.i + 4])
                                .map_err(|e| e.to_string())?;
                            let code = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                            self.i += 4;
                            let c = char::from_u32(code).ok_or("surrogate escapes unsupported")?;
                            out.extend_from_slice(c.to_string().as_bytes());
                        }
                        _ => return Err(format!("bad escape at {}", self.i)),
                    }
                }
                c if c < 0x20 => return Err(format!("control character at {}", self.i)),
                c => out.push(c),
            }
        }
    }
}

#[test]
fn the_json_parser_rejects_what_is_not_json() {
    assert!(parse_json("{\"a\":[1,2.5,-3e2,true,null,\"x\\u0041\"]}").is_ok());
    for bad in ["{", "[1,]", "{\"a\" 1}", "01", "\"a", "[1] x", "{'a':1}"] {
        assert!(parse_json(bad).is_err(), "{bad}");
    }
}

/// Checks what a trace viewer relies on: every event has a phase; complete events
/// have non-negative times; on each (pid, tid) lane they nest (any two are either
/// disjoint or one contains the other). Returns the parsed events.
fn check_trace(json: &str) -> Vec<Json> {
    let doc = parse_json(json).unwrap_or_else(|e| panic!("not JSON: {e}"));
    let Some(Json::Array(events)) = doc.get("traceEvents") else {
        panic!("no traceEvents array");
    };
    let mut lanes: std::collections::BTreeMap<(i64, i64), Vec<(i64, i64)>> = Default::default();
    for e in events {
        let ph = e.str("ph").expect("every event has a phase");
        assert!(["X", "M", "C", "i", "s", "f"].contains(&ph), "{ph}");
        if ph == "X" {
            let ts = e.nanos("ts").expect("ts");
            let dur = e.nanos("dur").expect("dur");
            assert!(ts >= 0 && dur >= 0, "{e:?}");
            let lane = (e.nanos("pid").unwrap(), e.nanos("tid").unwrap());
            lanes.entry(lane).or_default().push((ts, ts + dur));
        }
    }
    for (lane, mut slices) in lanes {
        slices.sort_by_key(|&(start, end)| (start, std::cmp::Reverse(end)));
        let mut open: Vec<i64> = Vec::new();
        for (start, end) in slices {
            while open.last().is_some_and(|&e| e <= start) {
                open.pop();
            }
            if let Some(&outer) = open.last() {
                assert!(end <= outer, "slices overlap on lane {lane:?}");
            }
            open.push(end);
        }
    }
    events.clone()
}

#[test]
fn the_chrome_json_of_a_real_run_parses_and_its_slices_nest() {
    let scheduler = recorded(3, RecordOptions::new());
    let mut pids: Vec<Pid> = (0..20)
        .map(|i| scheduler.spawn(counting(i % 7), "count \"q\"", ()).unwrap())
        .collect();
    // 1001 steps: some worker takes at least 256 of them, and samples the counters.
    let long = scheduler.spawn(counting(1000), "long", ()).unwrap();
    pids.push(long);
    for pid in pids {
        scheduler.wait(pid).unwrap();
    }
    let recording = scheduler.recording().expect("on");
    let mut out = Vec::new();
    recording.write_chrome_json(&mut out).unwrap();
    let events = check_trace(&String::from_utf8(out).unwrap());
    let steps = events
        .iter()
        .filter(|e| e.str("cat") == Some("step"))
        .count();
    let expected: u32 = (0..20).map(|i| i % 7 + 1).sum::<u32>() + 1001;
    assert_eq!(steps, expected as usize);
    assert!(events
        .iter()
        .any(|e| e.str("name") == Some("Script::count \"q\"") && e.str("ph") == Some("X")));
    // Each process's lane is named by its label.
    assert!(events.iter().any(|e| e.str("ph") == Some("M")
        && e.get("args").and_then(|a| a.str("name")) == Some(&*format!("Script::long {long}"))));
    assert!(events.iter().any(|e| e.str("ph") == Some("C")));
    assert!(events
        .iter()
        .any(|e| e.str("name") == Some("running") && e.str("cat") == Some("process")));
}

// ---- pictures of a fixed recording ------------------------------------------------

/// Two workers: worker 0 runs a spawner, whose children worker 1 steals and runs.
fn fixed_recording() -> Recording {
    let us = Duration::from_micros;
    let (p1, p2, p3) = (Pid::from_raw(1), Pid::from_raw(2), Pid::from_raw(3));
    let mut r = Recording::new(2, us(100));
    r.set_entry(p1, "spawner");
    r.set_entry(p2, "child");
    r.set_entry(p3, "child");
    r.set_process_type(p1, "my_app::tree::Spawner");
    r.set_process_type(p2, "my_app::tree::Child");
    // p3's type is unknown: labelled by its entry alone.
    let mut push = |lane, at, kind| r.push(lane, RecordedEvent::new(us(at), kind));
    let (w0, w1) = (Lane::Worker(0), Lane::Worker(1));
    push(Lane::Outside, 0, EventKind::Spawned { pid: p1 });
    push(Lane::Outside, 0, EventKind::Runnable { pid: p1 });
    push(w1, 0, EventKind::Park);
    push(w0, 5, EventKind::StepStart { pid: p1 });
    push(w0, 20, EventKind::Spawned { pid: p2 });
    push(w0, 20, EventKind::Runnable { pid: p2 });
    push(w0, 20, EventKind::Spawned { pid: p3 });
    push(w0, 20, EventKind::Runnable { pid: p3 });
    let waiting = StepOutcome::WaitingForMessage;
    push(
        w0,
        20,
        EventKind::StepEnd {
            pid: p1,
            outcome: waiting,
        },
    );
    push(w0, 22, EventKind::StepStart { pid: p3 });
    push(w1, 25, EventKind::Unpark);
    push(
        w1,
        27,
        EventKind::Steal {
            victim: 0,
            count: 1,
        },
    );
    push(w1, 27, EventKind::StepStart { pid: p2 });
    let done = StepOutcome::Done;
    push(
        w0,
        60,
        EventKind::StepEnd {
            pid: p3,
            outcome: done,
        },
    );
    push(w0, 61, EventKind::Idle);
    push(w0, 62, EventKind::Park);
    push(
        w1,
        70,
        EventKind::StepEnd {
            pid: p2,
            outcome: done,
        },
    );
    push(
        w1,
        72,
        EventKind::Counters {
            local_queue: 0,
            global_queue: 0,
            live: 1,
        },
    );
    push(w1, 72, EventKind::Runnable { pid: p1 });
    push(w1, 75, EventKind::StepStart { pid: p1 });
    push(
        w1,
        80,
        EventKind::StepEnd {
            pid: p1,
            outcome: done,
        },
    );
    push(w1, 81, EventKind::Park);
    r
}

#[test]
fn the_fixed_recording_has_the_slices_it_was_built_with() {
    let r = fixed_recording();
    let us = Duration::from_micros;
    let w1 = r.worker_slices(1);
    assert_eq!(w1[0].kind, SliceKind::Park);
    assert_eq!((w1[0].start, w1[0].end), (us(0), us(25)));
    assert_eq!(r.steals().len(), 1);
    let p1 = r.process_slices(Pid::from_raw(1));
    let states: Vec<_> = p1.iter().map(|s| (s.activity, s.start, s.end)).collect();
    assert_eq!(
        states,
        [
            (Activity::Runnable, us(0), us(5)),
            (Activity::Running { worker: 0 }, us(5), us(20)),
            (Activity::Waiting, us(20), us(72)),
            (Activity::Runnable, us(72), us(75)),
            (Activity::Running { worker: 1 }, us(75), us(80)),
        ]
    );
    let mut out = Vec::new();
    r.write_chrome_json(&mut out).unwrap();
    let json = String::from_utf8(out).unwrap();
    let events = check_trace(&json);
    assert_eq!(
        events.iter().filter(|e| e.str("ph") == Some("s")).count(),
        1
    );
    assert_eq!(
        events.iter().filter(|e| e.str("ph") == Some("f")).count(),
        1
    );
}

#[test]
fn the_svg_of_a_fixed_recording_matches_its_snapshot() {
    let svg = fixed_recording().to_svg_with(&wsched::recorder::SvgOptions::new().width(600));
    insta::assert_snapshot!(svg);
}

#[test]
fn the_terminal_picture_of_a_fixed_recording_matches_its_snapshot() {
    insta::assert_snapshot!(fixed_recording().to_terminal(40));
}

// ---- shutdown ---------------------------------------------------------------------

/// A shutdown that times out reports the recording and writes it where asked.
#[test]
fn a_shutdown_timeout_dumps_the_recording() {
    let path = std::env::temp_dir().join(format!("wsched-recorder-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let scheduler = recorded(1, RecordOptions::new().dump_on_timeout(&path));
    // Ignores cancels: it has to be stopped.
    let (stepped, first_step) = mpsc::channel();
    let stubborn = scheduler
        .spawn(
            script(move |_, _, out| {
                let _ = stepped.send(());
                out.set_status(Status::WaitingForMessage);
            }),
            "stubborn",
            (),
        )
        .unwrap();
    first_step.recv().unwrap();
    let report = scheduler.shutdown(Duration::from_millis(20));
    assert_eq!(report.stopped, [stubborn]);
    let recording = report.recording.expect("a timeout reports the recording");
    assert_eq!(recording.entry(stubborn), Some("stubborn"));
    assert!(steps(&recording, 0).iter().any(|&(pid, _)| pid == stubborn));
    let json = std::fs::read_to_string(&path).expect("the dump was written");
    let _ = std::fs::remove_file(&path);
    check_trace(&json);
    assert!(json.contains("\"stubborn\""));

    // A shutdown that does not time out reports none.
    let calm = recorded(1, RecordOptions::new());
    assert!(calm.shutdown(Duration::from_secs(5)).recording.is_none());
}

/// Whether the clock is read at every step or at one in four, every step of a busy
/// run is recorded once, in order, with its outcome, and its slice follows the one
/// before without overlapping it.
#[test]
fn every_step_is_recorded_whatever_the_clock_interval() {
    for every in [1, 4] {
        let scheduler = recorded(1, RecordOptions::new().clock_every(every));
        let pid = scheduler.spawn(counting(99), "count", ()).unwrap();
        scheduler.wait(pid).unwrap();
        let recording = scheduler.recording().expect("on");
        assert_eq!(recording.clock_every(), every);
        let kept = steps(&recording, 0);
        let mut expected = vec![(pid, Some(StepOutcome::Continue)); 99];
        expected.push((pid, Some(StepOutcome::Done)));
        assert_eq!(kept, expected, "clock every {every} steps");
        let slices: Vec<wsched::recorder::Slice> = recording
            .worker_slices(0)
            .into_iter()
            .filter(|s| matches!(s.kind, SliceKind::Step { .. }))
            .collect();
        for pair in slices.windows(2) {
            assert!(pair[0].start <= pair[0].end, "{pair:?}");
            assert!(pair[0].end <= pair[1].start, "{pair:?}");
        }
    }
}
