//! Importing the DSL macros by name leaves no unused import behind, and the generated
//! code triggers no warning.
#![deny(warnings)]

use std::time::Duration;
use wsched::command::Sleep;
use wsched::testing::TestProcess;
use wsched::{process, recv, yield_all, yield_cmd, BoxError, Tag};

struct Pinger {
    pings: u32,
}

#[process]
impl Pinger {
    /// Docs on entries are kept.
    #[entry]
    pub fn run(&mut self, rounds: u32) -> Result<u32, BoxError> {
        for _ in 0..rounds {
            let _ = yield_cmd!(Sleep(Duration::from_millis(1)))?;
            self.pings += recv!(u32)?;
        }
        let all = yield_all!((0..2).map(|_| Sleep(Duration::ZERO)));
        Ok(self.pings + all.len() as u32)
    }
}

fn main() {
    let mut t = TestProcess::start(Pinger { pings: 0 }, "run", (1_u32,)).unwrap();
    t.complete(Tag(1), ());
    t.send(5_u32);
    t.complete(Tag(2), ());
    t.complete(Tag(3), ());
    assert_eq!(t.result::<u32>(), 7);
}
