//! Checks of the book (`book/`) that `mdbook build` does not make: it logs a broken
//! include and carries on, renders an unknown anchor as nothing, and does not check
//! links between chapters. (The chapters' Rust listings are doc tests of `wsched`.)

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chapters() -> Vec<(PathBuf, String)> {
    let dir = repo().join("book/src");
    let mut chapters: Vec<_> = fs::read_dir(&dir)
        .expect("book/src")
        .map(|entry| entry.expect("a chapter").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| {
            let text = fs::read_to_string(&path).expect("a chapter's text");
            (path, text)
        })
        .collect();
    chapters.sort();
    chapters
}

/// The first line of each diagnostic: `error: ...` or `error[E0277]: ...`.
fn is_message(line: &str) -> bool {
    line.starts_with("error:") || line.starts_with("error[")
}

#[test]
fn the_reference_quotes_exactly_the_ui_tests_messages() {
    let chapter = fs::read_to_string(repo().join("book/src/reference.md")).expect("the chapter");
    let quoted: BTreeSet<&str> = chapter.lines().filter(|l| is_message(l)).collect();

    let mut expected = BTreeSet::new();
    for entry in fs::read_dir(repo().join("tests/ui/fail")).expect("the UI tests") {
        let path = entry.expect("a UI test").path();
        if path.extension().is_some_and(|e| e == "stderr") {
            let stderr = fs::read_to_string(&path).expect("a .stderr file");
            expected.extend(stderr.lines().filter(|l| is_message(l)).map(str::to_owned));
        }
    }
    let expected: BTreeSet<&str> = expected.iter().map(String::as_str).collect();

    let stale: Vec<_> = quoted.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&quoted).collect();
    assert!(
        stale.is_empty() && missing.is_empty(),
        "book/src/reference.md is out of date with tests/ui/fail/*.stderr\n\
         quoted but not produced: {stale:#?}\nproduced but not quoted: {missing:#?}"
    );
}

/// `{{#include path}}` and `{{#include path:anchor}}`: the file exists, and the
/// anchor is opened and closed in it.
#[test]
fn every_include_has_its_file_and_anchor() {
    let mut includes = 0;
    for (path, text) in chapters() {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("{{#include ") {
            let after = &rest[start + "{{#include ".len()..];
            let end = after.find("}}").expect("an include is closed");
            let target = after[..end].trim();
            rest = &after[end..];
            includes += 1;
            let (file, anchor) = match target.rsplit_once(':') {
                Some((file, anchor)) if !anchor.chars().all(|c| c.is_ascii_digit()) => {
                    (file, Some(anchor))
                }
                _ => (target, None),
            };
            let included = path.parent().expect("book/src").join(file);
            let source = fs::read_to_string(&included).unwrap_or_else(|e| {
                panic!(
                    "{}: cannot read {}: {e}",
                    path.display(),
                    included.display()
                )
            });
            if let Some(anchor) = anchor {
                let opens = source
                    .lines()
                    .any(|l| l.contains(&format!("ANCHOR: {anchor}")));
                let closes = source
                    .lines()
                    .any(|l| l.contains(&format!("ANCHOR_END: {anchor}")));
                assert!(
                    opens && closes,
                    "{}: {} has no anchor `{anchor}` (ANCHOR: / ANCHOR_END: comments)",
                    path.display(),
                    included.display()
                );
            }
        }
    }
    assert!(includes > 0, "the book includes the examples");
}

/// mdBook's id for a heading: lower case, spaces to dashes, other punctuation
/// dropped.
fn heading_id(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn headings(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut ids = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            ids.insert(heading_id(line.trim_start_matches('#')));
        }
    }
    ids
}

/// Relative links `](chapter.md)` and `](chapter.md#heading)` between chapters, and
/// from the README into the book, reach a chapter and one of its headings; every
/// chapter is in SUMMARY.md.
#[test]
fn links_between_chapters_resolve() {
    let chapters = chapters();
    let ids: std::collections::BTreeMap<String, BTreeSet<String>> = chapters
        .iter()
        .map(|(path, text)| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, headings(text))
        })
        .collect();
    let summary = fs::read_to_string(repo().join("book/src/SUMMARY.md")).expect("SUMMARY.md");
    for name in ids.keys().filter(|n| *n != "SUMMARY.md") {
        assert!(
            summary.contains(&format!("]({name})")),
            "{name} is not in SUMMARY.md"
        );
    }
    let readme = fs::read_to_string(repo().join("README.md")).expect("README.md");
    let sources = chapters
        .iter()
        .map(|(path, text)| (path.display().to_string(), text.as_str(), ""))
        .chain([("README.md".to_string(), readme.as_str(), "book/src/")]);
    let mut links = 0;
    for (source, text, prefix) in sources {
        for piece in text.split("](").skip(1) {
            let target = &piece[..piece.find(')').unwrap_or(piece.len())];
            let Some(local) = target.strip_prefix(prefix) else {
                continue;
            };
            if local.contains("://") || local.contains('/') || !local.contains(".md") {
                continue; // not a link to a chapter
            }
            links += 1;
            let (file, fragment) = local.split_once('#').unwrap_or((local, ""));
            let Some(heading_ids) = ids.get(file) else {
                panic!("{source}: link to a missing chapter: {target}");
            };
            assert!(
                fragment.is_empty() || heading_ids.contains(fragment),
                "{source}: {file} has no heading #{fragment}"
            );
        }
    }
    assert!(
        links > 20,
        "the chapters link to each other ({links} links found)"
    );
}

/// The measured figures a chapter's prose quotes: a time with its unit (`24 ns`,
/// `82.0 µs`) or a range of ratios (`0.91–0.95`). Code blocks are left out: their
/// durations are arguments, not measurements.
fn figures(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let number_at = |mut i: usize| -> usize {
            // The end of the number starting at `i` (digits, with `.` or `,` inside).
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (matches!(chars[i], '.' | ',')
                        && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            i
        };
        let mut i = 0;
        while i < chars.len() {
            let starts = chars[i].is_ascii_digit()
                && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '.'));
            if !starts {
                i += 1;
                continue;
            }
            let end = number_at(i);
            let rest: String = chars[end..].iter().collect();
            let unit = [" ns", " µs", " ms", "ns", "µs", "ms"]
                .into_iter()
                .find(|u| {
                    rest.starts_with(u)
                        && !rest[u.len()..].starts_with(|c: char| c.is_alphanumeric())
                });
            if let Some(unit) = unit {
                found.push(chars[i..end].iter().collect::<String>() + unit);
            } else if rest.starts_with('–') && chars[i..end].contains(&'.') {
                let range_end = number_at(end + 1);
                if range_end > end + 1 {
                    found.push(chars[i..range_end].iter().collect());
                }
            }
            i = end.max(i + 1);
        }
    }
    found
}

/// Every measured figure the book quotes is one `BENCHMARKS.md` reports, where the
/// measurements live: a figure changed there and not in the book fails here.
#[test]
fn every_figure_the_book_quotes_is_in_benchmarks_md() {
    let benchmarks = fs::read_to_string(repo().join("BENCHMARKS.md")).expect("BENCHMARKS.md");
    let mut quoted = 0;
    let mut stale = Vec::new();
    for (path, text) in chapters() {
        for figure in figures(&text) {
            quoted += 1;
            if !benchmarks.contains(&figure) {
                stale.push(format!("{}: {figure}", path.display()));
            }
        }
    }
    assert!(quoted > 0, "the figure finder found nothing: is it broken?");
    assert!(
        stale.is_empty(),
        "the book quotes figures BENCHMARKS.md does not report (take them from its \
         latest run, or include its results section): {stale:#?}"
    );
}

#[test]
fn the_figure_finder_finds_times_and_ranges_but_not_code() {
    let text = "It costs about 24 ns, 82.0 µs of CPU, and 0.91–0.95 of tokio's time; \
                a 10ms read, 1,000 steps, v0.1–2.\n```rust\nlet x = 5 ns;\n```\n";
    assert_eq!(figures(text), ["24 ns", "82.0 µs", "0.91–0.95", "10ms"]);
}
