//! Dynamically typed values that travel between processes, handlers and callers.
//!
//! A process's input arguments, its result, the messages it receives and the outputs
//! of the commands it yields are all [`Payload`]s: owned, `Send`, and extracted by
//! type. Extraction that names the wrong type fails with a [`PayloadTypeError`] that
//! names both types and hands the payload back, so nothing is lost to a typo.

use std::any::{Any, TypeId};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};

use crate::type_name::{Short, WithArticle};

/// An owned, `Send`, dynamically typed value.
///
/// Values of up to two machine words (integers, PIDs, `()`, small structs, a `Box`,
/// an `Arc`) are stored inline, without an allocation; larger ones are boxed. Either way the value is moved out by
/// [`downcast`](Self::downcast) exactly as it went in.
///
/// ```
/// use wsched::Payload;
///
/// let p = Payload::new(42_u32);
/// assert!(p.is::<u32>());
/// let err = p.downcast::<String>().unwrap_err();
/// assert_eq!(err.expected(), "alloc::string::String");
/// assert_eq!(err.into_payload().downcast::<u32>().unwrap(), 42);
/// ```
pub struct Payload {
    meta: &'static Meta,
    /// The value itself when `meta.inline`, else the pointer of a `Box` holding it.
    storage: Storage,
    /// The auto traits of the `Box<dyn Any + Send>` this stands for: `Send` (values
    /// are `Send`) but not `Sync` (they need not be), nor unwind-safe.
    _value: PhantomData<Box<dyn Any + Send>>,
}

/// Room for a value stored inline: two words, word-aligned.
type Storage = MaybeUninit<[usize; 2]>;

/// Whether a `T` is stored inline in a payload.
const fn fits_inline<T>() -> bool {
    size_of::<T>() <= size_of::<Storage>() && align_of::<T>() <= align_of::<Storage>()
}

/// What a payload knows of its value's type: one static per type (see `Described`).
pub(crate) struct Meta {
    type_name: fn() -> &'static str,
    /// The id itself, not a function returning it: a type check is then a load
    /// from this static, where a call returned the id through memory and the
    /// comparison read it back wider than it was written.
    type_id: TypeId,
    inline: bool,
    /// Whether dropping the value does anything: `false` for an inline value
    /// without drop glue (`()`, numbers), whose payload can then be forgotten
    /// (see [`Payload::drop_quietly`]).
    needs_drop: bool,
    /// Drops the value `storage` holds (inline, or through its box).
    drop: unsafe fn(&mut Storage),
    /// For a command wrapped by [`Payload::command`]: the type of its output, which
    /// the testing harness checks completions against. In the static, not in each
    /// payload, so yields stay as small as other payloads.
    output: Option<OutputType>,
    /// A signal the runtime sends (a monitor's `Down`, a link's `Exit`), wrapped by
    /// [`Payload::signal`]: it takes no room in a bounded mailbox, wherever it waits
    /// (see `engine/bounded.rs`). In the static, as `output` is, so the mark
    /// travels with the message into a `#[process]`'s own buffer at no cost.
    signal: bool,
}

/// The output type of a yielded command, as a completion must hold it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutputType {
    pub(crate) type_id: TypeId,
    pub(crate) type_name: fn() -> &'static str,
}

/// Gives every value type its `Meta` as an associated constant, which `&T::META`
/// promotes to a `'static` (the `RawWakerVTable` pattern).
trait Described: Any + Send {
    const META: Meta;
}

impl<T: Any + Send> Described for T {
    const META: Meta = Meta {
        type_name: std::any::type_name::<T>,
        type_id: TypeId::of::<T>(),
        inline: fits_inline::<T>(),
        needs_drop: std::mem::needs_drop::<T>() || !fits_inline::<T>(),
        drop: drop_value::<T>,
        output: None,
        signal: false,
    };
}

/// [`Described`] for signals: the same, marked (see [`Meta::signal`]).
trait DescribedSignal: Any + Send {
    const META: Meta;
}

impl<T: Any + Send> DescribedSignal for T {
    const META: Meta = Meta {
        signal: true,
        ..<T as Described>::META
    };
}

/// [`Described`] for commands: the same, with the type `O` its completion carries.
trait DescribedWithOutput<O: 'static>: Any + Send {
    const META: Meta;
}

impl<T: Any + Send, O: 'static> DescribedWithOutput<O> for T {
    const META: Meta = Meta {
        output: Some(OutputType {
            type_id: TypeId::of::<O>(),
            type_name: std::any::type_name::<O>,
        }),
        ..<T as Described>::META
    };
}

/// # Safety
/// `storage` holds a live `T` as `Payload::new::<T>` stored it, which nothing
/// else will read or drop afterwards.
unsafe fn drop_value<T>(storage: &mut Storage) {
    if fits_inline::<T>() {
        // SAFETY: per the contract, an inline, initialised `T` sits at the start of
        // `storage` (which is aligned enough for it: `fits_inline`).
        unsafe { std::ptr::drop_in_place(storage.as_mut_ptr().cast::<T>()) }
    } else {
        // SAFETY: per the contract, `storage` holds the pointer of a `Box<T>` that
        // nobody else owns.
        drop(unsafe { Box::from_raw(storage.as_ptr().cast::<*mut T>().read()) })
    }
}

/// `value` as a `U` when `T` is `U` (a generic parameter that is, in fact, a known
/// type), else `value` back. The check is of two constant `TypeId`s, which the
/// compiler folds: no cost where the answer is known when compiling.
#[inline(always)]
pub(crate) fn same_type<T: Any, U: Any>(value: T) -> Result<U, T> {
    let mut slot = Some(value);
    match (&mut slot as &mut dyn Any).downcast_mut::<Option<U>>() {
        Some(as_u) => Ok(as_u.take().expect("the slot was just filled")),
        None => Err(slot.expect("the slot was just filled")),
    }
}

impl Payload {
    /// Wraps `value`. Wrapping a `Payload` returns it unchanged rather than nesting it,
    /// so APIs that take `impl Any + Send` accept ready-made payloads too.
    pub fn new<T: Any + Send>(value: T) -> Self {
        match same_type::<T, Payload>(value) {
            Ok(already) => already,
            Err(value) => Self::with_meta(value, &<T as Described>::META),
        }
    }

    /// Wraps a yielded command whose completion carries an `O`, remembering that
    /// type (see [`Meta::output`]; `Payload::command` is how commands use it).
    pub(crate) fn with_output<T: Any + Send, O: 'static>(command: T) -> Self {
        Self::with_meta(command, &<T as DescribedWithOutput<O>>::META)
    }

    /// Wraps a signal the runtime sends (a `Down`, an `Exit`), marked as one (see
    /// [`is_signal`](Self::is_signal)).
    pub(crate) fn signal<T: Any + Send>(value: T) -> Self {
        Self::with_meta(value, &<T as DescribedSignal>::META)
    }

    /// Whether this was wrapped by [`signal`](Self::signal): a message that takes
    /// no room in a bounded mailbox.
    #[inline]
    pub(crate) fn is_signal(&self) -> bool {
        self.meta.signal
    }

    /// What [`with_output`](Self::with_output) stores of a `T`: with the value, all
    /// that code that does not know `T`'s output needs to wrap it (see
    /// [`from_parts`](Self::from_parts)).
    #[inline(always)]
    pub(crate) fn meta_with_output<T: Any + Send, O: 'static>() -> &'static Meta {
        &<T as DescribedWithOutput<O>>::META
    }

    /// Wraps `value` as [`command`](Self::command) would, where `C`'s bounds are not
    /// known (the first poll of a `yield_cmd!`'s future: bounds there would repeat
    /// the compiler's error for a value that is no command).
    ///
    /// # Safety
    /// `meta` describes a `T`: `command_meta::<T>()`, or the `Meta` that `new`
    /// stores for a `T`.
    #[inline(always)]
    pub(crate) unsafe fn from_parts<T>(value: T, meta: &'static Meta) -> Self {
        let mut storage = Storage::uninit();
        if fits_inline::<T>() {
            // SAFETY: a `T` fits in `storage`, size and alignment (`fits_inline`),
            // and the storage is ours.
            unsafe { storage.as_mut_ptr().cast::<T>().write(value) };
        } else {
            let boxed = Box::into_raw(Box::new(value));
            // SAFETY: a pointer fits in the storage (two words, word-aligned).
            unsafe { storage.as_mut_ptr().cast::<*mut T>().write(boxed) };
        }
        // `meta` describes a `T` (the contract).
        Self {
            meta,
            storage,
            _value: PhantomData,
        }
    }

    /// The output type of the command this holds, if it was wrapped by
    /// [`command`](Self::command).
    pub(crate) fn output_type(&self) -> Option<OutputType> {
        self.meta.output
    }

    /// Takes the `T` out and hands it to `f`, which keeps it (`Ok`) or gives it back
    /// (`Err`): then it goes back into a payload described as before (a signal stays
    /// one). `Err` with the payload untouched if it holds no `T`. A `recv!` arm's
    /// pattern and guard decide this way (see `macro_support/suspend.rs`).
    #[inline]
    pub(crate) fn take_if<T: Any, R>(
        self,
        f: impl FnOnce(T) -> Result<R, T>,
    ) -> Result<R, Payload> {
        let meta = self.meta;
        let value = self.take::<T>()?;
        // SAFETY: `meta` described the `T` just taken out of this payload.
        f(value).map_err(|value| unsafe { Self::from_parts(value, meta) })
    }

    /// Stores `value`, described by `meta` (which describes a `T`).
    #[inline]
    fn with_meta<T: Any + Send>(value: T, meta: &'static Meta) -> Self {
        // SAFETY: every caller passes the `Meta` of `T` (`Described` or
        // `DescribedWithOutput`), which is what `from_parts` asks.
        unsafe { Self::from_parts(value, meta) }
    }

    /// Whether dropping it does anything: not for an inline value without drop
    /// glue (`()`, numbers), which can then be forgotten instead, sparing the
    /// `catch_unwind` a user value's drop is run under (the result of every
    /// detached process that returns `()`).
    #[inline]
    pub(crate) fn needs_drop(&self) -> bool {
        self.meta.needs_drop
    }

    /// The unit payload, the result of processes that return nothing.
    pub fn unit() -> Self {
        Self::new(())
    }

    /// Whether the value is a `T`.
    pub fn is<T: Any>(&self) -> bool {
        self.meta.type_id == TypeId::of::<T>()
    }

    /// The name of the value's type, as `std::any::type_name` spells it.
    pub fn type_name(&self) -> &'static str {
        (self.meta.type_name)()
    }

    /// What [`type_name`](Self::type_name) calls: a word to keep instead of the name.
    pub(crate) fn type_name_fn(&self) -> fn() -> &'static str {
        self.meta.type_name
    }

    /// The `TypeId` of the value.
    pub fn value_type_id(&self) -> TypeId {
        self.meta.type_id
    }

    /// Where the value is.
    fn value_ptr(&self) -> *const () {
        if self.meta.inline {
            self.storage.as_ptr().cast()
        } else {
            // SAFETY: a boxed value's storage holds its box's pointer (see `new`).
            unsafe { self.storage.as_ptr().cast::<*const ()>().read() }
        }
    }

    /// Takes the value out as a `T`, or gives the payload back inside the error.
    ///
    /// Asking for a `Payload` returns the payload itself, mirroring
    /// [`new`](Self::new), so generic code over "any output type" works for commands
    /// whose output is a `Payload`.
    pub fn downcast<T: Any>(self) -> Result<T, PayloadTypeError> {
        let payload = match same_type::<Payload, T>(self) {
            Ok(as_t) => return Ok(as_t),
            Err(payload) => payload,
        };
        payload.take::<T>().map_err(|payload| PayloadTypeError {
            expected: std::any::type_name::<T>(),
            payload: Returned::new(payload),
        })
    }

    /// Takes the value out as a `T` (not `Payload` itself), or gives the payload back
    /// as it is: one type check, no error to build.
    #[inline]
    pub(crate) fn take<T: Any>(self) -> Result<T, Payload> {
        if !self.is::<T>() {
            return Err(self);
        }
        // SAFETY: checked just above.
        Ok(unsafe { self.take_unchecked() })
    }

    /// [`take`](Self::take) for the `Send` types the runtime moves (command outputs,
    /// commands, messages): the type check compares the meta's address first.
    #[inline]
    pub(crate) fn take_sent<T: Any + Send>(self) -> Result<T, Payload> {
        if !self.is_sent::<T>() {
            return Err(self);
        }
        // SAFETY: checked just above.
        Ok(unsafe { self.take_unchecked() })
    }

    /// Whether the value is a `T`, settled by one comparison of addresses when the
    /// meta is the one `new::<T>` stored: no load of the id from the static, which
    /// sat on the critical path of every yield's completion. A copy of `T`'s meta
    /// made by another codegen unit has another address; the ids settle that case.
    ///
    /// Not for `()`, the output of most commands (`Sleep`'s, a handler's that only
    /// acknowledges): the handler that makes it is compiled apart from the yield
    /// that takes it (another crate, or another codegen unit: `step_cost yield`'s
    /// never matched), so the addresses hardly ever match, and the id is compared
    /// at once (3 instructions a yield fewer).
    #[inline]
    fn is_sent<T: Any + Send>(&self) -> bool {
        if TypeId::of::<T>() == TypeId::of::<()>() {
            return self.is::<T>();
        }
        std::ptr::eq(self.meta, &<T as Described>::META) || self.is::<T>()
    }

    /// Moves the value out as a `T`.
    ///
    /// # Safety
    /// The value is a `T`.
    #[inline]
    unsafe fn take_unchecked<T: Any>(self) -> T {
        // The value moves out: the payload's own drop must not run.
        let this = std::mem::ManuallyDrop::new(self);
        // Where the value is follows from `T` (`new` chose by `fits_inline`): no
        // need to read the meta again.
        if fits_inline::<T>() {
            // SAFETY: the value is a `T` (the contract), stored inline by `new`;
            // `this` is never dropped, so the value is read exactly once.
            unsafe { this.storage.as_ptr().cast::<T>().read() }
        } else {
            // SAFETY: the value is a `T` (the contract) in the box whose pointer
            // `new` stored; `this` is never dropped, so the box is taken exactly
            // once.
            *unsafe { Box::from_raw(this.storage.as_ptr().cast::<*mut T>().read()) }
        }
    }

    /// Moves the value out as a `T`, leaving the unit value behind; `None` (and the
    /// payload untouched) if it holds another type. For callers that hold the
    /// payload in place (a handler reading a yield's command where the step wrote
    /// it): moving the whole payload first would copy it through memory.
    #[inline]
    pub(crate) fn take_in_place<T: Any + Send>(&mut self) -> Option<T> {
        if !self.is_sent::<T>() {
            return None;
        }
        let value = if fits_inline::<T>() {
            // SAFETY: the value is a `T` (checked), stored inline by `new`; the meta
            // is replaced below before anything can drop or read it again.
            unsafe { self.storage.as_ptr().cast::<T>().read() }
        } else {
            // SAFETY: the value is a `T` (checked) in the box whose pointer `new`
            // stored; the meta is replaced below, so the box is taken exactly once.
            *unsafe { Box::from_raw(self.value_ptr().cast::<T>().cast_mut()) }
        };
        // The unit value needs no storage: what is left there is never read.
        self.meta = &<() as Described>::META;
        Some(value)
    }

    /// Borrows the value as a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        // SAFETY: the value is a `T` (checked) at `value_ptr`, alive as long as
        // `self` is borrowed.
        self.is::<T>()
            .then(|| unsafe { &*self.value_ptr().cast::<T>() })
    }

    /// Mutably borrows the value as a `T`.
    pub fn downcast_mut<T: Any>(&mut self) -> Option<&mut T> {
        if !self.is::<T>() {
            return None;
        }
        let ptr = if self.meta.inline {
            self.storage.as_mut_ptr().cast::<T>()
        } else {
            self.value_ptr().cast::<T>().cast_mut()
        };
        // SAFETY: the value is a `T` (checked) at `ptr`, exclusively ours as long as
        // `self` is mutably borrowed.
        Some(unsafe { &mut *ptr })
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        // SAFETY: `storage` holds the value `new` stored for this `meta`; it has not
        // been moved out (`downcast` skips this drop when it moves the value out).
        unsafe { (self.meta.drop)(&mut self.storage) }
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload<{}>", self.type_name())
    }
}

/// Extracting a [`Payload`] as the wrong type. The payload is handed back.
///
/// The error is `Send + Sync` (so it fits in `Box<dyn Error + Send + Sync>` and
/// works with `?`) even though payloads need not be `Sync`: the payload is only
/// reachable by value, through [`into_payload`](Self::into_payload).
pub struct PayloadTypeError {
    expected: &'static str,
    payload: Returned,
}

impl PayloadTypeError {
    /// The type that was asked for.
    pub fn expected(&self) -> &'static str {
        self.expected
    }

    /// The type the payload actually holds.
    pub fn actual(&self) -> &'static str {
        self.payload.type_name
    }

    /// Takes back the payload that could not be extracted.
    pub fn into_payload(self) -> Payload {
        self.payload.into_payload()
    }
}

/// A payload carried back inside an error. The mutex makes the error `Sync` without
/// requiring the value to be; it is only ever locked to take the payload out.
pub(crate) struct Returned {
    type_name: &'static str,
    payload: std::sync::Mutex<Payload>,
}

impl Returned {
    pub(crate) fn new(payload: Payload) -> Self {
        Self {
            type_name: payload.type_name(),
            payload: std::sync::Mutex::new(payload),
        }
    }

    pub(crate) fn type_name(&self) -> &'static str {
        self.type_name
    }

    pub(crate) fn into_payload(self) -> Payload {
        self.payload
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl fmt::Debug for PayloadTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PayloadTypeError")
            .field("expected", &self.expected)
            .field("actual", &self.actual())
            .finish()
    }
}

impl fmt::Display for PayloadTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "payload holds {}, not the `{}` that was asked for",
            WithArticle(self.actual()),
            Short(self.expected)
        )
    }
}

impl std::error::Error for PayloadTypeError {}

/// An ordered list of payloads: the input arguments of an entry.
///
/// Built from a `Vec<Payload>`, from `()` (no arguments) or from a tuple of up to
/// eight `Send + 'static` values, each becoming one payload:
///
/// ```
/// use wsched::{IntoPayloads, Payloads};
///
/// let input: Payloads = ("bob".to_string(), 3_u8).into_payloads();
/// assert_eq!(input.len(), 2);
/// assert_eq!(input[1].downcast_ref::<u8>(), Some(&3));
/// ```
///
/// Up to two payloads are held in place, without an allocation: most entries take
/// few arguments, and a spawn's input is built, moved into the new process and
/// taken apart once, so a vector's allocation was a `malloc` and a `free` per spawn.
#[derive(Default)]
pub struct Payloads(Repr);

#[derive(Default)]
enum Repr {
    #[default]
    Zero,
    One(Payload),
    Two([Payload; 2]),
    Many(Vec<Payload>),
}

impl Payloads {
    /// No payloads.
    pub const fn new() -> Self {
        Self(Repr::Zero)
    }

    /// Appends one payload.
    pub fn push(&mut self, payload: Payload) {
        match &mut self.0 {
            Repr::Many(many) => many.push(payload),
            Repr::Zero => self.0 = Repr::One(payload),
            small => {
                self.0 = match std::mem::take(small) {
                    Repr::One(first) => Repr::Two([first, payload]),
                    Repr::Two(two) => {
                        let mut many = Vec::with_capacity(4);
                        many.extend(two);
                        many.push(payload);
                        Repr::Many(many)
                    }
                    Repr::Zero | Repr::Many(_) => unreachable!("matched above"),
                }
            }
        }
    }

    /// The payloads as a vector.
    pub fn into_vec(self) -> Vec<Payload> {
        match self.0 {
            Repr::Many(many) => many,
            small => Payloads(small).into_iter().collect(),
        }
    }
}

impl fmt::Debug for Payloads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl std::ops::Deref for Payloads {
    type Target = [Payload];
    fn deref(&self) -> &[Payload] {
        match &self.0 {
            Repr::Zero => &[],
            Repr::One(one) => std::slice::from_ref(one),
            Repr::Two(two) => two,
            Repr::Many(many) => many,
        }
    }
}

impl std::ops::DerefMut for Payloads {
    fn deref_mut(&mut self) -> &mut [Payload] {
        match &mut self.0 {
            Repr::Zero => &mut [],
            Repr::One(one) => std::slice::from_mut(one),
            Repr::Two(two) => two,
            Repr::Many(many) => many,
        }
    }
}

/// [`Payloads`] packed into three words and a tag, for where they wait in a cell
/// (a `Spawn` command's child, which must stay one word pair): one payload in
/// place, more in a vector.
pub(crate) struct PackedPayloads(Packed);

enum Packed {
    Few(Option<Payload>),
    Many(Vec<Payload>),
}

impl Payloads {
    /// Packs these (two or more in a vector: an allocation for two).
    pub(crate) fn pack(self) -> PackedPayloads {
        PackedPayloads(match self.0 {
            Repr::Zero => Packed::Few(None),
            Repr::One(one) => Packed::Few(Some(one)),
            Repr::Two(two) => Packed::Many(Vec::from(two)),
            Repr::Many(many) => Packed::Many(many),
        })
    }
}

impl PackedPayloads {
    /// Unpacks them, in order.
    pub(crate) fn unpack(self) -> Payloads {
        Payloads(match self.0 {
            Packed::Few(None) => Repr::Zero,
            Packed::Few(Some(one)) => Repr::One(one),
            Packed::Many(many) => Repr::Many(many),
        })
    }
}

/// The payloads of a [`Payloads`], in order, by value.
pub struct PayloadsIntoIter(IterRepr);

enum IterRepr {
    /// Up to two payloads, taken out in order.
    Small {
        items: [Option<Payload>; 2],
        next: usize,
    },
    Many(std::vec::IntoIter<Payload>),
}

impl Iterator for PayloadsIntoIter {
    type Item = Payload;

    #[inline]
    fn next(&mut self) -> Option<Payload> {
        match &mut self.0 {
            IterRepr::Small { items, next } => {
                let item = items.get_mut(*next)?.take();
                *next += 1;
                item
            }
            IterRepr::Many(many) => many.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterRepr::Small { items, next } => {
                let left = items.iter().skip(*next).filter(|i| i.is_some()).count();
                (left, Some(left))
            }
            IterRepr::Many(many) => many.size_hint(),
        }
    }
}

impl fmt::Debug for PayloadsIntoIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PayloadsIntoIter").finish_non_exhaustive()
    }
}

impl IntoIterator for Payloads {
    type Item = Payload;
    type IntoIter = PayloadsIntoIter;
    fn into_iter(self) -> PayloadsIntoIter {
        let small = |items| IterRepr::Small { items, next: 0 };
        PayloadsIntoIter(match self.0 {
            Repr::Zero => small([None, None]),
            Repr::One(one) => small([Some(one), None]),
            Repr::Two([a, b]) => small([Some(a), Some(b)]),
            Repr::Many(many) => IterRepr::Many(many.into_iter()),
        })
    }
}

impl From<Vec<Payload>> for Payloads {
    fn from(v: Vec<Payload>) -> Self {
        Self(Repr::Many(v))
    }
}

impl FromIterator<Payload> for Payloads {
    fn from_iter<I: IntoIterator<Item = Payload>>(iter: I) -> Self {
        let mut all = Self::new();
        iter.into_iter().for_each(|payload| all.push(payload));
        all
    }
}

/// Conversion into the input [`Payloads`] of an entry.
pub trait IntoPayloads {
    /// Converts `self` into payloads, one per argument.
    fn into_payloads(self) -> Payloads;
}

impl IntoPayloads for Payloads {
    fn into_payloads(self) -> Payloads {
        self
    }
}

impl IntoPayloads for Vec<Payload> {
    fn into_payloads(self) -> Payloads {
        Payloads::from(self)
    }
}

impl IntoPayloads for () {
    fn into_payloads(self) -> Payloads {
        Payloads::new()
    }
}

// One and two values are held in place (see `Payloads`); more in one exact
// allocation.
impl<A: Any + Send> IntoPayloads for (A,) {
    #[inline]
    fn into_payloads(self) -> Payloads {
        Payloads(Repr::One(Payload::new(self.0)))
    }
}

impl<A: Any + Send, B: Any + Send> IntoPayloads for (A, B) {
    #[inline]
    fn into_payloads(self) -> Payloads {
        Payloads(Repr::Two([Payload::new(self.0), Payload::new(self.1)]))
    }
}

macro_rules! tuple_into_payloads {
    ($($name:ident),+) => {
        impl<$($name: Any + Send),+> IntoPayloads for ($($name,)+) {
            #[allow(non_snake_case)]
            fn into_payloads(self) -> Payloads {
                let ($($name,)+) = self;
                Payloads(Repr::Many(vec![$(Payload::new($name)),+]))
            }
        }
    };
}

tuple_into_payloads!(A, B, C);
tuple_into_payloads!(A, B, C, D);
tuple_into_payloads!(A, B, C, D, E);
tuple_into_payloads!(A, B, C, D, E, F);
tuple_into_payloads!(A, B, C, D, E, F, G);
tuple_into_payloads!(A, B, C, D, E, F, G, H);

#[cfg(test)]
mod tests {
    use super::*;

    fn values(payloads: Payloads) -> Vec<u32> {
        payloads
            .into_iter()
            .map(|p| p.downcast::<u32>().unwrap())
            .collect()
    }

    #[test]
    fn a_payload_needs_dropping_unless_its_value_is_inline_without_drop_glue() {
        struct Noisy;
        impl Drop for Noisy {
            fn drop(&mut self) {}
        }
        assert!(!Payload::new(()).needs_drop());
        assert!(!Payload::new(7_u64).needs_drop());
        assert!(Payload::new(Noisy).needs_drop());
        assert!(Payload::new(String::from("x")).needs_drop());
        // Boxed (too big to sit inline): its box must be freed.
        assert!(Payload::new([0_u64; 8]).needs_drop());
    }

    #[test]
    fn payloads_keep_their_order_however_many_there_are() {
        for n in 0..6_u32 {
            let mut pushed = Payloads::new();
            (0..n).for_each(|i| pushed.push(Payload::new(i)));
            assert_eq!(pushed.len(), n as usize);
            let by_ref: Vec<u32> = pushed
                .iter()
                .map(|p| *p.downcast_ref::<u32>().unwrap())
                .collect();
            assert_eq!(by_ref, (0..n).collect::<Vec<_>>(), "{n} by reference");
            let iter = Payloads::from_iter((0..n).map(Payload::new)).into_iter();
            assert_eq!(iter.size_hint(), (n as usize, Some(n as usize)));
            assert_eq!(values(pushed), (0..n).collect::<Vec<_>>(), "{n} by value");
            let vec = Payloads::from_iter((0..n).map(Payload::new)).into_vec();
            assert_eq!(vec.len(), n as usize);
        }
    }

    #[test]
    fn packed_payloads_unpack_to_what_was_packed() {
        for n in 0..5_u32 {
            let packed = Payloads::from_iter((0..n).map(Payload::new)).pack();
            assert_eq!(values(packed.unpack()), (0..n).collect::<Vec<_>>(), "{n}");
        }
        assert!(size_of::<PackedPayloads>() <= 4 * size_of::<usize>());
    }

    #[test]
    fn tuples_become_one_payload_per_value_in_order() {
        assert_eq!(values(().into_payloads()), [0_u32; 0]);
        assert_eq!(values((7_u32,).into_payloads()), [7]);
        assert_eq!(values((7_u32, 8_u32).into_payloads()), [7, 8]);
        assert_eq!(values((7_u32, 8_u32, 9_u32).into_payloads()), [7, 8, 9]);
        let mut two = (1_u32, 2_u32).into_payloads();
        two[1] = Payload::new(5_u32);
        two.push(Payload::new(6_u32));
        assert_eq!(values(two), [1, 5, 6]);
        assert_eq!(
            format!("{:?}", (1_u32,).into_payloads())
                .matches("u32")
                .count(),
            1
        );
    }

    #[test]
    fn a_payload_left_in_a_partly_taken_input_is_dropped_once() {
        let shared = std::sync::Arc::new(());
        let mut iter = (
            std::sync::Arc::clone(&shared),
            std::sync::Arc::clone(&shared),
        )
            .into_payloads()
            .into_iter();
        drop(iter.next());
        assert_eq!(std::sync::Arc::strong_count(&shared), 2);
        drop(iter);
        assert_eq!(std::sync::Arc::strong_count(&shared), 1);
    }

    #[test]
    fn wrong_type_names_both_types_and_gives_the_payload_back() {
        let err = Payload::new(String::from("hi"))
            .downcast::<u64>()
            .unwrap_err();
        assert_eq!(err.expected(), "u64");
        assert_eq!(err.actual(), "alloc::string::String");
        assert_eq!(
            err.to_string(),
            "payload holds a `String`, not the `u64` that was asked for"
        );
        assert_eq!(err.into_payload().downcast::<String>().unwrap(), "hi");
    }

    #[test]
    fn errors_that_carry_payloads_fit_in_a_boxed_error() {
        fn boxed(e: impl Into<crate::BoxError>) -> crate::BoxError {
            e.into()
        }
        // A non-Sync payload still yields a Send + Sync error.
        let p = Payload::new(std::cell::Cell::new(5_u8));
        let err = boxed(p.downcast::<u8>().unwrap_err());
        assert!(err.to_string().contains("`Cell<u8>`"));
    }

    #[test]
    fn wrapping_a_payload_does_not_nest_it() {
        let p = Payload::new(Payload::new(7_i32));
        assert!(p.is::<i32>());
        assert_eq!(p.type_name(), "i32");
        let same = p.downcast::<Payload>().unwrap();
        assert_eq!(same.downcast::<i32>().unwrap(), 7);
    }

    #[test]
    fn tuples_become_one_payload_per_element() {
        let p = (1_u8, "x", vec![2_u16]).into_payloads();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].downcast_ref::<u8>(), Some(&1));
        assert_eq!(p[1].downcast_ref::<&str>(), Some(&"x"));
        assert_eq!(p[2].downcast_ref::<Vec<u16>>(), Some(&vec![2]));
        assert!(().into_payloads().is_empty());
    }

    /// Counts its drops; `N` words of padding pick inline (small) or boxed (large).
    struct Counted<const N: usize> {
        drops: std::sync::Arc<std::sync::atomic::AtomicUsize>,
        _pad: [usize; N],
    }

    impl<const N: usize> Drop for Counted<N> {
        fn drop(&mut self) {
            self.drops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn counted<const N: usize>() -> (Counted<N>, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        (
            Counted {
                drops: drops.clone(),
                _pad: [0; N],
            },
            drops,
        )
    }

    fn drops_once_on_every_path<const N: usize>() {
        use std::sync::atomic::Ordering::SeqCst;
        // Dropped as a payload.
        let (value, drops) = counted::<N>();
        drop(Payload::new(value));
        assert_eq!(drops.load(SeqCst), 1);
        // Moved out, then dropped by its new owner.
        let (value, drops) = counted::<N>();
        let out = Payload::new(value).downcast::<Counted<N>>().ok().unwrap();
        assert_eq!(drops.load(SeqCst), 0);
        drop(out);
        assert_eq!(drops.load(SeqCst), 1);
        // Handed back by a failed downcast, then dropped.
        let (value, drops) = counted::<N>();
        let err = Payload::new(value).downcast::<u8>().unwrap_err();
        assert_eq!(drops.load(SeqCst), 0);
        drop(err);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn inline_and_boxed_values_are_dropped_exactly_once() {
        assert!(fits_inline::<Counted<1>>());
        assert!(!fits_inline::<Counted<4>>());
        drops_once_on_every_path::<1>();
        drops_once_on_every_path::<4>();
    }

    #[test]
    fn values_of_every_size_and_alignment_come_back_intact() {
        #[derive(Debug, PartialEq, Clone, Copy)]
        #[repr(align(32))]
        struct OverAligned(u8);
        assert!(
            !fits_inline::<OverAligned>(),
            "boxed: too aligned to sit inline"
        );
        assert!(fits_inline::<()>() && fits_inline::<u64>() && fits_inline::<Box<u8>>());
        assert!(!fits_inline::<String>(), "three words");

        assert_eq!(Payload::new(()).downcast::<()>().unwrap(), ());
        assert_eq!(Payload::new(7_u64).downcast::<u64>().unwrap(), 7);
        assert_eq!(
            Payload::new(u128::MAX).downcast::<u128>().unwrap(),
            u128::MAX
        );
        assert_eq!(
            Payload::new((1_u32, 2_u64))
                .downcast::<(u32, u64)>()
                .unwrap(),
            (1, 2)
        );
        assert_eq!(
            Payload::new(Box::new(5_u8)).downcast::<Box<u8>>().unwrap(),
            Box::new(5)
        );
        assert_eq!(
            Payload::new("hi".to_string()).downcast::<String>().unwrap(),
            "hi"
        );
        let p = Payload::new(OverAligned(9));
        assert_eq!(p.downcast_ref::<OverAligned>(), Some(&OverAligned(9)));
        assert_eq!(p.downcast::<OverAligned>().unwrap(), OverAligned(9));
        let mut small = Payload::new(1_u16);
        *small.downcast_mut::<u16>().unwrap() += 1;
        assert_eq!(small.downcast::<u16>().unwrap(), 2);
    }

    #[test]
    fn refs_and_muts_see_the_value() {
        let mut p = Payload::new(vec![1, 2]);
        p.downcast_mut::<Vec<i32>>().unwrap().push(3);
        assert_eq!(p.downcast_ref::<Vec<i32>>(), Some(&vec![1, 2, 3]));
        assert!(p.downcast_ref::<i32>().is_none());
        assert_eq!(format!("{p:?}"), "Payload<alloc::vec::Vec<i32>>");
    }
}
