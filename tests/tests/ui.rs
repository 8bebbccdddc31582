//! Compile-fail and compile-pass tests of `#[process]`. Regenerate the `.stderr` files
//! with `TRYBUILD=overwrite cargo test -p wsched-tests --test ui`, then review them.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/fail/*.rs");
    t.pass("ui/pass/*.rs");
}
