//! Type names for messages and processes: `std::any::type_name` spells every path out
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

/// How every rendering names a process (listings, `top`, the recorder's pictures
/// and its Chrome / Perfetto JSON): its type, shortened, and its entry, as a path,
/// `Crawler::run`. Followed by the PID where the PID is not said otherwise
/// ([`ProcessLabel`]). An unknown type (a recording built by hand) leaves the
/// entry alone; an unknown entry shows as `?`.
#[derive(Clone, Copy)]
pub(crate) struct ProcessName<'a> {
    /// The type, in full (as `std::any::type_name` spells it), if known.
    pub(crate) process_type: Option<&'a str>,
    /// The entry, if known.
    pub(crate) entry: Option<&'a str>,
}

impl fmt::Display for ProcessName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(process_type) = self.process_type.filter(|t| !t.is_empty()) {
            write!(f, "{}::", Short(process_type))?;
        }
        f.write_str(self.entry.unwrap_or("?"))
    }
}

/// A [`ProcessName`] and the PID: `Crawler::run <5>`, the label of a process
/// wherever it is shown.
#[derive(Clone, Copy)]
pub(crate) struct ProcessLabel<'a> {
    pub(crate) name: ProcessName<'a>,
    pub(crate) pid: crate::pid::Pid,
}

impl<'a> ProcessLabel<'a> {
    /// The label of `pid`, of type `process_type` (in full), running `entry`.
    pub(crate) fn new(process_type: &'a str, entry: &'a str, pid: crate::pid::Pid) -> Self {
        Self {
            name: ProcessName {
                process_type: Some(process_type),
                entry: Some(entry),
            },
            pid,
        }
    }
}

impl fmt::Display for ProcessLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.pid)
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

/// The request and reply types of a call's message, a `Request<Q, R>`, from its type
/// name (as `std::any::type_name` spells it, or as a `recv!` arm writes it),
/// shortened: `wsched::…::Request<my::GetCount, u64>` gives `("GetCount", "u64")`.
/// `None` for any other type (or a type of another crate named `Request`, when the
/// full name is given).
pub(crate) fn request_types(name: &str) -> Option<(String, String)> {
    if name.contains("::") && !name.trim_start().starts_with(request_path()) {
        return None;
    }
    let short = short(name);
    let inner = short.trim().strip_prefix("Request<")?.strip_suffix('>')?;
    let mut depth = 0_usize;
    let mut previous = ' ';
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            // Not the arrow of a `fn() -> T`.
            '>' if previous == '-' => {}
            '>' | ')' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                let (request, reply) = (inner[..i].trim(), inner[i + 1..].trim());
                return Some((request.to_owned(), reply.to_owned()));
            }
            _ => {}
        }
        previous = c;
    }
    None
}

/// The path of [`Request`](crate::Request), as `std::any::type_name` spells it.
/// Written out, since this file names no layer above the crate root;
/// `services/calls.rs` tests that it is `Request`'s.
pub(crate) const REQUEST_PATH: &str = "wsched::services::calls::Request";

/// [`REQUEST_PATH`], as the code that reads type names uses it.
pub(crate) fn request_path() -> &'static str {
    REQUEST_PATH
}

/// Whether two type names, shortened, are the same type (`recv!` arms write them
/// without spaces).
fn same_type(a: &str, b: &str) -> bool {
    let squeeze = |name: &str| short(name).replace(' ', "");
    squeeze(a) == squeeze(b)
}

/// Why a call's request of type `waiting` stays in the mailbox of a process waiting at
/// a receive of `receives` (a type name, or a `recv!`'s arms, `A | B`): both are
/// `Request`s of other types. Shown as "a `Request<GetCount, u32>` is waiting but
/// this process receives `Request<GetCount, u64>`", and, when only the replies
/// differ, what each side expects (in parentheses). `None` when `waiting` is no request, or the receive
/// takes it (or takes no request at all: then nothing is known of the mismatch).
pub(crate) fn request_mismatch(waiting: &str, receives: &str) -> Option<RequestMismatch> {
    let (request, reply) = request_types(waiting)?;
    let received: Vec<(&str, (String, String))> = receives
        .split(" | ")
        .filter_map(|name| Some((name, request_types(name)?)))
        .collect();
    if received
        .iter()
        .any(|(_, (q, r))| same_type(q, &request) && same_type(r, &reply))
    {
        return None;
    }
    // The receive of the same request type, if there is one: then the replies differ.
    let (name, (_, received_reply)) = received
        .iter()
        .find(|(_, (q, _))| same_type(q, &request))
        .or(received.first())?;
    let reply_differs = received.iter().any(|(_, (q, _))| same_type(q, &request));
    Some(RequestMismatch {
        waiting: short(waiting),
        receives: short(name),
        reply,
        received_reply: reply_differs.then(|| received_reply.clone()),
    })
}

/// See [`request_mismatch`].
pub(crate) struct RequestMismatch {
    waiting: String,
    receives: String,
    reply: String,
    /// The reply type of the received request, when only the replies differ.
    received_reply: Option<String>,
}

impl fmt::Display for RequestMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is waiting but this process receives `{}`",
            WithArticle(&self.waiting),
            self.receives
        )?;
        if let Some(received_reply) = &self.received_reply {
            write!(
                f,
                " (its caller expects {} reply, the receive answers with {})",
                WithArticle(&self.reply),
                WithArticle(received_reply)
            )?;
        }
        Ok(())
    }
}

/// A listing's waiting messages by type, after their count: ``(2 `u8`, a `String`)``,
/// the first [`WaitingTypes::SHOWN`] types in order of arrival; then, for a process
/// waiting at a receive of `receives`, each waiting call request it does not take
/// although it receives requests (see [`request_mismatch`]).
pub(crate) struct WaitingTypes<'a, I> {
    /// The types and their counts, in order of first arrival.
    pub(crate) types: I,
    /// What the process waits to receive, if it waits at a typed receive.
    pub(crate) receives: Option<&'a str>,
}

impl<I> WaitingTypes<'_, I> {
    /// How many types are named; the rest are counted.
    const SHOWN: usize = 3;
}

impl<'a, I: Iterator<Item = (&'a str, usize)> + Clone> fmt::Display for WaitingTypes<'_, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut types = self.types.clone().peekable();
        if types.peek().is_none() {
            return Ok(());
        }
        f.write_str(" (")?;
        for (i, (name, count)) in types.by_ref().take(Self::SHOWN).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match count {
                1 => write!(f, "{}", WithArticle(name))?,
                n => write!(f, "{n} `{}`", Short(name))?,
            }
        }
        match types.count() {
            0 => {}
            1 => f.write_str(", and 1 more type")?,
            n => write!(f, ", and {n} more types")?,
        }
        f.write_str(")")?;
        if let Some(receives) = self.receives {
            for (name, _) in self.types.clone() {
                if let Some(mismatch) = request_mismatch(name, receives) {
                    write!(f, "; {mismatch}")?;
                }
            }
        }
        Ok(())
    }
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
    fn a_request_is_told_by_its_path_and_split_at_its_top_level_comma() {
        use super::request_types;
        use crate::Request;
        let pair = |q: &str, r: &str| Some((q.to_owned(), r.to_owned()));
        assert_eq!(
            request_types(std::any::type_name::<Request<String, u64>>()),
            pair("String", "u64")
        );
        assert_eq!(
            request_types(std::any::type_name::<
                Request<(u8, Vec<String>), Result<fn() -> u8, String>>,
            >()),
            pair("(u8, Vec<String>)", "Result<fn() -> u8, String>")
        );
        // As a `recv!` arm writes it.
        assert_eq!(
            request_types("Request<GetCount,u64>"),
            pair("GetCount", "u64")
        );
        assert_eq!(request_types("other::Request<u8, u8>"), None);
        assert_eq!(request_types("u64"), None);
    }

    #[test]
    fn a_mismatched_request_says_what_each_side_expects() {
        use super::request_mismatch;
        use crate::Request;
        let waiting = std::any::type_name::<Request<String, u32>>();
        let said = |receives: &str| request_mismatch(waiting, receives).map(|m| m.to_string());
        assert_eq!(
            said(std::any::type_name::<Request<String, u64>>()).as_deref(),
            Some(
                "a `Request<String, u32>` is waiting but this process receives \
                 `Request<String, u64>` (its caller expects a `u32` reply, the receive \
                 answers with a `u64`)"
            )
        );
        assert_eq!(
            said("Stop | Request<u8,u32>").as_deref(),
            Some(
                "a `Request<String, u32>` is waiting but this process receives \
                 `Request<u8,u32>`"
            )
        );
        // Taken by the receive, or not a request, or a receive of no request.
        assert_eq!(said("Stop | Request<String,u32>"), None);
        assert_eq!(said("u32"), None);
        assert_eq!(request_mismatch("u8", "Request<u8, u8>").map(|_| ()), None);
    }

    #[test]
    fn waiting_types_name_the_first_three_and_count_the_rest() {
        use super::WaitingTypes;
        let said = |types: &[(&'static str, usize)], receives| {
            let types = types.iter().copied();
            WaitingTypes { types, receives }.to_string()
        };
        assert_eq!(said(&[], None), "");
        assert_eq!(said(&[("alloc::string::String", 1)], None), " (a `String`)");
        assert_eq!(
            said(
                &[("u8", 2), ("i32", 1), ("()", 1), ("f64", 4), ("u16", 1)],
                None
            ),
            " (2 `u8`, an `i32`, a `()`, and 2 more types)"
        );
        let request = std::any::type_name::<crate::Request<u8, u32>>();
        assert_eq!(
            said(&[("u8", 1), (request, 1)], Some("Request<u8, u64>")),
            " (a `u8`, a `Request<u8, u32>`); a `Request<u8, u32>` is waiting but this \
             process receives `Request<u8, u64>` (its caller expects a `u32` reply, the \
             receive answers with a `u64`)"
        );
    }

    #[test]
    fn a_process_is_labelled_by_its_short_type_its_entry_and_its_pid() {
        use super::{ProcessLabel, ProcessName};
        use crate::pid::Pid;
        let pid = Pid::from_raw(5);
        let label = |process_type, entry| {
            let name = ProcessName {
                process_type,
                entry,
            };
            ProcessLabel { name, pid }.to_string()
        };
        assert_eq!(
            ProcessLabel::new("my_crate::crawl::Crawler", "run", pid).to_string(),
            "Crawler::run <5>"
        );
        assert_eq!(
            label(Some("my::Pool<alloc::string::String>"), Some("serve")),
            "Pool<String>::serve <5>"
        );
        assert_eq!(label(None, Some("run")), "run <5>");
        assert_eq!(label(Some(""), Some("run")), "run <5>");
        assert_eq!(label(Some("my::Crawler"), None), "Crawler::? <5>");
        assert_eq!(label(None, None), "? <5>");
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(plural(0, "step"), "0 steps");
        assert_eq!(plural(1, "step"), "1 step");
        assert_eq!(plural(2, "message"), "2 messages");
    }
}
