//! A `recv!` arm whose body leaves the entry (`return`, `?`) is no warning: the
//! `Ok` the macro wraps the body in is unreachable by the body's choice. And `recv`
//! imported by name for the arms form alone is used.
#![deny(warnings)]

use std::time::Duration;
use wsched::testing::TestProcess;
use wsched::{process, recv, BoxError};

struct Gate;

#[process]
impl Gate {
    #[entry]
    fn run(&mut self) -> Result<u32, BoxError> {
        let n = recv! {
            n: u32 if n > 10 => return Ok(n),
            n: u32 => n,
            text: String => return Err(text.into()),
            after(Duration::from_secs(1)) => return Ok(0),
        }?;
        Ok(n + 1)
    }
}

fn main() {
    let mut t = TestProcess::start(Gate, "run", ()).unwrap();
    t.send(42_u32);
    assert_eq!(t.result::<u32>(), 42);
}
