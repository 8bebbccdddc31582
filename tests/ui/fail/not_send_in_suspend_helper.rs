use std::rc::Rc;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[suspend]
    fn add_one(&mut self) -> Result<u32, RecvError> {
        let one = Rc::new(1);
        let n = recv!(u32)?;
        Ok(n + *one)
    }

    #[entry]
    fn run(&mut self) -> Result<u32, BoxError> {
        Ok(self.add_one().await?)
    }
}

fn main() {}
