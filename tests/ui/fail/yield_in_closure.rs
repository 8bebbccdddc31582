use std::time::Duration;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self, delays: Vec<u64>) {
        delays.iter().for_each(|ms| {
            let _ = yield_cmd!(Sleep(Duration::from_millis(*ms)));
        });
    }
}

fn main() {}
