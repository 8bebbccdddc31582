//! The DSL macros (`yield_cmd!`, `yield_all!`, `recv!`, `call!`). Inside the entries
//! of a `#[process]` impl, the attribute rewrites each call into its
//! `@__wsched_lowered` form, which awaits a suspension point; anywhere else the call reaches the last arm, a compile error that says where the
//! macro may be used.

/// Yields commands and suspends the entry until they complete.
///
/// * `yield_cmd!(command)` evaluates to `Result<C::Output, YieldError>`.
/// * `yield_cmd!(a, b, …)` (up to eight commands) yields them all in the same step,
///   tagged in order, and evaluates to the tuple of their results once **all** have
///   completed, whatever the order of completion.
///
/// Only usable in the `#[entry]` and `#[suspend]` methods of a
/// [`#[process]`](crate::process) impl, not in closures or async blocks there; see
/// [`process`](crate::process) for the whole story.
///
/// # Example
///
/// One command, then two of different types together; the handlers decide the
/// outputs (and a missing handler is an error, not a hang):
///
/// ```
/// use wsched::command::Completer;
/// use wsched::prelude::*;
/// use wsched::Scheduler;
///
/// struct Price(&'static str);
/// impl Command for Price {
///     type Output = u32;
/// }
/// struct Stock(&'static str);
/// impl Command for Stock {
///     type Output = u32;
/// }
///
/// struct Shop;
///
/// #[process]
/// impl Shop {
///     #[entry]
///     fn quote(&mut self, item: &'static str) -> Result<String, BoxError> {
///         let price = yield_cmd!(Price(item))?;
///         // Both yielded in one step; resumes when both have completed.
///         let (again, stock) = yield_cmd!(Price(item), Stock(item));
///         assert_eq!(again?, price);
///         match stock {
///             Ok(n) => Ok(format!("{item}: {price} cents, {n} left")),
///             Err(YieldError::NoHandler { .. }) => Ok(format!("{item}: {price} cents")),
///             Err(e) => Err(e.into()),
///         }
///     }
/// }
///
/// let scheduler = Scheduler::builder()
///     .handler(|Price(item): Price, done: Completer<Price>| done.complete(item.len() as u32 * 100))
///     .build()?; // no handler for Stock
/// let pid = scheduler.spawn(Shop, "quote", ("lamp",))?;
/// assert_eq!(scheduler.wait(pid)?.downcast::<String>()?, "lamp: 400 cents");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[macro_export]
macro_rules! yield_cmd {
    (@__wsched_lowered await $checked:block) => {
        $checked.await
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`yield_cmd!` can only be used in the body of an #[entry] or #[suspend] method \
             of an impl block marked #[wsched::process] (not in a closure, an async block or \
             a nested fn there); to suspend in a helper, make it a #[suspend] method of that \
             impl and `.await` it from the entry"
        )
    };
}

/// Yields every command of an iterable in the same step, tagged in order, and suspends
/// until all have completed: evaluates to `Vec<Result<C::Output, YieldError>>`, in the
/// iterable's order. An empty iterable evaluates at once to an empty vector.
///
/// A `yield_all!` of [`Spawn`](crate::command::Spawn)s on a scheduler spawns each
/// child as it comes out of the iterable and evaluates to their PIDs without
/// suspending (the children start while the rest are made); each still takes its
/// tag and gets what the `Spawn` handler would give. They go to the handler after
/// the step instead when something must see each one: a handler registered for
/// `Spawn` by the user, step timing, a recorded history, or TRACE-level tracing of
/// the process; and in the test harness, where they are yields like any other. As
/// with a loop of [`this::spawn`](crate::this::spawn), children spawned before the
/// iterator panics (or the step fails) are running: they are not taken back.
///
/// Only usable where [`yield_cmd!`] is.
///
/// # Example
///
/// Three lookups outstanding at once, completed out of order by a test (the results
/// still come back in the commands' order, matched by tag):
///
/// ```
/// use wsched::prelude::*;
/// use wsched::testing::TestProcess;
///
/// struct Lookup(u32);
/// impl Command for Lookup {
///     type Output = String;
/// }
///
/// struct Resolver;
///
/// #[process]
/// impl Resolver {
///     #[entry]
///     fn resolve(&mut self, ids: Vec<u32>) -> Result<Vec<String>, BoxError> {
///         let names = yield_all!(ids.into_iter().map(Lookup));
///         // Fail on the first error; or look at each Result on its own.
///         Ok(names.into_iter().collect::<Result<_, _>>()?)
///     }
/// }
///
/// let mut t = TestProcess::start(Resolver, "resolve", (vec![7_u32, 8, 9],)).unwrap();
/// assert_eq!(t.last_yields(), [Tag(1), Tag(2), Tag(3)]); // one step, three yields
/// t.complete(Tag(3), "nine".to_string());
/// t.complete(Tag(1), "seven".to_string());
/// t.complete(Tag(2), "eight".to_string());
/// assert_eq!(t.result::<Vec<String>>(), ["seven", "eight", "nine"]);
/// ```
#[macro_export]
macro_rules! yield_all {
    (@__wsched_lowered $commands:expr) => {
        $crate::__private::yield_all($commands).await
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`yield_all!` can only be used in the body of an #[entry] or #[suspend] method \
             of an impl block marked #[wsched::process] (not in a closure, an async block or \
             a nested fn there); to suspend in a helper, make it a #[suspend] method of that \
             impl and `.await` it from the entry"
        )
    };
}

/// Suspends the entry until a message arrives.
///
/// * `recv!()` takes the oldest message: `Result<Message, RecvError>`.
/// * `recv!(T)` takes the oldest message holding a `T`: `Result<T, RecvError>`.
///   Messages of other types are **not** consumed: they stay in the mailbox, in
///   arrival order, for a later `recv!()` or `recv!(U)` (selective receive).
/// * `recv!(timeout = d)` / `recv!(T, timeout = d)` give up after the
///   [`Duration`](std::time::Duration) `d` with [`RecvError::Timeout`](crate::RecvError::Timeout).
///   The timer is a [`Sleep`](crate::command::Sleep) yield, made only if no message is
///   there already; its completion is ignored if a message comes first. A zero
///   timeout never suspends: it is a non-blocking try-receive.
/// * `recv! { arms }` receives by pattern, as Erlang's `receive`: each arm is
///   `pattern: Type if guard => body` (the `: Type` may be left out when the pattern
///   is a struct, tuple-struct or unit-struct pattern, which names its type; the
///   guard is optional), and one `after(d) => body` arm may give up after `d`. It
///   takes the oldest message that some arm takes — the first such arm, in order,
///   with its pattern matched and its guard true — and evaluates to
///   `Result<R, RecvError>`, `R` being the bodies' type (`Err` for a cancel).
///   Messages no arm takes stay in the mailbox, in order. Bindings are values, in
///   guards as in bodies; guards run without suspending, bodies are the entry's own
///   code (they may suspend, `return` or use `?`). One suspension point, whatever
///   the number of arms.
///
/// Only usable where [`yield_cmd!`] is.
///
/// # Example
///
/// A typed receive leaves other messages queued, in order; a timeout gives up:
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::Scheduler;
///
/// struct Start;
///
/// struct Listener;
///
/// #[process]
/// impl Listener {
///     #[entry]
///     fn listen(&mut self) -> Result<Vec<String>, BoxError> {
///         recv!(Start)?; // the Strings sent before it stay in the mailbox
///         let mut heard = Vec::new();
///         loop {
///             match recv!(String, timeout = Duration::from_millis(50)) {
///                 Ok(text) => heard.push(text),
///                 Err(RecvError::Timeout) => return Ok(heard), // quiet for 50 ms
///                 Err(e) => return Err(e.into()),
///             }
///         }
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let pid = scheduler.spawn(Listener, "listen", ())?;
/// scheduler.send(pid, "one".to_string())?;
/// scheduler.send(pid, "two".to_string())?;
/// scheduler.send(pid, Start)?;
/// let heard = scheduler.wait(pid)?.downcast::<Vec<String>>()?;
/// assert_eq!(heard, ["one", "two"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Arms: a `Report` about a known job, or the `Down` of one monitor, or a second of
/// quiet; everything else waits:
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::{Down, Scheduler};
///
/// struct Report {
///     job: u32,
///     done: bool,
/// }
///
/// struct Coordinator;
///
/// #[process]
/// impl Coordinator {
///     #[entry]
///     fn run(&mut self, worker: Pid) -> Result<String, BoxError> {
///         let watch = this::monitor(worker);
///         let outcome = recv! {
///             Report { job, done: true } if job < 10 => format!("job {job} done"),
///             Down { monitor, reason, .. } if monitor == watch => format!("worker ended: {reason}"),
///             after(Duration::from_secs(1)) => "nothing for a second".to_owned(),
///         }?;
///         Ok(outcome)
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let worker = scheduler.spawn(Coordinator, "run", (Pid::from_raw(1),))?; // a stand-in
/// let pid = scheduler.spawn(Coordinator, "run", (worker,))?;
/// scheduler.send(pid, Report { job: 12, done: true })?; // a guard refuses it: it stays
/// scheduler.send(pid, Report { job: 3, done: true })?;
/// let outcome = scheduler.wait(pid)?.downcast::<String>()?;
/// assert_eq!(outcome, "job 3 done");
/// # let _ = scheduler.wait(worker);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[macro_export]
macro_rules! recv {
    (@__wsched_lowered arms $lowered:block) => {
        $lowered
    };
    // The closure's `Location::caller()` is this macro's call site: the receive's
    // place, held by the future as a type (see `__private::At`).
    (@__wsched_lowered) => {
        $crate::__private::recv_untimed::<$crate::__private::AnyMessage, _>(|| {
            ::core::panic::Location::caller()
        })
        .await
    };
    (@__wsched_lowered timeout $timeout:expr) => {
        $crate::__private::recv_at::<$crate::__private::AnyMessage, _>(
            ::core::option::Option::Some($crate::__private::timeout($timeout)),
            || ::core::panic::Location::caller(),
        )
        .await
    };
    (@__wsched_lowered type $ty:ty) => {
        $crate::__private::recv_untimed::<$crate::__private::Typed<$ty>, _>(|| {
            ::core::panic::Location::caller()
        })
        .await
    };
    (@__wsched_lowered type $ty:ty, timeout $timeout:expr) => {
        $crate::__private::recv_at::<$crate::__private::Typed<$ty>, _>(
            ::core::option::Option::Some($crate::__private::timeout($timeout)),
            || ::core::panic::Location::caller(),
        )
        .await
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`recv!` can only be used in the body of an #[entry] or #[suspend] method \
             of an impl block marked #[wsched::process] (not in a closure, an async block or \
             a nested fn there); to suspend in a helper, make it a #[suspend] method of that \
             impl and `.await` it from the entry"
        )
    };
}

/// Calls another process and suspends the entry until the answer: one suspension
/// point for the whole request/reply.
///
/// * `call!(pid, request)` sends `pid` a [`Request`](crate::Request) holding `request`
///   and a [`Reply`](crate::Reply) handle, and evaluates to
///   `Result<R, CallError<Q>>`: the reply, an `R` (inferred from where the answer
///   goes, e.g. `let n: u32 = call!(pid, 5_u32)?;`), or a
///   [`CallError`](crate::CallError).
/// * `call!(pid, request, timeout = d)` also gives up after the
///   [`Duration`](std::time::Duration) `d` with
///   [`CallError::Timeout`](crate::CallError::Timeout).
///
/// The callee is monitored during the call: its death is an error at once
/// ([`CallError::CalleeDied`](crate::CallError::CalleeDied), with its reason), as is
/// a reply dropped unanswered ([`CallError::NoReply`](crate::CallError::NoReply)); a
/// callee that is not live gets nothing and the request comes back
/// ([`CallError::NoSuchProcess`](crate::CallError::NoSuchProcess)), as it does from
/// a live callee whose bounded mailbox is full and rejects
/// ([`CallError::MailboxFull`](crate::CallError::MailboxFull)). A cancel of the
/// calling process ends the wait with
/// [`CallError::Cancelled`](crate::CallError::Cancelled). A reply after the call gave
/// up is dropped quietly (its `send` returns `false`). The call is one yield of the
/// built-in [`Call`](crate::command::Call) command, with the next tag.
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::Scheduler;
///
/// struct Doubler;
///
/// #[process]
/// impl Doubler {
///     #[entry]
///     fn serve(&mut self) -> Result<(), BoxError> {
///         loop {
///             let Request { request, reply, .. } = recv!(Request<u32, u32>)?;
///             reply.send(request * 2);
///         }
///     }
/// }
///
/// struct Asker;
///
/// #[process]
/// impl Asker {
///     #[entry]
///     fn ask(&mut self, doubler: Pid) -> Result<u32, BoxError> {
///         let four: u32 = call!(doubler, 2_u32, timeout = Duration::from_secs(5))?;
///         Ok(four)
///     }
/// }
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let doubler = scheduler.spawn_detached(Doubler, "serve", ())?;
/// let asker = scheduler.spawn(Asker, "ask", (doubler,))?;
/// assert_eq!(scheduler.wait(asker)?.downcast::<u32>()?, 4);
/// # Ok::<(), BoxError>(())
/// ```
///
/// Only usable where [`yield_cmd!`] is.
#[macro_export]
macro_rules! call {
    (@__wsched_lowered $pid:expr, $request:expr, timeout $timeout:expr) => {
        $crate::__private::call(
            $pid,
            $request,
            ::core::option::Option::Some($crate::__private::timeout($timeout)),
        )
        .await
    };
    (@__wsched_lowered $pid:expr, $request:expr) => {
        $crate::__private::call($pid, $request, ::core::option::Option::None).await
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`call!` can only be used in the body of an #[entry] or #[suspend] method \
             of an impl block marked #[wsched::process] (not in a closure, an async block or \
             a nested fn there); to suspend in a helper, make it a #[suspend] method of that \
             impl and `.await` it from the entry"
        )
    };
}
