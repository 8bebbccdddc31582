//! The DSL macros. Inside the entries of a `#[process]` impl, the attribute rewrites
//! each call into its `@__wsched_lowered` form, which awaits a suspension point;
//! anywhere else the call reaches the last arm, a compile error that says where the
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
#[macro_export]
macro_rules! yield_cmd {
    (@__wsched_lowered many $($command:expr),+) => {
        $crate::__private::yield_many(($($command,)+)).await
    };
    (@__wsched_lowered one $command:expr) => {
        $crate::__private::yield_one($command).await
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`yield_cmd!` can only be used in the body of an #[entry] or #[suspend] method \
             of an impl block marked #[wsched::process] (not in a closure, an async block or \
             a nested fn there)"
        )
    };
}

/// Yields every command of an iterable in the same step, tagged in order, and suspends
/// until all have completed: evaluates to `Vec<Result<C::Output, YieldError>>`, in the
/// iterable's order. An empty iterable evaluates at once to an empty vector.
///
/// Only usable where [`yield_cmd!`] is.
#[macro_export]
macro_rules! yield_all {
    (@__wsched_lowered $commands:expr) => {
        $crate::__private::yield_all($commands).await
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`yield_all!` can only be used in the body of an #[entry] or #[suspend] method \
             of an impl block marked #[wsched::process] (not in a closure, an async block or \
             a nested fn there)"
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
///
/// Only usable where [`yield_cmd!`] is.
#[macro_export]
macro_rules! recv {
    (@__wsched_lowered) => {
        $crate::__private::recv::<$crate::__private::AnyMessage>(::core::option::Option::None).await
    };
    (@__wsched_lowered timeout $timeout:expr) => {
        $crate::__private::recv::<$crate::__private::AnyMessage>(::core::option::Option::Some(
            $timeout,
        ))
        .await
    };
    (@__wsched_lowered type $ty:ty) => {
        $crate::__private::recv::<$crate::__private::Typed<$ty>>(::core::option::Option::None).await
    };
    (@__wsched_lowered type $ty:ty, timeout $timeout:expr) => {
        $crate::__private::recv::<$crate::__private::Typed<$ty>>(::core::option::Option::Some(
            $timeout,
        ))
        .await
    };
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`recv!` can only be used in the body of an #[entry] or #[suspend] method \
             of an impl block marked #[wsched::process] (not in a closure, an async block or \
             a nested fn there)"
        )
    };
}
