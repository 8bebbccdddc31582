use std::sync::Mutex;
use wsched::prelude::*;

struct Counter {
    total: Mutex<u64>,
}

#[process]
impl Counter {
    #[entry]
    fn count(&mut self) -> Result<u64, BoxError> {
        let mut total = self.total.lock().unwrap();
        *total += recv!(u64)?;
        Ok(*total)
    }
}

fn main() {}
