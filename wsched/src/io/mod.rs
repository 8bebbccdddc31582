//! Async I/O for processes, on tokio (the `tokio` feature).
//!
//! A process never `.await`s: it yields a command and is parked until the command
//! completes. An **async handler** performs the command as a future on a tokio
//! runtime, so the libraries that need a reactor (sockets, HTTP clients, database
//! drivers) can serve processes, and the process stays what it was — a state
//! machine that can be cancelled, killed or time out while the future runs. When
//! nobody waits for the result any more, the future is dropped at once: the yield
//! was withdrawn, the process ended, its deadline passed, or the scheduler shut
//! down.
//!
//! * [`Builder::async_handler`](crate::Builder::async_handler) and
//!   [`Builder::async_handler_with`](crate::Builder::async_handler_with) register
//!   handlers, the second with [`AsyncOptions`] (at most N futures in flight, a
//!   timeout) and an [`IoContext`] (the process, the tag, whether the result is
//!   still wanted).
//! * The runtime is one the scheduler owns (started with the first future, shut
//!   down last at the scheduler's shutdown; see
//!   [`Builder::io_threads`](crate::Builder::io_threads)) or the application's own
//!   ([`Builder::io_runtime`](crate::Builder::io_runtime)), which wsched never shuts
//!   down.
//! * [`tcp`] makes sockets processes, the Erlang way: a listener spawns a process per
//!   connection, which reads a chunk only when it asks for one.
//! * [`udp`] does the same for UDP: a socket is a process's, which receives a
//!   datagram only when it asks for one, and sends with a command.
//!
//! May use: `command`, `services`, `observe`, `engine`, `time`, the crate root.
//!
//! | file | concern |
//! |---|---|
//! | `runtime.rs` | the tokio runtime futures run on: owned or borrowed, started lazily, shut down last |
//! | `handler.rs` | async handlers: options, the future's life from spawn to completion or abort, their metrics |
//! | `active.rs` | the `{active, once}` protocol a socket's owner and its reader share |
//! | `tcp.rs` | TCP listeners and connections as processes |
//! | `udp.rs` | UDP sockets as processes |

mod active;
pub(crate) mod handler;
pub(crate) mod runtime;
pub mod tcp;
pub mod udp;

pub use handler::{AsyncHandlerMetrics, AsyncOptions, IoContext, WhenFull};
pub(crate) use runtime::IoRuntime;
