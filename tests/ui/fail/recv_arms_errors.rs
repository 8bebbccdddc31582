use std::time::Duration;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[entry]
    fn untyped(&mut self) -> Result<u32, BoxError> {
        Ok(recv! {
            n if n > 3 => n,
        }?)
    }

    #[entry]
    fn two_timeouts(&mut self) -> Result<u32, BoxError> {
        Ok(recv! {
            n: u32 => n,
            after(Duration::from_secs(1)) => 0,
            after(Duration::from_secs(2)) => 1,
        }?)
    }

    #[entry]
    fn by_reference(&mut self) -> Result<usize, BoxError> {
        Ok(recv! {
            ref text: String => text.len(),
        }?)
    }

    #[entry]
    fn suspends_in_a_guard(&mut self) -> Result<u32, BoxError> {
        Ok(recv! {
            n: u32 if { let _ = yield_cmd!(wsched::command::Sleep(Duration::ZERO)); n > 0 } => n,
        }?)
    }

    #[entry]
    fn no_arm(&mut self) -> Result<u32, BoxError> {
        recv! {
            after(Duration::from_secs(1)) => 0,
        }?;
        Ok(0)
    }
}

fn main() {}
