//! `--compare-commit REV`: this working tree's wsched against another commit's, on
//! the same benchmark code, interleaved in one run — an optimisation's before and
//! after in one command.
//!
//! The other commit is checked out (detached) in a git worktree at
//! `target/compare/src`, reused from run to run; this tree's `bench/` is copied over
//! its `bench/` (the workloads must be the same code on both sides: only wsched and
//! the rest of the workspace differ), the root `Cargo.toml` gets the
//! `[workspace.dependencies]` entries the suite needs and lacks there, and
//! `Cargo.lock` is this tree's (the same peers' versions). It is built into its own
//! target directory, `target/compare/target`, so later comparisons build
//! incrementally. Files are only written when their content changes, so an
//! unchanged worktree does not rebuild.
//!
//! Each repetition runs the two suite binaries as child processes,
//! `--single NAME --variant I`: one untimed run of that wsched form, then one timed,
//! printing its wall and CPU time. The harness alternates them (this, that; that,
//! this; …) and reports the median of the per-repetition ratios this ÷ that. Only
//! the generic workloads (those with variants in `workloads.rs`) can be compared.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{self, fmt_secs, Measured, RunResult, Variant, Workload};
use crate::workloads::{self, Peers, Sizes};

/// What `--compare-commit` was asked for.
pub struct Request<'a> {
    pub rev: &'a str,
    pub only: Option<&'a [String]>,
    pub workers: usize,
    pub reps: usize,
    pub quick: bool,
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("starting git: {e}"))?;
    if !output.status.success() {
        return Err(format!("git {} failed ({})", args.join(" "), output.status));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Writes `contents` to `path` unless it already holds exactly that (an unchanged
/// file keeps its modification time, so cargo does not rebuild).
fn write_if_changed(path: &Path, contents: &[u8]) -> io::Result<bool> {
    if fs::read(path).ok().as_deref() == Some(contents) {
        return Ok(false);
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, contents)?;
    Ok(true)
}

/// Makes the tree under `to` hold exactly the files under `from`.
fn sync_dir(from: &Path, to: &Path) -> io::Result<usize> {
    let mut changed = 0;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            changed += sync_dir(&entry.path(), &target)?;
        } else if write_if_changed(&target, &fs::read(entry.path())?)? {
            changed += 1;
        }
    }
    for entry in fs::read_dir(to)? {
        let entry = entry?;
        if !from.join(entry.file_name()).exists() {
            if entry.file_type()?.is_dir() {
                fs::remove_dir_all(entry.path())?;
            } else {
                fs::remove_file(entry.path())?;
            }
            changed += 1;
        }
    }
    Ok(changed)
}

/// The `key = …` lines of a manifest's `[workspace.dependencies]` (one line each, as
/// this workspace writes them), and where that section ends.
fn workspace_dependencies(manifest: &str) -> Option<(Vec<(&str, &str)>, usize)> {
    let mut offset = 0;
    let mut inside = false;
    let mut entries = Vec::new();
    let mut end = None;
    for line in manifest.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            if inside {
                end = Some(offset);
                break;
            }
            inside = trimmed == "[workspace.dependencies]";
        } else if inside && !trimmed.is_empty() && !trimmed.starts_with('#') {
            if let Some((key, _)) = trimmed.split_once('=') {
                entries.push((key.trim(), trimmed));
            }
        }
        offset += line.len();
    }
    if !inside && end.is_none() {
        return None;
    }
    Some((entries, end.unwrap_or(manifest.len())))
}

/// `theirs` with the `[workspace.dependencies]` entries of `ours` that it lacks.
fn merge_manifest(ours: &str, theirs: &str) -> Result<String, String> {
    let (ours, _) = workspace_dependencies(ours).ok_or("no [workspace.dependencies] here")?;
    let (present, end) = workspace_dependencies(theirs)
        .ok_or("the other commit's Cargo.toml has no [workspace.dependencies]")?;
    let missing: Vec<&str> = ours
        .iter()
        .filter(|(key, _)| !present.iter().any(|(k, _)| k == key))
        .map(|(_, line)| *line)
        .collect();
    if missing.is_empty() {
        return Ok(theirs.to_string());
    }
    let mut merged = theirs[..end].trim_end().to_string();
    merged.push_str("\n# Added by the suite's --compare-commit (the suite's own dependencies).\n");
    for line in missing {
        merged.push_str(line);
        merged.push('\n');
    }
    merged.push('\n');
    merged.push_str(&theirs[end..]);
    Ok(merged)
}

/// Checks out `sha` at `target/compare/src`, lays this tree's suite over it, builds
/// it; returns the suite binary.
fn build_other(repo: &Path, compare: &Path, sha: &str) -> Result<PathBuf, String> {
    let src = compare.join("src");
    if src.join(".git").exists() {
        if git(&src, &["rev-parse", "HEAD"])? != sha {
            git(&src, &["checkout", "--quiet", "--force", "--detach", sha])?;
        }
    } else {
        fs::create_dir_all(compare).map_err(|e| e.to_string())?;
        // A worktree whose directory was deleted by hand is still registered.
        git(repo, &["worktree", "prune"])?;
        let path = src.to_str().ok_or("a non-UTF-8 path")?;
        git(
            repo,
            &[
                "worktree", "add", "--quiet", "--force", "--detach", path, sha,
            ],
        )?;
    }
    let io = |e: io::Error| e.to_string();
    let changed = sync_dir(&repo.join("bench"), &src.join("bench")).map_err(io)?;
    let ours = fs::read_to_string(repo.join("Cargo.toml")).map_err(io)?;
    let theirs = fs::read_to_string(src.join("Cargo.toml")).map_err(io)?;
    write_if_changed(
        &src.join("Cargo.toml"),
        merge_manifest(&ours, &theirs)?.as_bytes(),
    )
    .map_err(io)?;
    write_if_changed(
        &src.join("Cargo.lock"),
        &fs::read(repo.join("Cargo.lock")).map_err(io)?,
    )
    .map_err(io)?;
    eprintln!(
        "building {} at {} ({changed} suite files updated) into {}",
        &sha[..12],
        src.display(),
        compare.join("target").display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", compare.join("target"))
        .args([
            "bench",
            "-p",
            "wsched-bench",
            "--bench",
            "suite",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("starting cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building the suite at {sha} failed ({}): if this tree's suite does not \
             compile against that commit's wsched, compare from a later commit",
            output.status
        ));
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| {
            l.contains("\"reason\":\"compiler-artifact\"") && l.contains("\"name\":\"suite\"")
        })
        .find_map(|l| {
            let rest = l.split_once("\"executable\":\"")?.1;
            Some(PathBuf::from(rest.split_once('"')?.0))
        })
        .ok_or_else(|| "cargo named no suite executable".to_string())
}

/// One repetition of one wsched form in `exe` (a child process).
fn run_single(exe: &Path, name: &str, variant: usize, workers: usize, quick: bool) -> RunResult {
    let mut command = Command::new(exe);
    command.args(["--single", name, "--variant"]);
    command
        .arg(variant.to_string())
        .arg("--workers")
        .arg(workers.to_string());
    if quick {
        command.arg("--quick");
    }
    let output = command
        .output()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            exe.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("single "))
        .ok_or_else(|| format!("{} printed no result", exe.display()))?;
    let field = |name: &str| -> Result<Duration, String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse::<f64>().ok())
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("no {name} in {line:?}"))
    };
    Ok(Measured {
        wall: field("wall_secs")?,
        cpu: field("cpu_secs")?,
    })
}

/// `--single NAME --variant I`: one untimed run of the wsched form, then one timed;
/// prints `single wall_secs=… cpu_secs=…`.
pub fn single(name: &str, variant: usize, workers: usize, sizes: &Sizes) -> Result<(), String> {
    let name = workloads::NAMES
        .iter()
        .find(|n| **n == name)
        .ok_or_else(|| format!("unknown workload `{name}`"))?;
    let workload = workloads::workload(name, workers, sizes, &Peers::none())
        .ok_or_else(|| format!("`{name}` is not a generic workload"))?;
    let form = workload
        .variants
        .get(variant)
        .filter(|v| !v.peer)
        .ok_or_else(|| format!("`{name}` has no wsched form {variant}"))?;
    (form.run)()?;
    let m = (form.run)()?;
    println!(
        "single wall_secs={:.9} cpu_secs={:.9}",
        m.wall.as_secs_f64(),
        m.cpu.as_secs_f64()
    );
    Ok(())
}

/// The whole comparison; prints a Markdown table on stdout. `Err` on a build or run
/// failure.
pub fn compare(request: &Request) -> Result<(), String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no repository root")?;
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .ok_or("no target directory")?;
    let compare = target.join("compare");
    let sha = git(
        repo,
        &[
            "rev-parse",
            "--verify",
            &format!("{}^{{commit}}", request.rev),
        ],
    )?;
    let head = git(repo, &["rev-parse", "--short=12", "HEAD"])?;
    let dirty = !git(repo, &["status", "--porcelain", "--untracked-files=no"])?.is_empty();
    let this_label: &'static str = Box::leak(
        format!("this ({head}{})", if dirty { " + changes" } else { "" }).into_boxed_str(),
    );
    let that_label: &'static str =
        Box::leak(format!("that ({} = {})", request.rev, &sha[..12]).into_boxed_str());
    let this = std::env::current_exe().map_err(|e| e.to_string())?;
    let that = build_other(repo, &compare, &sha)?;

    let sizes = if request.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    let names: Vec<&'static str> = workloads::NAMES
        .iter()
        .copied()
        .filter(|n| request.only.is_none_or(|only| only.iter().any(|o| o == n)))
        .collect();
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for name in names {
        let Some(catalogue) = workloads::workload(name, request.workers, &sizes, &Peers::none())
        else {
            if request.only.is_some() {
                return Err(format!(
                    "`{name}` is not a generic workload: --compare-commit cannot run it"
                ));
            }
            continue;
        };
        for (index, form) in catalogue.variants.iter().enumerate() {
            if form.peer {
                continue;
            }
            let (w, quick) = (request.workers, request.quick);
            let (this, that) = (this.clone(), that.clone());
            let workload = Workload {
                name,
                variants: vec![
                    Variant::new(that_label, move || run_single(&that, name, index, w, quick)),
                    Variant::new(this_label, move || run_single(&this, name, index, w, quick)),
                ],
                comparisons: Vec::new(),
                skipped: Vec::new(),
            };
            let outcome = harness::run(workload, request.reps);
            if let Some(error) = &outcome.error {
                failures.push(format!("{name}, {}: {error}", form.label));
                continue;
            }
            let r = outcome.row(1, 0);
            lines.push(format!(
                "| {name} | {} | {} | {} | **{:.2}** | {:.2}–{:.2} | {:.2} |",
                form.label,
                fmt_secs(r.median),
                fmt_secs(r.base_median),
                r.ratio,
                r.ratio_min,
                r.ratio_max,
                r.cpu_ratio,
            ));
        }
    }
    println!(
        "\n## Compare ({} workers, {} repetitions, {} sizes)\n",
        request.workers,
        request.reps,
        if request.quick { "quick" } else { "full" }
    );
    println!("{this_label} ÷ {that_label}: below 1, this tree is faster.\n");
    println!(
        "| workload | wsched form | this median | that median | this ÷ that (median of per-rep) | ratio min–max | CPU ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    for line in &lines {
        println!("{line}");
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} FAILED:\n- {}",
            failures.len(),
            failures.join("\n- ")
        ))
    }
}
