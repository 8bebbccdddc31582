//! Recorded process histories (the `sim` feature): what a history holds, the codec
//! table that turns payloads into text, and the capture that fills histories from
//! the engine's instrument hooks.
//!
//! A process is captured when it is spawned with
//! `SpawnOptions::record_history` (the whole history, kept until it is taken) or
//! when its type has a flight recorder (`Builder::flight_recorder`: its last steps
//! only, dumped if it fails). The capture lives in the process's cell, beside its
//! `tracing` span ([`Marks`]): a process that is not captured costs its steps one
//! load and one branch, and a build without the feature compiles none of this.
//!
//! The public face of all this — constructors of the codec table, saving, loading
//! and replaying histories — is `sim/history/`.

use std::cell::UnsafeCell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::cell::{CellRef, Owned};
use crate::engine::process::{Event, Yield};
use crate::error::{BoxError, ProcessError, YieldError};
use crate::observe::trace::SpanSlot;
use crate::payload::{Payload, Payloads};
use crate::pid::Pid;
use crate::type_name::Short;

// ---- what a history holds --------------------------------------------------------

/// One process's history: the entry it was started on, with its arguments, and for
/// each step the events it received and the commands it yielded; then how it
/// ended. Recorded on a scheduler (see
/// [`SpawnOptions::record_history`](crate::SpawnOptions::record_history) and
/// [`Builder::flight_recorder`](crate::Builder::flight_recorder)), replayed in the
/// test harness by [`replay`](crate::sim::history::replay).
///
/// Values are kept whole when a codec for their type is registered
/// ([`Codecs`]), and by their type name otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct History {
    /// The process's type, as [`std::any::type_name`] spells it (for a
    /// `#[process]`, its struct's).
    pub process_type: String,
    /// The entry it was started on.
    pub entry: String,
    /// The entry's arguments, in order.
    pub args: Vec<RecordedValue>,
    /// The number of the first step kept: 1 for a whole history, more for a
    /// flight recorder's, which keeps only the last steps.
    pub first_step: usize,
    /// The steps kept, in order, numbered from `first_step`.
    pub steps: Vec<RecordedStep>,
    /// How the process ended, or that it had not when the history was taken.
    pub outcome: Outcome,
}

impl History {
    /// Whether the history starts at the process's first step: only then can it be
    /// replayed (a flight recorder's dump may have lost its first steps).
    pub fn is_complete(&self) -> bool {
        self.first_step == 1
    }

    /// The number of the last step kept (0 if none was).
    pub fn last_step(&self) -> usize {
        self.first_step + self.steps.len() - 1
    }

    /// The step numbered `number`, if it is kept.
    pub fn step(&self, number: usize) -> Option<&RecordedStep> {
        number
            .checked_sub(self.first_step)
            .and_then(|i| self.steps.get(i))
    }
}

impl fmt::Display for History {
    /// One line for the entry, one per step, one for the outcome.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}(", self.process_type, self.entry)?;
        for (i, arg) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{arg}")?;
        }
        f.write_str(")")?;
        if !self.is_complete() {
            write!(f, "\n  … steps 1 to {} not kept", self.first_step - 1)?;
        }
        for step in &self.steps {
            write!(f, "\n  {step}")?;
        }
        write!(f, "\n  {}", self.outcome)
    }
}

/// One step of a recorded process: what it received, what it yielded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RecordedStep {
    /// Its number: the process's first step is 1.
    pub number: usize,
    /// The events it was stepped with, in order.
    pub events: Vec<RecordedEvent>,
    /// The commands it yielded, in order.
    pub yields: Vec<RecordedYield>,
}

impl fmt::Display for RecordedStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: ", self.number)?;
        if self.events.is_empty() {
            f.write_str("no events")?;
        }
        for (i, event) in self.events.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{event}")?;
        }
        if !self.yields.is_empty() {
            f.write_str(" -> ")?;
            write_yields(f, &self.yields)?;
        }
        Ok(())
    }
}

/// Writes `yields` as `[<1> Fetch {…}, <2> Sleep 10000000]`.
pub(crate) fn write_yields(f: &mut impl fmt::Write, yields: &[RecordedYield]) -> fmt::Result {
    f.write_str("[")?;
    for (i, y) in yields.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{y}")?;
    }
    f.write_str("]")
}

/// An event a recorded step received.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum RecordedEvent {
    /// A message.
    Message {
        /// The sender's PID as a number ([`Pid::as_u64`]), `None` from outside any
        /// process.
        from: Option<u64>,
        /// What was sent.
        value: RecordedValue,
    },
    /// The completion of the yield tagged `tag`.
    Completion {
        /// The yield's tag (as a number).
        tag: u64,
        /// Its output, or why there is none.
        result: Result<RecordedValue, RecordedYieldError>,
    },
    /// A cancel (shutdown, or an explicit cancel).
    Cancel,
}

impl fmt::Display for RecordedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Message { from: None, value } => write!(f, "message {value}"),
            Self::Message {
                from: Some(from),
                value,
            } => write!(f, "message {value} from <{from}>"),
            Self::Completion {
                tag,
                result: Ok(value),
            } => write!(f, "completion <{tag}> {value}"),
            Self::Completion {
                tag,
                result: Err(error),
            } => write!(f, "completion <{tag}> failed: {error}"),
            Self::Cancel => f.write_str("cancel"),
        }
    }
}

/// A command a recorded step yielded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RecordedYield {
    /// Its tag (as a number).
    pub tag: u64,
    /// The command.
    pub command: RecordedValue,
}

impl fmt::Display for RecordedYield {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}> {}", self.tag, self.command)
    }
}

/// A failed completion, as recorded: enough to hand the same
/// [`YieldError`] to the process again.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RecordedYieldError {
    /// Which [`YieldError`]: `no_handler`, `dropped`, `handler_panicked`, `failed`,
    /// `cancelled`, `timed_out`, `busy` or `wrong_output_type`.
    pub kind: String,
    /// The command's type name (for `wrong_output_type`: the expected output
    /// type), empty for `cancelled`.
    pub command: String,
    /// The panic message (`handler_panicked`), the handler's error (`failed`), the
    /// type the completion held (`wrong_output_type`); empty otherwise.
    pub message: String,
    /// The timeout in nanoseconds (`timed_out`), the limit (`busy`); 0 otherwise.
    pub number: u64,
}

impl fmt::Display for RecordedYieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        if !self.command.is_empty() {
            write!(f, " `{}`", self.command)?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl RecordedYieldError {
    /// Records `error`.
    pub(crate) fn of(error: &YieldError) -> Self {
        let plain = |kind: &str, command: &str| Self {
            kind: kind.to_owned(),
            command: command.to_owned(),
            message: String::new(),
            number: 0,
        };
        match error {
            YieldError::NoHandler { command } => plain("no_handler", command),
            YieldError::Dropped { command } => plain("dropped", command),
            YieldError::HandlerPanicked { command, message } => Self {
                message: message.clone(),
                ..plain("handler_panicked", command)
            },
            YieldError::Failed { command, source } => Self {
                message: source.to_string(),
                ..plain("failed", command)
            },
            YieldError::Cancelled => plain("cancelled", ""),
            YieldError::TimedOut { command, after } => Self {
                number: u64::try_from(after.as_nanos()).unwrap_or(u64::MAX),
                ..plain("timed_out", command)
            },
            YieldError::Busy { command, limit } => Self {
                number: *limit as u64,
                ..plain("busy", command)
            },
            YieldError::WrongOutputType { expected, actual } => Self {
                message: (*actual).to_owned(),
                ..plain("wrong_output_type", expected)
            },
        }
    }

    /// The [`YieldError`] recorded, with `command` for its command's name (the
    /// recorded name is used, leaked, if `command` is `None`). `None` for a kind
    /// this version does not know.
    pub(crate) fn rebuild(&self, command: Option<&'static str>) -> Option<YieldError> {
        let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
        let command = command.unwrap_or_else(|| leak(&self.command));
        Some(match self.kind.as_str() {
            "no_handler" => YieldError::NoHandler { command },
            "dropped" => YieldError::Dropped { command },
            "handler_panicked" => YieldError::HandlerPanicked {
                command,
                message: self.message.clone(),
            },
            "failed" => YieldError::Failed {
                command,
                source: BoxError::from(self.message.clone()),
            },
            "cancelled" => YieldError::Cancelled,
            "timed_out" => YieldError::TimedOut {
                command,
                after: std::time::Duration::from_nanos(self.number),
            },
            "busy" => YieldError::Busy {
                command,
                limit: self.number as usize,
            },
            "wrong_output_type" => YieldError::WrongOutputType {
                // The output type, recorded where the others keep the command.
                expected: leak(&self.command),
                actual: leak(&self.message),
            },
            _ => return None,
        })
    }
}

/// A recorded value: its type's name, and the value itself when a codec for the
/// type was registered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordedValue {
    /// The type's name, as [`std::any::type_name`] spells it.
    pub type_name: String,
    /// The value, encoded; `None` for a type without a codec (kept by name only).
    pub encoded: Option<Encoded>,
}

impl RecordedValue {
    /// A value of type `type_name` kept by name only.
    pub fn by_name(type_name: impl Into<String>) -> Self {
        Self {
            type_name: type_name.into(),
            encoded: None,
        }
    }
}

impl fmt::Display for RecordedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Short(&self.type_name))?;
        match &self.encoded {
            Some(encoded) if encoded.json => write!(f, " {}", encoded.text),
            Some(encoded) => write!(f, " {:?}", encoded.text),
            None => Ok(()),
        }
    }
}

/// How a recorded process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Outcome {
    /// It had not ended when the history was taken.
    Running,
    /// It finished with this result.
    Done(RecordedValue),
    /// A step returned an error (the entry returned `Err`): the error's text.
    Failed(String),
    /// It panicked: the panic message.
    Panicked(String),
    /// It was stopped from outside (shutdown, a kill, a linked process's failure):
    /// why, as [`ProcessError`] says it. Nothing in its steps made it end.
    Stopped(String),
}

impl Outcome {
    /// The outcome of a process that ended with `result`, values encoded by
    /// `codecs`.
    pub(crate) fn of(result: &Result<Payload, ProcessError>, codecs: &Codecs) -> Self {
        match result {
            Ok(value) => Self::Done(codecs.record(value)),
            Err(ProcessError::Failed(error)) => Self::Failed(error.to_string()),
            Err(ProcessError::Panicked { message, .. }) => Self::Panicked(message.clone()),
            Err(other) => Self::Stopped(other.to_string()),
        }
    }

    /// Whether the process failed by itself (an error or a panic).
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed(_) | Self::Panicked(_))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Running => f.write_str("still running"),
            Self::Done(value) => write!(f, "done: {value}"),
            Self::Failed(error) => write!(f, "failed: {error}"),
            Self::Panicked(message) => write!(f, "panicked: {message}"),
            Self::Stopped(why) => write!(f, "stopped: {why}"),
        }
    }
}

pub use super::codecs::{Codecs, Encoded};

impl Codecs {
    /// Records `value`: whole if its type has a codec (and the codec could encode
    /// it), else by name.
    pub(crate) fn record(&self, value: &Payload) -> RecordedValue {
        RecordedValue {
            type_name: value.type_name().to_owned(),
            encoded: self.codec_of(value).and_then(|codec| codec.encode(value)),
        }
    }
}

// ---- the capture -------------------------------------------------------------------

/// A hook that gets each flight recorder's dump.
pub(crate) type DumpHook = Box<dyn Fn(&History) + Send + Sync>;

/// How many flight-recorder dumps the scheduler keeps for
/// `Handle::take_flight_dumps` (the oldest go first).
pub(crate) const DUMPS_KEPT: usize = 64;

/// What the builder says about histories.
pub(crate) struct HistoryOptions {
    pub(crate) codecs: Codecs,
    /// Process types with a flight recorder, and how many steps each keeps.
    pub(crate) flights: Vec<(&'static str, usize)>,
    pub(crate) on_dump: Option<DumpHook>,
}

impl HistoryOptions {
    /// No flight recorders, and `codecs`.
    pub(crate) fn new(codecs: Codecs) -> Self {
        Self {
            codecs,
            flights: Vec::new(),
            on_dump: None,
        }
    }
}

/// The dumps of flight recorders: to the hook, and kept.
struct Dumps {
    hook: Option<DumpHook>,
    kept: Mutex<VecDeque<History>>,
}

impl Dumps {
    fn dump(&self, history: History) {
        if let Some(hook) = &self.hook {
            // A user's hook, called on a worker, which must survive it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&history)));
        }
        let mut kept = self.kept.lock();
        if kept.len() == DUMPS_KEPT {
            kept.pop_front();
        }
        kept.push_back(history);
    }
}

/// Histories' state, one per scheduler.
pub(crate) struct HistoryState {
    codecs: Arc<Codecs>,
    flights: Vec<(&'static str, usize)>,
    dumps: Arc<Dumps>,
    /// The histories asked for (`SpawnOptions::record_history`), by PID, until
    /// taken.
    recorded: Mutex<HashMap<Pid, Arc<Capture>>>,
}

impl HistoryState {
    pub(crate) fn new(options: HistoryOptions) -> Self {
        Self {
            codecs: Arc::new(options.codecs),
            flights: options.flights,
            dumps: Arc::new(Dumps {
                hook: options.on_dump,
                kept: Mutex::new(VecDeque::new()),
            }),
            recorded: Mutex::new(HashMap::new()),
        }
    }

    /// A copy of `pid`'s history so far, if it is recorded and not taken.
    pub(crate) fn history(&self, pid: Pid) -> Option<History> {
        let capture = self.recorded.lock().get(&pid).cloned()?;
        Some(capture.history(None))
    }

    /// Takes `pid`'s history, which stops recording it.
    pub(crate) fn take(&self, pid: Pid) -> Option<History> {
        let capture = self.recorded.lock().remove(&pid)?;
        Some(capture.finish_taken())
    }

    /// Takes the flight recorders' dumps kept so far, oldest first.
    pub(crate) fn take_dumps(&self) -> Vec<History> {
        self.dumps.kept.lock().drain(..).collect()
    }

    /// Starts capturing a process about to be initialised, if it is to be.
    #[inline]
    pub(crate) fn begins(
        &self,
        marks: &mut Marks,
        process_type: &'static str,
        entry: &str,
        input: &Payloads,
        requested: bool,
    ) {
        let flight = self
            .flights
            .iter()
            .find(|(name, _)| *name == process_type)
            .map(|&(_, steps)| steps);
        if !requested && flight.is_none() {
            return;
        }
        let capture = Capture {
            process_type,
            entry: entry.to_owned(),
            args: input.iter().map(|arg| self.codecs.record(arg)).collect(),
            codecs: self.codecs.clone(),
            keep: if requested { None } else { flight },
            flight,
            requested,
            dumps: self.dumps.clone(),
            steps: Mutex::new(Steps {
                kept: VecDeque::new(),
                taken: 0,
                outcome: Outcome::Running,
                stopped: false,
            }),
        };
        *marks.history.get_mut() = Some(Arc::new(capture));
    }

    /// The process of `cell` was spawned: keeps its history for the handle, if it
    /// was asked for.
    pub(crate) fn spawned(&self, cell: &CellRef) {
        // SAFETY: the spawner owns the unpublished cell (see `Marks`).
        let capture = unsafe { cell.unpublished_span().capture() };
        if let Some(capture) = capture.filter(|c| c.requested) {
            self.recorded.lock().insert(cell.pid(), capture.clone());
        }
    }
}

/// What the instruments keep in each process's cell with the `sim` feature: its
/// `tracing` span (which it dereferences to) and its capture, if it is captured.
///
/// Only the process's owner touches the capture slot (whoever holds its RUNNING
/// state, or the spawner before the cell is shared), as the span.
pub(crate) struct Marks {
    span: SpanSlot,
    history: UnsafeCell<Option<Arc<Capture>>>,
}

impl std::ops::Deref for Marks {
    type Target = SpanSlot;

    #[inline(always)]
    fn deref(&self) -> &SpanSlot {
        &self.span
    }
}

impl Marks {
    pub(crate) fn new(span: SpanSlot) -> Self {
        Self {
            span,
            history: UnsafeCell::new(None),
        }
    }

    /// The capture, if the process is captured.
    ///
    /// # Safety
    /// The caller owns the process (see [`Marks`]).
    #[inline(always)]
    unsafe fn capture(&self) -> Option<&Arc<Capture>> {
        // SAFETY: only the owner reads or writes the slot (the contract).
        unsafe { (*self.history.get()).as_ref() }
    }

    /// Whether the process is captured.
    ///
    /// # Safety
    /// As [`capture`](Self::capture).
    #[inline(always)]
    pub(crate) unsafe fn is_captured(&self) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { self.capture() }.is_some()
    }

    /// Takes the capture out (the process ends).
    ///
    /// # Safety
    /// As [`capture`](Self::capture).
    unsafe fn take_capture(&self) -> Option<Arc<Capture>> {
        // SAFETY: as in `capture`.
        unsafe { (*self.history.get()).take() }
    }
}

/// A step of `owned` begins with `events`: recorded if the process is captured,
/// whose capture is then returned for the step's yields.
#[inline(always)]
pub(crate) fn step_begins(owned: &Owned<'_>, events: &[Event]) -> Option<Arc<Capture>> {
    // SAFETY: `owned` owns the process.
    let capture = unsafe { owned.span().capture() }?;
    capture.step(events);
    Some(capture.clone())
}

/// The process of `owned` ends with `result`: its capture records the outcome, and
/// a flight recorder dumps its last steps if it failed.
#[inline(always)]
pub(crate) fn exited(owned: &Owned<'_>, result: &Result<Payload, ProcessError>) {
    // SAFETY: `owned` owns the process.
    if let Some(capture) = unsafe { owned.span().take_capture() } {
        capture.ended(result);
    }
}

/// One captured process.
pub(crate) struct Capture {
    process_type: &'static str,
    entry: String,
    args: Vec<RecordedValue>,
    codecs: Arc<Codecs>,
    /// How many steps to keep (`None`: all).
    keep: Option<usize>,
    /// The flight recorder's length, if its type has one.
    flight: Option<usize>,
    /// Asked for by `SpawnOptions::record_history`.
    requested: bool,
    dumps: Arc<Dumps>,
    steps: Mutex<Steps>,
}

struct Steps {
    kept: VecDeque<RecordedStep>,
    /// How many steps the process took.
    taken: usize,
    outcome: Outcome,
    /// Its history was taken: nothing more is recorded.
    stopped: bool,
}

impl Capture {
    fn step(&self, events: &[Event]) {
        let mut steps = self.steps.lock();
        if steps.stopped {
            return;
        }
        steps.taken += 1;
        let step = RecordedStep {
            number: steps.taken,
            events: events.iter().map(|e| self.event(e)).collect(),
            yields: Vec::new(),
        };
        if self.keep == Some(steps.kept.len()) {
            steps.kept.pop_front();
        }
        if self.keep != Some(0) {
            steps.kept.push_back(step);
        }
    }

    fn event(&self, event: &Event) -> RecordedEvent {
        match event {
            Event::Message(m) => RecordedEvent::Message {
                from: m.from.map(Pid::as_u64),
                value: self.codecs.record(&m.payload),
            },
            Event::Completion(c) => RecordedEvent::Completion {
                tag: c.tag.0,
                result: match &c.result {
                    Ok(value) => Ok(self.codecs.record(value)),
                    Err(error) => Err(RecordedYieldError::of(error)),
                },
            },
            Event::Cancel => RecordedEvent::Cancel,
        }
    }

    /// The step that began last yielded `yields`.
    pub(crate) fn yielded(&self, yields: &[Yield]) {
        let mut steps = self.steps.lock();
        let taken = steps.taken;
        if steps.stopped {
            return;
        }
        if let Some(step) = steps.kept.back_mut().filter(|s| s.number == taken) {
            step.yields = yields
                .iter()
                .map(|y| RecordedYield {
                    tag: y.tag().0,
                    command: self.codecs.record(y.command_payload()),
                })
                .collect();
        }
    }

    fn ended(&self, result: &Result<Payload, ProcessError>) {
        let outcome = Outcome::of(result, &self.codecs);
        let mut steps = self.steps.lock();
        if steps.stopped {
            return;
        }
        steps.outcome = outcome;
        if let Some(n) = self.flight.filter(|_| steps.outcome.is_failure()) {
            let history = self.history_of(&steps, Some(n));
            drop(steps);
            self.dumps.dump(history);
        }
    }

    /// Its history so far, of the last `last` steps (`None`: all kept).
    fn history(&self, last: Option<usize>) -> History {
        self.history_of(&self.steps.lock(), last)
    }

    /// Its history, taken: nothing more is recorded.
    fn finish_taken(&self) -> History {
        let mut steps = self.steps.lock();
        steps.stopped = true;
        let history = self.history_of(&steps, None);
        steps.kept.clear();
        history
    }

    fn history_of(&self, steps: &Steps, last: Option<usize>) -> History {
        let skip = last.map_or(0, |n| steps.kept.len().saturating_sub(n));
        let kept: Vec<RecordedStep> = steps.kept.iter().skip(skip).cloned().collect();
        History {
            process_type: self.process_type.to_owned(),
            entry: self.entry.clone(),
            args: self.args.clone(),
            first_step: steps.taken + 1 - kept.len(),
            steps: kept,
            outcome: steps.outcome.clone(),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn values_without_a_codec_are_kept_by_name() {
        let mut codecs = Codecs::empty();
        codecs.insert::<u32>("u32", true, |n| Some(n.to_string()), |t| Ok(t.parse()?));
        let whole = codecs.record(&Payload::new(7_u32));
        assert_eq!(whole.encoded, Some(Encoded::new("u32", "7", true)));
        let by_name = codecs.record(&Payload::new(7_u64));
        assert_eq!(by_name, RecordedValue::by_name("u64"));
        assert_eq!(by_name.to_string(), "u64");
        let back = codecs
            .named("u32")
            .expect("registered")
            .decode("9")
            .unwrap();
        assert_eq!(back.downcast::<u32>().unwrap(), 9);
    }

    #[test]
    #[should_panic(expected = "the codec name `n` is taken by `u32`")]
    fn a_codec_name_names_one_type() {
        let mut codecs = Codecs::empty();
        codecs.insert::<u32>("n", true, |n| Some(n.to_string()), |t| Ok(t.parse()?));
        codecs.insert::<u64>("n", true, |n| Some(n.to_string()), |t| Ok(t.parse()?));
    }

    #[test]
    fn a_new_codec_for_a_type_replaces_the_old_one() {
        let mut codecs = Codecs::empty();
        codecs.insert::<u32>("a", true, |n| Some(n.to_string()), |t| Ok(t.parse()?));
        codecs.insert::<u32>("b", true, |n| Some(n.to_string()), |t| Ok(t.parse()?));
        assert_eq!(codecs.name_of::<u32>(), Some("b"));
        assert!(codecs.named("a").is_none());
    }

    #[test]
    fn yield_errors_come_back_as_they_were() {
        let errors = [
            YieldError::NoHandler { command: "C" },
            YieldError::Dropped { command: "C" },
            YieldError::HandlerPanicked {
                command: "C",
                message: "boom".into(),
            },
            YieldError::Cancelled,
            YieldError::TimedOut {
                command: "C",
                after: std::time::Duration::from_millis(5),
            },
            YieldError::Busy {
                command: "C",
                limit: 3,
            },
            YieldError::WrongOutputType {
                expected: "u32",
                actual: "i32",
            },
        ];
        for error in errors {
            let recorded = RecordedYieldError::of(&error);
            let rebuilt = recorded.rebuild(Some("C")).expect("a known kind");
            assert_eq!(rebuilt.to_string(), error.to_string());
        }
        let failed = YieldError::Failed {
            command: "C",
            source: "no route".into(),
        };
        let rebuilt = RecordedYieldError::of(&failed).rebuild(None).unwrap();
        assert_eq!(rebuilt.to_string(), failed.to_string());
    }

    #[test]
    fn a_flight_recorder_keeps_the_last_steps() {
        let state = HistoryState::new(HistoryOptions {
            flights: vec![("P", 2)],
            ..HistoryOptions::new(Codecs::empty())
        });
        let mut marks = Marks::new(SpanSlot::none());
        state.begins(&mut marks, "P", "run", &Payloads::default(), false);
        let capture = marks.history.get_mut().clone().expect("captured");
        for _ in 0..5 {
            capture.step(&[Event::Cancel]);
        }
        capture.ended(&Err(ProcessError::Failed(crate::StepError::new("boom"))));
        let dump = state.take_dumps().pop().expect("dumped");
        assert_eq!((dump.first_step, dump.last_step()), (4, 5));
        assert!(!dump.is_complete());
        assert_eq!(dump.outcome, Outcome::Failed("boom".into()));
        // Another type is not captured at all.
        let mut other = Marks::new(SpanSlot::none());
        state.begins(&mut other, "Q", "run", &Payloads::default(), false);
        assert!(other.history.get_mut().is_none());
    }
}
