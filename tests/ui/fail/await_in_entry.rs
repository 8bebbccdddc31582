use wsched::prelude::*;

struct P;

async fn fetch() -> u32 {
    1
}

#[process]
impl P {
    #[entry]
    fn run(&mut self) -> u32 {
        fetch().await
    }
}

fn main() {}
