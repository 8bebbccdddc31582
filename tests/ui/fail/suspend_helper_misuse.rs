use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[suspend]
    fn consume(self) {}

    #[suspend(fast)]
    #[entry]
    fn both(&mut self) {}

    #[entry]
    fn run(&mut self) {
        let other = async { 1 };
        let _ = self.both().await;
        let _ = other.await;
    }
}

fn main() {}
