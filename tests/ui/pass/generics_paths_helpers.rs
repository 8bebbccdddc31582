#![deny(warnings)]

use std::fmt::Debug;
use std::time::Duration;
use wsched::testing::TestProcess;
use wsched::{Message, Tag};

struct Echo<T> {
    seen: Vec<T>,
}

#[wsched::process]
impl<T> Echo<T>
where
    T: Debug + Send + 'static,
{
    #[suspend]
    fn take(&mut self) -> Option<Message> {
        let message: Result<Message, _> = wsched::recv!(timeout = Duration::from_secs(1));
        message.ok()
    }

    // A `let` annotated with the `Result` itself (checked to be one: an identity).
    #[suspend]
    fn nap() -> Result<(), wsched::YieldError> {
        let napped: Result<(), wsched::YieldError> =
            wsched::yield_cmd!(wsched::command::Sleep(Duration::ZERO));
        napped
    }

    #[entry(name = "echo")]
    fn run(&mut self, first: T) -> std::io::Result<String> {
        self.seen.push(first);
        Self::nap().await.map_err(std::io::Error::other)?;
        let m = self.take().await;
        let n = self.count().await;
        Ok(format!("{:?} {} {}", self.seen, m.is_some(), n))
    }

    #[entry]
    fn count(&mut self) -> usize {
        self.seen.len()
    }
}

fn main() {
    let mut t = TestProcess::start(Echo::<&str> { seen: vec![] }, "echo", ("a",)).unwrap();
    t.complete(Tag(1), ());
    t.send(1_u8);
    assert_eq!(t.result::<String>(), "[\"a\"] true 1");
}
