use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn run(&mut self) {
        let fut = async {
            let _ = recv!();
        };
        drop(fut);
    }
}

fn main() {}
