//! Child specs: how a supervisor starts each child, and what it does when one ends.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use crate::engine::context::Context;
use crate::engine::process::{panic_message, IntoProcess};
use crate::entry::EntryRef;
use crate::error::SpawnError;
use crate::exit::ExitReason;
use crate::payload::IntoPayloads;
use crate::pid::Pid;
use crate::runtime::SpawnOptions;

use std::sync::Arc;

use parking_lot::Mutex;

use super::{Supervisor, SupervisorHandle};

/// When a child that ended is started again.
///
/// ```
/// use wsched::supervisor::Restart;
/// use wsched::ExitReason;
///
/// let crashed = ExitReason::Error { message: "disk full".into() };
/// assert!(Restart::Permanent.restarts_after(&ExitReason::Normal));
/// assert!(Restart::Transient.restarts_after(&crashed));
/// assert!(!Restart::Transient.restarts_after(&ExitReason::Normal));
/// assert!(!Restart::Transient.restarts_after(&ExitReason::Cancelled));
/// assert!(!Restart::Temporary.restarts_after(&crashed));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Restart {
    /// Always, however it ended (a server that must always run). The default.
    #[default]
    Permanent,
    /// Only when it failed: not when it finished normally
    /// ([`ExitReason::Normal`]) or ended by passing a cancellation on
    /// ([`ExitReason::Cancelled`], Erlang's `shutdown`). A job that must complete.
    Transient,
    /// Never: when it ends, however, it is removed from the supervisor.
    Temporary,
}

impl Restart {
    /// Whether a child with this restart kind is started again after ending with
    /// `reason`.
    pub fn restarts_after(self, reason: &ExitReason) -> bool {
        match self {
            Self::Permanent => true,
            Self::Transient => !matches!(reason, ExitReason::Normal | ExitReason::Cancelled),
            Self::Temporary => false,
        }
    }
}

/// Whether a child is a worker or a supervisor (which only changes its defaults and
/// what [`ChildInfo`](super::ChildInfo) shows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChildKind {
    /// Any process.
    Worker,
    /// A [`Supervisor`]: a subtree.
    Supervisor,
}

/// Starts one child: builds a fresh process (and input) and spawns it linked to the
/// supervisor. In a mutex only to make a spec `Sync` (a spec travels in a
/// [`StartChild`](super::StartChild) request, and comes back inside errors that
/// must be `Send + Sync`): it is only ever called through `&mut`, never locked.
type Start = Box<Mutex<dyn FnMut(&Context, SpawnOptions) -> Result<Pid, SpawnError> + Send>>;

/// How to start one child of a [`Supervisor`], and how to treat it when it ends.
///
/// The factory builds a fresh process value (and input) for every start, so a
/// restarted child begins from a clean state. It runs in the supervisor's step: a
/// factory that panics fails that start as an `init` that panics would
/// ([`SpawnError::InitPanicked`]). Defaults: [`Restart::Permanent`], a
/// shutdown timeout of [`DEFAULT_SHUTDOWN`](Self::DEFAULT_SHUTDOWN) for workers, and
/// no timeout at all ([`Duration::MAX`], wait as long as it takes) for supervisors,
/// whose own shutdown is bounded by their children's timeouts.
///
/// ```
/// use std::time::Duration;
/// use wsched::prelude::*;
/// use wsched::supervisor::{ChildSpec, Restart, Supervisor, Strategy};
///
/// struct Cache { entries: usize }
///
/// #[process]
/// impl Cache {
///     #[entry]
///     fn serve(&mut self, capacity: usize) -> Result<(), BoxError> {
///         loop {
///             let _key = recv!(String)?;
///             self.entries = (self.entries + 1).min(capacity);
///         }
///     }
/// }
///
/// // `Cache::SERVE` is the entry's typed name: `1024` is the `usize` it takes.
/// let cache = ChildSpec::new("cache", || Cache { entries: 0 }, Cache::SERVE, (1024,))
///     .restart(Restart::Transient)
///     .shutdown(Duration::from_millis(500));
/// assert_eq!(cache.id(), "cache");
/// assert_eq!(cache.restart_kind(), Restart::Transient);
/// assert_eq!(cache.shutdown_timeout(), Duration::from_millis(500));
///
/// // A subtree: a supervisor as a child of another.
/// let tree = ChildSpec::supervisor("caches", || {
///     Supervisor::new(Strategy::OneForOne)
///         .child(ChildSpec::new("cache", || Cache { entries: 0 }, "serve", (1024_usize,)))
/// });
/// assert_eq!(tree.shutdown_timeout(), Duration::MAX);
/// ```
pub struct ChildSpec {
    id: String,
    entry: String,
    start: Start,
    restart: Restart,
    shutdown: Duration,
    kind: ChildKind,
    options: SpawnOptions,
    /// For a child supervisor: the handle of the one its last start built.
    nested: Option<NestedHandle>,
}

/// Where a child supervisor's spec puts the handle of each supervisor it starts,
/// for its parent's [`SupervisorHandle::supervisor`].
pub(super) type NestedHandle = Arc<Mutex<Option<SupervisorHandle>>>;

impl ChildSpec {
    /// A worker's shutdown timeout unless set: how long it has to finish after its
    /// cancel before it is killed (Erlang's default too).
    pub const DEFAULT_SHUTDOWN: Duration = Duration::from_secs(5);

    /// A child named `id` (unique among its supervisor's children), started by
    /// spawning `factory()` on entry `entry` with a clone of `input`.
    ///
    /// `entry` is the entry's typed name (`Worker::RUN`, see [`Entry`](crate::Entry)),
    /// which fixes the type of `input` at compile time, or its name as a string
    /// (`"run"`), checked at every start: a spec that cannot start makes its
    /// supervisor fail at once with [`SupervisorError::StartFailed`](super::SupervisorError::StartFailed).
    pub fn new<P, F, I>(
        id: impl Into<String>,
        factory: F,
        entry: impl EntryRef<P, I>,
        input: I,
    ) -> Self
    where
        P: IntoProcess,
        F: Fn() -> P + Send + 'static,
        I: IntoPayloads + Clone + Send + 'static,
    {
        Self::from_fn(id, entry, move || (factory(), input.clone()))
    }

    /// A child whose factory builds the input too, for inputs that are not `Clone`
    /// or must be fresh at every start. `entry` as in [`new`](Self::new).
    pub fn from_fn<P, F, I>(
        id: impl Into<String>,
        entry: impl EntryRef<P, I>,
        mut factory: F,
    ) -> Self
    where
        P: IntoProcess,
        F: FnMut() -> (P, I) + Send + 'static,
        I: IntoPayloads,
    {
        let entry = entry.name().to_owned();
        let method = entry.clone();
        Self {
            id: id.into(),
            entry,
            start: Box::new(Mutex::new(move |ctx: &Context, options: SpawnOptions| {
                // A factory that panics fails the start as an `init` that panics
                // does, rather than the supervisor's step.
                let made = std::panic::catch_unwind(AssertUnwindSafe(&mut factory));
                let (process, input) = made.map_err(|panic| SpawnError::InitPanicked {
                    message: panic_message(&*panic),
                })?;
                ctx.spawn_supervised(process, &method, input, options.detached())
            })),
            restart: Restart::Permanent,
            shutdown: Self::DEFAULT_SHUTDOWN,
            kind: ChildKind::Worker,
            options: SpawnOptions::new(),
            nested: None,
        }
    }

    /// A worker child started by `start` (given the supervisor's context and the
    /// child's spawn options), which must spawn it and link it to the supervisor:
    /// the seam through which the cluster starts children on other nodes
    /// (`wsched::cluster::remote_child`).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn with_start(
        id: impl Into<String>,
        entry: &str,
        start: impl FnMut(&Context, SpawnOptions) -> Result<Pid, SpawnError> + Send + 'static,
    ) -> Self {
        Self {
            id: id.into(),
            entry: entry.to_owned(),
            start: Box::new(Mutex::new(start)),
            restart: Restart::Permanent,
            shutdown: Self::DEFAULT_SHUTDOWN,
            kind: ChildKind::Worker,
            options: SpawnOptions::new(),
            nested: None,
        }
    }

    /// A child that is itself a supervisor, built by `factory` at every start: trees
    /// nest this way. Its shutdown timeout is [`Duration::MAX`] (wait until it has
    /// stopped its own children) unless set.
    pub fn supervisor<F>(id: impl Into<String>, factory: F) -> Self
    where
        F: Fn() -> Supervisor + Send + 'static,
    {
        let nested = NestedHandle::default();
        let published = nested.clone();
        let mut spec = Self::from_fn(id, Supervisor::ENTRY, move || {
            let supervisor = factory();
            *published.lock() = Some(supervisor.handle());
            (supervisor, ())
        });
        spec.shutdown = Duration::MAX;
        spec.kind = ChildKind::Supervisor;
        spec.nested = Some(nested);
        spec
    }

    /// When the child is started again (default [`Restart::Permanent`]).
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// How long the child has to finish after it is cancelled, when the supervisor
    /// stops it, before it is killed ([`Context::kill`]). [`Duration::ZERO`] kills it
    /// at once, without a cancel; [`Duration::MAX`] waits as long as it takes.
    pub fn shutdown(mut self, timeout: Duration) -> Self {
        self.shutdown = timeout;
        self
    }

    /// How the child is spawned, beyond what it runs: e.g. a bounded mailbox
    /// ([`SpawnOptions::bounded_mailbox`]). Whatever `options` say, the child is
    /// always linked to the supervisor and detached (its result is not kept: the
    /// supervisor learns how it ended through the link).
    pub fn spawn_options(mut self, options: SpawnOptions) -> Self {
        self.options = options;
        self
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The entry it is started on.
    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// Its restart kind.
    pub fn restart_kind(&self) -> Restart {
        self.restart
    }

    /// Its shutdown timeout.
    pub fn shutdown_timeout(&self) -> Duration {
        self.shutdown
    }

    /// Worker or supervisor.
    pub fn kind(&self) -> ChildKind {
        self.kind
    }

    /// Where a child supervisor publishes its handle (`None` for a worker).
    pub(super) fn nested_handle(&self) -> Option<NestedHandle> {
        self.nested.clone()
    }

    /// Spawns a fresh instance, linked to the supervisor whose context `ctx` is.
    pub(super) fn start(&mut self, ctx: &Context) -> Result<Pid, SpawnError> {
        (self.start.get_mut())(ctx, self.options)
    }
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("id", &self.id)
            .field("entry", &self.entry)
            .field("restart", &self.restart)
            .field("shutdown", &self.shutdown)
            .field("kind", &self.kind)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}
