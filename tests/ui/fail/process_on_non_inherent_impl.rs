use wsched::prelude::*;

#[process]
struct OnAStruct;

struct P;

#[process]
impl Clone for P {
    fn clone(&self) -> Self {
        P
    }
}

#[process]
fn on_a_function() {}

fn main() {}
