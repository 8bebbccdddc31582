//! Async handlers and sockets over real loopback sockets (the `tokio` feature).

use wsched::prelude::*;
use wsched::Scheduler;

struct Double(u64);
impl Command for Double {
    type Output = u64;
}

struct Asker;

#[process]
impl Asker {
    #[entry]
    fn ask(&mut self, n: u64) -> Result<u64, BoxError> {
        Ok(yield_cmd!(Double(n))?)
    }
}

#[test]
fn an_async_handler_completes_the_yield() {
    let scheduler = Scheduler::builder()
        .workers(2)
        .async_handler(|Double(n): Double| async move { Ok::<_, std::io::Error>(n * 2) })
        .build()
        .unwrap();
    let pid = scheduler.spawn(Asker, Asker::ASK, (21,)).unwrap();
    assert_eq!(scheduler.wait(pid).unwrap().downcast::<u64>().unwrap(), 42);
}
