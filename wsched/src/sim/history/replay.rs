//! Replaying a history in the test harness, checking each step against it.

use std::fmt;

use crate::engine::process::{Completion, Event, IntoProcess, Message, Yield};
use crate::observe::history::{
    write_yields, Codecs, Encoded, History, Outcome, RecordedEvent, RecordedStep, RecordedValue,
    RecordedYield,
};
use crate::payload::{Payload, Payloads};
use crate::pid::Pid;
use crate::tag::Tag;
use crate::testing::{TestProcess, TestStatus};
use crate::ProcessError;

/// What a replay that found no divergence did: see [`replay`].
pub struct ReplayReport {
    steps: usize,
    by_name: usize,
    process: TestProcess,
}

impl ReplayReport {
    /// How many steps were replayed (all the history's).
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// How many values were compared by their type name only, a codec missing on
    /// either side (yielded commands, and the result). Zero means every value
    /// was compared whole.
    pub fn compared_by_name(&self) -> usize {
        self.by_name
    }

    /// The replayed process, where the replay left it (for instance, to take its
    /// result, or to go on by hand if the history was taken while it ran).
    pub fn process(&mut self) -> &mut TestProcess {
        &mut self.process
    }

    /// The replayed process (see [`process`](Self::process)).
    pub fn into_process(self) -> TestProcess {
        self.process
    }
}

impl fmt::Debug for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayReport")
            .field("steps", &self.steps)
            .field("compared_by_name", &self.by_name)
            .field("process", &self.process.status())
            .finish()
    }
}

/// What kind of difference a replay found (see [`Divergence`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DivergenceKind {
    /// The new instance refused the recorded entry or arguments (step 0).
    Start,
    /// A step yielded other commands (other tags, types or values) than recorded.
    Yields,
    /// The process ended otherwise than recorded: with another result or error,
    /// before the recorded steps were over, or not at all.
    Outcome,
    /// A recorded value cannot be handed to the process: it was kept by type name
    /// only (no codec when it was recorded), or no codec of the replay's reads it.
    CannotFeed,
    /// The history lacks its first steps (a flight recorder's dump), so it cannot
    /// be replayed from the entry.
    Incomplete,
    /// [`replay_to`] was asked for a step past the history's last.
    NoSuchStep,
}

/// The first difference between a history and its replay: at which step, what
/// the history says and what the replayed process did. Step 0 is the start (the
/// entry and its arguments).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    kind: DivergenceKind,
    process: String,
    step: usize,
    expected: String,
    found: String,
}

impl Divergence {
    fn new(
        kind: DivergenceKind,
        history: &History,
        step: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            process: format!("{}::{}", history.process_type, history.entry),
            step,
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// What kind of difference it is.
    pub fn kind(&self) -> DivergenceKind {
        self.kind
    }

    /// The step where it was found (1 is the first step, 0 the start).
    pub fn step(&self) -> usize {
        self.step
    }

    /// What the history says.
    pub fn expected(&self) -> &str {
        &self.expected
    }

    /// What the replayed process did.
    pub fn found(&self) -> &str {
        &self.found
    }
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            process,
            step,
            expected,
            found,
            ..
        } = self;
        let (what, hint) = match self.kind {
            DivergenceKind::Start => (
                "could not start",
                "replay a history on a process that has the recorded entry, taking the \
                 recorded arguments",
            ),
            DivergenceKind::Yields => (
                "diverged",
                "the entry's code up to this step changed, or the step depends on something \
                 a history does not hold (the clock, randomness, its PID, state shared with \
                 other processes)",
            ),
            DivergenceKind::Outcome => (
                "ended differently",
                "the entry's code changed, or depends on something a history does not hold \
                 (the clock, randomness, its PID, state shared with other processes)",
            ),
            DivergenceKind::CannotFeed => (
                "cannot go on",
                "register a codec for the type (`Codecs::register` or \
                 `Codecs::register_with`), under the same name, both on the scheduler that \
                 records (`Builder::history_codecs`) and for the replay, then record again",
            ),
            DivergenceKind::Incomplete => (
                "cannot start",
                "a flight recorder keeps only the last steps; to replay a process, record its \
                 whole history (`SpawnOptions::record_history`)",
            ),
            DivergenceKind::NoSuchStep => ("cannot stop there", "stop at a step the history has"),
        };
        write!(
            f,
            "the replay of `{process}` {what} at step {step}: expected {expected}, found \
             {found}; {hint}"
        )
    }
}

impl std::error::Error for Divergence {}

/// Replays `history` on `process`, a new instance (of the recorded type, or of
/// another with the same entry: a new version of it, say), in the
/// [`testing`](crate::testing) harness: initialises it on the recorded entry and
/// arguments, steps it with each recorded step's events, and checks after each
/// step that it yielded what was recorded (the same tags, command types, and
/// values where `codecs` and the recording's have a codec for them), then that it
/// ended as recorded. Values are decoded with `codecs` (give it the codecs the
/// recording was made with).
///
/// A history taken from a process still running replays its steps and checks that
/// the new instance is still running too; one stopped from outside (shutdown, a
/// kill) also expects it to be running after the last step.
///
/// # Errors
/// The first [`Divergence`]: where the new instance did something else than the
/// recording says, or a recorded value that cannot be handed to it.
pub fn replay<P: IntoProcess>(
    history: &History,
    process: P,
    codecs: &Codecs,
) -> Result<ReplayReport, Divergence> {
    let mut replayer = Replayer::start(history, process, codecs)?;
    for step in &history.steps {
        replayer.step(step)?;
    }
    replayer.check_outcome()?;
    Ok(ReplayReport {
        steps: history.steps.len(),
        by_name: replayer.by_name,
        process: replayer.process,
    })
}

/// Replays `history` on `process` as [`replay`] does, up to and including step
/// `step` (0: only initialised, not stepped), and hands over the process there,
/// for the test to go on by hand.
///
/// ```
/// use wsched::prelude::*;
/// use wsched::sim::history::{replay_to, Codecs};
/// use wsched::{Scheduler, SpawnOptions};
///
/// struct Echo;
///
/// #[process]
/// impl Echo {
///     #[entry]
///     fn echo(&mut self) -> Result<String, BoxError> {
///         let a = recv!(String)?;
///         let b = recv!(String)?;
///         Ok(format!("{a} {b}"))
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let pid = scheduler.spawn_with(Echo, "echo", (), SpawnOptions::new().record_history())?;
/// scheduler.send(pid, "hello".to_string())?;
/// scheduler.send(pid, "world".to_string())?;
/// scheduler.wait(pid)?;
/// let history = scheduler.take_history(pid).expect("recorded");
///
/// // Replay up to the step that took "hello" (step 1 or 2, depending on whether it
/// // came with the first step), then tell the process something else.
/// let took_hello = history
///     .steps
///     .iter()
///     .find(|s| !s.events.is_empty())
///     .expect("a step got the messages")
///     .number;
/// # let mut t = replay_to(&history, Echo, &Codecs::new(), took_hello - 1)?;
/// # t.send("hello".to_string());
/// # if t.is_ended() { return Ok(()); } // both messages came in one step
/// let mut t = replay_to(&history, Echo, &Codecs::new(), took_hello)?;
/// # if t.is_ended() { return Ok(()); }
/// t.send("there".to_string());
/// assert_eq!(t.result::<String>(), "hello there");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`replay`], for the steps replayed; [`DivergenceKind::NoSuchStep`] if the
/// history has no step `step`.
pub fn replay_to<P: IntoProcess>(
    history: &History,
    process: P,
    codecs: &Codecs,
    step: usize,
) -> Result<TestProcess, Divergence> {
    if step > history.last_step() {
        return Err(Divergence::new(
            DivergenceKind::NoSuchStep,
            history,
            step,
            format!("a step from 0 to {}", history.last_step()),
            format!("step {step}"),
        ));
    }
    let mut replayer = Replayer::start(history, process, codecs)?;
    for recorded in history.steps.iter().take(step) {
        replayer.step(recorded)?;
    }
    Ok(replayer.process)
}

/// A replay under way.
struct Replayer<'a> {
    history: &'a History,
    codecs: &'a Codecs,
    process: TestProcess,
    by_name: usize,
}

impl<'a> Replayer<'a> {
    fn start<P: IntoProcess>(
        history: &'a History,
        process: P,
        codecs: &'a Codecs,
    ) -> Result<Self, Divergence> {
        if !history.is_complete() {
            return Err(Divergence::new(
                DivergenceKind::Incomplete,
                history,
                0,
                "a history from the process's first step",
                format!("one from step {}", history.first_step),
            ));
        }
        let mut args = Payloads::default();
        for (i, arg) in history.args.iter().enumerate() {
            args.push(decode(
                history,
                codecs,
                0,
                arg,
                &format!("argument {}", i + 1),
            )?);
        }
        let process =
            TestProcess::init(process, history.entry.as_str(), args).map_err(|error| {
                Divergence::new(
                    DivergenceKind::Start,
                    history,
                    0,
                    format!(
                        "entry `{}` to take {} recorded argument(s)",
                        history.entry,
                        history.args.len()
                    ),
                    format!("the process refused: {error}"),
                )
            })?;
        Ok(Self {
            history,
            codecs,
            process,
            by_name: 0,
        })
    }

    /// Replays `recorded` and checks what the step yielded.
    fn step(&mut self, recorded: &RecordedStep) -> Result<(), Divergence> {
        let number = recorded.number;
        if self.process.is_ended() {
            return Err(self.diverged(
                DivergenceKind::Outcome,
                number,
                format!("step {number} ({})", events_text(recorded)),
                format!("the process had ended: {}", self.state()),
            ));
        }
        let mut events = Vec::with_capacity(recorded.events.len());
        for event in &recorded.events {
            events.push(self.event(number, event)?);
        }
        self.process.step_with(events);
        if self.process.status() == TestStatus::Failed {
            // A failing step's yields are dropped on the scheduler, unrecorded:
            // the end says it all.
            return self.ends_here(recorded);
        }
        let found: Vec<RecordedYield> = self
            .process
            .last_yields()
            .iter()
            .filter_map(|tag| self.process.yields().iter().find(|y| y.tag() == *tag))
            .map(|y| self.found_yield(y))
            .collect();
        let same = found.len() == recorded.yields.len()
            && found
                .iter()
                .zip(&recorded.yields)
                .all(|(found, expected)| found.tag == expected.tag)
            && found
                .iter()
                .zip(&recorded.yields)
                .all(|(found, expected)| self.same_value(&expected.command, &found.command));
        if !same {
            return Err(self.diverged(
                DivergenceKind::Yields,
                number,
                yields_text(&recorded.yields),
                yields_text(&found),
            ));
        }
        self.ends_here(recorded)
    }

    /// Checks that the process ended at `recorded` only if that is the history's
    /// last step.
    fn ends_here(&mut self, recorded: &RecordedStep) -> Result<(), Divergence> {
        let number = recorded.number;
        if self.process.is_ended() && number < self.history.last_step() {
            return Err(self.diverged(
                DivergenceKind::Outcome,
                number,
                format!(
                    "the process to go on after step {number} (the history has {} steps)",
                    self.history.last_step()
                ),
                format!("it ended: {}", self.state()),
            ));
        }
        Ok(())
    }

    /// Checks how the process ended against the recorded outcome.
    fn check_outcome(&mut self) -> Result<(), Divergence> {
        let last = self.history.last_step();
        let same = match (&self.history.outcome, self.process.status()) {
            (Outcome::Running | Outcome::Stopped(_), status) => {
                !matches!(status, TestStatus::Done | TestStatus::Failed)
            }
            (Outcome::Done(expected), TestStatus::Done) => {
                let result = self
                    .process
                    .result_ref()
                    .expect("done, its result not taken");
                let found = self.codecs.record(result);
                self.same_value(expected, &found)
            }
            (Outcome::Failed(expected), TestStatus::Failed) => matches!(
                self.process.error(),
                Some(ProcessError::Failed(e)) if e.to_string() == *expected
            ),
            (Outcome::Panicked(expected), TestStatus::Failed) => matches!(
                self.process.error(),
                Some(ProcessError::Panicked { message, .. }) if message == expected
            ),
            _ => false,
        };
        if same {
            return Ok(());
        }
        let expected = match &self.history.outcome {
            Outcome::Running => "the process still running".to_owned(),
            Outcome::Stopped(why) => format!("the process still running (it was then {why})"),
            outcome => outcome.to_string(),
        };
        Err(self.diverged(DivergenceKind::Outcome, last, expected, self.state()))
    }

    /// The event `recorded` describes, for step `number`.
    fn event(&self, number: usize, recorded: &RecordedEvent) -> Result<Event, Divergence> {
        Ok(match recorded {
            RecordedEvent::Message { from, value } => Event::Message(Message {
                from: from.map(Pid::from_raw),
                payload: decode(self.history, self.codecs, number, value, "a message")?,
            }),
            RecordedEvent::Completion { tag, result } => {
                let result = match result {
                    Ok(value) => Ok(decode(
                        self.history,
                        self.codecs,
                        number,
                        value,
                        &format!("the completion of <{tag}>"),
                    )?),
                    Err(error) => {
                        let command = self
                            .process
                            .yields()
                            .iter()
                            .find(|y| y.tag() == Tag(*tag))
                            .map(Yield::command_name);
                        Err(error.rebuild(command).ok_or_else(|| {
                            self.diverged(
                                DivergenceKind::CannotFeed,
                                number,
                                format!("a failed completion of <{tag}> to hand over"),
                                format!("a failure of kind `{}`, unknown here", error.kind),
                            )
                        })?)
                    }
                };
                Event::Completion(Completion {
                    tag: Tag(*tag),
                    result,
                })
            }
            RecordedEvent::Cancel => Event::Cancel,
        })
    }

    fn found_yield(&self, y: &Yield) -> RecordedYield {
        RecordedYield {
            tag: y.tag().0,
            command: self.codecs.record(y.command_payload()),
        }
    }

    /// Whether `found` is `expected`: by value where both were encoded by the same
    /// codec, else by type name (counted).
    fn same_value(&mut self, expected: &RecordedValue, found: &RecordedValue) -> bool {
        if expected.type_name != found.type_name {
            return false;
        }
        match (&expected.encoded, &found.encoded) {
            (Some(a), Some(b)) if a.codec == b.codec => same_encoding(a, b),
            _ => {
                self.by_name += 1;
                true
            }
        }
    }

    fn diverged(
        &self,
        kind: DivergenceKind,
        step: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Divergence {
        Divergence::new(kind, self.history, step, expected, found)
    }

    /// Where the replayed process stands, in words.
    fn state(&self) -> String {
        let t = &self.process;
        match t.status() {
            TestStatus::Done => match t.result_ref() {
                Some(result) => format!("done: {}", self.codecs.record(result)),
                None => "done".to_owned(),
            },
            TestStatus::Failed => match t.error() {
                Some(ProcessError::Failed(e)) => format!("failed: {e}"),
                Some(ProcessError::Panicked { message, .. }) => format!("panicked: {message}"),
                Some(other) => other.to_string(),
                None => "failed".to_owned(),
            },
            status => format!("still running ({status})"),
        }
    }
}

/// Decodes `value` (`what`, at step `step`) with `codecs`.
fn decode(
    history: &History,
    codecs: &Codecs,
    step: usize,
    value: &RecordedValue,
    what: &str,
) -> Result<Payload, Divergence> {
    let cannot = |found: String| {
        Divergence::new(
            DivergenceKind::CannotFeed,
            history,
            step,
            format!("{what}, a `{}`, to hand to the process", value.type_name),
            found,
        )
    };
    let Some(encoded) = &value.encoded else {
        return Err(cannot(format!(
            "only its type name: no codec for `{}` when it was recorded",
            value.type_name
        )));
    };
    let Some(codec) = codecs.named(&encoded.codec) else {
        return Err(cannot(format!(
            "no codec named `{}` among the replay's codecs",
            encoded.codec
        )));
    };
    codec.decode(&encoded.text).map_err(|error| {
        cannot(format!(
            "codec `{}` could not read {:?}: {error}",
            encoded.codec, encoded.text
        ))
    })
}

/// Whether two encodings of one codec are the same value: JSON compared as JSON
/// (whatever its spacing) with the `serde` feature, text otherwise.
fn same_encoding(a: &Encoded, b: &Encoded) -> bool {
    #[cfg(feature = "serde")]
    if a.json && b.json {
        let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
        if let (Some(a), Some(b)) = (parse(&a.text), parse(&b.text)) {
            return a == b;
        }
    }
    a.text == b.text
}

fn yields_text(yields: &[RecordedYield]) -> String {
    if yields.is_empty() {
        return "no yields".to_owned();
    }
    let mut text = String::from("yields ");
    write_yields(&mut text, yields).expect("writing to a string");
    text
}

fn events_text(step: &RecordedStep) -> String {
    match step.events.len() {
        0 => "with no events".to_owned(),
        1 => format!("with {}", step.events[0]),
        n => format!("with {n} events, first {}", step.events[0]),
    }
}
