use std::time::Duration;

use wsched::command::Sleep;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self) {
        let _ = yield_cmd!(42_u32);
    }

    // One of several commands yielded together.
    #[entry]
    fn several(&mut self) {
        let _ = yield_cmd!(Sleep(Duration::from_millis(1)), "later");
    }

    #[entry]
    fn all(&mut self) {
        let _ = yield_all!(vec![1_u8, 2]);
    }
}

fn main() {}
