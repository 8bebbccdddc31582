//! Buggify points: rare paths the runtime takes on purpose in a simulation, so
//! that a range of seeds reaches them (FoundationDB's idea). Outside a simulation
//! (and in every build without the `sim` feature) [`buggify`] is a constant
//! `false` the compiler removes.
//!
//! Each point may only do what production allows: what it provokes could have
//! happened anyway, by a race the simulation does not otherwise produce.

/// A rare path the runtime may take on purpose in a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
pub(crate) enum Buggify {
    /// A send to a bounded mailbox that rejects when full, finding one free
    /// place, is rejected: another sender took the place first. The sender gets
    /// its message back; nothing is lost.
    MailboxEdge,
    /// A restarted child crashes again at once, pushing its supervisor towards
    /// the limit of its restart intensity.
    CrashAfterRestart,
    /// A timer fires just before the cancel that would have stopped it: its
    /// completion reaches a process that no longer waits for it.
    TimerBeforeCancel,
    /// The callee of a call with a timeout next runs only at the call's deadline
    /// (its worker was busy): its reply races the timeout, and either may win.
    ReplyAtDeadline,
}

/// How many points there are.
#[cfg(feature = "sim")]
pub(crate) const POINTS: usize = 4;

/// Asks the simulation on this thread to run `pid` next no earlier than `until`
/// (a delay production's scheduling could cause). Does nothing elsewhere.
#[inline]
pub(crate) fn hold_until(pid: crate::pid::Pid, until: std::time::Instant) {
    #[cfg(feature = "sim")]
    simulated::hold(pid, until);
    #[cfg(not(feature = "sim"))]
    let _ = (pid, until);
}

/// Whether to take the rare path `point` now: never outside a simulation.
#[cfg(not(feature = "sim"))]
#[inline(always)]
pub(crate) fn buggify(point: Buggify) -> bool {
    let _ = point;
    false
}

/// Whether to take the rare path `point` now: never outside a simulation.
#[cfg(feature = "sim")]
#[inline]
pub(crate) fn buggify(point: Buggify) -> bool {
    simulated::take(point)
}

/// A simulation's hold on the points, on its thread.
#[cfg(feature = "sim")]
pub(crate) mod simulated {
    use std::cell::{Cell, RefCell};
    use std::time::Instant;

    use super::{Buggify, POINTS};
    use crate::pid::Pid;

    std::thread_local! {
        /// The probability, in millionths; zero outside a simulation.
        static MILLIONTHS: Cell<u32> = const { Cell::new(0) };
        /// The seeded stream the points draw from (xorshift64*).
        static STREAM: Cell<u64> = const { Cell::new(1) };
        /// How many times each point was taken.
        static TAKEN: Cell<[u64; POINTS]> = const { Cell::new([0; POINTS]) };
        /// Processes to run no earlier than an instant (see [`super::hold_until`]).
        static HOLDS: RefCell<Vec<(Pid, Instant)>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn hold(pid: Pid, until: Instant) {
        HOLDS.with(|holds| holds.borrow_mut().push((pid, until)));
    }

    /// The instant `pid` must not run before, if a point asked for one (taken:
    /// asked once, applied once).
    pub(crate) fn take_hold(pid: Pid) -> Option<Instant> {
        HOLDS.with(|holds| {
            let mut holds = holds.borrow_mut();
            let at = holds.iter().position(|(held, _)| *held == pid)?;
            Some(holds.swap_remove(at).1)
        })
    }

    /// Whether any hold waits to be applied (checked before looking one up).
    pub(crate) fn any_hold() -> bool {
        HOLDS.with(|holds| !holds.borrow().is_empty())
    }

    /// Takes points with `probability` (0 to 1), drawing from `seed`.
    pub(crate) fn enter(seed: u64, probability: f64) {
        STREAM.with(|s| s.set(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1));
        set_probability(probability);
        TAKEN.with(|t| t.set([0; POINTS]));
        HOLDS.with(|holds| holds.borrow_mut().clear());
    }

    /// Stops taking points.
    pub(crate) fn leave() {
        set_probability(0.0);
        HOLDS.with(|holds| holds.borrow_mut().clear());
    }

    /// Changes the probability mid-run (zero: a liveness run's healthy phase).
    pub(crate) fn set_probability(probability: f64) {
        MILLIONTHS.with(|m| m.set((probability.clamp(0.0, 1.0) * 1e6) as u32));
    }

    /// How many times each point was taken since [`enter`], in the order of
    /// [`Buggify`]'s variants.
    pub(crate) fn taken() -> [u64; POINTS] {
        TAKEN.with(Cell::get)
    }

    pub(super) fn take(point: Buggify) -> bool {
        let millionths = MILLIONTHS.with(Cell::get);
        if millionths == 0 {
            return false;
        }
        let value = STREAM.with(|s| {
            let mut x = s.get();
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            s.set(x);
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        });
        let hit = value % 1_000_000 < u64::from(millionths);
        if hit {
            TAKEN.with(|t| {
                let mut taken = t.get();
                taken[point as usize] += 1;
                t.set(taken);
            });
        }
        hit
    }
}
