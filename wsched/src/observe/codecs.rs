//! Payload codecs: values of registered types as text under stable names, for
//! recorded histories (the `sim` feature) and for messages that cross nodes (the
//! `cluster` feature).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::error::BoxError;
use crate::payload::Payload;
use crate::pid::Pid;

/// A value as a codec encoded it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Encoded {
    /// The codec's name (see [`Codecs`]): the type's stable name, which decoding
    /// looks the codec up by.
    pub codec: String,
    /// The text the codec made.
    pub text: String,
    /// Whether `text` is JSON (a history file then holds it as JSON, not as a
    /// string).
    pub json: bool,
}

impl Encoded {
    /// An encoded value: `text`, made by the codec named `codec`.
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    pub fn new(codec: impl Into<String>, text: impl Into<String>, json: bool) -> Self {
        Self {
            codec: codec.into(),
            text: text.into(),
            json,
        }
    }
}

// ---- codecs ------------------------------------------------------------------------

/// Encodes a value of one type (type-erased).
type EncodeFn = dyn Fn(&Payload) -> Option<String> + Send + Sync;
/// Decodes a value of one type (type-erased).
type DecodeFn = dyn Fn(&str) -> Result<Payload, BoxError> + Send + Sync;

/// One type's codec.
pub(crate) struct Codec {
    pub(crate) name: String,
    pub(crate) type_name: &'static str,
    pub(crate) json: bool,
    encode: Box<EncodeFn>,
    decode: Box<DecodeFn>,
}

/// The codecs of payload types, each under a stable name: how recorded histories
/// keep messages, completion outputs, entry arguments, yielded commands and
/// results whole. A value of a type without a codec is kept by its type name only.
///
/// [`Codecs::new`] knows `()`, `bool`, the integers, `char`, `String`,
/// `&'static str`, [`Pid`], [`Duration`](std::time::Duration) and the
/// [`Sleep`](crate::command::Sleep) command; add your types with
/// [`register_with`](Self::register_with) (any text, two functions) or, with the
/// `serde` feature, `register` (JSON through `serde`).
///
/// Give the same codecs to the scheduler that records
/// ([`Builder::history_codecs`](crate::Builder::history_codecs)) and to
/// [`replay`](crate::sim::history::replay).
#[derive(Clone)]
pub struct Codecs {
    by_type: HashMap<TypeId, Arc<Codec>>,
    by_name: HashMap<String, Arc<Codec>>,
}

impl fmt::Debug for Codecs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<(&str, &str)> = self
            .by_name
            .values()
            .map(|c| (c.name.as_str(), c.type_name))
            .collect();
        names.sort_unstable();
        f.debug_map().entries(names).finish()
    }
}

impl Codecs {
    /// No codecs at all: every value is kept by its type name.
    pub fn empty() -> Self {
        Self {
            by_type: HashMap::new(),
            by_name: HashMap::new(),
        }
    }

    /// Registers a codec for `T` under `name`, with `encode` and `decode` making
    /// and reading any text (`json`: whether that text is JSON, which a history
    /// file then keeps as JSON). A later codec for the same type replaces the
    /// earlier one.
    ///
    /// # Panics
    /// If `name` is already the name of another type's codec: names are what
    /// saved histories find codecs by, so each names one type.
    #[track_caller]
    pub(crate) fn insert<T: Any + Send>(
        &mut self,
        name: &str,
        json: bool,
        encode: impl Fn(&T) -> Option<String> + Send + Sync + 'static,
        decode: impl Fn(&str) -> Result<T, BoxError> + Send + Sync + 'static,
    ) -> &mut Self {
        let type_name = std::any::type_name::<T>();
        if let Some(other) = self.by_name.get(name) {
            if other.type_name != type_name {
                panic!(
                    "the codec name `{name}` is taken by `{}`, so it cannot name `{type_name}` too: \
                     give each type's codec a name of its own",
                    other.type_name
                );
            }
        }
        let codec = Arc::new(Codec {
            name: name.to_owned(),
            type_name,
            json,
            encode: Box::new(move |payload| payload.downcast_ref::<T>().and_then(&encode)),
            decode: Box::new(move |text| decode(text).map(Payload::new)),
        });
        if let Some(old) = self.by_type.insert(TypeId::of::<T>(), codec.clone()) {
            self.by_name.remove(&old.name);
        }
        self.by_name.insert(name.to_owned(), codec);
        self
    }

    /// The standard types' codecs: `()`, `bool`, the integers, `char`, `String`,
    /// `&'static str` (decoded into a leaked string: for tests), [`Pid`] and
    /// `Duration` (nanoseconds). The built-in commands' are added by the command
    /// layer (`command/builtin.rs`).
    pub(crate) fn standard() -> Self {
        fn number<T>(codecs: &mut Codecs, name: &str)
        where
            T: Any + Send + fmt::Display + std::str::FromStr,
            T::Err: std::error::Error + Send + Sync + 'static,
        {
            codecs.insert::<T>(
                name,
                true,
                |n| Some(n.to_string()),
                |text| Ok(text.trim().parse::<T>()?),
            );
        }
        let mut codecs = Self::empty();
        codecs.insert::<()>("()", true, |()| Some("null".to_owned()), |_| Ok(()));
        number::<bool>(&mut codecs, "bool");
        number::<u8>(&mut codecs, "u8");
        number::<u16>(&mut codecs, "u16");
        number::<u32>(&mut codecs, "u32");
        number::<u64>(&mut codecs, "u64");
        number::<u128>(&mut codecs, "u128");
        number::<usize>(&mut codecs, "usize");
        number::<i8>(&mut codecs, "i8");
        number::<i16>(&mut codecs, "i16");
        number::<i32>(&mut codecs, "i32");
        number::<i64>(&mut codecs, "i64");
        number::<i128>(&mut codecs, "i128");
        number::<isize>(&mut codecs, "isize");
        codecs.insert::<char>(
            "char",
            false,
            |c| Some(c.to_string()),
            |text| Ok(text.parse::<char>()?),
        );
        codecs.insert::<String>(
            "String",
            false,
            |s| Some(s.clone()),
            |text| Ok(text.to_owned()),
        );
        codecs.insert::<&'static str>(
            "str",
            false,
            |s| Some((*s).to_owned()),
            |text| Ok(&*Box::leak(text.to_owned().into_boxed_str())),
        );
        codecs.insert::<Pid>(
            "Pid",
            true,
            |pid| Some(pid.as_u64().to_string()),
            |text| Ok(Pid::from_raw(text.trim().parse()?)),
        );
        codecs.insert::<std::time::Duration>(
            "Duration",
            true,
            |d| Some(d.as_nanos().to_string()),
            |text| Ok(std::time::Duration::from_nanos(text.trim().parse()?)),
        );
        codecs
    }

    /// Whether a codec for `T` is registered.
    pub fn has<T: Any>(&self) -> bool {
        self.by_type.contains_key(&TypeId::of::<T>())
    }

    /// The name of `T`'s codec, if one is registered.
    pub fn name_of<T: Any>(&self) -> Option<&str> {
        self.by_type
            .get(&TypeId::of::<T>())
            .map(|c| c.name.as_str())
    }

    /// The codec of the value's type.
    pub(crate) fn codec_of(&self, value: &Payload) -> Option<&Codec> {
        self.by_type.get(&value.value_type_id()).map(|c| &**c)
    }

    /// The codec of `T`, if one is registered.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn codec_for<T: Any>(&self) -> Option<&Codec> {
        self.by_type.get(&TypeId::of::<T>()).map(|c| &**c)
    }

    /// Forgets the codec of `T`, if any.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn remove<T: Any>(&mut self) {
        if let Some(old) = self.by_type.remove(&TypeId::of::<T>()) {
            self.by_name.remove(&old.name);
        }
    }

    /// Whether the type `type_id` has a codec.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn has_type(&self, type_id: TypeId) -> bool {
        self.by_type.contains_key(&type_id)
    }

    /// The codec named `name`.
    pub(crate) fn named(&self, name: &str) -> Option<&Codec> {
        self.by_name.get(name).map(|c| &**c)
    }
}

impl Codecs {
    /// Registers a codec for `T` under the stable name `name`: `encode` makes any
    /// text of a value, `decode` reads it back. A later codec for the same type
    /// replaces the earlier one. Returns `self`, to chain registrations.
    ///
    /// The name is what a saved history finds the codec by: keep it when the
    /// type is renamed or moved.
    ///
    /// ```
    /// use wsched::Codecs;
    ///
    /// struct Celsius(f64);
    ///
    /// let mut codecs = Codecs::new();
    /// codecs.register_with::<Celsius>(
    ///     "Celsius",
    ///     |c| c.0.to_string(),
    ///     |text| Ok(Celsius(text.parse()?)),
    /// );
    /// assert!(codecs.has::<Celsius>());
    /// ```
    ///
    /// # Panics
    /// If `name` already names another type's codec.
    #[track_caller]
    pub fn register_with<T: Any + Send>(
        &mut self,
        name: &str,
        encode: impl Fn(&T) -> String + Send + Sync + 'static,
        decode: impl Fn(&str) -> Result<T, BoxError> + Send + Sync + 'static,
    ) -> &mut Self {
        self.insert::<T>(name, false, move |value| Some(encode(value)), decode)
    }

    /// Registers the `serde` codec of `T` under the stable name `name`: values as
    /// JSON (which a history file keeps as JSON). A later codec for the same type
    /// replaces the earlier one. Returns `self`, to chain registrations.
    ///
    /// ```
    /// use serde::{Deserialize, Serialize};
    /// use wsched::Codecs;
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Order {
    ///     id: u64,
    ///     items: Vec<String>,
    /// }
    ///
    /// let mut codecs = Codecs::new();
    /// codecs.register::<Order>("Order");
    /// assert_eq!(codecs.name_of::<Order>(), Some("Order"));
    /// ```
    ///
    /// # Panics
    /// If `name` already names another type's codec.
    #[cfg(feature = "serde")]
    #[track_caller]
    pub fn register<T>(&mut self, name: &str) -> &mut Self
    where
        T: serde::Serialize + serde::de::DeserializeOwned + Any + Send,
    {
        self.insert::<T>(
            name,
            true,
            |value| serde_json::to_string(value).ok(),
            |text| Ok(serde_json::from_str::<T>(text)?),
        )
    }
}

impl Codec {
    /// Encodes `value` (of this codec's type).
    pub(crate) fn encode(&self, value: &Payload) -> Option<Encoded> {
        (self.encode)(value).map(|text| Encoded {
            codec: self.name.clone(),
            text,
            json: self.json,
        })
    }

    /// Decodes `text` into a payload of this codec's type.
    pub(crate) fn decode(&self, text: &str) -> Result<Payload, BoxError> {
        (self.decode)(text)
    }
}
