//! The handler table: which function performs which command type, and how a yield
//! reaches it.

use std::any::TypeId;
use std::cell::Cell;
use std::collections::HashMap;
use std::num::NonZeroU64;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::completer::Completer;
use crate::command::{Command, Spawn};
use crate::engine::cell::CellRef;
use crate::engine::completion::{catch_panics, RawCompleter};
use crate::engine::process::{Tag, Yield};
use crate::engine::shared::Shared;
use crate::engine::worker::{self, Caller};
use crate::error::{BuildError, YieldError};
use crate::fast_hash::FastHash;
use crate::payload::Payload;
use std::sync::Arc;

impl Shared {
    /// The handlers registered for commands.
    #[inline(always)]
    pub(crate) fn handlers(&self) -> &Handlers {
        self.part()
    }
}

/// Takes the command (a `C`) out of the payload where the step wrote it, makes the
/// completer for the yield tagged `Tag` of the process in the cell, and calls the
/// handler: built in the generic closure, so that nothing type-erased is moved
/// through memory on the way.
pub(crate) type ErasedHandler = dyn Fn(&mut Payload, &CellRef, Tag) + Send + Sync;

/// Where a handler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// On the worker, right after the step that yielded: for handlers that return at
    /// once (complete now, or hand the completer to another thread; an async
    /// handler spawns its future).
    Worker,
    /// On the blocking pool: for handlers that block.
    Blocking,
}

/// One registration, as the builder collects it.
pub(crate) struct Registration {
    type_id: TypeId,
    command: &'static str,
    /// What gives `command`, a word to keep (see `timed`).
    command_name: fn() -> &'static str,
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
        let call = move |command: &mut Payload, cell: &CellRef, tag: Tag| {
            let command = take_command::<C>(command);
            let raw = RawCompleter::for_yield(cell, tag, std::any::type_name::<C>);
            handler(command, Completer::new(raw));
        };
        Self::with_call::<C>(placement, Arc::new(call))
    }

    /// A handler that runs on the worker, given as the erased call itself (an async
    /// handler, which spawns its future there: see `io/handler.rs`).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn on_worker<C: Command>(call: Arc<ErasedHandler>) -> Self {
        Self::with_call::<C>(Placement::Worker, call)
    }

    fn with_call<C: Command>(placement: Placement, call: Arc<ErasedHandler>) -> Self {
        Self {
            type_id: TypeId::of::<C>(),
            command: std::any::type_name::<C>(),
            command_name: std::any::type_name::<C>,
            placement,
            builtin: false,
            call,
        }
    }

    pub(crate) fn builtin(mut self) -> Self {
        self.builtin = true;
        self
    }

    /// The command's type name.
    #[cfg_attr(not(any(feature = "tokio", feature = "sim")), allow(dead_code))]
    pub(crate) fn command(&self) -> &'static str {
        self.command
    }

    /// The command's type.
    #[cfg(feature = "sim")]
    pub(crate) fn type_id(&self) -> TypeId {
        self.type_id
    }

    /// Where the handler runs.
    #[cfg(feature = "sim")]
    pub(crate) fn placement(&self) -> Placement {
        self.placement
    }

    /// This registration, for a scheduler that times its steps: a handler that runs
    /// on the worker counts its time there as the yielding process's busy time, and
    /// the long-step detector sees it running, naming its command (see
    /// `observe/timing.rs`). A scheduler that does not time steps keeps the handler
    /// as it is: nothing is added to the dispatch of a yield.
    fn timed(mut self) -> Self {
        if self.placement != Placement::Worker {
            return self;
        }
        let (handler, command) = (self.call.clone(), self.command_name);
        self.call = Arc::new(move |payload: &mut Payload, cell: &CellRef, tag: Tag| {
            let shared = cell.handle().shared();
            match (shared.timing(), worker::caller(shared)) {
                (Some(timing), Caller::Worker(index)) => {
                    let ticks = timing.run_handler(index, command, || handler(payload, cell, tag));
                    cell.add_busy(ticks);
                }
                _ => handler(payload, cell, tag),
            }
        });
        self
    }
}

/// Takes the command out of the payload the step wrote it in.
#[inline(always)]
pub(crate) fn take_command<C: Command>(payload: &mut Payload) -> C {
    payload
        .take_in_place::<C>()
        .unwrap_or_else(|| unreachable!("handlers are looked up by the command's TypeId"))
}

type Table = HashMap<TypeId, Registration, FastHash>;

pub(crate) struct Handlers {
    table: Table,
    /// Tells this table's entries in [`LAST_FOUND`] from another's: never reused, so
    /// an entry left by a table since dropped matches nothing.
    id: NonZeroU64,
    /// Whether a `yield_all!` of [`Spawn`]s spawns each child as it is yielded and
    /// completes its yield at once, instead of leaving the commands to this
    /// table's handler after the step: the built-in handler does nothing else, on
    /// the worker, at once. Spawning during the step lets the children start
    /// (and be stolen) while their parent is still making the rest, where the
    /// handler started none before the parent had made them all; and it spares
    /// each yield its dispatch and its completion event. Off when a user's handler
    /// replaced the built-in one (it must see every `Spawn`), and with step timing
    /// (which times the handlers' runs); the instruments can turn it off per
    /// process (see `Instrument::yields_watched`).
    spawns_at_yield: bool,
}

/// Where the next [`Handlers`] id comes from.
static NEXT_TABLE_ID: AtomicU64 = AtomicU64::new(1);

/// The registration a thread found last, with the table and command it was found
/// for. A worker dispatches the same few commands over and over, and the table's
/// probe (hash, control-group match, key compare: one chain of dependent loads)
/// was the longest stall of a yield; comparing the command with the last one found
/// is a short one.
#[derive(Clone, Copy)]
struct Found {
    table: NonZeroU64,
    command: TypeId,
    registration: NonNull<Registration>,
}

#[cfg(not(loom))]
thread_local! {
    /// See [`Found`]. Per thread, as each worker dispatches on its own; read only
    /// by [`Handlers::find`].
    static LAST_FOUND: Cell<Option<Found>> = const { Cell::new(None) };
}
// loom runs its threads on one OS thread: thread-locals must be its own.
#[cfg(loom)]
loom::thread_local! {
    static LAST_FOUND: Cell<Option<Found>> = Cell::new(None);
}

impl Handlers {
    /// Builds the table. A user registration replaces a built-in one for the same
    /// command (e.g. a virtual-time `Sleep` in tests); two user registrations for one
    /// command are an error.
    pub(crate) fn new(registrations: Vec<Registration>, timed: bool) -> Result<Self, BuildError> {
        let mut table = Table::default();
        for registration in registrations {
            let registration = if timed {
                registration.timed()
            } else {
                registration
            };
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
        let id = NEXT_TABLE_ID.fetch_add(1, Ordering::Relaxed);
        let id = NonZeroU64::new(id).expect("2^64 handler tables are never built");
        let spawns_at_yield = !timed
            && table
                .get(&TypeId::of::<Spawn>())
                .is_some_and(|registration| registration.builtin);
        Ok(Self {
            table,
            id,
            spawns_at_yield,
        })
    }

    /// See [`Handlers::spawns_at_yield`](#structfield.spawns_at_yield).
    #[inline]
    pub(crate) fn spawns_at_yield(&self) -> bool {
        self.spawns_at_yield
    }

    /// The registration for `command`, if any: the one this thread found last if
    /// it was for the same table and command, else the table's.
    #[inline]
    fn find(&self, command: TypeId) -> Option<&Registration> {
        let last = LAST_FOUND.with(Cell::get);
        if let Some(last) = last.filter(|last| last.table == self.id && last.command == command) {
            // SAFETY: `last` was found in this table (its id is never reused), which
            // `&self` keeps alive, and a table is never changed once built: the
            // entry is where it was found.
            return Some(unsafe { last.registration.as_ref() });
        }
        let registration = self.table.get(&command)?;
        LAST_FOUND.with(|last| {
            last.set(Some(Found {
                table: self.id,
                command,
                registration: NonNull::from(registration),
            }));
        });
        Some(registration)
    }

    /// Sends one yield to its handler. A command nobody handles completes at once
    /// with [`YieldError::NoHandler`].
    #[inline]
    pub(crate) fn dispatch(&self, shared: &Shared, cell: &CellRef, y: &mut Yield) {
        let tag = y.tag();
        let command = y.command_mut();
        let Some(registration) = self.find(command.value_type_id()) else {
            let name = command.type_name();
            let raw = RawCompleter::for_yield(cell, tag, command.type_name_fn());
            // The command is user data: its drop may panic, on a worker.
            crate::runtime::drop_quietly(std::mem::replace(command, Payload::unit()));
            raw.deliver(Err(YieldError::NoHandler { command: name }));
            return;
        };
        match registration.placement {
            Placement::Worker => {
                catch_panics(|| (registration.call)(command, cell, tag));
            }
            Placement::Blocking => {
                let mut command = std::mem::replace(command, Payload::unit());
                let name = command.type_name_fn();
                // Armed until the job runs: a job the pool drops unrun (it shut
                // down) completes the yield as dropped rather than never.
                let raw = RawCompleter::for_yield(cell, tag, name);
                // Registered before the job can run, so a withdrawal finds it.
                let work = shared.in_flight().start(cell, tag, name, None);
                let call = registration.call.clone();
                shared.blocking().run(Box::new(move || {
                    if !work.is_wanted() {
                        // Withdrawn (or its process ended) while it waited for a
                        // thread: nobody wants it run.
                        raw.cell().handle().shared().in_flight().remove(&work);
                        raw.release();
                        crate::runtime::drop_quietly(command);
                        return;
                    }
                    let (cell, tag) = raw.into_parts();
                    catch_panics(|| call(&mut command, &cell, tag));
                    // The handler has returned: it answered, or handed the completer
                    // on (whose `is_wanted` then says only whether the process
                    // lives). Either way the job is no longer this pool's to skip.
                    cell.handle().shared().in_flight().remove(&work);
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ping;
    impl Command for Ping {
        type Output = ();
    }

    struct Pong;
    impl Command for Pong {
        type Output = ();
    }

    fn table_handling<C: Command>() -> Handlers {
        let handler = |_: C, done: Completer<C>| drop(done);
        Handlers::new(
            vec![Registration::new::<C, _>(Placement::Worker, handler)],
            false,
        )
        .expect("one registration")
    }

    /// The registration the table itself holds for `C`.
    fn own<C: Command>(table: &Handlers) -> *const Registration {
        table.table.get(&TypeId::of::<C>()).expect("registered")
    }

    #[test]
    fn a_thread_finds_each_tables_own_registration_whatever_it_found_last() {
        let (first, second) = (table_handling::<Ping>(), table_handling::<Ping>());
        let ping = TypeId::of::<Ping>();
        for _ in 0..3 {
            // Twice each: the second look is the remembered one.
            for table in [&first, &first, &second, &second] {
                let found = table.find(ping).expect("Ping is handled");
                assert!(std::ptr::eq(found, own::<Ping>(table)));
            }
        }
        // A command the table lacks is not found, whatever was found last.
        assert!(first.find(TypeId::of::<Pong>()).is_none());
        let pongs = table_handling::<Pong>();
        assert!(pongs.find(ping).is_none());
        assert!(std::ptr::eq(
            pongs.find(TypeId::of::<Pong>()).expect("Pong is handled"),
            own::<Pong>(&pongs)
        ));
    }

    #[test]
    fn no_table_takes_the_id_of_one_dropped_before_it() {
        // An entry left by a dropped table must match no table built later, even
        // one built where it was (as these are, each in turn).
        let mut seen = std::collections::HashSet::new();
        for _ in 0..100 {
            let table = table_handling::<Ping>();
            assert!(seen.insert(table.id), "an id was given twice");
            drop(table);
        }
    }
}
