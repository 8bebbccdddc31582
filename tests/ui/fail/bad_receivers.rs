use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn by_ref(&self) {}

    #[entry]
    fn by_value(self) {}

    #[entry]
    fn no_receiver() {}
}

fn main() {}
