//! A self-contained SVG picture of a recording: a lane per worker, a rectangle per
//! step coloured by process, parks in grey, steals as red arrows from victim to
//! thief, a time axis and a legend. No script, no external style: it renders the
//! same in a browser, an mdBook page or an image viewer.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::observe::recorder::recording::{short_duration, Recording, SliceKind};
use crate::pid::Pid;
use crate::type_name::plural;

/// How [`Recording::to_svg_with`] draws.
///
/// ```
/// use std::time::Duration;
/// let options = wsched::recorder::SvgOptions::new()
///     .width(800)
///     .window(Duration::from_micros(100), Duration::from_micros(200));
/// assert_eq!(options.width_px(), 800);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SvgOptions {
    width: u32,
    window: Option<(Duration, Duration)>,
    legend: usize,
}

impl SvgOptions {
    /// 1000 pixels wide, the whole recording, a legend of up to 12 processes.
    ///
    /// ```
    /// assert_eq!(wsched::recorder::SvgOptions::new().width_px(), 1000);
    /// ```
    pub fn new() -> Self {
        Self {
            width: 1000,
            window: None,
            legend: 12,
        }
    }

    /// The picture's width in pixels (at least 200).
    ///
    /// ```
    /// assert_eq!(wsched::recorder::SvgOptions::new().width(100).width_px(), 200);
    /// ```
    pub fn width(mut self, pixels: u32) -> Self {
        self.width = pixels.max(200);
        self
    }

    /// Draws only `from..to` (times since the scheduler started). By default, from
    /// the first recorded slice to the last.
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = wsched::recorder::SvgOptions::new().window(Duration::ZERO, Duration::from_millis(1));
    /// # let _ = o;
    /// ```
    pub fn window(mut self, from: Duration, to: Duration) -> Self {
        self.window = Some((from, to.max(from)));
        self
    }

    /// How many processes the legend names (those that ran longest; default 12).
    ///
    /// ```
    /// let o = wsched::recorder::SvgOptions::new().legend(4);
    /// # let _ = o;
    /// ```
    pub fn legend(mut self, processes: usize) -> Self {
        self.legend = processes;
        self
    }

    /// The width set.
    ///
    /// ```
    /// assert_eq!(wsched::recorder::SvgOptions::default().width_px(), 1000);
    /// ```
    pub fn width_px(&self) -> u32 {
        self.width
    }
}

impl Default for SvgOptions {
    fn default() -> Self {
        Self::new()
    }
}

const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 36.0;
const LANE: f64 = 28.0;
const GAP: f64 = 6.0;

impl Recording {
    /// An SVG picture with [`SvgOptions::new`]'s defaults; see
    /// [`to_svg_with`](Self::to_svg_with).
    ///
    /// ```
    /// let recording = wsched::Recording::new(2, std::time::Duration::from_millis(1));
    /// let svg = recording.to_svg();
    /// assert!(svg.starts_with("<svg"));
    /// ```
    pub fn to_svg(&self) -> String {
        self.to_svg_with(&SvgOptions::new())
    }

    /// An SVG picture: one lane per worker, a rectangle per step coloured by process
    /// (hover for PID, entry and duration), parks as grey bars, steals as red arrows
    /// from victim to thief, a time axis, and a legend of the processes that ran
    /// longest. Deterministic: the same recording gives the same text.
    ///
    /// ```
    /// use std::time::Duration;
    /// let recording = wsched::Recording::new(1, Duration::from_millis(1));
    /// let svg = recording.to_svg_with(&wsched::recorder::SvgOptions::new().width(600));
    /// assert!(svg.contains("width=\"600\""));
    /// ```
    pub fn to_svg_with(&self, options: &SvgOptions) -> String {
        let slices: Vec<_> = (0..self.workers()).map(|w| self.worker_slices(w)).collect();
        let steals = self.steals();
        let (t0, t1) = options.window.unwrap_or_else(|| {
            let starts = slices.iter().flatten().map(|s| s.start);
            let ends = slices.iter().flatten().map(|s| s.end);
            let from = starts.chain(steals.iter().map(|s| s.at)).min();
            let to = ends.chain(steals.iter().map(|s| s.at)).max();
            match (from, to) {
                (Some(from), Some(to)) => (from, to),
                _ => (Duration::ZERO, self.duration()),
            }
        });
        let span = (t1.saturating_sub(t0)).as_nanos().max(1) as f64;
        let width = f64::from(options.width);
        let plot = width - LEFT - RIGHT;
        let x = |t: Duration| -> f64 {
            let t = t.clamp(t0, t1);
            LEFT + (t - t0).as_nanos() as f64 / span * plot
        };
        let lanes_bottom = TOP + self.workers() as f64 * (LANE + GAP);
        let axis = lanes_bottom + 4.0;

        // Running time per process in the window, for the legend.
        let mut ran: BTreeMap<Pid, Duration> = BTreeMap::new();
        for s in slices.iter().flatten() {
            if let SliceKind::Step { pid, .. } = s.kind {
                let visible = s.end.min(t1).saturating_sub(s.start.max(t0));
                *ran.entry(pid).or_default() += visible;
            }
        }
        let mut legend: Vec<(Pid, Duration)> = ran.into_iter().collect();
        legend.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let shown = legend.len().min(options.legend);
        let legend_rows = shown.div_ceil(3) + 1;
        let height = axis + 40.0 + legend_rows as f64 * 18.0 + 8.0;

        let mut svg = String::new();
        let _ = writeln!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height:.0}\" \
             viewBox=\"0 0 {} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">",
            options.width, options.width
        );
        let _ = writeln!(
            svg,
            "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" \
             markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\">\
             <path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#d62728\"/></marker></defs>"
        );
        let _ = writeln!(
            svg,
            "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
             <text x=\"{LEFT}\" y=\"20\" font-size=\"14\">wsched: {}, {} to {} \
             ({}, {})</text>",
            plural(self.workers() as u64, "worker"),
            short_duration(t0),
            short_duration(t1),
            plural(
                slices
                    .iter()
                    .flatten()
                    .filter(|s| matches!(s.kind, SliceKind::Step { .. }))
                    .count() as u64,
                "step"
            ),
            plural(steals.len() as u64, "steal")
        );
        for (worker, lane) in slices.iter().enumerate() {
            let y = TOP + worker as f64 * (LANE + GAP);
            let _ = writeln!(
                svg,
                "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">worker {worker}</text>\n\
                 <rect x=\"{LEFT}\" y=\"{y:.1}\" width=\"{plot:.2}\" height=\"{LANE}\" fill=\"#f4f4f4\"/>",
                LEFT - 8.0,
                y + LANE / 2.0 + 4.0
            );
            for s in lane {
                if s.end < t0 || s.start > t1 {
                    continue;
                }
                let (x0, x1) = (x(s.start), x(s.end));
                let w = (x1 - x0).max(0.5);
                match s.kind {
                    SliceKind::Step { pid, outcome } => {
                        let label = xml(&self.label(pid));
                        let outcome = outcome.map_or("?".to_owned(), |o| o.to_string());
                        let _ = writeln!(
                            svg,
                            "<rect x=\"{x0:.2}\" y=\"{:.1}\" width=\"{w:.2}\" height=\"{:.1}\" \
                             fill=\"{}\"><title>{label}: {} ({outcome})</title></rect>",
                            y + 2.0,
                            LANE - 4.0,
                            colour(pid),
                            short_duration(s.end - s.start)
                        );
                    }
                    SliceKind::Park => {
                        let _ = writeln!(
                            svg,
                            "<rect x=\"{x0:.2}\" y=\"{:.1}\" width=\"{w:.2}\" height=\"{:.1}\" \
                             fill=\"#b8b8b8\"><title>parked: {}</title></rect>",
                            y + LANE / 2.0 - 3.0,
                            6.0,
                            short_duration(s.end - s.start)
                        );
                    }
                }
            }
        }
        for steal in &steals {
            if steal.at < t0 || steal.at > t1 || steal.victim >= self.workers() {
                continue;
            }
            let at = x(steal.at);
            let centre = |w: usize| TOP + w as f64 * (LANE + GAP) + LANE / 2.0;
            let (from, to) = (centre(steal.victim), centre(steal.thief));
            // Stop short of the thief's centre line so the arrowhead stays visible.
            let to = if to > from { to - 6.0 } else { to + 6.0 };
            let _ = writeln!(
                svg,
                "<circle cx=\"{at:.2}\" cy=\"{from:.1}\" r=\"2.5\" fill=\"#d62728\"/>\
                 <line x1=\"{at:.2}\" y1=\"{from:.1}\" x2=\"{at:.2}\" y2=\"{to:.1}\" \
                 stroke=\"#d62728\" stroke-width=\"1.5\" marker-end=\"url(#arrow)\">\
                 <title>worker {} stole {} from worker {} at {}</title></line>",
                steal.thief,
                steal.count,
                steal.victim,
                short_duration(steal.at)
            );
        }
        // The time axis.
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{axis:.1}\" x2=\"{:.2}\" y2=\"{axis:.1}\" stroke=\"black\"/>",
            LEFT + plot
        );
        let step = tick_step(span, 8.0);
        let mut tick = (t0.as_nanos() as f64 / step).ceil() * step;
        while tick <= t1.as_nanos() as f64 + 0.5 {
            let at = Duration::from_nanos(tick as u64);
            let tx = x(at);
            let _ = writeln!(
                svg,
                "<line x1=\"{tx:.2}\" y1=\"{axis:.1}\" x2=\"{tx:.2}\" y2=\"{:.1}\" stroke=\"black\"/>\
                 <text x=\"{tx:.2}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{}</text>",
                axis + 4.0,
                axis + 16.0,
                short_duration(at)
            );
            tick += step;
        }
        // The legend.
        let legend_top = axis + 34.0;
        for (i, (pid, time)) in legend.iter().take(shown).enumerate() {
            let lx = LEFT + (i % 3) as f64 * (plot / 3.0);
            let ly = legend_top + (i / 3) as f64 * 18.0;
            let _ = writeln!(
                svg,
                "<rect x=\"{lx:.2}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>\
                 <text x=\"{:.2}\" y=\"{ly:.1}\">{} ({})</text>",
                ly - 10.0,
                colour(*pid),
                lx + 16.0,
                xml(&self.label(*pid)),
                short_duration(*time)
            );
        }
        let ly = legend_top + shown.div_ceil(3) as f64 * 18.0;
        let more = match legend.len() - shown {
            0 => String::new(),
            n => format!("and {n} more processes; "),
        };
        let _ = writeln!(
            svg,
            "<text x=\"{LEFT}\" y=\"{ly:.1}\" fill=\"#555\">{more}grey: parked; red arrows: steals, victim to thief</text>"
        );
        svg.push_str("</svg>\n");
        svg
    }
}

/// A process's colour: hues a golden angle apart, so neighbouring PIDs differ.
fn colour(pid: Pid) -> String {
    let hue = (pid.as_u64() as f64 * 137.508) % 360.0;
    format!("hsl({hue:.0},65%,55%)")
}

/// A round tick spacing (1, 2 or 5 times a power of ten nanoseconds) giving about
/// `ticks` ticks over `span` nanoseconds.
fn tick_step(span: f64, ticks: f64) -> f64 {
    let raw = span / ticks;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    step.max(1.0)
}

/// Text made safe for XML.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
