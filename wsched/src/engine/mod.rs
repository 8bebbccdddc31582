//! The engine: what a process is, and the machinery that runs processes.
//!
//! May use: `time`, the crate root (the vocabulary every layer speaks: PIDs,
//! payloads, exit reasons, errors, `sync`).
//!
//! | file | concern |
//! |---|---|
//! | `process.rs` | the [`Process`](crate::Process) trait and what a step takes and gives |
//! | `context.rs` | a process's [`Context`](crate::Context) |
//! | `handle.rs` | a [`Handle`](crate::Handle) to a scheduler: its engine part |
//! | `hooks.rs` | the seam to the layers above: the hooks a step, a yield and a process's end call, and the instrument hooks |
//! | `shared.rs` | state shared by all workers: spawning, sending, scheduling, ending |
//! | `driver.rs` | how workers are started and driven (a seam: one OS thread per worker, static) |
//! | `worker.rs` | the worker loop: find work, step, dispatch |
//! | `completion.rs` | the return path of a yield: the untyped completer, and completions straight into the next step |
//! | `cell/` | one process, in one allocation: its body, mailbox and result slot; the recycling of cells' memory |
//! | `state.rs` | the process state machine (one atomic word) |
//! | `bounded.rs` | bounded mailboxes: a capacity on messages, and what a full one does |
//! | `counters.rs` | the always-on counters: per worker, processes started and ended; the coarse clock |
//! | `dead_letters.rs` | what could not be delivered (unread when a process ended, dropped by a full mailbox, a timed message to a dead PID): to a hook and a count |
//! | `unobserved.rs` | failures nobody joins, monitors or links to: to a hook (stderr by default) and a count |
//! | `held.rs` | messages a process took in but has not received, for listings and bounded mailboxes |
//! | `spawn_options.rs` | how a process is spawned: its mailbox, whether its result is kept |
//! | `registry.rs` | the PID table (a slab indexed by PID) |
//! | `queue/` | the per-worker deque, the LIFO slot and the global injection queue |
//! | `random.rs` | the runtime's randomness (a seam: seedable, one source, static) |
//! | `idle.rs` | spinning, parking and waking workers |
//! | `live.rs` | the live-process count, per worker, that shutdown waits on |

pub(crate) mod bounded;
pub(crate) mod cell;
pub(crate) mod completion;
pub(crate) mod context;
pub(crate) mod counters;
pub(crate) mod dead_letters;
pub(crate) mod driver;
pub(crate) mod handle;
pub(crate) mod held;
pub(crate) mod hooks;
pub(crate) mod idle;
pub(crate) mod live;
pub(crate) mod process;
pub(crate) mod queue;
pub(crate) mod random;
pub(crate) mod registry;
pub(crate) mod shared;
pub(crate) mod spawn_options;
pub(crate) mod state;
pub(crate) mod unobserved;
pub(crate) mod worker;
