//! The commands every process needs, handled by the scheduler itself: sleeping,
//! spawning a child and joining another process (and calling one: `Call`, in
//! `services/calls.rs`, with the rest of the calls).

use std::fmt;
use std::time::Duration;

use super::completer::Completer;
use super::handler::{Placement, Registration};
use crate::command::{Call, Command};
use crate::engine::cell::{NewProcess, ResultWaiter, StashedProcess};
use crate::engine::process::IntoProcess;
use crate::entry::EntryRef;
use crate::error::JoinError;
use crate::payload::{IntoPayloads, Payload};
use crate::pid::Pid;
use crate::runtime::SpawnOptions;
use crate::services::timers::Timer;

/// Completes with `()` after `duration` (to about a millisecond, never early).
///
/// The timer is cancelled, and its memory released at once, when the process ends or
/// withdraws the yield ([`StepOutput::withdraw`](crate::StepOutput::withdraw); a
/// `recv!(.., timeout = …)` that gets its message first does so). A duration too long
/// to represent as a deadline, such as `Duration::MAX`, never completes: the process
/// waits until it is cancelled or withdraws the yield.
///
/// The scheduler's timer thread starts with the first `Sleep`; if it cannot be
/// started, the yield fails ([`YieldError::Failed`](crate::YieldError::Failed)) and
/// the next `Sleep` tries again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sleep(pub Duration);

impl Command for Sleep {
    type Output = ();
}

/// Spawns a child process and completes with its PID.
///
/// Fails (with [`YieldError::Failed`](crate::YieldError::Failed) holding a
/// [`SpawnError`](crate::SpawnError)) when the entry is unknown, the child's `init`
/// refuses its arguments or panics, or the scheduler is shutting down.
///
/// A [`yield_all!`](crate::yield_all) of `Spawn`s spawns each child as it is yielded,
/// without suspending, unless something must see each one (see there).
pub struct Spawn {
    /// The child, already in the cell it will run in, with its entry and input: a
    /// `Spawn` is one word pair, so it travels inline in its payload, and handling it
    /// allocates nothing more.
    pub(crate) process: StashedProcess,
}

impl Spawn {
    /// Spawn `process` running entry `method` with `input`; its result is kept until
    /// claimed with [`Join`]. `method` is the entry's typed name (`Worker::RUN`,
    /// whose arguments the compiler checks: see [`Entry`](crate::Entry)) or its name
    /// (`"run"`).
    pub fn new<P: IntoProcess, I: IntoPayloads>(
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Self {
        Self {
            process: NewProcess::new(process, method.name(), input.into_payloads(), false).stash(),
        }
    }

    /// Like [`new`](Self::new), but the child's result is discarded when it finishes.
    pub fn detached<P: IntoProcess, I: IntoPayloads>(
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Self {
        Self {
            process: NewProcess::new(process, method.name(), input.into_payloads(), true).stash(),
        }
    }

    /// Like [`new`](Self::new), and the child is linked to the spawning process before
    /// it can run (see [`Context::spawn_linked`](crate::Context::spawn_linked)).
    pub fn linked<P: IntoProcess, I: IntoPayloads>(
        process: P,
        method: impl EntryRef<P, I>,
        input: I,
    ) -> Self {
        Self {
            process: NewProcess::new(process, method.name(), input.into_payloads(), false)
                .link_to_parent()
                .stash(),
        }
    }

    /// Spawns the child as `options` also say: with a bounded mailbox, detached
    /// (see [`SpawnOptions`]). They add to the constructor's choice:
    /// `Spawn::linked(..).with_options(..)` still links, and a detached child stays
    /// detached. A capacity of 0 fails the spawn with
    /// [`SpawnError::ZeroMailboxCapacity`](crate::SpawnError::ZeroMailboxCapacity).
    pub fn with_options(self, options: SpawnOptions) -> Self {
        Self {
            process: options.apply(self.process.unstash()).stash(),
        }
    }

    /// The entry the child will run.
    pub fn method(&self) -> &str {
        self.process.entry()
    }
}

impl fmt::Debug for Spawn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawn")
            .field("method", &self.method())
            .field("detached", &self.process.is_detached())
            .field("linked", &self.process.links_to_parent())
            .finish_non_exhaustive()
    }
}

impl Command for Spawn {
    type Output = Pid;
}

/// Waits for another process to finish and completes with its result: its value, or
/// a [`JoinError`] (its failure, an unknown PID, a detached process, or a result that
/// someone else already claimed — a result is handed out exactly once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Join(pub Pid);

impl Command for Join {
    type Output = Result<Payload, JoinError>;
}

/// The scheduler's own handlers for the built-in commands.
pub(crate) fn registrations(
    timers: std::sync::Arc<crate::services::timers::Timers>,
) -> Vec<Registration> {
    vec![
        {
            let timers = timers.clone();
            Registration::new(
                Placement::Worker,
                move |call: Call, done: Completer<Call>| {
                    crate::services::calls::handle_call(&timers, call, done.into_raw());
                },
            )
            .builtin()
        },
        Registration::new(
            Placement::Worker,
            move |Sleep(duration), done: Completer<Sleep>| {
                if let Err((timer, error)) = timers.arm(duration, Timer::Wake(done.into_raw())) {
                    let Timer::Wake(raw) = timer else {
                        unreachable!("the timer armed is given back")
                    };
                    Completer::<Sleep>::new(raw).fail(error);
                }
            },
        )
        .builtin(),
        Registration::new(Placement::Worker, |spawn: Spawn, done: Completer<Spawn>| {
            let handle = done.handle();
            let spawned = handle
                .shared()
                .spawn(handle, Some(done.pid()), spawn.process.unstash());
            match spawned {
                Ok(pid) => done.complete(pid),
                Err(error) => done.fail(error),
            }
        })
        .builtin(),
        Registration::new(Placement::Worker, |Join(pid), done: Completer<Join>| {
            // Through the joining process's own cell: no scheduler refcount traffic.
            let joiner = done.process_cell().clone();
            joiner
                .handle()
                .shared()
                .claim_result(pid, ResultWaiter::Join(done.into_raw()));
        })
        .builtin(),
    ]
}

/// The codecs recorded histories keep values with by default (the `sim` feature):
/// the standard types' (see `observe/history.rs`), and those of the built-in
/// commands that carry plain values, `Sleep` (its duration in nanoseconds) and
/// `Join` (the PID as a number).
#[cfg(any(feature = "sim", feature = "cluster"))]
impl crate::observe::codecs::Codecs {
    /// The standard codecs: `()`, `bool`, the integers, `char`, `String`,
    /// `&'static str` (decoded into a leaked string: meant for tests), [`Pid`](crate::Pid),
    /// [`Duration`](std::time::Duration), and the built-in commands
    /// [`Sleep`](crate::command::Sleep) and [`Join`](crate::command::Join). What
    /// [`Builder::history_codecs`](crate::Builder::history_codecs) defaults to.
    ///
    /// ```
    /// use wsched::Codecs;
    ///
    /// let codecs = Codecs::new();
    /// assert!(codecs.has::<String>() && codecs.has::<wsched::command::Sleep>());
    /// assert_eq!(codecs.name_of::<u32>(), Some("u32"));
    /// ```
    pub fn new() -> Self {
        crate::command::builtin::standard_codecs()
    }
}

#[cfg(any(feature = "sim", feature = "cluster"))]
impl Default for crate::observe::codecs::Codecs {
    /// `Codecs::new`: the standard codecs.
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(any(feature = "sim", feature = "cluster"))]
pub(crate) fn standard_codecs() -> crate::observe::codecs::Codecs {
    let mut codecs = crate::observe::codecs::Codecs::standard();
    codecs.insert::<Sleep>(
        "Sleep",
        true,
        |sleep| Some(sleep.0.as_nanos().to_string()),
        |text| {
            let nanos: u64 = text.trim().parse()?;
            Ok(Sleep(Duration::from_nanos(nanos)))
        },
    );
    codecs.insert::<Join>(
        "Join",
        true,
        |join| Some(join.0.as_u64().to_string()),
        |text| Ok(Join(Pid::from_raw(text.trim().parse()?))),
    );
    codecs
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::engine::context::Context;
    use crate::engine::process::{Events, Process, Status, StepOutput, Tag};
    use crate::error::{InitError, StepError};
    use crate::payload::Payloads;
    use crate::time::timer::Spawner;
    use crate::{Event, Scheduler};

    /// Sleeps a millisecond and finishes with what the completion said.
    struct Nap;

    impl Process for Nap {
        fn init(&mut self, _: Context, _: &str, _: Payloads) -> Result<(), InitError> {
            Ok(())
        }

        fn step(&mut self, events: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
            for event in events {
                if let Event::Completion(c) = event {
                    let said = match c.result {
                        Ok(_) => "slept".to_owned(),
                        Err(e) => e.to_string(),
                    };
                    out.set_status(Status::Done(Payload::new(said)));
                    return Ok(());
                }
            }
            out.yield_command(Tag(1), Sleep(Duration::from_millis(1)));
            out.set_status(Status::WaitingForYields);
            Ok(())
        }
    }

    fn nap(scheduler: &Scheduler) -> String {
        let pid = scheduler.spawn(Nap, "run", ()).unwrap();
        scheduler.wait(pid).unwrap().downcast::<String>().unwrap()
    }

    #[test]
    fn a_sleep_fails_clearly_when_the_timer_thread_cannot_start() {
        let refuse: Spawner = |_, _| Err(std::io::Error::other("out of threads"));
        let start: Spawner = |name, body| std::thread::Builder::new().name(name).spawn(body);
        let scheduler = Scheduler::builder().workers(1).build().unwrap();
        let handle = scheduler.handle();
        let timers = &handle.shared().timers();
        timers.set_spawner(refuse);
        assert_eq!(
            nap(&scheduler),
            "command `Sleep` failed: \
             the timer thread could not be started: out of threads"
        );
        assert_eq!(scheduler.metrics().pending_timers, 0);
        // The next sleep tries again.
        timers.set_spawner(start);
        assert_eq!(nap(&scheduler), "slept");
    }

    #[test]
    fn a_spawn_command_travels_inline_in_its_payload_whatever_its_input() {
        // Two words: a `Payload` holds it in place, so yielding a `Spawn` allocates
        // nothing beyond the child's cell (a larger one was boxed, per command).
        assert!(size_of::<Spawn>() <= 2 * size_of::<usize>());
        struct Child;
        impl Process for Child {
            fn init(&mut self, _: Context, _: &str, input: Payloads) -> Result<(), InitError> {
                let got: Vec<u32> = input
                    .into_iter()
                    .map(|p| p.downcast::<u32>().unwrap())
                    .collect();
                assert_eq!(got, [1, 2, 3][..got.len()], "the input, in order");
                Ok(())
            }
            fn step(&mut self, _: Events<'_>, out: &mut StepOutput) -> Result<(), StepError> {
                out.set_status(Status::Done(Payload::unit()));
                Ok(())
            }
        }
        let scheduler = Scheduler::builder().workers(1).build().unwrap();
        let handle = scheduler.handle();
        let shared = handle.shared();
        for spawn in [
            Spawn::new(Child, "run", ()),
            Spawn::new(Child, "run", (1_u32,)),
            Spawn::detached(Child, "run", (1_u32, 2_u32)),
            Spawn::new(Child, "run", (1_u32, 2_u32, 3_u32)).with_options(SpawnOptions::default()),
        ] {
            let detached = spawn.process.is_detached();
            let pid = shared
                .spawn(&handle, None, spawn.process.unstash())
                .unwrap();
            if !detached {
                scheduler.wait(pid).unwrap();
            }
        }
    }
}
