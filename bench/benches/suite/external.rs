//! The peers outside Rust: Erlang (`bench/erlang/*.erl`, run by `escript`) and Go
//! (`bench/go/*.go`, built once per suite run with `go build`), each a child
//! process per repetition, in the same interleaved run as the Rust sides.
//!
//! A child gets the workload's sizes on its command line and the worker count in
//! its runtime's own setting (`ERL_FLAGS="+S W:W"`, `GOMAXPROCS=W`). It runs the
//! workload once untimed (a fresh VM's heaps grow to size there, as the in-process
//! sides' allocator is warm after the harness's warm-up run), then once timed around
//! the work alone, so VM start-up and compilation are left out, and prints
//!
//! ```text
//! peer-result warmup=<u64> result=<u64> wall_secs=<f64> cpu_secs=<f64>
//! ```
//!
//! `cpu_secs` is the process's CPU time over the timed run (`getrusage` in Go;
//! `statistics(runtime)` in Erlang, to the millisecond). Both results are checked
//! against the expected value. A missing tool skips its rows with a `SKIPPED` line
//! saying how to install it; a child that fails or prints a wrong result fails the
//! workload like any other peer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use crate::harness::{check, Measured, RunResult, Variant};

/// `bench/`, where the scripts are.
fn bench_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `PATH`'s first executable `name`, if any.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Which of the two toolchains are here; found once per suite run.
pub struct Tools {
    escript: Result<PathBuf, String>,
    go: Result<PathBuf, String>,
}

impl Tools {
    pub fn find() -> Self {
        let missing = |tool: &str, package: &str| {
            format!("`{tool}` not found; install it with `apt-get install {package}` (or bench/tools/install-peers.sh)")
        };
        Self {
            escript: which("escript").ok_or_else(|| missing("escript", "erlang-base")),
            go: which("go").ok_or_else(|| missing("go", "golang-go")),
        }
    }

    /// What `--no-peers` leaves: nothing outside Rust.
    pub fn none() -> Self {
        let off = || Err("--no-peers".to_string());
        Self {
            escript: off(),
            go: off(),
        }
    }

    /// Prints (stderr) which tools are missing, for the workloads that use them.
    pub fn announce(&self) {
        for (rows, tool) in [("Erlang", &self.escript), ("Go", &self.go)] {
            if let Err(why) = tool {
                if why != "--no-peers" {
                    eprintln!("SKIPPED: the {rows} rows: {why}");
                }
            }
        }
    }

    /// The Erlang variant running `bench/erlang/{script}.erl args…`, or why not.
    pub fn erlang(
        &self,
        script: &'static str,
        args: Vec<String>,
        workers: usize,
        expected: u64,
    ) -> Result<Variant, String> {
        let escript = self.escript.clone()?;
        let path = bench_dir().join("erlang").join(format!("{script}.erl"));
        Ok(Variant::peer("Erlang", move || {
            let mut command = Command::new(&escript);
            command
                .arg(&path)
                .args(&args)
                .env("ERL_FLAGS", format!("+S {workers}:{workers}"));
            run_child(command, expected)
        }))
    }

    /// The Go variant running `bench/go/{program}.go` (built on first use into the
    /// target directory) with `args…`, or why not.
    pub fn go(
        &self,
        program: &'static str,
        args: Vec<String>,
        workers: usize,
        expected: u64,
    ) -> Result<Variant, String> {
        let go = self.go.clone()?;
        Ok(Variant::peer("Go", move || {
            let binary = go_binary(&go, program)?;
            let mut command = Command::new(binary);
            command
                .arg("-suite")
                .args(&args)
                .env("GOMAXPROCS", workers.to_string());
            run_child(command, expected)
        }))
    }
}

/// `go build`s `bench/go/{program}.go` into the target directory, once per suite
/// run (Go's build cache keeps later runs quick).
fn go_binary(go: &Path, program: &'static str) -> Result<PathBuf, String> {
    /// The programs built so far in this run, and how that went.
    type Built = Vec<(&'static str, Result<PathBuf, String>)>;
    static BUILT: Mutex<Built> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().map_err(|e| e.to_string())?;
    if let Some((_, result)) = built.iter().find(|(p, _)| *p == program) {
        return result.clone();
    }
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("peers-go");
    let output = out_dir.join(program);
    let source = bench_dir().join("go").join(format!("{program}.go"));
    let mut command = Command::new(go);
    command
        .arg("build")
        .arg("-o")
        .arg(&output)
        .arg(&source)
        // Only this machine's toolchain, never a download.
        .env("GOTOOLCHAIN", "local");
    if std::env::var_os("GOCACHE").is_none() && std::env::var_os("HOME").is_none() {
        command.env("GOCACHE", out_dir.join("cache"));
    }
    let result = command
        .output()
        .map_err(|e| format!("starting `go build`: {e}"))
        .and_then(|o| {
            if o.status.success() {
                Ok(output.clone())
            } else {
                Err(format!(
                    "`go build {}` failed: {}",
                    source.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            }
        });
    built.push((program, result.clone()));
    result
}

/// Runs one child and checks and parses its `peer-result` line.
fn run_child(mut command: Command, expected: u64) -> RunResult {
    let output = command
        .output()
        .map_err(|e| format!("starting {command:?}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{command:?} failed ({}): {} {}",
            output.status,
            stdout.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("peer-result "))
        .ok_or_else(|| format!("{command:?} printed no peer-result line: {}", stdout.trim()))?;
    let field = |name: &str| -> Result<&str, String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .ok_or_else(|| format!("no {name} in {line:?}"))
    };
    let number = |name: &str| -> Result<f64, String> {
        field(name)?
            .parse::<f64>()
            .map_err(|e| format!("{name} in {line:?}: {e}"))
    };
    let integer = |name: &str| -> Result<u64, String> {
        field(name)?
            .parse::<u64>()
            .map_err(|e| format!("{name} in {line:?}: {e}"))
    };
    check("warm-up result", integer("warmup")?, expected)?;
    check("result", integer("result")?, expected)?;
    Ok(Measured {
        wall: Duration::from_secs_f64(number("wall_secs")?),
        cpu: Duration::from_secs_f64(number("cpu_secs")?),
    })
}
