use std::time::Duration;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    fn pause(&mut self) {
        let _ = yield_cmd!(Sleep(Duration::from_millis(1)));
    }

    #[entry]
    fn run(&mut self) {
        self.pause();
    }
}

fn main() {}
