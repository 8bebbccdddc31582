//! The book's reference chapter quotes the macro's compile errors: every message it
//! quotes is one of the UI tests' messages, and every UI test's message is quoted.
//! (The chapter's listings themselves are `compile_fail` doc tests of `wsched`.)

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The first line of each diagnostic: `error: ...` or `error[E0277]: ...`.
fn is_message(line: &str) -> bool {
    line.starts_with("error:") || line.starts_with("error[")
}

#[test]
fn the_reference_quotes_exactly_the_ui_tests_messages() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chapter = fs::read_to_string(root.join("../book/src/reference.md")).expect("the chapter");
    let quoted: BTreeSet<&str> = chapter.lines().filter(|l| is_message(l)).collect();

    let mut expected = BTreeSet::new();
    for entry in fs::read_dir(root.join("ui/fail")).expect("the UI tests") {
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
