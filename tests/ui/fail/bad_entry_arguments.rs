use wsched::prelude::*;

struct P;

#[process(workers = 2)]
impl P {
    #[entry(nmae = "typo")]
    fn a(&mut self) {}

    #[entry = "b"]
    fn b(&mut self) {}

    #[entry(name = "")]
    fn c(&mut self) {}

    #[entry(name = 3)]
    fn d(&mut self) {}
}

fn main() {}
