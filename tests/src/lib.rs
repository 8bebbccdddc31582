//! End-to-end tests of wsched live in `tests/`; this crate has no library code.
