//! loom models of work in flight (see `services/in_flight.rs`).
//!
//! A result racing its process's withdrawal: exactly one of them ends the work; the
//! abort handle runs if and only if the withdrawal won; the table is left empty.
//! An abort handle given while the process's end claims the work runs exactly once,
//! whichever comes first (fails if a claim made before the handle is given forgets
//! to run it). A deadline racing the result: exactly one wins, and the timed-out
//! count says which.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::Inert;
use crate::engine::cell::{CellRef, ProcessCell};
use crate::pid::Pid;
use crate::services::in_flight::{Claim, InFlight, WorkCounts};
use crate::tag::Tag;

fn cell() -> CellRef {
    ProcessCell::ready(Pid::from_raw(1), None, "run", false, Inert)
}

fn name() -> &'static str {
    "Cmd"
}

fn counting(count: &Arc<AtomicUsize>) -> Box<dyn FnOnce() + Send> {
    let count = count.clone();
    Box::new(move || {
        count.fetch_add(1, Ordering::SeqCst);
    })
}

#[test]
fn a_result_racing_a_withdrawal_ends_the_work_once() {
    loom::model(|| {
        let table = Arc::new(InFlight::new());
        let cell = cell();
        let aborts = Arc::new(AtomicUsize::new(0));
        let work = table.start(&cell, Tag(1), name, None);
        work.set_abort(counting(&aborts));
        let finisher = {
            let (table, work) = (table.clone(), work.clone());
            loom::thread::spawn(move || {
                let won = work.claim(Claim::Result);
                // What the task does as it answers, or lets go after an abort.
                table.remove(&work);
                won
            })
        };
        let withdrawn = table.withdraw(cell.pid(), Tag(1));
        let delivered = finisher.join().unwrap();
        assert_eq!(usize::from(delivered) + withdrawn, 1, "exactly one ends it");
        assert_eq!(
            aborts.load(Ordering::SeqCst),
            withdrawn,
            "aborted iff withdrawn"
        );
        assert_eq!(table.len(), 0);
        assert_eq!(table.aborted(), withdrawn as u64);
    });
}

#[test]
fn an_abort_handle_given_while_the_process_ends_runs_once() {
    loom::model(|| {
        let table = Arc::new(InFlight::new());
        let cell = cell();
        let aborts = Arc::new(AtomicUsize::new(0));
        let work = table.start(&cell, Tag(1), name, None);
        let spawner = {
            let (work, aborts) = (work.clone(), aborts.clone());
            loom::thread::spawn(move || work.set_abort(counting(&aborts)))
        };
        assert_eq!(table.release(cell.pid()), 1);
        spawner.join().unwrap();
        assert_eq!(aborts.load(Ordering::SeqCst), 1);
        assert!(!work.is_wanted());
        assert_eq!(table.len(), 0);
    });
}

#[test]
fn a_deadline_racing_the_result_ends_the_work_once() {
    loom::model(|| {
        let table = Arc::new(InFlight::new());
        let cell = cell();
        let counts = Arc::new(WorkCounts::default());
        let aborts = Arc::new(AtomicUsize::new(0));
        let work = table.start(&cell, Tag(1), name, Some(counts.clone()));
        work.set_abort(counting(&aborts));
        let timer = {
            let (table, work) = (table.clone(), work.clone());
            loom::thread::spawn(move || {
                let won = work.claim(Claim::Deadline);
                if won {
                    table.remove(&work);
                }
                won
            })
        };
        let delivered = work.claim(Claim::Result);
        table.remove(&work);
        let timed_out = timer.join().unwrap();
        assert!(delivered != timed_out, "exactly one ends it");
        assert_eq!(WorkCounts::read(&counts.timed_out), u64::from(timed_out));
        assert_eq!(aborts.load(Ordering::SeqCst), usize::from(timed_out));
        assert_eq!(table.len(), 0);
    });
}
