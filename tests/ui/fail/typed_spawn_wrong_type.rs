use wsched::prelude::*;
use wsched::Scheduler;

struct Worker;

#[process]
impl Worker {
    #[entry]
    fn work(&mut self, _coord: Pid, _n: u32) {}
}

fn main() {
    let scheduler = Scheduler::new().unwrap();
    let coord = Pid::from_raw(1);
    // A literal of another type.
    let _ = scheduler.spawn(Worker, Worker::WORK, (coord, 10_i32));
    // A value of another type.
    let n: i64 = 10;
    let _ = scheduler.spawn(Worker, Worker::WORK, (coord, n));
    // Arguments in the wrong order.
    let _ = scheduler.spawn(Worker, Worker::WORK, (10_u32, coord));
}
