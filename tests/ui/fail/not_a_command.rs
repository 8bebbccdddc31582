use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self) {
        let _ = yield_cmd!(42_u32);
    }
}

fn main() {}
