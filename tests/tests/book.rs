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
