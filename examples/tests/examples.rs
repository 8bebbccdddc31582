//! Runs every program in `examples/examples/` to completion and checks what it
//! printed; and checks that the README's quick start is `quickstart.rs`, verbatim.
//!
//! The programs are the binaries `cargo test` has just built: it builds a package's
//! examples (to check that they compile) before it runs any of its tests, into
//! `<target>/<profile>/examples/`, next to this test's `deps/`. So in
//! `cargo test --workspace` nothing is compiled twice. Only when they are missing or
//! older than a source they are built from (a run filtered with `--test examples`
//! builds no examples) does the test build them, with `cargo build --examples`
//! (which, with its own feature set, may compile `wsched` once more). An example
//! whose own unit tests `cargo test` runs (`test = true` in `examples/Cargo.toml`:
//! `indexer`, `bank`, `echo_server`, `chat_tcp`) is built by it only as a test harness, so
//! its program is built here. `cluster` needs this package's `nats` feature (and
//! `nats-server` on the PATH): it is built, and its test runs, only with it
//! (`cargo test -p wsched-examples --features nats --test examples cluster`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};
use std::{env, fs, thread};

/// How long one program may run before the test fails (they take seconds at most).
const LIMIT: Duration = Duration::from_secs(120);

/// One test per program: its arguments (`{dir}` becomes a fresh scratch directory;
/// the benchmark-like programs get small sizes) and lines its output must contain.
/// A program in `examples/examples/` without an entry here fails
/// `every_example_is_checked`.
macro_rules! examples {
    ($($(#[$attr:meta])* $name:ident [$($arg:literal),*] => [$($expect:literal),+ $(,)?];)+) => {
        const CHECKED: &[&str] = &[$(stringify!($name)),+];
        $(
            #[test]
            $(#[$attr])*
            fn $name() {
                run(stringify!($name), &[$($arg),*], &[$($expect),+]);
            }
        )+
    };
}

examples! {
    quickstart [] => [
        "spawned <1>, running entry \"greet\"",
        "<1> finished: <h1>/users/ada</h1> welcome back! (greeted 1)",
    ];
    fan_out [] => [
        "the service completed 100 commands in shuffled order: #",
        "<1> got 100 results back in its own order: [1, 4, 9, 16, 25] ... [9801, 10000]",
        "sum of squares 1..=100: 338350",
    ];
    workflow [] => [
        "order 1: payment attempt 1 failed (gateway timeout); retrying in 20ms",
        "result: order 1 shipped (receipt-visa-4242-2500, TRACK0001)",
        "order 2: payment attempt 2 failed (card expired); retrying in 40ms",
        "order 2: cleaned up: released",
        "result: <2> ended with an error: process failed: command `Charge` failed: card expired",
        "result: order 3 shipped (receipt-visa-4242-1200000, TRACK0003)",
        "  gateway: refunded receipt-visa-4242-450000",
        "  warehouse: reservation 4 released",
        "order 4: cleaned up: refunded and released",
        "result: cancelled: it was asked to stop and did",
    ];
    chat [] => [
        "room: dave dropped out: killed: stopped before it finished",
        "room: carol left",
        "bob (<3>) heard:\n  here: alice\n  <alice> hi bob!\n  * carol joined\n  * dave joined\n  * dave dropped out\n  * alice left\n  <carol> did I miss anything?\n",
        "carol (<4>) heard:\n  here: alice, bob\n  * dave joined\n  * dave dropped out\n  * alice left\n  * bob left\n",
        "the room closed when the last member left; it relayed 3 lines",
    ];
    chat_tcp [] => [
        "carol < * dave dropped out",
        "  bob < (the server closed the connection)",
        "ada read 11 lines:\n  * welcome! say /nick NAME to join\n  * hello ada, you are alone here\n  * bob joined\n  bob: hi ada\n  * carol joined\n  carol: hi all\n  * dave joined\n  * dave dropped out\n  * bob left\n  carol: just us now\n  * bye ada\n",
        "bob read 8 lines:\n  * welcome! say /nick NAME to join\n  * hello bob; here: ada\n  ada: hello bob\n  * carol joined\n  carol: hi all\n  * dave joined\n  * dave dropped out\n  * bye bob\n",
        "carol read 7 lines:\n  * welcome! say /nick NAME to join\n  * say /nick NAME first\n  * hello carol; here: ada, bob\n  * dave joined\n  * dave dropped out\n  * bob left\n  * ada left\n",
    ];
    echo_server [] => [
        "ada got its 3 lines back",
        "bob got its 2 lines back",
        "eve got its 4 lines back",
        "the server echoed 108 bytes over 3 connections",
        "listener closed: a new connection is refused",
    ];
    hand_written [] => [
        "on the scheduler, <1> finished: <h1>/users/ada</h1> welcome back!",
        "spawning an unknown entry fails: cannot spawn: no entry named `greeet`",
        "  step 2: a message came early; still waiting for yields",
        "  step 3: done with \"<h1>bob</h1> hello!\"",
        "  cancelled while fetching: process failed: cancelled",
    ];
    supervise [] => [
        "  job 0 (",
        "  job 6 (",
        "  all jobs done: [0, 10, 20, 30, 40, 50, 60]",
        "  listener ended: panicked in step: listener crashed",
        "  listener <",
        " restarts 1 (Permanent, Worker)",
        "app ended: cancelled: it was asked to stop and did",
    ];
    showcase [] => [
        "the coordinator's crawlers fetched 1208 bytes; the collector heard from:",
        "  alpha.test      304 bytes",
        "shutdown: 0 finished while shutting down, 0 stopped",
    ];
    indexer [] => [
        "coordinator: sized 6 files at once; submitting them largest first:",
        "  processes.txt      178 bytes\n  supervisors.txt    143 bytes\n  messages.txt       138 bytes\n  handlers.txt        85 bytes\n  legacy.txt          66 bytes\n  empty.txt            0 bytes\n",
        "  processes.txt      33 words (by <",
        "  supervisors.txt    25 words (by <",
        "  messages.txt       24 words (by <",
        "  handlers.txt       17 words (by <",
        "  empty.txt           0 words (by <",
        "  legacy.txt: its worker died holding it (panicked in step: legacy.txt is not text: command `CountWords` failed: invalid utf-8 sequence of 1 bytes from index 36)",
        "  legacy.txt: the pool restarts the worker; submitting legacy.txt again, to be read leniently",
        "  legacy.txt         13 words (by <",
        "  6 files indexed, 112 words, 68 distinct",
        "  most frequent: a (15), the (8), process (6), for (3), it (3)",
        "  read leniently after a crash: legacy.txt",
        "the pool restarted 1 worker after a panic; all 3 run again",
        ", 0 stopped",
    ];
    http_client [] => [
        " /hello/ada      200 hello, ada",
        " /missing        failed: the server said 404 Not Found",
        "the server never had more than 2 at once: max_in_flight(2) queued the rest",
        " ended: cancelled: it was asked to stop and did",
        "the server saw the client close the connection: the future was dropped",
        " timed out after 200ms",
        "  Fetch  3 completed, 1 failed, 0 timed out, 1 aborted, 0 in flight",
        "  Probe  0 completed, 0 failed, 1 timed out, 0 aborted, 0 in flight",
        "shutdown: 1 finished while shutting down, 0 stopped, 1 piece of work aborted",
    ];
    bank ["{dir}"] => [
        "  audit: the accounts hold 400.00, as they did",
        "== the same run, simulated: seeds 0..1000, faults drawn from each seed",
        "  error:     money was not conserved: the accounts hold ",
        "  again:     the seed fails again with the same trace",
        "  reproduce: WSCHED_SIM_SEED=",
        "(open in Perfetto)",
        ": the same run, step for step",
        "  its faults, from the whole trace:",
        "== again without lost answers: seeds 0..1000, the same plans less their lost answers",
        "  1000 seeds passed (",
        "  1000 seeds passed without lost answers (",
    ];
    pingpong ["20", "100"] => ["20 pairs x 100 round trips on "];
    timers ["50", "20"] => ["1000 timers in 50 processes", "all fired ", "for reference: timers round up to 1 ms ticks"];
    top ["1", "steps"] => ["the load: 4 ping-pong pairs", "== second 1: workers busy [", "by steps"];
    timeline ["{dir}"] => ["64 leaves; ", "timeline.json and "];
    // Built and run only with the `nats` feature (`required-features` in
    // `examples/Cargo.toml`), and then needs `nats-server` on the PATH.
    #[cfg(feature = "nats")]
    cluster [] => [
        "launcher: nats-server with JetStream at nats://127.0.0.1:",
        "node1: started a worker on each with Cluster::spawn_on: <1@node2> and <1@node3>",
        "coordinator: handed out items 1..=40 round-robin to <1@node2> and <1@node3>; monitoring them",
        "coordinator: first result from <1@node3>: 2² = 4",
        "launcher: kill -9 node3 (pid ",
        "coordinator: <1@node3> is down: no connection: its node is down or unreachable",
        " items it held were unfinished; handing them to <1@node2>",
        "coordinator: all 40 items squared, each once: ",
        "node1: the sum of the squares of 1..=40 is 22140, as n(n+1)(2n+1)/6 says",
        "launcher: node1 finished and node2 shut down (exit status: 0); stopping the server",
    ];
}

/// The examples that need a feature of this package, and it: they are built only
/// with it (`required-features`).
const GATED: &[(&str, bool)] = &[("cluster", cfg!(feature = "nats"))];

/// Whether this build of the package has example `name` (see [`GATED`]).
fn built_here(name: &str) -> bool {
    GATED
        .iter()
        .all(|&(gated, enabled)| gated != name || enabled)
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

fn example_names() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(workspace().join("examples/examples"))
        .expect("examples/examples")
        .map(|entry| entry.expect("an example").path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_example_is_checked() {
    let names = example_names();
    let mut checked: Vec<String> = CHECKED.iter().map(|s| s.to_string()).collect();
    checked.sort();
    assert_eq!(
        names, checked,
        "every program in examples/examples/ needs an entry in examples/tests/examples.rs \
         (and every entry a program)"
    );
}

/// The README shows `examples/examples/quickstart.rs` whole: the fenced block right
/// after the `<!-- quickstart.rs -->` marker is the file, byte for byte.
#[test]
fn the_readme_shows_the_quickstart_verbatim() {
    let readme = fs::read_to_string(workspace().join("README.md")).expect("README.md");
    let file = fs::read_to_string(workspace().join("examples/examples/quickstart.rs"))
        .expect("quickstart.rs");
    let marker = "<!-- examples/examples/quickstart.rs -->\n```rust\n";
    let start = readme
        .find(marker)
        .expect("README.md has the quick start under the marker")
        + marker.len();
    let end = start
        + readme[start..]
            .find("\n```\n")
            .expect("the block is closed")
        + 1;
    let shown = &readme[start..end];
    assert!(
        shown == file,
        "README.md's quick start differs from examples/examples/quickstart.rs; copy the \
         file into the README\n--- README:\n{shown}\n--- file:\n{file}"
    );
}

/// `<target>/<profile>/examples`, built and up to date.
fn binaries() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // This test is `<target>/<profile>/deps/examples-<hash>`.
        let exe = env::current_exe().expect("the test's path");
        let profile_dir = exe.ancestors().nth(2).expect("<target>/<profile>");
        let dir = profile_dir.join("examples");
        if !up_to_date(&dir) {
            build(profile_dir);
        }
        dir
    })
}

fn binary(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}{}", env::consts::EXE_SUFFIX))
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of the files under `dir`.
fn newest(dir: &Path) -> SystemTime {
    let mut latest = SystemTime::UNIX_EPOCH;
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest(&path)
        } else {
            modified(&path).unwrap_or(latest)
        };
        latest = latest.max(time);
    }
    latest
}

/// Every program is built, and later than every source it is built from.
fn up_to_date(dir: &Path) -> bool {
    let root = workspace();
    let sources = ["wsched/src", "wsched-macros/src", "examples/examples"]
        .iter()
        .map(|d| newest(&root.join(d)))
        .max()
        .expect("sources");
    example_names()
        .iter()
        .filter(|name| built_here(name))
        .all(|name| modified(&binary(dir, name)).is_some_and(|built| built >= sources))
}

/// Builds the examples into `profile_dir/examples`, as `cargo test` would have.
fn build(profile_dir: &Path) {
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => panic!("no profile in {}", profile_dir.display()),
    };
    let target_dir = profile_dir.parent().expect("the target directory");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "-p", "wsched-examples", "--examples", "--profile"])
        .arg(profile)
        .args(cfg!(feature = "nats").then_some("--features=nats"))
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build --examples failed: {status}");
}

/// Runs example `name` with `args` and checks that it exits 0, within [`LIMIT`],
/// and that its output contains each of `expect`.
fn run(name: &str, args: &[&str], expect: &[&str]) {
    let scratch = env::temp_dir().join(format!("wsched-example-{name}-{}", std::process::id()));
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{dir}", &scratch.to_string_lossy()))
        .collect();
    let mut child = Command::new(binary(binaries(), name))
        .args(&args)
        .current_dir(workspace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run example {name}: {e}"));
    // Read both pipes while the program runs, so a full pipe cannot stall it.
    let reader = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).map(|_| text)
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("stdout")));
    let stderr = reader(Box::new(child.stderr.take().expect("stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the example's status") {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("example {name} still ran after {LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    let stdout = stdout.join().expect("the reader").expect("stdout is text");
    let stderr = stderr.join().expect("the reader").expect("stderr is text");
    let _ = fs::remove_dir_all(&scratch);
    assert!(
        status.success(),
        "example {name} {args:?} failed: {status}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}"
    );
    for line in expect {
        assert!(
            stdout.contains(line),
            "example {name} {args:?} did not print {line:?}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}"
        );
    }
}
