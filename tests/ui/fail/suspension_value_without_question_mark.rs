use std::time::Duration;

use wsched::prelude::*;

struct ReadCount;

impl Command for ReadCount {
    type Output = u64;
}

struct GetCount;

struct P;

#[process]
impl P {
    #[entry]
    fn read(&mut self) -> Result<u64, BoxError> {
        let n: u64 = yield_cmd!(ReadCount);
        Ok(n)
    }

    // A plain return type: rustc alone would suggest an `.expect`.
    #[entry]
    fn plain(&mut self) -> u64 {
        let n: u64 = yield_cmd!(ReadCount);
        n
    }

    #[entry]
    fn receive(&mut self) -> u64 {
        let n: u64 = recv!(u64, timeout = Duration::from_secs(1));
        n
    }

    #[entry]
    fn ask(&mut self, counter: Pid) -> u64 {
        let n: u64 = call!(counter, GetCount);
        n
    }
}

fn main() {}
