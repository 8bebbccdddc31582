//! loom model of a registration racing the end of its process, on the real
//! scheduler (`Scheduler::builder().build()`, its worker on a loom thread): whatever
//! the registration answers, no name may be left behind for a process that has
//! ended. `names.rs` explains the protocol (the registration passes through the
//! process's mailbox lock after raising `Names::used`); without that pass the model
//! fails.

use std::time::Duration;

use crate::error::{RegisterError, SendErrorKind};
use crate::runtime::tests::UntilMessage;
use crate::Scheduler;

#[test]
fn a_registration_racing_the_end_of_its_process_leaves_no_name_behind() {
    loom::model(|| {
        let s = Scheduler::builder().workers(1).build().unwrap();
        let pid = s.spawn(UntilMessage, "run", ()).unwrap();
        let handle = s.handle();
        let registrar = loom::thread::spawn(move || handle.register("svc", pid));
        s.send(pid, ()).unwrap();
        s.wait(pid).unwrap();
        let registered = registrar.join().unwrap();
        match &registered {
            Ok(()) => {}
            Err(RegisterError::NotAlive {
                kind: SendErrorKind::Finished,
                ..
            }) => {}
            Err(other) => panic!("{other}"),
        }
        // The process is done: its name (if it got one) is free at once...
        assert_eq!(s.whereis("svc"), None);
        // ...and once every end has run to completion, nothing of it is left.
        s.shutdown(Duration::ZERO);
        let handle = s.handle();
        let names = &handle.shared().names();
        assert_eq!(
            (names.len(), names.holders()),
            (0, 0),
            "a name outlived its process (registration: {registered:?})"
        );
    });
}
