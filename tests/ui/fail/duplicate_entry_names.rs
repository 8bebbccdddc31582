use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn start(&mut self) {}

    #[entry(name = "start")]
    fn begin(&mut self) {}
}

fn main() {}
