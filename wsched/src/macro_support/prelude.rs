//! Everything an entry usually needs: `use wsched::prelude::*;`.
//!
//! The [`#[process]`](crate::process) attribute, the DSL macros [`yield_cmd!`](crate::yield_cmd),
//! [`yield_all!`](crate::yield_all), [`recv!`](crate::recv) and [`call!`](crate::call), the
//! [`this`](crate::this) module, and the types their results are made of.

pub use crate::command::{Command, Join, Sleep, Spawn, TimerRef};
pub use crate::engine::process::{Message, Tag};
pub use crate::error::{BoxError, SendError, SpawnError, YieldError};
pub use crate::exit::ExitReason;
pub use crate::payload::Payload;
pub use crate::pid::Pid;
pub use crate::runtime::{CallError, Down, Exit, MonitorRef, Reply, Request};
pub use crate::runtime::{Overflow, SpawnOptions};
pub use crate::{call, process, recv, this, yield_all, yield_cmd, RecvError};
