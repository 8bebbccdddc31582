use std::time::Duration;
use wsched::prelude::*;

struct P;

#[process]
impl P {
    #[suspend]
    fn pause(&mut self) -> Result<(), YieldError> {
        yield_cmd!(Sleep(Duration::from_millis(1)))
    }

    #[suspend]
    fn nap() -> Result<(), YieldError> {
        yield_cmd!(Sleep(Duration::from_millis(1)))
    }

    #[entry]
    fn other(&mut self) {}

    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        // Awaited: fine.
        self.pause().await?;
        (Self::nap()).await?;
        // Never awaited: these would never run.
        let _ = self.pause();
        Self::nap();
        let _ = self.other();
        Ok(())
    }

    /// A plain method: it cannot await, so it cannot run a helper either.
    fn plain(&mut self) {
        let _ = self.pause();
    }
}

fn main() {}
