//! loom models of monitors racing the end of their target, on the real scheduler
//! (`Scheduler::builder().build()`, its worker on a loom thread). `monitors.rs`
//! explains the protocol: setting a monitor passes through the target's mailbox lock
//! after raising `Monitors::used`, and the end sends its `Down`s under the table's
//! shard lock. Without the first the monitor model fails (a monitor recorded after
//! the end looked never fires); sending the `Down`s after releasing the shard lock
//! fails the demonitor model (a `demonitor` that finds nothing to stop returns before
//! the `Down` is there).

use std::time::Duration;

use crate::exit::ExitReason;
use crate::runtime::tests::UntilMessage;
use crate::Scheduler;

#[test]
fn a_monitor_racing_the_end_of_its_target_gets_exactly_one_down() {
    loom::model(|| {
        let s = Scheduler::builder().workers(1).build().unwrap();
        let pid = s.spawn(UntilMessage, "run", ()).unwrap();
        let handle = s.handle();
        let watcher = loom::thread::spawn(move || handle.monitor(pid));
        s.send(pid, ()).unwrap();
        s.wait(pid).unwrap();
        let monitor = watcher.join().unwrap();
        // Every end has run to completion: the Down is there (a second one would
        // have tripped `DownSlot::fill`), and nothing is left in the table.
        s.shutdown(Duration::ZERO);
        let down = monitor.try_down().expect("a monitor that never fired");
        assert!(matches!(
            down.reason,
            ExitReason::Normal | ExitReason::NoSuchProcess
        ));
        assert_eq!(s.handle().shared().monitors().entries(), 0);
    });
}

#[test]
fn demonitor_racing_the_end_either_stops_the_down_or_finds_it_sent() {
    loom::model(|| {
        let s = Scheduler::builder().workers(1).build().unwrap();
        let pid = s.spawn(UntilMessage, "run", ()).unwrap();
        let monitor = s.monitor(pid);
        let handle = s.handle();
        let demonitoring = loom::thread::spawn(move || {
            let stopped = handle
                .shared()
                .monitors()
                .demonitor(handle.shared(), monitor.reference());
            // Not stopped: the Down must be there already, not on its way.
            assert_eq!(stopped, monitor.try_down().is_none());
            (stopped, monitor)
        });
        s.send(pid, ()).unwrap();
        s.wait(pid).unwrap();
        let (stopped, monitor) = demonitoring.join().unwrap();
        s.shutdown(Duration::ZERO);
        assert_eq!(
            stopped,
            monitor.try_down().is_none(),
            "a Down after demonitor"
        );
        assert_eq!(s.handle().shared().monitors().entries(), 0);
    });
}
