use wsched::prelude::*;

struct Clash;

#[process]
impl Clash {
    /// Already a constant of the impl.
    const RUN: u32 = 1;

    #[entry]
    fn run(&mut self) {}

    // Two names that are the same in capitals.
    #[entry(name = "go_on")]
    fn a(&mut self) {}

    #[entry(name = "goOn")]
    fn b(&mut self) {}
}

fn main() {}
