//! Runnable programs: `cargo run -p wsched-examples --example NAME`.
