use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn generic<T: Send + 'static>(&mut self, value: T) -> T {
        value
    }

    #[entry]
    async fn already_async(&mut self) {}
}

fn main() {}
