use wsched::prelude::*;
use wsched::testing::TestProcess;

struct Worker;

#[process]
impl Worker {
    #[entry]
    fn work(&mut self, _n: u32) {}
}

struct Other;

#[process]
impl Other {
    #[entry]
    fn work(&mut self, _n: u32) {}
}

fn main() {
    // `Worker`'s entry, `Other`'s process.
    let _ = TestProcess::start(Other, Worker::WORK, (10,));
}
