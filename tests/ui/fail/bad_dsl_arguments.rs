use std::time::Duration;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self) {
        let _ = yield_cmd!();
        let _ = recv!(u32, deadline = Duration::ZERO);
        let _ = yield_all!(vec![Sleep(Duration::ZERO)], vec![]);
        let pid = this::pid();
        let _: Result<u32, CallError<u32>> = call!(pid);
        let _: Result<u32, CallError<u32>> = call!(pid, 1_u32, deadline = Duration::ZERO);
        let _: Result<u32, CallError<u32>> = call!();
    }
}

fn main() {}
