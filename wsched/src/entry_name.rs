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
    #[inline]
    pub(crate) fn new(name: &str) -> Self {
        if name.len() <= INLINE {
            Self::Inline {
                len: name.len() as u8,
                bytes: padded(name.as_bytes()),
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

/// `name` (at most [`INLINE`] bytes) followed by zeros, put together in registers
/// from at most two overlapping loads. Copied into a zeroed buffer instead, the
/// name went byte by byte through a `memcpy` call and was read back eight bytes
/// at a time, a store-forwarding stall: nine tenths of a spawn's time in here.
#[inline(always)]
fn padded(name: &[u8]) -> [u8; INLINE] {
    let len = name.len();
    debug_assert!(len <= INLINE);
    let word = |at: usize| u64::from_le_bytes(name[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| {
        u64::from(u32::from_le_bytes(
            name[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    // The first and the last bytes of each range, shifted to their places; where
    // the two loads overlap they hold the same bytes.
    let value: u128 = match len {
        8.. => u128::from(word(0)) | (u128::from(word(len - 8)) << ((len - 8) * 8)),
        4..=7 => u128::from(half(0) | (half(len - 4) << ((len - 4) * 8))),
        1..=3 => u128::from(
            u64::from(name[0])
                | (u64::from(name[len / 2]) << (len / 2 * 8))
                | (u64::from(name[len - 1]) << ((len - 1) * 8)),
        ),
        0 => 0,
    };
    let mut bytes = [0; INLINE];
    bytes.copy_from_slice(&value.to_le_bytes()[..INLINE]);
    bytes
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
        ]
        .into_iter()
        .chain((0..=INLINE + 1).map(|len| &"abcdefghijklmnopqrstuvwxyz"[..len]))
        {
            let entry = EntryName::new(name);
            assert_eq!(entry.as_str(), name);
            if let EntryName::Inline { bytes, .. } = &entry {
                assert!(
                    bytes[name.len()..].iter().all(|&b| b == 0),
                    "zeros after {name:?}: {bytes:?}"
                );
            }
            assert_eq!(
                matches!(entry, EntryName::Inline { .. }),
                name.len() <= INLINE,
                "{name}"
            );
        }
    }
}
