//! The handler table: which function performs which command type, and how a yield
//! reaches it.

use std::any::{Any, TypeId};
use std::collections::HashMap;

use super::blocking::BlockingPool;
use super::completer::{catch_panics, Completer, RawCompleter};
use crate::command::Command;
use crate::error::{BuildError, YieldError};
use crate::process::Yield;
use crate::runtime::cell::ProcessCell;
use crate::runtime::Handle;
use std::sync::Arc;

type ErasedHandler = dyn Fn(Box<dyn Any + Send>, RawCompleter) + Send + Sync;

/// Where a handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// On the worker, right after the step that yielded: for handlers that return at
    /// once (complete now, or hand the completer to another thread).
    Worker,
    /// On the blocking pool: for handlers that block.
    Blocking,
}

/// One registration, as the builder collects it.
pub(crate) struct Registration {
    type_id: TypeId,
    command: &'static str,
    placement: Placement,
    builtin: bool,
    call: Arc<ErasedHandler>,
}

impl Registration {
    pub(crate) fn new<C, F>(placement: Placement, handler: F) -> Self
    where
        C: Command,
        F: Fn(C, Completer<C>) + Send + Sync + 'static,
    {
        Self {
            type_id: TypeId::of::<C>(),
            command: std::any::type_name::<C>(),
            placement,
            builtin: false,
            call: Arc::new(move |command: Box<dyn Any + Send>, raw: RawCompleter| {
                let command = *command
                    .downcast::<C>()
                    .expect("handlers are looked up by the command's TypeId");
                handler(command, Completer::new(raw));
            }),
        }
    }

    pub(crate) fn builtin(mut self) -> Self {
        self.builtin = true;
        self
    }
}

pub(crate) struct Handlers {
    table: HashMap<TypeId, Registration>,
}

impl Handlers {
    /// Builds the table. A user registration replaces a built-in one for the same
    /// command (e.g. a virtual-time `Sleep` in tests); two user registrations for one
    /// command are an error.
    pub(crate) fn new(registrations: Vec<Registration>) -> Result<Self, BuildError> {
        let mut table: HashMap<TypeId, Registration> = HashMap::new();
        for registration in registrations {
            match table.get(&registration.type_id) {
                Some(existing) if !existing.builtin && !registration.builtin => {
                    return Err(BuildError::DuplicateHandler {
                        command: registration.command,
                    });
                }
                Some(existing) if !existing.builtin => continue,
                _ => {
                    table.insert(registration.type_id, registration);
                }
            }
        }
        Ok(Self { table })
    }

    /// Sends one yield to its handler. A command nobody handles completes at once
    /// with [`YieldError::NoHandler`].
    pub(crate) fn dispatch(
        &self,
        handle: &Handle,
        blocking: &std::sync::Arc<BlockingPool>,
        cell: &Arc<ProcessCell>,
        y: Yield,
    ) {
        let (tag, command, type_id, name) = y.into_parts();
        let raw = RawCompleter::new(handle.clone(), cell.clone(), tag, name);
        let Some(registration) = self.table.get(&type_id) else {
            // The command is user data: its drop may panic, on a worker.
            crate::runtime::drop_quietly(command);
            raw.deliver(Err(YieldError::NoHandler { command: name }));
            return;
        };
        match registration.placement {
            Placement::Worker => {
                catch_panics(|| (registration.call)(command, raw));
            }
            Placement::Blocking => {
                let call = registration.call.clone();
                blocking.run(Box::new(move || {
                    catch_panics(|| call(command, raw));
                }));
            }
        }
    }
}
