use std::time::Duration;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self) {
        fn inner() {
            let _ = yield_cmd!(Sleep(Duration::from_millis(1)));
        }
        inner();
    }
}

fn main() {}
