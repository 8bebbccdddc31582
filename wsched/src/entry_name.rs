//! Entry names as the runtime keeps them: inline when short, so that spawning a
//! process (or yielding a `Spawn`) does not allocate for its name.

use std::fmt;

/// Names up to this many bytes are stored inline (most are: `run`, `serve`). With
/// the length and the variant's tag, an inline name fills 16 bytes, which is what
/// the whole `EntryName` takes: every process's cell holds one.
const INLINE: usize = 14;

#[derive(Clone)]
pub(crate) enum EntryName {
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    /// Boxed twice so that this variant, too, fits in 16 bytes.
    Heap(Box<Box<str>>),
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
            Self::Heap(Box::new(name.into()))
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Inline { len, bytes } => {
                let bytes = &bytes[..usize::from(*len)];
                // SAFETY: the first `len` bytes were copied from a whole `&str` in
                // `new` and never change: valid UTF-8. (Checking again cost ~40
                // instructions per spawn, which reads the name to find the entry.)
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
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
        assert_eq!(std::mem::size_of::<EntryName>(), 16);
        for name in [
            "",
            "run",
            "fourteen_bytes",
            "fifteen_bytes_x",
            "a name longer than fourteen bytes",
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
