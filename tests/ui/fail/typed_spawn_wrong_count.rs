use wsched::prelude::*;
use wsched::supervisor::ChildSpec;

struct Worker;

#[process]
impl Worker {
    #[entry]
    fn work(&mut self, _coord: Pid, _n: u32) {}

    #[entry]
    fn idle(&mut self) {}
}

struct Boss;

#[process]
impl Boss {
    #[entry]
    fn run(&mut self, coord: Pid) -> Result<(), BoxError> {
        // One argument short.
        this::spawn(Worker, Worker::WORK, (coord,))?;
        // One too many.
        let _ = yield_cmd!(Spawn::new(Worker, Worker::IDLE, (coord,)))?;
        Ok(())
    }
}

fn main() {
    // Not a tuple: one value alone.
    let _ = ChildSpec::new("w", || Worker, Worker::WORK, Pid::from_raw(1));
}
