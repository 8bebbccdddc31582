use wsched::prelude::*;

struct P;
struct NotAnError;

#[process]
impl P {
    #[entry]
    fn run(&mut self) -> Result<u32, NotAnError> {
        Err(NotAnError)
    }
}

fn main() {}
