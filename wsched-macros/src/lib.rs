//! The `#[process]` attribute of [wsched](https://docs.rs/wsched). Use it through
//! `wsched::process` (or `wsched::prelude::*`); its documentation is there.

use proc_macro::TokenStream;

// | file | concern |
// |---|---|
// | `model.rs` | parse and check the impl block: entries, `#[suspend]` helpers, errors |
// | `body.rs` | lower method bodies: the suspension macros, and where they cannot work |
// | `recv_arms.rs` | `recv!` with arms: parse, check, expand |
// | `expand.rs` | the generated `IntoProcess` impl and entry dispatch |
// Expansions name only `::wsched::__private` and `::wsched`'s public items.
mod body;
mod expand;
mod model;
mod recv_arms;
#[cfg(test)]
mod tests;

/// Turns the inherent `impl` block of a plain struct into a wsched process whose
/// `#[entry]` methods are started by name.
///
/// ```
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// /// A command: "fetch this page". A handler registered on the scheduler performs it.
/// struct Fetch {
///     url: String,
/// }
/// impl Command for Fetch {
///     type Output = String;
/// }
///
/// /// A plain struct, built as usual.
/// struct Greeter {
///     greeted: u32,
/// }
///
/// #[process]
/// impl Greeter {
///     #[entry]
///     fn greet(&mut self, name: String) -> Result<String, BoxError> {
///         let page = yield_cmd!(Fetch { url: format!("/users/{name}") })?; // suspends
///         let ack: &'static str = recv!(&'static str)?;                      // suspends
///         self.greeted += 1;
///         Ok(format!("{page} ({ack}, {} greeted)", self.greeted))
///     }
/// }
///
/// // On a scheduler: `sched.spawn(Greeter { greeted: 0 }, Greeter::GREET, ("bob".to_string(),))`
/// // (`Greeter::GREET` is the entry's typed name: the compiler checks the arguments).
/// // Step by step, without threads:
/// let mut t = TestProcess::start(Greeter { greeted: 0 }, Greeter::GREET, ("bob".to_string(),)).unwrap();
/// let (tag, fetch) = t.expect_yield::<Fetch>();
/// assert_eq!((tag, fetch.url.as_str()), (Tag(1), "/users/bob"));
/// t.complete(tag, "<h1>bob</h1>".to_string());
/// t.send("ack");
/// assert_eq!(t.result::<String>(), "<h1>bob</h1> (ack, 1 greeted)");
/// ```
///
/// The struct stays an ordinary struct: any `Send + 'static` type, generic or not, built
/// with its usual syntax and handed as it is to `Scheduler::spawn`, `Context::spawn`,
/// [`wsched::this::spawn`](../wsched/this/fn.spawn.html), the [`Spawn`](../wsched/command/struct.Spawn.html) command or
/// [`TestProcess::start`](../wsched/testing/struct.TestProcess.html#method.start). The macro implements
/// [`IntoProcess`](../wsched/trait.IntoProcess.html) for it: `init` moves the struct into the chosen
/// entry's coroutine, which owns it until the process ends; `close` drops it.
///
/// # Entries
///
/// `#[entry]` marks a method that can be started by name; `#[entry(name = "other")]`
/// starts it by another name. An impl has one entry or more, with distinct names.
///
/// * The receiver is `&mut self`. The other parameters are the entry's arguments, decoded
///   in order from the input payloads (`sched.spawn(p, "greet", ("bob".to_string(), 3_u8))`
///   gives two payloads). They are owned `Send + 'static` types; patterns are fine.
/// * Entries are not `async`, `const`, `unsafe`, `extern` or generic (the impl block
///   itself may be generic).
/// * Each entry has a *typed name*: an associated constant of the struct, the entry's
///   name in capitals (`Greeter::GREET`; made from the method's name when the entry's
///   is no identifier, as in `#[entry(name = "fetch-all")]`), of type
///   [`Entry<Self, (A, B, …)>`](../wsched/struct.Entry.html) with the argument types,
///   and the method's visibility. Spawned with it
///   (`sched.spawn(Greeter { greeted: 0 }, Greeter::GREET, ("bob".to_string(),))`), the
///   arguments are checked by the compiler: a wrong type or number is an error at the
///   spawn, and integer literals take the argument's type. The name as a string stays for
///   names chosen at run time.
/// * At `init`, an unknown name fails with [`InitError::UnknownMethod`](../wsched/enum.InitError.html#variant.UnknownMethod),
///   which lists the entries; a wrong number of payloads with `ArgumentCount`; a payload of
///   the wrong type with `ArgumentType`, naming the entry, the argument, its position and
///   both types.
/// * The entry returns a value, which becomes the process's result
///   ([`Status::Done`](../wsched/enum.Status.html#variant.Done)); or a `Result<T, E>` (any type whose last path
///   segment is `Result`: `std::io::Result<T>`, `anyhow::Result<T>`…), whose `Ok(T)` is the
///   result and whose `Err(E)` ends the process with that error (`E: Into<BoxError>`,
///   so any error type, `String` or `&str`). A `Result` behind an alias of another name is
///   a plain value.
///
/// The body is ordinary Rust: `let`, loops, `match`, `?`, early `return`, borrows of
/// `self` and of locals that live across suspension points. The macro makes the method an
/// `async fn` and lets the compiler build the state machine, so everything the compiler
/// accepts in an `async fn` works — except awaiting arbitrary futures (see below).
///
/// # Suspension points
///
/// Inside entries (and `#[suspend]` methods), and nowhere else:
///
/// | call | evaluates to |
/// |---|---|
/// | `yield_cmd!(cmd)` | `Result<C::Output, YieldError>` once the command completes |
/// | `yield_cmd!(a, b, …)` (2 to 8) | `(Result<A::Output, YieldError>, Result<B::Output, YieldError>, …)` once **all** completed |
/// | `yield_all!(iterable)` | `Vec<Result<C::Output, YieldError>>`, in order, once all completed |
/// | `recv!()` | `Result<Message, RecvError>`: the oldest message, with its sender |
/// | `recv!(T)` | `Result<T, RecvError>`: the oldest message holding a `T` |
/// | `recv!(timeout = d)`, `recv!(T, timeout = d)` | the same, or `Err(RecvError::Timeout)` after the `Duration` `d` |
/// | `call!(pid, request)` | `Result<R, CallError<Q>>`: the reply of a request/reply call, or why there was none (a dead callee at once, with its reason) |
/// | `call!(pid, request, timeout = d)` | the same, or `Err(CallError::Timeout { .. })` after the `Duration` `d` |
///
/// **Tags.** Every yielded command gets the next tag of the process, `Tag(1)`, `Tag(2)`, …,
/// when the `yield_cmd!`/`yield_all!` is evaluated: program order, so the same code fed the
/// same events yields the same tags. Commands yielded together are all dispatched in the
/// same step and complete in any order; their results are matched by tag. (A
/// `yield_all!` of `Spawn`s on a scheduler spawns each child as it is yielded, and does
/// not suspend: see [`yield_all!`](../wsched/macro.yield_all.html).) A completion
/// holding another type than `C::Output` (possible only with hand-made events) gives
/// [`YieldError::WrongOutputType`](../wsched/enum.YieldError.html#variant.WrongOutputType).
///
/// **Receiving.** Messages queue in the process's mailbox in arrival order, including
/// those that arrive while it waits for yields. `recv!()` takes the oldest. `recv!(T)` is a
/// *selective* receive: it takes the oldest message holding a `T` and leaves the others
/// where they are, in order, for a later `recv!()` or `recv!(U)`: no message is ever
/// dropped or reordered by a typed receive ([`wsched::this::mailbox_len`](../wsched/this/fn.mailbox_len.html) tells how many
/// wait). `recv!(…, timeout = d)` yields a [`Sleep(d)`](../wsched/command/struct.Sleep.html) only if no
/// matching message is there already; if a message wins, the timer's late completion is
/// ignored; if the timer wins, no message is taken. A zero timeout never suspends: it is a
/// try-receive. (The timer uses a tag like any yield.)
///
/// **Calling.** `call!(pid, request)` is a request/reply call as one suspension point: it
/// yields a built-in [`Call`](../wsched/command/struct.Call.html) (the next tag), which sends
/// `pid` a [`Request`](../wsched/struct.Request.html) and monitors it, and evaluates to the
/// reply or a [`CallError`](../wsched/enum.CallError.html): the callee's death (at once, with
/// its reason), a reply dropped unanswered, an unknown or dead callee (the request comes
/// back), the timeout of `call!(…, timeout = d)`, or a cancel. A reply after the call gave
/// up is dropped quietly.
///
/// # The running process: `wsched::this`
///
/// [`wsched::this`](../wsched/this/index.html) gives an entry its own [`pid()`](../wsched/this/fn.pid.html), the name of its
/// [`entry()`](../wsched/this/fn.entry.html), [`send`](../wsched/this/fn.send.html),
/// [`spawn`](../wsched/this/fn.spawn.html) / [`spawn_detached`](../wsched/this/fn.spawn_detached.html), and the
/// whole [`context()`](../wsched/this/fn.context.html). These are ordinary functions: they work in
/// closures and in any code an entry calls, while the process is being stepped.
///
/// # Cancellation
///
/// A cancel request (shutdown, `Scheduler::cancel(pid)`, or `wsched::this::cancel(pid)`
/// from another process) reaches the entry as an error from
/// the suspension point where it waits: `Err(YieldError::Cancelled)` from `yield_cmd!`,
/// `Err(RecvError::Cancelled)` from `recv!`. It is reported once, by the first suspension
/// point that would have to wait (results that are already there are handed out first);
/// with several commands yielded together, the completed ones keep their results and the
/// others give `Cancelled`. Later suspension points work normally, so the entry can clean
/// up — yielding more commands if it needs to — before it returns.
/// [`wsched::this::is_cancelled`](../wsched/this/fn.is_cancelled.html) stays `true` afterwards.
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// struct Flush;
/// impl Command for Flush {
///     type Output = ();
/// }
///
/// struct Worker;
///
/// #[process]
/// impl Worker {
///     #[entry]
///     fn run(&mut self) -> &'static str {
///         loop {
///             match yield_cmd!(Sleep(Duration::from_secs(1))) {
///                 Ok(()) => continue,
///                 Err(YieldError::Cancelled) => break,
///                 Err(_) => return "timer failed",
///             }
///         }
///         let _ = yield_cmd!(Flush); // clean up, then finish
///         "flushed"
///     }
/// }
///
/// let mut t = TestProcess::start(Worker, "run", ()).unwrap();
/// t.cancel();
/// let (tag, _) = t.expect_yield::<Flush>();
/// t.complete(tag, ());
/// assert_eq!(t.result::<&str>(), "flushed");
/// ```
///
/// # Helper methods that suspend: `#[suspend]`
///
/// Code shared by entries can suspend too: mark the method `#[suspend]` and call it with
/// `.await`, as `self.helper(args).await` or `Self::helper(args).await`. It becomes an
/// `async fn` with the same rules inside as an entry; it may take `&mut self`, `&self` or
/// no receiver, and be generic. Entries can be awaited the same way. No other `.await` is
/// allowed (that is how the macro keeps foreign futures out).
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// struct Poller {
///     polls: u32,
/// }
///
/// #[process]
/// impl Poller {
///     #[suspend]
///     fn pause(&mut self, ms: u64) -> Result<(), YieldError> {
///         self.polls += 1;
///         yield_cmd!(Sleep(Duration::from_millis(ms)))
///     }
///
///     #[entry]
///     fn run(&mut self) -> Result<u32, BoxError> {
///         self.pause(10).await?;
///         self.pause(20).await?;
///         Ok(self.polls)
///     }
/// }
///
/// let mut t = TestProcess::start(Poller { polls: 0 }, "run", ()).unwrap();
/// t.complete(Tag(1), ());
/// t.complete(Tag(2), ());
/// assert_eq!(t.result::<u32>(), 2);
/// ```
///
/// # Errors
///
/// At compile time, spanned on the offending code (all the mistakes of one impl are
/// reported together):
///
/// * `#[process]` on something other than an inherent impl block, or with arguments; an
///   impl without `#[entry]`; duplicate entry names; a bad `#[entry(...)]` argument;
/// * an entry that is `async`, generic, `const`, `unsafe`, whose receiver is not
///   `&mut self`, or whose argument is a reference or `impl Trait`;
/// * an entry whose typed name is the name of another item of the impl, or of another
///   entry's typed name (`go_on` and `goOn` are both `GO_ON`);
/// * `yield_cmd!`, `yield_all!`, `recv!` or `call!` outside entries and `#[suspend]` methods, or
///   inside a closure or an async block in one (these are not part of the coroutine);
/// * `.await` in an entry, except on this impl's own entries and `#[suspend]` methods;
///   a call of one of those that is not awaited (`let _ = self.helper();` would only
///   build the coroutine and drop it, never running it);
/// * a `timeout = d` of `recv!` or `call!` whose `d` is not a `Duration`;
/// * holding a value that is not `Send` (an `Rc`, a `RefCell` guard…) across a suspension
///   point: processes move between worker threads, and rustc explains which value and
///   which suspension point.
///
/// At run time: a future that is not a wsched suspension point, awaited where the macro
/// could not see it (say, inside another macro's arguments that are not expressions),
/// fails the step with an error naming the entry instead of hanging. A panic in an entry
/// ends that process with [`ProcessError::Panicked`](../wsched/enum.ProcessError.html#variant.Panicked); the
/// scheduler and the test harness catch it.
///
/// # Inspection
///
/// After each step the process reports where it waits: the file, line and column of the
/// `yield_cmd!` / `recv!` call and what it waits for (the command type and how many, or
/// the message type), as a [`SuspendPoint`](../wsched/struct.SuspendPoint.html). The scheduler's process
/// listing and the harness's failure messages show it.
///
/// # What it generates
///
/// The impl block itself, with entries and `#[suspend]` methods made `async fn` and the
/// DSL calls rewritten to await the suspension points of `wsched::__private`; a second
/// inherent impl with the entries' typed names (`const GREET: Entry<Self, (String,)>`);
/// and
/// `IntoProcess for YourStruct`, whose process is the generic state machine that steps the
/// coroutine with a no-op waker. The machine gets the entry names and a closure that, at
/// `init`, decodes the arguments of the entry asked for and builds the coroutine: one
/// `async move` block for all the entries, owning the struct, which the machine holds
/// inline (no allocation of its own per process).
#[proc_macro_attribute]
pub fn process(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::process(attr.into(), item.into()).into()
}
