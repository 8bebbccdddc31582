//! loom models of the process state machine together with its mailbox.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p wsched --release --lib runtime::tests::loom`.

use crate::payload::Payload;
use crate::pid::Pid;
use crate::process::{Completion, Event, Message, Tag};
use crate::runtime::cell::{CellRef, ProcessCell};
use crate::runtime::state::{ProcessState, Suspend};
use crate::sync::{Arc, AtomicUsize, Ordering};

use super::Inert;

fn cell() -> CellRef {
    ProcessCell::ready(Pid::from_raw(1), None, "run", false, Inert)
}

fn completion() -> Event {
    Event::Completion(Completion {
        tag: Tag(1),
        result: Ok(Payload::unit()),
    })
}

fn message() -> Event {
    Event::Message(Message {
        from: None,
        payload: Payload::unit(),
    })
}

/// Steps the process once on the current thread: takes its events, then suspends
/// with `suspend`. Returns (events seen by the step, whether it must be re-queued).
/// A step that leaves the process waiting leaves a reference in it, as a worker does
/// (see "The waiting reference" in `state.rs`).
fn run_step(cell: &CellRef, suspend: Suspend) -> (usize, bool) {
    // The worker's reference, counted before the closing CAS as a worker's is.
    let worker = cell.clone();
    let mut owned = cell.start_running().expect("the process was READY");
    let mut events = Vec::new();
    owned.take_events(&mut events);
    let seen = events.len();
    assert!(owned.with_body(|_| ()).is_some());
    let requeue = owned
        .finish_step(suspend)
        .unwrap_or_else(|_| panic!("no stop was requested"));
    if requeue {
        drop(worker);
    } else {
        std::mem::forget(worker);
    }
    (seen, requeue)
}

/// Drains what is left in the mailbox (as the next step would see it).
fn leftover_events(cell: &CellRef) -> usize {
    let worker = cell.clone();
    let mut owned = cell.start_running().expect("READY");
    let mut events = Vec::new();
    owned.take_events(&mut events);
    if !owned
        .finish_step(Suspend::Yields)
        .unwrap_or_else(|_| panic!("no stop was requested"))
    {
        std::mem::forget(worker);
    }
    events.len()
}

/// What a producer whose push returned `woke` does with the process's waiting
/// reference: queues it (here, drops it at once; the model holds its own).
fn queue_if(cell: &CellRef, woke: bool) -> bool {
    if woke {
        // SAFETY: the caller's push just woke the process; taken once.
        drop(unsafe { CellRef::woken(cell) });
    }
    woke
}

/// Ends the model as shutdown would: a process left waiting is claimed (its waiting
/// reference given back) and ended, so that its cell is freed.
fn shut_down(cell: &CellRef) {
    if let Some(mut owned) = cell.request_stop() {
        drop(owned.close_mailbox());
        owned.finish(Err(crate::error::ProcessError::Stopped));
    }
}

#[test]
fn completion_while_running_queues_the_process_exactly_once() {
    loom::model(|| {
        let cell = cell();
        let queued = Arc::new(AtomicUsize::new(0));
        let handler = {
            let (cell, queued) = (cell.clone(), queued.clone());
            loom::thread::spawn(move || {
                if queue_if(&cell, cell.push_event(completion()).expect("mailbox open")) {
                    queued.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let (seen, requeue) = run_step(&cell, Suspend::Yields);
        if requeue {
            queued.fetch_add(1, Ordering::SeqCst);
        }
        handler.join().unwrap();
        if seen == 1 {
            // Consumed by the step: at most a harmless spurious re-queue.
            assert!(queued.load(Ordering::SeqCst) <= 1);
        } else {
            // Not consumed: the process must be queued, exactly once.
            assert_eq!(queued.load(Ordering::SeqCst), 1);
            assert_eq!(cell.state(), ProcessState::Ready);
            assert_eq!(leftover_events(&cell), 1);
        }
        shut_down(&cell);
    });
}

#[test]
fn message_racing_the_move_to_waiting_for_a_message_is_not_lost() {
    loom::model(|| {
        let cell = cell();
        let queued = Arc::new(AtomicUsize::new(0));
        let sender = {
            let (cell, queued) = (cell.clone(), queued.clone());
            loom::thread::spawn(move || {
                if queue_if(&cell, cell.push_event(message()).expect("mailbox open")) {
                    queued.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let (seen, requeue) = run_step(&cell, Suspend::Message);
        if requeue {
            queued.fetch_add(1, Ordering::SeqCst);
        }
        sender.join().unwrap();
        if seen == 0 {
            assert_eq!(queued.load(Ordering::SeqCst), 1);
            assert_eq!(leftover_events(&cell), 1);
        } else {
            assert!(queued.load(Ordering::SeqCst) <= 1);
        }
        shut_down(&cell);
    });
}

#[test]
fn a_message_does_not_wake_a_process_waiting_for_yields() {
    loom::model(|| {
        let cell = cell();
        let sender = {
            let cell = cell.clone();
            loom::thread::spawn(move || {
                queue_if(&cell, cell.push_event(message()).expect("mailbox open"))
            })
        };
        let (seen, requeue) = run_step(&cell, Suspend::Yields);
        let woke = sender.join().unwrap();
        assert!(!woke, "a message never queues a process waiting for yields");
        assert!(!requeue);
        assert_eq!(cell.state(), ProcessState::WaitingForYields);
        // Not lost either: a completion wakes it and the message is still there.
        assert!(queue_if(&cell, cell.push_event(completion()).unwrap()));
        assert_eq!(leftover_events(&cell), 2 - seen);
        shut_down(&cell);
    });
}

#[test]
fn cancel_and_completion_racing_queue_a_waiting_process_once() {
    loom::model(|| {
        let cell = cell();
        let (_, requeue) = run_step(&cell, Suspend::Yields);
        assert!(!requeue);
        let queued = Arc::new(AtomicUsize::new(0));
        let producers: Vec<_> = [completion(), Event::Cancel]
            .into_iter()
            .map(|event| {
                let (cell, queued) = (cell.clone(), queued.clone());
                loom::thread::spawn(move || {
                    if queue_if(&cell, cell.push_event(event).expect("mailbox open")) {
                        queued.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(queued.load(Ordering::SeqCst), 1);
        assert_eq!(leftover_events(&cell), 2);
        shut_down(&cell);
    });
}

#[test]
fn shutdown_stop_racing_a_completion_ends_the_process_exactly_once() {
    loom::model(|| {
        let cell = cell();
        let (_, requeue) = run_step(&cell, Suspend::Yields);
        assert!(!requeue);
        let endings = Arc::new(AtomicUsize::new(0));
        let end = |cell: &CellRef, owned: crate::runtime::cell::Owned<'_>| {
            let mut owned = owned;
            drop(owned.close_mailbox());
            let _ = cell;
            owned.finish(Err(crate::error::ProcessError::Stopped));
        };
        let completer = {
            let (cell, endings) = (cell.clone(), endings.clone());
            loom::thread::spawn(move || {
                // A worker that was handed the woken process stops it (shutdown is on).
                if let Ok(true) = cell
                    .push_event(completion())
                    .map(|woke| queue_if(&cell, woke))
                {
                    if let Some(owned) = cell.start_running() {
                        end(&cell, owned);
                        endings.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        };
        if let Some(owned) = cell.request_stop() {
            end(&cell, owned);
            endings.fetch_add(1, Ordering::SeqCst);
        }
        completer.join().unwrap();
        assert_eq!(endings.load(Ordering::SeqCst), 1);
        assert_eq!(cell.state(), ProcessState::Done);
    });
}

#[test]
fn shutdown_stop_racing_the_end_of_a_step_ends_the_process_exactly_once() {
    loom::model(|| {
        let cell = cell();
        let endings = Arc::new(AtomicUsize::new(0));
        let end = |owned: crate::runtime::cell::Owned<'_>| {
            let mut owned = owned;
            drop(owned.close_mailbox());
            owned.finish(Err(crate::error::ProcessError::Stopped));
        };
        let worker = {
            let (cell, endings) = (cell.clone(), endings.clone());
            loom::thread::spawn(move || {
                // The sweep may take it over before the worker pops it.
                let Some(owned) = cell.start_running() else {
                    return;
                };
                // The step's closing CAS: shutdown's flag, if set, keeps it RUNNING.
                let waiting = match owned.finish_step(Suspend::Message) {
                    Err(owned) => {
                        end(owned);
                        endings.fetch_add(1, Ordering::SeqCst);
                        false
                    }
                    Ok(requeue) => !requeue,
                };
                if waiting {
                    // The worker leaves its reference in the process.
                    std::mem::forget(cell);
                }
            })
        };
        // Shutdown's sweep: takes the process over unless it is mid-step.
        if let Some(owned) = cell.request_stop() {
            end(owned);
            endings.fetch_add(1, Ordering::SeqCst);
        }
        worker.join().unwrap();
        assert_eq!(endings.load(Ordering::SeqCst), 1, "ended exactly once");
        assert_eq!(cell.state(), ProcessState::Done);
    });
}

/// A message sent while its process ends is either in the mailbox when it closes
/// (the owner drops it with the other leftovers) or refused, so the sender gets it
/// back: never accepted into a mailbox nobody will read.
#[test]
fn a_message_racing_the_end_of_its_process_is_left_over_or_handed_back() {
    loom::model(|| {
        let cell = cell();
        let sender = {
            let cell = cell.clone();
            loom::thread::spawn(move || {
                cell.push_event(message())
                    .map(|woke| queue_if(&cell, woke))
                    .is_ok()
            })
        };
        let mut owned = cell.start_running().expect("READY");
        let leftovers = owned.close_mailbox().len();
        owned.finish(Ok(Payload::unit()));
        let accepted = sender.join().unwrap();
        assert_eq!(
            leftovers,
            usize::from(accepted),
            "an accepted message is a leftover; a refused one was handed back"
        );
        assert!(
            cell.push_event(message()).is_err(),
            "an ended process refuses events"
        );
    });
}
