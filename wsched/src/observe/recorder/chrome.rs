//! The Chrome Trace Event format (JSON), which Perfetto (ui.perfetto.dev) and
//! `chrome://tracing` open. Written by hand: the format is plain text, and only
//! entry and type names need escaping.
//!
//! Trace process 0, "workers", has one thread per worker: its steps (named by type
//! and entry, `Crawler::run`, with the PID, type and entry in their arguments) and
//! parks as complete (`X`) events, steals as
//! instants on the thief with a flow arrow from the victim, and counters (queue
//! depths, live processes). Trace process 1, "processes", has one thread per process
//! (its thread id is the PID's number, its name the process's label,
//! `Crawler::run <5>`): runnable, running and waiting slices.

use std::io::{self, Write};
use std::time::Duration;

use crate::observe::recorder::recording::{Activity, EventKind, Lane, Recording, SliceKind};

const WORKERS: u32 = 0;
const PROCESSES: u32 = 1;

impl Recording {
    /// Writes the recording as Chrome Trace Event JSON: open it in Perfetto
    /// (<https://ui.perfetto.dev>, "Open trace file") or `chrome://tracing`. One lane
    /// per worker (steps named by type and entry, `Crawler::run`, with PID, type,
    /// entry and outcome as arguments; parks; steals as arrows from victim to
    /// thief), counters for queue depths and live processes, and one lane per
    /// process, named by its [`label`](Self::label) (runnable / running /
    /// waiting).
    ///
    /// # Errors
    /// Those of `out`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wsched::{Pid, Recording};
    /// use wsched::recorder::{EventKind, Lane, RecordedEvent, StepOutcome};
    ///
    /// let pid = Pid::from_raw(1);
    /// let mut recording = Recording::new(1, Duration::from_micros(5));
    /// recording.set_entry(pid, "run");
    /// recording.push(Lane::Worker(0), RecordedEvent::new(Duration::from_micros(1), EventKind::StepStart { pid }));
    /// recording.push(
    ///     Lane::Worker(0),
    ///     RecordedEvent::new(Duration::from_micros(2), EventKind::StepEnd { pid, outcome: StepOutcome::Done }),
    /// );
    /// let mut json = Vec::new();
    /// recording.write_chrome_json(&mut json)?;
    /// let json = String::from_utf8(json).unwrap();
    /// assert!(json.starts_with("{\"traceEvents\":["));
    /// assert!(json.contains("\"name\":\"run\""));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_chrome_json(&self, out: &mut impl Write) -> io::Result<()> {
        let mut w = JsonEvents { out, first: true };
        w.out.write_all(b"{\"traceEvents\":[")?;
        w.metadata(WORKERS, None, "process_name", "workers")?;
        w.metadata(PROCESSES, None, "process_name", "processes")?;
        for worker in 0..self.workers() {
            let tid = worker as u64;
            w.metadata(
                WORKERS,
                Some(tid),
                "thread_name",
                &format!("worker {worker}"),
            )?;
            for slice in self.worker_slices(worker) {
                let (name, cat, args) = match slice.kind {
                    SliceKind::Step { pid, outcome } => {
                        let entry = self.entry(pid).unwrap_or("?");
                        let process_type = self.process_type(pid).unwrap_or("?");
                        let outcome = outcome.map_or("?".to_owned(), |o| o.to_string());
                        let args = format!(
                            "{{\"pid\":\"{pid}\",\"type\":{},\"entry\":{},\"outcome\":\"{outcome}\"}}",
                            string(process_type),
                            string(entry)
                        );
                        (self.process_name(pid).to_string(), "step", args)
                    }
                    SliceKind::Park => ("parked".to_owned(), "park", "{}".to_owned()),
                };
                w.complete(WORKERS, tid, &name, cat, slice.start, slice.end, &args)?;
            }
            for event in self.events(Lane::Worker(worker)) {
                if let EventKind::Counters {
                    local_queue,
                    global_queue,
                    live,
                } = event.kind
                {
                    w.counter(&format!("deque of worker {worker}"), event.at, local_queue)?;
                    w.counter("global queue", event.at, global_queue)?;
                    w.counter("live processes", event.at, live)?;
                }
            }
        }
        for (id, steal) in self.steals().iter().enumerate() {
            let args = format!("{{\"victim\":{},\"count\":{}}}", steal.victim, steal.count);
            w.event(&format!(
                "\"name\":\"steal\",\"cat\":\"steal\",\"ph\":\"i\",\"s\":\"t\",\"ts\":{},\"pid\":{WORKERS},\"tid\":{},\"args\":{args}",
                micros(steal.at),
                steal.thief
            ))?;
            w.event(&format!(
                "\"name\":\"steal\",\"cat\":\"steal\",\"ph\":\"s\",\"id\":{id},\"ts\":{},\"pid\":{WORKERS},\"tid\":{}",
                micros(steal.at),
                steal.victim
            ))?;
            w.event(&format!(
                "\"name\":\"steal\",\"cat\":\"steal\",\"ph\":\"f\",\"bp\":\"e\",\"id\":{id},\"ts\":{},\"pid\":{WORKERS},\"tid\":{}",
                micros(steal.at),
                steal.thief
            ))?;
        }
        for pid in self.pids() {
            let tid = pid.as_u64();
            w.metadata(PROCESSES, Some(tid), "thread_name", &self.label(pid))?;
            for slice in self.process_slices(pid) {
                let args = match slice.activity {
                    Activity::Running { worker } => format!("{{\"worker\":{worker}}}"),
                    _ => "{}".to_owned(),
                };
                let name = slice.activity.to_string();
                w.complete(
                    PROCESSES,
                    tid,
                    &name,
                    "process",
                    slice.start,
                    slice.end,
                    &args,
                )?;
            }
        }
        w.out.write_all(b"],\"displayTimeUnit\":\"ns\"}\n")
    }
}

struct JsonEvents<'a, W: Write> {
    out: &'a mut W,
    first: bool,
}

impl<W: Write> JsonEvents<'_, W> {
    /// One event object; `fields` is its inside, without braces.
    fn event(&mut self, fields: &str) -> io::Result<()> {
        let comma = if std::mem::take(&mut self.first) {
            ""
        } else {
            ","
        };
        write!(self.out, "{comma}\n{{{fields}}}")
    }

    fn metadata(&mut self, pid: u32, tid: Option<u64>, kind: &str, name: &str) -> io::Result<()> {
        let tid = tid.map_or(String::new(), |t| format!(",\"tid\":{t}"));
        self.event(&format!(
            "\"name\":\"{kind}\",\"ph\":\"M\",\"pid\":{pid}{tid},\"args\":{{\"name\":{}}}",
            string(name)
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn complete(
        &mut self,
        pid: u32,
        tid: u64,
        name: &str,
        cat: &str,
        start: Duration,
        end: Duration,
        args: &str,
    ) -> io::Result<()> {
        self.event(&format!(
            "\"name\":{},\"cat\":\"{cat}\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{pid},\"tid\":{tid},\"args\":{args}",
            string(name),
            micros(start),
            micros(end.saturating_sub(start)),
        ))
    }

    fn counter(&mut self, name: &str, at: Duration, value: u64) -> io::Result<()> {
        self.event(&format!(
            "\"name\":{},\"ph\":\"C\",\"ts\":{},\"pid\":{WORKERS},\"args\":{{\"value\":{value}}}",
            string(name),
            micros(at)
        ))
    }
}

/// Microseconds (the format's unit) with nanosecond precision, as a JSON number.
fn micros(d: Duration) -> String {
    let ns = d.as_nanos();
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// A JSON string literal.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn strings_are_escaped() {
        assert_eq!(
            crate::observe::recorder::chrome::string("a\"b\\c\nd\u{1}"),
            "\"a\\\"b\\\\c\\nd\\u0001\""
        );
        assert_eq!(
            crate::observe::recorder::chrome::micros(std::time::Duration::from_nanos(1_234_005)),
            "1234.005"
        );
    }
}
