use std::time::Duration;
use wsched::prelude::*;

fn not_an_entry() {
    let _ = yield_cmd!(Sleep(Duration::from_millis(1)));
}

fn main() {
    not_an_entry();
}
