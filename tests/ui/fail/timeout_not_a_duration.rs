use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self, server: Pid) -> Result<u32, BoxError> {
        let first = recv!(u32, timeout = 5)?;
        let doubled: u32 = call!(server, first, timeout = 5_000)?;
        Ok(doubled)
    }
}

fn main() {}
