//! Typed entry names: integer literals take the argument's type, generic processes,
//! elided lifetimes, names that are no identifiers, the method's visibility, a
//! hand-written process's own typed name, and no warnings (unused typed names,
//! `missing_docs` on the generated constants).
#![deny(warnings, missing_docs)]

use std::borrow::Cow;
use std::collections::HashMap;
use wsched::supervisor::ChildSpec;
use wsched::testing::TestProcess;
use wsched::{Context, Entry, Events, InitError, Payloads, Process, StepError, StepOutput};

/// A generic process.
pub struct Tally<T> {
    seen: HashMap<u8, T>,
}

#[wsched::process]
impl<T: Send + 'static> Tally<T> {
    /// `Tally::<T>::COUNT`, public.
    #[entry]
    pub fn count(&mut self, key: u8, value: T, times: u64) -> u64 {
        self.seen.insert(key, value);
        times * 2
    }

    /// Made from the method's name: `Tally::<T>::FETCH`.
    #[entry(name = "fetch-all")]
    fn fetch(&mut self, key: Cow<'_, str>) -> usize {
        key.len()
    }

    /// Never spawned typed: no `dead_code` warning for its name.
    #[entry]
    fn unused(&mut self) {}
}

/// Hand-written, with a typed name of its own.
pub struct Double(u64);

impl Double {
    /// Its `init` decodes one `u64`.
    pub const RUN: Entry<Double, (u64,)> = Entry::new("run");
}

impl Process for Double {
    fn init(&mut self, _: Context, _: &str, input: Payloads) -> Result<(), InitError> {
        let n = input.into_iter().next().ok_or_else(|| InitError::failed("one u64"))?;
        self.0 = n.downcast::<u64>().map_err(InitError::failed)?;
        Ok(())
    }

    fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
        out.set_status(wsched::Status::Done(wsched::Payload::new(self.0 * 2)));
        Ok(())
    }
}

fn main() {
    // `7` is a `u64`, `1` a `u8`, `"x"` the `T` (`&str`): the entry says so.
    let mut t = TestProcess::start(Tally { seen: HashMap::new() }, Tally::COUNT, (1, "x", 7)).unwrap();
    assert_eq!(t.result::<u64>(), 14);
    let mut t = TestProcess::start(
        Tally::<u8> { seen: HashMap::new() },
        Tally::FETCH,
        (Cow::Borrowed("abc"),),
    )
    .unwrap();
    assert_eq!(t.result::<usize>(), 3);
    assert_eq!(Tally::<u8>::FETCH.name(), "fetch-all");
    let mut t = TestProcess::start(Double(0), Double::RUN, (21,)).unwrap();
    assert_eq!(t.result::<u64>(), 42);
    // The string form takes anything, as before.
    let name = String::from("run");
    let _ = TestProcess::start(Double(0), &name, (21_u64,)).unwrap();
    let _ = ChildSpec::from_fn("d", Double::RUN, || (Double(0), (5,)));
}
