use wsched::prelude::*;

struct P;

#[process]
impl P {
    fn helper(&mut self) {}
}

fn main() {}
