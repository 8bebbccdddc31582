//! Entry names as the runtime keeps them: inline when short, so that spawning a
//! process (or yielding a `Spawn`) does not allocate for its name.

use std::fmt;

/// Names up to this many bytes are stored inline (most are: `run`, `serve`).
const INLINE: usize = 22;

#[derive(Clone)]
pub(crate) enum EntryName {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl EntryName {
    pub(crate) fn new(name: &str) -> Self {
        if name.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..name.len()].copy_from_slice(name.as_bytes());
            Self::Inline {
                len: name.len() as u8,
                bytes,
            }
        } else {
            Self::Heap(name.into())
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Inline { len, bytes } => std::str::from_utf8(&bytes[..usize::from(*len)])
                .expect("the bytes were copied from a str"),
            Self::Heap(name) => name,
        }
    }
}

impl fmt::Debug for EntryName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_stay_inline_and_long_ones_are_kept_whole() {
        for name in [
            "",
            "run",
            "exactly_twenty_two_b_x",
            "a name longer than twenty-two bytes",
            "é🦀",
        ] {
            let entry = EntryName::new(name);
            assert_eq!(entry.as_str(), name);
            assert_eq!(
                matches!(entry, EntryName::Inline { .. }),
                name.len() <= INLINE,
                "{name}"
            );
        }
    }
}
