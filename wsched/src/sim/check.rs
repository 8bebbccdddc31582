//! The test driver: a check run over a range of seeds, stopping at the first that
//! fails with everything needed to understand it and run it again.

use std::fmt;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::engine::process::panic_message;
use crate::observe::recorder::RecordOptions;
use crate::pid::Pid;
use crate::sim::faults::Faults;
use crate::sim::simulation::{SimBuilder, Simulation};
use crate::sim::trace::TraceEntry;

/// The environment variable that runs one seed instead of the range, to
/// reproduce a failure: `WSCHED_SIM_SEED=1234 cargo test my_check`.
pub const SEED_VARIABLE: &str = "WSCHED_SIM_SEED";

/// Runs a check over many seeds: see [`check`].
pub struct Check<M> {
    make: M,
    seeds: Range<u64>,
    timeline_dir: Option<PathBuf>,
    name: Option<String>,
    command: Option<String>,
}

/// A check over a range of seeds (default `0..100`): for each, `make(seed)`
/// configures a simulation (seed it with the seed it is given) and the check's
/// body runs it and says whether all went well. The first seed that fails stops
/// the check, which reports the seed, its fault plan, the trace, the command that
/// reproduces it, and the run's timeline, written as a Perfetto (Chrome JSON)
/// file and an SVG by running the seed again with the recorder on.
///
/// The environment variable [`SEED_VARIABLE`] runs only the seed it names.
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::sim::{check, Faults, Simulation};
///
/// struct Sleeper;
/// #[process]
/// impl Sleeper {
///     #[entry]
///     fn run(&mut self) -> Result<(), BoxError> {
///         yield_cmd!(Sleep(Duration::from_secs(3600)))?;
///         Ok(())
///     }
/// }
///
/// let report = check(|seed| Simulation::builder().seed(seed).faults(Faults::from_seed(seed)))
///     .seeds(0..50)
///     .run(|sim| {
///         let pid = sim.spawn(Sleeper, Sleeper::RUN, ()).map_err(|e| e.to_string())?;
///         match sim.wait(pid) {
///             // A crash fault may kill it: that is fine here.
///             Ok(_) | Err(_) => Ok::<(), String>(()),
///         }
///     })
///     .expect("every seed passes");
/// assert_eq!(report.seeds, 50);
/// ```
pub fn check<M>(make: M) -> Check<M>
where
    M: FnMut(u64) -> SimBuilder,
{
    Check {
        make,
        seeds: 0..100,
        timeline_dir: None,
        name: None,
        command: None,
    }
}

impl<M> Check<M>
where
    M: FnMut(u64) -> SimBuilder,
{
    /// The seeds to run.
    pub fn seeds(mut self, seeds: Range<u64>) -> Self {
        self.seeds = seeds;
        self
    }

    /// Where a failing seed's timeline is written (default: the system's
    /// temporary directory).
    pub fn timeline_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.timeline_dir = Some(dir.into());
        self
    }

    /// The test's name, for the command that reproduces a failure (default: the
    /// current thread's name, which is the test's under `cargo test`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The command that runs this check, for the line of a failure's report that
    /// reruns its seed (`WSCHED_SIM_SEED=N` and then this): a program's `cargo run
    /// -p … --example …`, say. Default: `cargo test -- --exact NAME` (see
    /// [`name`](Self::name)).
    pub fn command(mut self, command: impl Into<String>) -> Self {
        self.command = Some(command.into());
        self
    }

    /// Runs `body` on a simulation of each seed, until one fails: returns an
    /// `Err` or panics.
    ///
    /// # Errors
    /// The first failure, as a [`CheckFailure`] whose `Display` is the whole
    /// report.
    pub fn run<E, B>(mut self, mut body: B) -> Result<CheckReport, Box<CheckFailure>>
    where
        E: fmt::Display,
        B: FnMut(&mut Simulation) -> Result<(), E>,
    {
        let seeds = match std::env::var(SEED_VARIABLE) {
            Ok(value) => match value.trim().parse::<u64>() {
                Ok(seed) => seed..seed + 1,
                Err(_) => panic!(
                    "{SEED_VARIABLE}={value:?} is not a seed: give a whole number, as a \
                     failure's report prints it"
                ),
            },
            Err(_) => self.seeds.clone(),
        };
        let started = Instant::now();
        let mut report = CheckReport {
            seeds: 0,
            steps: 0,
            virtual_time: Duration::ZERO,
            wall_time: Duration::ZERO,
            distinct_traces: 0,
        };
        let mut hashes = Vec::new();
        for seed in seeds.clone() {
            let outcome = run_one(&mut self.make, seed, None, &mut body);
            match outcome.error {
                None => {
                    report.seeds += 1;
                    report.steps += outcome.steps;
                    report.virtual_time += outcome.elapsed;
                    hashes.push(outcome.hash);
                }
                Some(error) => {
                    // Again, recording: the timeline, and proof that it reproduces.
                    let dir = self.timeline_dir.clone().unwrap_or_else(std::env::temp_dir);
                    let again = run_one(&mut self.make, seed, Some(&dir), &mut body);
                    let name = self
                        .name
                        .clone()
                        .or_else(|| std::thread::current().name().map(str::to_owned))
                        .filter(|name| name != "main");
                    let command = self.command.clone().unwrap_or_else(|| match &name {
                        Some(name) => format!("cargo test -- --exact {name}"),
                        None => "cargo test".to_owned(),
                    });
                    return Err(Box::new(CheckFailure {
                        seed,
                        seeds,
                        passed: report.seeds,
                        error,
                        faults: outcome.faults,
                        trace_hash: outcome.hash,
                        steps: outcome.steps,
                        elapsed: outcome.elapsed,
                        tail: outcome.tail,
                        reproduced: again.error.is_some() && again.hash == outcome.hash,
                        timeline: again.timeline,
                        labels: again.labels,
                        command,
                    }));
                }
            }
        }
        hashes.sort_unstable();
        hashes.dedup();
        report.distinct_traces = hashes.len() as u64;
        report.wall_time = started.elapsed();
        Ok(report)
    }

    /// [`run`](Self::run), panicking with the failure's report.
    ///
    /// # Panics
    /// When a seed fails.
    #[track_caller]
    pub fn assert<E, B>(self, body: B) -> CheckReport
    where
        E: fmt::Display,
        B: FnMut(&mut Simulation) -> Result<(), E>,
    {
        match self.run(body) {
            Ok(report) => report,
            Err(failure) => panic!("{failure}"),
        }
    }
}

impl<M> fmt::Debug for Check<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Check")
            .field("seeds", &self.seeds)
            .field("timeline_dir", &self.timeline_dir)
            .finish_non_exhaustive()
    }
}

/// What one seed's run gave.
struct Outcome {
    error: Option<String>,
    faults: Option<Faults>,
    hash: u64,
    steps: u64,
    elapsed: Duration,
    tail: Vec<TraceEntry>,
    timeline: Option<Result<(PathBuf, PathBuf), String>>,
    /// What the recorder calls the processes of the tail (a recorded run's).
    labels: Vec<(Pid, String)>,
}

fn run_one<M, E, B>(make: &mut M, seed: u64, record: Option<&PathBuf>, body: &mut B) -> Outcome
where
    M: FnMut(u64) -> SimBuilder,
    E: fmt::Display,
    B: FnMut(&mut Simulation) -> Result<(), E>,
{
    let mut builder = make(seed);
    if record.is_some() {
        builder = builder.record(RecordOptions::new());
    }
    let mut sim = match builder.build() {
        Ok(sim) => sim,
        Err(error) => {
            return Outcome {
                error: Some(format!("the simulation could not be built: {error}")),
                faults: None,
                hash: 0,
                steps: 0,
                elapsed: Duration::ZERO,
                tail: Vec::new(),
                timeline: None,
                labels: Vec::new(),
            }
        }
    };
    let error = match catch_unwind(AssertUnwindSafe(|| body(&mut sim))) {
        Ok(Ok(())) => None,
        Ok(Err(error)) => Some(error.to_string()),
        Err(panic) => Some(format!("panicked: {}", panic_message(&*panic))),
    };
    let timeline = record.map(|dir| write_timeline(&sim, dir));
    let tail = sim.trace_tail();
    let mut labels: Vec<(Pid, String)> = Vec::new();
    if let Some(recording) = sim.recording() {
        for entry in &tail {
            if !labels.iter().any(|(pid, _)| *pid == entry.pid) {
                labels.push((entry.pid, recording.label(entry.pid)));
            }
        }
    }
    Outcome {
        error,
        faults: Some(sim.faults().clone()),
        hash: sim.trace_hash(),
        steps: sim.steps(),
        elapsed: sim.elapsed(),
        tail,
        timeline,
        labels,
    }
}

/// Writes `sim`'s recording to `dir` as `wsched-sim-SEED.json` and `.svg`.
fn write_timeline(sim: &Simulation, dir: &PathBuf) -> Result<(PathBuf, PathBuf), String> {
    let recording = sim
        .recording()
        .ok_or_else(|| "the recorder was off".to_owned())?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = dir.join(format!("wsched-sim-{}.json", sim.seed()));
    let svg = dir.join(format!("wsched-sim-{}.svg", sim.seed()));
    let mut bytes = Vec::new();
    recording
        .write_chrome_json(&mut bytes)
        .map_err(|e| e.to_string())?;
    std::fs::write(&json, bytes).map_err(|e| format!("{}: {e}", json.display()))?;
    std::fs::write(&svg, recording.to_svg()).map_err(|e| format!("{}: {e}", svg.display()))?;
    Ok((json, svg))
}

/// What a check that passed ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// Seeds run.
    pub seeds: u64,
    /// Steps taken, over all seeds.
    pub steps: u64,
    /// Virtual time simulated, over all seeds.
    pub virtual_time: Duration,
    /// Time the check took.
    pub wall_time: Duration,
    /// How many different traces the seeds gave.
    pub distinct_traces: u64,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: u64, many: &'static str| {
            if n == 1 {
                &many[..many.len() - 1]
            } else {
                many
            }
        };
        write!(
            f,
            "{} {} passed ({} distinct {}): {} steps, {:?} of virtual time in {:?}",
            self.seeds,
            plural(self.seeds, "seeds"),
            self.distinct_traces,
            plural(self.distinct_traces, "traces"),
            self.steps,
            self.virtual_time,
            self.wall_time
        )
    }
}

/// The first seed of a check that failed, and everything known about it.
#[derive(Debug)]
pub struct CheckFailure {
    /// The seed.
    pub seed: u64,
    /// The seeds the check was to run.
    pub seeds: Range<u64>,
    /// How many seeds passed before it.
    pub passed: u64,
    /// What went wrong: the body's error or panic.
    pub error: String,
    /// The seed's fault plan (`None` if the simulation could not be built).
    pub faults: Option<Faults>,
    /// The run's trace hash.
    pub trace_hash: u64,
    /// Steps taken.
    pub steps: u64,
    /// Virtual time simulated.
    pub elapsed: Duration,
    /// The last entries of the trace.
    pub tail: Vec<TraceEntry>,
    /// Whether running the seed again failed too, with the same trace.
    pub reproduced: bool,
    /// Where the timeline was written (Perfetto JSON, SVG), or why it was not.
    pub timeline: Option<Result<(PathBuf, PathBuf), String>>,
    /// What the processes of the tail are (`Type::entry <pid>`), as the recorder of
    /// the seed's second run named them.
    pub labels: Vec<(Pid, String)>,
    /// The command that runs the check (see [`Check::command`]).
    pub command: String,
}

impl CheckFailure {
    /// The command that runs this seed alone.
    pub fn reproduce(&self) -> String {
        format!("{SEED_VARIABLE}={} {}", self.seed, self.command)
    }
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simulation failed at seed {} (seeds {:?}; {} passed before it)",
            self.seed, self.seeds, self.passed
        )?;
        writeln!(f, "  error:     {}", self.error)?;
        match &self.faults {
            Some(faults) => writeln!(f, "  faults:    {faults}")?,
            None => writeln!(f, "  faults:    (not built)")?,
        }
        writeln!(
            f,
            "  trace:     {:016x}, {} steps, {:?} of virtual time",
            self.trace_hash, self.steps, self.elapsed
        )?;
        writeln!(
            f,
            "  again:     {}",
            if self.reproduced {
                "the seed fails again with the same trace"
            } else {
                "the seed did NOT fail the same way again: the system reads a clock, \
                 randomness or I/O the simulation does not control"
            }
        )?;
        writeln!(f, "  reproduce: {}", self.reproduce())?;
        match &self.timeline {
            Some(Ok((json, svg))) => writeln!(
                f,
                "  timeline:  {} (open in Perfetto), {}",
                json.display(),
                svg.display()
            )?,
            Some(Err(why)) => writeln!(f, "  timeline:  not written: {why}")?,
            None => {}
        }
        if !self.tail.is_empty() {
            writeln!(f, "  last events (virtual time, process, event):")?;
            for entry in &self.tail {
                match self.labels.iter().find(|(pid, _)| *pid == entry.pid) {
                    Some((_, label)) => writeln!(f, "    {:<40}  {label}", entry.to_string())?,
                    None => writeln!(f, "    {entry}")?,
                }
            }
        }
        Ok(())
    }
}

impl std::error::Error for CheckFailure {}
