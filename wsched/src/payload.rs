//! Dynamically typed values that travel between processes, handlers and callers.
//!
//! A process's input arguments, its result, the messages it receives and the outputs
//! of the commands it yields are all [`Payload`]s: owned, `Send`, and extracted by
//! type. Extraction that names the wrong type fails with a [`PayloadTypeError`] that
//! names both types and hands the payload back, so nothing is lost to a typo.

use std::any::{Any, TypeId};
use std::fmt;

/// An owned, `Send`, dynamically typed value.
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
    value: Box<dyn Any + Send>,
    type_name: &'static str,
}

impl Payload {
    /// Wraps `value`. Wrapping a `Payload` returns it unchanged rather than nesting it,
    /// so APIs that take `impl Any + Send` accept ready-made payloads too.
    pub fn new<T: Any + Send>(value: T) -> Self {
        let mut slot = Some(value);
        if let Some(already) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Payload>>() {
            return already.take().expect("slot was just filled");
        }
        let value = slot.expect("slot was just filled");
        Self {
            value: Box::new(value),
            type_name: std::any::type_name::<T>(),
        }
    }

    /// The unit payload, the result of processes that return nothing.
    pub fn unit() -> Self {
        Self::new(())
    }

    /// Whether the value is a `T`.
    pub fn is<T: Any>(&self) -> bool {
        (*self.value).type_id() == TypeId::of::<T>()
    }

    /// The name of the value's type, as `std::any::type_name` spells it.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The `TypeId` of the value.
    pub fn value_type_id(&self) -> TypeId {
        (*self.value).type_id()
    }

    /// Takes the value out as a `T`, or gives the payload back inside the error.
    ///
    /// Asking for a `Payload` returns the payload itself, mirroring
    /// [`new`](Self::new), so generic code over "any output type" works for commands
    /// whose output is a `Payload`.
    pub fn downcast<T: Any>(self) -> Result<T, PayloadTypeError> {
        if TypeId::of::<T>() == TypeId::of::<Payload>() {
            let mut slot = Some(self);
            let as_t = (&mut slot as &mut dyn Any)
                .downcast_mut::<Option<T>>()
                .expect("T is Payload");
            return Ok(as_t.take().expect("slot was just filled"));
        }
        self.take::<T>().map_err(|payload| PayloadTypeError {
            expected: std::any::type_name::<T>(),
            payload: Returned::new(payload),
        })
    }

    /// Takes the value out as a `T` (not `Payload` itself), or gives the payload back
    /// as it is: one type check, no error to build.
    #[inline]
    pub(crate) fn take<T: Any>(self) -> Result<T, Payload> {
        if self.is::<T>() {
            let raw = Box::into_raw(self.value).cast::<T>();
            // SAFETY: `is` just checked that the box holds a `T`, so this is the cast
            // `Box::<dyn Any>::downcast` makes after the same check (which would make
            // a second virtual `type_id` call here, on every message received).
            Ok(*unsafe { Box::from_raw(raw) })
        } else {
            Err(self)
        }
    }

    /// Borrows the value as a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.value.downcast_ref::<T>()
    }

    /// Mutably borrows the value as a `T`.
    pub fn downcast_mut<T: Any>(&mut self) -> Option<&mut T> {
        self.value.downcast_mut::<T>()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload<{}>", self.type_name)
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
            type_name: payload.type_name,
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
            "payload holds a `{}`, not the `{}` that was asked for",
            self.actual(),
            self.expected
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
#[derive(Debug, Default)]
pub struct Payloads(Vec<Payload>);

impl Payloads {
    /// No payloads.
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// Appends one payload.
    pub fn push(&mut self, payload: Payload) {
        self.0.push(payload);
    }

    /// The payloads as a vector.
    pub fn into_vec(self) -> Vec<Payload> {
        self.0
    }
}

impl std::ops::Deref for Payloads {
    type Target = [Payload];
    fn deref(&self) -> &[Payload] {
        &self.0
    }
}

impl std::ops::DerefMut for Payloads {
    fn deref_mut(&mut self) -> &mut [Payload] {
        &mut self.0
    }
}

impl IntoIterator for Payloads {
    type Item = Payload;
    type IntoIter = std::vec::IntoIter<Payload>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl From<Vec<Payload>> for Payloads {
    fn from(v: Vec<Payload>) -> Self {
        Self(v)
    }
}

impl FromIterator<Payload> for Payloads {
    fn from_iter<I: IntoIterator<Item = Payload>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
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
        Payloads(self)
    }
}

impl IntoPayloads for () {
    fn into_payloads(self) -> Payloads {
        Payloads::new()
    }
}

macro_rules! tuple_into_payloads {
    ($($name:ident),+) => {
        impl<$($name: Any + Send),+> IntoPayloads for ($($name,)+) {
            #[allow(non_snake_case)]
            fn into_payloads(self) -> Payloads {
                let ($($name,)+) = self;
                Payloads(vec![$(Payload::new($name)),+])
            }
        }
    };
}

tuple_into_payloads!(A);
tuple_into_payloads!(A, B);
tuple_into_payloads!(A, B, C);
tuple_into_payloads!(A, B, C, D);
tuple_into_payloads!(A, B, C, D, E);
tuple_into_payloads!(A, B, C, D, E, F);
tuple_into_payloads!(A, B, C, D, E, F, G);
tuple_into_payloads!(A, B, C, D, E, F, G, H);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_type_names_both_types_and_gives_the_payload_back() {
        let err = Payload::new(String::from("hi"))
            .downcast::<u64>()
            .unwrap_err();
        assert_eq!(err.expected(), "u64");
        assert_eq!(err.actual(), "alloc::string::String");
        assert_eq!(
            err.to_string(),
            "payload holds a `alloc::string::String`, not the `u64` that was asked for"
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
        assert!(err.to_string().contains("core::cell::Cell<u8>"));
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

    #[test]
    fn refs_and_muts_see_the_value() {
        let mut p = Payload::new(vec![1, 2]);
        p.downcast_mut::<Vec<i32>>().unwrap().push(3);
        assert_eq!(p.downcast_ref::<Vec<i32>>(), Some(&vec![1, 2, 3]));
        assert!(p.downcast_ref::<i32>().is_none());
        assert_eq!(format!("{p:?}"), "Payload<alloc::vec::Vec<i32>>");
    }
}
