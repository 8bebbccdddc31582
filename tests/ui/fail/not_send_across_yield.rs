use std::rc::Rc;
use std::time::Duration;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self) -> usize {
        let shared = Rc::new(5);
        let _ = yield_cmd!(Sleep(Duration::from_millis(1)));
        *shared
    }
}

fn main() {}
