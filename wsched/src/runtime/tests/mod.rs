//! Tests of crate-private runtime parts: loom models and stress tests.

#[cfg(not(loom))]
mod depot_stress;
#[cfg(not(loom))]
mod lifo_stress;
#[cfg(not(loom))]
mod local_queue_props;
#[cfg(not(loom))]
mod local_queue_stress;
#[cfg(loom)]
mod loom_blocking;
#[cfg(loom)]
mod loom_calls;
#[cfg(loom)]
mod loom_dead_letters;
#[cfg(loom)]
mod loom_depot;
#[cfg(loom)]
mod loom_destinations;
#[cfg(loom)]
mod loom_idle;
#[cfg(loom)]
mod loom_in_flight;
#[cfg(loom)]
mod loom_lifo;
#[cfg(loom)]
mod loom_links;
#[cfg(loom)]
mod loom_local_queue;
#[cfg(loom)]
mod loom_monitors;
#[cfg(loom)]
mod loom_names;
#[cfg(loom)]
mod loom_recorder;
#[cfg(loom)]
mod loom_scheduler;
#[cfg(loom)]
mod loom_spin_lock;
#[cfg(loom)]
mod loom_spin_rwlock;
#[cfg(loom)]
mod loom_state;
#[cfg(loom)]
mod loom_timed;
#[cfg(loom)]
mod loom_timers;
#[cfg(not(loom))]
mod recorder_stress;
#[cfg(not(loom))]
mod timers_stress;

/// A process that does nothing: for tests that need a cell and no behaviour.
pub(crate) struct Inert;

impl crate::engine::process::Process for Inert {
    fn init(
        &mut self,
        _: crate::engine::context::Context,
        _: &str,
        _: crate::payload::Payloads,
    ) -> Result<(), crate::error::InitError> {
        Ok(())
    }

    fn step(
        &mut self,
        _: crate::engine::process::Events<'_>,
        _: &mut crate::engine::process::StepOutput,
    ) -> Result<(), crate::error::StepError> {
        Ok(())
    }
}

/// A process that finishes on its first message (or a cancel): for loom models of
/// something racing the end of a process, which a message triggers.
#[cfg(loom)]
pub(crate) struct UntilMessage;

#[cfg(loom)]
impl crate::engine::process::Process for UntilMessage {
    fn init(
        &mut self,
        _: crate::engine::context::Context,
        _: &str,
        _: crate::payload::Payloads,
    ) -> Result<(), crate::error::InitError> {
        Ok(())
    }

    fn step(
        &mut self,
        events: crate::engine::process::Events<'_>,
        out: &mut crate::engine::process::StepOutput,
    ) -> Result<(), crate::error::StepError> {
        use crate::engine::process::{Event, Status};
        let woken = events
            .into_iter()
            .any(|e| matches!(e, Event::Message(_) | Event::Cancel));
        if woken {
            out.set_status(Status::Done(crate::payload::Payload::unit()));
        } else {
            out.set_status(Status::WaitingForMessage);
        }
        Ok(())
    }
}
