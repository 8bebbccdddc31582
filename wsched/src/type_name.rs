//! Type names for messages: `std::any::type_name` spells every path out
//! (`alloc::vec::Vec<alloc::string::String>`), which buries the type a reader wrote
//! (`Vec<String>`). Accessors that return type names keep the full ones (they are
//! data: unambiguous, comparable); only what is printed for people is shortened.

use std::fmt;

/// `name` without the module path of any type in it, generics included:
/// `alloc::vec::Vec<alloc::string::String>` is shown as `Vec<String>`.
#[derive(Clone, Copy)]
pub(crate) struct Short<'a>(pub(crate) &'a str);

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&short(self.0))
    }
}

impl fmt::Debug for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The short form of a type name: every `segment::` that follows an identifier
/// segment is dropped, so only the last segment of each path is left.
/// (`<T as Trait>::Item` keeps its `::`: no identifier precedes it.)
pub(crate) fn short(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    // Where the identifier being written started in `out`.
    let mut segment = 0;
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("::") {
            if segment < out.len() {
                // A module (or type) prefix: drop it.
                out.truncate(segment);
            } else {
                out.push_str("::");
            }
            rest = after;
            continue;
        }
        out.push(c);
        if !(c.is_alphanumeric() || c == '_') {
            segment = out.len();
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A type name in a sentence, shortened, with its article: ``a `u32` ``,
/// ``an `i32` ``, ``an `Option<String>` ``. By the name's first sound, as read
/// aloud: a vowel (and `f32`/`f64`, "eff"), but not a `u` read "you" (`u64`,
/// `usize`, `User`, `Uuid`).
#[derive(Clone, Copy)]
pub(crate) struct WithArticle<'a>(pub(crate) &'a str);

impl fmt::Display for WithArticle<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = short(self.0);
        let word = short.trim_start_matches(['{', '[']);
        let mut chars = word.chars();
        let first = chars.next();
        let second = chars.next();
        let vowel = match first {
            Some('a' | 'e' | 'i' | 'o' | 'A' | 'E' | 'I' | 'O') => true,
            Some('f') => second.is_some_and(|c| c.is_ascii_digit()),
            Some('U') => !matches!(second, Some('s' | 'u' | 'n')),
            _ => false,
        };
        write!(f, "{} `{short}`", if vowel { "an" } else { "a" })
    }
}

/// `count` and `noun`, the noun in the plural unless `count` is 1: `1 step`,
/// `2 steps`. For nouns whose plural adds an `s`.
pub(crate) fn plural(count: u64, noun: &str) -> String {
    format!("{count} {noun}{}", if count == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    #[test]
    fn articles_follow_the_first_sound() {
        let a = |name| super::WithArticle(name).to_string();
        assert_eq!(a("i32"), "an `i32`");
        assert_eq!(a("u32"), "a `u32`");
        assert_eq!(a("f64"), "an `f64`");
        assert_eq!(a("alloc::string::String"), "a `String`");
        assert_eq!(a("core::option::Option<u8>"), "an `Option<u8>`");
        assert_eq!(a("{integer}"), "an `{integer}`");
        assert_eq!(a("&str"), "a `&str`");
        assert_eq!(a("my::Update"), "an `Update`");
        assert_eq!(a("my::User"), "a `User`");
        assert_eq!(a("()"), "a `()`");
        assert_eq!(a("(i32, i32)"), "a `(i32, i32)`");
    }

    use super::{plural, short};

    #[test]
    fn paths_are_dropped_everywhere_in_a_type_name() {
        assert_eq!(short(std::any::type_name::<String>()), "String");
        assert_eq!(short(std::any::type_name::<Vec<String>>()), "Vec<String>");
        assert_eq!(
            short(std::any::type_name::<
                std::collections::HashMap<String, Option<std::time::Duration>>,
            >()),
            "HashMap<String, Option<Duration>>"
        );
        assert_eq!(
            short(std::any::type_name::<(u32, &'static str, [u8; 4])>()),
            "(u32, &str, [u8; 4])"
        );
        assert_eq!(
            short(std::any::type_name::<Box<dyn std::error::Error + Send>>()),
            "Box<dyn Error + Send>"
        );
        assert_eq!(
            short("<T as core::iter::Iterator>::Item"),
            "<T as Iterator>::Item"
        );
        assert_eq!(short("my_crate::Über"), "Über");
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(plural(0, "step"), "0 steps");
        assert_eq!(plural(1, "step"), "1 step");
        assert_eq!(plural(2, "message"), "2 messages");
    }
}
