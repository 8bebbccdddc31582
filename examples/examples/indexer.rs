//! A small application, built the way the book teaches: count the words in every file
//! of a directory with a supervised pool of workers.
//!
//! * a **pool** (`Supervisor::pool`) of `Worker`s, each asking the pool for its next
//!   job (`NextJob` → `Next::Job`), telling the coordinator it took it (a call, so
//!   that it is watched before it starts), reading the file through a **blocking
//!   handler** (file I/O must not block a scheduler worker) and reporting the counts;
//! * **typed spawns**: every process starts on its entry's typed name
//!   (`Worker::RUN`, `Stats::SERVE`, `Coordinator::RUN`), so the compiler checks the
//!   arguments of every `spawn` and `ChildSpec`;
//! * a **coordinator** that sizes every file at once (`yield_all!`), submits the
//!   largest first, watches the worker holding each file, and records each result
//!   with a `call!` to a **stats** process (a `Request` / `Reply` server);
//! * **pattern receive**: the coordinator waits with one `recv!` for a worker's
//!   call or counts, the `Down` of the pool or of a worker holding a job (a guard
//!   picks the monitor), or ten seconds of silence;
//! * **let it crash**: one file is Latin-1, not UTF-8; the worker that reads it
//!   panics, the pool restarts it, and the coordinator submits the file again, to be
//!   read leniently;
//! * an **inbox**: `main` is no process, yet receives the final report as a message;
//! * a **unit test** (`cargo test -p wsched-examples --example indexer`) that steps
//!   the coordinator through that crash with `wsched::testing::TestProcess`.
//!
//! `cargo run --example indexer [dir]`: without a directory, it writes a small sample
//! corpus to a scratch directory, indexes it, and removes it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use wsched::command::Completer;
use wsched::prelude::*;
use wsched::supervisor::{ChildSpec, Next, NextJob, Submit, Supervisor};
use wsched::Scheduler;

/// How long `main` and the coordinator wait before they call something lost.
const WAIT: Duration = Duration::from_secs(10);

/// The pool's size.
const WORKERS: usize = 3;

// ---- commands: what a process asks its handlers for ---------------------------------

/// Read a file and count its words. Its handler blocks (file I/O), so it runs on
/// the scheduler's blocking pool. `lenient` reads a file that is not UTF-8 anyway,
/// replacing the bytes that are not; strictly, such a file fails the command.
struct CountWords {
    path: PathBuf,
    lenient: bool,
}

impl Command for CountWords {
    type Output = Counts;
}

/// A file's size in bytes (a `stat`: blocking too).
struct FileSize(PathBuf);

impl Command for FileSize {
    type Output = u64;
}

/// Each word of a file (lower case), with how often it occurs.
type Counts = BTreeMap<String, u64>;

/// The blocking handler of `CountWords`.
fn count_words(command: CountWords, done: Completer<CountWords>) {
    let bytes = match std::fs::read(&command.path) {
        Ok(bytes) => bytes,
        Err(e) => return done.fail(e),
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) if command.lenient => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        Err(e) => return done.fail(e.utf8_error()),
    };
    let mut counts = Counts::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
    {
        *counts.entry(word.to_lowercase()).or_default() += 1;
    }
    done.complete(counts);
}

// ---- messages -------------------------------------------------------------------------

/// A file to index: what the coordinator submits to the pool.
#[derive(Clone, Debug, PartialEq)]
struct Job {
    path: PathBuf,
    lenient: bool,
    /// Where the worker reports.
    coordinator: Pid,
}

/// A worker took a job: a call, so that the coordinator watches the worker before
/// the worker starts on it (a monitor set later, on a process that has ended
/// meanwhile, reports no such process, not why it ended).
#[derive(Debug)]
struct Started {
    worker: Pid,
    job: Job,
}

/// A worker indexed a file.
#[derive(Debug)]
struct Indexed {
    worker: Pid,
    path: PathBuf,
    counts: Counts,
}

/// The stats process's requests: add a file's counts (answered with how many
/// distinct words the index holds now), and the `n` most frequent words.
#[derive(Debug)]
struct Add(Counts);

#[derive(Debug)]
struct TopWords(usize);

/// What the coordinator sends `main` at the end.
#[derive(Debug)]
struct Report {
    files: usize,
    words: u64,
    distinct: usize,
    top: Vec<(String, u64)>,
    retried: Vec<String>,
    skipped: Vec<String>,
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

// ---- processes ----------------------------------------------------------------------

// ANCHOR: worker
/// One of the pool's workers: asks the pool for a file, counts its words, reports,
/// and asks again, until the pool retires it.
struct Worker {
    pool: Pid,
}

#[process]
impl Worker {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        loop {
            // Idle while this call waits: the pool answers when it has a job.
            let next: Next<Job> = call!(self.pool, NextJob::<Job>::new())?;
            let job = match next {
                Next::Job(job) => job,
                Next::Retire => return Ok(()),
            };
            let me = this::pid();
            let taken = Started {
                worker: me,
                job: job.clone(),
            };
            let () = call!(job.coordinator, taken, timeout = WAIT)?;
            let read = CountWords {
                path: job.path.clone(),
                lenient: job.lenient,
            };
            // The bug this program lets crash: every file is taken to be text. One
            // that is not fails the command, and the worker panics.
            let counts = yield_cmd!(read)
                .unwrap_or_else(|e| panic!("{} is not text: {e}", file_name(&job.path)));
            let path = job.path;
            this::send(
                job.coordinator,
                Indexed {
                    worker: me,
                    path,
                    counts,
                },
            )?;
        }
    }
}
// ANCHOR_END: worker

/// The index: every word seen, with its count. Served by request and reply.
#[derive(Default)]
struct Stats {
    words: HashMap<String, u64>,
}

#[process]
impl Stats {
    #[entry]
    fn serve(&mut self) -> Result<(), BoxError> {
        loop {
            // Two request types, told apart by pattern; the request's type names the
            // reply's, so a caller expecting another reply type is not served here
            // (its call times out and says why).
            recv! {
                Request::<Add, usize> { request: Add(counts), reply, .. } => {
                    for (word, n) in counts {
                        *self.words.entry(word).or_default() += n;
                    }
                    reply.send(self.words.len());
                },
                Request::<TopWords, Vec<(String, u64)>> { request: TopWords(n), reply, .. } => {
                    let mut all: Vec<(String, u64)> =
                        self.words.iter().map(|(w, c)| (w.clone(), *c)).collect();
                    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                    all.truncate(n);
                    reply.send(all);
                },
            }?;
        }
    }
}

/// Sizes the files, submits them to the pool, and gathers the results; resubmits a
/// file whose worker died holding it; sends the report to `report_to`.
#[derive(Default)]
struct Coordinator {
    /// The job each busy worker holds, and the monitor watching that worker.
    held: HashMap<Pid, (MonitorRef, Job)>,
}

#[process]
impl Coordinator {
    #[entry]
    fn run(
        &mut self,
        files: Vec<PathBuf>,
        pool: Pid,
        stats: Pid,
        report_to: Pid,
    ) -> Result<(), BoxError> {
        let pool_watch = this::monitor(pool);

        // Fan out: every size asked at once, answered by the blocking pool in any
        // order, given back in the files' order.
        let sizes = yield_all!(files.iter().cloned().map(FileSize));
        let mut sized = Vec::new();
        for (path, size) in files.into_iter().zip(sizes) {
            sized.push((size?, path));
        }
        // Largest first, so that no big file starts last and keeps the others waiting.
        sized.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        println!(
            "coordinator: sized {} files at once; submitting them largest first:",
            sized.len()
        );
        let me = this::pid();
        for (size, path) in &sized {
            println!("  {:<16} {size:>5} bytes", file_name(path));
            let job = Job {
                path: path.clone(),
                lenient: false,
                coordinator: me,
            };
            this::send(pool, Submit(job))?;
        }

        println!(
            "\ncoordinator: results as the workers finish (file, words, the worker, and the \
             index's size that a call! to the stats process returned):"
        );
        let (mut left, mut words, mut distinct) = (sized.len(), 0, 0);
        let (mut retried, mut skipped) = (Vec::new(), Vec::new());
        while left > 0 {
            // ANCHOR: receive
            // One suspension point, five outcomes; a message no arm takes waits.
            // Each arm says whether to go on (the outer `?` is the receive's own
            // error: the coordinator was cancelled).
            let verdict: Result<(), BoxError> = recv! {
                Request::<Started, ()> { request: Started { worker, job }, reply, .. } => {
                    let watch = this::monitor(worker);
                    self.held.insert(worker, (watch, job));
                    reply.send(());
                    Ok(())
                },
                Indexed { worker, path, counts } => {
                    if let Some((watch, _)) = self.held.remove(&worker) {
                        this::demonitor(watch);
                    }
                    let file_words: u64 = counts.values().sum();
                    words += file_words;
                    // Recorded before it counts as done: the call returns once the
                    // index has it.
                    distinct = call!(stats, Add(counts), timeout = WAIT)?;
                    println!(
                        "  {:<16} {file_words:>4} words (by {worker}; the index holds {distinct} distinct words now)",
                        file_name(&path)
                    );
                    left -= 1;
                    Ok(())
                },
                // The pool itself ended: nothing more will be done.
                Down { monitor, reason, .. } if monitor == pool_watch => {
                    Err(format!("the pool ended: {reason}").into())
                },
                // The Down of a worker holding a job: the job is lost with it.
                Down { pid, monitor, reason } if self.held.get(&pid).is_some_and(|(watch, _)| *watch == monitor) => {
                    let (_, job) = self.held.remove(&pid).expect("held");
                    let name = file_name(&job.path);
                    println!("  {name}: its worker died holding it ({reason})");
                    if job.lenient {
                        println!("  {name}: skipped: it failed twice");
                        skipped.push(name);
                        left -= 1;
                    } else {
                        println!("  {name}: the pool restarts the worker; submitting {name} again, to be read leniently");
                        retried.push(name);
                        this::send(pool, Submit(Job { lenient: true, ..job }))?;
                    }
                    Ok(())
                },
                after(WAIT) => Err(format!("no word from the workers in {WAIT:?}; {left} files left").into()),
            }?;
            verdict?;
            // ANCHOR_END: receive
        }

        let top: Vec<(String, u64)> = call!(stats, TopWords(5), timeout = WAIT)?;
        let report = Report {
            files: sized.len() - skipped.len(),
            words,
            distinct,
            top,
            retried,
            skipped,
        };
        this::send(report_to, report)?;
        Ok(())
    }
}

// ---- main -----------------------------------------------------------------------------

/// The sample corpus: a few text files, and one in Latin-1 (`café` as `caf\xE9`),
/// which a strict UTF-8 read refuses.
fn write_sample(dir: &Path) -> std::io::Result<()> {
    let texts: [(&str, &[u8]); 6] = [
        (
            "processes.txt",
            b"A process is a plain struct. It runs until it waits for something, then \
              the scheduler runs another process. A process waits for a command, a \
              message or a timer, and nothing else.",
        ),
        (
            "supervisors.txt",
            b"A supervisor starts its children, watches them, and restarts the ones \
              that fail. A pool is a supervisor of identical workers that ask for jobs.",
        ),
        (
            "messages.txt",
            b"Every process has a mailbox. A message waits in the mailbox until the \
              process receives it; a receive by pattern leaves the others waiting.",
        ),
        (
            "handlers.txt",
            b"A blocking handler runs on its own threads, so a slow read does not \
              stop the workers.",
        ),
        ("empty.txt", b""),
        (
            "legacy.txt",
            b"Written long ago in Latin-1: the caf\xE9 serves the process a coffee.",
        ),
    ];
    std::fs::create_dir_all(dir)?;
    for (name, text) in texts {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The directory to index, or a sample corpus in a scratch directory.
    let (dir, scratch) = match std::env::args_os().nth(1) {
        Some(dir) => (PathBuf::from(dir), None),
        None => {
            let dir = std::env::temp_dir().join(format!("wsched-indexer-{}", std::process::id()));
            let scratch = Scratch(dir.clone());
            write_sample(&dir)?;
            (dir, Some(scratch))
        }
    };
    // `main` is a thread, not a process: it may block on the file system.
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|path| path.is_file());
    files.sort();
    let what = if scratch.is_some() {
        "a sample corpus in "
    } else {
        ""
    };
    println!(
        "indexing the {} files of {what}{}",
        files.len(),
        dir.display()
    );

    // The scheduler catches the worker's panic; the standard hook would still print
    // it, with a backtrace if RUST_BACKTRACE is set. One line is enough here.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("  (panic: {})", info.payload_as_str().unwrap_or("?"));
    }));

    let scheduler = Scheduler::builder()
        .workers(2)
        .blocking_handler(count_words)
        .blocking_handler(|FileSize(path): FileSize, done: Completer<FileSize>| {
            match std::fs::metadata(path) {
                Ok(meta) => done.complete(meta.len()),
                Err(e) => done.fail(e),
            }
        })
        .build()?;

    // Typed spawns: `Stats::SERVE` is an `Entry<Stats, ()>`, so the arguments must
    // be `()`; `Coordinator::RUN`'s are `(Vec<PathBuf>, Pid, Pid, Pid)`.
    let stats = scheduler.spawn(Stats::default(), Stats::SERVE, ())?;

    // ANCHOR: pool
    // The pool: `WORKERS` workers built from one spec, given the pool's PID to ask
    // for jobs. A worker that panics is restarted (its spec's default `Permanent`),
    // at most 5 times in 10 seconds.
    let pool = Supervisor::pool::<Job>("indexer", WORKERS, |id, pool| {
        ChildSpec::new(id, move || Worker { pool }, Worker::RUN, ())
    })
    .intensity(5, Duration::from_secs(10));
    let view = pool.handle();
    let pool_pid = scheduler.spawn(pool, Supervisor::ENTRY, ())?;
    // ANCHOR_END: pool
    println!(
        "the pool: {WORKERS} workers (indexer-0 .. indexer-{}), each asking it for a job\n",
        WORKERS - 1
    );

    // `main` gets the report as a message: an inbox is a mailbox with a PID.
    let inbox = scheduler.inbox()?;
    let coordinator = scheduler.spawn(
        Coordinator::default(),
        Coordinator::RUN,
        (files, pool_pid, stats, inbox.pid()),
    )?;
    let watch = inbox.monitor(coordinator);

    // The report, or the coordinator's `Down` if it failed first: one receive of
    // either type (anything else would stay in the inbox).
    let message = inbox.recv_message_where(Duration::from_secs(30), |m| {
        m.payload.is::<Report>()
            || m.payload
                .downcast_ref::<Down>()
                .is_some_and(|d| d.monitor == watch)
    })?;
    let report = match message.payload.downcast::<Report>() {
        Ok(report) => report,
        Err(other) => {
            let down = other
                .into_payload()
                .downcast::<Down>()
                .expect("a Report or a Down");
            return Err(format!("the coordinator ended first: {}", down.reason).into());
        }
    };
    println!(
        "\nmain: the report, received through its inbox ({}):",
        inbox.pid()
    );
    println!(
        "  {} files indexed, {} words, {} distinct",
        report.files, report.words, report.distinct
    );
    let top: Vec<String> = report
        .top
        .iter()
        .map(|(w, n)| format!("{w} ({n})"))
        .collect();
    println!("  most frequent: {}", top.join(", "));
    if !report.retried.is_empty() {
        println!(
            "  read leniently after a crash: {}",
            report.retried.join(", ")
        );
    }
    if !report.skipped.is_empty() {
        println!("  skipped: {}", report.skipped.join(", "));
    }

    // The pool restarted each worker that panicked (the coordinator saw each die
    // holding a file): its supervisor's view says so, once all run again.
    let crashes = (report.retried.len() + report.skipped.len()) as u64;
    let restarted = view.wait_for(WAIT, |workers| {
        let running = workers.iter().filter(|w| w.pid.is_some()).count();
        let restarts: u64 = workers.iter().map(|w| w.restarts).sum();
        (running == WORKERS && restarts >= crashes).then_some(restarts)
    });
    let restarted = restarted.ok_or("the pool did not restart its workers")?;
    let plural = if restarted == 1 { "" } else { "s" };
    println!(
        "\nthe pool restarted {restarted} worker{plural} after a panic; all {WORKERS} run again"
    );

    // Shutdown cancels the pool, which stops its workers in order, and the stats.
    let report = scheduler.shutdown(WAIT);
    println!(
        "shutdown: {} finished while shutting down, {} stopped",
        report.finished,
        report.stopped.len()
    );
    drop(scratch); // removes the sample corpus
    Ok(())
}

/// A scratch directory, removed when dropped, however `main` ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wsched::testing::{request, TestProcess};
    use wsched::{ExitReason, Phase};

    /// The coordinator steps through a crash: a worker dies holding a file, the file
    /// is submitted again, leniently, and the report says so.
    #[test]
    fn a_file_whose_worker_died_is_submitted_again_leniently() {
        let (pool, stats, main) = (Pid::from_raw(10), Pid::from_raw(11), Pid::from_raw(12));
        let files = vec![PathBuf::from("a.txt"), PathBuf::from("b.txt")];
        let mut t = TestProcess::start(
            Coordinator::default(),
            Coordinator::RUN,
            (files, pool, stats, main),
        )
        .unwrap();
        let me = t.pid();
        assert_eq!(t.take_monitors()[0].target, pool);

        // Both sizes are asked at once; `b.txt` is larger, so it goes first.
        assert_eq!(t.last_yields(), [Tag(1), Tag(2)]);
        t.complete(Tag(2), 300_u64);
        t.complete(Tag(1), 100_u64);
        let submitted: Vec<Job> = t
            .take_sent()
            .into_iter()
            .map(|sent| {
                assert_eq!(sent.to, pool);
                sent.payload.downcast::<Submit<Job>>().unwrap().0
            })
            .collect();
        let job = |name: &str, lenient| Job {
            path: PathBuf::from(name),
            lenient,
            coordinator: me,
        };
        assert_eq!(submitted, [job("b.txt", false), job("a.txt", false)]);

        // A worker takes `b.txt`, and the coordinator watches it.
        let worker = Pid::from_raw(20);
        let (started, answer) = request::<Started, ()>(Started {
            worker,
            job: job("b.txt", false),
        });
        t.send_from(Some(worker), started);
        let watched = t.take_monitors().remove(0);
        assert_eq!(watched.target, worker);
        assert_eq!(answer.reply(), Some(()), "the worker may start");

        // It panics: the coordinator submits `b.txt` again, to be read leniently.
        let panicked = ExitReason::Panicked {
            phase: Phase::Step,
            message: "b.txt is not text".into(),
        };
        t.send_from(Some(worker), watched.down(panicked));
        let again = t.take_sent().remove(0);
        assert_eq!(
            again.payload.downcast::<Submit<Job>>().unwrap(),
            Submit(job("b.txt", true))
        );

        // Both files come back; each is recorded with a call to the stats process.
        for (name, words) in [("a.txt", 2), ("b.txt", 3)] {
            let counts = Counts::from([("word".to_owned(), words)]);
            t.send(Indexed {
                worker,
                path: PathBuf::from(name),
                counts,
            });
            let call = t.take_call::<Add, usize>();
            assert_eq!((call.callee, call.request.0["word"]), (stats, words));
            t.complete(call.tag, call.reply(1));
        }
        let call = t.take_call::<TopWords, Vec<(String, u64)>>();
        t.complete(call.tag, call.reply(vec![("word".to_owned(), 5)]));

        // The report goes to `main`, and the coordinator is done.
        let sent = t.take_sent().remove(0);
        assert_eq!(sent.to, main);
        let report = sent.payload.downcast::<Report>().unwrap();
        assert_eq!((report.files, report.words, report.distinct), (2, 5, 1));
        assert_eq!(report.retried, ["b.txt"]);
        t.result::<()>();
    }
}
