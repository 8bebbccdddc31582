//! What a listing shows of `#[process]` processes: the messages they took in and no
//! `recv!` asked for, and the yields they still wait for.

use std::time::{Duration, Instant};

use wsched::prelude::*;
use wsched::testing::TestProcess;
use wsched::{Command, ProcessInfo, ProcessState, Scheduler, SuspendKind, Tag};

/// Sums `n` numbers; anything else it is sent stays unreceived.
struct Summer;

#[process]
impl Summer {
    #[entry]
    fn sum(&mut self, n: u32) -> Result<u64, BoxError> {
        let mut sum = 0;
        for _ in 0..n {
            sum += recv!(u64)?;
        }
        Ok(sum)
    }
}

/// Lists `pid` until `condition` holds, or fails after 10 s.
fn listed_until(s: &Scheduler, pid: Pid, condition: impl Fn(&ProcessInfo) -> bool) -> ProcessInfo {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = s.processes().into_iter().find(|p| p.pid == pid);
        if let Some(info) = info.filter(|info| condition(info)) {
            return info;
        }
        assert!(Instant::now() < deadline, "timed out listing {pid}");
        std::thread::yield_now();
    }
}

fn summary(info: &ProcessInfo) -> Vec<(&'static str, usize)> {
    info.waiting_messages
        .iter()
        .map(|m| (m.type_name, m.count))
        .collect()
}

#[test]
fn messages_no_recv_asks_for_are_listed_while_the_process_lives() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let pid = s.spawn(Summer, "sum", (2_u32,)).unwrap();
    s.send(pid, "stray".to_string()).unwrap();
    let waiting = |info: &ProcessInfo| info.state == ProcessState::WaitingForMessage;
    let info = listed_until(&s, pid, |i| waiting(i) && i.mailbox == 1);
    assert_eq!(summary(&info), [("alloc::string::String", 1)]);

    // A number is received, the string stays; a second string joins it.
    s.send(pid, 1_u64).unwrap();
    s.send(pid, "another".to_string()).unwrap();
    let info = listed_until(&s, pid, |i| waiting(i) && i.mailbox == 2);
    assert_eq!(summary(&info), [("alloc::string::String", 2)]);

    s.send(pid, 2_u64).unwrap();
    assert_eq!(s.wait(pid).unwrap().downcast::<u64>().unwrap(), 3);
    assert!(s.processes().iter().all(|p| p.pid != pid));
}

/// Holds the strings it is sent until a number tells it how many to receive, then
/// waits for a last number holding nothing.
struct Hoarder;

#[process]
impl Hoarder {
    #[entry]
    fn run(&mut self) -> Result<u64, BoxError> {
        let n = recv!(u64)?;
        for _ in 0..n {
            recv!(String)?;
        }
        recv!(u64)?;
        Ok(n)
    }
}

#[test]
fn a_listing_empties_when_the_held_messages_are_received() {
    let s = Scheduler::builder().workers(2).build().unwrap();
    let pid = s.spawn(Hoarder, "run", ()).unwrap();
    s.send(pid, "one".to_string()).unwrap();
    s.send(pid, "two".to_string()).unwrap();
    let waiting = |info: &ProcessInfo| info.state == ProcessState::WaitingForMessage;
    let info = listed_until(&s, pid, |i| waiting(i) && i.mailbox == 2);
    assert_eq!(summary(&info), [("alloc::string::String", 2)]);

    // Both strings are received in the step the number comes in: the process waits
    // again, holding nothing, and the listing says so.
    s.send(pid, 2_u64).unwrap();
    let info = listed_until(&s, pid, |i| waiting(i) && i.mailbox == 0);
    assert_eq!(summary(&info), []);
    s.send(pid, 0_u64).unwrap();
    assert_eq!(s.wait(pid).unwrap().downcast::<u64>().unwrap(), 2);
}

/// Completed by the test.
struct Job;

impl Command for Job {
    type Output = u32;
}

struct Batch;

#[process]
impl Batch {
    #[entry]
    fn run(&mut self) -> Result<u32, BoxError> {
        let results = yield_all!((0..3).map(|_| Job));
        Ok(results.into_iter().map(Result::unwrap).sum())
    }
}

fn outstanding(t: &TestProcess) -> usize {
    match t.suspend_point().expect("suspended").kind {
        SuspendKind::Yield { count, .. } => count,
        other => panic!("not at a yield: {other:?}"),
    }
}

#[test]
fn a_yield_all_counts_its_outstanding_commands_down_in_order() {
    let mut t = TestProcess::start(Batch, "run", ()).unwrap();
    assert_eq!(outstanding(&t), 3);
    t.complete(Tag(1), 1_u32);
    assert_eq!(outstanding(&t), 2);
    // Out of order: counted once the earlier one is in.
    t.complete(Tag(3), 3_u32);
    assert_eq!(outstanding(&t), 2);
    t.complete(Tag(2), 2_u32);
    assert_eq!(t.result::<u32>(), 6);
}

/// Receives a `u32`, then spends its next step waiting on `release` (a stand-in for
/// a blocking call a process should not make).
struct Stuck {
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

#[process]
impl Stuck {
    #[entry]
    fn run(&mut self) -> Result<(), BoxError> {
        recv!(u32)?;
        self.release.lock().unwrap().recv()?;
        Ok(())
    }
}

#[test]
fn a_long_step_names_the_receive_it_resumed_from() {
    let (found_tx, found) = std::sync::mpsc::channel::<wsched::LongStep>();
    let found_tx = std::sync::Mutex::new(found_tx);
    let s = Scheduler::builder()
        .workers(2)
        .long_step_threshold(Duration::from_millis(20))
        .on_long_step(move |step| found_tx.lock().unwrap().send(step.clone()).unwrap())
        .build()
        .unwrap();
    let (release, released) = std::sync::mpsc::channel();
    let pid = s
        .spawn(
            Stuck {
                release: std::sync::Mutex::new(released),
            },
            "run",
            (),
        )
        .unwrap();
    // Its first step ends in the receive; the next one resumes from there.
    listed_until(&s, pid, |i| i.state == ProcessState::WaitingForMessage);
    s.send(pid, 7_u32).unwrap();
    // On a loaded machine its first step can be preempted past the threshold too,
    // and reported (from no suspension point); the step that resumed from the
    // receive is the one that must be.
    let step = loop {
        let step = found
            .recv_timeout(Duration::from_secs(20))
            .expect("reported");
        assert_eq!((step.pid, step.entry.as_str()), (pid, "run"));
        if step.resumed_from.is_some() {
            break step;
        }
        assert!(step.to_string().contains("in its first step"), "{step}");
    };
    let point = step.resumed_from.expect("it had waited in recv!");
    assert_eq!(
        point.kind,
        SuspendKind::Receive {
            message_type: Some("u32")
        }
    );
    assert!(point.location.file().ends_with("e2e_metrics.rs"), "{point}");
    release.send(()).unwrap();
    s.wait(pid).unwrap();
}

/// Every listing, `top` and the recorder name a process `Type::entry <pid>`: a
/// `#[process]` by its own struct (not the machine the macro wraps it in), the
/// runtime's processes by theirs.
#[test]
fn processes_are_labelled_by_their_struct_entry_and_pid() {
    use wsched::supervisor::{Strategy, Supervisor};
    let s = Scheduler::builder()
        .workers(2)
        .record(wsched::RecordOptions::new())
        .build()
        .unwrap();
    let summer = s.spawn(Summer, "sum", (1_u32,)).unwrap();
    let supervisor = s
        .spawn(Supervisor::new(Strategy::OneForOne), Supervisor::ENTRY, ())
        .unwrap();
    let inbox = s.inbox().unwrap();
    let info = listed_until(&s, summer, |i| i.state == ProcessState::WaitingForMessage);
    assert_eq!(info.process_type, std::any::type_name::<Summer>());
    assert_eq!(info.label(), format!("Summer::sum {summer}"));
    assert!(
        info.to_string()
            .starts_with(&format!("Summer::sum {summer} [waiting for a message]")),
        "{info}"
    );
    let info = listed_until(&s, supervisor, |_| true);
    assert_eq!(info.label(), format!("Supervisor::supervise {supervisor}"));
    let info = listed_until(&s, inbox.pid(), |_| true);
    assert_eq!(info.label(), format!("Inbox::inbox {}", inbox.pid()));

    let by = wsched::top::TopBy::Steps;
    let top = s.top(by, 10).unwrap();
    let line = top.iter().find(|p| p.pid == summer).unwrap().to_string();
    assert!(
        line.starts_with(&format!("Summer::sum {summer} [")),
        "{line}"
    );
    let window = wsched::top::rank_window(&[], s.processes(), by, 10).unwrap();
    let line = window.iter().find(|w| w.info.pid == summer).unwrap();
    assert!(
        line.to_string().starts_with(&format!(
            "Summer::sum {summer} [waiting for a message]: 1 step"
        )),
        "{line}"
    );

    let recording = s.recording().expect("the recorder is on");
    assert_eq!(
        recording.process_type(summer),
        Some(std::any::type_name::<Summer>())
    );
    assert_eq!(recording.label(summer), format!("Summer::sum {summer}"));
    assert_eq!(
        recording.label(supervisor),
        format!("Supervisor::supervise {supervisor}")
    );
    assert!(recording
        .to_terminal(40)
        .contains(&format!("= Summer::sum {summer}")));
    s.send(summer, 1_u64).unwrap();
    s.wait(summer).unwrap();
}
