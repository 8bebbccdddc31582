use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self, name: &str, items: impl Iterator<Item = u32>, x: _) {}
}

fn main() {}
