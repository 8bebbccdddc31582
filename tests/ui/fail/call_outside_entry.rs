use std::time::Duration;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self, pid: Pid) {
        let ask = || -> Result<u32, CallError<u32>> { call!(pid, 1_u32, timeout = Duration::ZERO) };
        let _ = ask();
    }

    fn plain(&mut self, pid: Pid) -> Result<u32, CallError<u32>> {
        call!(pid, 2_u32)
    }
}

fn outside(pid: Pid) {
    let _: Result<u32, CallError<u32>> = call!(pid, 3_u32);
}

fn main() {}
