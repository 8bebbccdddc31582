//! Tests of crate-private runtime parts: loom models and stress tests.

#[cfg(not(loom))]
mod lifo_stress;
#[cfg(not(loom))]
mod local_queue_props;
#[cfg(not(loom))]
mod local_queue_stress;
#[cfg(loom)]
mod loom_blocking;
#[cfg(loom)]
mod loom_idle;
#[cfg(loom)]
mod loom_lifo;
#[cfg(loom)]
mod loom_local_queue;
#[cfg(loom)]
mod loom_scheduler;
#[cfg(loom)]
mod loom_state;
#[cfg(loom)]
mod loom_timers;
#[cfg(not(loom))]
mod timers_stress;
