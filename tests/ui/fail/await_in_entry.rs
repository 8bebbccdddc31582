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

    // The awaited value, used, adds no "type annotations needed" to the error.
    #[entry]
    fn uses_the_value(&mut self) -> String {
        let n = fetch().await;
        n.pow(2).to_string()
    }
}

fn main() {}
