//! A text picture of a recording, for a quick look in a terminal or a log.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::observe::recorder::recording::{short_duration, Recording, SliceKind};
use crate::pid::Pid;

/// Letters for processes, the longest-running first; further processes show as `#`.
const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

impl Recording {
    /// A text picture `columns` characters wide (at least 10) of the timeline: a row
    /// per worker where each character is the process that ran longest in that
    /// stretch of time (a letter, named in the legend), `.` for parked, a space for
    /// idle; a row marking steals by the thief's number; the time span; the legend.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wsched::{Pid, Recording};
    /// use wsched::recorder::{EventKind, Lane, RecordedEvent, StepOutcome};
    ///
    /// let pid = Pid::from_raw(1);
    /// let mut recording = Recording::new(1, Duration::from_micros(10));
    /// recording.set_entry(pid, "run");
    /// let us = Duration::from_micros;
    /// recording.push(Lane::Worker(0), RecordedEvent::new(us(0), EventKind::StepStart { pid }));
    /// recording.push(
    ///     Lane::Worker(0),
    ///     RecordedEvent::new(us(5), EventKind::StepEnd { pid, outcome: StepOutcome::Done }),
    /// );
    /// recording.push(Lane::Worker(0), RecordedEvent::new(us(5), EventKind::Park));
    /// recording.push(Lane::Worker(0), RecordedEvent::new(us(10), EventKind::Unpark));
    /// let text = recording.to_terminal(10);
    /// assert!(text.starts_with("w0 |AAAAA.....|"), "{text}");
    /// ```
    pub fn to_terminal(&self, columns: usize) -> String {
        let columns = columns.max(10);
        let slices: Vec<_> = (0..self.workers()).map(|w| self.worker_slices(w)).collect();
        let steals = self.steals();
        let t0 = slices
            .iter()
            .flatten()
            .map(|s| s.start)
            .chain(steals.iter().map(|s| s.at))
            .min()
            .unwrap_or(Duration::ZERO);
        let t1 = slices
            .iter()
            .flatten()
            .map(|s| s.end)
            .chain(steals.iter().map(|s| s.at))
            .max()
            .unwrap_or(self.duration())
            .max(t0);
        let span = (t1 - t0).as_nanos().max(1) as f64;
        let column_of = |t: Duration| -> usize {
            (((t.saturating_sub(t0)).as_nanos() as f64 / span * columns as f64) as usize)
                .min(columns - 1)
        };
        let column_start =
            |c: usize| t0 + Duration::from_nanos((span * c as f64 / columns as f64) as u64);

        // Letters go to the processes that ran longest (ties by PID).
        let mut ran: BTreeMap<Pid, Duration> = BTreeMap::new();
        for s in slices.iter().flatten() {
            if let SliceKind::Step { pid, .. } = s.kind {
                *ran.entry(pid).or_default() += s.end - s.start;
            }
        }
        let mut by_time: Vec<(Pid, Duration)> = ran.into_iter().collect();
        by_time.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let letters: BTreeMap<Pid, char> = by_time
            .iter()
            .zip(LETTERS)
            .map(|(&(pid, _), &l)| (pid, char::from(l)))
            .collect();
        let letter = |pid: Pid| -> char { letters.get(&pid).copied().unwrap_or('#') };
        let label_width = format!("w{}", self.workers().saturating_sub(1)).len();
        let mut text = String::new();
        for (worker, lane) in slices.iter().enumerate() {
            // Per column: the longest occupant (process or park) and its time.
            let mut best: Vec<Option<(Duration, char)>> = vec![None; columns];
            for s in lane {
                let (first, last) = (column_of(s.start), column_of(s.end));
                for (c, cell) in best.iter_mut().enumerate().take(last + 1).skip(first) {
                    let from = s.start.max(column_start(c));
                    let to = s.end.min(column_start(c + 1));
                    let time = to.saturating_sub(from);
                    let mark = match s.kind {
                        SliceKind::Step { pid, .. } => letter(pid),
                        SliceKind::Park => '.',
                    };
                    // A zero-length step still shows if nothing else is there.
                    if cell.is_none_or(|(t, _)| time > t) {
                        *cell = Some((time, mark));
                    }
                }
            }
            let row: String = best.iter().map(|c| c.map_or(' ', |(_, m)| m)).collect();
            let _ = writeln!(text, "{:<label_width$} |{row}|", format!("w{worker}"));
        }
        if !steals.is_empty() {
            let mut row = vec![' '; columns];
            for s in &steals {
                row[column_of(s.at)] = char::from_digit((s.thief % 10) as u32, 10).unwrap_or('*');
            }
            let row: String = row.into_iter().collect();
            let _ = writeln!(text, "{:<label_width$} |{row}| steals, by thief", "");
        }
        let _ = writeln!(
            text,
            "{:<label_width$}  {} to {} ({} per column); '.' parked",
            "",
            short_duration(t0),
            short_duration(t1),
            short_duration(Duration::from_nanos((span / columns as f64) as u64))
        );
        for (pid, l) in by_time.iter().zip(LETTERS) {
            let _ = writeln!(
                text,
                "{:<label_width$}  {} = {}",
                "",
                char::from(*l),
                self.label(pid.0)
            );
        }
        let others = by_time.len().saturating_sub(LETTERS.len());
        if others > 0 {
            let _ = writeln!(text, "{:<label_width$}  # = {others} other processes", "");
        }
        text
    }
}
