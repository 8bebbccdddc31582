//! Naming the entry a process starts on: by its typed name ([`Entry`]), which the
//! compiler checks the arguments against, or by its name as a string, checked when
//! the process starts.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use crate::type_name::Short;

/// The typed name of one entry of the process `P`, whose arguments are the tuple
/// `A` (`()` for none, `(u32,)` for one, `(Pid, u32)` for two…).
///
/// `#[process]` makes one for every `#[entry]`, as an associated constant of the
/// struct named after the method in capitals, with the method's visibility:
/// `fn work(&mut self, coord: Pid, n: u32)` gives
/// `const WORK: Entry<Self, (Pid, u32)>`. Every spawning API takes it where it takes
/// an entry's name ([`Handle::spawn`](crate::Handle::spawn),
/// [`Context::spawn`](crate::Context::spawn) and the others,
/// [`this::spawn`](crate::this::spawn), [`Spawn`](crate::command::Spawn),
/// [`ChildSpec`](crate::supervisor::ChildSpec),
/// [`TestProcess`](crate::testing::TestProcess)), and then the input must be exactly
/// `A`: a wrong type or a wrong number of arguments is a compile error where the
/// spawn is written, and integer literals take the argument's type.
///
/// ```
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// struct Worker;
///
/// #[process]
/// impl Worker {
///     #[entry]
///     fn work(&mut self, coord: Pid, n: u32) -> Result<u32, BoxError> {
///         this::send(coord, n)?;
///         Ok(n * 2)
///     }
/// }
///
/// let coord = Pid::from_raw(7);
/// // `10` is a `u32` here: the entry says so.
/// let mut t = TestProcess::start(Worker, Worker::WORK, (coord, 10)).unwrap();
/// assert_eq!(t.result::<u32>(), 20);
/// assert_eq!(Worker::WORK.name(), "work");
/// ```
///
/// The string form stays for names chosen at run time: `"work"` takes any
/// arguments, and a mistake in them is an [`InitError`](crate::InitError) when the
/// process starts.
///
/// A [`Process`](crate::Process) written by hand may declare typed names for its
/// entries too, with [`Entry::new`]; its `init` must then decode exactly `A`.
pub struct Entry<P, A> {
    name: &'static str,
    /// `fn() -> _`: no `P` or `A` is held, so the name is `Send`, `Sync`, `Copy`
    /// and `'static` whatever they are.
    _types: PhantomData<fn() -> (P, A)>,
}

impl<P, A> Entry<P, A> {
    /// The typed name of the entry `name` of `P`, taking the arguments `A`.
    ///
    /// `#[process]` declares these itself; this is for a hand-written
    /// [`Process`](crate::Process) whose `init` accepts `name` with arguments of
    /// exactly the types of `A`, in order (the compiler cannot see into `init`:
    /// a declaration that does not match it fails at run time, as the string form
    /// would).
    ///
    /// ```
    /// use wsched::{Context, Entry, Events, InitError, Payloads, Process, StepError, StepOutput};
    ///
    /// struct Double(u64);
    ///
    /// impl Double {
    ///     /// Its `init` decodes one `u64` for `run`.
    ///     const RUN: Entry<Double, (u64,)> = Entry::new("run");
    /// }
    /// # impl Process for Double {
    /// #     fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> { Ok(()) }
    /// #     fn step(&mut self, _: Events<'_>, _: &mut StepOutput) -> Result<(), StepError> { Ok(()) }
    /// # }
    /// assert_eq!(Double::RUN.name(), "run");
    /// ```
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            _types: PhantomData,
        }
    }

    /// The entry's name, as the string form spells it.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<P, A> Clone for Entry<P, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P, A> Copy for Entry<P, A> {}

impl<P, A> PartialEq for Entry<P, A> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl<P, A> Eq for Entry<P, A> {}

impl<P, A> Hash for Entry<P, A> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl<P, A> fmt::Debug for Entry<P, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Entry<{}, {}>({:?})",
            Short(std::any::type_name::<P>()),
            Short(std::any::type_name::<A>()),
            self.name
        )
    }
}

mod sealed {
    /// Keeps [`EntryRef`](super::EntryRef) to the implementations below, so that
    /// it can grow without breaking anyone.
    pub trait Sealed {}

    impl<S: AsRef<str> + ?Sized> Sealed for &S {}
    impl<P, A> Sealed for super::Entry<P, A> {}
}

/// What the spawning APIs take to name the entry of a `P` that starts with the
/// input `I`: an [`Entry<P, I>`], whose arguments the compiler checks, or a name
/// (`&str`, `&String`, anything that is `AsRef<str>`, by reference), which takes
/// any input, checked when the process starts.
///
/// Implemented only here (it is sealed). An [`Entry`] fixes `I`: the input of a
/// typed spawn is inferred from it, so a wrong argument is reported as a type
/// mismatch on that argument.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an entry of `{P}`",
    label = "the typed name of another process's entry",
    note = "a typed name (`MyProcess::RUN`, which `#[process]` makes for `#[entry] fn run`) \
            starts only the process it belongs to, with exactly its arguments as a tuple; a \
            name as a string (`\"run\"`) starts any process, checked when it starts"
)]
pub trait EntryRef<P, I>: sealed::Sealed {
    /// The entry's name.
    fn name(&self) -> &str;
}

impl<P, I, S: AsRef<str> + ?Sized> EntryRef<P, I> for &S {
    #[inline]
    fn name(&self) -> &str {
        (**self).as_ref()
    }
}

impl<P, A> EntryRef<P, A> for Entry<P, A> {
    #[inline]
    fn name(&self) -> &str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pid;

    fn name_of<P, I>(entry: impl EntryRef<P, I>) -> String {
        entry.name().to_owned()
    }

    #[test]
    fn names_come_through_whatever_form_they_take() {
        const WORK: Entry<u8, (Pid, u32)> = Entry::new("work");
        let owned = String::from("run");
        assert_eq!(name_of::<u8, ()>("run"), "run");
        assert_eq!(name_of::<u8, ()>(&owned), "run");
        assert_eq!(name_of::<u8, ()>(&&*owned), "run");
        assert_eq!(name_of::<u8, _>(WORK), "work");
        assert_eq!(WORK, WORK.clone());
        assert_eq!(format!("{WORK:?}"), "Entry<u8, (Pid, u32)>(\"work\")");
    }
}
